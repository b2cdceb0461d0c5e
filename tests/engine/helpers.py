"""Tiny workloads for engine tests (Poisson arrivals, fixed or drawn lengths), and a hook that
checks a replica's state after every plan and commit."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from simulator.engine.replica import Replica
from workloads.request import Request


def check_every_step(monkeypatch: pytest.MonkeyPatch, check: Callable[[Replica], None]) -> list[int]:
    """Run `check` on the replica after every `Replica.plan` and `Replica.commit` (for the test's
    duration); returns a one-item list counting the commits."""
    count = [0]
    plan, commit = Replica.plan, Replica.commit

    def plan_checked(self: Replica, now: float) -> bool:
        out = plan(self, now)
        check(self)
        return out

    def commit_checked(self: Replica, n: int, end_s: float) -> None:
        commit(self, n, end_s)
        count[0] += 1
        check(self)

    monkeypatch.setattr(Replica, "plan", plan_checked)
    monkeypatch.setattr(Replica, "commit", commit_checked)
    return count


def poisson_requests(n: int, rate_per_s: float, prompt_tokens: int | tuple[int, int],
                     output_tokens: int | tuple[int, int], seed: int = 0,
                     start_s: float = 0.0) -> list[Request]:
    """`n` requests with Poisson arrivals; a length is fixed (int) or uniform in ``[lo, hi]``."""
    rng = np.random.default_rng(seed)
    t = start_s + np.cumsum(rng.exponential(1.0 / rate_per_s, n))

    def draw(spec: int | tuple[int, int]) -> list[int]:
        if isinstance(spec, int):
            return [spec] * n
        return [int(x) for x in rng.integers(spec[0], spec[1] + 1, n)]

    prompts, outputs = draw(prompt_tokens), draw(output_tokens)
    return [Request(id=i, arrival_s=float(t[i]), prompt_tokens=prompts[i], output_tokens=outputs[i],
                    segments=((i, prompts[i]),)) for i in range(n)]


def shared_prefix_requests(n: int, seed: int, rate_per_s: float = 10.0, docs: int = 5,
                           output_tokens: tuple[int, int] = (1, 300)) -> list[Request]:
    """`n` Poisson requests whose prompts are one of `docs` documents + a shared 37-token header
    of that document + a private tail of 1-299 tokens; outputs uniform in ``[lo, hi)``."""
    rng = np.random.default_rng(seed)
    t = np.cumsum(rng.exponential(1.0 / rate_per_s, n))
    out = []
    for i in range(n):
        d = int(rng.integers(0, docs))
        tail = int(rng.integers(1, 300))
        segs = ((d, 40 + 16 * d), (100 + d, 37), (1000 + i, tail))
        out.append(Request(id=i, arrival_s=float(t[i]), prompt_tokens=sum(s for _, s in segs),
                           output_tokens=int(rng.integers(*output_tokens)), segments=segs,
                           output_segment_id=10_000 + i))
    return out
