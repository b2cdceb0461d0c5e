"""Prefix caching in the engine: hit shares against the trace, pressure, pins, tiers."""

from __future__ import annotations

import itertools
from dataclasses import replace
from pathlib import Path

import pytest

from simulator.engine import AffineTimer, EngineConfig, SchedulerConfig, run
from simulator.engine.caches.prefix import _PrefixState
from simulator.engine.caches.radix import HBM, Node
from simulator.engine.cluster import simulate
from simulator.engine.replica import Replica
from simulator.models import get_model
from tests.strategies.helpers import direct_hit_share, write_mooncake
from workloads import load_workload, summarize

# a fast timer: every request is done long before the next arrives ("light load")
FAST = AffineTimer(overhead_s=1e-4, per_context_token_s=1e-10, per_prefill_token_s=1e-8)
LONG_CONTEXT = replace(get_model("Llama-3.1-70B"), max_context_tokens=1 << 30)
UNBOUNDED = EngineConfig(model=LONG_CONTEXT, cache="prefix", kv_blocks=10**9, block_tokens=16)


def share(result_requests) -> float:  # type: ignore[no-untyped-def]
    r = result_requests
    return float(r.hit_tokens.sum() / r.prompt_tokens.sum())


def test_unbounded_hit_share_equals_trace(tmp_path: Path) -> None:
    path = write_mooncake(tmp_path / "t.jsonl", 300, docs=12, seed=1, gap_ms=2000)
    reqs = list(load_workload(path))
    res = run(UNBOUNDED, reqs, seed=0, timer=FAST)
    assert (res.requests.outcome == "completed").all()
    measured = share(res.requests)
    assert measured == pytest.approx(direct_hit_share(reqs, 16), abs=1e-12)
    # segment granularity counts the partial tail blocks too: a few tokens a request at most
    assert measured == pytest.approx(summarize(reqs).prefix_hit_share, abs=0.02)
    assert res.requests.hit_hbm_tokens.equals(res.requests.hit_tokens)
    assert res.summary["prefix_hit_ratio_tokens"] == pytest.approx(measured)


def test_mooncake_synthetic_trace_gives_65_percent(traces_dir: Path) -> None:
    reqs = list(load_workload(traces_dir / "mooncake-synthetic.jsonl"))
    res = run(UNBOUNDED, reqs, seed=0, timer=FAST)
    measured = share(res.requests)
    assert measured == pytest.approx(direct_hit_share(reqs, 16), abs=1e-12)
    assert measured == pytest.approx(0.651, abs=0.001)


@pytest.fixture
def pins_checked(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """After every commit: pool bounds, and every running sequence's cached path is in HBM, pinned."""
    count = [0]
    commit, demote = Replica.commit, _PrefixState._demote

    def commit_checked(self: Replica, n: int, end_s: float) -> None:
        commit(self, n, end_s)
        count[0] += 1
        assert 0 <= self.used <= self.total_blocks
        assert 0 <= self.cache.evictable_blocks() <= self.used
        for seq in self.running.values():
            node = seq.cache_node
            while isinstance(node, Node) and node.parent is not None:
                assert node.tier == HBM and node.ref >= 1
                node = node.parent

    def demote_checked(self: _PrefixState, node: Node) -> None:
        assert node.ref == 0, "a referenced block was evicted"
        demote(self, node)

    monkeypatch.setattr(Replica, "commit", commit_checked)
    monkeypatch.setattr(_PrefixState, "_demote", demote_checked)
    return count


def test_hits_fall_as_the_pool_shrinks(tmp_path: Path, pins_checked: list[int]) -> None:
    reqs = list(load_workload(write_mooncake(tmp_path / "t.jsonl", 400, docs=40, seed=2, gap_ms=300)))
    timer = AffineTimer(overhead_s=0.01, per_context_token_s=1e-8, per_prefill_token_s=2e-5)
    shares = []
    for blocks in (6000, 2500, 1200, 700):
        config = replace(UNBOUNDED, kv_blocks=blocks,
                         scheduler=SchedulerConfig(max_num_seqs=32, max_num_batched_tokens=4096))
        cluster, _, _ = simulate(config, reqs, 0, timer=timer)
        hit = sum(r.hit_tokens for r in cluster.records)  # type: ignore[attr-defined]
        shares.append(hit / sum(r.prompt_tokens for r in reqs))
        rep = cluster.replicas[0]
        tree = rep.cache.tree  # type: ignore[attr-defined]
        assert rep.used == tree.blocks[HBM]  # every sequence gave its blocks back
        assert rep.cache.evict(10**9) == rep.used and tree.evictable == 0
    assert pins_checked[0] > 0
    assert all(a > b for a, b in itertools.pairwise(shares)), shares


def test_dram_tier_recovers_hits_lost_to_a_small_pool(tmp_path: Path) -> None:
    reqs = list(load_workload(write_mooncake(tmp_path / "t.jsonl", 300, docs=40, seed=3, gap_ms=300)))
    timer = AffineTimer(overhead_s=0.01, per_context_token_s=1e-8, per_prefill_token_s=2e-5)
    base = replace(UNBOUNDED, kv_blocks=700)
    hbm = run(base, reqs, seed=0, timer=timer)
    dram = run(replace(base, cache_params={"dram": True}), reqs, seed=0, timer=timer)
    assert share(dram.requests) > share(hbm.requests)
    assert dram.requests.hit_dram_tokens.sum() > 0
    assert dram.summary["cache_bytes_down"] > 0 and dram.summary["cache_bytes_up"] > 0
