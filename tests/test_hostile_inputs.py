"""Hostile inputs (issue 16): what a user who sets out to break kvsim gets back.

Every command is driven in-process (click's `CliRunner` on the ``kvsim`` group). The contract: exit
0 and a result, or exit 2 and one ``Error: ...`` line under 300 characters that names the file, key
or option it rejects (and what is allowed); never a traceback, never a silent wrong answer.

Part 1 is a regression test per example of the issue, with the message it must give. Part 2 feeds
random and mutated scenario files, traces and command-line arguments to every command family
(hypothesis; a fixed number of examples per family, no deadline: see conftest) so that `make test`
stays fast. `make bench` runs the same properties with `BENCH_SCALE` times the examples.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import pandas as pd
import pytest
from click.testing import CliRunner, Result
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simulator import limits
from simulator.cli import main
from simulator.cli.common import MANIFEST, one_line
from simulator.errors import MAX_MESSAGE_CHARS
from simulator.files import shown_path

MAX_LINE = 300
NATIVE_HEADER = ("id,arrival_s,session_id,turn,prompt_tokens,output_tokens,output_segment_id,segments,"
                 "cache_breakpoints,source")
BASE = """\
name = "hostile"
seed = 0
[model]
name = "Llama-3.1-8B"
[cluster]
hardware = ["8xH100"]
nodes = 1
tp = 1
[cache]
layout = "native"
strategy = "prefix"
[router]
name = "least-tokens"
[workload]
duration_s = 5
[workload.spec]
name = "chat-4k"
[slo]
ttft_p99_s = 2.0
tpot_p99_s = 0.1
[report]
capacity = false
collapse = false
breakeven = false
"""


def kvsim(*args: object) -> Result:
    """``kvsim ARGS`` in-process; the figures it drew are closed (a long session must not pile them up)."""
    try:
        return CliRunner().invoke(main, [str(a) for a in args])
    finally:
        plt.close("all")


def outcome(result: Result, *sources: str) -> str | None:
    """Assert the contract; return the error line (None on success).

    Exit 0, or exit 2 with exactly one ``Error:`` line, the last on stderr, under `MAX_LINE`
    characters and containing one of `sources` (the file, key, option or value it is about).
    """
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        import traceback

        raise AssertionError("".join(traceback.format_exception(*result.exc_info)))  # type: ignore[misc]
    assert "Traceback" not in result.output, result.output
    assert result.exit_code in (0, 2), result.output
    if result.exit_code == 0:
        return None
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("Error:")]
    assert len(errors) == 1 and lines[-1] == errors[0], result.stderr
    line = errors[0]
    assert len(line) < MAX_LINE, line
    if sources:  # a long path is named cut in the middle (`shown_path`): a long TMPDIR makes tmp_path one
        assert any(s and (s in line or shown_path(s) in line) for s in sources), (line, sources)
    return line


def error(result: Result, *sources: str) -> str:
    line = outcome(result, *sources)
    assert line is not None, f"accepted: {result.output}"
    return line


def scenario(tmp: Path, text: str = BASE, name: str = "s.toml", **replace: str) -> Path:
    for old, new in replace.items():
        assert old in text, old
        text = text.replace(old, new)
    p = tmp / name
    p.write_text(text)
    return p


def edit(old: str, new: str) -> str:
    assert old in BASE, old
    return BASE.replace(old, new)


# ---------------------------------------------------------------------------------------------------
# Part 1: the examples of issue 16, each with the answer it gets now
# ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("old", "new", "says"), [
    ("nodes = 1\n", "nodes = 1000000\n", "cluster.nodes: must be at most 4,096 (kvsim's fleet limit) (got 1000000)"),
    ("nodes = 1\n", f"nodes = {2**64}\n", f"at most 4,096 (kvsim's fleet limit) (got {2**64})"),
    ('name = "chat-4k"', 'name = "chat-4k"\nn_system_prompts = 1000000000000',
     "workload.spec.n_system_prompts: must be >= 1 and at most 100,000 (kvsim's limit) (got 1000000000000)"),
    ("duration_s = 5", "duration_s = 1e15", "workload.duration_s: must be at most 31,622,400 s (366 days"),
    ("duration_s = 5", "duration_s = 5\nrate_scale = 1e12",
     "expects 7.5e+12 requests, over kvsim's limit of 2,000,000 per workload"),  # 0.5/s · 1e12 · 5 s · 3 turns
    ('name = "chat-4k"', 'name = "chat-4k"\nsessions = {kind = "poisson", rate_per_s = 1e9}',
     "expects 1.5e+10 requests, over kvsim's limit of 2,000,000"),
])
def test_resource_limits_are_checked_before_anything_runs(tmp_path, old, new, says):
    p = scenario(tmp_path, edit(old, new))
    r = kvsim("run", p, "--out", tmp_path / "out")
    assert says in error(r, str(p))
    assert "simulating" not in r.stderr and not (tmp_path / "out").exists()


def test_a_trace_beyond_the_limits_stops_with_one_line(tmp_path, monkeypatch):
    trace = tmp_path / "t.jsonl"
    row = {"id": 0, "arrival_s": 0.0, "session_id": -1, "turn": 0, "prompt_tokens": 10, "output_tokens": 2,
           "output_segment_id": -1, "segments": "1:10", "cache_breakpoints": "", "source": "x"}
    trace.write_text("".join(json.dumps({**row, "id": i, "arrival_s": t}) + "\n" for i, t in enumerate((0, 1, 4e7))))
    assert "t.jsonl: a request at 40,000,000 s, after 31,622,400 s (366 days), beyond kvsim's limit" in error(
        kvsim("workload", "describe", trace), "t.jsonl")
    monkeypatch.setattr("workloads.workload.MAX_REQUESTS", 1)
    assert "t.jsonl: more than 1 requests, beyond kvsim's limit" in error(
        kvsim("workload", "describe", trace), "t.jsonl")


def write_trace(path: Path, duration_s: float) -> int:
    r = kvsim("workload", "generate", "chat-4k", "--duration-s", duration_s, "--out", path)
    assert r.exit_code == 0, r.output
    return int(r.output.split()[1])


def test_run_with_trace_replays_the_whole_trace(tmp_path):
    trace = tmp_path / "long.csv"
    n = write_trace(trace, 1500)  # longer than a scenario's default 600 s
    last = float(pd.read_csv(trace)["arrival_s"].max())
    assert last > 1200
    r = kvsim("run", scenario(tmp_path, edit("duration_s = 5\n", "")), "--trace", trace, "--out", tmp_path / "a")
    assert outcome(r) is None
    assert int(pd.read_csv(tmp_path / "a" / "headline.csv")["requests"].iloc[0]) == n
    assert r.stderr.splitlines()[0] == "scenario hostile"  # no description: not "scenario hostile: "
    # a duration the scenario states is the replay window
    r = kvsim("run", scenario(tmp_path, edit("duration_s = 5", "duration_s = 600")), "--trace", trace,
              "--out", tmp_path / "b")
    kept = int(pd.read_csv(tmp_path / "b" / "headline.csv")["requests"].iloc[0])
    assert kept == int((pd.read_csv(trace)["arrival_s"] < 600).sum()) < n


def test_a_long_value_click_refuses_is_cut_in_the_middle():
    """click quotes a refused value whole: `run --trace` with a 400-character path that does not exist made a
    359-character line (found by the bench's random arguments). The line keeps the option and the reason."""
    for args in (["run", "--trace", "x" * 400], ["capacity", "chat-4k-h100", "--" + "y" * 400]):
        r = kvsim(*args)
        assert r.exit_code == 2
        line = r.output.strip()
        assert line.count("\n") == 0 and line.startswith("Error: ") and len(line) < MAX_LINE and "…" in line
    assert line.startswith("Error: No such option '--yyy") and line.endswith("yyy'.")
    r = kvsim("run", "--trace", "x" * 400)
    assert r.output.startswith("Error: Invalid value for '--trace': File 'xxx") and r.output.strip().endswith(
        "xxx' does not exist.")
    # a short one is untouched
    assert kvsim("run", "--trace", "nope.csv").output.strip() == (
        "Error: Invalid value for '--trace': File 'nope.csv' does not exist.")


def test_compare_refuses_requests_beyond_the_models_context():
    r = kvsim("compare", "--model", "Llama-3-70B", "--workload", "code-repo-128k", "--strategy", "native",
              "--duration-s", "600")
    assert "compare: workload requests must fit Llama-3-70B's context of 8,192 tokens" in error(r, "context")


def test_a_trace_request_beyond_the_models_context_is_found_by_the_error(tmp_path):
    """Two rows of 200,000 prompt tokens among 60 (and one 0-token row before them, which the Azure rule
    drops, so that request ids count kept rows): the error names the trace, how many requests are over,
    the first's id and arrival, where it named only the scenario and the longest (helper-108)."""
    import datetime

    start = datetime.datetime(2024, 5, 10)
    rows = [f"{start + datetime.timedelta(seconds=i / 2):%Y-%m-%d %H:%M:%S.%f},"
            f"{200_000 if i in (17, 40) else 500},{0 if i == 3 else 100 + i}" for i in range(60)]
    trace = tmp_path / "big.csv"
    trace.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n" + "\n".join(rows) + "\n")
    line = error(kvsim("run", "trace-replay", "--trace", trace, "--out", tmp_path / "o"), "big.csv")
    assert line.endswith("(got 2 over it, the first request 16 of big.csv at 8.500 s: 200,117 prompt + output "
                         "tokens; the longest 200,140)")
    assert "workload requests must fit Llama-3.1-70B's context of 131,072 tokens" in line


NOT_UTF8 = b'name = "x"\n\xff\xfe\n'


@pytest.mark.parametrize(("args", "name"), [
    (["run", "{f}", "--out", "{tmp}/o"], "f.toml"),
    (["hardware", "--catalog", "{f}"], "f.toml"),
    (["models", "--catalog", "{f}"], "f.toml"),
    (["cost", "--hardware", "H100", "--model", "Llama-3.1-8B", "--batch", "1", "--context", "9", "--params", "{f}"],
     "f.toml"),
    (["breakeven", "--catalog", "{f}"], "f.toml"),
    (["calibrate", "{f}"], "f.csv"),
    (["calc", "--context", "9", "--model-config", "{f}"], "f.json"),
    (["breakeven", "--gaps", "{f}"], "f.txt"),
    (["workload", "describe", "{f}"], "f.csv"),
])
def test_files_that_are_not_utf8_are_named_in_one_line(tmp_path, args, name):
    f = tmp_path / name
    f.write_bytes(NOT_UTF8)
    line = error(kvsim(*[a.format(f=f, tmp=tmp_path) for a in args]), name)
    assert "not UTF-8" in line


@pytest.mark.parametrize(("layout", "says"), [
    ("gqa:nan", "layout 'gqa:nan': gqa:N's KV heads N must be an integer >= 1 (got 'nan')"),
    ("gqa:2.5", "layout 'gqa:2.5': gqa:N's KV heads N must be an integer >= 1 (got '2.5')"),
    ("cross-layer:1e-12", "layout 'cross-layer:1e-12': must keep at least one of Llama-3.1-70B's 80 layers, "
                          "a fraction >= 0.0125 (got 1e-12)"),
    ("cross-layer:nan", "needs a fraction of layers in (0, 1] (got 'nan')"),
    ("fp8+int4", "layout 'fp8+int4': 'int4' conflicts with 'fp8' (one dtype lever at most)"),
    ("mla+gqa:4", "'gqa:4' conflicts with 'mla' (one attention lever at most)"),
    ("compress:8.5", "layout 'compress:8.5': compress:w:r's ratio w must be an integer >= 2"),
])
def test_layout_values_are_refused_not_rounded_or_overridden(layout, says):
    assert says in error(kvsim("calc", "--context", "100", "--layout", layout), layout)


def test_native_is_the_layout_that_changes_nothing():
    """``native+mla`` is a base layout plus a lever, as the capacity notebook composes them: ``mla``, and the label
    says so (helper-120 read ``native+mha`` printing ``layout mha`` as the last lever winning)."""
    for text, label in [("native+mla", "mla"), ("mha+native", "mha"), ("native+fp8", "fp8"), ("native", "native")]:
        r = kvsim("calc", "--context", "100", "--layout", text, "--json")
        assert outcome(r) is None and json.loads(r.output)["layout"] == label


def test_layouts_a_lever_at_a_time_still_compose():
    r = kvsim("calc", "--context", "1000", "--layout", "gqa:4+fp8+cross-layer:0.5", "--json")
    assert outcome(r) is None
    assert json.loads(r.output)["bytes_per_token"] == 80 * 0.5 * 4 * 256 * 1  # L·f · kv heads · (d_k + d_v) · 1 B


@pytest.mark.parametrize(("spec", "says"), [
    ("user_tokens = inf", "workload.spec.user_tokens: must be a finite number (got inf)"),
    ('sessions = {kind = "poisson", rate_per_s = inf}', "workload.spec.sessions.rate_per_s: must be a finite number"),
    ("output_tokens = {mean = 100, low = -50, high = -10}",
     "workload.spec.output_tokens.low: must be >= 0 and finite (draws are positive)"),
    ("n_system_prompts = 2.5", "workload.spec.n_system_prompts: must be a whole number (got 2.5)"),
    ("mean_turns = nan", "workload.spec.mean_turns: must be a number (got nan)"),
])
def test_generator_tables_refuse_non_finite_and_negative_values(tmp_path, spec, says):
    p = scenario(tmp_path, edit('name = "chat-4k"', f'name = "chat-4k"\n{spec}'))
    assert says in error(kvsim("run", p, "--out", tmp_path / "o"), str(p))


@pytest.mark.parametrize(("content", "says"), [
    ("[1, 2]", "f.json: must be a JSON object of a Hugging Face config (got a list)"),
    (json.dumps({"num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 0, "vocab_size": 10,
                 "intermediate_size": 8}), "f.json: 'num_attention_heads' must be a positive integer (got 0)"),
    ("[" * 100_000 + "]" * 100_000, "f.json: not valid JSON (arrays or objects nested too deeply)"),
    ('{"text_config": 5}', "f.json: 'text_config' must be an object (got 5)"),
])
def test_model_configs_that_are_no_config(tmp_path, content, says):
    f = tmp_path / "f.json"
    f.write_text(content)
    assert says in error(kvsim("calc", "--context", "9", "--model-config", f), "f.json")


def test_deeply_nested_toml_and_endless_files(tmp_path):
    deep = scenario(tmp_path, "a = " + "[" * 100_000 + "]" * 100_000 + "\n", name="deep.toml")
    assert "deep.toml: not valid TOML (arrays or tables nested too deeply)" in error(
        kvsim("run", deep, "--out", tmp_path / "o"), "deep.toml")
    if Path("/dev/zero").exists():
        line = error(kvsim("hardware", "--catalog", "/dev/zero"), "/dev/zero")
        assert "larger than 64 MiB, kvsim's limit for an input file" in line


@pytest.mark.parametrize("row", ["5", "null", "[1, 2]"])
def test_native_jsonl_rows_that_are_not_objects(tmp_path, row):
    f = tmp_path / "t.jsonl"
    good = {"id": 0, "arrival_s": 0.0, "session_id": -1, "turn": 0, "prompt_tokens": 10, "output_tokens": 2,
            "output_segment_id": -1, "segments": "1:10", "cache_breakpoints": "", "source": "x"}
    f.write_text(json.dumps(good) + "\n" + row + "\n")
    line = error(kvsim("workload", "describe", f), "t.jsonl")
    assert f"t.jsonl:2: 'row' must be a JSON object with the request's keys (got {json.loads(row)!r})" in line


def test_capacity_with_an_slo_no_fleet_meets(tmp_path):
    p = scenario(tmp_path)
    line = error(kvsim("capacity", p, "--slo-ttft-p99-s", "1e-9"), "8xH100")
    assert "8xH100: no fleet of up to 256 nodes meets the SLOs (p99 TTFT <= 1e-09 s" in line
    r = kvsim("capacity", p, "--slo-ttft-p99-s", "nan")
    assert "--slo-ttft-p99-s: must be a finite number > 0 (got 'nan')" in error(r, "ttft")
    assert "node(s) ->" not in r.output  # refused before the search simulated anything


def test_capacity_of_one_token_answers_which_have_no_tpot(tmp_path):
    # found by the properties below: every answer one token long, so p99 TPOT is NaN (no decode step);
    # no fleet could "meet" it, and the search ran to 256 nodes
    p = scenario(tmp_path, edit('name = "chat-4k"', 'name = "chat-4k"\noutput_tokens = {mean = 0.5, high = 1}'))
    r = kvsim("capacity", p, "--json")
    assert outcome(r) is None
    [row] = json.loads(r.stdout)
    assert (row["nodes"], row["binding"]) == (1, "none (1 node suffices)") and row["tpot_p99_s"] is None  # null


def test_collapse_out_onto_a_file_and_no_hardware(tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    assert error(kvsim("collapse", "--out", f, "--hardware", "8xH100", "--layout", "native"), str(f))
    line = error(kvsim("collapse", "--out", tmp_path / "c", "--hardware", ","), "hardware")
    assert "--hardware: must name at least one node kind, comma-separated, e.g. 8xH100,8xB200 (got ',')" in line


def test_dollar_signs_in_names_are_drawn_as_written(tmp_path):
    p = scenario(tmp_path, name="cost $\\frac$.toml", **{'name = "hostile"': 'name = "a $\\\\frac$ b $x"'})
    r = kvsim("capacity", p, "--out", tmp_path / "cap")
    assert outcome(r) is None and (tmp_path / "cap" / "capacity.png").stat().st_size > 0
    spec = tmp_path / "wl $\\frac$.toml"
    spec.write_text('[workload]\nname = "chat-4k"\n')
    r = kvsim("compare", "--model", "Llama-3.1-8B", "--tp", "1", "--workload", spec, "--duration-s", "5",
              "--strategy", "native", "--out", tmp_path / "cmp")
    assert outcome(r) is None and (tmp_path / "cmp" / "compare.png").stat().st_size > 0


CAL_HEADER = "gpu, model, tp, phase, batch, new_tokens, context, measured_s, source\n"  # as the README writes it
CAL_ROWS = ("H100, Llama-3.1-8B, 1, decode, 1, 1, 1024, 0.008, me\n"
            "H100, Llama-3.1-8B, 1, decode, 8, 1, 1024, 0.009, me\n"
            "H100, Llama-3.1-8B, 1, prefill, 1, 1024, 0, 0.06, me\n")


@pytest.mark.parametrize(("text", "says"), [
    (CAL_HEADER + CAL_ROWS, None),
    (CAL_HEADER + "H100, Llama-3.1-8B, 1, decode, 1, 1, 1024, abc, me\n",
     "f.csv:2: 'measured_s' must be a finite number > 0 (got 'abc')"),
    (CAL_HEADER, "f.csv: no rows after the header"),
    (CAL_HEADER + "H100, Llama-3.1-8B, 1, decode, -4, 1, 1024, 0.01, me\n",
     "f.csv:2: 'batch' must be a whole number >= 1 (got -4)"),
    (CAL_HEADER + "H100, Llama-3.1-8B, 3, decode, 1, 1, 1024, 0.01, me\n",
     "f.csv:2: plan TP3 for Llama-3.1-8B: 'tp' must be a divisor of the 32 query heads (got 3)"),
])
def test_calibrate_reads_the_documented_header_and_checks_every_value(tmp_path, text, says):
    f = tmp_path / "f.csv"
    f.write_text(text)
    r = kvsim("calibrate", f)
    if says is None:
        assert outcome(r) is None and "fit MAPE" in r.output
    else:
        assert says in error(r, "f.csv")


@pytest.mark.parametrize(("old", "new", "says"), [
    ("[report]\n", "[report]\ncollapse_points = [0, 4096]\n", "report.collapse_points: must be context lengths in 1.."),
    ("[report]\n", "[report]\ncollapse_layouts = ['gqa:3']\n", "report.collapse_layouts: "),
    ('strategy = "prefix"', 'strategy = "prefix"\nparams = {dram = "yes"}',
     "cache.params.dram: must be true or false (got 'yes')"),
    ('strategy = "prefix"', 'strategy = "prefix"\nparams = {dram = true, dram_fraction = 2}',
     "cache.params.dram_fraction: must be in (0, 1]"),
    # a DRAM tier's share without the tier changed nothing, without a word (helper-151)
    ('strategy = "prefix"', 'strategy = "prefix"\nparams = {dram_fraction = 0.2}',
     "cache.params.dram_fraction: must be given with dram = true (the share of host DRAM its tier takes) (got 0.2)"),
    # all host DRAM to the tier left swap preemption none: every preemption recomputed, without a word (helper-197)
    ('strategy = "prefix"', 'strategy = "prefix"\nparams = {dram = true, dram_fraction = 1.0}\n[scheduler]\n'
     'preemption = "swap"', 'cache.params.dram_fraction: must be below 1 with scheduler.preemption = "swap" (1 gives '
     "the cache tier all host DRAM and leaves none to swap to: every preemption would recompute) (got 1.0)"),
    ('name = "least-tokens"', 'name = "prefix-affinity"\nparams = {max_imbalance_tokens = ">="}',
     "router.params.max_imbalance_tokens: must be an integer (got '>=')"),
    ('name = "least-tokens"', 'name = "least-tokens"\nparams = {nope = 1}',
     "router.params: unknown parameter 'nope'; router 'least-tokens' takes no parameters"),
    ("duration_s = 5", "duration_s = 5\nstart_s = 100",
     "workload.start_s: must be 0 for a generated workload (it shifts a trace replay) (got 100.0)"),
    ("duration_s = 5", "duration_s = 5\ntime_scale = 2", "workload.time_scale: must be 1 for a generated workload"),
    ("tp = 1\n", "tp = 1\nblock_tokens = 2147483648\n",
     "cluster.block_tokens must be small enough for the KV pool of 8xH100 TP1 to hold one block"),
])
def test_scenario_values_are_checked_before_the_run(tmp_path, old, new, says):
    text = edit(old, new).replace("collapse = false", "collapse = true") if "collapse_" in new else edit(old, new)
    p = scenario(tmp_path, text)
    r = kvsim("run", p, "--out", tmp_path / "o")
    assert says in error(r, str(p))
    assert "simulating" not in r.stderr


def test_an_unwritable_out_fails_before_the_run(tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    r = kvsim("run", scenario(tmp_path), "--out", f)
    assert f"--out {f}: exists and is not a folder" in error(r, str(f))
    assert "simulating" not in r.stderr
    r = kvsim("run", scenario(tmp_path), "--out", f / "below")
    assert error(r, str(f)) and "simulating" not in r.stderr


def test_fractional_segment_lengths_are_refused(tmp_path):
    csv = tmp_path / "t.csv"
    csv.write_text(NATIVE_HEADER + "\n0,0,0,0,10,5,1,1:4.5;2:5.5,,x\n")
    assert "t.csv:2: 'segments' must be" in error(kvsim("workload", "describe", csv), "t.csv")
    jsonl = tmp_path / "t.jsonl"
    jsonl.write_text(json.dumps({"id": 0, "arrival_s": 0, "session_id": 0, "turn": 0, "prompt_tokens": 10,
                                 "output_tokens": 5, "output_segment_id": 1, "segments": [[1, 4.5], [2, 5.5]],
                                 "cache_breakpoints": "", "source": "x"}) + "\n")
    assert "t.jsonl:1: 'segments' must be" in error(kvsim("workload", "describe", jsonl), "t.jsonl")


def test_cost_refuses_a_tp_the_heads_do_not_divide():
    r = kvsim("cost", "--hardware", "H100", "--model", "Llama-3.1-8B", "--batch", "1", "--context", "9", "--tp", "3")
    assert error(r, "tp") == "Error: --tp: plan TP3 for Llama-3.1-8B: must be a divisor of the 32 query heads (got 3)"


def test_errors_name_the_file_and_key_and_cut_long_values(tmp_path):
    p = scenario(tmp_path, edit('name = "least-tokens"', f'name = "{"x" * 100_000}"'))
    line = error(kvsim("run", p, "--out", tmp_path / "o"), str(p))
    assert "router.name: must be one of" in line and "(100,002 characters)" in line
    p = scenario(tmp_path, edit('name = "hostile"', 'name = "hostile"\n' + "y" * 100_000 + " = 1"))
    assert len(error(kvsim("run", p, "--out", tmp_path / "o"), str(p))) < MAX_LINE


def test_a_cut_line_keeps_the_value_given():
    """`one_line` cuts a long message before its closing "(got ...)", after the list's last whole item,
    so the value the user gave stays on the line; a value longer than half the line is cut with the rest."""
    path = "/tmp/" + "d" * 120 + "/s.toml"
    allowed = ", ".join(f"'router-{i}'" for i in range(12))
    message = f"{path}: router.name: must be one of [{allowed}] (got 'xx… (100,002 characters))"
    line = one_line(message)
    assert len(line) <= MAX_MESSAGE_CHARS < len(message)
    assert line.endswith(", … (got 'xx… (100,002 characters))") and line.startswith(path)
    head = line[:-len(" … (got 'xx… (100,002 characters))")]
    assert message.startswith(head) and head.endswith("',")  # after a whole item
    huge = one_line(f"bad value (got '{'y' * 400}')")
    assert len(huge) == MAX_MESSAGE_CHARS and huge.endswith("y…")
    assert one_line("short (got 1)") == "short (got 1)"
    # a value that itself holds " (got " is still quoted whole: the first one in the line's last half is the cut
    tricky = f"{path}: router.name: must be one of [{allowed}] (got 'rr (got 7')"
    assert one_line(tricky).endswith(", … (got 'rr (got 7')")
    # ... but one longer than half the line, quoted whole, shows its start, "…" and its end from its own
    # "(got" on (helper-107: the docstring had said it is never taken for the closing one)
    value = "a" * 260 + " (got 9)"
    line = one_line(f"breakeven: x must be a number (got {value!r})")
    assert line.startswith("breakeven: x must be a number (got 'aaa") and line.endswith("aa… (got 9)')")
    assert len(line) <= MAX_MESSAGE_CHARS
    # the tail kept is at most half the line: 145 characters kept, 146 cut with the rest
    for size, kept in ((145, True), (146, False)):
        tail = " (got '" + "v" * (size - 9) + "')"
        assert len(tail) == size
        assert one_line("w" * 400 + tail).endswith(tail) is kept


def test_a_binary_file_is_never_echoed():
    environ = Path("/proc/self/environ")
    if not environ.exists():
        pytest.skip("no /proc/self/environ here")
    for args in (["workload", "describe", environ], ["workload", "describe", environ, "--format", "kvsim"],
                 ["run", environ], ["calc", "--context", "9", "--model-config", environ]):
        line = error(kvsim(*args), "environ")
        assert "not a text file (it holds NUL bytes)" in line
        assert "PATH=" not in line and "=" not in line.split(":", 2)[-1]


def test_a_reused_out_folder_holds_no_stale_files(tmp_path):
    out = tmp_path / "out"
    two = scenario(tmp_path, edit('hardware = ["8xH100"]', 'hardware = ["8xH100", "8xH200"]'), name="two.toml")
    assert outcome(kvsim("run", two, "--out", out)) is None
    assert (out / "8xH200" / "summary.json").is_file()
    (out / "notes.txt").write_text("mine")  # a file of the user's
    assert outcome(kvsim("capacity", scenario(tmp_path), "--out", out)) is None  # another command's files
    assert outcome(kvsim("run", scenario(tmp_path), "--out", out)) is None
    assert not (out / "8xH200").exists()  # the first run's second fleet is gone
    assert (out / "8xH100" / "summary.json").is_file() and (out / "notes.txt").read_text() == "mine"
    assert (out / "capacity.csv").is_file()  # capacity's own output is kept
    assert {line.split("\t")[0] for line in (out / MANIFEST).read_text().splitlines()} == {"run", "capacity"}
    # a folder kvsim did not write keeps everything but what the command writes there
    inputs = tmp_path / "inputs"
    inputs.mkdir()
    (inputs / "thesis.tex").write_text("x")
    (inputs / "capacity.csv").write_text("an older kvsim's")
    assert outcome(kvsim("capacity", scenario(tmp_path), "--out", inputs)) is None
    assert (inputs / "thesis.tex").read_text() == "x" and "hardware" in (inputs / "capacity.csv").read_text()


def test_workload_generate_does_not_overwrite_without_force(tmp_path):
    out = tmp_path / "w.csv"
    assert outcome(kvsim("workload", "generate", "chat-4k", "--duration-s", "5", "--out", out)) is None
    out.write_text("precious")
    line = error(kvsim("workload", "generate", "chat-4k", "--duration-s", "5", "--out", out), str(out))
    assert line == f"Error: --out {out}: exists; pass --force to overwrite it"
    assert out.read_text() == "precious"
    assert outcome(kvsim("workload", "generate", "chat-4k", "--duration-s", "5", "--out", out, "--force")) is None
    assert out.read_text().startswith("id,arrival_s")


# ---------------------------------------------------------------------------------------------------
# Part 2: properties over random and mutated inputs
# ---------------------------------------------------------------------------------------------------
BENCH_SCALE = 10  # `make bench` runs this many times the examples of `make test`


def budget(n: int, scale: int = 1) -> Any:
    """A fixed budget of `n` examples (× `scale` under `make bench`); no deadline, no database noise."""
    return settings(max_examples=n * scale, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@contextmanager
def workdir() -> Iterator[Path]:
    """A fresh folder, also the working directory: whatever relative path a random argument names
    (an ``--out`` of ``8xH100``, the default ``report``) is written there, never into the checkout."""
    d = Path(tempfile.mkdtemp(prefix="kvsim-hostile-"))
    cwd = Path.cwd()
    os.chdir(d)
    try:
        yield d
    finally:
        os.chdir(cwd)
        shutil.rmtree(d, ignore_errors=True)


def toml_value(v: Any) -> str:
    """`v` as a TOML value (inline tables and arrays; floats ``inf``/``nan`` as TOML spells them)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf") if math.isinf(v) else repr(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, list):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    return "{" + ", ".join(f"{json.dumps(str(k))} = {toml_value(x)}" for k, x in v.items()) + "}"


def toml_dumps(doc: dict[str, Any]) -> str:
    scalars = [f"{json.dumps(k)} = {toml_value(v)}" for k, v in doc.items() if not isinstance(v, dict)]
    tables = [f"[{json.dumps(k)}]\n" + "".join(f"{json.dumps(str(kk))} = {toml_value(vv)}\n" for kk, vv in v.items())
              for k, v in doc.items() if isinstance(v, dict)]
    return "\n".join(scalars) + "\n" + "\n".join(tables)


def base_doc() -> dict[str, Any]:
    import tomllib

    return tomllib.loads(BASE)


HOSTILE = st.sampled_from([
    -1, 0, 1, 2, 3, 7, 2**31, 2**63, 2**64, -(2**70), 10**12, limits.MAX_NODES + 1,
    -1.5, 0.0, 0.5, 1e-12, 2.5, 1e15, 1e300, math.inf, -math.inf, math.nan,
    True, False, "", "x", "nan", "inf", "-1", "2.5", "yes", ">=", "$\\frac$", "a\u0000b", "x" * 5000,
    "native", "fp8+int4", "gqa:2.5", "cross-layer:1e-12", "prefix", "none", "full", "lru", "fifo", "mla",
    "chat-4k", "code-repo-128k", "mixture", "8xH100", "8xB200", "H100", "Llama-3-70B", "DeepSeek-V3",
    "5m", "1h", "10m", "anthropic", "openai", "/dev/zero", "/proc/self/environ", "missing.json", ".",
    [], [1, 2], [0], [4096, 0], ["8xH100", "8xH100"], ["native", "gqa:nan"], [[1]], ["5m", "1x"],
    {}, {"kind": "poisson", "rate_per_s": 1e9}, {"kind": "poisson", "rate_per_s": math.inf},
    {"kind": "weibull"}, {"kind": [1]}, {"mean": 10, "low": -5, "high": -1}, {"mean": math.inf},
    {"dram": "yes"}, {"eviction": 5}, {"max_imbalance_tokens": ">="}, {"name": "chat-4k", "weight": 0},
])
KEYS = [
    "name", "seed", "description", "model.name", "model.config", "model.weight_dtype", "cluster.hardware",
    "cluster.nodes", "cluster.tp", "cluster.pp", "cluster.ep", "cluster.dp_attention", "cluster.memory_utilization",
    "cluster.block_tokens", "cluster.catalog", "cache.layout", "cache.strategy", "cache.params",
    "cache.params.dram", "cache.params.eviction", "cache.params.dram_fraction", "scheduler.max_num_seqs",
    "scheduler.max_num_batched_tokens", "scheduler.watermark", "scheduler.preemption", "scheduler.queue_timeout_s",
    "scheduler.admission", "scheduler.reserve_output_tokens",
    "router.name", "router.params", "router.params.max_imbalance_tokens", "workload.duration_s",
    "workload.rate_scale", "workload.start_s", "workload.time_scale", "workload.trace", "workload.spec",
    "workload.spec.name", "workload.spec.n_system_prompts", "workload.spec.mean_turns", "workload.spec.user_tokens",
    "workload.spec.output_tokens", "workload.spec.sessions", "workload.spec.max_prompt_tokens",
    "workload.spec.components", "slo.ttft_p99_s", "slo.tpot_p99_s", "billing.profile", "billing.tier",
    "billing.ttls", "report.collapse_points", "report.collapse_layouts", "report.breakeven", "bogus", "cluster.bogus",
    "workload.spec.bogus",
]


def put(doc: dict[str, Any], key: str, value: Any) -> None:
    *heads, last = key.split(".")
    for h in heads:
        nxt = doc.get(h)
        if not isinstance(nxt, dict):
            nxt = doc[h] = {}
        doc = nxt
    if value is _DELETE:
        doc.pop(last, None)
    else:
        doc[last] = value


_DELETE = object()
EDITS = st.lists(st.tuples(st.sampled_from(KEYS), HOSTILE | st.just(_DELETE)), min_size=1, max_size=3)
CORRUPTIONS = st.sampled_from([None, None, None, b"\xff\xfe", b"\x00", b"[[[", b"= =", b'"', b"\n[model]\n"])


def mutated_scenario(tmp: Path, edits: list[tuple[str, Any]], corruption: bytes | None, cut: float) -> Path:
    doc = base_doc()
    for key, value in edits:
        put(doc, key, value)
    data = toml_dumps(doc).encode("utf-8", "surrogatepass")
    if corruption is not None:
        at = int(len(data) * cut)
        data = data[:at] + corruption + data[at:]
    p = tmp / "mutated.toml"
    p.write_bytes(data)
    return p


def check_scenario_command(edits: list[tuple[str, Any]], corruption: bytes | None, cut: float, command: str) -> None:
    with workdir() as tmp:
        p = mutated_scenario(tmp, edits, corruption, cut)
        args: list[object] = {
            "run": ["run", p, "--out", tmp / "out"],
            "compare": ["compare", p, "--strategy", "native,prefix+fp8"],
            "capacity": ["capacity", p, "--slo-tpot-p99-s", "0.2"],
        }[command]
        outcome(kvsim(*args), str(p), "mutated.toml")


SCENARIO_COMMANDS = ["run", "compare", "capacity"]
SCENARIO_ARGS = (EDITS, CORRUPTIONS, st.floats(0, 1))


@pytest.mark.parametrize("command", SCENARIO_COMMANDS)
@budget(40)
@given(*SCENARIO_ARGS)
def test_mutated_scenarios_get_a_result_or_one_line(command, edits, corruption, cut):
    check_scenario_command(edits, corruption, cut, command)


# --- traces ----------------------------------------------------------------------------------------
TRACES = {
    "t.csv": NATIVE_HEADER + "\n0,0.0,0,0,30,4,9,1:10;2:20,1;2,x\n1,0.5,0,1,44,3,8,1:10;2:20;9:4;3:10,1,x\n"
                             "2,1.25,-1,0,7,2,-1,5:7,,x\n",
    "t.jsonl": "".join(json.dumps(r) + "\n" for r in [
        {"id": 0, "arrival_s": 0.0, "session_id": 0, "turn": 0, "prompt_tokens": 30, "output_tokens": 4,
         "output_segment_id": 9, "segments": [[1, 10], [2, 20]], "cache_breakpoints": [1], "source": "x"},
        {"id": 1, "arrival_s": 2.0, "session_id": -1, "turn": 0, "prompt_tokens": 7, "output_tokens": 2,
         "output_segment_id": -1, "segments": "5:7", "cache_breakpoints": "", "source": "x"}]),
    "mooncake.jsonl": "".join(json.dumps(r) + "\n" for r in [
        {"timestamp": 0, "input_length": 1000, "output_length": 10, "hash_ids": [0, 1]},
        {"timestamp": 500, "input_length": 600, "output_length": 5, "hash_ids": [0, 2]}]),
    "azure.csv": "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,374,44\n"
                 "2023-11-16 18:15:50.9951690,396,109\n",
    "burstgpt.csv": "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n5,ChatGPT,472,18,490,"
                    "Conversation log\n45,ChatGPT,1087,0,1087,Conversation log\n",
}
CELL = st.sampled_from(["", "-1", "0", "1e308", "nan", "inf", "2.5", "abc", "1:0", "1:2.5;", "[1,2]", "null", "5",
                        "9" * 40, "$x$", '"', ",", "\u00e9", "1:10;2:20", "2023-13-45 99:99:99"])


def mutated_trace(tmp: Path, name: str, edits: list[tuple[int, int, str]], corruption: bytes | None,
                  cut: float) -> Path:
    lines = TRACES[name].splitlines()
    for row, col, value in edits:
        i = row % len(lines)
        if name.endswith(".jsonl"):
            try:
                obj = json.loads(lines[i])
                key = sorted(obj)[col % len(obj)]
                obj[key] = json.loads(value) if value in ("null", "5", "[1,2]") else value
                lines[i] = json.dumps(obj)
            except (ValueError, TypeError, IndexError):
                lines[i] = value
        else:
            cells = lines[i].split(",")
            cells[col % len(cells)] = value
            lines[i] = ",".join(cells)
    data = ("\n".join(lines) + "\n").encode()
    if corruption is not None:
        at = int(len(data) * cut)
        data = data[:at] + corruption + data[at:]
    p = tmp / name
    p.write_bytes(data)
    return p


TRACE_COMMANDS = ["describe", "describe --skip-bad-rows", "describe --format kvsim",
                  "describe --format mooncake --json", "run --trace", "breakeven --workload"]
TRACE_ARGS = (st.sampled_from(sorted(TRACES)),
              st.lists(st.tuples(st.integers(0, 9), st.integers(0, 12), CELL), max_size=3),
              CORRUPTIONS, st.floats(0, 1))


def check_trace_command(name: str, edits: list[tuple[int, int, str]], corruption: bytes | None, cut: float,
                        how: str) -> None:
    with workdir() as tmp:
        p = mutated_trace(tmp, name, edits, corruption, cut)
        verb, *opts = how.split()
        if verb == "describe":
            args: list[object] = ["workload", "describe", p, *opts]
        elif verb == "run":
            args = ["run", scenario(tmp), "--trace", p, "--out", tmp / "out"]
        else:
            args = ["breakeven", "--workload", p]
        outcome(kvsim(*args), p.name, str(p))


@pytest.mark.parametrize("how", TRACE_COMMANDS)
@budget(40)
@given(*TRACE_ARGS)
def test_mutated_traces_get_a_result_or_one_line(how, name, edits, corruption, cut):
    check_trace_command(name, edits, corruption, cut, how)


# --- command-line arguments ------------------------------------------------------------------------
NUMBER = st.sampled_from(["-1", "0", "1", "2", "3", "8", "16", "2.5", "nan", "inf", "-inf", "1e9", "1e-9", "1e308",
                          str(2**64), "abc", "", "9" * 30])
WORD = st.sampled_from(["", ",", ",,", "native", "fp8+int4", "gqa:nan", "gqa:2.5", "cross-layer:1e-12", "mla",
                        "8xH100", "8xH100,", "H100", "8xB200", "nope", "Llama-3.1-8B", "Llama-3-70B", "DeepSeek-V3",
                        "chat-4k", "code-repo-128k", "native,nope", "tp8,dp8", "tp3", "+pp2", "$\\frac$", "x" * 300,
                        "anthropic", "openai", "5m,1h", "10m", "lognorm:s=1.2,scale=60", "expon:scale=nan",
                        "norm:loc=-5", "streaming-llm:abc", "h2o:0.5", "prefix+dram", "/dev/zero",
                        "/proc/self/environ", "missing.csv", "."])
VALUE = NUMBER | WORD

COMMANDS: dict[str, tuple[list[str], dict[str, Any]]] = {
    # command words, then option -> value strategy (each example picks some options)
    "calc": (["calc", "--context", "100"], {"--model": WORD, "--layout": WORD, "--kv-dtype": WORD,
                                           "--context": NUMBER, "--batch": NUMBER, "--block-tokens": NUMBER}),
    "fit": (["fit", "--context", "1000"], {"--hardware": WORD, "--model": WORD, "--layout": WORD,
                                         "--context": NUMBER, "--batch": NUMBER, "--tp": NUMBER, "--pp": NUMBER,
                                         "--ep": NUMBER, "--memory-utilization": NUMBER, "--block-tokens": NUMBER,
                                         "--catalog": WORD}),
    "cost": (["cost", "--hardware", "H100", "--model", "Llama-3.1-8B", "--batch", "4", "--context", "100"],
             {"--hardware": WORD, "--model": WORD, "--tp": NUMBER, "--pp": NUMBER, "--ep": NUMBER,
              "--layout": WORD, "--batch": NUMBER, "--context": NUMBER, "--prompt": NUMBER, "--params": WORD}),
    "collapse": (["collapse", "--hardware", "8xH100", "--layout", "native"],
                 {"--hardware": WORD, "--model": WORD, "--layout": WORD, "--tp": NUMBER, "--plan": WORD,
                  "--catalog": WORD}),
    "breakeven": (["breakeven"], {"--profile": WORD, "--tier": WORD, "--catalog": WORD, "--ttl": WORD,
                                  "--prefix-tokens": NUMBER, "--rate": VALUE, "--gaps": WORD,
                                  "--seed": NUMBER, "--duration-s": NUMBER, "--write-latency-s": NUMBER}),
    "describe": (["workload", "describe", "chat-4k", "--duration-s", "5"],
                 {"--seed": NUMBER, "--duration-s": NUMBER, "--format": WORD}),
    "compare": (["compare", "--model", "Llama-3.1-8B", "--tp", "1", "--workload", "chat-4k", "--duration-s", "5",
                 "--strategy", "native"],
                {"--hardware": WORD, "--model": WORD, "--duration-s": NUMBER, "--rate-scale": NUMBER,
                 "--nodes": NUMBER, "--tp": NUMBER, "--strategy": WORD, "--seed": NUMBER}),
    "capacity": (["capacity", "{base}"], {"--slo-ttft-p99-s": NUMBER, "--slo-tpot-p99-s": NUMBER, "--hardware": WORD,
                                          "--seed": NUMBER}),
    "run": (["run", "{base}", "--out", "{tmp}/out"], {"--seed": NUMBER, "--trace": WORD, "--out": WORD}),
    "calibrate": (["calibrate", "{cal}"], {"--free": WORD, "--params": WORD}),
    "sweep": (["sweep", "{base}", "--workers", "1", "--out", "{tmp}/sweep"],
              {"--grid": st.sampled_from(["cluster.nodes=1,2", "cluster.nodes=0", "workload.duration_s=nan",
                                          "cache.layout=fp8+int4", "nope=1", "cluster.nodes=", "=",
                                          "workload.rate_scale=1e12", "seed=-1"]),
               "--plot": WORD}),
    "models": (["models"], {"--catalog": WORD}),
    "hardware": (["hardware"], {"--catalog": WORD}),
}


@st.composite
def command_line(draw: Any, family: str) -> list[str]:
    words, options = COMMANDS[family]
    args = list(words)
    for opt in draw(st.lists(st.sampled_from(sorted(options)), max_size=3, unique=True)):
        args += [opt, draw(options[opt])]
    return args


def _number(text: str) -> str:
    """A numeric argument as a message prints it (``1e-9`` -> ``1e-09``)."""
    try:
        return f"{float(text):g}"
    except ValueError:
        return text


def check_command_line(args: list[str]) -> None:
    with workdir() as tmp:
        base = scenario(tmp)
        cal = tmp / "cal.csv"
        cal.write_text(CAL_HEADER + CAL_ROWS)
        args = [a.format(base=base, tmp=tmp, cal=cal) if "{" in a and "}" in a and "=" not in a else a
                for a in args]
        sources = [*args, *(Path(a).name for a in args), *(str(Path(a)) for a in args), *(a.lstrip("-") for a in args),
                   *(a[:50] for a in args), *(_number(a) for a in args),
                   *(part for a in args for part in re.split(r"[,+]", a) if len(part) > 1), *map(repr, args)]
        outcome(kvsim(*args), *sources, "kvsim", str(base), "hostile")


@pytest.mark.parametrize("family", sorted(COMMANDS))
@budget(40)
@given(data=st.data())
def test_every_command_with_random_arguments(family, data):
    check_command_line(data.draw(command_line(family)))


# --- the longer profile: `make bench` --------------------------------------------------------------
@pytest.mark.bench
@pytest.mark.parametrize("command", SCENARIO_COMMANDS)
@budget(40, BENCH_SCALE)
@given(*SCENARIO_ARGS)
def test_bench_mutated_scenarios(command, edits, corruption, cut):
    check_scenario_command(edits, corruption, cut, command)


@pytest.mark.bench
@pytest.mark.parametrize("how", TRACE_COMMANDS)
@budget(40, BENCH_SCALE)
@given(*TRACE_ARGS)
def test_bench_mutated_traces(how, name, edits, corruption, cut):
    check_trace_command(name, edits, corruption, cut, how)


@pytest.mark.bench
@pytest.mark.parametrize("family", sorted(COMMANDS))
@budget(40, BENCH_SCALE)
@given(data=st.data())
def test_bench_every_command_with_random_arguments(family, data):
    check_command_line(data.draw(command_line(family)))


@pytest.mark.parametrize(("tier", "key"), [("dram", "host_dram_bytes"), ("nvme", "nvme_bytes")])
def test_an_offload_tier_on_a_node_with_no_room_for_it_is_refused(tmp_path, tier, key):
    """helper-127: a dram (or nvme) tier on a catalog node with host_dram_bytes = 0 (nvme_bytes = 0) ran as the
    prefix cache alone, exit 0, without a word."""
    cat = tmp_path / "c.toml"
    cat.write_text('[node.8xH100d]\ngpu = "H100"\ngpus = 8\nhost_dram_bytes = 0\nnvme_bytes = 0\n'
                   'nvme_bytes_per_s = 25e9\nnic_bytes_per_s = 50e9\nnic_latency_s = 5e-6\nnvlink_domain_gpus = 8\n'
                   'source = "test"\n')
    p = tmp_path / "s.toml"
    p.write_text(BASE.replace('hardware = ["8xH100"]', 'hardware = ["8xH100d"]\ncatalog = "c.toml"')
                 .replace('strategy = "prefix"', f'strategy = "prefix"\nparams = {{{tier} = true}}'))
    line = error(kvsim("run", p, "--out", tmp_path / "o"), str(p))
    assert f"s.toml: cache.params.{tier}: node 8xH100d has no room for a {tier} tier ({key} = 0 in its catalog)" in line
