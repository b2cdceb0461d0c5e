"""What the engine needs from a cost model: the time of one scheduler iteration.

The engine prices every iteration with a `StepTimer`. The real cost model
(``simulator.cost.StepModel``) is adapted to it elsewhere (`simulator.engine.cluster.cost_model_timer`, what a
run uses when given no timer); `AffineTimer` is the test double shipped beside the protocol, whose
coefficients a test states (its defaults are a test convenience, not a figure any shipped path uses).

Contract (the fast-forward relies on it): a pure decode step of ``n`` sequences attending
``C`` context tokens in all costs ``a(n) + b(n)·C`` with ``(a, b) = decode_coefficients(n)``,
and ``step_s((), n, C)`` returns that same value.

A timer whose layout has sliding or compression windows may also offer ``decode_discount()`` (see
`simulator.cost.StepModel.decode_discount`): the deficit, in context tokens, of a sequence shorter
than a window. The engine then prices each step at the decoders' context less their deficits, so
``C`` may be a float (and below the token count).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from simulator.errors import must

Chunk = tuple[int, int]
"""``(new_tokens, context_tokens)``: a prefill chunk of `new_tokens` after `context_tokens` already cached."""


@runtime_checkable
class StepTimer(Protocol):
    """Seconds one iteration of a replica takes, for the batch as formed."""

    def decode_coefficients(self, batch: int) -> tuple[float, float]:
        """``(a_s, b_s_per_token)``: a decode step of `batch` sequences over C tokens takes ``a + b·C``."""
        ...

    def step_s(self, prefill_chunks: Sequence[Chunk], decode_batch: int, decode_context_tokens: float) -> float:
        """One iteration: prefill chunks plus `decode_batch` decodes attending `decode_context_tokens`."""
        ...


@dataclass(frozen=True, slots=True, kw_only=True)
class AffineTimer:
    """A step time affine in its work; the test double for `StepTimer`.

    ``step = overhead_s + per_seq_s·n + per_context_token_s·C + per_prefill_token_s·Σ_chunks new_c``
    for a step with ``n`` decodes attending ``C`` tokens and prefill chunks of ``new_c`` tokens
    (prefill attention is folded into the per-token prefill cost). A step with no work costs 0.

    The defaults are a test convenience (helper-173 audit), not calibrated figures: no shipped command, report or
    notebook constructs an `AffineTimer` (a run without a timer is priced by the calibrated
    `simulator.cost.StepModel`; ``tests/engine/test_timer.py`` checks both), so they need no data file; a test
    whose outcome depends on a coefficient passes it. They are round figures of the order of Llama-3-70B bf16 on
    8×H100 (tp 8), worked by hand from the catalogs (``hardware/gpus.toml``: 3.35e12 B/s, 989.4e12 FLOP/s bf16;
    ``simulator/data/models.toml``) and tested against them: ``per_context_token_s ≈ 327680 B / (8 × 3.35e12
    B/s) ≈ 1.22e-8``, ``per_prefill_token_s ≈ 2 × 70.55e9 FLOP / (8 × 989.4e12 FLOP/s × 0.5) ≈ 3.6e-5`` (0.5: an
    assumed MFU); ``overhead_s = 0.02`` is a test figure alone (reading the weights once a step takes 141.1e9 B /
    (8 × 3.35e12 B/s) ≈ 5.3e-3 s of it; the calibrated model prices the rest).
    """

    overhead_s: float = 0.02
    per_seq_s: float = 0.0
    per_context_token_s: float = 1.2e-8
    per_prefill_token_s: float = 3.6e-5
    # `decode_discount`'s segments ``(hi, c, e)``, as a windowed layout's cost model gives them (tests)
    discount: tuple[tuple[int, float, float], ...] = ()

    def __post_init__(self) -> None:
        for f in ("overhead_s", "per_seq_s", "per_context_token_s", "per_prefill_token_s"):
            v = getattr(self, f)
            must(v >= 0, "AffineTimer", f, ">= 0", v)

    def decode_discount(self) -> tuple[tuple[int, float, float], ...]:
        """`discount`: the context a sequence shorter than a window is not charged for."""
        return self.discount

    def decode_coefficients(self, batch: int) -> tuple[float, float]:
        """``(overhead_s + per_seq_s·batch, per_context_token_s)``."""
        return self.overhead_s + self.per_seq_s * batch, self.per_context_token_s

    def step_s(self, prefill_chunks: Sequence[Chunk], decode_batch: int, decode_context_tokens: float) -> float:
        """The affine step time above."""
        if not prefill_chunks and decode_batch == 0:
            return 0.0
        new = sum(c[0] for c in prefill_chunks)
        a, b = self.decode_coefficients(decode_batch)
        return a + b * decode_context_tokens + self.per_prefill_token_s * new
