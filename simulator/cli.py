"""The ``kvsim`` command: a thin click shell over the library."""

from __future__ import annotations

import click

from simulator import __version__
from simulator.cli_breakeven import breakeven
from simulator.cli_compare import compare
from simulator.cli_cost import calibrate, cost
from simulator.cli_run import capacity_cmd, run_cmd
from simulator.cli_spec import calc, collapse, fit, hardware, models
from simulator.cli_sweep import sweep
from simulator.cli_workload import workload


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="kvsim")
def main() -> None:
    """kvsim: the economics of LLM KV-cache memory, analytically and simulated."""


for _cmd in (calc, fit, collapse, models, hardware, workload, breakeven, cost, calibrate, run_cmd,
             capacity_cmd, sweep, compare):
    main.add_command(_cmd)
