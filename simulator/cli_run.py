"""Scenario commands: ``run`` (simulate and write the report) and ``capacity`` (size fleets)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import click
import pandas as pd

from simulator.cli_common import handle_errors
from simulator.scenario import load_scenario

SCENARIO_ARG = click.argument("scenario", required=False, type=click.Path(path_type=Path))


@contextmanager
def _progress(label: str) -> Iterator[Callable[[float], None]]:
    """A click progress bar driven by a fraction in [0, 1]."""
    with click.progressbar(length=1000, label=label, file=sys.stderr) as bar:
        def update(fraction: float) -> None:
            bar.update(int(fraction * 1000) - bar.pos)

        yield update
        bar.update(1000 - bar.pos)


def _echo_table(df: pd.DataFrame) -> None:
    click.echo(df.to_string(index=False, float_format=lambda x: f"{x:,.3g}"))


@click.command("run")
@SCENARIO_ARG
@click.option("--out", type=click.Path(path_type=Path), default=Path("report"), show_default=True,
              help="report folder")
@click.option("--seed", type=click.IntRange(min=0), help="override the scenario's seed")
@click.option("--trace", type=click.Path(path_type=Path), help="replay this trace file instead of the workload")
@handle_errors
def run_cmd(scenario: Path | None, out: Path, seed: int | None, trace: Path | None) -> None:
    """Simulate SCENARIO (default: scenarios/default.toml) and write its report folder.

    SCENARIO is a file or the name of a shipped one (`kvsim run capacity-plan`).
    """
    from dataclasses import replace

    from simulator.planning import plan_capacity
    from simulator.report import write_report
    from simulator.study import run_scenario

    sc = load_scenario(scenario)
    if trace is not None:
        sc = replace(sc, workload=replace(sc.workload, trace=str(trace.resolve())))
    click.echo(f"scenario {sc.name}: {sc.description}", err=True)
    with _progress("simulating") as update:
        result = run_scenario(sc, seed, progress=update)
    plan = None
    if sc.report.capacity:
        click.echo("capacity search:", err=True)
        plan = plan_capacity(sc, seed=seed, on_step=lambda m: click.echo(f"  {m}", err=True))
    write_report(result, out, plan, on_step=lambda m: click.echo(m, err=True))
    _echo_table(result.headline())
    if plan is not None:
        click.echo()
        _echo_table(plan[["hardware", "nodes", "memory_floor_nodes", "usd_per_hour", "usd_per_million_output_tokens",
                          "binding", "headroom_scale"]])
    click.echo(f"report written to {out / 'summary.md'}")


@click.command("capacity")
@SCENARIO_ARG
@click.option("--slo-ttft-p99", type=click.FloatRange(min=0, min_open=True), help="seconds (default: scenario's)")
@click.option("--slo-tpot-p99", type=click.FloatRange(min=0, min_open=True), help="seconds (default: scenario's)")
@click.option("--hardware", help="node kinds, comma-separated (default: the scenario's), e.g. H100,H200,B200")
@click.option("--seed", type=click.IntRange(min=0), help="override the scenario's seed")
@click.option("--out", type=click.Path(path_type=Path), help="write capacity.csv and capacity.png here")
@handle_errors
def capacity_cmd(scenario: Path | None, slo_ttft_p99: float | None, slo_tpot_p99: float | None,
                 hardware: str | None, seed: int | None, out: Path | None) -> None:
    """The smallest fleet of each node kind that meets the SLOs at SCENARIO's load."""
    from dataclasses import replace

    from simulator.charts import capacity_figure
    from simulator.planning import plan_capacity

    sc = load_scenario(scenario)
    kinds = None
    if hardware:
        sc = replace(sc, cluster=replace(sc.cluster, hardware=tuple(h for h in hardware.split(",") if h)))
        sc.validate()
        kinds = [n.key for n in sc.nodes()]
    plan = plan_capacity(sc, hardware=kinds, ttft_p99_s=slo_ttft_p99, tpot_p99_s=slo_tpot_p99, seed=seed,
                         on_step=lambda m: click.echo(f"  {m}", err=True))
    _echo_table(plan)
    if out:
        out.mkdir(parents=True, exist_ok=True)
        plan.to_csv(out / "capacity.csv", index=False)
        capacity_figure(plan, sc.name).savefig(out / "capacity.png", dpi=110)
        click.echo(f"wrote {out / 'capacity.csv'} and {out / 'capacity.png'}")
