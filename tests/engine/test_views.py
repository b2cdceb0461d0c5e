"""What a router reads of a replica whose jump an arrival has just cut short (`simulator.engine.views`).

Timer: every step takes 10 ms (``overhead_s = 0.01``, all else 0). Request 0 arrives at 0 with 100
prompt and 200 output tokens: its prefill step ends at 0.01 s with the first token, and a jump of
199 decode steps starts there. Requests 1 and 2 arrive together at 0.02 s, exactly where the jump's
first step ends (0.01 + 0.01 == 0.02 in floating point). Stepping routes an arrival before the commit
of a step ending at its instant (`cluster.REPLICA_PRIORITY_STEP`), so for request 1 the router reads
200 − 1 = 199 (the first token alone); request 1 cuts the jump to that one step, and for request 2 the
router still reads it uncommitted: 199 + 100 + 200 of request 1 = 499. Fast-forward read 198 and 498
(the step ending at 0.02 counted as done) until helper-203; stepping read 199 and 499 all along.
"""

from __future__ import annotations

import math

from simulator.engine import AffineTimer, EngineConfig, run
from simulator.engine.routers import basic
from workloads.request import Request

STEP = AffineTimer(overhead_s=0.01, per_seq_s=0.0, per_context_token_s=0.0, per_prefill_token_s=0.0)


def test_a_jump_cut_to_its_first_step_counts_it_once_it_has_ended(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    seen: list[tuple[float, int]] = []
    choose = basic._LeastTokens.choose

    def recording(self, request, replicas, now):  # type: ignore[no-untyped-def]
        seen.append((now, replicas[0].outstanding_at(now)))
        return choose(self, request, replicas, now)

    monkeypatch.setattr(basic._LeastTokens, "choose", recording)
    reqs = [Request(id=0, arrival_s=0.0, prompt_tokens=100, output_tokens=200, segments=((0, 100),)),
            Request(id=1, arrival_s=0.02, prompt_tokens=100, output_tokens=200, segments=((1, 100),)),
            Request(id=2, arrival_s=0.02, prompt_tokens=100, output_tokens=200, segments=((2, 100),))]
    assert 0.01 + 0.01 == 0.02
    for fast_forward in (True, False):
        seen.clear()
        res = run(EngineConfig(cache="none", router="least-tokens", fast_forward=fast_forward), reqs, seed=0,
                  timer=STEP)
        assert seen == [(0.0, 0), (0.02, 199), (0.02, 499)], fast_forward
        assert res.summary["requests"] == 3


def test_the_steps_window_is_steps_within_at_every_boundary() -> None:
    """`InFlight._window` (a closed-form estimate, then `steps_within`'s search where rounding left it
    off) finds ``j = steps_within(e)`` and its window ``[T(j), T(j + 1))`` on and either side of
    every step boundary, for series whose estimate is exact and ones it misses (``d`` tiny against
    ``g0``, ``h = g0 − d/2 ≤ 0``)."""
    from simulator.engine.series import series_s, steps_within
    from simulator.engine.views import InFlight

    view = InFlight()
    fallbacks = 0
    for g0, d in ((0.01, 0.0), (0.023, 1.7e-6), (1.0, 4e-42), (1e-3, 5e-3), (0.02, 0.04), (3.1e-2, 2.9e-7)):
        view.g0, view.d = g0, d
        for j in (1, 2, 3, 7, 50, 999, 12_345):
            t = series_s(g0, d, j)
            for e in (math.nextafter(t, 0.0), t, math.nextafter(t, math.inf), t * (1 + 1e-12)):
                if e < g0:
                    continue
                view._init_views()
                view._window(e)
                want = steps_within(g0, d, e)
                assert (view._done_j, view._done_lo, view._done_hi) == (
                    want, series_s(g0, d, want), series_s(g0, d, want + 1)), (g0, d, j, e)
                assert view._done_lo <= e < view._done_hi
                fallbacks += view._done_j != _estimate(g0, d, e)
    assert fallbacks > 0  # the search ran: the estimate alone would have been wrong there


def _estimate(g0: float, d: float, e: float) -> int:
    h = g0 - d / 2
    root = math.sqrt(h * h + 2 * d * e)
    return int(2 * e / (h + root) if h > 0 else (root - h) / d)


def test_a_jump_cut_to_its_first_step_holds_its_value_until_that_step_ends() -> None:
    """`outstanding_until` of a jump an interrupt cut to its first step (``jump_n = 1``): the value
    holds until the step's end, not forever (it falls by the decoders there, before the commit; a
    router keeping its view would have kept the stale value for an arrival at that very time)."""
    from simulator.engine.views import UNTIL_MARGIN, InFlight

    view = InFlight()
    view._init_views()
    view.g0, view.d, view.jump_start_s, view.jump_n = 0.02, 1e-6, 3.0, 1
    view.outstanding_tokens, view.n_dec, view.run_steps = 900, 7, []
    assert view.outstanding_until(3.01) == (900, 3.02 - UNTIL_MARGIN * 3.02, 900)
    assert view.outstanding_until(3.02) == (893, math.inf, 893)  # the step has ended: it counts, and holds


def test_a_jump_asked_with_a_level_wakes_where_it_falls_to_that_level() -> None:
    """`outstanding_until(now, level)` of a jump above `level`: it stays at `low` (> level) or above
    until `t`, and is at `level` or below from `t` on (a hair later); above its whole jump, `t` is
    infinite and `low` the jump's last value."""
    from simulator.engine.views import UNTIL_MARGIN, InFlight

    view = InFlight()
    view._init_views()
    view.g0, view.d, view.outstanding_tokens, view.n_dec, view.run_steps = 0.02, 1e-5, 1000, 7, []
    view.begin_jump(3.0, 20)  # 1000 − 7·j for j ≤ 20 steps: 860 at the end
    for now in (3.0, 3.031, 3.1):
        for level in (0, 859, 860, 900, 930, 993, 1000, 2000):
            value, t, low = view.outstanding_until(now, level)
            assert value == view.outstanding_at(now)
            if value <= level:
                assert low == value and t < math.inf
                continue
            if t == math.inf:
                assert level < low == 860
                continue
            assert low == level + 1
            times = [now + (t - now) * f for f in (0.0, 0.5, 0.999)]
            assert all(view.outstanding_at(x) >= low for x in times)
            assert view.outstanding_at(t * (1 + 2 * UNTIL_MARGIN)) <= level


def test_the_floor_is_the_last_value_of_the_jump_or_run_in_flight() -> None:
    """`outstanding_floor` (what least-tokens parks a changed replica at) is never above
    `outstanding_at` until the state changes, and is reached at the jump's or run's end."""
    from simulator.engine.series import series_s
    from simulator.engine.views import InFlight

    class View(InFlight):
        def run_outstanding_at(self, now: float) -> int:  # `ChunkedRuns`' form, 256-token chunks
            return self.outstanding_tokens - sum(end <= now for end in self.run_ends) * 256

    view = View()
    view._init_views()
    view.g0, view.d, view.outstanding_tokens, view.n_dec, view.run_steps, view.jump_n = 0.02, 1e-5, 1000, 7, [], 0
    assert view.outstanding_floor() == 1000  # one step planned, or idle: the value holds
    view.begin_jump(3.0, 20)
    end = 3.0 + series_s(0.02, 1e-5, 20)
    assert all(view.outstanding_at(3.0 + (end - 3.0) * f) >= view.outstanding_floor() for f in (0, 0.3, 0.7, 0.99))
    assert view.outstanding_at(end + 1e-6) == view.outstanding_floor() == 860  # (end itself may round below)
    view.jump_n, view.run_steps, view.run_ends = 0, [0.1, 0.1], [5.1, 5.2]
    assert view.outstanding_at(5.15) > view.outstanding_floor() == view.outstanding_at(5.2) == 1000 - 2 * 256
