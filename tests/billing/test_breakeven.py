"""Closed forms pinned by hand, the scipy numeric versions against them, and a simulated check.

Anthropic: read r = 0.1; 5-minute write w = 1.25, 1-hour write w = 2.0.
  p*(5m) = 0.25 / 1.15 = 0.217391...;  λ*(5m) T = -ln(1 - 0.217391) = 0.245122
  p*(1h) = 1 / 1.9 = 0.526316...;      λ*(1h) T = -ln(1 - 0.526316) = 0.747214
  1h cheaper than 5m above λ = ln(1.9 / 1.15) / 3300 s = 1.52149e-4 /s (one per 109.5 min)
  keep-alive beats expiry above λ = ln(1.15 / 1.05) / 300 s (one per 55.0 min)
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from simulator.billing.breakeven import (
    breakeven_hit_probability,
    breakeven_reuse_rate,
    crossover_reuse_rate,
    expire_cost_rate,
    hit_probability_poisson,
    keepalive_breakeven_rate,
    keepalive_cost_rate,
    reads_to_break_even,
    relative_cost,
)
from simulator.billing.compare import compare_ttls
from simulator.billing.numeric import (
    breakeven_rate,
    breakeven_scale,
    hit_probability,
    keepalive_ping_rate,
)
from simulator.errors import ConfigError
from tests.billing.conftest import poisson_stream

R, W5, W1H, T5, T1H = 0.1, 1.25, 2.0, 300.0, 3600.0


def test_five_minute_pays_exactly_above_p_star():
    p_star = breakeven_hit_probability(R, W5)
    assert p_star == pytest.approx(0.25 / 1.15) == pytest.approx(0.2173913, abs=1e-7)
    assert relative_cost(p_star, R, W5) == pytest.approx(1.0)
    assert relative_cost(p_star + 0.01, R, W5) < 1.0 < relative_cost(p_star - 0.01, R, W5)


def test_poisson_rate_threshold():
    lam = breakeven_reuse_rate(T5, R, W5)
    assert lam * T5 == pytest.approx(-math.log(1 - 0.25 / 1.15)) == pytest.approx(0.245122, abs=1e-6)
    assert lam * 60 == pytest.approx(0.0490245, abs=1e-6)  # reuses per minute: one per 20.4 min
    assert hit_probability_poisson(lam, T5) == pytest.approx(0.2173913, abs=1e-7)
    assert breakeven_reuse_rate(T1H, R, W1H) * T1H == pytest.approx(0.747214, abs=1e-6)


def test_one_hour_write_pays_with_two_reads_not_one():
    assert reads_to_break_even(R, W1H) == 2
    assert W1H + 1 * R > 1 + 1  # one read: 2.1 > 2.0 uncached
    assert W1H + 2 * R < 1 + 2  # two reads: 2.2 < 3.0 uncached
    assert reads_to_break_even(R, W5) == 1
    assert reads_to_break_even(0.5, 1.0) == 1  # no premium: any reuse pays


def test_one_hour_beats_five_minutes_above_crossover():
    lam = crossover_reuse_rate(T5, W5, T1H, W1H, R)
    assert lam == pytest.approx(math.log(1.9 / 1.15) / 3300)
    assert lam == pytest.approx(1.52149e-4, rel=1e-5)
    cost = lambda rate, t, w: relative_cost(hit_probability_poisson(rate, t), R, w)  # noqa: E731
    assert cost(lam, T5, W5) == pytest.approx(cost(lam, T1H, W1H))
    assert cost(2 * lam, T1H, W1H) < cost(2 * lam, T5, W5)
    assert cost(lam / 2, T1H, W1H) > cost(lam / 2, T5, W5)
    assert crossover_reuse_rate(T5, 1.0, T1H, 1.0, 0.5) == 0.0


def test_keepalive_rule():
    lam = keepalive_breakeven_rate(T5, R, W5)
    assert lam == pytest.approx(math.log(1.15 / 1.05) / 300)
    assert 1 / (lam * 60) == pytest.approx(54.96, abs=0.01)
    assert keepalive_cost_rate(lam, T5, R) == pytest.approx(expire_cost_rate(lam, T5, R, W5))
    assert keepalive_cost_rate(2 * lam, T5, R) < expire_cost_rate(2 * lam, T5, R, W5)
    assert keepalive_cost_rate(lam / 2, T5, R) > expire_cost_rate(lam / 2, T5, R, W5)
    assert keepalive_breakeven_rate(T5, 0.5, 1.0) == math.inf  # a ping costs as much as a write saves


def test_numeric_expon_equals_closed_form():
    for mean_gap_s in (30.0, 120.0, 1000.0):
        dist = stats.expon(scale=mean_gap_s)
        assert hit_probability(dist, T5) == pytest.approx(hit_probability_poisson(1 / mean_gap_s, T5))
        assert breakeven_rate(dist, T5, R, W5) == pytest.approx(breakeven_reuse_rate(T5, R, W5), rel=1e-9)
        assert breakeven_rate(dist, T1H, R, W1H) == pytest.approx(breakeven_reuse_rate(T1H, R, W1H), rel=1e-9)
        lam = 1 / mean_gap_s  # ping rate of the renewal formula (quad) = the Poisson closed form
        assert keepalive_ping_rate(dist, T5) == pytest.approx(lam / math.expm1(lam * T5), rel=1e-8)


def test_numeric_empirical_and_heavy_tail():
    gaps = np.array([10.0, 100.0, 200.0, 400.0, 1000.0])
    assert hit_probability(gaps, T5) == pytest.approx(0.6)  # 3 of 5 below 300 s
    assert hit_probability(gaps, 200.0) == pytest.approx(0.4)  # strict: gap == TTL misses
    c = breakeven_scale(gaps, T5, R, W5)  # stretch until fewer than 21.7% (1 of 5) remain below 300 s
    assert 300 / c == pytest.approx(100.0, rel=1e-6)
    dist = stats.lognorm(s=1.2, scale=600)
    c = breakeven_scale(dist, T5, R, W5)
    assert dist.cdf(T5 / c) == pytest.approx(0.25 / 1.15, abs=1e-9)
    with pytest.raises(ConfigError, match="'gaps' must be finite and >= 0"):
        hit_probability([1.0, -2.0], T5)


@pytest.mark.parametrize(("ttl_s", "w", "rate_per_s"), [(T5, W5, 1 / 400), (T1H, W1H, 1 / 3000)])
def test_simulated_poisson_bill_matches_closed_form(sonnet, ttl_s, w, rate_per_s):
    n, prefix = 20_000, 10_000
    reqs = poisson_stream(np.random.default_rng(7), rate_per_s, n, prefix)
    cmp = compare_ttls(reqs, sonnet, ["none", ttl_s])
    f = cmp.results[cmp.summary["ttl"].iloc[1]].frame
    rel = (f["read_tokens"] * R + f["write_tokens"] * w).to_numpy() / prefix
    p = hit_probability_poisson(rate_per_s, ttl_s)
    expected = relative_cost(p, R, w)
    se = (w - R) * math.sqrt(p * (1 - p) / n)
    assert rel.mean() == pytest.approx(expected, abs=4 * se)
    assert f["hit"].mean() == pytest.approx(p, abs=4 * math.sqrt(p * (1 - p) / n))
    # savings vs no cache in $: prefix input only differs, by (1 - relative cost) x prefix price
    saved = cmp.summary["savings_usd"].iloc[1]
    assert saved == pytest.approx(n * prefix * 3e-6 * (1 - expected), abs=4 * se * n * prefix * 3e-6)


def test_poisson_cost_with_storage_and_a_fixed_ttl_by_hand():
    """`poisson_cost` against its two cases by hand, and `poisson_breakeven` where it equals 1."""
    import dataclasses

    from simulator.billing import get_profile
    from simulator.billing.breakeven import poisson_cost
    from simulator.billing.numeric import _crossover, crossovers, poisson_breakeven

    # fixed 1 h, λT = 6: 7 requests a cycle, 6 hits; w 1, r 0.248, storage 3.6 a TTL (Gemini 2.5 Pro)
    p, cost = poisson_cost(6 / 3600, 3600, 0.248, 1.0, 3.6, sliding=False)
    assert p == pytest.approx(6 / 7) and cost == pytest.approx((1 + 3.6 + 6 * 0.248) / 7)
    # sliding, no storage: the closed forms of old
    p, cost = poisson_cost(0.01, 300, 0.1, 1.25)
    assert p == pytest.approx(1 - math.exp(-3)) and cost == pytest.approx(p * 0.1 + (1 - p) * 1.25)
    # sliding with storage: life grows by E[min(gap, T)] = (1 − e^−x)/λ a request
    p, cost = poisson_cost(0.01, 300, 0.1, 1.25, 0.5)
    assert cost == pytest.approx(p * 0.1 + (1 - p) * 1.25 + 0.5 * p / 3)
    assert poisson_cost(0.0, 300, 0.1, 1.25, 0.5) == (0.0, 1.75)
    gemini = get_profile("gemini")
    lam, p_star = poisson_breakeven(gemini, 3600)
    assert lam * 3600 == pytest.approx(3.6 / 0.752) and p_star == pytest.approx(4.787 / 5.787, rel=1e-4)
    assert poisson_cost(lam, 3600, 0.248, 1.0, 3.6, sliding=False)[1] == pytest.approx(1.0)
    # a sliding profile that bills storage (none ships one): the root of cost = 1, above the no-storage rate
    stored = dataclasses.replace(get_profile("anthropic"), storage_usd_per_mtok_hour=3.0)  # S_T 0.0833 at 5 min
    lam, p_star = poisson_breakeven(stored, 300)
    p, cost = poisson_cost(lam, 300, 0.1, 1.25, 3.0 * 300 / 3600 / 3.0)
    assert cost == pytest.approx(1.0, abs=1e-9) and p == pytest.approx(p_star)
    assert lam > breakeven_reuse_rate(300, 0.1, 1.25)
    # the scan finds the closed-form crossover where one exists (anthropic 5 min against 1 h)
    anthropic = get_profile("anthropic")
    assert _crossover(anthropic, 300, 3600) == pytest.approx(math.log(1.9 / 1.15) / 3300, rel=1e-9)
    assert crossovers(gemini, [300, 3600]).crossover_rate_per_min[0] == pytest.approx(60 * 3.6 / 3600 / 0.752)


def test_simulated_gemini_bill_matches_the_fixed_ttl_closed_form():
    """The ledger's bill of Poisson reuse under Gemini's 1 h TTL, fixed at the write and storage billed, against
    `poisson_cost`'s fixed case: the cost and the hit share within 4 standard errors of a cycle mean."""
    from simulator.billing import get_profile
    from simulator.billing.breakeven import poisson_cost, storage_per_ttl

    gemini = get_profile("gemini")
    n, prefix, rate_per_s = 20_000, 10_000, 2 / 3600  # λT = 2: 3 requests a cycle
    reqs = poisson_stream(np.random.default_rng(11), rate_per_s, n, prefix)
    cmp = compare_ttls(reqs, gemini, ["none", 3600.0])
    f = cmp.results[cmp.summary["ttl"].iloc[1]].frame
    price = prefix * gemini.input_usd_per_mtok / 1e6
    rel = ((f["read_tokens"] * 0.248 + f["write_tokens"]) * gemini.input_usd_per_mtok / 1e6 + f["storage_usd"]) / price
    p, expected = poisson_cost(rate_per_s, 3600.0, 0.248, 1.0, storage_per_ttl(4.5, 3600.0, 1.25), sliding=False)
    assert (p, expected) == pytest.approx((2 / 3, (1 + 3.6 + 2 * 0.248) / 3))
    se = rel.std() / math.sqrt(n)
    assert rel.mean() == pytest.approx(expected, abs=4 * se) and se < 0.02
    assert f["hit"].mean() == pytest.approx(p, abs=4 * math.sqrt(p * (1 - p) / n))
