"""Studies over a scenario: one simulated run per hardware kind, and the simulated points of
the concurrency-collapse chart. The report and the CLI call these; so can a notebook.
"""

from __future__ import annotations

import contextlib
import pickle
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from os import PathLike
from pathlib import Path

import numpy as np
import pandas as pd

from hardware.catalog import NodeSpec, load_catalog
from simulator.engine import EngineConfig, Result, run
from simulator.engine.caches import offload_tiers
from simulator.engine.config import PoolConfig, SchedulerConfig
from simulator.engine.result import must_seed
from simulator.errors import ConfigError, must, must_differ, shown
from simulator.limits import MAX_REQUESTS
from simulator.models import ModelSpec, weight_only_note, weight_precision
from simulator.progress import GENERATE_COST, Meter, Progress
from simulator.scenario import Scenario
from workloads import Workload
from workloads.request import Request


def tiers_phrase(cache_params: Mapping[str, object]) -> str:
    """The offload tiers a cache's parameters turn on, as a report names them (``dram + nvme tiers``, ``dram
    tier``), or ``""`` for none (`offload_tiers`)."""
    tiers = offload_tiers(cache_params)
    return f"{' + '.join(tiers)} tier{'s' * (len(tiers) > 1)}" if tiers else ""


@dataclass(frozen=True, slots=True, kw_only=True)
class ScenarioRun:
    """A scenario's workload simulated on each of its hardware kinds: what `run_scenario` returns.

    ``scenario`` and ``seed`` reproduce it; ``workload`` is the one workload every fleet replayed (its
    ``cut_at_s`` says where a trace's window left later rows out); ``results`` holds a `Result` per fleet,
    keyed by its node kind (``"8xH100"``) or, for a disaggregated one, `Scenario.fleet_label`. ``headline()``
    is the table ``kvsim run`` prints, one row per fleet."""

    scenario: Scenario
    seed: int
    workload: Workload
    results: dict[str, Result]  # by fleet: the node key, or `Scenario.fleet_label` for a disaggregated fleet

    def subject(self) -> str:
        """`Scenario.subject` for a chart of this run: a trace replay its window did not cut (the trace ran out
        first, `Workload.cut_at_s` None) is said by how far it reached, its last arrival (helper-188: a 600 s
        trace replayed 4× as fast read "up to 600 s of its replay" for the 150 s it spans)."""
        return self.scenario.subject(replayed_s=self.workload.reached_s)

    def steady_notes(self) -> list[str]:
        """Per hardware kind: the steady window the sustained figures cover, and any not-steady warning."""
        notes = []
        for hw, r in self.results.items():
            s = r.summary
            offered = (f"{s['offered_requests_per_s']:,.3g} req/s offered" if s["offered_requests_per_s"] > 0 else
                       f"all {s['requests']:,} requests arrived at t = 0")  # an offline run: its queue empties
            note = (f"{hw}: steady window [{s['steady_window_start_s']:,.1f}, {s['steady_window_end_s']:,.1f}] s, "
                    f"{offered}, {s['sustained_requests_per_s']:,.3g} req/s completed")
            if s["steady_queued"]:  # how far the queue grew: what the steady verdict weighs
                note += (f", {s['steady_admissions']:,} admissions there for {s['steady_queued']:,} queued arrivals "
                         f"({s['steady_admissions'] / s['steady_queued']:.1%})")
            notes.append(note + (f"; {s['steady_state_warning']}" if s["steady_state_warning"] else ""))
        return notes

    def cache_notes(self) -> list[str]:
        """Per fleet with the prefix cache: the share of prompt tokens it served, the blocks it evicted from HBM,
        and what each offload tier brought back (or that it brought nothing back: the tier changed nothing)."""
        sc = self.scenario
        if sc.cache.strategy == "none":
            return []
        tiers = tiers_phrase(sc.cache.params)
        notes = []
        for hw, r in self.results.items():
            s = r.summary
            note = (f"{hw}: the prefix cache served {s['prefix_hit_ratio_tokens']:.1%} of prompt tokens and evicted "
                    f"{s['cache_evicted_blocks']:,} blocks from HBM")
            if tiers:
                back = s["cache_reloaded_blocks"]
                each = [f"{t} {s[f'cache_{t}_reloaded_blocks']:,}" for t in offload_tiers(sc.cache.params)
                        if f"cache_{t}_reloaded_blocks" in s]  # each tier's, at any admission (helper-198)
                split = f"{', '.join(each)}; " if len(each) > 1 else ""
                note += (f"; the {tiers} brought back {back:,} blocks ({split}{s['cache_bytes_up'] / 1e9:,.1f} GB)"
                         if back else f"; nothing came back from the {tiers}, so it changed nothing at this load")
            notes.append(note)
        return notes

    def headline(self) -> pd.DataFrame:
        """One row per hardware kind: the figures a planner reads first.

        ``sustained out tok/s`` is measured over the steady-state window (warm-up and drain left
        out, `simulator.engine.steady`; ``steady`` is "no" when the queue grew there: its admissions fell short of
        `SteadyWindow.min_admission_ratio` (90 % by default) of the arrivals that queued there (`steady_notes`
        gives the share), or the window held too few completions to tell, or under 90 % as many completions as
        queued arrivals: the batch still filling, a run too short to tell),
        ``makespan out tok/s`` over first arrival to last completion (the drain tail lowers it).
        ``meets SLO`` is `simulator.planning.meets_slo`, the verdict ``kvsim sweep`` and the capacity plan use.

        The other figures are the fleet's summary's (`simulator.engine.result.summarize` gives each formula):
        ``TTFT p99 (s)`` = ``ttft_p99_s`` and ``TPOT p99 (ms)`` = 1000 · ``tpot_p99_s``, the 99th percentiles
        over the completed requests of their TTFT and of their mean TPOT; ``goodput`` = ``goodput_fraction``,
        the requests completed within both SLOs over every request; ``max streams`` = ``max_concurrency``;
        ``KV util`` = ``kv_utilization``, the time mean share of the fleet's KV blocks in use over the makespan;
        ``$/h`` = ``cost_usd / makespan_s · 3600`` = Σ nodes · GPUs a node · $/GPU-hour; ``$/Mtok out`` =
        ``usd_per_million_output_tokens`` = ``$/h`` · makespan hours / completed output Mtokens.

        The frame's ``attrs[SLO_LIMITS]`` maps ``TTFT p99 (s)`` and ``TPOT p99 (ms)`` to their SLOs in those units:
        the printed tables write each p99 with the digits that put it on its side of its SLO
        (`simulator.units.figure_against`), the CSV the floats.
        """
        from simulator.planning import meets_slo  # planning imports this module

        rows = []
        for hw, r in self.results.items():
            s = r.summary
            # the p99s, as sweep and compare judge them (the `steady` column says whether the queue kept up; the
            # capacity searches also fail a growing queue: `planning.keeps_up`)
            slo_ok = meets_slo(r, self.scenario.slo.ttft_p99_s, self.scenario.slo.tpot_p99_s)
            rows.append({
                "hardware": hw, "nodes": fleet_nodes(r.config), "plan": plan_label(r.config),
                "weights": weights_column(r.config),
                "requests": s["requests"],
                "completed": s["completed"], "rejected": s["rejected"], "timed out": s["timed_out"],
                "TTFT p99 (s)": s["ttft_p99_s"], "TPOT p99 (ms)": s["tpot_p99_s"] * 1e3,
                "sustained out tok/s": s["sustained_output_tokens_per_s"],
                "makespan out tok/s": s["output_tokens_per_s"], "steady": "yes" if s["steady_state"] else "no",
                "goodput": s["goodput_fraction"],
                "max streams": s["max_concurrency"], "KV util": s["kv_utilization"],
                "$/h": s["cost_usd"] / s["makespan_s"] * 3600, "$/Mtok out": s["usd_per_million_output_tokens"],
                "meets SLO": "yes" if slo_ok else "no",
            })
        table = pd.DataFrame(rows)
        # each p99's SLO, in its column's unit: a printed table shows the p99 with the digits that put it on its
        # side of the SLO (`simulator.units.figure_against`; helper-193: a TPOT p99 of 100.4 ms read '100' beside
        # a 100 ms SLO and 'meets SLO no')
        table.attrs[SLO_LIMITS] = {"TTFT p99 (s)": self.scenario.slo.ttft_p99_s,
                                   "TPOT p99 (ms)": self.scenario.slo.tpot_p99_s * 1e3}
        return table

    def fleet_comparison(self) -> pd.DataFrame:
        """One row per fleet: cost and latency against the SLOs, and where its time and memory go.

        ``busy`` is the share of time replicas have a step in flight (prefill and decode replicas
        apart in a disaggregated fleet, the same figure twice in an aggregated one), ``KV`` the
        share of their pools in use (time means), ``link util`` the decode replicas' ingress links'
        busy share (`simulator.engine.result._pool_summary`); ``meets_slo`` is `simulator.planning.meets_slo`.
        """
        from simulator.planning import meets_slo

        slo = self.scenario.slo
        rows = []
        for hw, r in self.results.items():
            s = r.summary
            split = r.config.prefill_pool is not None
            rows.append({
                "fleet": hw, "disaggregated": split, "nodes": fleet_nodes(r.config),
                "usd_per_hour": s["cost_usd"] / s["makespan_s"] * 3600,
                "usd_per_million_output_tokens": s["usd_per_million_output_tokens"],
                "ttft_p99_s": s["ttft_p99_s"], "tpot_p99_s": s["tpot_p99_s"],
                "ttft_p99_of_slo": s["ttft_p99_s"] / slo.ttft_p99_s,
                "tpot_p99_of_slo": s["tpot_p99_s"] / slo.tpot_p99_s,
                "meets_slo": meets_slo(r, slo.ttft_p99_s, slo.tpot_p99_s),
                "goodput_fraction": s["goodput_fraction"],
                "prefill_busy": s["prefill_busy_fraction"] if split else s["busy_fraction"],
                "decode_busy": s["decode_busy_fraction"] if split else s["busy_fraction"],
                "prefill_kv": s["prefill_kv_utilization"] if split else s["kv_utilization"],
                "decode_kv": s["decode_kv_utilization"] if split else s["kv_utilization"],
                "link_util": s["link_utilization"], "handoff_wait_p99_s": s["handoff_wait_p99_s"],
                "transfer_p99_s": s["transfer_p99_s"],
            })
        return pd.DataFrame(rows)


SLO_LIMITS = "slo_limits"
"""The key of a table's ``attrs`` (`ScenarioRun.headline`) that maps a column to the SLO its figures are judged
against, in the column's unit: a printed table writes them with `simulator.units.figure_against`."""


def slo_figures(df: pd.DataFrame, missing: str) -> dict[str, list[str]]:
    """Each column of `df` that its ``attrs[SLO_LIMITS]`` judges against an SLO, as a printed table writes it: a
    figure with the digits that put it on its side of the SLO (`simulator.units.figure_against`), `missing` where
    none was measured (NaN). What ``kvsim run``'s stdout and summary.md's tables both show of a headline's p99s."""
    from simulator.units import figure_against

    limits = df.attrs.get(SLO_LIMITS, {})
    return {c: [missing if x != x else figure_against(x, limit) for x in df[c]] for c, limit in limits.items()
            if c in df}


def fleet_pools(config: EngineConfig) -> list[PoolConfig]:
    """Every pool of the fleet, the prefill pool included."""
    return [*config.pools, *([config.prefill_pool] if config.prefill_pool is not None else [])]


def fleet_nodes(config: EngineConfig) -> int:
    """Nodes of every pool, the prefill pool included."""
    return sum(p.n_nodes for p in fleet_pools(config))


def weights_column(config: EngineConfig) -> str:
    """The weights' precision (`weight_precision`), and the GPUs of the fleet that run its GEMMs weight-only
    (`weight_only_note`): ``fp4 (bf16 GEMMs on H100)``."""
    if not isinstance(config.model, ModelSpec):
        return ""
    note = weight_only_note(config.model, [p.node.gpu for p in fleet_pools(config) if isinstance(p.node, NodeSpec)])
    return weight_precision(config.model) + (f" ({note})" if note else "")


def plan_label(config: EngineConfig) -> str:
    """The plan, ``P <prefill plan> / D <decode plan>`` for a disaggregated fleet."""
    if config.prefill_pool is None:
        return config.plan.label
    return f"P {config.prefill_pool.plan.label} / D {config.plan.label}"


def must_scenario(scenario: Scenario, where: str) -> None:
    """Refuse a `scenario` that is no `Scenario` (helper-159: a scenario file's name failed as an AttributeError on
    ``'str' object has no attribute 'seed'``): a file or shipped name is read by `load_scenario` first."""
    example = shown(str(scenario)) if isinstance(scenario, str | PathLike) else "'default'"
    must(isinstance(scenario, Scenario), where, "scenario", f"a Scenario, e.g. load_scenario({example})", scenario)


def must_stream_folder(stream_to: str | Path, where: str) -> None:
    """Refuse a `stream_to` that is no path, or whose nearest existing part is a file (it failed at the first
    fleet's run as a NotADirectoryError): a folder, new or existing."""
    must(isinstance(stream_to, str | PathLike), where, "stream_to", "a folder's path (a str or Path)", stream_to)
    existing = next((p for p in (Path(stream_to), *Path(stream_to).parents) if p.exists()), None)
    must(existing is None or existing.is_dir(), where, "stream_to", "a folder, new or existing, not a file" + (
        "" if existing == Path(stream_to) else f" (its part {shown(str(existing))} is one)"), str(stream_to))


def node_kinds(scenario: Scenario, hardware: Sequence[str] | None, where: str) -> list[str]:
    """The catalog's node keys (``cluster.catalog``'s too) of the kinds `hardware` names, the scenario's
    own when None. A GPU name alone is its largest node (``H100`` -> ``8xH100``): results are keyed and
    labelled by the node, as the CLI prints them. `hardware` must name at least one kind, each once
    (``H100`` and ``8xH100`` are one); `where` (``--hardware``, ``run_scenario: hardware``) names it in errors.
    """
    if hardware is None:
        return [n.key for n in scenario.nodes()]
    names = tuple(hardware) if not isinstance(hardware, str) else ()
    if not names or not all(isinstance(h, str) for h in names):
        raise ConfigError(f"{where}: must be a list of at least one node kind, e.g. ['8xH100', 'B200'] "
                          f"(None: the scenario's; got {shown(hardware)})")
    try:
        nodes = scenario.nodes(names)
    except ConfigError as exc:  # an unknown kind: say which argument named it
        raise ConfigError(f"{where}: {exc}") from None
    keys = [n.key for n in nodes]
    must_differ(names, keys, where, "node kind")
    return keys


REPORT_COLUMNS = ("request_id", "outcome", "ttft_s", "tpot_mean_s", "prompt_tokens", "output_tokens")
"""The per-request columns `simulator.report.write_report` reads of a fleet's result (its latency chart, the
provider's costs): a streamed `run_scenario` keeps these alone (~33 bytes a request: int64 id, a 1-byte
category, two float64 and two int32)."""


def run_scenario(scenario: Scenario, seed: int | None = None, *, hardware: Sequence[str] | None = None,
                 progress: Progress | None = None, stream_to: str | Path | None = None,
                 before_writing: Callable[[list[str]], None] | None = None) -> ScenarioRun:
    """Generate (or read) the workload once and simulate it on every hardware kind (and, with a
    ``[disaggregation]`` section, on each kind's disaggregated fleet: `Scenario.fleets`).

    `seed` is an integer >= 0 (None: the scenario's). `hardware` lists node kinds (None: the
    scenario's ``cluster.hardware``), at least one, each once; a GPU name alone is its largest node and
    the results are keyed by the node (``["H100"]`` -> ``results["8xH100"]``: `node_kinds`).
    `progress` receives the fraction done: generating the workload counts `GENERATE_COST` of one
    fleet's run, each fleet's run one, advanced by its share of requests ended.

    With `stream_to`, each fleet's records and time-series rows are written to its folder there
    (``stream_to/<fleet>/requests.csv``, ``timeseries.csv``) as the run goes instead of held
    (`simulator.engine.run`'s ``stream_to``), and a trace may hold up to `MAX_STREAMED_REQUESTS`
    requests (`Workload.streamed`), unless the scenario's report asks for a study that holds it
    (`refuse_held_studies`). A streamed fleet's `Result.requests` then keeps only `REPORT_COLUMNS`, the
    report's, once its summary is made (the whole records are its CSV, which `Result.steady` reads back):
    ~33 bytes a request where the summary read ~110 (`simulator.engine.run`). While the fleets after it
    run, even those and its time series wait on disk, in a temporary folder (`_spilled`), and are read
    back once the last fleet is done: no fleet's frames are held while a later one makes its summary.
    `before_writing`, when given, is called with the fleets' labels (the results' keys: a streamed run's
    folders) once the workload is read and checked, before the first fleet's run (which, streamed, writes).
    """
    must_scenario(scenario, "run_scenario")
    if stream_to is not None:  # before the workload is read
        must_stream_folder(stream_to, "run_scenario")
    seed = scenario.seed if seed is None else seed
    must_seed(seed, "run_scenario")
    kinds = node_kinds(scenario, hardware, "run_scenario: hardware")
    fleets = [fleet for hw in kinds for fleet in scenario.fleets(hw)]
    meter = Meter(progress, [GENERATE_COST + len(fleets)])
    workload = scenario.load_workload(seed)
    if stream_to is not None:
        workload = workload.streamed()
    n = scenario.check_context(workload)
    if stream_to is not None:
        refuse_held_studies(scenario, n)
    if before_writing is not None:
        before_writing([label for label, _ in fleets])
    meter.add(GENERATE_COST)
    results: dict[str, Result] = {}
    spilled: dict[str, Path] = {}  # a fleet's report frames on disk while the later fleets run (`_spilled`)
    spills = stream_to is not None and len(fleets) > 1
    with tempfile.TemporaryDirectory(prefix="kvsim-spill-") if spills else contextlib.nullcontext("") as folder:
        for i, (label, config) in enumerate(fleets):
            result = run(config, workload, seed, progress=meter.piece(1.0), total_requests=n,
                         stream_to=None if stream_to is None else Path(stream_to) / label)
            if stream_to is not None:
                result = replace(result, requests=result.requests[list(REPORT_COLUMNS)])
                if i < len(fleets) - 1:  # fleets still to run
                    spilled[label] = Path(folder) / f"{i}.pickle"
                    result = _spilled(result, spilled[label])
            results[label] = result
            meter.add(1.0)
        for label, path in spilled.items():
            results[label] = _unspilled(results[label], path)
    meter.finish()
    return ScenarioRun(scenario=scenario, seed=seed, workload=workload, results=results)


def _spilled(result: Result, path: Path) -> Result:
    """`result` with its report frames (`REPORT_COLUMNS`, ~33 bytes a request, and its time series, ~64
    bytes a sample) pickled to `path` and left out, empty, until `_unspilled`: a streamed `run_scenario`
    holds no fleet's frames while the next fleets run and make their summaries (a day's 4M requests and
    614,264 samples: 171 MB; a day on two node kinds peaked at 999 MiB with them on disk, 1,161 MiB held)."""
    with path.open("wb") as f:  # a file of its own, in a folder of its own: read back only by `_unspilled`
        pickle.dump((result.requests, result.timeseries), f, protocol=pickle.HIGHEST_PROTOCOL)
    return replace(result, requests=result.requests.iloc[:0].copy(), timeseries=result.timeseries.iloc[:0].copy())


def _unspilled(result: Result, path: Path) -> Result:
    """`result` with the frames `_spilled` wrote to `path` read back (pickled: bit for bit those it left out)."""
    with path.open("rb") as f:
        requests, timeseries = pickle.load(f)
    return replace(result, requests=requests, timeseries=timeseries)


def refuse_held_studies(scenario: Scenario, n: int) -> None:
    """Refuse a streamed workload of `n` requests, over `MAX_REQUESTS`, whose ``[report]`` asks for a
    study that holds it (the capacity search, the TTL break-even)."""
    held = [k for k in ("capacity", "breakeven") if getattr(scenario.report, k)]
    if n > MAX_REQUESTS and held:
        trace = Path(scenario.workload.trace).name if scenario.workload.trace else "the workload"
        raise ConfigError(f"{scenario.where}: report.{held[0]} = true: allowed up to {MAX_REQUESTS:,} requests, which "
                          f"it holds ({trace} has {n:,}); set {' and '.join(f'report.{k}' for k in held)} = false "
                          "to stream it")


def saturating_requests(context_tokens: int, output_tokens: int, n: int, rate_per_s: float,
                        rng: np.random.Generator) -> list[Request]:
    """`n` independent requests of one length arriving as a Poisson stream (no shared prefix)."""
    times = np.cumsum(rng.exponential(1 / rate_per_s, n))
    prompt = context_tokens - output_tokens
    return [Request(id=i, arrival_s=float(t), prompt_tokens=prompt, output_tokens=output_tokens,
                    segments=((-(i + 1), prompt),)) for i, t in enumerate(times)]


def simulated_collapse(config: EngineConfig, contexts: Sequence[int], seed: int = 0,
                       output_fraction: float = 1 / 8, max_output_tokens: int = 4096,
                       requests_per_point: int = 400, offered_fraction: float = 0.8, *,
                       progress: Progress | None = None) -> pd.DataFrame:
    """Simulated concurrency and goodput per context length, beside the analytic maximum (one replica's nodes).

    The runs take one replica's nodes, ``nodes``: one, or those a multi-node plan's replica spans (TP16 on 8-GPU
    nodes: 2). ``analytic_streams``, ``peak_streams`` and ``mean_streams`` are counts on all of them, not per node
    (`simulator.collapse.collapse_table`'s ``streams_on_nodes``; its ``max_streams`` and the chart divide by
    ``nodes``).

    Two runs per context ``n`` (requests of prompt ``n − o`` and output ``o``, ``o`` being
    `output_fraction` of ``n``, at most `max_output_tokens`):

    - **flood**: requests arrive far faster than they can be served and there is no batch-size
      cap, so memory limits how many run at once (at short contexts the prefill token budget may
      bind first): ``peak_streams`` is what paged allocation and the scheduler achieve against the
      analytic maximum. Sequences hold between ``n − o`` and
      ``n`` tokens while they decode, so the peak may pass the all-at-full-context bound by up to
      ``1 / (1 − output_fraction)``.
    - **at capacity**: Poisson arrivals offered at `offered_fraction` of the request rate the node
      sustains with ``m = min(analytic max streams, max_num_seqs)`` streams decoding (at 4k on 8×H100,
      Llama-3.1-70B: min(324, 256)), under the config's own scheduler limits. A request takes the node
      for its prefill and for its share of ``o`` decode steps of ``m`` streams, so

          capacity_rps = 1 / (prefill_s(n − o) + o · step_s / m) = m / (m · prefill_s(n − o) + o · step_s)
          step_s = a(m) + b(m) · m · priced(n − o/2)  (`decode_coefficients`: a full batch at mean context;
                                                      `StepModel.priced_context`: what it reads under a window)
          offered_rps = offered_fraction · capacity_rps

      (`simulator.capacity.sustained_requests_per_s`; to first order: chunked prefill adds its compute to
      the steps it shares). ``prefill_s`` is one prompt's prefill alone, a floor under its TTFT. ``mean_streams`` is the
      concurrency achieved (the run's ``mean_concurrency``: Σ (end − admission) / makespan) and
      ``goodput_rps`` the requests that meet the config's SLOs per second of the run's makespan (its
      ``goodput_requests_per_s``: first arrival to last end, the drain included, so it can read below
      ``offered_rps`` where every request meets them, 4.03 against 4.12 at 4k on 8×H100 in the default
      scenario; a Poisson draw's own rate differs from ``offered_rps`` too, 0.644 against 0.617 at 16k);
      ``goodput_fraction`` their share of the requests, ``ttft_ok_fraction`` and ``tpot_ok_fraction``
      the shares of requests that completed within each SLO alone (TPOT on the mean, as goodput).
      Until 2026-12-04 the rate was ``f · m / (prefill_s + o · step_s)``, ``f · m`` streams by Little's
      law, as if prefill ran beside the batch rather than in its time: at 4k on 8×H100 that offered 2.45
      times what the node sustains, and the goodput measured a growing queue.

    `progress` receives the fraction done, each run weighed by its requests.
    """
    from simulator.capacity import kv_budget, max_streams, sustained_requests_per_s
    from simulator.cost import StepModel, load_params

    rng = np.random.default_rng(np.random.SeedSequence(seed))
    node = config.node if not isinstance(config.node, str) else load_catalog().node(config.node)
    model = config.model_spec()
    budget = kv_budget(node, model, memory_utilization=config.memory_utilization, plan=config.plan)
    # one replica's nodes (one node, or the nodes a multi-node plan spans)
    flood = replace(config, n_nodes=budget.nodes, more_pools=(), sample_interval_s=0.0,
                    scheduler=replace(config.scheduler, max_num_seqs=1_000_000,
                                      max_num_batched_tokens=max(config.scheduler.max_num_batched_tokens, 8192)))
    steady = replace(config, n_nodes=budget.nodes, more_pools=())
    timer = StepModel(node.gpu, model, config.layout, config.tp, load_params(node.gpu.key), plan=config.plan,
                      node=node)
    streams = [max_streams(budget, model, config.layout, int(n), config.block_tokens) for n in contexts]
    sizes = [max(requests_per_point, 2 * m) for m in streams]  # enough to fill the pool twice over
    meter = Meter(progress, [sum(n_req * (1 + (m >= 1)) for n_req, m in zip(sizes, streams, strict=True))])
    rows = []
    for n, m, n_req in zip(contexts, streams, sizes, strict=True):
        out = max(1, min(max_output_tokens, int(n * output_fraction)))
        s = run(flood, saturating_requests(int(n), out, n_req, rate_per_s=1e3, rng=rng), seed,
                progress=meter.piece(n_req)).summary
        meter.add(n_req)
        row = {"hardware": node.key, "context_tokens": int(n), "nodes": budget.nodes, "analytic_streams": m,
               "peak_streams": s["max_concurrency"], "prefill_s": float("nan"), "capacity_rps": float("nan"),
               "offered_rps": float("nan"), "mean_streams": float("nan"), "goodput_rps": float("nan"),
               "goodput_fraction": float("nan"), "ttft_ok_fraction": float("nan"), "tpot_ok_fraction": float("nan")}
        if m >= 1:
            batch = min(m, config.scheduler.max_num_seqs)
            prefill_s = timer.prefill_s(n - out, 0)
            capacity = sustained_requests_per_s(timer, batch, n - out, out, n - out / 2)
            rate = offered_fraction * capacity
            at = run(steady, saturating_requests(int(n), out, n_req, rate_per_s=rate, rng=rng), seed,
                     progress=meter.piece(n_req))
            meter.add(n_req)
            c, done = at.summary, at.requests[at.requests.outcome == "completed"]
            row.update(prefill_s=prefill_s, capacity_rps=capacity, offered_rps=rate, mean_streams=c["mean_concurrency"],
                       goodput_rps=c["goodput_requests_per_s"],
                       goodput_fraction=c["goodput_fraction"],
                       ttft_ok_fraction=float((done.ttft_s <= steady.slo_ttft_s).sum() / len(at.requests)),
                       tpot_ok_fraction=float((~(done.tpot_mean_s > steady.slo_tpot_s)).sum() / len(at.requests)))
        rows.append(row)
    meter.finish()
    return pd.DataFrame(rows)


__all__ = ["ScenarioRun", "SchedulerConfig", "fleet_nodes", "node_kinds", "plan_label", "run_scenario",
           "saturating_requests", "simulated_collapse"]
