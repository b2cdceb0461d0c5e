"""`kvsim breakeven --gaps FILE` and `--gaps DIST` (audit u3 items 1, 2 and 9).

The file reader let the csv sniffer pick a digit as the separator: ``100\\n200\\n300`` read as
[1, 2, 3], ``60`` as [0], ``10\\n20`` as [20]; larger files were refused. Values here are written by
hand or by ``np.savetxt`` and must read back exactly.
"""

from __future__ import annotations

import json
import math

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner, Result

from simulator.billing.gaps_file import read_gaps
from simulator.billing.numeric import breakeven_rate, breakeven_scale
from simulator.cli import main
from simulator.cli.breakeven import parse_gaps
from simulator.errors import ConfigError

R, W5 = 0.1, 1.25  # anthropic sonnet (the default profile): read x0.1, 5-minute write x1.25
P_STAR_5M = (W5 - 1) / (W5 - R)  # 0.2174: break-even hit probability for 5 m


def kvsim(*args: object) -> Result:
    try:
        return CliRunner().invoke(main, [str(a) for a in args])
    finally:
        plt.close("all")


def refused(result: Result, *words: str) -> str:
    """Exit 2 with one ``Error:`` line holding every one of `words`, no traceback."""
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    errors = [line for line in result.stderr.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1, result.stderr
    for word in words:
        assert word in errors[0], (word, errors[0])
    return errors[0]


def gaps_of(tmp_path, text: str) -> list[float]:
    f = tmp_path / "g.txt"
    f.write_text(text)
    return parse_gaps(str(f)).tolist()


@pytest.mark.parametrize(("text", "values"), [
    ("100\n200\n300\n", [100.0, 200.0, 300.0]),  # was [1, 2, 3]
    ("60\n", [60.0]),  # was [0]
    ("45\n", [45.0]),  # was [4]
    ("10\n20\n", [10.0, 20.0]),  # was [20]
    ("1.5\n2.5\n", [1.5, 2.5]),  # was [1, 2]
    ("100\r\n250\r\n400", [100.0, 250.0, 400.0]),  # CRLF, no final newline
    ("# gaps in s\n\n100\n  \n250\n", [100.0, 250.0]),  # comments and blank lines skipped
    ("gap_s\n10\n100\n", [10.0, 100.0]),  # a header
    ("session,gap_s\na,10\nb,20\n", [10.0, 20.0]),  # the first numeric column, header
    ("a,10,7\nb,20,8\n", [10.0, 20.0]),  # the first numeric column, no header
    ("10,1\n20,2\n", [10.0, 20.0]),
    ("gap\tn\n10\t1\n20\t2\n", [10.0, 20.0]),  # tab
    ("10;1\n20;2\n", [10.0, 20.0]),  # semicolon
    ("10 1\n20   2\n", [10.0, 20.0]),  # blanks
    ('"id","gap"\n"x","12.5"\n', [12.5]),  # quoted CSV
    ("1e3\n2.5E-1\n0\n", [1000.0, 0.25, 0.0]),
])
def test_file_shapes_read_as_written(tmp_path, text, values):
    assert gaps_of(tmp_path, text) == values


@pytest.mark.parametrize("fmt", ["%d", "%.3f", "%.18e"])
def test_savetxt_files_read_back_exactly(tmp_path, fmt):
    rng = np.random.default_rng(3)
    gaps = rng.exponential(600.0, 1000)
    if fmt == "%d":
        gaps = np.floor(gaps)
    elif fmt == "%.3f":
        gaps = np.array([float(f"{g:.3f}") for g in gaps])
    f = tmp_path / "g.txt"
    np.savetxt(f, gaps, fmt=fmt)
    np.testing.assert_array_equal(read_gaps(f), gaps)  # exact, not approximately


def test_thirty_rows_of_savetxt_default(tmp_path):
    gaps = np.random.default_rng(4).exponential(600.0, 30)  # was read as 25 mangled values (6.1, 1.19, ...)
    f = tmp_path / "g.txt"
    np.savetxt(f, gaps)  # %.18e
    np.testing.assert_array_equal(read_gaps(f), gaps)


def test_200k_rows_of_savetxt_default_through_the_cli(tmp_path):
    gaps = np.random.default_rng(5).exponential(600.0, 200_000)  # was "Expected 5 fields in line 40"
    f = tmp_path / "gaps_exp600.txt"
    np.savetxt(f, gaps)
    np.testing.assert_array_equal(read_gaps(f), gaps)
    r = kvsim("breakeven", "--gaps", f, "--ttl", "5m", "--json")
    assert r.exit_code == 0, r.output
    row = json.loads(r.stdout)["gaps"][0]
    assert row["p_hit"] == pytest.approx(np.mean(gaps < 300.0), abs=1e-12)
    assert row["p_hit"] == pytest.approx(1 - math.exp(-0.5), abs=0.005)  # exponential, mean 600 s, T 300 s


def test_cli_figures_of_three_gaps_by_hand(tmp_path):
    """gaps 100, 250, 400 s; sonnet 5m: read x0.1, write x1.25, p* = 0.25/1.15 = 0.2174.

    p_hit = #{g < 300}/3 = 2/3; relative cost = 0.1·2/3 + 1.25·1/3 = 0.48333, savings 51.67 %.
    F(300/c) = #{g < 300/c}/3 steps from 0 to 1/3 (over p*) as 300/c passes 100: c = 300/100 = 3.
    breakeven rate = 1/(c · mean gap) = 1/(3 · 250 s) = 0.08 per minute.
    (Read with the sniffer: p_hit 1, savings 90 %, scale 300.)
    """
    f = tmp_path / "g.txt"
    f.write_text("100\n250\n400\n")
    r = kvsim("breakeven", "--gaps", f, "--ttl", "5m", "--out", tmp_path / "o")
    assert r.exit_code == 0, r.output
    row = pd.read_csv(tmp_path / "o" / "gaps.csv").iloc[0]
    assert row["p_hit"] == pytest.approx(2 / 3)
    assert row["relative_cost"] == pytest.approx(0.1 * 2 / 3 + 1.25 / 3)
    assert row["savings_pct"] == pytest.approx(51.6667, abs=1e-4)
    assert row["breakeven_scale"] == pytest.approx(3.0, rel=1e-9)
    assert row["breakeven_rate_per_min"] == pytest.approx(60 / (3 * 250), rel=1e-9)
    assert "(3 gaps read, mean 250 s)" in r.output
    assert " 5m 0.6667         0.4833        51.67                3                    0.08" in r.output


def test_breakeven_scale_is_explained_under_the_table(tmp_path):
    r = kvsim("breakeven", "--gaps", "expon:scale=600", "--ttl", "5m")
    assert r.exit_code == 0, r.output
    assert ("breakeven_scale c: every gap stretched c times puts caching at break-even, P(gap < TTL/c) = "
            "breakeven_p_hit") in r.output
    assert "breakeven_rate_per_min = 1/(c × mean gap), a mean rate, not a Poisson one" in r.output


def test_one_gap_has_a_scale_not_nan(tmp_path):
    """One gap of 60 s: F steps from 0 to 1 at 300/c = 60, so c = 300/60 = 5 and the rate is
    1/(5 · 60 s) = 0.2 per minute (the sniffer read 60 as 0, and the table said NaN)."""
    assert breakeven_scale(np.array([60.0]), 300.0, R, W5) == pytest.approx(5.0, rel=1e-9)
    f = tmp_path / "g60.txt"
    f.write_text("60\n")
    r = kvsim("breakeven", "--gaps", f, "--ttl", "5m", "--json")
    assert r.exit_code == 0, r.output
    row = json.loads(r.stdout)["gaps"][0]
    assert row["breakeven_scale"] == pytest.approx(5.0, rel=1e-9)
    assert row["breakeven_rate_per_min"] == pytest.approx(0.2, rel=1e-9)
    assert "(1 gap read, mean 60 s)" in kvsim("breakeven", "--gaps", f, "--ttl", "5m").output


def test_zero_gaps_pay_at_any_stretch_and_say_so(tmp_path):
    """A zero gap hits under any stretch (c · 0 < T): with 2 of 3 gaps 0 s (>= p* 0.2174) caching
    never stops paying: the scale is inf and the rate 0, as with no write premium (was NaN)."""
    gaps = np.array([0.0, 0.0, 5.0])
    assert P_STAR_5M <= 2 / 3
    assert breakeven_scale(gaps, 300.0, R, W5) == math.inf
    assert breakeven_rate(gaps, 300.0, R, W5) == 0.0
    assert breakeven_scale(np.array([0.0, 50.0, 100.0, 200.0, 400.0]), 300.0, R, W5) == pytest.approx(6.0)
    f = tmp_path / "z.txt"
    f.write_text("0\n0\n5\n")
    r = kvsim("breakeven", "--gaps", f, "--ttl", "5m")
    assert r.exit_code == 0, r.output
    assert ("breakeven_scale inf at 5m: caching pays however far the gaps stretch (2 of the 3 gaps are 0 s, a "
            "share of 0.6667, at least breakeven_p_hit 0.2174)") in r.output


def test_a_scale_out_of_reach_says_why():
    r = kvsim("breakeven", "--gaps", "expon:scale=1e-30", "--ttl", "5m")
    assert r.exit_code == 0, r.output
    assert f"breakeven_scale NaN at 5m: P(gap < TTL/c) does not cross breakeven_p_hit {P_STAR_5M:.4g}" in r.output


@pytest.mark.parametrize(("text", "line", "value", "rule"), [
    ("10\nnan\n20\n", "line 2", "'nan'", "finite number of seconds >= 0"),  # was accepted, the 10 lost
    ("10\n20\ninf\n", "line 3", "'inf'", "finite number of seconds >= 0"),
    ("# c\n10\n-5\n", "line 3", "'-5'", "finite number of seconds >= 0"),
    ("10\nabc\n", "line 2", "'abc'", "must be a number of seconds"),
    ("id,gap\na,10\nb,\n", "line 3", "''", "column 2, the first numeric one"),
    ("a,10\n20\n", "line 2", "''", "column 2, the first numeric one"),  # a short row
])
def test_bad_rows_are_refused_with_file_line_value_and_rule(tmp_path, text, line, value, rule):
    f = tmp_path / "bad.txt"
    f.write_text(text)
    refused(kvsim("breakeven", "--gaps", f), "--gaps", "bad.txt", line, value, rule)
    with pytest.raises(ConfigError, match=line):
        read_gaps(f)


@pytest.mark.parametrize("text", ["", "# only a comment\n\n", "gap_s\n"])
def test_a_file_without_gaps_is_refused(tmp_path, text):
    f = tmp_path / "empty.txt"
    f.write_text(text)
    refused(kvsim("breakeven", "--gaps", f), "--gaps", "empty.txt", "no gaps")


@pytest.mark.parametrize(("spec", "words"), [
    ("lognorm:s=1.2,scale=60,foo=3", ["--gaps lognorm", "'parameter' must be one of s, loc, scale", "'foo'"]),
    ("lognorm:scale=60", ["--gaps lognorm", "needs the shape parameter(s) s", "s, loc, scale"]),
    ("gamma:a=2,scale=-1", ["--gaps gamma", "outside the distribution's domain", "a, loc, scale"]),
    ("expon:rate=2", ["--gaps expon", "one of loc, scale", "'rate'"]),
    ("expon:scale=1,scale=2", ["--gaps expon", "'parameter' must be given once", "'scale=2'"]),
    # helper-195: scipy's default scale of 1 s was taken in silence
    ("expon", ["--gaps expon: needs scale=SECONDS, the gaps' scale (scipy's default, 1 s, is not assumed; "
               "parameters: loc, scale; got {})"]),
    ("gamma:a=2,loc=5", ["--gaps gamma: needs scale=SECONDS", "got {a = 2.0, loc = 5.0})"]),
])
def test_bad_distribution_parameters_name_the_option_and_the_allowed_ones(spec, words):
    line = refused(kvsim("breakeven", "--gaps", spec, "--ttl", "5m"), *words)
    assert "_parse_args" not in line


def test_a_bad_gaps_fails_before_any_table(tmp_path):
    r = kvsim("breakeven", "--gaps", "lognorm:foo=1")
    refused(r, "--gaps lognorm")
    assert "Break-even for Poisson reuse" not in r.stdout
