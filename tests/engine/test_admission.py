"""Admission policies: ``prompt`` (vLLM: admit on the prompt, preempt on growth) against
``reserve`` (TensorRT-LLM's GUARANTEED_NO_EVICT: the whole sequence's blocks set aside at
admission, never a preemption)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simulator.engine import AffineTimer, EngineConfig, PoolConfig, SchedulerConfig, run
from simulator.engine.cluster import simulate
from simulator.engine.replica import Replica
from simulator.errors import ConfigError
from tests.engine.helpers import check_every_step, poisson_requests, shared_prefix_requests
from tests.engine.test_invariants import assert_same_records

TIMER = AffineTimer(overhead_s=0.02, per_seq_s=1e-5, per_context_token_s=1.2e-8, per_prefill_token_s=3.6e-5)
RESERVE = SchedulerConfig(max_num_seqs=16, max_num_batched_tokens=512, admission="reserve")
SMALL = EngineConfig(kv_blocks=400, cache="none", scheduler=RESERVE)


@pytest.fixture
def promises_hold(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """After every plan and commit: blocks in use (less the cache's evictable ones) plus the growth
    still promised never exceed the pool, and the promises are the sum of the running sequences'
    own; returns the commit count."""

    def check(rep: Replica) -> None:
        assert 0 <= rep.reserved == sum(g for g, _ in rep.reserves.values()) - sum(
            rep.geometry.blocks(s.kv_tokens(rep.S), s.ov) - rep.reserves[s.key][1]
            for s in rep.running.values() if s.key in rep.reserves and s.state == 4)
        assert rep.used - rep.cache.evictable_blocks() + rep.reserved <= rep.total_blocks

    return check_every_step(monkeypatch, check)


def test_reserve_admits_by_the_whole_sequence_by_hand() -> None:
    # a pool of 20 blocks of 16 tokens, no watermark; two requests at t = 0 of 100 prompt tokens
    # (7 blocks) and 150 output tokens: each ends at 249 KV tokens = 16 blocks
    reqs = poisson_requests(2, 1e9, 100, 150, seed=0)
    sched = SchedulerConfig(max_num_seqs=8, max_num_batched_tokens=4096, watermark=0.0)
    cfg = EngineConfig(model="Llama-3.1-8B", node="1xH100", tp=1, kv_blocks=20, block_tokens=16, scheduler=sched)
    prompt = run(cfg, reqs, seed=0, timer=TIMER).requests
    # "prompt" admits the second after the first's first step (7 + 7 <= 20), then the two run out
    # of blocks at 10 each: one is preempted
    assert prompt.admit_s.iloc[1] < 0.1 < prompt.end_s.iloc[0] and prompt.preemptions.sum() == 1
    reserve = run(replace(cfg, scheduler=replace(sched, admission="reserve")), reqs, seed=0, timer=TIMER).requests
    # "reserve": 7 + 9 promised blocks leave 4 < 16; the second waits for the first to finish
    assert reserve.preemptions.sum() == 0
    assert reserve.admit_s.iloc[1] == pytest.approx(reserve.end_s.iloc[0])
    assert list(reserve.outcome) == ["completed", "completed"]


def test_reserve_output_tokens_sets_aside_max_tokens() -> None:
    # 32 blocks of 16 tokens: with each request's own 150 outputs (100 + 149 = 249 tokens, 16 blocks
    # each) both run at once; with a max_tokens of 200 (299 tokens, 19 blocks each: 38 > 32) the
    # second waits for the first; with 400 (499 tokens, 32 blocks) each fits alone, exactly
    reqs = poisson_requests(2, 1e9, 100, 150, seed=0)
    sched = SchedulerConfig(max_num_seqs=8, max_num_batched_tokens=4096, watermark=0.0, admission="reserve")
    cfg = EngineConfig(model="Llama-3.1-8B", node="1xH100", tp=1, kv_blocks=32, block_tokens=16, scheduler=sched)
    both = run(cfg, reqs, seed=0, timer=TIMER).requests
    assert both.admit_s.iloc[1] < 0.1 < both.end_s.iloc[0]
    one = run(replace(cfg, scheduler=replace(sched, reserve_output_tokens=200)), reqs, seed=0, timer=TIMER).requests
    assert one.admit_s.iloc[1] == pytest.approx(one.end_s.iloc[0])
    at_most = run(replace(cfg, scheduler=replace(sched, reserve_output_tokens=400)), reqs, seed=0, timer=TIMER).requests
    assert list(at_most.outcome) == ["completed", "completed"]


def test_a_request_whose_reservation_never_fits_is_rejected_on_arrival() -> None:
    # 40 blocks, max_tokens 300: A (16 + 300 − 1 tokens, 20 blocks) and C (10 + 299, 20 blocks) fit
    # side by side; B (400 + 299 tokens, 44 blocks) never fits. B is rejected as it arrives, naming
    # what it needs, and C runs beside A instead of waiting behind B for the replica to drain.
    from workloads.request import Request

    reqs = [Request(id=0, arrival_s=0.0, prompt_tokens=16, output_tokens=100, segments=((0, 16),)),
            Request(id=1, arrival_s=0.001, prompt_tokens=400, output_tokens=10, segments=((1, 400),)),
            Request(id=2, arrival_s=0.002, prompt_tokens=10, output_tokens=10, segments=((2, 10),))]
    sched = SchedulerConfig(max_num_seqs=8, max_num_batched_tokens=4096, watermark=0.0, admission="reserve",
                            reserve_output_tokens=300)
    cfg = EngineConfig(model="Llama-3.1-8B", node="1xH100", tp=1, kv_blocks=40, block_tokens=16, cache="none",
                       scheduler=sched)
    r = run(cfg, reqs, seed=0, timer=TIMER).requests.set_index("request_id")
    assert r.outcome.tolist() == ["completed", "rejected", "completed"]
    assert r.reason[1] == "needs 44 blocks (prompt + reserved output) > pool 40 - watermark 0"
    assert r.end_s[1] == pytest.approx(0.001)  # on arrival
    assert r.end_s[2] < r.end_s[0]  # C ran beside A


def test_snapkv_prefill_plus_growth_is_checked_on_arrival() -> None:
    # SnapKV keeps 1,600 tokens after the prefill: a 1,601-token prompt holds 101 blocks while it
    # prefills, then 100, and 99 more tokens of output take 7 more (1,699 tokens: 107 blocks); the
    # reservation asks for 101 + 7 = 108 up front, one more than the 107-block pool: rejected as
    # it arrives (it was rejected only once the replica had emptied)
    reqs = poisson_requests(1, 1.0, 1601, 100, seed=0)
    sched = SchedulerConfig(max_num_seqs=8, max_num_batched_tokens=4096, watermark=0.0, admission="reserve")
    cfg = EngineConfig(model="Llama-3.1-8B", node="1xH100", tp=1, kv_blocks=107, block_tokens=16, cache="none",
                       retention="snapkv", retention_params={"budget_tokens": 1600}, scheduler=sched)
    r = run(cfg, reqs, seed=0, timer=TIMER).requests
    assert r.reason.tolist() == ["needs 108 blocks (prompt + reserved output) > pool 107 - watermark 0"]
    prompt = run(replace(cfg, scheduler=replace(sched, admission="prompt")), reqs, seed=0, timer=TIMER).requests
    assert prompt.outcome.tolist() == ["completed"]


def test_reserve_never_preempts_where_prompt_does(promises_hold: list[int]) -> None:
    reqs = poisson_requests(80, 10.0, (50, 600), (100, 700), seed=7)
    prompt = run(replace(SMALL, scheduler=replace(RESERVE, admission="prompt")), reqs, seed=3, timer=TIMER)
    reserve = run(SMALL, reqs, seed=3, timer=TIMER)
    assert prompt.requests.preemptions.sum() > 0
    assert reserve.requests.preemptions.sum() == 0
    assert (reserve.requests.outcome == "completed").all()
    # fewer run at once, so requests wait longer for their first token
    assert reserve.requests.queue_s.mean() > prompt.requests.queue_s.mean()


@pytest.mark.parametrize("cache", ["none", "prefix"])
def test_reserve_fast_forward_equals_stepping_and_promises_return(cache: str, promises_hold: list[int]) -> None:
    reqs = shared_prefix_requests(120, seed=4, rate_per_s=20.0, output_tokens=(1, 400))
    cfg = replace(SMALL, kv_blocks=300, cache=cache, block_tokens=16)
    fast, _, _ = simulate(cfg, reqs, 3, timer=TIMER)
    slow, _, _ = simulate(replace(cfg, fast_forward=False), reqs, 3, timer=TIMER)
    import pandas as pd

    cols = list(type(fast.records[0])._fields)
    a = pd.DataFrame(sorted(fast.records), columns=cols)
    assert_same_records(a, pd.DataFrame(sorted(slow.records), columns=cols))
    assert (a.preemptions == 0).all() and (a.outcome == "completed").all()
    for rep in fast.replicas:
        assert rep.reserved == 0 and not rep.reserves


RETENTIONS = {"full": {}, "streaming-llm": {"window_tokens": 200}, "snapkv": {"budget_tokens": 300},
              "h2o": {"budget_tokens": 250}}


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(n=st.integers(1, 30), rate=st.floats(0.5, 40.0), blocks=st.integers(40, 600), seed=st.integers(0, 1000),
       seqs=st.integers(1, 12), budget=st.integers(16, 700), max_tokens=st.sampled_from([0, 200, 450]),
       cache=st.sampled_from(["none", "prefix"]), retention=st.sampled_from(list(RETENTIONS)),
       block_tokens=st.sampled_from([4, 16]))
def test_property_reserve_no_preemption_and_accounts(promises_hold: list[int], n: int, rate: float, blocks: int,
                                                     seed: int, seqs: int, budget: int, max_tokens: int, cache: str,
                                                     retention: str, block_tokens: int) -> None:
    sched = SchedulerConfig(max_num_seqs=seqs, max_num_batched_tokens=budget, admission="reserve",
                            reserve_output_tokens=max_tokens)
    config = EngineConfig(kv_blocks=blocks, block_tokens=block_tokens, cache=cache, retention=retention,
                          retention_params=RETENTIONS[retention], scheduler=sched)
    reqs = (shared_prefix_requests(n, seed, rate_per_s=rate) if cache == "prefix"
            else poisson_requests(n, rate, (1, 900), (1, 400), seed=seed))
    cluster, _, _ = simulate(config, reqs, seed, timer=TIMER)
    recs = sorted(cluster.records)
    assert [r[0] for r in recs] == list(range(n))
    for r in recs:
        assert r.preemptions == 0  # type: ignore[attr-defined]
        # completed, or turned away on arrival for what it needs (never stuck behind the queue)
        assert r.outcome == "completed" or r.reason.startswith("needs "), r  # type: ignore[attr-defined]
    for rep in cluster.replicas:
        assert rep.used == rep.cache.evictable_blocks() and rep.reserved == 0 and not rep.reserves


def test_admission_is_validated() -> None:
    with pytest.raises(ConfigError, match="admission"):
        SchedulerConfig(admission="greedy")
    with pytest.raises(ConfigError, match="reserve_output_tokens"):
        SchedulerConfig(reserve_output_tokens=100)  # only with "reserve"
    with pytest.raises(ConfigError, match=r"scheduler\.admission"):
        EngineConfig(scheduler=RESERVE, prefill_pool=PoolConfig())


@pytest.mark.parametrize("admission", ["prompt", "reserve"])
def test_a_plan_with_nothing_to_fill_skips_fill_which_would_change_nothing(monkeypatch: pytest.MonkeyPatch,
                                                                            admission: str) -> None:
    # `plan` calls `_fill` only when something is swapped, prefilling or waiting: at every plan that finds
    # none of them (and no preemption ahead, a pool with room for the step's growth), `_fill` run anyway
    # changes nothing and leaves the whole budget to the decoders
    plan = Replica.plan
    skipped = [0]

    def plan_checked(self: Replica, now: float) -> bool:
        need = self.hist[-self.S % self.B] if self.n_dec else 0
        if not (self.swapped or self.prefilling or self.waiting or self.arrived) and need <= self.free_blocks:
            before = (self.used, self.reserved, len(self.running), list(self.chunks), list(self.rejoined))
            budget, swap_s = self._fill(now, need, 0.0, False)
            assert (budget, swap_s) == (self.sched.max_num_batched_tokens - self.n_dec, 0.0)
            assert (self.used, self.reserved, len(self.running), list(self.chunks), list(self.rejoined)) == before
            skipped[0] += 1
        return plan(self, now)

    monkeypatch.setattr(Replica, "plan", plan_checked)
    sched = SchedulerConfig(max_num_seqs=16, max_num_batched_tokens=512, admission=admission)
    reqs = shared_prefix_requests(80, 3, rate_per_s=20, output_tokens=(100, 600))
    out = run(EngineConfig(kv_blocks=600, scheduler=sched), reqs, seed=0, timer=TIMER).requests
    assert skipped[0] >= 10 and (out.outcome == "completed").all()
