"""Prefix-hit share and reuse gaps, hand-worked."""

import math

import pytest

from workloads.request import Request
from workloads.summary import Quantiles, summarize


def req(i: int, t: float, segs: tuple[tuple[int, int], ...]) -> Request:
    return Request(id=i, arrival_s=t, prompt_tokens=sum(n for _, n in segs), output_tokens=1, segments=segs)


def test_prefix_hit_share_and_gaps_hand_worked() -> None:
    rs = [
        req(0, 0.0, ((1, 100), (2, 50))),  # all new
        req(1, 10.0, ((1, 100), (3, 50))),  # chain (1) seen: 100 hit; gap 10
        req(2, 25.0, ((1, 100), (2, 50), (4, 10))),  # (1),(1,2) seen: 150 hit; gaps 15, 25
        req(3, 30.0, ((2, 50), (1, 100))),  # chain (2) never led: 0 hit
    ]
    s = summarize(rs, name="t")
    # hit tokens 0 + 100 + 150 + 0 = 250 of 150 + 150 + 160 + 150 = 610
    assert s.prefix_hit_share == pytest.approx(250 / 610)
    assert s.n_reuses == 3
    assert s.reuse_gap_s.mean == pytest.approx((10 + 15 + 25) / 3)
    assert s.reuse_gap_s.p50 == pytest.approx(15.0)
    assert s.n_requests == 4 and s.duration_s == 30.0 and s.rate_per_s == pytest.approx(4 / 30)
    assert s.prompt_tokens.mean == pytest.approx(610 / 4)


def test_empty_and_frame() -> None:
    s = summarize([])
    assert s.n_requests == 0 and math.isnan(s.prefix_hit_share) and math.isnan(s.reuse_gap_s.p99)
    q = Quantiles.of(__import__("numpy").arange(1, 101, dtype=float))
    assert (q.mean, q.p50) == (50.5, 50.5)
    frame = summarize([req(0, 0.0, ((1, 5),))]).to_frame()
    assert frame.set_index("metric").loc["prompt_tokens.p99", "value"] == 5.0
    assert summarize([req(0, 0.0, ((1, 5),))]).to_dict()["prompt_tokens"]["mean"] == 5.0
