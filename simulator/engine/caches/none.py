"""The trivial strategy: each sequence holds its full KV, nothing is shared or kept."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from simulator.engine.caches import NO_HIT, Admission, CacheContext, register_strategy

if TYPE_CHECKING:
    from simulator.engine.sequence import Seq
    from workloads.request import Request


@dataclass(slots=True)
class _FullState:
    block_tokens: int

    def match(self, request: Request) -> int:
        return 0

    def probe(self, seq: Seq, max_hit_tokens: int) -> tuple[int, int]:
        return 0, 0

    def on_admit(self, seq: Seq, max_hit_tokens: int) -> Admission:
        return NO_HIT

    def on_prefilled(self, seq: Seq, tokens: int) -> tuple[int, int]:
        return seq.hit_tokens, 0

    def on_finish(self, seq: Seq, tokens: int, private_blocks: int) -> int:
        return 0

    def evictable_blocks(self) -> int:
        return 0

    def hbm_blocks(self) -> int:
        return 0

    def evict(self, n_blocks: int) -> int:
        return 0

    def stats(self) -> dict[str, float]:
        return {}


@register_strategy
@dataclass(frozen=True, slots=True, kw_only=True)
class FullKV:
    """Full KV per sequence, no reuse across requests."""

    name: ClassVar[str] = "full"

    def bind(self, block_tokens: int, total_blocks: int, context: CacheContext | None = None) -> _FullState:
        return _FullState(block_tokens)
