"""Cache strategies: how a replica's KV blocks are shared, kept and evicted (registry by name).

A strategy is a frozen dataclass of parameters with a ``name``; `bind` makes the mutable
per-replica `CacheState` the scheduler talks to. Block accounting contract, in blocks of
``block_tokens``:

- the replica counts every block a sequence holds privately *and* every block the cache keeps
  (referenced or not) as used;
- ``on_admit`` returns prefix tokens already resident (a multiple of ``block_tokens``, at most
  ``max_hit_tokens``); those blocks stay the cache's and the sequence allocates only the rest;
- ``on_finish`` is told the sequence's private blocks and returns how many of them the cache
  keeps (0 ≤ kept ≤ private_blocks); the replica frees the others;
- ``evictable_blocks`` are cache blocks no running sequence references; ``evict(n)`` frees up
  to ``n`` of them and returns how many it freed.
- decode growth is paged: a sequence of ``t`` tokens with ``h`` hit tokens holds
  ``blocks_for(t) - h / block_tokens`` private blocks, and ``blocks_for(t) = ceil(t / block_tokens)``
  (the fast-forward counts block crossings with that formula).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar, Protocol, TypeVar

from simulator.errors import ConfigError

if TYPE_CHECKING:
    from simulator.engine.sequence import Seq
    from workloads.request import Request


class CacheState(Protocol):
    """Per-replica cache state: the hooks the scheduler calls."""

    def blocks_for(self, tokens: int) -> int:
        """Blocks a sequence of `tokens` tokens occupies: ``ceil(tokens / block_tokens)``."""
        ...

    def match(self, request: Request) -> int:
        """Prefix tokens of `request` resident now (a lookup with no side effect; routers use it)."""
        ...

    def on_admit(self, seq: Seq, max_hit_tokens: int) -> int:
        """Reference the resident prefix of `seq`; return its tokens (block multiple, ≤ `max_hit_tokens`)."""
        ...

    def on_finish(self, seq: Seq, tokens: int, private_blocks: int) -> int:
        """`seq` gives back its blocks (finished, or preempted to recompute); return how many are kept."""
        ...

    def evictable_blocks(self) -> int:
        """Cache blocks that no running sequence references."""
        ...

    def evict(self, n_blocks: int) -> int:
        """Free up to `n_blocks` evictable blocks; return how many were freed."""
        ...


class CacheStrategy(Protocol):
    """A cache strategy's parameters; `bind` makes one replica's state."""

    name: ClassVar[str]

    def bind(self, block_tokens: int, total_blocks: int) -> CacheState:
        """Fresh state for one replica whose pool has `total_blocks` blocks of `block_tokens`."""
        ...


_REGISTRY: dict[str, type] = {}
S = TypeVar("S", bound=type)


def register_strategy(cls: S) -> S:
    """Class decorator: register a strategy under its ``name``; a second registration raises."""
    name = cls.name  # type: ignore[attr-defined]
    if name in _REGISTRY:
        raise ConfigError(f"cache strategy {name!r} is already registered ({_REGISTRY[name].__qualname__})")
    _REGISTRY[name] = cls
    return cls


def strategy_names() -> list[str]:
    """Registered strategy names, sorted."""
    return sorted(_REGISTRY)


def make_strategy(name: str, **params: object) -> CacheStrategy:
    """Instantiate the strategy `name` with `params`; unknown names list the valid ones."""
    if name not in _REGISTRY:
        raise ConfigError(f"cache strategy: 'name' must be one of {strategy_names()} (got {name!r})")
    strategy: CacheStrategy = _REGISTRY[name](**params)
    return strategy


from simulator.engine.caches.full import FullKV  # noqa: E402  (registers itself)

__all__ = ["CacheState", "CacheStrategy", "FullKV", "make_strategy", "register_strategy", "strategy_names"]
