"""The headline's p99s are printed on their side of the SLO (`simulator.units.figure_against`), in
``summary.md``'s table and in the table ``kvsim run`` prints, while ``headline.csv`` keeps the floats.

A real run (the default scenario cut to 20 s on one 8×H100 node), then its SLO set between the three-digit
figure of a measured p99 and the p99 itself: the p99 misses it (``meets SLO`` no), where three digits would
read it as within (before helper-193, 66.94 ms read ``66.9`` beside a 66.9 ms SLO and ``no``)."""

from __future__ import annotations

import dataclasses
import math

import pandas as pd
import pytest

from simulator.cli.run import _echo_table
from simulator.report import _table
from simulator.scenario import load_scenario
from simulator.study import run_scenario
from simulator.units import figure

COLUMN = {"ttft": "TTFT p99 (s)", "tpot": "TPOT p99 (ms)"}
SCALE = {"ttft": 1.0, "tpot": 1e3}  # the column's unit: seconds and milliseconds


@pytest.fixture(scope="module")
def short_run():
    sc = load_scenario("default")
    off = dataclasses.replace(sc.report, capacity=False, collapse=False, breakeven=False)
    sc = dataclasses.replace(sc, workload=dataclasses.replace(sc.workload, duration_s=20.0), report=off,
                             cluster=dataclasses.replace(sc.cluster, hardware=("8xH100",), nodes=1))
    return run_scenario(sc)


def _missed_by_a_hair(run):
    """The run with one SLO set to a p99's three-digit figure, which rounded it down (so the p99 misses the SLO by
    less than the figure's last digit): (run, column, p99 in the column's unit)."""
    s = next(iter(run.results.values())).summary
    for name in ("tpot", "ttft"):
        p99 = s[f"{name}_p99_s"] * SCALE[name]
        shown = float(figure(p99))
        if shown < p99:
            slo = dataclasses.replace(run.scenario.slo, **{f"{name}_p99_s": shown / SCALE[name]})
            return dataclasses.replace(run, scenario=dataclasses.replace(run.scenario, slo=slo)), COLUMN[name], p99
    raise AssertionError(f"neither p99 rounds down in three digits: {s['ttft_p99_s']}, {s['tpot_p99_s']}")


def test_a_p99_over_its_slo_is_not_printed_as_the_slo(short_run, capsys):
    run, column, p99 = _missed_by_a_hair(short_run)
    head = run.headline()
    assert head["meets SLO"].tolist() == ["no"]
    assert head[column].iloc[0] == pytest.approx(p99, rel=1e-12)  # headline.csv's float, whole
    name = next(k for k, v in COLUMN.items() if v == column)
    limit = getattr(run.scenario.slo, f"{name}_p99_s") * SCALE[name]
    assert figure(p99) == figure(limit) and p99 > limit  # three digits alone would read it as the SLO
    # summary.md's table: the p99 with a fourth digit, over the SLO
    row = next(line for line in _table(head).splitlines() if line.startswith("| 8xH100"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    md = cells[list(head.columns).index(column)]
    assert float(md.replace(",", "")) > limit and md != figure(p99)
    assert len(md.replace(".", "")) == 4 or math.isclose(float(md), p99, rel_tol=1e-5)
    # the printed table: the same figure, and the other columns as before (figure, right-aligned)
    _echo_table(head)
    printed = capsys.readouterr().out.splitlines()
    assert md in printed[1].split()
    plain = head.to_string(index=False, float_format=figure, na_rep="n/a").splitlines()
    assert printed[0] == plain[0]  # the header laid out as pandas lays out a float column
    assert len(printed[1]) == len(plain[1])
    assert printed[1].replace(md, "").split() == plain[1].replace(figure(p99), "", 1).split()


def test_a_p99_within_its_slo_prints_as_figure_does(short_run, capsys):
    """The scenario's own SLOs, which the run's p99s are well within: the tables read as before, character for
    character."""
    head = short_run.headline()
    plain = head.to_string(index=False, float_format=figure, na_rep="n/a")
    _echo_table(head)
    assert capsys.readouterr().out == plain + "\n"
    bare = pd.DataFrame(head)  # the same rows, no SLO limits
    bare.attrs = {}
    assert _table(head) == _table(bare)
