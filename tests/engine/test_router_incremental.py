"""Least-tokens kept incrementally (beyond `DIRECT_REPLICAS`) chooses as asking every replica does."""

from __future__ import annotations

import pytest

import simulator.engine.routers.basic as basic
from simulator.engine import AffineTimer, EngineConfig, SchedulerConfig
from simulator.engine.cluster import simulate
from tests.engine.helpers import poisson_requests

TIMER = AffineTimer(overhead_s=0.02, per_seq_s=1e-5, per_context_token_s=1.2e-8, per_prefill_token_s=3.6e-5)


@pytest.mark.parametrize("max_batched", [8192, 256])  # whole prompts; chunked runs
def test_incremental_least_tokens_equals_asking_everyone(monkeypatch: pytest.MonkeyPatch, max_batched: int) -> None:
    config = EngineConfig(model="Llama-3.1-8B", kv_blocks=3000, n_nodes=5, tp=1, scheduler=SchedulerConfig(
        max_num_batched_tokens=max_batched))  # 40 replicas
    reqs = poisson_requests(1500, 120.0, (100, 2000), (1, 400), seed=11)
    incremental, end, _ = simulate(config, reqs, 3, timer=TIMER)
    assert len(incremental.replicas) > basic.DIRECT_REPLICAS
    monkeypatch.setattr(basic, "DIRECT_REPLICAS", 10_000)
    direct, end_direct, _ = simulate(config, reqs, 3, timer=TIMER)
    assert sorted(incremental.records) == sorted(direct.records) and end == end_direct
    assert len({r.replica for r in incremental.records}) == 40
