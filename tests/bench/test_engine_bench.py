"""Engine benchmark (`make bench`): each figure of issue 15's goal list, in requests per CPU second.

The machine may be shared (other processes, a laptop's turbo), so each figure is CPU seconds of
this process (`time.process_time`), with wall seconds beside it, the `simulator` version and the
load average (`os.getloadavg`) when it was taken. The workloads are built by `tests.bench.scenarios`
(the same ones a profiling session uses):

- Vidur's own shape: 10,000 requests, Poisson 2/s, arxiv-summarization-like prompts (mean ~8k),
  Llama-3.1-8B on one H100, chunked prefill of 512 tokens: goal >= 6,000 requests per CPU second;
- chat-4k (the shipped generator) on 4 × 8×H100, Llama-3-70B tp 8, 70 % load: >= 15,000 plain,
  >= 10,000 with the prefix cache;
- the Mooncake trace (block hashes, ``../shared/data/traces``; skipped where absent) with the prefix
  cache: >= 5,000;
- cost per request flat from 1 to 64 replicas, and in output length (250 vs 500 tokens);
- a 4M-request Azure-like day (`tests.bench.day`, its own process, records streamed to CSV) in
  under 10 minutes and 1 GB; and the same day as a user replays it, ``kvsim run --stream`` of its
  trace (``tests.bench.day --cli``: the whole command, trace reads, report and charts included);
- ``import simulator.engine`` under 0.5 s (its own process);
- first and last, `tests.bench.reference`: a fixed pure-Python loop timed as a yardstick of the
  machine's speed at that moment (it drifts; no figure is rescaled by it);
- chat-4k on 4 nodes disaggregated (2 prefill + 2 decode nodes; 1 + 3 with the prefix cache) at no less
  than half the requests per CPU second of the same workload aggregated (issue 13).

A figure is the simulation through `simulator.engine.run` (frames and summary included), workload
generation and imports excluded. A goal's figure (and each side of issue 13's ratio) is the best of
``KVSIM_BENCH_REPEATS`` runs (default 3; every run printed), each on a workload and timer built
afresh: a timer remembers step prices, so a second run on the same one would start warm, which no
user's run does. The best, as `timeit` advises: on a shared machine other processes only slow a run
down, so the fastest of a few is the closest to what the code costs; the runs beside it show the
spread. ``KVSIM_BENCH_REQUESTS`` sizes chat-4k (default 100,000), ``KVSIM_BENCH_DAY_HOURS`` the day
(default 24). Nothing is asserted on speed except the output-length ratio: these are measurements,
printed, not timed tests.
"""

from __future__ import annotations

import dataclasses
import json
import os
import resource
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from simulator import __version__
from simulator.engine import PoolConfig, run
from simulator.engine.timer import StepTimer
from tests.bench import scenarios
from tests.bench.reference import reference_s
from workloads.request import Request

N = int(os.environ.get("KVSIM_BENCH_REQUESTS", "100000"))
DAY_HOURS = float(os.environ.get("KVSIM_BENCH_DAY_HOURS", "24"))
REPEATS = int(os.environ.get("KVSIM_BENCH_REPEATS", "3"))
FIGURES: list[tuple[str, str, str]] = []  # (goal, measured, how), printed at the end


def _load() -> str:
    return f"load {os.getloadavg()[0]:.2f}"


def measure(label: str, config: Any, requests: Iterator[Request], n: int, timer: StepTimer | None) -> dict[str, float]:
    """Run `requests` through `run`; print and return requests per CPU and wall second.

    The requests are drawn before the clock starts (a generator such as `scenarios.vidur_requests`
    would otherwise be timed with the engine): the figure is the simulation's alone."""
    requests = iter(list(requests))
    cpu0, wall0 = time.process_time(), time.perf_counter()
    res = run(config, requests, seed=1, timer=timer, total_requests=n)
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    s = res.summary
    out = {"requests": s["requests"], "cpu_s": cpu, "wall_s": wall, "per_cpu_s": s["requests"] / cpu,
           "per_wall_s": s["requests"] / wall, "events_per_request": s["events_per_request"]}
    print(f"\n[{label}] {s['requests']:,} requests: {out['per_cpu_s']:,.0f} per CPU s ({cpu:.2f} CPU s), "
          f"{out['per_wall_s']:,.0f} per wall s ({wall:.2f} s); {s['events_per_request']:.2f} events/request, "
          f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:,.0f} MB; "
          f"simulated {s['makespan_s']:,.0f} s, "
          f"TTFT p50/p99 {s['ttft_p50_s'] * 1e3:.0f}/{s['ttft_p99_s'] * 1e3:.0f} ms, "
          f"TPOT p50 {s['tpot_p50_s'] * 1e3:.1f} ms, hit share {s['prefix_hit_ratio_tokens']:.2f}; "
          f"simulator {__version__}, {_load()}")
    return out


def best_of(label: str, build: Callable[[], scenarios.Built], repeats: int = REPEATS) -> dict[str, Any]:
    """`measure` of `repeats` runs, each of ``build()`` (a fresh workload and timer); the fastest run's
    figures, with ``runs``: every run's requests per CPU second, in order."""
    outs = [measure(f"{label}, run {i + 1} of {repeats}", *build()) for i in range(repeats)]
    best: dict[str, Any] = dict(max(outs, key=lambda o: o["per_cpu_s"]))
    best["runs"] = [o["per_cpu_s"] for o in outs]
    return best


def _runs(out: dict[str, Any]) -> str:
    return f"best of {len(out['runs'])} runs: {', '.join(f'{r:,.0f}' for r in out['runs'])}"


def _goal(label: str, goal: float, out: dict[str, Any], how: str) -> None:
    mark = "met" if out["per_cpu_s"] >= goal else "NOT met"
    FIGURES.append((f"{label}: >= {goal:,.0f}/CPU s",
                    f"{out['per_cpu_s']:,.0f}/CPU s, {out['per_wall_s']:,.0f}/wall s ({_runs(out)}; {mark}; "
                    f"{_load()})", how))


def _reference() -> str:
    return f"reference loop {reference_s():.3f} CPU s"


@pytest.mark.bench
def test_machine_reference() -> None:
    """How fast this machine runs Python as the bench starts (`tests.bench.reference`; again at the end)."""
    got = _reference()
    print(f"\n[machine] {got}, {_load()}")
    FIGURES.append(("machine speed as the bench starts (a yardstick, not a goal)", f"{got} ({_load()})",
                    "python -c 'from tests.bench.reference import reference_s; print(reference_s())'"))


@pytest.mark.bench
def test_import_time() -> None:
    """``import simulator.engine`` (and the engine proper, `simulator.engine.cluster`) in a fresh process."""
    code = ("import time; t = time.process_time(); import {m}; import sys; "
            "print(time.process_time() - t, sorted(x for x in ('scipy.stats', 'pandas', 'matplotlib') "
            "if x in sys.modules))")
    for module in ("simulator.engine", "simulator.engine.cluster"):
        runs = [subprocess.run([sys.executable, "-c", code.format(m=module)], capture_output=True, text=True,
                               check=True).stdout.split(maxsplit=1) for _ in range(3)]
        cpu = min(float(r[0]) for r in runs)
        print(f"\n[import {module}] {cpu:.3f} CPU s (best of 3); heavy modules loaded: {runs[0][1].strip()}; "
              f"{_load()}")
        if module == "simulator.engine":
            met = "met" if cpu < 0.5 else "NOT met"
            FIGURES.append(("import simulator.engine: < 0.5 s", f"{cpu:.3f} CPU s ({met})",
                            "python -c 'import simulator.engine' (best of 3)"))


@pytest.mark.bench
def test_vidur_workload() -> None:
    _goal("Vidur-like (10k req, 2 QPS, ~8k prompts, chunk 512, Llama-3.1-8B 1xH100)", 6000,
          best_of("vidur-like", scenarios.vidur), "scenarios.vidur()")


@pytest.mark.bench
@pytest.mark.parametrize("prefix", [False, True])
def test_chat4k(prefix: bool) -> None:
    label = f"chat-4k{' + prefix cache' if prefix else ''} ({N:,} req asked, 4 x Llama-3-70B tp8, 70 % load)"
    _goal(label, 10_000 if prefix else 15_000, best_of(label, lambda: scenarios.chat4k(N, prefix=prefix)),
          f"scenarios.chat4k({N}, prefix={prefix})")


@pytest.mark.bench
@pytest.mark.parametrize("prefix", [False, True])
def test_disaggregated(prefix: bool) -> None:
    """The chat-4k workload on 4 nodes, aggregated and disaggregated (2 prefill + 2 decode nodes; 1 + 3
    with the prefix cache, which spares most of the prefill), issue 13: the disaggregated run at no
    less than half the aggregated requests per CPU second. Each side is the best of `REPEATS` runs, the
    two interleaved (a slow spell of the machine falls on both)."""
    p = 1 if prefix else 2  # prefill nodes: without the prefix cache chat prefills its whole history

    def aggregated() -> scenarios.Built:
        return scenarios.chat4k(N, prefix=prefix)

    def split() -> scenarios.Built:
        config, reqs, n, timer = scenarios.chat4k(N, prefix=prefix)
        return (dataclasses.replace(config, n_nodes=4 - p,
                                    prefill_pool=PoolConfig(node=config.node, n_nodes=p, tp=config.tp)),
                reqs, n, timer)

    what = f"chat-4k{' + prefix cache' if prefix else ''} ({N:,} req asked, Llama-3-70B tp8, 4 nodes)"
    builds = {"aggregated": aggregated, f"{p}P{4 - p}D": split}
    runs: dict[str, list[float]] = {side: [] for side in builds}
    for i in range(REPEATS):
        for side, build in builds.items():
            runs[side].append(measure(f"{what}: {side}, pair {i + 1} of {REPEATS}", *build())["per_cpu_s"])
    agg, dis = (max(r) for r in runs.values())
    ratio = dis / agg
    mark = "met" if ratio >= 0.5 else "NOT met"
    print(f"\n[{what}] disaggregated / aggregated requests per CPU s, best of {REPEATS} each: {ratio:.2f}")
    each = "; ".join(f"{side} {', '.join(f'{r:,.0f}' for r in rs)}" for side, rs in runs.items())
    FIGURES.append((f"{what}: disaggregated >= half the aggregated rate (issue 13)",
                    f"aggregated {agg:,.0f}/CPU s, {p}P{4 - p}D {dis:,.0f}/CPU s, ratio {ratio:.2f} (best of "
                    f"{REPEATS} runs each, interleaved: {each}; {mark}; {_load()})",
                    f"scenarios.chat4k({N}, prefix={prefix}), {p}P{4 - p}D"))


@pytest.mark.bench
def test_mooncake() -> None:
    if not scenarios.MOONCAKE.exists():
        pytest.skip(f"no trace at {scenarios.MOONCAKE}")
    label = "Mooncake trace + prefix cache (4 x Llama-3.1-70B tp8)"
    _goal(label, 5000, best_of(label, scenarios.mooncake), "scenarios.mooncake()")


@pytest.mark.bench
def test_flat_in_replicas() -> None:
    """CPU per request serving chat 2k/250 at 70 % load on 1, 4, 16 and 64 replicas (Llama-3.1-8B, one H100 each),
    per event, and the same under least-dispatched and round-robin routing, which read no replica.

    More replicas make more events a request (3.1 at 1 replica, 3.7 at 64, under each router): one
    replica's Poisson arrivals often land while a prefill step runs and join the next plan (45 % of
    them at 1 replica), where a routed share of them comes evenly spaced and cuts a decode jump (93 %
    at 16 and 64 replicas; least-tokens sends none to a replica whose load a request just raised).
    The simulated system does that work, not the engine. Least-tokens also reads the replicas whose
    load changed or passed a step boundary since the last arrival (`routers.basic._LeastTokens`): at
    64 replicas, about 3 reads an arrival. The round-robin figures leave that out; least-dispatched
    (`routers.basic._LeastDispatched`) reads no replica either, and keeps its counts in two bisections
    an arrival, a first token and a departure.

    Each figure is the best of `REPEATS` runs, taken in rounds over every router and replica count."""
    routers, counts = ("least-tokens", "least-dispatched", "round-robin"), (1, 4, 16, 64)
    runs: dict[tuple[str, int], list[float]] = {(router, r): [] for router in routers for r in counts}
    events: dict[tuple[str, int], float] = {}
    # rounds of every (router, replicas) in turn, not each one's repeats in a row: the machine's speed drifts
    # by tens of % over minutes, and a ratio of figures taken minutes apart would read that drift
    for round_ in range(REPEATS):
        for router in routers:
            for r in counts:
                config, reqs, n, timer = scenarios.scale(r, 40_000)
                config = dataclasses.replace(config, router=router)
                out = measure(f"{r} replica(s), {router}, round {round_ + 1} of {REPEATS}", config, reqs, n, timer)
                runs[router, r].append(out["cpu_s"] / out["requests"] * 1e6)
                events[router, r] = out["events_per_request"]
    # each the best of its runs (the closest to what the code costs, as `best_of`)
    us = {router: {r: min(runs[router, r]) for r in counts} for router in routers}
    per_event = {router: {r: us[router][r] / events[router, r] for r in counts} for router in routers}

    def line(values: dict[int, float], unit: str) -> str:
        ratio = max(values.values()) / min(values.values())
        return f"{', '.join(f'{r}: {v:.1f}' for r, v in values.items())} {unit} (max/min {ratio:.2f})"

    for router in us:
        print(f"\n{router}: CPU per request by replicas {line(us[router], 'µs')}; per event "
              f"{line(per_event[router], 'µs')}")
    spread = "; ".join(f"{router} {r}: {', '.join(f'{v:.1f}' for v in runs[router, r])}"
                       for router in routers for r in counts)
    figures = "; ".join(f"{router} {line(us[router], 'µs')}, per event {line(per_event[router], 'µs')}"
                        for router in us) + f" (best of {REPEATS} interleaved rounds; every run, µs: {spread})"
    FIGURES.append(("cost per request flat from 1 to 64 replicas", f"{figures} ({_load()})",
                    "scenarios.scale(r, 40_000), router least-tokens (the default), least-dispatched and round-robin"))


@pytest.mark.bench
def test_flat_in_output_length() -> None:
    """Doubling the output length at the same load must not double the CPU per request (it is closed form)."""
    timer = scenarios.chat_timer()
    per = {}
    for out_tokens, n in ((250, N // 2), (500, N // 4)):
        rate = 0.7 * 4 * scenarios.per_replica_rate(timer, 2000, out_tokens)
        out = measure(f"chat 2k/{out_tokens}", scenarios.CHAT_CONFIG,
                      scenarios.poisson_chat(n, rate, 2000, out_tokens), n, timer)
        per[out_tokens] = out["cpu_s"] / out["requests"]
    ratio = per[500] / per[250]
    print(f"\nCPU per request: {per[250] * 1e6:.1f} µs at 250 output tokens, {per[500] * 1e6:.1f} µs at 500 "
          f"(ratio {ratio:.2f})")
    FIGURES.append(("cost per request flat in output length (250 -> 500 tokens)", f"ratio {ratio:.2f} ({_load()})",
                    "scenarios.poisson_chat, 4 x Llama-3-70B tp8"))
    assert ratio < 2


@pytest.mark.bench
def test_day_replay() -> None:
    """The Azure-like day in its own process, records and time series streamed to CSV."""
    proc = subprocess.run([sys.executable, "-m", "tests.bench.day", "--hours", str(DAY_HOURS)],
                          capture_output=True, text=True, check=True, cwd=scenarios.REPO)
    f = json.loads(proc.stdout.strip().splitlines()[-1])
    minutes_4m = 4e6 / f["requests_per_cpu_s"] / 60
    print(f"\n[Azure-like day, {DAY_HOURS:g} h] {f['requests']:,} requests: {f['requests_per_cpu_s']:,.0f} per CPU s "
          f"({f['cpu_s']:.0f} CPU s), {f['requests_per_wall_s']:,.0f} per wall s; peak RSS {f['peak_rss_mb']:,.0f} MB; "
          f"{f['events'] / f['requests']:.2f} events/request; 4M requests at this rate: {minutes_4m:.1f} CPU min; "
          f"simulator {f['version']}, load {f['load']:.2f}")
    ok = minutes_4m < 10 and f["peak_rss_mb"] < 1024
    FIGURES.append(("4M-request day in < 10 min, < 1 GB",
                    f"{f['requests']:,} requests in {f['cpu_s'] / 60:.1f} CPU min ({minutes_4m:.1f} min per 4M), "
                    f"peak {f['peak_rss_mb']:,.0f} MB ({'met' if ok else 'NOT met'}; load {f['load']:.2f})",
                    f"python -m tests.bench.day --hours {DAY_HOURS:g}"))


@pytest.mark.bench
def test_day_replay_from_the_command_line() -> None:
    """The same day as an Azure-format trace, replayed by ``kvsim run --stream`` in a child process."""
    proc = subprocess.run([sys.executable, "-m", "tests.bench.day", "--cli", "--hours", str(DAY_HOURS)],
                          capture_output=True, text=True, check=True, cwd=scenarios.REPO)
    f = json.loads(proc.stdout.strip().splitlines()[-1])
    minutes_4m = 4e6 / f["requests_per_cpu_s"] / 60
    print(f"\n[kvsim run --stream, Azure-like day trace, {DAY_HOURS:g} h] {f['requests']:,} requests: "
          f"{f['cpu_s']:.0f} CPU s ({f['requests_per_cpu_s']:,.0f} per CPU s), {f['wall_s']:.0f} wall s; peak RSS "
          f"{f['peak_rss_mb']:,.0f} MB; simulator {f['version']}, load {f['load']:.2f}")
    ok = minutes_4m < 10 and f["peak_rss_mb"] < 1024
    FIGURES.append(("the same day from the command line (kvsim run --stream of its trace)",
                    f"{f['requests']:,} requests in {f['cpu_s'] / 60:.1f} CPU min ({minutes_4m:.1f} min per 4M), "
                    f"peak {f['peak_rss_mb']:,.0f} MB ({'within' if ok else 'NOT within'} 10 min and 1 GB; "
                    f"load {f['load']:.2f})",
                    f"python -m tests.bench.day --cli --hours {DAY_HOURS:g}"))


@pytest.mark.bench
def test_print_goals() -> None:
    """The goal list with what this run measured (run last: pytest keeps file order)."""
    print(f"\n\nissue 15 goals, simulator {__version__}, {os.cpu_count()} CPUs, {_load()}, {_reference()} "
          "at the end (requests per CPU s scale as 1 / the reference loop's time where the machine alone moves them):")
    for goal, got, how in FIGURES:
        print(f"  - {goal}\n      {got}\n      reproduce: {how}")
