"""The retention policies: full, StreamingLLM (sinks + window), H2O and SnapKV (token budgets)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

from simulator.engine.retention import NO_CAP, register_retention
from simulator.errors import must


@register_retention
@dataclass(frozen=True, slots=True, kw_only=True)
class FullRetention:
    """Every token's KV is kept: no bound, no debit."""

    name: ClassVar[str] = "full"

    def kept_after_prefill(self, prompt_tokens: int, target_tokens: int) -> int:
        return target_tokens

    def cap_tokens(self, prompt_tokens: int) -> int:
        return NO_CAP


@register_retention
@dataclass(frozen=True, slots=True, kw_only=True)
class StreamingLLM:
    """Attention sinks plus a recent window (Xiao et al., 2024): ``cap = sink_tokens + window_tokens``."""

    name: ClassVar[str] = "streaming-llm"
    sink_tokens: int = 4
    window_tokens: int = 2048

    def __post_init__(self) -> None:
        must(self.sink_tokens >= 0, "StreamingLLM", "sink_tokens", ">= 0", self.sink_tokens)
        must(self.window_tokens >= 1, "StreamingLLM", "window_tokens", ">= 1", self.window_tokens)

    def kept_after_prefill(self, prompt_tokens: int, target_tokens: int) -> int:
        return min(target_tokens, self.sink_tokens + self.window_tokens)

    def cap_tokens(self, prompt_tokens: int) -> int:
        return self.sink_tokens + self.window_tokens

    def budget(self) -> tuple[int, float]:
        """Sinks plus window, every prompt alike (`retention.Budgeted`)."""
        return self.sink_tokens + self.window_tokens, 0.0


def _budget(where: str, fraction: float, tokens: int, prompt_tokens: int) -> int:
    """``tokens`` when > 0, else ``ceil(fraction · prompt_tokens)`` (at least 1)."""
    return tokens if tokens > 0 else max(1, math.ceil(fraction * prompt_tokens))


@register_retention
@dataclass(frozen=True, slots=True, kw_only=True)
class H2O:
    """Heavy hitters plus recent tokens under a budget (Zhang et al., 2023), prompt and decode.

    ``budget = budget_tokens`` if > 0, else ``ceil(budget_fraction · prompt_tokens)`` (20 % as
    in the paper); ``cap = budget``.
    """

    name: ClassVar[str] = "h2o"
    budget_fraction: float = 0.2
    budget_tokens: int = 0

    def __post_init__(self) -> None:
        must(0 < self.budget_fraction <= 1, "H2O", "budget_fraction", "in (0, 1]", self.budget_fraction)
        must(self.budget_tokens >= 0, "H2O", "budget_tokens", ">= 0", self.budget_tokens)

    def kept_after_prefill(self, prompt_tokens: int, target_tokens: int) -> int:
        return min(target_tokens, self.cap_tokens(prompt_tokens))

    def cap_tokens(self, prompt_tokens: int) -> int:
        return _budget("H2O", self.budget_fraction, self.budget_tokens, prompt_tokens)

    def budget(self) -> tuple[int, float]:
        """``budget_tokens``, or ``budget_fraction`` of the prompt without one (`retention.Budgeted`)."""
        return self.budget_tokens, self.budget_fraction


@register_retention
@dataclass(frozen=True, slots=True, kw_only=True)
class SnapKV:
    """Prompt KV compressed to a budget once after prefill (Li et al., 2024); decode grows freely.

    ``kept = min(prompt, budget) + (target − prompt)``; budget as `H2O` (default 2048 tokens).
    """

    name: ClassVar[str] = "snapkv"
    budget_fraction: float = 0.2
    budget_tokens: int = 2048

    def __post_init__(self) -> None:
        must(0 < self.budget_fraction <= 1, "SnapKV", "budget_fraction", "in (0, 1]", self.budget_fraction)
        must(self.budget_tokens >= 0, "SnapKV", "budget_tokens", ">= 0", self.budget_tokens)

    def kept_after_prefill(self, prompt_tokens: int, target_tokens: int) -> int:
        budget = _budget("SnapKV", self.budget_fraction, self.budget_tokens, prompt_tokens)
        return min(prompt_tokens, budget) + (target_tokens - prompt_tokens)

    def budget(self) -> tuple[int, float]:
        """``budget_tokens``, or ``budget_fraction`` of the prompt without one (`retention.Budgeted`)."""
        return self.budget_tokens, self.budget_fraction

    def cap_tokens(self, prompt_tokens: int) -> int:
        return NO_CAP
