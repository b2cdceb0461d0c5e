"""One name per idea across commands (`simulator.cli.options`): the spellings ``--help`` shows, the
older ones still accepted, ``--hardware`` a node everywhere, one default model, and the options a
command gained so that it reads like the others (``--catalog``, ``--trace``, ``--seed``)."""

import json

import click
import pandas as pd
import pytest
from click.testing import CliRunner

from simulator.cli import COMMANDS, main
from simulator.models import DEFAULT_MODEL
from simulator.scenario import ModelSection

# every command's options, as --help lists them
COMMAND_PATHS = [[name] for name in COMMANDS if name != "workload"] + [["workload", "describe"],
                                                                        ["workload", "generate"]]
OLD = {"--duration": "--duration-s", "--layouts": "--layout", "--plans": "--plan", "--strategies": "--strategy",
       "--profiles": "--catalog", "--slo-ttft-p99": "--slo-ttft-p99-s", "--slo-tpot-p99": "--slo-tpot-p99-s",
       "--dtype": "--weight-dtype"}

CAPACITY_SCENARIO = """\
name = "cap"
[model]
name = "Llama-3.1-8B"
[cluster]
hardware = ["8xH100"]
tp = 8
[workload]
duration_s = 60
[workload.spec]
name = "chat-4k"
"""
TRACE = ("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,1000,20\n"
         "2023-11-16 18:15:47.0000000,2000,30\n2023-11-16 18:15:49.5000000,500,10\n")


def command(path: list[str]) -> click.Command:
    ctx = click.Context(main)
    cmd = main.get_command(ctx, path[0])
    assert cmd is not None
    if len(path) > 1:
        assert isinstance(cmd, click.Group)
        cmd = cmd.get_command(ctx, path[1])
        assert cmd is not None
    return cmd


def help_options(path: list[str]) -> set[str]:
    """The option names ``kvsim PATH --help`` shows."""
    out = CliRunner().invoke(main, [*path, "--help"]).output
    return {word.rstrip(",") for line in out.splitlines() for word in line.split() if word.startswith("--")}


def invoke(*args: object) -> str:
    """``kvsim ARGS``'s stdout (notes and progress go to stderr)."""
    r = CliRunner().invoke(main, [str(a) for a in args])
    assert r.exit_code == 0, r.output
    return r.stdout


def no_nan(text: str) -> object:
    """JSON as a strict reader takes it: NaN and Infinity are not JSON."""
    def refuse(constant: str) -> None:
        raise AssertionError(f"{constant} in JSON output")

    return json.loads(text, parse_constant=refuse)


@pytest.mark.parametrize("path", COMMAND_PATHS, ids=" ".join)
def test_help_shows_one_spelling_per_idea(path):
    shown = help_options(path)
    assert not shown & set(OLD), f"old spellings in `kvsim {' '.join(path)} --help`: {shown & set(OLD)}"


def test_the_renamed_options_are_where_they_belong():
    assert "--duration-s" in help_options(["capacity"]) & help_options(["compare"]) & help_options(["breakeven"]) \
        & help_options(["workload", "describe"]) & help_options(["workload", "generate"])
    assert {"--layout", "--plan"} <= help_options(["collapse"])
    assert "--strategy" in help_options(["compare"])
    assert {"--slo-ttft-p99-s", "--slo-tpot-p99-s", "--trace", "--seed"} <= help_options(["capacity"])
    assert "--seed" in help_options(["sweep"])
    for path in (["cost"], ["compare"], ["fit"], ["collapse"], ["hardware"], ["breakeven"]):
        assert "--catalog" in help_options(path), path


def test_old_spellings_still_work_and_mean_the_same():
    new = invoke("workload", "describe", "chat-4k", "--duration-s", "60", "--json")
    assert invoke("workload", "describe", "chat-4k", "--duration", "60", "--json") == new
    assert json.loads(new)[0]["n_requests"] == 27  # 60 s of chat-4k at seed 0
    new = invoke("cost", "--hardware", "1xH100", "--model", "Llama-3.1-8B", "--batch", "1", "--context", "64",
                 "--weight-dtype", "fp8", "--json")
    old = invoke("cost", "--hardware", "1xH100", "--model", "Llama-3.1-8B", "--batch", "1", "--context", "64",
                 "--dtype", "fp8", "--json")
    assert old == new and json.loads(new)["weight_dtype"] == "fp8"


def test_collapse_layout_and_plan_take_comma_lists_old_names_too(tmp_path):
    args = ["collapse", "--hardware", "8xH100", "--model", "Llama-3.1-8B", "--json"]
    new = no_nan(invoke(*args, "--layout", "native,fp8", "--plan", "tp8,tp4", "--out", tmp_path / "a"))
    old = no_nan(invoke(*args, "--layouts", "native,fp8", "--plans", "tp8,tp4", "--out", tmp_path / "b"))
    assert new == old
    assert isinstance(new, list)
    assert {(r["plan"], r["layout"]) for r in new} == {("TP8", "native"), ("TP8", "fp8"), ("TP4", "native"),
                                                        ("TP4", "fp8")}


def test_a_bad_duration_is_one_line_naming_the_option():
    r = CliRunner().invoke(main, ["workload", "describe", "chat-4k", "--duration", "nan"])
    assert r.exit_code == 2 and r.output == "Error: --duration-s: must be a finite number > 0 (got 'nan')\n"
    r = CliRunner().invoke(main, ["compare", "--strategy", "native", "--duration-s", "-5"])
    assert r.exit_code == 2 and r.output == "Error: --duration-s: must be a finite number > 0 (got '-5')\n"


def test_one_default_model_everywhere():
    assert DEFAULT_MODEL == "Llama-3.1-70B" and ModelSection().name == DEFAULT_MODEL
    defaults = {name: next(p.default for p in command([name]).params if p.name == "model_name")
                for name in ("calc", "fit", "collapse", "cost", "compare")}
    assert defaults == dict.fromkeys(defaults, DEFAULT_MODEL)
    assert json.loads(invoke("calc", "--context", "1000", "--json"))["model"] == "Llama-3.1-70B"


def test_hardware_is_a_node_in_cost_as_elsewhere():
    """A node names the GPU and the default plan: TP over all its GPUs (8 on 8xH100, 1 on 1xH100), as
    in `fit`; a GPU name alone is its largest node (H100 = 8xH100)."""
    one = json.loads(invoke("cost", "--hardware", "1xH100", "--model", "Llama-3.1-8B", "--batch", "1",
                            "--context", "1024", "--json"))
    assert (one["hardware"], one["gpu"], one["tp"], one["plan"]) == ("1xH100", "H100", 1, "TP1")
    eight = json.loads(invoke("cost", "--hardware", "H100", "--model", "Llama-3.1-8B", "--batch", "1",
                              "--context", "1024", "--json"))
    assert (eight["hardware"], eight["gpu"], eight["tp"], eight["plan"]) == ("8xH100", "H100", 8, "TP8")
    # the README's example: 1024 tokens of Llama-3.1-8B on one H100 prefill in 20.92 ms
    assert round(one["prefill_s"] * 1e3, 2) == 20.92
    fit = json.loads(invoke("fit", "--hardware", "H100", "--model", "Llama-3.1-8B", "--context", "1024", "--json"))
    assert (fit["hardware"], fit["tp"]) == ("8xH100", 8)


def test_cost_and_compare_take_a_hardware_catalog(tmp_path):
    cat = tmp_path / "mine.toml"
    cat.write_text('[node.2xH100]\ngpu = "H100"\ngpus = 2\nhost_dram_bytes = 1e12\nnvme_bytes = 1e13\n'
                   'nvme_bytes_per_s = 1e10\nsource = "a test node"\n')
    out = json.loads(invoke("cost", "--hardware", "2xH100", "--catalog", cat, "--model", "Llama-3.1-8B",
                            "--batch", "1", "--context", "100", "--json"))
    assert (out["hardware"], out["tp"]) == ("2xH100", 2)
    r = CliRunner().invoke(main, ["cost", "--hardware", "2xH100", "--model", "Llama-3.1-8B", "--batch", "1",
                                  "--context", "100"])
    assert r.exit_code == 2 and "unknown node '2xH100'" in r.output
    rows = no_nan(invoke("compare", "--hardware", "2xH100", "--catalog", cat, "--model", "Llama-3.1-8B",
                         "--workload", "chat-4k", "--duration-s", "5", "--strategy", "native", "--json"))
    assert isinstance(rows, list) and [r["strategy"] for r in rows] == ["native"] and rows[0]["completed"] > 0


def test_compare_with_a_scenario_refuses_catalog_and_applies_duration(tmp_path):
    sc = tmp_path / "s.toml"
    sc.write_text(CAPACITY_SCENARIO)
    r = CliRunner().invoke(main, ["compare", str(sc), "--catalog", str(sc), "--strategy", "native"])
    assert r.exit_code == 2 and "--catalog applies without a SCENARIO" in r.output
    short = no_nan(invoke("compare", sc, "--duration-s", "5", "--strategy", "native", "--json"))
    long = no_nan(invoke("compare", sc, "--duration-s", "20", "--strategy", "native", "--json"))
    assert isinstance(short, list) and isinstance(long, list)
    assert 0 < short[0]["completed"] < long[0]["completed"]


def test_capacity_replays_a_trace(tmp_path):
    sc, trace = tmp_path / "cap.toml", tmp_path / "t.csv"
    sc.write_text(CAPACITY_SCENARIO)
    trace.write_text(TRACE)
    doc = no_nan(invoke("capacity", sc, "--offline", "--seeds", "1", "--trace", trace, "--json"))
    assert isinstance(doc, dict)
    (row,) = doc["offline"]
    assert (row["requests"], row["completed"]) == (3, 3)  # the trace's three requests, not chat-4k's
    assert row["requests_per_s"] is None  # no steady window: null, not NaN


def test_sweep_seed_sets_every_point_and_refuses_a_swept_seed(tmp_path):
    sc = tmp_path / "cap.toml"
    sc.write_text(CAPACITY_SCENARIO.replace("duration_s = 60", "duration_s = 20"))
    args = ["sweep", str(sc), "--grid", "cluster.nodes=1", "--workers", "1", "--json"]
    by_seed = pd.DataFrame(no_nan(invoke(*args, "--seed", "7")))
    by_grid = pd.DataFrame(no_nan(invoke("sweep", str(sc), "--grid", "seed=7", "--workers", "1", "--json")))
    base = pd.DataFrame(no_nan(invoke(*args)))
    assert by_seed.requests.iloc[0] == by_grid.requests.iloc[0] != base.requests.iloc[0]
    r = CliRunner().invoke(main, ["sweep", str(sc), "--grid", "seed=1,2", "--seed", "7"])
    assert r.exit_code == 2 and r.output.strip().endswith("--seed 7: the grid sweeps 'seed' too (--grid seed=...); "
                                                          "give one of them")


def test_capacity_duration_applies_in_every_mode(tmp_path):
    sc = tmp_path / "cap.toml"
    sc.write_text(CAPACITY_SCENARIO)
    doc = no_nan(invoke("capacity", sc, "--offline", "--seeds", "1", "--duration-s", "10", "--json"))
    ten = doc["offline"][0]["requests"]  # type: ignore[index]
    doc = no_nan(invoke("capacity", sc, "--offline", "--seeds", "1", "--duration-s", "30", "--json"))
    assert 0 < ten < doc["offline"][0]["requests"]  # type: ignore[index]

