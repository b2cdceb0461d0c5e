"""The counting pieces of the step-time model, as pure functions of plain numbers: how many
(query, key) pairs a causal prefill chunk scores, how many experts an MoE layer's tokens touch,
and the names of the two roofline bounds. The kernel times themselves (rooflines with a smooth
maximum, `simulator.cost.kernels.smooth_max`) are in `simulator.cost.kernels`.
"""

from __future__ import annotations

COMPUTE = "compute"
MEMORY = "memory"


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

