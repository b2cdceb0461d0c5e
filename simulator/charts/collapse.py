"""The concurrency-collapse chart: max streams vs context per layout and plan, with simulated points."""

from __future__ import annotations

from typing import Any

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter

from simulator.charts.base import plain_text, tokens_tick
from simulator.units import GB

#: A colour per KV layout (its label, `simulator.kv` ``Layout.label``), whatever list, order or chart draws
#: it; a layout not named here gets one of `_MORE_COLOURS` from a hash of its label (stable across runs).
LAYOUT_COLOURS = {"native": "C0", "fp8": "C1", "mla": "C2", "cross-layer:0.5": "C3", "compress:8:4096": "C4",
                  "mla+fp8": "C5", "int4": "C6", "int8": "C8", "fp4": "C9"}
_MORE_COLOURS = ("#17becf", "#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173", "#3182bd", "#e6550d",
                 "#31a354", "#756bb1")


def layout_colour(label: str) -> str:
    """The colour of KV layout `label` in every chart (`LAYOUT_COLOURS`, else a stable hash of the label)."""
    import zlib

    return LAYOUT_COLOURS.get(label) or _MORE_COLOURS[zlib.crc32(label.encode()) % len(_MORE_COLOURS)]


@plain_text
def plot_collapse_panel(df: pd.DataFrame, ax: Axes | None = None, max_context_tokens: int | None = None,
                        simulated: pd.DataFrame | None = None) -> Axes:
    """Max streams vs context (log-log) for one hardware kind: a colour per KV layout (`layout_colour`),
    a line style per parallelism plan (column ``plan``, optional).

    `simulated` (optional: columns ``context_tokens``, ``peak_streams``, optionally ``mean_streams``
    and ``layout``, the layout simulated) adds measured points. The first layout's analytic streams
    at 4k and 128k are quoted in a box at the lower left, off the lines and markers.
    """
    ax = ax or plt.figure(figsize=(7, 5)).gca()
    df = df if "plan" in df else df.assign(plan="")
    hw = df["hardware"].iloc[0]
    plans = list(dict.fromkeys(df["plan"]))
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
        ax.plot(g["context_tokens"], g["max_streams"], color=layout_colour(str(layout)), ls=ls, lw=lw, label=name,
                zorder=3 if lw > 1.8 else 2)
    first_layout = df["layout"].iloc[0]
    first = df[(df["layout"] == first_layout) & (df["plan"] == plans[0])]
    native = first.set_index("context_tokens")["max_streams"]
    quoted = [f"{native[n]:,} at {tokens_tick(n)}" for n in (4096, 131072) if n in native.index and native[n] > 0]
    if quoted:
        ax.text(0.02, 0.03, f"{first_layout}" + (f", {plans[0]}" if len(plans) > 1 else "") + ": "
                + ", ".join(quoted) + " streams", transform=ax.transAxes, fontsize=9, fontweight="bold",
                color=layout_colour(str(first_layout)), va="bottom",
                bbox={"boxstyle": "round,pad=0.3", "facecolor": "white", "edgecolor": "0.8", "alpha": 0.9})
    title = f"{hw}: KV budget per " + ("GPU " if "kv_budget_bytes_per_gpu" in df else "node ")
    if max_context_tokens:
        ax.axvline(max_context_tokens, color="grey", ls=":", lw=1.2)
    if simulated is not None and len(simulated):
        what = (f"simulated ({simulated['layout'].iloc[0]}" + (f", {plans[0]}" if len(plans) > 1 else "") + ")"
                if "layout" in simulated else "simulated")
        ax.scatter(simulated["context_tokens"], simulated["peak_streams"], color="black", marker="X", s=60,
                   zorder=5, label=f"{what}: peak, flooded")
        if "mean_streams" in simulated:
            ax.scatter(simulated["context_tokens"], simulated["mean_streams"], facecolors="none",
                       edgecolors="black", marker="o", s=60, zorder=5, label=f"{what}: mean at 80% offered load")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.xaxis.set_major_formatter(FuncFormatter(tokens_tick))
    ax.set_xlabel("context length per stream (tokens)")
    ax.set_ylabel("max concurrent streams per node")
    per_gpu = "kv_budget_bytes_per_gpu" in df
    budgets = df.groupby("plan", sort=False)["kv_budget_bytes_per_gpu" if per_gpu else "kv_budget_bytes"].first() / GB
    title += ", ".join(f"{gb:,.0f} GB" + (f" ({plan})" if len(plans) > 1 else "") for plan, gb in budgets.items())
    if max_context_tokens:
        title += f"\ndotted: the model's max context ({tokens_tick(max_context_tokens)})"
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(title="KV layout" + (", plan" if len(plans) > 1 else ""), fontsize=8, title_fontsize=8,
              loc="upper right")
    return ax


def _goodput_caption(sim: pd.DataFrame) -> str:
    """Why the goodput row is low where it is: which SLO the misses broke (from ``ttft_ok_fraction``
    and ``tpot_ok_fraction`` when the frame has them)."""
    text = ("Lower row: one node offered 80% of the concurrency its KV memory allows (Poisson arrivals, the "
            "scenario's scheduler and SLOs); goodput = share of requests meeting both p99 SLOs.")
    if {"ttft_ok_fraction", "tpot_ok_fraction"} <= set(sim.columns) and len(sim.dropna(subset=["goodput_fraction"])):
        ttft_miss = float((1 - sim.ttft_ok_fraction).mean())
        tpot_miss = float((1 - sim.tpot_ok_fraction).mean())
        if ttft_miss > tpot_miss:
            text += (f"\nThe misses are time to first token ({100 * ttft_miss:.0f}% of requests on average against "
                     f"{100 * tpot_miss:.0f}% for time per token): the offered rate assumes pure-decode steps, but "
                     "new prompts' prefill chunks share those steps, so each stream runs longer than assumed, the KV "
                     "pool or the prefill token budget fills, and arrivals queue. Memory sized for m streams is not a "
                     "fleet sized for m streams.")
        elif tpot_miss > 0:
            text += (f"\nThe misses are time per output token ({100 * tpot_miss:.0f}% of requests on average against "
                     f"{100 * ttft_miss:.0f}% for time to first token): a batch that large reads too much KV a step.")
    return text


@plain_text
def collapse_figure(df: pd.DataFrame, model: str, max_context_tokens: int | None = None,
                    simulated: pd.DataFrame | None = None) -> Figure:
    """One panel per hardware kind, sharing the y axis; `simulated` adds measured streams per kind
    and, when it carries goodput, a second row with the share of requests meeting the SLOs (and,
    with ``ttft_ok_fraction``/``tpot_ok_fraction``, each SLO's share), captioned with why."""
    kinds = list(dict.fromkeys(df["hardware"]))
    with_goodput = simulated is not None and "goodput_fraction" in simulated and len(simulated) > 0
    rows = 2 if with_goodput else 1
    width_in = max(8.0, 6.2 * len(kinds)) + 2.8  # the legends right of the panels
    caption = _goodput_caption(simulated) if with_goodput and simulated is not None else ""
    if caption:
        import textwrap

        caption = "\n".join(textwrap.fill(line, int(13.5 * width_in)) for line in caption.split("\n"))
    caption_in = 0.16 * (caption.count("\n") + 1) + 0.1 if caption else 0.0  # its height, inches
    fig, axes = plt.subplots(rows, len(kinds), figsize=(width_in, 5.6 + 3.0 * (rows - 1) + caption_in),
                             sharey="row", squeeze=False, gridspec_kw={"height_ratios": [3, 1.2][:rows]})
    for col, hw in enumerate(kinds):
        sim = simulated[simulated["hardware"] == hw] if simulated is not None else None
        plot_collapse_panel(df[df["hardware"] == hw], axes[0][col], max_context_tokens, sim)
        if with_goodput and sim is not None:
            g = axes[1][col]
            g.plot(sim["context_tokens"], 100 * sim["goodput_fraction"], color="black", marker="s", ms=5,
                   label="both SLOs (goodput)")
            if "ttft_ok_fraction" in sim:
                g.plot(sim["context_tokens"], 100 * sim["ttft_ok_fraction"], color="C3", marker="v", ms=5, ls="--",
                       label="TTFT SLO")
            if "tpot_ok_fraction" in sim:
                g.plot(sim["context_tokens"], 100 * sim["tpot_ok_fraction"], color="C9", marker="^", ms=5, ls=":",
                       label="TPOT SLO")
            g.set_xscale("log", base=2)
            g.xaxis.set_major_formatter(FuncFormatter(tokens_tick))
            g.set_xlim(axes[0][col].get_xlim())
            g.set_ylim(-5, 105)
            g.set_xlabel("context length per stream (tokens)")
            layout = f"{sim['layout'].iloc[0]} layout" if "layout" in sim and len(sim) else "the scenario's layout"
            g.set_title(f"simulated, {layout}, 80% of the analytic concurrency offered", fontsize=9)
            g.grid(True, alpha=0.3)
            axes[0][col].set_xlabel("")
    merged: dict[str, Any] = {}  # one legend a row, right of its last panel (the panels draw the same layouts)
    for ax in axes[0]:
        handles, labels = ax.get_legend_handles_labels()
        merged.update({label: h for h, label in zip(handles, labels, strict=True) if label not in merged})
        if ax.get_legend() is not None:
            ax.get_legend().remove()
    axes[0][-1].legend(list(merged.values()), list(merged), title="KV layout" + (", plan" if "plan" in df and
                       df["plan"].nunique() > 1 else ""), fontsize=8, title_fontsize=8, loc="upper left",
                       bbox_to_anchor=(1.02, 1.0), borderaxespad=0)
    if with_goodput:
        axes[1][0].set_ylabel("requests meeting\nthe SLOs (%)")
        axes[1][-1].legend(fontsize=8, title="requests meeting", title_fontsize=8, loc="upper left",
                           bbox_to_anchor=(1.02, 1.0), borderaxespad=0)
    for ax in axes[0][1:]:
        ax.set_ylabel("")
    sep = " " if len(kinds) > 1 else "\n"  # one panel is too narrow for the subtitle on one line
    fig.suptitle(f"Concurrency collapse: {model}\nmax concurrent streams per node vs context length{sep}"
                 "(KV budget = usable HBM − weights, on the binding GPU)", fontsize=11)
    fig.text(0.01, 0.05 / fig.get_figheight(), caption, fontsize=8.5, va="bottom", ha="left", color="0.2")
    fig.tight_layout(rect=(0, caption_in / fig.get_figheight(), 1, 1))
    return fig
