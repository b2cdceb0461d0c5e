"""Break-even and savings charts (matplotlib, Agg). Each takes data and an optional `Axes`,
draws on it and returns it; nothing is shown or saved here."""

from __future__ import annotations

import math
import textwrap
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from simulator.charts import plain_text
from simulator.charts.base import plain_log_ticks

TITLE_WIDTH = 80  # characters a line of a savings chart's title holds at its 10-inch width and title size

_Y_LABELS = {
    "relative_cost": "Expected prefix input cost per request\n(× cost without cache)",
    "usd_per_request": "Expected prefix input cost per request (USD)",
}


def _axes(ax: Axes | None, size: tuple[float, float] = (9.0, 5.5)) -> Axes:
    if ax is not None:
        return ax
    _, new = plt.subplots(figsize=size, layout="constrained")
    return new


def _share(x: float) -> str:
    """A share as a whole percent; a dash where it is undefined (NaN)."""
    return f"{x:.0%}" if np.isfinite(x) else "–"


def nothing_cached_title(reason: str) -> str:
    """A savings chart's title when nothing could be cached (`TTLComparison.uncached_reason`): its
    first two clauses, each on lines of at most `TITLE_WIDTH` characters (a minimum's reason names the profile
    and the minimum in its first clause: one line ran off a 10-inch figure)."""
    what, _, why = reason.partition(": ")
    return "\n".join([textwrap.fill(f"Nothing cached: {what}", TITLE_WIDTH),
                      textwrap.fill(f"({why.split(', so')[0]})", TITLE_WIDTH)])


def _every_n_min(rate_per_min: float) -> str:
    gap = 1.0 / rate_per_min
    return f"1 per {gap:.0f} min" if gap >= 10 else f"1 per {gap:.1f} min"


@plain_text
def plot_cost_vs_rate(
    curves: pd.DataFrame,
    breakevens: pd.DataFrame | None = None,
    crossovers: pd.DataFrame | None = None,
    *,
    y: str = "relative_cost",
    title: str | None = None,
    ax: Axes | None = None,
) -> Axes:
    """Expected cost per request vs Poisson reuse rate (log x, reuses per minute), one line per TTL.

    `curves` is `numeric.cost_curves`; `breakevens` (`numeric.ttl_rows`) marks where each TTL
    starts to pay against no cache; `crossovers` (`numeric.crossovers`) where a longer TTL
    becomes cheaper than a shorter one.
    """
    ax = _axes(ax)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    ttls = [t for t in dict.fromkeys(curves["ttl"]) if t != "none"]
    color = {t: colors[i % len(colors)] for i, t in enumerate(ttls)}
    none = curves[curves["ttl"] == "none"].sort_values("rate_per_min")
    if not none.empty:
        ax.plot(none["rate_per_min"], none[y], ls="--", color="0.35", lw=1.5, label="no cache")
    for t in ttls:
        c = curves[curves["ttl"] == t].sort_values("rate_per_min")
        ax.plot(c["rate_per_min"], c[y], color=color[t], lw=2.2, label=f"TTL {t}")
    lo, hi = curves["rate_per_min"].min(), curves["rate_per_min"].max()
    base_y = float(none[y].iloc[0]) if not none.empty else 1.0
    if breakevens is not None:
        for i, row in enumerate(breakevens.to_dict("records")):
            rate = float(row["breakeven_rate_per_min"])
            if not (lo <= rate <= hi) or rate <= 0:
                continue
            ax.plot([rate], [base_y], "o", ms=9, color=color.get(str(row["ttl"]), "k"), mec="k", zorder=5)
            ax.axvline(rate, color=color.get(str(row["ttl"]), "k"), ls=":", lw=1)
            ax.annotate(
                f"{row['ttl']} pays above\n{rate:.3g}/min ({_every_n_min(rate)})\n"
                f"p(hit) > {row['breakeven_p_hit']:.3f}",
                xy=(rate, base_y), xytext=(25, 30 + 55 * i), textcoords="offset points", fontsize=9,
                arrowprops={"arrowstyle": "->", "color": "0.2"},
                bbox={"boxstyle": "round", "fc": "white", "ec": color.get(str(row["ttl"]), "k")},
            )  # fmt: skip
    if crossovers is not None:
        for row in crossovers.to_dict("records"):
            rate = float(row["crossover_rate_per_min"])
            c = curves[curves["ttl"] == row["long"]].sort_values("rate_per_min")
            if c.empty or not (lo <= rate <= hi) or rate <= 0:
                continue
            yv = float(np.interp(math.log(rate), np.log(c["rate_per_min"]), c[y]))
            ax.plot([rate], [yv], "D", ms=8, color="white", mec="k", zorder=5)
            ax.annotate(
                f"{row['long']} cheaper than {row['short']}\nabove {rate:.3g}/min\n({_every_n_min(rate)})",
                xy=(rate, yv), xytext=(0.02, 0.3), textcoords="axes fraction", fontsize=9,
                arrowprops={"arrowstyle": "->", "color": "0.2"},
                bbox={"boxstyle": "round", "fc": "white", "ec": "0.4"},
            )  # fmt: skip
    ax.set_xscale("log")
    ax.set_xlim(lo, hi)
    ax.set_ylim(bottom=0)
    ax.set_xlabel("Prefix reuse rate λ (requests per minute, Poisson; log scale)")
    ax.set_ylabel(_Y_LABELS.get(y, y))
    ax.set_title(title or "Prompt-cache break-even: expected cost per request vs reuse rate")
    ax.grid(True, which="major", alpha=0.3)
    ax.grid(True, which="minor", alpha=0.1)
    ax.legend(loc="best")  # (lower left covered a curve that ends low there: deepseek's 24h, helper-195)
    return ax


@plain_text
def plot_savings_vs_ttl(summary: pd.DataFrame, *, title: str | None = None, ax: Axes | None = None) -> Axes:
    """Savings against no cache as a share of the whole bill, output included
    (``savings_pct_of_bill``), per TTL of a simulated comparison (`compare.TTLComparison.summary`),
    one group per profile. Each bar is labelled with the share
    of prompt tokens read from the cache (``share_prompt_tokens_read``) and the share of requests
    that read any (``share_requests_with_read``): two different measures, named as such."""
    ax = _axes(ax, (8.0, 5.0))
    s = summary[summary["ttl"] != "none"]
    profiles = list(dict.fromkeys(s["profile"]))
    ttls = list(dict.fromkeys(s["ttl"]))
    width = 0.8 / max(len(profiles), 1)
    x = np.arange(len(ttls))
    for i, p in enumerate(profiles):
        sp = s[s["profile"] == p].set_index("ttl").reindex(ttls)
        bars = ax.bar(x + (i - (len(profiles) - 1) / 2) * width, sp["savings_pct_of_bill"], width, label=p)
        shares = zip(sp["share_prompt_tokens_read"], sp["share_requests_with_read"], strict=True)
        for b, pct, (tokens, requests) in zip(bars, sp["savings_pct_of_bill"], shares, strict=True):
            if np.isfinite(pct):
                ax.annotate(
                    f"{pct:+.1f}%\n{_share(tokens)} of prompt tokens\nread from cache\n{_share(requests)} of "
                    "requests\nread from cache",
                    (b.get_x() + b.get_width() / 2, pct),
                    xytext=(0, 4 if pct >= 0 else -76),
                    textcoords="offset points",
                    ha="center",
                    fontsize=8,
                )
    ax.axhline(0, color="k", lw=0.8)
    ax.set_xticks(x, [f"TTL {t}" for t in ttls])
    ax.set_xlabel("Cache TTL")
    ax.set_ylabel("Savings vs no cache (% of total bill)")
    ax.set_title(title or "Simulated savings of a prompt cache by TTL")
    lo, hi = float(np.nanmin(s["savings_pct_of_bill"])), float(np.nanmax(s["savings_pct_of_bill"]))
    # room for the five-line labels, ~80 points beyond a bar's end, ~30% of the axes' height: a pad of 0.75 of
    # the bars' span from 0 (helper-195: half of hi − lo, which leaves 0 out, put a −91% bar's label under the
    # x axis, over its tick label, when the other bar was at −23%)
    pad = max(25.0, 0.75 * (max(hi, 0.0) - min(lo, 0.0)))
    ax.set_ylim(min(0.0, lo - pad) if lo < 0 else 0.0, max(0.0, hi) + pad)
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(title="profile")
    return ax


def _dist_cdf_points(dist: Any, ttls_s: list[float]) -> tuple[np.ndarray, np.ndarray]:
    """A frozen distribution's CDF on a log grid (gaps in minutes): from its 0.1st to its 99.9th percentile,
    widened to a tenth of the shortest TTL and twice the longest, so each TTL's line crosses the curve."""
    lo = float(dist.ppf(1e-3))
    hi = float(dist.ppf(1 - 1e-3))
    lo = min(lo if lo > 0 else hi * 1e-6, *[t / 10 for t in ttls_s])
    hi = max(hi, *[t * 2 for t in ttls_s])
    x = np.geomspace(lo, hi, 400)
    return x / 60.0, np.asarray(dist.cdf(x), dtype=float)


@plain_text
def plot_gap_cdf(
    gaps_s: Any,
    ttls: pd.DataFrame,
    *,
    hits: pd.DataFrame | None = None,
    label: str = "reuse gaps",
    title: str | None = None,
    ax: Axes | None = None,
) -> Axes:
    """CDF of reuse gaps (minutes, log x) with each TTL and its break-even ``p*``. `gaps_s` is a sample of
    gaps in seconds (its empirical CDF, a step curve) or a frozen ``scipy.stats`` distribution of them (its
    CDF, a smooth curve named `label`); `ttls` is `numeric.ttl_rows`. `hits` (`numeric.gaps_rows`) marks each
    TTL's ``p_hit = F(TTL)`` on the curve, its value in the legend. The legend sits right of the axes, off
    the curve and the lines.

    The CDF at a TTL is the share of *reuses* it catches (a sliding TTL); a TTL pays where
    the share of *all* uses that hit is above ``p*``, and every prefix's first use is a miss whatever the TTL:
    the two agree for one long-lived prefix (the Poisson tables), not for a workload whose prefixes are
    mostly used once (its bill's ``share_cached_tokens_read`` is what compares with ``p*``: `compare_ttls`).

    With no gap above 0 there is no curve: the chart says so in its title and on the axes
    rather than listing "reuse gaps" in a legend over an empty plot."""
    ax = _axes(ax, (11.0, 5.0))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    rows = ttls.to_dict("records")
    if hasattr(gaps_s, "cdf"):  # a distribution
        x, y = _dist_cdf_points(gaps_s, [float(r["ttl_s"]) for r in rows])
        ax.plot(x, y, color="k", lw=1.8, label=label)
    else:
        every = np.sort(np.asarray(gaps_s, dtype=float)) / 60.0
        g = every[every > 0]
        zeros = every.size - g.size  # no place on a log axis, but counted: the curve starts at their share
        # (helper-164: the curve left them out and rose to 1 over the others, under the gaps table's p_hit dots)
        if g.size:
            ax.step(g, (zeros + np.arange(1, g.size + 1)) / every.size, where="post", color="k", lw=1.8,
                    label=label + (f"; {zeros:,} of 0 s, counted from the curve's start" if zeros else ""))
        elif zeros:
            ax.text(0.5, 0.5, f"every gap is 0 s ({zeros:,}): any TTL catches them all", transform=ax.transAxes,
                    ha="center", va="center", fontsize=11, color="0.3")
        else:
            ax.text(0.5, 0.5, "no reuse gaps: no prefix was used twice", transform=ax.transAxes, ha="center",
                    va="center", fontsize=11, color="0.3")
            title = title or "Reuse gaps: none observed (nothing to compare with the TTLs)"
    for i, row in enumerate(rows):
        c = colors[i % len(colors)]
        ax.axvline(row["ttl_s"] / 60.0, color=c, ls="--", lw=1.2, label=f"TTL {row['ttl']}")
        ax.axhline(
            row["breakeven_p_hit"],
            color=c,
            ls=":",
            lw=1.2,
            label=f"break-even p* ({row['ttl']}) = {row['breakeven_p_hit']:.3f}",
        )
    if hits is not None:
        for row in hits.to_dict("records"):
            ttl = next((r for r in rows if r["ttl"] == row["ttl"]), None)
            if ttl is None:
                continue
            c = colors[rows.index(ttl) % len(colors)]
            ax.plot([ttl["ttl_s"] / 60.0], [row["p_hit"]], "o", ms=8, color=c, mec="k", zorder=5,
                    clip_on=False, label=f"p_hit ({row['ttl']}) = {row['p_hit']:.4g}, the gaps table's")
    ax.set_xscale("log")
    plain_log_ticks(ax.xaxis)  # 0.1 1 10, as the other charts label a log axis, not 10⁰
    ax.set_ylim(0, 1)
    ax.set_xlabel("Gap since the previous use of the prefix (minutes, log scale)")
    ax.set_ylabel("Share of reuse gaps this short or shorter")
    # from the axes' left edge, over the legend's column (helper-167: centred, a long legend narrowed the axes
    # and cut the title's start off the figure)
    ax.set_title(title or "Reuse gaps: a TTL catches the reuses left of its line\n(it pays where the share of "
                 "all uses that hit, first uses counted as misses, is above its p*)", fontsize=11, loc="left")
    ax.grid(True, alpha=0.3)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0, fontsize=9)
    return ax


# the provider chart's rows, top to bottom: provider_table's column and what it is
PROVIDER_ROWS = {
    "prefill_saved_usd": "prefill GPU time\nthe hits save",
    "holding_hbm_usd": "holding its KV in HBM\n(streams displaced)",
    "holding_dram_usd": "holding it\nin host DRAM",
    "holding_ssd_usd": "holding it\non SSD",
}


def _usd(v: float) -> str:
    return f"${v:,.0f}" if v >= 100 else f"${v:.3g}"


@plain_text
def plot_provider_costs(table: pd.DataFrame, *, title: str | None = None, ax: Axes | None = None) -> Axes:
    """The provider's side of each TTL (`provider.provider_table`, its ``none`` row dropped): the prefill
    GPU time its hits save against what holding its KV costs in HBM, host DRAM and on SSD, in USD over the
    replay, as a dot plot on a log x axis (the figures span decades; a bar's length on a log axis
    would only measure the distance from an arbitrary floor). One dot per TTL in a row, each labelled
    with its value. A value of 0 (or NaN) has no place on a log axis:
    its label, at the left edge, says so. The TTLs' legend sits right of the axes."""
    ax = _axes(ax, (10.0, 4.5))
    t = table.set_index("ttl") if "ttl" in table.columns else table
    t = t.drop(index="none", errors="ignore")
    ttls = [str(x) for x in t.index]
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    markers = "os^Dv"
    rows = list(PROVIDER_ROWS)
    step = 0.5 / max(len(ttls), 1)
    for r, column in enumerate(rows):
        values = [float(v) for v in t[column]]
        for i, (ttl, v) in enumerate(zip(ttls, values, strict=True)):
            y = r + (i - (len(ttls) - 1) / 2) * step
            if not (np.isfinite(v) and v > 0):
                ax.annotate(f"{ttl}: {'0' if v == 0 else 'n/a'} (not on a log axis)", (0.0, y),
                            xycoords=("axes fraction", "data"), xytext=(4, 0), textcoords="offset points",
                            va="center", fontsize=8, color=colors[i % len(colors)])
                continue
            ax.plot([v], [y], markers[i % len(markers)], ms=8, color=colors[i % len(colors)], mec="k", zorder=3)
            ax.annotate(_usd(v), (v, y), xytext=(7, 0), textcoords="offset points", va="center", fontsize=9)
    every = t[rows].to_numpy(dtype=float).ravel()
    every = every[np.isfinite(every) & (every > 0)]
    if every.size:
        ax.set_xlim(every.min() / 3, every.max() * 8)  # room for the labels right of the dots
    ax.set_xscale("log")
    ax.set_yticks(range(len(rows)), [PROVIDER_ROWS[c] for c in rows])
    ax.set_ylim(len(rows) - 0.5, -0.5)  # the first row on top
    ax.set_xlabel("USD over the replay (log scale)")
    ax.set_title(title or "Provider: what a TTL saves and what holding its KV costs")
    ax.grid(True, axis="x", which="major", alpha=0.3)
    handles = [Line2D([], [], marker=markers[i % len(markers)], ls="", ms=8, color=colors[i % len(colors)], mec="k",
                      label=f"TTL {ttl}") for i, ttl in enumerate(ttls)]
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0, title="cache TTL")
    return ax


def save_png(ax: Axes, path: Path, dpi: int = 120) -> Path:
    """Write the figure holding `ax` to `path` as PNG and close it."""
    fig = ax.figure
    while not isinstance(fig, Figure):  # a SubFigure: climb to the figure that owns it
        fig = fig.figure
    fig.savefig(path, dpi=dpi)
    plt.close(fig)
    return path
