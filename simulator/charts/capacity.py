"""The capacity plan's chart: nodes that meet the SLOs against the memory floor, and what the fleet costs."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from simulator.charts.base import plain_text
from simulator.units import figure


def headroom_label(headroom: float, capped: object) -> str:
    """A fleet's headroom (``headroom_scale``: the multiple of the scenario's load it still meets the SLOs at) as
    its bar's second label, ``2.83× headroom``; one the search never saw fail (``headroom_capped``), a lower
    bound, ``≥ 7.5× headroom``; none (NaN: no fleet) as nothing."""
    if headroom is None or headroom != headroom:
        return ""
    lower_bound = isinstance(capped, (bool, np.bool_)) and bool(capped)  # None, NaN: no
    return ("≥ " if lower_bound else "") + f"{figure(headroom)}× headroom"


def _binding_label(why: str, width: int) -> str:
    """A capacity plan's binding constraint as a tick-label line: ``binds: compute``, or what suffices."""
    import textwrap

    text = (why.removeprefix("none (").removesuffix(")") if why.startswith("none") else
            why if why.startswith("no fleet") else f"binds: {why}")
    return textwrap.fill(text, width)


@plain_text
def capacity_figure(plan: pd.DataFrame, title: str) -> Figure:
    """Nodes needed per hardware kind (with the memory floor) and the fleet's $/hour. A plan with a
    ``fleet`` column (`simulator.xpyd.plan_split_capacity`) draws an xPyD fleet's prefill nodes hatched
    at the bottom of its bar, and names each bar's fleet.

    Each bar carries only its number; what binds goes under the kind's name, one tick label a group,
    so that labels never run into each other however many fleets tie. A plan with a ``headroom_scale`` column
    writes each fleet's headroom above its number (`headroom_label`): where every kind needs the same nodes, what
    tells the fleets apart (helper-158: three bars of 1 node each, and the 2.48×, 2.83× and 3.44× of the table
    nowhere on the chart).
    """
    split = "fleet" in plan
    n = len(plan)
    counts = {c: plan[c].astype(float) for c in ("nodes", "memory_floor_nodes")}  # a kind with no fleet: NaN
    none = counts["nodes"].isna().to_numpy()  # no fleet of the kind meets the SLOs: no bar, a word in its place
    fig, (a, b) = plt.subplots(1, 2, figsize=(max(11.0, 2.6 * n + 3.0), 5.2 if split else 4.8))
    x = np.arange(n)
    width = max(14, min(26, int(60 / n) + 6))  # characters a tick label's line holds
    labels = [f"{hw}" + (f"\n{fleet}" if split else "") + "\n" + _binding_label(why, width)
              for hw, fleet, why in zip(plan.hardware, plan.fleet if split else plan.hardware, plan.binding,
                                        strict=True)]
    prefill = plan.prefill_nodes.astype(float).fillna(0) if split else pd.Series(0, index=plan.index)
    nodes = a.bar(x - 0.2, counts["nodes"].fillna(0), 0.4, color="C0", label="nodes that meet the SLOs (simulated)")
    if split and prefill.any():
        a.bar(x - 0.2, prefill, 0.4, color="C1", hatch="//", edgecolor="0.2", label="of which prefill nodes (xPyD)")
    floor = a.bar(x + 0.2, counts["memory_floor_nodes"].fillna(0), 0.4, color="0.6",
                  label="memory floor (analytic" + ("; xPyD: its decode pool)" if split else ")"))
    for bars, column in ((nodes, "nodes"), (floor, "memory_floor_nodes")):
        a.bar_label(bars, labels=["" if v != v else f"{v:,.0f}" for v in counts[column]], padding=2, fontsize=9)
    capped = plan.headroom_capped if "headroom_capped" in plan else [False] * n
    headroom = ([headroom_label(h, c) for h, c in zip(plan.headroom_scale, capped, strict=True)]
                if "headroom_scale" in plan else [""] * n)
    if any(headroom):  # a line above the bar's number (9 pt, 2 pt off the bar)
        a.bar_label(nodes, labels=headroom, padding=14, fontsize=8, color="0.15")
    a.set(xticks=x, ylabel="nodes", title="Fleet size" + (", and its headroom\n(the multiple of the load at which it "
                                                          "still meets the SLOs)" if any(headroom) else ""))
    top = float(np.nanmax([counts["nodes"].max(), counts["memory_floor_nodes"].max(), 1.0]))
    for i in np.flatnonzero(none):
        a.text(x[i] - 0.2, 0.05 * top, "no fleet\nmeets the\nSLOs", ha="center", va="bottom", fontsize=8,
               color="C3", rotation=0)
    # room above the tallest bar for its numbers, its headroom's line and the legend's 2 or 3 entries (helper-158)
    a.set_ylim(0, top * (1.3 + 0.15 * any(headroom) + 0.15 * bool(split and prefill.any())) + 0.8)
    a.yaxis.set_major_locator(MaxNLocator(integer=True))
    a.legend(fontsize=8, loc="upper left")
    cost = b.bar(x, plan.usd_per_hour.fillna(0), 0.6, color="C2")
    # both figures as the capacity table writes them (`figure`; helper-193: $/Mtok had two decimals, so the table's
    # 0.0415 read $0.04 and a figure under half a cent $0.00)
    b.bar_label(cost, labels=["no fleet" if gone else f"${figure(usd)}/h\n${figure(per_m)}/Mtok out"
                              for usd, per_m, gone in zip(plan.usd_per_hour, plan.usd_per_million_output_tokens, none,
                                                          strict=True)],
                padding=2, fontsize=8)
    b.set(xticks=x, ylabel="fleet cost (USD per hour)", title="Fleet cost (and per million output tokens)")
    b.set_ylim(0, float(plan.usd_per_hour.max()) * 1.3)
    a.set_xticklabels(labels, fontsize=9)
    b.set_xticklabels([f"{hw}\n{fleet}" if split else hw for hw, fleet in
                       zip(plan.hardware, plan.fleet if split else plan.hardware, strict=True)], fontsize=9)
    for ax in (a, b):
        ax.grid(True, axis="y", alpha=0.3)
        ax.margins(x=0.04)
    what = ["aggregated vs disaggregated"] if split else []
    if "slo_ttft_p99_s" in plan:  # what the node counts meet (`planning.SEARCH_COLUMNS`)
        tpot = float(plan.slo_tpot_p99_s.iloc[0])
        seed, seeds = int(plan.seed.iloc[0]), int(plan.seeds.iloc[0]) if "seeds" in plan else 1
        what.append(f"fleets that meet TTFT p99 ≤ {plan.slo_ttft_p99_s.iloc[0]:g} s, "
                    f"TPOT p99 ≤ {f'{tpot * 1e3:g} ms' if tpot < 1 else f'{tpot:g} s'}"
                    + (f" at each of seeds {seed}-{seed + seeds - 1}" if seeds > 1 else f", seed {seed}"))
    fig.suptitle(f"Capacity plan: {title}" + (f"\n{'; '.join(what)}" if what else ""))
    fig.tight_layout()
    return fig
