"""The analytic pieces of the step-time model, as pure functions of plain numbers.

Every part of a step is timed by a roofline::

    t = smax_p(flops / (peak_flops · eff_c), bytes / (hbm_bytes_per_s · eff_m)) + fixed latency

with the smooth maximum ``smax_p(a, b) = (a^p + b^p)^(1/p)`` (`smooth_max`; ``p = inf`` is the
hard max, ``p = 1`` the sum) and reports which term was larger (``"compute"`` or ``"memory"``).
"""

from __future__ import annotations

import math

COMPUTE = "compute"
MEMORY = "memory"


def smooth_max(a: float, b: float, p: float = math.inf) -> float:
    """``(a^p + b^p)^(1/p)`` for ``a, b >= 0``: ``max(a, b)`` when ``p = inf``, ``a + b`` when ``p = 1``.

    Kernels overlap compute with memory traffic imperfectly near the ridge point; a finite
    ``p`` rounds the roofline's corner (at ``a = b`` the time is ``2^(1/p)`` times the max).
    """
    hi = max(a, b)
    if math.isinf(p) or hi <= 0.0:
        return hi
    lo = min(a, b)
    return hi * (1.0 + (lo / hi) ** p) ** (1.0 / p)


def roofline_s(
    flops: float,
    bytes_: float,
    peak_flops: float,
    bytes_per_s: float,
    compute_eff: float,
    memory_eff: float,
    p: float = math.inf,
) -> tuple[float, str]:
    """Seconds of one op class and its bound.

    ``t = smooth_max(flops / (peak_flops · compute_eff), bytes_ / (bytes_per_s · memory_eff), p)``
    """
    tc = flops / (peak_flops * compute_eff)
    tm = bytes_ / (bytes_per_s * memory_eff)
    return smooth_max(tc, tm, p), (COMPUTE if tc >= tm else MEMORY)


def expected_experts(n_experts: int, experts_per_token: int, tokens: float) -> float:
    """Expected distinct experts one MoE layer touches when `tokens` tokens each route to
    `experts_per_token` of `n_experts` uniformly: ``E · (1 − (1 − k/E)^T)``.

    One token touches k; many tokens touch all E.
    """
    if n_experts <= 0 or tokens <= 0:
        return 0.0
    return n_experts * (1.0 - (1.0 - experts_per_token / n_experts) ** tokens)


def causal_pairs(new_tokens: float, context_tokens: float, window: int = 0) -> float:
    """(query, key) pairs a causal prefill chunk scores.

    Query ``i`` (1-based) of a chunk of ``n`` new tokens after ``c`` cached ones sees ``c + i``
    keys, or ``min(c + i, w)`` in a sliding-window layer of window ``w``::

        pairs = n·c + n(n+1)/2                                  (w = 0)
        pairs = Σ_{p=c+1}^{c+n} min(p, w)                        (w > 0)
    """
    n, c = float(new_tokens), float(context_tokens)
    if n <= 0:
        return 0.0
    if not window:
        return n * c + n * (n + 1) / 2
    w = float(window)
    if c >= w:
        return n * w
    top = min(c + n, w)  # positions c+1..top grow, the rest are capped at w
    grow = (top * (top + 1) - c * (c + 1)) / 2
    return grow + (c + n - top) * w

