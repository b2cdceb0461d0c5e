"""Chunked-prefill runs (`simulator.engine.chunked`) are stepping, bit for bit, with fewer events."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import pytest

from simulator.engine import AffineTimer, EngineConfig, SchedulerConfig
from simulator.engine.chunked import ChunkedRuns
from simulator.engine.cluster import Cluster, simulate
from tests.engine.helpers import poisson_requests
from workloads.request import Request

TIMER = AffineTimer(overhead_s=0.02, per_seq_s=1e-5, per_context_token_s=1.2e-8, per_prefill_token_s=3.6e-5)


def _outcome(cluster: Cluster, end_s: float) -> tuple[Any, ...]:
    integrals = [(r.used_block_s, r.cache_block_s, r.evictable_block_s, r.private_block_s, r.private_token_s,
                  r.busy_s, r.S, r.used) for r in cluster.replicas]
    return sorted(cluster.records), cluster.samples, integrals, end_s


def _both(monkeypatch: pytest.MonkeyPatch, config: EngineConfig, reqs: list[Request], timer: Any = TIMER,
          ) -> tuple[tuple[Any, ...], tuple[Any, ...], int, int]:
    cluster, end_s, events = simulate(config, reqs, 7, timer=timer)
    runs = _outcome(cluster, end_s)
    with monkeypatch.context() as m:
        plan_run = ChunkedRuns.plan_run

        def never(self: ChunkedRuns, *args: Any) -> None:
            plan_run(self, *args)
            self.run_steps = []  # plan each chunked step on its own, as before runs existed

        m.setattr(ChunkedRuns, "plan_run", never)
        cluster, end_s, stepped_events = simulate(config, reqs, 7, timer=timer)
    return runs, _outcome(cluster, end_s), events, stepped_events


LONG = SchedulerConfig(max_num_seqs=16, max_num_batched_tokens=256)


@pytest.mark.parametrize(("name", "config"), [
    ("full cache, 3 replicas least-tokens", EngineConfig(kv_blocks=4000, n_nodes=3, tp=8, scheduler=LONG)),
    ("least-kv, samples every 0.1 s", EngineConfig(kv_blocks=4000, n_nodes=2, tp=8, scheduler=LONG,
                                                    router="least-kv", sample_interval_s=0.1)),
    ("prefix cache, tight pool, recompute", EngineConfig(kv_blocks=400, n_nodes=2, tp=8, cache="prefix",
                                                         scheduler=LONG)),
    ("prefix cache, tight pool, swap", EngineConfig(kv_blocks=400, n_nodes=2, tp=8, cache="prefix",
                                                    scheduler=replace(LONG, preemption="swap"))),
    ("streaming-llm retention", EngineConfig(kv_blocks=600, tp=8, retention="streaming-llm",
                                             retention_params={"window_tokens": 300}, scheduler=LONG)),
])
def test_runs_equal_stepping_exactly(monkeypatch: pytest.MonkeyPatch, name: str, config: EngineConfig) -> None:
    reqs = poisson_requests(120, 6.0, (300, 2500), (1, 300), seed=3)
    if config.cache == "prefix":  # one of 3 documents of 200 tokens, then the request's own
        reqs = [replace(r, segments=((-1 - r.id % 3, 200), (r.id, r.prompt_tokens - 200))) for r in reqs]
    runs, stepped, events, stepped_events = _both(monkeypatch, config, reqs)
    assert runs == stepped, name
    assert events < stepped_events  # runs happened



def test_run_steps_read_as_groups_give_stepping_p99(monkeypatch: pytest.MonkeyPatch) -> None:
    """A run's committed steps take one `log_order` entry, a group (`ChunkedRuns.commit_run`): the TPOT
    p99 of sequences that finish with a group among their largest steps (the suffix path,
    `series.suffix_gap_quantile`) equals stepping's, where every step has an entry of its own."""
    import simulator.engine.observe as observe_module
    from simulator.engine.series import _rank, suffix_gap_quantile

    read = [0]

    def counting(order: list[tuple[float, int, int]], g0s: Sequence[float], ds: Sequence[float], base: int, a: int,
                 n_total: int, q: float = 0.99, extra: Sequence[float] = ()) -> float:
        m = _rank(n_total + len(extra), q)[0]
        read[0] += any(k < 0 for _, i, k in [e for e in order if e[1] >= a][:m])
        return suffix_gap_quantile(order, g0s, ds, base, a, n_total, q, extra)

    monkeypatch.setattr(observe_module, "suffix_gap_quantile", counting)
    reqs = poisson_requests(120, 6.0, (300, 2500), (1, 300), seed=3)
    config = EngineConfig(kv_blocks=4000, n_nodes=3, tp=8, scheduler=LONG)
    runs, stepped, _, _ = _both(monkeypatch, config, reqs)
    assert runs == stepped
    assert read[0] >= 10


def test_runs_on_the_cost_model_cut_events(monkeypatch: pytest.MonkeyPatch) -> None:
    """Long prompts in chunks of 512 on the calibrated step model (Vidur's shape, small)."""
    config = EngineConfig(model="Llama-3.1-8B", tp=1, scheduler=SchedulerConfig(max_num_batched_tokens=512))
    reqs = poisson_requests(150, 2.0, (2000, 12000), (20, 400), seed=5)
    runs, stepped, events, stepped_events = _both(monkeypatch, config, reqs, timer=None)
    assert runs == stepped
    assert events < stepped_events / 2


@pytest.mark.parametrize(("model", "node", "tp"), [("Llama-3.1-8B", "8xH100", 1), ("DeepSeek-V3", "8xH200", 8),
                                                   ("Gemma-3-27B", "8xH100", 2)])
def test_prefill_run_s_is_step_s_step_by_step(model: str, node: str, tp: int) -> None:
    """The cost model prices a run's steps in one call (`StepModel.prefill_run_s`) as `step_s` would
    one by one, bit for bit: with and without decoders, remembered chunks or not, and a run priced again
    from a later step (the last call's prices)."""
    from hardware.catalog import load_catalog
    from simulator.engine.cluster import cost_model_timer
    from simulator.kv import KVLayout
    from simulator.models import get_model

    timer: Any = cost_model_timer(load_catalog().node(node), get_model(model), tp, KVLayout())
    for new, pre, steps, n, kv0, grow in [(512, 0, 20, 0, 0, 0), (500, 1536, 9, 12, 40_000, 12),
                                          (311, 7, 30, 201, 1_000_000, 199), (512, 0, 20, 0, 0, 0)]:
        one_by_one = [timer.step_s([(new, pre + i * new)], n, kv0 + i * grow) for i in range(steps)]
        timer._pf_rows.clear()
        assert timer.prefill_run_s(new, pre, steps, n, kv0, grow) == one_by_one
        timer._last_run = None
        assert timer.prefill_run_s(new, pre, steps, n, kv0, grow) == one_by_one  # from the memo
        assert timer.prefill_run_s(new, pre + 3 * new, steps - 5, n, kv0 + 3 * grow, grow) == one_by_one[3:-2]


@pytest.mark.parametrize(("model", "node", "tp", "kv_dtype"), [("Llama-3.1-8B", "8xH100", 1, "bf16"),
                                                               ("DeepSeek-V3", "8xH200", 8, "bf16"),
                                                               ("Llama-3-70B", "8xH100", 8, "fp8")])
def test_chunk_s_many_is_chunk_s_chunk_by_chunk(model: str, node: str, tp: int, kv_dtype: str) -> None:
    """The kernel prices a run's chunks in one call (one NumPy power over them) as `chunk_s` does
    chunk by chunk, bit for bit (NumPy's power may differ from C's pow in the last bit: not from itself)."""
    import random

    from hardware.catalog import load_catalog
    from simulator.engine.cluster import cost_model_timer
    from simulator.kv import KVLayout
    from simulator.models import get_model

    timer: Any = cost_model_timer(load_catalog().node(node), get_model(model), tp, KVLayout(kv_dtype=kv_dtype))
    kernel, rng = timer._pf_kernel, random.Random(1)
    for _ in range(200):
        n = float(rng.choice([1, 7, 64, 300, 511, 512, 2048, 8192]))
        cs = [float(rng.randrange(0, 200_000)) for _ in range(rng.randrange(1, 40))]
        bs = [timer._chunk_bytes(n, c) / timer.model.n_layers for c in cs]
        assert kernel.chunk_s_many(n, cs, bs, timer._heads) == [kernel.chunk_s(n, c, b, timer._heads)
                                                                 for c, b in zip(cs, bs, strict=True)]


def _sample_spies(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Count where the samples inside runs come from: a plan's (`take_run_sample`, at step 1 of the run or
    later, skipped when an arrival took one since) or an arrival's; runs of one prompt or several; and
    runs with two samples or more."""
    seen: Counter[str] = Counter()
    per_run: Counter[tuple[int, int]] = Counter()
    take, inside = ChunkedRuns.take_run_sample, ChunkedRuns.sample_in_run
    taking = [False]

    def take_spy(self: Any, now: float) -> int:
        if not now - self.last_sample_s >= self.sample_interval_s:
            seen["plan's skipped"] += 1
        taking[0] = True
        try:
            return take(self, now)
        finally:
            taking[0] = False

    def inside_spy(self: Any, now: float, q: int) -> None:
        seen["plan's" if taking[0] else "arrival's"] += 1
        seen["at step 1" if q == 1 else "later"] += taking[0]
        seen["one prompt" if self.run_chunks is None else "several prompts"] += 1
        per_run[self.index, self.S] += 1  # (a run's first step: S moves at commits)
        seen["runs with several"] = sum(n > 1 for n in per_run.values())
        inside(self, now, q)

    monkeypatch.setattr(ChunkedRuns, "take_run_sample", take_spy)
    monkeypatch.setattr(ChunkedRuns, "sample_in_run", inside_spy)
    return seen


@pytest.mark.parametrize(("interval", "most"), [(0.0, 0), (0.03, 0), (0.1, 0), (0.45, 0), (0.03, 100)])
def test_samples_inside_runs_are_steppings(monkeypatch: pytest.MonkeyPatch, interval: float, most: int) -> None:
    """A sample due inside a run is taken where stepping takes it, from the state stepping has there
    (`ChunkedRuns.sample_in_run`): at the plan of the step it falls due at (step 1 of the run, where a
    run used to be cut to its first step, or a later one; several in one run when the interval is
    shorter than the run) unless an arrival during the run took it first, from the run's state at its
    time. Runs of one prompt, and of several (``long_prefill_token_threshold`` below the budget).
    Samples, records and integrals equal stepping's, row for row; every kind of sample happened."""
    config = EngineConfig(kv_blocks=4000, n_nodes=2, tp=8, scheduler=replace(LONG, long_prefill_token_threshold=most),
                          router="least-kv", sample_interval_s=interval)
    reqs = poisson_requests(120, 6.0, (300, 2500), (1, 300), seed=3)
    seen = _sample_spies(monkeypatch)
    runs, stepped, events, stepped_events = _both(monkeypatch, config, reqs)
    assert runs == stepped
    assert events <= stepped_events if interval == 0.0 else events < stepped_events  # (0: a sample every step)
    assert seen["plan's"] and seen["at step 1"] and seen["later"] and seen["several prompts" if most else "one prompt"]
    if 0.0 < interval < 0.45:  # (every plan samples at 0: none is skipped)
        assert seen["arrival's"] and seen["plan's skipped"]
    if interval < 0.45:
        assert seen["runs with several"]


def test_arrivals_at_a_run_steps_end_are_steppings(monkeypatch: pytest.MonkeyPatch) -> None:
    """An arrival exactly at the end of a run's step (its first, and the one where a sample falls due)
    goes before that step's commit, as in stepping (arrivals run first among events of one time): it is
    queued, and the sample it finds due reads the steps ended before it. Records and samples equal
    stepping's."""
    config = EngineConfig(kv_blocks=4000, n_nodes=1, tp=8, scheduler=LONG, sample_interval_s=0.1)  # one replica
    reqs = poisson_requests(60, 3.0, (300, 2500), (1, 300), seed=3)
    begin, due = ChunkedRuns._begin_run, []

    def begin_spy(self: Any, gs: list[float], all_chunks: Any, ends: list[float]) -> None:
        begin(self, gs, all_chunks, ends)
        if self.run_sample > 1:  # a run with a sample due at a step after its first
            due.append((ends[0], ends[self.run_sample - 1]))

    with monkeypatch.context() as m:
        m.setattr(ChunkedRuns, "_begin_run", begin_spy)
        simulate(config, reqs, 7, timer=TIMER)
    assert len(due) >= 3
    for first, sampled in due[:3]:
        late = poisson_requests(2, 1.0, 400, 20, seed=1)
        extra = [replace(late[0], id=1000, arrival_s=first), replace(late[1], id=1001, arrival_s=sampled)]
        both = sorted([*reqs, *extra], key=lambda r: r.arrival_s)
        seen = _sample_spies(monkeypatch)
        runs, stepped, _, _ = _both(monkeypatch, config, both)
        assert runs == stepped
        assert seen["arrival's"]  # (the one at the step where the sample falls due takes it, before the plan)


@pytest.mark.parametrize("cache", ["none", "prefix"])
def test_samples_inside_runs_on_the_cost_model(monkeypatch: pytest.MonkeyPatch, cache: str) -> None:
    """Vidur's shape, small, on the calibrated step model, with samples every 0.3 s: a sample inside a
    run carries the MFU and HBM share of the step planned there (the step model's `utilisation` of its
    chunks and context), as stepping's does; also with the prefix cache (one of 4 documents of 1,000
    tokens before each prompt's own). Samples, records and integrals equal stepping's."""
    config = EngineConfig(model="Llama-3.1-8B", tp=1, cache=cache, sample_interval_s=0.3,
                          scheduler=SchedulerConfig(max_num_batched_tokens=512))
    reqs = poisson_requests(150, 2.0, (2000, 12000), (20, 400), seed=5)
    if cache == "prefix":
        reqs = [replace(r, segments=((-1 - r.id % 4, 1000), (r.id, r.prompt_tokens - 1000))) for r in reqs]
    seen = _sample_spies(monkeypatch)
    runs, stepped, events, stepped_events = _both(monkeypatch, config, reqs, timer=None)
    assert runs == stepped
    assert seen["plan's"] >= 10 and events < stepped_events
    # MFU priced (a share), not the NaN of an idle replica (the node's 8 replicas are mostly idle)
    assert sum(0.0 < row[8] < 1.0 for row in runs[1]) >= 20


def test_runs_of_a_disaggregated_fleet_end_before_a_sample(monkeypatch: pytest.MonkeyPatch) -> None:
    """A disaggregated fleet's runs (prefill replicas' and decode replicas', which KV transfers interrupt)
    end before a sample falls due (`ChunkedRuns._begin_run`): none is taken inside one. Records and
    samples equal stepping's (the time integrals to the last bits: a hand-off between commits shifts them
    from the last commit, `HandOff._shift_integrals`)."""
    from simulator.engine import PoolConfig

    config = EngineConfig(tp=4, kv_blocks=600, prefill_pool=PoolConfig(node="8xH100", n_nodes=1, tp=4),
                          short_prompt_tokens=800, sample_interval_s=0.05,
                          scheduler=SchedulerConfig(max_num_seqs=16, max_num_batched_tokens=64))
    reqs = poisson_requests(60, 8.0, (300, 1500), (20, 300), seed=7)
    seen = _sample_spies(monkeypatch)
    begin, cut = ChunkedRuns._begin_run, Counter[str]()

    def begin_spy(self: Any, gs: list[float], all_chunks: Any, ends: list[float]) -> None:
        steps = len(ends)
        begin(self, gs, all_chunks, ends)
        cut["cut" if len(ends) < steps else "whole"] += 1
        cut["no run" if not self.run_steps else "run"] += 1

    monkeypatch.setattr(ChunkedRuns, "_begin_run", begin_spy)
    runs, stepped, events, stepped_events = _both(monkeypatch, config, reqs)
    assert runs[:2] == stepped[:2]
    for a, b in zip(runs[2], stepped[2], strict=True):
        assert a == pytest.approx(b, rel=1e-12)
    assert events < stepped_events
    assert not seen
    assert cut["cut"] and cut["whole"] and cut["no run"] and cut["run"], cut
