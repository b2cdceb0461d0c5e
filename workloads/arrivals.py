"""Arrival processes: when requests (or sessions) arrive.

Each process is a frozen spec with ``times(rng, duration_s) -> ndarray`` (sorted arrival
times in ``[0, duration_s)``) and ``scaled(factor)`` (the same process at ``factor`` times
the rate). In a scenario they are tables ``{kind = "bursty", rate_per_s = 2, cv = 3}``.

- ``poisson``: exponential gaps, mean ``1 / rate_per_s``, CV 1.
- ``bursty``: gamma or lognormal gaps with mean ``1 / rate_per_s`` and a given CV (> 1 is
  burstier than Poisson; at most `MAX_GAMMA_CV` with gamma gaps, `MAX_CV` with lognormal ones).
- ``diurnal``: non-homogeneous Poisson with
  ``rate(t) = rate_per_s * (1 + amplitude * cos(2 pi (t - peak_s) / period_s))``,
  drawn by thinning (Lewis and Shedler 1979): candidates at ``rate_max = rate_per_s *
  (1 + amplitude)``, each kept with probability ``rate(t) / rate_max``.
- ``offline``: all ``count`` requests at ``t = 0`` (MLPerf's Offline scenario, ``trtllm-bench
  throughput``): the duration does not bound them, and ``scaled(f)`` multiplies the count.
- session-driven arrivals are built by the generators from these plus think times
  (`session_turn_times`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, ClassVar, Protocol

import numpy as np
from scipy import stats

from simulator.config import missing_fields
from simulator.errors import ConfigError, is_number, must, must_whole, placed, shown
from simulator.limits import MAX_REQUESTS
from workloads.distributions import MAX_CV, require_numbers

# The largest `Bursty` cv with gamma gaps (helper-159: cv = 1e9 drew gaps until the duration was passed, for
# ever). Gamma's shape is 1/cv**2, and a draw of shape k is about scale * U**(1/k): below k ~ 1/700 a typical
# draw underflows the smallest float (~5e-324) and the gap is exactly 0 s. Measured on 100,000 draws (seed 0):
# 0.1% of gaps 0 s at cv = 10, 15.6% at cv = 20, 92.9% at cv = 100, 99.9% at cv = 1,000; and 10 s at 1 arrival a
# second drew (median of 5 seeds) 13 arrivals at cv = 10, 177 at 20, 1,663 at 100 and 55,689 at 1,000: the
# process no longer has the rate or cv it was given. Lognormal gaps do not underflow; they take the lengths'
# `MAX_CV`. Neither keeps its rate over a short run at a cv far above 1, though the mean gap is right: a few long
# gaps hold most of the time, many tiny ones most of the arrivals (helper-164: 100 s at 1/s drew, median of 5
# seeds, 127 lognormal arrivals at cv = 10, 273 at 1e3 and 2,524 at 1e6, against 100 expected).
MAX_GAMMA_CV = 10.0


class ArrivalProcess(Protocol):
    kind: ClassVar[str]

    def times(self, rng: np.random.Generator, duration_s: float) -> np.ndarray: ...

    def scaled(self, factor: float) -> ArrivalProcess: ...

    def expected_count(self, duration_s: float) -> float:
        """Arrivals drawn for `duration_s` on average (checked against `simulator.limits.MAX_REQUESTS`
        before drawing)."""
        ...


def _must_numbers(spec: object, where: str, rules: dict[str, str]) -> None:
    """Each of `spec`'s fields named in `rules` is a real number (`is_number`), else `RuleError` with its rule
    (``Poisson: 'rate_per_s' must be a number > 0 (got None)``), before a comparison fails as a TypeError."""
    for field, rule in rules.items():
        value = getattr(spec, field)
        must(is_number(value), where, field, f"a number {rule}".rstrip(), value)


def _renewal_times(gaps: Any, rng: np.random.Generator, rate_per_s: float, duration_s: float,
                   process: object = None) -> np.ndarray:
    """Cumulative sums of gaps drawn in batches until `duration_s` is passed, or `MAX_REQUESTS` arrivals are
    drawn before it (`process`, the spec, is named in the `ConfigError`): a loop that ends whatever the gaps."""
    chunks: list[np.ndarray] = []
    t = 0.0
    drawn = 0
    batch = max(16, int(rate_per_s * duration_s * 1.1) + 16)
    while t < duration_s:
        if drawn > MAX_REQUESTS:
            raise ConfigError(f"{process or 'arrivals'}: drew over {MAX_REQUESTS:,} arrivals before {duration_s:g} s "
                              f"(rate_per_s × duration_s = {rate_per_s * duration_s:,.0f}); allowed up to "
                              f"{MAX_REQUESTS:,}: lower cv or duration_s")
        g = np.asarray(gaps.rvs(size=batch, random_state=rng), dtype=np.float64)
        c = t + np.cumsum(g)
        chunks.append(c)
        t = float(c[-1])
        drawn += batch
    out = np.concatenate(chunks) if chunks else np.empty(0)
    return out[out < duration_s]


@dataclass(frozen=True, slots=True, kw_only=True)
class Poisson:
    """Homogeneous Poisson arrivals: gaps ``~ Exp(rate_per_s)``, ``E[N(T)] = rate_per_s * T``."""

    kind: ClassVar[str] = "poisson"
    rate_per_s: float

    def __post_init__(self) -> None:
        _must_numbers(self, "Poisson", {"rate_per_s": "> 0"})
        must(self.rate_per_s > 0, "Poisson", "rate_per_s", "> 0", self.rate_per_s)
        must(self.rate_per_s < math.inf, "Poisson", "rate_per_s", "finite", self.rate_per_s)

    def times(self, rng: np.random.Generator, duration_s: float) -> np.ndarray:
        return _renewal_times(stats.expon(scale=1.0 / self.rate_per_s), rng, self.rate_per_s, duration_s)

    def scaled(self, factor: float) -> Poisson:
        return replace(self, rate_per_s=self.rate_per_s * factor)

    def expected_count(self, duration_s: float) -> float:
        return self.rate_per_s * duration_s


@dataclass(frozen=True, slots=True, kw_only=True)
class Bursty:
    """Renewal arrivals with gamma or lognormal gaps of mean ``1 / rate_per_s`` and CV `cv`.

    Gamma: shape ``k = 1 / cv**2``, scale ``= mean_gap / k``. Lognormal: ``sigma**2 =
    ln(1 + cv**2)``, ``mu = ln(mean_gap) - sigma**2 / 2``.
    """

    kind: ClassVar[str] = "bursty"
    rate_per_s: float
    cv: float = 2.0
    dist: str = "gamma"

    def __post_init__(self) -> None:
        _must_numbers(self, "Bursty", {"rate_per_s": "> 0", "cv": "> 0"})
        must(self.rate_per_s > 0, "Bursty", "rate_per_s", "> 0", self.rate_per_s)
        must(self.rate_per_s < math.inf, "Bursty", "rate_per_s", "finite", self.rate_per_s)
        must(self.cv > 0, "Bursty", "cv", "> 0", self.cv)
        must(self.cv < math.inf, "Bursty", "cv", "finite", self.cv)
        must(self.dist in ("gamma", "lognormal"), "Bursty", "dist", "'gamma' or 'lognormal'", self.dist)
        if self.dist == "gamma":
            must(self.cv <= MAX_GAMMA_CV, "Bursty", "cv", f"at most {MAX_GAMMA_CV:g} with dist = 'gamma' (gamma "
                 f"gaps of shape 1/cv² underflow to 0 s past it; dist = 'lognormal' takes up to {MAX_CV:g})", self.cv)
        else:
            must(self.cv <= MAX_CV, "Bursty", "cv", f"at most {MAX_CV:g}", self.cv)

    def gap_dist(self) -> Any:
        """The frozen scipy distribution of inter-arrival gaps (seconds)."""
        mean_gap = 1.0 / self.rate_per_s
        if self.dist == "gamma":
            k = 1.0 / self.cv**2
            return stats.gamma(a=k, scale=mean_gap / k)
        sigma2 = math.log1p(self.cv**2)
        return stats.lognorm(s=math.sqrt(sigma2), scale=math.exp(math.log(mean_gap) - sigma2 / 2))

    def times(self, rng: np.random.Generator, duration_s: float) -> np.ndarray:
        return _renewal_times(self.gap_dist(), rng, self.rate_per_s, duration_s, self)

    def scaled(self, factor: float) -> Bursty:
        return replace(self, rate_per_s=self.rate_per_s * factor)

    def expected_count(self, duration_s: float) -> float:
        return self.rate_per_s * duration_s


@dataclass(frozen=True, slots=True, kw_only=True)
class Diurnal:
    """Non-homogeneous Poisson with a cosine daily curve, by thinning.

    ``rate(t) = rate_per_s * (1 + amplitude * cos(2 pi (t - peak_s) / period_s))``; the mean
    over a whole period is `rate_per_s`. Default peak at 14:00 (50,400 s), a common
    business-hours peak; ``amplitude = 0.5`` gives a 3:1 peak-to-trough ratio.
    """

    kind: ClassVar[str] = "diurnal"
    rate_per_s: float
    amplitude: float = 0.5
    period_s: float = 86_400.0
    peak_s: float = 50_400.0
    start_s: float = 0.0  # time of day at t = 0

    def __post_init__(self) -> None:
        _must_numbers(self, "Diurnal", {"rate_per_s": "> 0", "amplitude": "in [0, 1]", "period_s": "> 0",
                                        "peak_s": "", "start_s": ""})
        must(self.rate_per_s > 0, "Diurnal", "rate_per_s", "> 0", self.rate_per_s)
        must(self.rate_per_s < math.inf, "Diurnal", "rate_per_s", "finite", self.rate_per_s)
        must(0 <= self.amplitude <= 1, "Diurnal", "amplitude", "in [0, 1]", self.amplitude)
        must(self.period_s > 0, "Diurnal", "period_s", "> 0", self.period_s)
        must(self.period_s < math.inf, "Diurnal", "period_s", "finite", self.period_s)
        must(math.isfinite(self.peak_s) and math.isfinite(self.start_s), "Diurnal", "peak_s and start_s", "finite",
             (self.peak_s, self.start_s))

    def rate_at(self, t_s: np.ndarray | float) -> np.ndarray:
        """Instantaneous rate (1/s) at workload time `t_s`."""
        phase = 2 * np.pi * (np.asarray(t_s) + self.start_s - self.peak_s) / self.period_s
        return np.asarray(self.rate_per_s * (1 + self.amplitude * np.cos(phase)))

    def times(self, rng: np.random.Generator, duration_s: float) -> np.ndarray:
        rate_max = self.rate_per_s * (1 + self.amplitude)
        cand = Poisson(rate_per_s=rate_max).times(rng, duration_s)
        u = np.asarray(stats.uniform.rvs(size=cand.size, random_state=rng))
        return cand[u * rate_max < self.rate_at(cand)]

    def scaled(self, factor: float) -> Diurnal:
        return replace(self, rate_per_s=self.rate_per_s * factor)

    def expected_count(self, duration_s: float) -> float:
        """Candidates drawn before thinning: ``rate_per_s · (1 + amplitude) · duration_s``."""
        return self.rate_per_s * (1 + self.amplitude) * duration_s


@dataclass(frozen=True, slots=True, kw_only=True)
class Offline:
    """All `count` requests at once: ``times = [0.0] * count`` whatever the duration."""

    kind: ClassVar[str] = "offline"
    count: int

    def __post_init__(self) -> None:
        must_whole(self, "Offline", "count", 1, "a whole number >= 1")  # (a numpy integer is one: helper-185)

    def times(self, rng: np.random.Generator, duration_s: float) -> np.ndarray:
        return np.zeros(self.count)

    def expected_count(self, duration_s: float) -> float:
        return float(self.count)

    def scaled(self, factor: float) -> Offline:
        """`factor` times the requests (at least one): the offline analogue of a rate scale."""
        return replace(self, count=max(1, round(self.count * factor)))


ARRIVALS: dict[str, type[Any]] = {c.kind: c for c in (Poisson, Bursty, Diurnal, Offline)}


def arrival_from(value: object, where: str) -> ArrivalProcess:
    """An arrival process from a spec or a table ``{kind = "...", ...params}``."""
    if isinstance(value, Poisson | Bursty | Diurnal | Offline):
        return value
    if not isinstance(value, dict) or "kind" not in value:
        raise ConfigError(f"{where}: must be a table with 'kind' (got {shown(value)})")
    params = dict(value)
    kind = params.pop("kind")
    cls = ARRIVALS.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise ConfigError(f"{where}: unknown arrival kind {shown(kind)} (valid: {', '.join(sorted(ARRIVALS))})")
    valid = {f for f in cls.__dataclass_fields__ if f != "kind"}
    unknown = sorted(set(params) - valid)
    if unknown:
        raise ConfigError(f"{where}.{unknown[0][:80]}: unknown key (valid: {', '.join(sorted(valid))}) "
                          f"(got {shown(params[unknown[0]])})")
    missing = missing_fields(cls, params)
    if missing:
        raise ConfigError(f"{where}.{missing[0]}: required key is missing ({kind} takes {', '.join(sorted(valid))})")
    require_numbers(params, where, keys={k for k, f in cls.__dataclass_fields__.items()
                                         if str(f.type) in ("int", "float")})
    try:
        return cls(**params)
    except ConfigError as exc:  # a rule of the process at its key, not its class's name
        raise placed(exc, where) from None


def session_turn_times(start_s: float, think_times_s: np.ndarray) -> np.ndarray:
    """Turn arrival times of one session: ``t_0 = start_s``, ``t_{k+1} = t_k + think_k``."""
    return start_s + np.concatenate(([0.0], np.cumsum(think_times_s)))
