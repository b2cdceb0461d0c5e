"""Prefill/decode disaggregation: the engine's invariants plus the transfer invariants, by hand and fuzzed.

Checked after every plan and commit of every replica (`watch`): blocks used within the pool and equal
to what the sequences and the cache hold (a prefill replica counts the blocks of the sequences it
hands over until their transfers end; a decode replica counts the blocks it reserved from the
transfer's start); running plus incoming sequences within ``max_num_seqs``; a sequence decodes on a
decode replica only once its transfer ended. At the end: every request ended once, every transfer
that started ended, blocks and outstanding tokens back to zero on both sides; the same seed gives
the same records and fast-forward gives stepping's.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simulator.engine import AffineTimer, EngineConfig, PoolConfig, SchedulerConfig, run
from simulator.engine.cluster import Cluster, simulate
from simulator.engine.decode import DECODE
from simulator.engine.handoff import DECODE_ONLY, PREFILL
from simulator.engine.replica import Replica
from tests.engine.conftest import expected_used
from tests.engine.helpers import poisson_requests, shared_prefix_requests
from tests.engine.test_invariants import assert_same_records

TIMER = AffineTimer(overhead_s=0.02, per_seq_s=1e-5, per_context_token_s=1.2e-8, per_prefill_token_s=3.6e-5)
SPLIT = EngineConfig(tp=4, kv_blocks=400, prefill_pool=PoolConfig(node="8xH100", n_nodes=1, tp=4),
                     scheduler=SchedulerConfig(max_num_seqs=16, max_num_batched_tokens=512))
TRANSFER_COLS = ["transfer_start_s", "transfer_end_s"]
KV_FIGURES = ("kv_utilization", "kv_cache_share", "kv_evictable_share", "kv_referenced_utilization",
              "kv_fragmentation", "mean_concurrency")


@pytest.fixture
def watch(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Check the invariants above after every plan and commit; return the violations."""
    bad: list[Any] = []
    plan, commit, release = Replica.plan, Replica.commit, Replica.release_handed

    def check(rep: Replica, where: str, now: float) -> None:
        if not 0 <= rep.used <= rep.total_blocks or expected_used(rep) != rep.used:
            bad.append((where, rep.index, "blocks", rep.used, expected_used(rep), rep.total_blocks))
        if len(rep.running) + len(rep.incoming) + len(rep.arrived) > rep.sched.max_num_seqs:
            bad.append((where, rep.index, "max_num_seqs", len(rep.running), len(rep.incoming), len(rep.arrived)))
        if rep.role == PREFILL and rep.n_dec:
            bad.append((where, rep.index, "a prefill replica decodes", rep.n_dec))
        for s in rep.running.values():
            if s.state == DECODE and not s.transfer_end_s <= now and not math.isnan(s.transfer_start_s):
                bad.append((where, rep.index, "decodes before its KV arrived", s.request.id, now, s.transfer_end_s))

    def plan_checked(self: Replica, now: float) -> bool:
        out = plan(self, now)
        check(self, "plan", now)
        return out

    def commit_checked(self: Replica, n: int, end_s: float) -> None:
        commit(self, n, end_s)
        check(self, "commit", end_s)

    def release_checked(self: Replica, seq: Any, now: float) -> None:
        if now != seq.transfer_end_s or seq.key not in self.handing:
            bad.append(("release", self.index, "freed before the transfer ended", seq.request.id, now))
        release(self, seq, now)

    monkeypatch.setattr(Replica, "plan", plan_checked)
    monkeypatch.setattr(Replica, "commit", commit_checked)
    monkeypatch.setattr(Replica, "release_handed", release_checked)
    return bad


def assert_drained(cluster: Cluster, n: int) -> pd.DataFrame:
    """Every request ended once, every transfer ended, and both sides hold nothing."""
    recs = pd.DataFrame(cluster.records).sort_values("request_id")
    assert list(recs.request_id) == list(range(n))
    assert set(recs.outcome) <= {"completed", "rejected", "timed_out"}
    assert cluster.transfers is not None
    links = cluster.transfers.links
    assert all(link.started == link.ended and link.in_flight == 0 for link in links)
    moved = recs[recs.transfer_start_s.notna()]
    assert sum(link.started for link in links) == len(moved)
    assert sum(link.bytes_moved for link in links) == pytest.approx(moved.transfer_bytes.sum())
    assert not cluster.transfers.queue and not cluster.transfers.moving
    for rep in cluster.replicas:
        assert rep.used == rep.cache.evictable_blocks()
        assert rep.host_used == 0 and rep.n_dec == 0 and rep.kv_sum == 0 and rep.outstanding_tokens == 0
        assert not (rep.running or rep.waiting or rep.swapped or rep.handing or rep.incoming or rep.arrived)
    return recs


def test_a_handed_off_request_by_hand(watch: list[Any]) -> None:
    # one 256-token prompt, 10 output tokens; Llama-3-70B bf16, 320 KiB a token: 16 blocks of 16
    # tokens = 256 tokens = 83.9 MB of KV; a TP4 decode replica's GPU receives its 2 of 8 KV heads,
    # 20.97 MB, over one 400 Gb/s NIC (50 GB/s): 419.4 µs, + 5 µs latency
    reqs = poisson_requests(1, 1.0, 256, 10, seed=0)
    cluster, _, _ = simulate(SPLIT, reqs, 0, timer=TIMER)
    (rec,) = assert_drained(cluster, 1).itertuples()
    assert cluster.replicas[rec.replica].role == PREFILL
    assert cluster.replicas[rec.decode_replica].role == DECODE_ONLY
    first = rec.arrival_s + rec.ttft_s
    assert rec.ttft_s == pytest.approx(0.02 + 3.6e-5 * 256)  # the prefill step alone
    assert rec.transfer_start_s == first  # room at once on an empty decode replica
    assert rec.transfer_bytes == 256 * 327680 / 4
    assert rec.transfer_end_s - rec.transfer_start_s == pytest.approx(rec.transfer_bytes / 50e9 + 5e-6, rel=1e-9)
    # then 9 decode steps, the first starting at the arrival: a + b·(256 + 1) growing by b a step
    steps = [0.02 + 1e-5 + 1.2e-8 * (257 + i) for i in range(9)]
    assert rec.end_s == pytest.approx(rec.transfer_end_s + sum(steps), rel=1e-9)
    # the gap from the first token to the second includes the transfer
    assert rec.tpot_mean_s == pytest.approx((rec.end_s - first) / 9)
    # the prefill replica's cache keeps the prompt's 16 blocks, referenced by the sequence until its
    # transfer ends and by nobody after: evictable from then to the end of the run, not from the
    # prefill's end (the release comes between two of that replica's commits)
    prefill = cluster.replicas[rec.replica]
    assert prefill.evictable_block_s == pytest.approx(16 * (rec.end_s - rec.transfer_end_s), rel=1e-12)
    assert prefill.cache_block_s == pytest.approx(16 * (rec.end_s - first), rel=1e-12)
    assert not watch


def test_short_prompts_stay_on_the_decode_pool(watch: list[Any]) -> None:
    reqs = poisson_requests(60, 10.0, (20, 400), (2, 50), seed=1)
    cluster, _, _ = simulate(replace(SPLIT, short_prompt_tokens=200), reqs, 0, timer=TIMER)
    recs = assert_drained(cluster, 60)
    short = recs.prompt_tokens <= 200
    roles = [cluster.replicas[i].role for i in recs.replica]
    assert [r == DECODE_ONLY for r in roles] == list(short)
    assert recs[short].transfer_start_s.isna().all() and (recs[short].decode_replica == recs[short].replica).all()
    assert recs[~short].transfer_end_s.notna().all()
    assert not watch


def test_decode_room_is_reserved_before_the_transfer(watch: list[Any]) -> None:
    # a decode pool of 120 blocks: long outputs fill it, so hand-offs wait in the queue holding their
    # prefill blocks, and the prefill replicas stop admitting until transfers free them
    config = replace(SPLIT, kv_blocks=120)
    reqs = poisson_requests(60, 30.0, (100, 600), (200, 800), seed=2)
    cluster, _, _ = simulate(config, reqs, 0, timer=TIMER)
    recs = assert_drained(cluster, 60)
    done = recs[recs.outcome == "completed"]
    wait = done.transfer_start_s - (done.arrival_s + done.ttft_s)
    assert (wait >= 0).all() and (wait > 0.1).any()  # some waited for decode room
    assert not watch


def test_a_request_no_decode_replica_can_hold_is_rejected_at_once() -> None:
    config = replace(SPLIT, kv_blocks=60)  # 60 blocks, watermark 1: 59 x 16 = 944 tokens
    reqs = poisson_requests(2, 1.0, 500, (100, 600), seed=0)
    reqs = [replace(reqs[0], output_tokens=400), replace(reqs[1], output_tokens=500)]
    cluster, _, _ = simulate(config, reqs, 0, timer=TIMER)
    recs = assert_drained(cluster, 2)
    assert list(recs.outcome) == ["completed", "rejected"]
    assert "decode replica" in recs.reason.iloc[1]


CASES: dict[str, tuple[EngineConfig, dict[str, Any]]] = {
    "light": (SPLIT, dict(n=60, rate=4.0, prompt=(20, 600), out=(1, 200))),
    "queueing": (replace(SPLIT, kv_blocks=150), dict(n=120, rate=25.0, prompt=(50, 600), out=(50, 700))),
    "preempt-swap": (replace(SPLIT, kv_blocks=150, scheduler=replace(SPLIT.scheduler, preemption="swap")),
                     dict(n=100, rate=25.0, prompt=(50, 600), out=(100, 700))),
    "chunked-runs": (replace(SPLIT, kv_blocks=600, scheduler=replace(SPLIT.scheduler, max_num_batched_tokens=64)),
                     dict(n=60, rate=8.0, prompt=(300, 1500), out=(20, 300))),
    "timeouts": (replace(SPLIT, kv_blocks=150, scheduler=replace(SPLIT.scheduler, queue_timeout_s=2.0)),
                 dict(n=100, rate=30.0, prompt=(50, 600), out=(100, 700))),
}


@pytest.mark.parametrize("name", list(CASES))
def test_fast_forward_equals_stepping(name: str, watch: list[Any]) -> None:
    config, w = CASES[name]
    reqs = poisson_requests(w["n"], w["rate"], w["prompt"], w["out"], seed=7)
    fast = run(config, reqs, seed=3, timer=TIMER)
    slow = run(replace(config, fast_forward=False), reqs, seed=3, timer=TIMER)
    assert_same_records(fast.requests, slow.requests)
    for col in [*TRANSFER_COLS, "transfer_bytes"]:
        np.testing.assert_allclose(fast.requests[col], slow.requests[col], rtol=1e-9, atol=1e-9, err_msg=col)
    assert list(fast.requests.decode_replica) == list(slow.requests.decode_replica)
    for key in KV_FIGURES:  # time integrals, with releases and reservations between commits
        assert fast.summary[key] == pytest.approx(slow.summary[key], rel=1e-9), key
    assert fast.summary["events"] < slow.summary["events"]
    assert fast.requests.transfer_start_s.notna().any()
    assert not watch


def test_fast_forward_equals_stepping_with_prefill_replicas_in_lockstep(watch: list[Any]) -> None:
    """Two prefill replicas held up by full pools (SnapKV keeps 100 tokens a sequence, 150 blocks) wake at
    one instant and then run full 64-token chunks of equal price side by side: their commits fall at
    the same instants, and which hands off first decides the decode replicas. SimPy orders events of
    one time by when they were scheduled, and a chunked run is scheduled once where stepping schedules
    each step, so that order followed the engine's mode (here request 248 or 249 went first, and 58
    requests then decoded elsewhere). A replica's timeouts now go after the other events of their time,
    in replica order (`_ReplicaProcess.prio`), whatever the mode."""
    config = EngineConfig(model="Llama-3.1-8B", n_nodes=2, tp=2, kv_blocks=150, cache="none", router="round-robin",
                          prefill_pool=PoolConfig(node="8xH100", tp=4), retention="snapkv",
                          retention_params={"budget_tokens": 100},
                          scheduler=SchedulerConfig(max_num_seqs=64, max_num_batched_tokens=64, watermark=0.1))
    reqs = shared_prefix_requests(200, 1, rate_per_s=60.0, output_tokens=(1, 800))
    fast = run(config, reqs, seed=1, timer=TIMER)
    slow = run(replace(config, fast_forward=False), reqs, seed=1, timer=TIMER)
    first = fast.requests.arrival_s + fast.requests.ttft_s
    by_replica = [set(first[fast.requests.replica == r].round(9)) for r in sorted(set(fast.requests.replica))]
    assert len(by_replica) == 2 and len(by_replica[0] & by_replica[1]) >= 2  # prefills end together
    assert_same_records(fast.requests, slow.requests)
    assert list(fast.requests.decode_replica) == list(slow.requests.decode_replica)
    assert not watch


def test_same_seed_same_records() -> None:
    config, w = CASES["queueing"]
    reqs = poisson_requests(w["n"], w["rate"], w["prompt"], w["out"], seed=5)
    a, b = run(config, reqs, seed=11, timer=TIMER), run(config, reqs, seed=11, timer=TIMER)
    pd.testing.assert_frame_equal(a.requests, b.requests)
    pd.testing.assert_frame_equal(a.timeseries, b.timeseries)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(n=st.integers(1, 40), rate=st.floats(0.5, 40.0), blocks=st.integers(60, 500),
       preemption=st.sampled_from(["recompute", "swap"]), seed=st.integers(0, 1000),
       seqs=st.integers(1, 12), budget=st.integers(16, 700), p_tp=st.sampled_from([2, 4, 8]),
       d_tp=st.sampled_from([2, 4, 8]), short=st.sampled_from([0, 0, 100, 400]),
       cache=st.sampled_from(["none", "prefix"]), retention=st.sampled_from(["full", "streaming-llm"]),
       timeout=st.sampled_from([math.inf, math.inf, 1.5]))
def test_property_disaggregated_invariants(n: int, rate: float, blocks: int, preemption: str, seed: int, seqs: int,
                                           budget: int, p_tp: int, d_tp: int, short: int, cache: str,
                                           retention: str, timeout: float, watch: list[Any]) -> None:
    watch.clear()  # the fixture lives across examples
    config = EngineConfig(
        tp=d_tp, kv_blocks=blocks, prefill_pool=PoolConfig(node="8xH100", tp=p_tp), short_prompt_tokens=short,
        cache=cache, retention=retention,
        retention_params={"window_tokens": 256, "sink_tokens": 4} if retention == "streaming-llm" else {},
        scheduler=SchedulerConfig(max_num_seqs=seqs, max_num_batched_tokens=budget, preemption=preemption,
                                  queue_timeout_s=timeout))
    reqs = (shared_prefix_requests(n, seed, rate_per_s=rate) if cache == "prefix"
            else poisson_requests(n, rate, (1, 900), (1, 400), seed=seed))
    fast, _, _ = simulate(config, reqs, seed, timer=TIMER)
    slow, _, _ = simulate(replace(config, fast_forward=False), reqs, seed, timer=TIMER)
    a, b = assert_drained(fast, n), assert_drained(slow, n)
    assert_same_records(a.reset_index(drop=True), b.reset_index(drop=True))
    np.testing.assert_allclose(a[TRANSFER_COLS].to_numpy(), b[TRANSFER_COLS].to_numpy(), rtol=1e-9, atol=1e-9)
    done = a[a.transfer_start_s.notna()]
    assert (done.transfer_start_s >= done.arrival_s + done.ttft_s - 1e-9).all()  # after its first token
    assert (done.transfer_end_s > done.transfer_start_s).all()
    assert (done.end_s > done.transfer_end_s).all()  # at least one token decoded after the KV arrived
    assert not watch


@pytest.mark.parametrize("config", [SPLIT, replace(SPLIT, prefill_pool=None, cache="prefix", kv_blocks=120)],
                         ids=["disaggregated", "aggregated-prefix"])
def test_every_replica_attribute_is_a_slot(config: EngineConfig) -> None:
    """`Replica.__slots__` names every attribute a run sets (the speed of the scheduler's reads and
    writes rests on it): none lands in the instance dict, in either role, idle or preempting."""
    reqs = poisson_requests(120, 40.0, (50, 900), (1, 200), seed=3)
    cluster, _, _ = simulate(config, reqs, 0, timer=TIMER)
    assert len(cluster.records) == len(reqs)
    assert {rep.role for rep in cluster.replicas} >= ({PREFILL, DECODE_ONLY} if config.prefill_pool else set())
    assert sum(rep.n_preempt for rep in cluster.replicas) > 0 or config.prefill_pool
    for rep in cluster.replicas:
        assert vars(rep) == {}, sorted(vars(rep))
