"""CPU time of a router's `choose` alone, beside the whole run's, on one bench scenario.

``python -m tests.bench.router_time NAME N [--router R]`` builds scenario NAME of `tests.bench.scenarios`
with about N requests, wraps the bound routers' ``choose`` in `time.perf_counter` and runs it with seed 1;
it prints one JSON line: the router, its ``choose`` µs an arrival, the run's CPU µs a request and its events
a request. The README's account of the least-tokens router at 64 replicas quotes it (12.7 µs an arrival
of 64.3 a request on scale-64, 2026-12-04). The wrapper adds ~0.2 µs a call (two clock reads).

With ``--replay R`` it instead runs the scenario once recording the router's choices, then ``R`` rounds of
two timed runs, unwrapped: the router itself, and its recorded choices replayed by a router that reads
no replica (`Replay`). The runs simulate the same system, summary for summary (tested); the difference is what
choosing costs the run, the caches' share included. It prints the best of each, in CPU µs a request.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from simulator.engine import EngineConfig, cluster, run
from simulator.engine.routers import ReplicaView, basic
from tests.bench import count
from workloads.request import Request

Wrapper = Callable[[Callable[..., int]], Callable[..., int]]


@contextmanager
def wrapped_choose(wrap: Wrapper) -> Iterator[None]:
    """Every shipped router's ``choose`` replaced by ``wrap(choose)`` while the block runs."""
    policies: tuple[Any, ...] = (basic._LeastTokens, basic._LeastDispatched, basic._RoundRobin, basic._LeastKV,
                                 basic._PrefixAffinity)
    originals = [p.choose for p in policies]
    for p, orig in zip(policies, originals, strict=True):
        p.choose = wrap(orig)
    try:
        yield
    finally:
        for p, orig in zip(policies, originals, strict=True):
            p.choose = orig


@contextmanager
def timed_choose() -> Iterator[list[float]]:
    """``[seconds, calls]`` of every shipped router's ``choose`` while the block runs."""
    total = [0.0, 0.0]

    def wrap(orig: Callable[..., int]) -> Callable[..., int]:
        def choose(self: Any, request: Any, replicas: Any, now: float) -> int:
            t = time.perf_counter()
            try:
                return orig(self, request, replicas, now)
            finally:
                total[0] += time.perf_counter() - t
                total[1] += 1
        return choose

    with wrapped_choose(wrap):
        yield total


class Replay:
    """A router that answers each arrival with the next of `picks`, in the order the run asks, whichever
    group asks (a disaggregated run binds it once per pool: each binding is this one policy)."""

    def __init__(self, picks: tuple[int, ...]) -> None:
        self.picks = iter(picks)

    def bind(self, rng: object) -> Replay:
        return self

    def choose(self, request: Request, replicas: Sequence[ReplicaView], now: float) -> int:
        return next(self.picks)


def _recorded(config: EngineConfig, drawn: list[Request], n: int, timer: Any) -> tuple[int, ...]:
    """The choices the scenario's router makes, in order of arrival."""
    picks: list[int] = []

    def wrap(orig: Callable[..., int]) -> Callable[..., int]:
        def choose(self: Any, request: Any, replicas: Any, now: float) -> int:
            i = orig(self, request, replicas, now)
            picks.append(i)
            return i
        return choose

    with wrapped_choose(wrap):
        run(config, iter(drawn), seed=1, timer=timer, total_requests=n)
    return tuple(picks)


def replay(config: EngineConfig, drawn: list[Request], n: int, timer: Any, rounds: int) -> dict[str, object]:
    """`rounds` of the router's run and its replay (module docstring), each round both; the best of each."""
    picks = _recorded(config, drawn, n, timer)
    best = {"router": math.inf, "replay": math.inf}
    summaries: dict[str, dict[str, Any]] = {}
    for _ in range(rounds):
        for kind, router in (("router", None), ("replay", Replay(picks))):  # a new Replay a run
            with _router_of(router):
                t0 = time.process_time()
                s = run(config, iter(drawn), seed=1, timer=timer, total_requests=n).summary
                best[kind] = min(best[kind], (time.process_time() - t0) / s["requests"] * 1e6)
            summaries[kind] = s
    return {"router_cpu_us_per_request": round(best["router"], 1),
            "replay_cpu_us_per_request": round(best["replay"], 1),
            "same_summary": summaries["router"] == summaries["replay"]}


@contextmanager
def _router_of(router: Replay | None) -> Iterator[None]:
    """`simulator.engine.cluster` binds `router` in place of the config's (None: the config's own)."""
    if router is None:
        yield
        return
    original = cluster.make_router
    cluster.make_router = lambda name, **params: router  # type: ignore[assignment]
    try:
        yield
    finally:
        cluster.make_router = original


def main(argv: list[str] | None = None) -> dict[str, object]:
    parser = count.scenario_parser(__doc__)
    parser.add_argument("--replay", type=int, default=0, metavar="ROUNDS",
                        help="time the run against its router's choices replayed, ROUNDS rounds")
    args = parser.parse_args(argv)
    config, drawn, n, timer = count.build(args)
    if args.replay:
        out: dict[str, object] = {"scenario": args.name, "router": config.router,
                                  **replay(config, drawn, n, timer, args.replay)}
        print(json.dumps(out))
        return out
    with timed_choose() as total:
        t0 = time.process_time()
        s = run(config, iter(drawn), seed=1, timer=timer, total_requests=n).summary
        cpu = time.process_time() - t0
    out = {
        "scenario": args.name, "router": config.router, "requests": s["requests"], "arrivals": int(total[1]),
        "choose_us_per_arrival": round(total[0] / max(total[1], 1) * 1e6, 2),
        "run_cpu_us_per_request": round(cpu / s["requests"] * 1e6, 1), "events_per_request": s["events_per_request"]}
    print(json.dumps(out))
    return out


if __name__ == "__main__":
    main()
