"""The concurrency-collapse chart: max streams vs context per layout and plan, with simulated points."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter

from simulator.charts.base import plain_text, tokens_tick
from simulator.collapse import streams_text
from simulator.models import ModelSpec, weight_precision
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


WINDOWED_SLOPE = 0.99  # a layout whose bytes past its windows rise less than this share of a token's is windowed


# the legend's entry for the marks where a line reaches 0 streams (one for every line: the mark takes its colour;
# with several plans, each plan's marks have their own shape and fill, `NO_STREAM_MARKS`, and an entry)
NO_STREAM = "no stream fits from here on (in its line's colour)"
#: A plan's mark (its shape, filled or not), the i-th plan's the i-th: each (shape, fill) once, so 16 plans' marks
#: differ (helper-172: a fifth plan's repeated the first's). The first four as they were (▼ filled, ▼ hollow,
#: X filled, ◆ hollow); then a new shape a plan, fills alternating; then each shape again in its other fill.
NO_STREAM_MARKS = (("v", True), ("v", False), ("X", True), ("D", False), ("s", True), ("P", False), ("o", True),
                   ("^", False), ("*", True), ("X", False), ("D", True), ("s", False), ("P", True), ("o", False),
                   ("^", True), ("*", False))
#: A plan's line style: the i-th plan's the i-th of these eight at `PLAN_WIDTHS` [0], the next eight plans' the same
#: styles thinner, `PLAN_WIDTHS` [1] (helper-172: a fifth plan's lines were the first's, solid). None is the thick
#: dotted ``(0, (2, 3))`` of a line drawn as the same as another's, and each repeats within a legend's line sample
#: (a dash pattern scales with the width: 1.8 × a period of at most 8 points). Sixteen plans' lines and marks differ.
PLAN_STYLES: tuple[Any, ...] = ("-", "--", "-.", ":", (0, (3, 1, 1, 1, 1, 1)), (0, (5, 1)), (0, (1, 3)),
                                (0, (5, 1, 1, 1, 1, 1, 1, 1)))
PLAN_WIDTHS = (1.8, 1.0)
NO_STREAM_FOOT = 0.3  # the streams axis's foot where a line reaches no stream: its marks sit under the 1
#: ... or under a third of the lowest stream drawn, when a plan over several nodes draws fewer than one a node
#: (helper-176: TP64 over eight nodes' 0.125 a node ran along the marks' row)
NO_STREAM_BELOW_LOWEST = 1 / 3


@plain_text
def plot_collapse_panel(df: pd.DataFrame, ax: Axes | None = None, max_context_tokens: int | None = None,
                        simulated: pd.DataFrame | None = None, plans: Sequence[str] | None = None) -> Axes:
    """Max streams vs context (log-log) for one hardware kind: a colour per KV layout (`layout_colour`),
    a line style per parallelism plan (column ``plan``, optional).

    `plans` are the plans of the figure the panel is one of, in order (default: the panel's own): each keeps its
    line style and mark in every panel, and with several the legend names each line's plan, though a panel draws
    one (helper-192: ``kvsim collapse --hardware 4xH100,8xH100`` draws TP4 and TP8, a panel each, and the shared
    legend read two solid ``native`` lines of 82 and 41 kB a GPU under "KV layout, plan", neither plan named).

    `simulated` (optional: columns ``context_tokens``, ``peak_streams``, optionally ``mean_streams``,
    ``layout``, the layout simulated, and ``nodes``, the nodes the simulated replica spans) adds measured points,
    per node as the lines are: a replica over two nodes' peak and mean halved (helper-176: drawn whole, a TP16
    replica's peak of 413 streams at 4k sat over its line's 187.5 a node). The first layout's analytic streams
    at 4k and 128k are quoted in a box at the lower left, off the lines and markers.
    """
    ax = ax or plt.figure(figsize=(7, 5)).gca()
    df = df if "plan" in df else df.assign(plan="")
    hw = df["hardware"].iloc[0]
    own = list(dict.fromkeys(df["plan"]))  # the panel's plans; `plans` the figure's, these among them
    plans = own if plans is None else list(dict.fromkeys([*plans, *own]))
    drawn: dict[tuple[float, ...], str] = {}  # a line already drawn -> its layout
    stops: list[tuple[int, str, int]] = []  # (the first context with no stream, the colour, the plan's index)
    for (plan, layout), g in df.groupby(["plan", "layout"], sort=False):
        name = f"{layout} ({_per_token(g)})" + (f", {plan}" if len(plans) > 1 else "")
        none = g.loc[g["max_streams"] <= 0, "context_tokens"]  # a log axis has no 0: marked at its foot instead
        g = g[g["max_streams"] > 0]
        # the streams as drawn: a plan over several nodes has fractional ones a node (5.5, not 5: helper-172)
        key = (plans.index(plan), *g["max_streams"].astype(float))
        ls: Any = PLAN_STYLES[plans.index(plan) % len(PLAN_STYLES)]  # beyond 16 plans they repeat
        lw = PLAN_WIDTHS[plans.index(plan) // len(PLAN_STYLES) % len(PLAN_WIDTHS)]
        near = next((other for k, other in drawn.items() if _near(k, key)), None) if key not in drawn else None
        if key in drawn:  # the same streams as a layout drawn before: say so, and let both show
            name += f"\n  = the same line as {drawn[key]}"  # its own line: the entry stays narrow
            ls, lw = (0, (2, 3)), 3.0
        elif near is not None:  # within a few percent: as hidden under it (helper-158: fp8's under cross-layer's)
            name += f"\n  ≈ the line of {near} (within {NEAR_SHARE:.0%})"
            ls, lw = (0, (2, 3)), 3.0
            drawn[key] = str(layout)
        else:
            drawn[key] = str(layout)
        ax.plot(g["context_tokens"], g["max_streams"], color=layout_colour(str(layout)), ls=ls, lw=lw, label=name,
                zorder=3 if lw > PLAN_WIDTHS[0] else 2)
        if len(none):  # where the line stops: its first context with no stream, on the x axis (helper-145)
            stops.append((int(none.min()), layout_colour(str(layout)), plans.index(plan)))
    named: set[int] = set()
    if stops:  # room under the one-stream level for the marks (a log axis: a third of a stream), autoscaled still
        lowest = float(df.loc[df["max_streams"] > 0, "max_streams"].min()) if (df["max_streams"] > 0).any() else 1.0
        ax.update_datalim([(stops[0][0], min(NO_STREAM_FOOT, lowest * NO_STREAM_BELOW_LOWEST))])
    for context, colour, p in stops:  # after the lines: the legend's entries come after theirs
        # inside the axes, its tip on the foot (helper-158: centred on the axis line, it sat on the tick labels); a
        # mark per plan, each its own shape and fill (two plans' marks of one colour could not be told apart)
        shape, fill = NO_STREAM_MARKS[p % len(NO_STREAM_MARKS)]  # beyond 16 plans they repeat
        label = None if p in named else NO_STREAM if len(plans) == 1 else \
            f"no stream fits from here on, {plans[p]} ({'filled' if fill else 'hollow'}, its line's colour)"
        named.add(p)
        ax.plot([context], [0.03], marker=shape, ms=9, color=colour, mfc=colour if fill else "white", mew=1.5,
                ls="none", transform=ax.get_xaxis_transform(), clip_on=False, zorder=4, label=label)
    first_layout = df["layout"].iloc[0]
    first = df[(df["layout"] == first_layout) & (df["plan"] == own[0])]
    native = first.set_index("context_tokens")["max_streams"]
    quoted = [f"{streams_text(native[n])} at {tokens_tick(n)}" for n in (4096, 131072)
              if n in native.index and native[n] > 0]
    if quoted:
        ax.text(0.02, 0.03, f"{first_layout}" + (f", {own[0]}" if len(plans) > 1 else "") + ": "
                + ", ".join(quoted) + " streams", transform=ax.transAxes, fontsize=9, fontweight="bold",
                color=layout_colour(str(first_layout)), va="bottom",
                bbox={"boxstyle": "round,pad=0.3", "facecolor": "white", "edgecolor": "0.8", "alpha": 0.9})
    title = f"{hw}: KV budget per " + ("GPU" if "kv_budget_bytes_per_gpu" in df else "node")
    title += "" if len(plans) > 1 else " "
    if max_context_tokens:
        ax.axvline(max_context_tokens, color="grey", ls=":", lw=1.2)
    if simulated is not None and len(simulated):
        what = (f"simulated ({simulated['layout'].iloc[0]}" + (f", {own[0]}" if len(plans) > 1 else "") + ")"
                if "layout" in simulated else "simulated")
        nodes = simulated.get("nodes", 1)  # a replica's streams on its nodes, drawn per node as the lines
        most = _replica_nodes(simulated)
        spans = f" (÷ the replica's {most} nodes)" if most > 1 else ""
        ax.scatter(simulated["context_tokens"], simulated["peak_streams"] / nodes, color="black", marker="X", s=60,
                   zorder=5, label=f"{what}: peak, flooded{spans}")
        if "mean_streams" in simulated:
            ax.scatter(simulated["context_tokens"], simulated["mean_streams"] / nodes, facecolors="none",
                       edgecolors="black", marker="o", s=60, zorder=5,
                       label=f"{what}: mean at 80% of capacity{spans}")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.xaxis.set_major_formatter(FuncFormatter(tokens_tick))
    # plain counts (1, 10, 1,000): a log axis's own 10^k is mathtext, which `plain_text` leaves unparsed while
    # the chart lays itself out, so tight_layout measured "$\mathdefault{10^{2}}$" and left a wide margin
    # (under one stream, a multi-node plan's per-node figure, a tick reads 0.1, not 0)
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:,.0f}" if v >= 1 else f"{v:g}"))
    ax.set_xlabel("context length per stream (tokens)")
    ax.set_ylabel("max concurrent streams per node")
    per_gpu = "kv_budget_bytes_per_gpu" in df
    budgets = df.groupby("plan", sort=False)["kv_budget_bytes_per_gpu" if per_gpu else "kv_budget_bytes"].first() / GB
    title += ("\n" if len(plans) > 1 else "")  # several plans' budgets overrun a panel's width on one line
    title += _budget_lines([f"{gb:,.0f} GB" + (f" ({plan})" if len(plans) > 1 else "") for plan, gb in budgets.items()])
    if max_context_tokens:
        title += f"\ndotted: the model's max context ({tokens_tick(max_context_tokens)})"
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(title=_legend_title(df), fontsize=8, title_fontsize=8, loc="upper right")
    return ax


#: A panel title's line of budgets breaks between plans past this many characters: a 4.8-inch panel (three a row,
#: `PANELS_W_IN`) holds about 55 at its title's 10 points (helper-172: seven plans' budgets ran off the figure).
TITLE_LINE_CHARS = 50


def _budget_lines(items: list[str]) -> str:
    """`items` (``54 GB (TP8)``, ...) joined by ``, ``, a new line before one that would pass `TITLE_LINE_CHARS`."""
    lines = [items[0]]
    for item in items[1:]:
        if len(lines[-1]) + len(", ") + len(item) > TITLE_LINE_CHARS:
            lines[-1] += ","
            lines.append(item)
        else:
            lines[-1] += ", " + item
    return "\n".join(lines)


NEAR_SHARE = 0.05  # two lines of one plan this close at every context are drawn as one that hides the other


def _near(a: tuple[float, ...], b: tuple[float, ...]) -> bool:
    """Whether two lines (`plot_collapse_panel`'s keys: the plan's index, then the streams at each context with
    any) are one plan's and within `NEAR_SHARE` (or one stream) of each other at every context."""
    return len(a) == len(b) and a[0] == b[0] and all(abs(x - y) <= max(1.0, NEAR_SHARE * max(x, y))
                                                     for x, y in zip(a[1:], b[1:], strict=True))


def _per_token(g: pd.DataFrame) -> str:
    """A layout's KV a token and, where the table has it, what each GPU holds of it: ``328 kB/token,
    41 kB on each GPU``. Under TP8 GQA heads split eight ways but an MLA latent is whole on every GPU
    (``92 kB/token, 92 kB on each GPU``: eight copies a node; under DP attention ``on the one GPU serving it``, one
    copy), so a smaller token can hold fewer
    streams: the GPU's figure is the one capacity reads. A windowed layout (sliding layers, a compression's
    full-resolution window) is said as what a token adds past its windows and what the windows hold,
    ``82 kB/token + 436 MB`` (Gemma-3-27B; its ``bytes_per_token`` is every layer's, 508 kB, which native,
    ``compress`` and ``no-sliding`` share): the three largest contexts' ``stream_bytes_unpaged`` give both, exact
    (helper-188: from the block-rounded ``stream_bytes``, Llama-3.1-70B's compress:8:4096 read ``+ 1,187 MB`` for
    ``327,680 B · 4,096 · 7/8 = 1,174 MB``); a table without that column (a CSV from before it) gives them from
    ``stream_bytes``, paged blocks and all."""
    per_token = float(g["bytes_per_token"].iloc[0])
    share = float(g["bytes_per_token_per_gpu"].iloc[0]) / per_token if "bytes_per_token_per_gpu" in g else None
    fixed = 0.0
    column = "stream_bytes_unpaged" if "stream_bytes_unpaged" in g else "stream_bytes"
    if column in g and len(g) >= 3:  # past every window a token adds the slope there, the rest is fixed
        last = g.sort_values("context_tokens")[["context_tokens", column]].to_numpy()[-3:]
        (n0, s0), (n1, s1), (n2, s2) = last
        slope = (s2 - s1) / (n2 - n1)
        # the last three contexts past every window (the two slopes agree): else a window ends among them
        # (helper-146: compress:8:1000000 read "61 kB/token + 18,836 MB"), and the plain figure stands
        if slope < WINDOWED_SLOPE * per_token and math.isclose(slope, (s1 - s0) / (n1 - n0), rel_tol=1e-3):
            per_token, fixed = slope, s2 - slope * n2
    text = f"{per_token / 1e3:,.0f} kB/token" + (f" + {fixed / 1e6:,.0f} MB" if fixed else "")
    if share is None:  # a table from before the column (a CSV, a notebook's frame)
        return text
    # under DP attention a stream lives on the one GPU whose attention serves it, not on each (helper-191: DP8's
    # "328 kB on each GPU" read as eight copies, as an MLA latent's under TP8; `ParallelPlan.label`: DPn-attention)
    dp = "plan" in g and "-attention" in str(g["plan"].iloc[0])
    return text + f", {per_token * share / 1e3:,.0f} kB" + (f" + {fixed * share / 1e6:,.0f} MB" if fixed else "") \
        + (" on the one GPU serving it" if dp else " on each GPU")


def _legend_title(df: pd.DataFrame) -> str:
    """``KV layout, plan`` with several plans; else the one plan named (the per-GPU bytes depend on it)."""
    plans = list(dict.fromkeys(df["plan"])) if "plan" in df else [""]
    if len(plans) > 1:
        return "KV layout, plan"
    return "KV layout" + (f" (under {plans[0]})" if plans[0] and "bytes_per_token_per_gpu" in df else "")


def slo_text(slo: tuple[float, float] | None) -> str:
    """``TTFT ≤ 2 s, TPOT ≤ 100 ms`` (the SLOs a request's goodput counts), or "" without them."""
    return "" if slo is None else f"TTFT ≤ {slo[0]:g} s, TPOT ≤ {slo[1] * 1e3:g} ms"


def _replica_nodes(sim: pd.DataFrame) -> int:
    """The nodes a simulated collapse's replica spans (`simulator.study.simulated_collapse`'s ``nodes``): one,
    or a multi-node plan's; 1 for a frame without the column (an older collapse_simulated.csv) or rows."""
    return int(sim["nodes"].max()) if "nodes" in sim and len(sim) else 1


def _offered_by(nodes: int) -> str:
    """Who the goodput row's rate is offered to: ``one node``, or a plan over several nodes' ``one replica (2
    nodes)`` (its rate is the replica's, on all of them: helper-177)."""
    return "one node" if nodes <= 1 else f"one replica ({nodes} nodes)"


def _goodput_caption(sim: pd.DataFrame, slo: tuple[float, float] | None = None) -> str:
    """Why the goodput row is low where it is: which SLO the misses broke (from ``ttft_ok_fraction``
    and ``tpot_ok_fraction`` when the frame has them); `slo` (TTFT s, TPOT s) names the SLOs."""
    nodes = _replica_nodes(sim)
    text = (f"Goodput panels (under each kind's streams): {_offered_by(nodes)} offered 80% of the request rate it "
            "sustains (a request takes its prefill and its share of decode steps of min(KV streams, max_num_seqs) "
            "streams: "
            "the simulated table's capacity_rps, a report's collapse_simulated.csv; Poisson arrivals, the "
            "scenario's scheduler and SLOs); "
            "goodput = share of requests meeting both SLOs" + (f" ({slo_text(slo)})" if slo else "") + ".")
    if {"ttft_ok_fraction", "tpot_ok_fraction"} <= set(sim.columns) and len(sim.dropna(subset=["goodput_fraction"])):
        ttft_miss = float((1 - sim.ttft_ok_fraction).mean())
        tpot_miss = float((1 - sim.tpot_ok_fraction).mean())
        if ttft_miss > tpot_miss:
            text += (f"\nThe misses are time to first token ({100 * ttft_miss:.0f}% of requests on average against "
                     f"{100 * tpot_miss:.0f}% for time per token): prefill takes much of the node's time at these "
                     "rates, so prompts that arrive close together wait for those ahead of them; where one prompt's "
                     "prefill alone (the table's prefill_s) exceeds the TTFT SLO, no rate meets it.")
        elif tpot_miss > 0:
            text += (f"\nThe misses are time per output token ({100 * tpot_miss:.0f}% of requests on average against "
                     f"{100 * ttft_miss:.0f}% for time to first token): a batch that large reads too much KV a step.")
    return text


#: Panels side by side before the next kind wraps to a new row, and their size: three 6.2-inch panels
#: with the legend at their right made a figure 21 inches (2,354 px) wide, small text when viewed whole.
PANELS_PER_ROW = 3
PANEL_W_IN, PANELS_W_IN = (7.0, 6.2), 14.4  # a panel's width (alone, among others); the panels' at most
LEGEND_PAD_IN = 0.75  # a legend column's width beyond its widest text: the line sample, its gap, the frame
STREAMS_H_IN, GOODPUT_H_IN, TITLE_H_IN = 4.6, 3.0, 1.0  # a streams row, a goodput row under it, the suptitle
LEGEND_FONT = 9


@plain_text
def collapse_figure(df: pd.DataFrame, model: str | ModelSpec, max_context_tokens: int | None = None,
                    simulated: pd.DataFrame | None = None, slo: tuple[float, float] | None = None) -> Figure:
    """One panel per hardware kind, sharing the y axis, at most `PANELS_PER_ROW` a row; `simulated`
    adds measured streams per kind and, when it carries goodput, a row under each row of panels with
    the share of requests meeting the SLOs (and, with ``ttft_ok_fraction``/``tpot_ok_fraction``, each
    SLO's share), captioned with why; `slo` (TTFT s, TPOT s) names the SLOs there. A `ModelSpec` for `model`
    titles it with its weights' precision (the KV budget depends on it: ``DeepSeek-V3 (fp8-block weights)``).

    The panels draw the same layouts, so one legend serves them: right of a single panel; under the
    panels when there are several, in as many columns as the width holds. Width: one panel 7 inches
    and its legend's; two 12.4; three (and more, wrapped) 14.4 (1,584 px at 110 dpi), `PANELS_W_IN`.
    """
    kinds = list(dict.fromkeys(df["hardware"]))
    figure_plans = list(dict.fromkeys(df["plan"])) if "plan" in df else None  # each panel names them (helper-192)
    with_goodput = simulated is not None and "goodput_fraction" in simulated and len(simulated) > 0
    rows = 2 if with_goodput else 1  # grid rows a row of panels takes
    cols = min(len(kinds), PANELS_PER_ROW)
    blocks = -(-len(kinds) // cols)  # rows of panels
    panels_in = PANEL_W_IN[0] if cols == 1 else min(PANELS_W_IN, PANEL_W_IN[1] * cols)
    panels_h_in = TITLE_H_IN + blocks * (STREAMS_H_IN + GOODPUT_H_IN * (rows - 1))
    fig = plt.figure(figsize=(panels_in, panels_h_in))
    grid = fig.add_gridspec(blocks * rows, cols, height_ratios=[3, 1.2][:rows] * blocks)
    tops: list[Axes] = []
    lows: list[Axes] = []
    for i, hw in enumerate(kinds):
        r, col = rows * (i // cols), i % cols
        top = fig.add_subplot(grid[r, col], sharey=tops[0] if tops else None)
        tops.append(top)
        sim = simulated[simulated["hardware"] == hw] if simulated is not None else None
        plot_collapse_panel(df[df["hardware"] == hw], top, max_context_tokens, sim, plans=figure_plans)
        if col:
            top.set_ylabel("")
            top.tick_params(labelleft=False)
        if with_goodput and sim is not None:
            g = fig.add_subplot(grid[r + 1, col])
            lows.append(g)
            _goodput_panel(g, sim, top)
            top.set_xlabel("")
            if not col:
                g.set_ylabel("requests meeting\nthe SLOs (%)")
    merged: dict[str, Any] = {}  # one legend for all panels
    for ax in tops:
        handles, labels = ax.get_legend_handles_labels()
        merged.update({label: h for h, label in zip(handles, labels, strict=True) if label not in merged})
        legend = ax.get_legend()
        if legend is not None:
            legend.remove()
    column_in = LEGEND_PAD_IN + _widest_in(fig, [line for label in merged for line in label.split("\n")]
                                           + [_legend_title(df)])
    below = len(kinds) > 1
    width_in = panels_in if below else panels_in + column_in
    style: dict[str, Any] = {"fontsize": LEGEND_FONT, "title_fontsize": LEGEND_FONT}
    legends = _legends_under(fig, merged, _legend_title(df), lows, width_in, column_in, _meeting(slo)) if below \
        else []
    boxes = [leg.get_window_extent(fig.canvas.get_renderer()) for leg in legends]  # type: ignore[attr-defined]
    legend_h_in = max((box.height for box in boxes), default=0.0) / fig.dpi + (0.15 if legends else 0.0)
    caption = _goodput_caption(simulated, slo) if with_goodput and simulated is not None else ""
    if caption:
        import textwrap

        caption = "\n".join(textwrap.fill(line, int(13.5 * width_in)) for line in caption.split("\n"))
    caption_in = 0.16 * (caption.count("\n") + 1) + 0.1 if caption else 0.0  # its height, inches
    height_in = panels_h_in + legend_h_in + caption_in
    fig.set_size_inches(width_in, height_in)
    sep = " " if cols > 1 else "\n"  # one panel is too narrow for the subtitle on one line
    name = model if isinstance(model, str) else f"{model.key} ({weight_precision(model)} weights)"
    fig.suptitle(f"Concurrency collapse: {name}\nmax concurrent streams per node vs context length{sep}"
                 "(KV budget = usable HBM − weights, on the binding GPU)", fontsize=12)
    fig.text(0.01, 0.05 / height_in, caption, fontsize=9, va="bottom", ha="left", color="0.2")
    # a legend at the right comes after the layout, which would otherwise widen the panel to its widest entry
    fig.tight_layout(rect=(0, (caption_in + legend_h_in) / height_in, panels_in / width_in, 1))
    x_in = 0.1
    for leg, box in zip(legends, boxes, strict=True):  # side by side under the panels, left to right
        leg.set_bbox_to_anchor((x_in / width_in, (caption_in + 0.05) / height_in), transform=fig.transFigure)
        x_in += box.width / fig.dpi + 0.3
    if not below:
        where: dict[str, Any] = {"loc": "upper left", "borderaxespad": 0, "bbox_to_anchor": (1.03, 1.0), **style}
        tops[0].legend(list(merged.values()), list(merged), title=_legend_title(df), **where)
        if lows:
            lows[0].legend(title=_meeting(slo), **where)
    return fig


def _meeting(slo: tuple[float, float] | None) -> str:
    """The goodput panels' legend title: ``requests meeting`` and the SLOs (helper-158: none was named)."""
    return "requests meeting" + (f"\n({slo_text(slo)})" if slo else "")


def _legends_under(fig: Figure, merged: dict[str, Any], title: str, lows: list[Axes], width_in: float,
                   column_in: float, meeting: str = "requests meeting") -> list[Any]:
    """The figure legends that go under the panels, made (to be measured) but not yet placed: the
    layouts' in as many columns of `column_in` as `width_in` holds beside the goodput panels' legend
    (when there are goodput panels), and that legend."""
    style: dict[str, Any] = {"fontsize": LEGEND_FONT, "title_fontsize": LEGEND_FONT, "loc": "lower left"}
    low = lows[0].get_legend_handles_labels() if lows else ([], [])
    low_in = LEGEND_PAD_IN + _widest_in(fig, [*low[1], *meeting.split("\n")]) if lows else 0.0
    ncol = max(1, min(len(merged), int((width_in - low_in - 0.3) // column_in)))
    legends = [fig.legend(list(merged.values()), list(merged), title=title, ncol=ncol, **style)]
    if lows:
        legends.append(fig.legend(*low, title=meeting, **style))
    return legends


def _widest_in(fig: Figure, lines: list[str]) -> float:
    """Width in inches of the widest of `lines` in the legends' font, as `fig` draws it."""
    renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]
    widths = []
    for line in lines:
        text = fig.text(0, 0, line, fontsize=LEGEND_FONT)
        widths.append(text.get_window_extent(renderer).width)
        text.remove()
    return max(widths, default=0.0) / fig.dpi


def _goodput_panel(g: Axes, sim: pd.DataFrame, top: Axes) -> None:
    """Under a kind's streams panel `top`: the share of its simulated requests meeting the SLOs."""
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
    g.set_xlim(top.get_xlim())
    g.set_ylim(-5, 105)
    g.set_xlabel("context length per stream (tokens)")
    layout = f"{sim['layout'].iloc[0]} layout" if "layout" in sim and len(sim) else "the scenario's layout"
    nodes = _replica_nodes(sim)
    g.set_title(f"simulated, {layout}:\n80% of the request rate {_offered_by(nodes)} sustains offered", fontsize=9)
    g.grid(True, alpha=0.3)
