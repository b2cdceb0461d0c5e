"""Figures of the cost model: when does decode become KV-bound and MFU collapse?

``docs/figures/decode_mfu_llama8b_h100.png`` is::

    sm = simulator.cost.step_model("H100", "Llama-3.1-8B")
    ax = plot_decode_mfu(decode_mfu_table(sm, [1, 8, 32, 128, 256], [512, 2048, 8192, 32768, 131072]),
                         title="Decode MFU of Llama-3.1-8B bf16 on one H100")
    ax.figure.savefig("docs/figures/decode_mfu_llama8b_h100.png", bbox_inches="tight")

With the shipped parameters every batch that fits at 8k+ tokens per sequence stays under 5% MFU
(the KV read dominates the step); at 512 tokens a batch of 256 reaches 27%.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import pandas as pd

from simulator.cost.step_model import StepModel
from simulator.cost.throughput import steady_batch

if TYPE_CHECKING:
    from matplotlib.axes import Axes


def decode_mfu_table(sm: StepModel, batches: Sequence[int], contexts: Sequence[int]) -> pd.DataFrame:
    """Decode MFU, step time and KV share for each (batch, context) whose KV fits one scheduler
    (`steady_batch`: a replica's KV pool, or a DP rank's).

    Rows where ``batch`` sequences of ``context`` tokens do not fit beside the weights are left out.
    """
    rows = []
    for c in contexts:
        fit = steady_batch(sm, c, 0, max(batches)) if c else max(batches)
        for b in batches:
            if b > fit:
                continue
            cost = sm.cost((), b, b * sm.priced_context(c))
            rows.append(
                {
                    "batch": b,
                    "context_tokens": c,
                    "step_s": cost.total_s,
                    "mfu": cost.mfu,
                    "kv_share": cost.attention_s / cost.total_s,
                    "bound": cost.bound,
                }
            )
    return pd.DataFrame(rows)


#: What `plot_decode_mfu` writes under its title: why a batch's line stops short of the longest context.
FIT_NOTE = "batches that fit: each line ends at the longest context at which that batch's KV fits beside the weights"


def plot_decode_mfu(table: pd.DataFrame, ax: Axes | None = None, title: str = "Decode MFU against context") -> Axes:
    """MFU against context, one line per batch size, with the 5% line; returns the Axes.

    `title` (what and on what: the model and GPU) gets a second line, `FIT_NOTE`: the table holds only the
    (batch, context) pairs that fit, so a large batch's line stops early, and one that fits only the shortest
    context is a single point (helper-158: the title passed for the README's figure dropped the default's
    "(batches that fit)" and left that unexplained). The context axis is labelled as the other charts'
    (512, 2k, 8k, 32k, 128k: `simulator.charts.base.tokens_tick`), at the table's contexts, not 2⁹…2¹⁷."""
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

    from simulator.charts.base import tokens_tick

    if ax is None:
        _, ax = plt.subplots(figsize=(6, 4))
    for b, g in table.groupby("batch"):
        ax.plot(g["context_tokens"], 100 * g["mfu"], marker="o", label=f"batch {b}")
    ax.axhline(5, color="grey", linestyle="--", linewidth=1, label="5% MFU")
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_locator(FixedLocator(sorted(table["context_tokens"].unique())))
    ax.xaxis.set_major_formatter(FuncFormatter(tokens_tick))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xlabel("context tokens per sequence (log)")
    ax.set_ylabel("decode MFU (%)")
    ax.set_title(f"{title}\n({FIT_NOTE})", fontsize=10)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=9, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)  # off the lines
    return ax
