"""The strategy without reuse (``none``): each sequence holds its own KV; nothing is shared across
requests or kept after one ends (a serving engine with its prefix cache off)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from simulator.engine.caches import NO_HIT, Admission, CacheContext, register_strategy

if TYPE_CHECKING:
    from simulator.engine.sequence import Seq
    from workloads.request import Request


class _NoCounts:
    """`CacheCounts` of a cache that never holds a block."""

    __slots__ = ()
    evictable: ClassVar[int] = 0
    blocks: ClassVar[tuple[int, ...]] = (0,)


@dataclass(slots=True)
class _NoReuseState:
    block_tokens: int
    # shares nothing: its hooks are no-ops a replica may skip (`Replica.shares`)
    shares: ClassVar[bool] = False
    counts: ClassVar[_NoCounts] = _NoCounts()

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
class NoReuse:
    """No reuse across requests: every prompt is prefilled whole."""

    name: ClassVar[str] = "none"

    def bind(self, block_tokens: int, total_blocks: int, context: CacheContext | None = None) -> _NoReuseState:
        return _NoReuseState(block_tokens)
