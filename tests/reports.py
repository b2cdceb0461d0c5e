"""`kvsim run` of a scenario written in a test, for the tests that read the report it writes."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner, Result

from simulator.cli import main


def run_report(tmp_path: Path, name: str, text: str, *args: str) -> tuple[Result, Path]:
    """``kvsim run`` of the scenario `text` (written to `tmp_path` / `name`) with `args`, its report in
    ``tmp_path/rep``: its result, once it has exited 0, and the report folder."""
    scenario, out = tmp_path / name, tmp_path / "rep"
    scenario.write_text(text)
    r = CliRunner().invoke(main, ["run", str(scenario), "--out", str(out), *args])
    assert r.exit_code == 0, r.output
    return r, out
