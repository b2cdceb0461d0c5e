"""Strategy sets side by side: the same requests (same seed) under each, one row per set.

A strategy set is a ``+``-joined spec of levers from the three families::

    layout     native, fp8 (or bf16, int8, int4, fp4), mla[:rank], cross-layer[:fraction],
               compress[:ratio[:recent]], mha, mqa, gqa:N, no-sliding
    retention  streaming-llm[:window], h2o[:budget], snapkv[:budget]
               (a budget below 1 is a fraction of the prompt, else tokens)
    reuse      prefix, dram, nvme (tiers under the prefix cache), lru, lfu, fifo (its eviction)

e.g. ``native``, ``fp8``, ``prefix+dram``, ``prefix+fp8``, ``streaming-llm:4096``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.figure import Figure

from simulator.charts import plain_text
from simulator.engine import EngineConfig, StepTimer, run
from simulator.engine.caches import make_strategy
from simulator.engine.cluster import TimerFactory
from simulator.engine.retention import make_retention
from simulator.errors import ConfigError, shown
from simulator.kv import parse_layout
from workloads.request import Request

RETENTIONS = {"streaming-llm": "window_tokens", "h2o": "budget_tokens", "snapkv": "budget_tokens"}
REUSE = ("prefix", "dram", "nvme", "lru", "lfu", "fifo")


def parse_strategy_set(spec: str, base: EngineConfig) -> EngineConfig:
    """`base` (hardware, model, scheduler) with exactly the levers of `spec`: a set names every
    lever it uses, so the base's own layout, cache and retention are not inherited (``native``
    is the model as it ships, full KV, no reuse)."""
    layout_parts: list[str] = []
    cache, retention = "full", "full"
    cache_params: dict[str, object] = {}
    retention_params: dict[str, object] = {}
    for raw in filter(None, (p.strip() for p in spec.split("+"))):
        name, _, arg = raw.partition(":")
        if name in RETENTIONS:
            retention, retention_params = name, {}
            if arg:
                try:
                    value = float(arg)
                except ValueError:
                    value = math.nan
                fraction = name != "streaming-llm" and 0 < value < 1
                if not (fraction or (math.isfinite(value) and value >= 1 and value == int(value))):
                    rule = "whole tokens >= 1" + ("" if name == "streaming-llm" else ", or a fraction in (0, 1)")
                    raise ConfigError(f"strategy set {shown(spec)}: {name!r} takes {rule} (got {shown(arg)})")
                if name == "streaming-llm":
                    retention_params = {"window_tokens": int(value)}
                elif fraction:
                    retention_params = {"budget_fraction": value, "budget_tokens": 0}
                else:
                    retention_params = {"budget_tokens": int(value)}
        elif name in REUSE:
            cache = "prefix"
            if name in ("dram", "nvme"):
                cache_params[name] = True
            elif name != "prefix":
                cache_params["eviction"] = name
        else:
            layout_parts.append(raw)
    try:
        layout = parse_layout("+".join(["native", *layout_parts]))
    except ConfigError as e:
        raise ConfigError(f"strategy set {shown(spec)}: {e}; or a retention ({', '.join(RETENTIONS)}) or reuse "
                          f"lever ({', '.join(REUSE)})") from None
    make_strategy(cache, **cache_params)  # its parameters fail now, before any run
    make_retention(retention, **retention_params)
    return replace(base, layout=layout, cache=cache, cache_params=cache_params, retention=retention,
                   retention_params=retention_params)


def check_context(config: EngineConfig, requests: Sequence[Request], what: str = "compare") -> None:
    """Every request's prompt + output fits the model's context window (as `kvsim run` requires):
    a longer one could never run, and a comparison of nothing completed is no answer."""
    from simulator.models import ModelSpec, get_model

    model = config.model if isinstance(config.model, ModelSpec) else get_model(config.model)
    longest = max((r.prompt_tokens + r.output_tokens for r in requests), default=0)
    if longest > model.max_context_tokens:
        raise ConfigError(f"{what}: workload requests must fit {model.key}'s context of {model.max_context_tokens:,} "
                          f"tokens (got a request of {longest:,} prompt + output tokens); choose a model with a "
                          "longer context or a workload of shorter requests")


def compare_strategies(base_config: EngineConfig, requests: Sequence[Request], specs: list[str], seed: int = 0, *,
                       timer: StepTimer | TimerFactory | None = None) -> pd.DataFrame:
    """Run `requests` under each strategy set; one row per set with the headline figures.

    ``usd_per_million_tokens = cost_usd / (prompt + output tokens of completed requests) · 1e6``.
    ``memory_factor = layout_memory_factor · kept_kv_fraction``: KV bytes a sequence ends with,
    against an MHA, bf16, full-retention baseline (the layout's `simulator.kv.footprint` factors at
    the mean context, times the share of its tokens' KV retention keeps: `kept_kv_fraction`).
    """
    must_specs = [s.strip() for s in specs if s.strip()]
    if not must_specs:
        raise ConfigError("compare: 'strategies' must name at least one strategy set (got none)")
    configs = [parse_strategy_set(s, base_config) for s in must_specs]  # all errors before any run
    check_context(base_config, requests)
    rows: list[dict[str, Any]] = []
    for spec, config in zip(must_specs, configs, strict=True):
        res = run(config, requests, seed=seed, timer=timer)
        s, req = res.summary, res.requests
        done = req[req.outcome == "completed"]
        tokens = int(done.prompt_tokens.sum() + done.output_tokens.sum())
        layout_factor = math.prod(s["layout_factors"].values())
        kept = kept_kv_fraction(req) if config.retention != "full" else 1.0
        rows.append({
            "strategy": spec, "layout": config.layout.label, "cache": config.cache, "retention": config.retention,
            "kv_blocks_per_replica": s["kv_blocks_per_replica"], "completed": s["completed"],
            "max_concurrency": s["max_concurrency"], "mean_concurrency": s["mean_concurrency"],
            "tokens_per_s": s["tokens_per_s"], "output_tokens_per_s": s["output_tokens_per_s"],
            "ttft_p50_s": s["ttft_p50_s"], "ttft_p99_s": s["ttft_p99_s"], "tpot_p99_s": s["tpot_p99_s"],
            "usd_per_million_tokens": s["cost_usd"] / tokens * 1e6 if tokens else math.nan,
            "prefix_hit_ratio_tokens": s["prefix_hit_ratio_tokens"],
            "quality_debit_points": s["quality_debit_points"],
            "memory_factor": layout_factor * kept,
            "layout_memory_factor": layout_factor,
            "kept_kv_fraction": kept,
        })
    return pd.DataFrame(rows)


def kept_kv_fraction(requests: pd.DataFrame) -> float:
    """Share of its KV a completed request still held at its end, over completed requests::

        kept = 1 − Σ evicted_tokens / Σ (prompt + output − 1)

    (a finished sequence has the KV of ``prompt + output − 1`` tokens: the last output token's
    is never written; retention dropped ``evicted_tokens`` of them). 1 under full retention; NaN
    when nothing completed.
    """
    done = requests[requests.outcome == "completed"]
    full = int((done.prompt_tokens + done.output_tokens - 1).sum())
    return 1.0 - int(done.evicted_tokens.sum()) / full if full > 0 else math.nan


PANELS = (("max_concurrency", "max concurrent requests", "requests"),
          ("tokens_per_s", "throughput (prompt + output)", "tokens / s"),
          ("ttft_p99_s", "p99 time to first token", "seconds (log)"),
          ("usd_per_million_tokens", "cost per million tokens", "USD / Mtok"),
          ("prefix_hit_ratio_tokens", "prefix-cache hit share", "share of prompt tokens"),
          ("quality_debit_points", "stated quality debit", "points (LongBench-style)"))


@plain_text
def compare_figure(df: pd.DataFrame, title: str) -> Figure:
    """A bar chart per headline figure, one bar per strategy set (same colour per set across panels)."""
    fig, axes = plt.subplots(2, 3, figsize=(16, 9))
    colors = [f"C{i % 10}" for i in range(len(df))]
    labels = list(df["strategy"])
    for ax, (col, name, unit) in zip(axes.flat, PANELS, strict=True):
        values = df[col].fillna(0.0).to_numpy()
        bars = ax.bar(range(len(df)), values, color=colors)
        ax.set_title(name, fontsize=11)
        ax.set_ylabel(unit)
        ax.set_xticks(range(len(df)), labels, rotation=30, ha="right", fontsize=9)
        if col == "ttft_p99_s" and (values > 0).all() and values.max() / values.min() > 20:
            ax.set_yscale("log")
        else:
            ax.set_ylabel(unit.replace(" (log)", ""))
        for bar, v in zip(bars, values, strict=True):
            text = f"{v:.0%}" if col == "prefix_hit_ratio_tokens" else f"{v:,.0f}" if v >= 1000 else f"{v:.3g}"
            ax.annotate(text, (bar.get_x() + bar.get_width() / 2, bar.get_height()), ha="center", va="bottom",
                        fontsize=8, xytext=(0, 2), textcoords="offset points")
        ax.grid(True, axis="y", alpha=0.3)
        ax.margins(y=0.15)
    fig.suptitle(title, fontsize=13)
    fig.tight_layout()
    return fig
