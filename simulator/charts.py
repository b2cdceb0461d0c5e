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
    quoted = [f"{native[n]:,} at {_tokens(n)}" for n in (4096, 131072) if n in native.index and native[n] > 0]
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
    ax.xaxis.set_major_formatter(FuncFormatter(_tokens))
    ax.set_xlabel("context length per stream (tokens)")
    ax.set_ylabel("max concurrent streams per node")
    per_gpu = "kv_budget_bytes_per_gpu" in df
    budgets = df.groupby("plan", sort=False)["kv_budget_bytes_per_gpu" if per_gpu else "kv_budget_bytes"].first() / GB
    title += ", ".join(f"{gb:,.0f} GB" + (f" ({plan})" if len(plans) > 1 else "") for plan, gb in budgets.items())
    if max_context_tokens:
        title += f"\ndotted: the model's max context ({_tokens(max_context_tokens)})"
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
            g.xaxis.set_major_formatter(FuncFormatter(_tokens))
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


#: Colours of the KV pool's two bands (apart from the per-fleet colours of the other panels).
SEQUENCE_COLOUR, CACHE_COLOUR = "#2a7f62", "#e8b04a"


def kv_bands(ts: pd.DataFrame, blocks_per_replica: int, block_tokens: int, bin_s: float = 10.0,
             cache: bool = True) -> tuple[pd.DataFrame, bool]:
    """The KV pool's use over time in two bands, as % of one replica's blocks (`bin_s` means over
    the fleet's replicas' samples); and whether the split is exact.

    Columns ``minute`` (the bin's start), ``used`` (every block in use, the prefix cache's included:
    its time mean is the summary's ``kv_utilization``), ``sequences`` (blocks running sequences
    hold) and ``cache`` (``used − sequences``: blocks only the prefix cache holds, which it gives
    up under pressure). Exact without a cache (`cache` false: every block in use is a sequence's)
    and when the samples carry ``kv_evictable_blocks`` (the cache's blocks no running sequence
    references: ``sequences = used − evictable``); otherwise estimated from the tokens running
    sequences hold, ``min(used, ⌈kv_tokens / block_tokens⌉)``, which counts a prefix shared by
    several running sequences once per sequence and leaves out the rest of the blocks a prefilling
    sequence has reserved.
    """
    exact = "kv_evictable_blocks" in ts or not cache
    used = ts.kv_blocks_used.astype(float)
    if not cache:
        seqs = used
    elif "kv_evictable_blocks" in ts:
        seqs = used - ts.kv_evictable_blocks
    else:
        seqs = np.minimum(used, np.ceil(ts.kv_tokens / block_tokens))
    frame = pd.DataFrame({"minute": (ts.time_s // bin_s) * bin_s / 60, "used": used, "sequences": seqs})
    means = 100 * frame.groupby("minute").mean() / blocks_per_replica
    means["cache"] = means.used - means.sequences
    return means.reset_index(), exact


@plain_text
def timeseries_figure(frames: dict[str, pd.DataFrame], blocks_per_replica: dict[str, int],
                      block_tokens: dict[str, int] | int = 16,
                      kv_utilization: dict[str, float] | None = None,
                      kv_cache_share: dict[str, float] | None = None) -> Figure:
    """What each fleet's replicas hold and do over time (10 s means over its replicas).

    One panel per fleet: the KV pool in two stacked bands, the blocks running sequences hold and
    those only the prefix cache holds (`kv_bands`), against the whole pool (100%); `kv_utilization`
    (the summaries' time means) is quoted in its title, and a fleet whose `kv_cache_share` is 0 (no
    prefix cache) draws one band. Below: waiting requests, and the step's MFU and HBM-bandwidth use,
    one colour per fleet. Legends sit right of the panels, off the data.
    """
    fleets = [hw for hw, ts in frames.items() if not ts.empty]
    n = len(fleets)
    fig, axes = plt.subplots(n + 2, 1, figsize=(13, 2.3 * n + 5.0), sharex=True, squeeze=False,
                             gridspec_kw={"height_ratios": [1.0] * n + [1.15, 1.15]})
    b, c = axes[n][0], axes[n + 1][0]
    approximate: list[bool] = []
    for i, hw in enumerate(fleets):
        ts, a = frames[hw], axes[i][0]
        bt = block_tokens[hw] if isinstance(block_tokens, dict) else block_tokens
        cached = (kv_cache_share or {}).get(hw, 1.0) != 0
        bands, exact = kv_bands(ts, blocks_per_replica[hw], bt, cache=cached)
        approximate.append(not exact)
        approx = "" if exact else "≈ "
        a.stackplot(bands.minute, bands.sequences, *([bands.cache] if cached else []),
                    colors=[SEQUENCE_COLOUR, CACHE_COLOUR], alpha=0.9,
                    labels=[f"{approx}held by running sequences",
                            f"{approx}held only by the prefix cache" + (" (evictable)" if exact else "")])
        a.axhline(100, color="0.25", ls="--", lw=1, label="the whole pool")
        a.set_ylim(0, 110)
        a.set_ylabel("KV blocks\n(% of the pool)")
        mean = (kv_utilization or {}).get(hw)
        a.set_title(f"{hw}: KV pool per replica" + (f", {100 * mean:.0f}% in use on average (the headline's KV util)"
                                                    if mean is not None else ""), fontsize=10, loc="left")
        t = ts.assign(minute=(ts.time_s // 10) * 10 / 60)
        g = t.groupby("minute")
        colour = f"C{i % 10}"
        b.plot(g.waiting.mean().index, g.waiting.mean(), label=hw, color=colour)
        if "mfu" in t:
            c.plot(g.mfu.mean().index, 100 * g.mfu.mean(), label=f"{hw} MFU", color=colour)
            c.plot(g.hbm_bw_util.mean().index, 100 * g.hbm_bw_util.mean(), label=f"{hw} HBM bandwidth",
                   color=colour, ls="--")
    b.set(ylabel="waiting requests\nper replica")
    b.set_title("queue", fontsize=10, loc="left")
    c.set(xlabel="simulated time (min)", ylabel="% of the GPU's peak\n(FLOP/s; HBM bytes/s)")
    c.set_title("GPU utilisation of the step as formed", fontsize=10, loc="left")
    c.set_ylim(0, 105)
    for (ax,) in axes:
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    note = ("" if not any(approximate) else
            "\n≈: sequences' share estimated from the tokens they hold (a prefix several of them share counts once "
            "for each); the cache's is the rest in use")
    fig.suptitle("KV memory, queue and GPU utilisation over time (10 s means over each fleet's replicas)" + note,
                 fontsize=11)
    fig.tight_layout()
    return fig


def _binding_label(why: str, width: int) -> str:
    """A capacity plan's binding constraint as a tick-label line: ``binds: compute``, or what suffices."""
    import textwrap

    text = why.removeprefix("none (").removesuffix(")") if why.startswith("none") else f"binds: {why}"
    return textwrap.fill(text, width)


@plain_text
def capacity_figure(plan: pd.DataFrame, title: str) -> Figure:
    """Nodes needed per hardware kind (with the memory floor) and the fleet's $/hour. A plan with a
    ``fleet`` column (`simulator.xpyd.plan_split_capacity`) draws an xPyD fleet's prefill nodes hatched
    at the bottom of its bar, and names each bar's fleet.

    Each bar carries only its number; what binds goes under the kind's name, one tick label a group,
    so that labels never run into each other however many fleets tie.
    """
    split = "fleet" in plan
    n = len(plan)
    fig, (a, b) = plt.subplots(1, 2, figsize=(max(11.0, 2.6 * n + 3.0), 5.2 if split else 4.8))
    x = np.arange(n)
    width = max(14, min(26, int(60 / n) + 6))  # characters a tick label's line holds
    labels = [f"{hw}" + (f"\n{fleet}" if split else "") + "\n" + _binding_label(why, width)
              for hw, fleet, why in zip(plan.hardware, plan.fleet if split else plan.hardware, plan.binding,
                                        strict=True)]
    prefill = plan.prefill_nodes if split else pd.Series(0, index=plan.index)
    nodes = a.bar(x - 0.2, plan.nodes, 0.4, color="C0", label="nodes that meet the SLOs (simulated)")
    if split and prefill.any():
        a.bar(x - 0.2, prefill, 0.4, color="C1", hatch="//", edgecolor="0.2", label="of which prefill nodes (xPyD)")
    floor = a.bar(x + 0.2, plan.memory_floor_nodes, 0.4, color="0.6",
                  label="memory floor (analytic" + ("; xPyD: its decode pool)" if split else ")"))
    for bars in (nodes, floor):
        a.bar_label(bars, fmt="{:,.0f}", padding=2, fontsize=9)
    a.set(xticks=x, ylabel="nodes", title="Fleet size")
    top = float(max(plan.nodes.max(), plan.memory_floor_nodes.max()))
    a.set_ylim(0, top * 1.3 + 0.8)  # room for the numbers and the legend above the tallest bar
    a.yaxis.set_major_locator(MaxNLocator(integer=True))
    a.legend(fontsize=8, loc="upper left")
    cost = b.bar(x, plan.usd_per_hour, 0.6, color="C2")
    b.bar_label(cost, labels=[f"${usd:,.0f}/h\n${per_m:,.2f}/Mtok out" for usd, per_m in
                              zip(plan.usd_per_hour, plan.usd_per_million_output_tokens, strict=True)],
                padding=2, fontsize=8)
    b.set(xticks=x, ylabel="fleet cost (USD per hour)", title="Fleet cost (and per million output tokens)")
    b.set_ylim(0, float(plan.usd_per_hour.max()) * 1.3)
    a.set_xticklabels(labels, fontsize=9)
    b.set_xticklabels([f"{hw}\n{fleet}" if split else hw for hw, fleet in
                       zip(plan.hardware, plan.fleet if split else plan.hardware, strict=True)], fontsize=9)
    for ax in (a, b):
        ax.grid(True, axis="y", alpha=0.3)
        ax.margins(x=0.04)
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
