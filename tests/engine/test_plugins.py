"""Registries and router behaviour (the cache-strategy contract is in tests/strategies)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pytest

from simulator.engine.caches import make_strategy, register_strategy, strategy_names
from simulator.engine.routers import make_router, pick_min, register_router, router_names
from simulator.errors import ConfigError
from workloads.request import Request

REQ = Request(id=0, arrival_s=0.0, prompt_tokens=100, output_tokens=10, segments=((1, 60), (2, 40)))


def test_registries_reject_duplicates_and_list_names() -> None:
    assert "none" in strategy_names()
    assert {"round-robin", "least-tokens", "least-dispatched", "least-kv", "prefix-affinity"} <= set(router_names())
    with pytest.raises(ConfigError, match=r"name: must be one of none, prefix \(got"):
        make_strategy("nope")
    with pytest.raises(ConfigError, match="least-kv"):
        make_router("nope")

    @dataclass(frozen=True)
    class Dup:
        name: ClassVar[str] = "none"

    with pytest.raises(ConfigError, match="already registered"):
        register_strategy(Dup)
    Dup.name = "round-robin"
    with pytest.raises(ConfigError, match="already registered"):
        register_router(Dup)


class _Rep:
    def __init__(self, load: int, used: int, hit: int = 0) -> None:
        self.load, self.used, self.total_blocks, self.hit = load, used, 100, hit
        self.cache = self

    def outstanding_at(self, now: float) -> int:
        return self.load

    def used_at(self, now: float) -> int:
        return self.used

    def match(self, request: Request) -> int:
        return self.hit

    def evictable_blocks(self) -> int:
        return 0


def test_ties_are_broken_fairly() -> None:
    rng = np.random.default_rng(0)
    counts = Counter(pick_min([3, 1, 1, 1], rng) for _ in range(3000))
    assert set(counts) == {1, 2, 3}
    assert min(counts.values()) > 900
    policy = make_router("least-tokens").bind(np.random.default_rng(1))
    reps = [_Rep(5, 0), _Rep(5, 0)]
    assert len({policy.choose(REQ, reps, 0.0) for _ in range(50)}) == 2


def test_routers_pick_as_named() -> None:
    rng = np.random.default_rng(0)
    reps = [_Rep(50, 10), _Rep(10, 90), _Rep(30, 50, hit=64)]
    assert make_router("least-tokens").bind(rng).choose(REQ, reps, 0.0) == 1
    assert make_router("least-kv").bind(rng).choose(REQ, reps, 0.0) == 0
    assert make_router("prefix-affinity").bind(rng).choose(REQ, reps, 0.0) == 2
    assert make_router("prefix-affinity", max_imbalance_tokens=5).bind(rng).choose(REQ, reps, 0.0) == 1
    rr = make_router("round-robin").bind(rng)
    picks = [rr.choose(REQ, reps, 0.0) for _ in range(6)]
    assert sorted(picks) == [0, 0, 1, 1, 2, 2] and picks[:3] == picks[3:]


def test_counts_of_reads_the_methods_of_a_state_that_keeps_no_counts() -> None:
    """A plugin cache with only the protocol's methods: the replica reads its counts through them."""
    from simulator.engine.caches import counts_of

    class _State:
        def __init__(self) -> None:
            self.held, self.free = 7, 3

        def evictable_blocks(self) -> int:
            return self.free

        def hbm_blocks(self) -> int:
            return self.held

    state = _State()
    counts = counts_of(state)  # type: ignore[arg-type]  # the two methods read are all it needs
    state.held, state.free = 9, 4
    assert (counts.evictable, counts.blocks[0]) == (4, 9)
    prefix = make_strategy("prefix").bind(16, 100)
    assert counts_of(prefix) is prefix.counts and counts_of(make_strategy("none").bind(16, 100)).evictable == 0
