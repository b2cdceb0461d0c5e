"""The fourth audit's findings on ``--kv-dtype``, ``--usd-per-gpu-hour`` and ``compare``: an empty or
unknown dtype, a GPU priced twice under two spellings, a strategy set named twice, and empty
``--strategy``/``--workload``/``--hardware`` values, each refused in one line naming the option and
what it allows, exit 2 (the contract of `tests.test_hostile_inputs`)."""

from __future__ import annotations

import pytest

from tests.test_hostile_inputs import BASE, error, kvsim, outcome, scenario

DTYPES = "must be one of fp32, bf16, fp16, fp8, int8, int4, fp4"


# --- --kv-dtype -----------------------------------------------------------------------------------
@pytest.mark.parametrize("command", [["calc"], ["fit", "--hardware", "8xH100"]])
@pytest.mark.parametrize("value", ["", " ", "fp9"])
def test_kv_dtype_empty_or_unknown_is_the_options_error(command, value):
    r = kvsim(*command, "--model", "Llama-3.1-8B", "--context", "100", "--kv-dtype", value)
    line = error(r, "--kv-dtype")
    assert f"--kv-dtype: {DTYPES} (got {value!r})" in line
    assert "layout" not in line


def test_kv_dtype_still_adds_its_lever():
    r = kvsim("calc", "--model", "Llama-3.1-8B", "--context", "100", "--kv-dtype", "fp8")
    assert outcome(r) is None and "layout fp8," in r.output


@pytest.mark.parametrize("command", [["calc"], ["fit", "--hardware", "8xH100"]])
@pytest.mark.parametrize(("layout", "has"), [("fp8", "fp8"), ("gqa:4+int4", "int4")])
def test_kv_dtype_over_a_layout_that_sets_one_names_the_option(command, layout, has):
    """``--layout fp8 --kv-dtype fp8`` had read ``layout 'fp8+fp8': 'fp8' conflicts with 'fp8'``, a layout the
    user never wrote (helper-120)."""
    r = kvsim(*command, "--model", "Llama-3.1-8B", "--context", "100", "--layout", layout, "--kv-dtype", "fp8")
    assert (f"--kv-dtype: 'fp8' given, but --layout {layout!r} already sets the KV dtype ({has!r}); give it once"
            in error(r, "--kv-dtype"))


# --- --usd-per-gpu-hour ---------------------------------------------------------------------------
@pytest.mark.parametrize("prices", ["H100=1,h100=2", "H100=1,H100=2", "h100=1, H100 =2"])
def test_a_gpu_priced_twice_under_any_spelling_is_refused(tmp_path, prices):
    r = kvsim("run", scenario(tmp_path), "--usd-per-gpu-hour", prices, "--out", tmp_path / "o")
    line = error(r, "--usd-per-gpu-hour")
    assert "--usd-per-gpu-hour: must be" in line and "each GPU once" in line and repr(prices) in line
    assert not (tmp_path / "o").exists()


def test_a_scenario_pricing_a_gpu_twice_is_refused(tmp_path):
    p = scenario(tmp_path, BASE.replace('hardware = ["8xH100"]\n',
                                        'hardware = ["8xH100"]\nusd_per_gpu_hour = {H100 = 1, h100 = 2}\n'))
    line = error(kvsim("capacity", p), str(p))
    assert "cluster.usd_per_gpu_hour: must name each GPU once (got 'H100' and 'h100', both H100)" in line


def test_distinct_gpus_are_still_priced(tmp_path):
    r = kvsim("compare", scenario(tmp_path), "--strategy", "native", "--usd-per-gpu-hour", "H100=1,h200=2")
    assert outcome(r) is None and "H100 1.00 USD/GPU-hour (overridden" in r.stderr


# --- compare --strategy, --workload, --hardware ---------------------------------------------------
@pytest.mark.parametrize(("sets", "got"), [
    ("native,native", "'native' twice"),
    ("fp8,native+fp8", "'fp8' and 'native+fp8', both layout fp8, reuse none, retention full"),
    ("prefix,prefix+native", "'prefix' and 'prefix+native', both layout native, reuse prefix"),
    ("prefix+fp8,fp8+prefix", "'prefix+fp8' and 'fp8+prefix', both layout fp8, reuse prefix"),
    ("prefix,prefix+lru", "'prefix' and 'prefix+lru', both layout native, reuse prefix"),  # lru: the default
    ("native, native", "'native' twice"),
])
def test_compare_refuses_a_strategy_set_named_twice(tmp_path, sets, got):
    r = kvsim("compare", scenario(tmp_path), "--strategy", sets, "--out", tmp_path / "c")
    line = error(r, "--strategy")
    assert f"--strategy: must name each strategy set once (got {got}" in line
    assert "comparing" not in r.stderr and not (tmp_path / "c" / "compare.csv").exists()


def test_compare_still_runs_distinct_sets(tmp_path):
    r = kvsim("compare", scenario(tmp_path), "--strategy", "native,fp8,h2o,h2o:0.3", "--json")
    assert outcome(r) is None and "comparing 4 strategy sets" in r.stderr


@pytest.mark.parametrize("sets", [",", " , ", ",,"])
def test_compare_without_a_strategy_set_names_the_option(tmp_path, sets):
    r = kvsim("compare", scenario(tmp_path), "--strategy", sets)
    line = error(r, "--strategy")
    assert "--strategy: must name at least one strategy set, comma-separated" in line and repr(sets) in line
    assert "'strategies'" not in line and "comparing" not in r.stderr


@pytest.mark.parametrize("spec", ["", " ", "missing.csv"])
def test_compare_workload_names_the_option(spec):
    r = kvsim("compare", "--tp", "1", "--duration-s", "5", "--strategy", "native", "--workload", spec)
    line = error(r, "--workload")
    assert "--workload: must be a generator name (chat-4k, code-repo-128k" in line and repr(spec) in line
    assert "load_workload" not in line and "'spec'" not in line


def test_compare_hardware_names_the_option():
    r = kvsim("compare", "--tp", "1", "--duration-s", "5", "--strategy", "native", "--hardware", "")
    line = error(r, "--hardware")
    assert "--hardware: unknown node ''; valid: 8xH100" in line


def test_the_library_refuses_a_strategy_set_named_twice_too():
    """`compare_strategies` took `["fp8", "native+fp8"]` and ran one set twice under two labels."""
    from simulator.compare import compare_strategies
    from simulator.engine import EngineConfig
    from simulator.errors import ConfigError

    with pytest.raises(ConfigError, match=r"compare: 'strategies': must name each strategy set once \(got 'fp8' and "
                                          r"'native\+fp8', both layout fp8"):
        compare_strategies(EngineConfig(), [], ["fp8", "native+fp8"])


@pytest.mark.parametrize(("args", "says"), [
    (["collapse", "--model", "Llama-3.1-8B", "--hardware", "1xH100,"],
     "--hardware: must be a comma list of node kinds with no empty item, e.g. 8xH100,8xB200 (got '1xH100,')"),
    (["collapse", "--model", "Llama-3.1-8B", "--hardware", "1xH100,,8xH100"],
     "--hardware: must be a comma list of node kinds with no empty item"),
    (["collapse", "--model", "Llama-3.1-8B", "--layout", "native,"],
     "--layout: must be a comma list of KV layouts with no empty item, e.g. native,fp8 (got 'native,')"),
    (["collapse", "--model", "Llama-3.1-8B", "--hardware", "1xH100", "--plan", "tp1,"],
     "--plan: must be a comma list of plans with no empty item, e.g. tp8,dp8+ep8 (got 'tp1,')"),
    (["breakeven", "--rate", "1,"], "--rate: must be a comma list of rates with no empty item, e.g. 0.5,2 (got '1,')"),
    (["breakeven", "--rate", "1,1"], "--rate: must name each rate once (got '1' twice)"),
    (["breakeven", "--rate", "1,1.0"], "--rate: must name each rate once (got '1' and '1.0', both 1.0)"),
    (["breakeven", "--gaps", "lognorm:s=1.2,,scale=60"],  # helper-164
     "--gaps lognorm: must be a comma list of parameters with no empty item, e.g. s=1.2,scale=60 (got "
     "'s=1.2,,scale=60')"),
])
def test_an_empty_or_repeated_item_of_a_comma_list_is_refused(args, says):
    """helper-159: ``--hardware 1xH100,``, ``--layout native,``, ``--plan tp1,``, ``--strategy native,,fp8`` and
    ``--rate 1,`` dropped their empty item, and ``--rate 1,1`` billed rate 1 twice, where ``--ttl 5m,`` and
    ``--grid cluster.nodes=1,`` refused theirs: every comma list refuses both now (`cli.common.comma_items`)."""
    assert says in error(kvsim(*args), args[-2])


def test_compare_refuses_an_empty_strategy_set_among_others(tmp_path):
    line = error(kvsim("compare", scenario(tmp_path), "--strategy", "native,,fp8"), "--strategy")
    assert "--strategy: must be a comma list of strategy sets with no empty item" in line and "comparing" not in line


@pytest.mark.parametrize(("tp", "says"), [
    ("2", "--nodes: must be a multiple of the 2 1xH100 nodes one TP2 replica (--tp 2) spans (got 1)"),
    ("3", "--tp: plan TP3 for Llama-3.1-8B: 'tp' must be a divisor of the 32 query heads (got 3)"),
])
def test_compare_says_a_plan_that_spans_more_nodes_at_its_options(tp, says):
    """helper-159: `compare --hardware 1xH100 --tp 2` said 'EngineConfig: n_nodes of 1xH100 must be ...', the
    engine's field, not the options; a TP the model cannot take is said before its nodes are counted."""
    line = error(kvsim("compare", "--model", "Llama-3.1-8B", "--hardware", "1xH100", "--workload", "chat-4k",
                       "--duration-s", "10", "--strategy", "native", "--tp", tp), says.split(":")[0])
    assert says in line and "EngineConfig" not in line


TIERS = """name = "tiers"
seed = 0
[model]
name = "Llama-3.1-8B"
[cluster]
hardware = ["1xH100"]
nodes = 1
tp = 1
memory_utilization = 0.5
[cache]
layout = "native"
strategy = "prefix"
[workload]
duration_s = 60
rate_scale = 6.0
[workload.spec]
name = "code-repo-128k"
[slo]
ttft_p99_s = 15.0
tpot_p99_s = 0.1
[report]
collapse = false
breakeven = false
"""


def test_compare_says_which_tier_served_nothing_and_its_json_holds_every_column(tmp_path):
    """helper-166: an NVMe tier below a DRAM tier that never filled served nothing, while compare printed the two
    tiers' reloads together and no note; and --json left out compare.csv's tier and retention columns."""
    import json

    p = tmp_path / "s.toml"
    p.write_text(TIERS)
    r = kvsim("compare", p, "--strategy", "prefix+dram+nvme,prefix+nvme", "--json")
    assert outcome(r) is None
    rows = {row["strategy"]: row for row in json.loads(r.stdout)}
    both, nvme = rows["prefix+dram+nvme"], rows["prefix+nvme"]
    assert both["hit_nvme_tokens"] == 0 < both["hit_dram_tokens"] and nvme["hit_nvme_tokens"] > 0
    # (helper-198: by the blocks each tier brought back, at first admissions and re-admissions alike)
    assert both["cache_nvme_reloaded_blocks"] == 0 < both["cache_dram_reloaded_blocks"]
    assert f"note: prefix+dram+nvme: no block came back from its nvme tier (the dram tier brought back " \
           f"{both['cache_dram_reloaded_blocks']:,}, at first admissions and re-admissions after preemptions), so " \
           "it changes nothing at this load" in r.stderr
    assert "prefix+nvme: no" not in r.stderr
    assert {"cache_reloaded_blocks", "retention_evicted_tokens", "offload_tiers", "kv_utilization"} <= set(both)


def test_compare_says_which_set_routes_prefix_affinity_without_a_cache(tmp_path):
    """helper-171: a scenario routing by prefix-affinity, compared with a set that caches nothing (native), ran that
    set as least-tokens without a word."""
    p = scenario(tmp_path, BASE.replace('name = "least-tokens"', 'name = "prefix-affinity"'))
    r = kvsim("compare", p, "--strategy", "native,prefix", "--duration-s", "5")
    assert outcome(r) is None
    assert 'note: native: router prefix-affinity beside cache.strategy = "none": no prefix is cached, so it routes ' \
           "as least-tokens" in r.stderr
    assert "note: prefix: router" not in r.stderr
