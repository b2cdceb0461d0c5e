"""Capacity planning: the smallest fleet of each node kind that meets the SLOs, by simulation.

For one node kind the search starts at the memory floor and grows:

- **memory floor** (analytic, a lower bound): by Little's law the mean KV held is at least
  ``Σ_r bytes(prompt_r + output_r / 2) · output_r · t_step1 / T`` over the workload's span ``T``,
  where ``t_step1`` is the batch-1 decode step (no batch decodes faster); a fleet needs at least
  ``ceil(that / kv_budget_per_node)`` nodes. Simulated answers are never below it.
- **search**: simulate at the floor; double until the SLOs hold (p99 TTFT, p99 TPOT, nothing
  timed out), then bisect between the last failure and the first success.
- **binding constraint** at the answer: ``memory`` when the answer is the memory floor or the
  fleet one node smaller failed with its KV pool nearly full (time-mean use ≥ 80 % or
  preemptions), else ``compute`` (``none`` when a single node meets the SLOs).
- **headroom**: the largest load multiplier (of the scenario's rate) the chosen fleet takes
  before an SLO breaks, by bisection over ``rate_scale``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass

import pandas as pd

from hardware.catalog import NodeSpec
from simulator.capacity import block_share, kv_budget
from simulator.cost import StepModel, load_params
from simulator.engine import Result, run
from simulator.errors import ConfigError, must
from simulator.kv import sequence_bytes
from simulator.limits import MAX_CAPACITY_NODES
from simulator.scenario import Scenario
from workloads import Workload

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
    simulations: int


def meets_slo(result: Result, ttft_p99_s: float, tpot_p99_s: float) -> bool:
    """p99 TTFT and p99 TPOT (of per-request mean TPOT) within the SLOs and nothing timed out.

    A workload of one-token answers has no TPOT (NaN): nothing can break that SLO.
    """
    s = result.summary
    return s["completed"] > 0 and s["timed_out"] == 0 and s["ttft_p99_s"] <= ttft_p99_s \
        and not s["tpot_p99_s"] > tpot_p99_s


def memory_floor_nodes(scenario: Scenario, hardware: str, workload: Workload) -> int:
    """Nodes that memory alone requires (see the module docstring); at least 1."""
    cfg = scenario.engine_config(hardware)
    node = cfg.node
    assert isinstance(node, NodeSpec)  # Scenario.engine_config resolves it
    model = scenario.model_spec()
    budget = kv_budget(node, model, memory_utilization=scenario.cluster.memory_utilization, plan=scenario.plan)
    step1 = StepModel(node.gpu, model, cfg.layout, scenario.cluster.tp, load_params(node.gpu.key),
                      plan=scenario.plan, node=node)
    a_s, b_s = step1.decode_coefficients(1)
    reqs = workload.requests()
    if not reqs:
        return 1
    span = max(reqs[-1].arrival_s - reqs[0].arrival_s, 1.0)
    # on the binding GPU: its share of each sequence's bytes against its budget, times the KV pools
    # of a replica's nodes
    share = min(range(len(budget.stages)), key=lambda s: budget.stage_kv_bytes(s) / block_share(budget, model,
                                                                                                  cfg.layout, s))
    per_unit = budget.replicas * budget.plan.kv_groups * budget.stage_kv_bytes(share)
    frac = block_share(budget, model, cfg.layout, share)
    byte_seconds = 0.0
    for r in reqs:
        mid = r.prompt_tokens + r.output_tokens // 2
        byte_seconds += sequence_bytes(model, cfg.layout, mid) * r.output_tokens * (a_s + b_s * mid)
    return budget.nodes * max(1, math.ceil(byte_seconds * frac / span / per_unit))


def plan_fleet(scenario: Scenario, hardware: str, workload: Workload, *, ttft_p99_s: float, tpot_p99_s: float,
               seed: int, on_step: Callable[[str], None] | None = None) -> FleetPlan:
    """The smallest node count of `hardware` that meets the SLOs for `workload`."""
    floor = memory_floor_nodes(scenario, hardware, workload)
    if floor > MAX_NODES:
        raise ConfigError(f"{scenario.where}: {hardware}: no fleet of up to {MAX_NODES} nodes meets the SLOs: KV "
                          f"memory alone needs {floor:,} nodes for this load")
    cache: dict[int, Result] = {}

    def sim(n: int, wl: Workload = workload) -> Result:
        if wl is workload and n in cache:
            return cache[n]
        r = run(scenario.engine_config(hardware, n_nodes=n), wl, seed)
        if wl is workload:
            cache[n] = r
        if on_step:
            on_step(f"{hardware}: {n} node(s) -> TTFT p99 {r.summary['ttft_p99_s']:.2f} s, "
                    f"TPOT p99 {r.summary['tpot_p99_s'] * 1e3:.0f} ms")
        return r

    # the search counts whole replicas: `unit` nodes each (1, or the nodes a multi-node plan spans)
    unit = kv_budget(scenario.engine_config(hardware).node, scenario.model_spec(),  # type: ignore[arg-type]
                     memory_utilization=scenario.cluster.memory_utilization, plan=scenario.plan).nodes
    ok = lambda k: meets_slo(sim(k * unit), ttft_p99_s, tpot_p99_s)  # noqa: E731
    lo, hi = floor // unit - 1, floor // unit
    while not ok(hi):
        lo, hi = hi, hi * 2
        if hi * unit > MAX_NODES:
            s = sim(lo * unit).summary
            raise ConfigError(
                f"{scenario.where}: {hardware}: no fleet of up to {MAX_NODES} nodes meets the SLOs (p99 TTFT <= "
                f"{ttft_p99_s:g} s, p99 TPOT <= {tpot_p99_s:g} s, none timed out); {lo * unit} nodes give TTFT p99 "
                f"{s['ttft_p99_s']:.3g} s, TPOT p99 {s['tpot_p99_s']:.3g} s, {s['timed_out']} timed out")
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if ok(mid) else (mid, hi)
    hi *= unit
    best = sim(hi)
    below = cache.get(hi - unit)
    binding = _binding(hi, floor, below, unit)
    headroom = _headroom(scenario, hardware, hi, seed, ttft_p99_s, tpot_p99_s, sim)
    s = best.summary
    return FleetPlan(hardware=hardware, nodes=hi, memory_floor_nodes=floor,
                     usd_per_hour=s["cost_usd"] / s["makespan_s"] * 3600,
                     usd_per_million_output_tokens=s["usd_per_million_output_tokens"],
                     ttft_p99_s=s["ttft_p99_s"], tpot_p99_s=s["tpot_p99_s"], kv_utilization=s["kv_utilization"],
                     binding=binding, headroom_scale=headroom, simulations=len(cache) + HEADROOM_STEPS)


def _binding(nodes: int, floor: int, below: Result | None, unit: int = 1) -> str:
    """What stops a smaller fleet: ``memory`` (floor reached, or the fleet one replica smaller ran
    its KV pool nearly full or preempted), ``compute`` otherwise; ``none`` when one replica suffices."""
    if nodes == unit:
        return "none (1 node suffices)" if unit == 1 else f"none (1 replica of {unit} nodes suffices)"
    if nodes == floor:
        return "memory"
    if below is not None and (below.summary["kv_utilization"] >= MEMORY_BOUND_UTILIZATION
                              or below.requests.preemptions.sum() > 0):
        return "memory"
    return "compute"


def _headroom(scenario: Scenario, hardware: str, nodes: int, seed: int, ttft: float, tpot: float,
              sim: Callable[..., Result]) -> float:
    """Largest rate multiplier in [1, HEADROOM_MAX_SCALE] at which `nodes` still meet the SLOs."""
    lo, hi = 1.0, HEADROOM_MAX_SCALE
    for _ in range(HEADROOM_STEPS):
        mid = math.sqrt(lo * hi)
        wl = scenario.load_workload(seed, rate_scale=mid)
        r = run(scenario.engine_config(hardware, n_nodes=nodes), wl, seed)
        lo, hi = (mid, hi) if meets_slo(r, ttft, tpot) else (lo, mid)
    return lo


def plan_capacity(scenario: Scenario, *, hardware: list[str] | None = None, ttft_p99_s: float | None = None,
                  tpot_p99_s: float | None = None, seed: int | None = None,
                  on_step: Callable[[str], None] | None = None) -> pd.DataFrame:
    """One `FleetPlan` row per node kind, for the scenario's workload and SLOs (or those given); with a
    ``[disaggregation]`` section, an aggregated and a disaggregated row per kind
    (`simulator.xpyd.plan_split_capacity`)."""
    for key, slo in (("ttft_p99_s", ttft_p99_s), ("tpot_p99_s", tpot_p99_s)):  # before any simulation
        must(slo is None or 0 < slo < math.inf, "capacity", key, "a finite number of seconds > 0", slo)
    seed = scenario.seed if seed is None else seed
    workload = scenario.load_workload(seed)
    scenario.check_context(workload)
    kinds = hardware or [n.key for n in scenario.nodes()]
    if scenario.disaggregation is not None:  # aggregated and xPyD fleets side by side
        from simulator.xpyd import plan_split_capacity

        return plan_split_capacity(scenario, kinds, workload, seed=seed, on_step=on_step,
                                   ttft_p99_s=scenario.slo.ttft_p99_s if ttft_p99_s is None else ttft_p99_s,
                                   tpot_p99_s=scenario.slo.tpot_p99_s if tpot_p99_s is None else tpot_p99_s)
    rows = [plan_fleet(scenario, hw, workload,
                       ttft_p99_s=scenario.slo.ttft_p99_s if ttft_p99_s is None else ttft_p99_s,
                       tpot_p99_s=scenario.slo.tpot_p99_s if tpot_p99_s is None else tpot_p99_s,
                       seed=seed, on_step=on_step)
            for hw in kinds]
    return pd.DataFrame([asdict(r) for r in rows])
