"""vLLM's long-prefill threshold: a sequence prefills at most that many tokens a step."""

from __future__ import annotations

from dataclasses import replace

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simulator.engine import AffineTimer, EngineConfig, SchedulerConfig, run
from simulator.engine.cluster import simulate
from simulator.errors import ConfigError
from tests.engine.helpers import poisson_requests
from tests.engine.test_invariants import assert_same_records

# 10 ms a step plus 10 µs a prompt token: a step's time says how many prompt tokens it ran
TIMER = AffineTimer(overhead_s=0.01, per_seq_s=0.0, per_context_token_s=0.0, per_prefill_token_s=1e-5)


def test_threshold_splits_one_prompt_into_steps_of_at_most_that_many_tokens():
    # one 1,000-token prompt, budget 1,024: one step of 1,000 tokens without a threshold (20 ms),
    # four steps of 256, 256, 256 and 232 with threshold 256 (4 x 10 ms + 1,000 x 10 us = 50 ms)
    reqs = poisson_requests(1, 1.0, 1000, 1, seed=0)
    sched = SchedulerConfig(max_num_seqs=8, max_num_batched_tokens=1024)
    cfg = EngineConfig(model="Llama-3.1-8B", node="1xH100", tp=1, kv_blocks=500, scheduler=sched)
    whole = run(cfg, reqs, seed=0, timer=TIMER).requests
    capped = run(replace(cfg, scheduler=replace(sched, long_prefill_token_threshold=256)), reqs, seed=0,
                 timer=TIMER).requests
    assert whole.ttft_s.iloc[0] - whole.queue_s.iloc[0] == pytest.approx(0.020)
    assert capped.ttft_s.iloc[0] - capped.queue_s.iloc[0] == pytest.approx(0.050)


def test_threshold_lets_prompts_share_a_step():
    # two 1,000-token prompts, the second 1 ns after the first step began; budget 1,024, threshold
    # 512: step 1 prefills 512 of the first (15.12 ms), step 2 its last 488 beside 512 of the second
    # (20 ms: the first token at 35.12 ms), step 3 the second's last 488 (14.88 ms: 50 ms). Without
    # the threshold step 1 would run all 1,000 of the first, and the second would wait for it.
    reqs = poisson_requests(2, 1e9, 1000, 1, seed=0)
    sched = SchedulerConfig(max_num_seqs=8, max_num_batched_tokens=1024, long_prefill_token_threshold=512)
    cfg = EngineConfig(model="Llama-3.1-8B", node="1xH100", tp=1, kv_blocks=500, scheduler=sched)
    r = run(cfg, reqs, seed=0, timer=TIMER).requests
    assert list(r.end_s.round(6)) == [0.03512, 0.05]


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(n=st.integers(1, 30), rate=st.floats(0.5, 40.0), blocks=st.integers(80, 600), seed=st.integers(0, 1000),
       budget=st.integers(16, 700), threshold=st.integers(1, 400))
def test_property_threshold_fast_forward_equals_stepping(n: int, rate: float, blocks: int, seed: int, budget: int,
                                                         threshold: int) -> None:
    sched = SchedulerConfig(max_num_seqs=8, max_num_batched_tokens=budget, long_prefill_token_threshold=threshold)
    config = EngineConfig(kv_blocks=blocks, scheduler=sched)
    reqs = poisson_requests(n, rate, (1, 900), (1, 300), seed=seed)
    timer = AffineTimer(overhead_s=0.02, per_seq_s=1e-5, per_context_token_s=1.2e-8, per_prefill_token_s=3.6e-5)
    fast, _, _ = simulate(config, reqs, seed, timer=timer)
    slow, _, _ = simulate(replace(config, fast_forward=False), reqs, seed, timer=timer)
    cols = list(type(fast.records[0])._fields)
    a = pd.DataFrame(sorted(fast.records), columns=cols)
    assert_same_records(a, pd.DataFrame(sorted(slow.records), columns=cols))
    assert list(a.request_id) == list(range(n))


def test_threshold_is_validated():
    with pytest.raises(ConfigError, match="long_prefill_token_threshold"):
        SchedulerConfig(long_prefill_token_threshold=-1)


@pytest.mark.parametrize(("budget", "threshold"), [(512, 512), (512, 511), (512, 1024), (2048, 256)])
def test_threshold_with_the_cost_model_fast_forward_equals_stepping(budget: int, threshold: int,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    # the cost model's timer prices a chunked-prefill run in one call (StepModel.prefill_run_s):
    # with the threshold at, just below and above the budget, runs equal stepping bit for bit
    from simulator.cost.step_model import StepModel

    calls = [0]
    priced = StepModel.prefill_run_s

    def counted(self: StepModel, *args: object, **kwargs: object) -> object:
        calls[0] += 1
        return priced(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(StepModel, "prefill_run_s", counted)
    sched = SchedulerConfig(max_num_seqs=16, max_num_batched_tokens=budget, long_prefill_token_threshold=threshold)
    config = EngineConfig(model="Llama-3.1-8B", node="1xH100", tp=1, cache="none", scheduler=sched)
    reqs = poisson_requests(60, 4.0, (200, 6000), (1, 200), seed=3)
    fast, _, _ = simulate(config, reqs, 0)
    slow, _, _ = simulate(replace(config, fast_forward=False), reqs, 0)
    cols = list(type(fast.records[0])._fields)
    a = pd.DataFrame(sorted(fast.records), columns=cols)
    assert_same_records(a, pd.DataFrame(sorted(slow.records), columns=cols))
    assert (a.outcome == "completed").all()
    # the run pricing was exercised (a lone prefill fills the budget left beside the decoders
    # whenever the threshold is at least that budget)
    if threshold >= budget - 16:
        assert calls[0] > 0
