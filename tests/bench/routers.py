"""What the choice of router does to latency, on the bench's scenarios (a planner's comparison, not a timing).

``python -m tests.bench.routers [N]`` runs `scenarios.scale` at 4, 16 and 64 replicas (N requests, 20,000 by
default; 64 replicas twice that) and chat-4k with and without the prefix cache (`scenarios.chat4k(N)`: 16,445
requests for 20,000) under each of
least-tokens (the default), least-dispatched and round-robin, seed 1, and prints one table: TTFT p50 and
p99, TPOT p99, end-to-end p99 (seconds), events a request, and the share of arrivals routed to a replica
within `BUNCHED_S` of its previous arrival (they queue behind each other's prefill). The figures are the
simulation's, the same on any machine for the same code. The README's comparison of the routers quotes it.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable

import pandas as pd

from simulator.engine import run
from tests.bench import scenarios

ROUTERS = ("least-tokens", "least-dispatched", "round-robin")
COLUMNS = {"ttft_p50_s": "TTFT p50 s", "ttft_p99_s": "TTFT p99 s", "tpot_p99_s": "TPOT p99 s",
           "e2e_p99_s": "e2e p99 s", "events_per_request": "events/request"}
BUNCHED_S = 0.05  # about one 2k-token prefill of Llama-3.1-8B on an H100 (the scale scenarios' TTFT p50)


def table(n: int = 20_000) -> pd.DataFrame:
    """One row a (scenario, router): the summary's figures in `COLUMNS`."""
    cases: dict[str, Callable[[], scenarios.Built]] = {
        "scale-4": lambda: scenarios.scale(4, n), "scale-16": lambda: scenarios.scale(16, n),
        "scale-64": lambda: scenarios.scale(64, 2 * n), "chat-4k": lambda: scenarios.chat4k(n, prefix=False),
        "chat-4k-prefix": lambda: scenarios.chat4k(n, prefix=True)}
    rows = []
    for name, build in cases.items():
        for router in ROUTERS:
            config, requests, total, timer = build()
            result = run(dataclasses.replace(config, router=router), requests, seed=1, timer=timer,
                         total_requests=total)
            summary, records = result.summary, result.requests.sort_values("arrival_s")
            gap = records.groupby("replica").arrival_s.diff()
            rows.append({"scenario": name, "router": router, "requests": summary["requests"],
                         **{label: summary[key] for key, label in COLUMNS.items()},
                         "bunched": float((gap < BUNCHED_S).mean())})
    return pd.DataFrame(rows)


if __name__ == "__main__":
    frame = table(int(sys.argv[1]) if len(sys.argv) > 1 else 20_000)
    print(frame.to_string(index=False, float_format=lambda v: f"{v:.4g}"))
