"""Differential fuzz: fast-forward against stepping over random configurations, every field compared.

`test_fuzz` crosses caches, retention, preemption and timeouts on one workload; here a seed draws
the whole configuration (cache and tiers and eviction order, retention, scheduler limits and
admission, router, fleet shape and plan, mixed and disaggregated fleets, block size, sampling)
and one of three workloads (private prompts, shared documents, multi-turn sessions whose prompts
hold the previous turn's output). Both modes must give the same records (exact fields equal,
times within rounding) and the same KV summary figures (time integrals). The seeds are fixed, so
the test is deterministic; the named ones found bugs, which stay fixed:

- 578 and 723: a KV hand-off's release changed the prefix cache's unreferenced blocks between
  two commits, and the next commit integrated the new count back to the last one
  (`HandOff._shift_integrals` left ``evictable_block_s`` out);
- 102826: two prefill replicas in lockstep ended steps at the same instant, and SimPy ran those
  events in the order they were scheduled, which a chunked run changes
  (`cluster.REPLICA_PRIORITY_STEP`).
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import numpy as np
import pandas as pd
import pytest

from simulator.engine import AffineTimer, EngineConfig, PoolConfig, SchedulerConfig, run
from tests.engine.test_fuzz import RETENTION  # the retention policies and the parameters they are fuzzed with
from tests.engine.test_invariants import assert_same_records
from tests.engine.test_regressions import TIMER
from workloads.request import Request

KV_FIGURES = ("kv_utilization", "kv_cache_share", "kv_evictable_share", "kv_referenced_utilization",
              "kv_fragmentation", "mean_concurrency", "busy_fraction")
EXACT = ("decode_replica", "resume_hit_tokens")
SEEDS = [578, 723, 102826, *range(20)]
LEAST_DISPATCHED_SEEDS = [*range(100, 105), 114, 115, 132]


def _requests(rng: np.random.Generator, n: int) -> list[Request]:
    kind = int(rng.integers(3))
    t = np.cumsum(rng.exponential(1 / float(rng.choice([2.0, 8.0, 20.0, 60.0])), n))
    docs = int(rng.integers(1, 6))
    out: list[Request] = []
    for i in range(n):
        o = int(rng.integers(1, int(rng.choice([20, 200, 800])) + 1))
        if kind == 0:  # private prompts
            p = int(rng.integers(1, int(rng.choice([100, 600, 2000])) + 1))
            out.append(Request(id=i, arrival_s=float(t[i]), prompt_tokens=p, output_tokens=o, segments=((i, p),)))
            continue
        if kind == 1:  # a shared document and its header, a private tail
            d = int(rng.integers(docs))
            segs: tuple[tuple[int, int], ...] = ((d, 40 + 16 * d), (100 + d, 37), (1000 + i, int(rng.integers(1, 300))))
        else:  # sessions: a turn's prompt holds the previous turn's prompt and output
            s = int(rng.integers(docs))
            prev = [r for r in out if r.id % docs == s]
            if prev and rng.random() < 0.7:
                q = prev[-1]
                segs = (*q.segments, (q.output_segment_id, q.output_tokens), (20_000 + i, int(rng.integers(1, 100))))
            else:
                segs = ((50_000 + s, int(rng.integers(16, 400))), (20_000 + i, int(rng.integers(1, 100))))
        out.append(Request(id=i, arrival_s=float(t[i]), prompt_tokens=sum(x for _, x in segs), output_tokens=o,
                           segments=segs, output_segment_id=30_000 + i))
    return out


def _config(rng: np.random.Generator) -> EngineConfig:
    cache = str(rng.choice(["none", "prefix"]))
    cache_params: dict[str, object] = {}
    if cache == "prefix":
        cache_params["eviction"] = str(rng.choice(["lru", "lfu", "fifo"]))
        if rng.random() < 0.4:
            cache_params["dram"] = True
            cache_params["nvme"] = bool(rng.random() < 0.5)
    retention = str(rng.choice(list(RETENTION)))
    seqs = int(rng.choice([2, 4, 8, 64]))
    sched = SchedulerConfig(
        max_num_seqs=seqs, max_num_batched_tokens=max(seqs, int(rng.choice([64, 256, 512, 2048, 8192]))),
        preemption=str(rng.choice(["recompute", "swap"])),
        queue_timeout_s=float(rng.choice([math.inf, math.inf, 0.5, 3.0])),
        admission=str(rng.choice(["prompt", "prompt", "reserve"])),
        long_prefill_token_threshold=int(rng.choice([0, 0, 128])), watermark=float(rng.choice([0.0, 0.01, 0.1])))
    kw: dict[str, Any] = dict(
        kv_blocks=int(rng.choice([40, 150, 600, 5000])), cache=cache, cache_params=cache_params, retention=retention,
        retention_params=RETENTION[retention], tp=int(rng.choice([1, 2, 4, 8])), n_nodes=int(rng.choice([1, 2, 5])),
        pp=int(rng.choice([1, 1, 2])),
        router=str(rng.choice(["least-tokens", "round-robin", "least-kv", "prefix-affinity"])), scheduler=sched,
        sample_interval_s=float(rng.choice([0.0, 0.25, 1.0])), block_tokens=int(rng.choice([16, 16, 32])))
    if rng.random() < 0.2:
        kw["more_pools"] = (PoolConfig(node=str(rng.choice(["8xH200", "8xB200"])), tp=int(rng.choice([2, 4, 8]))),)
    kw["model"] = "Llama-3.1-8B" if kw["tp"] * kw["pp"] < 4 or rng.random() < 0.5 else "Llama-3.1-70B"
    if kw["pp"] * kw["tp"] > 8:
        kw["pp"] = 1
    if rng.random() < 0.15 and sched.admission == "prompt":
        kw["prefill_pool"] = PoolConfig(node="8xH100", tp=4)
        kw["short_prompt_tokens"] = int(rng.choice([0, 100]))
    return EngineConfig(**kw)


@pytest.mark.parametrize("seed", SEEDS)
def test_fast_forward_equals_stepping_on_a_random_configuration(seed: int) -> None:
    rng = np.random.default_rng(seed)
    config = _config(rng)
    _fast_forward_equals_stepping(config, _requests(rng, int(rng.choice([20, 60, 150, 400]))))


@pytest.mark.parametrize("seed", LEAST_DISPATCHED_SEEDS)
def test_fast_forward_equals_stepping_under_least_dispatched(seed: int) -> None:
    """The random configurations of other seeds under the least-dispatched router (drawn apart, so that
    `SEEDS` keep the configurations their regressions were found on), 3 of them disaggregated."""
    rng = np.random.default_rng(seed)
    config = replace(_config(rng), router="least-dispatched")
    _fast_forward_equals_stepping(config, _requests(rng, int(rng.choice([20, 60, 150, 400]))))


def _fast_forward_equals_stepping(config: EngineConfig, reqs: list[Request], timer: AffineTimer = TIMER) -> None:
    fast = run(config, reqs, 1, timer=timer)
    slow = run(replace(config, fast_forward=False), reqs, 1, timer=timer)
    assert list(fast.requests.request_id) == [r.id for r in reqs]
    assert_same_records(fast.requests, slow.requests)
    for col in EXACT:
        assert fast.requests[col].equals(slow.requests[col]), col
    for key in KV_FIGURES:
        assert fast.summary[key] == pytest.approx(slow.summary[key], rel=1e-9, abs=1e-12), key
    assert fast.summary["events"] <= slow.summary["events"]
    if config.sample_interval_s > 0:  # (0: a row a plan, stepping's every step: not the same rows)
        assert_same_samples(fast.timeseries, slow.timeseries)


def assert_same_samples(a: pd.DataFrame, b: pd.DataFrame) -> None:
    """The same time-series rows: counts exact, times and utilisations within rounding (helper-169: a
    decode jump took no sample inside it, and an arrival's sample read the state at the jump's start;
    fast-forward's rows were a third of stepping's in these configurations)."""
    assert len(a) == len(b)
    # each replica's rows in their order: two replicas' rows a few ulps apart (decode replicas in lockstep)
    # reach the sink in either order, as the modes' times round
    a = a.sort_values("replica", kind="stable").reset_index(drop=True)
    b = b.sort_values("replica", kind="stable").reset_index(drop=True)
    floats = ("time_s", "mfu", "hbm_bw_util", "link_util")
    for col in a.columns:
        if col not in floats:
            assert list(a[col]) == list(b[col]), col
    for col in floats:
        np.testing.assert_allclose(a[col].to_numpy(), b[col].to_numpy(), rtol=1e-9, atol=1e-9, err_msg=col)
