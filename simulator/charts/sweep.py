"""A sweep's chart: a metric against a swept key, one line per node kind and other varying key."""

from __future__ import annotations

import re
import textwrap
from typing import Any

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.ticker import MaxNLocator
from matplotlib.transforms import ScaledTranslation

from simulator.charts.base import MISSES_COLOUR, plain_log_ticks, plain_text

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
    "disaggregation.prefill_nodes": ("prefill nodes (xPyD)", 1.0),
    "disaggregation.decode_nodes": ("decode nodes (xPyD)", 1.0),
    "cache.layout": ("KV layout", 1.0),
    "workload.rate_scale": ("load (× the workload's base rate)", 1.0),
    "workload.duration_s": ("workload duration (s)", 1.0),
    "scheduler.max_num_seqs": ("max running sequences per replica", 1.0),
    "scheduler.max_num_batched_tokens": ("token budget per iteration (tokens)", 1.0),
}
_SLO_LINES = {"ttft_p99_s": ("slo_ttft_p99_s", "s"), "tpot_p99_s": ("slo_tpot_p99_s", "ms")}
#: Shares of a whole: their axis is 0 to 1, whatever the values (a miss of 0.62 is not the axis' floor).
SHARES = frozenset({"goodput_fraction", "kv_utilization", "meets_slo"})
#: Amounts (costs, throughput, counts): a linear axis of one starts at 0, so a 24% difference reads as 24%. Every
#: count a sweep row holds (`simulator.sweep`'s integer columns) is one (helper-172: ``preemptions``, ``rejected``
#: and ``trace_rows_skipped`` were left out, so 40 preemptions against 50 filled the axis' height).
AMOUNTS = frozenset({"usd_per_hour", "usd_per_million_output_tokens", "output_tokens_per_s", "requests",
                     "trace_rows_skipped", "completed", "rejected", "timed_out", "max_concurrency", "preemptions"})
#: A legend entry's words for a split key's value (``{}`` the value); keys not here read ``<axis name>=<value>``.
LEGEND_NAMES: dict[str, str] = {
    "workload.rate_scale": "load {}×",
    "cluster.nodes": "{} nodes",
    "cluster.tp": "TP{}",  # as the titles and the headline label a plan
    "cache.layout": "layout {}",
    "seed": "seed {}",
    "workload.duration_s": "{} s run",
    "cluster.memory_utilization": "{} of HBM usable",
    "scheduler.max_num_seqs": "at most {} running sequences",
    "scheduler.max_num_batched_tokens": "{} tokens per iteration",
    "disaggregation.prefill_nodes": "{} prefill nodes",
    "disaggregation.decode_nodes": "{} decode nodes",
}
#: The pool sizes an xPyD fleet's label carries (``8xH100-2P4D``: `Scenario.fleet_label`), and the letter that stands
#: for one where the sweep varies it, so that a fleet's points across its pool sizes make one line (``8xH100-xP4D``).
POOL_KEYS = {"disaggregation.prefill_nodes": "x", "disaggregation.decode_nodes": "y"}
_SPLIT = re.compile(r"-(\d+)P(\d+)D(?=-|$)")
#: A title's characters an inch of the figure's width (12-point text), less its margins: where it wraps.
TITLE_CHARS_PER_IN = 11.4  # (0.0875 in a character: 82 fill 7.2 in)
TITLE_MARGIN_IN = 0.3
#: Legend entries under the plot take this many columns (three entries or more).
LEGEND_COLUMNS = 2
#: How far under the axes' bottom the legend starts (points): below the tick labels and the x label.
LEGEND_DROP_PT = 38
#: The series' markers, in drawing order: no two lines of a chart share one.
MARKERS = "osD^vP<X>p*h"


def _fleet_kinds(hardware: pd.Series, varied: set[str]) -> pd.Series:
    """The fleets' labels with the pool sizes in `varied` (`POOL_KEYS`) as letters: ``8xH100-2P4D`` and
    ``8xH100-3P4D`` are one fleet, ``8xH100-xP4D``, where the sweep varies the prefill pool (helper-190: each was its
    own series, one point and no line, on a sweep of ``disaggregation.prefill_nodes``)."""
    p, d = (POOL_KEYS[k] if k in varied else "" for k in POOL_KEYS)  # prefill's letter, decode's ("": not varied)
    if not (p or d):
        return hardware
    return hardware.map(lambda hw: _SPLIT.sub(lambda m: f"-{p or m[1]}P{d or m[2]}D", str(hw), count=1))


def _short(key: str) -> str:
    """A key's name without its unit, as the axis labels it: ``load`` for ``workload.rate_scale``."""
    if key in ("hardware", "cluster.hardware"):
        return "node kind"
    return SWEEP_LABELS.get(key, (key, 1.0))[0].split(" (")[0]


def _entry(key: str, value: object) -> str:
    """A split value in a legend, in the axis' words: ``load 10×`` (``workload.rate_scale=10.0``), ``1 node``."""
    v = f"{value:g}" if isinstance(value, float) else str(value)
    if key == "hardware":
        return v
    if key == "cluster.nodes" and v == "1":
        return "1 node"
    return LEGEND_NAMES[key].format(v) if key in LEGEND_NAMES else f"{_short(key)}={v}"


@plain_text
def plot_sweep(df: pd.DataFrame, x: str, y: str, hue: str | None = None, ax: Axes | None = None) -> Axes:
    """Metric `y` against swept key `x`, one line per hardware kind (and per `hue` value); a key whose values
    are not numbers (``cache.layout``) gets its points unjoined, each labelled with its value.

    Other swept keys that vary (``df.attrs["swept"]``, set by `simulator.sweep.run_sweep`) split
    lines too, so no line mixes points. Each line has its own marker, the first drawn largest, so
    that points in the same place show each other's edges; a line equal to an earlier one at every
    point is drawn over it with gaps and hollow markers, and says so in its legend entry
    (``8xH100, load 20× (the same as load 10×)``). Legend entries and
    title name keys as the axes do (``load 10×``, not ``workload.rate_scale=10.0``); the legend sits
    under the plot, in `LEGEND_COLUMNS` columns, at any number of entries. The title names the
    scenario and, from ``df.attrs["setting"]``, the model and fleet (`simulator.sweep.sweep_setting`).
    A point that misses the SLOs (``meets_slo`` false) is ringed in the compare chart's misses red,
    with a legend entry (`_mark_misses`). The p99 SLO is drawn on p99 TTFT and TPOT where
    ``df.attrs`` carries it. A share (`SHARES`) is drawn on 0 to 1; otherwise the y axis turns
    logarithmic when positive values span more than a decade (10×), and an amount's linear axis
    (`AMOUNTS`: costs, throughput, counts) starts at 0.
    """
    for col in (x, y, *([hue] if hue else [])):
        if col not in df.columns:
            raise KeyError(f"plot_sweep: no column {col!r}; columns: {', '.join(map(str, df.columns))}")
    ax = ax or plt.figure(figsize=(7.5, 5.6)).gca()
    ylabel, scale = SWEEP_LABELS.get(y, (y, 1.0))
    xlabel = SWEEP_LABELS.get(x, (x, 1.0))[0]
    split = ["hardware", *([hue] if hue and hue != "hardware" else [])]
    split += [k for k in df.attrs.get("swept", []) if k not in (x, *split, "cluster.hardware")
              and k in df and df[k].nunique() > 1]
    attrs, df = df.attrs, df.assign(hardware=_fleet_kinds(df["hardware"], {x, *split}))
    df.attrs = attrs
    # a seed is a draw, not a quantity: its points are not a trend either (helper-147)
    numeric_x = pd.api.types.is_numeric_dtype(df[x]) and x != "seed"
    share = y in SHARES
    kinds = list(dict.fromkeys(df["hardware"]))
    colours: dict[tuple[object, ...], int] = {}
    groups = list(df.groupby(split, sort=False))
    drawn: list[tuple[list[str], pd.Series, pd.Series]] = []
    for i, (keys, g) in enumerate(groups):
        if numeric_x:
            g = g.sort_values(x, kind="stable")
        hw, rest = keys[0], tuple(keys[1:])
        style = kinds.index(hw)  # a line style per node kind, a colour per other split, a marker per line
        colour = colours.setdefault(rest, len(colours)) if rest else style
        parts = [_entry(k, v) for k, v in zip(split, keys, strict=True)]
        xs, ys = g[x].reset_index(drop=True), (g[y].astype(float) * scale).reset_index(drop=True)
        label = ", ".join(parts)
        # (a line of no figure, every point an error, is the same as nothing: Series.equals holds NaN equal)
        same = next((earlier for earlier, ex, ey in drawn if ys.notna().any() and xs.equals(ex)
                     and ys.round(12).equals(ey.round(12))), None)
        if same:  # a line hidden under an earlier one is named, not lost (helper-158)
            label += f" (the same as {', '.join(p for p, q in zip(same, parts, strict=True) if p != q)})"
        drawn.append((parts, xs, ys))
        # categories (layouts, node kinds, seeds) are points, not a line: nothing lies between two layouts (helper-143)
        ls: object = ["-", "--", "-.", ":"][style % 4] if numeric_x else "none"
        if same and numeric_x:
            ls = (0, (4, 4))  # gaps that show the line under it
        size = (6 if numeric_x else 9) + 1.5 * min(len(groups) - 1 - i, 3)  # the first drawn largest
        hollow: dict[str, Any] = {"mfc": "none", "mew": 2.0} if same else {}
        ax.plot(xs, ys, color=f"C{colour % 10}", ls=ls, marker=MARKERS[i % len(MARKERS)], lw=1.8, ms=size,
                label=label, clip_on=not share, **hollow)
        if not numeric_x:  # few points, unjoined: each says its value (5.01 on an SLO of 5 reads as a miss)
            for xv, yv in zip(xs, ys, strict=True):
                if pd.notna(yv):
                    ax.annotate(f"{yv:.3g}", (xv, yv), xytext=(8, 4), textcoords="offset points",
                                va="bottom", fontsize=8)  # over an SLO line through the point, not on it
    _mark_misses(ax, df, x, y, scale, clip=not share)
    slo_attr, unit = _SLO_LINES.get(y, ("", ""))
    slo = df.attrs.get(slo_attr)
    if slo:
        ax.axhline(slo * scale, color="red", ls=":", lw=1.2, label=f"p99 SLO {slo * scale:g} {unit}")
    values = df[y].astype(float) * scale
    positive = values[values > 0]
    if share:  # a share's whole range: 0.62 against 1.0 is a third short, not the axis' height
        ax.set_ylim(0, 1.05)
        ax.set_yticks([0, 0.2, 0.4, 0.6, 0.8, 1.0])
    elif len(positive) and positive.max() > 10 * positive.min():
        ax.set_yscale("log")
        plain_log_ticks(ax.yaxis)
        ylabel += ", log"
    elif y in AMOUNTS and len(positive):
        ax.set_ylim(0, max(ax.get_ylim()[1], positive.max() * 1.08))  # room over the highest point
    if not numeric_x:
        ax.margins(x=0.15)  # room for the value labels beside the outer points
    if pd.api.types.is_integer_dtype(df[x]):
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    name, setting = df.attrs.get("scenario"), df.attrs.get("setting")
    about = f"{name} ({setting})" if name and setting else name or setting
    title = (f"{about}: " if about else "") + f"{ylabel.split(' (')[0]} vs {xlabel.split(' (')[0]}"
    # wrapped to the figure's width: a long one ran past its edge and was cut (helper-190)
    width_in = ax.figure.bbox.width / ax.figure.dpi - TITLE_MARGIN_IN
    ax.set_title(textwrap.fill(title, max(40, int(TITLE_CHARS_PER_IN * width_in))))
    ax.grid(True, alpha=0.3)
    entries = len(ax.get_legend_handles_labels()[1])
    # under the plot, whatever the count: beside it took half the width, inside it covered points (helper-158)
    under = ax.transAxes + ScaledTranslation(0, -LEGEND_DROP_PT / 72, ax.figure.dpi_scale_trans)
    ax.legend(fontsize=8, title=" / ".join(map(_short, split)), title_fontsize=8, loc="upper center",
              ncol=LEGEND_COLUMNS if entries > 2 else 1, bbox_to_anchor=(0.5, 0.0), bbox_transform=under)
    return ax


def _mark_misses(ax: Axes, df: pd.DataFrame, x: str, y: str, scale: float, clip: bool = True) -> None:
    """Ring the points whose ``meets_slo`` is false: a cheap point that misses the SLOs is no answer.

    The compare chart marks a miss in `MISSES_COLOUR` (its bars hatched), as the fleets chart
    hatches one; a line's point gets a ring of that colour, drawn over its marker, and one legend
    entry. Rows of failed points (no ``meets_slo``) and a frame without the column are left as they are.
    """
    if "meets_slo" not in df:
        return
    missed = df["meets_slo"].map({True: False, False: True, "True": False, "False": True}).fillna(False).astype(bool)
    if not missed.any():
        return
    points = df[missed]
    ax.scatter(points[x], points[y].astype(float) * scale, s=160, facecolors="none", edgecolors=MISSES_COLOUR,
               linewidths=2.0, zorder=5, clip_on=clip,
               label="misses an SLO (p99 TTFT or TPOT), or rejects or times out requests")
