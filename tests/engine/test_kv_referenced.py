"""The prefix cache's unreferenced blocks (`kv_evictable_share`) and what the capacity plan calls a
memory bound: a pool full of blocks the cache gives up on demand is not (`planning._binding`)."""

from __future__ import annotations

from types import SimpleNamespace

import pandas as pd
import pytest

from simulator.engine import AffineTimer, EngineConfig, run
from simulator.planning import MEMORY_BOUND_UTILIZATION, _binding
from workloads.request import Request

STEP = AffineTimer(overhead_s=0.01, per_seq_s=0.0, per_context_token_s=0.0, per_prefill_token_s=0.0)


def test_the_cache_blocks_no_sequence_references_are_integrated_apart() -> None:
    # Request 0 (160 prompt tokens, 1 output token) prefills in one 10 ms step and ends at 0.01 s;
    # its 10 blocks of 16 tokens stay in the cache, referenced by nobody, until the run ends at
    # 10.01 s (request 1, 16 other tokens, arrives at 10 s and ends a step later, 1 block).
    reqs = [Request(id=0, arrival_s=0.0, prompt_tokens=160, output_tokens=1, segments=((0, 160),)),
            Request(id=1, arrival_s=10.0, prompt_tokens=16, output_tokens=1, segments=((1, 16),))]
    s = run(EngineConfig(cache="prefix", kv_blocks=100), reqs, seed=0, timer=STEP).summary
    span, pool = 10.01, 100
    assert s["makespan_s"] == pytest.approx(span)
    assert s["kv_evictable_share"] == pytest.approx(10 * (10.01 - 0.01) / (span * pool), rel=1e-9)
    # in use: request 0's 10 blocks all along (its own, then the cache's), request 1's for its step
    assert s["kv_utilization"] == pytest.approx((10 * span + 1 * 0.01) / (span * pool), rel=1e-9)
    # what could not be freed: request 0's blocks while it ran, request 1's while it ran
    assert s["kv_referenced_utilization"] == pytest.approx((10 * 0.01 + 1 * 0.01) / (span * pool), rel=1e-9)


def _below(kv_utilization: float, referenced: float, preemptions: int = 0) -> SimpleNamespace:
    return SimpleNamespace(summary={"kv_utilization": kv_utilization, "kv_referenced_utilization": referenced},
                           requests=pd.DataFrame({"preemptions": [preemptions]}))


def test_a_pool_full_of_unreferenced_cache_does_not_make_memory_bind() -> None:
    # the default demo's 8xH100 at 3 nodes: 80.0% of the pool in use, 78.2% of it the prefix cache
    assert _binding(4, 1, _below(0.800, 0.030)) == "compute"
    assert _binding(4, 1, _below(0.95, MEMORY_BOUND_UTILIZATION)) == "memory"
    assert _binding(4, 1, _below(0.30, 0.10, preemptions=1)) == "memory"
    assert _binding(4, 4, _below(0.10, 0.10)) == "memory"  # the analytic floor
    assert _binding(1, 1, None) == "none (1 node suffices)"
