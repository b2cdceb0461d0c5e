"""The default ``--out`` folders do not collide (a later audit: ``kvsim collapse`` and ``kvsim run``
both wrote to ``report/``, so in a fresh folder the second refused: "collapse.csv is kvsim
collapse's output there"). ``collapse`` now writes to ``report/collapse/``."""

from __future__ import annotations

from tests.test_hostile_inputs import edit, kvsim, outcome, scenario


def test_collapse_then_run_with_their_default_folders(tmp_path, monkeypatch):
    sc = scenario(tmp_path, edit("collapse = false", "collapse = true"))
    monkeypatch.chdir(tmp_path)
    r = kvsim("collapse", "--hardware", "8xH100", "--layout", "native")
    assert outcome(r) is None and "wrote report/collapse/collapse.csv and report/collapse/collapse.png" in r.stdout
    r = kvsim("run", sc)
    assert outcome(r) is None and "report written to report/summary.md" in r.stdout
    assert (tmp_path / "report" / "collapse.csv").is_file()  # run's own collapse table
    assert (tmp_path / "report" / "collapse" / "collapse.csv").is_file()  # collapse's, kept
    r = kvsim("collapse", "--hardware", "8xH100", "--layout", "native")  # and again, after run
    assert outcome(r) is None and (tmp_path / "report" / "summary.md").is_file()
