"""Engine benchmark (`make bench`): simulated requests per wall second, events per request, memory.

Chat-like workload (~2k prompt, ~250 output, Poisson) on 4 × 8×H100 serving Llama-3-70B at
tp 8, at about 70 % load, priced by an `AffineTimer` with realistic coefficients (the lead
switches it to the cost model). Doubling the output length at the same load must not double the
wall time per request. If the Azure 2023 conversation trace sits next to the repo
(``../shared/data/traces/azure-2023-conv.csv``), it is replayed too.
"""

from __future__ import annotations

import cProfile
import csv
import os
import pstats
import resource
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import numpy as np
import pytest

from simulator.engine import AffineTimer, EngineConfig, run
from workloads.request import Request

REPO = Path(__file__).resolve().parents[2]
TRACE = REPO.parent / "shared" / "data" / "traces" / "azure-2023-conv.csv"
# Llama-3-70B bf16, 8×H100: weights read once a step; KV 327,680 B/token over 8 × 3.35 TB/s;
# prefill 2 × 70.6e9 FLOP/token at 50 % of 8 × 989 TFLOP/s
TIMER = AffineTimer(overhead_s=0.020, per_seq_s=0.0, per_context_token_s=327680 / (8 * 3.35e12),
                    per_prefill_token_s=2 * 70.6e9 / (8 * 989e12 * 0.5))
CONFIG = EngineConfig(model="Llama-3-70B", node="8xH100", n_nodes=4, tp=8, sample_interval_s=1.0)
N = int(os.environ.get("KVSIM_BENCH_REQUESTS", "100000"))


def chat(n: int, rate_per_s: float, mean_prompt: int, mean_output: int, seed: int) -> Iterator[Request]:
    """Streamed Poisson requests; prompt ~ uniform(0.5, 1.5)·mean (≤ 6k), output geometric with that mean."""
    rng = np.random.default_rng(seed)
    gaps = rng.exponential(1 / rate_per_s, n)
    prompts = rng.integers(mean_prompt // 2, mean_prompt * 3 // 2 + 1, n)
    outputs = np.minimum(rng.geometric(1 / mean_output, n), 8192 - prompts - 1)
    t = 0.0
    for i in range(n):
        t += float(gaps[i])
        p = int(prompts[i])
        yield Request(id=i, arrival_s=t, prompt_tokens=p, output_tokens=max(1, int(outputs[i])),
                      segments=((i, p),))


def azure(path: Path) -> Iterator[Request]:
    """The trace's rows as requests (a minimal CSV parse: TIMESTAMP,ContextTokens,GeneratedTokens)."""
    with path.open() as f:
        rows = csv.DictReader(f)
        t0 = None
        for i, row in enumerate(rows):
            ts = datetime.fromisoformat(row["TIMESTAMP"][:26]).timestamp()
            t0 = ts if t0 is None else t0
            p = max(1, min(int(row["ContextTokens"]), 8000))
            out = max(1, min(int(row["GeneratedTokens"]), 8191 - p))
            yield Request(id=i, arrival_s=ts - t0, prompt_tokens=p, output_tokens=out, segments=((i, p),),
                          source="azure-2023-conv")


def per_replica_rate(mean_prompt: int, mean_output: int, batch: int = 256) -> float:
    """Requests/s one replica sustains: prefill time + its share of full-batch decode steps."""
    ctx = mean_prompt + mean_output / 2
    step = TIMER.overhead_s + TIMER.per_context_token_s * batch * ctx
    per_request_s = TIMER.per_prefill_token_s * mean_prompt + mean_output / batch * step
    return 1 / per_request_s


def measure(label: str, requests: Iterator[Request], n: int) -> float:
    t = time.perf_counter()
    res = run(CONFIG, requests, seed=1, timer=TIMER, total_requests=n)
    wall = time.perf_counter() - t
    s = res.summary
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"\n[{label}] {s['requests']} requests in {wall:.2f} s wall: "
          f"{s['requests'] / wall:,.0f} requests/s, "
          f"{s['events_per_request']:.2f} events/request, peak RSS {rss_mb:,.0f} MB; "
          f"simulated {s['makespan_s']:,.0f} s, completed {s['completed']}, "
          f"mean concurrency {s['mean_concurrency']:.0f}, KV util {s['kv_utilization']:.2f}, "
          f"TTFT p50/p99 {s['ttft_p50_s'] * 1e3:.0f}/{s['ttft_p99_s'] * 1e3:.0f} ms, "
          f"TPOT p50/p99 {s['tpot_p50_s'] * 1e3:.1f}/{s['tpot_p99_s'] * 1e3:.1f} ms, "
          f"{s['output_tokens_per_s']:,.0f} output tok/s")
    return wall / max(1, s["requests"])


@pytest.mark.bench
def test_engine_bench() -> None:
    replicas = 4
    rate = 0.7 * replicas * per_replica_rate(2000, 250)
    if os.environ.get("KVSIM_BENCH_PROFILE"):
        prof = cProfile.Profile()
        prof.enable()
        run(CONFIG, chat(20000, rate, 2000, 250, seed=0), seed=1, timer=TIMER)
        prof.disable()
        pstats.Stats(prof).sort_stats("tottime").print_stats(15)
    base = measure(f"chat 2k/250 at {rate:.1f} req/s", chat(N, rate, 2000, 250, seed=0), N)
    rate2 = 0.7 * replicas * per_replica_rate(2000, 500)
    n2 = N // 2
    long = measure(f"chat 2k/500 at {rate2:.1f} req/s", chat(n2, rate2, 2000, 500, seed=0), n2)
    print(f"wall time per request: {base * 1e6:.1f} µs at 250 output tokens, {long * 1e6:.1f} µs at 500 "
          f"(ratio {long / base:.2f})")
    if TRACE.exists():
        rows = sum(1 for _ in TRACE.open()) - 1
        measure("azure-2023-conv trace", azure(TRACE), rows)
    assert long < 2 * base


@pytest.mark.bench
def test_engine_bench_prefix_cache() -> None:
    """The chat workload with prefix caching on (no shared prefixes: pure overhead), then a shared-prefix variant."""
    import dataclasses

    replicas = 4
    rate = 0.7 * replicas * per_replica_rate(2000, 250)
    n = N // 2
    config = dataclasses.replace(CONFIG, cache="prefix")
    for label, shared in (("prefix cache, unique prompts", False), ("prefix cache, 1k shared system prompt", True)):
        reqs = chat(n, rate, 2000, 250, seed=0)
        if shared:
            reqs = (dataclasses.replace(r, segments=((-1, 1024), (r.id, r.prompt_tokens - 1024))) for r in reqs)
        t = time.perf_counter()
        res = run(config, reqs, seed=1, timer=TIMER, total_requests=n)
        wall = time.perf_counter() - t
        s = res.summary
        print(f"\n[{label}] {s['requests']} requests in {wall:.2f} s wall: {s['requests'] / wall:,.0f} requests/s, "
              f"{s['events_per_request']:.2f} events/request, hit share {s['prefix_hit_ratio_tokens']:.2f}, "
              f"TTFT p50/p99 {s['ttft_p50_s'] * 1e3:.0f}/{s['ttft_p99_s'] * 1e3:.0f} ms")
