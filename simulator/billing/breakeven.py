"""Closed-form prompt-cache break-even for Poisson reuse of one prefix.

Costs are in units of *the prefix's plain input price* (prefix tokens × base input price):
a miss writes the prefix at ``w`` (the TTL's write multiplier), a hit reads it at ``r``, and
without a cache every request pays ``1``. With a sliding TTL ``T`` every use refreshes the
entry, so a request hits iff the previous use of the prefix was less than ``T`` ago. For a
renewal process of reuse gaps with CDF ``F``::

    P(hit) = F(T)                    Poisson at rate λ:  F(T) = 1 - exp(-λ T)
    E[cost per request] = P r + (1 - P) w   versus 1 without a cache

Caching pays iff ``P > p* = (w - 1) / (w - r)``; for Poisson reuse iff
``λ > λ* = -ln(1 - p*) / T``. All rates here are per second; the CLI prints per minute.

A storage fee and a TTL fixed at the write (Gemini's explicit cache) change both: `poisson_cost` prices a
request under either kind of TTL with the storage of one TTL ``S_T`` (`storage_per_ttl`), and
`breakeven_fixed_ttl` solves a fixed TTL in closed form, ``λ* = (w + S_T - 1) / ((1 - r) T)``
(`simulator.billing.numeric.poisson_breakeven` solves a sliding TTL with storage numerically).
"""

from __future__ import annotations

import math

from simulator.errors import is_number, must


def _check(read_multiplier: float, write_multiplier: float) -> None:
    """The multipliers are numbers (helper-152: "300" failed in a comparison, infinity gave NaN): a read in
    [0, 1), a write finite and >= 1."""
    must(is_number(read_multiplier) and 0 <= read_multiplier < 1, "breakeven", "read_multiplier", "a number in [0, 1)",
         read_multiplier)
    must(is_number(write_multiplier) and 1 <= write_multiplier < math.inf, "breakeven", "write_multiplier",
         "a finite number >= 1", write_multiplier)


def _ttl(ttl_s: float, where: str) -> None:
    """A TTL is a finite number of seconds > 0."""
    must(is_number(ttl_s) and 0 < ttl_s < math.inf, where, "ttl_s",
         "a finite number of seconds > 0", ttl_s)


def hit_probability_poisson(rate_per_s: float, ttl_s: float) -> float:
    """``P(hit) = 1 - exp(-λ T)``: a Poisson reuse at rate λ within a sliding TTL ``T``."""
    must(rate_per_s >= 0, "hit_probability_poisson", "rate_per_s", ">= 0", rate_per_s)
    must(ttl_s >= 0, "hit_probability_poisson", "ttl_s", ">= 0", ttl_s)
    return -math.expm1(-rate_per_s * ttl_s)


def relative_cost(p_hit: float, read_multiplier: float, write_multiplier: float) -> float:
    """Expected input cost of the prefix per request, relative to no cache: ``P r + (1 - P) w``."""
    must(0 <= p_hit <= 1, "relative_cost", "p_hit", "in [0, 1]", p_hit)
    return p_hit * read_multiplier + (1.0 - p_hit) * write_multiplier


def breakeven_hit_probability(read_multiplier: float, write_multiplier: float) -> float:
    """The hit probability above which caching pays: ``p* = (w - 1) / (w - r)``.

    ``0`` when there is no write premium (``w = 1``): any reuse pays.
    Anthropic 5 min: ``0.25 / 1.15 = 0.2174``; 1 h: ``1 / 1.9 = 0.5263``.
    """
    _check(read_multiplier, write_multiplier)
    return (write_multiplier - 1.0) / (write_multiplier - read_multiplier)


def breakeven_reuse_rate(ttl_s: float, read_multiplier: float, write_multiplier: float) -> float:
    """Poisson reuse rate (per second) above which caching with TTL ``T`` pays:
    ``λ* = -ln(1 - p*) / T``.

    ``p* = (w - 1) / (w - r)`` (`breakeven_hit_probability`) is the hit probability at which a request costs
    the same with the cache as without: a miss writes the prefix at ``w`` (`write_multiplier`), a hit reads it at
    ``r`` (`read_multiplier`), both in units of the prefix's plain input price, so ``p r + (1 - p) w = 1``.
    A sliding TTL hits when the previous use was under ``T`` ago, ``P(hit) = 1 - exp(-λ T)`` for Poisson reuse at
    rate ``λ``; setting that to ``p*`` gives ``λ*``. Anthropic 5 min (``w = 1.25, r = 0.1``): ``p* = 0.25 / 1.15 =
    0.2174``, ``λ* = 0.2451 / 300 s`` = one reuse per 20.4 min; 1 h (``w = 2``): ``p* = 1 / 1.9 = 0.5263``, one
    reuse per 80.3 min. No storage fee (`poisson_cost` and `breakeven_fixed_ttl` price one)."""
    _ttl(ttl_s, "breakeven_reuse_rate")
    p_star = breakeven_hit_probability(read_multiplier, write_multiplier)
    return -math.log1p(-p_star) / ttl_s


def crossover_reuse_rate(
    ttl_short_s: float, write_short: float, ttl_long_s: float, write_long: float, read_multiplier: float
) -> float:
    """Poisson rate (per second) above which the longer, dearer TTL is the cheaper one.

    Expected cost is ``r + (w - r) exp(-λ T)``; the two are equal where
    ``λ = ln((w_long - r) / (w_short - r)) / (T_long - T_short)``. ``0`` when the long TTL
    costs no more to write (it is then always at least as cheap).
    Anthropic 1 h vs 5 min: ``ln(1.9 / 1.15) / 3300 s`` = one reuse per 109.5 min.
    """
    must(
        ttl_long_s > ttl_short_s,
        "crossover_reuse_rate",
        "ttl_long_s",
        f"> ttl_short_s={ttl_short_s}",
        ttl_long_s,
    )
    _check(read_multiplier, write_short)
    _check(read_multiplier, write_long)
    if write_long <= write_short:
        return 0.0
    return math.log((write_long - read_multiplier) / (write_short - read_multiplier)) / (
        ttl_long_s - ttl_short_s
    )


def reads_to_break_even(read_multiplier: float, write_multiplier: float, storage_per_ttl: float = 0.0) -> int:
    """Fewest reads that make one write pay: the least ``n`` with ``w + S_T + n r < 1 + n``,
    ``n = floor((w + S_T - 1) / (1 - r)) + 1``, where ``S_T`` is the storage of one TTL (`storage_per_ttl`; the
    reads within one TTL of the write). Anthropic: 1 for 5 min, 2 for 1 h; Gemini 2.5 Pro, 1 h: 5
    (``S_T = 4.5 / 1.25 = 3.6``)."""
    _check(read_multiplier, write_multiplier)
    return math.floor((write_multiplier + storage_per_ttl - 1.0) / (1.0 - read_multiplier)) + 1


def storage_per_ttl(storage_usd_per_mtok_hour: float, ttl_s: float, input_usd_per_mtok: float) -> float:
    """``S_T = s T / (3600 i)``: storing the prefix for one TTL, in units of its plain input price (storage
    ``s`` $/MTok-hour, input ``i`` $/MTok). Gemini 2.5 Pro, 1 h: ``4.5 / 1.25 = 3.6``."""
    return storage_usd_per_mtok_hour * ttl_s / 3600.0 / input_usd_per_mtok


def poisson_cost(rate_per_s: float, ttl_s: float, read_multiplier: float, write_multiplier: float,
                 storage: float = 0.0, sliding: bool = True) -> tuple[float, float]:
    """``(P, cost)`` for Poisson reuse at rate λ: the share of requests that hit and the expected input cost of
    the prefix per request relative to no cache, with ``x = λ T`` and ``S_T = storage`` (`storage_per_ttl`):

    - sliding TTL (every use refreshes it): ``P = 1 - exp(-x)``, ``cost = P r + (1 - P) w + S_T P / x``,
      the entry's life growing by ``min(gap, T)`` a request (``E = (1 - exp(-x)) / λ``);
    - TTL fixed at the write (Gemini): a write, the reuses within ``T`` of it, then a miss that writes
      again: ``P = x / (1 + x)``, ``cost = (w + S_T + r x) / (1 + x)``.

    At ``λ = 0`` no reuse comes: ``P = 0`` and ``cost = w + S_T``.
    """
    _check(read_multiplier, write_multiplier)
    must(rate_per_s >= 0, "poisson_cost", "rate_per_s", ">= 0", rate_per_s)
    x = rate_per_s * ttl_s
    r, w = read_multiplier, write_multiplier
    if not sliding:
        return x / (1.0 + x), (w + storage + r * x) / (1.0 + x)
    p = hit_probability_poisson(rate_per_s, ttl_s)
    return p, relative_cost(p, r, w) + (storage * p / x if x > 0 else storage)


def breakeven_fixed_ttl(ttl_s: float, read_multiplier: float, write_multiplier: float,
                        storage: float = 0.0) -> tuple[float, float]:
    """``(λ*, p*)`` for a TTL fixed at the write (`poisson_cost`'s second case): caching pays above
    ``λ* = (w + S_T - 1) / ((1 - r) T)``, where the hit share is ``p* = x* / (1 + x*)``, ``x* = λ* T``:
    ``(w' - 1) / (w' - r)`` with ``w' = w + S_T``, as for a sliding TTL with the write dearer by its storage.
    Gemini 2.5 Pro, 1 h (``w = 1``, ``r = 0.248``, ``S_T = 3.6``): ``x* = 4.787``, 4.79 reuses an hour."""
    _ttl(ttl_s, "breakeven_fixed_ttl")
    _check(read_multiplier, write_multiplier)
    x = (write_multiplier + storage - 1.0) / (1.0 - read_multiplier)
    return x / ttl_s, x / (1.0 + x)


def expire_cost_rate(
    rate_per_s: float, ttl_s: float, read_multiplier: float, write_multiplier: float
) -> float:
    """Cost per second (prefix-price units) of letting the entry expire between uses:
    ``λ (r + (w - r) exp(-λ T))``."""
    _check(read_multiplier, write_multiplier)
    return rate_per_s * (
        read_multiplier + (write_multiplier - read_multiplier) * math.exp(-rate_per_s * ttl_s)
    )


def keepalive_cost_rate(
    rate_per_s: float, ttl_s: float, read_multiplier: float, ping_cost: float | None = None
) -> float:
    """Cost per second of keeping the entry warm with a ping (a read) ``T - ε`` after the last use.

    Every request then reads (``λ r``). After each use, a ping fires iff no request comes
    within ``T``; uses (requests and pings) form a renewal process with mean cycle
    ``E[min(X, T)] = (1 - e^{-λT}) / λ``, of which a fraction ``e^{-λT}`` end in a ping, so
    pings come at rate ``λ / (e^{λT} - 1)``::

        cost rate = λ r + c_ping λ / (e^{λT} - 1)     (c_ping defaults to r)

    The one initial write is amortised away over an unbounded horizon.
    """
    must(rate_per_s > 0, "keepalive_cost_rate", "rate_per_s", "> 0", rate_per_s)
    _ttl(ttl_s, "keepalive_cost_rate")
    c = read_multiplier if ping_cost is None else ping_cost
    return rate_per_s * read_multiplier + c * rate_per_s / math.expm1(rate_per_s * ttl_s)


def keepalive_breakeven_rate(ttl_s: float, read_multiplier: float, write_multiplier: float) -> float:
    """Poisson rate (per second) above which keeping warm beats letting the entry expire.

    With ``y = e^{λT}`` the pings cost less than the re-writes iff ``r / (y - 1) < (w - r) / y``,
    i.e. ``y > (w - r) / (w - 2 r)``: ``λ = ln((w - r) / (w - 2r)) / T``; ``inf`` when
    ``w <= 2r`` (a ping costs as much as the write it saves). Anthropic 5 min:
    ``ln(1.15 / 1.05) / 300 s`` = one request per 55.0 min.
    """
    _check(read_multiplier, write_multiplier)
    _ttl(ttl_s, "keepalive_breakeven_rate")
    r, w = read_multiplier, write_multiplier
    if w <= 2 * r:
        return math.inf
    return math.log((w - r) / (w - 2 * r)) / ttl_s
