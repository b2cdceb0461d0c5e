"""Length distributions: configured mean and CV come out of the draws."""

import numpy as np
import pytest

from simulator.errors import ConfigError
from workloads.distributions import LogNormal, geometric_counts, lognormal_from


def test_lognormal_mean_and_cv() -> None:
    spec = LogNormal(mean=300.0, cv=0.8)
    x = spec.sample(np.random.default_rng(0), 200_000)
    assert x.mean() == pytest.approx(300.0, rel=0.01)
    assert x.std() / x.mean() == pytest.approx(0.8, rel=0.03)
    assert spec.dist().mean() == pytest.approx(300.0)


def test_lognormal_clipping_and_tokens() -> None:
    x = LogNormal(mean=10.0, cv=2.0, low=2, high=20).sample_tokens(np.random.default_rng(0), 10_000)
    assert x.min() >= 2 and x.max() <= 20 and x.dtype == np.int64


def test_geometric_counts_mean() -> None:
    n = geometric_counts(np.random.default_rng(0), 4.0, 100_000)
    assert n.min() == 1 and n.mean() == pytest.approx(4.0, rel=0.02)
    assert geometric_counts(np.random.default_rng(0), 1.0, 3).tolist() == [1, 1, 1]


def test_lognormal_from() -> None:
    assert lognormal_from(50, "w") == LogNormal(mean=50.0)
    assert lognormal_from({"mean": 5, "cv": 2}, "w") == LogNormal(mean=5, cv=2)
    with pytest.raises(ConfigError, match=r"w: unknown key 'sd'"):
        lognormal_from({"mean": 5, "sd": 2}, "w")
    with pytest.raises(ConfigError, match=r"LogNormal: 'cv' must be > 0 \(got 0\)"):
        LogNormal(mean=1, cv=0)
