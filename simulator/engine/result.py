"""`run`: the engine's Python API, and the `Result` it returns (frames, summary, writer)."""

from __future__ import annotations

import math
import shutil
from collections.abc import Callable, Iterable, Sequence, Sized
from dataclasses import dataclass
from os import PathLike
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from simulator import __version__, jsonout
from simulator.engine.cluster import Cluster, TimerFactory, cyclic_gc_paused, simulate
from simulator.engine.config import EngineConfig
from simulator.engine.handoff import DECODE_ONLY, PREFILL
from simulator.engine.records import (
    CsvRows,
    RequestRecord,
    SampleRecord,
    read_records,
    read_samples,
    records_to_frame,
)
from simulator.engine.steady import STEADY_COLUMNS, SteadyState, SteadyWindow, completed_rows, steady_state
from simulator.engine.timer import StepTimer
from simulator.engine.traffic import COLUMN, TrafficClasses
from simulator.errors import ConfigError, is_whole, must, shown
from simulator.kv import footprint
from simulator.units import GB, HOUR_S
from workloads.request import Request


@dataclass(frozen=True, slots=True, kw_only=True)
class Result:
    """What a run produced: per-request and per-replica frames, summary metrics, provenance.

    ``requests``: one row per request, the `RequestRecord` fields (``arrival_s``, ``queue_s``, ``ttft_s``,
    ``tpot_mean_s``, ``end_s``, ``e2e_s``, tokens, prefix-hit tokens by tier, preemptions, ``outcome``:
    completed, rejected or timed_out) and then ``source``, its traffic class. ``timeseries``: each replica's
    `SampleRecord` rows (KV blocks used, running and waiting sequences, MFU), thinned to one per
    ``EngineConfig.sample_interval_s``. ``summary``: the run's figures (`summarize` defines each), among them
    ``makespan_s`` (``span``: first arrival to the run's end), ``output_tokens_per_s = Σ_completed output
    tokens / span``, ``goodput_fraction`` (the share of every request completed within both SLOs),
    ``kv_utilization = ∫ used blocks dt / (span · blocks)`` and ``usd_per_million_output_tokens = nodes ·
    usd_per_hour · span / 3600 / Σ_completed output tokens · 1e6``; the ``sustained_*`` ones are over the
    steady window (`steady`). ``config`` and ``seed`` reproduce it."""

    config: EngineConfig
    seed: int
    requests: pd.DataFrame  # one row per request: the `RequestRecord` fields, then `source` (traffic class)
    timeseries: pd.DataFrame
    summary: dict[str, Any]
    streamed_to: Path | None = None  # a streamed run (`run`'s `stream_to`): the folder of its two CSVs

    def steady(self, window: SteadyWindow | None = None) -> SteadyState:
        """The steady-state window and what was sustained in it, under `window` (default rule:
        `simulator.engine.steady`); the summary's ``sustained_*`` figures are this under the run's window.

        A streamed run whose `requests` were cut to fewer columns (`simulator.study.run_scenario` keeps a
        fleet's report columns alone) reads the ones it lacks back from its ``requests.csv``
        (`streamed_to`): the same figures as from the whole records."""
        requests = self.requests
        # a disaggregated fleet's hand-off queue too (`steady._handoffs`: its KV transfers' starts)
        needed = (*STEADY_COLUMNS, "transfer_start_s") if self.config.prefill_pool is not None else STEADY_COLUMNS
        if self.streamed_to is not None and not set(needed) <= set(requests.columns):
            requests = read_records(self.streamed_to / STREAMED_FILES[0], len(requests), needed)
        return steady_state(requests, window)

    def write(self, directory: str | Path) -> Path:
        """Write ``requests.csv``, ``timeseries.csv`` and ``summary.json`` into `directory` (made if
        missing) and return it. These three are always written, and are the same whichever optional
        packages are installed; ``requests.parquet`` and ``timeseries.parquet`` (the same two tables)
        are written as well only when pyarrow imports. A streamed run's two CSVs are the files it
        streamed (`streamed_to`; copied when `directory` is another folder), and it writes no Parquet."""
        out = Path(directory)
        out.mkdir(parents=True, exist_ok=True)
        if self.streamed_to is not None:  # the CSVs were written as the run went: copied, not rewritten
            for name in STREAMED_FILES:
                if (out / name).resolve() != (self.streamed_to / name).resolve():
                    shutil.copyfile(self.streamed_to / name, out / name)
        else:
            self.requests.to_csv(out / "requests.csv", index=False)
            self.timeseries.to_csv(out / "timeseries.csv", index=False)
            try:
                import pyarrow  # noqa: F401
            except ImportError:
                pass
            else:
                self.requests.to_parquet(out / "requests.parquet", index=False)
                self.timeseries.to_parquet(out / "timeseries.parquet", index=False)
        doc = {"seed": self.seed, "version": __version__, "config": self.config.as_dict(),
               "summary": self.summary}
        (out / "summary.json").write_text(jsonout.dumps(doc, indent=2, default=_jsonable) + "\n",
                                          encoding="utf-8")  # NaN as null
        return out


def _jsonable(x: object) -> object:
    if isinstance(x, np.generic):
        return x.item()
    return str(x)


def must_seed(seed: object, where: str, key: str = "seed") -> None:
    """Refuse a seed that is not an integer >= 0 (``True`` neither): numpy's `SeedSequence` would
    fail later with its own error, and ``None`` would draw fresh entropy, a run no one can repeat.

    >>> must_seed(0, "run")
    """
    must(is_whole(seed), where, key, "an integer >= 0 (the same seed, the same run)", seed)


def run(config: EngineConfig, requests: Iterable[Request], seed: int = 0, *,
        timer: StepTimer | TimerFactory | None = None,
        progress: Callable[[float], None] | None = None,
        total_requests: int | None = None, window: SteadyWindow | None = None,
        stream_to: str | Path | None = None) -> Result:
    """Simulate `requests` (in arrival order, streamed) on the cluster of `config`.

    Parameters
    ----------
    seed : int
        An integer >= 0 (`must_seed`): the same seed, config and requests give the same result.
    timer : StepTimer or factory ``(node, model, tp) -> StepTimer``, optional
        Prices each iteration; default `cluster.cost_model_timer` (the calibrated cost model) per pool.
    progress : callable, optional
        Called with the fraction of requests done (needs ``len(requests)`` or `total_requests`).
    window : SteadyWindow, optional
        The rule for the summary's steady-state window (default `SteadyWindow()`).
    stream_to : folder, optional
        Write each request's record to ``requests.csv`` there as it ends (rows in that order, the
        traffic class last) and each time-series row to ``timeseries.csv``, instead of holding them:
        a run of millions of requests then holds no record. The summary is computed once the run
        ends, from the columns it reads (`STREAMED_COLUMNS`) read back in compact types
        (`records.read_records`: ~110 bytes a request, 440 MB for 4M), and equals the held run's;
        `Result.requests` is that frame, without the columns the summary does not read (nor, in an
        aggregated fleet, the KV transfers' `TRANSFER_COLUMNS`).
    """
    must_seed(seed, "run")
    # (helper-185: None, or a Scenario in its place, failed deep in the cluster, AttributeError: no attribute 'layout')
    must(isinstance(config, EngineConfig), "run", "config", "an EngineConfig, e.g. EngineConfig(model='Llama-3.1-8B', "
         "node='1xH100', tp=1); a Scenario is run_scenario's", config)
    must(stream_to is None or isinstance(stream_to, str | PathLike), "run", "stream_to",
         "a folder's path (a str or Path), or None: the records held", stream_to)
    if not isinstance(requests, Iterable):  # a Workload's `requests` method, say, given for its requests
        raise ConfigError(f"run: 'requests' must be a Workload or an iterable of Request (got {shown(requests)}"
                          + ("; call it, or give the Workload itself)" if callable(requests) else ")"))
    if total_requests is None and isinstance(requests, Sized):
        total_requests = len(requests)  # the tagging stream below has no length
    classes = TrafficClasses()  # each request's `source`, noted as the injector draws it
    tagged = classes.tag(requests)
    ss = np.random.SeedSequence(seed)
    if stream_to is not None:
        folder = Path(stream_to)
        folder.mkdir(parents=True, exist_ok=True)
        with cyclic_gc_paused(), _SourcedRows(folder / STREAMED_FILES[0], classes) as rows, \
                CsvRows(folder / STREAMED_FILES[1], SampleRecord) as samples:
            cluster, end_s, events = simulate(config, tagged, ss, timer=timer, progress=progress,
                                              total_requests=total_requests, records=rows, samples=samples)
        # an aggregated fleet moves no KV: its transfer columns are left out (96 MB for 4M requests)
        moves_kv = config.prefill_pool is not None
        columns = STREAMED_COLUMNS if moves_kv else tuple(c for c in STREAMED_COLUMNS if c not in TRANSFER_COLUMNS)
        req = read_records(folder / STREAMED_FILES[0], rows.rows, columns)
        ts = read_samples(folder / STREAMED_FILES[1])
        summary = summarize(config, cluster, req, ts, end_s, events, window)
        return Result(config=config, seed=seed, requests=req, timeseries=ts, summary=summary, streamed_to=folder)
    with cyclic_gc_paused():
        cluster, end_s, events = simulate(config, tagged, ss, timer=timer, progress=progress,
                                          total_requests=total_requests)
        req = records_to_frame(cluster.records, RequestRecord).sort_values("request_id", kind="stable")
        req = req.reset_index(drop=True)
        req[COLUMN] = classes.column(req.request_id)  # traffic class: split a mixture without a join
        ts = records_to_frame(cluster.samples, SampleRecord)
        summary = summarize(config, cluster, req, ts, end_s, events, window)
    return Result(config=config, seed=seed, requests=req, timeseries=ts, summary=summary)


STREAMED_FILES = ("requests.csv", "timeseries.csv")
"""A streamed run's files in its folder (`run`'s `stream_to`): records, then time-series rows."""

STREAMED_COLUMNS = (
    "arrival_s", "ttft_s", "tpot_mean_s", "tpot_p99_s", "end_s", "e2e_s", "prompt_tokens", "output_tokens",
    "hit_tokens", "outcome", "admit_s", "hit_hbm_tokens", "hit_dram_tokens", "hit_nvme_tokens", "recomputed_tokens",
    "evicted_tokens", "quality_debit_points", "resume_hit_tokens", "transfer_start_s", "transfer_end_s",
    "transfer_bytes")
"""The `RequestRecord` columns `summarize` and the report (`simulator.report`) read: a streamed run's
`Result.requests` holds these and ``request_id``, an aggregated fleet's without `TRANSFER_COLUMNS`
(tested: the summary of such a frame is the held run's)."""

TRANSFER_COLUMNS = ("transfer_start_s", "transfer_end_s", "transfer_bytes")
"""A disaggregated fleet's KV hand-off, per request (NaN, NaN and 0 where nothing moved)."""


class _SourcedRows(CsvRows):
    """`CsvRows` of `RequestRecord`s, each row followed by its request's traffic class (`COLUMN`), as a
    held run's ``requests.csv`` has it."""

    def __init__(self, path: Path, classes: TrafficClasses) -> None:
        super().__init__(path, RequestRecord, header=(*RequestRecord._fields, COLUMN))
        self._classes = classes

    def append(self, row: Sequence[Any], /) -> None:
        super().append((*row, self._classes.of(row[0])))


def _cache_summary(config: EngineConfig, cluster: Cluster, req: pd.DataFrame, done: pd.DataFrame) -> dict[str, Any]:
    """Prefix reuse, tier traffic, retention evictions, quality debit and each layout lever's memory factor.

    ``prefix_hit_ratio_tokens = Σ hit_tokens / Σ prompt_tokens`` over all requests;
    ``prefix_hit_ratio_requests`` = share of requests with a hit (hits at first admission only,
    so ≤ 1); ``resume_hit_tokens`` = tokens a re-admission after a recompute preemption reused
    (recompute savings). Layout factors are
    `simulator.kv.footprint` factors at the mean context (prompt + output) of completed requests.

    The ``cache_*`` figures are the cache strategy's counters (`CacheState.stats`), each summed over the replicas;
    the prefix cache's (none without it), in blocks of ``block_tokens`` (a windowed layout's chain-end windows
    included) and in bytes of one copy (``block_bytes``: what every GPU holding the block takes over its own link
    is not multiplied in):

    - ``cache_evicted_blocks``: HBM blocks the cache gave up to make room, moved a tier down or dropped;
    - ``cache_dropped_blocks``: blocks it discarded from every tier: evicted from the last tier (HBM without
      tiers), or from a tier whose next could not take them (FIFO's victim with the blocks below it);
    - ``cache_reloaded_blocks``: blocks brought back into HBM from a lower tier at admissions, first admissions
      and re-admissions after a recompute preemption alike: ``cache_dram_reloaded_blocks`` plus
      ``cache_nvme_reloaded_blocks`` (each key where its tier is on); ``cache_bytes_up = cache_reloaded_blocks ·
      block_bytes``. The requests' ``hit_dram_tokens`` and ``hit_nvme_tokens`` count first admissions only;
    - ``cache_bytes_down = Σ_moves blocks · block_bytes`` over every move one tier down (HBM -> DRAM, DRAM ->
      NVMe; HBM -> NVMe with no DRAM tier): a block that went HBM -> DRAM -> NVMe counts twice, a dropped one
      never;
    - ``cache_hbm_cached_blocks``, ``cache_dram_cached_blocks``, ``cache_nvme_cached_blocks``: the blocks each tier
      holds **at the end of the run**, after the drain (every sequence finished and its blocks left in the cache),
      not a time-mean. A planner sizing a tier should not read them as its occupancy: HBM's is high after the
      drain (``kv_cache_blocks_mean`` is its time-mean, per replica); a lower tier loses blocks only to reloads
      and to overflow from the last tier, so its count at the end is near its most, above its time-mean (which
      the engine does not integrate).
    """
    prompt = int(req.prompt_tokens.sum()) if len(req) else 0
    out: dict[str, Any] = {
        "prefix_hit_ratio_tokens": float(req.hit_tokens.sum() / prompt) if prompt else math.nan,
        "prefix_hit_ratio_requests": float((req.hit_tokens > 0).mean()) if len(req) else math.nan,
        "hit_hbm_tokens": int(req.hit_hbm_tokens.sum()),
        "hit_dram_tokens": int(req.hit_dram_tokens.sum()),
        "hit_nvme_tokens": int(req.hit_nvme_tokens.sum()),
        "recomputed_tokens": int(req.recomputed_tokens.sum()),
        "resume_hit_tokens": int(req.resume_hit_tokens.sum()),
        "retention_evicted_tokens": int(req.evicted_tokens.sum()),
        "quality_debit_points": float(done.quality_debit_points.mean()) if len(done) else math.nan,
    }
    stats: dict[str, float] = {}
    for rep in cluster.replicas:
        for k, v in rep.cache.stats().items():
            stats[k] = stats.get(k, 0) + v
    out.update({f"cache_{k}": v for k, v in stats.items()})
    model = config.model_spec()
    ctx = int((done.prompt_tokens + done.output_tokens).mean()) if len(done) else 4096
    out["layout_factors"] = footprint(model, config.layout, max(ctx, 1), 1, config.block_tokens).factors
    return out


def _pool_summary(cluster: Cluster, req: pd.DataFrame, span: float, end_s: float) -> dict[str, Any]:
    """Where the fleet's time and memory go, per role, and its KV transfers.

    ``busy_fraction = Σ_r ∫ [a step in flight on r] dt / (span · replicas)``; ``prefill_*`` and
    ``decode_*`` are the same over a disaggregated fleet's prefill and decode replicas (NaN in an
    aggregated fleet), with ``*_kv_utilization`` the pool's ``∫ used dt / (span · Σ blocks)``.
    ``link_utilization`` is the decode replicas' ingress links' mean busy share (a link is
    work-conserving, so it is also bytes moved / capacity); ``transfers``, ``transfer_gb`` (decimal
    GB on one decode GPU's NIC, summed), ``transfer_p99_s`` (start to end) and ``handoff_wait_p99_s``
    (first token to transfer start: the wait for decode room). ``prefill_replicas`` counts the prefill
    replicas, the fleet's last (0 in an aggregated fleet), and ``*_kv_blocks_per_replica`` a replica's blocks
    in each pool (0 where there is none, or decode pools of several sizes): a chart tells the pools apart by
    them.
    """
    reps = cluster.replicas

    def busy(rs: list[Any]) -> float:
        return sum(r.busy_s for r in rs) / (span * len(rs)) if rs and span > 0 else math.nan

    def kv(rs: list[Any]) -> float:
        blocks = sum(r.total_blocks for r in rs)
        return sum(r.used_block_s for r in rs) / (span * blocks) if rs and blocks and span > 0 else math.nan

    pre = [r for r in reps if r.role == PREFILL]
    dec = [r for r in reps if r.role == DECODE_ONLY]
    assert all(r.index >= len(reps) - len(pre) for r in pre)  # the last ones: what `prefill_replicas` tells
    links = cluster.transfers.links if cluster.transfers is not None else []
    if TRANSFER_COLUMNS[0] in req:
        moved = req[req.transfer_start_s.notna()]
    else:  # a streamed aggregated fleet's frame, which leaves the columns out: nothing moved
        moved = pd.DataFrame({c: np.zeros(0) for c in ("arrival_s", "ttft_s", *TRANSFER_COLUMNS)})
    return {
        "busy_fraction": busy(reps),
        "prefill_busy_fraction": busy(pre), "decode_busy_fraction": busy(dec),
        "prefill_kv_utilization": kv(pre), "decode_kv_utilization": kv(dec),
        # a disaggregated fleet's prefill replicas come last (the cluster builds its decode pools first)
        "prefill_replicas": len(pre), "prefill_kv_blocks_per_replica": pre[0].total_blocks if pre else 0,
        "decode_kv_blocks_per_replica": (dec[0].total_blocks if dec and len({r.total_blocks for r in dec}) == 1
                                         else 0),
        "link_utilization": (sum(link.busy_until(end_s) for link in links) / (span * len(links))
                             if links and span > 0 else math.nan),
        "transfers": len(moved),
        "transfer_gb": float(moved.transfer_bytes.sum()) / GB,
        "transfer_p99_s": _pct(moved.transfer_end_s - moved.transfer_start_s, 99),
        "handoff_wait_p99_s": _pct(moved.transfer_start_s - moved.arrival_s - moved.ttft_s, 99),
    }


def _pct(s: pd.Series, q: float) -> float:
    """Percentile `q` of a float column's values without NaN (NaN when none)."""
    return _pcts(s, (q,))[0]


def _pcts(s: pd.Series, qs: tuple[float, ...]) -> list[float]:
    """``[_pct(s, q) for q in qs]`` of a float column, in one `np.percentile` (each quantile the same
    float as alone: the same partition and interpolation) over its values without NaN.

    The values without NaN are a copy (boolean indexing), which `np.percentile` then partitions in place
    (``overwrite_input``) instead of copying again: one temporary of the column's length, not two (a day
    of 4M requests: 32 MB), and the same quantiles, which are order statistics of the same values."""
    a = s.to_numpy(dtype=np.float64)
    a = a[~np.isnan(a)]
    return [float(x) for x in np.percentile(a, qs, overwrite_input=True)] if len(a) else [math.nan] * len(qs)


DONE_COLUMNS = ("arrival_s", "admit_s", "end_s", "ttft_s", "tpot_mean_s", "tpot_p99_s", "e2e_s", "prompt_tokens",
                "output_tokens", "quality_debit_points")
"""What `summarize` reads of the completed requests (`completed_rows`)."""


MOST_AT_ONCE_CHUNK = 1 << 16  # starts `most_at_once` counts at a time


def most_at_once(starts: np.ndarray, ends: np.ndarray) -> int:
    """The most intervals ``[start, end)`` open at once (an end before a start at the same time; 0 for
    none). It is reached right after a start: after the ``i``-th in time order (1-based), ``i`` have
    started and those ending at or before it have ended, so it is
    ``max_i (i − #{ends ≤ starts_(i)})``: two sorts, and binary searches a chunk of starts at a time, in
    two arrays of the intervals' length (a day of 4M requests: 64 MB, where sorting the 8M events as one
    sweep took 350)."""
    starts, ends = np.sort(starts), np.sort(ends)
    most = 0  # all intervals end: the count is back to 0, so the most is at least that
    for lo in range(0, len(starts), MOST_AT_ONCE_CHUNK):
        chunk = starts[lo:lo + MOST_AT_ONCE_CHUNK]
        ended = np.searchsorted(ends, chunk, side="right")
        most = max(most, int((np.arange(lo + 1, lo + 1 + len(chunk)) - ended).max()))
    return most


def summarize(config: EngineConfig, cluster: Cluster, req: pd.DataFrame, ts: pd.DataFrame,
              end_s: float, events: int, window: SteadyWindow | None = None) -> dict[str, Any]:
    """Cluster totals: latency percentiles, throughput, goodput, concurrency, KV use, GPU time, cost.

    Sums are over the completed requests (``done``) unless said; ``span`` (``makespan_s``) = the run's
    end (the clock when its events run out: the last request's end, a completion or a later rejection or
    timeout) − the first arrival.

    Two kinds of throughput. **Makespan-based** (over ``span``, warm-up and drain included, so a finite
    run's drain tail lowers them): ``output_tokens_per_s = Σ_done output_tokens / span``,
    ``tokens_per_s = Σ_done (prompt_tokens + output_tokens) / span``, ``goodput_requests_per_s = good /
    span``. **Sustained** (over the steady-state window, warm-up and drain excluded;
    `simulator.engine.steady`): ``sustained_output_tokens_per_s``,
    ``sustained_requests_per_s``, ``offered_requests_per_s``, with the window in
    ``steady_window_start_s``/``steady_window_end_s``/``steady_window_s`` and ``steady_state`` false,
    the reason in ``steady_state_warning``, when the queue was still growing through it.

    Goodput: ``good`` counts completed requests with ``ttft ≤ slo_ttft_s`` and mean TPOT ``≤ slo_tpot_s``
    (single-token outputs have no TPOT and pass on TTFT); ``goodput_fraction = good / requests``, every
    request, timed out and rejected ones included.

    Latency: ``ttft_pQ_s``, ``tpot_pQ_s``, ``tpot_p99_pQ_s`` and ``e2e_pQ_s`` (Q = 50, 90, 99) are
    `np.percentile` (linear interpolation) over the completed requests, NaN left out, of ``ttft_s``, of
    ``tpot_mean_s`` (a request's mean TPOT, ``(end − first token) / (o − 1)``: the ``tpot_p99_s`` that
    `simulator.planning.meets_slo` and the headline's ``TPOT p99`` read), of the records' own ``tpot_p99_s``
    (each request's p99 gap) and of ``e2e_s``.

    Concurrency: ``max_concurrency`` = the most completed requests between their ``admit_s`` (a
    disaggregated fleet's: the prefill's admission) and ``end_s`` at once (`most_at_once`);
    ``mean_concurrency = Σ_done (end − admit) / span``, ``mean_in_system = Σ_done (end − arrival) / span``.

    Cost: ``gpu_seconds = Σ_pools nodes · gpus a node · span``; ``cost_usd = Σ_pools nodes ·
    node.usd_per_hour · span / 3600`` (``usd_per_hour`` = gpus × $/GPU-hour; the headline's ``$/h`` is
    ``cost_usd / span · 3600``); ``usd_per_million_output_tokens = cost_usd / Σ_done output_tokens · 1e6``
    (the whole span's cost, warm-up and drain included).

    KV metrics are exact time integrals kept by each replica (`Observation._init_integrals`),
    over the makespan ``span`` and summed over replicas ``r`` with pools ``N_r``:

    - ``kv_utilization = Σ_r ∫ used_r dt / (span · Σ_r N_r)``: the share of the fleet's blocks in
      use (sequences' blocks plus the prefix cache's HBM blocks), capacity-weighted in a mixed fleet;
    - ``kv_fragmentation = (B · ∫ P dt − ∫ p dt) / (B · ∫ P dt)``, the rounding waste of private
      blocks only: ``P`` the blocks sequences hold privately for tokens (no cached or shared
      prefix, no per-sequence layout overhead), ``p`` the tokens in them (``B = block_tokens``);
      in ``[0, 1)``. A prefilling sequence counts the tokens its blocks are reserved for;
    - ``kv_cache_share = Σ_r ∫ cache_r dt / (span · Σ_r N_r)`` and ``kv_cache_blocks_mean`` (per
      replica) for the HBM blocks the prefix cache holds, referenced or not;
    - ``kv_evictable_share = Σ_r ∫ evictable_r dt / (span · Σ_r N_r)``, the cache's blocks no
      running sequence references (it gives them up when a sequence needs room), and
      ``kv_referenced_utilization = kv_utilization − kv_evictable_share``, the blocks the fleet
      could not free: what says whether memory binds (`simulator.planning`).

    ``kv_blocks_per_replica`` is the largest replica's pool (they differ in a mixed fleet);
    ``kv_blocks_total`` sums them.

    Prefix reuse, the offload tiers' traffic (``cache_*``: their ``*_cached_blocks`` are the end of the run's,
    not time-means) and the layout's factors: `_cache_summary` defines them.

    Replicas: in the engine (``replicas``, and every ``*_per_replica`` and ``prefill_replicas``) a replica is
    a scheduler with a KV pool of its own: a plan's replica of ``tp · pp`` GPUs runs ``kv_groups · pp`` of
    them (one per DP-attention rank, and one per pipeline batch in flight, vLLM's virtual engines), so one
    DP8-attention replica counts 8. ``plan_replicas = Σ_pools nodes / budget.nodes · budget.replicas`` (each
    pool's `simulator.capacity.KVBudget`: replicas of ``tp · pp`` GPUs on the nodes one spans) counts the plans'
    replicas, as `kvsim fit` and the capacity plans do.
    """
    done = completed_rows(req, DONE_COLUMNS)
    start_s = float(req.arrival_s.min()) if len(req) else 0.0
    span = max(end_s - start_s, 1e-12)
    good = int(((done.ttft_s <= config.slo_ttft_s) & ~(done.tpot_mean_s > config.slo_tpot_s)).sum())
    max_concurrency = most_at_once(done.admit_s.to_numpy(), done.end_s.to_numpy())
    gpus = sum(n * node.gpus for node, n in cluster.nodes)
    usd_per_s = sum(n * node.usd_per_hour for node, n in cluster.nodes) / HOUR_S
    reps = cluster.replicas
    total_blocks = sum(r.total_blocks for r in reps)
    capacity = span * total_blocks
    private_b = sum(r.private_block_s for r in reps) * config.block_tokens
    private_t = sum(r.private_token_s for r in reps)
    kv_util = sum(r.used_block_s for r in reps) / capacity if capacity > 0 else math.nan
    frag = (private_b - private_t) / private_b if private_b > 0 else 0.0
    cache_block_s = sum(r.cache_block_s for r in reps)
    evictable = sum(r.evictable_block_s for r in reps) / capacity if capacity > 0 else math.nan
    out_tokens = int(done.output_tokens.sum())
    cost = usd_per_s * span
    summary: dict[str, Any] = {
        "requests": len(req),
        "completed": len(done),
        "rejected": int((req.outcome == "rejected").sum()),
        "timed_out": int((req.outcome == "timed_out").sum()),
        "replicas": len(cluster.replicas),
        # each pool's replicas as its KV budget places them (`kv_budget`, what `kvsim fit` counts)
        "plan_replicas": sum(n // b.nodes * b.replicas
                             for (_, n), b in zip(cluster.nodes, cluster.budgets, strict=True)),
        "kv_blocks_per_replica": max((r.total_blocks for r in reps), default=0),
        "kv_blocks_total": total_blocks,
        "makespan_s": span,
        "output_tokens_per_s": out_tokens / span,
        "tokens_per_s": (out_tokens + int(done.prompt_tokens.sum())) / span,
        "goodput_requests_per_s": good / span,
        "goodput_fraction": good / len(req) if len(req) else math.nan,
        "max_concurrency": max_concurrency,
        # the preemptions every replica made (helper-169: only requests.csv's column held them, so a sweep over
        # admission or preemption could not show the figure those settings move)
        "preemptions": sum(r.n_preempt for r in reps),
        "mean_concurrency": float((done.end_s - done.admit_s).sum() / span),
        "mean_in_system": float((done.end_s - done.arrival_s).sum() / span),
        "kv_utilization": kv_util,
        "kv_fragmentation": frag,
        "kv_cache_share": cache_block_s / capacity if capacity > 0 else math.nan,
        "kv_cache_blocks_mean": cache_block_s / span / len(reps) if reps else math.nan,
        "kv_evictable_share": evictable,
        "kv_referenced_utilization": kv_util - evictable,
        "gpu_seconds": gpus * span,
        "cost_usd": cost,
        "usd_per_million_output_tokens": cost / out_tokens * 1e6 if out_tokens else math.nan,
        "events": events,
        "events_per_request": events / len(req) if len(req) else math.nan,
    }
    summary.update(_pool_summary(cluster, req, span, end_s))
    summary.update(steady_state(req, window).as_summary())
    summary.update(_cache_summary(config, cluster, req, done))
    cols = (("ttft_s", "ttft"), ("tpot_mean_s", "tpot"), ("tpot_p99_s", "tpot_p99"), ("e2e_s", "e2e"))
    qs = (50, 90, 99)
    for col, name in cols:
        for q, value in zip(qs, _pcts(done[col], qs), strict=True):
            summary[f"{name}_p{q}_s"] = value
    return summary
