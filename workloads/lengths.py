"""Token-length distributions for benchmark workloads: fixed, any `scipy.stats` law, or an empirical CSV.

A scenario writes a length as one of::

    input_tokens = 1000                                                  # fixed
    input_tokens = {dist = "lognorm", s = 0.9, loc = 43, scale = 121, clip = [1, 1023]}
    input_tokens = {csv = "lengths.csv", column = "input_tokens", clip = [1, 4096]}

Every draw is rounded to whole tokens and clipped to ``[max(1, lo), hi]`` (``clip`` defaults to
``[1, inf]``); clipping moves the mean when the bounds bite, so the tests and the scenarios state
the clipped mean. A ``dist`` is the name of a `scipy.stats` distribution and the other keys are
its parameters exactly as scipy spells them (shape names from ``dist.shapes``, then ``loc`` and,
for continuous laws, ``scale``); a name or parameter scipy does not know, a missing shape, or
values outside the law's domain are one-line errors naming the key.

An empirical column is read once, when the spec is built (`read_column`): a CSV with a header
row, ``#`` comment lines allowed (for provenance), whole token counts >= 1. Draws take rows
with replacement; lengths that name the same file draw the *same* rows, so an input/output
pair keeps its correlation (`Synthetic.generate` shares the row indices).
"""

from __future__ import annotations

import difflib
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from scipy import stats

from simulator.errors import ConfigError, at_key, must, must_whole, shown
from simulator.files import read_text

LARGEST_TOKENS = 2**40  # a draw above this (or not finite) asks for a clip bound instead of overflowing int64


def _scipy_names() -> list[str]:
    return sorted(n for n in dir(stats) if isinstance(getattr(stats, n), stats.rv_continuous | stats.rv_discrete))


def _check_clip(clip: tuple[float, float], where: str) -> None:
    lo, hi = clip
    must(lo >= 1 and lo <= hi, where, "clip", "[lo, hi] with 1 <= lo <= hi", list(clip))


def _round_clip(x: np.ndarray, clip: tuple[float, float], where: str) -> np.ndarray:
    """Whole tokens in ``[max(1, lo), hi]``; a draw that cannot be an int64 token count raises."""
    y = np.clip(np.rint(x), max(1.0, clip[0]), clip[1])
    if y.size and not (np.isfinite(y).all() and y.max() <= LARGEST_TOKENS):
        raise ConfigError(f"{where}: drew a length that is not finite or above {LARGEST_TOKENS:.3g} tokens "
                          f"(got {float(y.max()):.3g}); give 'clip' an upper bound")
    return y.astype(np.int64)


def check_scipy_law(dist: str, params: dict[str, float], where: str) -> None:
    """Rule: `dist` names a `scipy.stats` law, `params` are exactly its parameters (every shape; ``loc``,
    ``scale`` optional) and lie in its domain. Errors name ``<where>.dist`` or ``<where>.<param>``."""
    law = getattr(stats, dist, None)
    if not isinstance(law, stats.rv_continuous | stats.rv_discrete):
        close = difflib.get_close_matches(dist, _scipy_names(), n=3)
        hint = f"did you mean {', '.join(close)}?" if close else "see scipy.stats"
        raise ConfigError(f"{at_key(where, 'dist')}: must name a scipy.stats distribution ({hint}) (got {dist!r})")
    shapes = [s for s in (law.shapes or "").replace(" ", "").split(",") if s]
    valid = [*shapes, "loc", *(["scale"] if isinstance(law, stats.rv_continuous) else [])]
    for key in params:
        if key not in valid:
            raise ConfigError(f"{where}.{key}: unknown parameter of scipy.stats.{dist} (valid: {', '.join(valid)})")
    for key in shapes:
        if key not in params:
            raise ConfigError(f"{where}.{key}: missing parameter of scipy.stats.{dist} (valid: {', '.join(valid)})")
    median = float(law(**params).ppf(0.5))
    if math.isnan(median):
        raise ConfigError(f"{where}: parameters must lie in the domain of scipy.stats.{dist} "
                          f"(got {', '.join(f'{k}={v!r}' for k, v in params.items())})")
    if median < 0.5:  # rounds to 0 tokens: half the draws or more would be clipped up to 1 token
        scale = " or rescale it (scale)" if isinstance(law, stats.rv_continuous) else ""
        raise ConfigError(f"{where}: half the draws of scipy.stats.{dist} or more must be at least one token, not "
                          f"clipped up to 1 (got median {median:.3g} with "
                          f"{', '.join(f'{k}={v!r}' for k, v in params.items())}); shift it (loc){scale}")


@dataclass(frozen=True, slots=True, kw_only=True)
class FixedLength:
    """Every request gets `tokens` tokens."""

    tokens: int

    def __post_init__(self) -> None:
        must_whole(self, "FixedLength", "tokens", 1, "a whole number >= 1")  # (a numpy integer is one)

    def mean(self) -> float:
        return float(self.tokens)

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        return np.full(n, self.tokens, dtype=np.int64)


@dataclass(frozen=True, slots=True, kw_only=True)
class ScipyLength:
    """Draws of ``scipy.stats.<dist>(**params)``, rounded and clipped.

    ``params`` are ``(name, value)`` pairs so the spec stays hashable and prints as written.
    """

    dist: str
    params: tuple[tuple[str, float], ...] = ()
    clip: tuple[float, float] = (1.0, math.inf)

    def __post_init__(self) -> None:
        where = f"scipy.stats.{self.dist}"
        check_scipy_law(self.dist, dict(self.params), where)
        _check_clip(self.clip, where)

    def frozen(self) -> Any:
        """The frozen scipy distribution."""
        return getattr(stats, self.dist)(**dict(self.params))

    def mean(self) -> float:
        """The law's mean before rounding and clipping (may be inf for heavy tails)."""
        return float(self.frozen().mean())

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        x = np.asarray(self.frozen().rvs(size=n, random_state=rng), dtype=np.float64)
        return _round_clip(x, self.clip, f"scipy.stats.{self.dist}")


@dataclass(frozen=True, slots=True, kw_only=True)
class EmpiricalLength:
    """One column of a CSV of lengths, drawn with replacement by row (`take`)."""

    path: str  # as resolved, for the record
    column: str
    values: tuple[int, ...] = field(repr=False)
    clip: tuple[float, float] = (1.0, math.inf)

    def __post_init__(self) -> None:
        where = f"EmpiricalLength({Path(self.path).name}:{self.column})"
        must(len(self.values) >= 1, where, "values", "at least one row", len(self.values))
        _check_clip(self.clip, where)

    @property
    def rows(self) -> int:
        return len(self.values)

    def mean(self) -> float:
        """Mean of the column before clipping."""
        return float(np.mean(self.values))

    def take(self, rows: np.ndarray) -> np.ndarray:
        """The lengths at row indices `rows`, clipped."""
        x = np.asarray(self.values, dtype=np.float64)[rows]
        return _round_clip(x, self.clip, f"column {self.column!r} of {self.path}")


Length = FixedLength | ScipyLength | EmpiricalLength


def read_column(path: Path, column: str, where: str) -> tuple[int, ...]:
    """Whole token counts >= 1 from `column` of a CSV; errors name the file, row and column."""
    import io

    import pandas as pd  # only an empirical spec pays for pandas

    try:
        text = read_text(path, "a CSV of lengths")  # at most MAX_INPUT_BYTES, UTF-8
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    try:
        df = pd.read_csv(io.StringIO(text), comment="#", skipinitialspace=True, dtype=str)
    except (pd.errors.ParserError, pd.errors.EmptyDataError) as exc:
        raise ConfigError(f"{where}: {path.name} is not a CSV with a header row ({str(exc).strip()})") from None
    if not isinstance(df.index, pd.RangeIndex):  # pandas reads a first row longer than the header as an index
        raise ConfigError(f"{where}: {path.name} data row 1 has more fields than the header's {len(df.columns)} "
                          f"({', '.join(map(str, df.columns))}): one field a column")  # (helper-179: read shifted)
    if column not in df.columns:
        raise ConfigError(f"{where}: {path.name} has no column {column!r} (columns: {', '.join(df.columns)})")
    if df.empty:
        raise ConfigError(f"{where}: {path.name} has no rows")
    raw = df[column]
    v = pd.to_numeric(raw, errors="coerce").to_numpy(dtype=np.float64)
    bad = ~(np.isfinite(v) & (v >= 1) & (v == np.floor(v)))
    if bad.any():
        i = int(np.argmax(bad))
        raise ConfigError(f"{where}: {path.name} data row {i + 1} column {column!r} must be a whole number >= 1 "
                          f"(got {raw.iloc[i]!r})")
    return tuple(int(x) for x in v)


def _clip_from(value: object, where: str) -> tuple[float, float]:
    if (not isinstance(value, list | tuple) or len(value) != 2
            or any(isinstance(v, bool) or not isinstance(v, int | float) or v != v for v in value)):
        raise ConfigError(f"{at_key(where, 'clip')}: must be a list [lo, hi] of two numbers (got {shown(value)})")
    return float(value[0]), float(value[1])


def length_from(value: object, where: str, *, column: str, base_dir: Path | None = None) -> Length:
    """A length spec from a scenario value: a whole number, ``{dist = ..., ...}`` or ``{csv = ..., ...}``.

    `column` is the CSV column read when the table names none; a relative ``csv`` path resolves
    against `base_dir` (the scenario's folder) or, without one, the working directory.
    """
    if isinstance(value, FixedLength | ScipyLength | EmpiricalLength):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        if not 1 <= value <= LARGEST_TOKENS:
            raise ConfigError(f"{where}: must be a whole number of tokens in 1..{LARGEST_TOKENS:,} "
                              f"(got {shown(value)})")
        return FixedLength(tokens=value)
    if not isinstance(value, dict) or ("dist" in value) == ("csv" in value):
        raise ConfigError(f"{where}: must be a whole number of tokens, {{dist = ..., params...}} "
                          f"or {{csv = ..., column = ...}} (got {shown(value)})")
    table = dict(value)
    clip = _clip_from(table.pop("clip"), where) if "clip" in table else (1.0, math.inf)
    _check_clip(clip, where)
    try:
        if "csv" in table:
            rel = table.pop("csv")
            col = table.pop("column", column)
            if table:
                bad = sorted(table)[0]
                raise ConfigError(f"{where}.{bad}: unknown key (valid: csv, column, clip) (got {shown(table[bad])})")
            if not isinstance(rel, str) or not rel or not isinstance(col, str):
                raise ConfigError(f"{where}: 'csv' and 'column' must be strings (got {rel!r}, {col!r})")
            p = Path(rel)
            p = p if p.is_absolute() or base_dir is None else Path(base_dir) / p
            return EmpiricalLength(path=str(p), column=col, values=read_column(p, col, f"{where}.csv"), clip=clip)
        name = table.pop("dist")
        if not isinstance(name, str):
            raise ConfigError(f"{at_key(where, 'dist')}: must be a string (got {name!r})")
        for key, v in table.items():
            if isinstance(v, bool) or not isinstance(v, int | float) or v != v:
                raise ConfigError(f"{where}.{key}: must be a number (got {v!r})")
        params = {k: float(v) for k, v in table.items()}
        check_scipy_law(name, params, where)
        return ScipyLength(dist=name, params=tuple(params.items()), clip=clip)
    except ConfigError as exc:
        msg = str(exc)
        raise ConfigError(msg if msg.startswith(where) else f"{where}: {msg}") from None
