"""Retention policies: how many KV tokens one sequence keeps (registry by name).

A policy bounds a sequence's KV by two numbers the scheduler uses (see `simulator.engine.decode`):

- ``kept_after_prefill(prompt_tokens, target_tokens)``: KV tokens kept once the prefill of
  ``target_tokens`` (the prompt, plus output tokens already generated after a recompute) is done;
  during the first prefill the sequence holds the whole prompt (the policy scores it first); a
  re-prefill after a recompute preemption holds ``max(prompt, min(kept, cap))``: it rebuilds the
  retained KV, not the full history (see `Replica._prefill_tokens`);
- ``cap_tokens(prompt_tokens)``: during decode the KV grows one token a step and stops at the cap
  (older tokens are evicted as new ones arrive), so blocks stop growing at ``ceil(cap / B)``.

A policy that evicts is lossy: it carries a quality debit (``simulator/data/retention.toml``,
with its source) and its sequences neither read nor write the prefix cache, since their KV is
no longer the exact KV of a prefix (a SnapKV-compressed prompt is query-specific). A sequence
whose KV never reaches the policy's bounds is exact and reuses prefixes as usual.
"""

from __future__ import annotations

import tomllib
from functools import cache
from pathlib import Path
from typing import ClassVar, Protocol

from simulator.errors import ConfigError
from simulator.registry import C, Registry

RETENTION_FILE = Path(__file__).resolve().parents[2] / "data" / "retention.toml"
NO_CAP = 1 << 62


class RetentionPolicy(Protocol):
    """A retention policy's parameters and its two bounds."""

    name: ClassVar[str]

    def kept_after_prefill(self, prompt_tokens: int, target_tokens: int) -> int:
        """KV tokens kept after prefilling `target_tokens` of a `prompt_tokens` prompt."""
        ...

    def cap_tokens(self, prompt_tokens: int) -> int:
        """Most KV tokens the sequence holds while decoding (`NO_CAP` for none)."""
        ...


@cache
def debits() -> dict[str, tuple[float, str]]:
    """``name -> (debit_points, source)`` from the data file."""
    with RETENTION_FILE.open("rb") as fh:
        raw = tomllib.load(fh)["retention"]
    return {k: (float(v["debit_points"]), str(v["source"])) for k, v in raw.items()}


def debit_points(name: str) -> float:
    """The stated quality debit of policy `name` (percentage points)."""
    table = debits()
    if name not in table:
        raise ConfigError(f"retention {name!r} has no debit in {RETENTION_FILE.name} (has {sorted(table)})")
    return table[name][0]


_REGISTRY: Registry[RetentionPolicy] = Registry("retention policy")


def register_retention(cls: C) -> C:
    """Class decorator: register a retention policy under its ``name``; a second registration raises."""
    return _REGISTRY.register(cls)


def retention_names() -> list[str]:
    """Registered names, sorted."""
    return _REGISTRY.names()


def make_retention(name: str, **params: object) -> RetentionPolicy:
    """Instantiate `name` with `params`; unknown names and parameters list the valid ones."""
    return _REGISTRY.make(name, **params)


from simulator.engine.retention.policies import H2O, FullRetention, SnapKV, StreamingLLM  # noqa: E402

__all__ = ["H2O", "NO_CAP", "FullRetention", "RetentionPolicy", "SnapKV", "StreamingLLM", "debit_points",
           "make_retention", "register_retention", "retention_names"]
