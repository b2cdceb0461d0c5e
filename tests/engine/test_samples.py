"""The time series splits the pool: blocks the sequences hold and blocks only the prefix cache holds."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from simulator.engine import AffineTimer, EngineConfig, SchedulerConfig, run
from tests.engine.helpers import shared_prefix_requests
from workloads.request import Request

TIMER = AffineTimer(overhead_s=0.02, per_seq_s=1e-5, per_context_token_s=1.2e-8, per_prefill_token_s=3.6e-5)


def test_evictable_blocks_are_the_caches_share_of_the_used_ones():
    reqs = shared_prefix_requests(150, seed=2, rate_per_s=15.0)
    cfg = EngineConfig(kv_blocks=300, block_tokens=16, cache="prefix",
                       scheduler=SchedulerConfig(max_num_seqs=16, max_num_batched_tokens=512))
    ts = run(cfg, reqs, seed=1, timer=TIMER).timeseries
    assert (ts.kv_evictable_blocks >= 0).all() and (ts.kv_evictable_blocks <= ts.kv_blocks_used).all()
    assert ts.kv_evictable_blocks.max() > 0
    # once every request is done, whatever the pool still holds is the cache's alone
    last = ts.sort_values("time_s").groupby("replica").tail(1)
    assert (last.kv_evictable_blocks == last.kv_blocks_used).all() and (last.running == 0).all()
    # without reuse nothing is evictable
    plain = run(replace(cfg, cache="none"), reqs, seed=1, timer=TIMER).timeseries
    assert (plain.kv_evictable_blocks == 0).all()


def test_an_arrival_samples_the_state_it_arrives_to():
    """helper-131: a sample taken at an arrival counted the arriving request as waiting (it was appended to the
    queue first), so a lightly loaded fleet's time series read ~0.5 waiting a replica where requests queued for
    6 ms a second (Little's law: 0.006). One request arriving at an idle replica: the sample at its arrival shows
    no one waiting and nothing running."""
    req = Request(id=0, arrival_s=1.0, prompt_tokens=100, output_tokens=5, segments=((0, 100),))
    ts = run(EngineConfig(kv_blocks=100, sample_interval_s=0.5), [req], timer=TIMER).timeseries
    at = ts[ts.time_s == 1.0]
    assert len(at) == 1 and (at.waiting == 0).all() and (at.running == 0).all()
    assert ts.waiting.max() == 0  # it is admitted at the instant it arrives: no sample sees it wait


def test_a_decode_jump_is_sampled_inside():
    """helper-169: a decode jump took no sample inside it, so two offline requests decoding together for a minute
    left rows at 0 s and at the first one's end only, and the time series never showed both running. A sample
    falls due at a step start inside a jump as stepping's plan there would take it (`Observation.jump_sample_due`),
    from the state j steps in, in closed form: both sequences hold ``100 + 1 + j − 1`` tokens (the prompt, then a
    token a step), ``ceil(tokens / 16)`` blocks each."""
    reqs = [Request(id=i, arrival_s=0.0, prompt_tokens=100, output_tokens=o, segments=((i, 100),))
            for i, o in enumerate((1500, 3000))]
    config = EngineConfig(kv_blocks=1000, sample_interval_s=1.0)
    res = run(config, reqs, timer=TIMER)
    ts = res.timeseries
    assert res.summary["makespan_s"] > 60
    assert len(ts) >= 60 and ts.time_s.diff().max() < 1.1  # a row a second, not two a minute
    both = ts[ts.running == 2]
    assert len(both) >= 25  # the first request's 1,500 tokens at ~22 ms a step: ~33 s together
    per_seq = both.kv_tokens // 2
    assert (both.kv_tokens % 2 == 0).all() and per_seq.is_monotonic_increasing and per_seq.iloc[0] > 100
    assert list(both.kv_blocks_used) == [2 * -(-t // 16) for t in per_seq]
    stepped = run(replace(config, fast_forward=False), reqs, timer=TIMER).timeseries  # the same rows as stepping
    assert len(stepped) == len(ts) and list(stepped.kv_tokens) == list(ts.kv_tokens)


def test_a_sample_due_at_last_plus_interval_to_within_rounding_is_taken_in_both_modes():
    """h174 (`replica.SAMPLE_SLACK_S`): steps of 0.1 s, an interval of 1 s. Fast-forward's step starts are
    ``start + j · 0.1`` (10 · 0.1 = 1.0 exactly), stepping's the running sum of 0.1s (0.9999999999999999 after ten):
    without the slack a tie at ``t − last = interval`` went either way, stepping sampled at 1.1, 2.1, ... and took
    one row fewer. With it both take a row a second, at the 10th step start, and the same rows."""
    timer = AffineTimer(overhead_s=0.1, per_context_token_s=0.0, per_prefill_token_s=0.0)
    reqs = [Request(id=0, arrival_s=0.0, prompt_tokens=100, output_tokens=300, segments=((0, 100),))]
    config = EngineConfig(kv_blocks=1000, sample_interval_s=1.0)
    fast = run(config, reqs, timer=timer).timeseries
    slow = run(replace(config, fast_forward=False), reqs, timer=timer).timeseries
    assert len(fast) == len(slow) == 32  # 0 s, a row a second to 30 s (the 300th step starts at 29.9), the end
    assert abs(slow.time_s.iloc[1] - 1.0) < 1e-9 and abs(fast.time_s.iloc[1] - 1.0) < 1e-9
    assert list(fast.kv_tokens) == list(slow.kv_tokens)
    np.testing.assert_allclose(fast.time_s.to_numpy(), slow.time_s.to_numpy(), rtol=0, atol=1e-9)


def test_an_arrival_at_a_step_end_inside_a_jump_samples_the_state_before_that_step_commits():
    """`Observation._sample`: an arrival at the very end of a step inside a decode jump goes before that step's
    commit in stepping (`cluster.REPLICA_PRIORITY_STEP`), so its sample reads the steps before it. Steps of
    0.25 s: request 0 (100 prompt tokens) is prefilled in [0, 0.25), then its KV grows a token a decode step;
    request 1 arrives at 3.0, the end of the 11th decode step, which is not committed yet: the prompt and 10
    tokens, 110 (not 111), as stepping's row."""
    timer = AffineTimer(overhead_s=0.25, per_context_token_s=0.0, per_prefill_token_s=0.0)
    reqs = [Request(id=0, arrival_s=0.0, prompt_tokens=100, output_tokens=300, segments=((0, 100),)),
            Request(id=1, arrival_s=3.0, prompt_tokens=100, output_tokens=30, segments=((1, 100),))]
    config = EngineConfig(kv_blocks=1000, sample_interval_s=1.0)
    fast = run(config, reqs, timer=timer).timeseries
    slow = run(replace(config, fast_forward=False), reqs, timer=timer).timeseries
    at = fast[fast.time_s == 3.0]
    assert len(at) == 1 and at.kv_tokens.item() == 110 and at.running.item() == 1
    assert list(fast.kv_tokens) == list(slow.kv_tokens) and list(fast.time_s) == list(slow.time_s)
