"""A reader that goes away (`kvsim models | head -1`) is no error of kvsim's: nothing more is
printed and the command exits 1 (click's status for a broken pipe), never "Error: Broken pipe"."""

import os
import subprocess
import sys

import pytest

KVSIM = [sys.executable, "-m", "simulator.cli"]


@pytest.mark.parametrize("args", [["models"], ["calc", "--context", "100"], ["models", "--json"],
                                  ["workload", "describe", "chat-4k", "--duration-s", "60"]])
def test_a_closed_pipe_is_quiet(args):
    read, write = os.pipe()
    os.close(read)  # the reader is gone before kvsim writes a byte: its first write fails with EPIPE
    try:
        r = subprocess.run([*KVSIM, *args], stdout=write, stderr=subprocess.PIPE, text=True, timeout=120)
    finally:
        os.close(write)
    assert r.stderr == "" and r.returncode == 1


def test_a_shell_pipeline_into_head():
    """``kvsim models | head -n 0``: head exits without reading, so kvsim's first write meets a closed
    pipe however fast it runs (``head -1`` may read the whole table before it goes)."""
    cmd = " ".join([*KVSIM, "models"]) + " | head -n 0; echo \"kvsim exit ${PIPESTATUS[0]}\""
    r = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, timeout=120)
    assert (r.stdout, r.stderr) == ("kvsim exit 1\n", "")


@pytest.mark.parametrize(("args", "line"), [
    (["calc", "--context", "0"], "Error: Invalid value for '--context': 0 is not in the range x>=1."),
    (["nope"], "Error: unknown command 'nope'; valid: calc, fit, collapse, models, hardware, workload, breakeven, "
                "cost, calibrate, run, capacity, sweep, compare"),
    (["--bogus"], "Error: No such option '--bogus'."),
    ([""], "Error: unknown command ''; valid: calc, fit, collapse, models, hardware, workload, breakeven, cost, "
           "calibrate, run, capacity, sweep, compare"),
    (["workload", "nope"], "Error: unknown command 'nope'; valid: describe, generate"),
    (["workload", "describe"], "Error: Missing argument 'SPEC'."),
    (["run", "trace-replay", "--trace", "no-such.csv"], "Error: Invalid value for '--trace': File 'no-such.csv' does "
     "not exist."),  # it named the installed scenario and its [workload] 'spec'
    (["workload", "describe", "no-such.csv"], "Error: SPEC: no such file 'no-such.csv' (a workload is a "
     "generator name (chat-4k, code-repo-128k, synthetic), a TOML file with [workload] or a trace file)"),
])
def test_an_option_click_cannot_take_is_one_line(args, line):
    """Bad input is one line on stderr and exit 2, also where click itself refuses an option, an argument
    or a command: its "Usage: ..." and "Try '... --help'" lines (and a blank one) are not printed above it."""
    r = subprocess.run([*KVSIM, *args], capture_output=True, text=True, timeout=120)
    assert (r.returncode, r.stdout, r.stderr) == (2, "", line + "\n")


@pytest.mark.parametrize("args", [[], ["workload"]])
def test_a_group_with_nothing_after_it_shows_its_help(args):
    """`kvsim` and `kvsim workload` alone are click's NoArgsIsHelpError, a usage error whose message is the
    group's help: it keeps its context (without it, click's `show` failed with a traceback)."""
    r = subprocess.run([*KVSIM, *args], capture_output=True, text=True, timeout=120)
    text = r.stdout + r.stderr
    assert "Traceback" not in text and "Commands:" in text and text.startswith("Usage: ")
