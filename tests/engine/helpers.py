"""Tiny workloads for engine tests: Poisson arrivals, fixed or drawn lengths."""

from __future__ import annotations

import numpy as np

from workloads.request import Request


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
