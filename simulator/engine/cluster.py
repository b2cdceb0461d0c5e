"""The SimPy side: one thin process per replica, one injector, a router; `run` ties them up.

A replica process asks its `Replica` for a plan, yields one timeout for the whole jump and
commits it. An arrival routed to a replica in the middle of a jump interrupts it when its queue
was empty (the arrival may change the batch) or when its queue deadline falls before the jump's
end (the jump was bounded by no deadline of the queue's preempted, deadline-free requests); the
process then commits the whole steps finished by then plus the step in progress, and plans
again: exactly what stepping would do. A run of chunked-prefill steps (`simulator.engine.chunked`)
is one timeout too, never interrupted: an arrival could change none of its steps.

Records and samples go to lists, or stream to sinks (`records.CsvRows`) for runs too long to hold.
"""

from __future__ import annotations

import gc
import inspect
import itertools
import math
from collections.abc import Callable, Generator, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import simpy

from hardware.catalog import NodeSpec, load_catalog
from simulator.capacity import blocks_per_group, kv_budget
from simulator.cost import StepModel, load_params
from simulator.engine.caches import CacheContext, make_strategy
from simulator.engine.config import EngineConfig
from simulator.engine.geometry import BlockGeometry, block_geometry
from simulator.engine.records import RequestRecord, RowSink
from simulator.engine.replica import Replica
from simulator.engine.retention import debit_points, make_retention
from simulator.engine.routers import make_router
from simulator.engine.sequence import Seq
from simulator.engine.series import series_s, steps_to_reach
from simulator.engine.timer import StepTimer
from simulator.errors import ConfigError
from simulator.kv import KVLayout
from simulator.levers import layout_debit_points
from simulator.models import ModelSpec, get_model
from simulator.placement import ParallelPlan
from workloads.request import Request

GC_ALLOCATIONS = 100_000  # the cyclic collector's first-generation threshold while the engine runs
TimerFactory = Callable[..., StepTimer]
"""``(node, model, tp) -> StepTimer``; a factory that also takes a ``layout`` keyword parameter
is called with ``layout=`` the run's `KVLayout` (so it can price the layout's KV bytes)."""


def cost_model_timer(node: NodeSpec, model: ModelSpec, tp: int, layout: KVLayout,
                     plan: ParallelPlan | None = None) -> StepTimer:
    """The calibrated step-time model (`simulator.cost.StepModel`) of one replica's scheduler under
    `plan` (default: ``tp`` GPUs): the default timer.

    It prices the layout's KV bytes itself (windows and compression included)."""
    return StepModel(node.gpu, model, layout, tp, load_params(node.gpu.key), plan=plan, node=node)


def _call_factory(factory: TimerFactory, node: NodeSpec, model: ModelSpec, tp: int, layout: KVLayout) -> StepTimer:
    try:
        takes_layout = "layout" in inspect.signature(factory).parameters
    except (TypeError, ValueError):
        takes_layout = False
    return factory(node, model, tp, layout=layout) if takes_layout else factory(node, model, tp)


def _prefill_price(timer: StepTimer) -> Callable[[int, int], float]:
    """Marginal seconds to prefill `tokens` after `context` cached tokens (step less its overhead)."""
    a0 = timer.decode_coefficients(0)[0]

    def price(tokens: int, context: int) -> float:
        return max(0.0, timer.step_s([(tokens, context)], 0, 0) - a0)

    return price


@dataclass(slots=True)
class Cluster:
    """Replicas of all pools, with what a run needs to price them."""

    replicas: list[Replica]
    nodes: list[tuple[NodeSpec, int]]  # (node, n_nodes) per pool
    records: list[tuple[Any, ...]] = field(default_factory=list)  # empty when they went to a sink
    samples: list[tuple[Any, ...]] = field(default_factory=list)


def build_cluster(config: EngineConfig, timer: StepTimer | TimerFactory | None,
                  observer: Callable[..., None], samples: RowSink) -> Cluster:
    """Replicas for every pool: KV pool from `kv_budget`, timer, cache state, host swap space."""
    model = config.model if isinstance(config.model, ModelSpec) else get_model(config.model)
    geo: BlockGeometry = block_geometry(model, config.layout, config.block_tokens)
    strategy = make_strategy(config.cache, **dict(config.cache_params))
    retention = make_retention(config.retention, **dict(config.retention_params))
    catalog = None
    replicas: list[Replica] = []
    nodes: list[tuple[NodeSpec, int]] = []
    for pool in config.pools:
        if isinstance(pool.node, NodeSpec):
            node = pool.node
        else:
            catalog = catalog or load_catalog()
            node = catalog.node(pool.node)
        nodes.append((node, pool.n_nodes))
        plan = pool.plan
        budget = kv_budget(node, model, memory_utilization=config.memory_utilization, plan=plan)
        if pool.n_nodes % budget.nodes:
            raise ConfigError(f"EngineConfig: n_nodes of {node.key} must be a multiple of the {budget.nodes} nodes "
                              f"one {plan.label} replica spans (got {pool.n_nodes})")
        # each replica runs one scheduler per KV pool (a GPU under DP attention) and pipeline stage
        # in flight (vLLM's virtual engines), sharing the replica's blocks, host memory and links
        engines = plan.kv_groups * plan.pp
        blocks = config.kv_blocks or blocks_per_group(budget, model, config.layout, geo.block_bytes) // plan.pp
        if blocks < 1:
            raise ConfigError(f"EngineConfig: KV pool of {node.key} {plan.label} holds no block of "
                              f"{config.block_tokens} tokens")
        if timer is None:
            t: StepTimer = cost_model_timer(node, model, plan.tp, config.layout, plan=plan)
        elif isinstance(timer, StepTimer):
            t = timer
        else:
            t = _call_factory(timer, node, model, plan.tp, config.layout)
        per_node = budget.replicas * engines / budget.nodes  # engines on one node's DRAM, NVMe and PCIe
        host_bytes = node.host_dram_bytes / per_node
        host_blocks = int(host_bytes // geo.block_bytes)
        pcie = node.gpus * node.gpu.pcie_bytes_per_s / per_node
        ctx = CacheContext(block_bytes=geo.block_bytes, dram_bytes=host_bytes, dram_bytes_per_s=pcie,
                           nvme_bytes=node.nvme_bytes / per_node,
                           nvme_bytes_per_s=min(pcie, node.nvme_bytes_per_s / per_node),
                           prefill_s=_prefill_price(t))
        for _ in range(pool.n_nodes // budget.nodes * budget.replicas * engines):
            replicas.append(Replica(
                index=len(replicas), total_blocks=blocks, geometry=geo, retention=retention,
                swap_bytes_per_s=pcie,
                host_blocks=host_blocks, max_context_tokens=model.max_context_tokens, timer=t,
                cache=strategy.bind(config.block_tokens, blocks, ctx), sched=config.scheduler,
                fast_forward=config.fast_forward, observer=observer,
                sample_interval_s=config.sample_interval_s, samples=samples))
    return Cluster(replicas=replicas, nodes=nodes, samples=samples if isinstance(samples, list) else [])


def _replica_process(env: simpy.Environment, rep: Replica, counter: list[int],
                     changed: list[int]) -> Generator[Any, Any, None]:
    """Plan, wait, commit; `changed` gets the replica's index whenever its state changes (a router's
    incremental view, `routers.basic._LeastTokens`)."""
    i = rep.index
    while True:
        counter[0] += 1
        planned = rep.plan(env.now)
        changed.append(i)
        if not planned:
            rep.idle = True
            rep.wake = env.event()
            yield rep.wake
            continue
        if rep.run_steps:  # chunked prefill steps planned at once: wake at the last one's end
            yield env.timeout(_delay_to(env.now, rep.run_ends[-1]))
            rep.commit_run()
            changed.append(i)
            continue
        start, g0, d, k = env.now, rep.g0, rep.d, rep.k
        n = k
        if k > 1:
            rep.begin_jump(start, k)
            rep.interruptible = True
            try:
                yield env.timeout(series_s(g0, d, k))
            except simpy.Interrupt:
                # the steps finished by now, plus the one in progress (none when now is a boundary)
                n = rep.jump_n = min(k, steps_to_reach(g0, d, env.now - start))
                changed.append(i)
                yield env.timeout(max(0.0, start + series_s(g0, d, n) - env.now))
            rep.interruptible = False
            rep.jump_n = 0
        else:
            yield env.timeout(g0)
        rep.commit(n, env.now)
        changed.append(i)


class _Discard(list[int]):
    """A list that keeps nothing: `append` is a no-op."""

    def append(self, _: int, /) -> None:
        pass


def _delay_to(now: float, end_s: float) -> float:
    """A delay SimPy adds to `now` to land exactly on `end_s` (``now + (end_s − now)`` may miss it by a bit)."""
    delay = end_s - now
    while now + delay < end_s:
        delay = math.nextafter(delay, math.inf)
    while delay > 0 and now + delay > end_s:
        delay = math.nextafter(delay, -math.inf)
    return delay


def _injector(env: simpy.Environment, requests: Iterable[Request],
              route: Callable[[Request], None]) -> Generator[Any, Any, None]:
    last = -math.inf
    for req in requests:
        t = req.arrival_s
        if t < last:
            raise ConfigError(f"requests: 'arrival_s' must be non-decreasing (got {t!r} after {last!r})")
        last = t
        if t > env.now:
            yield env.timeout(t - env.now)
        route(req)


def simulate(config: EngineConfig, requests: Iterable[Request], seed: int | np.random.SeedSequence, *,
             timer: StepTimer | TimerFactory | None = None,
             progress: Callable[[float], None] | None = None,
             total_requests: int | None = None, records: RowSink | None = None,
             samples: RowSink | None = None) -> tuple[Cluster, float, int]:
    """Run the SimPy model; return the cluster (with records and samples), the end time and events.

    Records (`RequestRecord`, one as each request ends) and time-series rows (`SampleRecord`) go
    to the cluster's lists by default, or to the sinks given (`records.CsvRows` streams them to
    files, so that a long run's memory does not grow with its requests; the lists stay empty).
    """
    ss = seed if isinstance(seed, np.random.SeedSequence) else np.random.SeedSequence(seed)
    (route_rng,) = (np.random.default_rng(s) for s in ss.spawn(1))
    kept: list[tuple[Any, ...]] = []
    sink = kept if records is None else records
    n_records = [0]
    layout_debit = layout_debit_points(config.layout)
    retention_debit = debit_points(config.retention)
    total = total_requests if total_requests is not None else (
        len(requests) if hasattr(requests, "__len__") else None)  # type: ignore[arg-type]
    every = max(1, (total or 0) // 1000)

    def observe(seq: Seq, outcome: str, reason: str, end_s: float, p99: float, mean: float) -> None:
        r = seq.request
        sink.append(RequestRecord(
            r.id, r.arrival_s, seq.replica, seq.admit_s - r.arrival_s, seq.first_s - r.arrival_s, mean, p99,
            end_s, end_s - r.arrival_s, r.prompt_tokens, r.output_tokens, seq.first_hit, seq.preemptions,
            outcome, reason, seq.admit_s, seq.hit_hbm, seq.hit_dram, seq.hit_nvme, seq.recomputed,
            seq.evicted, layout_debit + (retention_debit if seq.evicted > 0 else 0.0), seq.resume_hit))
        if progress is not None and total:
            n_records[0] += 1
            if n_records[0] % every == 0:
                progress(n_records[0] / total)

    cluster = build_cluster(config, timer, observe, [] if samples is None else samples)
    cluster.records = kept
    env = simpy.Environment()
    replicas = cluster.replicas
    policy = make_router(config.router, **dict(config.router_params)).bind(route_rng)
    ids = itertools.count()
    timeout_s = config.scheduler.queue_timeout_s
    counter = [0]
    # replicas whose state changed since the router last looked, for a router that keeps its view
    # incrementally (it owns the list and empties it); otherwise a list nobody reads, kept short
    changed = getattr(policy, "changed", None)
    if not isinstance(changed, list):
        changed = _Discard()

    def route(req: Request) -> None:
        counter[0] += 1
        i = policy.choose(req, replicas, env.now)
        rep = replicas[i]
        was_empty = not rep.waiting
        seq = Seq(req, next(ids), i, timeout_s)
        if not rep.enqueue(seq, env.now):
            return
        changed.append(i)
        if rep.idle:
            rep.idle = False
            rep.wake.succeed()
        elif rep.interruptible and (was_empty or seq.deadline_s < rep.jump_end_s):
            rep.interruptible = False
            rep.proc.interrupt()

    for rep in replicas:
        rep.proc = env.process(_replica_process(env, rep, counter, changed))
    env.process(_injector(env, requests, route))
    # the run makes no reference cycles (its garbage goes by reference counting), but the cyclic
    # collector's default pace (a pass every 700 allocations) scans the live state over and over
    thresholds = gc.get_threshold()
    gc.set_threshold(max(thresholds[0], GC_ALLOCATIONS), *thresholds[1:])
    try:
        env.run()
    finally:
        gc.set_threshold(*thresholds)
    for rep in replicas:
        rep.sample(env.now)
    if progress is not None:
        progress(1.0)
    return cluster, env.now, counter[0]
