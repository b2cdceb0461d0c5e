"""Analytic commands: ``calc``, ``fit``, ``collapse``, ``models``, ``hardware``."""

from __future__ import annotations

import dataclasses
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path

import click
import pandas as pd

from hardware.catalog import NodeSpec, load_catalog
from simulator.capacity import (
    DEFAULT_MEMORY_UTILIZATION,
    KVBudget,
    PlanCapacity,
    blocks_per_group,
    compare_plans,
    gpu_sequence_bytes,
    kv_budget,
    max_context,
    max_streams,
)
from simulator.cli.common import (
    OutPath,
    OutputFolder,
    at_option,
    comma_items,
    config_errors,
    echo_json,
    model_layout,
    note,
    on_command_line,
    records,
    stopped_cleanly,
)
from simulator.cli.options import (
    HARDWARE,
    HARDWARE_CATALOG,
    MODEL_CONFIG,
    WEIGHT_DTYPE,
    FiniteRange,
    Renamed,
    layout_option,
    model_option,
    plan_options,
)
from simulator.errors import ConfigError, DoesNotFitError, must_differ, shown
from simulator.kv import DEFAULT_BLOCK_TOKENS, KVLayout, footprint, idle_compression, parse_layout
from simulator.levers import debit_caveats, fp4_kv_note, layout_debit_points, layout_levers, rank_fixes
from simulator.models import (
    ModelSpec,
    dtype,
    get_model,
    kv_dtypes,
    load_models,
    weight_precision,
    with_weight_precision,
)
from simulator.placement import (
    ParallelPlan,
    as_run,
    candidate_plans,
    check_plan,
    heads_phrase,
    is_latent,
    kv_share,
    parse_plan,
    span,
)
from simulator.units import GB, MB


def _model(name: str, model_config: Path | None, weight_dtype: str | None = None) -> ModelSpec:
    if model_config:  # a missing file said at the option; its content's errors name the file
        with at_option("--model-config", model_config):
            model = get_model(str(model_config), path=True)
    else:
        with at_option("--model", name):
            model = get_model(name)
    return with_weight_precision(model, weight_dtype, "--weight-dtype")


KV_DTYPE = click.option("--kv-dtype", help="KV dtype (shorthand for adding it to --layout)")


def _layout(layout: str, kv_dtype: str | None) -> str:
    """``--layout`` with ``--kv-dtype``'s lever added. The dtype is checked here, so an empty or
    unknown one is ``--kv-dtype``'s error (not a layout's), and ``""`` is not silently ``native``."""
    if kv_dtype is None:
        return layout
    name = kv_dtype.strip()
    if name not in kv_dtypes():
        raise ConfigError(f"--kv-dtype: must be one of {', '.join(kv_dtypes())} (got {shown(kv_dtype)})")
    given = [p.strip() for p in layout.split("+") if p.strip() in kv_dtypes()]
    if given:  # a second dtype would read as a conflict inside a layout the user never wrote
        raise ConfigError(f"--kv-dtype: {name!r} given, but --layout {shown(layout)} already sets the KV dtype "
                          f"({given[0]!r}); give it once")
    return f"{layout}+{name}"


def _past_window(model: ModelSpec, context_tokens: int) -> str:
    """The note `calc` and `fit` append when `context_tokens` is past the model's window: the memory
    arithmetic holds there (a long-context variant's), but the model as released cannot serve it."""
    if context_tokens <= model.max_context_tokens:
        return ""
    return f"  (beyond the model's max context of {model.max_context_tokens:,})"


@click.command()
@model_option()
@MODEL_CONFIG
@layout_option()
@KV_DTYPE
@click.option("--context", "context_tokens", type=click.IntRange(min=1), required=True, help="tokens per sequence")
@click.option("--batch", type=click.IntRange(min=1), default=1, show_default=True, help="sequences")
@click.option("--block-tokens", type=click.IntRange(min=1), default=DEFAULT_BLOCK_TOKENS, show_default=True,
              help="tokens a KV block holds: a stream's KV is rounded up to whole blocks (paged attention)")
@click.option("--tp", type=click.IntRange(min=1), help="also the bytes one GPU holds under this attention TP")
@click.option("--json", "as_json", is_flag=True, help="machine-readable output")
def calc(model_name: str, model_config: Path | None, layout: str, kv_dtype: str | None, context_tokens: int,
         batch: int, block_tokens: int, tp: int | None, as_json: bool) -> None:
    """KV bytes per token, per sequence and per batch, with the factor of each lever; with
    ``--tp``, the share one GPU holds (its KV heads, or the whole MLA latent)."""
    with config_errors():
        model = _model(model_name, model_config)
        text = _layout(layout, kv_dtype)  # (--kv-dtype's errors are its own)
        lay = model_layout(model, text)
        fp = footprint(model, lay, context_tokens, batch, block_tokens)
        if tp:
            check_plan(model, ParallelPlan(tp=tp))  # the plan fit and the simulator would refuse, refused here too
        share = kv_share(model, lay, tp) if tp else None
    if as_json:
        echo_json({**dataclasses.asdict(fp), "beyond_max_context": context_tokens > model.max_context_tokens,
                   # with the per-GPU figures the text prints (helper-191: --json had the share alone)
                   **({"tp": tp, "kv_share_per_gpu": share, "bytes_per_token_per_gpu": fp.bytes_per_token * share,
                       "batch_bytes_paged_per_gpu": fp.batch_bytes_paged * share} if share is not None else {})})
        return
    click.echo(f"{fp.model}, layout {fp.layout}, {fp.context_tokens:,} tokens × batch {fp.batch}"
               + _past_window(model, context_tokens))
    if idle := idle_compression(lay, context_tokens):
        click.echo(f"  note: {idle}")
    capped = fp.sequence_bytes < fp.bytes_per_token * fp.context_tokens * (1 - 1e-12)  # windows, compression
    click.echo(f"  bytes per token      {fp.bytes_per_token:>16,.0f} B" + (
        f"   (every layer, before window and compression caps: {fp.sequence_bytes / fp.context_tokens:,.0f} B a "
        f"token over this sequence)" if capped else ""))
    click.echo(f"  per sequence         {fp.sequence_bytes / GB:>16,.3f} GB   "
               f"(paged, {fp.block_tokens}-token blocks: {fp.sequence_bytes_paged / GB:,.3f} GB)")
    click.echo(f"  batch                {fp.batch_bytes / GB:>16,.3f} GB   "
               f"(paged: {fp.batch_bytes_paged / GB:,.3f} GB, rounding waste {fp.paging_waste_bytes / MB:,.1f} MB)")
    click.echo(f"  MHA bf16 baseline    {fp.mha_bf16_batch_bytes / GB:>16,.3f} GB")
    click.echo("  factor of each lever (product = batch / baseline):")
    for name, f in fp.factors.items():
        click.echo(f"    {name:<16} × {f:.4f}")
    if share is not None:
        what = "the whole MLA latent on every rank" if is_latent(model, lay) else \
            heads_phrase(model, lay, tp or 1)
        click.echo(f"  one GPU of TP{tp} holds {share:g} of it ({what}): "
                   f"{fp.bytes_per_token * share:,.0f} B per token, "
                   f"batch {fp.batch_bytes_paged * share / GB:,.3f} GB paged")


def make_plan(node: NodeSpec, tp: int | None, pp: int, dp_attention: bool, ep: int) -> ParallelPlan:
    return ParallelPlan(tp=node.gpus if tp is None else tp, pp=pp, dp_attention=dp_attention, ep=ep)


@click.command()
@HARDWARE
@model_option()
@MODEL_CONFIG
@layout_option()
@KV_DTYPE
@click.option("--context", "context_tokens", type=click.IntRange(min=1), required=True, help="tokens per sequence")
@click.option("--batch", type=click.IntRange(min=1), default=1, show_default=True, help="target concurrent streams")
@WEIGHT_DTYPE
@plan_options
@click.option("--memory-utilization", type=FiniteRange(0, 1, min_open=True),
              default=DEFAULT_MEMORY_UTILIZATION, show_default=True)
@click.option("--block-tokens", type=click.IntRange(min=1), default=DEFAULT_BLOCK_TOKENS, show_default=True,
              help="tokens a KV block holds: a stream's KV is rounded up to whole blocks (paged attention)")
@HARDWARE_CATALOG
@click.option("--json", "as_json", is_flag=True, help="machine-readable output")
def fit(hardware: str, model_name: str, model_config: Path | None, layout: str, kv_dtype: str | None,
        context_tokens: int, batch: int, weight_dtype: str | None, tp: int | None, pp: int, dp_attention: bool,
        ep: int, memory_utilization: float, block_tokens: int, catalog: Path | None, as_json: bool) -> None:
    """Per-GPU KV budget of a replica, max streams at a context, the plans side by side, and the
    levers that make a target fit."""
    with config_errors():
        model = _model(model_name, model_config, weight_dtype)
        with at_option("--catalog", catalog):  # a missing file; its content's errors name it
            cat = load_catalog(catalog)
        with at_option("--hardware"):
            node = cat.node(hardware)
        plan = make_plan(node, tp, pp, dp_attention, ep)
        flags = " ".join([*([f"--tp {tp}"] if tp is not None else []), *([f"--pp {pp}"] if pp != 1 else [])])
        with at_option(flags or "--hardware"):  # replicas that do not tile the node, said at what set them
            span(node, plan)
        text = _layout(layout, kv_dtype)  # (--kv-dtype's errors are its own)
        lay = model_layout(model, text)
        try:
            budget = kv_budget(node, model, memory_utilization=memory_utilization, plan=plan)
        except DoesNotFitError as exc:  # the plans the weights do fit, as the plans table would show them
            hold = _plans_that_hold(node, model, lay, context_tokens, memory_utilization, block_tokens)
            raise DoesNotFitError(f"{exc}; {hold}") from None
        streams = max_streams(budget, model, lay, context_tokens, block_tokens)
        longest = max_context(budget, model, lay, batch, block_tokens)
        fixes = [] if streams >= batch else rank_fixes(budget, model, lay, context_tokens, batch, block_tokens)
        candidates = candidate_plans(node, model)
        if plan.label not in {p.label for p in candidates}:  # the plan asked for is in its own table (TP64 was not)
            candidates.append(plan)
        plans = compare_plans(node, model, lay, context_tokens, candidates, memory_utilization, block_tokens)
        holding = [p for p in plans if p.max_streams >= batch and p.plan != plan.label]  # the target, no lever
        engine_streams, pool_blocks, stream_blocks = _engine_streams(budget, model, lay, context_tokens, block_tokens)
        share = kv_share(model, lay, plan.attention_tp)
        per_stage = [(s, budget.stages[s], budget.stage_kv_bytes(s),
                      gpu_sequence_bytes(budget, model, lay, context_tokens, s, block_tokens))
                     for s in range(plan.pp)]
    unit = f"{budget.nodes} nodes" if budget.nodes > 1 else "the node"
    caveats = debit_caveats(lay, model)  # what the layout's stated debit does not cover (helper-180)
    fp4 = fp4_kv_note(node.gpu, "counts its streams")
    # said where the layout or a fix keeps fp4 KV, in the text and in --json alike (helper-186: --json had no word)
    fp4_said = fp4 if lay.kv_dtype == "fp4" or any(parse_layout(f.layout).kv_dtype == "fp4" for f in fixes) else ""
    result = {
        "hardware": node.key, "model": model.key, "layout": lay.label, "plan": plan.label, "tp": plan.tp,
        "pp": plan.pp, "dp_attention": plan.dp_attention, "ep": plan.ep, "replicas": budget.replicas,
        "nodes": budget.nodes, "weight_dtype": weight_precision(model), "hbm_bytes_per_gpu": node.gpu.hbm_bytes,
        "usable_bytes_per_gpu": budget.usable_bytes_per_gpu, "kv_share_per_gpu": share,
        "stages": [{"layers": list(st.layer_range), "weight_bytes_per_gpu": st.weight_bytes,
                    "attention_bytes_per_gpu": st.attention_bytes, "expert_bytes_per_gpu": st.expert_bytes,
                    "other_bytes_per_gpu": st.other_bytes, "embedding_bytes_per_gpu": st.embedding_bytes,
                    "kv_budget_bytes_per_gpu": kv, "stream_bytes_per_gpu": seq} for _, st, kv, seq in per_stage],
        "weight_bytes_per_replica": budget.weight_bytes_per_replica, "kv_budget_bytes": budget.kv_bytes,
        "context_tokens": context_tokens, "beyond_max_context": context_tokens > model.max_context_tokens,
        "batch": batch, "max_streams": streams, "fits": streams >= batch,
        "max_context_tokens_at_batch": longest, "plans": [dataclasses.asdict(p) for p in plans],
        "fixes": [dataclasses.asdict(f) for f in fixes],
        "plans_that_fit": [] if streams >= batch else [p.plan for p in holding],
        "simulated_max_streams": engine_streams,
        "layout_debit_points": layout_debit_points(lay, model), "debit_caveats": caveats, "fp4_kv_note": fp4_said,
    }
    if as_json:
        echo_json(result)
        return
    click.echo(f"{model.key} ({weight_precision(model)} weights) on {node.key}, plan {plan.label}: "
               f"{budget.replicas} replica(s) on {unit}, layout {lay.label}")
    own_levers = layout_levers(lay, model)
    if own_levers:  # what the layout asked for costs, said where its streams are (not only where it misses)
        debit = layout_debit_points(lay, model)
        click.echo(f"  layout {lay.label}: a stated quality debit of {debit:g} point{'s' * (debit != 1)}"
                   + (" and retraining" if any(lv.retrain for lv in own_levers) else "")
                   + " (simulator/data/levers.toml)")
    for caveat in caveats:
        click.echo(f"  note: {caveat}")
    if fp4_said and lay.kv_dtype == "fp4":
        click.echo(f"  note: {fp4_said}")
    what = ("the whole MLA latent, on the one GPU whose attention serves it" if plan.dp_attention else
            "the whole MLA latent on every attention rank") if is_latent(model, lay) else \
        heads_phrase(model, lay, plan.attention_tp)
    for s, st, kv, seq in per_stage:
        name = f"  stage {s + 1} (layers {st.layer_range[0]}-{st.layer_range[1] - 1}) per GPU" if plan.pp > 1 \
            else "  per GPU"
        # the HBM as the arithmetic uses it: a catalog's 80.5 GB printed "80 GB × 0.9 − 17.64 = 54.81" (helper-191)
        click.echo(f"{name}: {node.gpu.hbm_bytes / GB:,.4g} GB × {memory_utilization:g} − weights "
                   f"{st.weight_bytes / GB:,.2f} GB (attention {st.attention_bytes / GB:,.2f}, experts "
                   f"{st.expert_bytes / GB:,.2f}, dense {st.other_bytes / GB:,.2f}, embeddings "
                   f"{st.embedding_bytes / GB:,.2f}) = KV {kv / GB:,.2f} GB")
        click.echo(f"    a {context_tokens:,}-token stream holds {seq / GB:,.3f} GB here ({what}) -> "
                   f"{int(kv // seq) if seq else 0:,} per KV pool")
    past = _past_window(model, context_tokens)
    if idle := idle_compression(lay, context_tokens):
        click.echo(f"  note: {idle}")
    click.echo(f"  max streams at {context_tokens:,} tokens: {streams:,}  ({budget.replicas} replica(s) × "
               f"{plan.kv_groups} KV pool(s) × the binding GPU's count)" + past)
    if plan.pp > 1 and engine_streams != streams:  # a pipeline's stages in flight each hold a share of the blocks
        click.echo(f"  the simulator runs a scheduler per pipeline stage in flight (vLLM's virtual engines), each with "
                   f"1/{plan.pp} of a KV pool's {pool_blocks:,} blocks ({pool_blocks // plan.pp:,}; a stream takes "
                   f"{stream_blocks:,}): {engine_streams:,} streams there")
    click.echo(f"  longest context for {batch} stream(s): {longest:,} tokens"
               + ("  (beyond the model's max context)" if longest > model.max_context_tokens else ""))
    table = pd.DataFrame([{"plan": p.plan + (" *" if p.plan == plan.label else ""), "GPUs": p.gpus,
                           "nodes": p.nodes, "weights GB/GPU": round(p.weight_bytes_per_gpu / GB, 2),
                           "KV GB/GPU": round(p.kv_bytes_per_gpu / GB, 2),
                           "GB/stream/GPU": round(p.stream_bytes_per_gpu / GB, 3),
                           "streams/replica": p.streams_per_replica, "streams (nodes)": p.max_streams,
                           "streams/node": _per_node(p.streams_per_node)}
                          for p in plans])
    click.echo(f"  plans side by side at {context_tokens:,} tokens (* this plan; GPUs and streams/replica: one "
               "replica's; streams (nodes): all replicas on the plan's nodes; KV < 0: the weights do not fit):")
    click.echo("    " + table.to_string(index=False).replace("\n", "\n    "))
    for p in plans:  # a plan with no streams whose weights fit: why (a node with no NIC for a plan spanning nodes)
        if not p.fits and p.kv_bytes_per_gpu > 0:
            click.echo(f"    {p.plan.strip()}: no streams: {p.why}")
    if streams >= batch:
        click.echo(f"  target {batch} × {context_tokens:,} tokens fits"
                   + (" in memory, beyond the model's max context." if past else "."))
        return
    click.echo(f"  target {batch} × {context_tokens:,} tokens does NOT fit on plan {plan.label}.")
    own = layout_levers(lay, model)
    own_debit = (f"layout {lay.label}'s own {layout_debit_points(lay, model):g} points"
                 + (", which needs training" if any(lv.retrain for lv in own) else "")) if own else ""
    if holding:
        click.echo("  plans above that hold it with no lever " + (f"(no debit beyond {own_debit})" if own
                                                                  else "(no quality debit)") + ": " + "; ".join(
            f"{p.plan} ({p.max_streams:,} streams on {p.nodes} node{'s' if p.nodes > 1 else ''})" for p in holding))
    click.echo(f"  levers that make it fit on plan {plan.label}, cheapest stated quality debit first"
               + (f" (none of a kind layout {lay.label} already sets)" if lay.label != "native" else "")
               + (f"; each debit includes {own_debit}" if own else "") + ":")
    if not fixes:
        click.echo("    none of the known levers (up to 3 combined) is enough.")
        return
    fix_table = pd.DataFrame([{"levers": " + ".join(f.levers), "debit (points)": f.debit_points,
                               "needs training": "yes" if f.retrain else "no",
                               "GB/stream (all GPUs)": round(f.held_bytes / GB, 2), "max streams": f.max_streams}
                              for f in fixes])
    click.echo(fix_table.to_string(index=False))
    if fp4_said and lay.kv_dtype != "fp4":  # (a fix's fp4: the layout's was said in the header)
        click.echo(f"  note: {fp4_said}")
    click.echo("  debit: points of accuracy on long-context benchmarks as kvsim reads each lever's source (most give a "
               "bound or a word, not a figure: simulator/data/levers.toml has each source and how it was read); "
               "debits within a point are not told apart")


def _per_node(streams: float) -> float:
    """The fit table's streams/node: `streams_text`'s figure, as ``kvsim collapse`` prints it (one decimal,
    ``5.5``; under one stream three significant figures, ``0.0156``: one stream over TP64's 64 nodes read ``0.0``,
    as none does), kept a number so that the column prints as numbers do (``10.0``; with a ``0.0156`` every row
    to that many decimals)."""
    from simulator.collapse import streams_text

    return float(streams_text(streams, grouped=False))


FIT_PLANS_NAMED = 3  # plans a weights-do-not-fit error names (the line's length: `MAX_MESSAGE_CHARS`)
NARROWER_WEIGHTS = ("fp8", "fp4")  # the weight formats a weights-do-not-fit error tries, in this order


def _plans_that_hold(node: NodeSpec, model: ModelSpec, layout: KVLayout, context_tokens: int,
                     memory_utilization: float, block_tokens: int) -> str:
    """What a weights-do-not-fit error suggests: the plans `candidate_plans` compares whose weights fit (the
    first `FIT_PLANS_NAMED`, most streams a node first, then fewest nodes), or, with none, the first narrower
    weight format (fp8, then fp4) under which one does, or that none does (helper-155: "try fp8 weights" was
    said where fp8's weights fit no plan either)."""

    def fitting(spec: ModelSpec) -> list[PlanCapacity]:
        rows = compare_plans(node, spec, layout, context_tokens, candidate_plans(node, spec), memory_utilization,
                             block_tokens)
        return sorted((p for p in rows if p.kv_bytes_per_gpu > 0), key=lambda p: (-p.streams_per_node, p.nodes))

    # a plan whose weights fit but that holds no stream of the context is named as such, or not at all beside one that
    # holds some (helper-191: Llama-3.1-70B on 1xH100 at 32k named TP2 and TP1 PP2, which hold none)
    none_held = f", though none holds a {context_tokens:,}-token stream"
    if held := fitting(model):
        holding = [p for p in held if p.max_streams > 0] or held
        named = ", ".join(f"{p.plan} ({p.nodes} node{'s' * (p.nodes > 1)})" for p in holding[:FIT_PLANS_NAMED])
        more = len(held) - min(len(holding), FIT_PLANS_NAMED)
        return (f"plans whose weights fit{none_held if not held[0].max_streams else ''}: {named}"
                + (f" and {more} more" if more > 0 else ""))
    narrower = [w for w in NARROWER_WEIGHTS if dtype(w).bytes_per_value < dtype(model.weight_dtype).bytes_per_value]
    for w in narrower:
        if held := fitting(with_weight_precision(model, w)):
            p = held[0]
            return (f"no plan kvsim fit compares holds them; with {w} weights (--weight-dtype {w}) "
                    f"{p.plan} ({p.nodes} node{'s' * (p.nodes > 1)}) does")
    return "no plan kvsim fit compares holds them" + (f", nor with {' or '.join(narrower)} weights" if narrower else "")


def _engine_streams(budget: KVBudget, model: ModelSpec, layout: KVLayout, context_tokens: int,
                    block_tokens: int) -> tuple[int, int, int]:
    """Streams of `context_tokens` the engine holds on the budget's nodes, a KV pool's blocks, and a stream's.
    Each replica runs ``kv_groups · pp`` schedulers (`simulator.engine.cluster`: a pipeline's stages in flight,
    vLLM's virtual engines), each with ``floor(blocks / pp)`` of a KV pool's blocks (`blocks_per_group`), a
    stream taking `BlockGeometry.blocks` of them: ``replicas · groups · pp · floor(floor(blocks / pp) /
    blocks(n))``. It can differ from `max_streams`, which counts bytes: by the rounding of that split, and where
    a windowed or compressed layout's blocks bound its bytes from above (`simulator.engine.geometry`)."""
    from simulator.engine.geometry import block_geometry  # (the engine's package: imported when asked)

    geo = block_geometry(model, layout, block_tokens)
    blocks = blocks_per_group(budget, model, layout, geo.block_bytes)
    stream = geo.blocks(context_tokens, geo.overhead(context_tokens))
    plan = budget.plan
    return budget.replicas * plan.kv_groups * plan.pp * (blocks // plan.pp // stream), blocks, stream


@click.command()
@click.option("--hardware", default="8xH100,8xH200,8xB200", show_default=True,
              help="node kinds, comma-separated (see `kvsim hardware`)")
@model_option()
@MODEL_CONFIG
@layout_option(several=True, default="native,fp8,cross-layer:0.5,mla,compress:8:4096,mla+fp8")
@click.option("--tp", type=click.IntRange(min=1),
              help="draw the one plan of this many GPUs tensor-parallel (the same as --plan tpN; not with --plan)")
@WEIGHT_DTYPE
@click.option("--plan", "--plans", "plans", cls=Renamed,
              help="parallelism plans to draw, comma-separated: tpN, dpN (DP attention), +ppN, +epN "
              "(default: TP over the node, and DP attention too for an MLA model; not with --tp)")
@HARDWARE_CATALOG
@click.option("--out", type=OutPath(), default=Path("report/collapse"), show_default=True,
              help="folder for collapse.csv and collapse.png (by default its own, beside kvsim run's report/)")
@click.option("--json", "as_json", is_flag=True, help="print the table's rows as JSON")
def collapse(hardware: str, model_name: str, model_config: Path | None, layouts: str, tp: int | None,
             weight_dtype: str | None, plans: str | None, catalog: Path | None, out: Path, as_json: bool) -> None:
    """The concurrency-collapse chart (max streams vs context, 1k to 1M) and its CSV.

    --plan names the plans to draw, --tp the one plan tpN: give one of them, not both.
    """
    from simulator.charts import close_figure, collapse_figure
    from simulator.collapse import collapse_table, streams_text

    folder = OutputFolder(out, "collapse")
    with config_errors():
        model = _model(model_name, model_config, weight_dtype)
        with at_option("--catalog", catalog):
            cat = load_catalog(catalog)
        kinds = comma_items(hardware, "--hardware", "node kind", "8xH100,8xB200")
        with at_option("--hardware"):
            keys = [cat.node(h).key for h in kinds]
        must_differ(kinds, keys, "--hardware", "node kind")
        texts = comma_items(layouts, "--layout", "KV layout", "native,fp8")
        parsed = {x: model_layout(model, x) for x in texts}  # (each parsed once)
        if not on_command_line("layouts") and is_latent(model, KVLayout()):
            # the default list's MLA retrofits are an MLA model's own layouts: their lines are native's and fp8's
            # again (helper-158: DeepSeek-V3's chart drew 12 lines for 8 distinct ones)
            own = [x for x in texts if parsed[x].attention == "mla"]
            texts = [x for x in texts if x not in own]
            note(f"{' and '.join(own)} left out of the default layouts: {model.key}'s own attention is MLA, so they "
                 "draw native's and fp8's lines (--layout names them)")
        # as each runs on this model: no-sliding on Llama-3.1-8B, mla on DeepSeek-V3 draw native's line again (as
        # `kvsim compare` refuses them beside native; helper-189: two identical lines under two labels)
        labels = [as_run(model, parsed[x]).label for x in texts]
        must_differ(texts, labels, "--layout", "KV layout")
        if plans is not None and tp is not None:
            raise ConfigError(f"collapse: --tp {tp} and --plan {shown(plans)} both name the plan; give one of them "
                              f"(--plan tp{tp} draws TP{tp}, and --plan takes a comma list)")
        if plans:
            names = comma_items(plans, "--plan", "plan", "tp8,dp8+ep8")
            with at_option("--plan"):  # its errors quote the plan as written (plan 'tp8+pp0')
                chosen = [parse_plan(p) for p in names]
            must_differ(names, [p.label for p in chosen], "--plan", "plan")
        else:
            chosen = []
        try:
            # without --plan or --tp, each kind under its own node's default plans (helper-191: the first kind's
            # were every kind's)
            df = collapse_table(cat, model, kinds, texts, tp=tp, plans=chosen, node_defaults=not plans and tp is None)
        except ConfigError as exc:  # a plan the model or node refuses, at the --plan or --tp that named it
            text = str(exc)
            if plans and text.startswith(("plan ", "node ")):
                raise ConfigError(f"--plan: {exc}") from None  # (its part named: 'tp', 'ep', ...)
            if tp is not None and text.startswith("node "):  # TP that does not tile the node, or spans NIC-less ones
                raise ConfigError(f"--tp {tp}: {exc}") from None
            raise
        folder.prepare()  # the inputs held (a bad one leaves no folder behind); nothing is removed yet
        folder.clear()  # the inputs held: collapse's earlier files go now
    for why in df.attrs.get("left_out", []):  # a kind or plan whose weights do not fit: the others drawn
        note(f"left out: {why}")
    csv, png = out / "collapse.csv", out / "collapse.png"
    with stopped_cleanly("collapse", folder):  # Ctrl-C: exit 130, one line, no partial output
        df.to_csv(csv, index=False)
        fig = collapse_figure(df, model, model.max_context_tokens)
        fig.savefig(png, dpi=110)
        close_figure(fig)
        folder.finish()
    if as_json:
        echo_json(records(df))
        return
    pivot = df[df["context_tokens"].isin([4096, 32768, 131072, 1048576])].pivot_table(
        index=["hardware", "plan", "layout"], columns="context_tokens", values="max_streams", aggfunc="first",
        sort=False)
    whole = pd.api.types.is_integer_dtype(df["max_streams"])  # float: a plan spans nodes (5.5 a node, not 5)
    pivot = pivot.astype(int) if whole else pivot
    beyond = [int(c) > model.max_context_tokens for c in pivot.columns]
    pivot.columns = [(f"{int(c) // 1024}k" if int(c) < 2**20 else "1M") + ("*" if past else "")
                     for c, past in zip(pivot.columns, beyond, strict=True)]
    click.echo(f"max concurrent streams per node, {model.key} ({weight_precision(model)} weights):")
    click.echo(pivot.to_string() if whole else pivot.to_string(float_format=lambda v: streams_text(v, grouped=False)))
    spans: dict[tuple[str, int], list[str]] = {}  # a plan over several nodes (one replica spans them) -> its kinds
    for hw, plan_label, nodes in df[df["nodes"] > 1][["hardware", "plan", "nodes"]].drop_duplicates().itertuples(
            index=False):
        spans.setdefault((str(plan_label), int(nodes)), []).append(str(hw))
    for (plan_label, nodes), kinds_over in spans.items():
        click.echo(f"{plan_label} ({', '.join(kinds_over)}): one replica over {nodes} nodes; per node, its streams "
                   f"÷ {nodes} (collapse.csv: nodes, streams_on_nodes)")
    if any(beyond):
        click.echo(f"* beyond {model.key}'s max context of {model.max_context_tokens:,} tokens: memory alone (the "
                   "model cannot read that far; collapse.csv: beyond_max_context)")
    click.echo(f"wrote {csv} and {png}")


@click.command()
@click.option("--catalog", type=click.Path(path_type=Path), help="extra model TOML file")
@click.option("--json", "as_json", is_flag=True, help="every field of every model, as JSON")
def models(catalog: Path | None, as_json: bool) -> None:
    """The model catalog as a table."""
    with config_errors(), at_option("--catalog", catalog):
        table = load_models(catalog)
    from simulator.kv import bytes_per_token

    if as_json:
        echo_json([{**dataclasses.asdict(m), "weight_precision": weight_precision(m),
                    "kv_bytes_per_token": bytes_per_token(m)} for m in table.values()])
        return

    rows = [{"model": m.key, "attention": m.attention, "layers": m.n_layers, "heads": m.n_heads,
             "kv heads": m.n_kv_heads if m.attention != "mla" else "-", "head dim": m.head_dim,
             "params (B)": m.total_params / 1e9, "active (B)": m.active_params / 1e9, "weights": weight_precision(m),
             "max ctx": m.max_context_tokens, "KV B/token": int(bytes_per_token(m))} for m in table.values()]
    click.echo(pd.DataFrame(rows).to_string(index=False, float_format=tenths))
    # a windowed model's figure is every layer's, which a sequence past its window does not hold (helper-194: said by
    # calc, not here)
    windowed = [f"{m.key} ({m.n_layers - m.n_global_layers} of {m.n_layers} layers keep {m.sliding_window:,} tokens)"
                for m in table.values() if m.n_global_layers < m.n_layers]
    if windowed:
        click.echo("KV B/token is every layer's KV of a token; a sliding-window layer keeps only its window, so a "
                   f"longer sequence holds less: {'; '.join(windowed)}. kvsim calc --model M --context N gives a "
                   "sequence's bytes")


def tenths(x: float) -> str:
    """`x` to one decimal, half up from its shortest decimal form (``repr``): 70.55 (billion
    parameters) prints 70.6, as its model card, where ``f"{70.55:.1f}"`` gives 70.5 (the float
    nearest 70.55 lies just below it)."""
    return f"{Decimal(repr(float(x))).quantize(Decimal('0.1'), rounding=ROUND_HALF_UP):,}"


@click.command()
@HARDWARE_CATALOG
@click.option("--json", "as_json", is_flag=True, help="every field of every GPU and node, as JSON")
def hardware(catalog: Path | None, as_json: bool) -> None:
    """The GPU and node catalogs as tables."""
    with config_errors(), at_option("--catalog", catalog):
        cat = load_catalog(catalog)
    if as_json:
        echo_json({"gpus": [dataclasses.asdict(g) for g in cat.gpus.values()],
                   "nodes": [{**dataclasses.asdict(n), "gpu": n.gpu.key} for n in cat.nodes.values()]})
        return
    gpus = [{"gpu": g.key, "HBM GB": g.hbm_bytes / GB, "HBM TB/s": g.hbm_bytes_per_s / 1e12,
             "bf16 TFLOP/s": g.bf16_flops / 1e12, "fp8 TFLOP/s": g.fp8_flops / 1e12,
             "fp4 TFLOP/s": g.fp4_flops / 1e12, "NVLink GB/s/dir": g.nvlink_bytes_per_s / GB,
             "PCIe GB/s/dir": g.pcie_bytes_per_s / GB, "$/GPU-h": g.usd_per_gpu_hour} for g in cat.gpus.values()]
    click.echo(pd.DataFrame(gpus).to_string(index=False, float_format=lambda x: f"{x:,.2f}"))
    click.echo()
    nodes = [{"node": n.key, "GPUs": n.gpus, "HBM GB": n.hbm_bytes / GB, "DRAM TB": n.host_dram_bytes / 1e12,
              "NVMe TB": n.nvme_bytes / 1e12, "NVMe GB/s": n.nvme_bytes_per_s / GB,
              "NVLink GPUs": n.domain_gpus,
              "NIC GB/s/GPU/dir": n.nic_bytes_per_s / GB, "NIC µs": n.nic_latency_s * 1e6, "$/h": n.usd_per_hour}
             for n in cat.nodes.values()]
    click.echo(pd.DataFrame(nodes).to_string(index=False, float_format=lambda x: f"{x:,.2f}"))


