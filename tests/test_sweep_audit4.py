"""The fourth audit's findings on ``kvsim sweep``: a failing ``--dask`` that emptied sweep.csv, a
sweep.csv replaced without a word, ``disaggregation.*`` keys refused with a false message, keys no
row can show (report, billing, name; a generator's in a trace replay), values spelled differently
for one thing (H100 and 8xH100), hand-edited ``--resume`` rows, an empty ``--dask``, ``--out`` a
file, a row cut short, a byte-order mark, and a generator that draws nothing. Each is refused in one
line naming the option, key or file and what is allowed, exit 2, before sweep.csv is touched (the
contract of `tests.test_hostile_inputs`)."""

from __future__ import annotations

import csv
import sys
from pathlib import Path

import pytest
from click.testing import Result

from tests.test_hostile_inputs import BASE, error, kvsim, outcome, scenario, write_trace

DISAGG = BASE.replace("[cluster]\nhardware = [\"8xH100\"]\nnodes = 1\ntp = 1\n",
                      "[cluster]\nhardware = [\"8xH100\"]\nnodes = 2\ntp = 8\n"
                      "[disaggregation]\nprefill_nodes = 1\ndecode_nodes = 1\n")


def sweep(*args: object) -> Result:
    return kvsim("sweep", *args, "--workers", "1")


@pytest.fixture
def swept(tmp_path: Path) -> tuple[Path, Path]:
    """A finished two-point sweep: (scenario, its --out folder)."""
    sc, out = scenario(tmp_path), tmp_path / "sw"
    assert outcome(sweep(sc, "--grid", "cluster.nodes=1,2", "--out", out)) is None
    return sc, out


def _edit(log: Path, line: int, **cells: str) -> None:
    rows = list(csv.reader(log.open(newline="")))
    for column, value in cells.items():
        rows[line - 1][rows[0].index(column)] = value
    with log.open("w", newline="") as f:
        csv.writer(f, lineterminator="\n").writerows(rows)


# --- D: nothing is touched before what can fail is checked; a replaced sweep.csv is said ---------
def test_dask_missing_leaves_an_earlier_sweep_csv_as_it_was(swept, monkeypatch):
    sc, out = swept
    before = (out / "sweep.csv").read_bytes()
    monkeypatch.setitem(sys.modules, "dask.distributed", None)  # as without kvsim[dask]
    line = error(sweep(sc, "--grid", "cluster.nodes=1,2", "--dask", "tcp://127.0.0.1:1", "--out", out), "--dask")
    assert "pip install 'kvsim[dask]'" in line
    assert (out / "sweep.csv").read_bytes() == before


def test_an_unreachable_scheduler_leaves_sweep_csv_as_it_was(swept, monkeypatch):
    import dask.distributed

    def unreachable(address: str, timeout: str) -> None:
        raise OSError(f"Timed out trying to connect to {address} after {timeout}")

    sc, out = swept
    before = (out / "sweep.csv").read_bytes()
    monkeypatch.setattr(dask.distributed, "Client", unreachable)
    line = error(sweep(sc, "--grid", "cluster.nodes=1,2", "--dask", "tcp://127.0.0.1:1", "--out", out), "--dask")
    assert "cannot reach the Dask scheduler" in line
    assert (out / "sweep.csv").read_bytes() == before


def test_a_bad_grid_leaves_sweep_csv_as_it_was(swept):
    sc, out = swept
    before = (out / "sweep.csv").read_bytes()
    error(sweep(sc, "--grid", "cluster.nodes=1,0", "--out", out), "cluster.nodes")
    assert (out / "sweep.csv").read_bytes() == before


def test_replacing_an_earlier_sweep_csv_is_said(swept):
    sc, out = swept
    r = sweep(sc, "--grid", "cluster.nodes=1,2", "--out", out)
    assert outcome(r) is None
    assert f"{out / 'sweep.csv'}: holds 2 points of an earlier sweep; this sweep replaces it" in r.stderr
    assert "--resume" in r.stderr
    r = sweep(sc, "--grid", "cluster.nodes=1,2", "--out", out, "--resume")
    assert outcome(r) is None and "replaces" not in r.stderr


# --- N: an empty --dask ---------------------------------------------------------------------------
@pytest.mark.parametrize("address", ["", " "])
def test_an_empty_dask_address_is_refused(tmp_path, address):
    line = error(sweep(scenario(tmp_path), "--grid", "cluster.nodes=1", "--dask", address), "--dask")
    assert "must be a scheduler address, e.g. tcp://host:8786" in line


# --- I: keys of an optional table -----------------------------------------------------------------
def test_a_disaggregation_key_sweeps_when_the_scenario_has_the_table(tmp_path):
    out = tmp_path / "d"
    r = sweep(scenario(tmp_path, DISAGG), "--grid", "disaggregation.prefill_tp=4,8", "--out", out, "--json")
    assert outcome(r) is None
    assert "2 grid points, 4 simulations" in r.stderr  # two fleets a point: aggregated and 1P1D
    rows = list(csv.DictReader((out / "sweep.csv").open()))
    assert [(x["disaggregation.prefill_tp"], x["hardware"]) for x in rows] == [
        ("4", "8xH100"), ("4", "8xH100-1P1D"), ("8", "8xH100"), ("8", "8xH100-1P1D")]
    r = sweep(scenario(tmp_path, DISAGG), "--grid", "disaggregation.prefill_tp=4,8", "--out", out, "--resume")
    assert outcome(r) is None and "reused 2 finished points" in r.stderr


def test_a_disaggregation_key_without_the_table_says_so(tmp_path):
    line = error(sweep(scenario(tmp_path), "--grid", "disaggregation.prefill_nodes=1,2"), "disaggregation")
    assert "has no [disaggregation] table" in line and "is a value" not in line


# --- J: keys that cannot change a row -------------------------------------------------------------
@pytest.mark.parametrize(("grid", "why"), [
    ("billing.ttls=5m,7x", "not cache TTLs"),
    ("billing.profile=anthropic,openai", "not cache TTLs"),
    ("report.breakeven=true,false", "no report study"),
    ("name=a,b", "name is not in a sweep row"),
    ("description=a,b", "description is not in a sweep row"),
])
def test_a_key_no_row_shows_is_refused(tmp_path, grid, why):
    key = grid.partition("=")[0]
    line = error(sweep(scenario(tmp_path), "--grid", grid), f"--grid {key}")
    assert "cannot change a sweep row" in line and why in line


def test_a_generator_key_on_a_trace_replay_is_refused(tmp_path):
    write_trace(tmp_path / "t.csv", 5)
    sc = scenario(tmp_path, BASE.replace("duration_s = 5\n[workload.spec]\nname = \"chat-4k\"\n", 'trace = "t.csv"\n'))
    line = error(sweep(sc, "--grid", "workload.spec.rate=1,2"), "--grid workload.spec.rate")
    assert "replays a trace" in line and "workload.rate_scale" in line
    assert outcome(sweep(sc, "--grid", "workload.rate_scale=1,2")) is None


# --- K: one value under two spellings -------------------------------------------------------------
@pytest.mark.parametrize(("grid", "both"), [
    ("cluster.hardware=H100,8xH100", "'H100' and '8xH100', both 8xH100"),
    ("cluster.nodes=1,01", "'1' and '01', both 1"),
    ("cache.layout=fp8,native+fp8", "'fp8' and 'native+fp8', both fp8"),
])
def test_one_value_under_two_spellings_is_refused(tmp_path, grid, both):
    key = grid.partition("=")[0]
    line = error(sweep(scenario(tmp_path), "--grid", grid), f"--grid {key}")
    assert "must name each value once" in line and both in line


def test_distinct_values_still_sweep(tmp_path):
    assert outcome(sweep(scenario(tmp_path), "--grid", "cache.layout=native,fp8")) is None


# --- L: hand-edited rows under --resume -----------------------------------------------------------
@pytest.mark.parametrize(("line", "cells", "column", "allowed"), [
    (2, {"ttft_p99_s": "999"}, "meets_slo", "False for the row's figures and the SLOs"),
    (3, {"requests": "-5"}, "requests", "an integer >= 0"),
    (3, {"meets_slo": "maybe"}, "meets_slo", "True or False"),
    (2, {"ttft_p99_s": "fast"}, "ttft_p99_s", "a finite number >= 0"),
    (2, {"goodput_fraction": "1.5"}, "goodput_fraction", "in [0, 1]"),
    (2, {"completed": "2.5"}, "completed", "an integer >= 0"),
    (2, {"requests": "0"}, "requests", "the sweep writes completed + rejected + timed_out = "),
])
def test_resume_refuses_a_hand_edited_row(swept, line, cells, column, allowed):
    sc, out = swept
    log = out / "sweep.csv"
    _edit(log, line, **cells)
    before = log.read_bytes()
    msg = error(sweep(sc, "--grid", "cluster.nodes=1,2", "--out", out, "--resume"), str(log))
    assert f"line {line}: --resume: column {column}: got" in msg and allowed in msg
    assert log.read_bytes() == before


def test_resume_refuses_a_row_cut_short(swept):
    sc, out = swept
    log = out / "sweep.csv"
    lines = log.read_text().splitlines(keepends=True)
    lines[2] = lines[2].rsplit(",", 2)[0] + "\n"
    log.write_text("".join(lines))
    msg = error(sweep(sc, "--grid", "cluster.nodes=1,2", "--out", out, "--resume"), str(log))
    assert "line 3: --resume: has 24 fields where the header has 26" in msg and "digest" not in msg


def test_resume_accepts_a_byte_order_mark(swept):
    sc, out = swept
    log = out / "sweep.csv"
    log.write_bytes(b"\xef\xbb\xbf" + log.read_bytes())
    r = sweep(sc, "--grid", "cluster.nodes=1,2", "--out", out, "--resume")
    assert outcome(r) is None and "reused 2 finished points" in r.stderr


# --- P: --out a file, a generator that draws nothing ----------------------------------------------
def test_out_a_file_names_the_option(tmp_path):
    (tmp_path / "afile.txt").write_text("mine\n")
    line = error(sweep(scenario(tmp_path), "--grid", "cluster.nodes=1", "--out", tmp_path / "afile.txt"), "--out")
    assert "exists and is not a folder" in line
    assert (tmp_path / "afile.txt").read_text() == "mine\n"


@pytest.mark.parametrize("grid", ["cluster.nodes=1,2", "workload.duration_s=5,0.001"])
def test_a_generator_that_draws_nothing_is_refused_before_any_point_runs(tmp_path, grid):
    sc = scenario(tmp_path, BASE if "duration" in grid else BASE.replace("duration_s = 5", "duration_s = 0.001"))
    r = sweep(sc, "--grid", grid)
    line = error(r, "drew no request")
    assert "sweep point" in line and "duration_s=0.001" in line and "sweeping" not in r.stderr


# --- F: an earlier sweep's charts do not outlive its rows; no write through a link; --out "" -------------
def test_an_earlier_sweeps_charts_go_when_a_new_sweep_writes(swept):
    sc, out = swept
    old = out / "sweep-goodput_fraction-vs-cache.layout.png"  # a chart of a key this grid no longer has
    old.write_bytes(b"old chart")
    note = out / "notes.txt"
    note.write_text("mine")
    assert outcome(sweep(sc, "--grid", "cluster.nodes=1,3", "--out", out)) is None
    assert not old.exists() and note.read_text() == "mine"
    assert (out / "sweep-ttft_p99_s-vs-cluster.nodes.png").is_file()


def test_a_sweep_never_writes_through_a_symbolic_link(swept, tmp_path):
    sc, out = swept
    victim = tmp_path / "victim.txt"
    victim.write_text("keep")
    (out / "sweep.parquet").unlink(missing_ok=True)
    (out / "sweep.parquet").symlink_to(victim)
    line = error(sweep(sc, "--grid", "cluster.nodes=1,2", "--out", out), "--out")
    assert "sweep.parquet is a symbolic link" in line and victim.read_text() == "keep"


def test_an_empty_out_is_refused(tmp_path):
    line = error(sweep(scenario(tmp_path), "--grid", "cluster.nodes=1,2", "--out", ""), "--out")
    assert "--out: must name a folder (got '')" in line


def test_resume_says_the_grid_keys_come_in_another_order(tmp_path):
    """helper-115: the same two --grid keys in the other order read "written by an older kvsim, before the columns
    trace_rows_skipped, trace_cut_at_s" (the file had them): the difference was empty, within those columns."""
    sc, out = scenario(tmp_path), tmp_path / "sw"
    assert outcome(sweep(sc, "--grid", "cluster.nodes=1,2", "--grid", "cluster.memory_utilization=0.8",
                         "--out", out)) is None
    log = out / "sweep.csv"
    before = log.read_bytes()
    msg = error(sweep(sc, "--grid", "cluster.memory_utilization=0.8", "--grid", "cluster.nodes=1,2", "--out", out,
                      "--resume"), str(log))
    assert msg.endswith("--resume: its grid keys come in another order than this sweep's: give the --grid options in "
                        "its order (cluster.nodes, cluster.memory_utilization), or write elsewhere")
    assert log.read_bytes() == before
    # a file from before the rejected column (2026-12-05) is said so, naming the one it lacks
    rows = list(csv.reader(log.open(newline="")))
    at = rows[0].index("rejected")
    with log.open("w", newline="") as f:
        csv.writer(f, lineterminator="\n").writerows([r[:at] + r[at + 1:] for r in rows])
    msg = error(sweep(sc, "--grid", "cluster.nodes=1,2", "--grid", "cluster.memory_utilization=0.8", "--out", out,
                      "--resume"), str(log))
    assert msg.endswith("--resume: written by an older kvsim, before the columns rejected; write elsewhere, or "
                        "delete it to run every point again")


def test_cluster_nodes_is_refused_where_no_aggregated_fleet_runs(tmp_path):
    """helper-164: with compare_aggregated = false a sweep of cluster.nodes ran one xPyD fleet at every point,
    identical rows and no word; the sweep says which keys size that fleet. Beside a sweep of compare_aggregated
    itself the aggregated fleet runs at some points, so it is kept."""
    alone = scenario(tmp_path, DISAGG.replace("decode_nodes = 1\n", "decode_nodes = 1\ncompare_aggregated = false\n"))
    line = error(sweep(alone, "--grid", "cluster.nodes=2,4"), "--grid cluster.nodes")
    assert line.endswith("runs its xPyD fleet alone (disaggregation.compare_aggregated = false), whose nodes are "
                         "disaggregation.prefill_nodes and decode_nodes; sweep those")
    assert "cannot change a sweep row" in line
    # nor beside a grid of compare_aggregated = false alone (helper-170); with true among its values it runs
    line = error(sweep(alone, "--grid", "cluster.nodes=2,4", "--grid", "disaggregation.compare_aggregated=false"),
                 "--grid cluster.nodes")
    assert "runs its xPyD fleet alone" in line


def test_a_sweep_row_counts_its_preemptions(tmp_path) -> None:
    """helper-169: a sweep over admission or preemption could not show the preemptions those settings move;
    helper-171: the column 04b5044 added was never filled. One 1xH100 at 23% of its memory preempts under 60 s of
    chat at 20x its rate (the summary's count, its requests' sum: tests/engine/test_steady.py), and none at 1x."""
    import json

    text = (BASE.replace('hardware = ["8xH100"]', 'hardware = ["1xH100"]\nmemory_utilization = 0.23')
            .replace('strategy = "prefix"', 'strategy = "none"').replace("duration_s = 5", "duration_s = 60"))
    r = sweep(scenario(tmp_path, text), "--grid", "workload.rate_scale=1,20", "--json")
    assert outcome(r) is None
    rows = json.loads(r.stdout)
    assert [row["preemptions"] for row in rows] == [0, 50]
    printed = sweep(scenario(tmp_path, text), "--grid", "workload.rate_scale=1,20").stdout
    assert "preemptions" in printed.splitlines()[0]
    quiet = sweep(scenario(tmp_path, text), "--grid", "workload.rate_scale=1").stdout
    assert "preemptions" not in quiet.splitlines()[0]


def test_each_row_carries_the_slos_its_meets_slo_is_judged_against(swept, tmp_path):
    """sweep.csv did not record the SLOs of ``meets_slo`` unless swept (traceability): every row now has
    ``slo_ttft_p99_s`` and ``slo_tpot_p99_s``, the point's ``[slo]``; the printed table shows them only
    where the grid sweeps one; a row whose SLO was edited is refused on --resume, and a file from
    before the columns is said to be older."""
    sc, out = swept
    log = out / "sweep.csv"
    rows = list(csv.DictReader(log.open(newline="")))
    assert [(r["slo_ttft_p99_s"], r["slo_tpot_p99_s"]) for r in rows] == [("2.0", "0.1")] * 2
    plain = sweep(sc, "--grid", "cluster.nodes=1,2")
    assert outcome(plain) is None and "slo_ttft_p99_s" not in plain.stdout and "meets_slo" in plain.stdout
    both = sweep(sc, "--grid", "slo.ttft_p99_s=0.001,2", "--out", tmp_path / "slo")
    assert outcome(both) is None
    header = both.stdout.splitlines()[0].split()
    assert "slo_ttft_p99_s" in header and "slo_tpot_p99_s" not in header
    swept_rows = list(csv.DictReader((tmp_path / "slo" / "sweep.csv").open(newline="")))
    assert [(r["slo.ttft_p99_s"], r["slo_ttft_p99_s"], r["meets_slo"]) for r in swept_rows] == [
        ("0.001", "0.001", "False"), ("2.0", "2.0", "True")]
    before = log.read_bytes()
    _edit(log, 2, slo_ttft_p99_s="9.0")
    msg = error(sweep(sc, "--grid", "cluster.nodes=1,2", "--out", out, "--resume"), str(log))
    assert msg.endswith("line 2: --resume: column slo_ttft_p99_s: got '9.0', the sweep writes the point's [slo] "
                        "ttft_p99_s = 2; delete that line to run its point again")
    log.write_bytes(before)
    rows = list(csv.reader(log.open(newline="")))
    at = rows[0].index("slo_ttft_p99_s")
    with log.open("w", newline="") as f:
        csv.writer(f, lineterminator="\n").writerows([r[:at] + r[at + 2:] for r in rows])
    msg = error(sweep(sc, "--grid", "cluster.nodes=1,2", "--out", out, "--resume"), str(log))
    assert msg.endswith("--resume: written by an older kvsim, before the columns slo_ttft_p99_s, slo_tpot_p99_s; "
                        "write elsewhere, or delete it to run every point again")
