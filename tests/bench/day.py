"""Replay a synthetic Azure-like day (`scenarios.azure_day`) with records streamed to CSV.

``python -m tests.bench.day [--hours H] [--per-day N] [--out DIR]`` runs in its own process (so its
peak RSS, `peak_rss_mb`, is the run's) and prints one JSON line: requests, CPU and wall seconds, requests per CPU
second, peak RSS, the simulated span and the load average. Records and time series go to
``DIR/requests.csv`` and ``DIR/timeseries.csv`` as they happen (a temporary folder by default), so
memory does not grow with the requests.

With ``--cli`` it replays the same day as a user would: the day written as an Azure-format trace
(``TIMESTAMP,ContextTokens,GeneratedTokens``) and a scenario of `scenarios.DAY_CONFIG`'s fleet, then
``kvsim run SCENARIO --stream --out DIR`` in a child process, timed from outside (its CPU seconds and
peak RSS: the child's ``getrusage``); the trace and scenario are written before the clock starts. The
figures are the whole command's: the trace read three times (the context check, the run, the report's
workload summary), the simulation, the summary's read-back of the records, the charts.
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


DAY_SCENARIO = """name = "azure-day"
description = "A synthetic Azure-like day, replayed from its trace"
seed = 0

[model]
name = "{model}"

[cluster]
hardware = ["{node}"]
nodes = {nodes}
tp = {tp}

[cache]
strategy = "{cache}"

[workload]
trace = "day.csv"

[report]
collapse = false
breakeven = false
"""


def write_day_trace(path: Path, per_day: float, hours: float) -> int:
    """`scenarios.azure_day` as an Azure LLM inference trace (microsecond timestamps from midnight);
    returns its rows."""
    import datetime

    from tests.bench.scenarios import azure_day

    midnight = datetime.datetime(2024, 5, 10)
    n = 0
    with path.open("w", buffering=1 << 20) as f:
        f.write("TIMESTAMP,ContextTokens,GeneratedTokens\n")
        for r in azure_day(per_day, hours=hours):
            stamp = midnight + datetime.timedelta(microseconds=round(r.arrival_s * 1e6))
            f.write(f"{stamp:%Y-%m-%d %H:%M:%S.%f},{r.prompt_tokens},{r.output_tokens}\n")
            n += 1
    return n


def cli_day(per_day: float, hours: float, out: Path | None) -> dict[str, float]:
    """``kvsim run --stream`` of the day's trace in a child process (see the module docstring)."""
    import subprocess

    from simulator import __version__
    from tests.bench.scenarios import DAY_CONFIG

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        rows = write_day_trace(folder / "day.csv", per_day, hours)
        (folder / "day.toml").write_text(DAY_SCENARIO.format(
            model=DAY_CONFIG.model, node=DAY_CONFIG.node, nodes=DAY_CONFIG.n_nodes, tp=DAY_CONFIG.tp,
            cache=DAY_CONFIG.cache))
        report = out or folder / "report"
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        wall0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "simulator.cli", "run", str(folder / "day.toml"), "--stream",
                        "--out", str(report)], check=True, stdout=subprocess.DEVNULL)
        wall = time.perf_counter() - wall0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
        summary = json.loads((report / f"{DAY_CONFIG.node}" / "summary.json").read_text())["summary"]
    return {"version": __version__, "requests": summary["requests"], "trace_rows": rows, "cpu_s": cpu,
            "wall_s": wall, "requests_per_cpu_s": summary["requests"] / cpu,
            "requests_per_wall_s": summary["requests"] / wall, "peak_rss_mb": after.ru_maxrss / 1024,
            "events": summary["events"], "load": os.getloadavg()[0]}


def main(argv: list[str] | None = None) -> dict[str, float]:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--hours", type=float, default=24.0)
    parser.add_argument("--per-day", type=float, default=4_000_000)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--cli", action="store_true", help="kvsim run --stream of the day's trace")
    args = parser.parse_args(argv)
    if args.cli:
        figures = cli_day(args.per_day, args.hours, args.out)
        print(json.dumps(figures))
        return figures
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
