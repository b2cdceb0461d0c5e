"""Retention in the engine: block caps, evicted tokens, debits, and fast-forward = stepping."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from simulator.engine import AffineTimer, EngineConfig, SchedulerConfig, run
from simulator.engine.cluster import simulate
from simulator.engine.retention import debit_points, make_retention, retention_names
from simulator.errors import ConfigError
from simulator.kv import parse_layout
from tests.engine.helpers import poisson_requests
from tests.engine.test_invariants import TIMER, assert_same_records, checked_pool
from workloads.request import Request

__all__ = ["checked_pool"]  # the fixture, re-used
SMALL = EngineConfig(kv_blocks=400, scheduler=SchedulerConfig(max_num_seqs=16, max_num_batched_tokens=512))


def test_streaming_llm_caps_blocks_and_counts_evictions() -> None:
    """Prompt 50, output 500, cap 4 + 100: the KV stops at 104 tokens = 7 blocks of 16."""
    req = Request(id=0, arrival_s=0.0, prompt_tokens=50, output_tokens=500, segments=((0, 50),))
    stepped = replace(SMALL, fast_forward=False, sample_interval_s=0.0)  # a sample every step
    config = replace(stepped, retention="streaming-llm", retention_params={"window_tokens": 100})
    cluster, _, _ = simulate(config, [req], 0, timer=TIMER)
    rec: Any = cluster.records[0]
    assert rec.evicted_tokens == 50 + 499 - 104
    assert rec.quality_debit_points == debit_points("streaming-llm") > 0
    res = run(config, [req], seed=0, timer=TIMER)
    assert res.timeseries.kv_blocks_used.max() == 7
    full = run(stepped, [req], seed=0, timer=TIMER)
    assert full.timeseries.kv_blocks_used.max() == -(-549 // 16)
    assert full.requests.evicted_tokens.iloc[0] == 0 and full.requests.quality_debit_points.iloc[0] == 0
    assert res.requests.tpot_mean_s.iloc[0] < full.requests.tpot_mean_s.iloc[0]  # less context to read


def test_snapkv_compresses_the_prompt_only() -> None:
    req = Request(id=0, arrival_s=0.0, prompt_tokens=3000, output_tokens=100, segments=((0, 3000),))
    config = replace(SMALL, retention="snapkv", retention_params={"budget_tokens": 1024}, fast_forward=False,
                     sample_interval_s=0.0)
    res = run(config, [req], seed=0, timer=TIMER)
    assert res.requests.evicted_tokens.iloc[0] == 3000 - 1024
    used = res.timeseries.kv_blocks_used
    assert used.max() == -(-3000 // 16)  # the whole prompt while it is prefilled
    assert used[res.timeseries.running > 0].iloc[-1] == -(-(1024 + 99) // 16)  # then the budget, growing


CASES = {
    "streaming-llm": ("streaming-llm", {"sink_tokens": 4, "window_tokens": 120}),
    "h2o": ("h2o", {"budget_fraction": 0.3}),
    "h2o-fixed": ("h2o", {"budget_tokens": 64}),
    "snapkv": ("snapkv", {"budget_tokens": 100}),
}


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("preemption", ["recompute", "swap"])
def test_fast_forward_equals_stepping_with_retention(name: str, preemption: str, checked_pool: list[int]) -> None:
    policy, params = CASES[name]
    config = replace(SMALL, retention=policy, retention_params=params,
                     scheduler=replace(SMALL.scheduler, preemption=preemption))
    reqs = poisson_requests(80, 10.0, (50, 600), (100, 700), seed=7)
    fast = run(config, reqs, seed=3, timer=TIMER)
    steps_fast = checked_pool[0]
    slow = run(replace(config, fast_forward=False), reqs, seed=3, timer=TIMER)
    assert_same_records(fast.requests, slow.requests)
    assert list(fast.requests.evicted_tokens) == list(slow.requests.evicted_tokens)
    assert checked_pool[0] - steps_fast > steps_fast
    assert fast.requests.evicted_tokens.sum() > 0


@pytest.mark.parametrize("layout", ["compress:8:256", "fp8"])
def test_fast_forward_equals_stepping_with_layouts_and_prefix(layout: str, checked_pool: list[int]) -> None:
    config = replace(SMALL, layout=parse_layout(layout), cache="prefix", kv_blocks=300)
    reqs = poisson_requests(80, 10.0, (50, 600), (100, 500), seed=4)
    shared = [replace(r, segments=((1, 48), (r.id + 10, r.prompt_tokens - 48))) for r in reqs if r.prompt_tokens > 48]
    fast = run(config, shared, seed=3, timer=TIMER)
    slow = run(replace(config, fast_forward=False), shared, seed=3, timer=TIMER)
    assert_same_records(fast.requests, slow.requests)
    assert fast.requests.hit_tokens.sum() > 0 and fast.requests.preemptions.sum() > 0


def test_lossy_sequences_do_not_use_the_prefix_cache() -> None:
    reqs = [Request(id=i, arrival_s=10.0 * i, prompt_tokens=400, output_tokens=20, segments=((1, 400),))
            for i in range(3)]
    base = replace(SMALL, cache="prefix")
    assert run(base, reqs, seed=0, timer=TIMER).requests.hit_tokens.tolist() == [0, 384, 384]
    lossy = replace(base, retention="snapkv", retention_params={"budget_tokens": 128})
    assert run(lossy, reqs, seed=0, timer=TIMER).requests.hit_tokens.tolist() == [0, 0, 0]
    roomy = replace(base, retention="snapkv", retention_params={"budget_tokens": 1024})  # never compresses
    assert run(roomy, reqs, seed=0, timer=TIMER).requests.hit_tokens.tolist() == [0, 384, 384]


def test_registry_and_debits() -> None:
    assert {"full", "streaming-llm", "h2o", "snapkv"} <= set(retention_names())
    with pytest.raises(ConfigError, match=r"must be one of full, h2o, "):
        make_retention("nope")
    for name in retention_names():
        assert debit_points(name) >= 0
    with pytest.raises(ConfigError, match="budget_fraction"):
        make_retention("h2o", budget_fraction=0)
    _ = AffineTimer
