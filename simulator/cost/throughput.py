"""End-to-end serving throughput from the step model, for published benchmark figures.

A steady-state, fixed-length benchmark (``I`` input and ``O`` output tokens per request) on
``gpus`` GPUs run as ``gpus / tp`` replicas. Each replica holds the largest batch that fits::

    B = min(max_batch, floor((tp · hbm_bytes · memory_utilization − weight_bytes) / kv(I + O)))

and repeats a cycle: prefill ``B`` prompts (``B · prefill_s(I)``), then ``O`` decode steps whose
context grows from ``B·I`` by ``B`` each step (the arithmetic series of `decode_coefficients`)::

    t_cycle  = B · prefill_s(I) + O · a + b · B · (O · I + O(O − 1)/2)
    tokens/s = (gpus / tp) · B · O / t_cycle

It ignores the overlap of prefill with decode that chunked prefill gives, so it is a lower
bound on what a scheduler achieves with the same step times.
"""

from __future__ import annotations

import math

from simulator.capacity import DEFAULT_MEMORY_UTILIZATION
from simulator.cost.step_model import StepModel
from simulator.errors import DoesNotFitError, must
from simulator.kv import sequence_bytes
from simulator.models import dtype


def steady_batch(
    sm: StepModel,
    input_tokens: int,
    output_tokens: int,
    max_batch: int,
    memory_utilization: float = DEFAULT_MEMORY_UTILIZATION,
) -> int:
    """Largest batch whose KV at ``I + O`` tokens fits beside the weights, capped at `max_batch`."""
    weights = sm.model.total_params * dtype(sm.dtype).effective_bytes
    budget = sm.tp * sm.gpu.hbm_bytes * memory_utilization - weights
    seq = sequence_bytes(sm.model, sm.layout, input_tokens + output_tokens)
    b = min(max_batch, math.floor(budget / seq)) if budget > 0 else 0
    if b < 1:
        raise DoesNotFitError(
            f"{sm.model.key} ({sm.dtype}) on {sm.tp}x{sm.gpu.key}: no sequence of "
            f"{input_tokens + output_tokens} tokens fits beside the weights"
        )
    return b


def throughput_tokens_per_s(
    sm: StepModel, input_tokens: int, output_tokens: int, max_batch: int = 256, gpus: int | None = None
) -> float:
    """Output tokens per second of `gpus` GPUs (default one replica) at steady state."""
    gpus = gpus or sm.tp
    must(gpus % sm.tp == 0, "throughput", "gpus", f"a multiple of tp={sm.tp}", gpus)
    b = steady_batch(sm, input_tokens, output_tokens, max_batch)
    a, slope = sm.decode_coefficients(b)
    o, i = output_tokens, input_tokens
    cycle = b * sm.prefill_s(i) + o * a + slope * b * (o * i + o * (o - 1) / 2)
    return gpus / sm.tp * b * o / cycle
