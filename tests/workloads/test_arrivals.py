"""Arrival processes against theory: rates, gap CVs, the diurnal curve."""

import numpy as np
import pytest

from simulator.errors import ConfigError
from workloads.arrivals import Bursty, Diurnal, Offline, Poisson, arrival_from, session_turn_times


def test_poisson_mean_rate_and_exponential_gaps() -> None:
    # N(T) ~ Poisson(rate * T): mean 20,000, sd 141; 5 sd = 707
    t = Poisson(rate_per_s=2.0).times(np.random.default_rng(1), 10_000.0)
    assert abs(t.size - 20_000) < 707
    gaps = np.diff(t)
    assert gaps.std() / gaps.mean() == pytest.approx(1.0, abs=0.05)
    assert np.all(np.diff(t) >= 0) and t.max() < 10_000.0


@pytest.mark.parametrize("dist", ["gamma", "lognormal"])
@pytest.mark.parametrize("cv", [0.5, 3.0])
def test_bursty_rate_and_cv(dist: str, cv: float) -> None:
    proc = Bursty(rate_per_s=5.0, cv=cv, dist=dist)
    t = proc.times(np.random.default_rng(2), 20_000.0)
    gaps = np.diff(t)
    # mean gap 0.2 s; over ~100k gaps the relative error of the mean is ~cv/sqrt(n) ~ 1%
    assert gaps.mean() == pytest.approx(0.2, rel=0.05)
    assert gaps.std() / gaps.mean() == pytest.approx(cv, rel=0.15)
    assert proc.gap_dist().mean() == pytest.approx(0.2)
    assert proc.gap_dist().std() == pytest.approx(0.2 * cv)


def test_diurnal_mean_rate_over_a_period_and_peak_to_trough() -> None:
    proc = Diurnal(rate_per_s=0.5, amplitude=0.5, period_s=86_400.0, peak_s=43_200.0)
    t = proc.times(np.random.default_rng(3), 86_400.0)
    assert abs(t.size - 43_200) < 5 * np.sqrt(43_200)  # mean over a period = rate_per_s
    # rate at the peak hour 0.75/s, at the trough hour (around t=0) 0.25/s
    peak = np.sum((t >= 41_400) & (t < 45_000))
    trough = np.sum(t < 1_800) + np.sum(t >= 84_600)
    assert peak / trough == pytest.approx(3.0, rel=0.15)
    assert float(proc.rate_at(43_200.0)) == pytest.approx(0.75)


def test_scaled_multiplies_the_rate() -> None:
    assert Poisson(rate_per_s=2).scaled(1.5) == Poisson(rate_per_s=3.0)
    assert Bursty(rate_per_s=1, cv=2).scaled(2).rate_per_s == 2


def test_arrival_from_table_and_errors() -> None:
    assert arrival_from({"kind": "bursty", "rate_per_s": 2, "cv": 3}, "w") == Bursty(rate_per_s=2, cv=3)
    valid = r"unknown arrival kind 'weibull' \(valid: bursty, diurnal, offline, poisson\)"
    with pytest.raises(ConfigError, match=valid):
        arrival_from({"kind": "weibull"}, "w")
    with pytest.raises(ConfigError, match=r"w.rate: unknown key"):
        arrival_from({"kind": "poisson", "rate": 2}, "w")
    with pytest.raises(ConfigError, match=r"Poisson: 'rate_per_s' must be > 0 \(got -1\)"):
        Poisson(rate_per_s=-1)


@pytest.mark.parametrize(("make", "message"), [
    (lambda: Poisson(rate_per_s=None), "Poisson: 'rate_per_s' must be a number > 0 (got None)"),
    (lambda: Poisson(rate_per_s="2"), "Poisson: 'rate_per_s' must be a number > 0 (got '2')"),
    (lambda: Bursty(rate_per_s=1, cv=None), "Bursty: 'cv' must be a number > 0 (got None)"),
    (lambda: Diurnal(rate_per_s=1, amplitude=None), "Diurnal: 'amplitude' must be a number in [0, 1] (got None)"),
    (lambda: Diurnal(rate_per_s=1, peak_s="14:00"), "Diurnal: 'peak_s' must be a number (got '14:00')"),
])
def test_a_value_that_is_no_number_is_a_one_line_error(make, message) -> None:
    """From the API (a scenario's table is checked by `require_numbers` first): helper-188, None failed as
    "TypeError: '>' not supported between instances of 'NoneType' and 'int'"."""
    with pytest.raises(ConfigError) as exc:
        make()
    assert str(exc.value) == message


def test_session_turn_times_are_cumulative_think_times() -> None:
    assert session_turn_times(10.0, np.array([1.0, 2.5])).tolist() == [10.0, 11.0, 13.5]


def test_offline_puts_every_request_at_zero_whatever_the_duration() -> None:
    proc = arrival_from({"kind": "offline", "count": 5}, "w")
    assert proc == Offline(count=5)
    assert proc.times(np.random.default_rng(0), 1e-3).tolist() == [0.0] * 5
    assert proc.scaled(3.0) == Offline(count=15)
