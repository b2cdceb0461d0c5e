"""Steady-state figures against hand-worked runs: a step of fixed length, evenly spaced arrivals.

Timer: every iteration takes 10 ms whatever the batch (``overhead_s = 0.01``, all else 0), so a
request of ``o`` output tokens takes ``o`` iterations once admitted (the prefill iteration gives
its first token) and ``o × 10 ms`` end to end when it never waits.
"""

from __future__ import annotations

import dataclasses
import math
import re

import pandas as pd
import pytest

from simulator.engine import AffineTimer, EngineConfig, SchedulerConfig, SteadyWindow, run, steady_state
from simulator.errors import ConfigError
from workloads.request import Request

STEP = AffineTimer(overhead_s=0.01, per_seq_s=0.0, per_context_token_s=0.0, per_prefill_token_s=0.0)
BATCH_1 = EngineConfig(scheduler=SchedulerConfig(max_num_seqs=1))


def evenly(n: int, rate_per_s: float, output_tokens: int, *, at_once: bool = False) -> list[Request]:
    """`n` requests of 100 prompt tokens every ``1 / rate`` seconds from t = 0 (or all at t = 0)."""
    return [Request(id=i, arrival_s=0.0 if at_once else i / rate_per_s, prompt_tokens=100,
                    output_tokens=output_tokens, segments=((i, 100),)) for i in range(n)]


def test_underloaded_run_sustains_the_offered_rate_while_the_makespan_figure_is_lower() -> None:
    """100 requests, one every 0.1 s (last at 9.9 s), 200 output tokens each: 2.00-2.01 s end to end
    (a step of 10 ms, plus up to one step's wait), so ~20 run at once. Window: the first 10% of the
    9.9 s arrival span (0.99 s) is shorter than one mean sojourn (2.0083 s), so it runs from
    2.0083 s to the last arrival, 9.9 s. Sustained: 10 req/s × 200 tokens = 2,000 tok/s (tokens are
    pro-rated across the window's edges: within 0.5%). Makespan: 20,000 tokens over 0 → 11.91 s =
    1,679 tok/s, 16% lower: the drain tail."""
    s = run(EngineConfig(), evenly(100, 10.0, 200), seed=0, timer=STEP).summary
    assert s["steady_window_start_s"] == pytest.approx(2.0083, abs=1e-4)
    assert s["steady_window_end_s"] == pytest.approx(9.9)
    assert s["sustained_output_tokens_per_s"] == pytest.approx(2000, rel=0.005)
    assert s["sustained_requests_per_s"] == pytest.approx(10.0, rel=0.02)  # ±1 completion at an edge of 79
    assert s["offered_requests_per_s"] == pytest.approx(10.0, rel=0.02)
    assert s["makespan_s"] == pytest.approx(11.91)
    assert s["output_tokens_per_s"] == pytest.approx(20_000 / 11.91)  # unchanged: makespan-based
    assert s["steady_state"] and s["steady_state_warning"] == ""


@pytest.mark.parametrize(("rate", "steady"), [(5.0, True), (20.0, False)])
def test_not_steady_warning_fires_for_an_overloaded_run_only(rate: float, steady: bool) -> None:
    """One request at a time, 10 output tokens: 0.1 s each, so the replica serves 10 req/s. At 5 req/s
    nothing waits; at 20 req/s (200 requests over 9.95 s) the queue grows by 10 a second. Overloaded,
    the mean sojourn exceeds half the span, so the window is its second half (4.975 → 9.95 s):
    100 arrivals, 50 admitted (one each 0.1 s), under 90%. Either way the replica completes
    min(rate, 10) req/s = min(rate, 10) × 10 tok/s over the window."""
    s = run(BATCH_1, evenly(200, rate, 10), seed=0, timer=STEP).summary
    assert s["steady_state"] is steady
    assert s["sustained_requests_per_s"] == pytest.approx(min(rate, 10.0), rel=0.01)
    assert s["sustained_output_tokens_per_s"] == pytest.approx(10 * min(rate, 10.0), rel=0.01)
    if not steady:
        assert (s["steady_window_start_s"], s["steady_window_end_s"]) == pytest.approx((4.975, 9.95))
        assert (s["steady_arrivals"], s["steady_queued"], s["steady_admissions"]) == (100, 100, 50)
        assert s["steady_state_warning"].startswith("not steady: the queue grew through the window [5.0, 9.9] s")
    else:
        assert s["steady_state_warning"] == ""


def test_offline_window_runs_while_the_queue_lasts() -> None:
    """40 requests at t = 0, 4 at a time, 100 output tokens: rounds of 1.0 s, the last admitted at
    9.0 s. Window: from one mean service time (1.0 s; 10% of 9 s is less) to the last admission,
    9.0 s: 4 req/s and 400 tok/s; the 32 completions at 2, 3, …, 9 s fall in (1, 9]."""
    config = EngineConfig(scheduler=SchedulerConfig(max_num_seqs=4))
    s = run(config, evenly(40, 1.0, 100, at_once=True), seed=0, timer=STEP).summary
    assert (s["steady_window_start_s"], s["steady_window_end_s"]) == pytest.approx((1.0, 9.0))
    assert s["steady_completions"] == 32 and s["steady_arrivals"] == 0
    assert s["sustained_requests_per_s"] == pytest.approx(4.0)
    assert s["sustained_output_tokens_per_s"] == pytest.approx(400.0)
    assert s["steady_state"]


def test_window_rule_is_configurable_and_result_recomputes_it() -> None:
    """A 40% warm-up moves the start to 0.4 × 9.9 = 3.96 s; ``Result.steady`` gives the same figures
    the summary holds under the window the run was given."""
    window = SteadyWindow(warmup_fraction=0.4)
    res = run(EngineConfig(), evenly(100, 10.0, 200), seed=0, timer=STEP, window=window)
    assert res.summary["steady_window_start_s"] == pytest.approx(3.96)
    st = res.steady(window)
    assert st.start_s == res.summary["steady_window_start_s"]
    assert st.sustained_output_tokens_per_s == res.summary["sustained_output_tokens_per_s"]
    assert res.steady().start_s == pytest.approx(2.0083, abs=1e-4)  # the default rule


def test_degenerate_windows_warn() -> None:
    empty = steady_state(pd.DataFrame(columns=["arrival_s", "outcome"]))
    assert empty.warning == "no requests" and math.isnan(empty.sustained_requests_per_s)
    # one batch at t = 0, all admitted at once: no time with a queue, so no steady window
    s = run(EngineConfig(), evenly(8, 1.0, 20, at_once=True), seed=0, timer=STEP).summary
    assert s["steady_window_s"] == 0 and not s["steady_state"]
    assert s["steady_state_warning"].startswith("no steady window")
    # a handful of completions is too few to call anything steady
    s = run(EngineConfig(), evenly(5, 1.0, 20), seed=0, timer=STEP).summary
    assert "fewer than 10; run longer" in s["steady_state_warning"]
    # an offline batch lasts as long as its requests take: more of them, not a longer run (helper-131)
    s = run(BATCH_1, evenly(9, 1.0, 20, at_once=True), seed=0, timer=STEP).summary
    assert s["steady_state_warning"] == ("not steady: 8 completion(s) in the window [0.2, 1.6] s, fewer than 10; give "
                                         "the run more requests (an offline run lasts as long as its requests take)")


def test_window_rule_is_validated() -> None:
    with pytest.raises(ConfigError, match=r"SteadyWindow: 'warmup_fraction' must be in \[0, 1\) \(got 1.0\)"):
        SteadyWindow(warmup_fraction=1.0)
    with pytest.raises(ConfigError, match=r"'max_warmup_fraction' must be in \[warmup_fraction=0.3, 1\)"):
        SteadyWindow(warmup_fraction=0.3, max_warmup_fraction=0.2)


def test_window_tokens_by_hand_and_in_chunks_as_whole_length_arithmetic(monkeypatch: pytest.MonkeyPatch) -> None:
    """Window (10, 20] s. A: first token at 12 s (in), 11 tokens to 22 s: 10 spread over (12, 22], 8
    inside → 1 + 8 = 9. B: first at 5 s (out), 5 tokens to 15 s: 4 over (5, 15], half inside → 2. C:
    one token at 15 s → 1; D: first and last at 25 s → 0. 12 in all. Then 300,001 random requests,
    `WINDOW_CHUNK` 7, 1,000 and the default: the very float of the whole-length formula (its
    values summed at once), so a streamed day's summary is unchanged."""
    import numpy as np

    from simulator.engine import steady

    def whole(arrival, ttft, end_s, out, start, end):  # the pre-chunking arithmetic, on whole arrays
        first = arrival + ttft
        frac = np.minimum(end_s, end) - np.maximum(first, start)
        np.clip(frac, 0.0, None, out=frac)
        dur = end_s - first
        frac = np.divide(frac, dur, out=np.zeros_like(frac), where=dur > 0)
        return float(((first > start) & (first <= end)).sum() + ((out - 1) * frac).sum())

    hand = (np.array([11.0, 1.0, 14.0, 24.0]), np.array([1.0, 4.0, 1.0, 1.0]),
            np.array([22.0, 15.0, 15.0, 25.0]), np.array([11, 5, 1, 1], dtype=np.int32))
    assert steady.window_tokens(*hand, 10.0, 20.0) == whole(*hand, 10.0, 20.0) == 12.0
    rng = np.random.default_rng(7)
    n = 300_001
    arrival = np.sort(rng.uniform(0, 1000, n))
    ttft = rng.exponential(0.5, n)
    end_s = arrival + ttft + rng.exponential(20, n) * (rng.random(n) > 0.1)  # 10% end at their first token
    out = rng.integers(1, 2000, n).astype(np.int32)
    expected = whole(arrival, ttft, end_s, out, 100.0, 900.0)
    for chunk in (7, 1_000, steady.WINDOW_CHUNK):
        monkeypatch.setattr(steady, "WINDOW_CHUNK", chunk)
        assert steady.window_tokens(arrival, ttft, end_s, out, 100.0, 900.0) == expected


def test_a_long_window_finds_an_overload_of_a_few_percent() -> None:
    """One request at a time of 1 prefill + 19 decode steps of 10 ms: 5 requests a second at most. 20,000 arrive
    evenly at 5.25 a second (5% over): in the window's 18,000 the queue grows by 858, under the tenth (1,800)
    that alone once judged it, above 3·√18,000 = 402 (`max_growth_sigmas`). At 5.0 it grows by 1: steady."""
    s = run(BATCH_1, evenly(20000, 5.25, 20), seed=0, timer=STEP).summary
    assert s["steady_queue_growing"] and not s["steady_state"]
    assert "(17,142 admitted of 18,000 queued there: it grew by 858, more than 402)" in s["steady_state_warning"]
    s = run(BATCH_1, evenly(20000, 5.0, 20), seed=0, timer=STEP).summary
    assert s["steady_state"] and not s["steady_queue_growing"]


def test_a_growing_queue_tells_its_growth_from_the_requests_that_timed_out_waiting() -> None:
    """helper-156: under a queue timeout the warning's "it grew by" counted every queued request not admitted,
    6,382 of whose 6,508 had timed out waiting (the queue itself grew by ~620); helper-164: those that arrived before
    the window and timed out in it count too. 20,000 arrive evenly at 10 a second to a replica that serves 5, each
    waiting at most 5 s: the window's 18,000 queued see 9,000 admitted (5 a second over its 1,800 s) and 9,000 time
    out; the queue holds 5 s of arrivals at either end, so it grows by 0."""
    timed = EngineConfig(scheduler=SchedulerConfig(max_num_seqs=1, queue_timeout_s=5.0))
    s = run(timed, evenly(20000, 10.0, 20), seed=0, timer=STEP).summary
    assert s["steady_queue_growing"] and not s["steady_state"]
    assert s["steady_state_warning"].endswith(
        "arrivals outran admissions through the window [200.0, 1,999.9] s (9,000 admitted of 18,000 queued there: "
        "9,000 more queued than admitted, more than 402: 9,000 timed out waiting and the queue grew by 0)")


def test_a_queue_that_timeouts_shrink_says_it_shrank() -> None:
    """helper-164: 40 arrivals a second for 60 s, then 12 a second to 200 s, at a replica serving 5 a second whose
    requests wait at most 5 s: the queue holds 5 s of arrivals, 200 as the window opens (at 40 a second) and 60 at
    its end (12 a second), so it shrank by 140, where the warning said it grew by 10."""
    timed = EngineConfig(scheduler=SchedulerConfig(max_num_seqs=1, queue_timeout_s=5.0))
    fast, slow = evenly(2400, 40.0, 20), evenly(1680, 12.0, 20)
    requests = [*fast, *(dataclasses.replace(r, id=r.id + 2400, arrival_s=60.0 + r.arrival_s) for r in slow)]
    warning = run(timed, requests, seed=0, timer=STEP).summary["steady_state_warning"]
    shrank = int(re.search(r"timed out waiting and the queue shrank by ([\d,]+)\)$", warning).group(1).replace(",", ""))
    assert shrank == pytest.approx(140, abs=5)


def test_requests_rejected_on_arrival_leave_the_queue_balance_as_it_was() -> None:
    """helper-172 asked whether requests rejected after waiting in the queue are left out of the warning's balance
    (queued − admitted − timed out). The engine rejects a request only as it arrives (`Replica.enqueue`: longer
    than the model's window, or more blocks than the pool): it never joins the queue, so the balance leaves it out
    rightly; the one rejection of a queued request, `BlockPool._unblock_empty_replica`'s guard, cannot happen
    (an empty replica admits whatever `enqueue` let in). One request at a time of 20 steps of 10 ms, 5 a second;
    2,000 arrive every 1/6 s: request i is admitted at 0.2·i and ends at 0.2·(i + 1), a mean sojourn of
    999.5 / 30 + 0.2 = 33.52 s, which starts the window [33.52, 333.17] s (the last arrival, 1,999 / 6). In it
    1,798 arrive (i = 202..1,999) and 1,498 are admitted (i = 168..1,665): the queue grew by 300, more than
    3·√1,798 = 127. A twin of 200,000 prompt tokens (over Llama-3.1-70B's 131,072) arriving with each request is
    rejected at its arrival, never admitted, and leaves every figure of the warning as it was."""
    served = evenly(2000, 6.0, 20)
    twins = [dataclasses.replace(r, id=2000 + r.id, prompt_tokens=200_000, segments=((2000 + r.id, 200_000),))
             for r in served]
    alone = run(BATCH_1, served, seed=0, timer=STEP).summary
    both = run(BATCH_1, [x for pair in zip(served, twins, strict=True) for x in pair], seed=0, timer=STEP)
    warning = ("not steady: the queue grew through the window [33.5, 333.2] s (1,498 admitted of 1,798 queued "
               "there: it grew by 300, more than 127)")
    assert alone["steady_state_warning"] == both.summary["steady_state_warning"] == warning
    assert (alone["steady_arrivals"], alone["steady_queued"]) == (1798, 1798)
    assert (both.summary["steady_arrivals"], both.summary["steady_queued"]) == (3596, 1798)
    rejected = both.requests[both.requests.outcome == "rejected"]
    assert len(rejected) == both.summary["rejected"] == 2000
    assert (rejected.end_s == rejected.arrival_s).all() and rejected.admit_s.isna().all()  # none of them waited


def test_the_summary_counts_every_preemption() -> None:
    """helper-169: only requests.csv's per-request column held the preemptions, so no summary, sweep row or
    report showed what admission or preemption settings change. The summary's `preemptions` is every replica's
    count, the sum of that column."""
    from workloads import load_workload

    config = EngineConfig(model="Llama-3.1-8B", node="1xH100", tp=1, memory_utilization=0.23, cache="none")
    r = run(config, load_workload("chat-4k", duration_s=60, rate_scale=20), 0)
    assert r.summary["preemptions"] == int(r.requests.preemptions.sum()) == 50


def _handed_off(transfer_start: list[float]) -> pd.DataFrame:
    """100 requests arriving at 0, 1, ..., 99 s, each admitted to a prefill replica on arrival, its first token
    1 s later, its KV moving to a decode replica at `transfer_start` and ending 2 s after that."""
    n = len(transfer_start)
    arrival = [float(i) for i in range(n)]
    return pd.DataFrame({"outcome": ["completed"] * n, "arrival_s": arrival, "admit_s": arrival,
                         "ttft_s": [1.0] * n, "transfer_start_s": transfer_start,
                         "end_s": [t + 2.0 for t in transfer_start], "output_tokens": [10] * n})


def test_a_growing_hand_off_queue_is_an_overload_not_a_batch_still_filling() -> None:
    """helper-190: a disaggregated fleet whose decode side falls behind holds its prefilled requests on the prefill
    replicas; the rule watched arrivals against (prefill) admissions only, and read it as a batch still filling.

    Request i's KV moves at ``1.5 i + 1`` s (its wait for decode room grows by 0.5 s a request). Sojourns
    ``0.5 i + 3``, mean 27.75 s: the window is (27.75, 99] s. Prefilled there (first token ``i + 1``): i = 27..98,
    72; moved there: ``1.5 i + 1 ≤ 99`` for i = 18..65, 48. The hand-off queue grew by 24, more than
    min(10% of 72, 3·√72) = 7.2; (prefill) admissions kept up, 72 of 72, and 48 completions (i = 17..64) under
    90% of 72 were read as "still filling". A wait that does not grow (every KV moving 0.5 s after its first
    token) is steady: window (9.9, 99] s, 90 prefilled (i = 9..98), 89 moved (i = 9..97)."""
    s = steady_state(_handed_off([1.5 * i + 1 for i in range(100)]))
    assert (s.start_s, s.end_s, s.queued, s.admissions, s.completions) == (27.75, 99.0, 72, 72, 48)
    assert s.queue_growing and not s.too_short
    assert s.warning == ("not steady: the hand-off queue grew through the window [27.8, 99.0] s (48 moved to a decode "
                         "replica of 72 prefilled there: it grew by 24, more than 7)")
    even = steady_state(_handed_off([i + 1.5 for i in range(100)]))
    assert (even.start_s, even.end_s, even.warning, even.queue_growing) == (pytest.approx(9.9), 99.0, "", False)
    # an aggregated fleet's records (no transfer, NaN) are read as before
    agg = _handed_off([1.5 * i + 1 for i in range(100)]).assign(transfer_start_s=math.nan)
    assert steady_state(agg).warning.startswith("not steady: the batch was still filling")
