"""The ``kvsim`` command: a thin click shell over the library."""

from __future__ import annotations

import os
from typing import Any

import click

from simulator import __version__
from simulator.cli_breakeven import breakeven
from simulator.cli_common import config_errors
from simulator.cli_compare import compare
from simulator.cli_cost import calibrate, cost
from simulator.cli_run import capacity_cmd, run_cmd
from simulator.cli_spec import calc, collapse, fit, hardware, models
from simulator.cli_sweep import sweep
from simulator.cli_workload import workload


class KvsimGroup(click.Group):
    """The command group: any kvsim error a subcommand lets through is one line and exit 2."""

    def invoke(self, ctx: click.Context) -> Any:
        with config_errors():
            return super().invoke(ctx)


@click.group(cls=KvsimGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="kvsim")
def main() -> None:
    """kvsim: the economics of LLM KV-cache memory, analytically and simulated."""
    # the command line draws to files: choose the off-screen backend here, not in the chart
    # modules, so that a notebook importing them keeps its inline backend
    os.environ.setdefault("MPLBACKEND", "Agg")


for _cmd in (calc, fit, collapse, models, hardware, workload, breakeven, cost, calibrate, run_cmd,
             capacity_cmd, sweep, compare):
    main.add_command(_cmd)
