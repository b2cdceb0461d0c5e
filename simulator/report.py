"""The report folder of a scenario run: ``summary.md`` with the headline table and charts,
per-hardware request and time-series data, the resolved configuration, seed and version.

Layout of ``OUT/``::

    summary.md            headline, studies, charts (relative links)
    headline.csv          one row per hardware kind
    scenario.json         the resolved scenario, engine configs, seed, kvsim version
    <hardware>/           requests.csv, timeseries.csv, summary.json (per `Result.write`)
    latency.png, timeseries.png, collapse.png + collapse.csv, breakeven.png + breakeven.csv +
    breakeven_provider.csv + breakeven_provider_inputs.csv (what the provider's table is priced from),
    capacity.png + capacity.csv (when those studies are on), fleets.png + fleets.csv (with a
    ``[disaggregation]`` section: aggregated vs disaggregated)
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd
from matplotlib.figure import Figure

from hardware.catalog import price_note
from simulator import __version__, jsonout
from simulator.charts import collapse_figure, latency_figure, timeseries_figure
from simulator.charts.run import SplitPools
from simulator.collapse import collapse_table, default_plans
from simulator.engine import SteadyWindow
from simulator.engine.caches.prefix import dram_share
from simulator.kv import parse_layout
from simulator.placement import as_run
from simulator.progress import Meter, Phases, Progress
from simulator.study import (
    ScenarioRun,
    SchedulerConfig,
    fleet_nodes,
    plan_label,
    simulated_collapse,
    slo_figures,
    tiers_phrase,
)
from simulator.units import GB, figure
from workloads.workload import cut_note, skipped_note

if TYPE_CHECKING:
    from simulator.billing.compare import TTLComparison
    from simulator.billing.profiles import PriceProfile
    from simulator.billing.provider import ProviderCosts
    from simulator.engine import EngineConfig, Result
    from simulator.scenario import Scenario

DPI = 110
# the shares of a phase's time its chart takes (the default scenario, 2 cores): the collapse chart 0.6 s
# after 2.1 s of simulation; the break-even chart 0.1 s after a 1.0 s replay
COLLAPSE_CHART_SHARE = 0.2
BREAKEVEN_CHART_SHARE = 0.1
_WINDOW = SteadyWindow()  # the steady window a run's report describes (`simulator.engine.steady`'s defaults)
# what the headline's columns that are not self-explanatory measure (summary.md, under the table)
HEADLINE_COLUMNS = ("`goodput`: the share of requests that completed within both SLOs (each its own TTFT and mean "
                    "TPOT); `max streams`: the most requests running at once (observed, admission to end, a "
                    "disaggregated fleet's hand-offs waiting for a decode replica included; `kvsim "
                    "fit` gives what memory can hold); `KV util`: the time mean share of the fleet's KV blocks in "
                    "use, the prefix cache's unreferenced blocks included (summary.json's "
                    "`kv_referenced_utilization` leaves them out); "
                    "`$/h`: the fleet's GPU-hours priced; `$/Mtok out`: that cost over the whole run (makespan) per "
                    "million output tokens, warm-up and drain included; `meets SLO`: both p99s within the SLOs and "
                    "nothing rejected or timed out.\n")


def _save(fig: Figure, path: Path) -> str:
    fig.savefig(path, dpi=DPI)
    import matplotlib.pyplot as plt

    plt.close(fig)
    return path.name


def _scheduler_line(sched: SchedulerConfig) -> str:
    """The scheduler's limits and admission policy in words, for the report's preamble."""
    if sched.admission == "reserve":
        out = "each request's own output" if not sched.reserve_output_tokens else \
            f"max({sched.reserve_output_tokens:,}, its output) tokens"
        admit = f"admission reserves prompt + {out} (TensorRT-LLM's GUARANTEED_NO_EVICT; never preempts)"
    else:
        admit = f"admission on the prompt's blocks, {sched.preemption} preemption on growth (vLLM, SGLang)"
    return (f"{admit}; at most {sched.max_num_seqs:,} sequences and {sched.max_num_batched_tokens:,} tokens "
            f"a step, watermark {sched.watermark:g}")


def _router_line(sc: Scenario) -> str:
    """The router that spread the requests over each fleet's replicas, and every parameter it ran with, for the
    report's preamble: as the scenario set it (``prefix-affinity (max_imbalance_tokens = 4096)``) or its default,
    said as one (``prefix-affinity (max_imbalance_tokens = 65536, the default)``; helper-203: the default bound
    went unsaid, and a run that set it to 65536 read otherwise than one that left it)."""
    from simulator.engine.routers import make_router

    router = make_router(sc.router.name, **dict(sc.router.params))
    given = sc.router.params
    params = "; ".join(f"{f.name} = {getattr(router, f.name)!r}" + ("" if f.name in given else ", the default")
                       for f in dataclasses.fields(router) if f.init) if dataclasses.is_dataclass(router) else ""
    return sc.router.name + (f" ({params})" if params else "")


def _cache_line(sc: Scenario) -> str:
    """The KV cache strategy each fleet runs, for the report's preamble: ``prefix (lru eviction, dram + nvme
    tiers: dram 0.25 of host DRAM, swap space the rest)``, or ``none (every prompt prefilled whole)``.

    A DRAM tier's share of host DRAM is said (helper-197: two runs at ``dram_fraction`` 0.25 and 0.5 read alike)."""
    if sc.cache.strategy == "none":
        return "none (every prompt prefilled whole)"
    params = dict(sc.cache.params)
    eviction = params.get("eviction", "lru")
    share = dram_share(bool(params.get("dram")), params.get("dram_fraction"))
    dram = f": dram {share:g} of host DRAM, swap space the rest" if share else ""
    return f"{sc.cache.strategy} ({eviction} eviction, {tiers_phrase(sc.cache.params) or 'no offload tier'}{dram})"


def _fleet_key(hardware: str, config: EngineConfig) -> str:
    """A fleet as a chart's legend names it: ``8xH100 (2 nodes, TP8)``."""
    n = fleet_nodes(config)
    return f"{hardware} ({n} node{'s' * (n != 1)}, {plan_label(config)})"


def _layout_line(sc: Scenario) -> str:
    """The KV layout each fleet runs and what its levers cost, for the report's preamble (helper-151: a run under
    ``fp8+cross-layer:0.5`` read as lossless, no word of its layout or its 1.1-point debit): ``fp8+cross-layer:0.5
    (levers fp8 0.1 points, cross-layer 1 point and retraining: a stated accuracy debit of up to 1.1 points on
    long-context benchmarks, simulator/data/levers.toml)``; a compression's debit only where it compressed
    (`simulator.levers.window_debit_points`). A part that changes the model with no entry there (``gqa:4``,
    ``mqa``: fewer KV heads) is said to have no stated debit, not none (helper-153); a lever at another parameter
    than its source measured (``cross-layer:0.1``) is said to be charged its source's debit, a guide (helper-181: as
    fit and compare say, `simulator.levers.unsourced_notes`)."""
    from simulator.levers import layout_levers, unpriced_parts, unsourced_notes

    layout, model = parse_layout(sc.cache.layout), sc.model_spec()
    chosen = layout_levers(layout, model)
    # fewer KV heads than the model's (gqa:4 of 8, mqa); gqa:8 of 8 is the model as trained (helper-154)
    unpriced = unpriced_parts(layout, model)
    unstated = (f"; simulator/data/levers.toml states no debit for {', '.join(unpriced)}, fewer KV heads than the "
                "model was trained with") if unpriced else ""
    if not chosen:
        return f"{layout.label} (" + ("no lever: no accuracy debit" if not unpriced else unstated[2:]) + ")"
    each = ", ".join(f"{lv.name} {figure(lv.debit_points)} point{'s' * (lv.debit_points != 1)}"
                     + (f" (a request whose KV passed its {layout.compress_recent_tokens:,}-token window)"
                        if lv.name == "compress" and layout.compress_recent_tokens > 0 else "")
                     + (" and retraining" if lv.retrain else "") for lv in chosen)
    total = sum(lv.debit_points for lv in chosen)
    guide = "".join(f"; {note}" for note in unsourced_notes(layout, model))
    return (f"{layout.label} (lever{'s' * (len(chosen) > 1)} {each}: a stated accuracy debit of up to "
            f"{figure(total)} points on long-context benchmarks, simulator/data/levers.toml{unstated}{guide})")


def _missing(x: object) -> bool:
    """A missing cell: None, NaN or pandas' NA (a string, list or number otherwise)."""
    return x is None or x is pd.NA or (isinstance(x, float) and x != x)


def _table(df: pd.DataFrame) -> str:
    """`df` as a Markdown table: floats in the one table style (`simulator.units.figure`; a column its
    ``attrs[SLO_LIMITS]`` judges against an SLO by `simulator.units.figure_against`), numbers right-aligned,
    text left-aligned, a missing value as a dash."""
    shown = df.copy()
    against = slo_figures(df, "–")  # a p99 beside its SLO (`ScenarioRun.headline`)
    for c in shown.columns:
        if c in against and pd.api.types.is_float_dtype(shown[c]):
            shown[c] = against[c]
        elif pd.api.types.is_float_dtype(shown[c]):
            shown[c] = shown[c].map(lambda x: "–" if pd.isna(x) else figure(x))
        elif pd.api.types.is_integer_dtype(shown[c]) and not pd.api.types.is_bool_dtype(shown[c]):
            shown[c] = shown[c].map(lambda x: "–" if pd.isna(x) else f"{x:,}")
        else:  # text: a missing value is a dash, and a '|' must not split the row
            shown[c] = shown[c].map(lambda x: "–" if _missing(x) else str(x).replace("|", "\\|"))
    align = ["right" if pd.api.types.is_numeric_dtype(df[c]) and not pd.api.types.is_bool_dtype(df[c]) else "left"
             for c in df.columns]
    return shown.to_markdown(index=False, disable_numparse=True, colalign=align) + "\n"


def collapse_study(run: ScenarioRun, progress: Progress | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The analytic collapse table for the scenario's model and hardware, and simulated peaks.

    `progress` receives the fraction done: each node kind's simulated points an equal share
    (`simulated_collapse` weighs its runs by their requests)."""
    sc = run.scenario
    model = sc.model_spec()
    kinds = [n.key for n in sc.nodes()]
    # the run's layout first, then each other layout once however spelt, and as it runs on the model (`as_run`;
    # helper-189: mla, in the default list, drew native's line again for DeepSeek-V3, whose own attention it is)
    by_label: dict[str, str] = {}
    for text in [sc.cache.layout, *sc.report.collapse_layouts]:
        by_label.setdefault(as_run(model, parse_layout(text)).label, text)
    layouts = list(by_label.values())
    plans = [sc.plan] + [p for p in default_plans(sc.plan.tp, model) if p.dp_attention and not sc.plan.dp_attention
                         and sc.plan.pp == 1]
    analytic = collapse_table(sc.hardware_catalog(), model, kinds, layouts,  # the scenario's catalog, as it runs
                              memory_utilization=sc.cluster.memory_utilization, block_tokens=sc.cluster.block_tokens,
                              plans=plans)
    points = [n for n in sc.report.collapse_points if n <= model.max_context_tokens]
    beyond = [n for n in sc.report.collapse_points if n > model.max_context_tokens]
    if beyond:  # said, not dropped without a word (helper-159)
        analytic.attrs["left_out"] = [*analytic.attrs.get("left_out", []), (
            f"report.collapse_points {', '.join(f'{n:,}' for n in beyond)}: beyond {model.key}'s window of "
            f"{model.max_context_tokens:,} tokens, not simulated")]
    configs = [sc.engine_config(hw) for hw in kinds]
    meter = Meter(progress, [len(configs)])
    sims = []
    for c in configs:
        sims.append(simulated_collapse(c, points, run.seed, progress=meter.piece(1.0)).assign(layout=c.layout.label))
        meter.add(1.0)
    meter.finish()
    return analytic, pd.concat(sims, ignore_index=True)


def breakeven_study(run: ScenarioRun) -> tuple[pd.DataFrame, pd.DataFrame, dict[str, str]]:
    """The workload billed under no cache and each TTL of the scenario's price profile (customer
    side), and what each TTL costs and saves the provider on the scenario's first fleet.

    The provider's figures come from this deployment (`deployment_costs` of the first fleet).
    """
    return _breakeven_study(run)[:3]


def _breakeven_study(run: ScenarioRun) -> tuple[pd.DataFrame, pd.DataFrame, dict[str, str], TTLComparison,
                                                ProviderCosts]:
    """`breakeven_study`, the comparison it read them from (its `TTLComparison.uncached_reason` says why nothing
    was cached, if so), and the provider's inputs (`deployment_costs`)."""
    from simulator.billing import compare_ttls, get_profile
    from simulator.billing.provider import best_ttls, provider_table

    sc = run.scenario
    b = sc.billing
    profile = get_profile(b.profile, b.tier or None)
    comparison = compare_ttls(run.workload, profile, ["none", *b.chosen_ttls(profile.ttl_names)])
    hw, result = next(iter(run.results.items()))
    costs = deployment_costs(result, profile)
    provider = provider_table(comparison, costs).assign(hardware=hw)
    return comparison.summary, provider, best_ttls(comparison, provider), comparison, costs


def provider_inputs(costs: ProviderCosts, hit_ratio: float = 0.0) -> tuple[pd.DataFrame, str]:
    """The figures the provider table is priced from (`deployment_costs`), as a one-row frame
    (``breakeven_provider_inputs.csv``) and a sentence for the report (`hit_ratio`: the share of prompt tokens
    the fleet's prefix cache served, which its output ceiling's prefills leave out): with them and the table's
    GB-hours,
    ``holding_hbm_usd = kv_gb_hours · 3600 · GB / bytes_per_stream · revenue_usd_per_stream_s``,
    ``holding_dram_usd = kv_gb_hours · dram_usd_per_gb_hour`` (SSD alike)."""
    row = {f.name: getattr(costs, f.name) for f in dataclasses.fields(costs) if f.name != "prefill"}
    decode, ceiling = costs.decode_tokens_per_s_per_stream, costs.ceiling_tokens_per_s_per_stream
    speeds = "its decode speed at the output price, at most the fleet's output ceiling a stream"
    if decode is not None and ceiling is not None:  # which of the two binds, and both figures
        prefilled = ("after what the prefix cache served" if hit_ratio > 0 else "whole (no prefix cache hit)")
        speeds = (f"the fleet's output ceiling, {figure(ceiling)} tokens a second a stream with its prompts prefilled "
                  f"{prefilled}, which is under its decode speed of {figure(decode)}; at the "
                  "output price" if ceiling < decode else
                  f"its decode speed of {figure(decode)} tokens a second at the output price, under the fleet's output "
                  f"ceiling of {figure(ceiling)} a stream")
    line = (f"Priced from (`breakeven_provider_inputs.csv`): KV {costs.kv_bytes_per_token:,.0f} bytes a token; "
            f"a stream of the mean context holds {figure(costs.bytes_per_stream / GB)} GB and earns "
            f"${costs.revenue_usd_per_stream_s:.3g} a second ({speeds}), so `holding_hbm_usd` = GB-hours × 3,600 / "
            f"{figure(costs.bytes_per_stream / GB)} × {costs.revenue_usd_per_stream_s:.3g}; DRAM "
            f"${costs.dram_usd_per_gb_hour:.3g} and SSD ${costs.ssd_usd_per_gb_hour:.3g} per GB-hour "
            f"(`simulator/billing/provider.toml`); a GPU-second ${costs.usd_per_gpu_s:.3g} (at "
            f"${costs.usd_per_gpu_s * 3600:.3g} a GPU-hour, the price in use), prefill "
            f"{costs.prefill_gpu_s_per_token:.3g} GPU-s a token for the mean prompt (each hit's saving priced by the "
            "cost model, its prompt and cached tokens).\n")
    return pd.DataFrame([row]), line


def _few_requests(requests: int, offline: bool) -> str | None:
    """`simulator.planning.few_requests_note` for the headline's ``meets SLO`` and ``goodput``."""
    from simulator.planning import few_requests_note

    return few_requests_note(requests, offline, decides="the headline's `meets SLO`", longer="workload.duration_s")


def deployment_costs(result: Result, profile: PriceProfile) -> ProviderCosts:
    """`provider_costs_for` of the fleet `result` simulated, at `profile`'s output price: the model's
    and layout's KV bytes per token, the cost model's prefill (each request's saving), the simulated decode
    speed (1 / mean TPOT; at most the fleet's output ceiling over the streams its pool holds, from its
    replicas and `max_num_seqs`; a disaggregated fleet's replicas counted as if each served whole requests),
    its prefill on a disaggregated fleet's prefill pool (its GPU and plan), the GPU's price and the KV pool as
    simulated (``kv_blocks_total`` × the layout's block bytes). The ceiling's prefills are of what the prefix
    cache did not serve (the run's ``prefix_hit_ratio_tokens`` of the mean prompt). The stream, prompt and
    output lengths are the completed requests' means, or, when none completed (every one timed out), all
    requests'; then no decode speed was seen and a displaced stream forgoes no revenue."""
    from simulator.billing.provider import provider_costs_for
    from simulator.engine.geometry import block_geometry

    cfg = result.config
    hit_ratio = result.summary["prefix_hit_ratio_tokens"]
    done = result.requests[result.requests.outcome == "completed"]
    tpot = float(done.tpot_mean_s.mean()) if len(done) else float("nan")
    shape = done if len(done) else result.requests  # none completed (all timed out): the requests' own lengths
    return provider_costs_for(
        cfg.node, cfg.model, cfg.layout, cfg.tp,  # type: ignore[arg-type]  # resolved specs
        stream_context_tokens=float((shape.prompt_tokens + shape.output_tokens / 2).mean()),
        tokens_per_s_per_stream=1 / tpot if tpot > 0 else 0.0,
        output_usd_per_mtok=profile.output_usd_per_mtok, prompt_tokens=float(shape.prompt_tokens.mean()),
        output_tokens=float(shape.output_tokens.mean()), replicas=int(result.summary["replicas"]),
        max_num_seqs=cfg.scheduler.max_num_seqs,
        prefill_node=cfg.prefill_pool.node if cfg.prefill_pool is not None else None,  # type: ignore[arg-type]
        prefill_tp=cfg.prefill_pool.tp if cfg.prefill_pool is not None else None,
        # what the prefix cache served a prompt, on average (Σ hit / Σ prompt over all requests: a streamed run
        # keeps no per-request hit_tokens, `study.REPORT_COLUMNS`; NaN without prompt tokens)
        cached_prompt_tokens=float(shape.prompt_tokens.mean()) * (hit_ratio if hit_ratio == hit_ratio else 0.0),
        kv_pool_bytes=result.summary["kv_blocks_total"]
        * block_geometry(cfg.model, cfg.layout, cfg.block_tokens).block_bytes  # type: ignore[arg-type]
        or None)


def _fleets_section(run: ScenarioRun, out: Path) -> list[str]:
    """Aggregated vs disaggregated: the comparison table (``fleets.csv``) and chart (``fleets.png``)."""
    from simulator.charts import fleet_figure

    sc = run.scenario
    fleets = run.fleet_comparison()
    fleets.to_csv(out / "fleets.csv", index=False)
    d = sc.disaggregation
    assert d is not None
    shown = fleets.assign(**{c: 100 * fleets[c] for c in ("prefill_busy", "decode_busy", "prefill_kv", "decode_kv",
                                                          "link_util")})
    short = (f"prompts of at most {d.short_prompt_tokens:,} tokens prefill on the decode pool" if d.short_prompt_tokens
             else "every prompt prefills on the prefill pool")
    return ["## Aggregated vs disaggregated\n" if d.compare_aggregated else "## Disaggregated fleets\n",
            (f"Each kind as one fleet of {sc.cluster.nodes} nodes (aggregated) and as "
             if d.compare_aggregated else "Each kind as ")
            + f"{d.prefill_nodes} prefill + "
            f"{d.decode_nodes} decode nodes (plans: prefill {sc.prefill_plan.label}, decode {sc.plan.label}; "
            f"{short}). A prompt's KV moves to a decode "
            "replica once that replica has reserved room for it, over the decode GPUs' NICs (bandwidth shared by "
            "concurrent transfers); its first token leaves the prefill replica. Busy: share of time a replica has a "
            "step in flight; KV: share of the pool's blocks in use; link: share of time a decode replica's ingress "
            "link moves KV (all in %, time means).\n",
            _table(shown.drop(columns=["disaggregated", "ttft_p99_of_slo", "tpot_p99_of_slo", "meets_slo"])),
            "![fleets](" + _save(fleet_figure(fleets, run.subject(), sc.slo.ttft_p99_s, sc.slo.tpot_p99_s),
                                 out / "fleets.png") + ")\n"]


def _no_phases(_label: str) -> Progress:
    return lambda _fraction: None


def write_report(run: ScenarioRun, out: Path, capacity: pd.DataFrame | None = None,
                 phases: Phases | None = None) -> Path:
    """Write the report folder of `run` (and a capacity plan, when given) to `out`.

    `phases` (`simulator.progress.Phases`) is told each phase as it begins: ``writing the report``
    (each fleet's files and each chart one unit), ``collapse study`` (its simulations, then
    `COLLAPSE_CHART_SHARE` for the chart) and ``TTL break-even`` (the replay, then
    `BREAKEVEN_CHART_SHARE`), the last two when the scenario's report has them.
    """
    out.mkdir(parents=True, exist_ok=True)
    sc = run.scenario
    phase = phases or _no_phases
    files = Meter(phase("writing the report"), [len(run.results) + 2 + (sc.disaggregation is not None)
                                                + (capacity is not None)])
    for hw, res in run.results.items():
        res.write(out / hw)
        files.add(1)
    headline = run.headline()
    headline.to_csv(out / "headline.csv", index=False)
    doc = {"seed": run.seed, "version": __version__, "scenario": dataclasses.asdict(sc),
           "engine": {hw: r.config.as_dict() for hw, r in run.results.items()}}
    # strict JSON: unbounded is null
    (out / "scenario.json").write_text(jsonout.dumps(doc, indent=2) + "\n", encoding="utf-8")
    wl = run.workload.summary()
    left_out = ([skipped_note(wl.skipped_rows)] if wl.skipped_rows else []) + (
        [cut_note(run.workload.cut_at_s)] if run.workload.cut_at_s is not None else [])  # of the trace, said
    md = [f"# {sc.name}\n", f"{sc.description}\n" if sc.description else "",
          f"Scenario `{sc.path}`, seed {run.seed}, kvsim {__version__}. Workload: {wl.n_requests:,} requests"
          + (f", {', '.join(left_out)}," if left_out else "") + " "
          + (f"over {wl.duration_s / 60:,.1f} min ({wl.rate_per_s:,.2f}/s)" if wl.duration_s > 0 else "all at t = 0")
          + f", prompt mean {wl.prompt_tokens.mean:,.0f} "
          f"tokens (p99 {wl.prompt_tokens.p99:,.0f}), output mean {wl.output_tokens.mean:,.0f}; "
          + (f"prefix reuse: {wl.prefix_note}.\n" if wl.n_reuses is None else
             f"{100 * wl.prefix_hit_share:.1f}% of prompt tokens repeat an earlier prefix"
             + (f" ({wl.prefix_note})" if wl.prefix_note else "") + ".\n"),
          f"SLOs: p99 TTFT ≤ {sc.slo.ttft_p99_s:g} s, p99 TPOT ≤ {sc.slo.tpot_p99_s * 1e3:g} ms. "
          f"Scheduler: {_scheduler_line(sc.scheduler)}. Router: {_router_line(sc)}. KV cache: {_cache_line(sc)}. "
          f"KV layout: {_layout_line(sc)}.\n",
          f"{price_note(sc.priced_nodes())}.\n",
          "## Headline\n", _table(headline),
          (("Sustained throughput is over the steady-state window (every request arrives at t = 0 here: the window "
            f"ends at the last first admission, when the queue empties, and its first {_WINDOW.warmup_fraction:.0%} "
            "or one mean time from admission to completion, whichever is longer but at most "
            f"{_WINDOW.max_warmup_fraction:.0%}, is left out as warm-up)") if wl.duration_s <= 0 else
           (f"Sustained throughput is over the steady-state window (the first {_WINDOW.warmup_fraction:.0%} of the "
            "arrival span or one mean sojourn, whichever is longer but at most "
            f"{_WINDOW.max_warmup_fraction:.0%}, left out as warm-up; everything after the last arrival left out as "
            "drain)")) + "; makespan throughput over first arrival to last completion.\n",
          HEADLINE_COLUMNS,
          "".join(f"- {note}\n" for note in run.steady_notes()),
          "".join(f"- Note: {note}.\n" for note in [_few_requests(wl.n_requests, wl.duration_s <= 0)] if note),
          "".join(f"- {note}\n" for note in run.cache_notes())]
    latency = latency_figure({_fleet_key(hw, r.config): r.requests for hw, r in run.results.items()},
                             sc.slo.ttft_p99_s, sc.slo.tpot_p99_s,
                             f"{run.subject()}: latency of the completed requests (seed {run.seed})")
    md += ["![latency](" + _save(latency, out / "latency.png") + ")\n"]
    files.add(1)
    md += ["![timeseries](" + _save(timeseries_figure(
               {hw: r.timeseries for hw, r in run.results.items()},
               {hw: r.summary["kv_blocks_per_replica"] for hw, r in run.results.items()},
               {hw: r.config.block_tokens for hw, r in run.results.items()},
               {hw: r.summary["kv_utilization"] for hw, r in run.results.items()},
               {hw: r.summary["kv_cache_share"] for hw, r in run.results.items()},
               {hw: SplitPools.of(r.summary) for hw, r in run.results.items()},
               run.subject()), out / "timeseries.png")
           + ")\n"]
    files.add(1)
    if sc.disaggregation is not None:
        md += _fleets_section(run, out)
        files.add(1)
    if capacity is not None:
        from simulator.charts import capacity_figure

        capacity.to_csv(out / "capacity.csv", index=False)
        md += ["## Capacity plan: the smallest fleet that meets the SLOs\n", _table(capacity),
               "`memory_floor_nodes` is the analytic lower bound from KV memory alone; `headroom_scale` is the "
               "load multiplier the fleet takes before an SLO breaks; where `headroom_capped` is True it met the "
               "SLOs at every multiplier tried, so the figure is a lower bound (it may take more).\n",
               *(f"Note: {line}\n" for line in capacity.attrs.get("search_notes", [])),  # `noisy_search_note`
               # titled as the other charts, by how far a replay reached (helper-189: "up to 600 s" for 150 s)
               "![capacity](" + _save(capacity_figure(capacity, run.subject()), out / "capacity.png") + ")\n"]
        files.add(1)
    files.finish()
    if sc.report.collapse:
        meter = Meter(phase("collapse study"), [1.0])
        analytic, simulated = collapse_study(run, meter.piece(1 - COLLAPSE_CHART_SHARE))
        meter.add(1 - COLLAPSE_CHART_SHARE)
        analytic.to_csv(out / "collapse.csv", index=False)
        simulated.to_csv(out / "collapse_simulated.csv", index=False)
        model = sc.model_spec()
        budget = analytic.groupby("hardware").kv_budget_bytes.first() / GB
        md += ["## Concurrency collapse\n",
               f"Max concurrent streams per node vs context, {model.key}; KV budget per node: "
               + ", ".join(f"{hw} {gb:,.0f} GB" for hw, gb in budget.items()) + ". Crosses: simulated peak "
               "concurrency when one node (a plan over several nodes: its replica's, the crosses and circles "
               "then drawn per node) is flooded with requests of that context (no batch cap: memory binds, "
               "or at short context the prefill token budget; a request holds n − o to n tokens as it decodes, o = "
               "n/8 at most 4,096, so a peak may pass the line, which counts whole streams of n tokens). Circles "
               "and the lower row: one node (a plan over several nodes: its replica's nodes) offered 80% of the "
               "request rate it sustains under the scenario's "
               "scheduler (`capacity_rps` = m / (m · prefill_s + "
               "o · step_s): each request's prefill and its share of o decode steps of m streams, m the analytic "
               f"streams at most `max_num_seqs` = {sc.scheduler.max_num_seqs:,}); the mean concurrency it holds and "
               "the share of requests that meet the SLOs (goodput).\n",
               "".join(f"- left out: {why}\n" for why in analytic.attrs.get("left_out", [])),
               _table(simulated),
               "![collapse](" + _save(collapse_figure(analytic, model, model.max_context_tokens, simulated,
                                                      (sc.slo.ttft_p99_s, sc.slo.tpot_p99_s)),
                                      out / "collapse.png") + ")\n"]
        meter.finish()
    if sc.report.breakeven:
        meter = Meter(phase("TTL break-even"), [1.0])
        from simulator.billing.charts import nothing_cached_title, plot_savings_vs_ttl
        from simulator.billing.profiles import load_profiles
        from simulator.billing.provider import pool_notes

        be, provider, best, comparison, costs = _breakeven_study(run)
        uncached = comparison.uncached_reason
        meter.add(1 - BREAKEVEN_CHART_SHARE)
        be.to_csv(out / "breakeven.csv", index=False)
        provider.to_csv(out / "breakeven_provider.csv", index=False)
        first = next(iter(run.results.values())).summary  # the provider side's fleet
        inputs, inputs_line = provider_inputs(costs, first["prefix_hit_ratio_tokens"])
        inputs.to_csv(out / "breakeven_provider_inputs.csv", index=False)
        title = f"Prompt-cache savings by TTL for this workload ({sc.billing.profile})"
        if uncached:
            title = nothing_cached_title(uncached)
            automatic = " or ".join(f'profile = "{p}"' for p in load_profiles().automatic())
            uncached = f"**Nothing was cached**: {uncached}" + (
                f"; a profile that caches prefixes automatically ([billing] {automatic}) would."
                if automatic and comparison.breakpoints_missing else ".")
        ax = plot_savings_vs_ttl(be, title=title)
        pool = provider.kv_pool_gb.iloc[0]
        unknown_reuse = wl.prefix_note if wl.n_reuses is None else ""  # a trace with no prefix ids: every TTL's worth
        unserved = first["timed_out"] + first["rejected"]
        md += ["## Prompt-cache TTL break-even\n", "Customer side: the workload billed under each TTL.\n",
               f"Every request is billed as sent: on {provider.hardware.iloc[0]}, {unserved:,} of "
               f"{first['requests']:,} got no answer (timed out or rejected), and the provider's revenue below "
               "counts them too.\n"
               if unserved else "",
               f"{uncached}\n" if uncached else "",
               _table(be),
               "`share_requests_with_read` is the share of requests that read any cached token; "
               "`share_prompt_tokens_read` the share of prompt tokens read from the cache; "
               "`share_cached_tokens_read` = read / (read + written) tokens, the share to compare with "
               "`breakeven_p_hit`: the cached input costs less than plain input when it is above; "
               "`share_gaps_below_ttl` the share of reuses (requests whose longest cacheable prefix was sent before) "
               "that came within the TTL of its previous use; `storage_usd` what a profile that bills storage "
               "charges for holding the written tokens one TTL (0 for one that does not). "
               "`savings_usd` = `total_usd` without a cache − with; `savings_pct_of_input` is it as a share of "
               "the input bill without a cache (what a TTL is chosen on), `savings_pct_of_bill` as a share of "
               "the whole bill, output included.\n",
               "![breakeven](" + _save(ax.figure, out / "breakeven.png") + ")\n",  # type: ignore[arg-type]
               f"Provider side, on {provider.hardware.iloc[0]}"
               + (" (the scenario's first fleet)" if len(run.results) > 1 else "")
               + ": the KV a TTL keeps resident (GB-hours) priced as "
               "displaced concurrency on HBM (a displaced stream earning its decode speed, at most the fleet's "
               "output ceiling over the streams its pool holds; as if the pool were full: an upper bound; this "
               "fleet's time-mean KV "
               f"use is {100 * first['kv_utilization']:.1f}%) or as DRAM/SSD "
               "capacity, against the prefill GPU time that hits save; margins are against no caching. "
               + (f"The fleet's KV pool is {pool:,.0f} GB: `kv_peak_gb` is the most KV the cache holds at once "
                  "and `kv_peak_over_pool` its ratio to the pool; `kv_gb_hours_over_pool` compares the GB-hours "
                  "with the pool held from the first write to the last expiry.\n" if pool == pool else "\n"),
               _table(provider.drop(columns=["hardware", "kv_pool_gb"])),
               inputs_line,
               "".join(f"- {note}.\n" for note in pool_notes(provider)),
               ("Best TTL: unknown: " + unknown_reuse + ".\n" if unknown_reuse else
                "Best TTL: " + ", ".join(f"{k} → {v}" for k, v in best.items()) + ".\n")]
        meter.finish()
    (out / "summary.md").write_text("\n".join(x for x in md if x), encoding="utf-8")
    return out
