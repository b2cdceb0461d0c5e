"""CPU time of a router's `choose` alone, beside the whole run's, on one bench scenario.

``python -m tests.bench.router_time NAME N [--router R]`` builds scenario NAME of `tests.bench.scenarios`
with about N requests, wraps the bound routers' ``choose`` in `time.perf_counter` and runs it with seed 1;
it prints one JSON line: the router, its ``choose`` µs an arrival, the run's CPU µs a request and its events
a request. The README's account of the least-tokens router at 64 replicas quotes it (12.7 µs an arrival
of 64.3 a request on scale-64, 2026-12-04). The wrapper adds ~0.2 µs a call (two clock reads).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from simulator.engine import run
from simulator.engine.routers import basic
from tests.bench import count


@contextmanager
def timed_choose() -> Iterator[list[float]]:
    """``[seconds, calls]`` of every shipped router's ``choose`` while the block runs."""
    total = [0.0, 0.0]
    policies = (basic._LeastTokens, basic._RoundRobin, basic._LeastKV, basic._PrefixAffinity)
    originals = [p.choose for p in policies]

    def wrap(orig: Callable[..., int]) -> Callable[..., int]:
        def choose(self: Any, request: Any, replicas: Any, now: float) -> int:
            t = time.perf_counter()
            try:
                return orig(self, request, replicas, now)
            finally:
                total[0] += time.perf_counter() - t
                total[1] += 1
        return choose

    for p, orig in zip(policies, originals, strict=True):
        p.choose = wrap(orig)
    try:
        yield total
    finally:
        for p, orig in zip(policies, originals, strict=True):
            p.choose = orig


def main(argv: list[str] | None = None) -> dict[str, object]:
    args = count.scenario_parser(__doc__).parse_args(argv)
    config, drawn, n, timer = count.build(args)
    with timed_choose() as total:
        t0 = time.process_time()
        s = run(config, iter(drawn), seed=1, timer=timer, total_requests=n).summary
        cpu = time.process_time() - t0
    out: dict[str, object] = {
        "scenario": args.name, "router": config.router, "requests": s["requests"], "arrivals": int(total[1]),
        "choose_us_per_arrival": round(total[0] / max(total[1], 1) * 1e6, 2),
        "run_cpu_us_per_request": round(cpu / s["requests"] * 1e6, 1), "events_per_request": s["events_per_request"]}
    print(json.dumps(out))
    return out


if __name__ == "__main__":
    main()
