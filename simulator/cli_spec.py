"""Analytic commands: ``calc``, ``fit``, ``collapse``, ``models``, ``hardware``."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import click
import pandas as pd

from hardware.catalog import load_catalog
from simulator.capacity import DEFAULT_MEMORY_UTILIZATION, kv_budget, max_context, max_streams
from simulator.cli_common import config_errors, echo_json
from simulator.kv import DEFAULT_BLOCK_TOKENS, footprint, parse_layout
from simulator.levers import rank_fixes
from simulator.models import ModelSpec, get_model, load_models
from simulator.units import GB, MB

MODEL_HELP = "catalog name (see `kvsim models`) or path to a Hugging Face config.json"
LAYOUT_HELP = ("KV layout levers joined by '+': native, mha, mqa, gqa:N, mla[:rank], cross-layer[:f], "
               "compress[:ratio[:recent]], no-sliding, or a KV dtype (fp8, int8, int4, fp4)")


def _model(name: str, model_config: Path | None) -> ModelSpec:
    return get_model(str(model_config)) if model_config else get_model(name)


def _layout(layout: str, kv_dtype: str | None) -> str:
    return f"{layout}+{kv_dtype}" if kv_dtype else layout


@click.command()
@click.option("--model", "model_name", default="Llama-3-70B", show_default=True, help=MODEL_HELP)
@click.option("--model-config", type=click.Path(path_type=Path), help="Hugging Face config.json (overrides --model)")
@click.option("--layout", default="native", show_default=True, help=LAYOUT_HELP)
@click.option("--kv-dtype", help="KV dtype (shorthand for adding it to --layout)")
@click.option("--context", "context_tokens", type=click.IntRange(min=1), required=True, help="tokens per sequence")
@click.option("--batch", type=click.IntRange(min=1), default=1, show_default=True, help="sequences")
@click.option("--block-tokens", type=click.IntRange(min=1), default=DEFAULT_BLOCK_TOKENS, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="machine-readable output")
def calc(model_name: str, model_config: Path | None, layout: str, kv_dtype: str | None, context_tokens: int,
         batch: int, block_tokens: int, as_json: bool) -> None:
    """KV bytes per token, per sequence and per batch, with the factor of each lever."""
    with config_errors():
        model = _model(model_name, model_config)
        fp = footprint(model, parse_layout(_layout(layout, kv_dtype)), context_tokens, batch, block_tokens)
    if as_json:
        echo_json(dataclasses.asdict(fp))
        return
    click.echo(f"{fp.model}, layout {fp.layout}, {fp.context_tokens:,} tokens × batch {fp.batch}")
    click.echo(f"  bytes per token      {fp.bytes_per_token:>16,.0f} B")
    click.echo(f"  per sequence         {fp.sequence_bytes / GB:>16,.3f} GB   "
               f"(paged, {fp.block_tokens}-token blocks: {fp.sequence_bytes_paged / GB:,.3f} GB)")
    click.echo(f"  batch                {fp.batch_bytes / GB:>16,.3f} GB   "
               f"(paged: {fp.batch_bytes_paged / GB:,.3f} GB, rounding waste {fp.paging_waste_bytes / MB:,.1f} MB)")
    click.echo(f"  MHA bf16 baseline    {fp.mha_bf16_batch_bytes / GB:>16,.3f} GB")
    click.echo("  factor of each lever (product = batch / baseline):")
    for name, f in fp.factors.items():
        click.echo(f"    {name:<16} × {f:.4f}")


@click.command()
@click.option("--hardware", default="8xH100", show_default=True, help="node (see `kvsim hardware`)")
@click.option("--model", "model_name", default="Llama-3-70B", show_default=True, help=MODEL_HELP)
@click.option("--model-config", type=click.Path(path_type=Path), help="Hugging Face config.json (overrides --model)")
@click.option("--layout", default="native", show_default=True, help=LAYOUT_HELP)
@click.option("--kv-dtype", help="KV dtype (shorthand for adding it to --layout)")
@click.option("--context", "context_tokens", type=click.IntRange(min=1), required=True)
@click.option("--batch", type=click.IntRange(min=1), default=1, show_default=True, help="target concurrent streams")
@click.option("--tp", type=click.IntRange(min=1), help="tensor parallelism (default: all GPUs of the node)")
@click.option("--memory-utilization", type=click.FloatRange(0, 1, min_open=True),
              default=DEFAULT_MEMORY_UTILIZATION, show_default=True)
@click.option("--block-tokens", type=click.IntRange(min=1), default=DEFAULT_BLOCK_TOKENS, show_default=True)
@click.option("--catalog", type=click.Path(path_type=Path), help="extra hardware TOML file")
@click.option("--json", "as_json", is_flag=True, help="machine-readable output")
def fit(hardware: str, model_name: str, model_config: Path | None, layout: str, kv_dtype: str | None,
        context_tokens: int, batch: int, tp: int | None, memory_utilization: float, block_tokens: int,
        catalog: Path | None, as_json: bool) -> None:
    """KV budget of a node, max streams at a context, and the levers that make a target fit."""
    with config_errors():
        model = _model(model_name, model_config)
        node = load_catalog(catalog).node(hardware)
        budget = kv_budget(node, model, tp, memory_utilization)
        lay = parse_layout(_layout(layout, kv_dtype))
        streams = max_streams(budget, model, lay, context_tokens, block_tokens)
        longest = max_context(budget, model, lay, batch, block_tokens)
        fixes = [] if streams >= batch else rank_fixes(budget, model, lay, context_tokens, batch, block_tokens)
    result = {
        "hardware": node.key, "model": model.key, "layout": lay.label, "tp": budget.tp,
        "replicas": budget.replicas, "hbm_bytes": node.hbm_bytes, "weight_bytes_per_replica":
        budget.weight_bytes_per_replica, "kv_budget_bytes": budget.kv_bytes, "context_tokens": context_tokens,
        "batch": batch, "max_streams": streams, "fits": streams >= batch, "max_context_tokens_at_batch": longest,
        "fixes": [dataclasses.asdict(f) for f in fixes],
    }
    if as_json:
        echo_json(result)
        return
    click.echo(f"{model.key} on {node.key} (tp {budget.tp}, {budget.replicas} replica(s)), layout {lay.label}")
    click.echo(f"  HBM {node.hbm_bytes / GB:,.0f} GB × {memory_utilization:g} − weights "
               f"{budget.weight_bytes_per_replica / GB:,.1f} GB/replica = KV budget {budget.kv_bytes / GB:,.1f} GB")
    click.echo(f"  max streams at {context_tokens:,} tokens: {streams:,}")
    click.echo(f"  longest context for {batch} stream(s): {longest:,} tokens"
               + ("  (beyond the model's max context)" if longest > model.max_context_tokens else ""))
    if streams >= batch:
        click.echo(f"  target {batch} × {context_tokens:,} tokens fits.")
        return
    click.echo(f"  target {batch} × {context_tokens:,} tokens does NOT fit; levers that make it fit, "
               "cheapest stated quality debit first:")
    if not fixes:
        click.echo("    none of the known levers (up to 3 combined) is enough.")
        return
    table = pd.DataFrame([{"levers": " + ".join(f.levers), "debit (points)": f.debit_points,
                           "needs training": "yes" if f.retrain else "no",
                           "GB/stream": round(f.sequence_bytes / GB, 2), "max streams": f.max_streams}
                          for f in fixes])
    click.echo(table.to_string(index=False))


@click.command()
@click.option("--hardware", default="8xH100,8xH200,8xB200", show_default=True, help="nodes, comma-separated")
@click.option("--model", "model_name", default="Llama-3-70B", show_default=True, help=MODEL_HELP)
@click.option("--model-config", type=click.Path(path_type=Path), help="Hugging Face config.json (overrides --model)")
@click.option("--layouts", default="native,fp8,cross-layer:0.5,mla,compress:8:4096,mla+fp8", show_default=True,
              help="layouts to draw, comma-separated")
@click.option("--tp", type=click.IntRange(min=1), help="tensor parallelism (default: all GPUs of the node)")
@click.option("--catalog", type=click.Path(path_type=Path), help="extra hardware TOML file")
@click.option("--out", type=click.Path(path_type=Path), default=Path("report"), show_default=True)
def collapse(hardware: str, model_name: str, model_config: Path | None, layouts: str, tp: int | None,
             catalog: Path | None, out: Path) -> None:
    """The concurrency-collapse chart (max streams vs context, 1k to 1M) and its CSV."""
    from simulator.charts import collapse_figure
    from simulator.collapse import collapse_table

    with config_errors():
        model = _model(model_name, model_config)
        df = collapse_table(load_catalog(catalog), model, [h for h in hardware.split(",") if h],
                            [x for x in layouts.split(",") if x], tp=tp)
    out.mkdir(parents=True, exist_ok=True)
    csv, png = out / "collapse.csv", out / "collapse.png"
    df.to_csv(csv, index=False)
    collapse_figure(df, model.key, model.max_context_tokens).savefig(png, dpi=110)
    pivot = df[df["context_tokens"].isin([4096, 32768, 131072, 1048576])].pivot_table(
        index=["hardware", "layout"], columns="context_tokens", values="max_streams", aggfunc="first",
        sort=False).astype(int)
    pivot.columns = [f"{int(c) // 1024}k" if int(c) < 2**20 else "1M" for c in pivot.columns]
    click.echo(f"max concurrent streams per node, {model.key}:")
    click.echo(pivot.to_string())
    click.echo(f"wrote {csv} and {png}")


@click.command()
@click.option("--catalog", type=click.Path(path_type=Path), help="extra model TOML file")
def models(catalog: Path | None) -> None:
    """The model catalog as a table."""
    with config_errors():
        table = load_models(catalog)
    from simulator.kv import bytes_per_token

    rows = [{"model": m.key, "attention": m.attention, "layers": m.n_layers, "heads": m.n_heads,
             "kv heads": m.n_kv_heads if m.attention != "mla" else "-", "head dim": m.head_dim,
             "params (B)": m.total_params / 1e9, "active (B)": m.active_params / 1e9, "weights": m.weight_dtype,
             "max ctx": m.max_context_tokens, "KV B/token": int(bytes_per_token(m))} for m in table.values()]
    click.echo(pd.DataFrame(rows).to_string(index=False, float_format=lambda x: f"{x:,.1f}"))


@click.command()
@click.option("--catalog", type=click.Path(path_type=Path), help="extra hardware TOML file")
def hardware(catalog: Path | None) -> None:
    """The GPU and node catalogs as tables."""
    with config_errors():
        cat = load_catalog(catalog)
    gpus = [{"gpu": g.key, "HBM GB": g.hbm_bytes / GB, "HBM TB/s": g.hbm_bytes_per_s / 1e12,
             "bf16 TFLOP/s": g.bf16_flops / 1e12, "fp8 TFLOP/s": g.fp8_flops / 1e12,
             "fp4 TFLOP/s": g.fp4_flops / 1e12, "NVLink GB/s/dir": g.nvlink_bytes_per_s / GB,
             "PCIe GB/s/dir": g.pcie_bytes_per_s / GB, "$/GPU-h": g.usd_per_gpu_hour} for g in cat.gpus.values()]
    click.echo(pd.DataFrame(gpus).to_string(index=False, float_format=lambda x: f"{x:,.2f}"))
    click.echo()
    nodes = [{"node": n.key, "GPUs": n.gpus, "HBM GB": n.hbm_bytes / GB, "DRAM TB": n.host_dram_bytes / 1e12,
              "NVMe TB": n.nvme_bytes / 1e12, "$/h": n.usd_per_hour} for n in cat.nodes.values()]
    click.echo(pd.DataFrame(nodes).to_string(index=False, float_format=lambda x: f"{x:,.2f}"))


