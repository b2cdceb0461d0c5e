"""The engine under parallelism plans: pools per GPU group, schedulers per DP rank and stage, invariants."""

from __future__ import annotations

from dataclasses import replace

import pytest

from hardware.catalog import load_catalog
from simulator.capacity import blocks_per_group, kv_budget
from simulator.engine import EngineConfig, SchedulerConfig, run
from simulator.engine.cluster import simulate
from simulator.engine.geometry import block_geometry
from simulator.errors import ConfigError
from simulator.kv import KVLayout
from simulator.models import get_model
from simulator.placement import ParallelPlan
from tests.engine.helpers import poisson_requests

CAT = load_catalog()
DSV2 = get_model("DeepSeek-V2")
SCHED = SchedulerConfig(max_num_seqs=64, max_num_batched_tokens=4096)


def _blocks(node: str, model_name: str, plan: ParallelPlan) -> int:
    model = get_model(model_name)
    geo = block_geometry(model, KVLayout(), 16)
    return blocks_per_group(kv_budget(CAT.node(node), model, plan=plan), model, KVLayout(), geo.block_bytes)


def test_tp8_mla_pool_is_one_gpus_budget_in_whole_latent_blocks():
    # DeepSeek-V2 (bf16, MLA latent 512 + 64, 60 layers): a 16-token block is 16 · 576 · 2 · 60 = 1,105,920 B
    # and every TP rank holds all of it, so the pool is one GPU's KV budget over that
    b = kv_budget(CAT.node("8xH200"), DSV2, plan=ParallelPlan(tp=8))
    assert _blocks("8xH200", "DeepSeek-V2", ParallelPlan(tp=8)) == int(b.stage_kv_bytes(0) // 1_105_920)


def test_schedulers_and_pools_per_plan():
    cfg = EngineConfig(model=DSV2, node="8xH200", tp=8, scheduler=SCHED)
    tp8, _, _ = simulate(cfg, [], 0)
    dp8, _, _ = simulate(replace(cfg, dp_attention=True, ep=8), [], 0)
    assert len(tp8.replicas) == 1 and len(dp8.replicas) == 8  # a scheduler per DP rank
    assert tp8.replicas[0].total_blocks == _blocks("8xH200", "DeepSeek-V2", ParallelPlan(tp=8))
    dp_blocks = _blocks("8xH200", "DeepSeek-V2", ParallelPlan(tp=8, dp_attention=True, ep=8))
    assert all(r.total_blocks == dp_blocks for r in dp8.replicas)
    # DP attention holds more KV in all, though each GPU holds the whole attention weights
    assert 8 * dp_blocks > 2 * tp8.replicas[0].total_blocks
    # PP over two nodes: two virtual engines share the replica's blocks
    l405 = EngineConfig(model="Llama-3.1-405B", node="8xH100", n_nodes=2, tp=8, pp=2, scheduler=SCHED)
    pp2, _, _ = simulate(l405, [], 0)
    assert len(pp2.replicas) == 2
    assert pp2.replicas[0].total_blocks == _blocks("8xH100", "Llama-3.1-405B", ParallelPlan(tp=8, pp=2)) // 2
    with pytest.raises(ConfigError, match="n_nodes of 8xH100 must be a multiple of the 2 nodes one TP8 PP2"):
        simulate(replace(l405, n_nodes=3), [], 0)


@pytest.mark.parametrize("plan", [dict(dp_attention=True, ep=8), dict(pp=2), dict(tp=16)])
def test_every_request_ends_once_under_a_plan(plan):
    model = "DeepSeek-V2" if plan.get("dp_attention") else "Llama-3.1-70B"
    n_nodes = 2 if plan.get("pp") or plan.get("tp") == 16 else 1
    cfg = replace(EngineConfig(model=model, node="8xH100" if model != "DeepSeek-V2" else "8xH200",
                               n_nodes=n_nodes, scheduler=SCHED), **plan)
    reqs = poisson_requests(120, 40.0, (200, 3000), (20, 300), seed=4)
    res = run(cfg, reqs, seed=1)
    s = res.summary
    assert s["completed"] + s["rejected"] + s["timed_out"] == s["requests"] == 120
    # one replica of the plan (8 GPUs of one node, 16 over two): its schedulers are the engine's replicas
    assert (s["plan_replicas"], s["replicas"]) == (1, 8 if plan.get("dp_attention") else plan.get("pp", 1))
    assert s["completed"] == 120
    fast = res.requests
    slow = run(replace(cfg, fast_forward=False), reqs, seed=1).requests
    assert list(fast.replica) == list(slow.replica)
    assert fast.ttft_s.to_numpy() == pytest.approx(slow.ttft_s.to_numpy(), rel=1e-9)


@pytest.mark.parametrize(("model", "layout", "tp", "dp", "copies"), [
    ("Llama-3.1-70B", "native", 8, False, 1),  # 8 KV heads split over TP8's ranks: one copy of a block in all
    ("Llama-3.1-70B", "mla", 8, False, 8),  # a latent whole on each of the 8 ranks: 8 copies
    ("Llama-3.1-70B", "mqa", 8, False, 8),  # one KV head, on every rank
    ("Qwen3-235B-A22B", "native", 8, False, 2),  # 4 KV heads on 8 ranks: each head on two (helper-153)
    ("Llama-3.1-70B", "native", 16, False, 2),  # TP16 over two nodes: 8 heads on 16 ranks, 16 links
    ("DeepSeek-V3", "native", 8, True, 1),  # DP attention: each GPU its own pool, one link each
])
def test_a_block_brought_into_hbm_crosses_a_link_for_every_copy_held(model, layout, tp, dp, copies):
    """helper-151: a DRAM reload and a swap-in were priced at one copy of a block over the engine's links,
    so an MLA latent, whole on each of TP8's GPUs, came back 8 times too fast (2.9 µs a 1.47 MB block where each
    GPU takes its own copy over its own 64 GB/s link, 23 µs). A swap-out writes one copy."""
    from simulator.engine.cluster import build_cluster
    from simulator.kv import parse_layout

    config = EngineConfig(model=model, node="8xH200", n_nodes=tp // 8, tp=tp, dp_attention=dp, ep=8 if dp else 1,
                          layout=parse_layout(layout), cache="prefix", cache_params={"dram": True})
    r = build_cluster(config, None, lambda *a: None, []).replicas[0]
    links = 64e9 * (1 if dp else tp)  # an engine's GPUs' PCIe links (H200: 64 GB/s each)
    one_copy = r.geometry.block_bytes / links
    assert r.cache.reload_s_per_block[1] == pytest.approx(copies * one_copy)
    assert r.swap_in_s_per_block == pytest.approx(copies * one_copy)
    assert r.swap_s_per_block == pytest.approx(one_copy)


def test_swap_space_is_the_host_dram_a_cache_tier_does_not_take():
    """helper-151: a prefix cache's DRAM tier took `dram_fraction` of the host DRAM and swap space all of it, so the
    two could claim 150%. Swap now has the rest; without a DRAM tier, all of it."""
    from simulator.engine.cluster import build_cluster

    def replica(**params):
        config = EngineConfig(model="Llama-3.1-70B", node="8xH100", tp=8, cache="prefix", cache_params=params,
                              scheduler=SchedulerConfig(preemption="swap"))
        return build_cluster(config, None, lambda *a: None, []).replicas[0]

    host = CAT.node("8xH100").host_dram_bytes
    bb = replica().geometry.block_bytes
    assert replica().host_blocks == int(host // bb)
    assert replica(dram=True).host_blocks == int(host * 0.5 // bb)  # the default share, DRAM_FRACTION
    tiered = replica(dram=True, dram_fraction=0.25)
    assert tiered.host_blocks == int(host * 0.75 // bb) and tiered.cache.cap[1] == int(host * 0.25 // bb)


def test_a_dram_tier_of_all_host_dram_beside_swap_preemption_is_refused():
    """helper-197: ``dram_fraction = 1`` left swap space 0 blocks (the test above: host × (1 − fraction)), so under
    ``preemption = "swap"`` every preemption recomputed, while the report said swap. Refused now; a fraction
    below 1, or recompute preemption, runs as before."""
    from simulator.errors import RuleError

    def config(fraction: float, preemption: str) -> EngineConfig:
        return EngineConfig(model="Llama-3.1-70B", node="8xH100", tp=8, cache="prefix",
                            cache_params={"dram": True, "dram_fraction": fraction},
                            scheduler=SchedulerConfig(preemption=preemption))

    with pytest.raises(RuleError) as err:
        config(1.0, "swap")
    # one rule, said alike here and in a scenario file (helper-205: two wordings of it)
    from simulator.engine.config import SWAP_DRAM_RULE

    assert str(err.value) == f"EngineConfig: 'cache_params.dram_fraction' must be {SWAP_DRAM_RULE} (got 1.0)"
    assert "leaves none to swap to" in SWAP_DRAM_RULE
    config(0.99, "swap")
    config(1.0, "recompute")


def test_a_run_pays_the_swap_in_price_of_every_copy(monkeypatch):
    """helper-153: no test failed if the engine charged a swap-in at the swap-out price (one copy). An MLA latent
    under TP8 swapped out and in: the run at the engine's prices ends later than the same run with swap-ins
    priced as one copy (the old, 8x fast, price), and it did swap."""
    import simulator.engine.cluster as cluster
    from simulator.kv import parse_layout

    reqs = poisson_requests(60, 20.0, (200, 600), (100, 300), seed=3)
    config = EngineConfig(model="Llama-3.1-70B", node="8xH200", tp=8, layout=parse_layout("mla"), kv_blocks=120,
                          scheduler=SchedulerConfig(preemption="swap", max_num_seqs=64))
    priced = run(config, reqs, seed=0)
    build = cluster.build_cluster

    def one_copy(*args, **kwargs):  # every replica's swap-in at its swap-out price
        built = build(*args, **kwargs)
        for r in built.replicas:
            r.swap_in_s_per_block = r.swap_s_per_block
        return built

    monkeypatch.setattr(cluster, "build_cluster", one_copy)
    cheap = run(config, reqs, seed=0)
    assert priced.requests.preemptions.sum() > 20 and priced.summary["completed"] == 60
    assert priced.summary["makespan_s"] > cheap.summary["makespan_s"]
