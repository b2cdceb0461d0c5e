"""Least-tokens kept incrementally (beyond `DIRECT_REPLICAS`) chooses as asking every replica does:
the same replica and the same tie-break draws (`pick_min` draws only when replicas tie)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from types import SimpleNamespace

import numpy as np
import pytest

import simulator.engine.routers.basic as basic
from simulator.engine import AffineTimer, EngineConfig, PoolConfig, SchedulerConfig
from simulator.engine.cluster import simulate
from simulator.engine.routers import make_router, pick_min
from tests.engine.helpers import poisson_requests, shared_prefix_requests
from workloads.request import Request

TIMER = AffineTimer(overhead_s=0.02, per_seq_s=1e-5, per_context_token_s=1.2e-8, per_prefill_token_s=3.6e-5)
FLEET = EngineConfig(model="Llama-3.1-8B", kv_blocks=3000, n_nodes=5, tp=1)  # 40 replicas


def _incremental_and_direct(monkeypatch: pytest.MonkeyPatch, config: EngineConfig, reqs: list[Request],
                            seed: int) -> int:
    """Run `config` with the incremental view, then asking every replica; assert the same records and
    end; return how many choices among more than `DIRECT_REPLICAS` replicas were ties."""
    ties = [0]

    def counting_pick_min(values: Sequence[float], rng: np.random.Generator, best: float | None = None) -> int:
        if best is not None:  # the least load the incremental view kept is the least value
            assert best == min(values)
        if len(values) > basic.DIRECT_REPLICAS and values.count(min(values)) > 1:
            ties[0] += 1
        return pick_min(values, rng, best)

    with monkeypatch.context() as m:
        m.setattr(basic, "pick_min", counting_pick_min)
        incremental, end, _ = simulate(config, reqs, seed, timer=TIMER)
    with monkeypatch.context() as m:
        m.setattr(basic, "DIRECT_REPLICAS", 10_000)
        direct, end_direct, _ = simulate(config, reqs, seed, timer=TIMER)
    assert sorted(incremental.records) == sorted(direct.records) and end == end_direct
    return ties[0]


@pytest.mark.parametrize("max_batched", [8192, 256])  # whole prompts; chunked runs
def test_incremental_least_tokens_equals_asking_everyone(monkeypatch: pytest.MonkeyPatch, max_batched: int) -> None:
    config = EngineConfig(model="Llama-3.1-8B", kv_blocks=3000, n_nodes=5, tp=1, scheduler=SchedulerConfig(
        max_num_batched_tokens=max_batched))  # 40 replicas
    reqs = poisson_requests(1500, 120.0, (100, 2000), (1, 400), seed=11)
    incremental, end, _ = simulate(config, reqs, 3, timer=TIMER)
    assert len(incremental.replicas) > basic.DIRECT_REPLICAS
    monkeypatch.setattr(basic, "DIRECT_REPLICAS", 10_000)
    direct, end_direct, _ = simulate(config, reqs, 3, timer=TIMER)
    assert sorted(incremental.records) == sorted(direct.records) and end == end_direct
    assert len({r.replica for r in incremental.records}) == 40


@pytest.mark.parametrize("seed", range(6))
def test_ties_forced_by_equal_requests(monkeypatch: pytest.MonkeyPatch, seed: int) -> None:
    """Equal prompts and outputs: replicas tie often (idle ones at 0, and equal loads), so the draws
    must match too, at every load from idle to queueing."""
    rate = (40.0, 120.0, 400.0)[seed % 3]
    reqs = poisson_requests(400, rate, 512, 64, seed=seed)
    assert _incremental_and_direct(monkeypatch, FLEET, reqs, seed) > 0


@pytest.mark.parametrize("seed", range(3))
def test_prefix_cache(monkeypatch: pytest.MonkeyPatch, seed: int) -> None:
    """Cache hits take tokens off at the plan (a state change like any other)."""
    config = EngineConfig(model="Llama-3.1-8B", kv_blocks=3000, n_nodes=5, tp=1, cache="prefix")
    reqs = shared_prefix_requests(400, seed, rate_per_s=150.0, output_tokens=(1, 200))
    _incremental_and_direct(monkeypatch, config, reqs, seed)


@pytest.mark.parametrize("seed", range(3))
def test_disaggregated(monkeypatch: pytest.MonkeyPatch, seed: int) -> None:
    """40 prefill and 40 decode replicas: a decode replica's load also changes with the KV transfers
    reserved on it (`disagg.Transfers` tells the decode router: without that these runs differ), and
    short prompts are routed there."""
    config = EngineConfig(model="Llama-3.1-8B", kv_blocks=3000, n_nodes=5, tp=1, short_prompt_tokens=600,
                          prefill_pool=PoolConfig(node="8xH100", n_nodes=5, tp=1))
    reqs = poisson_requests(500, 300.0, (100, 1200), (1, 200), seed=seed)
    _incremental_and_direct(monkeypatch, config, reqs, seed)


@pytest.mark.parametrize("n_nodes", [1, 2])  # a fleet of one replica, of two
def test_the_incremental_view_holds_for_any_fleet(monkeypatch: pytest.MonkeyPatch, n_nodes: int) -> None:
    """The incremental view is not for small fleets (`DIRECT_REPLICAS`), but it must choose right at any
    size: with the threshold at 0 it serves one replica (where a tie check read past the end of its
    sorted values) and two, as asking every replica does."""
    monkeypatch.setattr(basic, "DIRECT_REPLICAS", 0)
    config = EngineConfig(model="Llama-3.1-8B", kv_blocks=3000, n_nodes=n_nodes, tp=8)
    reqs = poisson_requests(200, 40.0, (100, 1200), (1, 200), seed=n_nodes)
    _incremental_and_direct(monkeypatch, config, reqs, n_nodes)


class _Stepped:
    """A replica view whose outstanding tokens follow ``steps`` (``(from_s, tokens)``, in time order)
    until an arrival adds to them: a jump in flight, hand-built."""

    def __init__(self, steps: list[tuple[float, int]]) -> None:
        self.steps = steps

    def outstanding_at(self, now: float) -> int:
        return [v for t, v in self.steps if t <= now][-1]

    def outstanding_until(self, now: float, level: int | None = None) -> tuple[int, float, int]:
        value = self.outstanding_at(now)
        later = [(t, v) for t, v in self.steps if t > now]
        if level is not None and value > level:  # the first step at or below level, else none
            below = [t for t, v in later if v <= level]
            if not below:
                return value, math.inf, min(v for _, v in [(now, value), *later])
            return value, below[0] * (1 - 1e-9), level + 1
        return value, later[0][0] * (1 - 1e-9) if later else math.inf, value

    def outstanding_floor(self) -> int:
        return min(v for _, v in self.steps)  # the steps only fall: the last one's (an upper bound of it is wrong)

    def add(self, now: float, tokens: int) -> None:
        value = self.outstanding_at(now) + tokens
        self.steps = [(now, value)] + [(t, v + tokens) for t, v in self.steps if t > now]


def test_a_replica_past_its_boundary_ties() -> None:
    """Replica 3 steps down to replica 30's load at t = 1 and 2 (arrivals land on and between the
    boundaries): the incremental view must see the tie there and draw as asking everyone does."""
    n = basic.DIRECT_REPLICAS + 8
    replicas = [_Stepped([(0.0, 10_000)]) for _ in range(n)]
    replicas[3] = _Stepped([(0.0, 140), (1.0, 100), (2.0, 60), (3.0, 20)])
    replicas[30] = _Stepped([(0.0, 100)])
    replicas[31] = _Stepped([(0.0, 60)])
    policy = make_router("least-tokens").bind(np.random.default_rng(7))
    rng = np.random.default_rng(7)
    draws = 0
    for now in (0.5, 1.0, 1.0, 1.5, 2.0, 2.5, 3.0, 3.2):
        values = [r.outstanding_at(now) for r in replicas]
        draws += values.count(min(values)) > 1
        i = policy.choose(SimpleNamespace(prompt_tokens=30, output_tokens=10), replicas, now)  # type: ignore[arg-type]
        assert i == pick_min(values, rng)
        replicas[i].add(now, 40)
        policy.changed.append(i)  # type: ignore[attr-defined]
    assert draws >= 3


class _Overstated(_Stepped):
    """A wrong `outstanding_floor`: its value at its last state change, not at the end of its steps."""

    def outstanding_floor(self) -> int:
        return self.steps[0][1]


@pytest.mark.parametrize("view", [_Stepped, _Overstated])
def test_a_parked_replica_is_read_once_the_least_load_may_reach_its_floor(view: type[_Stepped]) -> None:
    """A replica whose state changed is not read while its floor (`outstanding_floor`) is above the
    least load kept (it is parked in `_dormant`), and is read once the least value kept reaches that
    floor. Replica 3's state changes at 0.2 (900 tokens, down to 400 at 1.0): at 0.5 it is parked,
    at 1.5 it is the least loaded (400 against 30's 500), which a router trusting an overstated
    floor (900) misses."""
    n = basic.DIRECT_REPLICAS + 8
    replicas = [view([(0.0, 10_000)]) for _ in range(n)]
    replicas[3], replicas[30], replicas[31] = view([(0.0, 600)]), view([(0.0, 100)]), view([(0.0, 300)])
    policy = make_router("least-tokens").bind(np.random.default_rng(7))
    request = SimpleNamespace(prompt_tokens=300, output_tokens=100)
    chosen, least = [], []
    for now in (0.1, 0.5, 1.5):
        if now == 0.5:  # replica 3 plans again
            replicas[3].steps = [(0.2, 900), (1.0, 400)]
            policy.changed.append(3)  # type: ignore[attr-defined]
        values = [r.outstanding_at(now) for r in replicas]
        least.append(values.index(min(values)))
        i = policy.choose(request, replicas, now)  # type: ignore[arg-type]
        chosen.append(i)
        replicas[i].add(now, 400)
        policy.changed.append(i)  # type: ignore[attr-defined]
    assert least == [30, 31, 3]
    assert (chosen == least) == (view is _Stepped)
