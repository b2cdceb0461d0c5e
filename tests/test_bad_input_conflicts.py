"""Scenario keys, strategy levers and options that contradict each other, which an audit found silently
resolved (one of the two won, the other was dropped), each now refused in one line, exit 2, naming the
file and both keys, before any simulation (the contract of `tests.test_hostile_inputs`).
"""

from __future__ import annotations

import shutil

import pytest

from simulator.errors import ConfigError
from simulator.scenario import SCENARIO_DIR, load_scenario
from tests.test_hostile_inputs import BASE, edit, error, kvsim, outcome, scenario


# --- a trace and a generator table: two workloads --------------------------------------------------
def test_a_trace_and_a_generator_table_are_refused(tmp_path):
    shutil.copy(SCENARIO_DIR / "traces" / "chat-sample.csv", tmp_path / "x.csv")
    p = scenario(tmp_path, edit("duration_s = 5", 'trace = "x.csv"\nduration_s = 5'))
    for args in (["run", p, "--out", tmp_path / "o"], ["capacity", p, "--out", tmp_path / "c"]):
        line = error(kvsim(*args), str(p))
        assert "workload.trace and [workload.spec]" in line and "'x.csv'" in line and "give one" in line
    assert not (tmp_path / "o").exists()
    with pytest.raises(ConfigError, match=r"s\.toml: workload\.trace and \[workload\.spec\] are two workloads"):
        load_scenario(p)


def test_a_trace_option_replaces_the_scenarios_generator(tmp_path):
    """``kvsim run SCENARIO --trace`` replays the trace in place of the file's workload: not two workloads."""
    trace = SCENARIO_DIR / "traces" / "chat-sample.csv"
    sc = load_scenario(scenario(tmp_path), trace=trace)
    assert sc.workload.trace == str(trace.resolve())
    assert outcome(kvsim("run", "trace-replay", "--trace", trace, "--out", tmp_path / "o")) is None


def test_a_sweep_of_a_trace_replay_still_parses_its_points():
    from simulator.sweep import expand_grid

    points = expand_grid(load_scenario("trace-replay"), {"seed": [1, 2]})
    assert [p.workload.trace for _, p in points] == ["traces/chat-sample.csv"] * 2


# --- a catalog model and a config.json: two models -------------------------------------------------
def _config_json(tmp_path):
    import json

    f = tmp_path / "l8.json"
    f.write_text(json.dumps({"num_hidden_layers": 32, "hidden_size": 4096, "num_attention_heads": 32,
                             "num_key_value_heads": 8, "vocab_size": 128256, "intermediate_size": 14336,
                             "max_position_embeddings": 131072}))
    return f


def test_a_model_name_and_a_config_are_refused(tmp_path):
    _config_json(tmp_path)
    p = scenario(tmp_path, edit('name = "Llama-3.1-8B"', 'name = "Llama-3.1-70B"\nconfig = "l8.json"'))
    line = error(kvsim("run", p, "--out", tmp_path / "o"), str(p))
    assert "model.name and model.config are two models; give one" in line
    assert "'Llama-3.1-70B'" in line and "'l8.json'" in line
    assert not (tmp_path / "o").exists()


def test_a_config_alone_loads_and_sweeps(tmp_path):
    from simulator.sweep import expand_grid

    _config_json(tmp_path)
    p = scenario(tmp_path, edit('name = "Llama-3.1-8B"', 'config = "l8.json"'))
    sc = load_scenario(p)
    assert sc.model_spec().n_layers == 32
    assert [x.model.config for _, x in expand_grid(sc, {"seed": [1, 2]})] == ["l8.json"] * 2
    with pytest.raises(ConfigError, match=r"--grid model\.name: .*reads its model from model\.config = 'l8\.json'"):
        expand_grid(sc, {"model.name": ["Llama-3.1-8B"]})


# --- [billing] typos with the break-even study off -------------------------------------------------
@pytest.mark.parametrize(("billing", "says"), [
    ('profile = "antropic"', "billing.profile: unknown price profile 'antropic'; valid: anthropic"),
    ('tier = "opus-9"', "billing.tier: unknown tier 'opus-9' of profile 'anthropic'; valid: sonnet-4"),
    ('ttls = ["7m"]', "billing.ttls[0]: must be one of 5m, 1h (the TTLs anthropic/sonnet-4 sells) (got '7m')"),
])
@pytest.mark.parametrize("command", ["run", "capacity"])
def test_a_billing_typo_is_refused_with_the_breakeven_study_off(tmp_path, billing, says, command):
    p = scenario(tmp_path, edit("[report]", f"[billing]\n{billing}\n[report]"))
    assert "breakeven = false" in p.read_text()
    line = error(kvsim(command, p, "--out", tmp_path / "o"), str(p))
    assert says in line
    assert not (tmp_path / "o").exists()


# --- a strategy set with two levers of one family ---------------------------------------------------
@pytest.mark.parametrize(("strategy", "says"), [
    ("prefix+lru+lfu", "strategy set 'prefix+lru+lfu': 'lfu' conflicts with 'lru' (one eviction lever at most)"),
    ("h2o+snapkv", "strategy set 'h2o+snapkv': 'snapkv' conflicts with 'h2o' (one retention lever at most)"),
    ("h2o:0.5+h2o:0.2", "'h2o:0.2' conflicts with 'h2o:0.5' (one retention lever at most)"),
    ("prefix+prefix", "strategy set 'prefix+prefix': 'prefix' is given twice (each lever once)"),
    ("prefix+dram+dram", "'dram' is given twice (each lever once)"),
    ("fp8+int4", "'int4' conflicts with 'fp8' (one dtype lever at most)"),  # the layout's rule, as it was
])
def test_a_strategy_set_with_two_levers_of_a_family_is_refused(tmp_path, strategy, says):
    r = kvsim("compare", "--workload", "chat-4k", "--duration-s", 10, "--strategy", strategy, "--out", tmp_path / "o")
    assert says in error(r, strategy)
    assert not (tmp_path / "o").exists()  # nothing ran, and no --out folder was made (ffe8420)


def test_levers_of_different_families_still_compose():
    from simulator.compare import parse_strategy_set
    from simulator.engine import EngineConfig

    c = parse_strategy_set("lru+prefix+dram+fp8+h2o:0.5", EngineConfig())
    assert (c.cache, c.cache_params, c.retention, c.layout.label) == \
        ("prefix", {"eviction": "lru", "dram": True}, "h2o", "fp8")


# --- a reuse lever given an argument: it takes none (helper-189: 'prefix:3' ran as 'prefix') -------
@pytest.mark.parametrize(("strategy", "lever"), [
    ("prefix:3", "prefix:3"), ("prefix+dram:5", "dram:5"), ("prefix+lru:x", "lru:x"), ("prefix:+fp8", "prefix:"),
])
def test_a_reuse_lever_with_an_argument_is_refused(strategy, lever):
    from simulator.compare import parse_strategy_set
    from simulator.engine import EngineConfig

    name = lever.partition(":")[0]
    with pytest.raises(ConfigError) as exc:
        parse_strategy_set(strategy, EngineConfig())
    assert str(exc.value) == (f"strategy set {strategy!r}: {lever!r} takes no argument (give {name!r}: the reuse "
                              "levers prefix, dram, nvme, lru, lfu, fifo have no parameter)")


@pytest.mark.parametrize(("lever", "rule"), [
    ("h2o:", "whole tokens >= 1, or a fraction in (0, 1)"), ("snapkv:", "whole tokens >= 1, or a fraction in (0, 1)"),
    ("streaming-llm:", "whole tokens >= 1")])
def test_a_retention_lever_with_an_empty_argument_is_refused(lever, rule):
    """helper-189: 'h2o:' ran at h2o's default budget without a word, as if written 'h2o'."""
    from simulator.compare import parse_strategy_set
    from simulator.engine import EngineConfig

    name = lever[:-1]
    with pytest.raises(ConfigError) as exc:
        parse_strategy_set(f"fp8+{lever}", EngineConfig())
    assert str(exc.value) == f"strategy set 'fp8+{lever}': {name!r} takes {rule} (got '')"
    assert parse_strategy_set(f"fp8+{name}", EngineConfig()).retention == name  # without the colon: its default


def test_compare_refuses_a_reuse_lever_with_an_argument_before_any_run(tmp_path):
    r = kvsim("compare", "--workload", "chat-4k", "--duration-s", 10, "--strategy", "native,prefix+nvme:2",
              "--out", tmp_path / "o")
    assert "'nvme:2' takes no argument (give 'nvme'" in error(r, "prefix+nvme:2")
    assert not (tmp_path / "o").exists()


# --- fp4 weights on a GPU without fp4 tensor cores: every command serves them weight-only -----------
# (they were refused until vLLM's Marlin fallback was modelled: bf16 GEMMs over the 4-bit weights)
@pytest.mark.parametrize("args", [
    ["fit", "--weight-dtype", "fp4", "--context", 4096],
    ["fit", "--weight-dtype", "fp4", "--context", 4096, "--json"],
    ["collapse", "--weight-dtype", "fp4"],
    ["collapse", "--weight-dtype", "fp4", "--hardware", "8xB200,8xH200"],
    ["cost", "--weight-dtype", "fp4", "--context", 4096, "--batch", 1],
])
def test_fp4_weights_on_hopper_are_served_weight_only(tmp_path, args):
    if args[0] == "collapse":
        args = [*args, "--out", tmp_path / "c"]
    r = kvsim(*args)
    assert outcome(r, "fp4") is None
    if args[0] == "collapse":
        assert (tmp_path / "c" / "collapse.csv").exists()
    if args[0] == "cost":
        assert "(fp4 weights, bf16 GEMMs on H100, KV native)" in r.output


def test_fp4_weights_fit_hopper_as_stored():
    from hardware.catalog import load_catalog
    from simulator.capacity import kv_budget
    from simulator.models import get_model, with_weight_precision

    # Llama-3.1-8B in fp4 on one H100: 6.98e9 layer parameters at 0.5625 B + 1.05e9 (embeddings, LM head) at 2 B
    l8 = get_model("Llama-3.1-8B")
    b = kv_budget(load_catalog().node("1xH100"), l8, weight_dtype="fp4")
    outer = 2 * 128_256 * 4_096
    assert b.stage_kv_bytes(0) == pytest.approx(72e9 - ((l8.total_params - outer) * 0.5625 + outer * 2), abs=1)
    # the same bytes as on a B200 (which computes in fp4) given the same usable HBM
    on_b200 = kv_budget(load_catalog().node("1xB200"), with_weight_precision(l8, "fp4"), memory_utilization=0.4)
    assert b.stage_kv_bytes(0) == pytest.approx(on_b200.stage_kv_bytes(0))


# --- admission = "reserve" in a disaggregated fleet ------------------------------------------------
DISAGG = {"nodes = 1": "nodes = 2", "tp = 1": "tp = 8",
          "[workload]": '[disaggregation]\nprefill_nodes = 1\ndecode_nodes = 1\n[scheduler]\nadmission = "reserve"\n'
                        "[workload]"}


@pytest.mark.parametrize("command", ["run", "capacity"])
def test_reserve_admission_with_disaggregation_is_refused_at_load(tmp_path, command):
    p = scenario(tmp_path, **DISAGG)
    r = kvsim(command, p, "--out", tmp_path / "o")
    line = error(r, str(p))
    assert 'scheduler.admission must be "prompt" with [disaggregation]' in line and "(got 'reserve')" in line
    assert "EngineConfig" not in line and "simulating" not in r.stderr
    assert not (tmp_path / "o").exists()


# --- capacity --max-rate / --offline on a scenario with [disaggregation] ----------------------------
def test_max_rate_and_offline_search_the_disaggregated_fleet_too(tmp_path):
    """They simulated only the aggregated fleet, the [disaggregation] silently dropped; now each of the
    scenario's fleets (`Scenario.fleets`) is searched and labelled as `kvsim run` labels it."""
    import json

    import pandas as pd

    p = scenario(tmp_path, **{**DISAGG, 'admission = "reserve"\n': ""})
    r = kvsim("capacity", p, "--max-rate", "--seeds", 1, "--rel-tol", 0.9, "--json")
    assert outcome(r) is None
    doc = json.loads(r.stdout)
    assert [(m["hardware"], m["nodes"]) for m in doc["max_rate"]] == [("8xH100", 2), ("8xH100-1P1D", 2)]
    r = kvsim("capacity", p, "--offline", "--seeds", 1, "--out", tmp_path / "o")
    assert outcome(r) is None
    assert list(pd.read_csv(tmp_path / "o" / "offline.csv").hardware) == ["8xH100", "8xH100-1P1D"]
    text = p.read_text().replace("decode_nodes = 1", "decode_nodes = 1\ncompare_aggregated = false")
    p.write_text(text)
    doc = json.loads(kvsim("capacity", p, "--max-rate", "--seeds", 1, "--rel-tol", 0.9, "--json").stdout)
    assert [m["hardware"] for m in doc["max_rate"]] == ["8xH100-1P1D"]


def test_max_rate_refuses_a_fleet_the_scenario_lacks():
    from simulator.maxrate import max_rate

    with pytest.raises(ConfigError, match=r"max_rate: 'fleet' must be one of the scenario's fleets on 8xH100 "
                                          r"\(8xH100, 8xH100-2P4D\) \(got '8xH100-1P1D'\)"):
        max_rate(load_scenario("disaggregated"), "8xH100", fleet="8xH100-1P1D")


# --- the GPU price note names a disaggregated prefill pool's GPU -----------------------------------
def test_the_price_note_names_the_prefill_pools_gpu(tmp_path):
    p = scenario(tmp_path, **{**DISAGG, 'admission = "reserve"\n': "",
                              "decode_nodes = 1\n": 'decode_nodes = 1\nprefill_hardware = "8xB200"\n'})
    r = kvsim("run", p, "--usd-per-gpu-hour", "B200=4.5", "--out", tmp_path / "o")
    assert outcome(r) is None
    note = "GPU prices: H100 2.99 USD/GPU-hour (catalog), B200 4.50 USD/GPU-hour (overridden; catalog 5.99)"
    assert note in r.stderr and note in (tmp_path / "o" / "summary.md").read_text()
    sc = load_scenario(p)
    assert [n.key for n in sc.priced_nodes()] == ["8xH100", "8xB200"] and [n.key for n in sc.nodes()] == ["8xH100"]


def test_disaggregation_on_a_node_with_no_nic_says_the_catalog_left_it_out(tmp_path):
    """helper-127: 'its nic_bytes_per_s is 0.0' for a key the catalog entry never wrote; now the rule and why."""
    from simulator.errors import ConfigError

    (tmp_path / "c.toml").write_text('[node.8xH100x]\ngpu = "H100"\ngpus = 8\nhost_dram_bytes = 2e12\n'
                                     'nvme_bytes = 3e13\nnvme_bytes_per_s = 25e9\nsource = "test"\n')
    edits = {**DISAGG, '[scheduler]\nadmission = "reserve"\n': "",
             'hardware = ["8xH100"]': 'hardware = ["8xH100x"]\ncatalog = "c.toml"'}
    p = scenario(tmp_path, **edits)
    with pytest.raises(ConfigError, match=r"disaggregation needs a scale-out NIC on 8xH100x to move KV between pools: "
                                          r"its catalog entry's nic_bytes_per_s must be > 0 \(got 0; 0 where the entry "
                                          r"leaves it out\)"):
        load_scenario(p)


def test_a_ttl_named_twice_is_refused(tmp_path):
    """helper-131: ``[billing] ttls = ["5m", "5m"]`` ran as one TTL, silently."""
    p = scenario(tmp_path, BASE + '[billing]\nttls = ["5m", "1h", "300s"]\n')
    assert error(kvsim("run", p, "--out", tmp_path / "o"), str(p)) == (
        f"Error: {p}: billing.ttls: must name each TTL once (got '5m' and '300s', both 300 s)")
