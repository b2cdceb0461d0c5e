"""The third audit's workload findings: a mixture by name alone, prefix reuse of traces that carry
no prefix ids, and the notebooks' and `Result.write`'s words against what they show and do."""

import json
import math
import re
import tomllib
from pathlib import Path

import nbformat
import pytest
from click.testing import CliRunner

from simulator.cli.workload import workload
from simulator.engine.result import Result
from simulator.errors import ConfigError
from workloads import load_workload
from workloads.generators import GENERATORS

REPO = Path(__file__).resolve().parents[2]
AZURE = ("TIMESTAMP,ContextTokens,GeneratedTokens\n"
         "2023-11-16 18:15:46.6805900,374,44\n"
         "2023-11-16 18:15:50.0000000,374,109\n"
         "2023-11-16 18:16:01.5000000,879,4\n")
BURSTGPT = ("Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
            "0,ChatGPT,100,20,120,Conversation log\n"
            "5,ChatGPT,100,30,130,Conversation log\n")
NO_PREFIX_IDS = "carries no prefix ids"


def _one_line_error(output: str) -> str:
    assert "Traceback" not in output
    assert output.startswith("Error: ") and output.count("\n") == 1, output
    return output


# --- 1. mixture: no defaults, so no spec by name alone -------------------------------------------

@pytest.mark.parametrize("args", [["describe", "mixture"], ["generate", "mixture", "--out", "m.csv"]])
def test_mixture_by_name_says_it_needs_components_and_how(args: list[str], tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    r = CliRunner().invoke(workload, args)
    assert r.exit_code == 2
    out = _one_line_error(r.output)
    assert "'mixture' does not run by name alone (chat-4k, code-repo-128k, synthetic do)" in out
    assert 'name = "mixture", components = [{name = "chat-4k", weight = 0.7}' in out and "README" in out
    assert "…" not in out  # whole: not cut at the error's length limit
    assert not (tmp_path / "m.csv").exists()


def test_load_workload_mixture_by_name_is_the_same_error() -> None:
    with pytest.raises(ConfigError,
                       match=r"^load_workload: spec: 'mixture' does not run by name alone .* components = \["):
        load_workload("mixture")


def test_the_example_the_mixture_error_gives_runs(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as e:
        load_workload("mixture")
    example = re.search(r"(\[workload\] name = .*\]) \(README", str(e.value))
    assert example is not None
    spec = tmp_path / "mix.toml"
    spec.write_text(example.group(1).replace("[workload] ", "[workload]\n").replace(", components", "\ncomponents"))
    assert tomllib.loads(spec.read_text())["workload"]["name"] == "mixture"
    r = CliRunner().invoke(workload, ["describe", str(spec), "--duration-s", "60", "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)[0]["n_requests"] > 0


def test_a_mixture_table_without_components_names_the_file_and_the_key(tmp_path: Path) -> None:
    spec = tmp_path / "m.toml"
    spec.write_text('[workload]\nname = "mixture"\n')
    r = CliRunner().invoke(workload, ["describe", str(spec)])
    assert r.exit_code == 2
    out = _one_line_error(r.output)
    assert out.startswith(f"Error: {spec}: workload: 'components' is required: a mixture needs its components")
    spec.write_text('[workload]\nname = "mixture"\ncomponents = []\n')  # the wrong type keeps its own message
    r = CliRunner().invoke(workload, ["describe", str(spec)])
    assert r.exit_code == 2 and "'components' must be a non-empty list of tables (got [])" in r.output


def test_generators_by_name_and_the_unknown_spec_error() -> None:
    from workloads.generators import by_name

    assert by_name() == ["chat-4k", "code-repo-128k", "synthetic"]
    assert set(GENERATORS) - set(by_name()) == {"mixture"}
    r = CliRunner().invoke(workload, ["describe", "no-such"])
    assert r.exit_code == 2
    out = _one_line_error(r.output)
    assert out.startswith("Error: SPEC: must be a generator name (chat-4k, code-repo-128k, synthetic)")
    assert "(as mixture needs)" in out and "(got 'no-such')" in out


def test_readme_lists_the_generators_that_run_by_name_and_synthetic() -> None:
    from workloads.generators import by_name

    readme = (REPO / "README.md").read_text()
    names = re.search(r"`SPEC` is a generator name that runs alone \(([^)]*)\)", readme)
    assert names is not None
    assert [n.strip(" `") for n in names.group(1).split(",")] == by_name()
    assert "`synthetic` is benchmark traffic" in readme
    assert 'a `mixture` needs one: `name = "mixture"`, `components = [' in readme


# --- 3. describe: prefix reuse unknown for formats with no prefix ids ----------------------------

@pytest.mark.parametrize(("name", "text", "fmt"), [("azure.csv", AZURE, "azure"), ("burst.csv", BURSTGPT, "burstgpt")])
def test_describe_a_trace_without_prefix_ids_says_reuse_is_unknown(tmp_path: Path, name: str, text: str,
                                                                   fmt: str) -> None:
    trace = tmp_path / name
    trace.write_text(text)
    r = CliRunner().invoke(workload, ["describe", str(trace)])
    assert r.exit_code == 0 and "Traceback" not in r.output, r.output
    figures = dict(line.split(None, 1) for line in r.output.splitlines()[1:] if not line.startswith("note:"))
    assert figures["prefix_hit_share"].strip() == "NaN"  # not 0.0: the same 374-token prompts might share
    assert all(figures[f"reuse_gap_s.{k}"].strip() == "NaN" for k in ("mean", "p50", "p90", "p99"))
    assert figures["n_reuses"].strip() == "None"
    [note] = [line for line in r.output.splitlines() if line.startswith("note:")]
    assert f"the {fmt} trace format {NO_PREFIX_IDS}" in note and "unknown, not zero" in note

    r = CliRunner().invoke(workload, ["describe", str(trace), "--json"])
    assert r.exit_code == 0, r.output
    [row] = json.loads(r.output)
    assert row["prefix_hit_share"] is None and row["n_reuses"] is None
    assert all(row[f"reuse_gap_{k}_s"] is None for k in ("mean", "p50", "p90", "p99"))
    assert row["prefix_note"] == note.removeprefix("note: ")
    assert row["n_requests"] == 2 + (fmt == "azure")  # the other figures stay


def test_prefix_note_survives_a_replay_window_and_the_api(tmp_path: Path) -> None:
    trace = tmp_path / "azure.csv"
    trace.write_text(AZURE)
    for w in (load_workload(trace), load_workload(trace, duration_s=10, time_scale=2), load_workload(trace,
                                                                                                    rate_scale=0.9)):
        s = w.summary()
        assert NO_PREFIX_IDS in s.prefix_note and NO_PREFIX_IDS in w.prefix_note
        assert math.isnan(s.prefix_hit_share) and math.isnan(s.reuse_gap_s.p50) and s.n_reuses is None
        assert "prefix_note" not in set(s.to_frame().metric)  # prose, printed under the table


def test_formats_with_prefix_information_keep_their_figures(tmp_path: Path) -> None:
    out = tmp_path / "chat.csv"
    r = CliRunner().invoke(workload, ["generate", "chat-4k", "--out", str(out), "--duration-s", "60"])
    assert r.exit_code == 0, r.output
    for spec in (str(out), "chat-4k"):
        r = CliRunner().invoke(workload, ["describe", spec, "--duration-s", "60", "--json"])
        [row] = json.loads(r.output)
        assert row["prefix_note"] is None and 0 < row["prefix_hit_share"] < 1 and row["n_reuses"] > 0
        r = CliRunner().invoke(workload, ["describe", spec, "--duration-s", "60"])
        assert "note:" not in r.output


# --- 2, 4. the notebooks' and Result.write's words -----------------------------------------------

def _cells(name: str) -> list[str]:
    return [c.source for c in nbformat.read(REPO / "notebooks" / name, as_version=4).cells]


def test_capacity_notebook_says_mla_holds_more_kv_per_gpu_and_asserts_it() -> None:
    cells = _cells("capacity_planning.ipynb")
    reading = next(c for c in cells if c.startswith("**Reading it (shipped `default`, the 60 s warm-up).**"))
    assert "holds less KV" not in reading
    assert "MLA retrofit holds *more* KV per GPU" in " ".join(reading.split())
    assert any('assert levers["KV util"]["MLA retrofit"] > base["KV util"]' in c for c in cells)


def test_trace_notebook_labels_both_axes_of_both_charts() -> None:
    [cell] = [c for c in _cells("bring_your_own_trace.ipynb") if "plot.hist" in c]
    assert 'ylabel="requests per second"' in cell
    assert 'right.set(xlabel="prompt tokens per request", ylabel="requests (log scale)")' in cell


def test_ttl_notebook_gives_the_pool_and_says_what_its_columns_are() -> None:
    cells = _cells("ttl_breakeven.ipynb")
    # the pool reaches the provider's prices through the report's own `deployment_costs` (its KV pool as simulated)
    assert any("costs = deployment_costs(result, profile)" in c for c in cells)
    assert any("`kv_pool_gb`" in c and "`kv_gb_hours_over_pool` is NaN" in " ".join(c.split()) for c in cells)


def test_result_write_docstring_says_parquet_only_with_pyarrow() -> None:
    doc = " ".join((Result.write.__doc__ or "").split())
    assert "the files are the same whichever" not in doc
    assert "are written as well only when pyarrow imports" in doc
    assert all(f in doc for f in ("requests.csv", "timeseries.csv", "summary.json", "requests.parquet"))


def test_the_report_of_an_azure_replay_says_prefix_reuse_is_unknown(tmp_path: Path) -> None:
    from simulator.cli import main

    trace = tmp_path / "azure.csv"
    trace.write_text(AZURE)
    r = CliRunner().invoke(main, ["run", "trace-replay", "--trace", str(trace), "--out", str(tmp_path / "rep")])
    assert r.exit_code == 0, r.output
    md = (tmp_path / "rep" / "summary.md").read_text()
    assert f"prefix reuse: the azure trace format {NO_PREFIX_IDS}" in md
    assert "0.0% of prompt tokens repeat" not in md and "nan%" not in md


@pytest.mark.parametrize("command", [["breakeven"], ["workload", "describe"], ["workload", "generate"]])
def test_helps_name_every_generator_that_runs_by_name(command):
    """helper-196: `kvsim breakeven --help` listed "(chat-4k, code-repo-128k)" for --workload, leaving out synthetic,
    which runs by name as the others do (`by_name`); every help naming them names all."""
    from click.testing import CliRunner

    from simulator.cli import main
    from workloads.generators import by_name

    text = " ".join(CliRunner().invoke(main, [*command, "--help"]).output.split())
    assert by_name() == ["chat-4k", "code-repo-128k", "synthetic"]
    assert f"({', '.join(by_name())})" in text
