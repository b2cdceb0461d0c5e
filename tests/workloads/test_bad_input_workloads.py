"""Bad workloads (audit F3, F9, F15, F19, F20): what `kvsim` says about a workload with no request, a
trace row wider than its header, a bad generator parameter and a trace that goes back in time.

The contract is test_hostile_inputs's: exit 2 and one ``Error:`` line naming the file, the key or
column, the value and what is allowed; never a traceback, never a silent answer (a table of NaN).
"""

from __future__ import annotations

import json
from dataclasses import fields
from pathlib import Path

import pytest

from simulator import planning, study
from simulator.errors import ConfigError
from simulator.scenario import SCENARIO_DIR, WorkloadSection, load_scenario
from tests.test_hostile_inputs import BASE, NATIVE_HEADER, edit, error, kvsim, outcome
from workloads import load_workload
from workloads.load import SCENARIO_DURATION_S, SCENARIO_KEYS

CHAT_SAMPLE = SCENARIO_DIR / "traces" / "chat-sample.csv"  # the shipped 656-request, 600 s trace
AZURE_HEADER = "TIMESTAMP,ContextTokens,GeneratedTokens"


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


@pytest.fixture
def no_simulation(monkeypatch: pytest.MonkeyPatch) -> None:
    """A simulation started fails the test: the errors below come before any."""

    def refuse(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("a simulation ran")

    monkeypatch.setattr(study, "run", refuse)
    monkeypatch.setattr(planning, "run", refuse)


# --- F3, F9: a workload with no request is an error, before any simulation ------------------------------
def test_a_header_only_trace_is_an_error_in_every_command(tmp_path: Path, no_simulation: None) -> None:
    empty = write(tmp_path / "empty.csv", NATIVE_HEADER + "\n")
    says = "empty.csv: the trace holds no request: it has no row after the header"
    # trace-replay has the break-even on: it crashed after the simulation (cannot convert float NaN to integer)
    for args in (("run", "trace-replay", "--trace", empty, "--out", tmp_path / "a"),
                 ("run", write(tmp_path / "s.toml", BASE), "--trace", empty, "--out", tmp_path / "b"),
                 ("capacity", "trace-replay", "--trace", empty),
                 ("workload", "describe", empty)):
        r = kvsim(*args)
        assert says in error(r, "empty.csv"), args
    r = kvsim("breakeven", "--workload", empty)
    assert says in error(r, "empty.csv")
    assert "Break-even" not in r.output  # refused before any table is printed


def test_a_trace_whose_rows_are_all_dropped_is_an_error(tmp_path: Path) -> None:
    azure = write(tmp_path / "az.csv", f"{AZURE_HEADER}\n2023-11-16 18:15:46.6805900,0,10\n"
                                       "2023-11-16 18:15:47.6805900,10,0\n")  # 0 tokens: dropped by rule
    line = error(kvsim("workload", "describe", azure), "az.csv")
    assert "az.csv: the trace holds no request: no row was kept (2 skipped" in line


def test_a_replay_window_past_the_trace_is_an_error(tmp_path: Path, no_simulation: None) -> None:
    p = write(tmp_path / "s.toml", edit("duration_s = 5", f"trace = '{CHAT_SAMPLE}'\nstart_s = 100000").replace(
        '[workload.spec]\nname = "chat-4k"\n', ""))
    line = error(kvsim("run", p, "--out", tmp_path / "out"), "s.toml")
    assert "chat-sample.csv: the replay keeps no request of the trace (start_s=100000)" in line
    assert "its 656 requests arrive from 3.25988 s to 598.642 s" in line
    with pytest.raises(ConfigError, match=r"s\.toml: \[workload\] chat-sample\.csv: the replay keeps no request"):
        load_scenario(p)  # when the scenario is read, not when its workload is run


@pytest.mark.parametrize(("old", "new", "says"), [
    ("duration_s = 5", "duration_s = 0.001", "drew no request in duration_s=0.001 s (seed 0)"),
    ('name = "chat-4k"', 'name = "chat-4k"\nmax_prompt_tokens = 2', "drew no request in duration_s=5 s (seed 0)"),
])
def test_a_generator_that_draws_nothing_is_an_error(tmp_path: Path, no_simulation: None, old: str, new: str,
                                                    says: str) -> None:
    p = write(tmp_path / "s.toml", edit(old, new))
    for args in (("run", p, "--out", tmp_path / "out"), ("capacity", p)):
        line = error(kvsim(*args), "s.toml")
        assert f"s.toml: workload.spec: the generator 'chat-4k' {says}" in line, args
    line = error(kvsim("workload", "describe", "chat-4k", "--duration-s", "0.001"), "chat-4k")
    assert "the generator 'chat-4k' drew no request in duration_s=0.001 s" in line


def test_an_empty_workload_stays_possible_for_the_library() -> None:
    w = load_workload("chat-4k", duration_s=0.001, allow_empty=True)
    assert w.requests() == [] and w.summary().n_requests == 0
    with pytest.raises(ConfigError, match=r"^workload: the generator 'chat-4k' drew no request"):
        load_workload("chat-4k", duration_s=0.001)


# --- F15: a CSV row wider than its header -------------------------------------------------------------
@pytest.mark.parametrize(("name", "text", "says"), [
    ("extra.csv", f"{NATIVE_HEADER}\n0,1.0,0,0,100,10,5,1:100,,x,extra,more\n",
     "extra.csv:2: the row has 12 fields, the header 10"),
    ("az.csv", f"{AZURE_HEADER}\n2023-11-16 18:15:46.6805900,10,4\n2023-11-16 18:15:47.6805900,10,4,9\n",
     "az.csv:3: the row has 4 fields, the header 3"),
])
def test_a_row_with_more_fields_than_the_header_is_an_error(tmp_path: Path, name: str, text: str,
                                                           says: str) -> None:
    trace = write(tmp_path / name, text)
    assert says in error(kvsim("workload", "describe", trace), name)
    p = write(tmp_path / "s.toml", BASE)
    assert says in error(kvsim("run", p, "--trace", trace, "--out", tmp_path / "out"), name)
    # --skip-bad-rows skips it and counts it, as any bad row
    r = kvsim("workload", "describe", trace, "--skip-bad-rows", "--json")
    assert outcome(r) is None or "no row was kept" in r.output
    if r.exit_code == 0:
        assert json.loads(r.stdout)[0]["skipped_rows"] == 1


# --- F19: generator errors name the key (and the file), when the spec is read -------------------------
def test_a_token_length_beyond_any_request_names_its_key_when_the_scenario_is_read(tmp_path: Path) -> None:
    p = write(tmp_path / "s.toml", edit('name = "chat-4k"', 'name = "chat-4k"\noutput_tokens = { mean = 1e300 }'))
    with pytest.raises(ConfigError, match=r"s\.toml: workload\.spec\.output_tokens: 'mean' and 'low' must be "
                                          r"at most 1,099,511,627,776 tokens unless 'high'"):
        load_scenario(p)
    assert "workload.spec.output_tokens" in error(kvsim("run", p, "--out", tmp_path / "out"), "s.toml")


def test_a_token_length_bounded_under_one_token_names_its_key(tmp_path: Path) -> None:
    """``high = 0.5`` clipped every draw under a token, then rounded it up to one: a length of 1 whatever
    the mean, accepted without a word."""
    spec = 'name = "chat-4k"\nuser_tokens = { mean = 70, high = 0.5 }'
    p = write(tmp_path / "s.toml", edit('name = "chat-4k"', spec))
    line = error(kvsim("run", p, "--out", tmp_path / "out"), "s.toml")
    assert "workload.spec.user_tokens.high: must be at least 1 token (got 0.5)" in line


def test_a_draw_in_the_far_tail_names_its_key() -> None:
    spec = {"name": "chat-4k", "output_tokens": {"mean": 1e12, "cv": 100}}  # a mean allowed, a tail that is not
    with pytest.raises(ConfigError, match=r"^workload\.output_tokens: LogNormal\(mean=1e\+12, cv=100\): drew "
                                          r".* tokens, over 1\.1e\+12; bound the draws with 'high'$"):
        load_workload(spec, duration_s=600)
    with pytest.raises(ConfigError, match=r"^workload\.spec\.output_tokens: LogNormal"):
        load_workload(spec, duration_s=600, table="workload.spec")


def test_describe_names_the_toml_file_and_its_key(tmp_path: Path) -> None:
    f = write(tmp_path / "w.toml", '[workload]\nname = "chat-4k"\nsessions = 3\n')
    line = error(kvsim("workload", "describe", f), "w.toml")
    assert f"{f}: workload.sessions: must be a table with 'kind'" in line
    f = write(tmp_path / "w.toml", "[workload]\nduration_s = 3\n")  # neither a generator nor a scenario's table
    line = error(kvsim("workload", "describe", f), "w.toml")
    assert f"{f}: workload: 'name' is required: [workload] is a generator table" in line
    assert "[workload.spec]" in line


def test_describe_reads_a_scenario_style_workload_table(tmp_path: Path) -> None:
    f = write(tmp_path / "w.toml", '[workload]\nduration_s = 30\nrate_scale = 2\n[workload.spec]\nname = "chat-4k"\n')
    r = kvsim("workload", "describe", f, "--json")
    assert outcome(r) is None
    want = load_workload("chat-4k", duration_s=30, rate_scale=2).summary().n_requests
    assert json.loads(r.stdout)[0]["n_requests"] == want > 0
    f = write(tmp_path / "t.toml", f"[workload]\ntrace = '{CHAT_SAMPLE}'\nduration_s = 60\n")
    r = kvsim("workload", "describe", f, "--json")
    assert outcome(r) is None
    assert json.loads(r.stdout)[0]["n_requests"] == len(load_workload(CHAT_SAMPLE, duration_s=60).requests())
    f = write(tmp_path / "w.toml", '[workload]\nduration_s = 30\nfoo = 1\n[workload.spec]\nname = "chat-4k"\n')
    line = error(kvsim("workload", "describe", f), "w.toml")
    assert f"{f}: workload.foo: unknown key in a scenario's [workload]" in line
    f = write(tmp_path / "w.toml", '[workload]\n[workload.spec]\nname = "chat-4k"\nfoo = 1\n')
    assert f"{f}: workload.spec.foo: unknown key" in error(kvsim("workload", "describe", f), "w.toml")


# --- F20: a trace going back in time names the format's own arrival column ------------------------------
@pytest.mark.parametrize(("name", "text", "says"), [
    ("k.csv", f"{NATIVE_HEADER}\n0,1.0,0,0,100,10,5,1:100,,x\n1,0.5,0,0,100,10,6,1:100,,x\n",
     "k.csv:3: 'arrival_s' must be >= the previous row's (this row arrives at 0.5 s, the previous one at 1.0 s)"),
    ("a.csv", f"{AZURE_HEADER}\n2023-11-16 18:15:46.0,10,4\n2023-11-16 18:15:48.0,10,4\n2023-11-16 18:15:47.0,10,4\n",
     "a.csv:4: 'TIMESTAMP' must be >= the previous row's (this row arrives at 1.0 s, the previous one at 2.0 s)"),
    ("m.jsonl", '{"timestamp": 0, "input_length": 10, "output_length": 1}\n'
                '{"timestamp": 2000, "input_length": 10, "output_length": 1}\n'
                '{"timestamp": 1000, "input_length": 10, "output_length": 1}\n',
     "m.jsonl:3: 'timestamp' must be >= the previous row's (this row arrives at 1.0 s"),
    ("b.csv", "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n0,M,10,4,14,x\n2,M,10,4,14,x\n"
              "1,M,10,4,14,x\n",
     "b.csv:4: 'Timestamp' must be >= the previous row's (this row arrives at 1.0 s"),
])
def test_time_going_back_names_the_column_the_file_has(tmp_path: Path, name: str, text: str, says: str) -> None:
    assert says in error(kvsim("workload", "describe", write(tmp_path / name, text)), name)


def test_the_scenario_keys_describe_reads_are_the_scenarios() -> None:
    assert set(SCENARIO_KEYS) == {f.name for f in fields(WorkloadSection)}
    assert WorkloadSection().duration_s == SCENARIO_DURATION_S


def test_a_table_in_an_error_reads_as_toml_and_a_mixture_lists_its_keys() -> None:
    """helper-124: ``output_tokens = {mean = 500, cv = -1}`` was echoed as Python's ``{'mean': 500, 'cv': -1}``,
    and a mixture's unknown key listed ``components`` but not ``name``."""
    with pytest.raises(ConfigError, match=r"output_tokens: must be a whole number of tokens, .* \(got "
                                          r"\{mean = 500, cv = -1\}\)$"):
        load_workload({"name": "synthetic", "output_tokens": {"mean": 500, "cv": -1}}, seed=0, duration_s=10,
                      name="w")
    with pytest.raises(ConfigError, match=r"duration: unknown key \(valid: name, components\)"):
        load_workload({"name": "mixture", "duration": 5, "components": [{"name": "chat-4k"}]}, seed=0,
                      duration_s=10, name="w")


def test_a_workload_files_request_limit_names_the_file(tmp_path: Path) -> None:
    """helper-128: 'workload 'chat-4k' over 600 s: expects 1.8e+12 requests ...' named neither the file nor where."""
    f = tmp_path / "huge.toml"
    f.write_text('[workload]\nname = "chat-4k"\nsessions = {kind = "poisson", rate_per_s = 1e9}\n')
    with pytest.raises(ConfigError, match=r"huge.toml: workload 'chat-4k' over 600 s: expects 1.8e\+12 requests, over "
                                          r"kvsim's limit"):
        load_workload(f)


@pytest.mark.parametrize("cell", ["²", "5²", "①", "+-5", "--5", "-+3"])
def test_trace_count_with_a_digit_int_cannot_read_is_one_line_helper_191(tmp_path, cell):
    # "²" is a digit to str.isdigit, not to int(): the reader's as_int raised ValueError (a traceback); so did two
    # signs, which it stripped all before its test (helper-192: int("+-5"))
    trace = tmp_path / "t.csv"
    trace.write_text(f"{NATIVE_HEADER}\n0,3.25,0,0,{cell},277,1,11:504;12:37,1;2,chat-4k\n", encoding="utf-8")
    line = error(kvsim("workload", "describe", trace), "prompt_tokens")
    assert "an integer >= " in line and cell in line

