"""The SimPy side: one thin process per replica, one injector, a router; `run` ties them up.

A replica process asks its `Replica` for a plan, waits one timeout for the whole jump and
commits it. An arrival routed to a replica in the middle of a jump interrupts it when its queue
was empty (the arrival may change the batch) or when its queue deadline falls before the jump's
end (the jump was bounded by no deadline of the queue's preempted, deadline-free requests); the
process then commits the whole steps finished by then plus the step in progress, and plans
again: exactly what stepping would do. A run of chunked-prefill steps (`simulator.engine.chunked`)
is one timeout too, never interrupted by an arrival: an arrival could change none of its steps. A
time-series sample falling due inside a run (an aggregated fleet's) or a jump takes a timeout of its
own, at the start of the step whose plan would take it in stepping, from the state stepping would
have there (`Observation.jump_sample_due`): a sample an interval, not an event a token (unless the
interval is shorter than a step: then every step start is due, as in stepping; an interval of 0 takes
none inside a jump); an arrival's sample in a jump reads that state too. With an interval > 0,
fast-forward's time series is stepping's, each replica's row for row, to within the rounding of their
step times (`replica.SAMPLE_SLACK_S`; `tests/engine/test_differential.py`).

The replica process is written as callbacks on the timeouts it waits for (`_ReplicaProcess`),
as `simpy.Process` itself is, rather than as a generator: an interrupt is then handled where it is
asked for (the step in progress is known from the time alone), not thrown into a generator by an
urgent event of its own, which was 3-5% of the engine's time on chat workloads. Such a timeout is
the list of its callbacks, put in SimPy's own queue where ``env.timeout`` would put its event
(`timeouts.after`), and `run_events` runs the queue as ``env.run()`` does, SimPy's own events as SimPy runs
them: an event made, fired and freed for every step, jump and arrival was 9% of chat-4k's instructions.
The engine makes no SimPy event now: an idle replica's wake-up (`_ReplicaProcess.wake`) and a KV link's
timeouts (`timeouts.after`, from `link.Link`) are such lists too, and the next arrival waits beside the
queue (`run_events`).

A disaggregated fleet (``EngineConfig.prefill_pool``) routes prompts longer than
``short_prompt_tokens`` to the prefill pool's router and the rest to the decode pools' (each its
own policy and generator); `simulator.engine.disagg` moves the KV between them, and a reservation
or an arrival of KV on a decode replica interrupts its jump or its run, as an arrival does a jump.

Records and samples go to lists, or stream to sinks (`records.CsvRows`) for runs too long to hold.
"""

from __future__ import annotations

import bisect
import gc
import inspect
import itertools
import math
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from heapq import heappop, heappush
from typing import Any

import numpy as np
import simpy
from simpy.events import NORMAL, URGENT

from hardware.catalog import NodeSpec, load_catalog
from simulator.capacity import KVBudget, blocks_per_group, kv_budget
from simulator.cost import StepModel, load_params
from simulator.engine.caches import CacheContext, make_strategy
from simulator.engine.caches.prefix import PrefixCache, dram_share
from simulator.engine.config import EngineConfig
from simulator.engine.disagg import Transfers, build_transfers
from simulator.engine.geometry import BlockGeometry, block_geometry
from simulator.engine.handoff import BOTH, DECODE_ONLY, PREFILL
from simulator.engine.records import RequestRecord, RowSink
from simulator.engine.replica import Replica
from simulator.engine.retention import debit_points, make_retention
from simulator.engine.routers import make_router
from simulator.engine.sequence import Seq
from simulator.engine.timeouts import Timeout, after
from simulator.engine.timer import StepTimer
from simulator.errors import ConfigError
from simulator.kv import KVLayout
from simulator.levers import window_debit_points
from simulator.models import ModelSpec
from simulator.placement import ParallelPlan, kv_share
from simulator.units import GB
from workloads.request import Request

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
    """Replicas of all pools, with what a run needs to price them.

    A disaggregated fleet's prefill pool comes last (its replicas after every decode replica, so
    that decode replicas keep the indices the same pools have in an aggregated fleet)."""

    replicas: list[Replica]
    nodes: list[tuple[NodeSpec, int]]  # (node, n_nodes) per pool
    records: list[tuple[Any, ...]] = field(default_factory=list)  # empty when they went to a sink
    samples: list[tuple[Any, ...]] = field(default_factory=list)
    budgets: list[KVBudget] = field(default_factory=list)  # per pool
    pool_of: list[int] = field(default_factory=list)  # per replica: its pool's index
    transfers: Transfers | None = None  # the hand-off queue and links of a disaggregated fleet


def build_cluster(config: EngineConfig, timer: StepTimer | TimerFactory | None,
                  observer: Callable[..., None], samples: RowSink) -> Cluster:
    """Replicas for every pool: KV pool from `kv_budget`, timer, cache state, host swap space."""
    model = config.model_spec()
    geo: BlockGeometry = block_geometry(model, config.layout, config.block_tokens)
    strategy = make_strategy(config.cache, **dict(config.cache_params))
    retention = make_retention(config.retention, **dict(config.retention_params))
    catalog = None
    replicas: list[Replica] = []
    nodes: list[tuple[NodeSpec, int]] = []
    budgets: list[KVBudget] = []
    pool_of: list[int] = []
    split = config.prefill_pool is not None
    pools = [*config.pools, *([config.prefill_pool] if config.prefill_pool is not None else [])]
    for p_index, pool in enumerate(pools):
        role = BOTH if not split else PREFILL if p_index == len(config.pools) else DECODE_ONLY
        if isinstance(pool.node, NodeSpec):
            node = pool.node
        else:
            catalog = catalog or load_catalog()
            node = catalog.node(pool.node)
        nodes.append((node, pool.n_nodes))
        plan = pool.plan
        budget = kv_budget(node, model, memory_utilization=config.memory_utilization, plan=plan)
        budgets.append(budget)
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
        per_node = engines_per_node(budget, plan)  # engines on one node's DRAM, NVMe and PCIe
        check_tiers(config.cache_params, node, "EngineConfig")
        check_dram_tier(config.cache_params, node, per_node, geo.block_bytes, "EngineConfig: cache_params")
        host_bytes = node.host_dram_bytes / per_node
        # swap space: the host DRAM a prefix cache's tier does not take (helper-151: both took it all, up to 150%)
        tier_share = dram_share(strategy.dram, strategy.dram_fraction) if isinstance(strategy, PrefixCache) else 0.0
        host_blocks = int(host_bytes * (1 - tier_share) // geo.block_bytes)
        pcie = node.gpus * node.gpu.pcie_bytes_per_s / per_node  # an engine's share of its node's GPU links
        # Into HBM, every attention rank that holds a block takes its own copy over its own link: the copies are
        # kv_share x attention_tp, 1 where the KV heads split over the ranks (8 heads on TP8), more where ranks
        # hold the same heads (Qwen3-235B's 4 on TP8: 2; mqa: 8) or a latent whole (MLA on TP8: 8) (helper-151:
        # reloads and swap-ins were priced as one copy). Out, one copy leaves, in slices over the ranks' links,
        # and the host keeps one (as SGLang's hierarchical cache writes an MLA latent once; vLLM's swap space
        # is per GPU, each rank writing and keeping its own copy)
        load = pcie / (kv_share(model, config.layout, plan.attention_tp) * plan.attention_tp)
        ctx = CacheContext(block_bytes=geo.block_bytes, dram_bytes=host_bytes, dram_bytes_per_s=load,
                           nvme_bytes=node.nvme_bytes / per_node,
                           nvme_bytes_per_s=min(load, node.nvme_bytes_per_s / per_node),
                           prefill_s=_prefill_price(t),
                           window_overhead=geo.overhead if geo.overhead_blocks else None)
        for _ in range(pool.n_nodes // budget.nodes * budget.replicas * engines):
            replicas.append(Replica(
                index=len(replicas), total_blocks=blocks, geometry=geo, retention=retention,
                swap_bytes_per_s=pcie, swap_in_bytes_per_s=load,
                host_blocks=host_blocks, max_context_tokens=model.max_context_tokens, timer=t,
                cache=strategy.bind(config.block_tokens, blocks, ctx), sched=config.scheduler,
                fast_forward=config.fast_forward, observer=observer,
                sample_interval_s=config.sample_interval_s, samples=samples, role=role))
            pool_of.append(p_index)
    if split:  # a prefill replica turns away what no decode replica could ever hold
        room = max(r.total_blocks - r.watermark_blocks for r in replicas if r.role == DECODE_ONLY)
        for r in replicas:
            r.decode_room = room
    return Cluster(replicas=replicas, nodes=nodes, samples=samples if isinstance(samples, list) else [],
                   budgets=budgets, pool_of=pool_of)


def check_tiers(cache_params: Mapping[str, object], node: NodeSpec, where: str) -> None:
    """An offload tier the cache parameters ask for (``dram``, ``nvme``) has room on `node`: a node whose catalog
    gives it no host DRAM or NVMe would keep nothing there, and the run would read as one without the tier."""
    for tier, size, key in (("dram", node.host_dram_bytes, "host_dram_bytes"), ("nvme", node.nvme_bytes, "nvme_bytes")):
        if cache_params.get(tier) and not size > 0:
            raise ConfigError(f"{where}: cache.params.{tier}: node {node.key} has no room for a {tier} tier ({key} = "
                              f"{size:g} in its catalog); give the node {key} > 0 or drop the tier")


def engines_per_node(budget: KVBudget, plan: ParallelPlan) -> float:
    """The engine's replicas (schedulers with a KV pool each: a plan's replica runs one per DP-attention rank and
    pipeline batch in flight) that share one node's host DRAM, NVMe and PCIe links, each taking an equal share."""
    return budget.replicas * plan.kv_groups * plan.pp / budget.nodes


def dram_tier_blocks(host_bytes: float, share: float, block_bytes: float) -> int:
    """The KV blocks a replica's DRAM tier holds: ``floor(host_bytes · share / block_bytes)``, `host_bytes` the
    replica's share of its node's host DRAM and `share` the tier's part of it (`prefix.dram_share`), as
    `PrefixCache.bind` sizes the tier."""
    return int(host_bytes * share // block_bytes) if block_bytes > 0 else 0


def smallest_dram_fraction(host_bytes: float, block_bytes: float) -> float:
    """The smallest ``dram_fraction`` of three significant digits whose tier holds one block of `block_bytes`
    (`dram_tier_blocks` ≥ 1) out of `host_bytes`: ``block_bytes / host_bytes``, rounded up (it may be over 1)."""
    exact = block_bytes / host_bytes
    step = 10.0 ** (math.floor(math.log10(exact)) - 2)  # a unit of the third significant digit
    fraction = float(f"{math.ceil(exact / step) * step:.3g}")
    while dram_tier_blocks(host_bytes, fraction, block_bytes) < 1:  # (a float's rounding below the block)
        fraction = float(f"{fraction + step:.3g}")
    return fraction


def check_dram_tier(cache_params: Mapping[str, object], node: NodeSpec, per_node: float, block_bytes: float,
                    where: str) -> None:
    """A DRAM tier the cache parameters ask for holds at least one KV block a replica (`dram_tier_blocks`, of the
    replica's ``host_dram_bytes / per_node``). One that holds none kept nothing: every block evicted from HBM was
    dropped, the NVMe tier below it got none either, and the run read as one without tiers (helper-198). The
    refusal names the smallest fraction that holds a block; `where` prefixes it (``x.toml: cache.params``)."""
    if not cache_params.get("dram") or not node.host_dram_bytes > 0:  # (no host DRAM: `check_tiers`' error)
        return
    host = node.host_dram_bytes / per_node
    fraction = cache_params.get("dram_fraction")
    share = dram_share(True, fraction)  # type: ignore[arg-type]  # (a number: the strategy checked it)
    if dram_tier_blocks(host, share, block_bytes) >= 1:
        return
    smallest = smallest_dram_fraction(host, block_bytes)
    given = f"{share:g}" if fraction is not None else f"{share:g} (the default)"
    fix = (f"the smallest fraction that holds one is {smallest:g}" if smallest <= 1 else
           "no fraction holds one (the host DRAM is smaller than a block): drop the dram tier")
    raise ConfigError(f"{where}.dram_fraction: {given} of a replica's {host / GB:,.4g} GB of {node.key} host DRAM "
                      f"holds 0 KV blocks of {block_bytes / GB:,.3g} GB, so its dram tier would keep nothing; {fix}")


def run_events(env: simpy.Environment, arrivals: _Injector | None = None) -> None:
    """``env.run()``: SimPy's `Environment.step` until no event is left, written out here (a method call an
    event the less), with the engine's timeouts (`after`) among them: their callbacks are called with no
    event. Any other event is processed as `step` does: its callbacks, then a failure not defused raised.

    The next arrival of `arrivals` (`_Injector`) waits here, not in the queue: its key (`_Injector.key`) is the
    time, priority and event number its entry would have had there, taken when that entry would have been
    pushed. The queue pops its entries by those three in ascending order, and event numbers are unique (no two
    keys tie), so the arrival goes first exactly where the queue's first entry is larger: where a pop would
    have taken it. The same callbacks in the same order at the same clock, without an entry pushed and popped
    an arrival (a list and a bound method made, ~5 tuple comparisons) for a comparison of the first entry's
    time at every event: 10,000 requests, the engine's instructions, chat-4k 1,803 -> 1,790 M (with the prefix
    cache 2,436 -> 2,410 M), Vidur's shape 5,486 -> 5,454 M, 2P2D chat-4k 3,191 -> 3,178 M."""
    queue = env._queue
    at, key = (arrivals.at, arrivals.key) if arrivals is not None else (0.0, None)
    while True:
        if queue:
            top = queue[0]
            if key is None or top[0] < at or (top[0] == at and top < key):
                env._now, _, _, event = heappop(queue)
                if event.__class__ is list:
                    for callback in event:
                        callback(None)
                    continue
                callbacks, event.callbacks = event.callbacks, None  # type: ignore[assignment]
                for callback in callbacks:
                    callback(event)
                if not event._ok and not hasattr(event, "_defused"):  # as `step` raises it
                    exc = type(event._value)(*event._value.args)
                    exc.__cause__ = event._value
                    raise exc
                continue
        elif key is None:
            return
        env._now = at
        arrivals._arrive()  # type: ignore[union-attr]  # a key: `arrivals` was given
        at, key = arrivals.at, arrivals.key  # type: ignore[union-attr]


# SimPy runs the events of one time by priority, then in the order they were scheduled. A jump or a
# chunked-prefill run is scheduled once where stepping schedules each of its steps, so that order
# would depend on fast-forward whenever two replicas' steps end at the same instant (prefill replicas
# woken together, running equal chunks side by side): a replica's timeouts go after the other events
# of their time (arrivals, transfers, wake-ups: NORMAL), in replica order, priority NORMAL + (index + 1)
# times this (a power of two: exact for up to 2**24 replicas)
REPLICA_PRIORITY_STEP = 2.0 ** -24


class _ReplicaProcess:
    """The SimPy process of one replica: plan, wait, commit; `changed` gets the replica's index among
    its router's replicas whenever its state changes (a router's incremental view,
    `routers.basic._LeastTokens`); a disaggregated fleet's `transfers` sees every commit, and every
    plan that preempted, before anything else runs.

    Written as callbacks on the events it waits for (its start, a wake-up when idle, the timeout of a
    step, jump or run), as `simpy.Process` is, rather than as a generator: `interrupt` is handled where
    it is asked for. Its timeouts' priority (`prio`) puts them after the other events of their time,
    in replica order (`REPLICA_PRIORITY_STEP`).
    The callbacks are bound once (`on_plan`, ...), not at every wait: a bound method is an object.
    """

    __slots__ = ("after_commit", "changed", "counter", "env", "i", "n", "on_jump", "on_plan", "on_run", "on_sample",
                 "on_step", "prio", "rep", "sampler", "start", "target", "transfers")

    def __init__(self, env: simpy.Environment, rep: Replica, counter: list[int], changed: list[int] | None,
                 transfers: Transfers | None = None) -> None:
        self.env, self.rep, self.counter, self.changed, self.transfers = env, rep, counter, changed, transfers
        self.i = rep.local
        self.prio = NORMAL + (rep.index + 1) * REPLICA_PRIORITY_STEP  # its timeouts' place among same-time events
        self.after_commit = transfers.after_commit if transfers is not None else None
        self.on_plan, self.on_step = self._plan, self._step_done
        self.on_jump, self.on_run, self.on_sample = self._jump_done, self._run_done, self._run_sample
        self.target: Timeout | None = None  # the timeout it waits for
        self.sampler: Timeout = []  # the timeout of a sample due inside the run or jump in flight (`_sample_at`)
        self.start = 0.0  # when the jump in flight started
        self.n = 0  # steps the timeout ends after
        after(env, 0, self.on_plan, URGENT)  # before time 0's normal events, as a SimPy process starts
        rep.wake = self.wake

    def wake(self) -> None:
        """Plan again now, after the events already queued for now: an idle replica's wake-up, the queue entry
        of a SimPy event it waited for, succeeded now (``env.event().succeed()``: the same time, priority and
        event number), its one callback `_plan`: 2P2D chat-4k's 10,000 requests wake replicas 8,098 times, and
        their engine's instructions fell from 3,178 to 3,145 M with SimPy's events gone."""
        env = self.env
        heappush(env._queue, (env._now, NORMAL, next(env._eid), [self.on_plan]))  # type: ignore[misc]

    def _plan(self, _: Any = None) -> None:
        env, rep = self.env, self.rep
        self.counter[0] += 1
        now = env._now  # SimPy's clock (its `now` is a property: a call), here and in the other callbacks
        planned = rep.plan(now)
        if self.changed is not None:
            self.changed.append(self.i)
        if self.transfers is not None and rep.n_preempt != rep.n_preempt_seen:
            self.transfers.after_plan(rep, now, planned)
        if not planned:
            rep.idle = True  # until `wake` (`rep.wake`, called by whatever gives it work)
            return
        rep.in_flight = True
        callback: Callable[[Any], None]
        if rep.run_steps:  # chunked prefill steps planned at once: wake at the last one's end
            rep.run_interruptible = True  # by a KV transfer only, never by an arrival
            self.n = len(rep.run_ends)
            if rep.run_sample:
                self._sample_at(rep.run_ends[rep.run_sample - 1])
            delay, callback = _delay_to(now, rep.run_ends[-1]), self.on_run
        elif rep.k > 1:
            self.start, self.n = now, rep.k
            delay, callback = rep.begin_jump(now, rep.k), self.on_jump
            rep.interruptible = True
            if now + delay - rep.last_sample_s >= rep.sample_interval_s > 0.0:  # else none is due inside it
                t = rep.jump_sample_due(0)
                if t:
                    self._sample_at(t)
        else:
            self.n = 1
            delay, callback = rep.g0, self.on_step
        # `after(env, delay, callback, self.prio)` written out (its delay is ≥ 0: a plan's g0 > 0)
        timeout: Timeout = [callback]
        self.target = timeout
        heappush(env._queue, (now + delay, self.prio, next(env._eid), timeout))  # type: ignore[misc]

    def interrupt(self) -> None:
        """Cut the jump or run in flight short: the steps finished by now and the one in progress
        (none when now is a step boundary) are committed at that step's end, and the replica plans
        again there. Asked by an arrival or a KV transfer that may change the batch, and handled at
        once: what it decides depends on the time alone (a generator process would be thrown an
        interrupt by an urgent event of the same time, before any other event of that time).

        The old timeout keeps its place in SimPy's queue (SimPy cannot take an event back) and
        fires with no callback (`after`)."""
        env, rep, target = self.env, self.rep, self.target
        assert target
        target.clear()
        now = env._now
        callback: Callable[[Any], None]
        if rep.run_steps:  # (a decode replica's run: it takes no sample inside, `ChunkedRuns._begin_run`)
            self.sampler.clear()  # (so none is pending; were one, the cut run's sample would be stale)
            ends = rep.run_ends
            self.n = min(self.n, bisect.bisect_left(ends, now) + 1)
            delay, callback = _delay_to(now, ends[self.n - 1]), self.on_run
        else:
            # series.steps_to_reach(g0, d, now − start) steps at most, and their seconds, from the window the
            # router's look at the replica has most often just solved for this very time (`InFlight.cut_jump`);
            # max() by its rule, as a conditional (a call of it is ~850 instructions)
            rep.cut_jump(now)
            self.n = rep.jump_n
            if rep.jump_sample >= self.n:  # due at the cut's end (its plan's sample) or after: none comes
                self.sampler.clear()
                rep.jump_sample = 0
            if self.changed is not None:
                self.changed.append(self.i)
            delay = self.start + rep.jump_s - now
            delay, callback = delay if delay > 0.0 else 0.0, self.on_jump
        # `after(env, delay, callback, self.prio)` written out, as in `_plan`
        timeout: Timeout = [callback]
        self.target = timeout
        heappush(env._queue, (now + delay, self.prio, next(env._eid), timeout))  # type: ignore[misc]

    def _sample_at(self, t: float) -> None:
        """Wake at `t`, the start of a step inside the run or jump in flight, to take the sample stepping's
        plan would take there (`_run_sample`): a timeout of the replica's priority, as that plan's own
        (the commit before it) would be, so that samples go to the sink in stepping's order. Kept as
        `sampler`, so that an interrupt of the run, or of the jump before that step, takes it back (its
        times are all before the run's or jump's end: one that ends as planned leaves none)."""
        timeout: Timeout = [self.on_sample]
        self.sampler = timeout
        heappush(self.env._queue, (t, self.prio, next(self.env._eid), timeout))  # type: ignore[misc]

    def _run_sample(self, _: Any) -> None:
        """A sample due at the start of a step inside the run in flight (`ChunkedRuns.take_run_sample`),
        where the run would otherwise have ended for the plan there to take it, or inside the decode jump
        in flight (`Observation.take_jump_sample`); then the next one."""
        self.counter[0] += 1
        rep = self.rep
        if rep.run_steps:
            q = rep.take_run_sample(self.env._now)
            if q:
                self._sample_at(rep.run_ends[q - 1])
            return
        t = rep.take_jump_sample(self.env._now)
        if t:
            self._sample_at(t)

    def _run_done(self, _: Any) -> None:
        rep = self.rep
        rep.run_interruptible = rep.in_flight = False
        rep.commit_run(self.n)
        self._committed()

    def _jump_done(self, event: Any) -> None:
        self.rep.interruptible = False
        self.rep.jump_n = 0
        self._step_done(event)

    def _step_done(self, _: Any) -> None:
        rep = self.rep
        rep.in_flight = False
        rep.commit(self.n, self.env._now)
        if self.after_commit is not None:  # `_committed` written out (a call a step)
            self.after_commit(rep, self.env._now)
        self._plan()

    def _committed(self) -> None:
        """After a commit: a disaggregated fleet's hand-offs, then the next plan. The router hears of the
        change from `_plan` (nothing reads `changed` between the two: only an arrival does)."""
        if self.after_commit is not None:
            self.after_commit(self.rep, self.env._now)
        self._plan()


class _Group:
    """Replicas one router chooses among, each told its index there (`Replica.local`), and the list of
    those whose state changed since the router last looked, for a router that keeps its view of these
    replicas incrementally (`watch`: it owns the list and empties it); None for any other router: the
    replica processes and `route` then append nothing (chat-4k's 4 replicas: 4.5 appends an arrival,
    ~400 instructions each, and a `clear` at every choice)."""

    def __init__(self, router: Any, rng: np.random.Generator, replicas: list[Replica]) -> None:
        self.policy = router.bind(rng)
        self.replicas = replicas
        for i, rep in enumerate(replicas):
            rep.local = i
        watch = getattr(self.policy, "watch", None)
        self.changed: list[int] | None = watch(replicas) if watch is not None else None
        # a policy that counts what it dispatched is told of a request's first token and when it leaves its
        # replica (`RoutePolicy`)
        self.departed: Callable[[int, Request, bool], None] | None = getattr(self.policy, "departed", None)
        self.first_token: Callable[[int, Request], None] | None = getattr(self.policy, "first_token", None)
        self.counts = self.departed is not None or self.first_token is not None  # either hook: `Seq.routed` kept


def _delay_to(now: float, end_s: float) -> float:
    """A delay SimPy adds to `now` to land exactly on `end_s` (``now + (end_s − now)`` may miss it by a bit)."""
    delay = end_s - now
    while now + delay < end_s:
        delay = math.nextafter(delay, math.inf)
    while delay > 0 and now + delay > end_s:
        delay = math.nextafter(delay, -math.inf)
    return delay


class _Injector:
    """The process that routes each request at its arrival time: one wait for each later arrival time,
    requests of the same time routed in a row (callbacks, as `_ReplicaProcess`). The wait is its time and
    queue key (`at`, `key`), which `run_events` holds beside SimPy's queue, not an entry in it."""

    __slots__ = ("at", "env", "key", "last", "pending", "requests", "route")

    def __init__(self, env: simpy.Environment, requests: Iterable[Request], route: Callable[[Request], None]) -> None:
        self.env, self.requests, self.route = env, iter(requests), route
        self.last = -math.inf
        self.pending: Request | None = None  # the request the next arrival brings
        # the next arrival's time and key (`run_events`): first at 0, before time 0's normal events, as a SimPy
        # process starts (the entry of ``after(env, 0, self._arrive, URGENT)``); None after the last
        self.at: float = env._now
        self.key: tuple[float, float, int] | None = (env._now, URGENT, next(env._eid))

    def _arrive(self) -> None:
        env, route = self.env, self.route
        now = env._now
        if self.pending is not None:
            req, self.pending = self.pending, None
            route(req)
        for req in self.requests:
            t = req.arrival_s
            if t < self.last:
                raise ConfigError(f"requests: 'arrival_s' must be non-decreasing (got {t!r} after {self.last!r})")
            self.last = t
            if t > now:
                self.pending = req
                # the key of `after(env, t - now, self._arrive)`'s entry
                self.at = at = now + (t - now)
                self.key = (at, NORMAL, next(env._eid))
                return
            route(req)
        self.key = None


@contextmanager
def cyclic_gc_paused() -> Iterator[None]:
    """The cyclic garbage collector off for the block (on again after it, if it was on).

    A run makes no reference cycles (its garbage goes by reference counting: `tests/engine/
    test_no_cycles.py`), so the collector, which would scan the live state over and over and find
    nothing, is off while it runs (~1.5% of a 100k-request run with the prefix cache), and while
    its records become frames and a summary (`result.run`): there the frames' allocations set off
    full collections over the run's records and requests, 50-100 ms each, the time of ~500 of Vidur's
    requests. What cycles pandas leaves are collected once it is back on.

    What the block made and kept goes to the oldest generation as the collector comes back on
    (`gc.freeze` then `gc.unfreeze`: two list splices) instead of staying in the youngest, whose
    count is then far over its threshold: the next allocation would collect it, a traversal of all
    the run's live objects (a 10,000-request chat-4k run with the prefix cache keeps ~100,000 of
    them: 53 ms of its ~0.9 s, timed with `gc.callbacks`). A full collection still examines them. Where objects are
    frozen already (``gc.get_freeze_count()``: a caller's `gc.freeze`), they stay frozen and the
    young generation is left as it is."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            if not gc.get_freeze_count():
                gc.freeze()
                gc.unfreeze()
            gc.enable()


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
    # the layout's levers' debit, a compression's only for a sequence it compressed (`kv.compresses`: the KV it
    # kept, its prompt + output - 1 tokens less what retention dropped, past the window `keep`)
    layout_debit, window_debit = window_debit_points(config.layout, config.model_spec())
    keep = config.layout.compress_recent_tokens + 1 if window_debit else 0
    retention_debit = debit_points(config.retention)
    total = total_requests if total_requests is not None else (
        len(requests) if hasattr(requests, "__len__") else None)  # type: ignore[arg-type]
    every = max(1, (total or 0) // 1000)
    new_tuple = tuple.__new__

    # by replica index: the `departed` and `first_token` of the policy that routes to it, for a policy that
    # counts what it dispatched
    enders: list[Callable[[int, Request, bool], None] | None] = []
    firsts: list[Callable[[int, Request], None] | None] = []

    def unroute(seq: Seq) -> None:
        """Tell the policy that routed `seq` that it left its replica (it ended, or was handed off), and
        whether its first token had come out (`first_s` is NaN until then)."""
        i, seq.routed = seq.routed, -1
        ender = enders[seq.replica]
        if ender is not None:  # (a policy may offer `first_token` alone)
            ender(i, seq.request, seq.first_s == seq.first_s)

    def answered(seq: Seq) -> None:
        """Tell the policy that routed `seq` that its first token came out (`Replica.on_first`)."""
        if seq.routed >= 0:
            firsts[seq.replica](seq.routed, seq.request)  # type: ignore[misc]

    def observe(seq: Seq, outcome: str, reason: str, end_s: float, p99: float, mean: float) -> None:
        r = seq.request
        if seq.routed >= 0:
            unroute(seq)
        # tuple.__new__ (C) makes the same record: RequestRecord(...) is its Python __new__ binding 27 arguments
        sink.append(new_tuple(RequestRecord, (
            r.id, r.arrival_s, seq.replica, seq.admit_s - r.arrival_s, seq.first_s - r.arrival_s, mean, p99,
            end_s, end_s - r.arrival_s, r.prompt_tokens, r.output_tokens, seq.first_hit, seq.preemptions,
            outcome, reason, seq.admit_s, seq.hit_hbm, seq.hit_dram, seq.hit_nvme, seq.recomputed,
            seq.evicted, layout_debit + (window_debit if keep and r.prompt_tokens + r.output_tokens - seq.evicted > keep
                                         else 0.0)
            + (retention_debit if seq.evicted > 0 else 0.0), seq.resume_hit,
            seq.transfer_start_s, seq.transfer_end_s, seq.transfer_bytes, seq.decode_replica)))
        if progress is not None and total:
            n_records[0] += 1
            if n_records[0] % every == 0:
                progress(n_records[0] / total)

    cluster = build_cluster(config, timer, observe, [] if samples is None else samples)
    cluster.records = kept
    env = simpy.Environment()
    replicas = cluster.replicas
    router = make_router(config.router, **dict(config.router_params))
    ids = itertools.count()
    timeout_s = config.scheduler.queue_timeout_s
    counter = [0]
    # the replicas each router chooses among (all; or the prefill pool, then the decode pools)
    split = config.prefill_pool is not None
    groups = [_Group(router, route_rng, replicas)] if not split else [
        _Group(router, route_rng, [r for r in replicas if r.role == PREFILL]),
        _Group(router, np.random.default_rng(ss.spawn(1)[0]), [r for r in replicas if r.role == DECODE_ONLY])]
    short = config.short_prompt_tokens
    enders[:], firsts[:] = [None] * len(replicas), [None] * len(replicas)
    for g in groups:
        for rep in g.replicas:
            enders[rep.index], firsts[rep.index] = g.departed, g.first_token
            if g.first_token is not None:
                rep.on_first = answered
    if split:
        cluster.transfers = build_transfers(env, config, replicas, cluster.pool_of, cluster.budgets,
                                            [node for node, _ in cluster.nodes], groups[1].changed,
                                            np.random.default_rng(ss.spawn(1)[0]))
        if groups[0].counts:
            cluster.transfers.handed = unroute

    def route(req: Request) -> None:
        counter[0] += 1
        now = env._now
        g = groups[1] if split and req.prompt_tokens <= short else groups[0]
        i = g.policy.choose(req, g.replicas, now)
        rep = g.replicas[i]
        was_empty = not rep.waiting
        seq = Seq(req, next(ids), rep.index, timeout_s)
        if g.counts:  # the policy is told of the request on replica i until it leaves (`unroute`)
            seq.routed = i
        if not rep.enqueue(seq, now):
            return
        if g.changed is not None:
            g.changed.append(i)
        if rep.idle:
            rep.idle = False
            rep.wake()
        elif rep.interruptible and (was_empty or seq.deadline_s < rep.jump_end_s):
            rep.interruptible = False
            rep.proc.interrupt()

    for g in groups:
        for rep in g.replicas:
            rep.proc = _ReplicaProcess(env, rep, counter, g.changed, cluster.transfers)
    arrivals = _Injector(env, requests, route)
    with cyclic_gc_paused():
        run_events(env, arrivals)
    for rep in replicas:
        rep.sample(env.now)
    if progress is not None:
        progress(1.0)
    return cluster, env.now, counter[0]
