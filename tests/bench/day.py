"""Replay a synthetic Azure-like day (`scenarios.azure_day`) with records streamed to CSV.

``python -m tests.bench.day [--hours H] [--per-day N] [--out DIR]`` runs in its own process (so its
peak RSS, `peak_rss_mb`, is the run's) and prints one JSON line: requests, CPU and wall seconds, requests per CPU
second, peak RSS, the simulated span and the load average. Records and time series go to
``DIR/requests.csv`` and ``DIR/timeseries.csv`` as they happen (a temporary folder by default), so
memory does not grow with the requests.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


def peak_rss_mb() -> float:
    """This process's peak resident memory: ``VmHWM`` (Linux: since its exec, unlike ``ru_maxrss``,
    which keeps the forking parent's), else ``ru_maxrss``."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main(argv: list[str] | None = None) -> dict[str, float]:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--hours", type=float, default=24.0)
    parser.add_argument("--per-day", type=float, default=4_000_000)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    cpu0, wall0 = time.process_time(), time.perf_counter()
    from simulator import __version__
    from simulator.engine.cluster import simulate
    from simulator.engine.records import CsvRows, SampleRecord
    from tests.bench.scenarios import day

    config, requests, _, timer = day(args.per_day, args.hours)
    with tempfile.TemporaryDirectory() as tmp:
        out = args.out or Path(tmp)
        out.mkdir(parents=True, exist_ok=True)
        with CsvRows(out / "requests.csv") as rec, CsvRows(out / "timeseries.csv", SampleRecord) as ts:
            _, end_s, events = simulate(config, requests, np.random.SeedSequence(0), timer=timer, records=rec,
                                        samples=ts)
        cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
        size = (out / "requests.csv").stat().st_size
    figures = {"version": __version__, "requests": rec.rows, "cpu_s": cpu, "wall_s": wall,
               "requests_per_cpu_s": rec.rows / cpu, "requests_per_wall_s": rec.rows / wall,
               "peak_rss_mb": peak_rss_mb(),
               "simulated_s": end_s, "events": events, "requests_csv_mb": size / 1e6,
               "load": os.getloadavg()[0]}
    print(json.dumps(figures))
    return figures


if __name__ == "__main__":
    main(sys.argv[1:])
