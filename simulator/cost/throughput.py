"""End-to-end serving throughput from the step model, for published benchmark figures.

A steady-state, fixed-length benchmark (``I`` input and ``O`` output tokens per request) on
``gpus`` GPUs run as ``gpus / (tp · pp)`` replicas (the plan's GPUs). A replica runs one scheduler per
KV pool (one, or one per DP-attention rank: ``kv_groups``) and pipeline stage in flight (``pp``), as the
engine does (`simulator.engine.cluster`); each holds its share of the largest batch that fits on every
GPU of its pool, as `simulator.capacity.max_streams` counts them (but unrounded: it rounds to blocks)::

    B = min(max_batch, floor(min_s floor((hbm_bytes · memory_utilization − weights_s) / kv_s(I + O)) / pp))

(``weights_s`` and ``kv_s`` what one GPU of stage ``s`` holds, `simulator.placement.stages` and
`simulator.capacity.stage_sequence_bytes`: the embeddings and LM head of fp8 or fp4 weights in bf16,
K/V heads replicated where tp exceeds them, an MLA latent whole on every GPU), and each scheduler
repeats a cycle (the step model prices a DP rank's step on its own batch, and a step through every
stage): prefill ``B`` prompts in steps of at most
``P`` tokens (`prefill_cycle_s`:
``k = floor(P / I)`` prompts a step, or a prompt longer than ``P`` in chunks of ``P`` after the
tokens already cached), then ``O`` decode steps whose context grows from ``B·I`` by ``B`` each
step (the arithmetic series of `decode_coefficients`)::

    t_cycle  = t_prefill(B, I, P) + O · a + b · B · (O · I + O(O − 1)/2)
    tokens/s = (gpus / (tp · pp)) · kv_groups · pp · B · O / t_cycle

(with a sliding or compression window, ``O · I + O(O − 1)/2`` is the sum of each step's context less
what a sequence shorter than the window does not read: `StepModel.priced_context_sum`)

``P`` is the engine's step token budget (`PREFILL_TOKENS_PER_STEP`, the default
``max_num_batched_tokens`` of `simulator.engine.config.SchedulerConfig`). The cycle ignores the
overlap of prefill with decode that chunked prefill gives, so it is a lower bound on what a
scheduler achieves with the same step times.
"""

from __future__ import annotations

from simulator.capacity import DEFAULT_MEMORY_UTILIZATION, stage_sequences
from simulator.cost.step_model import StepModel
from simulator.errors import DoesNotFitError, must
from simulator.placement import stages

PREFILL_TOKENS_PER_STEP = 8192  # = SchedulerConfig.max_num_batched_tokens (tests/cost/test_calibrate.py checks)


def steady_batch(
    sm: StepModel,
    input_tokens: int,
    output_tokens: int,
    max_batch: int,
    memory_utilization: float = DEFAULT_MEMORY_UTILIZATION,
) -> int:
    """Largest batch of one scheduler (of a replica's KV pool, or of a DP-attention rank, and of a
    pipeline stage in flight) whose KV at ``I + O`` tokens fits beside the weights on every GPU (the
    module docstring's ``B``), capped at `max_batch`. KV is counted unrounded (no blocks)."""
    plan = sm.plan
    fit = stage_sequences(sm.model, sm.layout, plan, stages(sm.model, plan, sm.dtype),
                          sm.gpu.hbm_bytes * memory_utilization, input_tokens + output_tokens)
    b = min(max_batch, fit // plan.pp)
    if b < 1:
        raise DoesNotFitError(
            f"{sm.model.key} ({sm.dtype}) on {plan.label} of {sm.gpu.key}: no sequence of "
            f"{input_tokens + output_tokens} tokens fits beside the weights"
        )
    return b


def prefill_cycle_s(sm: StepModel, batch: int, input_tokens: int, step_tokens: int = PREFILL_TOKENS_PER_STEP) -> float:
    """Seconds to prefill `batch` prompts of `input_tokens` in steps of at most `step_tokens` tokens:
    ``k = floor(P / I)`` whole prompts a step (``batch // k`` full steps and one of the rest), or,
    for ``I > P``, each prompt in ``ceil(I / P)`` chunks of ``P`` after what is already cached."""
    i, p = input_tokens, step_tokens
    if i <= p:
        k = max(1, p // i)
        full, rest = divmod(batch, k)
        t = full * sm.step_s([(i, 0)] * k, 0, 0.0)
        return t + (sm.step_s([(i, 0)] * rest, 0, 0.0) if rest else 0.0)
    one = sum(sm.step_s([(min(p, i - c), c)], 0, 0.0) for c in range(0, i, p))
    return batch * one


def throughput_tokens_per_s(
    sm: StepModel, input_tokens: int, output_tokens: int, max_batch: int = 256, gpus: int | None = None
) -> float:
    """Output tokens per second of `gpus` GPUs (default one replica) at steady state."""
    plan = sm.plan
    gpus = gpus or plan.gpus
    must(gpus % plan.gpus == 0, "throughput", "gpus", f"a multiple of the plan's {plan.gpus} GPUs ({plan.label})",
         gpus)
    b = steady_batch(sm, input_tokens, output_tokens, max_batch)
    a, slope = sm.decode_coefficients(b)
    o, i = output_tokens, input_tokens
    cycle = prefill_cycle_s(sm, b, i) + o * a + slope * b * sm.priced_context_sum(i, o)
    return gpus / plan.gpus * plan.kv_groups * plan.pp * b * o / cycle
