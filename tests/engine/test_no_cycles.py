"""The engine makes no reference cycles: what a run lets go, reference counting frees.

`simulator.engine.cluster.simulate` turns the cyclic garbage collector off while SimPy runs (it would
scan the live state again and again for nothing), and `simulator.engine.run` while it makes the frames
and the summary too. That is safe only while a run creates no cyclic
garbage, so each configuration below (prefix cache with its tiers and eviction orders, preemption by
recompute and swap, timeouts, chunked runs, retention, a disaggregated fleet, every router) is run
with the collector off, holding the result, and a collection must then find nothing unreachable.
"""

from __future__ import annotations

import dataclasses
import gc

import pytest

import simulator.engine.result as result_module
from simulator.engine import AffineTimer, EngineConfig, PoolConfig, SchedulerConfig, run
from simulator.engine.cluster import simulate
from tests.engine.helpers import shared_prefix_requests
from workloads import load_workload
from workloads.request import Request

TIMER = AffineTimer(overhead_s=0.02, per_seq_s=1e-5, per_context_token_s=1.2e-8, per_prefill_token_s=3.6e-5)
BASE = EngineConfig(n_nodes=2, tp=4, kv_blocks=600, sample_interval_s=0.5)
SMALL = SchedulerConfig(max_num_batched_tokens=512)
CONFIGS = {
    "prefix-lru": BASE,
    "prefix-lfu-tiers": dataclasses.replace(BASE, cache_params={"eviction": "lfu", "dram": True, "nvme": True,
                                                                "dram_fraction": 0.0005}),
    "prefix-fifo-dram": dataclasses.replace(BASE, cache_params={"eviction": "fifo", "dram": True,
                                                                "dram_fraction": 0.0005}),
    "none-swap-chunked": dataclasses.replace(BASE, cache="none", kv_blocks=300, scheduler=dataclasses.replace(
        SMALL, preemption="swap")),
    "recompute-timeout": dataclasses.replace(BASE, kv_blocks=200, scheduler=dataclasses.replace(
        SMALL, queue_timeout_s=1.0)),
    "reserve-affinity": dataclasses.replace(BASE, router="prefix-affinity",
                                            scheduler=SchedulerConfig(admission="reserve")),
    "streaming-least-kv": dataclasses.replace(BASE, router="least-kv", retention="streaming-llm",
                                              retention_params={"window_tokens": 256}),
    "round-robin-stepping": dataclasses.replace(BASE, router="round-robin", fast_forward=False),
    "disaggregated": dataclasses.replace(BASE, n_nodes=1, prefill_pool=PoolConfig(node="8xH100", n_nodes=1, tp=4),
                                         kv_blocks=0),
    "disaggregated-least-dispatched": dataclasses.replace(BASE, n_nodes=1, router="least-dispatched", kv_blocks=0,
                                                          prefill_pool=PoolConfig(node="8xH100", n_nodes=1, tp=4)),
}


def _unreachable_after(config: EngineConfig, requests: list[Request]) -> int:
    """Run `requests` with the collector off (what was made before collected first), holding the
    result; return what a collection then finds unreachable: the run's cyclic garbage."""
    gc.collect()
    gc.disable()
    try:
        result = simulate(config, requests, 1, timer=TIMER)
        assert len(result[0].records) == len(requests)
        return gc.collect()
    finally:
        gc.enable()


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_a_run_leaves_no_cyclic_garbage(name: str) -> None:
    assert _unreachable_after(CONFIGS[name], shared_prefix_requests(300, seed=3, rate_per_s=20.0)) == 0


def test_a_multi_turn_workload_leaves_no_cyclic_garbage() -> None:
    """Sessions whose turns reuse earlier outputs (chat-4k): inserts below held nodes, splits, eviction."""
    requests = load_workload("chat-4k", seed=1, duration_s=60).requests()
    assert _unreachable_after(dataclasses.replace(BASE, kv_blocks=2000), requests) == 0


@pytest.mark.parametrize("enabled", [True, False])
def test_run_pauses_the_collector_through_its_summary_and_restores_it(monkeypatch: pytest.MonkeyPatch,
                                                                      enabled: bool) -> None:
    """`run` keeps the collector off from the simulation to the summary (its frames' allocations would
    set off full collections over the run's records), then leaves it as it found it."""
    seen: list[bool] = []
    summarize = result_module.summarize

    def spy(*args, **kwargs):  # type: ignore[no-untyped-def]
        seen.append(gc.isenabled())
        return summarize(*args, **kwargs)

    monkeypatch.setattr(result_module, "summarize", spy)
    (gc.enable if enabled else gc.disable)()
    try:
        res = run(BASE, shared_prefix_requests(50, seed=3, rate_per_s=20.0), seed=1, timer=TIMER)
        assert gc.isenabled() is enabled
    finally:
        gc.enable()
    assert seen == [False] and res.summary["requests"] == 50


def _collections_during_run(n: int) -> tuple[list[int], int]:
    """Run `n` requests with the collector on; return the generations it collected meanwhile and the
    young generation's count after (what was made before the run collected first)."""
    generations: list[int] = []

    def note(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            generations.append(info["generation"])

    requests = shared_prefix_requests(n, seed=3, rate_per_s=20.0)
    gc.collect()
    gc.callbacks.append(note)
    try:
        res = run(BASE, requests, seed=1, timer=TIMER)
        young = gc.get_count()[0]
    finally:
        gc.callbacks.remove(note)
    assert res.summary["requests"] == n
    return generations, young


def test_what_a_run_keeps_goes_to_the_oldest_generation_uncollected() -> None:
    """As the collector comes back on, the run's live objects (thousands here: records, frames, the
    tree) move to the oldest generation: no collection traverses them on the way out (before, the
    next allocation collected the young generation, a traversal of all of them: 53 ms of a
    10,000-request chat-4k run with the prefix cache, 1.1 s)."""
    generations, young = _collections_during_run(300)
    assert generations == [] and young < 100


def test_objects_a_caller_froze_stay_frozen() -> None:
    """With objects frozen by the caller, `run` leaves them frozen (an unfreeze would thaw them too)
    and the young generation is collected as the collector would anyway."""
    mine = [[k] for k in range(3)]  # lists: tracked by the collector
    gc.collect()
    gc.freeze()
    try:
        generations, _ = _collections_during_run(300)
        in_generations = {id(o) for g in range(3) for o in gc.get_objects(generation=g)}
        assert gc.get_freeze_count() > 0 and not {id(o) for o in mine} & in_generations
        assert 0 in generations  # the young generation, over its threshold, collected on the way out
    finally:
        gc.unfreeze()
