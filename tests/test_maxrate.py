"""Max-rate search: the bracket against a hand-worked threshold, determinism, the offline mode, the CLI."""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
from collections.abc import Callable

import pytest
from click.testing import CliRunner

from simulator.cli import main
from simulator.engine import AffineTimer, EngineConfig, SchedulerConfig, run
from simulator.errors import ConfigError
from simulator.maxrate import Trial, all_at_once, bisect_rate, max_rate, offline_throughput
from simulator.scenario import parse_scenario
from workloads import Workload
from workloads.request import Request

STEP = AffineTimer(overhead_s=0.01, per_seq_s=0.0, per_context_token_s=0.0, per_prefill_token_s=0.0)
BATCH_1 = EngineConfig(scheduler=SchedulerConfig(max_num_seqs=1))
N = 600


def fake(threshold: float) -> tuple[list[float], Callable[[float], Trial]]:
    """A trial that meets iff ``scale ≤ threshold``, recording the scales tried."""
    tried: list[float] = []

    def trial(scale: float) -> Trial:
        tried.append(scale)
        return Trial(rate_scale=scale, ok=scale <= threshold, steady=True, offered_requests_per_s=scale,
                     sustained_requests_per_s=scale, sustained_output_tokens_per_s=scale, ttft_p99_s=0.0,
                     tpot_p99_s=0.0, timed_out=0)

    return tried, trial


def test_bisection_brackets_a_threshold_as_narrowly_as_asked() -> None:
    """Threshold 3: from 1 the climb tries 1, 2, 4 (ratio 2), then ⌈log2(ln 2 / ln 1.05)⌉ = 4
    bisections in log space bring hi/lo to 2^(1/16) = 1.044 ≤ 1.05: 7 trials, none repeated."""
    tried, trial = fake(3.0)
    b = bisect_rate(trial, start=1.0, rel_tol=0.05)
    assert b.lo_scale <= 3.0 < b.hi_scale and b.width <= 0.05
    assert tried[:3] == [1.0, 2.0, 4.0] and len(tried) == 7 == len(set(tried))
    assert b.best is not None and b.best.rate_scale == b.lo_scale
    # a guess close above the answer with a small step: down once (3.3 / 1.1 = 3.0 meets) and done
    tried, trial = fake(3.0)
    b = bisect_rate(trial, start=3.3, step=1.1, rel_tol=0.1)
    assert tried == [3.3, pytest.approx(3.0)] and b.lo_scale == pytest.approx(3.0) and b.hi_scale == 3.3


def test_bisection_reports_unbounded_ends() -> None:
    _, always = fake(math.inf)
    b = bisect_rate(always, max_scale=64.0)
    assert (b.lo_scale, b.hi_scale) == (64.0, math.inf) and b.width == math.inf
    _, never = fake(0.0)
    b = bisect_rate(never, min_scale=1 / 64)
    assert (b.lo_scale, b.hi_scale) == (0.0, 1 / 64) and b.best is None


@pytest.mark.parametrize("start", [0.5, 4.0])
def test_max_rate_of_one_request_at_a_time_is_found_by_hand(start: float) -> None:
    """One replica, one request at a time, a 10 ms step, 10 output tokens: 0.1 s a request, so it
    serves μ = 10 req/s. N = 600 requests evenly at λ = 10·scale req/s. At λ ≤ μ nobody waits
    (TTFT 10 ms). At λ > μ the server is busy from t = 0 and request k starts at 0.1·k, so its TTFT
    is ``k (0.1 − 1/λ) + 0.01``, linear in k; numpy's p99 sits at k = 0.99 (N − 1) = 593.01. The SLO
    p99 TTFT ≤ 0.5 s holds while ``593.01 (0.1 − 1/λ) ≤ 0.49``: λ* = 1 / (0.1 − 0.49 / 593.01) =
    10.0833 req/s. (The queue grows by under 1% of arrivals there, so the run counts as steady.)
    The bracket must hold λ*, be no wider than asked, and the run at its low end sustain
    min(λ, μ) × 10 tokens = ~100 tok/s."""
    lam_star = 1 / (0.1 - 0.49 / (0.99 * (N - 1)))
    assert lam_star == pytest.approx(10.0833, abs=1e-4)

    def trial(scale: float) -> Trial:
        lam = 10.0 * scale
        reqs = [Request(id=i, arrival_s=i / lam, prompt_tokens=100, output_tokens=10, segments=((i, 100),))
                for i in range(N)]
        return Trial.of(scale, run(BATCH_1, reqs, seed=0, timer=STEP), ttft_p99_s=0.5, tpot_p99_s=0.1)

    b = bisect_rate(trial, start=start, rel_tol=0.01)
    assert 10 * b.lo_scale <= lam_star <= 10 * b.hi_scale
    assert b.hi_scale / b.lo_scale <= 1.01
    assert b.best is not None and b.best.sustained_output_tokens_per_s == pytest.approx(100.0, rel=0.01)


TINY = {"name": "tiny", "seed": 1, "model": {"name": "Llama-3.1-8B"}, "cluster": {"hardware": ["8xH100"], "tp": 8},
        "workload": {"duration_s": 60, "spec": {"name": "chat-4k"}}, "slo": {"ttft_p99_s": 0.5, "tpot_p99_s": 0.05},
        "report": {"breakeven": False}}
# TPOT = 20 ms + 1 ms a sequence in the batch: the 50 ms TPOT SLO caps the batch near 30
CROWDED = AffineTimer(overhead_s=0.02, per_seq_s=1e-3, per_context_token_s=0.0, per_prefill_token_s=2e-5)


def test_max_rate_is_deterministic_per_seed_and_reports_each_seed() -> None:
    sc = parse_scenario(TINY, "tiny")
    steps: list[str] = []
    a = max_rate(sc, seeds=2, rel_tol=0.2, timer=CROWDED, on_step=steps.append)
    b = max_rate(sc, seeds=2, rel_tol=0.2, timer=CROWDED)
    assert a == b
    assert [x.seed for x in a.answers] == [1, 2] and a.hardware == "8xH100" and a.nodes == 1
    for x in a.answers:
        assert 0 < x.lo_scale < x.hi_scale <= 1.2 * x.lo_scale
        assert 0 < x.lo_requests_per_s < x.hi_requests_per_s and x.tpot_p99_s <= 0.05
    assert len(steps) == sum(x.simulations for x in a.answers) and "meets" in steps[0]
    r = a.requests_per_s
    assert r["min"] <= r["mean"] <= r["max"] and r["spread"] == pytest.approx((r["max"] - r["min"]) / r["mean"])
    assert len(a.to_frame()) == 2 and json.dumps(a.as_dict())
    # 60 s of chat sessions is too short: at seed 2's answer (×3.364) the window held 102 completions
    # for 124 queued arrivals, under 0.9 × 124 = 111.6 (the sessions still ramping), so no answer is given
    assert [x.too_short for x in a.answers] == [False, True] and a.as_dict()["too_short"] is True
    assert a.describe()[0].startswith("8xH100 × 1 node(s): runs of 60 s are too short to tell the max rate; "
                                      "raise --duration-s (seed 2 at rate ×3.364: ")
    # a trace that ends before --duration-s holds the arrivals it holds, so a longer trace is what is needed, and the
    # line says how long the run's arrivals were (helper-156: "raise --duration-s" of a trace that ×39.74 made 15 s);
    # one that --duration-s cut (`Workload.cut_at_s`), a longer --duration-s is the answer (helper-164, helper-167)
    span = a.answers[1].arrival_span_s
    assert 50 < span < 60 and not a.answers[1].trace_cut  # a generator: never cut
    lines = dataclasses.replace(a, trace=True).describe()
    assert lines[0].startswith(f"8xH100 × 1 node(s): the trace is too short to tell the max rate: at rate ×3.364 its "
                               f"arrivals span {span:,.1f} s; a longer trace is needed (seed 2 at rate ×3.364: ")
    assert lines[1].endswith(f"({a.answers[0].simulations} runs of the trace up to 60 s)")
    cut = dataclasses.replace(a.answers[1], trace_cut=True)
    lines = dataclasses.replace(a, trace=True, answers=(a.answers[0], cut)).describe()
    assert lines[0].startswith("8xH100 × 1 node(s): runs of the trace up to 60 s are too short to tell the max rate; "
                               "raise --duration-s (seed 2 at rate ×3.364: ")
    # the seed too short to tell measured no sustained rate: said so, not a figure (helper-156)
    assert "; sustained 0" not in lines[2] and "; sustained: too short to tell (" in lines[2]
    assert "; sustained: too short" not in lines[1]


def test_offline_throughput_puts_every_request_at_t0() -> None:
    sc = parse_scenario({**TINY, "scheduler": {"max_num_seqs": 8}}, "tiny")
    wl = all_at_once(sc.load_workload(1))
    assert {r.arrival_s for r in wl} == {0.0} and isinstance(wl, Workload)
    df = offline_throughput(sc, seeds=1, timer=CROWDED)
    row = df.iloc[0]
    assert row.requests == row.completed == len(wl.requests())
    assert 0 < row.steady_window_start_s < row.steady_window_end_s < row.makespan_s
    assert row.output_tokens_per_s > 0 and row.steady_state_warning == ""


def test_capacity_max_rate_and_offline_commands(tmp_path) -> None:
    sc = tmp_path / "sc.toml"
    sc.write_text("""
name = "cli"
[model]
name = "Llama-3.1-70B"
[cluster]
hardware = ["8xH100"]
[workload]
duration_s = 30
[workload.spec]
name = "chat-4k"
[slo]
ttft_p99_s = 1.0
tpot_p99_s = 0.05
""")
    r = CliRunner().invoke(main, ["capacity", str(sc), "--max-rate", "--seeds", "2", "--rel-tol", "0.5", "--json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    (m,) = doc["max_rate"]
    assert [s["seed"] for s in m["seeds"]] == [0, 1] and m["slo"] == {"ttft_p99_s": 1.0, "tpot_p99_s": 0.05}
    assert all(s["hi_scale"] <= 1.5 * s["lo_scale"] for s in m["seeds"])
    out = tmp_path / "out"
    r = CliRunner().invoke(main, ["capacity", str(sc), "--offline", "--seeds", "1", "--out", str(out)])
    assert r.exit_code == 0, r.output
    assert "offline (every request at t = 0" in r.stdout and (out / "offline.csv").exists()


def test_bisection_tells_the_scales_still_to_come() -> None:
    """Threshold 3 from 1 (rel_tol 0.05; ⌈log2(ln(r) / ln 1.05)⌉ bisections for a bracket of ratio r:
    4 for r = 2), before each trial, the scales to come summed, each bisection at its bracket's middle:
    1 + 2 + 4·√2 = 8.657 (start, then a climb assumed to fail at 2); 2 + 4·√2 = 7.657; 4 + 4·2√2 =
    15.31 (2 met); [2, 4]: 4·√8 = 11.31; [√8, 4]: 3 bisections · 3.364 = 10.09; [√8, 3.364]: 2 ·
    3.084 = 6.169; [√8, 3.084]: 1 · 2.953. (The trials actually left at 4 sum to 16.2.)"""
    from simulator.maxrate import bisection_steps, scales_left

    assert [bisection_steps(1.0, r, 0.05) for r in (1.04, 1.1, 2.0, 4.0)] == [0, 1, 4, 5]
    assert scales_left(0.0, math.inf, 2.0, 0.05, 1.0) == pytest.approx(1 + 2 + 4 * math.sqrt(2))
    tried, trial = fake(3.0)
    lefts: list[float] = []
    bisect_rate(trial, start=1.0, rel_tol=0.05, left=lefts.append)
    assert len(lefts) == len(tried) == 7
    assert lefts == pytest.approx([8.657, 7.657, 15.31, 11.31, 10.09, 6.169, 2.953], rel=1e-3)


def test_max_rate_progress_weighs_trials_by_their_scale() -> None:
    from simulator.maxrate import scales_left
    from simulator.progress import GENERATE_COST

    sc = parse_scenario(TINY, "tiny")
    seen: list[float] = []
    steps: list[str] = []
    a = max_rate(sc, seeds=3, rel_tol=0.2, timer=CROWDED, on_step=steps.append, progress=seen.append)
    assert seen[-1] == 1.0 and seen.count(1.0) == 1 and all(x < y for x, y in itertools.pairwise(seen))
    # before anything: three searches like the first seed's from 1, as scales_left says
    first_trial = (1 + GENERATE_COST) * 1.0  # the first trial, at scale 1, generated and run
    prior = (1 + GENERATE_COST) * 3 * scales_left(0.0, math.inf, 2.0, 0.2, 1.0)
    assert seen[0] == pytest.approx(GENERATE_COST / prior)  # its workload generated
    assert pytest.approx(first_trial / prior) in seen  # its run ended
    # when the first seed ends, each seed after it is expected to cost what it did: a third done
    n = a.answers[0].simulations
    assert len(steps) == sum(x.simulations for x in a.answers) and "seed 2" in steps[n]
    assert pytest.approx(1 / 3) in seen


def test_max_rate_lines_say_n_a_for_a_p99_none_measured() -> None:
    """One-token answers make no second token, so no TPOT: the line says ``n/a``, as the fleet search's does
    (`latency_line`), not ``nan``."""
    from simulator.units import measure_against

    assert measure_against(math.nan, 0.05, "s") == "n/a" and measure_against(10.3, 10, "ms") == "10.3 ms"
    sc = parse_scenario({**TINY, "workload": {"duration_s": 20, "spec": {
        "name": "synthetic", "output_tokens": 1, "arrivals": {"kind": "poisson", "rate_per_s": 2.0}}}}, "tiny")
    steps: list[str] = []
    a = max_rate(sc, seeds=1, rel_tol=0.5, timer=CROWDED, on_step=steps.append)
    assert steps and all("TPOT p99 n/a," in line and "nan" not in line for line in steps)
    # a replay with no duration_s runs the whole trace: said so, not "runs of inf s" (helper-115)
    assert a.describe()[-1].endswith(f"({a.answers[0].simulations} runs of 20 s)")
    whole = dataclasses.replace(a, duration_s=math.inf).describe()[-1]
    assert whole.endswith(f"({a.answers[0].simulations} runs of the whole trace)") and "inf" not in whole


def test_max_rate_refuses_an_offline_workload_it_cannot_scale() -> None:
    """Offline arrivals (all at t = 0) have no rate: a rate scale multiplied the count and the search answered
    'rate x12.88 (0 req/s offered)', exit 0 (helper-121). It is refused after the first run, naming the way
    to its throughput."""
    spec = {"name": "synthetic", "arrivals": {"kind": "offline", "count": 12}, "input_tokens": 64,
            "output_tokens": 8}
    sc = parse_scenario({**TINY, "workload": {"duration_s": 1, "spec": spec}}, "offline.toml")
    with pytest.raises(ConfigError, match=r"^offline.toml: max rate: the workload's 12 request\(s\) all arrive at "
                                          r"one instant \(offline arrivals\), so it has no arrival rate to scale; its "
                                          r"throughput is the offline run's \(kvsim capacity --offline\)$"):
        max_rate(sc, seeds=1, timer=CROWDED)
    assert len(offline_throughput(sc, seeds=1, timer=CROWDED)) == 1


def test_a_search_line_says_why_a_run_is_not_steady():
    """helper-134: "not steady: meets" and "not steady: fails" read alike; a run too short to tell may meet, one
    whose queue grew fails."""
    from simulator.maxrate import Trial

    base = dict(rate_scale=1.0, ok=True, offered_requests_per_s=1.0, sustained_requests_per_s=1.0,
                sustained_output_tokens_per_s=1.0, ttft_p99_s=0.1, tpot_p99_s=0.01, timed_out=0)
    assert Trial(steady=True, **base).unsteady_label == ""
    assert Trial(steady=False, too_short=True, **base).unsteady_label == ", too short to tell"
    assert Trial(steady=False, queue_growing=True, **base | {"ok": False}).unsteady_label == ", queue growing"
    assert Trial(steady=False, **base).unsteady_label == ", not steady"  # no steady window at all


def test_offline_runs_too_short_for_a_window_say_no_rate_and_a_trace_says_its_seeds_are_one_draw() -> None:
    """helper-156: 4 requests of a trace at t = 0 printed "nan req/s, nan output tok/s" on the progress line and NaN
    in the table; and --seeds on a trace said that every seed replays one workload in the fleet search only."""
    from pathlib import Path

    trace = Path(__file__).parents[1] / "scenarios" / "traces" / "chat-sample.csv"
    r = CliRunner().invoke(main, ["capacity", "trace-replay", "--trace", str(trace), "--offline", "--seeds", "2",
                                  "--duration-s", "20"])
    assert r.exit_code == 0, r.output
    assert "note: --seeds 2: a trace is the same requests at every seed" in r.output
    assert "8xH100 seed 0: 4 requests at t = 0 -> no sustained rate (no steady window: " in r.output
    assert "nan" not in r.output.lower()
    row = next(line for line in r.output.splitlines() if line.strip().startswith("8xH100      1     0"))
    assert row.split()[7:9] == ["n/a", "n/a"]  # requests_per_s, output_tokens_per_s


def test_a_trace_too_short_at_its_max_rate_says_a_longer_trace_is_needed() -> None:
    """helper-156: the shipped chat-sample.csv (656 rows over 598.6 s) at ×39.74 spans 15 s of arrivals, and the
    answer said 'raise --duration-s' at 3,000 s as at 600; helper-167: the trace was never cut, as its workload
    records (`Workload.cut_at_s`), so a longer trace is what is needed."""
    from simulator.scenario import load_scenario

    a = max_rate(load_scenario("trace-replay"), seeds=1, duration_s=3000)
    assert a.answers[0].too_short and not a.answers[0].trace_cut
    assert "the trace is too short to tell the max rate: at rate ×" in a.describe()[0]
    assert "a longer trace is needed" in a.describe()[0]


def test_an_offline_run_too_short_to_tell_says_no_sustained_rate() -> None:
    """helper-190: 298 chat requests at t = 0 on 2 × 8xH100 (30 s of arrivals) have a window of [1.72, 3.44] s with no
    completion in it; the progress line read "0 req/s, 7,325 output tok/s sustained over [2, 3] s", where the steady
    rule says too short to tell (as max-rate says "sustained: too short to tell"); it now says no sustained rate, and
    why."""
    r = CliRunner().invoke(main, ["capacity", "chat-4k-h100", "--offline", "--seeds", "1", "--duration-s", "30"])
    assert r.exit_code == 0, r.output
    assert ("8xH100 seed 0: 298 requests at t = 0 -> no sustained rate (0 completion(s) in the window [1.7, 3.4] s, "
            "fewer than 10; give the run more requests") in r.output
    assert "output tok/s sustained" not in r.output


def test_max_rate_and_offline_refuse_bad_slos_and_seeds_before_any_run(monkeypatch) -> None:
    """helper-190: `max_rate(ttft_p99_s=0)` searched the scenario's 2 s SLO in silence (0 read as not given), a NaN
    TPOT SLO met every TPOT (chat-4k-h100 at 5 s: ×11.3, where 0.1 s answers ×9.5), -1 met nothing and ran the
    search down to ×1/1024; `seeds=1.5` ended in a TypeError from ``range``. Each is refused in one line naming the
    key, before a simulation; None still means the scenario's."""
    import simulator.maxrate as mr
    from simulator.scenario import load_scenario

    monkeypatch.setattr(mr, "run", lambda *a, **kw: pytest.fail("no simulation for bad input"))
    sc = load_scenario("chat-4k-h100")
    for kw, key, got in [({"ttft_p99_s": 0}, "ttft_p99_s", "0"), ({"tpot_p99_s": math.nan}, "tpot_p99_s", "nan"),
                         ({"ttft_p99_s": -1.0}, "ttft_p99_s", "-1.0"), ({"tpot_p99_s": math.inf}, "tpot_p99_s", "inf"),
                         ({"seeds": 1.5}, "seeds", "1.5"), ({"seeds": True}, "seeds", "True"),
                         ({"seed": -1}, "seed", "-1")]:
        with pytest.raises(ConfigError, match=rf"^max_rate: '{key}' must be .* \(got {got}\)$"):
            max_rate(sc, duration_s=5, **kw)
    for kw, key in [({"seeds": 1.5}, "seeds"), ({"seed": -1}, "seed")]:
        with pytest.raises(ConfigError, match=rf"^offline_throughput: '{key}' must be "):
            offline_throughput(sc, duration_s=5, **kw)


def test_max_rate_csv_rows_carry_the_slos_they_were_searched_at(tmp_path) -> None:
    """helper-190: max_rate.csv gave each seed's rate without the SLOs it meets (nor the bracket's tolerance or the
    runs' length): a figure no one could trace from the file, where capacity.csv carries its SLOs."""
    import pandas as pd

    r = CliRunner().invoke(main, ["capacity", "chat-4k-h100", "--max-rate", "--seeds", "1", "--duration-s", "20",
                                  "--slo-ttft-p99-s", "3", "--slo-tpot-p99-s", "0.08", "--rel-tol", "0.1",
                                  "--out", str(tmp_path)])
    assert r.exit_code == 0, r.output
    row = pd.read_csv(tmp_path / "max_rate.csv").iloc[0]
    assert (row.slo_ttft_p99_s, row.slo_tpot_p99_s, row.rel_tol, row.duration_s) == (3.0, 0.08, 0.1, 20.0)
    assert row.hi_scale / row.lo_scale <= 1.1 + 1e-12
