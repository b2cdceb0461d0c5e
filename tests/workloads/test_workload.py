"""Workload replay: windows, time scale, thinning and compression; frames."""

import json
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from simulator.errors import ConfigError
from workloads.load import load_workload
from workloads.request import Request
from workloads.workload import Workload


def uniform_workload(n: int, every_s: float = 1.0) -> Workload:
    reqs = [
        Request(id=i, arrival_s=i * every_s, prompt_tokens=10, output_tokens=2, segments=((1, 4), (9 + i, 6)))
        for i in range(n)
    ]
    return Workload.from_requests(reqs, name="u")


def test_window_and_time_scale() -> None:
    w = uniform_workload(100).replayed(start_s=10, duration_s=20, time_scale=2.0)
    times = [r.arrival_s for r in w]
    assert times == [0.5 * i for i in range(40)]  # trace 10..49 played twice as fast
    assert [r.id for r in w] == list(range(40))


def test_thinning_keeps_the_share_and_replays_identically() -> None:
    w = uniform_workload(20_000).replayed(rate_scale=0.3, seed=4)
    kept = w.requests()
    assert abs(len(kept) - 6000) < 5 * np.sqrt(20_000 * 0.3 * 0.7)
    assert kept == w.requests()
    assert kept != uniform_workload(20_000).replayed(rate_scale=0.3, seed=5).requests()


def test_rate_scale_above_one_compresses_time() -> None:
    w = uniform_workload(100).replayed(rate_scale=4.0, duration_s=10)
    assert [r.arrival_s for r in w] == [0.25 * i for i in range(40)]
    assert w.summary().rate_per_s == pytest.approx(40 / 9.75)  # n / (last - first)


def test_to_frame_one_row_per_request() -> None:
    frame = uniform_workload(3).to_frame()
    assert len(frame) == 3
    assert frame.loc[2, "segments"] == "1:4;11:6" and frame.loc[2, "n_segments"] == 2


def test_load_workload_generator_determinism_and_rate_scale() -> None:
    a = load_workload("chat-4k", seed=1, duration_s=600).requests()
    assert a == load_workload({"name": "chat-4k"}, seed=1, duration_s=600).requests()
    assert a != load_workload("chat-4k", seed=2, duration_s=600).requests()
    s1 = load_workload("chat-4k", seed=1, duration_s=2000).summary()
    s2 = load_workload("chat-4k", seed=1, duration_s=2000, rate_scale=2.0).summary()
    assert s2.n_sessions / s1.n_sessions == pytest.approx(2.0, rel=0.1)  # 1000 vs 2000 sessions


def test_load_workload_toml_and_errors(tmp_path: Path) -> None:
    p = tmp_path / "s.toml"
    p.write_text('[workload]\nname = "chat-4k"\nsessions = {kind = "bursty", rate_per_s = 1.0, cv = 2.0}\n')
    s = load_workload(p, duration_s=1000).summary()
    assert abs(s.n_sessions - 1000) < 150  # bursty with cv 2: sd ~ cv * sqrt(n) ~ 63
    with pytest.raises(ConfigError, match=r"load_workload: spec: must be a generator name \(chat-4k, code-repo-128k"):
        load_workload("no-such")
    p.write_text("[other]\n")
    with pytest.raises(ConfigError, match=r"s\.toml: 'workload' must be a table"):
        load_workload(p)


def test_a_trace_row_far_past_the_horizon_is_said_in_a_short_line(tmp_path) -> None:
    # helper-179: 1e308 ms printed as 306 digits of seconds; the CLI cut the 575-character line before its remedy
    trace = tmp_path / "m.jsonl"
    trace.write_text("".join(json.dumps({"timestamp": t, "input_length": 10, "output_length": 2}) + "\n"
                             for t in (0, 1e308)))
    with pytest.raises(ConfigError) as err:
        load_workload(trace).summary()
    assert str(err.value) == ("m.jsonl: a request at 1e+305 s, after 31,622,400 s (366 days), beyond kvsim's limit; "
                              "replay a window (duration_s), thin it (rate_scale < 1) or speed it up (time_scale)")


@pytest.mark.parametrize("bad", [None, "4096", 1.5, 0, True])
def test_within_takes_a_whole_context_window(bad):
    """`Workload.within` (helper-185): None or "4096" raised a TypeError from its ``>= 1`` comparison, and 1.5 passed it
    to keep no request; each is now a one-line error at `max_tokens`. A numpy integer is an integer."""
    wl = uniform_workload(3)  # 12 tokens a request
    with pytest.raises(ConfigError, match=r"^Workload\.within: 'max_tokens' must be an integer >= 1 \(a context "
                                          r"window\) \(got "):
        wl.within(bad)
    assert [r.id for r in wl.within(np.int64(12))] == [0, 1, 2]
    assert wl.within(11).requests() == []


def test_a_scenario_toml_with_duration_inf_replays_its_whole_trace(tmp_path: Path) -> None:
    """``duration_s = inf`` in a scenario's [workload] with a trace is the whole trace, as `kvsim run` reads it
    (`WorkloadSection`); `load_workload` of the same TOML (`kvsim workload describe`) refused it as "must be
    finite and > 0"."""
    trace = tmp_path / "t.csv"
    trace.write_text("Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
                     "0,ChatGPT,10,5,15,Conversation log\n900,ChatGPT,20,7,27,Conversation log\n")
    spec = tmp_path / "s.toml"
    spec.write_text('[workload]\ntrace = "t.csv"\nduration_s = inf\n')
    w = load_workload(spec)
    assert [(r.arrival_s, r.prompt_tokens) for r in w] == [(0.0, 10), (900.0, 20)] and w.cut_at_s is None
    spec.write_text('[workload]\nspec = {name = "chat-4k"}\nduration_s = inf\n')  # a generator needs a horizon
    with pytest.raises(ConfigError, match=r"workload: 'duration_s' must be finite and > 0 \(got inf\)"):
        load_workload(spec)


def session_workload(n_sessions: int, turns: int = 5) -> Workload:
    """`n_sessions` sessions of `turns` turns, turn k sending the session's k + 1 segments of 100 tokens (its
    history, then a new message): 100·k of its 100·(k + 1) tokens an earlier turn sent, 2/3 of all at 5 turns."""
    reqs = [
        Request(id=0, arrival_s=float(s + 1000 * k), prompt_tokens=100 * (k + 1), output_tokens=1,
                segments=tuple((10 * s + j, 100) for j in range(k + 1)), session_id=s, turn=k)
        for k in range(turns) for s in range(n_sessions)
    ]
    return Workload.from_requests(reqs, name="sessions")


def test_thinning_keeps_or_drops_a_session_whole() -> None:
    """``rate_scale < 1`` keeps a session's turns together: turn by turn, a kept turn whose earlier turns were
    dropped sent a history no earlier request had, and the share of shared prompt tokens fell (on the shipped
    chat sample at 0.5: 0.70 against the whole trace's 0.81)."""
    full = session_workload(400)
    assert full.summary().prefix_hit_share == pytest.approx(2 / 3)  # (0+1+2+3+4)/(1+2+3+4+5)
    half = full.replayed(rate_scale=0.5, seed=7)
    turns: dict[int, list[int]] = {}
    for r in half:
        turns.setdefault(r.session_id, []).append(r.turn)
    assert all(t == [0, 1, 2, 3, 4] for t in turns.values())  # every turn of a kept session, none of another
    assert abs(len(turns) - 200) < 5 * np.sqrt(400 * 0.25)  # sessions kept with probability 0.5
    assert half.summary().prefix_hit_share == pytest.approx(2 / 3)  # what the trace shares, kept
    assert half.requests() == half.requests()  # the same every replay
    assert set(turns) != {r.session_id for r in full.replayed(rate_scale=0.5, seed=8)}  # the seed decides


def test_thinning_requests_of_no_session_draws_as_before() -> None:
    """A request without a session (Azure, BurstGPT, Mooncake rows) is kept where the replay seed's next uniform,
    drawn in blocks of 4,096, is below `rate_scale`: the same requests as before sessions were thinned whole."""
    u = np.concatenate([stats.uniform.rvs(size=4096, random_state=rng)
                        for rng in [np.random.default_rng(4)] for _ in range(2)])
    expected = [i for i in range(5000) if u[i] < 0.3]
    kept = uniform_workload(5000).replayed(rate_scale=0.3, seed=4)
    assert [int(r.arrival_s) for r in kept] == expected
