"""The shipped routers: round-robin, least outstanding tokens, least KV used, prefix affinity."""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from simulator.engine.routers import ReplicaView, pick_min, referenced_blocks_at, register_router
from simulator.errors import must
from workloads.request import Request


@dataclass(slots=True)
class _RoundRobin:
    rng: np.random.Generator
    cursor: int = -1

    def choose(self, request: Request, replicas: Sequence[ReplicaView], now: float) -> int:
        if self.cursor < 0:  # start at a random replica, not at 0
            self.cursor = int(self.rng.integers(len(replicas)))
        i = self.cursor % len(replicas)
        self.cursor = i + 1
        return i


@register_router
@dataclass(frozen=True, slots=True, kw_only=True)
class RoundRobin:
    """Replicas in turn, from a random start."""

    name: ClassVar[str] = "round-robin"

    def bind(self, rng: np.random.Generator) -> _RoundRobin:
        return _RoundRobin(rng)


DIRECT_REPLICAS = 32  # up to this many replicas least-tokens asks each one at every arrival (cheaper there)


@dataclass(slots=True)
class _LeastTokens:
    """Least outstanding tokens, kept incrementally beyond `DIRECT_REPLICAS` replicas.

    A replica's `outstanding_at` changes only when its state does (an arrival, a plan, a commit:
    the cluster appends its index to `changed`) or at a step boundary of the jump in flight
    (`outstanding_until` says when). The policy keeps every replica's value and a heap of those
    boundaries, and re-reads only the replicas changed or past a boundary since the last arrival:
    a handful, however many replicas there are. The choice is the same as asking every replica.
    """

    rng: np.random.Generator
    changed: list[int] = field(default_factory=list)
    _values: list[int] = field(default_factory=list)
    _stamps: list[int] = field(default_factory=list)
    _wake: list[tuple[float, int, int]] = field(default_factory=list)  # (until, stamp, replica)

    def choose(self, request: Request, replicas: Sequence[ReplicaView], now: float) -> int:
        n = len(replicas)
        if n <= DIRECT_REPLICAS or not hasattr(replicas[0], "outstanding_until"):
            self.changed.clear()
            return pick_min([r.outstanding_at(now) for r in replicas], self.rng)
        values, stamps, wake = self._values, self._stamps, self._wake
        stale: Iterable[int]
        if len(values) != n:  # the first arrival: read everyone
            values[:], stamps[:], wake[:] = [0] * n, [0] * n, []
            stale = range(n)
        else:
            stale = set(self.changed)
            while wake and wake[0][0] <= now:
                _, stamp, i = heapq.heappop(wake)
                if stamp == stamps[i]:
                    stale.add(i)
        self.changed.clear()
        for i in stale:
            values[i], until = replicas[i].outstanding_until(now)  # type: ignore[attr-defined]
            stamps[i] += 1
            if until < math.inf:
                heapq.heappush(wake, (until, stamps[i], i))
        return pick_min(values, self.rng)


@register_router
@dataclass(frozen=True, slots=True, kw_only=True)
class LeastTokens:
    """Fewest outstanding tokens (prefill still to do + output still to generate)."""

    name: ClassVar[str] = "least-tokens"

    def bind(self, rng: np.random.Generator) -> _LeastTokens:
        return _LeastTokens(rng)


@dataclass(slots=True)
class _LeastKV:
    rng: np.random.Generator

    def choose(self, request: Request, replicas: Sequence[ReplicaView], now: float) -> int:
        return pick_min([referenced_blocks_at(r, now) / r.total_blocks for r in replicas], self.rng)


@register_router
@dataclass(frozen=True, slots=True, kw_only=True)
class LeastKV:
    """Smallest fraction of KV blocks in use by running sequences: ``referenced_blocks_at / total``.

    Cached blocks no sequence references are free for the taking (the replica evicts them before
    it waits or preempts), so they do not count: a replica whose pool is full of such blocks is as
    free as an empty one.
    """

    name: ClassVar[str] = "least-kv"

    def bind(self, rng: np.random.Generator) -> _LeastKV:
        return _LeastKV(rng)


@dataclass(slots=True)
class _PrefixAffinity:
    rng: np.random.Generator
    max_imbalance_tokens: int

    def choose(self, request: Request, replicas: Sequence[ReplicaView], now: float) -> int:
        loads = [r.outstanding_at(now) for r in replicas]
        hits = [r.cache.match(request) for r in replicas]
        best = max(hits)
        if best > 0:
            cands = [i for i, h in enumerate(hits) if h == best]
            i = cands[pick_min([loads[c] for c in cands], self.rng)]
            if loads[i] - min(loads) <= self.max_imbalance_tokens:
                return i
        return pick_min(loads, self.rng)


@register_router
@dataclass(frozen=True, slots=True, kw_only=True)
class PrefixAffinity:
    """The replica holding the longest cached prefix (per its cache strategy's ``match``: HBM, and
    the host-DRAM/NVMe tiers where reloading beats recomputing).

    Falls back to least outstanding tokens when no replica holds a prefix, or when the best one
    carries more than ``max_imbalance_tokens`` above the least loaded (it is overloaded).
    """

    name: ClassVar[str] = "prefix-affinity"
    max_imbalance_tokens: int = 65536

    def __post_init__(self) -> None:
        must(self.max_imbalance_tokens >= 0, "PrefixAffinity", "max_imbalance_tokens", ">= 0",
             self.max_imbalance_tokens)

    def bind(self, rng: np.random.Generator) -> _PrefixAffinity:
        return _PrefixAffinity(rng, self.max_imbalance_tokens)
