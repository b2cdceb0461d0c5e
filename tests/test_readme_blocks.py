"""The README's ``$ kvsim ...`` blocks against what the commands print (README, "CLI reference": stdout and stderr
together, notes and warnings included, less a long phase's progress bar).

The cheap commands (well under a second in process) run as the README writes them and their whole output must be
the block's. The sweep example runs 6 simulations, too slow for the suite: it runs here on the rows its block
prints (`run_sweep` stubbed), so the lines the command adds on stderr around its table (the scenario's grid, the
GPU prices, a point whose queue grew) must be in the block (helper-204: the block had the table alone, where the
command also says that point 1 falls behind its load, as `kvsim compare`'s block, which lacked a note of its own
until 837988b, does). The others (`kvsim run`, the demo; `collapse`, which draws a chart; `workload describe`,
which reads ``../shared``; `compare`) are checked by rerunning them by hand (`test_every_block_is_accounted_for` lists
each).
"""

from __future__ import annotations

import math
import shlex
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from simulator.cli import main

README = Path(__file__).resolve().parents[1] / "README.md"
SCENARIOS = Path(__file__).resolve().parents[1] / "scenarios"


def _blocks() -> list[tuple[list[list[str]], str]]:
    """Each fenced block that starts with ``$ kvsim``: its commands (a trailing ``\\`` continues one) and the
    output the README shows under them."""
    found = []
    for chunk in README.read_text().split("```")[1::2]:
        lines = chunk.split("\n")[1:]  # the fence's own line (a language, or nothing)
        if not lines or not lines[0].startswith("$ kvsim"):
            continue
        commands: list[list[str]] = []
        while lines and lines[0].startswith("$ kvsim"):
            line = lines.pop(0)
            while line.endswith("\\"):
                line = line[:-1] + lines.pop(0)
            commands.append(shlex.split(line)[2:])
        found.append((commands, "\n".join(lines)))
    return found


def _block(*start: str) -> tuple[list[list[str]], str]:
    matches = [b for b in _blocks() if tuple(b[0][0][:len(start)]) == start]
    assert len(matches) == 1, (start, [b[0] for b in _blocks()])
    return matches[0]


# the blocks run below, and those that are not, with why: a new block is one or the other
RUN_HERE = {("calc",), ("fit",), ("cost",), ("breakeven",), ("run", "bad.toml"), ("sweep",)}
RERUN_BY_HAND = {("run",): "the demo, a minute",
                 ("collapse",): "draws its chart (test_numbers_tables checks the header)",
                 ("workload",): "reads ../shared's trace", ("compare",): "8 simulations, 5 CPU s"}


def test_every_block_is_accounted_for() -> None:
    keys = []
    for commands, _ in _blocks():
        first = commands[0]
        keys.append(tuple(first[:2]) if tuple(first[:2]) in RUN_HERE else (first[0],))
    assert sorted(keys) == sorted(RUN_HERE | set(RERUN_BY_HAND))


@pytest.mark.parametrize("start", [("calc",), ("fit",), ("cost",), ("breakeven",), ("run", "bad.toml")])
def test_a_cheap_block_is_what_its_commands_print(start: tuple[str, ...], tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    commands, shown = _block(*start)
    monkeypatch.chdir(tmp_path)
    # the README's bad.toml: scenarios/chat-4k-h100.toml with `nodes = "two"` under [cluster]
    good = (SCENARIOS / "chat-4k-h100.toml").read_text()
    assert good.count("\nnodes = 2\n") == 1
    (tmp_path / "bad.toml").write_text(good.replace("\nnodes = 2\n", '\nnodes = "two"\n'))
    printed = "".join(CliRunner().invoke(main, args).output for args in commands)
    assert printed == shown


def _table(text: str) -> pd.DataFrame:
    """A table as `kvsim sweep` prints it (``to_string``, thousands with commas) back into a frame."""
    header, *rows = text.splitlines()
    names = header.split()

    def value(cell: str) -> object:
        if cell in ("True", "False"):
            return cell == "True"
        try:
            number = float(cell.replace(",", ""))
        except ValueError:
            return cell
        return int(number) if number.is_integer() and "." not in cell and "," not in cell else number  # 2,462: a float

    return pd.DataFrame([[value(c) for c in row.split()] for row in rows], columns=names)


def test_the_sweep_block_has_every_line_the_command_adds_to_its_table(monkeypatch: pytest.MonkeyPatch) -> None:
    """The sweep run on the rows its block prints: everything the command prints but the progress label must be
    the block's, the note naming point 1, whose queue grew at 20× the load on 1 node, included."""
    import simulator.sweep

    commands, shown = _block("sweep")
    assert len(commands) == 1
    lines = shown.splitlines()
    start = next(i for i, line in enumerate(lines) if line.split()[:1] == ["point"])
    end = next(i for i in range(start + 1, len(lines) + 1)
               if i == len(lines) or not lines[i].split()[0].isdigit())
    rows = _table("\n".join(lines[start:end]))
    assert list(rows.point) == list(range(6)) and rows.queue_grows.tolist() == [False, True] + [False] * 4

    def stub(sc, grid, **kwargs):  # the rows as run_sweep returns them, with the columns the table leaves out
        df = rows.assign(trace_rows_skipped=0, trace_cut_at_s=math.nan, preemptions=0,
                         slo_ttft_p99_s=sc.slo.ttft_p99_s, slo_tpot_p99_s=sc.slo.tpot_p99_s, error="", digest="d")
        df.attrs["reused_points"] = 0
        kwargs["progress"](1.0)
        return df

    monkeypatch.setattr(simulator.sweep, "run_sweep", stub)
    r = CliRunner().invoke(main, commands[0])
    assert r.exit_code == 0, r.output
    printed = [line for line in r.output.splitlines() if line != "sweeping"]  # the progress label
    assert any(line.startswith("note: point 1 (8xH100): arrivals outran admissions") for line in printed)
    assert printed == lines
