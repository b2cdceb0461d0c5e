"""Audit h1: figures of `kvsim run`'s report and `kvsim capacity`, recomputed by hand."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
import pytest

from simulator.charts import kv_bands, timeseries_figure

# --- the timeseries chart weighs replicas alike, not samples --------------------------------------

# One 10 s bin of a two-replica fleet: replica 0 (a prefill replica, idle after each prompt) samples
# 9 times with 90 blocks in use and 4 waiting; replica 1 (a decode replica) once, 10 blocks, 0 waiting.
UNEVEN = pd.DataFrame({"time_s": [0.5 * k for k in range(9)] + [5.0], "replica": [0] * 9 + [1],
                       "kv_blocks_used": [90] * 9 + [10], "kv_tokens": [0] * 10, "running": [1] * 10,
                       "waiting": [4] * 9 + [0], "mfu": [0.5] * 9 + [0.1], "hbm_bw_util": [0.2] * 9 + [0.6]})


def test_kv_bands_mean_over_replicas_not_over_samples():
    """Pools of 200 blocks: the fleet holds (90 + 10) / 2 = 50 blocks a replica = 25% of a pool; the
    mean over the samples, (9 · 90 + 10) / 10 = 82 = 41%, weighed replica 0 nine times (`kvsim run
    disaggregated`, 8xH100-2P4D: the chart read 51% where the headline's KV util, quoted in its title,
    is 24.6%)."""
    bands, _ = kv_bands(UNEVEN, 200, 16, cache=False)
    assert bands.used.tolist() == [pytest.approx(25.0)]


def test_timeseries_queue_and_utilisation_mean_over_replicas():
    """Waiting per replica (4 + 0) / 2 = 2, not (9 · 4 + 0) / 10 = 3.6; MFU (50 + 10) / 2 = 30%, not
    (9 · 50 + 10) / 10 = 46%; HBM bandwidth (20 + 60) / 2 = 40%, not (9 · 20 + 60) / 10 = 24%."""
    fig = timeseries_figure({"8xH100": UNEVEN}, {"8xH100": 200}, 16, {"8xH100": 0.25}, {"8xH100": 0.0})
    _, queue, mfu_panel, bw_panel = fig.axes  # MFU and HBM bandwidth in panels of their own
    assert queue.lines[0].get_ydata()[0] == pytest.approx(2.0)
    mfu, bw = mfu_panel.lines[0], bw_panel.lines[0]
    assert mfu.get_ydata()[0] == pytest.approx(30.0) and bw.get_ydata()[0] == pytest.approx(40.0)
    plt.close(fig)


# --- one test of "meets the SLOs" for the headline, the fleets chart and `kvsim capacity` ---------


def test_headline_meets_slo_is_capacitys_test(tmp_path):
    """A workload of one-token answers has no TPOT, so nothing breaks the TPOT SLO: `kvsim capacity`
    (`planning.meets_slo`) says one node meets, and every request meets both SLOs (goodput 1); the
    headline said "meets SLO: no" for the same run, as NaN ≤ 0.1 is false."""
    from simulator.planning import meets_slo
    from simulator.scenario import SCENARIO_DIR, load_scenario
    from simulator.study import run_scenario

    trace = pd.read_csv(SCENARIO_DIR / "traces" / "chat-sample.csv").head(40).assign(output_tokens=1)
    trace.to_csv(tmp_path / "one.csv", index=False)
    sc = load_scenario("trace-replay", trace=tmp_path / "one.csv")
    run = run_scenario(sc)
    result = run.results["8xH100"]
    s = result.summary
    assert s["completed"] == 40 and s["timed_out"] == 0 and s["goodput_fraction"] == 1.0
    assert s["ttft_p99_s"] <= sc.slo.ttft_p99_s and s["tpot_p99_s"] != s["tpot_p99_s"]  # NaN
    assert meets_slo(result, sc.slo.ttft_p99_s, sc.slo.tpot_p99_s)
    assert run.headline()["meets SLO"].tolist() == ["yes"]


def test_fleets_chart_hatches_by_meets_slo():
    """The fleets chart hatched a fleet whose TPOT is NaN (one-token answers: it meets) and left
    unhatched one that met both p99s but timed requests out (it misses): it now reads ``meets_slo``."""
    from simulator.charts import fleet_figure

    fleets = pd.DataFrame({
        "fleet": ["agg", "2P4D"], "disaggregated": [False, True], "nodes": [6, 6], "usd_per_hour": [144.0, 144.0],
        "usd_per_million_output_tokens": [3.7, 3.7], "ttft_p99_of_slo": [0.5, 0.5],
        "tpot_p99_of_slo": [float("nan"), 0.5], "meets_slo": [True, False],
        **{c: [0.5, 0.5] for c in ("prefill_busy", "decode_busy", "prefill_kv", "decode_kv", "link_util")}})
    fig = fleet_figure(fleets, "t", 10.0, 0.05)
    cost = fig.axes[0]
    assert [bar.get_hatch() or "" for bar in cost.patches[:2]] == ["", "//"]
    # helper-158: the aggregated fleet's prefill and decode bars were one figure twice, and the shares' axis ran to
    # 150% to make room for the legend: its figures are in the decode bars alone, the axis ends at 105%
    where = fig.axes[2]
    heights = [[round(bar.get_height(), 9) for bar in where.containers[j]] for j in range(5)]
    assert heights == [[0.0, 50.0], [50.0, 50.0], [0.0, 50.0], [50.0, 50.0], [50.0, 50.0]]
    assert where.get_ylim() == (0.0, 105.0) and fig.get_suptitle() == (
        "t\naggregated vs disaggregated fleets at the same SLOs")
    plt.close(fig)


# --- the collapse study's "80% offered" is of the request rate one node sustains -----------------------


def test_collapse_offers_80_percent_of_the_rate_the_node_sustains():
    """chat-4k-h100 (Llama-3.1-70B, 8×H100 TP8, max_num_seqs 256). At 4k the analytic streams are
    ⌊54.36 GB / (4,096 · 327,680 B / 8)⌋ = 324, at most 256 run: m = 256, o = 512. A request takes the
    node for its prefill (3,584 tokens: 0.1314 s) and a 1/m share of o full-batch steps (31.42 ms at
    3,840 tokens of mean context), so it sustains 256 / (256 · 0.1314 + 512 · 0.03142) = 256 / 49.73 =
    5.148 req/s, and the study offers 0.8 of it, 4.118 req/s. The rate used until 2026-12-04,
    0.8 · 256 / (0.1314 + 512 · 0.03142) = 12.63 req/s, was 2.45 times what the node sustains: the goodput
    measured a growing queue. At 64k (m = 20, o = 4,096 capped: 3.171 s of prefill, 28.62 ms steps):
    20 / (20 · 3.171 + 4,096 · 0.02862) = 0.1107 req/s."""
    from simulator.scenario import load_scenario
    from simulator.study import simulated_collapse

    sc = load_scenario("chat-4k-h100")
    sims = simulated_collapse(sc.engine_config("8xH100"), [4096, 65536], requests_per_point=30).set_index(
        "context_tokens")
    assert sims.analytic_streams.tolist() == [324, 20]
    assert sims.prefill_s.tolist() == [pytest.approx(0.1314, abs=1e-4), pytest.approx(3.171, abs=1e-3)]
    assert sims.capacity_rps.tolist() == [pytest.approx(5.148, abs=1e-3), pytest.approx(0.1107, abs=1e-4)]
    assert sims.offered_rps.tolist() == pytest.approx((0.8 * sims.capacity_rps).tolist())
    # at 4k prefill takes 4.118 · 0.1314 = 54% of the node's time: far fewer than 256 streams decode at once
    assert 40 < sims.mean_streams[4096] < 0.5 * 256
    assert sims.goodput_fraction[4096] > 0.95  # at 80% of what it sustains the node meets the SLOs at 4k
