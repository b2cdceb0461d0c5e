"""One bench scenario's engine run, for an instruction count that does not move with the machine.

``python -m tests.bench.count NAME N [--router R] [--no-run]`` builds scenario NAME of
`tests.bench.scenarios` (``scale-64``, ``chat-4k-prefix``, ...) with about N requests (``mooncake`` and
``day-1h`` have their own sizes), draws them, imports what `run` needs (`simulator.engine.run` loads its
module, pandas with it) and, unless ``--no-run``, runs them through `run` with seed 1; it prints one JSON
line: the scenario, router, requests, events and events a request (zeros with ``--no-run``).
Under ``valgrind --tool=callgrind --callgrind-out-file=/dev/null`` the process's instruction count with
the run, less the count of the same command with ``--no-run``, is the run's alone (what `run` does on first
use only, such as pandas loading its pyarrow string support for the records' frame, ~10 ms, counts as the
run's): the README's counts (`run` alone, per request) are that difference over the requests. Timings on
this shared machine move by 20-40% from one hour to the next; instruction counts do not (scale-64 under
least-tokens, counted with this module and with an earlier script that drew its requests the same way:
304.8 k and 305.1 k instructions a request).
"""

from __future__ import annotations

import argparse
import dataclasses
import json

from simulator.engine import EngineConfig, run
from simulator.engine.routers import router_names
from simulator.engine.timer import StepTimer
from tests.bench import scenarios
from workloads.request import Request


def scenario_parser(description: str | None) -> argparse.ArgumentParser:
    """The arguments of a one-scenario bench tool (this one, `tests.bench.router_time`): NAME, N, --router."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("name", choices=sorted(scenarios.SCENARIOS))
    parser.add_argument("n", type=int)
    parser.add_argument("--router", default=None, choices=router_names(), help="a router in place of the scenario's")
    return parser


def build(args: argparse.Namespace) -> tuple[EngineConfig, list[Request], int, StepTimer | None]:
    """Scenario NAME with about N requests, its router replaced when --router says so, the requests drawn."""
    config, requests, n, timer = scenarios.build(args.name, args.n)
    if args.router is not None:
        config = dataclasses.replace(config, router=args.router)
    return config, list(requests), n, timer


def main(argv: list[str] | None = None) -> dict[str, object]:
    parser = scenario_parser(__doc__)
    parser.add_argument("--no-run", action="store_true", help="everything but the run (the count to subtract)")
    args = parser.parse_args(argv)
    config, drawn, n, timer = build(args)
    out: dict[str, object] = {"scenario": args.name, "router": config.router, "requests": 0, "events": 0,
                              "events_per_request": 0.0}
    if not args.no_run:
        s = run(config, iter(drawn), seed=1, timer=timer, total_requests=n).summary
        out.update(requests=s["requests"], events=s["events"], events_per_request=s["events_per_request"])
    print(json.dumps(out))
    return out


if __name__ == "__main__":
    main()
