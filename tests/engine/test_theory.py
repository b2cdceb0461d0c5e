"""Limiting cases against theory: an idle replica, Little's law, the analytic stream limit."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from hardware.catalog import load_catalog
from simulator.capacity import kv_budget, max_streams
from simulator.engine import AffineTimer, EngineConfig, SchedulerConfig, run
from simulator.models import get_model
from tests.engine.helpers import poisson_requests

TIMER = AffineTimer(overhead_s=0.02, per_seq_s=1e-4, per_context_token_s=1.2e-8, per_prefill_token_s=3.6e-5)


def test_low_load_ttft_is_prefill_and_tpot_is_batch1_step() -> None:
    # requests 1000 s apart never meet: TTFT = one prefill step, gaps = batch-1 decode steps
    prompt, out = 2000, 101
    reqs = poisson_requests(5, 0.001, prompt, out, seed=1)
    res = run(EngineConfig(), reqs, seed=0, timer=TIMER)
    df = res.requests
    prefill_s = TIMER.step_s([(prompt, 0)], 0, 0)  # 0.02 + 3.6e-5·2000 = 0.092 s
    assert math.isclose(prefill_s, 0.092)
    np.testing.assert_allclose(df.ttft_s, prefill_s, rtol=1e-9)
    np.testing.assert_allclose(df.queue_s, 0.0, atol=1e-12)
    # decode step i attends prompt + 1 + i tokens: g_i = a + b·(prompt + 1 + i), i < out − 1
    a, b = TIMER.decode_coefficients(1)
    gaps = a + b * (prompt + 1 + np.arange(out - 1))
    np.testing.assert_allclose(df.tpot_mean_s, gaps.mean(), rtol=1e-9)
    np.testing.assert_allclose(df.tpot_p99_s, np.percentile(gaps, 99), rtol=1e-9)
    np.testing.assert_allclose(df.e2e_s, prefill_s + gaps.sum(), rtol=1e-9)


def test_littles_law_single_replica() -> None:
    # L = λ·W: time-average of requests in the system (from the every-change time series)
    reqs = poisson_requests(3000, 4.0, (200, 2000), (20, 300), seed=4)
    config = EngineConfig(sample_interval_s=0.0)
    res = run(config, reqs, seed=0, timer=TIMER)
    df, ts = res.requests, res.timeseries
    assert (df.outcome == "completed").all()
    t = ts.time_s.to_numpy()
    n = (ts.running + ts.waiting).to_numpy()
    dt = np.diff(t)
    big_l = float((n[:-1] * dt).sum() / (t[-1] - t[0]))
    lam = len(df) / (df.arrival_s.max() - df.arrival_s.min())
    w = float(df.e2e_s.mean())
    assert big_l == pytest.approx(lam * w, rel=0.03)
    assert big_l > 5  # a queueing regime, not an idle one
    assert res.summary["mean_in_system"] == pytest.approx(big_l, rel=0.03)


def test_peak_concurrency_128k_matches_max_streams() -> None:
    # Llama-3-70B bf16 on 8×H100 (tp 8) at 128k: capacity.py says 10 streams fit. Llama-3-70B itself
    # only takes 8k positions (the engine rejects longer); Llama-3.1-70B is the same network with 128k
    node, model = load_catalog().node("H100"), get_model("Llama-3.1-70B")
    prompt, out = 128_000, 3000
    limit = max_streams(kv_budget(node, model, 8), model, None, prompt + out)
    assert limit == 10
    reqs = poisson_requests(30, 50.0, prompt, out, seed=2)  # all arrive within a second: overload
    config = EngineConfig(model="Llama-3.1-70B", node="8xH100", tp=8)
    res = run(config, reqs, seed=0, timer=TIMER)
    assert (res.requests.outcome == "completed").all()
    assert res.summary["max_concurrency"] == limit
    assert res.timeseries.running.max() == limit
    assert res.timeseries.kv_blocks_used.max() <= res.summary["kv_blocks_per_replica"]


def test_swap_costs_pcie_time() -> None:
    # the same overload with swap preemption is priced: swapping makes ends later than no preemption
    reqs = poisson_requests(60, 20.0, (100, 400), (300, 600), seed=9)
    base = EngineConfig(kv_blocks=300, scheduler=SchedulerConfig(max_num_seqs=32))
    swap = run(replace(base, scheduler=replace(base.scheduler, preemption="swap")), reqs, seed=0, timer=TIMER)
    roomy = run(replace(base, kv_blocks=100_000), reqs, seed=0, timer=TIMER)
    assert swap.requests.preemptions.sum() > 0 and roomy.requests.preemptions.sum() == 0
    assert swap.summary["makespan_s"] > roomy.summary["makespan_s"]


def test_longer_than_max_context_is_rejected_with_reason() -> None:
    reqs = poisson_requests(2, 1.0, 8000, 500, seed=1)  # Llama-3-70B: 8,192 positions
    df = run(EngineConfig(model="Llama-3-70B"), reqs, seed=0, timer=TIMER).requests
    assert (df.outcome == "rejected").all()
    assert df.reason.str.contains("max_context_tokens 8192").all()
