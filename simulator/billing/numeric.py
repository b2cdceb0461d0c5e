"""Break-even for any reuse-gap distribution, numerically (scipy), and the tables built on it.

Reuse gaps are given either as a frozen ``scipy.stats`` distribution (seconds) or as an
empirical sample of gaps in seconds. With a sliding TTL ``T`` a request hits iff the gap since
the previous use is below ``T``: ``P(hit) = F(T)`` (the empirical CDF ``#{g < T} / n`` for a
sample). The break-even *time scale* ``c`` stretches every gap by ``c`` until
``F(T / c) = p*`` (`scipy.optimize.brentq` on ``log c``); the break-even mean reuse rate is
``1 / (c E[X])``. For exponential gaps this is the closed form ``-ln(1 - p*) / T``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import pandas as pd
from scipy import integrate, optimize

from simulator.billing.breakeven import (
    breakeven_fixed_ttl,
    breakeven_hit_probability,
    breakeven_reuse_rate,
    crossover_reuse_rate,
    poisson_cost,
    reads_to_break_even,
    relative_cost,
    storage_per_ttl,
)
from simulator.billing.profiles import PriceProfile
from simulator.errors import must
from simulator.units import MINUTE_S, MTOK

SCALE_SEARCH_LOG = 50.0  # breakeven_scale searches c in [e^-50, e^50]: 10^±21, beyond any gap in seconds
Gaps = Any  # a frozen scipy.stats distribution or an array-like of gaps in seconds


def _is_dist(gaps: Gaps) -> bool:
    return hasattr(gaps, "cdf") and hasattr(gaps, "mean")


def _sample(gaps: Gaps) -> np.ndarray:
    arr = np.asarray(gaps, dtype=float).ravel()
    must(arr.size > 0, "gaps", "gaps", "a non-empty sample", arr.size)
    must(
        bool(np.all(np.isfinite(arr)) and np.all(arr >= 0)), "gaps", "gaps", "finite and >= 0", "a bad value"
    )
    return np.sort(arr)


def hit_probability(gaps: Gaps, ttl_s: float, scale: float = 1.0) -> float:
    """``P(scale X < T)``: ``dist.cdf(T / scale)`` or the empirical ``#{scale g < T} / n``."""
    if _is_dist(gaps):
        return float(gaps.cdf(ttl_s / scale))
    arr = _sample(gaps)
    return float(np.searchsorted(arr, ttl_s / scale, side="left") / arr.size)


def mean_gap_s(gaps: Gaps) -> float:
    """Mean reuse gap in seconds (``dist.mean()`` or the sample mean)."""
    return float(gaps.mean()) if _is_dist(gaps) else float(_sample(gaps).mean())


def zero_gap_share(gaps: Gaps) -> float:
    """``P(X = 0)``: the share of gaps that hit under any stretch (``c · 0 < T`` for every ``c``),
    so ``F(T / c)`` never falls below it. 0 for a continuous distribution."""
    return 0.0 if _is_dist(gaps) else float(np.mean(_sample(gaps) == 0))


def breakeven_scale(gaps: Gaps, ttl_s: float, read_multiplier: float, write_multiplier: float) -> float:
    """The factor ``c`` by which all gaps must be stretched for caching to break even:
    ``F(T / c) = p*`` (``c > 1``: the traffic already pays with margin ``c``; ``c < 1``: it
    needs reuse ``1/c`` times as frequent). A sample's CDF is a step: ``c`` is where it steps
    over ``p*`` (one gap ``g``: ``c = T / g``). ``inf`` when caching pays at any stretch: no write
    premium (``p* <= 0``), or a share ``>= p*`` of the gaps is 0 (`zero_gap_share`). NaN when the
    CDF does not cross ``p*`` for ``c`` in ``e^±SCALE_SEARCH_LOG`` (gaps ~10^21 times the TTL away)."""
    p_star = breakeven_hit_probability(read_multiplier, write_multiplier)
    if p_star <= 0 or zero_gap_share(gaps) >= p_star:
        return math.inf

    def g(log_c: float) -> float:
        return hit_probability(gaps, ttl_s, math.exp(log_c)) - p_star

    lo, hi = -SCALE_SEARCH_LOG, SCALE_SEARCH_LOG
    if g(lo) <= 0 or g(hi) >= 0:  # the CDF does not cross p* within e^±50 (a distribution far from T)
        return math.nan
    return math.exp(optimize.brentq(g, lo, hi, xtol=1e-12, rtol=1e-12))


def breakeven_rate(gaps: Gaps, ttl_s: float, read_multiplier: float, write_multiplier: float) -> float:
    """Mean reuse rate (per second) at break even for gaps shaped like `gaps`: ``1 / (c E[X])``."""
    c = breakeven_scale(gaps, ttl_s, read_multiplier, write_multiplier)
    return 0.0 if math.isinf(c) else 1.0 / (c * mean_gap_s(gaps))


def keepalive_ping_rate(gaps: Gaps, ttl_s: float) -> float:
    """Pings per second needed to keep an entry warm: ``(1 - F(T)) / E[min(X, T)]`` with
    ``E[min(X, T)] = ∫_0^T (1 - F(x)) dx`` (`scipy.integrate.quad`; exact for a sample)."""
    if _is_dist(gaps):
        e_min = integrate.quad(lambda x: float(gaps.sf(x)), 0.0, ttl_s, limit=200)[0]
    else:
        e_min = float(np.minimum(_sample(gaps), ttl_s).mean())
    return (1.0 - hit_probability(gaps, ttl_s)) / e_min if e_min > 0 else math.inf


def ttl_storage(profile: PriceProfile, ttl_s: float) -> float:
    """The prefix's storage for one TTL under `profile`, in units of its plain input price (`storage_per_ttl`;
    0 where the profile bills none)."""
    return storage_per_ttl(profile.storage_usd_per_mtok_hour, ttl_s, profile.input_usd_per_mtok)


def profile_poisson_cost(profile: PriceProfile, rate_per_s: float, ttl_s: float) -> tuple[float, float]:
    """`poisson_cost` under `profile` at TTL `ttl_s`: its multipliers, storage and kind of TTL."""
    return poisson_cost(rate_per_s, ttl_s, profile.read_multiplier, profile.write_multiplier(ttl_s),
                        ttl_storage(profile, ttl_s), profile.sliding)


# ln(λ T) bracket of the sliding-TTL-with-storage break-even: its cost is w + S_T (≥ 1 there) at e^-50, r (< 1)
# at e^50 (`poisson_cost`), whatever the prices a price file may hold
ROOT_LOG_X = 50.0


def poisson_breakeven(profile: PriceProfile, ttl_s: float) -> tuple[float, float]:
    """``(λ*, p*)``: the Poisson reuse rate above which caching with TTL `ttl_s` pays under `profile`, and the
    share of requests that hit there. A sliding TTL without storage: ``p* = (w - 1) / (w - r)``,
    ``λ* = -ln(1 - p*) / T`` (`breakeven_reuse_rate`); a TTL fixed at the write: `breakeven_fixed_ttl`; a
    sliding TTL that bills storage: the root of ``poisson_cost = 1`` (`scipy.optimize.brentq` on ``ln λT``:
    the cost falls from ``w + S_T``, above 1 since ``w >= 1``, to ``r`` as the rate grows). ``(0, 0)`` where
    a write costs no more than no cache (``w = 1`` and no storage): any reuse pays."""
    r, w, storage = profile.read_multiplier, profile.write_multiplier(ttl_s), ttl_storage(profile, ttl_s)
    if not profile.sliding:
        return breakeven_fixed_ttl(ttl_s, r, w, storage)
    if storage == 0:
        return breakeven_reuse_rate(ttl_s, r, w), breakeven_hit_probability(r, w)

    def excess(log_x: float) -> float:
        return poisson_cost(math.exp(log_x) / ttl_s, ttl_s, r, w, storage)[1] - 1.0

    x = math.exp(optimize.brentq(excess, -ROOT_LOG_X, ROOT_LOG_X, xtol=1e-12))
    return x / ttl_s, poisson_cost(x / ttl_s, ttl_s, r, w, storage)[0]


def ttl_rows(profile: PriceProfile, ttls_s: Sequence[float]) -> pd.DataFrame:
    """One row per TTL: multipliers, ``p*`` (the share of requests that hit at the break-even rate), the
    Poisson break-even rate (`poisson_breakeven`) and reads to pay off (`reads_to_break_even`); for a profile
    that bills storage, ``storage_per_ttl`` too (`ttl_storage`), after the multipliers."""
    r = profile.read_multiplier
    rows = []
    for t in ttls_s:
        w = profile.write_multiplier(t)
        lam, p_star = poisson_breakeven(profile, t)
        rows.append({
            "ttl": profile.ttl_name(t), "ttl_s": t, "write_multiplier": w, "read_multiplier": r,
            **({"storage_per_ttl": ttl_storage(profile, t)} if profile.storage_usd_per_mtok_hour else {}),
            "breakeven_p_hit": p_star,
            "breakeven_rate_per_min": lam * MINUTE_S,
            "breakeven_gap_min": math.inf if lam == 0 else 1.0 / (lam * MINUTE_S),
            "reads_to_break_even": reads_to_break_even(r, w, ttl_storage(profile, t)),
        })  # fmt: skip
    return pd.DataFrame(rows)


# the Poisson rates (per second) `crossovers` scans for where a longer TTL turns cheaper, when no closed form
# gives it (storage, or a TTL fixed at the write): one reuse in 30,000 years to 1,000 a second
CROSSOVER_GRID_PER_S = np.logspace(-12, 3, 301)


def _crossover(profile: PriceProfile, short_s: float, long_s: float) -> float:
    """The Poisson rate (per second) above which TTL `long_s` costs less a request than `short_s`
    (`profile_poisson_cost`): 0 where it does from the first rate of `CROSSOVER_GRID_PER_S`, inf where at
    none; else the first sign change, refined by `scipy.optimize.brentq`."""
    def gap(rate: float) -> float:
        return profile_poisson_cost(profile, rate, long_s)[1] - profile_poisson_cost(profile, rate, short_s)[1]

    before = CROSSOVER_GRID_PER_S[0]
    if gap(before) <= 0:
        return 0.0
    for rate in CROSSOVER_GRID_PER_S[1:]:
        if gap(rate) < 0:
            return float(optimize.brentq(gap, before, rate, xtol=1e-15, rtol=1e-12))
        before = rate
    return math.inf


def crossovers(profile: PriceProfile, ttls_s: Sequence[float]) -> pd.DataFrame:
    """For each pair of TTLs (shorter, longer): the Poisson rate above which the longer is cheaper
    (`crossover_reuse_rate` for a sliding TTL without storage, else `_crossover`)."""
    r, ts = profile.read_multiplier, sorted(ttls_s)
    closed = profile.sliding and not profile.storage_usd_per_mtok_hour
    rows = []
    for i, a in enumerate(ts):
        for b in ts[i + 1 :]:
            lam = (crossover_reuse_rate(a, profile.write_multiplier(a), b, profile.write_multiplier(b), r)
                   if closed else _crossover(profile, a, b))
            rows.append(
                {"short": profile.ttl_name(a), "long": profile.ttl_name(b), "crossover_rate_per_min": lam * MINUTE_S}
            )
    return pd.DataFrame(rows, columns=["short", "long", "crossover_rate_per_min"])


def cost_curves(
    profile: PriceProfile,
    ttls_s: Sequence[float],
    rates_per_min: Iterable[float],
    prefix_tokens: int | None = None,
) -> pd.DataFrame:
    """Expected prefix cost per request vs Poisson reuse rate, one row per (TTL, rate) (`profile_poisson_cost`:
    the profile's storage and kind of TTL counted).

    Columns: ``ttl, ttl_s, rate_per_min, p_hit, relative_cost`` (1 = no cache), given
    `prefix_tokens` ``usd_per_request = relative_cost × prefix_tokens × input $/MTok / MTOK``, and
    ``savings_pct`` (`prefix_savings_pct`).
    A ``none`` TTL row set (relative cost 1) is included for reference. Given `prefix_tokens`, the cost is
    the whole prefix's: its `PriceProfile.cacheable_tokens` at the cache's cost, the rest (past the last whole
    ``cache_increment_tokens``) as plain input, ``relative_cost = k c + (1 − k)`` with ``k = cacheable /
    prefix_tokens`` (`cached_share`), as the replay bills it (`simulator.billing.ledger`). A `prefix_tokens`
    below the profile's ``min_cacheable_tokens`` cannot be cached (``k = 0``): it is billed as plain input,
    so every TTL's rows read ``p_hit 0, relative_cost 1``.
    """
    rates = [float(x) for x in rates_per_min]
    k = cached_share(profile, prefix_tokens)
    rows = []
    for t in [0.0, *ttls_s]:
        cached = t > 0 and k > 0
        if t > 0:
            profile.write_multiplier(t)  # a TTL the profile does not sell raises, cached or not
        for rate in rates:
            p, cost = profile_poisson_cost(profile, rate / MINUTE_S, t) if cached else (0.0, 1.0)
            rows.append((profile.ttl_name(t), t, float(rate), p, k * cost + (1.0 - k) if cached else cost))
    df = pd.DataFrame(rows, columns=["ttl", "ttl_s", "rate_per_min", "p_hit", "relative_cost"])
    _add_usd(df, profile, prefix_tokens)
    df["savings_pct"] = prefix_savings_pct(df["relative_cost"])
    return df


def cached_share(profile: PriceProfile, prefix_tokens: int | None) -> float:
    """``k = cacheable_tokens(prefix) / prefix``: the share of a prefix the cache can hold (1 without
    `prefix_tokens`; 0 below the minimum). OpenAI caches in 128-token steps above 1,024, so of a 1,100-token
    prefix 1,024 tokens (helper-178: the whole prefix was priced as cached, $0.000561 a request at 1 reuse a
    minute under gpt-4.1 where the replay bills $0.000674)."""
    return 1.0 if prefix_tokens is None else profile.cacheable_tokens(prefix_tokens) / prefix_tokens


def _add_usd(df: pd.DataFrame, profile: PriceProfile, prefix_tokens: int | None) -> None:
    """Given `prefix_tokens`, the column ``usd_per_request = relative_cost × prefix_tokens × input $/MTok /
    MTOK`` (the prefix's expected cost a request; 1 = the prefix billed as plain input), after
    ``relative_cost``."""
    if prefix_tokens is not None:
        at = list(df.columns).index("relative_cost") + 1
        df.insert(at, "usd_per_request", df["relative_cost"] * prefix_tokens * profile.input_usd_per_mtok / MTOK)


def prefix_savings_pct(relative: Any) -> Any:
    """``savings_pct = 100 (1 − relative_cost)``: the saving on the prefix's input cost (the prefix billed as
    plain input = 100; its tokens past the last whole cache increment are plain either way), not on a whole
    bill; of a float or a column."""
    return 100.0 * (1.0 - relative)


def gaps_rows(profile: PriceProfile, ttls_s: Sequence[float], gaps: Gaps,
              prefix_tokens: int | None = None) -> pd.DataFrame:
    """One row per TTL for a gap distribution: ``p_hit = F(T)``, relative cost, given `prefix_tokens` its
    ``usd_per_request`` (as `cost_curves`), its `prefix_savings_pct`, break-even scale and rate.

    Given `prefix_tokens`, the relative cost is the whole prefix's, its cacheable share ``k`` (`cached_share`)
    at the cache's cost and the rest plain: ``k c + (1 − k)``, as `cost_curves`'s. A `prefix_tokens` below the
    profile's ``min_cacheable_tokens`` cannot be cached: its rows read ``p_hit 0, relative_cost 1``; the
    break-even scale and rate still describe the gaps, for a prefix long enough to be cached."""
    r = profile.read_multiplier
    k = cached_share(profile, prefix_tokens)
    rows = []
    for t in ttls_s:
        w = profile.write_multiplier(t)
        p = hit_probability(gaps, t) if k > 0 else 0.0
        cost = k * relative_cost(p, r, w) + (1.0 - k) if k > 0 else 1.0
        rows.append((profile.ttl_name(t), p, cost, prefix_savings_pct(cost), breakeven_scale(gaps, t, r, w),
                     breakeven_rate(gaps, t, r, w) * MINUTE_S))
    df = pd.DataFrame(rows, columns=["ttl", "p_hit", "relative_cost", "savings_pct", "breakeven_scale",
                                     "breakeven_rate_per_min"])  # (no TTL: no rows, the same columns)
    _add_usd(df, profile, prefix_tokens)
    return df
