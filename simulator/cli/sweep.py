"""``sweep``: a scenario over a grid of its keys, in parallel, as a table, CSV and charts.

With ``--out`` each point's rows reach ``sweep.csv`` as the point finishes (`simulator.sweep`),
so ``--resume`` can pick up after a crash, a ``kill`` or a Ctrl-C. While the points run, SIGINT
and SIGTERM raise `Stopped` in the main thread: the workers are terminated on the way out, the
finished rows stay on disk, and the command exits 128 + the signal number (130, 143) with one
line saying how many points are kept. Points that failed leave their error in the ``error``
column, and the command exits 2 with one line counting them once the others are done.
"""

from __future__ import annotations

import csv
import signal
import sys
from dataclasses import replace
from pathlib import Path

import click
import pandas as pd

from hardware.catalog import price_note
from simulator.cli.common import (
    KvsimClickError,
    OutPath,
    Stopped,
    echo_json,
    handle_errors,
    note,
    records,
    refuse_links,
    stop_on_signals,
    warn,
)
from simulator.cli.options import USD_PER_GPU_HOUR, priced, seed_option
from simulator.errors import ConfigError
from simulator.files import shown_path
from simulator.scenario import Scenario, load_scenario

DEFAULT_PLOTS = ("ttft_p99_s", "usd_per_million_output_tokens")
_SUMMARY_ERROR_CHARS = 120  # of the first failed point's error, in the one-line summary


def parse_grid(specs: tuple[str, ...]) -> dict[str, list[str]]:
    """``("cluster.nodes=1,2", "cache.layout=native,fp8")`` -> ``{"cluster.nodes": ["1", "2"], ...}``."""
    grid: dict[str, list[str]] = {}
    for spec in specs:
        key, eq, values = spec.partition("=")
        key = key.strip()
        items = [v.strip() for v in values.split(",")]
        if not eq or not key or not all(items):
            raise ConfigError(f"--grid must be KEY=V1,V2,... with no empty value (got {spec!r})")
        if key in grid:
            raise ConfigError(f"--grid {key}: given twice; list all its values in one --grid")
        grid[key] = items
    if not grid:
        raise ConfigError("sweep needs at least one --grid KEY=V1,V2,...")
    return grid


def parse_plots(specs: tuple[str, ...], grid: dict[str, list[str]]) -> list[tuple[str, str]]:
    """``METRIC[:KEY]`` -> (metric, key); KEY defaults to the first grid key."""
    from simulator.sweep import METRICS

    first = next(iter(grid))
    plots = []
    for spec in specs or DEFAULT_PLOTS:
        metric, _, key = spec.partition(":")
        key = key or first
        if metric not in METRICS:
            raise ConfigError(f"--plot {spec}: unknown metric {metric!r}; valid: {', '.join(METRICS)}")
        if key not in grid:
            raise ConfigError(f"--plot {spec}: {key!r} is not a grid key; grid keys: {', '.join(grid)}")
        plots.append((metric, key))
    return plots


def _echo_table(df: pd.DataFrame) -> None:
    click.echo(df.to_string(index=False, float_format=lambda x: f"{x:,.4g}"))


@click.command("sweep")
@click.argument("scenario", type=click.Path(path_type=Path))
@click.option("--grid", "grids", multiple=True, metavar="KEY=V1,V2,...",
              help="a dotted scenario key and its values, e.g. cluster.nodes=1,2,4 (repeat for a cross product)")
@click.option("--workers", type=click.IntRange(min=1), help="worker processes  [default: CPU count]")
@click.option("--dask", "dask_address", metavar="ADDRESS",
              help="run the points on this Dask scheduler instead, e.g. tcp://host:8786 (needs kvsim[dask])")
@click.option("--out", type=OutPath(),
              help="write sweep.csv (each point's rows as it finishes; sweep.parquet at the end where pyarrow is "
                   "installed) and the charts here")
@click.option("--resume", is_flag=True,
              help="keep the points --out's sweep.csv already holds without an error and run only the rest")
@click.option("--plot", "plots", multiple=True, metavar="METRIC[:KEY]",
              help="chart METRIC against grid KEY (default: the first grid key) into --out (needed); repeatable  "
                   f"[default: {', '.join(DEFAULT_PLOTS)}]")
@seed_option("override the scenario's seed at every point (or sweep it: --grid seed=0,1,2)")
@USD_PER_GPU_HOUR
@click.option("--json", "as_json", is_flag=True, help="print the rows as JSON instead of a table")
@handle_errors
def sweep(scenario: Path, grids: tuple[str, ...], workers: int | None, dask_address: str | None,
          out: Path | None, resume: bool, plots: tuple[str, ...], seed: int | None, usd_per_gpu_hour: str | None,
          as_json: bool) -> None:
    """Run SCENARIO at every point of the --grid cross product; one row per point and node kind.

    \b
    kvsim sweep scenarios/chat-4k-h100.toml --grid cluster.nodes=1,2,4 \\
        --grid workload.rate_scale=10,20,40 --out sweep --plot goodput_fraction

    A point that raises, or whose worker process dies, is recorded with its error and the
    others go on; the command then exits 2 naming how many failed. Ctrl-C or SIGTERM stops the
    workers and keeps the finished rows in sweep.csv; --resume runs only what is missing.
    --plot and --resume need --out.
    """
    from simulator.sweep import SLO_COLUMNS, check_dask, expand_grid, fleets, resumable_points, run_sweep

    grid = parse_grid(grids)
    charts = parse_plots(plots, grid)
    if resume and not out:
        raise ConfigError("--resume needs --out DIR: the folder whose sweep.csv it continues")
    if plots and not out:
        raise ConfigError(f"--plot {plots[0]}: needs --out DIR, the folder its chart is drawn in; add --out or "
                          "drop --plot")
    if dask_address is not None:
        check_dask(dask_address)  # before anything is read or written
    if out and out.exists() and not out.is_dir():
        raise ConfigError(f"--out {out}: exists and is not a folder")
    if seed is not None and "seed" in grid:
        raise ConfigError(f"--seed {seed}: the grid sweeps 'seed' too (--grid seed=...); give one of them")
    sc = load_scenario(scenario)
    if seed is not None:
        sc = replace(sc, seed=seed)
    sc = priced(sc, usd_per_gpu_hour)
    points = expand_grid(sc, grid)  # validates every point before anything runs
    n = len(points)
    log = out / "sweep.csv" if out else None
    reused = set(resumable_points(sc, grid, points, log)) if resume and log else set()
    runs = sum(len(fleets(p)) for i, (_, p) in enumerate(points) if i not in reused)
    click.echo(f"scenario {sc.name}: {n} grid points, {runs} simulations"
               if not reused else f"scenario {sc.name}: {n} grid points, {len(reused)} reused from {log}, "
               f"{n - len(reused)} to run ({runs} simulations)", err=True)
    click.echo(price_note(sc.priced_nodes()) + ("" if "cluster.usd_per_gpu_hour" not in grid else
                                         " (cluster.usd_per_gpu_hour swept)"), err=True)
    _say_affinity_without_cache(points)
    if out:
        out.mkdir(parents=True, exist_ok=True)
    earlier = _logged_points(log) if log and not resume else 0
    if earlier:  # as the README says: replaced, but never without a word
        click.echo(f"{log}: holds {earlier} points of an earlier sweep; this sweep replaces it "
                   "(--resume would keep its finished points)", err=True)
    if out:
        _clear_derived(out, charts)
    try:
        with stop_on_signals(), click.progressbar(length=n, label="sweeping", file=sys.stderr) as bar:
            df = run_sweep(sc, grid, workers=workers, dask_address=dask_address, csv_path=log, resume=resume,
                           progress=lambda f: bar.update(round(f * n) - bar.pos), points=points)
    except Stopped as stop:
        name = signal.Signals(stop.signum).name
        if log:
            click.echo(f"sweep stopped by {name}: {_logged_points(log)} of {n} points kept in {log}; "
                       "--resume runs the rest", err=True)
        else:
            click.echo(f"sweep stopped by {name}: nothing kept without --out", err=True)
        click.get_current_context().exit(128 + stop.signum)
    if df.attrs["reused_points"]:
        click.echo(f"reused {df.attrs['reused_points']} finished points from {log}", err=True)
    failed = df[df.error != ""].drop_duplicates("point")
    quiet = _say_left_out(df)
    if not (df.queue_grows == True).any():  # noqa: E712  # (a failed point's cell is empty): said where it is
        quiet.append("queue_grows")
    if not (pd.to_numeric(df.preemptions, errors="coerce") > 0).any():  # printed where a point preempted
        quiet.append("preemptions")
    quiet += [c for c in SLO_COLUMNS if df[c].nunique() <= 1]  # printed where the grid sweeps an SLO
    shown = df.drop(columns=["digest"] + ([] if len(failed) else ["error"]))
    if as_json:
        echo_json(records(shown))
    else:
        _echo_table(shown.drop(columns=quiet))
    _say_few_requests(df)
    _say_queue_grew(df)
    if out:
        _write(df, out, charts)
    if len(failed):
        first = failed.iloc[0]
        error = str(first.error)
        if len(error) > _SUMMARY_ERROR_CHARS:
            error = error[:_SUMMARY_ERROR_CHARS - 1] + "…"
        where = f"their rows in {log} carry the error" if log else "their rows carry the error"
        raise KvsimClickError(f"{len(failed)} of {n} sweep points failed; {where} (point {first.point}: {error})")


def _say_affinity_without_cache(points: list[tuple[dict[str, object], Scenario]]) -> None:
    """A note on stderr naming the points that run router prefix-affinity beside ``cache.strategy = "none"``, which
    route as least-tokens does, draw for draw (`scenario.AFFINITY_WITHOUT_CACHE`, as `kvsim run`, `capacity` and
    `compare` say it; helper-203: a sweep's rows of the two routers were the same figures, without a word)."""
    from simulator.scenario import AFFINITY_WITHOUT_CACHE

    which = [str(i) for i, (_, p) in enumerate(points) if p.affinity_without_cache]
    if which:
        where = ("every point" if len(which) == len(points) > 1 else
                 f"point{'s' if len(which) > 1 else ''} {', '.join(which)}")
        note(f"{where}: {AFFINITY_WITHOUT_CACHE}")


def _say_queue_grew(df: pd.DataFrame) -> None:
    """A note on stderr naming the points (and kinds) whose arrivals outran admissions through the steady window: their
    fleet falls behind the load, so their p99s, and a ``meets_slo`` True, hold for this run's length only
    (`kvsim capacity` fails such a run; ``meets_slo`` weighs the p99s alone: `planning.queue_grew_note`)."""
    from simulator.planning import queue_grew_note

    grew = df[df.queue_grows == True]  # noqa: E712  # (a failed point's cell is empty)
    if grew.empty:
        return
    which = ", ".join(f"{p} ({hw})" for p, hw in zip(grew.point, grew.hardware, strict=True))
    met = int(grew.meets_slo.sum())
    note(queue_grew_note(f"point{'s' if len(grew) > 1 else ''} {which}", f"{met} of them" if met else ""))


def _say_few_requests(df: pd.DataFrame) -> None:
    """A note on stderr naming the points whose p99s, and so ``meets_slo``, rest on fewer than `FEW_FOR_P99`
    requests (`planning.few_requests_note`, as `kvsim compare` and `kvsim capacity` say it; helper-147: a sweep
    said ``meets_slo True`` over 24 requests without a word)."""
    from simulator.planning import FEW_FOR_P99, few_requests_note

    ran = df[df.error == ""].drop_duplicates("point")
    few = ran[(ran.requests > 0) & (ran.requests < FEW_FOR_P99)]
    if few.empty:
        return
    fewest = few.sort_values("requests", kind="stable").iloc[0]
    least = int(fewest.requests)
    said = few_requests_note(least, decides="its meets_slo", longer="workload.duration_s")
    points = ", ".join(map(str, few.point))
    if len(few) == 1:
        note(f"point {points}: {said}")
    else:  # the fewest's figures stand for all
        note(f"points {points} ran fewer than {FEW_FOR_P99} requests (the fewest, {least:,}, at point "
             f"{fewest.point}): {str(said).split(': ', 1)[1]}")


def _say_left_out(df: pd.DataFrame) -> list[str]:
    """Warn on stderr, once a column, of what the points' replays left out of their traces, as `kvsim run`
    does: rows skipped (``trace_rows_skipped``) and a window that cut the trace (``trace_cut_at_s``). Returns
    the columns no point that ran has anything in: the printed table leaves them out (sweep.csv and --json
    keep them)."""
    from workloads.workload import SKIPPED_WHY, cut_note, skipped_note

    ran = df[df.error == ""].drop_duplicates("point")
    points = df.point.nunique()
    quiet = []
    for column, some, one, many in (
            ("trace_rows_skipped", ran.trace_rows_skipped > 0, lambda v: skipped_note(int(v)),
             lambda lo, hi: f"trace rows skipped ({lo:,.0f} to {hi:,.0f}: column trace_rows_skipped; {SKIPPED_WHY})"),
            ("trace_cut_at_s", ran.trace_cut_at_s.notna(), cut_note,
             lambda lo, hi: f"the trace cut at {lo:,g} to {hi:,g} s of replay (column trace_cut_at_s; "
                            "workload.duration_s; its later rows not replayed)")):
        values = ran[column][some]
        if values.empty:
            quiet.append(column)
            continue
        line = one(values.iloc[0]) if values.nunique() == 1 else many(values.min(), values.max())
        where = ("" if points == 1 else ", at every point" if len(values) == points else
                 f", at every point that ran ({len(values)} of {points})" if len(values) == len(ran) else
                 f", at {len(values)} of {points} points")
        warn(f"workload{where}: {line}")
    return quiet


CHART_FILES = "sweep-*-vs-*.png"  # the names `_write` draws charts under


def _clear_derived(out: Path, charts: list[tuple[str, str]]) -> None:
    """Before the sweep writes: refuse a symbolic link among the names it will write (kvsim never writes
    through one: `OutputFolder`), then remove an earlier sweep's parquet and charts, which describe that
    sweep's rows: this sweep draws its own from its finished rows, and an interrupted one leaves its CSV
    alone rather than beside charts that look current."""
    names = ["sweep.csv", "sweep.parquet", *(f"sweep-{metric}-vs-{key}.png" for metric, key in charts)]
    refuse_links(out, names, f"--out {shown_path(out)}")
    for f in [out / "sweep.parquet", *out.glob(CHART_FILES)]:
        if f.is_file() and not f.is_symlink():
            f.unlink()


def _logged_points(log: Path) -> int:
    """How many grid points have rows in the CSV log (0 before it exists)."""
    if not log.is_file():
        return 0
    with log.open(newline="", encoding="utf-8-sig", errors="replace") as f:
        return len({row.get("point") for row in csv.DictReader(f)})


def _write(df: pd.DataFrame, out: Path, charts: list[tuple[str, str]]) -> None:
    import matplotlib.pyplot as plt

    from simulator.charts import plot_sweep

    written = [out / "sweep.csv"]  # written by run_sweep as the points finished
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        pass
    else:
        df.to_parquet(out / "sweep.parquet", index=False)
        written.append(out / "sweep.parquet")
    for metric, key in charts:
        fig, ax = plt.subplots(figsize=(9.5, 5.6))
        plot_sweep(df, key, metric, ax=ax)
        path = out / f"sweep-{metric}-vs-{key}.png"
        fig.tight_layout()
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)
    click.echo("wrote " + ", ".join(str(p) for p in written), err=True)
