"""The machine yardstick of `make bench` (`tests.bench.reference`) must stay the same work."""

from __future__ import annotations

import dataclasses
import json

import pytest

from simulator.engine import run
from tests.bench import count, scenarios
from tests.bench.reference import _workload, reference_s


def test_the_reference_workload_is_fixed() -> None:
    """Its reference times are compared across benches (README): a change to the loop changes this
    total and makes them incomparable, so it fails here first (1,000 rounds: 16 items, each step's
    cost ``1e-3 + (load mod 1024) · 2.5e-6``)."""
    assert _workload(1000) == 1.2778299999999982
    assert _workload(1000) == _workload(1000)
    # the costs it sums lie in [1e-3, 1e-3 + 1023 · 2.5e-6]
    assert 1000 * 1e-3 <= _workload(1000) <= 1000 * (1e-3 + 1023 * 2.5e-6)


def test_reference_s_is_the_best_of_its_repeats() -> None:
    assert 0 < reference_s(rounds=2_000, repeats=3) < 1.0


def test_the_count_runs_the_scenario_or_everything_but_the_run(capsys: pytest.CaptureFixture[str]) -> None:
    """`tests.bench.count`, whose instruction count with ``--no-run`` is subtracted from the one without
    (README): the run's requests and events, the same as `run`'s own; none without the run."""
    config, requests, n, timer = scenarios.build("scale-4", 300)
    config = dataclasses.replace(config, router="round-robin")  # (least-tokens makes 1,125 events here, not 1,136)
    want = run(config, requests, seed=1, timer=timer, total_requests=n).summary
    out = count.main(["scale-4", "300", "--router", "round-robin"])
    assert json.loads(capsys.readouterr().out) == out
    assert (out["requests"], out["events"], out["router"]) == (want["requests"], want["events"], "round-robin")
    assert out["requests"] == 300 and out["events_per_request"] == want["events"] / 300 > 1
    assert count.main(["scale-4", "300", "--no-run"]) == {
        "scenario": "scale-4", "router": "least-tokens", "requests": 0, "events": 0, "events_per_request": 0.0}


def test_router_time_wraps_choose_once_an_arrival_and_leaves_the_run_as_it_was(
        capsys: pytest.CaptureFixture[str]) -> None:
    """`tests.bench.router_time` (README: least-tokens' ``choose`` at 64 replicas): one timed ``choose`` a
    request, the run's requests and events as `run` makes them, and the routers unwrapped after."""
    from simulator.engine.routers import basic
    from tests.bench import router_time

    before = basic._LeastTokens.choose
    config, requests, n, timer = scenarios.build("scale-4", 300)
    want = run(config, requests, seed=1, timer=timer, total_requests=n).summary
    out = router_time.main(["scale-4", "300"])
    assert json.loads(capsys.readouterr().out) == out
    assert (out["requests"], out["arrivals"], out["router"]) == (300, 300, "least-tokens")
    assert out["events_per_request"] == want["events_per_request"]
    assert 0 < float(str(out["choose_us_per_arrival"])) < float(str(out["run_cpu_us_per_request"]))
    assert basic._LeastTokens.choose is before


def test_router_time_replay_runs_the_same_system_without_the_router(capsys: pytest.CaptureFixture[str]) -> None:
    """``router_time --replay``: its replayed choices make the same run, summary for summary (events and
    every figure), so the CPU between the two is the router's; the routers are unwrapped after."""
    from simulator.engine import cluster
    from simulator.engine.routers import basic
    from tests.bench import router_time

    before, make = basic._LeastTokens.choose, cluster.make_router
    for router in ("least-tokens", "round-robin"):
        out = router_time.main(["scale-4", "300", "--router", router, "--replay", "1"])
        assert json.loads(capsys.readouterr().out) == out
        assert out["same_summary"] is True and out["router"] == router
        assert float(str(out["replay_cpu_us_per_request"])) > 0 and float(str(out["router_cpu_us_per_request"])) > 0
    assert basic._LeastTokens.choose is before and cluster.make_router is make
    # a replay that answers other replicas makes another run: the comparison can fail
    config, requests, n, timer = scenarios.build("scale-4", 300)
    drawn = list(requests)
    picks = router_time._recorded(config, drawn, n, timer)
    assert len(picks) == 300 and len(set(picks)) == 4
    with router_time._router_of(router_time.Replay(tuple((i + 1) % 4 for i in picks))):
        shifted = run(config, iter(drawn), seed=1, timer=timer, total_requests=n).summary
    assert shifted != run(config, iter(drawn), seed=1, timer=timer, total_requests=n).summary


def test_router_time_replay_of_a_disaggregated_run() -> None:
    """A split run binds the router once per pool (prefill, then decode); both draw from one recorded
    stream, in the order the run asks, and the replay makes the same run."""
    from simulator.engine import PoolConfig
    from tests.bench import router_time
    from tests.engine.helpers import poisson_requests
    from tests.engine.test_disagg import SPLIT, TIMER

    drawn = poisson_requests(200, rate_per_s=4.0, prompt_tokens=(100, 3000), output_tokens=(10, 200), seed=3)
    config = dataclasses.replace(SPLIT, n_nodes=2, prefill_pool=PoolConfig(node="8xH100", n_nodes=1, tp=2),
                                 short_prompt_tokens=1000)  # short prompts go to the decode pool's router
    out = router_time.replay(config, drawn, len(drawn), TIMER, rounds=1)
    assert out["same_summary"] is True
