"""The public API's arguments (audit items 5, 6 and 7): a GPU name alone is its largest node in
`run_scenario` and `plan_capacity` as on the command line, and nonsense arguments are refused in one
line naming the function, the argument, the value and what is allowed; `kvsim sweep` refuses a grid
value given twice and says, on --resume, how many points it reuses.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from click.testing import CliRunner

from hardware.catalog import load_catalog
from simulator.billing import compare_ttls, get_profile
from simulator.capacity import kv_budget
from simulator.cli.sweep import sweep
from simulator.engine import run
from simulator.errors import MAX_MESSAGE_CHARS, ConfigError, RuleError
from simulator.kv import footprint
from simulator.models import get_model
from simulator.placement import ParallelPlan
from simulator.planning import plan_capacity
from simulator.scenario import load_scenario, parse_scenario
from simulator.study import run_scenario, saturating_requests
from simulator.sweep import expand_grid
from tests.test_sweep import TINY as SWEEP_TINY
from workloads.request import Request

SEED_RULE = "'seed' must be an integer >= 0 (the same seed, the same run)"


def refused(fn, *args, **kwargs) -> str:
    """The one-line message of the `ConfigError` that ``fn(*args, **kwargs)`` raises."""
    with pytest.raises(ConfigError) as err:
        fn(*args, **kwargs)
    msg = str(err.value)
    assert "\n" not in msg and len(msg) <= MAX_MESSAGE_CHARS, msg
    return msg


@pytest.fixture(scope="module")
def short():
    """chat-4k-h100 (one 8xH100 node) for 10 s of arrivals, no report studies."""
    sc = load_scenario("chat-4k-h100")
    return dataclasses.replace(sc, workload=dataclasses.replace(sc.workload, duration_s=10.0),
                               report=dataclasses.replace(sc.report, capacity=False, collapse=False,
                                                          breakeven=False))


# --- 5. a GPU name alone is its largest node ----------------------------------------------------
def test_run_scenario_keys_and_labels_a_gpu_name_by_its_node(short):
    alias = run_scenario(short, hardware=["H100"])
    assert list(alias.results) == ["8xH100"]
    assert alias.headline().hardware.tolist() == ["8xH100"]
    node = run_scenario(short, hardware=["8xH100"])  # the node key itself: unchanged
    assert list(node.results) == ["8xH100"]
    assert alias.results["8xH100"].summary == node.results["8xH100"].summary


@pytest.mark.parametrize("fn", [run_scenario, plan_capacity])
def test_hardware_must_name_known_kinds_each_once(short, fn):
    name = fn.__name__
    assert refused(fn, short, hardware=[]) == (
        f"{name}: hardware: must be a list of at least one node kind, e.g. ['8xH100', 'B200'] "
        "(None: the scenario's; got [])")
    assert "got 'H100')" in refused(fn, short, hardware="H100")  # a string is no list of kinds
    assert refused(fn, short, hardware=["H100", "8xH100"]) == (
        f"{name}: hardware: must name each node kind once (got 'H100' and '8xH100', both 8xH100)")
    assert refused(fn, short, hardware=["nope"]).startswith(f"{name}: hardware: unknown node 'nope'; valid: 8xH100")


# --- 6. seeds ------------------------------------------------------------------------------------
@pytest.mark.parametrize("seed", [-1, 1.5, True, "3"])
def test_seeds_are_integers_from_zero(short, seed):
    assert refused(run_scenario, short, seed) == f"run_scenario: {SEED_RULE} (got {seed!r})"
    assert refused(plan_capacity, short, seed=seed) == f"plan_capacity: {SEED_RULE} (got {seed!r})"
    assert refused(load_scenario, "chat-4k-h100", seed=seed) == f"load_scenario: {SEED_RULE} (got {seed!r})"
    assert refused(run, short.engine_config(), [], seed) == f"run: {SEED_RULE} (got {seed!r})"


def test_the_engine_refuses_no_seed_and_runs_seed_zero(short):
    assert refused(run, short.engine_config(), [], None) == f"run: {SEED_RULE} (got None)"
    import numpy as np

    requests = saturating_requests(1024, 64, 4, 1.0, np.random.default_rng(0))
    first = run(short.engine_config(), requests, 0).summary
    assert first["completed"] == 4 and run(short.engine_config(), requests, 0).summary == first


# --- 6. load_scenario ----------------------------------------------------------------------------
def test_load_scenario_refuses_an_empty_path_and_none_is_the_default():
    assert refused(load_scenario, "") == (
        "load_scenario: 'path' must be a scenario file or a shipped scenario's name (None: the default) (got '')")
    assert load_scenario(None).name == load_scenario().name == "default"


@pytest.mark.parametrize("key", ["cluster.nodes", "nodes"])
def test_load_scenario_names_the_overrides_it_takes(key):
    msg = refused(load_scenario, "chat-4k-h100", **{key: 3})
    assert msg.startswith(f"load_scenario: unknown override {key!r}; valid: name, description, seed, model, "
                          "cluster, ")
    assert "path" not in msg.split("valid:")[1] and "cluster=replace(s.cluster, nodes=2)" in msg


def test_load_scenario_overrides_whole_fields_and_validates_them():
    sc = load_scenario("chat-4k-h100", seed=0)
    assert sc.seed == 0
    bigger = load_scenario("chat-4k-h100", seed=7, cluster=dataclasses.replace(sc.cluster, nodes=2))
    assert (bigger.seed, bigger.cluster.nodes) == (7, 2)
    msg = refused(load_scenario, "chat-4k-h100", cluster=dataclasses.replace(sc.cluster, tp=3))
    assert msg.startswith(sc.path) and "cluster.tp" in msg  # checked as the file is


# --- 6. kv_budget, footprint, compare_ttls -------------------------------------------------------
def test_kv_budget_refuses_a_tp_beside_a_plan_that_disagrees():
    node, model = load_catalog().node("8xH100"), get_model("Llama-3.1-8B")
    assert refused(kv_budget, node, model, tp=4, plan=ParallelPlan(tp=8)) == (
        "kv_budget: 'tp' must be the plan's tp (8) or None when a plan is given (got 4)")
    assert kv_budget(node, model, tp=8, plan=ParallelPlan(tp=8)).plan.tp == 8
    assert kv_budget(node, model, tp=4).plan.tp == 4
    assert kv_budget(node, model, plan=ParallelPlan(tp=2)).plan.tp == 2


@pytest.mark.parametrize(("key", "args", "value"), [
    ("context_tokens", (4096.5,), "4096.5"), ("context_tokens", (0,), "0"), ("batch", (4096, 1.5), "1.5"),
    ("block_tokens", (4096, 1, 16.0), "16.0"), ("context_tokens", (True,), "True"),
])
def test_footprint_takes_whole_tokens(key, args, value):
    model = get_model("Llama-3.1-8B")
    assert refused(footprint, model, None, *args) == f"footprint: {key!r} must be an integer >= 1 (got {value})"
    assert footprint(model, None, 4096).context_tokens == 4096


def test_compare_ttls_refuses_percentiles_outside_0_to_100():
    profile = get_profile("openai")
    for bad in ([150, -3], [50, float("nan")], ["p50"]):
        assert refused(compare_ttls, [], profile, percentiles=bad) == (
            f"compare_ttls: 'percentiles' must be numbers in [0, 100] (got {bad!r})")
    reqs = [Request(id=i, arrival_s=60.0 * i, prompt_tokens=2048, output_tokens=10, segments=((1, 2048),))
            for i in range(4)]
    pct = compare_ttls(reqs, profile, percentiles=[0, 100]).gap_percentiles_s
    assert list(pct.index) == ["p0", "p100"] and pct.notna().all()
    # helper-167: numpy's seconds were "no TTL like '5m'", and a generator of percentiles was used up by the check
    import numpy as np

    cmp = compare_ttls(reqs, profile, ttls=np.array([300, 3600]), percentiles=(p for p in [50, 99]))
    assert list(cmp.summary.ttl) == ["none", "5m", "1h"] and list(cmp.gap_percentiles_s.index) == ["p50", "p99"]


# --- 7. kvsim sweep ------------------------------------------------------------------------------
# the sweep tests' tiny scenario, shorter: each point here runs 5 s of chat at twice its rate
TINY = SWEEP_TINY.replace("duration_s = 60\nrate_scale = 5.0", "duration_s = 5\nrate_scale = 2.0")
assert TINY != SWEEP_TINY, "the sweep tests' TINY changed: update the replace above"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("api") / "tiny.toml"
    path.write_text(TINY)
    return path


@pytest.mark.parametrize(("grid", "message"), [
    ("cluster.nodes=1,1", "--grid cluster.nodes: must name each value once (got '1' twice)"),
    ("workload.rate_scale=2,3,2.0", "--grid workload.rate_scale: must name each value once "
                                    "(got '2' and '2.0', both 2.0)"),
    ("cluster.hardware=8xH100,8xH100", "--grid cluster.hardware: must name each value once (got '8xH100' twice)"),
])
def test_sweep_refuses_a_grid_value_given_twice(tiny, grid, message):
    res = CliRunner().invoke(sweep, [str(tiny), "--grid", grid])
    assert res.exit_code == 2 and "Traceback" not in res.output
    assert res.output.strip() == f"Error: {message}"


def test_expand_grid_reads_values_before_comparing_them(tiny):
    sc = load_scenario(tiny)
    assert refused(expand_grid, sc, {"workload.rate_scale": [1, 1.0]}) == (
        "--grid workload.rate_scale: must name each value once (got '1' and '1.0', both 1)")
    assert len(expand_grid(sc, {"workload.rate_scale": ["1", "1.5"], "cluster.nodes": [1, 2]})) == 4


def test_sweep_resume_counts_the_points_it_reuses(tiny, tmp_path):
    out = tmp_path / "swp"
    first = CliRunner().invoke(sweep, [str(tiny), "--grid", "cluster.nodes=1", "--out", str(out)])
    assert first.exit_code == 0, first.output
    assert "scenario tiny: 1 grid points, 1 simulations" in first.stderr
    again = CliRunner().invoke(sweep, [str(tiny), "--grid", "cluster.nodes=1,2", "--out", str(out), "--resume"])
    assert again.exit_code == 0, again.output
    log = out / "sweep.csv"
    assert f"scenario tiny: 2 grid points, 1 reused from {log}, 1 to run (1 simulations)" in again.stderr
    assert f"reused 1 finished points from {log}" in again.stderr


def test_run_given_a_workloads_method_says_so_in_one_line():
    """helper-117: `run(cfg, wl.requests, 1)` (the method, not its list) failed deep in the engine with
    "TypeError: 'method' object is not iterable"."""
    import simulator
    from simulator.scenario import load_scenario

    sc = load_scenario("chat-4k-h100")
    wl = sc.load_workload(rate_scale=0.01)
    with pytest.raises(ConfigError, match=r"^run: 'requests' must be a Workload or an iterable of Request \(got "
                                          r"<bound method Workload\.requests .*; call it, or give the Workload "
                                          r"itself\)$"):
        run(sc.engine_config(), wl.requests, 1)
    with pytest.raises(ConfigError, match=r"\(got 7\)$"):
        run(sc.engine_config(), 7, 1)
    assert run(sc.engine_config(), wl, 1).summary["requests"] == len(wl.requests())
    assert simulator.PoolConfig.__name__ == "PoolConfig"  # the prefill pool's type, exported (helper-117)


# --- helper-152: the wrong type or value, refused in one line naming it ---------------------------------------
def test_wrong_types_are_refused_in_one_line_naming_the_argument():
    """Each failed deep inside with a Python error (AttributeError, TypeError, OverflowError) or gave a made-up
    number; a string where the API takes an object is the usual slip, the TOML files being strings."""
    from simulator.billing import breakeven_reuse_rate
    from simulator.capacity import max_streams
    from simulator.collapse import collapse_table
    from simulator.engine import EngineConfig
    from simulator.kv import bytes_per_token
    from workloads import load_workload

    cat, model = load_catalog(), get_model("Llama-3.1-70B")
    budget = kv_budget(cat.node("8xH100"), model)
    reqs = [Request(id=0, arrival_s=0.0, prompt_tokens=100, output_tokens=10, segments=((1, 100),))]
    assert refused(EngineConfig, layout="fp8") == \
        "EngineConfig: 'layout' must be a KVLayout, e.g. parse_layout('fp8') (got 'fp8')"
    assert refused(kv_budget, "8xH100", model).startswith("kv_budget: 'node' must be a NodeSpec")
    assert refused(bytes_per_token, "Llama-3.1-70B").startswith("bytes_per_token: 'model' must be a ModelSpec")
    assert refused(compare_ttls, reqs, "anthropic/sonnet-4").startswith(
        "compare_ttls: 'profile' must be a PriceProfile")
    assert refused(breakeven_reuse_rate, "300", 0.1, 1.25) == \
        "breakeven_reuse_rate: 'ttl_s' must be a finite number of seconds > 0 (got '300')"
    assert refused(breakeven_reuse_rate, 300, 0.1, float("inf")) == \
        "breakeven: 'write_multiplier' must be a finite number >= 1 (got inf)"
    for name in (None, ""):
        assert refused(get_model, name) == \
            f"get_model: 'name' must be a catalog model's name or a path to a config.json (got {name!r})"
    assert refused(load_workload, "chat-4k", seed=1.5) == \
        "load_workload: 'seed' must be an integer >= 0 (the same seed, the same workload) (got 1.5)"
    assert refused(load_workload, "chat-4k", on_error="ignore") == \
        "load_workload: 'on_error' must be 'stop' or 'skip' (got 'ignore')"
    assert refused(load_scenario, "default", cluster=5) == \
        "load_scenario: 'cluster' must be a ClusterSection, e.g. replace(scenario.cluster, ...) (got 5)"
    for bad in ({"block_tokens": 0}, {"block_tokens": -16}):
        assert refused(max_streams, budget, model, None, 1000, **bad) == \
            f"max_streams: 'block_tokens' must be an integer >= 1 (got {bad['block_tokens']})"
    assert refused(max_streams, budget, model, None, 1.5) == \
        "max_streams: 'context_tokens' must be an integer >= 1 (got 1.5)"
    assert refused(collapse_table, cat, model, hardware="8xH100").startswith(
        "collapse: 'hardware' must be a list of names, e.g. ['8xH100']")
    assert refused(collapse_table, cat, model, hardware=["8xH100"], contexts=[1000.5, 2000]) == \
        "collapse: 'contexts' must be whole numbers >= 1 (got 1000.5)"
    # whole numbers as np.logspace gives them are taken (helper-153: 1024.0 was refused)
    import numpy as np

    assert collapse_table(cat, model, hardware=["8xH100"], layouts=["native"], contexts=np.array([1024.0, 4096.0]),
                          block_tokens=16.0).max_streams.tolist() == [1296, 324]
    for half in ("anthropic/", "/sonnet-4"):
        assert refused(get_profile, half) == ("price profile: must be 'profile/tier', both named, e.g. "
                                              f"'anthropic/sonnet-4' (got {half!r})")


def test_a_price_profile_is_named_as_its_key_prints_it():
    """`get_profile("anthropic/sonnet-4")`, the key tables and errors print, was refused; "" gave the default."""
    assert get_profile("anthropic/sonnet-4") == get_profile("anthropic", "sonnet-4")
    assert get_profile("OpenAI/gpt-4o").key == "openai/gpt-4o"
    assert refused(get_profile, "") == "price profile: must be a profile's name, e.g. 'anthropic' (got '')"


# --- helper-159: more of the wrong types, refused in one line naming the argument ------------------------------
def test_the_analytic_calls_refuse_a_layouts_text_and_objects_of_the_wrong_kind():
    """A layout's text failed as ``'str' object has no attribute 'attention'``, a budget's as one on 'plan', no
    catalog as one on 'node', no contexts as an IndexError and a memory share's text as a TypeError; a layout is
    a `KVLayout` here as in `EngineConfig` (``parse_layout`` reads its text)."""
    import numpy as np

    from simulator.capacity import max_streams
    from simulator.collapse import collapse_table
    from simulator.kv import bytes_per_token, parse_layout

    cat, model = load_catalog(), get_model("Llama-3.1-8B")
    budget = kv_budget(cat.node("8xH100"), model)
    rule = "'layout' must be a KVLayout or None, e.g. parse_layout('fp8') (got 'fp8')"
    assert refused(footprint, model, "fp8", 1024) == f"footprint: {rule}"
    assert refused(bytes_per_token, model, "fp8") == f"bytes_per_token: {rule}"
    assert refused(max_streams, budget, model, "fp8", 1024) == f"max_streams: {rule}"
    assert refused(max_streams, "x", model, parse_layout("fp8"), 1024) == (
        "max_streams: 'budget' must be a KVBudget, e.g. kv_budget(load_catalog().node('8xH100'), model) (got 'x')")
    assert refused(max_streams, budget, "Llama-3.1-8B", None, 1024).startswith(
        "max_streams: 'model' must be a ModelSpec")
    assert refused(footprint, "Llama-3.1-8B", None, 1024).startswith("footprint: 'model' must be a ModelSpec")
    assert refused(kv_budget, cat.node("8xH100"), model, memory_utilization="0.9") == \
        "kv_budget: 'memory_utilization' must be a number in (0, 1] (got '0.9')"
    assert refused(collapse_table, cat, model, ["1xH100"], contexts=np.array([])) == \
        "collapse: 'contexts' must be at least one context length, e.g. [4096] (None: 1k to 1M) (got [])"
    assert refused(collapse_table, cat, model, ["1xH100"], contexts=4096) == \
        "collapse: 'contexts' must be a list of context lengths, e.g. [4096] (None: 1k to 1M) (got 4096)"
    assert refused(collapse_table, None, model) == \
        "collapse: 'catalog' must be a Catalog, e.g. load_catalog() (got None)"
    assert refused(collapse_table, cat, "Llama-3.1-8B").startswith("collapse: 'model' must be a ModelSpec")
    # the same numbers as before for a layout or none
    assert footprint(model, parse_layout("fp8"), 1024).bytes_per_token == bytes_per_token(model, parse_layout("fp8"))
    assert max_streams(budget, model, None, 1024) == max_streams(budget, model, parse_layout("native"), 1024)


def test_a_scenarios_file_name_is_no_scenario_and_stream_to_is_a_folder(short, tmp_path, monkeypatch):
    """`run_scenario("b.toml")` failed as ``'str' object has no attribute 'seed'``, `load_scenario(5)` as Path()'s
    TypeError, and a `stream_to` that is a file as a NotADirectoryError at the first fleet's run."""
    for fn in (run_scenario, plan_capacity):
        assert refused(fn, "b.toml") == \
            f"{fn.__name__}: 'scenario' must be a Scenario, e.g. load_scenario('b.toml') (got 'b.toml')"
    assert refused(run_scenario, None).startswith(
        "run_scenario: 'scenario' must be a Scenario, e.g. load_scenario('default') (got None)")
    assert refused(load_scenario, 5) == ("load_scenario: 'path' must be a scenario file or a shipped scenario's "
                                         "name (None: the default) (got 5)")
    assert refused(load_scenario, "default", trace=5) == \
        "load_scenario: 'trace' must be a file's path (a str or Path) (got 5)"
    monkeypatch.chdir(tmp_path)  # a short path: a long one (pytest -n's folders) is cut in the one-line error
    a_file = Path("out.csv")
    a_file.write_text("")
    assert refused(run_scenario, short, stream_to=a_file) == \
        f"run_scenario: 'stream_to' must be a folder, new or existing, not a file (got {str(a_file)!r})"
    assert refused(run_scenario, short, stream_to=a_file / "runs") == (
        f"run_scenario: 'stream_to' must be a folder, new or existing, not a file (its part {str(a_file)!r} is one) "
        f"(got {str(a_file / 'runs')!r})")
    assert refused(run_scenario, short, stream_to=5) == \
        "run_scenario: 'stream_to' must be a folder's path (a str or Path) (got 5)"
    assert refused(plan_capacity, short, ttft_p99_s="1") == \
        "capacity: 'ttft_p99_s' must be a finite number of seconds > 0 (got '1')"


def test_load_workload_takes_numbers_and_a_format_only_for_a_trace():
    """``duration_s="10"`` and ``rate_scale="2"`` failed in a comparison (TypeError); ``format="azure"`` beside a
    generator's name was ignored without a word (`kvsim workload describe --format` refuses it)."""
    from workloads import load_workload

    assert refused(load_workload, "chat-4k", duration_s="10") == ("load_workload: 'duration_s' must be a number "
                                                                 "(or None: the generator's default or the whole "
                                                                 "trace) (got '10')")
    for key in ("rate_scale", "start_s", "time_scale"):
        assert refused(load_workload, "chat-4k", **{key: "2"}) == f"load_workload: {key!r} must be a number (got '2')"
    assert refused(load_workload, "chat-4k", format="azure") == ("load_workload: 'format' must be None for a "
                                                                "generated workload (it names a trace file's format) "
                                                                "(got 'azure')")
    assert refused(load_workload, {"name": "chat-4k"}, format="kvsim").startswith("load_workload: 'format' must be")
    assert len(load_workload("chat-4k", duration_s=10, rate_scale=2).requests()) > 0


def test_compare_ttls_takes_lists_and_each_ttl_once():
    """None or a number as the requests or percentiles failed as "not iterable"; a TTL's text was read letter by
    letter (``got 'm'``); a TTL named twice, or none, was taken where ``--ttl`` and ``billing.ttls`` refuse both."""
    sonnet = get_profile("anthropic", "sonnet-4")
    reqs = [Request(id=0, arrival_s=0.0, prompt_tokens=100, output_tokens=10, segments=((1, 100),))]
    assert refused(compare_ttls, reqs, sonnet, percentiles=50) == \
        "compare_ttls: 'percentiles' must be a list of numbers in [0, 100], e.g. [50, 99] (got 50)"
    assert refused(compare_ttls, None, sonnet) == \
        "compare_ttls: 'requests' must be an iterable of Requests, e.g. load_workload('chat-4k') (got None)"
    for ttls in ("5m", []):
        assert refused(compare_ttls, reqs, sonnet, ttls=ttls) == \
            f"compare_ttls: 'ttls' must be a non-empty list of TTLs, e.g. ['none', '5m', '1h'] (got {ttls!r})"
    assert refused(compare_ttls, reqs, sonnet, ttls=["5m", "5m"]) == \
        "compare_ttls: ttls: must name each TTL once (got '5m' twice)"
    assert refused(compare_ttls, reqs, sonnet, ttls=["5m", 300]) == \
        "compare_ttls: ttls: must name each TTL once (got '5m' and '300', both 300 s)"
    assert refused(compare_ttls, reqs, sonnet, ttls=[None]) == \
        "compare_ttls: 'ttls' must be TTLs like '5m', '1h', 'none' or seconds (got None)"
    cmp = compare_ttls(reqs, sonnet, ("none", 300.0), percentiles=(50,))
    assert cmp.summary.ttl.tolist() == ["none", "5m"] and cmp.gap_percentiles_s.index.tolist() == ["p50"]


def test_scenario_sections_built_in_code_check_their_types():
    """`dataclasses.replace` skips `build`'s type checks: ``hardware="1xH100"`` was taken and run as the kinds
    '1', 'x', ... (``unknown node '1'``), ``max_num_seqs=1.5`` ran, and text in a number failed in '>='. A
    section's ``__post_init__`` checks the types before its rules compare."""
    from simulator.engine import SchedulerConfig

    sc = load_scenario("default")
    replace = dataclasses.replace
    assert refused(replace, sc.cluster, hardware="1xH100") == \
        "cluster: 'hardware' must be a list of strings, e.g. ['1xH100'] (got '1xH100')"
    assert refused(replace, sc.cluster, hardware=["8xH100", 8]).startswith("cluster: 'hardware' must be a list of")
    assert refused(replace, sc.cluster, nodes="2") == "cluster: 'nodes' must be an integer (got '2')"
    assert refused(replace, sc.cluster, nodes=1.5) == "cluster: 'nodes' must be an integer (got 1.5)"
    assert refused(replace, sc.workload, duration_s="10") == "workload: 'duration_s' must be a number (got '10')"
    assert refused(replace, sc.slo, ttft_p99_s="1") == "slo: 'ttft_p99_s' must be a number (got '1')"
    assert refused(replace, sc, seed="1") == "scenario: 'seed' must be an integer (got '1')"
    assert refused(replace, sc.billing, ttls="5m") == \
        "billing: 'ttls' must be a list of strings or None, e.g. ['5m'] (got '5m')"
    assert refused(replace, sc.report, capacity="yes") == "report: 'capacity' must be true or false (got 'yes')"
    assert refused(replace, sc.cache, params=None) == "cache: 'params' must be a table (a dict) (got None)"
    assert refused(SchedulerConfig, max_num_seqs=1.5) == "SchedulerConfig: 'max_num_seqs' must be an integer (got 1.5)"
    assert refused(SchedulerConfig, max_num_seqs="4") == "SchedulerConfig: 'max_num_seqs' must be an integer (got '4')"
    # what build gives and what code writes is taken: a list for a tuple, an int for a float, numpy's integers
    import numpy as np

    assert replace(sc.cluster, hardware=["8xH100"], nodes=np.int64(2)).nodes == 2
    assert replace(sc.workload, duration_s=10).duration_s == 10
    assert SchedulerConfig(max_num_seqs=np.int64(4), watermark=0).max_num_seqs == 4
    # ... and stored as Python's (helper-167: np.int64 nodes passed here, then a sweep's re-parse refused it and the
    # report's arithmetic failed on numpy's bool), a path where text is asked as its text (it was refused)
    from simulator.sweep import scenario_table

    numbers = replace(sc, cluster=replace(sc.cluster, nodes=np.int64(2), dp_attention=np.bool_(False)),
                      slo=replace(sc.slo, ttft_p99_s=np.float32(2.0)))
    assert [type(x) for x in (numbers.cluster.nodes, numbers.cluster.dp_attention, numbers.slo.ttft_p99_s)] == [
        int, bool, float]
    assert parse_scenario(scenario_table(numbers), "again").cluster.nodes == 2
    assert replace(sc.workload, trace=Path("t.csv")).trace == "t.csv"
    # an array is no scalar (helper-170: np.array([...]).item() raised ValueError; one item passed as a number)
    assert refused(replace, sc.cluster, nodes=np.array([2])) == "cluster: 'nodes' must be an integer (got array([2]))"
    assert refused(replace, sc.cluster, hardware=np.array(["8xH100"])).startswith(
        "cluster: 'hardware' must be a list of strings (got array(")


def test_collapse_table_refuses_plans_that_are_not_parallel_plans():
    """helper-185: ``plans="tp8"`` or ``["tp8"]`` (the CLI's spelling) failed as ``AttributeError: 'str' object has no
    attribute 'label'``; each is one line naming `plans`, and a generator of plans is read once, as a list is."""
    from simulator.collapse import collapse_table

    cat, model = load_catalog(), get_model("Llama-3.1-8B")
    assert refused(collapse_table, cat, model, hardware=["8xH100"], plans="tp8") == \
        "collapse: 'plans' must be a list of ParallelPlan, e.g. [ParallelPlan(tp=8)] (empty: tp GPUs) (got 'tp8')"
    assert refused(collapse_table, cat, model, hardware=["8xH100"], plans=["tp8"]) == \
        "collapse: 'plans' must be ParallelPlans, e.g. ParallelPlan(tp=8) (got 'tp8')"
    df = collapse_table(cat, model, hardware=["8xH100"], layouts=["native"], contexts=[4096],
                        plans=(p for p in [ParallelPlan(tp=8), ParallelPlan(tp=4)]))
    assert df.plan.tolist() == ["TP8", "TP4"]


def test_a_path_argument_that_is_not_a_path_is_refused_in_one_line():
    """helper-185: ``load_catalog(3)``, ``read_trace(None)`` and ``write_workload(requests, None)`` failed inside
    pathlib, ``TypeError: expected str, bytes or os.PathLike object, not NoneType``; each names its argument now."""
    from workloads import read_trace, write_workload

    assert refused(load_catalog, 3) == ("load_catalog: 'extra' must be a catalog TOML file's path (a str or Path), or "
                                        "None: the shipped catalog alone (got 3)")
    for bad in (None, 3):
        assert refused(read_trace, bad) == f"read_trace: 'path' must be a trace file's path (a str or Path) (got {bad})"
        assert refused(write_workload, [], bad) == \
            f"write_workload: 'path' must be a file's path (a str or Path) ending in .csv or .jsonl (got {bad})"


def test_run_refuses_a_config_that_is_no_engine_config():
    """helper-185: ``run(None, requests)``, or a Scenario where `run_scenario` takes it, failed deep in the cluster
    (``AttributeError: 'NoneType' object has no attribute 'layout'``), and ``stream_to=3`` inside pathlib."""
    from simulator.engine import EngineConfig

    for bad in (None, "default", load_scenario("chat-4k-h100")):
        assert refused(run, bad, []).startswith("run: 'config' must be an EngineConfig, e.g. EngineConfig(model=")
    config = EngineConfig(model="Llama-3.1-8B", node="1xH100", tp=1)
    assert refused(run, config, [], stream_to=3) == \
        "run: 'stream_to' must be a folder's path (a str or Path), or None: the records held (got 3)"


def test_counts_of_specs_take_a_numpy_integer_and_hold_an_int():
    """helper-185: Offline(count=np.int64(3)), Synthetic(system_prompt_tokens=np.int64(3)), FixedLength and a
    model's vocab_size or a GPU's sm_count were refused as "a whole number (got np.int64(3))" where ParallelPlan and
    the scenario's sections take one (`simulator.errors.must_whole`); floats and bools are still refused."""
    import numpy as np

    from simulator.models import get_model
    from simulator.placement import ParallelPlan
    from workloads.arrivals import Offline
    from workloads.generators.synthetic import Synthetic
    from workloads.lengths import FixedLength

    held = [Offline(count=np.int64(3)).count, Synthetic(system_prompt_tokens=np.int64(3)).system_prompt_tokens,
            FixedLength(tokens=np.int32(3)).tokens, ParallelPlan(tp=np.int64(3)).tp,
            dataclasses.replace(get_model("Llama-3.1-8B"), vocab_size=np.int64(3)).vocab_size,
            dataclasses.replace(load_catalog().gpu("H100"), sm_count=np.int16(3)).sm_count]
    assert held == [3] * 6 and {type(v) for v in held} == {int}
    for bad in (3.0, True, "3"):
        with pytest.raises(RuleError, match=r"Offline: 'count' must be a whole number >= 1"):
            Offline(count=bad)
    with pytest.raises(RuleError, match=r"FixedLength: 'tokens' must be a whole number >= 1 \(got np.int64\(0\)\)"):
        FixedLength(tokens=np.int64(0))
