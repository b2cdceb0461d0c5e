"""Charts: functions take a DataFrame and an optional Axes, return the Axes, never show()."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter

from simulator.units import GB


def _tokens(x: float, _pos: int = 0) -> str:
    if x >= 2**20:
        return f"{x / 2**20:g}M"
    if x >= 2**10:
        return f"{x / 2**10:g}k"
    return f"{x:g}"


def plot_collapse_panel(df: pd.DataFrame, ax: Axes | None = None, max_context_tokens: int | None = None,
                        simulated: pd.DataFrame | None = None) -> Axes:
    """Max streams vs context (log-log) for one hardware kind, one line per layout.

    `simulated` (optional: columns ``context_tokens``, ``peak_streams``) adds measured points.
    """
    ax = ax or plt.figure(figsize=(7, 5)).gca()
    hw = df["hardware"].iloc[0]
    budget = df["kv_budget_bytes"].iloc[0]
    styles = ["-", "--", "-.", ":"]
    for i, (layout, g) in enumerate(df.groupby("layout", sort=False)):
        per_token_kb = g["bytes_per_token"].iloc[0] / 1e3
        g = g[g["max_streams"] > 0]
        ax.plot(g["context_tokens"], g["max_streams"], ls=styles[i % len(styles)], lw=1.8,
                label=f"{layout} ({per_token_kb:,.0f} kB/token)")
    native = df[df["layout"] == df["layout"].iloc[0]].set_index("context_tokens")["max_streams"]
    for n in (4096, 131072):
        if n in native.index and native[n] > 0:
            ax.annotate(f"{native[n]:,} @ {_tokens(n)}", (n, native[n]), textcoords="offset points",
                        xytext=(-10, -16), fontsize=9, color="C0",
                        fontweight="bold")
    if max_context_tokens:
        ax.axvline(max_context_tokens, color="grey", ls=":", lw=1)
        ax.text(max_context_tokens, 0.02, " model's max context", rotation=90, va="bottom", ha="right",
                fontsize=8, color="grey", transform=ax.get_xaxis_transform())
    if simulated is not None and len(simulated):
        ax.scatter(simulated["context_tokens"], simulated["peak_streams"], color="black", marker="x",
                   zorder=5, label="simulated peak")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.xaxis.set_major_formatter(FuncFormatter(_tokens))
    ax.set_xlabel("context length per stream (tokens)")
    ax.set_ylabel("max concurrent streams per node")
    ax.set_title(f"{hw}: KV budget {budget / GB:,.0f} GB")
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(title="KV layout", fontsize=8, title_fontsize=8)
    return ax


def collapse_figure(df: pd.DataFrame, model: str, max_context_tokens: int | None = None) -> Figure:
    """One panel per hardware kind, sharing the y axis."""
    kinds = list(dict.fromkeys(df["hardware"]))
    fig, axes = plt.subplots(1, len(kinds), figsize=(6.2 * len(kinds), 5.2), sharey=True, squeeze=False)
    for ax, hw in zip(axes[0], kinds, strict=True):
        plot_collapse_panel(df[df["hardware"] == hw], ax, max_context_tokens)
    for ax in axes[0][1:]:
        ax.set_ylabel("")
    fig.suptitle(f"Concurrency collapse: {model}, max concurrent streams vs context length "
                 "(KV budget = 0.9 × HBM − weights)", fontsize=12)
    fig.tight_layout()
    return fig
