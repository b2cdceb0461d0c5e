"""Engine benchmark (`make bench`): simulated requests per wall second, events per request, memory.

The chat-4k generator (multi-turn sessions, shared system prompts) on 4 × 8×H100 serving
Llama-3-70B at tp 8, at about 70 % of the load the cluster sustains, priced by the calibrated
cost model (the engine's default timer). Then synthetic Poisson chat at ~250 and ~500 output
tokens: doubling the output length at the same load must not double the wall time per request.
If the Azure 2023 conversation trace sits next to the repo
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

from hardware.catalog import load_catalog
from simulator.engine import EngineConfig, run
from simulator.engine.cluster import cost_model_timer
from simulator.kv import KVLayout
from simulator.models import get_model
from workloads import load_workload
from workloads.request import Request

REPO = Path(__file__).resolve().parents[2]
TRACE = REPO.parent / "shared" / "data" / "traces" / "azure-2023-conv.csv"
CONFIG = EngineConfig(model="Llama-3-70B", node="8xH100", n_nodes=4, tp=8, sample_interval_s=1.0)
TIMER = cost_model_timer(load_catalog().node("8xH100"), get_model("Llama-3-70B"), 8, KVLayout())
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
    a_s, b_s = TIMER.decode_coefficients(batch)
    step = a_s + b_s * batch * (mean_prompt + mean_output / 2)
    per_request_s = TIMER.prefill_s(mean_prompt, 0) + mean_output / batch * step
    return 1 / per_request_s


def measure(label: str, requests: Iterator[Request], n: int) -> float:
    t = time.perf_counter()
    res = run(CONFIG, requests, seed=1, total_requests=n)
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
        run(CONFIG, chat(20000, rate, 2000, 250, seed=0), seed=1)
        prof.disable()
        pstats.Stats(prof).sort_stats("tottime").print_stats(15)
    base_wl = load_workload("chat-4k", seed=0, duration_s=3600)
    base_rate = len(base_wl.requests()) / 3600
    mean_prompt = float(np.mean([r.prompt_tokens for r in base_wl]))
    mean_output = float(np.mean([r.output_tokens for r in base_wl]))
    target = 0.7 * replicas * per_replica_rate(int(mean_prompt), int(mean_output))
    wl = load_workload("chat-4k", seed=0, duration_s=N / target, rate_scale=target / base_rate)
    n_chat = len(wl.requests())
    measure(f"chat-4k generator at {target:.1f} req/s", iter(wl), n_chat)
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
