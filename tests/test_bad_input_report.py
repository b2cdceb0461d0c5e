"""Bad input an audit found crashing or silently accepted, each now refused in one line, exit 2, before
any simulation (the contract of `tests.test_hostile_inputs`); one section per kind of input.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest

from simulator.collapse import collapse_table
from simulator.errors import ConfigError
from simulator.maxrate import max_rate
from simulator.models import get_model
from simulator.placement import ParallelPlan
from simulator.scenario import SCENARIO_DIR, load_scenario
from tests.test_hostile_inputs import BASE, MAX_LINE, edit, error, kvsim, outcome, scenario

SHIPPED = sorted(p.stem for p in SCENARIO_DIR.glob("*.toml"))
COLLAPSE_ON = ("collapse = false", "collapse = true\ncollapse_points = [4096]")


# --- a node kind, layout or plan named twice ------------------------------------------------------
@pytest.mark.parametrize(("args", "says"), [
    (["--hardware", "8xH100,H100", "--layout", "native"],
     "--hardware: must name each node kind once (got '8xH100' and 'H100', both 8xH100)"),
    (["--hardware", "8xH100", "--layout", "native,native"],
     "--layout: must name each KV layout once (got 'native' twice)"),
    (["--hardware", "8xH100", "--layout", "fp8,native+fp8"],
     "--layout: must name each KV layout once (got 'fp8' and 'native+fp8', both fp8)"),
    (["--hardware", "8xH100", "--layout", "native", "--plan", "tp8,tp8"],
     "--plan: must name each plan once (got 'tp8' twice)"),
    (["--hardware", "8xH100", "--layout", "native", "--plan", "tp8,tp8+pp1"],
     "--plan: must name each plan once (got 'tp8' and 'tp8+pp1', both TP8)"),
])
def test_collapse_refuses_a_kind_layout_or_plan_named_twice(tmp_path, args, says):
    r = kvsim("collapse", *args, "--out", tmp_path / "c")
    assert r.exit_code == 2 and says in error(r, says)
    assert not (tmp_path / "c" / "collapse.csv").exists()


def test_collapse_still_draws_distinct_kinds_layouts_and_plans(tmp_path):
    r = kvsim("collapse", "--hardware", "8xH100,8xH200", "--layout", "native,fp8", "--plan", "tp8,tp4",
              "--out", tmp_path / "c")
    assert outcome(r) is None
    df = pd.read_csv(tmp_path / "c" / "collapse.csv")
    assert not df.duplicated(["hardware", "plan", "layout", "context_tokens"]).any()
    assert (df.hardware.nunique(), df.plan.nunique(), df.layout.nunique()) == (2, 2, 2)


def test_collapse_table_refuses_duplicates_for_library_callers():
    from hardware.catalog import load_catalog

    cat, model = load_catalog(), get_model("Llama-3.1-8B")
    with pytest.raises(ConfigError, match="collapse: hardware: must name each node kind once"):
        collapse_table(cat, model, ["8xH100", "H100"], ["native"])
    with pytest.raises(ConfigError, match="collapse: layouts: must name each KV layout once"):
        collapse_table(cat, model, ["8xH100"], ["fp8", "native+fp8"])
    with pytest.raises(ConfigError, match="collapse: plans: must name each plan once"):
        collapse_table(cat, model, ["8xH100"], ["native"], plans=[ParallelPlan(tp=8), ParallelPlan(tp=8)])


def test_collapse_table_refuses_tp_beside_plans_and_a_tp_of_zero():
    """helper-188: tp=2 beside plans=[TP8] drew TP8 alone without a word, and tp=0 drew TP8 (read as not given)."""
    from hardware.catalog import load_catalog

    cat, model = load_catalog(), get_model("Llama-3.1-8B")
    with pytest.raises(ConfigError) as exc:
        collapse_table(cat, model, ["8xH100"], ["native"], tp=2, plans=[ParallelPlan(tp=8)])
    assert str(exc.value) == ("collapse: 'tp' must be None when plans are given (each ParallelPlan names its own tp: "
                              "plans=[ParallelPlan(tp=2)] draws TP2) (got 2)")
    with pytest.raises(ConfigError) as exc:
        collapse_table(cat, model, ["8xH100"], ["native"], tp=0)
    assert str(exc.value) == "collapse: 'tp' must be a whole number >= 1 (None: the node's GPUs) (got 0)"
    # either alone draws its plan: TP2 of the 8 GPUs, or the plans given
    assert list(collapse_table(cat, model, ["8xH100"], ["native"], contexts=[4096], tp=2).plan) == ["TP2"]
    assert list(collapse_table(cat, model, ["8xH100"], ["native"], contexts=[4096],
                               plans=[ParallelPlan(tp=8)]).plan) == ["TP8"]


@pytest.mark.parametrize(("kinds", "got"), [
    ('["8xH100", "H100"]', "'8xH100' and 'H100', both 8xH100"),
    ('["8xH100", "8xH100"]', "'8xH100' twice"),
])
@pytest.mark.parametrize("collapse", [True, False])
def test_run_refuses_a_hardware_kind_listed_twice(tmp_path, kinds, got, collapse):
    text = edit('hardware = ["8xH100"]', f"hardware = {kinds}")
    if collapse:
        text = text.replace(*COLLAPSE_ON)
    p = scenario(tmp_path, text)
    r = kvsim("run", p, "--out", tmp_path / "o")
    line = error(r, str(p))
    assert f"cluster.hardware: must name each node kind once (got {got})" in line
    assert "simulating" not in r.stderr


@pytest.mark.parametrize(("value", "says"), [
    ("H100,8xH100", "--hardware: must name each node kind once (got 'H100' and '8xH100', both 8xH100)"),
    ("", "--hardware: must name at least one node kind, comma-separated, e.g. H100,B200 (got '')"),
    (",,", "--hardware: must name at least one node kind"),
])
def test_capacity_refuses_an_empty_or_repeated_hardware_list(tmp_path, value, says):
    r = kvsim("capacity", scenario(tmp_path), "--hardware", value)
    assert says in error(r, "--hardware")
    assert "capacity search" not in r.stderr


def test_report_collapse_layouts_named_twice_are_refused(tmp_path):
    text = edit(*COLLAPSE_ON).replace("[report]\n", '[report]\ncollapse_layouts = ["fp8", "native+fp8"]\n')
    p = scenario(tmp_path, text)
    r = kvsim("run", p, "--out", tmp_path / "o")
    assert "report.collapse_layouts: must name each KV layout once (got 'fp8' and 'native+fp8', both fp8)" in \
        error(r, str(p))
    assert "simulating" not in r.stderr


def test_the_runs_layout_spelt_as_a_collapse_layout_is_drawn_once(tmp_path):
    # cache.layout "cross-layer" is the default collapse layout "cross-layer:0.5": one layout, not two
    # simulated at 64k (104 streams a node, 400 requests a run), not 4k (1,664 streams): the layouts are what is checked
    p = scenario(tmp_path, edit(*COLLAPSE_ON).replace('layout = "native"', 'layout = "cross-layer"')
                 .replace("collapse_points = [4096]", "collapse_points = [65536]"))
    r = kvsim("run", p, "--out", tmp_path / "o")
    assert outcome(r) is None
    df = pd.read_csv(tmp_path / "o" / "collapse.csv")
    assert not df.duplicated(["hardware", "plan", "layout", "context_tokens"]).any()
    assert df.layout.iloc[0] == "cross-layer:0.5" and (df.layout == "cross-layer:0.5").any()


def test_collapse_points_beyond_the_window_are_said_not_dropped(tmp_path):
    """helper-159: collapse_points = [1024, 200000] on Llama-3.1-8B (window 131,072) simulated 1024 alone and said
    nothing of 200000; the report now names it among what the study left out."""
    p = scenario(tmp_path, edit("collapse = false", "collapse = true\ncollapse_points = [1024, 200000]"))
    r = kvsim("run", p, "--out", tmp_path / "o")
    assert outcome(r) is None
    assert list(pd.read_csv(tmp_path / "o" / "collapse_simulated.csv").context_tokens.unique()) == [1024]
    assert ("- left out: report.collapse_points 200,000: beyond Llama-3.1-8B's window of 131,072 tokens, not "
            "simulated\n") in (tmp_path / "o" / "summary.md").read_text()


# --- empty lists and points the study would drop ---------------------------------------------------
@pytest.mark.parametrize(("old", "new", "says"), [
    ("breakeven = false", "breakeven = true\n[billing]\nttls = []",
     """ttls: must be a non-empty list of cache TTLs, e.g. ["5m", "1h"] (or no key: every TTL the profile """
     """sells) (got [])"""),
    ("breakeven = false", "breakeven = false\n[billing]\nttls = []", "billing.ttls: must be a non-empty list"),
    ('hardware = ["8xH100"]', "hardware = []", "cluster.hardware: must be a non-empty list (got [])"),  # was (got ())
    ("collapse = false", "collapse = true\ncollapse_points = []",
     "report.collapse_points: must be 1 to 16 contexts (each is two simulations) (got [])"),
    ("collapse = false", "collapse = true\ncollapse_points = [1048576]",
     "report.collapse_points: must hold a context within Llama-3.1-8B's window of 131,072 tokens (got [1048576])"),
    # helper-159: a context written twice was simulated twice, two rows of it in collapse_simulated.csv
    ("collapse = false", "collapse = true\ncollapse_points = [1024, 1024]",
     "report.collapse_points: must name each context once (got '1024' twice)"),
])
def test_empty_lists_are_refused_before_the_run(tmp_path, old, new, says):
    p = scenario(tmp_path, edit(old, new))
    r = kvsim("run", p, "--out", tmp_path / "o")
    assert says in error(r, str(p))
    assert "simulating" not in r.stderr


# --- non-finite numbers ------------------------------------------------------------------------
@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "0", "-1"])
def test_capacity_rel_tol_must_be_finite_and_positive(tmp_path, value):
    r = kvsim("capacity", scenario(tmp_path), "--max-rate", "--seeds", "1", "--rel-tol", value)
    rule = "--rel-tol: must be a finite number in (0, 1): a share, 0.05 for 5%"
    assert f"{rule} (got '{value}')" in error(r, "--rel-tol")
    assert "max-rate search" not in r.stderr


@pytest.mark.parametrize("value", ["1", "5"])
def test_capacity_rel_tol_is_a_share_below_one(tmp_path, value):
    """``--rel-tol 5`` (meant as 5%) bisected to a bracket of [x1, x2] and answered from it (helper-121)."""
    r = kvsim("capacity", scenario(tmp_path), "--max-rate", "--seeds", "1", "--rel-tol", value)
    rule = "--rel-tol: must be a finite number in (0, 1): a share, 0.05 for 5%"
    assert f"{rule} (got '{value}')" in error(r, "--rel-tol")
    from simulator.maxrate import max_rate

    with pytest.raises(ConfigError, match=r"max_rate: 'rel_tol' must be in \(0, 1\)"):
        max_rate(load_scenario(scenario(tmp_path)), rel_tol=float(value))


@pytest.mark.parametrize("value", [math.nan, math.inf])
def test_max_rate_refuses_a_non_finite_rel_tol_before_running(tmp_path, value):
    sc = load_scenario(scenario(tmp_path))
    with pytest.raises(ConfigError, match=r"max_rate: 'rel_tol' must be in \(0, 1\)"):
        max_rate(sc, seeds=1, rel_tol=value)


@pytest.mark.parametrize(("key", "value"), [("ttft_p99_s", "2.0"), ("tpot_p99_s", "0.1")])
def test_an_infinite_slo_in_a_scenario_is_refused(tmp_path, key, value):
    p = scenario(tmp_path, edit(f"{key} = {value}", f"{key} = inf"))
    r = kvsim("run", p, "--out", tmp_path / "o")
    assert f"slo.{key}: must be a finite number of seconds (got inf)" in error(r, str(p))
    assert "simulating" not in r.stderr


# --- a `path` key ------------------------------------------------------------------------------
def test_a_path_key_is_unknown_like_any_other(tmp_path):
    p = scenario(tmp_path, 'path = "elsewhere.toml"\n' + BASE)
    line = error(kvsim("run", p, "--out", tmp_path / "o"), str(p))
    assert f"{p}: path: unknown key; valid: name, " in line
    assert "path" not in line.split("valid:")[1]


def test_the_scenario_still_knows_its_file(tmp_path):
    p = scenario(tmp_path)
    assert load_scenario(p).path == str(p)
    assert load_scenario("default").path == str(SCENARIO_DIR / "default.toml")


# --- a scenario path that is not there ---------------------------------------------------------
def test_a_shipped_scenarios_path_outside_the_checkout_says_it_runs_by_name(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    r = kvsim("run", "scenarios/default.toml")
    line = error(r, "scenarios/default.toml")
    assert line == ("Error: scenarios/default.toml: scenario file not found; the shipped scenario 'default' runs by "
                    "its name (e.g. kvsim run default)")


def test_a_short_missing_path_lists_every_shipped_scenario(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    line = error(kvsim("run", "nope.toml"), "nope.toml")
    assert line == f"Error: nope.toml: scenario file not found (shipped: {', '.join(SHIPPED)})"


def test_a_long_missing_path_lists_what_fits_and_says_how_many_more(tmp_path):
    missing = tmp_path / ("x" * 200) / "nope.toml"
    line = error(kvsim("run", missing), "nope.toml")
    assert len(line) < MAX_LINE and not line.endswith("…")
    head, more = line.split("(shipped: ")[1].rstrip(")").split(", and ")
    listed = head.split(", ")
    assert listed == SHIPPED[:len(listed)] and 0 < len(listed) < len(SHIPPED)
    assert more == f"{len(SHIPPED) - len(listed)} more in the README's Scenarios table"


def test_readme_has_the_scenarios_table_the_message_points_to():
    readme = (Path(__file__).parents[1] / "README.md").read_text()
    assert "\n## Scenarios\n" in readme
    assert all(f"| `{name}` |" in readme for name in SHIPPED)


# --- a run in which no request completes -------------------------------------------------------------
def test_the_break_even_study_of_a_run_where_every_request_timed_out(tmp_path):
    """Every request times out in the queue: the provider side takes the requests' own lengths (no
    completion to average) and no decode speed (a displaced stream forgoes nothing), not NaN (which
    crashed the report after the simulation)."""
    text = edit("breakeven = false", "breakeven = true")
    text = text.replace("[slo]", "[scheduler]\nqueue_timeout_s = 1e-300\n[slo]")
    r = kvsim("run", scenario(tmp_path, text), "--out", tmp_path / "o")
    assert outcome(r) is None
    requests = pd.read_csv(tmp_path / "o" / "8xH100" / "requests.csv")
    assert len(requests) and (requests.outcome == "timed_out").all()
    provider = pd.read_csv(tmp_path / "o" / "breakeven_provider.csv")
    assert len(provider) and provider.notna().any(axis=None)
    assert (tmp_path / "o" / "summary.md").is_file()


def test_a_synthetic_specs_csv_is_read_beside_the_scenario_wherever_kvsim_runs(tmp_path, monkeypatch):
    """`synthetic`'s length CSV, a path relative to the scenario file, was found when the scenario
    was checked and missed when the workload was drawn (after "simulating") unless kvsim ran from
    the scenario's folder: both now read it beside the scenario."""
    folder = tmp_path / "study"
    folder.mkdir()
    (folder / "lens.csv").write_text("input,output\n100,10\n200,20\n300,30\n")
    spec = ('name = "synthetic"\ninput_tokens = {csv = "lens.csv", column = "input"}\n'
            'output_tokens = {csv = "lens.csv", column = "output"}')
    p = scenario(folder, edit('name = "chat-4k"', spec))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    r = kvsim("run", p, "--out", tmp_path / "o")
    assert outcome(r) is None
    requests = pd.read_csv(tmp_path / "o" / "8xH100" / "requests.csv")
    assert len(requests) and set(requests.prompt_tokens) <= {100, 200, 300}


DISAGGREGATED = "[disaggregation]\nprefill_nodes = 1\ndecode_nodes = 1\n[router]"


@pytest.mark.parametrize(("old", "new", "says"), [
    ("[router]", DISAGGREGATED, "not compared: its [disaggregation]"),
    ('hardware = ["8xH100"]', 'hardware = ["8xH100", "8xB200"]', "not compared: its other node kinds (8xB200)"),
])
def test_compare_says_what_of_the_scenario_it_does_not_compare(tmp_path, old, new, says):
    """compare runs the scenario's first kind as one aggregated fleet: its other kinds and a
    [disaggregation] were dropped without a word."""
    text = edit("nodes = 1\n", "nodes = 2\n").replace(old, new)
    r = kvsim("compare", scenario(tmp_path, text), "--strategy", "native")
    assert outcome(r) is None
    assert "first node kind, 8xH100, as one aggregated fleet" in r.stderr and says in r.stderr
    plain = kvsim("compare", scenario(tmp_path, BASE, name="plain.toml"), "--strategy", "native")
    assert outcome(plain) is None and "not compared" not in plain.stderr


def test_compare_says_the_scenario_s_cache_levers_are_not_its_sets(tmp_path):
    """helper-197: a scenario's [cache] layout and parameters (an LFU eviction, a DRAM tier at a quarter of host DRAM)
    were dropped without a word: a set names every lever it runs, so ``prefix+dram`` ran LRU at the default half.
    compare says so; a [cache] of defaults (eviction = "lru" included) gets no note."""
    text = edit('layout = "native"\nstrategy = "prefix"', 'layout = "fp8"\nstrategy = "prefix"\n'
                'params = {eviction = "lfu", dram = true, dram_fraction = 0.25}')
    r = kvsim("compare", scenario(tmp_path, text), "--strategy", "prefix+dram")
    assert outcome(r) is None
    assert ('[cache] layout = "fp8", params = {eviction = "lfu", dram = true, dram_fraction = 0.25} is not used: each '
            "strategy set names every lever it runs (layout, retention, prefix and its tiers and eviction; a set's "
            "dram tier takes 0.5 of host DRAM)") in r.stderr
    plain = edit('strategy = "prefix"', 'strategy = "prefix"\nparams = {eviction = "lru"}')
    r = kvsim("compare", scenario(tmp_path, plain, name="plain.toml"), "--strategy", "prefix")
    assert outcome(r) is None and "[cache]" not in r.stderr


@pytest.mark.parametrize(("args", "option"), [
    (("capacity", "{s}", "--max-rate", "--warmup-fraction", "nan"), "--warmup-fraction"),
    (("fit", "--model", "Llama-3.1-8B", "--context", "1000", "--memory-utilization", "nan"), "--memory-utilization"),
])
def test_a_nan_range_option_is_refused_naming_the_option(tmp_path, args, option):
    """click's FloatRange lets NaN through its bounds; --warmup-fraction nan then failed as
    "SteadyWindow: 'warmup_fraction' ...", naming no option."""
    s = scenario(tmp_path)
    line = error(kvsim(*(str(s) if a == "{s}" else a for a in args)), option)
    assert "'nan' is not a number in the range" in line


def test_capacity_names_the_option_of_an_unknown_hardware_kind(tmp_path):
    line = error(kvsim("capacity", scenario(tmp_path), "--hardware", "nope"), "--hardware")
    assert "--hardware: unknown node 'nope'; valid: 8xH100" in line
