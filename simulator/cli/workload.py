"""``kvsim workload``: describe and generate workloads (a thin shell over `workloads`)."""

from __future__ import annotations

import os
from pathlib import Path

import click
import pandas as pd

from simulator.cli.common import (
    ListingGroup,
    OutPath,
    check_out_file,
    echo_json,
    handle_errors,
    naming,
    on_command_line,
    records,
    stopped_cleanly,
    warn,
)
from simulator.cli.options import duration_option, seed_option
from simulator.errors import ConfigError
from simulator.files import read_toml, shown_path
from workloads import load_workload, write_workload
from workloads.traces.native import check_suffix
from workloads.workload import cut_note, say_left_out


@click.group("workload", cls=ListingGroup)
def workload() -> None:
    """Describe and generate request workloads."""


@workload.command("describe")
@click.argument("spec")
@seed_option("seed for generated workloads (default: a scenario file's own seed, as kvsim run's; else 0)")
@duration_option("seconds to generate or replay (default: the workload's)")
@click.option("--format", "format_", default=None, help="trace format (azure, burstgpt, kvsim, mooncake)")
@click.option("--skip-bad-rows", is_flag=True, help="skip malformed trace rows (counted); default: stop")
@click.option("--json", "as_json", is_flag=True, help="print the summary as JSON")
@handle_errors
def describe(
    spec: str, seed: int | None, duration_s: float | None, format_: str | None, skip_bad_rows: bool, as_json: bool
) -> None:
    """Summarise SPEC: a generator name (chat-4k, code-repo-128k, synthetic), a TOML file with [workload]
    (a generator table, a mixture's with its components, or a scenario's with [workload.spec] or trace),
    or a trace file. Azure and BurstGPT traces carry no prefix ids: their prefix reuse is unknown (NaN)."""
    from workloads.generators import GENERATORS

    if spec in GENERATORS and (format_ is not None or skip_bad_rows):  # options of a trace's reader: no effect here
        flag = f"--format {format_}" if format_ is not None else "--skip-bad-rows"
        raise ConfigError(f"{flag}: applies to a trace file, not to the generator {spec!r} (drop it)")
    _refuse_seed_for_trace(spec, seed)
    w = load_workload(  # without --seed (None), a scenario file's own seed, as kvsim run draws it
        spec, seed=seed, duration_s=duration_s, format=format_, on_error="skip" if skip_bad_rows else "stop",
        name="SPEC")
    summary = w.summary()
    if w.cut_at_s is not None:  # what the summary leaves out of the trace, said as `kvsim run` says it
        key = "--duration-s" if duration_s is not None else "workload.duration_s"
        warn(f"workload: {cut_note(w.cut_at_s, key)}")  # (skipped rows: in its table)
    if as_json:  # one record, as every --json table: snake_case keys, numbers as numbers, NaN as null
        echo_json(records(pd.DataFrame([summary.to_record()])))
    else:
        click.echo(summary.to_frame().to_string(index=False))
        if summary.prefix_note:  # why the prefix figures are unknown (NaN alone reads as a fault), or what they cover
            click.echo(f"note: {summary.prefix_note}")


def _refuse_seed_for_trace(spec: str, seed: int | None) -> None:
    """Refuse ``--seed`` given for a trace file (not a generator's name or a TOML spec): a trace replays as
    recorded, so the seed would change nothing (helper-150: it was taken without a word, where ``--format`` on a
    generator is refused)."""
    from workloads.generators import GENERATORS

    path = Path(spec)
    if on_command_line("seed") and spec not in GENERATORS and path.is_file() and path.suffix.lower() != ".toml":
        raise ConfigError(f"--seed {seed}: applies to a generated workload, not to the trace file "
                          f"{shown_path(path)}, which replays as recorded (drop it)")


@workload.command("generate")
@click.argument("spec")
@click.option("--out", "out", type=OutPath("file", dir_okay=False), required=True,
              help="the file to write: .csv or .jsonl, the format its suffix names")
@seed_option("seed for the generator (default: a scenario file's own seed, as kvsim run's; else 0)")
@duration_option("seconds of arrivals to generate (default: the workload's)")
@click.option("--force", is_flag=True, help="overwrite --out if it exists")
@handle_errors
def generate(spec: str, out: Path, seed: int | None, duration_s: float | None, force: bool) -> None:
    """Write a generated workload (SPEC: a generator name (chat-4k, code-repo-128k, synthetic) or a TOML
    with [workload]) in kvsim's request format, CSV or JSONL as --out's suffix says (what `kvsim run
    --trace` and `workload describe` read).

    The requests go to a hidden file beside --out, renamed to --out once all are written: an
    interrupted or failed generation leaves no partial file, and a link at --out is replaced, not
    written through."""
    check_suffix(out, "--out")  # before generating anything
    _refuse_seed_for_trace(spec, seed)
    where = f"--out {shown_path(out)}"
    inputs = _inputs(spec)
    with naming(where):  # a name too long, a folder without access: said with --out
        check_out_file(out, where, inputs, force, "a file (.csv or .jsonl)")
    # same folder (the rename is atomic), a short name (one that --out's fits), one per process
    partial = out.with_name(f".kvsim-partial-{os.getpid()}{out.suffix}")
    try:
        with stopped_cleanly("workload generate", None):
            w = load_workload(spec, seed=seed, duration_s=duration_s, name="SPEC")
            with naming(where):
                partial.unlink(missing_ok=True)
                n = write_workload(w, partial)
                partial.replace(out)
    finally:
        partial.unlink(missing_ok=True)
    click.echo(f"wrote {n} requests to {out}")
    say_left_out(w, warn, "--duration-s" if duration_s is not None else "workload.duration_s")  # not in the file
    summary = w.summary()
    if summary.n_reuses is None:  # kvsim's format has no "unknown": its segments would read as no reuse at all
        warn(f"{summary.prefix_note}; {out.name} holds each prompt as its own segment, so it reads back as no reuse "
             "(prefix_hit_share 0), not unknown")


def _inputs(spec: str) -> list[tuple[str, Path]]:
    """The files SPEC reads, each with how to name it: SPEC itself, and a TOML's [workload] trace
    (relative to the TOML, as `load_workload` reads it)."""
    path = Path(spec)
    if not path.is_file():
        return []
    found = [("SPEC, the workload being read", path)]
    if path.suffix == ".toml":
        try:
            table = read_toml(path).get("workload")
        except ConfigError:
            return found  # load_workload says what is wrong with it
        if isinstance(table, dict) and isinstance(table.get("trace"), str):
            found.append((f"the trace SPEC reads ({shown_path(path)}: workload.trace)", path.parent / table["trace"]))
    return found
