"""Cache strategies: how a replica's KV blocks are shared, kept and evicted (registry by name).

A strategy is a frozen dataclass of parameters with a ``name``; `bind` makes the mutable
per-replica `CacheState` the scheduler talks to. Block accounting contract, in blocks of
``block_tokens``:

- the replica counts every block a sequence holds privately *and* every HBM block the cache
  keeps (referenced or not) as used; blocks in lower tiers (host DRAM, NVMe) are the cache's own;
- ``match`` tells a router how many prefix tokens of a request the cache would reuse now, from
  any tier (HBM, and lower tiers where reloading beats recomputing), within `max_hit_tokens`;
- ``probe`` tells, before admission, how many prefix tokens are resident in HBM (a block
  multiple ≤ ``max_hit_tokens``) and how many of those blocks are unreferenced (counted in
  ``evictable_blocks`` until the admission pins them);
- ``on_admit`` references the reusable prefix and returns an `Admission`: hit tokens (a block
  multiple ≤ ``max_hit_tokens``, HBM plus blocks reloaded from lower tiers), the HBM blocks the
  reload adds to the cache (the replica allocates them) and the transfer seconds (paid in the
  step that admits, so in TTFT). The sequence allocates only ``blocks - hit / block_tokens``;
- ``on_prefilled`` is told a sequence finished its prefill of ``tokens`` (the whole blocks of it
  its KV holds) and may take them over while the sequence keeps a reference (SGLang inserts a
  prompt into the radix tree when its prefill completes, so concurrent requests share it). It
  returns ``(shared_tokens, kept_blocks)``: the sequence's blocks up to ``shared_tokens`` (a block
  multiple ≥ its hit) are now the cache's, of which ``kept_blocks`` are new to the cache (the
  others duplicated cached blocks: the replica frees them);
- ``on_finish`` is told the sequence's private blocks and returns how many of them the cache
  keeps (0 ≤ kept ≤ private_blocks); the replica frees the others. Under a windowed layout
  (`CacheContext.window_overhead`) the kept blocks include the window of the chain end the
  sequence leaves, and ``kept_blocks`` of ``on_prefilled`` is net of a cached chain end's window
  that the sequence's chain grew past (it may be negative): what the cache's HBM blocks grew by;
- ``evictable_blocks`` are HBM cache blocks no running sequence references; ``evict(n)`` frees
  at least ``min(n, evictable_blocks())`` of them and at most ``evictable_blocks()`` (it may round
  up to whole leaves or chunks, as SGLang does), moving them down a tier where there is one, and
  returns how many it freed.
  Blocks a running sequence references are never evicted.
- a state may also keep ``counts`` (a `CacheCounts`): the same two numbers as attributes, kept
  current, which a replica reads every step without a call (`counts_of` adapts a state without).

How many blocks a sequence of ``t`` tokens holds is the replica's business (layout and
retention decide it; see `simulator.engine.geometry`), not the cache's.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, NamedTuple, Protocol

from simulator.registry import C, Registry

if TYPE_CHECKING:
    from simulator.engine.sequence import Seq
    from workloads.request import Request


class Admission(NamedTuple):
    """What `CacheState.on_admit` found: hit tokens by tier and what reloading them costs."""

    hit_tokens: int = 0  # hbm + reloaded (dram + nvme), a block multiple
    reload_blocks: int = 0  # HBM blocks the admission adds to the cache: reloaded, less a window it takes over
    reload_s: float = 0.0  # transfer seconds, paid in the admitting step
    hbm_tokens: int = 0
    dram_tokens: int = 0
    nvme_tokens: int = 0
    recomputed_tokens: int = 0  # found in a lower tier, recomputed because that was faster


NO_HIT = Admission()


def max_hit_tokens(prefill_tokens: int, block_tokens: int) -> int:
    """The most tokens a prefill of `prefill_tokens` may take from the cache: whole blocks, short of
    its last token (the prefill computes at least that one, whose logits give the next token)."""
    return (prefill_tokens - 1) // block_tokens * block_tokens


@dataclass(frozen=True, slots=True, kw_only=True)
class CacheContext:
    """What a replica tells its cache at `bind`: block bytes, lower tiers and a prefill price.

    ``prefill_s(new_tokens, context_tokens)`` is the timer's marginal prefill time; reload from
    a tier takes ``blocks · block_bytes / bandwidth``; the cache reloads when that is faster.

    ``window_overhead(tokens)`` is, under a layout with sliding windows or windowed compression, the
    overhead blocks a chain of ``tokens`` needs beside its ``ceil(tokens / block_tokens)``
    (`BlockGeometry.overhead`: ``sequence_bytes(t) ≤ (ceil(t/B) + overhead(t)) · block_bytes``); a cache
    that keeps chains counts it for each chain end it holds. None where blocks fit the bytes exactly.
    """

    block_bytes: float = 0.0
    dram_bytes: float = 0.0
    dram_bytes_per_s: float = 1.0
    nvme_bytes: float = 0.0
    nvme_bytes_per_s: float = 1.0
    prefill_s: Callable[[int, int], float] | None = None
    window_overhead: Callable[[int], int] | None = None


class CacheState(Protocol):
    """Per-replica cache state: the hooks the scheduler calls."""

    def match(self, request: Request) -> int:
        """Prefix tokens of `request` the cache would reuse now: resident in HBM, or in a lower tier it
        would reload rather than recompute (a lookup with no side effect; routers use it)."""
        ...

    def probe(self, seq: Seq, max_hit_tokens: int) -> tuple[int, int]:
        """``(hbm_tokens, unreferenced_blocks)`` of `seq`'s prefix resident in HBM (no side effect)."""
        ...

    def on_admit(self, seq: Seq, max_hit_tokens: int) -> Admission:
        """Reference the reusable prefix of `seq` (reloading from lower tiers when faster)."""
        ...

    def on_prefilled(self, seq: Seq, tokens: int) -> tuple[int, int]:
        """`seq` holds the KV of `tokens` (a block multiple): ``(shared_tokens, kept_blocks)``."""
        ...

    def on_finish(self, seq: Seq, tokens: int, private_blocks: int) -> int:
        """`seq` gives back its blocks (finished, or preempted to recompute); return how many are kept.
        `private_blocks` are the HBM blocks it holds beyond its cached prefix, which the cache may keep; a
        swapped sequence recomputed to unblock an idle replica holds none, and passes `tokens` = its hit
        tokens with the pool's free blocks, which a windowed cache's chain end may take for its window."""
        ...

    def evictable_blocks(self) -> int:
        """Cache blocks that no running sequence references."""
        ...

    def hbm_blocks(self) -> int:
        """HBM blocks the cache holds, referenced or not (counted in the replica's used blocks)."""
        ...

    def evict(self, n_blocks: int) -> int:
        """Free at least ``min(n_blocks, evictable)`` evictable blocks (maybe more); return how many."""
        ...

    def stats(self) -> dict[str, float]:
        """Counters for the run summary (evicted blocks, bytes moved between tiers, ...)."""
        ...


class CacheCounts(Protocol):
    """A cache state's block counts as attributes (a replica reads them every step and admission)."""

    @property
    def evictable(self) -> int:
        """``evictable_blocks()``."""
        ...

    @property
    def blocks(self) -> Sequence[int]:
        """Blocks held per tier, HBM first: ``blocks[0]`` is ``hbm_blocks()``."""
        ...


class _CalledCounts:
    """`CacheCounts` of a state that keeps none: its methods, called."""

    __slots__ = ("state",)

    def __init__(self, state: CacheState) -> None:
        self.state = state

    @property
    def evictable(self) -> int:
        return self.state.evictable_blocks()

    @property
    def blocks(self) -> Sequence[int]:
        return (self.state.hbm_blocks(),)


def counts_of(state: CacheState) -> CacheCounts:
    """`state`'s ``counts`` where it keeps them (the built-in prefix cache does), else its methods'."""
    counts: CacheCounts | None = getattr(state, "counts", None)
    return counts if counts is not None else _CalledCounts(state)


class CacheStrategy(Protocol):
    """A cache strategy's parameters; `bind` makes one replica's state."""

    name: ClassVar[str]

    def bind(self, block_tokens: int, total_blocks: int, context: CacheContext | None = None) -> CacheState:
        """Fresh state for one replica whose pool has `total_blocks` blocks of `block_tokens`."""
        ...


_REGISTRY: Registry[CacheStrategy] = Registry("cache strategy")
STRATEGIES = _REGISTRY  # `STRATEGIES.build(...)` checks a table of parameters, naming where it was written


def register_strategy(cls: C) -> C:
    """Class decorator: register a strategy under its ``name``; a second registration raises."""
    return _REGISTRY.register(cls)


def strategy_names() -> list[str]:
    """Registered names, sorted."""
    return _REGISTRY.names()


OFFLOAD_TIERS = ("dram", "nvme")  # the prefix cache's lower tiers (`PrefixCache`'s ``dram`` and ``nvme``), in order


def offload_tiers(cache_params: Mapping[str, object]) -> list[str]:
    """The offload tiers a cache's parameters turn on (``{"dram": True}`` -> ``["dram"]``), in `OFFLOAD_TIERS`'
    order: what a report or a comparison names."""
    return [t for t in OFFLOAD_TIERS if cache_params.get(t)]


def make_strategy(name: str, **params: object) -> CacheStrategy:
    """Instantiate `name` with `params`; unknown names and parameters list the valid ones."""
    return _REGISTRY.make(name, **params)


from simulator.engine.caches.none import NoReuse  # noqa: E402  (registers itself)
from simulator.engine.caches.prefix import PrefixCache  # noqa: E402  (registers itself)

__all__ = ["NO_HIT", "OFFLOAD_TIERS", "STRATEGIES", "Admission", "CacheContext", "CacheCounts", "CacheState",
           "CacheStrategy", "NoReuse", "PrefixCache", "counts_of", "make_strategy", "max_hit_tokens", "offload_tiers",
           "register_strategy", "strategy_names"]
