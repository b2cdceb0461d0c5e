"""Compact fuzz: every cache × retention × preemption × timeout combination, fast-forward vs stepping.

Each run checks exact block accounting after every plan and commit (`exact_blocks`), that every
request leaves exactly once, and that fast-forward and stepping give the same records.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import replace
from typing import Any

import pytest

from simulator.engine import EngineConfig, SchedulerConfig
from simulator.engine.cluster import simulate
from tests.engine.helpers import shared_prefix_requests
from tests.engine.test_regressions import TIMER

FLOAT_FIELDS = ("queue_s", "ttft_s", "tpot_mean_s", "tpot_p99_s", "end_s", "e2e_s", "admit_s")
EXACT_FIELDS = ("replica", "hit_tokens", "resume_hit_tokens", "preemptions", "outcome")
RETENTION = {"full": {}, "streaming-llm": {"window_tokens": 200}, "h2o": {"budget_tokens": 150},
             "snapkv": {"budget_tokens": 100}}
COMBOS = list(itertools.product(["none", "prefix"], list(RETENTION), ["recompute", "swap"], [math.inf, 2.0]))


def _differ(a: list[Any], b: list[Any]) -> str | None:
    for x, y in zip(sorted(a), sorted(b), strict=True):
        for f in EXACT_FIELDS:
            if getattr(x, f) != getattr(y, f):
                return f"request {x[0]} {f}: {getattr(x, f)} vs {getattr(y, f)}"
        for f in FLOAT_FIELDS:
            u, v = getattr(x, f), getattr(y, f)
            if not (math.isnan(u) and math.isnan(v)) and not math.isclose(u, v, rel_tol=1e-9, abs_tol=1e-9):
                return f"request {x[0]} {f}: {u} vs {v}"
    return None


@pytest.mark.parametrize(("cache", "retention", "preemption", "timeout_s"), COMBOS)
def test_fuzz_fast_forward_equals_stepping(cache: str, retention: str, preemption: str, timeout_s: float,
                                           exact_blocks: list[Any]) -> None:
    config = EngineConfig(kv_blocks=150, cache=cache, cache_params={"dram": True, "nvme": True} if cache == "prefix"
                          else {}, retention=retention, retention_params=RETENTION[retention], tp=4,
                          router="least-kv", scheduler=SchedulerConfig(
                              max_num_seqs=8, max_num_batched_tokens=300, preemption=preemption,
                              queue_timeout_s=timeout_s))
    reqs = shared_prefix_requests(40, 1, rate_per_s=15, output_tokens=(50, 500))
    fast, _, _ = simulate(config, reqs, 1, timer=TIMER)
    slow, _, _ = simulate(replace(config, fast_forward=False), reqs, 1, timer=TIMER)
    assert sorted(r[0] for r in fast.records) == [r.id for r in reqs]
    assert sorted(r[0] for r in slow.records) == [r.id for r in reqs]
    assert _differ(fast.records, slow.records) is None
    assert not exact_blocks
    for rep in fast.replicas:
        assert rep.used == rep.cache.hbm_blocks() and rep.host_used == 0 and rep.outstanding_tokens == 0
