"""Streamed runs (`simulator.engine.run`'s ``stream_to``, ``kvsim run --stream``): records written as
requests end instead of held, the same summary and report as the held run, and the trace limit they
lift (`simulator.limits.MAX_STREAMED_REQUESTS`)."""

import itertools
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import scenarios
from simulator.engine import SteadyWindow, run
from simulator.engine.records import CsvRows, RequestRecord, SampleRecord, read_records
from simulator.engine.result import STREAMED_COLUMNS, STREAMED_FILES, TRANSFER_COLUMNS
from simulator.scenario import load_scenario
from tests.test_hostile_inputs import error, kvsim, outcome


def same_summary(a: dict, b: dict) -> None:
    """Every figure equal (NaN equal to NaN), the same keys."""
    assert a.keys() == b.keys()
    for k in a:
        x, y = a[k], b[k]
        assert x == y or (isinstance(x, float) and math.isnan(x) and math.isnan(y)), (k, x, y)


def read_sorted(path: Path) -> pd.DataFrame:
    return pd.read_csv(path).sort_values("request_id", kind="stable").reset_index(drop=True)


@pytest.mark.parametrize(("name", "duration_s"), [("trace-replay", None), ("disaggregated", 30.0)])
def test_a_streamed_run_has_the_held_runs_summary_records_and_samples(tmp_path, name, duration_s):
    """Aggregated (656 requests of the shipped trace, prefix cache hits) and disaggregated (KV transfers:
    the transfer columns hold figures) fleets."""
    sc = load_scenario(name)
    wl = sc.load_workload(sc.seed)
    if duration_s is not None:
        wl = wl.replayed(duration_s=duration_s)
    label, config = sc.fleets(sc.nodes()[0].key)[-1]
    held = run(config, wl, 3)
    streamed = run(config, wl, 3, stream_to=tmp_path / label)
    assert held.summary["requests"] > 100 and held.streamed_to is None
    if name == "disaggregated":
        assert held.summary["transfers"] > 0
    else:
        assert held.summary["prefix_hit_ratio_tokens"] > 0.3
    same_summary(held.summary, streamed.summary)
    assert streamed.streamed_to == tmp_path / label
    moves_kv = name == "disaggregated"  # an aggregated fleet's frame leaves the transfer columns out
    assert list(streamed.requests.columns) == ["request_id", *(c for c in STREAMED_COLUMNS
                                                               if moves_kv or c not in TRANSFER_COLUMNS)]
    assert streamed.requests.request_id.is_monotonic_increasing
    # the file has every column, the traffic class last, one row a request in the order they ended
    rows = pd.read_csv(tmp_path / label / "requests.csv")
    assert list(rows.columns) == [*RequestRecord._fields, "source"]
    assert sorted(rows.request_id) == list(range(held.summary["requests"]))
    assert not rows.request_id.is_monotonic_increasing  # not in id order: as requests ended
    held.write(tmp_path / "held")
    pd.testing.assert_frame_equal(read_sorted(tmp_path / label / "requests.csv"),
                                  read_sorted(tmp_path / "held" / "requests.csv"))
    pd.testing.assert_frame_equal(pd.read_csv(tmp_path / label / "timeseries.csv"),
                                  pd.read_csv(tmp_path / "held" / "timeseries.csv"))
    # written elsewhere, a streamed result copies its two files; no Parquet
    streamed.write(tmp_path / "copy")
    for f in STREAMED_FILES:
        assert (tmp_path / "copy" / f).read_bytes() == (tmp_path / label / f).read_bytes()
    assert sorted(p.name for p in (tmp_path / "copy").iterdir()) == ["requests.csv", "summary.json", "timeseries.csv"]


def test_kvsim_run_stream_writes_the_held_runs_report(tmp_path):
    """The same stdout, headline, summaries, Markdown and charts; the records in end order, no Parquet."""
    held, streamed = tmp_path / "held", tmp_path / "streamed"
    a = kvsim("run", "trace-replay", "--out", held)
    b = kvsim("run", "trace-replay", "--out", streamed, "--stream")
    assert outcome(a) is None and outcome(b) is None
    assert a.stdout.replace(str(held), "OUT") == b.stdout.replace(str(streamed), "OUT")
    for f in ("headline.csv", "summary.md", "latency.png", "timeseries.png", "breakeven.csv", "8xH100/summary.json"):
        assert (held / f).read_bytes() == (streamed / f).read_bytes(), f
    pd.testing.assert_frame_equal(read_sorted(held / "8xH100/requests.csv"),
                                  read_sorted(streamed / "8xH100/requests.csv"))
    assert not (streamed / "8xH100/requests.parquet").exists()


def test_a_streamed_run_of_four_fleets_holds_only_the_reports_columns_and_writes_the_held_report(tmp_path,
                                                                                                  monkeypatch):
    """The shipped disaggregated scenario (two kinds of node, each aggregated and 2P4D: four fleets), a minute of
    it: each fleet's result keeps `REPORT_COLUMNS` alone once summarised, and the report (its fleets table and
    chart, the latency chart from those columns, the provider's costs) is byte for byte the held run's. While a
    fleet runs, the fleets before it hold no row at all (their frames wait on disk: a day on two node kinds
    peaked 171 MB above one kind's), and the spill folder is gone once the run returns."""
    import gc
    import tempfile

    from simulator import study
    from simulator.engine import Result
    from simulator.study import REPORT_COLUMNS, run_scenario

    held_rows: list[list[int]] = []  # at each fleet's run: the rows the earlier fleets' results hold

    def run(config, workload, seed, **kw):
        gc.collect()
        mine = [o for o in gc.get_objects() if isinstance(o, Result) and o.streamed_to is not None
                and tmp_path / "api" in o.streamed_to.parents]
        held_rows.append(sorted(len(o.requests) + len(o.timeseries) for o in mine))
        return real_run(config, workload, seed, **kw)

    real_run = study.run

    scenario = tmp_path / "d.toml"
    scenario.write_text(Path(load_scenario("disaggregated").path).read_text().replace("duration_s = 180",
                                                                                         "duration_s = 60"))
    held, streamed = tmp_path / "held", tmp_path / "streamed"
    assert outcome(kvsim("run", scenario, "--out", held)) is None
    assert outcome(kvsim("run", scenario, "--out", streamed, "--stream")) is None
    for f in ("headline.csv", "summary.md", "fleets.csv", "fleets.png", "latency.png", "timeseries.png"):
        assert (held / f).read_bytes() == (streamed / f).read_bytes(), f
    assert "8xB200-2P4D" in (held / "fleets.csv").read_text()
    spill = tmp_path / "tmp"
    spill.mkdir()
    monkeypatch.setattr(study, "run", run)
    monkeypatch.setattr(tempfile, "tempdir", str(spill))
    done = run_scenario(load_scenario(scenario), stream_to=tmp_path / "api")
    assert len(done.results) == 4
    assert held_rows == [[], [0], [0, 0], [0, 0, 0]] and list(spill.iterdir()) == []
    monkeypatch.undo()
    held_run = run_scenario(load_scenario(scenario))
    rule = SteadyWindow(warmup_fraction=0.3)
    for label, result in done.results.items():
        assert tuple(result.requests.columns) == REPORT_COLUMNS and len(result.requests) > 100
        held_result = held_run.results[label]  # read back from the spill as they were, the time series too
        pd.testing.assert_frame_equal(result.timeseries, held_result.timeseries, check_dtype=False)
        pd.testing.assert_frame_equal(result.requests.astype({"outcome": object}),  # compact types, the same values
                                      held_result.requests[list(REPORT_COLUMNS)].astype({"outcome": object}),
                                      check_dtype=False)
        # `Result.steady` reads the columns the cut frame lacks back from the fleet's requests.csv
        for window in (None, rule):
            assert result.steady(window) == held_run.results[label].steady(window), (label, window)
        assert result.steady(rule) != result.steady()


def test_kvsim_run_stream_removes_the_earlier_report_before_it_writes(tmp_path):
    out = tmp_path / "o"
    assert outcome(kvsim("run", "trace-replay", "--out", out)) is None
    (out / "8xH100" / "requests.parquet").write_bytes(b"from the held run")  # pyarrow or not, a file it listed
    manifest = (out / ".kvsim-files").read_text()
    (out / ".kvsim-files").write_text(manifest + "run\t8xH100/requests.parquet\n")
    (out / "notes.txt").write_text("mine")
    assert outcome(kvsim("run", "trace-replay", "--out", out, "--stream")) is None
    assert not (out / "8xH100" / "requests.parquet").exists()
    assert (out / "notes.txt").read_text() == "mine"
    listed = {line.split("\t")[1] for line in (out / ".kvsim-files").read_text().splitlines()}
    assert {"8xH100/requests.csv", "8xH100/timeseries.csv", "8xH100/summary.json", "summary.md"} <= listed
    assert "8xH100/requests.parquet" not in listed


def _trace_replay(tmp_path: Path, report: str) -> Path:
    """The shipped trace-replay scenario, its trace by absolute path, with `report` as its [report]."""
    import scenarios

    folder = Path(scenarios.__file__).parent
    text = (folder / "trace-replay.toml").read_text()
    text = text.replace('trace = "traces/chat-sample.csv"', f'trace = "{folder / "traces" / "chat-sample.csv"}"')
    path = tmp_path / "tr.toml"
    path.write_text(text.replace("[report]\ncollapse = false\n", f"[report]\ncollapse = false\n{report}"))
    return path


def test_a_trace_over_the_held_limit_is_refused_unless_the_run_streams(tmp_path, monkeypatch):
    """The shipped trace holds 656 requests: with the held limit at 600 it is refused in one line that
    names --stream; streamed (limit 700) it runs, once the report's studies that hold the requests are
    off (refused before anything is written, the earlier report kept); over the streamed limit (650)
    it is refused."""
    import simulator.study
    import workloads.workload as w
    from tests.test_output_folders import listing

    monkeypatch.setattr(w, "MAX_REQUESTS", 600)
    monkeypatch.setattr(simulator.study, "MAX_REQUESTS", 600)
    monkeypatch.setattr(w, "MAX_STREAMED_REQUESTS", 700)
    line = error(kvsim("run", "trace-replay", "--out", tmp_path / "a"), "chat-sample.csv")
    assert "more than 600 requests" in line and "kvsim run --stream replays a trace of up to 700" in line
    out = tmp_path / "b"
    assert outcome(kvsim("run", _trace_replay(tmp_path, "breakeven = false\n"), "--out", out)) is not None
    with_breakeven = _trace_replay(tmp_path, "")  # breakeven on: its default
    (out / "notes.txt").parent.mkdir(exist_ok=True)
    (out / "notes.txt").write_text("mine")
    line = error(kvsim("run", with_breakeven, "--out", out, "--stream"), "tr.toml")
    assert line.endswith("tr.toml: report.breakeven = true: allowed up to 600 requests, which it holds "
                         "(chat-sample.csv has 656); set report.breakeven = false to stream it"), line
    assert listing(out) == {"notes.txt": b"mine"}
    assert outcome(kvsim("run", _trace_replay(tmp_path, "breakeven = false\n"), "--out", out, "--stream")) is None
    assert len(pd.read_csv(out / "8xH100" / "requests.csv")) == 656
    monkeypatch.setattr(w, "MAX_STREAMED_REQUESTS", 650)
    line = error(kvsim("run", _trace_replay(tmp_path, "breakeven = false\n"), "--out", tmp_path / "c", "--stream"),
                 "chat-sample.csv")
    assert "more than 650 requests" in line and "--stream" not in line


def test_a_streamed_run_that_fails_on_its_inputs_keeps_the_earlier_report(tmp_path):
    """A request longer than the model's context is found by the check before the run: the folder is as
    it was (the earlier report is removed only once the workload is read and checked)."""
    from tests.test_output_folders import listing

    out = tmp_path / "o"
    assert outcome(kvsim("run", "trace-replay", "--out", out)) is None
    before = listing(out)
    long = tmp_path / "long.csv"
    long.write_text("id,arrival_s,session_id,turn,prompt_tokens,output_tokens,output_segment_id,segments,"
                    "cache_breakpoints,source\n0,1.0,0,0,500000,10,0,0:500000,,x\n")
    line = error(kvsim("run", "trace-replay", "--trace", long, "--out", out, "--stream"), "context")
    assert "500,010 prompt + output tokens" in line
    assert listing(out) == before


@pytest.mark.parametrize(("target", "function"), [("simulator.planning", "plan_capacity"),
                                                  ("simulator.report", "write_report")])
def test_a_streamed_run_that_fails_after_the_simulation_removes_what_it_wrote(tmp_path, monkeypatch, target,
                                                                              function):
    """The capacity search (its real refusal: no fleet meets the SLOs) or the report failing once the
    records are streamed: one error line, and the folder holds only what was not the command's."""
    import importlib

    from simulator.errors import ConfigError
    from tests.test_output_folders import listing

    scenario = _trace_replay(tmp_path, "capacity = true\n")
    out = tmp_path / "o"
    out.mkdir()
    (out / "notes.txt").write_text("mine")

    def fails(*args, **kwargs):
        assert (out / "8xH100" / "requests.csv").stat().st_size > 10_000
        raise ConfigError("no fleet of up to 256 nodes meets the SLOs")

    monkeypatch.setattr(importlib.import_module(target), function, fails)
    assert "no fleet of up to 256" in error(kvsim("run", scenario, "--out", out, "--stream"))
    assert listing(out) == {"notes.txt": b"mine"}  # no empty .kvsim-files: no command's output is left


def test_a_window_of_a_streamed_workload_keeps_its_limit():
    wl = load_scenario("trace-replay").load_workload(0)
    assert wl.max_requests == 2_000_000 and wl.streamed().max_requests == 10_000_000
    assert wl.streamed().replayed(duration_s=60).max_requests == 10_000_000


def test_a_streamed_run_with_timeouts_and_rejections_has_the_held_summary(tmp_path):
    """Requests that time out in the queue and one that can never fit (rejected): the summary's branches
    over the completed ones, with a categorical outcome, as the held run's."""
    from dataclasses import replace

    from tests.engine.helpers import poisson_requests
    from tests.engine.test_invariants import SMALL, TIMER

    config = replace(SMALL, scheduler=replace(SMALL.scheduler, queue_timeout_s=3.0))
    reqs = poisson_requests(80, 12.0, (50, 600), (100, 700), seed=7)
    reqs.append(replace(reqs[-1], id=80, arrival_s=reqs[-1].arrival_s + 1, prompt_tokens=10 ** 6,
                        segments=((10 ** 6, 10 ** 6),)))
    held = run(config, reqs, 3, timer=TIMER)
    streamed = run(config, reqs, 3, timer=TIMER, stream_to=tmp_path)
    assert held.summary["timed_out"] > 5 and held.summary["rejected"] == 1
    same_summary(held.summary, streamed.summary)
    assert b"\r" not in (tmp_path / "requests.csv").read_bytes()  # LF line ends, as the held CSV's


def test_check_context_counts_the_requests_in_its_pass():
    sc = load_scenario("trace-replay")
    assert sc.check_context(sc.load_workload(sc.seed)) == 656


def _records(n: int) -> list[RequestRecord]:
    return [RequestRecord(request_id=i, arrival_s=0.1 * i, replica=i % 3, queue_s=0.0, ttft_s=0.5 + i,
                          tpot_mean_s=math.nan if i == 2 else 0.01, tpot_p99_s=0.02, end_s=9.0 - i, e2e_s=9.0,
                          prompt_tokens=100 + i, output_tokens=7, hit_tokens=0, preemptions=0,
                          outcome=("completed", "rejected", "timed_out")[i % 3], reason="", admit_s=0.2 * i)
            for i in range(n)]


def test_csv_rows_write_nan_as_an_empty_field_and_read_records_reads_them_back_compact(tmp_path):
    recs = _records(5)
    with CsvRows(tmp_path / "r.csv") as sink:
        for r in reversed(recs):  # written in the order they "ended": ids descending
            sink.append(r)
    assert sink.rows == 5
    line = (tmp_path / "r.csv").read_text().splitlines()[3]  # request 2
    assert line.startswith("2,0.2,2,0.0,2.5,,0.02,7.0,") and "nan" not in line
    df = read_records(tmp_path / "r.csv", 5, ("tpot_mean_s", "prompt_tokens", "outcome"))
    assert list(df.columns) == ["request_id", "tpot_mean_s", "prompt_tokens", "outcome"]
    assert df.request_id.tolist() == [0, 1, 2, 3, 4]
    assert df.prompt_tokens.tolist() == [100, 101, 102, 103, 104] and df.prompt_tokens.dtype == np.int32
    assert df.request_id.dtype == np.int64
    assert df.outcome.tolist() == ["completed", "rejected", "timed_out", "completed", "rejected"]
    assert list(df.outcome.cat.categories) == ["completed", "rejected", "timed_out"]
    assert math.isnan(df.tpot_mean_s[2]) and df.tpot_mean_s[0] == 0.01


def test_read_records_refuses_a_file_that_is_not_what_was_written(tmp_path):
    with CsvRows(tmp_path / "r.csv") as sink:
        for r in _records(4):
            sink.append(r)
    with pytest.raises(ValueError, match="4 rows, not the 5 written"):
        read_records(tmp_path / "r.csv", 5, ("arrival_s",))
    with pytest.raises(ValueError, match="more than the 3 rows written"):
        read_records(tmp_path / "r.csv", 3, ("arrival_s",))
    text = (tmp_path / "r.csv").read_text().replace("timed_out", "lost")
    (tmp_path / "r.csv").write_text(text)
    with pytest.raises(ValueError, match="an outcome other than completed, rejected, timed_out"):
        read_records(tmp_path / "r.csv", 4, ("outcome",))


def test_csv_rows_header_replaces_the_field_names(tmp_path):
    with CsvRows(tmp_path / "s.csv", SampleRecord, header=("a", "b")) as sink:
        sink.append((1, math.nan))
    assert (tmp_path / "s.csv").read_text().splitlines() == ["a,b", "1,"]


def test_kvsim_run_stream_interrupted_removes_what_it_streamed(tmp_path, monkeypatch):
    """SIGINT once the records are written (here: as the summary starts): exit 130 in one line, and the
    folder holds only what was not the command's (its earlier report went when the run started)."""
    import simulator.engine.result
    from tests.test_output_folders import listing, stopped

    out = tmp_path / "o"
    assert outcome(kvsim("run", "trace-replay", "--out", out)) is None
    (out / "notes.txt").write_text("mine")

    def interrupted(*args, **kwargs):
        assert (out / "8xH100" / "requests.csv").stat().st_size > 10_000  # the run streamed its records
        raise KeyboardInterrupt

    monkeypatch.setattr(simulator.engine.result, "summarize", interrupted)
    line = stopped(kvsim("run", "trace-replay", "--out", out, "--stream"), "run")
    assert "partial output was removed" in line and "earlier output there had already been removed" in line
    assert listing(out) == {"notes.txt": b"mine"}  # no empty .kvsim-files: no command's output is left


@pytest.mark.parametrize("chunk", [3, 1 << 16])
def test_most_at_once_by_hand_and_against_the_event_sweep(monkeypatch, chunk):
    import simulator.engine.result
    from simulator.engine.result import most_at_once

    monkeypatch.setattr(simulator.engine.result, "MOST_AT_ONCE_CHUNK", chunk)

    # [0, 4), [1, 2), [2, 5), [2, 3): at t = 2 the second has ended (an end before a start) and the
    # third and fourth start: 3 open; [5, 5) opens and closes at once
    assert most_at_once(np.array([0.0, 1, 2, 2, 5]), np.array([4.0, 2, 5, 3, 5])) == 3
    assert most_at_once(np.array([]), np.array([])) == 0
    assert most_at_once(np.array([1.0]), np.array([1.0])) == 0

    def sweep(starts, ends):  # the events sorted by time, ends first at a tie, and counted
        events = sorted([(t, -1) for t in ends] + [(t, 1) for t in starts])
        return max(itertools.accumulate(step for _, step in events), default=0)

    rng = np.random.default_rng(7)
    for _ in range(500):
        n = int(rng.integers(1, 30))
        starts = rng.integers(0, 12, n) / 2
        ends = starts + rng.integers(0, 5, n)
        assert most_at_once(starts, ends) == max(sweep(starts, ends), 0)


def test_a_cdf_of_more_points_than_it_draws_keeps_the_first_last_and_ranks_between(monkeypatch):
    import matplotlib.pyplot as plt

    import simulator.charts.run as charts_run

    monkeypatch.setattr(charts_run, "CDF_POINTS", 5)
    values = pd.Series([9.0, 1.0, math.nan, 5.0, 3.0, 7.0, 2.0, 8.0, 4.0, 6.0, 10.0])  # 10 values and a NaN
    fig, ax = plt.subplots()
    charts_run._cdf(ax, values, "x")
    (line,) = ax.get_lines()
    # ranks 0, 2.25, 4.5, 6.75, 9 rounded (half to even): 0, 2, 4, 7, 9 -> values 1, 3, 5, 8, 10
    assert line.get_xdata().tolist() == [1.0, 3.0, 5.0, 8.0, 10.0]
    assert line.get_ydata().tolist() == [0.1, 0.3, 0.5, 0.8, 1.0]
    monkeypatch.setattr(charts_run, "CDF_POINTS", 10)  # at the bound: every point
    ax.clear()
    charts_run._cdf(ax, values, "x")
    assert ax.get_lines()[0].get_xdata().tolist() == [float(v) for v in range(1, 11)]
    plt.close(fig)


@pytest.mark.parametrize("stream", [False, True])
def test_a_replay_that_skips_trace_rows_says_how_many_and_why(tmp_path, stream):
    """An Azure trace of 60 rows, 6 of them with no output tokens (the format's rule drops them, as a failed
    request): `kvsim run` replays the other 54 and says so on stderr and in the report, where it had said
    nothing (helper-108: a planner sizing from a real trace never learnt that traffic was left out); a
    trace with none skipped says nothing of it."""
    import datetime

    def write(path: Path, every: int) -> Path:
        start = datetime.datetime(2024, 5, 10)
        rows = [f"{start + datetime.timedelta(seconds=i / 2):%Y-%m-%d %H:%M:%S.%f},{500 + i},"
                f"{0 if every and i % every == 3 else 100}" for i in range(60)]
        path.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n" + "\n".join(rows) + "\n")
        return path

    note = ("6 trace rows skipped (malformed, with skip_bad_rows or --skip-bad-rows, or dropped by the format's "
            "rule: a failed request, 0 tokens; under a scenario's skip_bad_rows, longer than its model's context)")
    extra = ("--stream",) if stream else ()
    r = kvsim("run", "trace-replay", "--trace", write(tmp_path / "t.csv", 10), "--out", tmp_path / "o", *extra)
    assert outcome(r) is None
    assert f"warning: workload: {note}" in r.stderr.splitlines()
    assert f"Workload: 54 requests, {note}, over 0.5 min" in (tmp_path / "o" / "summary.md").read_text()
    assert ("watermark 0.01. Router: least-tokens. KV cache: prefix (lru eviction, no offload tier). KV layout: "
            "native (no lever: no accuracy debit).\n") in (tmp_path / "o" / "summary.md").read_text()
    # an Azure trace's reuse is unknown, so is the best TTL (it had read "customer → none": helper-128)
    assert "Best TTL: unknown: the azure trace format carries no prefix ids" in (
        tmp_path / "o" / "summary.md").read_text()
    if stream:  # the capacity searches say it too, once, before their first simulation
        for mode in ((), ("--max-rate", "--seeds", "2"), ("--offline", "--seeds", "2")):
            r = kvsim("capacity", "trace-replay", "--trace", tmp_path / "t.csv", *mode)
            assert outcome(r) is None and r.stderr.splitlines().count(f"  workload: {note}") == 1, mode
    else:  # sweep and compare say it too (they said nothing): once, whatever the points
        scenario = tmp_path / "t.toml"
        scenario.write_text((Path(scenarios.__file__).parent / "trace-replay.toml").read_text()
                            .replace('trace = "traces/chat-sample.csv"', 'trace = "t.csv"'))
        grid = ("--grid", "cluster.nodes=1,2", "--workers", "1")
        r = kvsim("sweep", scenario, *grid, "--json")
        assert outcome(r) is None and f"warning: workload, at every point: {note}" in r.stderr.splitlines()
        assert [(row["requests"], row["trace_rows_skipped"], row["trace_cut_at_s"]) for row in json.loads(r.stdout)] \
            == [(54, 6, None), (54, 6, None)]
        # a window that cuts the trace at one point of two: said, and in the table's column (helper-111)
        r = kvsim("sweep", scenario, "--grid", "workload.duration_s=10,100", "--workers", "1", "--out", tmp_path / "sw")
        cut = "the trace cut at 10 s of replay (workload.duration_s; its later rows not replayed)"
        assert outcome(r) is None and f"warning: workload, at 1 of 2 points: {cut}" in r.stderr.splitlines()
        assert ("warning: workload, at every point: trace rows skipped (2 to 6: column trace_rows_skipped; malformed, "
                "with skip_bad_rows or --skip-bad-rows, or dropped by the format's rule: a failed request, 0 tokens; "
                "under a scenario's skip_bad_rows, longer than its model's context)") \
            in r.stderr
        log = pd.read_csv(tmp_path / "sw" / "sweep.csv")
        assert log.requests.tolist() == [18, 54] and log.trace_cut_at_s.tolist()[0] == 10
        assert math.isnan(log.trace_cut_at_s[1]) and "trace_cut_at_s" in r.stdout
        # a sweep.csv from before these two columns: --resume says so rather than "sweep the same keys"
        log.drop(columns=["trace_rows_skipped", "trace_cut_at_s"]).to_csv(tmp_path / "sw" / "sweep.csv", index=False)
        r = kvsim("sweep", scenario, "--grid", "workload.duration_s=10,100", "--out", tmp_path / "sw", "--resume")
        assert "--resume: written by an older kvsim, before the columns trace_rows_skipped, trace_cut_at_s; " \
               "write elsewhere, or delete it to run every point again" in error(r, str(tmp_path / "sw" / "sweep.csv"))
        r = kvsim("compare", scenario, "--strategy", "native,fp8")
        assert outcome(r) is None and f"warning: workload: {note}" in r.stderr.splitlines()
        assert "comparing 2 strategy sets on 54 requests" in r.stderr
    assert json.loads((tmp_path / "o" / "8xH100" / "summary.json").read_text())["summary"]["requests"] == 54
    r = kvsim("run", "trace-replay", "--trace", write(tmp_path / "u.csv", 0), "--out", tmp_path / "p", *extra)
    assert outcome(r) is None and "skipped" not in r.stderr
    if not stream:  # none skipped: no word, and the printed table leaves the column out
        scenario.write_text(scenario.read_text().replace('trace = "t.csv"', 'trace = "u.csv"'))
        r = kvsim("sweep", scenario, "--grid", "cluster.nodes=1", "--workers", "1")
        assert outcome(r) is None and "skipped" not in r.stderr + r.stdout and " 60 " in r.stdout
        assert "trace_cut_at_s" not in r.stdout and "warning" not in r.stderr
    assert "Workload: 60 requests over" in (tmp_path / "p" / "summary.md").read_text()


def test_json_output_is_strict_json_with_null_for_a_missing_figure(tmp_path):
    """helper-112: `kvsim run --json` and summary.json wrote NaN (an aggregated fleet's prefill_busy_fraction,
    link_utilization, ...), which JSON has not: strict parsers refuse the document. A missing figure is null."""
    def strict(text: str) -> object:
        return json.loads(text, parse_constant=lambda word: pytest.fail(f"not JSON: {word}"))

    r = kvsim("run", "trace-replay", "--out", tmp_path / "o", "--json")
    assert outcome(r) is None
    summary = strict(r.stdout)["fleets"]["8xH100"]
    assert summary["link_utilization"] is None and summary["requests"] == 656
    assert strict((tmp_path / "o" / "8xH100" / "summary.json").read_text())["summary"] == summary
    # an unbounded figure is null too: the scheduler's queue_timeout_s is infinite unless set (helper-113)
    assert strict((tmp_path / "o" / "scenario.json").read_text())["scenario"]["scheduler"]["queue_timeout_s"] is None
    r = kvsim("cost", "--model", "Llama-3.1-8B", "--hardware", "1xH100", "--batch", "8", "--context", "4096", "--json")
    assert outcome(r) is None and strict(r.stdout)


def test_a_decode_pool_falling_behind_is_not_steady_held_or_streamed(tmp_path):
    """helper-190: the shipped disaggregated scenario as 8xH100 4P1D (one decode node for four prefill nodes), 120 s:
    the requests prefilled wait on their prefill replicas for decode room, a queue that grew by 864 through the
    window, read as "the batch was still filling ... run longer" (`simulator.engine.steady`), so `keeps_up` took
    the run for one too short to tell instead of one falling behind. Now it is not steady, its queue growing, and
    a streamed run's `Result.steady` (cut to the report's columns: it reads the KV transfers' starts back) says the
    same as its summary and as the held run."""
    from dataclasses import replace

    from simulator.study import run_scenario

    sc = load_scenario("disaggregated")
    sc = replace(sc, cluster=replace(sc.cluster, hardware=("8xH100",)), workload=replace(sc.workload, duration_s=120),
                 disaggregation=replace(sc.disaggregation, prefill_nodes=4, decode_nodes=1, compare_aggregated=False))
    said = ("not steady: the hand-off queue grew through the window [12.1, 120.0] s (4,561 moved to a decode replica "
            "of 5,425 prefilled there: it grew by 864, more than 220)")
    held = run_scenario(sc).results["8xH100-4P1D"]
    streamed = run_scenario(sc, stream_to=tmp_path).results["8xH100-4P1D"]
    assert "transfer_start_s" not in streamed.requests  # the report's columns alone
    for result in (held, streamed):
        assert result.summary["steady_state_warning"] == said and result.summary["steady_queue_growing"]
        assert result.steady().warning == said and result.steady().queue_growing
