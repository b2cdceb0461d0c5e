"""Length and time distributions as frozen specs over `scipy.stats`.

A spec is a frozen dataclass holding the parameters a user writes (a mean and a
coefficient of variation, as traces report them); `.dist()` turns it into a frozen
`scipy.stats` distribution and `.sample(rng, n)` draws with ``random_state=rng``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy import stats

from simulator.errors import ConfigError, RuleError, at_key, must, placed, shown

MAX_CV = 1e6  # beyond it cv**2 heads for overflow, and no measured length or gap is that skewed
LARGEST_TOKENS = 2**40  # a token draw above this cannot be a request; it asks for a 'high' bound


@dataclass(frozen=True, slots=True, kw_only=True)
class LogNormal:
    """A lognormal with a given mean and coefficient of variation, optionally clipped.

    With ``cv = std / mean``: ``sigma**2 = ln(1 + cv**2)`` and
    ``mu = ln(mean) - sigma**2 / 2``, so that ``E[X] = exp(mu + sigma**2 / 2) = mean``.
    Draws are clipped to ``[low, high]`` (clipping moves the mean a little when the
    bounds bite; keep them wide when the mean matters).
    """

    mean: float
    cv: float = 1.0
    low: float = 0.0
    high: float = math.inf
    key: str = field(default="", compare=False, repr=False)  # the spec key it was read from, for errors

    def __post_init__(self) -> None:
        where = "LogNormal"
        must(self.mean > 0, where, "mean", "> 0", self.mean)
        must(self.mean < math.inf, where, "mean", "finite", self.mean)
        must(self.cv > 0, where, "cv", "> 0", self.cv)
        must(self.cv <= MAX_CV, where, "cv", f"at most {MAX_CV:g}", self.cv)
        must(0 <= self.low < math.inf, where, "low", ">= 0 and finite (draws are positive)", self.low)
        must(self.high > 0, where, "high", "> 0 (draws are positive)", self.high)
        must(self.low <= self.high, where, "low", f"<= high={self.high}", self.low)

    @property
    def sigma(self) -> float:
        """Shape: ``sqrt(ln(1 + cv**2))``."""
        return math.sqrt(math.log1p(self.cv**2))

    def dist(self) -> Any:
        """The frozen ``scipy.stats.lognorm`` (``s = sigma``, ``scale = exp(mu)``)."""
        mu = math.log(self.mean) - self.sigma**2 / 2
        return stats.lognorm(s=self.sigma, scale=math.exp(mu))

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """`n` clipped draws (float64)."""
        x = np.asarray(self.dist().rvs(size=n, random_state=rng), dtype=np.float64)
        return np.clip(x, self.low, self.high)

    def _named(self) -> str:
        return f"{self.key}: " if self.key else ""

    def _at(self, field: str) -> str:
        """Where `field` was written: ``workload.spec.output_tokens.high`` (or ``'high'`` without a key)."""
        return f"{self.key}.{field}" if self.key else repr(field)

    def check_tokens(self) -> None:
        """Rule for a length in tokens: its draws can be request lengths, so unless ``high`` bounds them
        at `LARGEST_TOKENS` the mean (and ``low``) are at most that; checked when a spec is read, before
        anything is drawn (a draw in the far tail may still raise in `sample_tokens`); and ``high`` is at
        least one token (below, every draw would be clipped under a token, then rounded up to one)."""
        if self.high < 1:
            raise ConfigError(f"{self._at('high')}: must be at least 1 token (got {self.high:g})")
        if min(max(self.mean, self.low), self.high) > LARGEST_TOKENS:
            raise ConfigError(f"{self._named()}'mean' and 'low' must be at most {LARGEST_TOKENS:,} tokens "
                              f"unless 'high' bounds the draws (got mean={self.mean:g}, low={self.low:g}, "
                              f"high={self.high:g})")

    def sample_tokens(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """`n` draws rounded to whole tokens, at least ``max(1, low)`` (int64); a draw above
        `LARGEST_TOKENS` raises (give ``high``) instead of overflowing int64."""
        x = np.maximum(np.rint(self.sample(rng, n)), max(1.0, self.low))
        if x.size and not x.max() <= LARGEST_TOKENS:
            raise ConfigError(f"{self._named()}LogNormal(mean={self.mean:g}, cv={self.cv:g}): drew {x.max():.3g} "
                              f"tokens, over {LARGEST_TOKENS:.3g}; bound the draws with 'high'")
        return x.astype(np.int64)


def require_numbers(table: dict[str, object], where: str, keys: object = None,
                    infinite: tuple[str, ...] = ()) -> None:
    """One-line `ConfigError` naming the first value of `table` (or of `keys`) that is not a finite real
    number (``inf`` is allowed for the keys in `infinite`, a bound that may be open)."""
    for key, value in table.items():
        if keys is not None and key not in keys:  # type: ignore[operator]
            continue
        if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
            raise ConfigError(f"{where}.{str(key)[:80]}: must be a number (got {shown(value)})")
        if key not in infinite and not math.isfinite(value):
            raise ConfigError(f"{where}.{str(key)[:80]}: must be a finite number (got {shown(value)})")


def lognormal_from(value: object, where: str) -> LogNormal:
    """A `LogNormal` from a spec, a plain mean, or a table ``{mean=, cv=, low=, high=}``."""
    if isinstance(value, LogNormal):
        return value
    try:
        if isinstance(value, int | float) and not isinstance(value, bool):
            if not math.isfinite(value):  # the key itself, not key.mean: a plain number is the mean
                raise ConfigError(f"{where}: must be a finite number (got {shown(value)})")
            try:
                return LogNormal(mean=float(value), key=where)
            except RuleError as exc:
                raise ConfigError(exc.at(where, got=value)) from None
        if isinstance(value, dict):
            valid = {"mean", "cv", "low", "high"}
            unknown = sorted(str(k) for k in set(value) - valid)
            if unknown:
                raise ConfigError(f"{where}: unknown key {shown(unknown[0])} (valid: {', '.join(sorted(valid))})")
            if "mean" not in value:
                raise ConfigError(f"{at_key(where, 'mean')}: required key is missing "
                                  f"(valid: {', '.join(sorted(valid))})")
            require_numbers(value, where, infinite=("high",))
            return LogNormal(**value, key=where)
    except ConfigError as exc:  # a rule of a table at its key (``tool_gap_s.cv``), not the class's name
        if isinstance(exc, RuleError):
            raise placed(exc, where) from None
        msg = str(exc)
        raise ConfigError(msg if msg.startswith(where) else f"{where}: {msg}") from None
    raise ConfigError(f"{where}: must be a number or a table {{mean, cv, low, high}} (got {shown(value)})")


def geometric_counts(rng: np.random.Generator, mean: float, n: int) -> np.ndarray:
    """`n` counts >= 1 with the given mean: ``scipy.stats.geom(p = 1 / mean)``."""
    if mean <= 1:
        return np.ones(n, dtype=np.int64)
    return np.asarray(stats.geom(1.0 / mean).rvs(size=n, random_state=rng), dtype=np.int64)
