"""`kvsim workload describe|generate` via CliRunner, and figures on the shared public traces."""

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from simulator.cli.workload import workload
from workloads.traces import read_trace
from workloads.traces._rows import SKIP_HINT

# ../shared/data/traces relative to the repo root (this file is tests/workloads/<file>, so parents[2])
TRACES = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "traces"
needs_traces = pytest.mark.skipif(not TRACES.is_dir(), reason=f"shared traces absent ({TRACES})")


def test_generate_then_describe_round_trip(tmp_path: Path) -> None:
    out = tmp_path / "chat.csv"
    args = ["generate", "chat-4k", "--out", str(out), "--seed", "2", "--duration-s", "120"]
    r = CliRunner().invoke(workload, args)
    assert r.exit_code == 0, r.output
    n = len(read_trace(out).requests())
    assert r.output.strip() == f"wrote {n} requests to {out}"
    r = CliRunner().invoke(workload, ["describe", str(out), "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)[0]["n_requests"] == n
    r = CliRunner().invoke(workload, ["describe", "chat-4k", "--seed", "2", "--duration-s", "120"])
    assert r.exit_code == 0 and f"n_requests {n}" in " ".join(r.output.split())


def test_generate_from_toml(tmp_path: Path) -> None:
    spec = tmp_path / "s.toml"
    spec.write_text('[workload]\nname = "code-repo-128k"\nn_teams = 2\n')
    out = tmp_path / "code.jsonl"
    r = CliRunner().invoke(workload, ["generate", str(spec), "--out", str(out), "--duration-s", "600"])
    assert r.exit_code == 0, r.output
    reqs = read_trace(out).requests()
    assert len({r.segments[0] for r in reqs}) <= 2 + 1  # 2 repositories (a commit may add one)


def test_config_errors_exit_2_with_one_line(tmp_path: Path) -> None:
    r = CliRunner().invoke(workload, ["describe", "no-such"])
    assert r.exit_code == 2
    assert r.output.startswith("Error: SPEC: must be a generator name")
    assert r.output.count("\n") == 1
    bad = tmp_path / "azure.csv"
    bad.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,abc,4\n")
    r = CliRunner().invoke(workload, ["describe", str(bad)])
    assert r.exit_code == 2
    assert r.output == f"Error: azure.csv:2: 'ContextTokens' must be an integer >= 0 (got 'abc'); {SKIP_HINT}\n"
    with bad.open("a") as f:  # and a good row: a trace whose every row is skipped is an error of its own
        f.write("2023-11-16 18:15:47.6805900,10,4\n")
    r = CliRunner().invoke(workload, ["describe", str(bad), "--skip-bad-rows", "--json"])
    assert r.exit_code == 0 and json.loads(r.output)[0]["skipped_rows"] == 1


@needs_traces
def test_describe_mooncake_synthetic_figures() -> None:
    r = CliRunner().invoke(workload, ["describe", str(TRACES / "mooncake-synthetic.jsonl"), "--json"])
    assert r.exit_code == 0, r.output
    [s] = json.loads(r.output)
    assert s["n_requests"] == 3993
    assert s["prefix_hit_share"] == pytest.approx(0.651, abs=0.0005)
    assert s["prompt_tokens_mean"] == pytest.approx(15_325, abs=1)
    assert s["prompt_tokens_p99"] == pytest.approx(66_456, abs=1)
    assert s["output_tokens_mean"] == pytest.approx(149, abs=0.5)


@needs_traces
def test_describe_azure_figures() -> None:
    r = CliRunner().invoke(workload, ["describe", str(TRACES / "azure-2023-conv.csv"), "--json"])
    assert r.exit_code == 0, r.output
    [s] = json.loads(r.output)
    assert s["n_requests"] == 19_366
    assert s["prompt_tokens_mean"] == pytest.approx(1155, abs=0.5)
    assert s["prompt_tokens_p50"] == 1020
    assert s["prompt_tokens_p99"] == 4142
    assert s["output_tokens_mean"] == pytest.approx(211, abs=0.5)
    assert s["output_tokens_p50"] == 129
    s = read_trace(TRACES / "azure-2023-code.csv").summary()
    figures = (s.n_requests, s.prompt_tokens.p50, s.prompt_tokens.p99, s.output_tokens.p50)
    assert figures == (8819, 1469, 7436, 13)
    assert s.prompt_tokens.mean == pytest.approx(2048, abs=0.5)


@pytest.mark.parametrize(("toml", "msg"), [
    ('user_tokens = {mean = "abc"}', "workload.user_tokens.mean: must be a number (got 'abc')"),
    ('sessions = {kind = "poisson", rate_per_s = "x"}', "workload.sessions.rate_per_s: must be a number (got 'x')"),
    ('n_system_prompts = "4"', "workload.n_system_prompts: must be a number (got '4')"),
])
def test_wrong_types_in_a_workload_table_are_one_line_errors(tmp_path: Path, toml: str, msg: str) -> None:
    f = tmp_path / "w.toml"
    f.write_text(f'[workload]\nname = "chat-4k"\n{toml}\n')
    r = CliRunner().invoke(workload, ["describe", str(f)])
    assert r.exit_code == 2 and r.output == f"Error: {f}: {msg}\n"  # the file, then the key


def test_unwritable_out_and_infinite_duration_are_one_line_errors(tmp_path: Path) -> None:
    r = CliRunner().invoke(workload, ["generate", "chat-4k", "--out", str(tmp_path / "no" / "dir" / "x.csv"),
                                      "--duration-s", "5"])
    assert r.exit_code == 2 and r.output.count("\n") == 1 and "--out" in r.output and "does not exist" in r.output
    r = CliRunner().invoke(workload, ["describe", "chat-4k", "--duration-s", "inf"])
    assert r.exit_code == 2 and r.output == "Error: --duration-s: must be a finite number > 0 (got 'inf')\n"


def test_generate_writes_what_the_suffix_says(tmp_path: Path) -> None:
    from workloads import load_workload
    from workloads.traces.native import COLUMNS

    expected = load_workload("chat-4k", seed=3, duration_s=60).requests()
    for name, fmt in (("a.csv", "csv"), ("b.jsonl", "jsonl"), ("c.CSV", "csv"), ("d.JSONL", "jsonl")):
        out = tmp_path / name
        r = CliRunner().invoke(workload, ["generate", "chat-4k", "--out", str(out), "--seed", "3",
                                          "--duration-s", "60"])
        assert r.exit_code == 0, r.output
        first = out.read_text().splitlines()[0]
        if fmt == "csv":
            assert first == ",".join(COLUMNS)
        else:
            assert list(json.loads(first)) == list(COLUMNS)
        assert read_trace(out).requests() == expected  # and it reads back, request for request


@pytest.mark.parametrize(("name", "suffix"), [("x.parquet", "'.parquet'"), ("x.csv.gz", "'.gz'"),
                                              ("x", "'no suffix'"), ("x.json", "'.json'")])
def test_generate_refuses_a_suffix_it_does_not_write(tmp_path: Path, name: str, suffix: str) -> None:
    out = tmp_path / name
    r = CliRunner().invoke(workload, ["generate", "chat-4k", "--out", str(out), "--duration-s", "5"])
    assert r.exit_code == 2 and not out.exists()
    assert r.output == (f"Error: --out '{out}': must end in .csv or .jsonl (kvsim's request formats, which it "
                        f"reads back; got {suffix})\n")


def test_generate_refuses_a_name_that_is_a_suffix_alone(tmp_path: Path) -> None:
    """helper-150: `--out .csv` said "got 'no suffix'" of a name that reads as one (a hidden file, to pathlib)."""
    out = tmp_path / ".csv"
    r = CliRunner().invoke(workload, ["generate", "chat-4k", "--out", str(out), "--duration-s", "5"])
    assert r.exit_code == 2 and not out.exists()
    assert r.output == (f"Error: --out '{out}': needs a name before its suffix, e.g. 'requests.csv' (a name that is "
                        "the suffix alone has none)\n")


def test_write_workload_refuses_an_unknown_suffix_before_writing(tmp_path: Path) -> None:
    from simulator.errors import ConfigError
    from workloads import load_workload, write_workload

    out = tmp_path / "x.parquet"
    with pytest.raises(ConfigError, match=r"^write_workload '.*x\.parquet': must end in \.csv or \.jsonl"):
        write_workload(load_workload("chat-4k", duration_s=5), out)
    assert not out.exists()


def test_describe_json_is_one_record_like_every_table(tmp_path: Path) -> None:
    """Two requests: the second re-reads the first's 100-token segment 2 s later and adds 50.
    Hand-worked: rate 2 / 2 s = 1 /s; prompt mean (100 + 150) / 2 = 125; prefix hit share
    100 / 250 = 0.4; one reuse of chain [1] with a gap of 2 s; output mean (10 + 20) / 2 = 15."""
    trace = tmp_path / "two.csv"
    trace.write_text("id,arrival_s,session_id,turn,prompt_tokens,output_tokens,output_segment_id,segments,"
                     "cache_breakpoints,source\n0,0.0,0,0,100,10,99,1:100,,t\n1,2.0,1,0,150,20,98,1:100;2:50,,t\n")
    r = CliRunner().invoke(workload, ["describe", str(trace), "--json"])
    assert r.exit_code == 0, r.output

    def strict(constant: str) -> None:
        raise AssertionError(f"{constant} is not JSON")

    doc = json.loads(r.stdout, parse_constant=strict)
    assert isinstance(doc, list) and len(doc) == 1
    [row] = doc
    assert all(key.replace("_", "").isalnum() and key == key.lower() for key in row)  # snake_case
    assert (row["n_requests"], row["n_sessions"], row["n_reuses"], row["skipped_rows"]) == (2, 2, 1, 0)
    assert all(type(row[k]) is int for k in ("n_requests", "n_sessions", "n_reuses", "skipped_rows"))
    assert (row["duration_s"], row["rate_per_s"], row["prompt_tokens_mean"], row["output_tokens_mean"]) == (
        2.0, 1.0, 125.0, 15.0)
    assert row["prefix_hit_share"] == pytest.approx(0.4)
    assert row["reuse_gap_mean_s"] == row["reuse_gap_p99_s"] == 2.0
    # a window of one request (an empty one is an error: test_bad_input_workloads): the figures that have
    # no observation, its reuse gaps, are null, not NaN
    r = CliRunner().invoke(workload, ["describe", str(trace), "--duration-s", "1", "--json"])
    [one] = json.loads(r.stdout, parse_constant=strict)
    assert one["n_requests"] == 1 and one["prompt_tokens_p50"] == 100 and one["reuse_gap_p50_s"] is None


def test_a_long_path_is_named_whole_in_the_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A path past 80 characters (a deep project or temp folder) is named whole, as every reader names its
    file (`simulator.files.shown_path`), not cut to a value's 80 characters: the user must see which file.
    (Relative, so that its length is the test's, not the temp folder's.)"""
    monkeypatch.chdir(tmp_path)
    deep = Path("workloads-of-the-fourth-quarter" * 3, "x.parquet")
    assert len(str(deep)) == 103
    r = CliRunner().invoke(workload, ["generate", "chat-4k", "--out", str(deep), "--duration-s", "5"])
    assert r.exit_code == 2 and f"--out '{deep}': must end in .csv or .jsonl" in r.output
    from simulator.errors import ConfigError
    from workloads import read_trace

    with pytest.raises(ConfigError) as exc:
        read_trace(deep)
    assert str(exc.value) == f"read_trace: 'path' must be an existing file (got '{deep}')"


def test_describe_says_a_window_that_cuts_the_trace(tmp_path: Path) -> None:
    """The summary of a trace cut by a window covers only the rows before it: said on stderr, naming what set
    the window, as `kvsim run` says it (stdout, the table or JSON, unchanged)."""
    trace = tmp_path / "t.csv"
    trace.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n" + "".join(
        f"2023-11-16 18:15:{s:02d}.000000,100,10\n" for s in (0, 4, 8, 30)))
    r = CliRunner().invoke(workload, ["describe", str(trace), "--duration-s", "10", "--json"])
    assert r.exit_code == 0 and json.loads(r.stdout)[0]["n_requests"] == 3
    assert r.stderr == ("warning: workload: the trace cut at 10 s of replay (--duration-s; its later rows not "
                        "replayed)\n")
    scenario = tmp_path / "s.toml"
    scenario.write_text('[workload]\ntrace = "t.csv"\nduration_s = 20\n')
    r = CliRunner().invoke(workload, ["describe", str(scenario)])
    assert r.exit_code == 0 and "(workload.duration_s; its later rows not replayed)" in r.stderr
    r = CliRunner().invoke(workload, ["describe", str(trace)])
    assert r.exit_code == 0 and r.stderr == ""


def test_generate_from_a_trace_says_the_rows_it_left_out(tmp_path: Path) -> None:
    """helper-112: converting a trace wrote "wrote 3 requests" and nothing of the 0-token row it dropped (or of a
    window's cut); `run` and `describe` said it."""
    trace = tmp_path / "az.csv"
    trace.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n" + "".join(
        f"2023-11-16 18:15:{s:02d}.000000,100,{out}\n" for s, out in ((0, 10), (4, 0), (8, 10), (30, 10))))
    r = CliRunner().invoke(workload, ["generate", str(trace), "--out", str(tmp_path / "a.jsonl"), "--duration-s", "20"])
    assert r.exit_code == 0 and r.stdout == f"wrote 2 requests to {tmp_path / 'a.jsonl'}\n"
    assert r.stderr.splitlines()[:2] == [
        "warning: workload: 1 trace row skipped (malformed, with skip_bad_rows or --skip-bad-rows, or dropped by the "
        "format's rule: a failed request, 0 tokens; under a scenario's skip_bad_rows, longer than its model's context)",
        "warning: workload: the trace cut at 20 s of replay (--duration-s; its later rows not replayed)"]
    assert r.stderr.splitlines()[2].startswith("warning: the azure trace format carries no prefix ids")  # helper-128


def test_generate_from_a_trace_with_no_prefix_ids_warns_that_unknown_reuse_will_read_as_none(tmp_path: Path) -> None:
    """helper-128: an Azure trace written in kvsim's format read back as prefix_hit_share 0, where read directly
    it is unknown (NaN, with a note), without a word at generate."""
    trace = tmp_path / "az.csv"
    trace.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n" + "".join(
        f"2023-11-16 18:15:{i:02d}.0,{2000 + i},{50 + i}\n" for i in range(5)))
    out = tmp_path / "az.jsonl"
    r = CliRunner().invoke(workload, ["generate", str(trace), "--out", str(out)])
    assert r.exit_code == 0, r.output
    assert ("warning: the azure trace format carries no prefix ids" in r.stderr
            and "az.jsonl holds each prompt as its own segment, so it reads back as no reuse" in r.stderr)
    r = CliRunner().invoke(workload, ["generate", "chat-4k", "--duration-s", "20", "--out", str(tmp_path / "c.jsonl")])
    assert r.exit_code == 0 and "warning" not in r.stderr


def test_a_scenarios_workload_is_drawn_with_its_own_seed_as_kvsim_run_draws_it(tmp_path: Path) -> None:
    """Without --seed, `describe` and `generate` of a scenario file draw with its top-level ``seed``, the requests
    `kvsim run` simulates (`Scenario.load_workload`); they drew seed 0's whatever the file said."""
    from simulator.scenario import load_scenario
    from workloads.load import load_workload

    scenario = tmp_path / "s.toml"
    scenario.write_text('name = "s"\nseed = 3\n[workload]\nduration_s = 60\n[workload.spec]\nname = "chat-4k"\n')
    run = load_scenario(scenario).load_workload().requests()
    assert run == load_workload("chat-4k", seed=3, duration_s=60).requests() != load_workload(
        "chat-4k", seed=0, duration_s=60).requests()
    out = tmp_path / "w.jsonl"
    r = CliRunner().invoke(workload, ["generate", str(scenario), "--out", str(out)])
    assert r.exit_code == 0 and read_trace(out).requests() == run
    r = CliRunner().invoke(workload, ["describe", str(scenario), "--json"])
    assert json.loads(r.output)[0]["n_requests"] == len(run)
    r = CliRunner().invoke(workload, ["describe", str(scenario), "--seed", "0", "--json"])  # --seed still decides
    assert json.loads(r.output)[0]["n_requests"] == len(load_workload("chat-4k", seed=0, duration_s=60).requests())
    # kvsim compare --workload of the file draws it too, and runs the engine at that seed (it drew seed 0's)
    from simulator.cli import main

    r = CliRunner().invoke(main, ["compare", "--workload", str(scenario), "--strategy", "native", "--duration-s", "20",
                                  "--model", "Llama-3.1-8B", "--json"])
    assert r.exit_code == 0, r.output
    drawn = len(load_workload("chat-4k", seed=3, duration_s=20).requests())
    assert json.loads(r.stdout)[0]["completed"] == drawn == 11  # (seed 0 draws 5)
    scenario.write_text('seed = 2.5\n[workload]\nduration_s = 60\n[workload.spec]\nname = "chat-4k"\n')
    r = CliRunner().invoke(workload, ["describe", str(scenario)])
    assert r.exit_code == 2 and r.output == f"Error: {scenario}: seed: must be an integer >= 0 (got 2.5)\n"
