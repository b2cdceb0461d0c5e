"""The report's charts say what their data say: the KV pool's two bands, capacity labels that never
collide, collapse colours that follow the layout, and the goodput row's layout and caption."""

from __future__ import annotations

import itertools

import matplotlib.pyplot as plt
import pandas as pd
import pytest
from matplotlib.collections import PathCollection

from simulator.charts import (
    CACHE_COLOUR,
    SEQUENCE_COLOUR,
    capacity_figure,
    collapse_figure,
    kv_bands,
    layout_colour,
    plot_collapse_panel,
    timeseries_figure,
)

# --- the KV pool in two bands -------------------------------------------------------------------

# Three samples of one fleet: two in the first 10 s bin (replicas 0 and 1), one in the second.
SAMPLES = pd.DataFrame({"time_s": [0.0, 5.0, 12.0], "replica": [0, 1, 0], "kv_blocks_used": [100, 60, 80],
                        "kv_tokens": [800, 480, 2000], "running": [3, 2, 4], "waiting": [0, 1, 2],
                        "mfu": [0.3, 0.2, 0.4], "hbm_bw_util": [0.5, 0.4, 0.6]})


def test_kv_bands_estimated_from_tokens():
    """Blocks of 16 tokens, pools of 200 blocks. Sequences hold ⌈800/16⌉ = 50 and ⌈480/16⌉ = 30 of the
    100 and 60 blocks in use in the first bin, ⌈2000/16⌉ = 125 clipped to the 80 in use in the second.
    First bin: used (100 + 60)/2 = 80 = 40%, sequences (50 + 30)/2 = 40 = 20%, cache 20%; second: 40%,
    40%, 0%."""
    bands, exact = kv_bands(SAMPLES, 200, 16)
    assert not exact
    assert bands.minute.tolist() == [0.0, 10 / 60]
    assert bands.used.tolist() == [40.0, 40.0]
    assert bands.sequences.tolist() == [20.0, 40.0]
    assert bands.cache.tolist() == [20.0, 0.0]


def test_kv_bands_exact_from_evictable_blocks_or_without_a_cache():
    """With the cache's unreferenced blocks (30, 10, 0) sequences hold 70, 50, 80: 30% and 40%."""
    bands, exact = kv_bands(SAMPLES.assign(kv_evictable_blocks=[30, 10, 0]), 200, 16)
    assert exact and bands.sequences.tolist() == [30.0, 40.0] and bands.cache.tolist() == [10.0, 0.0]
    bands, exact = kv_bands(SAMPLES, 200, 16, cache=False)  # no prefix cache: every block is a sequence's
    assert exact and bands.sequences.tolist() == bands.used.tolist() == [40.0, 40.0]
    assert bands.cache.tolist() == [0.0, 0.0]


def _fill_colours(ax):
    return [tuple(round(c, 3) for c in coll.get_facecolor()[0][:3]) for coll in ax.collections]


def test_timeseries_figure_stacks_sequences_and_cache_under_the_pool():
    frames = {"8xH100": SAMPLES, "8xB200": SAMPLES.assign(kv_blocks_used=[10, 10, 10], kv_tokens=[160] * 3)}
    fig = timeseries_figure(frames, {"8xH100": 200, "8xB200": 200}, 16, {"8xH100": 0.84, "8xB200": 0.05},
                            {"8xH100": 0.6, "8xB200": 0.0})
    h100, b200, queue, mfu, bw = fig.axes
    assert "84% in use on average" in h100.get_title(loc="left") and "8xB200" in b200.get_title(loc="left")
    # a fleet with a prefix cache: two bands, their top the pool in use (40% in both bins), the pool at 100%
    rgb = matplotlib_rgb
    assert _fill_colours(h100) == [rgb(SEQUENCE_COLOUR), rgb(CACHE_COLOUR)]
    top = h100.collections[1].get_paths()[0].vertices[:, 1].max()
    assert top == pytest.approx(40.0)
    assert [t.get_text() for t in h100.get_legend().get_texts()] == [
        "≈ held by running sequences", "≈ held only by the prefix cache", "the whole pool"]
    assert any(line.get_ydata()[0] == 100 for line in h100.lines)
    # no prefix cache: one exact band
    assert _fill_colours(b200) == [rgb(SEQUENCE_COLOUR)]
    assert b200.get_legend().get_texts()[0].get_text() == "held by running sequences"
    assert "≈: sequences' share estimated" in fig.get_suptitle()
    assert [line.get_label() for line in mfu.lines] == [line.get_label() for line in bw.lines] == ["8xH100", "8xB200"]
    assert queue.get_ylabel().startswith("waiting requests") and bw.get_xlabel() == "simulated time (min)"
    plt.close(fig)


def test_timeseries_of_a_disaggregated_fleet_tells_its_two_pools_apart():
    """helper-115: an xPyD fleet's panel averaged its prefill and decode replicas into one pool (the
    shipped 8xH100-2P4D read 25%, where its decode pool is 5% in use and its prefill pool 64%). Replicas
    0-1 decode (pools of 200 blocks), 2 prefills (50 blocks): the decode bands are (100 + 60) / 2 / 200 =
    40% and (80 + 0) / 2 / 200 = 20%; the prefill line 40 / 50 = 80%, then 25 / 50 = 50%."""
    from simulator.charts.run import SplitPools

    ts = pd.DataFrame({"time_s": [0.0, 1.0, 2.0, 11.0, 12.0, 13.0], "replica": [0, 1, 2, 0, 1, 2],
                       "kv_blocks_used": [100, 60, 40, 80, 0, 25], "kv_tokens": [0] * 6, "running": [1] * 6,
                       "waiting": [0] * 6, "mfu": [0.1] * 6, "hbm_bw_util": [0.2] * 6,
                       "kv_evictable_blocks": [0] * 6})
    pools = SplitPools.of({"replicas": 3, "prefill_replicas": 1, "decode_kv_blocks_per_replica": 200,
                           "prefill_kv_blocks_per_replica": 50, "decode_kv_utilization": 0.3,
                           "prefill_kv_utilization": 0.65})
    assert pools == SplitPools(2, 200, 50, 0.3, 0.65)
    assert SplitPools.of({"replicas": 3, "prefill_replicas": 0}) is None
    fig = timeseries_figure({"8xH100-1P2D": ts}, {"8xH100-1P2D": 200}, 16, {"8xH100-1P2D": 0.4},
                            {"8xH100-1P2D": 1.0}, {"8xH100-1P2D": pools})
    kv = fig.axes[0]
    assert kv.get_title(loc="left") == ("8xH100-1P2D: decode pool per replica, 30% in use on average; prefill pool "
                                        "65% (dash-dot line)")
    top = kv.collections[0].get_paths()[0].vertices[:, 1]
    assert sorted(set(top.round(6)) - {0.0}) == [20.0, 40.0]
    prefill = next(line for line in kv.lines if line.get_label() == "prefill pool: blocks in use")
    assert prefill.get_ydata().tolist() == [80.0, 50.0]
    plt.close(fig)
    # helper-158: the utilisation panels averaged the two pools into one line, the queue panel of no queue ran from
    # -0.04 to 0.04, and a decode pool that caches nothing named the cache's band in its legend
    ts = ts.assign(mfu=[0.1, 0.1, 0.6, 0.1, 0.1, 0.5], kv_evictable_blocks=0)
    fig = timeseries_figure({"8xH100-1P2D": ts}, {"8xH100-1P2D": 200}, 16, {"8xH100-1P2D": 0.4},
                            {"8xH100-1P2D": 1.0}, {"8xH100-1P2D": pools})
    kv, queue, mfu, _ = fig.axes
    assert {line.get_label(): list(line.get_ydata().round(9)) for line in mfu.lines} == {
        "8xH100-1P2D decode pool": [10.0, 10.0], "8xH100-1P2D prefill pool": [60.0, 50.0]}
    assert [t.get_text() for t in kv.get_legend().get_texts()] == [
        "held by running sequences", "prefill pool: blocks in use", "the whole pool"]
    assert queue.get_ylim() == (0.0, 1.0) and [t.get_text() for t in queue.texts] == ["no request waited, on any fleet"]
    assert "idle time left out" in mfu.get_title(loc="left")
    plt.close(fig)


def matplotlib_rgb(colour: str) -> tuple[float, ...]:
    from matplotlib.colors import to_rgb

    return tuple(round(c, 3) for c in to_rgb(colour))


# --- capacity: labels that never run into each other ----------------------------------------------

def _texts_apart(fig, gap_px: float = 3.0) -> None:
    """Every bar label lies inside its axes, every tick label inside the figure, and no two of them
    come closer than `gap_px` (touching labels read as one)."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    for ax in fig.axes:
        inside = ax.get_window_extent(renderer)
        labels = [t for t in ax.texts if t.get_text()]
        ticks = [t for t in ax.get_xticklabels() if t.get_text()]
        boxes = {id(t): t.get_window_extent(renderer) for t in labels + ticks}
        for t in labels:
            b = boxes[id(t)]
            assert inside.x0 <= b.x0 and b.x1 <= inside.x1 and b.y1 <= inside.y1, f"{t.get_text()!r} leaves its axes"
        for t in ticks:
            b = boxes[id(t)]
            assert fig.bbox.x0 <= b.x0 and b.x1 <= fig.bbox.x1 and fig.bbox.y0 <= b.y0, f"{t.get_text()!r} clipped"
        for t1, t2 in itertools.combinations(labels + ticks, 2):
            b1 = boxes[id(t1)].padded(gap_px / 2)
            assert not b1.overlaps(boxes[id(t2)].padded(gap_px / 2)), (t1.get_text(), t2.get_text())


def test_capacity_labels_stay_apart_when_fleets_tie():
    """Three kinds needing 2 nodes each (the tie that ran "2 (binds: compute)" into its neighbours)."""
    plan = pd.DataFrame({"hardware": ["8xH100", "8xH200", "8xB200"], "nodes": [2, 2, 2],
                         "memory_floor_nodes": [1, 1, 1], "usd_per_hour": [47.84, 60.64, 95.84],
                         "usd_per_million_output_tokens": [2.61, 3.29, 5.19],
                         "binding": ["compute", "compute", "none (1 node suffices)"]})
    fig = capacity_figure(plan, "capacity-plan")
    _texts_apart(fig)
    size = fig.axes[0]
    assert [t.get_text() for t in size.texts] == ["2", "2", "2", "1", "1", "1"]
    assert [t.get_text() for t in size.get_xticklabels()] == [
        "8xH100\nbinds: compute", "8xH200\nbinds: compute", "8xB200\n1 node suffices"]
    plt.close(fig)


def test_capacity_labels_stay_apart_for_split_fleets():
    plan = pd.DataFrame({
        "hardware": ["8xH100", "8xH100", "8xB200", "8xB200"], "fleet": ["aggregated", "1P2D", "aggregated", "1P1D"],
        "nodes": [33, 3, 2, 2], "prefill_nodes": [0, 1, 0, 1], "memory_floor_nodes": [2, 2, 1, 1],
        "usd_per_hour": [789.0, 71.8, 95.8, 95.8], "usd_per_million_output_tokens": [30.1, 2.7, 3.6, 3.6],
        "binding": ["compute", "prefill compute, decode batch cap (max_num_seqs)", "compute",
                    "none (one replica a pool suffices)"]})
    fig = capacity_figure(plan, "disaggregated")
    _texts_apart(fig)
    assert fig.axes[0].get_xticklabels()[1].get_text().startswith("8xH100\n1P2D\nbinds: prefill")
    plt.close(fig)


def test_capacity_chart_gives_each_fleet_its_headroom():
    """helper-158: `kvsim capacity capacity-plan --duration-s 90 --hardware H100,H200,B200` needs 1 node of each
    kind, so the bars all read 1; the headrooms that tell the fleets apart (2.48×, 2.83×, 3.44×) were only in the
    table. Each nodes bar now carries its headroom above its number: one the search never saw fail as a lower
    bound (≥), none for a kind with no fleet (NaN), for plain and xPyD plans alike."""
    import math

    from simulator.charts.capacity import headroom_label

    plan = pd.DataFrame({"hardware": ["8xH100", "8xH200", "8xB200", "8xGB200"], "nodes": [1, 1, 1, math.nan],
                         "memory_floor_nodes": [1, 1, 1, 1], "usd_per_hour": [23.9, 30.3, 47.9, math.nan],
                         "usd_per_million_output_tokens": [2.47, 3.07, 4.84, math.nan],
                         "binding": ["none (1 node suffices)"] * 3 + ["no fleet: TTFT"],
                         "headroom_scale": [2.483715624146968, 2.8284271247461903, 7.5, math.nan],
                         "headroom_capped": [False, False, True, None]})
    fig = capacity_figure(plan, "capacity-plan")
    _texts_apart(fig)
    size = fig.axes[0]
    assert [t.get_text() for t in size.texts if t.get_text()] == [
        "1", "1", "1", "1", "1", "1", "1", "2.48× headroom", "2.83× headroom", "≥ 7.5× headroom",
        "no fleet\nmeets the\nSLOs"]
    assert size.get_title() == ("Fleet size, and its headroom\n"
                                "(the multiple of the load at which it still meets the SLOs)")
    assert size.get_ylim() == pytest.approx((0, 1 * 1.45 + 0.8))  # room for the headroom's line under the legend
    plt.close(fig)
    assert headroom_label(math.nan, None) == "" and headroom_label(1.0, False) == "1× headroom"
    split = pd.DataFrame({
        "hardware": ["8xH100", "8xH100"], "fleet": ["aggregated", "1P2D"], "nodes": [33, 3], "prefill_nodes": [0, 1],
        "memory_floor_nodes": [2, 2], "usd_per_hour": [789.0, 71.8], "usd_per_million_output_tokens": [30.1, 2.7],
        "binding": ["compute", "prefill compute"], "headroom_scale": [1.07, 2.5], "headroom_capped": [False, False]})
    fig = capacity_figure(split, "disaggregated")
    _texts_apart(fig)
    size = fig.axes[0]
    assert [t.get_text() for t in size.texts][-2:] == ["1.07× headroom", "2.5× headroom"]
    # the legend's third entry (prefill nodes) above the labels too
    assert size.get_ylim() == pytest.approx((0, 33 * 1.6 + 0.8))
    legend = size.get_legend().get_window_extent()
    assert all(t.get_window_extent().y1 < legend.y0 for t in size.texts if t.get_text())
    plt.close(fig)


# --- collapse: colours follow the layout; the goodput row says what ran and why ------------------

def _analytic(layouts: list[str]) -> pd.DataFrame:
    rows = []
    for k, layout in enumerate(layouts):
        per_token = [328_000, 92_000, 164_000][["native", "mla", "fp8"].index(layout)]
        for n in (1024, 4096, 131072):
            rows.append({"hardware": "8xH100", "plan": "TP8", "layout": layout, "context_tokens": n,
                         "kv_budget_bytes": 4.3e11, "kv_budget_bytes_per_gpu": 5.4e10, "bytes_per_token": per_token,
                         "max_streams": int(1.3e6 / n * 328_000 / per_token) + k})
    return pd.DataFrame(rows)


def test_layout_colours_do_not_depend_on_the_order_drawn():
    assert layout_colour("native") == "C0" and layout_colour("mla") == "C2"
    assert layout_colour("gqa:4") == layout_colour("gqa:4")  # a layout not in the table: stable hash
    colours = {}
    for order in (["native", "mla", "fp8"], ["mla", "fp8", "native"]):
        ax = plot_collapse_panel(_analytic(order))
        colours[tuple(order)] = {line.get_label().split(" ")[0]: line.get_color() for line in ax.lines}
        plt.close(ax.figure)
    assert colours[("native", "mla", "fp8")] == colours[("mla", "fp8", "native")]


def test_a_line_that_reaches_no_stream_is_marked_where_it_stops():
    """helper-145: on a log axis a layout's line that reaches 0 streams just stopped, as if the chart ended there.
    A mark in its colour sits on the x axis at its first context with none, with one legend entry for all marks."""
    from simulator.charts.collapse import NO_STREAM

    df = _analytic(["native", "mla"])
    df.loc[(df.layout == "native") & (df.context_tokens == 131072), "max_streams"] = 0
    ax = plot_collapse_panel(df)
    marks = [line for line in ax.lines if line.get_marker() == "v"]
    assert len(marks) == 1 and list(marks[0].get_xdata()) == [131072]
    assert marks[0].get_color() == layout_colour("native") and marks[0].get_label() == NO_STREAM
    native = next(line for line in ax.lines if line.get_label().startswith("native"))
    assert list(native.get_xdata()) == [1024, 4096]  # the line itself stops at its last stream
    assert ax.get_legend_handles_labels()[1][-1] == NO_STREAM  # after the lines' entries
    plt.close(ax.figure)


def test_no_stream_marks_tell_the_plans_apart_and_sit_above_the_tick_labels():
    """helper-158: native TP8's and native DP8's marks, both blue, could not be told apart, and a mark centred on
    the x axis sat on its tick labels. The first plan's marks are filled, the others' hollow, each plan an entry;
    they sit inside the axes, whose foot is lowered under the one-stream level to make room."""
    df = pd.concat([_analytic(["native"]), _analytic(["native"]).assign(plan="DP8-attention EP8")])
    df.loc[df.context_tokens == 131072, "max_streams"] = 0
    ax = plot_collapse_panel(df)
    marks = [line for line in ax.lines if line.get_marker() == "v"]
    assert [m.get_markerfacecolor() for m in marks] == [layout_colour("native"), "white"]
    assert [m.get_label() for m in marks] == [
        "no stream fits from here on, TP8 (filled, its line's colour)",
        "no stream fits from here on, DP8-attention EP8 (hollow, its line's colour)"]
    assert all(m.get_ydata()[0] > 0 for m in marks)  # axes fraction: above the x axis's line
    assert ax.get_ylim()[0] <= 0.3  # a log axis: room under the level of 1 stream
    plt.close(ax.figure)
    # helper-164: a third plan's marks were as hollow as the second's
    third = pd.concat([df, _analytic(["native"]).assign(plan="TP8 PP2")])
    third.loc[third.context_tokens == 131072, "max_streams"] = 0
    ax = plot_collapse_panel(third)
    marks = [line for line in ax.lines if line.get_label().startswith("no stream fits")]
    assert [(m.get_marker(), m.get_markerfacecolor() == "white") for m in marks] == [
        ("v", False), ("v", True), ("X", False)]
    plt.close(ax.figure)


def test_every_plan_up_to_sixteen_gets_its_own_no_stream_mark_and_line_style():
    """helper-172: `NO_STREAM_MARKS` held four marks and the plans four line styles, so a fifth plan's marks and
    lines were the first's (a filled ▼, a solid line). Six plans whose lines all reach no stream: six marks, each
    its own (shape, fill), and six line styles; the first four as before. Sixteen plans' marks and lines differ."""
    names = ["TP8", "DP8-attention EP8", "TP8 PP2", "TP16", "TP4", "DP8-attention PP2"]
    df = pd.concat([_analytic(["native"]).assign(plan=name) for name in names])
    df.loc[df.context_tokens == 131072, "max_streams"] = 0
    ax = plot_collapse_panel(df)
    marks = [line for line in ax.lines if line.get_label().startswith("no stream fits")]
    kinds = [(m.get_marker(), m.get_markerfacecolor() == "white") for m in marks]
    assert kinds == [("v", False), ("v", True), ("X", False), ("D", True), ("s", False), ("P", True)]
    assert [m.get_label().split(", ")[1].split(" (")[0] for m in marks] == names
    lines = [line for line in ax.lines if line.get_label().startswith("native")]
    assert [line.get_linestyle() for line in lines[:4]] == ["-", "--", "-.", ":"]  # the first four as they were
    # (a dash pattern has no public getter: matplotlib keeps the one it was given here)
    assert [line._unscaled_dash_pattern for line in lines[4:]] == [(0, (3, 1, 1, 1, 1, 1)), (0, (5, 1))]
    assert len({str(line._unscaled_dash_pattern) for line in lines}) == 6
    plt.close(ax.figure)
    from simulator.charts.collapse import NO_STREAM_MARKS, PLAN_STYLES, PLAN_WIDTHS

    assert len(set(NO_STREAM_MARKS)) == len(NO_STREAM_MARKS) == 16
    assert len(set(itertools.product(map(str, PLAN_STYLES), PLAN_WIDTHS))) == len(PLAN_STYLES) * len(PLAN_WIDTHS) \
        == 16


def test_many_plans_budgets_stay_within_their_panels():
    """helper-172: seven plans' KV budgets on one title line ran off the figure; past `TITLE_LINE_CHARS` the line
    breaks between plans. Llama-3-70B on three kinds (the narrowest panels), seven plans."""
    from hardware.catalog import load_catalog
    from simulator.collapse import collapse_table
    from simulator.models import get_model
    from simulator.placement import parse_plan

    plans = [parse_plan(p) for p in ("tp8", "tp4", "tp2", "dp8", "tp16", "tp8+pp2", "dp8+pp2")]
    df = collapse_table(load_catalog(), get_model("Llama-3-70B"), ["8xH100", "8xH200", "8xB200"], ["native"],
                        plans=plans)
    fig = collapse_figure(df, "Llama-3-70B", 8192)
    fig.canvas.draw()
    for ax in fig.axes:
        title, panel = ax.title.get_window_extent(), ax.get_window_extent()
        assert panel.x0 - 5 <= title.x0 and title.x1 <= panel.x1 + 5, ax.get_title()
    assert fig.axes[0].get_title().split("\n")[1:4] == [
        "54 GB (TP8), 37 GB (TP4), 1 GB (TP2),", "31 GB (DP8-attention), 63 GB (TP16),",
        "63 GB (TP8 PP2), 51 GB (DP8-attention PP2)"]
    plt.close(fig)


def test_the_collapse_title_says_the_weights_and_the_goodput_legend_the_slos():
    """helper-158: the title left out the weights' precision the KV budget depends on, and the goodput panels gave
    no SLO (concurrency-collapse's are 2 s and 100 ms, not the default's 10 s)."""
    from simulator.models import get_model

    simulated = pd.DataFrame({"hardware": "8xH100", "context_tokens": [4096, 131072], "analytic_streams": [144, 4],
                              "peak_streams": [150, 4], "mean_streams": [110.0, 3.6], "goodput_rps": [1.0, 0.0],
                              "goodput_fraction": [0.2, 0.0], "layout": "mla"})
    fig = collapse_figure(_analytic(["mla", "native"]), get_model("DeepSeek-V3"), 131072, simulated, (2.0, 0.1))
    assert fig.get_suptitle().startswith("Concurrency collapse: DeepSeek-V3 (fp8-block weights)\n")
    assert fig.axes[1].get_legend().get_title().get_text() == "requests meeting\n(TTFT ≤ 2 s, TPOT ≤ 100 ms)"
    assert "goodput = share of requests meeting both SLOs (TTFT ≤ 2 s, TPOT ≤ 100 ms)." in \
        fig.texts[-1].get_text().replace("\n", " ")
    plt.close(fig)


def test_the_goodput_row_names_the_layout_simulated_and_says_why_it_is_low():
    simulated = pd.DataFrame({"hardware": "8xH100", "context_tokens": [4096, 131072], "analytic_streams": [144, 4],
                              "peak_streams": [150, 4], "mean_streams": [110.0, 3.6], "goodput_rps": [1.0, 0.0],
                              "goodput_fraction": [0.2, 0.0], "ttft_ok_fraction": [0.2, 0.0],
                              "tpot_ok_fraction": [1.0, 1.0], "layout": "mla"})
    fig = collapse_figure(_analytic(["mla", "native"]), "Llama-3.1-70B", 131072, simulated)
    top, goodput = fig.axes
    assert goodput.get_title() == "simulated, mla layout:\n80% of the request rate one node sustains offered"
    caption = fig.texts[-1].get_text().replace("\n", " ")
    # a plan over two nodes: the rate is its replica's (helper-177: the row said one node's)
    two = collapse_figure(_analytic(["mla", "native"]), "Llama-3.1-70B", 131072, simulated.assign(nodes=2))
    assert two.axes[1].get_title() == ("simulated, mla layout:\n80% of the request rate one replica (2 nodes) "
                                       "sustains offered")
    assert "Goodput panels (under each kind's streams): one replica (2 nodes) offered 80% of the request rate" \
        in two.texts[-1].get_text().replace("\n", " ")
    plt.close(two)
    assert "time to first token (90% of requests on average against 0% for time per token)" in caption
    assert [line.get_label() for line in goodput.lines] == ["both SLOs (goodput)", "TTFT SLO", "TPOT SLO"]
    # no text of the upper panel sits on a simulated marker
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    markers = [p for coll in top.collections if isinstance(coll, PathCollection)
               for p in top.transData.transform(coll.get_offsets())]
    assert len(markers) == 4
    for text in top.texts:
        box = text.get_window_extent(renderer)
        assert not any(box.contains(x, y) for x, y in markers), text.get_text()
    assert "simulated (mla): peak, flooded" in [t.get_text() for t in top.get_legend().get_texts()]
    plt.close(fig)


# --- the latency chart's log axes ---------------------------------------------------------------

def test_latency_axes_label_plain_numbers_that_never_collide():
    """TPOT from 20 to 300 ms (helper-108's overloaded run): matplotlib wrote 2×10¹ 3×10¹ 4×10¹ 6×10¹, the
    middle two printed over each other; now 20 30 50 100 200 300. An axis of up to two decades labels the
    ticks of leading digit 2, 3 and 5 besides the powers of ten, a wider one its powers of ten alone (0.01,
    not 10⁻²), one under half a decade every tick."""
    import numpy as np

    from simulator.charts import latency_figure

    def labels(ax) -> list[str]:
        fig.canvas.draw()
        lo, hi = ax.get_xlim()
        ticks = [*ax.xaxis.get_major_ticks(), *ax.xaxis.get_minor_ticks()]
        shown = sorted((t.get_loc(), t.label1.get_text()) for t in ticks
                       if t.label1.get_text() and lo <= t.get_loc() <= hi)
        return [text for _, text in shown]

    n = 2000
    frame = pd.DataFrame({"outcome": ["completed"] * n, "ttft_s": np.geomspace(0.05, 3, n),
                          "tpot_mean_s": np.geomspace(0.02, 0.3, n)})
    fig = latency_figure({"8xH100": frame}, 2.0, 0.1)
    ttft, tpot = fig.axes
    assert labels(tpot) == ["20", "30", "50", "100", "200", "300"]
    assert labels(ttft) == ["0.05", "0.1", "0.2", "0.3", "0.5", "1", "2", "3"]
    ttft.set_xlim(0.01, 30)  # 3.5 decades: the powers of ten alone
    assert labels(ttft) == ["0.01", "0.1", "1", "10"]
    ttft.set_xlim(0.2, 0.5)
    assert labels(ttft) == ["0.2", "0.3", "0.4", "0.5"]
    plt.close(fig)


def test_a_latency_axis_of_two_to_three_decades_labels_the_2s_and_5s():
    """helper-158: bring_your_own_trace.ipynb's TTFT axis spans 0.012 to ~3 s (2.4 decades, past the 2 that
    label 2, 3 and 5), so only 0.1 and 1 were labelled and the bulk of its requests (0.012-0.07 s) had no
    labelled tick. An axis of up to 3 decades labels the ticks of leading digit 2 and 5 too, apart."""
    import numpy as np

    from simulator.charts import latency_figure

    n = 600
    frame = pd.DataFrame({"outcome": ["completed"] * n, "ttft_s": np.geomspace(0.015, 0.07, n),
                          "tpot_mean_s": np.geomspace(0.011, 0.014, n)})
    fig = latency_figure({"8xH100": frame}, 2.0, 0.1, "chat-sample.csv on 8xH100")
    ttft = fig.axes[0]

    def labels() -> list[str]:
        fig.canvas.draw()
        lo, hi = ttft.get_xlim()
        ticks = [*ttft.xaxis.get_major_ticks(), *ttft.xaxis.get_minor_ticks()]
        shown = sorted((t.get_loc(), t.label1) for t in ticks if t.label1.get_text() and lo <= t.get_loc() <= hi)
        boxes = [label.get_window_extent() for _, label in shown]
        assert all(a.x1 + 3 < b.x0 for a, b in itertools.pairwise(boxes)), "labels touch"
        return [label.get_text() for _, label in shown]

    lo, hi = ttft.get_xlim()
    assert 2.2 < np.log10(hi / lo) < 3  # 0.012 to ~2.6: the SLO's line at 2 s widens it
    assert labels() == ["0.02", "0.05", "0.1", "0.2", "0.5", "1", "2"]
    ttft.set_xlim(0.01, 3)  # 2.5 decades
    assert labels() == ["0.01", "0.02", "0.05", "0.1", "0.2", "0.5", "1", "2"]
    ttft.set_xlim(0.01, 10)  # 3 decades, the most that label the 2s and 5s
    assert labels() == ["0.01", "0.02", "0.05", "0.1", "0.2", "0.5", "1", "2", "5", "10"]
    plt.close(fig)


def test_a_class_of_few_requests_is_drawn_as_points_and_many_as_a_line():
    """helper-158: capacity_planning.ipynb's 14 code-repo-128k requests were joined by straight lines, as if a
    distribution of many. Under `SPARSE_CDF_POINTS` requests a CDF is its points (markers, no line); a class of
    many stays the line the report draws."""
    import numpy as np

    from simulator.charts import latency_figure
    from simulator.charts.run import SPARSE_CDF_POINTS

    assert SPARSE_CDF_POINTS == 50

    def frame(n: int) -> pd.DataFrame:
        return pd.DataFrame({"outcome": ["completed"] * n, "ttft_s": np.geomspace(0.05, 3, n),
                             "tpot_mean_s": np.geomspace(0.02, 0.03, n)})

    fig = latency_figure({"chat-4k (1,238 requests)": frame(1238), "code-repo-128k (14 requests)": frame(14),
                          "at the limit (50 requests)": frame(50)}, 10.0, 0.1)
    for ax in fig.axes:
        chat, code, limit = ax.lines[:3]
        assert chat.get_label() == "chat-4k (1,238 requests)" and chat.get_linestyle() == "-"
        assert chat.get_marker() in ("None", None, "") and len(chat.get_xdata()) == 1238
        assert code.get_label() == "code-repo-128k (14 requests)" and code.get_linestyle() == "None"
        assert code.get_marker() == "o" and len(code.get_xdata()) == 14
        assert limit.get_linestyle() == "-"  # 50 points: a line
        assert [t.get_text() for t in ax.get_legend().get_texts()][:2] == [
            "chat-4k (1,238 requests)", "code-repo-128k (14 requests)"]
    plt.close(fig)


def test_latency_and_timeseries_charts_name_the_scenario_model_and_fleets():
    """The report's latency chart said "TTFT distribution" over lines named "8xH100": no scenario, model, node
    count or plan (last session's note). Its title names them now, and each line its fleet's nodes and plan."""
    from simulator.charts import latency_figure
    from simulator.engine import EngineConfig
    from simulator.report import _fleet_key

    assert _fleet_key("8xH100", EngineConfig(n_nodes=2)) == "8xH100 (2 nodes, TP8)"
    assert _fleet_key("8xB200", EngineConfig(node="8xB200", n_nodes=1, tp=4)) == "8xB200 (1 node, TP4)"
    frame = pd.DataFrame({"outcome": ["completed"] * 3, "ttft_s": [0.1, 0.2, 0.3], "tpot_mean_s": [0.01, 0.02, 0.03]})
    fig = latency_figure({"8xH100 (2 nodes, TP8)": frame}, 2.0, 0.1, "default: Llama-3.1-70B, latency (seed 0)")
    assert fig.get_suptitle() == "default: Llama-3.1-70B, latency (seed 0)"
    for ax in fig.axes:
        assert ax.get_legend().get_texts()[0].get_text() == "8xH100 (2 nodes, TP8)"
    plt.close(fig)
    fig = timeseries_figure({"8xH100": SAMPLES}, {"8xH100": 200}, 16, {"8xH100": 0.84}, {"8xH100": 0.6},
                            subject="default: Llama-3.1-70B")
    assert fig.get_suptitle().startswith("default: Llama-3.1-70B\nKV memory, queue and GPU utilisation over time")
    plt.close(fig)


def test_a_line_within_a_few_percent_of_another_says_so():
    """helper-158: DeepSeek-V3's fp8 line (35 kB a token) lay under cross-layer:0.5's (36 kB), 1,165 against 1,148
    streams at 1k, with no word of it; a line within 5% (or a stream) of one drawn before is marked as one."""
    rows = [{"hardware": "8xH200", "plan": "TP8", "layout": layout, "context_tokens": n, "kv_budget_bytes": 3.4e11,
             "kv_budget_bytes_per_gpu": 4.2e10, "bytes_per_token": per_token, "max_streams": streams}
            for layout, per_token, counts in (("fp8", 35_136, (1165, 291, 9)), ("cross-layer:0.5", 36_288,
                                                                                (1148, 287, 8)),
                                              ("native", 70_272, (582, 145, 4)))
            for n, streams in zip((1024, 4096, 131072), counts, strict=True)]
    ax = plot_collapse_panel(pd.DataFrame(rows))
    labels = [line.get_label() for line in ax.lines]
    assert labels[1].endswith("\n  ≈ the line of fp8 (within 5%)") and "≈" not in labels[0] + labels[2]
    plt.close(ax.figure)


def test_collapse_of_an_mla_model_leaves_its_own_layouts_out_of_the_defaults(tmp_path):
    """helper-158: DeepSeek-V3's default chart drew mla and mla+fp8, its own layouts, over native's and fp8's lines
    (12 lines for 8); left out of the defaults with a note, drawn when --layout names them, though not beside
    native (helper-189: ``native,mla`` drew one line twice; refused as one layout, as compare refuses the pair)."""
    from click.testing import CliRunner

    from simulator.cli import main

    r = CliRunner().invoke(main, ["collapse", "--model", "DeepSeek-V3", "--hardware", "8xH200", "--json", "--out",
                                  str(tmp_path / "a")])
    assert r.exit_code == 0, r.output
    assert "note: mla and mla+fp8 left out of the default layouts: DeepSeek-V3's own attention is MLA" in r.output
    r = CliRunner().invoke(main, ["collapse", "--model", "DeepSeek-V3", "--hardware", "8xH200",
                                  "--layout", "mla,fp8", "--json", "--out", str(tmp_path / "b")])
    import json

    assert {row["layout"] for row in json.loads(r.stdout)} == {"mla", "fp8"}
    r = CliRunner().invoke(main, ["collapse", "--model", "DeepSeek-V3", "--hardware", "8xH200",
                                  "--layout", "native,mla", "--json", "--out", str(tmp_path / "c")])
    assert r.exit_code == 2 and "must name each KV layout once (got 'native' and 'mla', both native)" in r.stderr
