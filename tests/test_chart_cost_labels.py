"""The cost written on the capacity and fleets charts is the figure their tables print (`simulator.units.figure`):
three significant digits, thousands separated from 1,000 on.

helper-193: the capacity chart wrote $/Mtok out with two decimals (the table's 0.0415 as ``$0.04``, 0.0042 as
``$0.00``, 1,234.6 as ``$1,234.60``) and the fleets chart $/h with none (the table's 23.9 as ``$24/h``)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd

from simulator.charts import capacity_figure, fleet_figure


def test_capacity_chart_writes_the_tables_cost_figures():
    """An 8B-class plan on one GPU (2.99 $/h, 0.0415 $/Mtok), a cheaper one (0.0042) and a dear one (1,234.6)."""
    plan = pd.DataFrame({"hardware": ["1xH100", "8xH100", "8xB200"], "nodes": [1, 1, 3],
                         "memory_floor_nodes": [1, 1, 1], "usd_per_hour": [2.99, 23.92, 143.76],
                         "usd_per_million_output_tokens": [0.041487, 0.0042, 1234.56],
                         "binding": ["none (1 node suffices)", "none (1 node suffices)", "compute"]})
    fig = capacity_figure(plan, "capacity-plan")
    cost = fig.axes[1]
    assert [t.get_text() for t in cost.texts] == [
        "$2.99/h\n$0.0415/Mtok out", "$23.9/h\n$0.0042/Mtok out", "$144/h\n$1,235/Mtok out"]
    plt.close(fig)


def test_fleets_chart_writes_the_tables_usd_per_hour():
    """1P1D on 8×H100 ($47.84/h: the table's 47.8, not $48/h) beside an aggregated 6-node fleet ($143.52: 144)."""
    fleets = pd.DataFrame({
        "fleet": ["agg", "1P1D"], "disaggregated": [False, True], "nodes": [6, 2], "usd_per_hour": [143.52, 47.84],
        "usd_per_million_output_tokens": [3.7, 1.2], "ttft_p99_of_slo": [0.5, 0.5], "tpot_p99_of_slo": [0.5, 0.5],
        "meets_slo": [True, True],
        **{c: [0.5, 0.5] for c in ("prefill_busy", "decode_busy", "prefill_kv", "decode_kv", "link_util")}})
    fig = fleet_figure(fleets, "t", 10.0, 0.05)
    assert [t.get_text() for t in fig.axes[0].texts] == ["6 nodes\n$144/h", "2 nodes\n$47.8/h"]
    plt.close(fig)
