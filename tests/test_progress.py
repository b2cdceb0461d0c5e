"""Progress of long calls: the meter's arithmetic by hand, then each long call's fractions on a small
case (monotone, 1.0 last and once, the units each call says it counts), and the phase labels on stderr."""

import itertools
import math

import numpy as np
import pytest
from click.testing import CliRunner

from simulator.cli import main
from simulator.engine import EngineConfig
from simulator.planning import FLEET_PRIOR, HEADROOM_STEPS, plan_capacity
from simulator.progress import BEFORE_FINISH, GENERATE_COST, Meter, search_runs_left
from simulator.scenario import load_scenario
from simulator.study import run_scenario, simulated_collapse
from workloads import load_workload

TINY = """
name = "tiny"
description = "tiny"
[model]
name = "Llama-3.1-8B"
[cluster]
hardware = ["8xH100", "8xB200"]
tp = 8
[workload]
duration_s = 20
[workload.spec]
name = "chat-4k"
[report]
capacity = true
collapse = true
collapse_points = [4096, 16384]
breakeven = true
"""


def well_formed(seen):
    """Fractions in (0, 1], strictly increasing, 1.0 last and only last."""
    assert seen and seen[-1] == 1.0 and seen.count(1.0) == 1
    assert all(0 < a < b for a, b in itertools.pairwise(seen)), seen
    return seen


def test_meter_by_hand():
    seen = []
    m = Meter(seen.append, [2.0, 3.0])  # two stages: 2 then 3 units expected
    m.add(1.0)  # 1 of 5
    half = m.piece(1.0)
    half(0.5)  # 1.5 of 5
    m.add(1.0)  # 2 of 5; the first stage's estimate is spent
    m.next_stage()  # no change: 2 of 2 + 3
    m.expect(6.0)  # the second stage needs 6 after all: 2 of 8 < 0.4 shown, so the bar holds
    m.add(3.0)  # 5 of 8
    m.expect(0.5)  # 5 of 5.5
    m.add(2.0)  # more than expected: capped below 1 until finish
    m.finish()
    m.finish()  # once
    assert seen == [pytest.approx(x) for x in (1 / 5, 1.5 / 5, 2 / 5, 5 / 8, 5 / 5.5, BEFORE_FINISH, 1.0)]
    with pytest.raises(ValueError, match="'stages' must be finite costs >= 0"):
        Meter(None, [math.nan])


def test_meter_stages_alike_follow_the_current_estimate():
    seen = []
    m = Meter(seen.append, [1.0, 4.0, 4.0])  # a first step, then two stages alike (priors 4)
    m.add(1.0)  # 1 of 9
    m.next_stage(alike=1)  # the last stage is expected to cost what this one does: still 1 of 9
    m.expect(2.0)  # this stage now 2, so the next 2 as well: 1 of 5
    m.add(2.0)  # 3 of 5
    m.next_stage()  # its prior stays replaced: 3 of 5
    m.add(1.0)  # 4 of 5
    m.finish()
    assert seen == [pytest.approx(x) for x in (1 / 9, 1 / 5, 3 / 5, 4 / 5, 1.0)]


def test_search_runs_left_by_hand():
    assert search_runs_left(0, 1, False) == 1  # the first run, at the floor
    assert search_runs_left(1, 2, False) == 1  # 1 failed, 2 next: if it meets, nothing between
    assert search_runs_left(2, 4, False) == 2  # 4 next, then 3
    assert search_runs_left(8, 16, True) == 3  # bisecting 9..15: 12, then 10 or 14, then one more
    assert search_runs_left(3, 4, True) == 0


def test_run_scenario_counts_generation_then_each_fleet(tmp_path):
    (tmp_path / "t.toml").write_text(TINY)
    sc = load_scenario(tmp_path / "t.toml")
    seen = []
    run = run_scenario(sc, progress=seen.append)
    well_formed(seen)
    n = len(run.workload.requests())
    total = GENERATE_COST + 2  # two fleets
    # generation first, then each fleet's share by the requests ended (a tiny run: every one), the
    # last held just below 1 until the call returns
    assert seen == [pytest.approx(GENERATE_COST / total),
                    *(pytest.approx((GENERATE_COST + k / n) / total) for k in range(1, 2 * n)),
                    BEFORE_FINISH, 1.0]


def test_simulated_collapse_weighs_runs_by_requests():
    config = EngineConfig(model="Llama-3.1-8B", node="8xH100", tp=8)
    seen = []
    sims = simulated_collapse(config, [32768, 131072], requests_per_point=30, progress=seen.append)
    well_formed(seen)
    # two runs a point (flood, at capacity), each of max(30, 2 · analytic streams) requests
    sizes = [max(30, 2 * m) for m in sims.analytic_streams]
    ends = np.cumsum([n for n in sizes for _ in range(2)]) / (2 * sum(sizes))
    for f in ends[:-1]:
        assert pytest.approx(f) in seen
    assert sizes[0] > sizes[1]  # weighed: the short context's many more requests get the larger share


def test_plan_capacity_progress_and_a_line_per_simulation(tmp_path):
    (tmp_path / "t.toml").write_text(TINY)
    sc = load_scenario(tmp_path / "t.toml")
    seen, lines = [], []
    plan = plan_capacity(sc, progress=seen.append, on_step=lines.append)
    well_formed(seen)
    # one line per run: the search's, then HEADROOM_STEPS at scaled loads
    assert len(lines) == plan.simulations.sum()
    assert sum(" the load -> " in line for line in lines) == HEADROOM_STEPS * len(plan)
    assert all(line.endswith((": meets", ": fails")) for line in lines)
    # nothing is reported before a simulation ends (the estimate would be the priors alone); here the
    # first run, one node, meets, so each kind is expected to cost what FLEET_PRIOR says
    assert list(plan.nodes) == [1, 1]
    assert seen[0] == pytest.approx((GENERATE_COST + 1) / (GENERATE_COST + 2 * FLEET_PRIOR))


def test_compare_strategies_one_share_per_set():
    from simulator.compare import compare_strategies

    reqs = list(load_workload("chat-4k", seed=0, duration_s=10))
    seen = []
    compare_strategies(EngineConfig(model="Llama-3.1-8B", node="8xH100", tp=8), reqs, ["native", "fp8", "prefix"],
                       progress=seen.append)
    well_formed(seen)
    assert pytest.approx(1 / 3) in seen and pytest.approx(2 / 3) in seen


def test_fit_all_one_share_per_gpu_then_per_group(monkeypatch):
    pytest.importorskip("aiconfigurator_core")
    from simulator.cost import aiconfigurator as aic
    from simulator.cost.fit import FitResult
    from simulator.cost.params import load_params

    def instant(params, free, model, measured, **_kw):  # the fit's arithmetic is not what is tested here
        return FitResult(params=params, free=tuple(free), n_points=len(measured), rel_errors=np.zeros(1))

    monkeypatch.setattr(aic, "fit_params", instant)
    loaded = {}  # each GPU's tables as the fit read them (reading them again costs as much)
    system_rows = aic.system_rows

    def recorded(system, *args, **kwargs):
        loaded[system] = system_rows(system, *args, **kwargs)
        return loaded[system]

    monkeypatch.setattr(aic, "system_rows", recorded)
    seen = []
    aic.fit_all("mixed", load_params("H100"), ["H100", "H200"], progress=seen.append)
    well_formed(seen)
    assert sorted(loaded) == ["h100_sxm", "h200_sxm"]
    # per GPU: its tables LOAD_SHARE, then one step per fitted group, weighed free² × training rows
    rows = loaded["h100_sxm"]
    groups = [(len(free), [rows[o] for o in ops if o in rows]) for ops, free in aic.GROUPS.values()]
    weights = [n ** 2 * aic._train_rows(present) for n, present in groups if present]
    ends = aic.LOAD_SHARE + (1 - aic.LOAD_SHARE) * np.cumsum(weights) / sum(weights)
    # (held below 1 until the GPU's fit returns, as every meter: the last tiny group lands on the cap)
    ends = sorted({round(min(e, BEFORE_FINISH), 12) for e in ends})
    first = [f for f in seen if f <= 0.5]
    assert first == [pytest.approx(f / 2) for f in (aic.LOAD_SHARE, *ends, 1.0)]
    assert len(weights) == 8 and len(seen) == 2 * len(first)  # H200 has the same groups as H100


def test_report_phases_and_cli_labels(tmp_path, monkeypatch):
    # the collapse study at two long contexts: the fewest requests a point (the phase is what is checked)
    (tmp_path / "t.toml").write_text(TINY.replace("capacity = true", "capacity = false")
                                     .replace("[4096, 16384]", "[32768, 65536]"))
    from simulator import report

    phases: dict[str, list[float]] = {}
    write_report = report.write_report

    def recorded(run, out, capacity=None, **kwargs):
        """`kvsim run`'s own call of write_report, its phases' fractions recorded on the way to its bars."""
        bars = kwargs.pop("phases")

        def phase(label):
            bar, seen = bars(label), phases.setdefault(label, [])

            def both(fraction):
                seen.append(fraction)
                bar(fraction)
            return both
        return write_report(run, out, capacity, phases=phase, **kwargs)

    monkeypatch.setattr(report, "write_report", recorded)
    r = CliRunner().invoke(main, ["run", str(tmp_path / "t.toml"), "--out", str(tmp_path / "cli"), "--json"])
    assert r.exit_code == 0, r.output
    assert list(phases) == ["writing the report", "collapse study", "TTL break-even"]
    for seen in phases.values():
        well_formed(seen)
    # two fleets' files, two charts; the last held below 1 until the phase ends
    assert phases["writing the report"] == [0.25, 0.5, 0.75, BEFORE_FINISH, 1.0]
    # off a terminal click draws no bar: each phase's label once, in order, on stderr (the JSON stays clean)
    labels = ["simulating", "capacity search", "writing the report", "collapse study", "TTL break-even"]
    assert [line for line in r.stderr.splitlines() if line in labels] == labels[:1] + labels[2:]
    assert r.stdout.lstrip().startswith("{")
    r = CliRunner().invoke(main, ["capacity", str(tmp_path / "t.toml"), "--hardware", "8xB200"])
    assert r.exit_code == 0, r.output
    err = r.stderr.splitlines()
    # the label, then a line per run as it ends (off a terminal)
    assert "capacity search" in err and err.index("capacity search") < err.index(
        next(line for line in err if line.startswith("  8xB200: 1 node(s) -> ")))
