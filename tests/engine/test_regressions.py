"""Regressions for reviewed defects: each test names the defect it pins down."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from simulator.engine import AffineTimer, EngineConfig, SchedulerConfig
from simulator.engine.cluster import simulate
from simulator.engine.replica import Replica
from tests.engine.helpers import shared_prefix_requests
from workloads.request import Request

TIMER = AffineTimer(overhead_s=0.02, per_seq_s=1e-5, per_context_token_s=1.2e-8, per_prefill_token_s=3.6e-5)


@pytest.mark.parametrize("blocks", [80, 120, 200])
def test_swap_with_prefix_cache_ends_every_request(blocks: int, exact_blocks: list[Any]) -> None:
    """Finding 1: swap-in never evicted unreferenced cache blocks, so a replica whose pool was all
    cache with something swapped (admission off) idled forever and lost its queue."""
    reqs = shared_prefix_requests(40, 0, rate_per_s=20, output_tokens=(100, 600))
    reqs = [r for r in reqs if r.prompt_tokens + r.output_tokens < blocks * 16 * 0.9]
    config = EngineConfig(kv_blocks=blocks, cache="prefix", scheduler=SchedulerConfig(
        max_num_seqs=8, max_num_batched_tokens=300, preemption="swap"))
    cluster, _, _ = simulate(config, reqs, 0, timer=TIMER)
    assert sorted(r[0] for r in cluster.records) == [r.id for r in reqs]
    assert not exact_blocks
    for rep in cluster.replicas:
        assert rep.used == rep.cache.evictable_blocks() and rep.host_used == 0
        assert not rep.swapped and not rep.waiting and not rep.running


def test_no_preemption_while_cache_blocks_are_evictable(monkeypatch: pytest.MonkeyPatch) -> None:
    """Finding 2: a preempted sequence hands its blocks to the cache (still used), so the preemption
    loop preempted again instead of evicting them. Cached blocks go before anyone is preempted."""
    from simulator.engine.pool import BlockPool

    seen = {"preempt": 0, "with_evictable": 0}
    orig = BlockPool._preempt

    def preempt(self: Replica, now: float) -> float:
        seen["preempt"] += 1
        seen["with_evictable"] += self.cache.evictable_blocks() > 0
        return orig(self, now)

    monkeypatch.setattr(BlockPool, "_preempt", preempt)
    config = EngineConfig(kv_blocks=150, cache="prefix",
                          scheduler=SchedulerConfig(max_num_seqs=8, max_num_batched_tokens=300))
    for seed in range(3):
        simulate(config, shared_prefix_requests(40, seed, rate_per_s=20, output_tokens=(100, 600)), seed,
                 timer=TIMER)
    assert seen["preempt"] > 0 and seen["with_evictable"] == 0


def test_retention_recompute_never_rejects_an_accepted_request(exact_blocks: list[Any]) -> None:
    """Finding 3: after a recompute preemption the re-prefill held blocks(prompt + generated),
    more than the StreamingLLM window the request was sized by at enqueue, so a request that had
    produced tokens was rejected. The re-prefill now holds at most what the policy retains."""
    from workloads.request import Request

    reqs = [Request(id=0, arrival_s=0.0, prompt_tokens=1, output_tokens=1000, segments=((0, 1),)),
            Request(id=1, arrival_s=0.001, prompt_tokens=200, output_tokens=1000, segments=((1, 200),))]
    config = EngineConfig(kv_blocks=20, retention="streaming-llm", retention_params={"window_tokens": 200},
                          scheduler=SchedulerConfig(max_num_seqs=4, max_num_batched_tokens=512))
    for ff in (True, False):
        cluster, _, _ = simulate(replace(config, fast_forward=ff), reqs, 0, timer=TIMER)
        recs: list[Any] = sorted(cluster.records)
        assert [r.outcome for r in recs] == ["completed", "completed"]
        assert recs[1].preemptions >= 1
    assert not exact_blocks


def test_arrival_deadline_bounds_a_jump_when_the_queue_holds_only_preempted() -> None:
    """Finding 4: an arrival interrupted a jump only if the queue was empty; with only preempted
    (deadline-free) requests queued, a new request's timeout inside the jump was missed."""
    from workloads.request import Request

    reqs = [Request(id=0, arrival_s=0.0, prompt_tokens=16, output_tokens=600, segments=((0, 16),)),
            Request(id=1, arrival_s=0.001, prompt_tokens=16, output_tokens=600, segments=((1, 16),)),
            Request(id=2, arrival_s=8.0, prompt_tokens=16, output_tokens=10, segments=((2, 16),))]
    config = EngineConfig(kv_blocks=40, scheduler=SchedulerConfig(max_num_seqs=4, max_num_batched_tokens=512,
                                                                  queue_timeout_s=1.0))
    ends = []
    for ff in (True, False):
        cluster, _, _ = simulate(replace(config, fast_forward=ff), reqs, 0, timer=TIMER)
        recs: list[Any] = sorted(cluster.records)
        assert recs[2].outcome == "timed_out" and recs[1].preemptions == 1
        ends.append([r.end_s for r in recs])
    assert ends[0] == pytest.approx(ends[1], rel=1e-12)
    assert 9.0 <= ends[0][2] < 9.1  # the first step boundary after 8 s + 1 s


def test_arrival_on_a_step_boundary_is_admitted_at_once() -> None:
    """Finding 5: an arrival exactly at a step boundary of a jump committed one extra step
    before admission (fast-forward admitted it a step later than stepping)."""
    from simulator.engine import run
    from workloads.request import Request

    timer = AffineTimer(overhead_s=0.25, per_seq_s=0.0, per_context_token_s=0.0, per_prefill_token_s=0.0)
    reqs = [Request(id=0, arrival_s=0.0, prompt_tokens=10, output_tokens=40, segments=((0, 10),)),
            Request(id=1, arrival_s=2.0, prompt_tokens=10, output_tokens=5, segments=((1, 10),))]
    for ff in (True, False):
        r = run(EngineConfig(kv_blocks=100, fast_forward=ff), reqs, 0, timer=timer).requests
        assert list(r.admit_s) == [0.0, 2.0] and list(r.end_s) == [10.0, 3.25]


def test_kv_utilization_is_the_exact_time_mean_under_bursty_load() -> None:
    """Finding 6: samples at enqueue and plan only (none going idle), each held until the next,
    gave 0.0 or 0.47 for a pool busy ~1 % of the time. Now an exact integral ∫used·dt."""
    from simulator.engine import run
    from workloads.request import Request

    reqs = [Request(id=0, arrival_s=0.0, prompt_tokens=3000, output_tokens=50, segments=((0, 3000),)),
            Request(id=1, arrival_s=100.0, prompt_tokens=3000, output_tokens=50, segments=((1, 3000),))]
    config = EngineConfig(kv_blocks=400, cache="none", scheduler=SchedulerConfig(max_num_batched_tokens=8192))
    for interval in (1.0, 0.0):
        res = run(replace(config, sample_interval_s=interval), reqs, 0, timer=TIMER)
        busy = float((res.requests.end_s - res.requests.admit_s).sum())
        span = res.summary["makespan_s"]
        # each request holds 188 blocks (3000 tokens) from admission, growing to 191 (3049 tokens)
        assert 188 * busy / (400 * span) < res.summary["kv_utilization"] < 191 * busy / (400 * span)
        assert 0.0095 < res.summary["kv_utilization"] < 0.011
        idle = res.timeseries[res.timeseries.running == 0]
        assert (idle.time_s.round(6) == round(float(res.requests.end_s[0]), 6)).any()  # sampled going idle


def test_kv_fragmentation_is_rounding_waste_of_private_blocks() -> None:
    """Finding 7: with a shared prefix, tokens were counted once per sequence but blocks once, so
    fragmentation went negative (-1.25). It is now the private blocks' rounding waste, in [0, 1)."""
    from simulator.engine import run
    from workloads.request import Request

    reqs = [Request(id=i, arrival_s=0.05 * i, prompt_tokens=4016, output_tokens=400,
                    segments=((0, 4000), (1000 + i, 16))) for i in range(32)]
    config = EngineConfig(kv_blocks=3000, cache="prefix", sample_interval_s=0.0)
    s = run(config, reqs, 0, timer=TIMER).summary
    assert 0.0 <= s["kv_fragmentation"] < 1.0 / 16  # under one token's worth of a block per block
    assert 0.0 < s["kv_cache_share"] < s["kv_utilization"] <= 1.0
    assert s["kv_cache_blocks_mean"] == pytest.approx(s["kv_cache_share"] * 3000)


@pytest.mark.parametrize(("cache", "retention", "preemption"), [
    ("prefix", "full", "recompute"), ("prefix", "full", "swap"), ("none", "streaming-llm", "recompute"),
    ("prefix", "snapkv", "swap")])
def test_kv_integrals_equal_in_fast_forward_and_stepping(cache: str, retention: str, preemption: str) -> None:
    """The closed-form integrals of a jump equal the step-by-step sums."""
    from simulator.engine import run

    params = {"streaming-llm": {"window_tokens": 200}, "snapkv": {"budget_tokens": 100}}.get(retention, {})
    config = EngineConfig(kv_blocks=150, cache=cache, retention=retention, retention_params=params,
                          scheduler=SchedulerConfig(max_num_seqs=8, max_num_batched_tokens=300,
                                                    preemption=preemption))
    reqs = shared_prefix_requests(40, 1, rate_per_s=15, output_tokens=(50, 500))
    a = run(config, reqs, 0, timer=TIMER).summary
    b = run(replace(config, fast_forward=False), reqs, 0, timer=TIMER).summary
    for key in ("kv_utilization", "kv_fragmentation", "kv_cache_share", "kv_evictable_share"):
        assert a[key] == pytest.approx(b[key], rel=1e-9, abs=1e-12), key
    assert 0 < a["kv_utilization"] <= 1 and 0 <= a["kv_fragmentation"] < 1


def test_prefix_hits_count_other_requests_only() -> None:
    """Finding 8: a request re-admitted after a recompute preemption reused its own KV and counted
    it as a prefix hit (hit_tokens > prompt_tokens). Hits are taken at the first admission; the
    re-admissions' reuse is reported as recompute savings."""
    from simulator.engine import run

    config = EngineConfig(kv_blocks=150, cache="prefix",
                          scheduler=SchedulerConfig(max_num_seqs=8, max_num_batched_tokens=300))
    res = run(config, shared_prefix_requests(40, 0, rate_per_s=20, docs=40, output_tokens=(300, 900)), 0,
              timer=TIMER)
    r = res.requests
    assert (r.hit_tokens < r.prompt_tokens).all()
    assert r.preemptions.sum() > 0 and res.summary["resume_hit_tokens"] > 0
    assert res.summary["resume_hit_tokens"] == r.resume_hit_tokens.sum()
    assert res.summary["prefix_hit_ratio_tokens"] <= 1.0


def _warm_then_decode(out: int) -> list[Any]:
    from workloads.request import Request

    warm = [Request(id=i, arrival_s=0.001 * i, prompt_tokens=2000, output_tokens=1, segments=((i, 2000),))
            for i in range(400)]
    batch = [Request(id=400 + i, arrival_s=30.0 + 0.001 * i, prompt_tokens=100, output_tokens=out,
                     segments=((10_000 + i, 100),)) for i in range(64)]
    return warm + batch


def test_warm_prefix_cache_events_do_not_grow_with_output_tokens() -> None:
    """Finding 9: a jump was bounded by free blocks only and eviction freed ~16 blocks a time, so
    with the pool full of cache the events grew with output tokens. A jump now counts evictable
    blocks and evicts what it needs up front (stepping evicts the same blocks at the same step).

    A time-series sample due inside a jump is an event of its own, one a ``sample_interval_s`` of simulated
    time (not a token): counted apart, with the interval at 0, which takes none inside a jump."""
    from simulator.engine import run

    config = EngineConfig(kv_blocks=20000, cache="prefix", sample_interval_s=0.0,
                          scheduler=SchedulerConfig(max_num_seqs=256, max_num_batched_tokens=8192))
    events = {out: run(config, _warm_then_decode(out), 0, timer=TIMER).summary["events"] for out in (200, 3200)}
    full = run(replace(config, cache="none"), _warm_then_decode(3200), 0, timer=TIMER).summary["events"]
    assert events[200] == events[3200] == full
    sampled = run(replace(config, sample_interval_s=1.0), _warm_then_decode(3200), 0, timer=TIMER)
    jump_s = sampled.summary["makespan_s"] - 30.0  # the 64 decoders' 3,200 steps, in a jump or a few
    extra = sampled.summary["events"] - events[3200]
    assert 0.9 * jump_s - 2 <= extra <= jump_s + 2  # a sample a second inside the jumps, and no other event


def test_warm_prefix_cache_fast_forward_equals_stepping(exact_blocks: list[Any]) -> None:
    from simulator.engine import run
    from tests.engine.test_invariants import assert_same_records

    config = EngineConfig(kv_blocks=7000, cache="prefix",
                          scheduler=SchedulerConfig(max_num_seqs=256, max_num_batched_tokens=8192))
    reqs = _warm_then_decode(300)
    reqs += [replace(r, id=464 + i, arrival_s=31.0 + 0.5 * i) for i, r in enumerate(reqs[380:400])]  # re-hits
    fast = run(config, reqs, 0, timer=TIMER)
    slow = run(replace(config, fast_forward=False), reqs, 0, timer=TIMER)
    assert_same_records(fast.requests, slow.requests)
    assert fast.summary["cache_evicted_blocks"] == slow.summary["cache_evicted_blocks"] > 0
    assert fast.requests.hit_tokens.iloc[464:].sum() > 0
    assert not exact_blocks


def test_swap_out_seconds_are_paid_when_everything_is_preempted(monkeypatch: pytest.MonkeyPatch) -> None:
    """Suspected issue (real): when plan preempts every running sequence in swap mode it plans
    afresh and dropped the swap-out seconds it had accumulated. With a constant step time, every
    swap-out and swap-in must show in the step times: paid = 2 × Σ swap-out seconds."""
    from simulator.engine.pool import BlockPool
    from workloads.request import Request

    outs: list[float] = []
    orig = BlockPool._preempt

    def preempt(self: Replica, now: float) -> float:
        s = orig(self, now)
        outs.append(s)
        return s

    monkeypatch.setattr(BlockPool, "_preempt", preempt)
    timer = AffineTimer(overhead_s=0.02, per_seq_s=0.0, per_context_token_s=0.0, per_prefill_token_s=0.0)
    # request 2 pins request 0's cached 160-token prefix; once it is swapped out, request 1 grows
    # until the pinned prefix leaves it no block: it is swapped out too, and nothing runs
    reqs = [Request(id=0, arrival_s=0.0, prompt_tokens=160, output_tokens=1, segments=((1, 160),)),
            Request(id=1, arrival_s=1.0, prompt_tokens=16, output_tokens=600, segments=((2, 16),)),
            Request(id=2, arrival_s=1.001, prompt_tokens=176, output_tokens=300, segments=((1, 160), (3, 16)))]
    config = EngineConfig(kv_blocks=40, cache="prefix", scheduler=SchedulerConfig(preemption="swap"))
    cluster, _, _ = simulate(config, reqs, 0, timer=timer)
    rep = cluster.replicas[0]
    paid = sum(g0 - 0.02 for g0, k in zip(rep.log_g0, rep.log_k, strict=True) if k == 1)
    assert len(outs) == 2 and all(s > 0 for s in outs)
    assert paid == pytest.approx(2 * sum(outs), rel=1e-9)
    assert [r.outcome for r in cluster.records] == ["completed"] * 3  # type: ignore[attr-defined]


def test_mixed_fleet_kv_metrics_are_capacity_weighted() -> None:
    """Suspected issue (real): kv_utilization divided by the average pool and
    kv_blocks_per_replica reported replica 0 only. Now Σ∫used / (span · Σ pools); the largest
    pool and the total are reported."""
    from simulator.engine import PoolConfig, run
    from simulator.engine.cluster import Cluster
    from simulator.engine.result import summarize

    captured: list[Cluster] = []
    import simulator.engine.result as result_mod

    def spy(config: EngineConfig, cluster: Cluster, *args: Any) -> dict[str, Any]:
        captured.append(cluster)
        return summarize(config, cluster, *args)

    from tests.engine.helpers import poisson_requests

    reqs = poisson_requests(40, 10.0, (100, 800), (10, 100), seed=0)
    config = EngineConfig(model="Llama-3.1-8B", tp=8, more_pools=(PoolConfig(node="8xH100", n_nodes=1, tp=4),))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(result_mod, "summarize", spy)
        s = run(config, reqs, seed=1, timer=TIMER).summary
    reps = captured[0].replicas
    pools = [r.total_blocks for r in reps]
    assert len(set(pools)) == 2  # tp 8 and tp 4 replicas hold different pools
    assert s["kv_blocks_per_replica"] == max(pools) and s["kv_blocks_total"] == sum(pools)
    used = sum(r.used_block_s for r in reps)
    assert s["kv_utilization"] == pytest.approx(used / (s["makespan_s"] * sum(pools)))


def test_prompt_is_shared_once_its_prefill_completes(exact_blocks: list[Any]) -> None:
    """Finding 10 (modelling gap): prompt blocks entered the radix tree only at finish or
    preemption, so requests arriving while the first one decoded recomputed the shared 4000-token
    prefix. As in SGLang, they are inserted (and pinned) when the prefill completes."""
    from simulator.engine import run
    from tests.engine.test_invariants import assert_same_records
    from workloads.request import Request

    reqs = [Request(id=i, arrival_s=0.05 * i, prompt_tokens=4016, output_tokens=400,
                    segments=((0, 4000), (1000 + i, 16))) for i in range(32)]
    config = EngineConfig(kv_blocks=3000, cache="prefix", sample_interval_s=0.0)
    fast = run(config, reqs, 0, timer=TIMER)
    assert (fast.requests.hit_tokens.iloc[1:] == 4000).all()
    # the shared prefix is held once: 250 blocks + 32 private tails of ≤ 26 blocks
    assert fast.timeseries.kv_blocks_used.max() <= 250 + 32 * 26
    slow = run(replace(config, fast_forward=False), reqs, 0, timer=TIMER)
    assert_same_records(fast.requests, slow.requests)
    assert not exact_blocks


def test_swapped_sequences_pinning_the_pool_fall_back_to_recompute(monkeypatch: pytest.MonkeyPatch,
                                                                   exact_blocks: list[Any]) -> None:
    """Finding 1, second half: swapped sequences keep their cached prompts pinned in HBM; when they
    leave no room for any of them to come back and nothing runs, the head is recomputed instead
    (no request is lost or rejected after producing tokens)."""
    from simulator.engine.pool import BlockPool

    fell_back = [0]
    orig = BlockPool._unblock_empty_replica

    def unblock(self: Replica, now: float) -> None:
        fell_back[0] += bool(self.swapped)
        orig(self, now)

    monkeypatch.setattr(BlockPool, "_unblock_empty_replica", unblock)
    config = EngineConfig(kv_blocks=80, cache="prefix", scheduler=SchedulerConfig(
        max_num_seqs=8, max_num_batched_tokens=300, preemption="swap"))
    for seed in range(3):
        reqs = [r for r in shared_prefix_requests(40, seed, rate_per_s=20, output_tokens=(100, 600))
                if r.prompt_tokens + r.output_tokens < 80 * 16 * 0.9]
        cluster, _, _ = simulate(config, reqs, seed, timer=TIMER)
        assert sorted(r[0] for r in cluster.records) == [r.id for r in reqs]
        assert {r.outcome for r in cluster.records} == {"completed"}  # type: ignore[attr-defined]
    assert fell_back[0] > 0
    assert not exact_blocks


def test_least_kv_does_not_count_evictable_cache_blocks_as_used() -> None:
    """Issue 16: least-kv counted a replica's unreferenced cache blocks as used, so warm replicas
    looked full. Two replicas: request 0 (1600 tokens) leaves 100 cached blocks on one of them
    and ends; request 1 (a long decode) arrives when both hold no referenced block (a random
    pick); request 2 arrives while request 1 runs and must go to the *other* replica, whichever
    holds the cache. Before, 1 went to the replica without the cache (0 < 100 used blocks) and 2
    followed it there (1's few dozen blocks < 100)."""
    config = EngineConfig(kv_blocks=400, tp=4, cache="prefix", router="least-kv")
    reqs = [Request(id=i, arrival_s=t, prompt_tokens=p, output_tokens=o, segments=((i, p),))
            for i, (t, p, o) in enumerate([(0.0, 1600, 2), (5.0, 160, 3000), (10.0, 160, 10)])]
    for seed in range(6):
        cluster, _, _ = simulate(config, reqs, seed, timer=TIMER)
        replica = {r[0]: r.replica for r in cluster.records}  # type: ignore[attr-defined]
        assert len(cluster.replicas) == 2 and replica[2] != replica[1], seed
        warm = cluster.replicas[replica[0]].cache
        assert warm.stats()["hbm_cached_blocks"] >= 100


def test_fifo_and_lru_eviction_differ_in_the_engine() -> None:
    """Issue 16: ``fifo`` gave exactly ``lru``'s records (0 of 12,031 requests differed on a trace).
    Under pressure, with shared documents, they must part: FIFO evicts a popular document's
    prefix (the oldest blocks) with everything cached below it, LRU keeps it while it is used."""
    config = EngineConfig(kv_blocks=150, cache="prefix", scheduler=SchedulerConfig(
        max_num_seqs=8, max_num_batched_tokens=300))
    reqs = shared_prefix_requests(120, 4, rate_per_s=4, output_tokens=(5, 60))
    hits = {}
    for policy in ("lru", "fifo"):
        cluster, _, _ = simulate(replace(config, cache_params={"eviction": policy}), reqs, 0, timer=TIMER)
        hits[policy] = {r[0]: r.hit_tokens for r in cluster.records}  # type: ignore[attr-defined]
    differ = sum(hits["lru"][i] != hits["fifo"][i] for i in hits["lru"])
    assert differ > 0 and sum(hits["fifo"].values()) < sum(hits["lru"].values())


def test_watermark_blocks_are_the_fraction_as_written() -> None:
    """helper-200: the watermark's blocks were ``ceil(watermark × pool)`` in floating point, and 0.07 × 100 is
    7.000000000000001: 8 blocks were kept back, not 7, and a request of 93 blocks (100 − 7) was rejected as
    "needs 93 blocks > pool 100 - watermark 8"."""
    sched = SchedulerConfig(watermark=0.07, max_num_batched_tokens=2048)
    config = EngineConfig(model="Llama-3.1-8B", node="1xH100", tp=1, kv_blocks=100, cache="none", scheduler=sched)
    # 1000 + 489 − 1 = 1488 KV tokens at most: 93 blocks of 16
    req = Request(id=0, arrival_s=0.0, prompt_tokens=1000, output_tokens=489, segments=((0, 1000),))
    cluster, _, _ = simulate(config, [req], 0, timer=TIMER)
    assert cluster.replicas[0].watermark_blocks == 7
    assert [(r[0], r[13]) for r in cluster.records] == [(0, "completed")]
    cluster, _, _ = simulate(replace(config, kv_blocks=1000), [req], 0, timer=TIMER)  # 0.07 × 1000 = 70.00000000000001
    assert cluster.replicas[0].watermark_blocks == 70


@pytest.mark.parametrize("fast_forward", [True, False])
def test_queue_timeout_is_checked_between_steps_and_spares_admitted_requests(fast_forward: bool) -> None:
    """helper-200: `SchedulerConfig.queue_timeout_s` said a request "still waiting" that long leaves timed out;
    the engine drops only requests never admitted, at the first plan at or after the deadline. Pinned by hand
    (step = 0.01 s + 1 ms a prompt token, a decode 0.01 s) as its docstring now says."""
    timer = AffineTimer(overhead_s=0.01, per_context_token_s=0.0, per_prefill_token_s=1e-3)

    def records(reqs: list[Request], blocks: int, **sched: Any) -> list[tuple[Any, ...]]:
        config = EngineConfig(kv_blocks=blocks, cache="none", fast_forward=fast_forward,
                              scheduler=SchedulerConfig(watermark=0.0, queue_timeout_s=0.2, **sched))
        cluster, _, _ = simulate(config, reqs, 0, timer=timer)
        return sorted(cluster.records)

    def req(i: int, t: float, prompt: int, output: int) -> Request:
        return Request(id=i, arrival_s=t, prompt_tokens=prompt, output_tokens=output, segments=((i, prompt),))

    # one seat: request 1 (deadline 0.3) arrives during request 0's 300-token prefill step (0 to 0.31 s) and
    # leaves timed out at its end, 0.21 s after it arrived
    r0, r1 = records([req(0, 0.0, 300, 2), req(1, 0.1, 10, 2)], 20, max_num_seqs=1)
    assert (r0[13], r0[7]) == ("completed", pytest.approx(0.32))
    assert (r1[13], r1[7]) == ("timed_out", pytest.approx(0.31))
    # 10 blocks, two requests of 60 + 60: both prefill in 0.13 s, the newer is preempted (recompute) at the 21st
    # decode step (0.33 s, a 6th block each) and waits, past its 0.2 s deadline, for the older to end at 0.72 s;
    # it is prefilled again (81 tokens, 0.091 s) and completes 38 steps later
    r0, r1 = records([req(0, 0.0, 60, 60), req(1, 0.0, 60, 60)], 10)
    assert (r0[13], r0[7]) == ("completed", pytest.approx(0.72))
    assert (r1[13], r1[12], r1[7]) == ("completed", 1, pytest.approx(0.72 + 0.091 + 0.38))


def test_watermark_blocks_are_exact_at_any_pool_size() -> None:
    """helper-205: rounding the floating-point product to 9 places left 0.07 × 10^8 = 7,000,000.000000001 one
    block over (7,000,001); the fraction as written, exactly, gives 7,000,000 at every pool size."""
    from simulator.engine.replica import watermark_blocks

    assert watermark_blocks(0.07, 100) == 7
    assert watermark_blocks(0.07, 10**8) == 7_000_000
    assert watermark_blocks(0.137, 10**8) == 13_700_000
    assert watermark_blocks(0.01, 12_345) == 124  # 123.45 rounded up
    assert watermark_blocks(0.0, 10**8) == 0 and watermark_blocks(1e-9, 10**8) == 1
