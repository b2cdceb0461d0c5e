"""A sweep's chart: a metric against a swept key, one line per node kind and other varying key."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.ticker import MaxNLocator

from simulator.charts.base import MISSES_COLOUR, plain_text

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
    """Metric `y` against swept key `x`, one line per hardware kind (and per `hue` value); a key whose values
    are not numbers (``cache.layout``) gets its points unjoined.

    Other swept keys that vary (``df.attrs["swept"]``, set by `simulator.sweep.run_sweep`) split
    lines too, so no line mixes points. A point that misses the SLOs (``meets_slo`` false) is
    ringed in the compare chart's misses red, with a legend entry (`_mark_misses`). The p99 SLO is
    drawn on p99 TTFT and TPOT where ``df.attrs`` carries it; the y axis turns logarithmic when
    positive values span over 50×.
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
    # a seed is a draw, not a quantity: its points are not a trend either (helper-147)
    numeric_x = pd.api.types.is_numeric_dtype(df[x]) and x != "seed"
    kinds = list(dict.fromkeys(df["hardware"]))
    colours: dict[tuple[object, ...], int] = {}
    for keys, g in df.groupby(split, sort=False):
        if numeric_x:
            g = g.sort_values(x, kind="stable")
        hw, rest = keys[0], tuple(keys[1:])
        style = kinds.index(hw)  # a line style and marker per node kind, a colour per other split
        colour = colours.setdefault(rest, len(colours)) if rest else style
        parts = [str(hw)] + [f"{k}={v}" for k, v in zip(split[1:], rest, strict=True)]
        # categories (layouts, node kinds, seeds) are points, not a line: nothing lies between two layouts (helper-143)
        ls = ["-", "--", "-.", ":"][style % 4] if numeric_x else "none"
        ax.plot(g[x], g[y].astype(float) * scale, color=f"C{colour % 10}", ls=ls, marker="osD^v"[style % 5], lw=1.8,
                ms=6 if numeric_x else 9, label=", ".join(parts))
    _mark_misses(ax, df, x, y, scale)
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
    if len(legend.get_texts()) > 4:  # many entries: beside the plot, not over it
        legend.set_bbox_to_anchor((1.01, 1.0))
        legend.set_loc("upper left")
    return ax


def _mark_misses(ax: Axes, df: pd.DataFrame, x: str, y: str, scale: float) -> None:
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
               linewidths=2.0, zorder=5, label="misses an SLO (p99 TTFT or TPOT), or rejects or times out requests")
