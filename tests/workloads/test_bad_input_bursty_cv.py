"""Bursty arrivals with a huge cv (helper-159): ``{kind = "bursty", rate_per_s = 1, cv = 1e9}`` over 10 s kept
`kvsim run` busy past 300 s (and ``kvsim workload describe`` past 60 s at cv = 1e5): gamma gaps of shape 1/cv²
underflow to 0 s, and the draw loop drew until the duration was passed."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from simulator.errors import ConfigError
from tests.test_hostile_inputs import error, kvsim, outcome
from workloads import arrivals
from workloads.arrivals import Bursty, arrival_from

GAMMA_RULE = ("must be at most 10 with dist = 'gamma' (gamma gaps of shape 1/cv² underflow to 0 s past it; "
              "dist = 'lognormal' takes up to 1e+06)")


def _spec(tmp: Path, arrivals_table: str) -> Path:
    f = tmp / "w.toml"
    f.write_text(f'[workload]\nduration_s = 10\n[workload.spec]\nname = "synthetic"\narrivals = {arrivals_table}\n'
                 "input_tokens = 100\noutput_tokens = 50\n")
    return f


@pytest.mark.parametrize(("cv", "got"), [("11", "11"), ("1e5", "100000.0"), ("1e9", "1000000000.0")])
def test_a_gamma_cv_past_its_limit_is_refused_at_its_key(tmp_path, cv, got):
    f = _spec(tmp_path, f'{{kind = "bursty", rate_per_s = 1, cv = {cv}}}')
    assert error(kvsim("workload", "describe", f), str(f)) == \
        f"Error: {f}: workload.spec.arrivals.cv: {GAMMA_RULE} (got {got})"


def test_a_lognormal_cv_takes_the_lengths_limit(tmp_path):
    f = _spec(tmp_path, '{kind = "bursty", rate_per_s = 1, cv = 1e7, dist = "lognormal"}')
    assert error(kvsim("workload", "describe", f), str(f)) == \
        f"Error: {f}: workload.spec.arrivals.cv: must be at most 1e+06 (got 10000000.0)"
    with pytest.raises(ConfigError, match=r"^w.cv: must be at most 10 with dist = 'gamma' .* \(got 1000000000\.0\)$"):
        arrival_from({"kind": "bursty", "rate_per_s": 1, "cv": 1e9}, "w")


@pytest.mark.parametrize(("dist", "cv"), [("gamma", "10"), ("lognormal", "1e6")])
def test_the_largest_cv_allowed_still_draws_a_workload(tmp_path, dist, cv):
    f = _spec(tmp_path, f'{{kind = "bursty", rate_per_s = 1, cv = {cv}, dist = "{dist}"}}')
    assert outcome(kvsim("workload", "describe", f)) is None


def test_the_draw_loop_ends_whatever_the_gaps(monkeypatch):
    """A renewal process that draws more than `MAX_REQUESTS` arrivals before its duration is refused, not drawn on."""
    monkeypatch.setattr(arrivals, "MAX_REQUESTS", 100)
    proc = Bursty(rate_per_s=1, cv=1e6, dist="lognormal")  # 10 s at 1/s draws some 270 arrivals
    with pytest.raises(ConfigError) as err:
        proc.times(np.random.default_rng(0), 10.0)
    assert str(err.value) == ("Bursty(rate_per_s=1, cv=1000000.0, dist='lognormal'): drew over 100 arrivals before "
                              "10 s (rate_per_s × duration_s = 10); allowed up to 100: lower cv or duration_s")


def test_the_readme_s_lognormal_counts_are_medians_of_five_seeds():
    """helper-204: the README said "100 s at 1 a second drew 127 lognormal arrivals at CV 10, 2,524 at 1e6", the
    medians of seeds 0-4 (as `workloads/arrivals.py` says), not what a run draws: seed 0 draws 172 and 5,124."""
    counts = {cv: sorted(len(Bursty(rate_per_s=1, cv=cv, dist="lognormal").times(np.random.default_rng(s), 100.0))
                         for s in range(5)) for cv in (10, 1e6)}
    assert counts == {10: [9, 123, 127, 172, 183], 1e6: [860, 1966, 2524, 2828, 5124]}
    readme = " ".join((Path(__file__).resolve().parents[2] / "README.md").read_text().split())
    assert ("100 s at 1 a second drew, the median of seeds 0-4, 127 lognormal arrivals at CV 10 (from 9 to 183) and "
            "2,524 at 1e6 (from 860 to 5,124)") in readme
