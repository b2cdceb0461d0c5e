"""A scenario run's charts: latency distributions, the KV pool, queue and GPU use over time, and
aggregated against disaggregated fleets."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from simulator.charts.base import plain_log_ticks, plain_text
from simulator.units import figure

CDF_POINTS = 100_000
"""The most points a CDF line draws: more than a chart 1,320 pixels wide can show, and more than any
shipped scenario's run completes (its chart is drawn from every point); a day of traffic's 4M points
would take matplotlib some 270 MB a line (`kvsim run --stream`)."""


#: A CDF of fewer points than this is drawn as its points (markers), not a line: a line through 14 requests reads
#: as a distribution of many (helper-158, the capacity notebook's code-repo-128k class).
SPARSE_CDF_POINTS = 50


def _cdf(ax: Axes, values: pd.Series, label: str) -> None:
    """The empirical CDF of `values` (NaN left out): the i-th smallest of n at height i / n, every one of
    them up to `CDF_POINTS`, else `CDF_POINTS` of them evenly spaced in rank, the first and last included.
    Under `SPARSE_CDF_POINTS` values, a marker each and no line joining them."""
    v = np.sort(values.to_numpy(dtype=float))
    v = v[:len(v) - int(np.isnan(v).sum())]  # NaN sorts last
    n = len(v)
    if not n:
        return
    if n > CDF_POINTS:  # thinned (8bc0b67 put the few-points rule first, which a CDF_POINTS below it overrode)
        rank = np.linspace(0, n - 1, CDF_POINTS).round().astype(np.int64)
        ax.plot(v[rank], (rank + 1) / n, lw=1.8, label=label)
    elif n < SPARSE_CDF_POINTS:
        ax.plot(v, np.arange(1, n + 1) / n, ls="none", marker="o", ms=4, label=label)
    else:
        ax.plot(v, np.arange(1, n + 1) / n, lw=1.8, label=label)


@plain_text
def latency_figure(frames: dict[str, pd.DataFrame], slo_ttft_s: float, slo_tpot_s: float,
                   title: str | None = None) -> Figure:
    """TTFT and TPOT distributions (CDFs) of completed requests, one line per frame (a fleet, or a traffic
    class), labelled by its key; `title`, what they are of (the scenario, model and fleets), over both panels.
    A frame of fewer than `SPARSE_CDF_POINTS` completed requests is drawn as points (`_cdf`)."""
    fig, (a, b) = plt.subplots(1, 2, figsize=(12, 4.6))
    for hw, df in frames.items():
        done = df[df.outcome == "completed"]
        _cdf(a, done.ttft_s, hw)
        _cdf(b, done.tpot_mean_s * 1e3, hw)
    a.axvline(slo_ttft_s, color="red", ls=":", lw=1.2, label=f"SLO p99 {slo_ttft_s:g} s")
    b.axvline(slo_tpot_s * 1e3, color="red", ls=":", lw=1.2, label=f"SLO p99 {slo_tpot_s * 1e3:g} ms")
    for ax in (a, b):
        ax.axhline(0.99, color="grey", lw=0.8, ls="--", label="99% of requests (p99)")
        ax.set_xscale("log")
        plain_log_ticks(ax.xaxis)
        ax.set_ylabel("share of completed requests")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8, loc="lower right")
    a.set(xlabel="time to first token (s, log)", title="TTFT distribution")
    b.set(xlabel="mean time per output token (ms, log)", title="TPOT distribution")
    if title:
        fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    return fig


def bin_means(ts: pd.DataFrame, columns: list[str], bin_s: float = 10.0) -> pd.DataFrame:
    """Per `bin_s` bin (index ``minute``, the bin's start in minutes) the mean over replicas of each
    replica's mean over its samples there: ``mean_r mean_{samples of r in the bin} x``. A replica
    samples at each state change and inside decode jumps (thinned to one a ``sample_interval_s``) and
    whenever it goes idle, so a disaggregated fleet's prefill replicas, idle after each prompt, sample
    more often than its decode replicas; a plain mean over the samples would weigh them so."""
    t = ts.assign(minute=(ts.time_s // bin_s) * bin_s / 60)
    return t.groupby(["minute", "replica"])[columns].mean().groupby("minute").mean()


#: Colours of the KV pool's two bands (apart from the per-fleet colours of the other panels).
SEQUENCE_COLOUR, CACHE_COLOUR = "#2a7f62", "#e8b04a"


def kv_bands(ts: pd.DataFrame, blocks_per_replica: int, block_tokens: int, bin_s: float = 10.0,
             cache: bool = True) -> tuple[pd.DataFrame, bool]:
    """The KV pool's use over time in two bands, as % of one replica's blocks (`bin_means`: each
    replica's mean over its samples in a `bin_s` bin, then the mean over replicas); and whether the
    split is exact.

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
    frame = pd.DataFrame({"time_s": ts.time_s, "replica": ts.replica, "used": used, "sequences": seqs})
    means = 100 * bin_means(frame, ["used", "sequences"], bin_s) / blocks_per_replica
    means["cache"] = means.used - means.sequences
    return means.reset_index(), exact


@dataclass(frozen=True, slots=True)
class SplitPools:
    """A disaggregated fleet's two pools, for `timeseries_figure`: its replicas from `first_prefill` on are the
    prefill pool's (the cluster builds the decode pools first), each of `prefill_blocks` blocks, and the others
    the decode pool's, each of `decode_blocks`; their time-mean KV use (`simulator.engine.result`'s
    ``prefill_kv_utilization``, ``decode_kv_utilization``)."""

    first_prefill: int
    decode_blocks: int
    prefill_blocks: int
    decode_kv_utilization: float
    prefill_kv_utilization: float

    @classmethod
    def of(cls, summary: dict[str, Any]) -> SplitPools | None:
        """From a fleet's summary; None for an aggregated fleet (no prefill replica), or one whose decode pools
        differ in blocks a replica (an `EngineConfig` of several; its panel then blends them, as an aggregated
        fleet's)."""
        n = summary.get("prefill_replicas", 0)
        if not n or not summary.get("decode_kv_blocks_per_replica"):  # (0: decode pools of several sizes)
            return None
        return cls(summary["replicas"] - n, summary["decode_kv_blocks_per_replica"],
                   summary["prefill_kv_blocks_per_replica"], summary["decode_kv_utilization"],
                   summary["prefill_kv_utilization"])


@plain_text
def timeseries_figure(frames: dict[str, pd.DataFrame], blocks_per_replica: dict[str, int],
                      block_tokens: dict[str, int] | int = 16,
                      kv_utilization: dict[str, float] | None = None,
                      kv_cache_share: dict[str, float] | None = None,
                      split: dict[str, SplitPools | None] | None = None, subject: str | None = None) -> Figure:
    """What each fleet's replicas hold and do over time (10 s means over its replicas).

    One panel per fleet: the KV pool in two stacked bands, the blocks running sequences hold and
    those only the prefix cache holds (`kv_bands`), against the whole pool (100%); `kv_utilization`
    (the summaries' time means) is quoted in its title, and a fleet whose `kv_cache_share` is 0 (no
    prefix cache) draws one band. A disaggregated fleet (`split`) draws its decode pool's bands, each of its
    replicas against its own blocks, and its prefill pool's use as a line: the two pools' shares of different
    pools, which one mean over all replicas would blur. Below: waiting requests, the step's MFU and its
    HBM-bandwidth use, one colour per fleet. Legends sit right of the panels, off the data. `subject` (the
    scenario and model) heads the title.
    """
    fleets = [hw for hw, ts in frames.items() if not ts.empty]
    n = len(fleets)
    fig, axes = plt.subplots(n + 3, 1, figsize=(13, 2.3 * n + 6.6), sharex=True, squeeze=False,
                             gridspec_kw={"height_ratios": [1.0] * n + [1.0, 1.0, 1.0]})
    b, c, d = axes[n][0], axes[n + 1][0], axes[n + 2][0]
    approximate: list[bool] = []
    for i, hw in enumerate(fleets):
        ts, a = frames[hw], axes[i][0]
        bt = block_tokens[hw] if isinstance(block_tokens, dict) else block_tokens
        cached = (kv_cache_share or {}).get(hw, 1.0) != 0
        pools = (split or {}).get(hw)
        decode = ts if pools is None else ts[ts.replica < pools.first_prefill]
        bands, exact = kv_bands(decode, blocks_per_replica[hw] if pools is None else pools.decode_blocks, bt,
                                cache=cached)
        approximate.append(not exact)
        approx = "" if exact else "≈ "
        if pools is not None and cached and not (bands.cache > 0).any():  # a decode pool that caches nothing
            cached = False  # (helper-158: its legend named a band it never drew)
        a.stackplot(bands.minute, bands.sequences, *([bands.cache] if cached else []),
                    colors=[SEQUENCE_COLOUR, CACHE_COLOUR], alpha=0.9,
                    labels=[f"{approx}held by running sequences",
                            f"{approx}held only by the prefix cache" + (" (evictable)" if exact else "")])
        if pools is not None:
            prefill = ts[ts.replica >= pools.first_prefill]
            used = 100 * bin_means(prefill, ["kv_blocks_used"]).kv_blocks_used / pools.prefill_blocks
            a.plot(used.index, used, color="0.1", lw=1.6, ls="-.", label="prefill pool: blocks in use")
        a.axhline(100, color="0.25", ls="--", lw=1, label="the whole pool")
        a.set_ylim(0, 110)
        a.set_ylabel("KV blocks\n(% of the pool)")
        mean = (kv_utilization or {}).get(hw)
        if pools is not None:
            title = (f"{hw}: decode pool per replica, {100 * pools.decode_kv_utilization:.0f}% in use on average; "
                     f"prefill pool {100 * pools.prefill_kv_utilization:.0f}% (dash-dot line)")
        else:
            title = f"{hw}: KV pool per replica" + (f", {100 * mean:.0f}% in use on average (the headline's KV util)"
                                                   if mean is not None else "")
        a.set_title(title, fontsize=10, loc="left")
        g = bin_means(ts, ["waiting"])
        colour = f"C{i % 10}"
        b.plot(g.index, g.waiting, label=hw, color=colour)
        if "mfu" in ts:  # a disaggregated fleet's two pools apart (helper-158: one mean of both read as either)
            parts = [(ts, hw, "-")] if pools is None else [
                (decode, f"{hw} decode pool", "-"), (ts[ts.replica >= pools.first_prefill], f"{hw} prefill pool", "--")]
            for rows, label, style in parts:
                u = bin_means(rows, ["mfu", "hbm_bw_util"])
                # a bin where no step ran is NaN: a point between two such bins is drawn as a dot, not lost
                c.plot(u.index, 100 * u.mfu, label=label, color=colour, ls=style, marker=".", ms=4)
                d.plot(u.index, 100 * u.hbm_bw_util, label=label, color=colour, ls=style, marker=".", ms=4)
    b.set(ylabel="waiting requests\nper replica")
    b.set_ylim(0, max(1.0, b.get_ylim()[1]))  # no queue: 0 to 1, not ±0.04 (helper-158)
    if not any((line.get_ydata() > 0).any() for line in b.lines):  # the fleets' lines lie on one another at 0
        b.text(0.5, 0.5, "no request waited, on any fleet", transform=b.transAxes, ha="center", va="center",
               fontsize=9, color="0.3")
    b.set_title("queue", fontsize=10, loc="left")
    c.set(ylabel="MFU\n(% of peak FLOP/s)")
    c.set_title("GPU compute use while a step runs (model FLOPs utilisation of the step as formed; idle time left "
                "out, a gap where no step ran)", fontsize=10, loc="left")
    d.set(xlabel="simulated time (min)", ylabel="HBM bandwidth\n(% of peak bytes/s)")
    d.set_title("GPU memory-bandwidth use while a step runs (of the step as formed; idle time left out)", fontsize=10,
                loc="left")
    for ax in (c, d):
        ax.set_ylim(0, 105)
    for (ax,) in axes:
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    note = ("" if not any(approximate) else
            "\n≈: sequences' share estimated from the tokens they hold (a prefix several of them share counts once "
            "for each); the cache's is the rest in use")
    fig.suptitle((f"{subject}\n" if subject else "")
                 + "KV memory, queue and GPU utilisation over time (10 s means over each fleet's replicas)" + note,
                 fontsize=11)
    # the title's lines clear of the first panel's title (helper-158: they touched)
    lines = note.count("\n") + bool(subject)
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.12 * (1 + lines) / fig.get_size_inches()[1]))
    return fig


@plain_text
def fleet_figure(fleets: pd.DataFrame, title: str, slo_ttft_s: float, slo_tpot_s: float) -> Figure:
    """Aggregated vs disaggregated fleets (`ScenarioRun.fleet_comparison`): cost, latency against the
    SLOs, and where each fleet's time and memory go. A fleet that misses an SLO (``meets_slo`` false)
    has hatched bars. With no aggregated fleet (``compare_aggregated = false``) the titles and legend say
    nothing of one."""
    fig, (a, b, c) = plt.subplots(1, 3, figsize=(16, 5.2), gridspec_kw={"width_ratios": [1, 1, 1.6]})
    x = np.arange(len(fleets))
    names = list(fleets.fleet)
    ok = fleets.meets_slo.astype(bool)  # `simulator.planning.meets_slo`: the headline's and `kvsim capacity`'s test
    colours = ["C1" if split else "C0" for split in fleets.disaggregated]
    hatch = ["" if good else "//" for good in ok]
    bars = a.bar(x, fleets.usd_per_million_output_tokens, color=colours, hatch=hatch, edgecolor="0.2")
    for i, (bar, usd, n) in enumerate(zip(bars, fleets.usd_per_hour, fleets.nodes, strict=True)):
        # $/h as fleets.csv's table in summary.md writes it (`figure`; helper-193: $23.92/h read $24/h)
        a.annotate(f"{n} nodes\n${figure(usd)}/h", (i, bar.get_height()), ha="center", va="bottom", fontsize=8)
    a.set(xticks=x, ylabel="cost (USD per million output tokens)", title="Cost")
    a.set_ylim(0, float(fleets.usd_per_million_output_tokens.max()) * 1.3)
    both = not fleets.disaggregated.all()  # an aggregated fleet beside (`compare_aggregated`), or xPyD alone
    if both:
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
    parts = [("prefill_busy", "step in flight: prefill"), ("decode_busy", "step in flight: decode"),
             ("prefill_kv", "KV used (cache incl.): prefill"), ("decode_kv", "KV used (cache incl.): decode"),
             ("link_util", "KV link utilisation")]
    w = 0.8 / len(parts)
    split = fleets.disaggregated.astype(bool).to_numpy()
    for j, (col, label) in enumerate(parts):
        # an aggregated fleet's prefill and decode figures are one figure twice (every replica does both): drawn
        # once, in the decode bars (helper-158: two bars of one measurement)
        values = fleets[col].where(split | (not col.startswith("prefill")))
        c.bar(x - 0.4 + w * (j + 0.5), 100 * values.fillna(0.0), w, label=label, color=f"C{j + 5}")
    c.set(xticks=x, ylabel="time-mean share (%)", ylim=(0, 105),
          title="Where time and memory go" + ("\n(aggregated: every replica prefills and decodes, its figures in "
                                              "the decode bars)" if both else ""))
    c.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)  # off the bars (to 100%)
    for ax in (a, b, c):
        ax.set_xticklabels(names, rotation=15, ha="right", fontsize=8)
        ax.grid(True, axis="y", alpha=0.3)
    fig.suptitle(f"{title}\naggregated vs disaggregated fleets at the same SLOs" if both else
                 f"{title}\ndisaggregated fleets against the SLOs")
    fig.tight_layout()
    return fig
