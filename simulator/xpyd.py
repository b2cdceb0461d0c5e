"""Capacity planning for disaggregated fleets: the prefill:decode split (xPyD) and the count.

A scenario with a ``[disaggregation]`` section is sized twice per node kind, at the same SLOs:
aggregated (`simulator.planning.plan_fleet`) and disaggregated, by simulation:

1. **decode** (with ample prefill): the fewest decode nodes whose p99 TPOT meets its SLO with
   nothing timed out, the prefill pool sized so that prefill cannot be what fails: ``ceil(2 · L)``
   replicas' nodes, ``L = Σ_r prefill_s(prompt_r) / T`` the prefill replicas the workload keeps busy
   over its span ``T`` (chunked as the scheduler chunks, no prefix hits: an upper bound). The search
   starts at the decode pool's KV memory floor (`planning.memory_floor_nodes`: decode holds the KV)
   and doubles, then bisects;
2. **prefill** (with that decode pool): the fewest prefill nodes that meet every SLO (p99 TTFT,
   p99 TPOT, nothing rejected or timed out, a queue that does not grow), from one replica up, doubling then
   bisecting. Each size is tried with that decode pool, so the pair answered meets the SLOs: a smaller prefill
   pool that changed what reaches decode failed its own run. (A third step grew the decode pool where the pair
   failed; it never could, helper-149, and is gone.)

Both pools count whole replicas (a multi-node plan's span). What binds the answer:

- ``prefill compute``: one prefill replica fewer misses TTFT (or times requests out);
- ``decode memory`` / ``decode batch cap`` / ``decode bandwidth (TPOT)``: one decode replica fewer
  (with ample prefill) misses TPOT; memory when its decode pool ran nearly full (time-mean use
  ≥ 80 %) or preempted, or when the answer is the memory floor; the batch cap when its decode
  replicas ran ``max_num_seqs`` sequences while hand-offs waited for them; bandwidth otherwise;
- ``network``: the decode replicas' ingress links were busy ≥ 50 % of the time at the answer.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

import pandas as pd

from hardware.catalog import NodeSpec
from simulator.capacity import kv_budget
from simulator.cost import StepModel, load_params
from simulator.engine import Result, run
from simulator.planning import (
    FLEET_PRIOR,
    HEADROOM_MAX_SCALE,
    HEADROOM_STEPS,
    MAX_NODES,
    MEMORY_BOUND_UTILIZATION,
    Draws,
    NoFleet,
    Searched,
    SeedRuns,
    across_seeds,
    fleet_headroom,
    headroom_cost,
    keeps_up,
    latency_line,
    memory_floor_nodes,
    never_served,
    no_fleet_row,
    no_kind_fits,
    noisy_search_note,
    plan_fleet,
    plan_frame,
    seed_tag,
)
from simulator.progress import Meter, search_runs_left
from simulator.scenario import Scenario
from workloads import Workload

# runs a prefill search is expected to take before it starts (a doubling or two from one replica, a bisection)
PREFILL_PRIOR_RUNS = 3
# a disaggregated plan's runs before any: the decode search's first two, the prefill search's, and the headroom's
# (an aggregated fleet's prior, `FLEET_PRIOR`, is its first run and its headroom)
SPLIT_PRIOR = FLEET_PRIOR + 1 + PREFILL_PRIOR_RUNS
AMPLE_PREFILL_FACTOR = 2.0  # prefill replicas per replica the workload keeps busy, while sizing decode
NETWORK_BOUND_UTILIZATION = 0.5  # links busier than this at the answer: the network binds too


@dataclass(frozen=True, slots=True, kw_only=True)
class SplitPlan:
    """The smallest xPyD fleet of one decode node kind that meets the SLOs (`plan_disaggregated`)."""

    hardware: str
    fleet: str
    nodes: int
    prefill_nodes: int
    decode_nodes: int
    memory_floor_nodes: int  # of the decode pool
    usd_per_hour: float
    usd_per_million_output_tokens: float
    ttft_p99_s: float
    tpot_p99_s: float
    decode_kv_utilization: float  # the decode pool's time-mean share of its blocks in use
    link_utilization: float
    binding: str
    simulations: int
    search_note: str = ""  # where one seed's noise near an SLO may have decided a pool's size (`_noisy_split`)


def ample_prefill_nodes(scenario: Scenario, hardware: str, workload: Workload) -> int:
    """Prefill nodes at which prefill is never what fails: ``ceil(2 · L)`` replicas (module docstring)."""
    pool = scenario.disaggregated_config(hardware).prefill_pool
    assert pool is not None and isinstance(pool.node, NodeSpec)  # resolved by the scenario
    node, model, plan = pool.node, scenario.model_spec(), scenario.prefill_plan
    budget = kv_budget(node, model, memory_utilization=scenario.cluster.memory_utilization, plan=plan)
    timer = StepModel(node.gpu, model, scenario.engine_config(hardware).layout, plan.tp, load_params(node.gpu.key),
                      plan=plan, node=node)
    chunk = scenario.scheduler.max_num_batched_tokens
    reqs = workload.requests()
    if not reqs:
        return budget.nodes
    span = max(reqs[-1].arrival_s - reqs[0].arrival_s, 1.0)
    seconds: dict[int, float] = {}
    busy = 0.0
    for r in reqs:
        n = r.prompt_tokens
        if n not in seconds:
            seconds[n] = sum(timer.prefill_s(min(chunk, n - c), c) for c in range(0, n, chunk))
        busy += seconds[n]
    schedulers = math.ceil(AMPLE_PREFILL_FACTOR * busy / span)  # each prefills one prompt at a time
    per_unit = budget.replicas * plan.pp * plan.kv_groups  # schedulers on the nodes one replica unit spans
    return budget.nodes * max(1, math.ceil(schedulers / per_unit))


def plan_disaggregated(scenario: Scenario, hardware: str, draws: Draws, *, ttft_p99_s: float, tpot_p99_s: float,
                       on_step: Callable[[str], None] | None = None, meter: Meter | None = None,
                       then: float = 0.0) -> SplitPlan:
    """The smallest xPyD fleet decoding on `hardware` that meets the SLOs (module docstring) at every one of `draws`
    (a seed and the workload drawn at it; one, usually): the row's p99s are the largest over them, its costs and
    utilisations their means (`simulator.planning.across_seeds`).

    `meter` (`simulator.progress.Meter`) is told the work in runs of the workload: the decode
    search's runs left (`search_runs_left`) and `PREFILL_PRIOR_RUNS` for the prefill search until
    it starts, then its own runs left, each times the seeds, plus `then`, the work its caller does next (the
    answer's headroom: `plan_split_capacity`; `SPLIT_PRIOR` is the estimate before anything ran)."""
    model = scenario.model_spec()
    cfg = scenario.disaggregated_config(hardware)
    assert cfg.prefill_pool is not None and isinstance(cfg.node, NodeSpec) and isinstance(cfg.prefill_pool.node,
                                                                                          NodeSpec)
    mu = scenario.cluster.memory_utilization
    unit_d = kv_budget(cfg.node, model, memory_utilization=mu, plan=scenario.plan).nodes
    unit_p = kv_budget(cfg.prefill_pool.node, model, memory_utilization=mu, plan=scenario.prefill_plan).nodes
    meter = meter or Meter(None)
    seeds = len(draws)

    def simulate(key: tuple[int, int], seed: int, workload: Workload) -> Result:
        p, d = key
        r = run(scenario.disaggregated_config(hardware, p, d), workload, seed, progress=meter.piece(1.0),
                total_requests=len(workload.requests()))
        meter.add(1.0)
        if on_step:
            s = r.summary
            on_step(f"{scenario.fleet_label(hardware, p, d)}{seed_tag(seeds, seed)}: decode KV "
                    f"{100 * s['decode_kv_utilization']:.0f}%, links {100 * s['link_utilization']:.0f}% -> "
                    f"{latency_line(r, ttft_p99_s, tpot_p99_s)}")
        return r

    # a replica rejects what it can never hold: no fleet of the kind would serve it
    runs = SeedRuns(draws, simulate, lambda r: never_served(r, f"{scenario.where}: {hardware}"))

    def decode_ok(r: Result) -> bool:
        s = r.summary
        return s["completed"] > 0 and s["timed_out"] == 0 and not s["tpot_p99_s"] > tpot_p99_s

    def slo_ok(r: Result) -> bool:
        return keeps_up(r, ttft_p99_s, tpot_p99_s)

    floor = max(memory_floor_nodes(scenario, hardware, w, ttft_p99_s, tpot_p99_s) for _, w in draws)
    try:
        if max(1, floor // unit_d) > MAX_NODES // unit_d:
            raise NoFleet(f"{scenario.where}: {hardware}: no disaggregated fleet of up to {MAX_NODES} decode nodes "
                          f"meets the SLOs: the decode pool's KV memory alone needs {floor:,} nodes for this load",
                          short=f"KV memory alone needs {floor:,} decode nodes, over {MAX_NODES}")
        ample = max(ample_prefill_nodes(scenario, hardware, w) for _, w in draws)
        ample = -(-ample // unit_p) * unit_p
        d = _smallest(lambda k: runs.meets((ample, k * unit_d), decode_ok), max(1, floor // unit_d),
                      MAX_NODES // unit_d,
                      f"{scenario.where}: {hardware}: no decode pool of up to {MAX_NODES} nodes meets the TPOT SLO "
                      f"({tpot_p99_s:g} s) with {ample} prefill nodes",
                      left=lambda n: meter.expect(seeds * (n + PREFILL_PRIOR_RUNS) + then),
                      short=f"no decode pool of up to {MAX_NODES} nodes meets the TPOT SLO") * unit_d
        meter.expect(seeds * PREFILL_PRIOR_RUNS + then)
        # (`_smallest` answers a size that met the SLOs, or the ample pool, checked to: the fleet meets them)
        p = _smallest(lambda k: runs.meets((k * unit_p, d), slo_ok), 1, MAX_NODES // unit_p,
                      f"{scenario.where}: {hardware}: no prefill pool of up to {MAX_NODES} nodes meets the SLOs "
                      f"(p99 TTFT <= {ttft_p99_s:g} s, p99 TPOT <= {tpot_p99_s:g} s) with {d} decode nodes",
                      ok_hint=ample // unit_p if runs.meets((ample, d), slo_ok) else None,
                      left=lambda n: meter.expect(seeds * n + then),
                      short=f"no prefill pool of up to {MAX_NODES} nodes meets the SLOs with {d} decode nodes") * unit_p
    except NoFleet as exc:  # what the search simulated, for the plan's row (`no_fleet_row`)
        exc.floor, exc.simulations = floor, len(runs)
        raise
    best = runs.runs[(p, d)]  # every seed's: it met at each
    binding = []
    if p > unit_p and not runs.meets((p - unit_p, d), slo_ok):
        binding.append("prefill compute")
    below = runs.failed((ample, d - unit_d), decode_ok)  # the decode pool one replica smaller, where it failed
    if d > unit_d and (d == floor or below is not None):
        binding.append(_decode_binding(below, d == floor, scenario.scheduler.max_num_seqs))
    # the decode pool's KV use (what says whether memory binds it) and its links', each over the seeds
    figures = across_seeds(best, ("decode_kv_utilization", "link_utilization"))
    if figures["link_utilization"] >= NETWORK_BOUND_UTILIZATION:
        binding.append("network")
    if not binding:
        binding.append("none (one replica a pool suffices)" if (p, d) == (unit_p, unit_d)
                       else "prefill compute" if p > unit_p else "decode bandwidth (TPOT)")
    noisy = _noisy_split(scenario, hardware, {k: r[0] for k, r in runs.runs.items()}, (ample, d, unit_d),
                         (p, d, unit_p), ttft_p99_s, tpot_p99_s) if seeds == 1 else ""  # several: it meets at each
    # the fleet as `kvsim run` labels it, less the decode kind the row names: ``2P1D-P8xMI300X`` where the prefill pool
    # runs on other nodes (helper-190: "8xB200 2P1D, 3 nodes, $87.8/h" hid that two of them were 8xMI300X)
    fleet = scenario.fleet_label(hardware, p, d).removeprefix(f"{hardware}-")
    return SplitPlan(hardware=hardware, fleet=fleet, search_note=noisy, nodes=p + d, prefill_nodes=p,
                     decode_nodes=d, memory_floor_nodes=floor, **figures, binding=", ".join(binding),
                     simulations=len(runs))


def _noisy_split(scenario: Scenario, hardware: str, cache: Mapping[tuple[int, int], Result],
                 decode: tuple[int, int, int], prefill: tuple[int, int, int], ttft_p99_s: float,
                 tpot_p99_s: float) -> str:
    """`noisy_search_note` for each search of `plan_disaggregated`, one line each: the decode pool's (`decode`: the
    prefill nodes it ran beside, its answer, a decode replica's nodes), over TPOT alone as it weighs, and the
    prefill pool's (`prefill`: its answer, the decode nodes it ran beside, a prefill replica's nodes)."""
    p, d, unit = decode
    notes = [noisy_search_note(scenario, Searched(
        hardware, "xPyD", "disaggregation.decode_nodes", "the decode pool's search", "decode nodes",
        f", beside {p} prefill nodes", "the decode pool's size",
        ("disaggregation.compare_aggregated=false", f"disaggregation.prefill_nodes={p}"), ("tpot_p99_s",), False),
        {k: r.summary for (pp, k), r in cache.items() if pp == p}, ttft_p99_s, tpot_p99_s, d - unit)]
    p, d, unit = prefill
    notes.append(noisy_search_note(scenario, Searched(
        hardware, "xPyD", "disaggregation.prefill_nodes", "the prefill pool's search", "prefill nodes",
        f", beside {d} decode nodes", "the prefill pool's size",
        ("disaggregation.compare_aggregated=false", f"disaggregation.decode_nodes={d}")),
        {k: r.summary for (k, dd), r in cache.items() if dd == d}, ttft_p99_s, tpot_p99_s, p - unit))
    return "\n".join(n for n in notes if n)


def _decode_binding(below: Result | None, at_floor: bool, max_num_seqs: int) -> str:
    """Why one decode replica fewer failed: memory (the floor; the pool nearly full, preemptions),
    the batch cap (decode replicas ran ``max_num_seqs`` sequences while hand-offs waited), else TPOT."""
    if at_floor or below is None:
        return "decode memory"
    s, req = below.summary, below.requests
    if s["decode_kv_utilization"] >= MEMORY_BOUND_UTILIZATION or req.preemptions.sum() > 0:
        return "decode memory"
    decoders = set(req.decode_replica[req.transfer_start_s.notna()])
    ts = below.timeseries
    if s["handoff_wait_p99_s"] > 0 and ts[ts.replica.isin(decoders)].running.max() >= max_num_seqs:
        return "decode batch cap (max_num_seqs)"
    return "decode bandwidth (TPOT)"


def _smallest(ok: Callable[[int], bool], start: int, limit: int, fail: str, ok_hint: int | None = None,
              left: Callable[[int], None] | None = None, short: str = "") -> int:
    """The smallest ``k ≥ start`` with ``ok(k)`` (monotone): double from `start` (the last doubling stopping at
    `limit`), then bisect; `NoFleet` (`fail`, and `short` for the plan's row) where `limit` fails too. `ok_hint`:
    a ``k`` known to pass (bounds the doubling). `left` is told the calls of `ok` still to come
    (`simulator.progress.search_runs_left`) before each."""
    if start > limit:
        raise NoFleet(fail, short=short or fail)
    say = left or (lambda _n: None)
    lo, hi = start - 1, start
    say(search_runs_left(lo, hi, False))
    while not ok(hi):
        if hi >= limit:  # `limit` itself failed: none up to it meets
            raise NoFleet(fail, short=short or fail)
        lo, hi = hi, min(hi * 2, limit)  # the last doubling stops at `limit`: each size up to it is answered
        if ok_hint is not None and hi >= ok_hint:
            hi = ok_hint
            break
        say(search_runs_left(lo, hi, False))
    say(search_runs_left(lo, hi, True))
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if ok(mid) else (mid, hi)
        say(search_runs_left(lo, hi, True))
    return hi


def plan_split_capacity(scenario: Scenario, kinds: list[str], draws: Draws, *, ttft_p99_s: float,
                        tpot_p99_s: float, on_step: Callable[[str], None] | None = None,
                        meter: Meter | None = None) -> pd.DataFrame:
    """Aggregated and disaggregated fleets of each kind side by side at the same SLOs, each meeting them at every
    one of `draws` (a seed and its workload: `simulator.planning.plan_capacity`'s): one row each.

    ``decode_kv_utilization`` is the KV use of the pool that decodes: the decode pool's of an xPyD
    fleet (what says whether memory binds it), the whole fleet's (`FleetPlan.kv_utilization`) of an
    aggregated one, whose every replica decodes.

    Each fleet's ``headroom_scale`` is `simulator.planning.fleet_headroom`'s: the largest multiple of the
    load it takes within the SLOs (the xPyD fleet's split kept as sized at the load).

    `meter`'s stages after the one under way are, per kind, the aggregated fleet's (`FLEET_PRIOR`)
    and the disaggregated one's (`SPLIT_PRIOR`)."""
    meter = meter or Meter(None)
    rows = []
    failed: list[NoFleet] = []

    def no_fleet(hw: str, fleet: str, exc: NoFleet) -> dict[str, Any]:  # a fleet no size of which meets the SLOs
        failed.append(exc)
        if on_step:
            on_step(f"{hw} {fleet}: {exc.short}")
        return {**no_fleet_row(hw, exc), "fleet": fleet, "prefill_nodes": None, "decode_nodes": None,
                "decode_kv_utilization": math.nan, "link_utilization": math.nan}

    for hw in kinds:
        meter.next_stage()
        try:
            agg = plan_fleet(scenario, hw, draws, ttft_p99_s=ttft_p99_s, tpot_p99_s=tpot_p99_s, on_step=on_step,
                             meter=meter)
        except NoFleet as exc:
            rows.append(no_fleet(hw, "aggregated", exc))
            agg_headroom = math.sqrt(HEADROOM_MAX_SCALE)  # the middle of the range, as `headroom_guess` with no hint
        else:
            agg_row = asdict(agg)
            agg_row["decode_kv_utilization"] = agg_row.pop("kv_utilization")  # every replica of it decodes
            rows.append({**agg_row, "fleet": "aggregated", "prefill_nodes": 0, "decode_nodes": 0,
                         "link_utilization": math.nan})
            agg_headroom = agg.headroom_scale
        meter.next_stage()
        headroom_prior = len(draws) * headroom_cost(1.0, HEADROOM_MAX_SCALE, HEADROOM_STEPS, agg_headroom)
        try:
            split = plan_disaggregated(scenario, hw, draws, ttft_p99_s=ttft_p99_s, tpot_p99_s=tpot_p99_s,
                                       on_step=on_step, meter=meter, then=headroom_prior)
        except NoFleet as exc:
            rows.append(no_fleet(hw, "xPyD", exc))
            continue
        config = scenario.disaggregated_config(hw, split.prefill_nodes, split.decode_nodes)
        headroom, capped, made = fleet_headroom(scenario, config, scenario.fleet_label(hw, split.prefill_nodes,
                                                                                       split.decode_nodes),
                                                [sd for sd, _ in draws], ttft_p99_s, tpot_p99_s, meter, on_step,
                                                agg_headroom)
        rows.append({**asdict(split), "simulations": split.simulations + made, "headroom_scale": headroom,
                     "headroom_capped": capped})
    if len(failed) == len(rows):  # no fleet at all: the one's reason in full, or each one's in short
        raise failed[0] if len(failed) == 1 else no_kind_fits(scenario.where, failed,
                                                                       [f"{r['hardware']} {r['fleet']}" for r in rows])
    cols = ["hardware", "fleet", "nodes", "prefill_nodes", "decode_nodes", "memory_floor_nodes", "usd_per_hour",
            "usd_per_million_output_tokens", "ttft_p99_s", "tpot_p99_s", "decode_kv_utilization", "link_utilization",
            "binding", "headroom_scale", "headroom_capped", "simulations", "search_note"]
    return plan_frame([{"search_note": "", **r} for r in rows], cols)


__all__ = ["SplitPlan", "ample_prefill_nodes", "plan_disaggregated", "plan_split_capacity"]
