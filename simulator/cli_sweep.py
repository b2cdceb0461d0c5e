"""``sweep``: a scenario over a grid of its keys, in parallel, as a table, CSV and charts."""

from __future__ import annotations

import sys
from pathlib import Path

import click
import pandas as pd

from simulator.cli_common import handle_errors
from simulator.errors import ConfigError
from simulator.scenario import load_scenario

DEFAULT_PLOTS = ("ttft_p99_s", "usd_per_million_output_tokens")


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
@click.option("--out", type=click.Path(path_type=Path), help="write sweep.csv (and .parquet) and the charts here")
@click.option("--plot", "plots", multiple=True, metavar="METRIC[:KEY]",
              help="chart METRIC against grid KEY (default: the first grid key); repeatable  "
                   f"[default: {', '.join(DEFAULT_PLOTS)}]")
@handle_errors
def sweep(scenario: Path, grids: tuple[str, ...], workers: int | None, dask_address: str | None,
          out: Path | None, plots: tuple[str, ...]) -> None:
    """Run SCENARIO at every point of the --grid cross product; one row per point and node kind.

    \b
    kvsim sweep scenarios/chat-4k-h100.toml --grid cluster.nodes=1,2,4 \\
        --grid workload.rate_scale=10,20,40 --out sweep --plot goodput_fraction
    """
    from simulator.sweep import expand_grid, run_sweep

    grid = parse_grid(grids)
    charts = parse_plots(plots, grid)
    sc = load_scenario(scenario)
    points = expand_grid(sc, grid)  # validates every point before anything runs
    n = len(points)
    runs = sum(len(p.cluster.hardware) for _, p in points)
    click.echo(f"scenario {sc.name}: {n} grid points, {runs} simulations", err=True)
    with click.progressbar(length=n, label="sweeping", file=sys.stderr) as bar:
        df = run_sweep(sc, grid, workers=workers, dask_address=dask_address,
                       progress=lambda f: bar.update(round(f * n) - bar.pos))
    _echo_table(df)
    if out:
        _write(df, out, charts)


def _write(df: pd.DataFrame, out: Path, charts: list[tuple[str, str]]) -> None:
    import matplotlib.pyplot as plt

    from simulator.charts import plot_sweep

    out.mkdir(parents=True, exist_ok=True)
    written = [out / "sweep.csv"]
    df.to_csv(written[0], index=False)
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        pass
    else:
        df.to_parquet(out / "sweep.parquet", index=False)
        written.append(out / "sweep.parquet")
    for metric, key in charts:
        fig, ax = plt.subplots(figsize=(9.5, 4.8))
        plot_sweep(df, key, metric, ax=ax)
        path = out / f"sweep-{metric}-vs-{key}.png"
        fig.tight_layout()
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)
    click.echo("wrote " + ", ".join(str(p) for p in written), err=True)
