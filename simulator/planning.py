"""Capacity planning: the smallest fleet of each node kind that meets the SLOs, by simulation.

For one node kind the search starts at the memory floor and grows:

- **memory floor** (analytic, a lower bound): by Little's law the mean KV held is at least
  ``Σ_r bytes(prompt_r + output_r / 2) · (output_r − 1) · t_step1 / T``, where ``t_step1`` is the batch-1
  decode step (no batch decodes faster) and ``T`` the time a fleet that meets the SLOs has to serve
  them in: the workload's arrival span plus the longest a request may take under the SLOs
  (``ttft + (o − 1)·tpot``). Only the tokens a request shares with no other count, over its ``o − 1``
  decode steps, and the p99s' tails are left out (`memory_floor_nodes`); a fleet needs at least ``ceil(that /
  kv_budget_per_node)`` nodes, so no fleet below it meets the SLOs.
- **search**: simulate at the floor; double until the SLOs hold (p99 TTFT, p99 TPOT, nothing
  rejected or timed out), then bisect between the last failure and the first success. A fleet whose
  replicas reject requests (they can never hold them) is refused at once (`never_served`): more nodes
  would not serve them. A kind no fleet of which meets the SLOs (`NoFleet`) gets a row that says why
  (`no_fleet_row`); the other kinds keep their answers.
- **binding constraint** at the answer: ``memory`` when the answer is the memory floor or the
  fleet one replica smaller failed with its KV pool nearly full of blocks it could not free
  (time-mean ``kv_referenced_utilization`` ≥ 80 %: a prefix cache's evictable blocks left out) or
  preempted, else ``compute`` (``none`` when one replica meets the SLOs: `_binding`).
- **headroom**: the largest load multiplier (of the scenario's rate) the chosen fleet takes
  before an SLO breaks, by bisection over ``rate_scale`` in [1, `HEADROOM_MAX_SCALE`]; when no run
  of the bisection failed, ``headroom_capped`` is True and ``headroom_scale`` only a lower bound
  (the fleet may take more than the search tried).
"""

from __future__ import annotations

import math
import shlex
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from itertools import pairwise
from typing import Any, Generic, TypeVar

import pandas as pd

from hardware.catalog import NodeSpec
from simulator.capacity import block_share, kv_budget
from simulator.cost import StepModel, load_params
from simulator.engine import EngineConfig, Result, run
from simulator.engine.result import must_seed
from simulator.errors import ConfigError, is_number, must
from simulator.kv import sequence_bytes
from simulator.limits import MAX_CAPACITY_NODES
from simulator.progress import GENERATE_COST, Meter, Progress, search_runs_left
from simulator.scenario import Scenario
from simulator.study import must_scenario, node_kinds
from simulator.units import figure, measure_against
from workloads import Workload
from workloads.request import Request
from workloads.workload import say_left_out

MEMORY_BOUND_UTILIZATION = 0.8
MAX_NODES = MAX_CAPACITY_NODES  # the search gives up beyond this many nodes of a kind
HEADROOM_MAX_SCALE = 8.0
HEADROOM_STEPS = 5


@dataclass(frozen=True, slots=True, kw_only=True)
class FleetPlan:
    hardware: str
    nodes: int
    memory_floor_nodes: int
    usd_per_hour: float
    usd_per_million_output_tokens: float
    ttft_p99_s: float
    tpot_p99_s: float
    kv_utilization: float
    binding: str
    headroom_scale: float
    headroom_capped: bool  # no headroom run failed: headroom_scale is a lower bound, the search's ceiling
    simulations: int
    search_note: str = ""  # where a p99 rose with nodes near its SLO (`noisy_search_note`): said, not a column


def meets_slo(result: Result, ttft_p99_s: float, tpot_p99_s: float) -> bool:
    """p99 TTFT and p99 TPOT (of per-request mean TPOT) within the SLOs, and nothing rejected or timed out
    (a rejected request, one no replica can ever hold, is not served at all: its p99s are the served ones').

    A workload of one-token answers has no TPOT (NaN): nothing can break that SLO.
    """
    return figures_meet_slo(result.summary, ttft_p99_s, tpot_p99_s)


def keeps_up(result: Result, ttft_p99_s: float, tpot_p99_s: float) -> bool:
    """`meets_slo`, and its waiting queue did not grow through the steady window (``steady_queue_growing``:
    `simulator.engine.steady`): a fleet falling behind its load meets the SLOs only until its queue is long
    enough, so no search takes it as an answer (the node count, the xPyD split, the headroom, the max rate).
    helper-145: `kvsim capacity disaggregated` answered 8xH100 1P2D, whose queue grew by 477 in 180 s and whose
    TTFT p99 reached 56 s over 360 s."""
    return meets_slo(result, ttft_p99_s, tpot_p99_s) and not result.summary.get("steady_queue_growing", False)


def figures_meet_slo(figures: Mapping[str, Any], ttft_p99_s: float, tpot_p99_s: float) -> bool:
    """`meets_slo` on a run's figures (a summary, a sweep row): ``completed``, ``rejected``, ``timed_out``,
    ``ttft_p99_s`` and ``tpot_p99_s``."""
    s = figures
    return s["completed"] > 0 and s["timed_out"] == 0 and s["rejected"] == 0 and s["ttft_p99_s"] <= ttft_p99_s \
        and not s["tpot_p99_s"] > tpot_p99_s


def latency_line(result: Result, ttft_p99_s: float, tpot_p99_s: float) -> str:
    """A search run's line of progress: ``TTFT p99 0.302 s, TPOT p99 10.3 ms: fails`` (`meets_slo`), each p99 with
    the digits that put it on its side of the SLO (`figure_against`), and what else failed it (requests rejected
    or timed out, none completed)."""
    s = result.summary
    line = (f"TTFT p99 {measure_against(s['ttft_p99_s'], ttft_p99_s, 's')}, "
            f"TPOT p99 {measure_against(s['tpot_p99_s'] * 1e3, tpot_p99_s * 1e3, 'ms')}: ")
    if meets_slo(result, ttft_p99_s, tpot_p99_s):
        return line + ("meets" if keeps_up(result, ttft_p99_s, tpot_p99_s) else "fails (its queue grows)")
    if s["rejected"] or s["timed_out"]:
        return line + "fails (" + ", ".join(f"{s[k]:,} {what}" for k, what in (
            ("rejected", "rejected"), ("timed_out", "timed out")) if s[k]) + ")"
    return line + ("fails" if s["completed"] else "fails (none completed)")


def queue_grew_note(which: str, met: str, load: str = "its load") -> str:
    """The note `kvsim compare` and `kvsim sweep` give where runs' arrivals outran admissions through the steady
    window (their ``queue_grows``: the queue grew, or requests timed out waiting; `which`: the sets or points):
    their fleets fall behind `load`, and where some read ``meets_slo`` True (`met`: which, ``""`` for none), that
    verdict weighs the p99s alone, as `keeps_up` does not."""
    # "arrivals outran admissions": under a queue timeout the queue may not grow, its requests timing out instead
    # (helper-170: "the waiting queue grew ... a longer run would read worse p99s" of TTFT p99s a timeout bounds)
    return (f"{which}: arrivals outran admissions through the steady window (column queue_grows): the fleet falls "
            f"behind {load}, and a longer run would read worse p99s (or, under a queue timeout, more timed out)"
            + (f"; {met} read meets_slo True, which weighs the p99s alone (kvsim capacity fails such a run)"
               if met else ""))


def short_verdict(line: str) -> str:
    """A failed run's `latency_line` without its plain ``fails`` but with what else failed it: ``TTFT p99 6.49 s,
    TPOT p99 14.3 ms``, ``TTFT p99 1.2 s, TPOT p99 40 ms: its queue grows`` (a `NoFleet`'s short reason, where
    "fails" goes without saying; helper-146: a fleet whose p99s met the SLOs read as if it had met them)."""
    head, _, verdict = line.rpartition(": ")
    why = verdict.removeprefix("fails")
    return f"{head}: {why.strip()[1:-1]}" if why else head


class NoFleet(ConfigError):
    """No fleet of a node kind meets the SLOs: the message says why in full; `short` in a few words, for the
    plan's ``binding`` column (`plan_capacity` keeps the other kinds' answers)."""

    def __init__(self, message: str, short: str) -> None:
        super().__init__(message)
        self.short = short
        self.floor: int | None = None  # the kind's memory floor, and the simulations its search ran (`plan_fleet`)
        self.simulations = 0


def no_fleet_row(hardware: str, exc: NoFleet) -> dict[str, Any]:
    """A `FleetPlan` row for a kind no fleet of which meets the SLOs: no node count, cost or headroom, and
    ``binding`` ``no fleet: <why>``."""
    nan = math.nan
    return {"hardware": hardware, "nodes": None, "memory_floor_nodes": exc.floor, "usd_per_hour": nan,
            "usd_per_million_output_tokens": nan, "ttft_p99_s": nan, "tpot_p99_s": nan, "kv_utilization": nan,
            "binding": f"no fleet: {exc.short}", "headroom_scale": nan, "headroom_capped": None,
            "simulations": exc.simulations}


def no_kind_fits(where: str, failed: list[NoFleet], labels: list[str]) -> NoFleet:
    """One `NoFleet` for a plan none of whose fleets (`labels`, one per error) meets the SLOs, said at `where`
    (the scenario): the fleets grouped by their short reason, without its figures (``none of up to 256
    nodes``), so that every fleet is named within one line; `--hardware` with one kind gives its figures."""
    reasons: dict[str, list[str]] = {}
    for label, exc in zip(labels, failed, strict=True):
        reasons.setdefault(exc.short.split(" (")[0], []).append(label)
    return NoFleet(f"{where}: no fleet of any node kind meets the SLOs: " + "; ".join(
        f"{', '.join(names)}: {reason}" for reason, names in reasons.items())
        + " (one kind alone, --hardware or plan_capacity's hardware, says why in full)", short="no fleet")


def plan_frame(rows: list[dict[str, Any]], columns: list[str] | None = None) -> pd.DataFrame:
    """The plan's rows as a frame, its node counts whole numbers (pandas' nullable ``Int64``: a kind with no
    fleet has none, not NaN, which would print every count as ``3.0``)."""
    frame = pd.DataFrame(rows)
    if columns is not None:
        frame = frame[columns]
    for column in ("nodes", "prefill_nodes", "decode_nodes", "memory_floor_nodes", "simulations"):
        if column in frame:
            frame[column] = frame[column].astype("Int64")
    return frame


def never_served(result: Result, where: str) -> None:
    """Refuse a fleet whose replicas rejected requests: a replica rejects a request it can never hold (its
    context beyond the model's, or more KV blocks than its pool has), so no number of replicas serves it and no
    fleet of this plan meets the SLOs. The message counts them and quotes the first one's reason."""
    if result.summary["rejected"]:
        raise NoFleet(f"{where}: {rejected_note(result)}, so no fleet size meets the SLOs: give a replica "
                      "more KV room, or a KV lever (kvsim fit)",
                      short=f"{result.summary['rejected']:,} requests no replica can hold (rejected)")


def rejected_note(result: Result) -> str:
    """``45 of 48 requests can never be served by a replica of this plan (the first: needs 5202 blocks > …)``:
    the requests `result`'s replicas rejected, and the first one's reason where the records hold it (a
    streamed run's keep only the report's columns)."""
    s, req = result.summary, result.requests
    first = (f" (the first: {req.reason[req.outcome == 'rejected'].iloc[0]})"
             if "reason" in req and (req.outcome == "rejected").any() else "")
    return f"{s['rejected']:,} of {s['requests']:,} requests can never be served by a replica of this plan{first}"


SLO_TAIL = 0.01  # the share of requests a p99 SLO leaves unbounded (`meets_slo`), per SLO
FEW_FOR_P99 = 200  # a run of fewer requests has its p99s set by its two or three slowest (`few_requests_note`)


def arrive_at_once(requests: Sequence[Request]) -> bool:
    """Whether `requests` (in arrival order, at least one) all arrive at one instant: an offline workload, whose
    length its count sets (`few_requests_note`)."""
    return bool(requests) and requests[0].arrival_s == requests[-1].arrival_s


def few_requests_note(requests: int, offline: bool = False,
                      decides: str = "the answer (and a larger fleet read worse than a smaller one)",
                      longer: str = "--duration-s, workload.duration_s") -> str | None:
    """A note where the SLOs' p99s rest on a run's few slowest requests (fewer than `FEW_FOR_P99`): the
    99th percentile of ``n`` values interpolates between its ``n − ⌊0.99·(n − 1)⌋`` largest, so one slow
    request (a cold long prefill) decides a node count, and more nodes may even do worse. None otherwise.
    `offline`: every request arrives at once, so more of them, not a longer run, is the remedy; `decides`: what
    the p99s decide (a capacity plan's node count; compare's ``meets_slo``); `longer`: the command's way to a
    longer run."""
    if not 0 < requests < FEW_FOR_P99:
        return None
    top = requests - math.floor(0.99 * (requests - 1))
    more = ("more requests (an offline workload's count)" if offline
            else f"a longer run ({longer})")
    return (f"the workload has {requests} requests: a p99 over them lies between its {top} slowest, so one slow "
            f"request can decide {decides}; {more} would give p99s that stand")


def memory_floor_nodes(scenario: Scenario, hardware: str, workload: Workload, ttft_p99_s: float = math.inf,
                       tpot_p99_s: float = math.inf) -> int:
    """Nodes that KV memory alone requires of a fleet that meets the SLOs (the module docstring); at least 1.

    A request holds ``own(t) = bytes(t) − bytes(shared_r)`` at ``t`` KV tokens through its ``o_r − 1`` decode
    steps (its first token comes with its prefill; ``shared_r``: its leading segments another request also uses,
    which a prefix cache may hold once for both), each of at least ``step1(t)`` seconds (the batch-1 decode step
    at its context: no batch decodes faster; a disaggregated fleet's decode pool holds it from its transfer on,
    for those steps too). Over ``t = p_r + 1 .. p_r + o_r − 1`` both rise with ``t``, so ``Σ own·step1 ≥ (o_r −
    1)·mean(own)·mean(step1)`` (Chebyshev's sum inequality), and both are concave (linear, or flattening past a
    window), so each mean is at least the mean of its two ends: ``bytes_r·t_r`` a step below. (The bytes at the
    midpoint were no lower bound past a window: Gemma-3-27B, 100 + 2,000 tokens, 526 MB against a mean of 435,
    helper-143.) In a fleet that meets the SLOs all but ``2·⌈SLO_TAIL · n⌉`` requests (the p99s' tails) are
    answered by ``a_r + ttft + (o_r − 1)·tpot``, so their byte-seconds fit in ``T = a_last − a_first + max_r
    (ttft + (o_r − 1)·tpot)`` (at least 1 s) of the fleet's KV budget: ``nodes ≥ Σ (all but the tails' largest)
    bytes_r · t_r · (o_r − 1) / (T · kv_budget_per_node)``. Without SLOs (infinite) there is no such horizon,
    and the floor is one replica's nodes. (A scenario sets no retention policy: every token is kept.)"""
    cfg = scenario.engine_config(hardware)
    node = cfg.node
    assert isinstance(node, NodeSpec)  # Scenario.engine_config resolves it
    model = scenario.model_spec()
    budget = kv_budget(node, model, memory_utilization=scenario.cluster.memory_utilization, plan=scenario.plan)
    reqs = workload.requests()
    gaps = max((r.output_tokens - 1 for r in reqs), default=0)  # one-token answers: no TPOT to bound
    horizon = ttft_p99_s + (gaps * tpot_p99_s if gaps else 0.0)
    if not reqs or not math.isfinite(horizon):
        return budget.nodes
    step1 = StepModel(node.gpu, model, cfg.layout, scenario.cluster.tp, load_params(node.gpu.key),
                      plan=scenario.plan, node=node)
    a_s, b_s = step1.decode_coefficients(1)
    span = max(reqs[-1].arrival_s - reqs[0].arrival_s + horizon, 1.0)
    # on the binding GPU: its share of each sequence's bytes against its budget, times the KV pools
    # of a replica's nodes
    share = min(range(len(budget.stages)), key=lambda s: budget.stage_kv_bytes(s) / block_share(budget, model,
                                                                                                  cfg.layout, s))
    per_unit = budget.replicas * budget.plan.kv_groups * budget.stage_kv_bytes(share)
    frac = block_share(budget, model, cfg.layout, share)
    # a prefix cache holds a segment other requests also use once: only a request's own tokens are its own
    users: Counter[int] = Counter()
    if cfg.cache != "none":
        for r in reqs:
            users.update({sid for sid, _ in r.segments} | ({r.output_segment_id} - {-1}))
    seconds = []
    for r in reqs:
        p, o = r.prompt_tokens, r.output_tokens
        if o < 2:  # no decode step
            seconds.append(0.0)
            continue
        first, last = p + 1, p + o - 1  # the KV tokens of its first and last decode steps
        shared = 0  # the leading segments another request also uses: a prefix cache may hold them for both
        for sid, tokens in r.segments:
            if users[sid] < 2:
                break
            shared += tokens
        own = ((sequence_bytes(model, cfg.layout, first) + sequence_bytes(model, cfg.layout, last)) / 2
               - (sequence_bytes(model, cfg.layout, shared) if shared else 0))
        # (shorter than a window: what it reads)
        step_s = a_s + b_s * (step1.priced_context(first) + step1.priced_context(last)) / 2
        seconds.append(own * (o - 1) * step_s)
    seconds.sort()
    byte_seconds = sum(seconds[:len(seconds) - 2 * math.ceil(SLO_TAIL * len(seconds))])
    return budget.nodes * max(1, math.ceil(byte_seconds * frac / span / per_unit))


Draws = Sequence[tuple[int, Workload]]  # a search's seeds, each with the workload drawn at it (`plan_capacity`)


K = TypeVar("K")  # what a search varies: a node count, an xPyD split


class SeedRuns(Generic[K]):
    """A search's runs of each fleet it tries (`K`: a node count, an xPyD split) at each of its draws (`Draws`: a
    seed and its workload), made as a verdict asks for them: `meets` runs a fleet's seeds in order while they pass,
    so that a fleet failing at its first seed costs one run and one that meets costs one a seed. `simulate` runs a
    fleet at a seed's workload (and says so); `check` sees each run once it is counted (`never_served`: a run it
    refuses is still one of the search's simulations, helper-149)."""

    def __init__(self, draws: Draws, simulate: Callable[[K, int, Workload], Result],
                 check: Callable[[Result], None] = lambda _r: None) -> None:
        self.draws = draws
        self.simulate = simulate
        self.check = check
        self.runs: dict[K, list[Result]] = {}

    def at(self, key: K, i: int = 0) -> Result:
        """`key`'s run at the `i`-th draw, run now if it has not been."""
        got = self.runs.setdefault(key, [])
        while len(got) <= i:
            seed, workload = self.draws[len(got)]
            got.append(self.simulate(key, seed, workload))
            self.check(got[-1])
        return got[i]

    def seed_of(self, key: K, run: Result) -> int:
        """The seed `run`, one of `key`'s, was made at."""
        return self.draws[next(i for i, r in enumerate(self.runs[key]) if r is run)][0]

    def meets(self, key: K, ok: Callable[[Result], bool]) -> bool:
        """Whether `key` passes `ok` at every draw (its runs made in seed order until one fails)."""
        return all(ok(self.at(key, i)) for i in range(len(self.draws)))

    def failed(self, key: K, ok: Callable[[Result], bool]) -> Result | None:
        """`key`'s first run that failed `ok` (what stopped a smaller fleet: `_binding`), if it ran one."""
        return next((r for r in self.runs.get(key, []) if not ok(r)), None)

    def __len__(self) -> int:
        """The simulations made."""
        return sum(map(len, self.runs.values()))


def across_seeds(results: Sequence[Result], means: Sequence[str] = ("kv_utilization",)) -> dict[str, float]:
    """A fleet's plan figures over its runs at a search's seeds: the p99s the largest (the fleet meets the SLOs at
    every seed), $/hour, $ per million output tokens and the summary's `means` (its utilisations) their means;
    one run's own figures."""
    s = [r.summary for r in results]
    mean = lambda f: math.fsum(map(f, s)) / len(s)  # noqa: E731
    return {"usd_per_hour": mean(lambda x: x["cost_usd"] / x["makespan_s"] * 3600),
            "usd_per_million_output_tokens": mean(lambda x: x["usd_per_million_output_tokens"]),
            "ttft_p99_s": max(x["ttft_p99_s"] for x in s), "tpot_p99_s": max(x["tpot_p99_s"] for x in s),
            **{key: mean(lambda x, key=key: x[key]) for key in means}}


def seed_tag(seeds: int, seed: int) -> str:
    """``, seed 1`` in a search's line of progress where it runs several seeds; nothing where one."""
    return f", seed {seed}" if seeds > 1 else ""


def plan_fleet(scenario: Scenario, hardware: str, draws: Draws, *, ttft_p99_s: float, tpot_p99_s: float,
               on_step: Callable[[str], None] | None = None, meter: Meter | None = None,
               headroom_hint: float | None = None) -> FleetPlan:
    """The smallest node count of `hardware` that meets the SLOs at every one of `draws` (a seed and the workload
    drawn at it; one, usually): the row's p99s are the largest over them, its costs their means (`across_seeds`).

    `meter` (`simulator.progress.Meter`) is told the work in runs of the workload: each run costs
    one, a headroom run its load scale (and as much again times `GENERATE_COST` for generating its
    workload); the search's runs still to come are `search_runs_left`, the headroom's
    `headroom_cost` at `headroom_guess` for the fleet the search has reached (`headroom_hint`, say
    another node kind's headroom, where the fleet is one replica; `FLEET_PRIOR` is the whole
    estimate before it starts), each times the seeds (a fleet that fails at its first seed costs less).
    """
    floor = max(memory_floor_nodes(scenario, hardware, w, ttft_p99_s, tpot_p99_s) for _, w in draws)
    meter = meter or Meter(None)
    seeds = len(draws)

    def simulate(n: int, seed: int, workload: Workload) -> Result:
        r = run(scenario.engine_config(hardware, n_nodes=n), workload, seed, progress=meter.piece(1.0),
                total_requests=len(workload.requests()))
        meter.add(1.0)
        meter.inform()
        if on_step:
            on_step(f"{hardware}: {n} node(s){seed_tag(seeds, seed)} -> {latency_line(r, ttft_p99_s, tpot_p99_s)}")
        return r

    # a replica rejects what it can never hold: no fleet of the kind would serve it
    runs = SeedRuns(draws, simulate, lambda r: never_served(r, f"{scenario.where}: {hardware}"))
    try:
        if floor > MAX_NODES:
            raise NoFleet(f"{scenario.where}: {hardware}: no fleet of up to {MAX_NODES} nodes meets the SLOs: KV "
                          f"memory alone needs {floor:,} nodes for this load",
                          short=f"KV memory alone needs {floor:,} nodes, over {MAX_NODES}")

        def expect(lo: int, hi: int, found: bool) -> None:
            guess = headroom_guess(hi * unit, unit, headroom_hint)
            meter.expect(seeds * (search_runs_left(lo, hi, found)
                                  + headroom_cost(1.0, HEADROOM_MAX_SCALE, HEADROOM_STEPS, guess)))

        # the search counts whole replicas: `unit` nodes each (1, or the nodes a multi-node plan spans)
        unit = kv_budget(scenario.engine_config(hardware).node, scenario.model_spec(),  # type: ignore[arg-type]
                         memory_utilization=scenario.cluster.memory_utilization, plan=scenario.plan).nodes
        keeps = lambda r: keeps_up(r, ttft_p99_s, tpot_p99_s)  # noqa: E731
        ok = lambda k: runs.meets(k * unit, keeps)  # noqa: E731
        lo, hi = floor // unit - 1, floor // unit
        expect(lo, hi, False)
        while not ok(hi):
            # the last doubling stops at the limit, so that "none of up to MAX_NODES" is what was run (a floor of 3
            # doubled to 192, then 384: 193-256 were never tried)
            lo, hi = hi, min(hi * 2, MAX_NODES // unit)
            if lo == hi:  # the limit itself failed
                last = runs.failed(lo * unit, keeps)
                assert last is not None  # `ok` failed at it
                s = last.summary
                grows = meets_slo(last, ttft_p99_s, tpot_p99_s)  # and fails `keeps_up`
                at_seed = f" at seed {runs.seed_of(lo * unit, last)}" if seeds > 1 else ""
                raise NoFleet(
                    f"{scenario.where}: {hardware}: no fleet of up to {MAX_NODES} nodes meets the SLOs (p99 TTFT <= "
                    f"{ttft_p99_s:g} s, p99 TPOT <= {tpot_p99_s:g} s, none timed out, a queue that does not grow); "
                    f"{lo * unit} nodes{at_seed} give TTFT p99 {s['ttft_p99_s']:.3g} s, TPOT p99 "
                    f"{s['tpot_p99_s']:.3g} s, {s['timed_out']} timed out"
                    + (", and their queue grows" if grows else ""),
                    short=f"none of up to {MAX_NODES} nodes ({lo * unit}{at_seed}: "
                          f"{short_verdict(latency_line(last, ttft_p99_s, tpot_p99_s))})")
            expect(lo, hi, False)
        expect(lo, hi, True)
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (lo, mid) if ok(mid) else (mid, hi)
            expect(lo, hi, True)
    except NoFleet as exc:  # what the search simulated, for the plan's row of this kind (`no_fleet_row`)
        exc.floor, exc.simulations = floor, len(runs)
        raise
    hi *= unit
    binding = _binding(hi, floor, runs.failed(hi - unit, keeps), unit)
    headroom, capped, headroom_runs = fleet_headroom(
        scenario, scenario.engine_config(hardware, n_nodes=hi), f"{hardware}: {hi} node(s)", [sd for sd, _ in draws],
        ttft_p99_s, tpot_p99_s, meter, on_step, headroom_guess(hi, unit, headroom_hint))
    noisy = noisy_search_note(scenario, hardware, {n: r[0].summary for n, r in runs.runs.items()}, ttft_p99_s,
                              tpot_p99_s, hi - unit) if seeds == 1 else ""  # several: the count meets at each
    return FleetPlan(hardware=hardware, nodes=hi, memory_floor_nodes=floor, **across_seeds(runs.runs[hi]),
                     binding=binding, headroom_scale=headroom, headroom_capped=capped,
                     simulations=len(runs) + headroom_runs, search_note=noisy)


NOISY_BAND = 0.8, 1.25  # a p99 within these shares of its SLO is near it: noise there can decide a verdict


@dataclass(frozen=True, slots=True)
class Searched:
    """What one search's runs varied, for `noisy_search_note`: the node kind and the fleet (``xPyD``, or none: the
    aggregated one), the search (``the search``, ``the decode pool's search``), the count it searched (``nodes``,
    ``decode nodes``) and what was held beside it (``, beside 2 prefill nodes``), what it answered (``the node
    count``), the scenario key a sweep varies for it and the grid items that hold the rest (the other pool's size),
    the p99s its verdict weighs, and whether a growing queue fails its runs (`keeps_up`; the xPyD decode pool's
    search weighs TPOT alone, `plan_disaggregated`)."""

    hardware: str
    fleet: str = ""
    key: str = "cluster.nodes"
    search: str = "the search"
    nodes: str = "nodes"
    beside: str = ""
    answer: str = "the node count"
    fixed: tuple[str, ...] = ()
    weighs: tuple[str, ...] = ("tpot_p99_s", "ttft_p99_s")
    steady: bool = True

    @property
    def label(self) -> str:
        """``8xH100``, ``8xH100 xPyD``: the fleet the note is about."""
        return f"{self.hardware} {self.fleet}" if self.fleet else self.hardware


def noisy_search_note(scenario: Scenario, searched: Searched | str, runs: Mapping[int, Mapping[str, Any]],
                      ttft_p99_s: float, tpot_p99_s: float, below: int) -> str:
    """A note where the search's runs (count -> summary) read a p99 that rose as nodes were added, both near its
    SLO (`NOISY_BAND`), and the run one replica below the answer (`below`: the one that decided the count) read
    it near the SLO too: more nodes should only lower a p99, so the rise is one seed's noise, and there that noise
    decided the count (helper-145: `kvsim capacity disaggregated`'s 8xH100 read TPOT p99 51.7 ms at 24 nodes, 52.2 at
    28, 43.8 at 29 and 46.1 at 30 against 50 ms, and answered 29). It names the sweep over seeds that shows the
    spread, at the SLOs and length searched (`sweep_over_seeds`). "" otherwise. `searched`: what the search varied
    (`Searched`; a node kind alone: the aggregated fleet's node count)."""
    sought = Searched(searched) if isinstance(searched, str) else searched
    counts = sorted(runs)
    slos = {"tpot_p99_s": tpot_p99_s, "ttft_p99_s": ttft_p99_s}
    for key in ("tpot_p99_s", "ttft_p99_s"):
        if key not in sought.weighs:
            continue
        slo = slos[key]
        unit, scale = ("ms", 1e3) if key == "tpot_p99_s" else ("s", 1.0)
        # the runs this p99 decides: near its SLO, and meeting everything else the search weighs (a run failing on
        # another count is no answer whatever this p99 reads: the demo's 1-node run, TTFT p99 258 s)
        near = [n for n in counts if NOISY_BAND[0] * slo <= runs[n][key] <= NOISY_BAND[1] * slo
                and not any(runs[n].get(other, 0.0) > slos[other] for other in sought.weighs if other != key)
                and not runs[n].get("timed_out", 0) and not runs[n].get("rejected", 0)
                and not (sought.steady and runs[n].get("steady_queue_growing", False))]
        if below in near and any(runs[b][key] > runs[a][key] for a, b in pairwise(near)):
            read = ", ".join(f"{figure(runs[n][key] * scale)} {unit} at {n}" for n in near)
            return (f"{sought.label}: {sought.search}'s {key[:4].upper()} p99 did not fall steadily with "
                    f"{sought.nodes} near its SLO of {figure(slo * scale)} {unit} ({read} {sought.nodes}"
                    f"{sought.beside}): {sought.answer} rests on this seed's runs; "
                    + sweep_over_seeds(scenario, sought, near, ttft_p99_s, tpot_p99_s) + " shows their spread; "
                    + capacity_over_seeds(scenario, sought.hardware, ttft_p99_s, tpot_p99_s)
                    + " finds a count that meets the SLOs at three seeds")
    return ""


def capacity_over_seeds(scenario: Scenario, hardware: str, ttft_p99_s: float, tpot_p99_s: float) -> str:
    """The `kvsim capacity` command line that sizes `hardware` at three seeds (`plan_capacity`'s `seeds`), at the
    SLOs and workload length searched, as `sweep_over_seeds` names its scenario (helper-149: the note named
    ``kvsim capacity --seeds 3`` alone, no scenario, SLOs or length); "kvsim capacity --seeds 3" for a scenario
    built in code."""
    if not scenario.path:
        return "kvsim capacity --seeds 3"
    args = [shlex.quote(scenario.argument), "--hardware", hardware, "--seeds", "3", "--slo-ttft-p99-s",
            f"{ttft_p99_s:g}", "--slo-tpot-p99-s", f"{tpot_p99_s:g}"]
    if math.isfinite(scenario.workload.duration_s):
        args += ["--duration-s", f"{scenario.workload.duration_s:g}"]
    return "kvsim capacity " + " ".join(args)


def sweep_over_seeds(scenario: Scenario, searched: Searched, nodes: Sequence[int], ttft_p99_s: float,
                     tpot_p99_s: float) -> str:
    """The `kvsim sweep` command line that reruns `nodes` (the count `searched` varied, the rest held) at three
    seeds, at the SLOs and workload length searched (`kvsim capacity` may have overridden the scenario's), its
    scenario as a command names it (`Scenario.argument`, shell-quoted); "a sweep over seeds" for a scenario built in
    code, which no command loads."""
    if not scenario.path:
        return "a sweep over seeds"
    grid = [f"cluster.hardware={searched.hardware}", *searched.fixed, f"{searched.key}={','.join(map(str, nodes))}",
            "seed=0,1,2", f"slo.ttft_p99_s={ttft_p99_s:g}", f"slo.tpot_p99_s={tpot_p99_s:g}"]
    if math.isfinite(scenario.workload.duration_s):
        grid.append(f"workload.duration_s={scenario.workload.duration_s:g}")
    return "kvsim sweep " + " ".join([shlex.quote(scenario.argument), *(f"--grid {g}" for g in grid)])


def _binding(nodes: int, floor: int, below: Result | None, unit: int = 1) -> str:
    """What stops a smaller fleet: ``memory`` (floor reached, or the fleet one replica smaller held
    its KV pool nearly full with blocks it could not free, ``kv_referenced_utilization`` ≥
    `MEMORY_BOUND_UTILIZATION`, or preempted), ``compute`` otherwise; ``none`` when one replica
    suffices. A prefix cache fills the pool by design with blocks no sequence references, which it
    gives up when a sequence needs room: they do not make memory bind."""
    if nodes == unit:
        return "none (1 node suffices)" if unit == 1 else f"none (1 replica of {unit} nodes suffices)"
    if nodes == floor:
        return "memory"
    if below is not None and (below.summary["kv_referenced_utilization"] >= MEMORY_BOUND_UTILIZATION
                              or below.requests.preemptions.sum() > 0):
        return "memory"
    return "compute"


def headroom_cost(lo: float, hi: float, steps: int, guess: float) -> float:
    """The cost of `steps` headroom runs bisecting ``[lo, hi]`` if the headroom were `guess`, in runs
    of the unscaled workload: the runs the bisection would make (one meets when its scale is at
    most `guess`), each its scale, times ``1 + GENERATE_COST`` for generating its workload."""
    cost = 0.0
    for _ in range(steps):
        mid = math.sqrt(lo * hi)
        cost += mid
        lo, hi = (mid, hi) if mid <= guess else (lo, mid)
    return cost * (1 + GENERATE_COST)


def headroom_guess(nodes: int, unit: int = 1, hint: float | None = None) -> float:
    """The headroom expected of the smallest fleet that meets the SLOs: the fleet one replica smaller
    failed, so about ``nodes / (nodes − unit)`` if the load it carries grows with its replicas; one
    replica: `hint` (another node kind's headroom at the same load), else the middle of the range,
    ``√HEADROOM_MAX_SCALE``."""
    if nodes > unit:
        return nodes / (nodes - unit)
    return hint if hint is not None else math.sqrt(HEADROOM_MAX_SCALE)


# a fleet's expected cost before its search begins: a run at the memory floor that meets, and the headroom
FLEET_PRIOR = 1 + headroom_cost(1.0, HEADROOM_MAX_SCALE, HEADROOM_STEPS, headroom_guess(1))


def fleet_headroom(scenario: Scenario, config: EngineConfig, label: str, seeds: Sequence[int], ttft: float,
                   tpot: float, meter: Meter, on_step: Callable[[str], None] | None,
                   guess: float) -> tuple[float, bool, int]:
    """Largest rate multiplier in [1, HEADROOM_MAX_SCALE] at which the fleet of `config` (`label` in `on_step`'s
    lines: ``8xH100: 2 node(s)``, ``8xH100-1P2D``) still meets the SLOs at every one of `seeds` (each multiplier's
    runs in seed order until one fails; `guess`: the multiplier expected, for `meter`), whether every run met them
    (then the multiplier is only a lower bound: the search stopped below its ceiling, not at a failure), and the
    runs it made."""
    lo, hi = 1.0, HEADROOM_MAX_SCALE
    failed = False
    made = 0
    for step in range(HEADROOM_STEPS):
        guess = min(max(guess, lo), hi)  # what the runs so far allow
        meter.expect(len(seeds) * headroom_cost(lo, hi, HEADROOM_STEPS - step, guess))
        mid = math.sqrt(lo * hi)
        ok = True
        for seed in seeds:
            wl = scenario.load_workload(seed, rate_scale=mid, allow_empty=True)  # a search trial, as max_rate's
            meter.add(GENERATE_COST * mid)
            r = run(config, wl, seed, progress=meter.piece(mid), total_requests=len(wl.requests()))
            meter.add(mid)
            made += 1
            ok = keeps_up(r, ttft, tpot)
            if on_step:
                on_step(f"{label} at {mid:.3g}× the load{seed_tag(len(seeds), seed)} -> {latency_line(r, ttft, tpot)}")
            if not ok:
                break
        lo, hi = (mid, hi) if ok else (lo, mid)
        failed |= not ok
    return lo, not failed, made


def plan_capacity(scenario: Scenario, *, hardware: list[str] | None = None, ttft_p99_s: float | None = None,
                  tpot_p99_s: float | None = None, seed: int | None = None, seeds: int = 1,
                  on_step: Callable[[str], None] | None = None, progress: Progress | None = None) -> pd.DataFrame:
    """One `FleetPlan` row per node kind, for the scenario's workload and SLOs (or those given); with a
    ``[disaggregation]`` section, an aggregated and a disaggregated row per kind
    (`simulator.xpyd.plan_split_capacity`).

    `hardware` lists node kinds (None: the scenario's ``cluster.hardware``), at least one, each once; a
    GPU name alone is its largest node and the rows name the node (``["H100"]`` -> ``8xH100``:
    `simulator.study.node_kinds`). `seed` is an integer >= 0 (None: the scenario's); the SLOs
    finite seconds > 0 (None: the scenario's). `seeds` >= 1: each fleet is run at ``seed, seed + 1, …`` (each its own
    workload draw and engine seed) and meets the SLOs only where it does at every one (`plan_fleet`), so that no
    one seed's noise decides a count (`noisy_search_note`); the meter expects each search to cost that many
    times as much (a fleet that fails at its first seed costs one run).
    A kind no fleet of which meets the SLOs (`NoFleet`) has a row with no node count, cost or headroom, its
    ``binding`` ``no fleet: <why>`` (`no_fleet_row`; the counts are pandas' nullable ``Int64``); with no kind
    left, a `NoFleet` is raised: the kind's own, its reason in full, where one was searched, else one naming every
    kind's reason in short (`no_kind_fits`; helper-152: this said the first kind's).
    Each row ends with the SLOs, seed and seeds searched for (`SEARCH_COLUMNS`); ``attrs["requests"]`` is the
    first seed's workload's request count and ``attrs["offline"]`` whether they all arrive at once
    (`few_requests_note`).
    `on_step` receives a line per simulation; `progress` the fraction done, weighed by the requests
    simulated (`plan_fleet`), from the end of the first simulation on (before it the estimate is
    only the priors: `FLEET_PRIOR` a kind).
    """
    must_scenario(scenario, "plan_capacity")
    for key, slo in (("ttft_p99_s", ttft_p99_s), ("tpot_p99_s", tpot_p99_s)):  # before any simulation
        must(slo is None or (is_number(slo) and 0 < slo < math.inf), "capacity", key, "a finite number of seconds > 0",
             slo)
    seed = scenario.seed if seed is None else seed
    must_seed(seed, "plan_capacity")
    must(isinstance(seeds, int) and not isinstance(seeds, bool) and seeds >= 1, "plan_capacity", "seeds",
         "an integer >= 1", seeds)
    kinds = node_kinds(scenario, hardware, "plan_capacity: hardware")
    ttft = scenario.slo.ttft_p99_s if ttft_p99_s is None else ttft_p99_s
    tpot = scenario.slo.tpot_p99_s if tpot_p99_s is None else tpot_p99_s
    if scenario.disaggregation is not None:  # aggregated and xPyD fleets side by side
        from simulator.xpyd import SPLIT_PRIOR, plan_split_capacity

        meter = Meter(progress, [GENERATE_COST * seeds, *[FLEET_PRIOR * seeds, SPLIT_PRIOR * seeds] * len(kinds)],
                      quiet=True)
        draws = _draws(scenario, seed, seeds, meter, on_step)
        plan = plan_split_capacity(scenario, kinds, draws, on_step=on_step, ttft_p99_s=ttft, tpot_p99_s=tpot,
                                   meter=meter)
        meter.finish()
        return _searched(plan, ttft, tpot, draws)
    meter = Meter(progress, [GENERATE_COST * seeds, *[FLEET_PRIOR * seeds] * len(kinds)], quiet=True)
    draws = _draws(scenario, seed, seeds, meter, on_step)
    rows: list[dict[str, Any]] = []
    failed: list[NoFleet] = []
    hint = None  # the last kind's headroom
    for i, hw in enumerate(kinds):
        meter.next_stage(alike=len(kinds) - 1 - i)  # each kind to come expected to cost what this one does
        try:
            fleet = plan_fleet(scenario, hw, draws, ttft_p99_s=ttft, tpot_p99_s=tpot, on_step=on_step, meter=meter,
                               headroom_hint=hint)
        except NoFleet as exc:  # this kind's row says why; the other kinds keep their answers
            failed.append(exc)
            rows.append(no_fleet_row(hw, exc))
            if on_step:
                on_step(f"{hw}: {exc.short}")
            continue
        hint = fleet.headroom_scale
        rows.append(asdict(fleet))
    if len(failed) == len(kinds):  # no answer at all: the one kind's reason in full, or each kind's in short
        raise failed[0] if len(failed) == 1 else no_kind_fits(scenario.where, failed,
                                                                            [str(r["hardware"]) for r in rows])
    meter.finish()
    return _searched(plan_frame(rows), ttft, tpot, draws)


SEARCH_COLUMNS = ("slo_ttft_p99_s", "slo_tpot_p99_s", "seed", "seeds")  # what a plan was searched for, on each row


def slo_line(plan: pd.DataFrame) -> str:
    """What a plan's node counts meet, in words: ``capacity plan for SLOs TTFT p99 ≤ 2 s, TPOT p99 ≤ 100 ms
    (seed 0)``, ``(seeds 0-2: each count meets them at every one)``, from its `SEARCH_COLUMNS`."""
    row = plan.iloc[0]
    tpot = row.slo_tpot_p99_s
    seeds = int(row.get("seeds", 1))
    at = (f"seeds {row.seed}-{row.seed + seeds - 1}: each count meets them at every one" if seeds > 1
          else f"seed {row.seed}")
    return (f"capacity plan for SLOs TTFT p99 ≤ {figure(row.slo_ttft_p99_s)} s, TPOT p99 ≤ "
            f"{f'{figure(tpot * 1e3)} ms' if tpot < 1 else f'{figure(tpot)} s'} ({at})")


def _searched(plan: pd.DataFrame, ttft: float, tpot: float, draws: Draws) -> pd.DataFrame:
    """`plan` with what it was searched for on each row (`SEARCH_COLUMNS`: the SLOs, the first seed and the seeds,
    so that a CSV or JSON says which SLOs its node counts meet), the first seed's workload's request count in
    ``attrs["requests"]``, how far it reached in ``attrs["reached_s"]`` (`Workload.reached_s`: a chart's
    subject), whether they all arrive at once in ``attrs["offline"]`` (`few_requests_note`), and the
    rows' search notes in ``attrs["search_notes"]`` (`noisy_search_note`)."""
    if "search_note" in plan:  # said beside the table (`noisy_search_note`), not a column of it
        plan.attrs["search_notes"] = [line for x in plan.pop("search_note") if isinstance(x, str)
                                      for line in x.splitlines()]  # (an xPyD row's: one a pool, `_noisy_split`)
    plan["slo_ttft_p99_s"], plan["slo_tpot_p99_s"], plan["seed"], plan["seeds"] = ttft, tpot, draws[0][0], len(draws)
    reqs = draws[0][1].requests()
    plan.attrs["requests"] = len(reqs)
    plan.attrs["reached_s"] = draws[0][1].reached_s  # how far a replay reached (`Scenario.subject`, the chart)
    plan.attrs["offline"] = arrive_at_once(reqs)
    return plan


def _draws(scenario: Scenario, seed: int, seeds: int, meter: Meter, on_step: Callable[[str], None] | None) -> Draws:
    """The scenario's workload at each of `seeds` seeds from `seed` on, each checked against the model's context
    (the meter's first stage); `on_step` is told the trace rows that pass skipped, if any (the search replays the
    others: the first seed's said, a trace's rows the same at every seed)."""
    draws = []
    for sd in range(seed, seed + seeds):
        workload = scenario.load_workload(sd)
        scenario.check_context(workload)
        if on_step is not None and sd == seed:
            say_left_out(workload, on_step)
        meter.add(GENERATE_COST)
        draws.append((sd, workload))
    return draws
