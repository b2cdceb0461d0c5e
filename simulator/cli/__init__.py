"""The ``kvsim`` command: a thin click shell over the library, one module per command group.

``common`` (errors as one line, ``--out`` folders, ``--json`` records), ``progress`` (click's progress
bars on stderr for the library's fractions done), ``spec`` (calc, fit, collapse,
models, hardware), ``workload``, ``breakeven``, ``cost`` (cost, calibrate), ``run`` (run, capacity),
``sweep`` and ``compare``. Subcommands load on first use (`LazyGroup`): ``kvsim --help`` and
``kvsim calc`` import neither scipy.stats, matplotlib nor the simulator's engine, only what the
command they run needs.
"""

from __future__ import annotations

import importlib
import os
from typing import Any

import click

from simulator import __version__
from simulator.cli.common import config_errors, resolve_listing
from simulator.errors import MAX_MESSAGE_CHARS
from simulator.files import shown_path

# name -> (module, attribute, one-line help shown by `kvsim --help`)
COMMANDS: dict[str, tuple[str, str, str]] = {
    "calc": ("simulator.cli.spec", "calc", "KV bytes per token, sequence and batch, with each lever's factor."),
    "fit": ("simulator.cli.spec", "fit", "Per-GPU KV budget, max streams, the plans side by side, the levers."),
    "collapse": ("simulator.cli.spec", "collapse", "The concurrency-collapse chart and its CSV."),
    "models": ("simulator.cli.spec", "models", "The model catalog as a table."),
    "hardware": ("simulator.cli.spec", "hardware", "The GPU and node catalogs as tables."),
    "workload": ("simulator.cli.workload", "workload", "Describe and generate request workloads."),
    "breakeven": ("simulator.cli.breakeven", "breakeven", "Break-even reuse rates of prompt-cache TTLs."),
    "cost": ("simulator.cli.cost", "cost", "Prefill and decode step times from the calibrated cost model."),
    "calibrate": ("simulator.cli.cost", "calibrate", "Fit the cost model to measurements."),
    "run": ("simulator.cli.run", "run_cmd", "Simulate a scenario and write its report."),
    "capacity": ("simulator.cli.run", "capacity_cmd", "The smallest fleet at the SLOs, or the max rate of one."),
    "sweep": ("simulator.cli.sweep", "sweep", "Run a scenario at every point of a grid."),
    "compare": ("simulator.cli.compare", "compare", "KV levers side by side under real scheduling."),
}


def _one_line(exc: click.UsageError) -> click.UsageError:
    """The error to raise for `exc`. Shown without its context, click prints a usage error's "Error: ..."
    line alone, not the usage and "Try --help" lines above it (bad input is one line). A group run with
    nothing after it (`kvsim`, `kvsim workload`: click's `NoArgsIsHelpError`) keeps its context: that
    error is the group's help.

    Click quotes the value it refuses whole (a 400-character ``--trace`` path that does not exist): such a
    line becomes a plain usage error of the same text cut in the middle to `MAX_MESSAGE_CHARS`, which
    keeps the option it names and the reason."""
    if isinstance(exc, click.exceptions.NoArgsIsHelpError):
        return exc
    exc.ctx = None
    text = " ".join(exc.format_message().split())
    return exc if len(text) <= MAX_MESSAGE_CHARS else click.UsageError(shown_path(text, MAX_MESSAGE_CHARS - 1))


class LazyGroup(click.Group):
    """The command group: subcommands imported when run, and any kvsim error a subcommand lets
    through is one line and exit 2."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in COMMANDS:
            return None
        module, attr, _ = COMMANDS[cmd_name]
        cmd: click.Command = getattr(importlib.import_module(module), attr)
        return cmd

    def resolve_command(self, ctx: click.Context, args: list[str]) -> tuple[str | None, click.Command | None,
                                                                         list[str]]:
        return resolve_listing(self, ctx, args, list(COMMANDS))

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        with formatter.section("Commands"):
            formatter.write_dl([(name, short) for name, (_, _, short) in COMMANDS.items()])

    def make_context(self, info_name: str | None, args: list[str], parent: click.Context | None = None,
                     **extra: Any) -> click.Context:
        try:
            return super().make_context(info_name, args, parent, **extra)
        except click.UsageError as exc:  # `kvsim --bogus`: one line too (see `invoke`)
            raise _one_line(exc) from None

    def invoke(self, ctx: click.Context) -> Any:
        with config_errors():
            try:
                return super().invoke(ctx)
            except click.UsageError as exc:  # an option or argument click could not take, an unknown command
                raise _one_line(exc) from None


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="kvsim")
def main() -> None:
    """kvsim: the economics of LLM KV-cache memory, analytically and simulated."""
    # the command line draws to files: choose the off-screen backend here, not in the chart
    # modules, so that a notebook importing them keeps its inline backend
    os.environ.setdefault("MPLBACKEND", "Agg")
