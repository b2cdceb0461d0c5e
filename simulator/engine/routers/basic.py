"""The shipped routers: round-robin, least outstanding tokens, least dispatched tokens, least KV used, prefix
affinity."""

from __future__ import annotations

import heapq
import math
from bisect import bisect_left, insort
from collections.abc import Sequence
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
# least-tokens reads a replica again once it may have fallen to this many shares of a request (its
# tokens over the replicas: about what the least load rises by at an arrival) above the least load
# (2 took the fewest reads at 64 replicas: 3.04 an arrival, against 3.23 for 1, 3.10 for 3 and 3.24 for 4)
LEVEL_SHARES = 2
_INF = math.inf
DORMANT_SLACK = 2  # the dormant heap is rebuilt without its stale entries past this many per replica


def _move_key(values: list[int], order: list[int], i: int, value: int) -> None:
    """Set ``values[i] = value`` and move replica `i`'s key ``value · n + i`` in `order` (the keys of all n
    replicas, ascending): two bisections."""
    n = len(values)
    del order[bisect_left(order, values[i] * n + i)]
    insort(order, value * n + i)
    values[i] = value


def _front(values: list[int], order: list[int], rng: np.random.Generator) -> int:
    """The replica of the least value, read off `order`'s front (`_move_key`'s keys): its own, or, when
    another replica ties it, a uniformly drawn one among them (`pick_min`)."""
    n = len(values)
    least = order[0] // n
    if n > 1 and order[1] < (least + 1) * n:  # replicas tie: pick_min draws among them
        return pick_min(values, rng, least)
    return order[0] - least * n


@dataclass(slots=True)
class _LeastTokens:
    """Least outstanding tokens, kept incrementally beyond `DIRECT_REPLICAS` replicas.

    A replica's `outstanding_at` changes only when its state does (an arrival, a plan, a commit:
    the cluster appends its index to `changed`) or at a step boundary of the jump in flight, and
    until that state change it only falls. The policy keeps every replica's last value read (so
    never below its value now) and reads again only the replicas changed since the last arrival
    and those that may have fallen to near the least load: `outstanding_until`, asked with a level
    a little above the least value kept, says until when a replica stays above it (the `_wake`
    heap) and above which `low` it stays meanwhile (the `_dormant` heap: it is read again once the
    least value kept reaches `low`). A replica that changed is not even read while its
    `outstanding_floor` (its value at the end of the jump or run in flight) is above that level:
    it is parked in `_dormant` at that floor, its value kept raised to it if below (2.4 of 5.4
    reads an arrival at 64 replicas; 1.5% of scale-64's instructions). A replica left unread is
    then above the least load and cannot tie it: the choice, ties included, is the same as asking
    every replica, at a handful of reads an arrival however many replicas there are.

    The values kept are also in `_order`, sorted, each as ``value · n + replica`` (n replicas): the
    least load and whether replicas tie it are read off its front, where `min`, `count` and `index`
    over all n values cost ~25k instructions an arrival at 64 replicas (a read that changes a value
    moves its key: two bisections).
    """

    rng: np.random.Generator
    changed: list[int] = field(default_factory=list)
    _values: list[int] = field(default_factory=list)
    _order: list[int] = field(default_factory=list)  # value · n + replica, for every replica, ascending
    _stamps: list[int] = field(default_factory=list)  # a replica's heap entries are stale once it is read again
    _wake: list[tuple[float, int, int]] = field(default_factory=list)  # (until, stamp, replica)
    _dormant: list[tuple[int, int, int]] = field(default_factory=list)  # (low, stamp, replica)
    _least: int = 0  # the least load at the last arrival

    def _read(self, replica: ReplicaView, i: int, now: float, level: int | None,
              late: list[tuple[float, int, int]]) -> int:
        """Read replica `i`: its value (`_move_key`), a new stamp (its heap entries go stale), its wake-up
        (pushed at once when after `now`: `choose` pops only those ≤ now, and entries are totally
        ordered, so the order of pushes changes no pop; else to `late`, pushed after `choose`'s loop)
        and its low (`_dormant`)."""
        value, until, low = replica.outstanding_until(now, level)  # type: ignore[attr-defined]
        if value != self._values[i]:
            _move_key(self._values, self._order, i, value)
        self._stamps[i] = stamp = self._stamps[i] + 1
        if until < _INF:
            if until > now:
                heapq.heappush(self._wake, (until, stamp, i))
            else:
                late.append((until, stamp, i))
        if low < value:
            heapq.heappush(self._dormant, (low, stamp, i))
        return value

    def watch(self, replicas: Sequence[ReplicaView]) -> list[int] | None:
        """`changed`, the list the cluster appends a replica's index to when its state changes, if the
        policy keeps its view of `replicas` incrementally; else None (it asks each one: `choose`)."""
        direct = len(replicas) <= DIRECT_REPLICAS or not hasattr(replicas[0], "outstanding_until")
        return None if direct else self.changed

    def choose(self, request: Request, replicas: Sequence[ReplicaView], now: float) -> int:
        n = len(replicas)
        if n <= DIRECT_REPLICAS or not hasattr(replicas[0], "outstanding_until"):  # (as `watch` tells)
            if self.changed:  # (none is appended when the cluster asked `watch`)
                self.changed.clear()
            # a loop, not a comprehension (a function made and called: ~1 k instructions an arrival), keeping
            # the least value as min() would (the first of equals), without its call (~850 instructions),
            # its index and whether another value ties it: untied (the usual case), that index is pick_min's
            # answer, without its call; ties go to pick_min (its random draw)
            values: list[int] = []
            best: float = _INF
            at = 0
            tied = False
            for r in replicas:
                value = r.outstanding_at(now)
                if value < best:
                    best, at, tied = value, len(values), False
                elif value == best:
                    tied = True
                values.append(value)
            return pick_min(values, self.rng, best) if tied else at
        values, order, stamps, wake, dormant = self._values, self._order, self._stamps, self._wake, self._dormant
        slack = LEVEL_SHARES * (request.prompt_tokens + request.output_tokens) // n
        late: list[tuple[float, int, int]] = []  # wake-ups at or before now, pushed after the loop
        if len(values) != n:  # the first arrival: read everyone
            values[:], order[:], stamps[:], wake[:], dormant[:] = [0] * n, range(n), [0] * n, [], []
            for i in range(n):
                self._read(replicas[i], i, now, None, late)
        else:
            level = self._least + slack
            for i in set(self.changed):
                replica = replicas[i]
                low = replica.outstanding_floor()  # type: ignore[attr-defined]
                if low <= level:
                    self._read(replica, i, now, level, late)
                    continue
                # parked, not read: its load stays ≥ low until its next state change, so it is read
                # once the least value kept may reach low (`_dormant`); its key is kept at low or
                # above, so that `_order`'s front is never a parked replica's (see the loop below)
                if values[i] < low:
                    _move_key(values, order, i, low)
                stamps[i] = stamp = stamps[i] + 1
                heapq.heappush(dormant, (low, stamp, i))
        self.changed.clear()
        # the wake-ups due, then the dormant replicas that may be down to the least value kept (a read
        # pushes no wake-up ≤ now into `wake`, so none is due once the dormant ones start). Every value
        # kept is either its replica's load now, or ≥ the `low` of a dormant entry (the load stays at
        # or above it): once the loop ends, `_order`'s front is then a load now, the least, and every
        # replica not known exactly is above it (does not tie)
        while True:
            if wake and wake[0][0] <= now:
                _, stamp, i = heapq.heappop(wake)
            elif dormant and dormant[0][0] <= order[0] // n:
                _, stamp, i = heapq.heappop(dormant)
            else:
                break
            if stamp == stamps[i]:
                self._read(replicas[i], i, now, order[0] // n + slack, late)
        for entry in late:
            heapq.heappush(wake, entry)
        if len(dormant) > DORMANT_SLACK * n:  # drop the stale entries (a state change left them behind)
            dormant[:] = [e for e in dormant if e[1] == stamps[e[2]]]
            heapq.heapify(dormant)
        self._least = order[0] // n
        return _front(values, order, self.rng)


@register_router
@dataclass(frozen=True, slots=True, kw_only=True)
class LeastTokens:
    """Fewest outstanding tokens (prefill still to do + output still to generate)."""

    name: ClassVar[str] = "least-tokens"

    def bind(self, rng: np.random.Generator) -> _LeastTokens:
        return _LeastTokens(rng)


@dataclass(slots=True)
class _LeastDispatched:
    """The counts of `LeastDispatched`: ``_values[i]``, and each as ``value · n + i`` in `_order`, sorted,
    so that the least count, and whether another ties it, are read off its front."""

    rng: np.random.Generator
    _values: list[int] = field(default_factory=list)
    _order: list[int] = field(default_factory=list)

    def choose(self, request: Request, replicas: Sequence[ReplicaView], now: float) -> int:
        """A replica of the least count (a uniformly drawn one among ties, `pick_min`), whose count then
        rises by the request's ``prompt_tokens + output_tokens``. It reads no replica."""
        values, order = self._values, self._order
        n = len(replicas)
        if len(values) != n:  # the first arrival
            values[:], order[:] = [0] * n, range(n)
        i = _front(values, order, self.rng)
        _move_key(values, order, i, values[i] + request.prompt_tokens + request.output_tokens)
        return i

    def first_token(self, i: int, request: Request) -> None:
        """The first token of the request routed to replica `i` came out: its prompt is done."""
        values = self._values
        _move_key(values, self._order, i, values[i] - request.prompt_tokens)

    def departed(self, i: int, request: Request, answered: bool) -> None:
        """The request routed to replica `i` left it: it ended there (completed, rejected, timed out) or,
        from a prefill replica, was handed off with its first token. Its output tokens go, and its prompt
        too unless its first token came out (`answered`: `first_token` took it)."""
        values = self._values
        left = request.output_tokens if answered else request.prompt_tokens + request.output_tokens
        _move_key(values, self._order, i, values[i] - left)


@register_router
@dataclass(frozen=True, slots=True, kw_only=True)
class LeastDispatched:
    """Fewest tokens dispatched and not yet answered: a replica's count is, over the requests this router
    sent it that have not left it yet, their prompt tokens until their first token comes out and their
    output tokens until they leave (completed, rejected, timed out, or handed off from a prefill replica
    with their first token).

    What a gateway in front of the replicas can count on its own, from what it sends and the streamed
    responses it sees start and end, with no view inside a replica: a prompt counts in full until its
    first token, however far its prefill has got, and an output until its last token (`least-tokens`
    instead reads each replica's tokens still to compute, as its stepping stands at that instant). In a
    disaggregated fleet each pool's router counts only what it sent: a decode replica's hand-offs, which
    the KV transfers place, are not in its count.
    Ties are broken uniformly at random with the run's generator. Its upkeep is two bisections an
    arrival, a first token and a departure in a list of the n replicas' keys (and that list's O(n) shift
    of pointers, a `memmove`); a tie adds `pick_min`'s pass over the n counts.

    Counting the prompt only until the first token matters: counted until the request ends (a gateway
    that sees only whole responses), the replica whose count just fell by a whole request took the next
    arrivals in a row, and TTFT p99 doubled against least-tokens' at 16 and 64 replicas (0.15 s against
    0.07 on `tests.bench.scenarios.scale`); counted so, it is within 2% of least-tokens' there.
    """

    name: ClassVar[str] = "least-dispatched"

    def bind(self, rng: np.random.Generator) -> _LeastDispatched:
        return _LeastDispatched(rng)


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
