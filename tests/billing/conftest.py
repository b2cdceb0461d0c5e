"""Tiny request builders for billing tests (no generators: the workloads package owns those)."""

from __future__ import annotations

import numpy as np
import pytest

from simulator.billing.profiles import PriceProfile, get_profile
from workloads.request import Request

SYSTEM, DOCS = 1, 2  # segment ids of a shared system prompt and a shared document


def req(
    rid: int,
    t: float,
    segments: list[tuple[int, int]],
    breakpoints: tuple[int, ...] = (1,),
    output_tokens: int = 100,
) -> Request:
    """A request at `t` seconds with `segments` and breakpoints (counts of leading segments)."""
    return Request(
        id=rid,
        arrival_s=t,
        prompt_tokens=sum(n for _, n in segments),
        output_tokens=output_tokens,
        segments=tuple(segments),
        cache_breakpoints=breakpoints,
    )


def poisson_stream(
    rng: np.random.Generator, rate_per_s: float, n: int, prefix_tokens: int, suffix_tokens: int = 50
) -> list[Request]:
    """`n` requests, Poisson arrivals at `rate_per_s`, sharing one cached prefix segment."""
    times = np.cumsum(rng.exponential(1.0 / rate_per_s, size=n))
    return [
        req(i, float(t), [(SYSTEM, prefix_tokens), (1000 + i, suffix_tokens)], output_tokens=10)
        for i, t in enumerate(times)
    ]


@pytest.fixture
def sonnet() -> PriceProfile:
    return get_profile("anthropic", "sonnet-4")
