"""xPyD capacity planning: the split search, its answer against its own simulations, the CLI."""

import math

import pandas as pd
import pytest
from click.testing import CliRunner

from simulator.cli import main
from simulator.engine import run
from simulator.errors import ConfigError
from simulator.planning import meets_slo, plan_capacity
from simulator.scenario import load_scenario
from simulator.xpyd import _smallest, ample_prefill_nodes

SPLIT = """
name = "split"
description = "split"
[model]
name = "Llama-3.1-70B"
[cluster]
hardware = ["8xH100"]
nodes = 2
tp = 8
[disaggregation]
prefill_nodes = 1
decode_nodes = 1
[workload]
duration_s = 30
rate_scale = 60.0
[workload.spec]
name = "chat-4k"
[slo]
ttft_p99_s = 0.5
tpot_p99_s = 0.04
"""


def test_smallest_doubles_then_bisects():
    calls = []

    def ok(k):
        calls.append(k)
        return k >= 11

    assert _smallest(ok, 1, 100, "none") == 11
    assert calls[:5] == [1, 2, 4, 8, 16]  # doubling, then bisection between 8 and 16
    assert _smallest(ok, 20, 100, "none") == 20
    with pytest.raises(ConfigError, match="none"):
        _smallest(lambda k: False, 1, 10, "none")


def test_split_plan_is_the_smallest_that_meets_the_slos(tmp_path):
    (tmp_path / "s.toml").write_text(SPLIT)
    sc = load_scenario(tmp_path / "s.toml")
    plan = plan_capacity(sc)
    assert list(plan.fleet) == ["aggregated", plan.fleet.iloc[1]] and list(plan.hardware) == ["8xH100"] * 2
    agg, split = plan.iloc[0], plan.iloc[1]
    assert split.fleet == f"{split.prefill_nodes}P{split.decode_nodes}D"
    assert split.nodes == split.prefill_nodes + split.decode_nodes and split.decode_nodes >= split.memory_floor_nodes
    assert split.usd_per_hour == pytest.approx(split.nodes * sc.nodes()[0].usd_per_hour)
    wl = sc.load_workload()
    best = run(sc.disaggregated_config("8xH100", split.prefill_nodes, split.decode_nodes), wl, sc.seed)
    assert meets_slo(best, sc.slo.ttft_p99_s, sc.slo.tpot_p99_s)
    assert best.summary["ttft_p99_s"] == split.ttft_p99_s  # the answer is what its own simulation says
    # one column, one meaning: the KV use of the pool that decodes (all of an aggregated fleet's replicas)
    assert "kv_utilization" not in plan
    assert split.decode_kv_utilization == best.summary["decode_kv_utilization"]
    assert split.decode_kv_utilization != best.summary["kv_utilization"]  # the prefill pool's left out
    agg_run = run(sc.engine_config("8xH100", agg.nodes), wl, sc.seed)
    assert agg.decode_kv_utilization == agg_run.summary["kv_utilization"]
    if split.prefill_nodes > 1:  # one prefill node fewer fails
        fewer = run(sc.disaggregated_config("8xH100", split.prefill_nodes - 1, split.decode_nodes), wl, sc.seed)
        assert not meets_slo(fewer, sc.slo.ttft_p99_s, sc.slo.tpot_p99_s)
    assert ample_prefill_nodes(sc, "8xH100", wl) >= 1
    assert agg.nodes >= 1 and agg.fleet == "aggregated" and math.isnan(agg.link_utilization)
    allowed = ("prefill compute", "decode memory", "decode batch cap (max_num_seqs)", "decode bandwidth (TPOT)",
               "network", "none (one replica a pool suffices)")
    assert all(part in allowed for part in split.binding.split(", "))


def test_capacity_command_on_a_disaggregated_scenario(tmp_path):
    # at a thirtieth of the split test's load (its replace missed SPLIT's 60.0 until now, so this ran at 60x)
    assert "rate_scale = 60.0" in SPLIT
    (tmp_path / "s.toml").write_text(SPLIT.replace("rate_scale = 60.0", "rate_scale = 2.0"))
    r = CliRunner().invoke(main, ["capacity", str(tmp_path / "s.toml"), "--out", str(tmp_path / "cap")])
    assert r.exit_code == 0, r.output
    plan = pd.read_csv(tmp_path / "cap" / "capacity.csv")
    assert plan.fleet.iloc[0] == "aggregated" and plan.fleet.iloc[1].endswith("D")
    assert (tmp_path / "cap" / "capacity.png").exists()
    assert "aggregated" in r.output and "binding" in r.output
