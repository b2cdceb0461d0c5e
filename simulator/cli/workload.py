"""``kvsim workload``: describe and generate workloads (a thin shell over `workloads`)."""

from __future__ import annotations

from pathlib import Path

import click
import pandas as pd

from simulator.cli.common import echo_json, handle_errors, records
from simulator.cli.options import duration_option, seed_option
from simulator.errors import ConfigError
from workloads import load_workload, write_workload
from workloads.traces.native import check_suffix


@click.group("workload")
def workload() -> None:
    """Describe and generate request workloads."""


@workload.command("describe")
@click.argument("spec")
@seed_option("seed for generated workloads", default=0)
@duration_option("seconds to generate or replay (default: the workload's)")
@click.option("--format", "format_", default=None, help="trace format (azure, burstgpt, kvsim, mooncake)")
@click.option("--skip-bad-rows", is_flag=True, help="skip malformed trace rows (counted); default: stop")
@click.option("--json", "as_json", is_flag=True, help="print the summary as JSON")
@handle_errors
def describe(
    spec: str, seed: int, duration_s: float | None, format_: str | None, skip_bad_rows: bool, as_json: bool
) -> None:
    """Summarise SPEC: a generator name (chat-4k, code-repo-128k, synthetic), a TOML file with [workload]
    (a generator table, a mixture's with its components, or a scenario's with [workload.spec] or trace),
    or a trace file. Azure and BurstGPT traces carry no prefix ids: their prefix reuse is unknown (NaN)."""
    w = load_workload(
        spec, seed=seed, duration_s=duration_s, format=format_, on_error="skip" if skip_bad_rows else "stop"
    )
    summary = w.summary()
    if as_json:  # one record, as every --json table: snake_case keys, numbers as numbers, NaN as null
        echo_json(records(pd.DataFrame([summary.to_record()])))
    else:
        click.echo(summary.to_frame().to_string(index=False))
        if summary.prefix_note:  # NaN alone would read as a fault, 0.0 as no reuse: say why it is unknown
            click.echo(f"note: {summary.prefix_note}")


@workload.command("generate")
@click.argument("spec")
@click.option("--out", "out", type=click.Path(dir_okay=False, path_type=Path), required=True,
              help="the file to write: .csv or .jsonl, the format its suffix names")
@seed_option("seed for the generator", default=0)
@duration_option("seconds of arrivals to generate (default: the workload's)")
@click.option("--force", is_flag=True, help="overwrite --out if it exists")
@handle_errors
def generate(spec: str, out: Path, seed: int, duration_s: float | None, force: bool) -> None:
    """Write a generated workload (SPEC: generator name or TOML with [workload]) in kvsim's request
    format, CSV or JSONL as --out's suffix says (what `kvsim run --trace` and `workload describe` read)."""
    check_suffix(out, "--out")  # before generating anything
    if out.exists() and not force:
        raise ConfigError(f"--out {out}: exists; pass --force to overwrite it")
    if out.is_dir():
        raise ConfigError(f"--out {out}: is a folder; give a file (.csv or .jsonl)")
    w = load_workload(spec, seed=seed, duration_s=duration_s)
    n = write_workload(w, out)
    click.echo(f"wrote {n} requests to {out}")
