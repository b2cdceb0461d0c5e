"""``kvsim compare``: the same workload under several cache-strategy sets, side by side."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

import click

from hardware.catalog import NodeSpec, load_catalog, parse_prices, price_note
from simulator.charts import close_figure
from simulator.cli.common import (
    OutPath,
    OutputFolder,
    at_option,
    comma_items,
    echo_json,
    handle_errors,
    note,
    on_command_line,
    records,
    stopped_cleanly,
    warn,
)
from simulator.cli.options import (
    HARDWARE,
    HARDWARE_CATALOG,
    PRICE_OPTION,
    TP,
    USD_PER_GPU_HOUR,
    WEIGHT_DTYPE,
    PositiveFinite,
    Renamed,
    duration_option,
    model_option,
    priced,
    seed_option,
)
from simulator.cli.progress import progress_bar
from simulator.compare import check_distinct_sets, compare_figure, compare_strategies, tier_note
from simulator.engine import EngineConfig
from simulator.engine.caches.prefix import DRAM_FRACTION
from simulator.errors import ConfigError, shown
from simulator.limits import MAX_NODES
from simulator.models import get_model, with_weight_precision
from simulator.placement import check_plan
from simulator.placement import span as replica_span
from simulator.units import figure
from workloads import load_workload
from workloads.workload import say_left_out

COLUMNS = ["strategy", "meets_slo", "ttft_p99_s", "tpot_p99_s", "usd_per_million_output_tokens", "max_concurrency",
           "tokens_per_s", "prefix_hit_ratio_tokens", "quality_debit_points", "memory_factor", "memory_factor_per_gpu",
           "completed"]
STRATEGY_EXAMPLE = "native,fp8,prefix+fp8"


def _strategy_sets(text: str) -> list[str]:
    """``--strategy`` `text`'s comma-separated sets, each stripped; an empty item, or none at all, is
    ``--strategy``'s error before anything runs (`comma_items`)."""
    return comma_items(text, "--strategy", "strategy set", f"{STRATEGY_EXAMPLE}, each '+'-joined levers")


def _cache_not_used(layout: str, strategy: str, params: Mapping[str, object]) -> str:
    """What of a scenario's ``[cache]`` no strategy set inherits, as the file writes it: a layout other than
    ``native`` and the strategy's parameters other than its defaults (``layout = "fp8", params = {dram = true,
    dram_fraction = 0.25}``); "" where it sets none (``strategy`` alone: the sets' ``prefix`` lever says it)."""
    from simulator.engine.caches import make_strategy

    def toml(v: object) -> str:
        return str(v).lower() if isinstance(v, bool) else f'"{v}"' if isinstance(v, str) else f"{v}"

    default = make_strategy(strategy)  # (the scenario's parameters were checked when it loaded)
    given = {k: v for k, v in params.items() if getattr(default, k, None) != v}
    parts = [f"layout = {toml(layout)}"] if layout != "native" else []
    if given:
        parts.append("params = {" + ", ".join(f"{k} = {toml(v)}" for k, v in given.items()) + "}")
    return ", ".join(parts)


def _workload_spec(text: str) -> str:
    """``--workload`` `text`: a generator name or an existing file, else ``--workload``'s error."""
    from workloads.generators import by_name
    from workloads.load import not_a_folder

    if text.strip() and text not in by_name() and Path(text).is_dir():  # ("" is ".", no folder named)
        raise ConfigError(not_a_folder("--workload", text))
    if text not in by_name() and not Path(text).is_file():  # a mixture needs its components: a TOML file
        raise ConfigError(f"--workload: must be a generator name ({', '.join(by_name())}), a TOML file "
                          f"with [workload] or a trace file (got {shown(text)})")
    return text


@click.command("compare")
@click.argument("scenario", required=False, type=click.Path(path_type=Path))
@HARDWARE
@model_option()
@WEIGHT_DTYPE
@click.option("--workload", "workload_spec", default="code-repo-128k", show_default=True,
              help="generator name, TOML with [workload], or trace file")
@duration_option("seconds of traffic (default: the workload's, or the scenario's)")
@click.option("--rate-scale", type=PositiveFinite(), default=1.0, show_default=True,
              help="arrival rate multiplier (generated workloads; thinning/compression for traces)")
@click.option("--nodes", "n_nodes", type=click.IntRange(1, MAX_NODES), default=1, show_default=True,
              help="nodes in the pool")
@TP
@click.option("--strategy", "--strategies", "strategies", cls=Renamed, required=True,
              help="strategy sets to compare, comma-separated, each '+'-joined: native,fp8,mla,cross-layer:0.5,"
                   "streaming-llm,prefix,prefix+dram,prefix+fp8")
@seed_option("seed (default: the scenario's, or a --workload scenario file's, else 0)")
@HARDWARE_CATALOG
@USD_PER_GPU_HOUR
@click.option("--out", "out", type=OutPath(file_okay=False), default=None,
              help="write compare.csv and compare.png here")
@click.option("--json", "as_json", is_flag=True, help="print the rows as JSON instead of a table")
@handle_errors
def compare(scenario: Path | None, hardware: str, model_name: str, weight_dtype: str | None, workload_spec: str,
            duration_s: float | None, rate_scale: float, n_nodes: int, tp: int | None, strategies: str,
            seed: int | None, catalog: Path | None, usd_per_gpu_hour: str | None, out: Path | None,
            as_json: bool) -> None:
    """Run one workload (same seed) under each strategy set; print and chart the headline figures.

    With SCENARIO (a file or a shipped name) its model, first hardware kind, fleet, scheduler and
    workload are used; --hardware/--model/--weight-dtype/--workload/--nodes/--tp/--catalog are then
    refused (the scenario's keys say them); --duration-s replaces its workload.duration_s.
    """
    if scenario is not None:
        flags = {"hardware": "--hardware", "model_name": "--model", "weight_dtype": "--weight-dtype",
                 "workload_spec": "--workload", "n_nodes": "--nodes", "tp": "--tp", "catalog": "--catalog"}
        given = [flag for name, flag in flags.items() if on_command_line(name)]
        if given:
            raise ConfigError(f"compare {scenario}: {given[0]} applies without a SCENARIO; the scenario's own keys "
                              "(cluster.hardware, model.name, model.weight_dtype, workload, cluster.nodes, "
                              "cluster.tp, cluster.catalog) say it")
    specs = _strategy_sets(strategies)
    folder = OutputFolder(out, "compare") if out is not None else None
    if scenario is not None:
        from simulator.scenario import load_scenario

        sc = priced(load_scenario(scenario), usd_per_gpu_hour)
        if duration_s is not None:
            sc = replace(sc, workload=replace(sc.workload, duration_s=duration_s))
        seed = sc.seed if seed is None else seed
        base = sc.engine_config()
        check_distinct_sets(specs, base, "--strategy")
        workload = sc.load_workload(seed, rate_scale=rate_scale)
        requests = list(workload)
        model, hardware, n_nodes = sc.model_spec().key, sc.cluster.hardware[0], sc.cluster.nodes
        others = sc.cluster.hardware[1:]
        left_out = [f"its other node kinds ({', '.join(others)})"] if others else []
        left_out += ["its [disaggregation]"] if sc.disaggregation is not None else []
        if left_out:  # what the comparison does not cover is said, not silently dropped
            click.echo(f"note: compare runs the strategy sets on {scenario}'s first node kind, {hardware}, as one "
                       f"aggregated fleet; not compared: {' and '.join(left_out)} (kvsim run covers them)", err=True)
        unused = _cache_not_used(sc.cache.layout, sc.cache.strategy, sc.cache.params)
        if unused:  # a set names every lever it runs: the scenario's own were dropped without a word (helper-197)
            share = (f"; a set's dram tier takes {DRAM_FRACTION:g} of host DRAM" if "dram_fraction" in unused else "")
            click.echo(f"note: {scenario}'s [cache] {unused} is not used: each strategy set names every lever it "
                       f"runs (layout, retention, prefix and its tiers and eviction{share})", err=True)
        tp = sc.cluster.tp
        workload_spec, duration_s = sc.name, sc.workload.duration_s
    else:
        prices = parse_prices(usd_per_gpu_hour, PRICE_OPTION) if usd_per_gpu_hour is not None else None
        with at_option("--catalog", catalog):
            cat = load_catalog(catalog)
        cat = cat.priced(prices, PRICE_OPTION)
        with at_option("--hardware"):  # an unknown or empty kind: say which option named it
            node = cat.node(hardware)
        tp = node.gpus if tp is None else tp
        model = model_name  # the chart's title names it as given
        with at_option("--model", model_name):
            spec = get_model(model_name)
        base = EngineConfig(model=with_weight_precision(spec, weight_dtype, "--weight-dtype"),
                            node=node, n_nodes=n_nodes, tp=tp)
        with at_option("--tp"):  # the plan suits the model before its nodes are counted
            check_plan(base.model_spec(), base.plan)
        spans = replica_span(node, base.plan).nodes  # said at the options, not as the engine's field (helper-159)
        if n_nodes % spans:
            raise ConfigError(f"--nodes: must be a multiple of the {spans} {node.key} nodes one TP{tp} replica "
                              f"(--tp {tp}) spans (got {n_nodes})")
        check_distinct_sets(specs, base, "--strategy")
        # without --seed a scenario file's own seed (as `kvsim run` and `workload describe` draw it; helper-196:
        # seed 0 whatever the file said), else 0; the engine runs at the seed the workload was drawn with
        workload = load_workload(_workload_spec(workload_spec), seed=seed, duration_s=duration_s,
                                 rate_scale=rate_scale, name="--workload")
        seed = workload.seed if seed is None else seed
        requests = list(workload)
    say_left_out(workload, warn)
    if isinstance(base.node, NodeSpec):  # always, resolved from the catalog above
        click.echo(price_note([base.node]), err=True)
    if folder:  # the inputs held (a bad one leaves no folder behind): a bad --out fails here, before the runs
        folder.prepare()  # nothing is removed yet
    n_sets = len(specs)
    label = f"comparing {n_sets} strategy set{'s' if n_sets != 1 else ''} on {len(requests):,} requests"
    with stopped_cleanly("compare", folder):  # Ctrl-C: exit 130, one line, no partial output
        with progress_bar(label) as bar:
            df = compare_strategies(base, requests, specs, seed, progress=bar)
        if as_json:  # every column compare.csv holds (helper-166: the table's alone left out what a tier or a
            echo_json(records(df))  # retention policy did: retention_evicted_tokens, cache_reloaded_blocks, ...)
        else:
            unanswered = [c for c in ("timed_out", "rejected", "queue_grows") if df[c].any()]  # where any set has one
            click.echo(df[[*COLUMNS, *unanswered]].to_string(index=False, float_format=figure))
            click.echo(f"memory_factor: a sequence's KV in all, every GPU's share summed, at the workload's mean "
                       "context (a window compresses only past it); memory_factor_per_gpu: "
                       f"what one GPU holds of it under {base.plan.label} (both against MHA bf16 KV; an MLA latent is "
                       "whole on every GPU); tokens_per_s: prompt and output tokens a second (the cost column is per "
                       "million output tokens: compare.csv has output_tokens_per_s); max_concurrency: the most "
                       "requests this load ran at once, not what memory holds (compare.csv: kv_utilization, "
                       "kv_blocks_per_replica; kvsim fit for the streams that fit); quality_debit_points: the levers' "
                       "stated accuracy loss on long-context benchmarks (simulator/data/levers.toml, retention.toml: "
                       "each source and how it was read), a guide", err=True)
        from simulator.kv import parse_layout
        from simulator.levers import fp4_kv_note
        from simulator.placement import idle_levers

        spec_of_model = base.model_spec()

        fp4 = fp4_kv_note(base.node.gpu, "runs its bytes") if isinstance(base.node, NodeSpec) else ""
        for row in df.to_dict("records"):  # a lever that did nothing at this load says so (helper-117, helper-120)
            name, policy = str(row["strategy"]), str(row["retention"])
            layout = parse_layout(str(row["layout"]))
            for caveat in filter(None, str(row["debit_caveats"]).split("; ")):  # a debit no source states
                note(f"{name}: {caveat}")
            if fp4 and layout.kv_dtype == "fp4":
                note(f"{name}: {fp4}")
            for nothing in idle_levers(spec_of_model, layout):  # a lever that changes nothing (helper-186, -189)
                note(f"{name}: {nothing}")
            if base.router == "prefix-affinity" and row["cache"] == "none":  # (helper-171)
                from simulator.scenario import AFFINITY_WITHOUT_CACHE

                note(f"{name}: {AFFINITY_WITHOUT_CACHE}")
            idle_tiers = tier_note(row)
            if idle_tiers:
                note(f"{name}: {idle_tiers}")
            if row["compressed_share"] == 0:  # (NaN: no compression) a window no sequence passed (helper-151)
                note(f"{name}: no completed request's KV passed {row['layout']}'s full-resolution window, so it "
                     "compressed nothing and ran uncompressed (its debit, charged a request past the window, is 0)")
            if policy != "full" and not row["retention_evicted_tokens"]:
                note(f"{name}: {policy} evicted nothing (every sequence fits its budget), so it ran as full KV")
            elif row["cache"] == "prefix" and policy != "full" and not row["prefix_hit_ratio_tokens"]:
                note(f"{name}: the sequences {policy} shortened neither read nor write the prefix cache (their KV is "
                     "no longer a prefix's) and no prompt hit it, so the prefix lever changed nothing")
            if row["debit_unsourced_at"] and row["retention_evicted_tokens"]:
                note(f"{name}: {policy}'s debit was measured with {row['debit_unsourced_at']!s} kept a sequence, "
                     "not at this budget (a smaller one loses more): its debit is a guide, not a figure")
        from simulator.planning import arrive_at_once, few_requests_note, queue_grew_note

        grew = [str(name) for name, grows in zip(df.strategy, df.queue_grows, strict=True) if grows]
        if grew:  # meets_slo weighs the p99s alone: a set falling behind its load reads better than it would
            met = [str(name) for name, ok in zip(df.strategy, df.meets_slo, strict=True) if ok and name in grew]
            note(queue_grew_note(", ".join(grew), ", ".join(met), "this load"))

        few = few_requests_note(len(requests), arrive_at_once(requests), decides="meets_slo", longer="--duration-s")
        if few is not None:  # meets_slo rests on a p99 over them (helper-134)
            note(few)
        if out is not None and folder:
            folder.clear()  # the runs are done: compare's earlier files go now
            df.to_csv(out / "compare.csv", index=False)
            name = Path(workload_spec).name
            span = (f", {duration_s:g} s" if duration_s and duration_s != math.inf else "") + (
                f" at {rate_scale:g}× rate" if rate_scale != 1 else "")
            kind = base.node.key if isinstance(base.node, NodeSpec) else hardware  # the node, not as typed (H100)
            fleet = kind if n_nodes == 1 else f"{n_nodes}× {kind}"  # (one node: "1× 1xH100" read oddly)
            # the plan as the headline and sweep titles label it (TP8, not "tp 8": helper-170)
            fig = compare_figure(df, f"{model} on {fleet} ({base.plan.label}): {name}{span}, "
                                     f"{len(requests):,} requests, seed {seed}")
            fig.savefig(out / "compare.png", dpi=110)
            close_figure(fig)
            folder.finish()
            click.echo(f"wrote {out / 'compare.csv'} and {out / 'compare.png'}", err=as_json)
