"""Prompt-cache price profiles, loaded from ``profiles.toml`` beside this module.

A *profile* is a provider style (Anthropic, OpenAI, DeepSeek, Gemini): how its prompt cache
is keyed, how long it lives and what a write and a read cost relative to plain input. A
*tier* is one model's price point inside a profile. `PriceProfile` is the flat, validated
merge of the two. A user file with the same schema adds or overrides profiles and tiers:
``load_profiles(extra=Path("my_prices.toml"))``.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, fields
from functools import cache
from pathlib import Path
from typing import Any

from simulator.errors import ConfigError, RuleError, at_key, must, placed, shown
from simulator.tomlfile import read_toml
from simulator.units import HOUR_S, MINUTE_S, MTOK

PROFILE_FILE = Path(__file__).parent / "profiles.toml"
CACHING_MODES = ("explicit", "automatic")
# Bounds a price file is held to: past them a figure is a typo, and float arithmetic breaks down (a write
# multiplier of 1e17 makes the break-even hit probability round to 1, and its reuse rate ln 0).
MAX_USD_PER_MTOK = 1e6  # a dollar a token, ~13,000× the dearest list price shipped (75 $/MTok output, Opus 4)
MAX_WRITE_MULTIPLIER = 100.0  # list prices write at 1× to 2× the input price (profiles.toml)
_TTL_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|m|min|h|d)?\s*$")
_TTL_UNIT_S = {None: 1.0, "s": 1.0, "m": MINUTE_S, "min": MINUTE_S, "h": HOUR_S, "d": 24 * HOUR_S}


def parse_ttl(spec: str | float) -> float:
    """A TTL in seconds from ``"5m"``, ``"1h"``, ``"90s"``, ``"300"`` or a number.

    ``"none"``, ``"off"`` and ``0`` mean no caching and give ``0.0``.
    """
    if isinstance(spec, int | float):
        must(spec >= 0, "TTL", "ttl", ">= 0 seconds", spec)
        return float(spec)
    if spec.strip().lower() in ("none", "off", "no", "0"):
        return 0.0
    m = _TTL_RE.match(spec.lower())
    if not m:
        raise RuleError("TTL", "ttl", "like 5m, 1h, 90s or none", spec)
    return float(m.group(1)) * _TTL_UNIT_S[m.group(2)]


def ttl_label(ttl_s: float) -> str:
    """Short label of a TTL: ``300 -> "5m"``, ``3600 -> "1h"``, ``0 -> "none"``."""
    if ttl_s <= 0:
        return "none"
    for unit, size in (("d", 24 * HOUR_S), ("h", HOUR_S), ("m", MINUTE_S)):
        if ttl_s >= size and ttl_s % size == 0:
            return f"{int(ttl_s // size)}{unit}"
    return f"{ttl_s:g}s"


@dataclass(frozen=True, slots=True, kw_only=True)
class PriceProfile:
    """One model's prompt-cache prices. Multipliers are relative to the base input price.

    A request of ``n_read`` cache-read, ``n_write`` cache-write, ``n_plain`` plain input and
    ``n_out`` output tokens with TTL option ``j`` costs, in USD::

        (n_plain + read_multiplier n_read + write_multipliers[j] n_write) input_usd_per_mtok / MTOK
        + n_out output_usd_per_mtok / MTOK
    """

    key: str  # "profile/tier"
    style: str
    input_usd_per_mtok: float
    output_usd_per_mtok: float
    caching: str
    ttl_names: tuple[str, ...]
    ttl_s: tuple[float, ...]
    write_multipliers: tuple[float, ...]
    ttl_settable: bool
    read_multiplier: float
    min_cacheable_tokens: int
    cache_increment_tokens: int
    sliding: bool
    storage_usd_per_mtok_hour: float
    source: str
    as_of: str
    tier_source: str = field(default="")
    lookback_segments: int = 0  # explicit caching: earlier segment boundaries also checked for a hit

    def __post_init__(self) -> None:
        where = f"PriceProfile({self.key})"
        for f in ("input_usd_per_mtok", "output_usd_per_mtok"):
            must(0 < getattr(self, f) <= MAX_USD_PER_MTOK, where, f, f"in (0, {MAX_USD_PER_MTOK:,.0f}]",
                 getattr(self, f))
        must(self.caching in CACHING_MODES, where, "caching", f"one of {', '.join(CACHING_MODES)}", self.caching)
        n = len(self.ttl_s)
        must(n >= 1, where, "ttl_s", "a non-empty list", self.ttl_s)
        must(len(self.ttl_names) == n, where, "ttl_names", f"one name per ttl_s ({n})", self.ttl_names)
        must(
            len(self.write_multipliers) == n,
            where,
            "write_multipliers",
            f"one value per ttl_s ({n})",
            self.write_multipliers,
        )
        for t in self.ttl_s:
            must(0 < t < math.inf, where, "ttl_s", "> 0 seconds each, finite", self.ttl_s)
        # each TTL once, and each named as `parse_ttl` reads it (helper-178: ttl_s = [300, 300] priced both at the
        # first's write price, the second's never used; ttl_names = ["5m", "5m"] over [300, 3600] printed the
        # 1-hour row as "5m", which `--ttl 5m` could not name apart)
        must(len(set(self.ttl_s)) == n, where, "ttl_s", "each TTL once", self.ttl_s)
        for name, t in zip(self.ttl_names, self.ttl_s, strict=True):
            try:
                named = parse_ttl(name)
            except RuleError:
                named = math.nan
            must(named == t, where, "ttl_names",
                 f"names that read as their ttl_s (5m = 300 s, 1h = 3600 s): {name!r} is not {t:g} s",
                 self.ttl_names)
        for w in self.write_multipliers:
            must(1 <= w <= MAX_WRITE_MULTIPLIER, where, "write_multipliers", f"in [1, {MAX_WRITE_MULTIPLIER:g}] each",
                 self.write_multipliers)
        must(0 <= self.read_multiplier < 1, where, "read_multiplier", "in [0, 1)", self.read_multiplier)
        must(self.min_cacheable_tokens >= 1, where, "min_cacheable_tokens", ">= 1", self.min_cacheable_tokens)
        must(
            self.cache_increment_tokens >= 1,
            where,
            "cache_increment_tokens",
            ">= 1",
            self.cache_increment_tokens,
        )
        # (helper-178: -3 was taken, and looked back at no boundary, as 0 does, without a word)
        must(self.lookback_segments >= 0, where, "lookback_segments", ">= 0 segments", self.lookback_segments)
        must(
            0 <= self.storage_usd_per_mtok_hour <= MAX_USD_PER_MTOK,
            where,
            "storage_usd_per_mtok_hour",
            f"in [0, {MAX_USD_PER_MTOK:,.0f}]",
            self.storage_usd_per_mtok_hour,
        )
        must(bool(self.source.strip()), where, "source", "a non-empty citation", self.source)
        must(bool(self.as_of.strip()), where, "as_of", "a date", self.as_of)

    @property
    def default_ttl_s(self) -> float:
        """The first TTL the profile sells (5 min for Anthropic)."""
        return self.ttl_s[0]

    def ttl_name(self, ttl_s: float) -> str:
        """The profile's own name of a TTL it sells (``ttl_names``: DeepSeek's 86400 s is ``"24h"``);
        `ttl_label` for any other (``"none"`` for 0, a settable TTL the profile does not list)."""
        for t, name in zip(self.ttl_s, self.ttl_names, strict=True):
            if t == ttl_s:
                return name
        return ttl_label(ttl_s)

    def write_multiplier(self, ttl_s: float) -> float:
        """Write price for a TTL, x base input. Raises listing the TTLs sold when not offered."""
        for t, w in zip(self.ttl_s, self.write_multipliers, strict=True):
            if t == ttl_s:
                return w
        if self.ttl_settable:
            return self.write_multipliers[0]
        valid = ", ".join(self.ttl_names)
        raise RuleError(f"PriceProfile({self.key})", "ttl", f"one of {valid} (the TTLs {self.key} sells)",
                        ttl_label(ttl_s))

    def cacheable_tokens(self, prefix_tokens: int) -> int:
        """Tokens of a prefix that the cache can hold: ``0`` below the minimum, else
        ``min + increment * floor((prefix - min) / increment)``."""
        lo, inc = self.min_cacheable_tokens, self.cache_increment_tokens
        if prefix_tokens < lo:
            return 0
        return lo + inc * ((prefix_tokens - lo) // inc)

    def input_usd(self, tokens: float) -> float:
        """Plain input price of `tokens` tokens."""
        return tokens * self.input_usd_per_mtok / MTOK


@dataclass(frozen=True, slots=True)
class ProfileCatalog:
    """Profiles by name, each a dict of tiers; `get` resolves defaults and lists valid names."""

    tiers: dict[str, dict[str, PriceProfile]]
    default_tier: dict[str, str]
    default_profile: str
    shared: dict[str, dict[str, Any]]  # profile-level TOML keys, inherited by tiers added later

    def profile_key(self, profile: str | None = None) -> str | None:
        """The catalog's key for `profile` in any case (default: the catalog's default profile); None if none."""
        name = (profile or self.default_profile).lower()
        return next((key for key in self.tiers if key.lower() == name), None)

    def get(self, profile: str | None = None, tier: str | None = None) -> PriceProfile:
        """The tier `tier` of `profile`, its name in any case (defaults: the catalog's default profile and its
        default tier); ``"anthropic/sonnet-4"``, a `PriceProfile.key` as the tables print it, names both (helper-152:
        it was refused). An empty name is refused, not the default."""
        if profile is not None and (not isinstance(profile, str) or not profile.strip()):
            raise ConfigError(f"price profile: must be a profile's name, e.g. {self.default_profile!r} (got "
                              f"{profile!r})")
        if profile is not None and "/" in profile and tier is None:
            profile, tier = profile.split("/", 1)
            if not profile.strip() or not tier.strip():  # 'anthropic/' or '/sonnet-4' (helper-153: the default)
                raise ConfigError(f"price profile: must be 'profile/tier', both named, e.g. 'anthropic/sonnet-4' (got "
                                  f"{profile + '/' + tier!r})")
        name = self.profile_key(profile)
        if name is None:
            raise ConfigError(f"unknown price profile {(profile or self.default_profile)!r}; valid: "
                              f"{', '.join(self.tiers)}")
        tier_name = tier or self.default_tier[name]
        tiers = self.tiers[name]
        if tier_name not in tiers:
            raise ConfigError(f"unknown tier {tier_name!r} of profile {name!r}; valid: {', '.join(tiers)}")
        return tiers[tier_name]

    def automatic(self) -> list[str]:
        """Profiles whose default tier caches every prefix without breakpoints (``caching = "automatic"``)."""
        return [name for name, tiers in self.tiers.items() if tiers[self.default_tier[name]].caching == "automatic"]


_PROFILE_ONLY = {"style", "default_tier", "tier", "source", "as_of"}
# what each key of a tier holds, as TOML gives it (`_typed`); the others are numbers
_KINDS = {"caching": "a string", "ttl_names": "a list of strings", "ttl_s": "a list of numbers",
          "write_multipliers": "a list of numbers", "ttl_settable": "true or false", "sliding": "true or false",
          "min_cacheable_tokens": "a whole number", "cache_increment_tokens": "a whole number",
          "lookback_segments": "a whole number", "style": "a string"}


def _typed(where: str, key: str, value: Any) -> None:
    """Refuse a tier's `value` at `key` that is not of its kind (`_KINDS`): ``write_multipliers = ["a"]`` is
    ``<where>.write_multipliers: must be a list of numbers (got ['a'])``, not Python's own complaint."""
    kind = _KINDS.get(key, "a number")

    def number(x: Any) -> bool:
        return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)

    ok = {"a string": isinstance(value, str), "true or false": isinstance(value, bool),
          "a whole number": isinstance(value, int) and not isinstance(value, bool),
          "a list of strings": isinstance(value, list) and all(isinstance(x, str) for x in value),
          "a list of numbers": isinstance(value, list) and all(number(x) for x in value),
          "a number": number(value)}[kind]
    if not ok:
        raise ConfigError(f"{at_key(where, key)}: must be {kind} (got {shown(value)})")


def parse_profiles(data: dict[str, Any], path: Path, base: ProfileCatalog | None = None) -> ProfileCatalog:
    """Turn parsed TOML into a catalog; profiles and tiers extend (or override) `base`."""
    tiers = {k: dict(v) for k, v in base.tiers.items()} if base else {}
    defaults = dict(base.default_tier) if base else {}
    shared_by_profile = dict(base.shared) if base else {}
    unknown = set(data) - {"profile", "default_profile"}
    if unknown:
        raise ConfigError(f"{path}: unknown key {sorted(unknown)[0]!r}; valid: default_profile, profile")
    tier_keys = {f.name for f in fields(PriceProfile)} - {"key", "source", "as_of", "tier_source"}
    for name, raw in data.get("profile", {}).items():
        raw = {**shared_by_profile.get(name, {}), **raw}
        raw_tiers = raw.pop("tier", {})
        shared_by_profile[name] = {k: v for k, v in raw.items() if k != "default_tier"}
        must(bool(raw_tiers), f"{path}: profile.{name}", "tier", "at least one [tier.NAME] table", raw_tiers)
        defaults[name] = str(raw.pop("default_tier", defaults.get(name, next(iter(raw_tiers)))))
        shared = {k: raw.pop(k) for k in ("source", "as_of", "style") if k in raw}
        bad = set(raw) - tier_keys
        if bad:
            raise ConfigError(
                f"{path}: profile.{name}: unknown key {sorted(bad)[0]!r}; "
                f"valid: {', '.join(sorted(tier_keys | _PROFILE_ONLY))}"
            )
        tiers.setdefault(name, {})
        for tier_name, traw in raw_tiers.items():
            where = f"{path}: profile.{name}.tier.{tier_name}"
            traw = dict(traw)
            bad = set(traw) - tier_keys - {"source", "as_of"}
            if bad:
                raise ConfigError(
                    f"{where}: unknown key {sorted(bad)[0]!r}; valid: {', '.join(sorted(tier_keys))}"
                )
            tier_cite = {k: str(traw.pop(k)) for k in ("source", "as_of") if k in traw}
            merged: dict[str, Any] = {**raw, **traw}
            missing = tier_keys - set(merged) - {"style", "lookback_segments"}
            if missing:
                raise ConfigError(f"{where}: missing key {sorted(missing)[0]!r}")
            # a key the profile set for all its tiers is said at the profile, where the file has it
            at = {k: where if k in traw else f"{path}: profile.{name}" for k in merged}
            for k, v in merged.items():
                _typed(at[k], k, v)
            for k in ("ttl_names", "ttl_s", "write_multipliers"):
                merged[k] = tuple(merged[k])
            merged["ttl_s"] = tuple(float(t) for t in merged["ttl_s"])
            try:
                tiers[name][tier_name] = PriceProfile(
                    key=f"{name}/{tier_name}",
                    style=str(shared.get("style", name)),
                    source=str(shared.get("source", tier_cite.get("source", ""))),
                    as_of=tier_cite.get("as_of", str(shared.get("as_of", ""))),
                    tier_source=tier_cite.get("source", ""),
                    **merged,
                )
            except RuleError as exc:
                raise placed(exc, at.get(exc.key, where)) from None
        if defaults[name] not in tiers[name]:
            raise ConfigError(
                f"{path}: profile.{name}: 'default_tier' must name one of its tiers (got {defaults[name]!r})"
            )
    default_profile = str(data.get("default_profile", base.default_profile if base else next(iter(tiers))))
    if default_profile not in tiers:
        raise ConfigError(f"{path}: 'default_profile' must name a profile (got {default_profile!r})")
    return ProfileCatalog(tiers, defaults, default_profile, shared_by_profile)


@cache
def _shipped() -> ProfileCatalog:
    return parse_profiles(read_toml(PROFILE_FILE), PROFILE_FILE)


def load_profiles(extra: Path | str | None = None) -> ProfileCatalog:
    """The shipped profiles, extended by a user TOML file when given."""
    cat = _shipped()
    if extra is not None:
        cat = parse_profiles(read_toml(Path(extra)), Path(extra), cat)
    return cat


def get_profile(profile: str | None = None, tier: str | None = None) -> PriceProfile:
    """A provider's prompt-cache prices for one model tier: ``load_profiles().get(profile, tier)``.

    `profile` names a provider (``"anthropic"``, any case) or a key ``"profile/tier"`` as the tables print it
    (``"anthropic/sonnet-4"``); `tier` its model (default: the profile's default tier). None is the default,
    Anthropic Sonnet 4: 3 USD per million input tokens and 15 per million output, cache writes at 1.25× for
    5 min and 2× for 1 h, reads at 0.1×, from 1,024 cacheable tokens, the TTL refreshed on each hit. The
    `PriceProfile` gives a request's bill: ``(n_plain + r n_read + w_j n_write) · input_usd_per_mtok / 1e6 +
    n_out · output_usd_per_mtok / 1e6``. Unknown names raise `ConfigError` listing the valid ones."""
    return load_profiles().get(profile, tier)
