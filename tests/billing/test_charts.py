"""Charts render, carry their labels and mark the break-even points where the formulas put them."""

from __future__ import annotations

import numpy as np
import pytest

from simulator.billing.charts import plot_cost_vs_rate, plot_gap_cdf, plot_savings_vs_ttl
from simulator.billing.compare import compare_ttls
from simulator.billing.numeric import cost_curves, crossovers, ttl_rows
from tests.billing.conftest import poisson_stream


def test_break_even_chart_marks_points(sonnet, tmp_path):
    ttls = [300.0, 3600.0]
    curves = cost_curves(sonnet, ttls, np.logspace(-3, 1, 50))
    ax = plot_cost_vs_rate(curves, ttl_rows(sonnet, ttls), crossovers(sonnet, ttls))
    texts = [t.get_text() for t in ax.texts]
    assert any("5m pays above\n0.049/min (1 per 20 min)" in t for t in texts)
    assert any("1h pays above\n0.0125/min (1 per 80 min)" in t for t in texts)
    assert any("1h cheaper than 5m" in t for t in texts)
    assert ax.get_xscale() == "log" and "per minute" in ax.get_xlabel() and ax.get_title()
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["no cache", "TTL 5m", "TTL 1h"]
    markers = [ln for ln in ax.lines if ln.get_marker() == "o"]
    assert [ln.get_xdata()[0] for ln in markers] == pytest.approx([0.0490245, 0.0124536], rel=1e-5)
    out = tmp_path / "c.png"
    ax.figure.savefig(out, dpi=60)
    assert out.stat().st_size > 10_000


def test_savings_and_gap_charts(sonnet, tmp_path):
    reqs = poisson_stream(np.random.default_rng(3), 1 / 3000, 500, 20_000)
    cmp = compare_ttls(reqs, sonnet)
    ax = plot_savings_vs_ttl(cmp.summary)
    heights = [p.get_height() for p in ax.patches]
    assert heights == pytest.approx(cmp.summary["savings_pct_of_bill"].iloc[1:].tolist())
    assert heights[0] < 0 < heights[1]  # one reuse per 50 min: 5 min loses, 1 h pays
    gaps = cmp.results["none"].frame["reuse_gap_s"].dropna().to_numpy()
    ax = plot_gap_cdf(gaps, ttl_rows(sonnet, [300.0, 3600.0]))
    assert "minutes" in ax.get_xlabel()
    ax.figure.savefig(tmp_path / "g.png", dpi=60)


def test_gap_chart_legend_sits_off_the_axes(sonnet):
    # helper-158: the upper-left legend covered the CDF's steps of a code-repo-128k replay (0.1-0.3 min,
    # y 0.77-0.85); it now sits right of the axes, where no curve or line can run under it
    gaps = np.array([1.5, 2.0, 2.5, 5.0, 7.0, 48.0, 74.0])
    ax = plot_gap_cdf(gaps, ttl_rows(sonnet, [300.0, 3600.0]))
    ax.figure.canvas.draw()
    legend = ax.get_legend().get_window_extent()
    axes = ax.get_window_extent()
    assert legend.x0 >= axes.x1
    assert legend.x1 <= ax.figure.bbox.x1  # and whole on the figure


def test_gap_chart_of_a_distribution_marks_each_ttls_p_hit(sonnet):
    # helper-158: a --gaps distribution had no chart; its CDF is drawn, each TTL's p_hit = F(TTL) marked on it
    from scipy import stats

    from simulator.billing.numeric import gaps_rows

    dist = stats.expon(scale=120)  # p_hit(5m) = 1 - e^-2.5 = 0.917915; p_hit(1h) = 1 - e^-30
    ttls = [300.0, 3600.0]
    ax = plot_gap_cdf(dist, ttl_rows(sonnet, ttls), hits=gaps_rows(sonnet, ttls, dist), label="reuse gaps: expon")
    curve = next(ln for ln in ax.lines if ln.get_label() == "reuse gaps: expon")
    x, y = curve.get_xdata(), curve.get_ydata()
    assert x.min() <= 0.5 and x.max() >= 120.0  # a tenth of 5 min to twice 1 h: both TTLs cross it
    assert np.interp(5.0, x, y) == pytest.approx(0.917915, abs=1e-3)
    dots = [v for ln in ax.lines if ln.get_marker() == "o" for v in (ln.get_xdata()[0], ln.get_ydata()[0])]
    assert dots == pytest.approx([5.0, 0.917915, 60.0, 1.0], abs=1e-6)
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels == ["reuse gaps: expon", "TTL 5m", "break-even p* (5m) = 0.217", "TTL 1h",
                      "break-even p* (1h) = 0.526", "p_hit (5m) = 0.9179, the gaps table's",
                      "p_hit (1h) = 1, the gaps table's"]


def test_gap_chart_counts_zero_gaps_from_its_start(sonnet):
    """helper-164: the empirical curve left 0-s gaps out and rose to 1 over the others, so the gaps table's p_hit
    dots (which count them) floated above it: 2 gaps of 0 s and 2 of 1 and 10 minutes read 0.5 at 5 min, not 0.75."""
    from simulator.billing.numeric import gaps_rows

    gaps = np.array([0.0, 0.0, 60.0, 600.0])
    ttls = [300.0, 3600.0]
    ax = plot_gap_cdf(gaps, ttl_rows(sonnet, ttls), hits=gaps_rows(sonnet, ttls, gaps), label="reuse gaps: g.txt")
    curve = next(ln for ln in ax.lines if ln.get_label().startswith("reuse gaps"))
    assert curve.get_label() == "reuse gaps: g.txt; 2 of 0 s, counted from the curve's start"
    assert list(curve.get_ydata()) == [0.75, 1.0]
    dot = next(ln for ln in ax.lines if ln.get_marker() == "o")
    assert (dot.get_xdata()[0], dot.get_ydata()[0]) == (5.0, pytest.approx(0.75))
    # helper-167: a long legend narrowed the axes and the centred title lost its start: it begins at the axes' edge
    assert ax.get_title(loc="left") and not ax.get_title(loc="center")


def test_provider_chart_is_a_labelled_dot_plot_with_its_legend_off_the_axes():
    # helper-158: the notebook's log-scale bars had no meaningful baseline and their legend covered the 1h HBM
    # bar, the biggest; each figure is now a dot labelled with its value, the legend right of the axes
    import pandas as pd

    from simulator.billing.charts import plot_provider_costs

    table = pd.DataFrame({"ttl": ["none", "5m", "1h"], "prefill_saved_usd": [0.0, 2.52, 2.62],
                          "holding_hbm_usd": [0.0, 62.0, 565.0], "holding_dram_usd": [0.0, 0.0214, 0.195],
                          "holding_ssd_usd": [0.0, 0.000258, 0.0]})
    ax = plot_provider_costs(table, title="Provider, 8xH100")
    assert ax.get_xscale() == "log" and ax.get_xlabel() == "USD over the replay (log scale)"
    assert not ax.patches  # no bars
    dots = [(ln.get_xdata()[0], ln.get_marker()) for ln in ax.lines]
    assert dots == [(2.52, "o"), (2.62, "s"), (62.0, "o"), (565.0, "s"), (0.0214, "o"), (0.195, "s"),
                    (0.000258, "o")]  # the none row dropped; 1h's SSD 0 has no dot on a log axis, but a word
    assert [t.get_text() for t in ax.texts] == ["$2.52", "$2.62", "$62", "$565", "$0.0214", "$0.195", "$0.000258",
                                                "1h: 0 (not on a log axis)"]
    assert [t.get_text().replace("\n", " ") for t in ax.get_yticklabels()] == [
        "prefill GPU time the hits save", "holding its KV in HBM (streams displaced)", "holding it in host DRAM",
        "holding it on SSD"]
    assert ax.get_xlim()[0] < 0.000258 and ax.get_xlim()[1] > 565.0
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["TTL 5m", "TTL 1h"]
    ax.figure.canvas.draw()
    assert ax.get_legend().get_window_extent().x0 >= ax.get_window_extent().x1


def test_break_even_legend_covers_no_curve(tmp_path):
    """helper-195: the legend sat in the lower left, over deepseek's 24h curve, which ends low there; it goes where
    no curve runs (matplotlib's ``best``): no point of a drawn curve lies inside its box."""
    from simulator.billing.profiles import load_profiles

    deepseek = load_profiles().get("deepseek")
    ttls = list(deepseek.ttl_s)
    assert deepseek.ttl_names == ("24h",)
    curves = cost_curves(deepseek, ttls, np.logspace(-3, 1, 300), 5000)
    ax = plot_cost_vs_rate(curves, None, None, y="usd_per_request")
    ax.figure.savefig(tmp_path / "c.png", dpi=60)  # lays the legend out
    box = ax.get_legend().get_window_extent()
    for line in ax.lines:
        xy = ax.transData.transform(np.column_stack([line.get_xdata(), line.get_ydata()]))
        inside = (box.x0 <= xy[:, 0]) & (xy[:, 0] <= box.x1) & (box.y0 <= xy[:, 1]) & (xy[:, 1] <= box.y1)
        assert not inside.any(), line.get_label()
