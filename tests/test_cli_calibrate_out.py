"""``kvsim calibrate --out``: a file it cannot write is refused before the fit, naming --out (a later
audit: the whole fit ran, then 'No such file or directory' named neither --out nor the folder)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from simulator.cost.calibrate import PUBLISHED_FILE
from tests.test_hostile_inputs import error, kvsim


@pytest.mark.parametrize(("folder", "says"), [
    ("newdir", "its folder {d}/newdir does not exist; create it or give another file"),
    ("afile", "{d}/afile is not a folder; give another file"),
])
def test_calibrate_out_in_a_missing_folder_is_refused_before_the_fit(tmp_path, monkeypatch, folder, says):
    monkeypatch.chdir(tmp_path)  # short paths: a long one is shown cut in the middle
    Path("afile").write_text("")
    out = Path(folder) / "p.toml"
    r = kvsim("calibrate", PUBLISHED_FILE, "--out", out)
    line = error(r, "--out")
    assert line.startswith(f"Error: --out {out}: ") and says.format(d=".").replace("./", "") in line
    assert "MAPE" not in r.stdout  # nothing was fitted


def test_calibrate_out_in_a_folder_it_cannot_write_is_refused_before_the_fit(tmp_path, monkeypatch):
    real = os.access  # a folder without write access, as a user sees it (root writes anywhere)
    (tmp_path / "ro").mkdir()
    monkeypatch.chdir(tmp_path)  # short paths: a long one is shown cut in the middle
    monkeypatch.setattr(os, "access", lambda p, mode, **k: real(p, mode, **k) and Path(p).resolve() != tmp_path / "ro")
    r = kvsim("calibrate", PUBLISHED_FILE, "--out", Path("ro") / "p.toml")
    assert "--out ro/p.toml: its folder ro is not writable" in error(r, "--out")
    assert "MAPE" not in r.stdout
