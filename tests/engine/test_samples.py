"""The time series splits the pool: blocks the sequences hold and blocks only the prefix cache holds."""

from __future__ import annotations

from dataclasses import replace

from simulator.engine import AffineTimer, EngineConfig, SchedulerConfig, run
from tests.engine.helpers import shared_prefix_requests

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
