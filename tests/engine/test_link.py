"""The shared link: processor sharing by hand, and its invariants under random transfers."""

from __future__ import annotations

import pytest
import simpy
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.engine.cluster import run_events
from simulator.engine.link import Link


def run(transfers: list[tuple[float, str, float]], rate: float, latency: float = 0.0) -> dict[str, float]:
    env = simpy.Environment()
    ends: dict[str, float] = {}

    def done(key, now):
        assert key not in ends
        ends[key] = now

    link = Link(env, rate, latency, done)

    def starter(t: float, key: str, nbytes: float):
        yield env.timeout(t)
        link.start(key, nbytes)

    for t, key, nbytes in transfers:
        env.process(starter(t, key, nbytes))
    run_events(env)  # the link's timeouts are the engine's
    assert link.started == link.ended == len(transfers) and link.in_flight == 0
    return ends


def test_alone_a_transfer_takes_bytes_over_rate_plus_latency():
    # 1.342 GB (a 4k Llama-3-70B prompt) over one 400 Gb/s NIC: 1.342e9 / 50e9 = 26.84 ms, + 5 µs
    ends = run([(0.0, "a", 1.342e9)], 50e9, 5e-6)
    assert ends["a"] == pytest.approx(0.02684 + 5e-6, rel=1e-12)


def test_two_transfers_share_the_link():
    # 300 MB at t=0 and 100 MB at t=1 ms on 100 GB/s. 0-1 ms: a alone moves 100 MB (200 MB left);
    # then both at 50 GB/s: b (100 MB) ends at 1 + 2 = 3 ms,
    # a has 100 MB left at 3 ms and alone again ends at 3 + 1 = 4 ms
    ends = run([(0.0, "a", 300e6), (1e-3, "b", 100e6)], 100e9)
    assert ends["b"] == pytest.approx(3e-3, rel=1e-9)
    assert ends["a"] == pytest.approx(4e-3, rel=1e-9)


def test_equal_transfers_started_together_end_together():
    ends = run([(0.0, k, 50e6) for k in "abcd"], 100e9)
    assert list(ends.values()) == pytest.approx([4 * 50e6 / 100e9] * 4)  # 2 ms each


@settings(max_examples=60)
@given(st.lists(st.tuples(st.floats(0, 1.0), st.floats(0, 1e9)), min_size=1, max_size=30),
       st.floats(1e9, 1e11), st.floats(0, 1e-4))
def test_every_transfer_ends_once_and_the_link_is_work_conserving(specs, rate, latency):
    transfers = [(t, f"k{i}", b) for i, (t, b) in enumerate(specs)]
    ends = run(transfers, rate, latency)
    starts = {k: t for t, k, _ in transfers}
    for t, k, b in transfers:
        assert ends[k] >= t + b / rate + latency - 1e-9  # never faster than alone
    # work conservation: the last byte leaves no later than all bytes moved back to back from the first start
    total = sum(b for _, _, b in transfers)
    assert max(ends.values()) <= max(starts.values()) + total / rate + latency + 1e-6
