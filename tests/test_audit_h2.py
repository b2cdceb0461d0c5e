"""Audit h2: `kvsim calc`, `kvsim workload`, `kvsim sweep` and the published-benchmark scenarios,
each figure checked against a hand computation written in the test."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]


def _readme_row(scenario: str) -> str:
    rows = [line for line in (ROOT / "README.md").read_text().splitlines()
            if line.startswith("| ") and f"(`{scenario}`)" in line]
    assert len(rows) == 1, rows
    return rows[0]


def test_mlperf_llama2_server_throughput_is_the_offered_load_not_a_capacity_error() -> None:
    """At the published rate kvsim keeps up, so its throughput is the arrival rate's; the 60-s run's
    sustained 28,578 tok/s is the batch still filling, not a 8.1%-slow model (README said −8.1%)."""
    from simulator.scenario import load_scenario
    from simulator.study import run_scenario

    sc = load_scenario(ROOT / "scenarios" / "mlperf-llama2-70b-server.toml")
    reqs = sc.load_workload().requests()
    n = len(reqs)
    out = np.array([r.output_tokens for r in reqs], dtype=float)
    span = reqs[-1].arrival_s - reqs[0].arrival_s
    offered = n * out.mean() / span  # 6,367 × 296.27 / 59.977 s = 31,451 tok/s
    assert n == 6367 and offered == pytest.approx(31451, abs=1)
    assert offered > 31106  # the published figure, as 105.6 queries/s × 294.45 tokens: what is offered
    s = next(iter(run_scenario(sc).results.values())).summary
    assert s["timed_out"] == 0 and s["completed"] == n
    assert s["ttft_p99_s"] < 0.25 * 2.0 and s["tpot_p99_s"] < 0.2  # the SLOs, met with room: it keeps up
    # the steady window still fills: completions 82.6/s against 107.5 arrivals/s there
    assert s["sustained_requests_per_s"] < 0.8 * s["offered_requests_per_s"]
    assert s["sustained_output_tokens_per_s"] == pytest.approx(28578, abs=1)
    row = _readme_row("mlperf-llama2-70b-server")
    assert "the arrival rate sets it" in row and "| −8.1% |" not in row
    assert "not a capacity error" in row
