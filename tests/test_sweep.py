"""Sweeps: grid expansion and parsing, parallel runs equal serial ones, figures, the command, and
faults: rows logged as points finish, --resume, failed points, killed workers, signals."""

import csv
import dataclasses
import io
import json
import multiprocessing
import os
import signal
import subprocess
import sys
import time
import types
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
import pytest
from click.testing import CliRunner

from simulator.charts import plot_sweep
from simulator.cli.sweep import parse_grid, parse_plots, sweep
from simulator.errors import ConfigError
from simulator.scenario import ClusterSection, load_scenario
from simulator.sweep import METRICS, TRAILER, _run_workers, expand_grid, run_point, run_sweep

TINY = """\
name = "tiny"
seed = 0
[model]
name = "Llama-3.1-70B"
[cluster]
hardware = ["8xH100"]
nodes = 1
tp = 8
[cache]
strategy = "none"
[workload]
duration_s = 60
rate_scale = 5.0
[workload.spec]
name = "chat-4k"
[report]
collapse = false
breakeven = false
"""
# rate_scale 40 (20 chat sessions/s) saturates one 8xH100 node without a prefix cache (p99 TTFT
# ~15 s); two take it. (With the prefix cache, the default, one node takes it: p99 TTFT 0.07 s.)
GRID = {"cluster.nodes": ["1", "2"], "workload.rate_scale": ["5", "40"]}


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("sweep") / "tiny.toml"
    path.write_text(TINY)
    return path


@pytest.fixture(scope="module")
def serial(tiny: Path) -> pd.DataFrame:
    return run_sweep(load_scenario(tiny), GRID, workers=1)


# --- expansion --------------------------------------------------------------------------------
def test_expand_grid_is_the_cross_product_in_grid_order_with_typed_values(tiny):
    sc = load_scenario(tiny)
    grid = {"cluster.nodes": ["1", "2"], "cache.layout": ["native", "fp8"], "workload.rate_scale": ["2"],
            "scheduler.max_num_seqs": ["64"], "cluster.hardware": ["8xH200"], "seed": ["3"]}
    points = expand_grid(sc, grid)
    assert [(v["cluster.nodes"], v["cache.layout"]) for v, _ in points] == [
        (1, "native"), (1, "fp8"), (2, "native"), (2, "fp8")]
    values, point = points[3]
    assert values == {"cluster.nodes": 2, "cache.layout": "fp8", "workload.rate_scale": 2.0,
                      "scheduler.max_num_seqs": 64, "cluster.hardware": ("8xH200",), "seed": 3}
    assert point.cluster.nodes == 2 and point.cluster.hardware == ("8xH200",) and point.seed == 3
    assert point.workload.rate_scale == 2.0 and point.scheduler.max_num_seqs == 64
    assert point.cache.layout == "fp8"
    # everything else is the base scenario's, including where it was read from
    assert point.model == sc.model and point.slo == sc.slo and point.cluster.tp == 8
    assert point.path == sc.path


def test_python_values_and_keys_inside_free_tables(tiny):
    sc = load_scenario(tiny)
    [(values, point)] = expand_grid(sc, {"cluster.nodes": [3], "workload.spec.mean_turns": ["2.5"]})
    assert values == {"cluster.nodes": 3, "workload.spec.mean_turns": 2.5}
    assert point.workload.spec == {"name": "chat-4k", "mean_turns": 2.5}


@pytest.mark.parametrize(("key", "message"), [
    # the cluster table's keys in declaration order (the list grows with the parallelism plans)
    ("cluster.node", "--grid cluster.node: unknown key 'node' in cluster; valid: "
                     + ", ".join(f.name for f in dataclasses.fields(ClusterSection))),
    ("clusters", "--grid clusters: unknown key 'clusters' in the scenario; valid: name, description, seed, "
                 "model, cluster, cache, scheduler, router, workload, slo, billing, report"),
    ("cluster", "--grid cluster: is a table; sweep one of its keys: hardware, nodes"),
    ("cluster.nodes.x", "--grid cluster.nodes.x: cluster.nodes is a value, not a table"),
])
def test_unknown_key_path_names_the_key_and_the_valid_keys(tiny, key, message):
    with pytest.raises(ConfigError) as err:
        expand_grid(load_scenario(tiny), {key: ["1"]})
    assert message in str(err.value)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(("key", "value", "message"), [
    ("cluster.nodes", "abc", "tiny.toml: cluster.nodes: must be an integer (got 'abc')"),
    ("cluster.nodes", "0", "cluster.nodes: must be >= 1 (got 0)"),
    ("workload.rate_scale", "fast", "workload.rate_scale: must be a number (got 'fast')"),
    ("cluster.hardware", "9xFoo", "unknown node '9xFoo'; valid: 8xH100"),
    ("cache.layout", "zip", "layout 'zip': unknown lever 'zip'"),
])
def test_bad_value_names_the_key_and_the_value(tiny, key, value, message):
    with pytest.raises(ConfigError) as err:
        expand_grid(load_scenario(tiny), {"seed": ["1"], key: [value]})
    text = str(err.value)
    assert text.startswith(f"sweep point seed='1', {key}={value!r}: ")
    assert message in text
    assert "\n" not in text


def test_empty_value_list_is_an_error(tiny):
    with pytest.raises(ConfigError, match=r"--grid cluster\.nodes: must be a non-empty list of values \(got \[\]\)"):
        expand_grid(load_scenario(tiny), {"cluster.nodes": []})


# --- running ----------------------------------------------------------------------------------
def test_sweep_frame_has_a_row_per_point_and_the_headline_metrics(serial):
    assert list(serial.columns) == ["point", "cluster.nodes", "workload.rate_scale", "hardware", *METRICS,
                                    "error", "digest"]
    assert TRAILER == ("error", "digest")
    assert (serial.error == "").all()
    assert serial.digest.str.fullmatch("[0-9a-f]{16}").all() and serial.digest.nunique() == 4
    assert serial["point"].tolist() == [0, 1, 2, 3]
    assert serial[["cluster.nodes", "workload.rate_scale"]].values.tolist() == [[1, 5.0], [1, 40.0], [2, 5.0],
                                                                               [2, 40.0]]
    assert (serial.hardware == "8xH100").all()
    assert serial.attrs["swept"] == ["cluster.nodes", "workload.rate_scale"]


def test_more_nodes_double_the_fleet_price_and_rescue_a_saturated_node(serial):
    by = serial.set_index(["cluster.nodes", "workload.rate_scale"])
    # 8xH100 lists at 23.92 $/h a node (catalog): one node 23.92, two 47.84
    assert by.loc[(1, 5.0), "usd_per_hour"] == pytest.approx(23.92)
    assert by.loc[(2, 5.0), "usd_per_hour"] == pytest.approx(2 * 23.92)
    # the same requests at every node count: the workload depends on the seed and rate only
    assert by.loc[(1, 40.0), "requests"] == by.loc[(2, 40.0), "requests"]
    for rate in (5.0, 40.0):  # more nodes never raise p99 TTFT
        assert by.loc[(2, rate), "ttft_p99_s"] <= by.loc[(1, rate), "ttft_p99_s"]
    # 40× saturates one node far past the 2 s SLO; two nodes meet it
    assert by.loc[(1, 40.0), "ttft_p99_s"] > 5 and not by.loc[(1, 40.0), "meets_slo"]
    assert by.loc[(2, 40.0), "ttft_p99_s"] < 2 and by.loc[(2, 40.0), "meets_slo"]


def test_worker_processes_give_the_serial_frame(tiny, serial):
    seen: list[float] = []
    parallel = run_sweep(load_scenario(tiny), GRID, workers=2, progress=seen.append)
    pd.testing.assert_frame_equal(parallel, serial)
    assert sorted(seen) == seen and seen[-1] == 1.0 and len(seen) == 4


def test_a_local_dask_cluster_gives_the_serial_frame(tiny, serial):
    distributed = pytest.importorskip("dask.distributed")
    with distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1,
                                  dashboard_address=None) as cluster:
        remote = run_sweep(load_scenario(tiny), GRID, dask_address=cluster.scheduler_address)
    pd.testing.assert_frame_equal(remote, serial)


# --- charts -----------------------------------------------------------------------------------
def test_plot_sweep_draws_a_line_per_split_with_labels_and_units(serial):
    ax = plot_sweep(serial, "workload.rate_scale", "ttft_p99_s")
    labels = [line.get_label() for line in ax.lines]
    assert labels == ["8xH100, 1 node", "8xH100, 2 nodes", "p99 SLO 2 s"]  # not cluster.nodes=1 (helper-158)
    assert ax.get_xlabel() == "load (× the workload's base rate)"
    assert ax.get_ylabel().startswith("p99 time to first token (s)")
    assert ax.get_title() == "tiny (Llama-3.1-70B on 8xH100, TP8): p99 time to first token vs load"
    assert ax.get_legend().get_title().get_text() == "node kind / nodes per fleet"
    tpot = plot_sweep(serial, "cluster.nodes", "tpot_p99_s", hue="workload.rate_scale")
    assert "(ms)" in tpot.get_ylabel()
    assert [line.get_label() for line in tpot.lines][:2] == ["8xH100, load 5×", "8xH100, load 40×"]
    assert tpot.lines[0].get_ydata()[0] == pytest.approx(serial.tpot_p99_s.iloc[0] * 1e3)
    plt.close("all")


def test_plot_sweep_leaves_a_layouts_points_unjoined():
    """helper-143: a sweep over cache.layout joined native, compress:8:4096 and fp8 with lines, as if values lay
    between layouts; a numeric key keeps its lines."""
    df = pd.DataFrame({"hardware": ["8xH100"] * 3, "cache.layout": ["native", "compress:8:4096", "fp8"],
                       "max_concurrency": [10, 12, 20], "meets_slo": [True] * 3})
    ax = plot_sweep(df, "cache.layout", "max_concurrency")
    assert [line.get_linestyle() for line in ax.lines] == ["None"] and ax.lines[0].get_marker() == "o"
    numeric = plot_sweep(df.assign(**{"cluster.nodes": [1, 2, 3]}), "cluster.nodes", "max_concurrency")
    assert numeric.lines[0].get_linestyle() == "-"
    seeds = plot_sweep(df.assign(seed=[0, 1, 2]), "seed", "max_concurrency")  # draws, not a trend (helper-147)
    assert seeds.lines[0].get_linestyle() == "None"
    plt.close("all")


# --- command ----------------------------------------------------------------------------------
def test_parse_grid_and_plots():
    grid = parse_grid(("cluster.nodes=1,2", "cache.layout = native, fp8"))
    assert grid == {"cluster.nodes": ["1", "2"], "cache.layout": ["native", "fp8"]}
    assert parse_plots((), grid) == [("ttft_p99_s", "cluster.nodes"),
                                     ("usd_per_million_output_tokens", "cluster.nodes")]
    assert parse_plots(("goodput_fraction:cache.layout",), grid) == [("goodput_fraction", "cache.layout")]
    for bad, match in [(("nodes",), "must be KEY=V1,V2"), (("a=1,,2",), "no empty value"),
                       (("a=1", "a=2"), "given twice"), ((), "at least one --grid")]:
        with pytest.raises(ConfigError, match=match):
            parse_grid(bad)
    with pytest.raises(ConfigError, match="unknown metric 'ttft'; valid: requests"):
        parse_plots(("ttft",), grid)
    with pytest.raises(ConfigError, match=r"'seed' is not a grid key; grid keys: cluster\.nodes, cache\.layout"):
        parse_plots(("ttft_p99_s:seed",), grid)


def test_sweep_command_writes_the_table_csv_and_charts(tiny, tmp_path):
    out = tmp_path / "out"
    res = CliRunner().invoke(sweep, [str(tiny), "--grid", "cluster.nodes=1,2", "--grid", "workload.rate_scale=5",
                                     "--workers", "1", "--out", str(out), "--plot", "goodput_fraction",
                                     "--plot", "usd_per_hour:cluster.nodes"])
    assert res.exit_code == 0, res.output
    assert "ttft_p99_s" in res.output and "8xH100" in res.output
    df = pd.read_csv(out / "sweep.csv")
    assert df["cluster.nodes"].tolist() == [1, 2]
    assert df.usd_per_hour.tolist() == pytest.approx([23.92, 47.84])
    for name in ("goodput_fraction", "usd_per_hour"):
        png = out / f"sweep-{name}-vs-cluster.nodes.png"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_sweep_command_reports_bad_input_in_one_line_with_exit_code_2(tiny):
    res = CliRunner().invoke(sweep, [str(tiny), "--grid", "cluster.nodes=1,two"])
    assert res.exit_code == 2
    assert res.output.strip() == ("Error: sweep point cluster.nodes='two': "
                                  f"{tiny}: cluster.nodes: must be an integer (got 'two')")


# --- faults: rows on disk as points finish, failed points, killed workers, signals, --resume ------
REPO = Path(__file__).resolve().parents[1]


# Point functions for worker processes (top level, so they pickle by reference): each spoils one point.
def _raise_at_point_1(table: dict, path: str, labels: dict) -> list[dict]:
    if labels["point"] == 1:
        raise ValueError(f"no luck at\npoint {labels['point']}")  # two lines: the log keeps one
    return run_point(table, path, labels)


def _sigkill_at_point_2(table: dict, path: str, labels: dict) -> list[dict]:
    if labels["point"] == 2:
        os.kill(os.getpid(), signal.SIGKILL)  # as `kill -9` or the OOM killer would
    return run_point(table, path, labels)


def _rows(log: Path) -> list[dict[str, str]]:
    with log.open(newline="") as f:
        return list(csv.DictReader(f))


def test_each_point_is_on_disk_and_fsynced_before_it_counts_as_done(tiny, tmp_path, monkeypatch):
    log = tmp_path / "sweep.csv"
    synced: list[int] = []
    fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), fsync(fd))[1])
    seen = []
    grid = {"cluster.nodes": ["1", "2"], "workload.rate_scale": ["5"]}
    df = run_sweep(load_scenario(tiny), grid, workers=1, csv_path=log,
                   progress=lambda f: seen.append((f, len(synced), [r["point"] for r in _rows(log)])))
    # the header is synced first, then each point's row before the sweep counts the point done
    assert seen == [(0.5, 2, ["0"]), (1.0, 3, ["0", "1"])]
    assert len(synced) == 4  # and once more for the final rewrite in grid order
    assert log.read_text().count("point,") == 1
    back = pd.read_csv(log)
    pd.testing.assert_frame_equal(back[list(METRICS)], df[list(METRICS)])
    assert back.usd_per_hour.tolist() == pytest.approx([23.92, 47.84])


def test_a_point_that_raises_is_recorded_with_its_error_and_the_others_go_on(tiny, serial, tmp_path):
    log = tmp_path / "sweep.csv"
    df = run_sweep(load_scenario(tiny), GRID, workers=2, csv_path=log, point=_raise_at_point_1)
    assert df.error.tolist() == ["", "ValueError: no luck at point 1", "", ""]
    assert df.loc[1, list(METRICS)].isna().all() and df.loc[1, "hardware"] == "8xH100"
    ok = [0, 2, 3]  # the others are the serial sweep's rows, figure for figure
    pd.testing.assert_frame_equal(df.loc[ok], serial.loc[ok], check_dtype=False)
    rows = _rows(log)
    assert [r["error"] for r in rows] == ["", "ValueError: no luck at point 1", "", ""]
    assert rows[1]["requests"] == "" and rows[1]["cluster.nodes"] == "1" and rows[1]["workload.rate_scale"] == "40.0"


def test_a_worker_killed_with_sigkill_fails_its_point_only(tiny, serial, tmp_path):
    log = tmp_path / "sweep.csv"
    df = run_sweep(load_scenario(tiny), GRID, workers=2, csv_path=log, point=_sigkill_at_point_2)
    assert df.error.tolist() == ["", "", "worker process killed by SIGKILL", ""]
    ok = [0, 1, 3]  # a fresh worker ran point 3 after its neighbour died
    pd.testing.assert_frame_equal(df.loc[ok], serial.loc[ok], check_dtype=False)
    assert [r["error"] for r in _rows(log)] == df.error.tolist()
    assert [p for p in multiprocessing.active_children() if p.name == "kvsim-sweep"] == []


# what a worker reads off its parent, the forkserver: which of pandas' and scipy.stats' compiled modules it has mapped
_PARENT_HAS = ("[lib in open(f'/proc/{__import__(\"os\").getppid()}/maps').read() "
               "for lib in ('/pandas/_libs/', '/scipy/stats/')]")


@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="reads /proc/<pid>/maps (Linux)")
def test_the_forkserver_imports_what_a_point_needs_once_for_every_worker():
    """Workers fork from a forkserver that has imported `WORKER_PRELOAD` (pandas and scipy.stats with it), so none
    pays for those imports before its first point; without the preload the forkserver maps neither."""
    got: dict[int, list[bool]] = {}
    jobs = [types.SimpleNamespace(args=(_PARENT_HAS,)) for _ in range(3)]
    _run_workers(jobs, [0, 1, 2], eval, lambda i, rows, error: got.update({i: rows or error}), 2)
    assert got == {0: [True, True], 1: [True, True], 2: [True, True]}


def test_an_interrupt_terminates_the_workers_and_keeps_the_finished_rows(tiny, serial, tmp_path):
    log = tmp_path / "sweep.csv"

    def interrupt(fraction: float) -> None:
        raise KeyboardInterrupt  # Ctrl-C as the first point is reported done

    with pytest.raises(KeyboardInterrupt):
        run_sweep(load_scenario(tiny), GRID, workers=2, csv_path=log, progress=interrupt)
    # the other worker was terminated, not left running
    assert [p for p in multiprocessing.active_children() if p.name == "kvsim-sweep"] == []
    [row] = _rows(log)
    point = int(row["point"])
    assert row["error"] == "" and int(row["requests"]) == serial.requests[point]
    assert float(row["ttft_p99_s"]) == serial.ttft_p99_s[point]


def test_resume_runs_only_the_missing_and_failed_points_and_ends_with_the_uninterrupted_file(tiny, tmp_path):
    sc = load_scenario(tiny)
    log = tmp_path / "sweep.csv"
    fresh = run_sweep(sc, GRID, workers=1, csv_path=log)
    text = log.read_text()
    header, p0, p1, p2, p3 = text.splitlines(keepends=True)
    cells = next(csv.reader([p1]))
    columns = header.strip().split(",")
    for m in METRICS:
        cells[columns.index(m)] = ""
    cells[columns.index("error")] = "ValueError: an earlier failure"
    failed = ",".join(cells) + "\n"
    # point 0 and 3 done, point 1 failed, point 2 cut short mid-line by a crash
    log.write_text(header + p0 + failed + p3 + p2[:20])
    ran: list[int] = []

    def counting(table: dict, path: str, labels: dict) -> list[dict]:
        ran.append(labels["point"])
        return run_point(table, path, labels)

    seen: list[float] = []
    resumed = run_sweep(sc, GRID, workers=1, csv_path=log, resume=True, point=counting, progress=seen.append)
    assert ran == [1, 2]
    assert resumed.attrs["reused_points"] == 2 and seen == [0.5, 0.75, 1.0]
    pd.testing.assert_frame_equal(resumed, fresh)
    assert log.read_text() == text  # byte for byte the file of the sweep that was never interrupted
    again = run_sweep(sc, GRID, workers=1, csv_path=log, resume=True, point=counting)
    assert ran == [1, 2] and again.attrs["reused_points"] == 4


def test_resume_refuses_a_log_of_another_scenario_or_grid(tiny, tmp_path):
    sc = load_scenario(tiny)
    log = tmp_path / "sweep.csv"
    grid = {"cluster.nodes": ["1"], "workload.duration_s": ["10"]}
    run_sweep(sc, grid, workers=1, csv_path=log)
    text = log.read_text()

    def never(table: dict, path: str, labels: dict) -> list[dict]:
        raise AssertionError("a refused resume runs nothing")

    with pytest.raises(ConfigError) as err:  # the same grid on another seed
        run_sweep(dataclasses.replace(sc, seed=1), grid, workers=1, csv_path=log, resume=True, point=never)
    digest = _rows(log)[0]["digest"]
    assert str(err.value) == (f"{log} line 2: --resume: not a point of this sweep (digest {digest!r}): the "
                              "scenario, its seed or the grid changed since it was written (a grid may grow, not "
                              "lose points); resume with the same ones or write elsewhere")
    with pytest.raises(ConfigError) as err:  # other grid keys
        run_sweep(sc, {"cluster.nodes": ["1"]}, workers=1, csv_path=log, resume=True, point=never)
    assert str(err.value) == (f"{log}: --resume: its columns are not this sweep's (missing: none; extra: "
                              "workload.duration_s); sweep the same keys, in the same order, or write elsewhere")
    assert log.read_text() == text


def test_sweep_command_goes_past_a_failed_point_exits_2_naming_it_and_resumes(tiny, tmp_path, monkeypatch):
    out = tmp_path / "out"
    args = [str(tiny), "--grid", "cluster.nodes=1,2", "--grid", "workload.rate_scale=5", "--workers", "1",
            "--out", str(out)]
    monkeypatch.setattr("simulator.sweep.run_point", _raise_at_point_1)
    res = CliRunner().invoke(sweep, args)
    assert res.exit_code == 2
    assert res.stderr.splitlines()[-1] == (f"Error: 1 of 2 sweep points failed; their rows in {out / 'sweep.csv'} "
                                           "carry the error (point 1: ValueError: no luck at point 1)")
    assert "error" in res.stdout and "ValueError: no luck at point 1" in res.stdout
    assert [r["error"] for r in _rows(out / "sweep.csv")] == ["", "ValueError: no luck at point 1"]
    assert (out / "sweep.parquet").exists() and (out / "sweep-ttft_p99_s-vs-cluster.nodes.png").exists()
    monkeypatch.undo()
    res = CliRunner().invoke(sweep, [*args, "--resume"])
    assert res.exit_code == 0, res.output
    assert f"reused 1 finished points from {out / 'sweep.csv'}" in res.stderr
    rows = _rows(out / "sweep.csv")
    assert [r["error"] for r in rows] == ["", ""] and [r["usd_per_hour"] for r in rows] == ["23.92", "47.84"]
    assert " error " not in res.stdout  # no failure, no error column in the table


def test_sweep_command_resume_needs_out(tiny):
    res = CliRunner().invoke(sweep, [str(tiny), "--grid", "cluster.nodes=1", "--resume"])
    assert res.exit_code == 2
    assert res.output.strip() == "Error: --resume needs --out DIR: the folder whose sweep.csv it continues"


def _live_processes(pgid: int) -> list[int]:
    """Processes of process group `pgid` that are not zombies (a zombie runs nothing; reaping it is
    its parent's business, and once the sweep exits that is PID 1's)."""
    live = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                state, _, group = Path(entry.path, "stat").read_text().rsplit(")", 1)[1].split()[:3]
            except (OSError, ValueError):
                continue  # gone meanwhile
            if int(group) == pgid and state != "Z":
                live.append(int(entry.name))
    return live


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads the process table from /proc")
@pytest.mark.parametrize("how", ["SIGTERM to the parent", "Ctrl-C to the process group"])
def test_a_signal_stops_the_workers_keeps_the_finished_rows_and_leaves_no_process(tiny, tmp_path, how):
    out = tmp_path / "out"
    log = out / "sweep.csv"
    # point 0 simulates 10 s of traffic (well under a second); points 1 and 2 simulate 12,000 and 12,001 s (~10 s each)
    cmd = [sys.executable, "-c", "from simulator.cli import main; main()", "sweep", str(tiny),
           "--grid", "workload.duration_s=10,12000,12001", "--workers", "2", "--out", str(out)]
    with (tmp_path / "stderr").open("wb") as stderr:  # a session of its own: its process group is its pid
        proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.DEVNULL, stderr=stderr, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while not (log.exists() and log.read_text().count("\n") >= 2):  # the header and point 0's row
            assert proc.poll() is None and time.monotonic() < deadline, (tmp_path / "stderr").read_text()
            time.sleep(0.02)
        signum = signal.SIGTERM if how.startswith("SIGTERM") else signal.SIGINT
        if signum == signal.SIGTERM:
            os.kill(proc.pid, signum)
        else:  # what a terminal's Ctrl-C does: every process of the foreground group gets SIGINT
            os.killpg(proc.pid, signum)
        assert proc.wait(timeout=30) == 128 + signum
        deadline = time.monotonic() + 30
        while _live_processes(proc.pid):  # the forkserver and resource tracker exit as the parent does
            assert time.monotonic() < deadline, _live_processes(proc.pid)
            time.sleep(0.02)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
        for pid in _live_processes(proc.pid):
            os.kill(pid, signal.SIGKILL)
    assert (tmp_path / "stderr").read_text().splitlines()[-1] == (
        f"sweep stopped by {signal.Signals(signum).name}: 1 of 3 points kept in {log}; --resume runs the rest")
    [row] = _rows(log)  # 10 s of chat-4k at 5× its base rate is 18 requests (seed 0), all served
    assert (row["point"], row["workload.duration_s"], row["requests"], row["completed"], row["error"]) == (
        "0", "10.0", "18", "18", "")


def test_a_sweep_names_the_points_whose_p99s_rest_on_a_few_requests(tiny):
    """helper-147: `kvsim compare` and `kvsim capacity` say where a p99 rests on fewer than 200 requests; a sweep
    printed ``meets_slo True`` over 24 without a word. One such point is said in full, several by their points
    and the fewest."""
    res = CliRunner().invoke(sweep, [str(tiny), "--grid", "workload.duration_s=5,10,200", "--workers", "1"])
    assert res.exit_code == 0, res.output
    df = pd.read_csv(io.StringIO(res.stdout), sep=r"\s+")
    few = df[df.requests < 200]
    assert len(few) == 2 and few.point.tolist() == [0, 1] and df.requests.iloc[2] >= 200
    top = 1 + few.requests.iloc[0] - 1 - int(0.99 * (few.requests.iloc[0] - 1))
    assert (f"note: points 0, 1 ran fewer than 200 requests (the fewest, {few.requests.iloc[0]}, at point 0): a p99 "
            f"over them lies between its {top} slowest, so one slow request can decide its meets_slo; a longer run "
            "(workload.duration_s) would give p99s that stand") in res.stderr
    res = CliRunner().invoke(sweep, [str(tiny), "--grid", "workload.duration_s=5,200", "--workers", "1"])
    assert "note: point 0: the workload has " in res.stderr


def test_a_sweep_says_where_the_queue_grew(tiny):
    """A point whose waiting queue grew through the steady window falls behind its load: its p99s hold for this
    run's length only. `queue_grows` says so (printed where a point has one), and a note names the points;
    `meets_slo` still weighs the p99s alone (`kvsim capacity` fails such a run)."""
    res = CliRunner().invoke(sweep, [str(tiny), "--grid", "workload.rate_scale=5,400", "--grid",
                                     "workload.duration_s=20", "--workers", "1"])
    assert res.exit_code == 0, res.output
    df = pd.read_csv(io.StringIO(res.stdout), sep=r"\s+")
    assert df.queue_grows.tolist() == [False, True]
    assert "note: point 1 (8xH100): arrivals outran admissions through the steady window (column queue_grows)" in \
        res.stderr
    calm = CliRunner().invoke(sweep, [str(tiny), "--grid", "workload.rate_scale=5", "--grid",
                                      "workload.duration_s=20", "--workers", "1", "--json"])
    assert json.loads(calm.stdout)[0]["queue_grows"] is False  # always in --json
    plain = CliRunner().invoke(sweep, [str(tiny), "--grid", "workload.rate_scale=5", "--grid",
                                       "workload.duration_s=20", "--workers", "1"])
    assert "queue_grows" not in plain.stdout and "queue grew" not in plain.stderr


def test_plot_sweep_joins_an_xpyd_fleets_points_across_its_pool_sizes():
    """helper-190: a sweep of ``disaggregation.prefill_nodes`` labels each point's fleet by its split (``8xH100-1P4D``,
    ``8xH100-2P4D``), and each label was its own series: four single points, no line, a legend of four "node kinds";
    its x axis and title read the raw key, and the title ran past the figure's edge, cut. One line a node kind now,
    the varied pool size a letter (``8xH100-xP4D``), the axis in words, the title wrapped to the axes."""
    df = pd.DataFrame({"disaggregation.prefill_nodes": [1, 1, 2, 2],
                       "hardware": ["8xH100-1P4D", "8xB200-1P4D-P8xH200", "8xH100-2P4D", "8xB200-2P4D-P8xH200"],
                       "ttft_p99_s": [6.35, 2.69, 2.83, 0.69], "meets_slo": [True] * 4})
    df.attrs.update(swept=["disaggregation.prefill_nodes"], scenario="disaggregated",
                    setting="Llama-3.1-70B on 8xH100 / 8xB200, TP8")
    fig, ax = plt.subplots(figsize=(9.5, 5.6))
    plot_sweep(df, "disaggregation.prefill_nodes", "ttft_p99_s", ax=ax)
    assert [line.get_label() for line in ax.lines] == ["8xH100-xP4D", "8xB200-xP4D-P8xH200"]
    assert [list(line.get_ydata()) for line in ax.lines] == [[6.35, 2.83], [2.69, 0.69]]
    assert ax.get_xlabel() == "prefill nodes (xPyD)"
    assert ax.get_title() == "disaggregated (Llama-3.1-70B on 8xH100 / 8xB200, TP8): p99 time to first token vs " \
        "prefill nodes"
    # a longer one (the raw key's words, 113 characters, ran to 1,050 px of a 1,045 px figure) wraps within it
    df.attrs.update(scenario="disaggregated-llama-3.1-70b-chat-and-agents")
    fig, ax = plt.subplots(figsize=(9.5, 5.6))
    plot_sweep(df, "disaggregation.prefill_nodes", "ttft_p99_s", ax=ax)
    fig.tight_layout()
    fig.canvas.draw()
    box = ax.title.get_window_extent()
    assert "\n" in ax.get_title() and box.x0 >= 0 and box.x1 <= fig.bbox.x1
    # both pools varied: one line a kind, both sizes letters; the other split names the decode pool in words
    both = pd.DataFrame({"disaggregation.prefill_nodes": [1, 2, 1, 2], "disaggregation.decode_nodes": [4, 4, 6, 6],
                         "hardware": ["8xH100-1P4D", "8xH100-2P4D", "8xH100-1P6D", "8xH100-2P6D"],
                         "ttft_p99_s": [6.0, 3.0, 5.0, 2.0]})
    both.attrs.update(swept=["disaggregation.prefill_nodes", "disaggregation.decode_nodes"])
    ax = plot_sweep(both, "disaggregation.prefill_nodes", "ttft_p99_s")
    assert [line.get_label() for line in ax.lines] == ["8xH100-xPyD, 4 decode nodes", "8xH100-xPyD, 6 decode nodes"]
    plt.close("all")


def test_a_sweep_says_which_points_run_prefix_affinity_without_a_cache(capsys):
    """helper-203: `kvsim run`, `capacity` and `compare` note that prefix-affinity beside cache.strategy = "none"
    routes as least-tokens; a sweep said nothing, and its rows of the two routers were the same figures. The note
    names the points (numbered as sweep.csv's `point`) before anything runs."""
    from simulator.cli.sweep import _say_affinity_without_cache
    from simulator.scenario import AFFINITY_WITHOUT_CACHE, CacheSection, RouterSection

    sc = load_scenario("chat-4k-h100")

    def point(router: str, cache: str) -> tuple[dict[str, object], object]:  # as `expand_grid` makes them
        return ({"router.name": router, "cache.strategy": cache},
                dataclasses.replace(sc, router=RouterSection(name=router), cache=CacheSection(strategy=cache)))

    grid = [point(r, c) for r in ("least-tokens", "prefix-affinity") for c in ("none", "prefix")]
    _say_affinity_without_cache(grid)
    assert capsys.readouterr().err == f"note: point 2: {AFFINITY_WITHOUT_CACHE}\n"
    _say_affinity_without_cache([point("prefix-affinity", "none")] * 2)
    assert capsys.readouterr().err == f"note: every point: {AFFINITY_WITHOUT_CACHE}\n"
    _say_affinity_without_cache([point("prefix-affinity", "none")])
    assert capsys.readouterr().err == f"note: point 0: {AFFINITY_WITHOUT_CACHE}\n"
    _say_affinity_without_cache([point("round-robin", "none"), point("prefix-affinity", "prefix")])
    assert capsys.readouterr().err == ""
