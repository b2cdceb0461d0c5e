"""Charts: functions take a DataFrame and an optional Axes, return the Axes, never show()."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar, cast

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.text import Text
from matplotlib.ticker import FuncFormatter, MaxNLocator

from simulator.units import GB

F = TypeVar("F", bound=Callable[..., Any])


def plain_text(fn: F) -> F:
    """Decorator of a chart function: the texts of the figure it draws are plain, ``$`` included.

    Titles, labels, legends and annotations embed user strings (scenario, file, model, node,
    strategy and profile names); matplotlib reads ``$...$`` as mathtext and a formula it cannot
    parse fails when the figure is laid out or saved, after the tables are written. This is the one
    place that turns parsing off: while `fn` draws (``text.parse_math``, this one setting, not
    `plt.rc_context`, whose exit would also restore ``interactive`` and hide a notebook's later
    charts), and afterwards on every text of its figure but the tick labels, which never hold user
    strings and which a log axis writes as ``$\\mathdefault{10^{2}}$``.
    """

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        parse_math = plt.rcParams["text.parse_math"]
        plt.rcParams["text.parse_math"] = False
        try:
            out = fn(*args, **kwargs)
        finally:
            plt.rcParams["text.parse_math"] = parse_math
        fig = out if isinstance(out, Figure) else getattr(out, "figure", None)
        if fig is not None:
            ticks = {id(t) for ax in fig.axes for axis in (ax.xaxis, ax.yaxis)
                     for tick in (*axis.get_major_ticks(), *axis.get_minor_ticks())
                     for t in (tick.label1, tick.label2)}
            for text in fig.findobj(Text):
                text.set_parse_math(id(text) in ticks and parse_math)
        return out

    return cast(F, wrapper)


def close_figure(fig: Any) -> None:
    """Release a figure the command line drew to a file (a long session must not pile them up)."""
    plt.close(fig)


def _tokens(x: float, _pos: int = 0) -> str:
    if x >= 2**20:
        return f"{x / 2**20:g}M"
    if x >= 2**10:
        return f"{x / 2**10:g}k"
    return f"{x:g}"


@plain_text
def plot_collapse_panel(df: pd.DataFrame, ax: Axes | None = None, max_context_tokens: int | None = None,
                        simulated: pd.DataFrame | None = None) -> Axes:
    """Max streams vs context (log-log) for one hardware kind: a colour per KV layout, a line style
    per parallelism plan (column ``plan``, optional).

    `simulated` (optional: columns ``context_tokens``, ``peak_streams``) adds measured points.
    """
    ax = ax or plt.figure(figsize=(7, 5)).gca()
    df = df if "plan" in df else df.assign(plan="")
    hw = df["hardware"].iloc[0]
    plans = list(dict.fromkeys(df["plan"]))
    colours = {lay: f"C{i}" for i, lay in enumerate(dict.fromkeys(df["layout"]))}
    styles = ["-", "--", "-.", ":"]
    drawn: dict[tuple[int, ...], str] = {}  # a line already drawn -> its layout
    for (plan, layout), g in df.groupby(["plan", "layout"], sort=False):
        per_token_kb = g["bytes_per_token"].iloc[0] / 1e3
        g = g[g["max_streams"] > 0]
        name = f"{layout} ({per_token_kb:,.0f} kB/token)" + (f", {plan}" if len(plans) > 1 else "")
        key = (plans.index(plan), *g["max_streams"].astype(int))
        ls: Any = styles[plans.index(plan) % 4]
        lw = 1.8
        if key in drawn:  # the same streams as a layout drawn before: say so, and let both show
            name += f": the same line as {drawn[key]}"
            ls, lw = (0, (2, 3)), 3.0
        else:
            drawn[key] = str(layout)
        ax.plot(g["context_tokens"], g["max_streams"], color=colours[layout], ls=ls, lw=lw, label=name,
                zorder=3 if lw > 1.8 else 2)
    first = df[(df["layout"] == df["layout"].iloc[0]) & (df["plan"] == plans[0])]
    native = first.set_index("context_tokens")["max_streams"]
    for n in (4096, 131072):
        if n in native.index and native[n] > 0:
            ax.annotate(f"{native[n]:,} @ {_tokens(n)}", (n, native[n]), textcoords="offset points",
                        xytext=(8, -14), fontsize=9, color=colours[df["layout"].iloc[0]], fontweight="bold")
    if max_context_tokens:
        ax.axvline(max_context_tokens, color="grey", ls=":", lw=1)
        ax.text(max_context_tokens, 0.98, "model's max context ", rotation=90, va="top", ha="right",
                fontsize=8, color="grey", transform=ax.get_xaxis_transform())
    if simulated is not None and len(simulated):
        ax.scatter(simulated["context_tokens"], simulated["peak_streams"], color="black", marker="X", s=60,
                   zorder=5, label="simulated peak, flooded")
        if "mean_streams" in simulated:
            ax.scatter(simulated["context_tokens"], simulated["mean_streams"], facecolors="none",
                       edgecolors="black", marker="o", s=60, zorder=5, label="simulated mean at 80% offered load")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.xaxis.set_major_formatter(FuncFormatter(_tokens))
    ax.set_xlabel("context length per stream (tokens)")
    ax.set_ylabel("max concurrent streams per node")
    per_gpu = "kv_budget_bytes_per_gpu" in df
    budgets = df.groupby("plan", sort=False)["kv_budget_bytes_per_gpu" if per_gpu else "kv_budget_bytes"].first() / GB
    ax.set_title(f"{hw}: KV budget per {'GPU' if per_gpu else 'node'} " + ", ".join(
        f"{gb:,.0f} GB" + (f" ({plan})" if len(plans) > 1 else "") for plan, gb in budgets.items()), fontsize=10)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(title="KV layout" + (", plan" if len(plans) > 1 else ""), fontsize=8, title_fontsize=8)
    return ax


@plain_text
def collapse_figure(df: pd.DataFrame, model: str, max_context_tokens: int | None = None,
                    simulated: pd.DataFrame | None = None) -> Figure:
    """One panel per hardware kind, sharing the y axis; `simulated` adds measured streams per kind
    and, when it carries goodput, a second row with the share of requests meeting the SLOs."""
    kinds = list(dict.fromkeys(df["hardware"]))
    with_goodput = simulated is not None and "goodput_fraction" in simulated and len(simulated) > 0
    rows = 2 if with_goodput else 1
    fig, axes = plt.subplots(rows, len(kinds), figsize=(max(8.0, 6.2 * len(kinds)), 5.4 + 2.6 * (rows - 1)),
                             sharey="row", squeeze=False, gridspec_kw={"height_ratios": [3, 1.2][:rows]})
    for col, hw in enumerate(kinds):
        sim = simulated[simulated["hardware"] == hw] if simulated is not None else None
        plot_collapse_panel(df[df["hardware"] == hw], axes[0][col], max_context_tokens, sim)
        if with_goodput and sim is not None:
            g = axes[1][col]
            g.plot(sim["context_tokens"], 100 * sim["goodput_fraction"], color="black", marker="s", ms=5)
            g.set_xscale("log", base=2)
            g.xaxis.set_major_formatter(FuncFormatter(_tokens))
            g.set_xlim(axes[0][col].get_xlim())
            g.set_ylim(-5, 105)
            g.set_xlabel("context length per stream (tokens)")
            g.set_title("simulated, native layout, 80% of the analytic concurrency offered", fontsize=9)
            g.grid(True, alpha=0.3)
            axes[0][col].set_xlabel("")
    if with_goodput:
        axes[1][0].set_ylabel("requests meeting\nthe SLOs (%)")
    for ax in axes[0][1:]:
        ax.set_ylabel("")
    sep = " " if len(kinds) > 1 else "\n"  # one panel is too narrow for the subtitle on one line
    fig.suptitle(f"Concurrency collapse: {model}\nmax concurrent streams per node vs context length{sep}"
                 "(KV budget = usable HBM − weights, on the binding GPU)", fontsize=11)
    fig.tight_layout()
    return fig


def _cdf(ax: Axes, values: pd.Series, label: str) -> None:
    v = values.dropna().sort_values().to_numpy()
    if len(v):
        ax.plot(v, (np.arange(1, len(v) + 1)) / len(v), lw=1.8, label=label)


@plain_text
def latency_figure(frames: dict[str, pd.DataFrame], slo_ttft_s: float, slo_tpot_s: float) -> Figure:
    """TTFT and TPOT distributions (CDFs) of completed requests, one line per hardware kind."""
    fig, (a, b) = plt.subplots(1, 2, figsize=(12, 4.6))
    for hw, df in frames.items():
        done = df[df.outcome == "completed"]
        _cdf(a, done.ttft_s, hw)
        _cdf(b, done.tpot_mean_s * 1e3, hw)
    a.axvline(slo_ttft_s, color="red", ls=":", lw=1.2, label=f"SLO p99 {slo_ttft_s:g} s")
    b.axvline(slo_tpot_s * 1e3, color="red", ls=":", lw=1.2, label=f"SLO p99 {slo_tpot_s * 1e3:g} ms")
    for ax in (a, b):
        ax.axhline(0.99, color="grey", lw=0.8, ls="--")
        ax.set_xscale("log")
        ax.set_ylabel("share of completed requests")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8, loc="lower right")
    a.set(xlabel="time to first token (s, log)", title="TTFT distribution")
    b.set(xlabel="mean time per output token (ms, log)", title="TPOT distribution")
    fig.tight_layout()
    return fig


@plain_text
def timeseries_figure(frames: dict[str, pd.DataFrame], blocks_per_replica: dict[str, int]) -> Figure:
    """KV-pool use, waiting requests and GPU utilisation over time, averaged over each fleet's replicas."""
    fig, (a, b, c) = plt.subplots(3, 1, figsize=(12, 8.4), sharex=True)
    for i, (hw, ts) in enumerate(frames.items()):
        if ts.empty:
            continue
        t = ts.assign(minute=(ts.time_s // 10) * 10 / 60)
        g = t.groupby("minute")
        color = f"C{i}"
        a.plot(g.kv_blocks_used.mean().index, 100 * g.kv_blocks_used.mean() / blocks_per_replica[hw], label=hw,
               color=color)
        b.plot(g.waiting.mean().index, g.waiting.mean(), label=hw, color=color)
        if "mfu" in t:
            c.plot(g.mfu.mean().index, 100 * g.mfu.mean(), label=f"{hw} MFU", color=color)
            c.plot(g.hbm_bw_util.mean().index, 100 * g.hbm_bw_util.mean(), label=f"{hw} HBM bandwidth",
                   color=color, ls="--")
    a.set(ylabel="KV pool used, incl.\ncached prefixes (% of blocks)",
          title="KV memory, queue and GPU utilisation over time (10 s means per replica)")
    a.set_ylim(0, 105)
    b.set(ylabel="waiting requests per replica")
    c.set(xlabel="simulated time (min)", ylabel="utilisation of the step (%)")
    c.set_ylim(0, 105)
    for ax in (a, b, c):
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    return fig


@plain_text
def capacity_figure(plan: pd.DataFrame, title: str) -> Figure:
    """Nodes needed per hardware kind (with the memory floor) and the fleet's $/hour. A plan with a
    ``fleet`` column (`simulator.xpyd.plan_split_capacity`) draws an xPyD fleet's prefill nodes hatched
    at the bottom of its bar, and labels each bar with its fleet."""
    import textwrap

    split = "fleet" in plan
    fig, (a, b) = plt.subplots(1, 2, figsize=(13 if split else 11, 4.8 if split else 4.4))
    x = np.arange(len(plan))
    labels = [f"{hw}\n{f}" for hw, f in zip(plan.hardware, plan.fleet, strict=True)] if split else list(plan.hardware)
    prefill = plan.prefill_nodes if split else pd.Series(0, index=plan.index)
    a.bar(x - 0.2, plan.nodes, 0.4, label="nodes to meet the SLOs (simulated)")
    if split and prefill.any():
        a.bar(x - 0.2, prefill, 0.4, color="C1", hatch="//", edgecolor="0.2", label="of which prefill nodes (xPyD)")
    a.bar(x + 0.2, plan.memory_floor_nodes, 0.4, label="memory floor (analytic; xPyD: its decode pool)", color="0.6")
    for i, (n, why) in enumerate(zip(plan.nodes, plan.binding, strict=True)):
        label = f"{n}: one node suffices" if why.startswith("none") else f"{n} (binds: {why})"
        a.annotate(textwrap.fill(label, 22), (i - 0.2, n), ha="center", va="bottom", fontsize=8)
    a.set(xticks=x, ylabel="nodes", title="Fleet size")
    a.set_ylim(0, max(plan.nodes) * 1.35 + 1)
    a.yaxis.set_major_locator(MaxNLocator(integer=True))
    a.legend(fontsize=8, loc="upper right")
    b.bar(x, plan.usd_per_hour, color="C2")
    for i, (usd, per_m) in enumerate(zip(plan.usd_per_hour, plan.usd_per_million_output_tokens, strict=True)):
        b.annotate(f"${usd:,.0f}/h\n${per_m:,.2f}/Mtok out", (i, usd), ha="center", va="bottom", fontsize=9)
    b.set(xticks=x, ylabel="fleet cost (USD per hour)", title="Fleet cost")
    b.set_ylim(0, max(plan.usd_per_hour) * 1.3)
    for ax in (a, b):
        ax.set_xticklabels(labels, fontsize=8 if split else None)
        ax.grid(True, axis="y", alpha=0.3)
    fig.suptitle(f"Capacity plan: {title}" + (" (aggregated vs disaggregated at the same SLOs)" if split else ""))
    fig.tight_layout()
    return fig


@plain_text
def fleet_figure(fleets: pd.DataFrame, title: str, slo_ttft_s: float, slo_tpot_s: float) -> Figure:
    """Aggregated vs disaggregated fleets (`ScenarioRun.fleet_comparison`): cost, latency against the
    SLOs, and where each fleet's time and memory go. A fleet that misses an SLO has hatched bars."""
    fig, (a, b, c) = plt.subplots(1, 3, figsize=(16, 5.2), gridspec_kw={"width_ratios": [1, 1, 1.6]})
    x = np.arange(len(fleets))
    names = list(fleets.fleet)
    ok = (fleets.ttft_p99_of_slo <= 1) & (fleets.tpot_p99_of_slo <= 1)
    colours = ["C1" if split else "C0" for split in fleets.disaggregated]
    hatch = ["" if good else "//" for good in ok]
    bars = a.bar(x, fleets.usd_per_million_output_tokens, color=colours, hatch=hatch, edgecolor="0.2")
    for i, (bar, usd, n) in enumerate(zip(bars, fleets.usd_per_hour, fleets.nodes, strict=True)):
        a.annotate(f"{n} nodes\n${usd:,.0f}/h", (i, bar.get_height()), ha="center", va="bottom", fontsize=8)
    a.set(xticks=x, ylabel="cost (USD per million output tokens)", title="Cost")
    a.set_ylim(0, float(fleets.usd_per_million_output_tokens.max()) * 1.3)
    a.bar(0, 0, color="C0", label="aggregated")
    a.bar(0, 0, color="C1", label="disaggregated (xPyD)")
    a.bar(0, 0, color="white", edgecolor="0.2", hatch="//", label="misses an SLO")
    a.legend(fontsize=8, loc="upper left")
    w = 0.38
    b.bar(x - w / 2, 100 * fleets.ttft_p99_of_slo, w, label=f"TTFT p99 (SLO {slo_ttft_s:g} s)", color="C2")
    b.bar(x + w / 2, 100 * fleets.tpot_p99_of_slo, w, label=f"TPOT p99 (SLO {slo_tpot_s * 1e3:g} ms)", color="C4")
    b.axhline(100, color="red", ls=":", lw=1.2, label="the SLO")
    b.set(xticks=x, ylabel="p99 latency (% of its SLO)", title="Latency against the SLOs")
    b.legend(fontsize=8, loc="upper left")
    b.set_ylim(0, max(110.0, 130 * float(max(fleets.ttft_p99_of_slo.max(), fleets.tpot_p99_of_slo.max()))))
    parts = [("prefill_busy", "busy: prefill replicas"), ("decode_busy", "busy: decode replicas"),
             ("prefill_kv", "KV used: prefill pool"), ("decode_kv", "KV used: decode pool"),
             ("link_util", "KV link utilisation")]
    w = 0.8 / len(parts)
    for j, (col, label) in enumerate(parts):
        c.bar(x - 0.4 + w * (j + 0.5), 100 * fleets[col].fillna(0.0), w, label=label, color=f"C{j + 5}")
    c.set(xticks=x, ylabel="time-mean share (%)", ylim=(0, 140),
          title="Where time and memory go\n(aggregated: every replica prefills and decodes)")
    c.legend(fontsize=8, loc="upper center", ncol=3)
    for ax in (a, b, c):
        ax.set_xticklabels(names, rotation=15, ha="right", fontsize=8)
        ax.grid(True, axis="y", alpha=0.3)
    fig.suptitle(f"{title}: aggregated vs disaggregated fleets at the same SLOs")
    fig.tight_layout()
    return fig


#: Axis labels (with units) and display scale of sweep columns: metrics and common swept keys.
SWEEP_LABELS: dict[str, tuple[str, float]] = {
    "requests": ("requests", 1.0),
    "completed": ("completed requests", 1.0),
    "timed_out": ("timed-out requests", 1.0),
    "ttft_p50_s": ("p50 time to first token (s)", 1.0),
    "ttft_p99_s": ("p99 time to first token (s)", 1.0),
    "tpot_p50_s": ("p50 time per output token (ms)", 1e3),
    "tpot_p99_s": ("p99 time per output token (ms)", 1e3),
    "output_tokens_per_s": ("output throughput (tokens/s)", 1.0),
    "goodput_fraction": ("goodput (share of requests within SLO)", 1.0),
    "max_concurrency": ("peak concurrent sequences", 1.0),
    "kv_utilization": ("KV pool use (time-mean share of blocks)", 1.0),
    "usd_per_hour": ("fleet cost (USD/h)", 1.0),
    "usd_per_million_output_tokens": ("cost (USD per million output tokens)", 1.0),
    "meets_slo": ("meets the SLOs (1 = yes)", 1.0),
    "seed": ("seed", 1.0),
    "cluster.nodes": ("nodes per fleet", 1.0),
    "cluster.tp": ("tensor parallelism (GPUs per replica)", 1.0),
    "cluster.hardware": ("node kind", 1.0),
    "cluster.memory_utilization": ("usable share of HBM", 1.0),
    "cache.layout": ("KV layout", 1.0),
    "workload.rate_scale": ("load (× the workload's base rate)", 1.0),
    "workload.duration_s": ("workload duration (s)", 1.0),
    "scheduler.max_num_seqs": ("max running sequences per replica", 1.0),
    "scheduler.max_num_batched_tokens": ("token budget per iteration (tokens)", 1.0),
}
_SLO_LINES = {"ttft_p99_s": ("slo_ttft_p99_s", "s"), "tpot_p99_s": ("slo_tpot_p99_s", "ms")}


@plain_text
def plot_sweep(df: pd.DataFrame, x: str, y: str, hue: str | None = None, ax: Axes | None = None) -> Axes:
    """Metric `y` against swept key `x`, one line per hardware kind (and per `hue` value).

    Other swept keys that vary (``df.attrs["swept"]``, set by `simulator.sweep.run_sweep`) split
    lines too, so no line mixes points. The p99 SLO is drawn on p99 TTFT and TPOT where
    ``df.attrs`` carries it; the y axis turns logarithmic when positive values span over 50×.
    """
    for col in (x, y, *([hue] if hue else [])):
        if col not in df.columns:
            raise KeyError(f"plot_sweep: no column {col!r}; columns: {', '.join(map(str, df.columns))}")
    ax = ax or plt.figure(figsize=(7.5, 4.8)).gca()
    ylabel, scale = SWEEP_LABELS.get(y, (y, 1.0))
    xlabel = SWEEP_LABELS.get(x, (x, 1.0))[0]
    split = ["hardware", *([hue] if hue and hue != "hardware" else [])]
    split += [k for k in df.attrs.get("swept", []) if k not in (x, *split, "cluster.hardware")
              and k in df and df[k].nunique() > 1]
    numeric_x = pd.api.types.is_numeric_dtype(df[x])
    kinds = list(dict.fromkeys(df["hardware"]))
    colours: dict[tuple[object, ...], int] = {}
    for keys, g in df.groupby(split, sort=False):
        if numeric_x:
            g = g.sort_values(x, kind="stable")
        hw, rest = keys[0], tuple(keys[1:])
        style = kinds.index(hw)  # a line style and marker per node kind, a colour per other split
        colour = colours.setdefault(rest, len(colours)) if rest else style
        parts = [str(hw)] + [f"{k}={v}" for k, v in zip(split[1:], rest, strict=True)]
        ax.plot(g[x], g[y].astype(float) * scale, color=f"C{colour % 10}", ls=["-", "--", "-.", ":"][style % 4],
                marker="osD^v"[style % 5], lw=1.8, label=", ".join(parts))
    slo_attr, unit = _SLO_LINES.get(y, ("", ""))
    slo = df.attrs.get(slo_attr)
    if slo:
        ax.axhline(slo * scale, color="red", ls=":", lw=1.2, label=f"p99 SLO {slo * scale:g} {unit}")
    values = df[y].astype(float) * scale
    positive = values[values > 0]
    if len(positive) and positive.max() > 50 * positive.min():
        ax.set_yscale("log")
        ylabel += ", log"
    if pd.api.types.is_integer_dtype(df[x]):
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    name = df.attrs.get("scenario")
    ax.set_title((f"{name}: " if name else "") + f"{ylabel.split(' (')[0]} vs {xlabel.split(' (')[0]}")
    ax.grid(True, alpha=0.3)
    legend = ax.legend(fontsize=8, title=" / ".join(split), title_fontsize=8)
    if len(ax.lines) > 4:  # many lines: beside the plot, not over it
        legend.set_bbox_to_anchor((1.01, 1.0))
        legend.set_loc("upper left")
    return ax
