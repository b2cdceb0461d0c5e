"""The headline figures `kvsim run` prints and writes, recomputed from the files it writes.

Each test takes a figure of ``headline.csv`` (the table ``kvsim run`` prints) and of each fleet's
``summary.json``, and recomputes it by its documented formula from that fleet's ``requests.csv`` (or
``timeseries.csv``) and the hardware catalog's TOML, read here with `tomllib`, not through the
simulator's own loaders or summary code:

- ``$/h`` = Σ nodes × GPUs a node × $/GPU-hour; ``$/Mtok out`` = ``$/h`` × span / 3,600 / (output tokens of
  the completed requests / 10⁶), span = the last request's end − the first arrival (warm-up and drain in);
- ``goodput`` = requests that completed with TTFT ≤ the SLO and mean TPOT ≤ the SLO (no TPOT: passes) /
  every request (timed out and rejected ones included);
- ``TTFT p99``, ``TPOT p99``: the 99th percentile (linear interpolation) over the completed requests of
  ``ttft_s`` and of ``tpot_mean_s`` (each request's mean TPOT, not its own ``tpot_p99_s``); ``meets SLO``:
  both within the SLOs, none rejected or timed out;
- ``sustained out tok/s``: the steady window's output tokens over its length, the window
  ``(a0 + max(0.1 A, min(W, 0.5 A)), a1]`` and each request's first token at its first-token time, its other
  ``o − 1`` spread evenly over (first token, end];
- ``KV util`` = Σ_r ∫ kv_blocks_used_r dt / (span × the fleet's blocks), from a time series sampled at every
  plan and arrival (``sample_interval_s = 0``: in fast-forward a decode jump's start and end, not its steps;
  the integral to 0.02-0.12 %), and from the shipped 1 s rows (the same integral to 1-2 %);
- ``max streams``: the most completed requests between their admission and their end at once, by an event sweep.

Two small real runs: the default scenario (Llama-3.1-70B, chat-4k + code-repo-128k) cut to 60 s on one
node of each kind, with a TPOT SLO of 30 ms and a 4 s queue timeout so that some requests miss an SLO and
some time out (goodput strictly between 0 and 1 on 8×H100, a denominator that differs from the completed
count); and the disaggregated scenario (aggregated 6 nodes and 2P4D, 8×H100 and 8×B200) cut to 40 s.
"""

from __future__ import annotations

import dataclasses
import json
import math
import tomllib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from simulator.engine import run
from simulator.report import write_report
from simulator.scenario import load_scenario
from simulator.study import run_scenario

REPO = Path(__file__).resolve().parents[1]
GPUS = tomllib.loads((REPO / "hardware" / "gpus.toml").read_text())["gpu"]
NODES = tomllib.loads((REPO / "hardware" / "nodes.toml").read_text())["node"]
HOUR_S = 3600.0

DEFAULT_TTFT_SLO_S, DEFAULT_TPOT_SLO_S = 10.0, 0.03  # the default scenario's TTFT SLO; a TPOT SLO some requests miss
QUEUE_TIMEOUT_S = 4.0


def _scenario(name: str, duration_s: float, **changes: object):
    sc = load_scenario(name)
    off = dataclasses.replace(sc.report, capacity=False, collapse=False, breakeven=False)
    return dataclasses.replace(sc, workload=dataclasses.replace(sc.workload, duration_s=duration_s), report=off,
                               **changes)


def _default_cut():
    sc = load_scenario("default")
    return _scenario("default", 60.0, cluster=dataclasses.replace(sc.cluster, nodes=1),
                     scheduler=dataclasses.replace(sc.scheduler, queue_timeout_s=QUEUE_TIMEOUT_S),
                     slo=dataclasses.replace(sc.slo, ttft_p99_s=DEFAULT_TTFT_SLO_S, tpot_p99_s=DEFAULT_TPOT_SLO_S))


def _disaggregated_cut():
    return _scenario("disaggregated", 40.0)


@pytest.fixture(scope="module", params=["default", "disaggregated"])
def report(request, tmp_path_factory):
    """(scenario, report folder, headline rows) of a cut run's report, as `kvsim run` writes it."""
    sc = _default_cut() if request.param == "default" else _disaggregated_cut()
    out = tmp_path_factory.mktemp(request.param)
    write_report(run_scenario(sc), out)
    return sc, out, pd.read_csv(out / "headline.csv")


def _fleet(out: Path, hardware: str) -> tuple[pd.DataFrame, dict]:
    """A fleet's ``requests.csv`` and ``summary.json``'s summary."""
    return (pd.read_csv(out / hardware / "requests.csv"),
            json.loads((out / hardware / "summary.json").read_text())["summary"])


def _span_s(req: pd.DataFrame) -> float:
    """The last request's end − the first arrival."""
    return float(req.end_s.max() - req.arrival_s.min())


def _usd_per_hour(sc, hardware: str) -> float:
    """Σ nodes × GPUs a node × $/GPU-hour from the catalog's TOML: the aggregated fleet's nodes, or a
    disaggregated fleet's prefill and decode nodes (both of the kind here)."""
    kind = hardware.split("-")[0]
    node = NODES[kind]
    nodes = sc.cluster.nodes if hardware == kind else sc.disaggregation.prefill_nodes + sc.disaggregation.decode_nodes
    return nodes * node["gpus"] * GPUS[node["gpu"]]["usd_per_gpu_hour"]


def test_usd_per_hour_and_per_output_mtok_from_the_catalog_and_requests_csv(report):
    """Default cut, 8×H100: 1 node × 8 × $2.99 = $23.92/h; 8×B200 8 × $5.99 = $47.92/h. Disaggregated: 6 nodes,
    $143.52 and $287.52. $/Mtok out is that rate over the run's span (warm-up and drain in) per million output
    tokens of the completed requests; the default cut's 8×H100 requests that timed out add none."""
    sc, out, head = report
    for row in head.itertuples():
        req, s = _fleet(out, row.hardware)
        usd_h = _usd_per_hour(sc, row.hardware)
        assert head.loc[row.Index, "$/h"] == pytest.approx(usd_h, rel=1e-12)
        done = req[req.outcome == "completed"]
        per_mtok = usd_h * _span_s(req) / HOUR_S / (done.output_tokens.sum() / 1e6)
        assert head.loc[row.Index, "$/Mtok out"] == pytest.approx(per_mtok, rel=1e-12)
        assert s["usd_per_million_output_tokens"] == pytest.approx(per_mtok, rel=1e-12)
        assert s["cost_usd"] == pytest.approx(usd_h * _span_s(req) / HOUR_S, rel=1e-12)
        assert s["gpu_seconds"] == pytest.approx(row.nodes * NODES[row.hardware.split("-")[0]]["gpus"]
                                                 * _span_s(req), rel=1e-12)
    assert sorted({round(v, 2) for v in head["$/h"]}) == (
        [23.92, 47.92] if sc.name == "default" else [143.52, 287.52])


def test_goodput_is_each_requests_slo_verdict_over_every_request(report):
    """A request is good when it completed with TTFT ≤ the TTFT SLO and mean TPOT ≤ the TPOT SLO (one output
    token: no TPOT, good on TTFT alone); goodput is their count over every request, those that timed out or
    were rejected included. The default cut's 8×H100 has some of each kind of failure."""
    sc, out, head = report
    ttft_slo, tpot_slo = sc.slo.ttft_p99_s, sc.slo.tpot_p99_s
    for row in head.itertuples():
        req, s = _fleet(out, row.hardware)
        good = 0
        for r in req.itertuples():
            if r.outcome != "completed" or not r.ttft_s <= ttft_slo:
                continue
            good += math.isnan(r.tpot_mean_s) or r.tpot_mean_s <= tpot_slo
        assert head.loc[row.Index, "goodput"] == pytest.approx(good / len(req), rel=1e-12)
        assert s["goodput_requests_per_s"] == pytest.approx(good / _span_s(req), rel=1e-12)
    if sc.name == "default":  # the cut was made so that the figure can fail: misses and timeouts both
        req, _ = _fleet(out, "8xH100")
        assert (req.outcome == "timed_out").sum() > 0 and 0.5 < head.goodput[0] < 0.95


def test_p99s_and_meets_slo_from_the_completed_requests(report):
    """TTFT p99 and TPOT p99 are order statistics of the completed requests (linear interpolation between
    the two values around rank 0.99 · (n − 1)): TTFT of ``ttft_s``, TPOT of ``tpot_mean_s`` (each request's
    mean gap, NaN for a one-token answer left out), not of the per-request ``tpot_p99_s`` column. ``meets
    SLO`` is both within the SLOs and nothing timed out or rejected."""
    sc, out, head = report

    def p99(values: pd.Series) -> float:
        v = np.sort(values.dropna().to_numpy())
        rank = 0.99 * (len(v) - 1)
        lo = math.floor(rank)
        return float(v[lo] + (rank - lo) * (v[min(lo + 1, len(v) - 1)] - v[lo]))

    verdicts = []
    for row in head.itertuples():
        req, s = _fleet(out, row.hardware)
        done = req[req.outcome == "completed"]
        ttft, tpot = p99(done.ttft_s), p99(done.tpot_mean_s)
        assert head.loc[row.Index, "TTFT p99 (s)"] == pytest.approx(ttft, rel=1e-12)
        assert head.loc[row.Index, "TPOT p99 (ms)"] == pytest.approx(tpot * 1e3, rel=1e-12)
        assert s["tpot_p99_p99_s"] == pytest.approx(p99(done.tpot_p99_s), rel=1e-12)  # the other column's p99
        meets = ttft <= sc.slo.ttft_p99_s and tpot <= sc.slo.tpot_p99_s and len(done) == len(req)
        assert head.loc[row.Index, "meets SLO"] == ("yes" if meets else "no")
        verdicts.append(meets)
    if sc.name == "disaggregated":  # both verdicts occur: aggregated 8×H100 misses the 50 ms TPOT, 2P4D meets it
        assert verdicts[:2] == [False, True]


def _window_tokens(req: pd.DataFrame) -> tuple[float, float, float]:
    """(start, end, output tokens in (start, end]) by the steady window's rule (`simulator.engine.steady`'s
    docstring), written out request by request."""
    done = req[req.outcome == "completed"]
    a0, a1 = float(req.arrival_s.min()), float(req.arrival_s.max())
    span = a1 - a0
    sojourn = float((done.end_s - done.arrival_s).mean())
    start, end = a0 + max(0.1 * span, min(sojourn, 0.5 * span)), a1
    tokens = 0.0
    for r in done.itertuples():
        first = r.arrival_s + r.ttft_s
        tokens += start < first <= end
        if r.end_s > first:
            inside = max(0.0, min(r.end_s, end) - max(first, start))
            tokens += (r.output_tokens - 1) * inside / (r.end_s - first)
    return start, end, tokens


def test_sustained_out_tokens_by_the_window_rule_from_requests_csv(report):
    """The steady window runs from the first arrival plus the longer of 10 % of the arrival span and one
    mean sojourn (at most half the span) to the last arrival; sustained out tok/s is the output tokens made
    inside it over its length. Makespan out tok/s is every completed request's output over the span."""
    _, out, head = report
    for row in head.itertuples():
        req, s = _fleet(out, row.hardware)
        start, end, tokens = _window_tokens(req)
        assert (s["steady_window_start_s"], s["steady_window_end_s"]) == pytest.approx((start, end), rel=1e-12)
        assert head.loc[row.Index, "sustained out tok/s"] == pytest.approx(tokens / (end - start), rel=1e-9)
        done = req[req.outcome == "completed"]
        assert head.loc[row.Index, "makespan out tok/s"] == pytest.approx(done.output_tokens.sum() / _span_s(req),
                                                                          rel=1e-12)


def test_kv_util_is_the_time_integral_of_blocks_used_over_pool_and_span(report, tmp_path):
    """KV util = Σ_r ∫ kv_blocks_used_r dt / (span · Σ_r blocks_r). The same run with a time-series row at
    every plan and arrival (``sample_interval_s = 0``: the simulation is unchanged, its figures equal the
    report's) gives the integral as a step function of its rows. In fast-forward (as here) those rows are a
    decode jump's start and end, not each of its steps (`EngineConfig`: a row a step only when stepping), and
    within a jump the blocks only grow, so the rows' integral is a little below the exact one (0.02-0.12 % in
    these runs; stepping's rows give it to 0.00-0.03 %). A replica's pool is its KV budget in blocks
    (the report's ``kv_blocks_per_replica``; summed over a disaggregated fleet's prefill and decode replicas,
    all here of the same node and plan). The shipped 1 s rows give the same integral to 1-2 % (asserted
    within 3 %)."""
    sc, out, head = report
    workload = sc.load_workload()
    for hw in dict.fromkeys(h.split("-")[0] for h in head.hardware):
        for label, config in sc.fleets(hw):
            again = run(dataclasses.replace(config, sample_interval_s=0.0), workload, sc.seed)
            written = again.write(tmp_path / label)
            req, s = _fleet(out, label)
            assert again.summary["kv_utilization"] == s["kv_utilization"]  # the same simulation
            assert s["kv_blocks_total"] == s["replicas"] * s["kv_blocks_per_replica"]
            pool_s = _span_s(req) * s["kv_blocks_total"]
            for ts, rel in ((pd.read_csv(written / "timeseries.csv"), 2e-3), (pd.read_csv(out / label /
                                                                                         "timeseries.csv"), 3e-2)):
                used_s = 0.0
                for _, rows in ts.groupby("replica"):
                    used_s += float((rows.kv_blocks_used.to_numpy()[:-1] * np.diff(rows.time_s.to_numpy())).sum())
                assert ts.replica.nunique() == s["replicas"]
                kv_util = head.loc[head.hardware == label, "KV util"].item()
                assert kv_util == pytest.approx(used_s / pool_s, rel=rel), (label, rel)


def test_max_streams_is_the_peak_of_an_event_sweep(report):
    """Max streams: each completed request runs from its admission (``admit_s``; in a 2P4D fleet its prefill's
    admission, its hand-off included) to its end; at an instant where one ends and another starts, the end
    goes first."""
    _, out, head = report
    for row in head.itertuples():
        req, _ = _fleet(out, row.hardware)
        done = req[req.outcome == "completed"]
        events = sorted([(t, 1) for t in done.admit_s] + [(t, -1) for t in done.end_s], key=lambda e: (e[0], e[1]))
        now = most = 0
        for _, step in events:
            now += step
            most = max(most, now)
        assert head.loc[row.Index, "max streams"] == most
