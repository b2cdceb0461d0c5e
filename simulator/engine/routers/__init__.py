"""Routers: which replica an arriving request goes to (registry by name).

A router is a frozen dataclass of parameters with a ``name``; `bind` makes the per-run policy
(round-robin keeps a cursor). Ties are broken uniformly at random with the run's generator,
never toward the lowest index.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar, Protocol

import numpy as np

from simulator.registry import C, Registry
from workloads.request import Request


class ReplicaView(Protocol):
    """What a router may read of a replica (at the current time, also in the middle of a jump).

    A replica of the engine (`views.InFlight`) also offers, for a router keeping its view
    incrementally (`basic._LeastTokens`, which checks for `outstanding_until`):
    ``outstanding_until(now, level)`` (`outstanding_at`, until when it holds, how low it stays) and
    ``outstanding_floor()`` (a lower bound of `outstanding_at` until the replica's state changes).
    """

    total_blocks: int

    @property
    def cache(self) -> Any:
        """The replica's `CacheState` (``match``, ``evictable_blocks``)."""
        ...

    def outstanding_at(self, now: float) -> int:
        """Prefill and output tokens still to compute."""
        ...

    def used_at(self, now: float) -> int:
        """KV blocks in use, the cache's unreferenced HBM blocks included."""
        ...


class RoutePolicy(Protocol):
    """A bound router: picks a replica index for each request.

    A policy that keeps its view of the replicas incrementally may also offer ``watch(replicas)``,
    called once per group as the run starts: it returns the list the engine then appends a replica's
    index to whenever that replica's state changes (the policy reads and empties it), or None, and
    then the engine keeps no such list (`basic._LeastTokens`: a list only beyond `DIRECT_REPLICAS`).
    A policy without `watch` is told of no change: it reads the replicas at each `choose`.

    A policy that counts what it dispatched may also offer either or both of two hooks, each called
    whether or not the other is offered (`basic._LeastDispatched` offers both):
    ``departed(i, request, answered)``, called once for each request it routed, with the index it chose,
    when the request leaves that replica (it ends there, or a prefill replica hands it off with its first
    token), `answered` telling whether its first token had come out; and ``first_token(i, request)``,
    called once when that first token comes out.
    """

    def choose(self, request: Request, replicas: Sequence[ReplicaView], now: float) -> int: ...


class Router(Protocol):
    """A router's parameters; `bind` makes the per-run policy."""

    name: ClassVar[str]

    def bind(self, rng: np.random.Generator) -> RoutePolicy: ...


def pick_min(values: Sequence[float], rng: np.random.Generator, best: float | None = None) -> int:
    """Index of the smallest value; a uniformly random one among ties. `best`, when the caller knows
    it, is that smallest value (``min(values)``), not worked out again."""
    if best is None:
        best = min(values)
    if values.count(best) == 1:  # the usual case, in C
        return values.index(best)
    ties = [i for i, v in enumerate(values) if v == best]
    return ties[0] if len(ties) == 1 else ties[int(rng.integers(len(ties)))]


def referenced_blocks_at(replica: ReplicaView, now: float) -> int:
    """KV blocks `replica` holds that eviction cannot free: ``used − unreferenced cache blocks``.

    That is, blocks private to running sequences plus cached blocks they reference.
    """
    return replica.used_at(now) - replica.cache.evictable_blocks()


_REGISTRY: Registry[Router] = Registry("router")
ROUTERS = _REGISTRY  # `ROUTERS.build(...)` checks a table of parameters, naming where it was written


def register_router(cls: C) -> C:
    """Class decorator: register a router under its ``name``; a second registration raises."""
    return _REGISTRY.register(cls)


def router_names() -> list[str]:
    """Registered names, sorted."""
    return _REGISTRY.names()


def make_router(name: str, **params: object) -> Router:
    """Instantiate `name` with `params`; unknown names and parameters list the valid ones."""
    return _REGISTRY.make(name, **params)


from simulator.engine.routers.basic import (  # noqa: E402
    LeastDispatched,
    LeastKV,
    LeastTokens,
    PrefixAffinity,
    RoundRobin,
)

__all__ = ["ROUTERS", "LeastDispatched", "LeastKV", "LeastTokens", "PrefixAffinity", "ReplicaView", "RoundRobin",
           "RoutePolicy", "Router", "make_router", "pick_min", "referenced_blocks_at", "register_router",
           "router_names"]
