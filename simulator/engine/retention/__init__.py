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
from collections.abc import Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Any, ClassVar, Protocol, runtime_checkable

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


@runtime_checkable
class Budgeted(Protocol):
    """A policy that keeps a budget of KV tokens, as its sources state one (`unsourced_budget`)."""

    def budget(self) -> tuple[int, float]:
        """``(tokens, fraction)``: the KV tokens a sequence keeps, or, where `tokens` is 0, that share of
        its prompt (0.0: no share)."""
        ...


@cache
def _table() -> dict[str, dict[str, Any]]:
    """The data file's ``[retention.NAME]`` tables, read once."""
    with RETENTION_FILE.open("rb") as fh:
        return dict(tomllib.load(fh)["retention"])


@cache
def debits() -> dict[str, tuple[float, str]]:
    """``name -> (debit_points, source)`` from the data file."""
    return {k: (float(v["debit_points"]), str(v["source"])) for k, v in _table().items()}


@cache
def _sourced() -> dict[str, tuple[tuple[int, int] | None, float | None]]:
    """``name -> (sourced_tokens, sourced_fraction)`` from the data file (None where it gives none)."""
    raw = _table()
    return {k: ((int(v["sourced_tokens"][0]), int(v["sourced_tokens"][1])) if "sourced_tokens" in v else None,
                float(v["sourced_fraction"]) if "sourced_fraction" in v else None) for k, v in raw.items()}


def unsourced_budget(name: str, params: Mapping[str, object]) -> str | None:
    """What the sources measured policy `name`'s debit at, where `params` keep another budget: ``"1,024-4,096
    tokens"``; None where they measured it there, or for a policy with no range in the data file (full).

    The budget is the KV tokens a sequence keeps (`Budgeted.budget`): a StreamingLLM's sinks + window, an
    H2O's or SnapKV's ``budget_tokens``, or its ``budget_fraction`` of the prompt when it has no token budget."""
    tokens, fraction = _sourced().get(name, (None, None))
    if tokens is None:
        return None
    policy = make_retention(name, **params)
    if not isinstance(policy, Budgeted):  # (the data file gives a range for budgeted policies only)
        return None
    budget, share = policy.budget()
    lo, hi = tokens
    measured = f"{lo:,} tokens" if lo == hi else f"{lo:,}-{hi:,} tokens"
    if not budget:  # a share of each prompt
        if fraction is not None and share == fraction:
            return None
        return measured + (f" or {fraction:g} of the prompt" if fraction is not None else "")
    return None if lo <= budget <= hi else measured + (f" or {fraction:g} of the prompt" if fraction else "")


def unsourced_prompts(name: str, prompt_tokens: Sequence[int]) -> str | None:
    """A sentence where policy `name` evicted from prompts longer than any its debit was measured on, else None.

    `prompt_tokens` are the prompts of the requests it evicted KV from. The data file's ``sourced_prompt_tokens`` is
    the longest prompt the sources' LongBench runs kept (31,500 tokens: their prompts cut to the model's window); a
    longer prompt keeps a smaller share of itself under the same budget, and no source states the loss there
    (helper-180: a 2k budget on 128k code-repo prompts was charged the LongBench debit without a word)::

        "streaming-llm evicted KV from 141 requests, 141 (100%) of them with prompts over 31,500 tokens (up to
         126,468), the longest prompt its sources measured its debit on (LongBench, cut to the model's window):
         its debit there is no source's figure"
    """
    longest = _table().get(name, {}).get("sourced_prompt_tokens")
    if longest is None or not len(prompt_tokens):
        return None
    past = [p for p in prompt_tokens if p > longest]
    if not past:
        return None
    n = len(prompt_tokens)
    return (f"{name} evicted KV from {n:,} request{'s' * (n != 1)}, {len(past):,} ({len(past) / n:.0%}) of them with "
            f"prompts over {int(longest):,} tokens (up to {max(past):,}), the longest prompt its sources measured its "
            "debit on (LongBench, cut to the model's window): its debit there is no source's figure")


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
           "make_retention", "register_retention", "retention_names", "unsourced_budget", "unsourced_prompts"]
