"""The `run` API: frames, summary, files, progress, config validation."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from simulator import __version__
from simulator.engine import AffineTimer, EngineConfig, PoolConfig, SchedulerConfig, run
from simulator.errors import ConfigError
from tests.engine.helpers import poisson_requests

TIMER = AffineTimer()


def test_run_writes_frames_and_summary(tmp_path: Path) -> None:
    reqs = poisson_requests(50, 5.0, (100, 800), (10, 100), seed=0)
    seen: list[float] = []
    res = run(EngineConfig(model="Llama-3.1-8B", tp=2), reqs, seed=42, timer=TIMER, progress=seen.append)
    assert len(res.requests) == 50 and seen[-1] == 1.0 and seen == sorted(seen)
    s = res.summary
    assert s["completed"] == 50 and s["replicas"] == 4
    assert s["ttft_p50_s"] <= s["ttft_p90_s"] <= s["ttft_p99_s"]
    assert s["gpu_seconds"] == pytest.approx(8 * s["makespan_s"])
    assert 0 < s["kv_utilization"] < 1 and 0 <= s["kv_fragmentation"] < 1
    out = res.write(tmp_path / "r")
    doc = json.loads((out / "summary.json").read_text())
    assert doc["seed"] == 42 and doc["version"] == __version__
    assert doc["config"]["pools"] == [{"node": "8xH100", "n_nodes": 1, "tp": 2, "pp": 1, "dp_attention": False, "ep": 1,
                                       "plan": "TP2"}]
    assert (out / "requests.csv").exists() and (out / "timeseries.csv").exists()


def test_mixed_fleet_and_default_timer() -> None:
    reqs = poisson_requests(40, 10.0, (100, 800), (10, 100), seed=0)
    more = (PoolConfig(node="8xH100", n_nodes=1, tp=4),)
    config = EngineConfig(model="Llama-3.1-8B", tp=8, more_pools=more)
    res = run(config, reqs, seed=1)  # roofline stand-in timer
    assert res.summary["replicas"] == 3
    assert set(res.requests.replica) <= {0, 1, 2}


def test_config_errors_are_one_line() -> None:
    with pytest.raises(ConfigError, match=r"SchedulerConfig: 'preemption' must be one of"):
        SchedulerConfig(preemption="drop")
    with pytest.raises(ConfigError, match=r"'block_tokens' must be >= 1 \(got 0\)"):
        EngineConfig(block_tokens=0)
    reqs = poisson_requests(3, 1.0, 10, 10, seed=0)[::-1]
    with pytest.raises(ConfigError, match="non-decreasing"):
        run(EngineConfig(), reqs, seed=0, timer=TIMER)


def test_percentiles_of_a_column_at_once_equal_each_alone() -> None:
    """`_pcts` (the summary's p50/p90/p99 of a column in one call) gives each quantile's float as
    `np.percentile` gives it alone over the column without NaN, and so does `_pct` (one quantile), on
    ties, skewed values, a single value and none; the column is left as it was (`_pcts` partitions a
    copy in place)."""
    import numpy as np
    import pandas as pd

    from simulator.engine.result import _pct, _pcts

    rng = np.random.default_rng(0)
    columns = [rng.lognormal(0, 2, 257), rng.integers(0, 5, 100).astype(float), np.array([0.25]), np.array([]),
               np.array([np.nan, 1.5, np.nan, 0.5, 3.0]), np.array([np.nan])]
    for values in columns:
        s = pd.Series(values, dtype=float)
        got = _pcts(s, (50, 90, 99))
        assert np.array_equal(s.to_numpy(), values, equal_nan=True)  # not reordered
        kept = s.dropna()
        want = [float(np.percentile(kept, q)) if len(kept) else math.nan for q in (50, 90, 99)]
        assert np.array_equal(got, want, equal_nan=True), (values, got, want)
        assert np.array_equal([_pct(s, q) for q in (50, 90, 99)], want, equal_nan=True)
    assert _pcts(pd.Series([np.nan, 1.5, np.nan, 0.5, 3.0]), (50,)) == [1.5]
