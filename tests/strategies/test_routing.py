"""Routers over real cache states: what `least-kv` and `prefix-affinity` read of a replica's cache."""

from __future__ import annotations

import numpy as np

from simulator.engine.caches import CacheContext, CacheState, make_strategy
from simulator.engine.routers import make_router, referenced_blocks_at
from simulator.engine.sequence import Seq
from workloads.request import Request

B = 4


def req(i: int, segments: tuple[tuple[int, int], ...], out: int = 1) -> Request:
    return Request(id=i, arrival_s=0.0, prompt_tokens=sum(t for _, t in segments), output_tokens=out,
                   segments=segments)


class View:
    """A `ReplicaView` over a real cache: used blocks = the sequences' private ones + the cache's HBM ones."""

    def __init__(self, cache: CacheState, private_blocks: int = 0, load_tokens: int = 0) -> None:
        self.cache, self.private_blocks, self.load_tokens, self.total_blocks = cache, private_blocks, load_tokens, 100

    def outstanding_at(self, now: float) -> int:
        return self.load_tokens

    def used_at(self, now: float) -> int:
        return self.private_blocks + self.cache.hbm_blocks()


def cached(cache: CacheState, i: int, segments: tuple[tuple[int, int], ...]) -> Seq:
    """Admit and finish a request whose whole prompt (whole blocks) the cache then keeps."""
    r = req(i, segments)
    seq = Seq(r, i, 0, float("inf"))
    seq.hit_tokens = cache.on_admit(seq, (r.prompt_tokens - 1) // B * B).hit_tokens
    cache.on_finish(seq, r.prompt_tokens, r.prompt_tokens // B - seq.hit_tokens // B)
    return seq


def test_least_kv_counts_referenced_blocks_not_the_evictable_cache() -> None:
    """Issue 16: least-kv counted evictable cache blocks as used, so a warm replica looked full.

    Replica 0 caches a 360-token prompt (90 blocks); a running request hits its first 40 tokens
    (10 blocks, now referenced) and holds 1 private block: used 91, evictable 80, referenced 11.
    Replica 1 has no cache and 30 private blocks: used = referenced = 30. By used blocks replica 1
    looked emptier (30 < 91); by referenced ones replica 0 is (11 < 30).
    """
    warm = make_strategy("prefix").bind(B, 100)
    cached(warm, 0, ((1, 360),))
    running = Seq(req(1, ((1, 40), (2, 4))), 1, 0, float("inf"))
    assert warm.on_admit(running, 40).hit_tokens == 40
    reps = [View(warm, private_blocks=1), View(make_strategy("none").bind(B, 100), private_blocks=30)]
    assert [r.used_at(0.0) for r in reps] == [91, 30] and warm.evictable_blocks() == 80
    assert [referenced_blocks_at(r, 0.0) for r in reps] == [11, 30]
    policy = make_router("least-kv").bind(np.random.default_rng(0))
    assert policy.choose(req(2, ((3, 100),)), reps, 0.0) == 0


def test_prefix_affinity_sees_the_dram_tier() -> None:
    """Issue 16: prefix-affinity matched HBM only, so a prefix moved to host DRAM was invisible.

    Replica 0 cached a 64-token prefix (16 blocks), then evicted it to DRAM; reloading (16 blocks ·
    100 B at 1e4 B/s = 0.16 s) beats recomputing (64 tokens · 1 s). It carries 500 outstanding
    tokens, replica 1 none. The request's 64-token prefix is found on replica 0 (matched 64 vs 0),
    within ``max_imbalance_tokens``: it goes there, not to the idle replica.
    """
    ctx = CacheContext(block_bytes=100.0, dram_bytes=1e4, dram_bytes_per_s=1e4,
                       prefill_s=lambda tokens, context: 1.0 * tokens)
    prefix = make_strategy("prefix", dram=True, dram_fraction=1.0)
    warm = prefix.bind(B, 100, ctx)
    cached(warm, 0, ((1, 64),))
    assert warm.evict(16) == 16 and warm.stats()["dram_cached_blocks"] == 16 and warm.hbm_blocks() == 0
    reps = [View(warm, load_tokens=500), View(prefix.bind(B, 100, ctx))]
    r = req(1, ((1, 64), (2, 30)))
    assert [rep.cache.match(r) for rep in reps] == [64, 0]
    assert make_router("prefix-affinity").bind(np.random.default_rng(0)).choose(r, reps, 0.0) == 0
    # a tier the cache would not reload from (recomputing is faster) does not attract the request
    slow = CacheContext(block_bytes=100.0, dram_bytes=1e4, dram_bytes_per_s=1.0,
                        prefill_s=lambda tokens, context: 1e-3 * tokens)  # reload 1600 s, recompute 0.064 s
    cold = prefix.bind(B, 100, slow)
    cached(cold, 0, ((1, 64),))
    cold.evict(16)
    reps = [View(cold, load_tokens=500), View(prefix.bind(B, 100, slow))]
    assert cold.match(r) == 0
    assert make_router("prefix-affinity").bind(np.random.default_rng(0)).choose(r, reps, 0.0) == 1


def test_prefix_affinity_counts_only_the_blocks_admission_reuses() -> None:
    """A prefill computes at least its prompt's last token, so a 64-token prompt (16 blocks of 4) takes
    at most 60 tokens from the cache (`max_hit_tokens`), however much of it is cached. `match` said 64
    for a replica holding all 16 blocks, and prefix-affinity sent the request there (500 tokens of
    load) rather than to the idle replica holding 15, where it reuses as much."""
    prefix = make_strategy("prefix")
    whole, most = prefix.bind(B, 100), prefix.bind(B, 100)
    cached(whole, 0, ((1, 64),))
    cached(most, 1, ((1, 60),))
    assert whole.hbm_blocks() == 16 and most.hbm_blocks() == 15
    r = req(2, ((1, 64),))
    assert [whole.match(r), most.match(r)] == [60, 60]
    seq = Seq(r, 2, 0, float("inf"))
    assert whole.on_admit(seq, (r.prompt_tokens - 1) // B * B).hit_tokens == 60  # what admission takes
    reps = [View(whole, load_tokens=500), View(most)]
    assert make_router("prefix-affinity").bind(np.random.default_rng(0)).choose(r, reps, 0.0) == 1
