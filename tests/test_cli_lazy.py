"""The kvsim command loads a subcommand only when it runs: `kvsim --help` is cheap."""

import subprocess
import sys
import time

import click
import pytest
from click.testing import CliRunner

from simulator.cli import COMMANDS, main


def test_every_listed_command_loads_and_is_named_as_listed():
    ctx = click.Context(main)
    for name in COMMANDS:
        cmd = main.get_command(ctx, name)
        assert isinstance(cmd, click.Command) and cmd.name == name
    assert main.get_command(ctx, "nope") is None
    r = CliRunner().invoke(main, ["--help"])
    assert r.exit_code == 0 and all(f"  {name} " in r.output for name in COMMANDS)
    r = CliRunner().invoke(main, ["nope"])
    assert r.exit_code == 2 and "unknown command 'nope'; valid: calc, fit" in r.output


def test_help_imports_no_heavy_module():
    code = ("import sys; from simulator.cli import main\n"
            "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
            "heavy = ('pandas', 'scipy.stats', 'matplotlib', 'simpy', 'simulator.engine')\n"
            "print('HEAVY', [m for m in heavy if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "HEAVY []" in out


@pytest.mark.bench
def test_help_takes_under_half_a_cpu_second():
    import resource

    def children_cpu() -> float:  # every child this process has waited for, so far
        child = resource.getrusage(resource.RUSAGE_CHILDREN)
        return child.ru_utime + child.ru_stime

    t, before = time.process_time(), children_cpu()
    r = subprocess.run([sys.executable, "-c", "from simulator.cli import main; main(['--help'])"],
                       capture_output=True, text=True)
    cpu = children_cpu() - before  # this child's alone (other bench tests run children too)
    print(f"kvsim --help: {cpu:.2f} CPU s (parent {time.process_time() - t:.2f})")
    assert r.returncode == 0 and cpu < 0.5


def test_commands_live_in_the_cli_package():
    from pathlib import Path

    import simulator

    root = Path(simulator.__file__).parent
    assert not sorted(root.glob("cli_*.py")), "the command modules belong in simulator/cli/"
    modules = {module for module, _, _ in COMMANDS.values()}
    assert modules == {f"simulator.cli.{m}" for m in ("spec", "workload", "breakeven", "cost", "run", "sweep",
                                                       "compare")}
    assert all((root / "cli" / f"{m.rsplit('.', 1)[1]}.py").is_file() for m in modules)


def test_python_dash_m_runs_the_command():
    r = subprocess.run([sys.executable, "-m", "simulator.cli", "--version"], capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.startswith("kvsim, version ")
