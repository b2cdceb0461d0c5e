"""Node capacity: how much HBM is left for KV, how many streams fit, how long a context fits.

Per replica of ``tp`` GPUs (a node of G GPUs holds ``G / tp`` replicas, each with all weights):

    kv_budget = tp · hbm · memory_utilization − weight_bytes

``memory_utilization`` (0.9 by default, as vLLM's ``gpu_memory_utilization``) leaves the rest
for activations, CUDA graphs and workspace. Streams at context n:

    max_streams = replicas · floor(kv_budget / paged_sequence_bytes(n))

Llama-3-70B bf16 on 8×H100 (tp 8): 0.9 · 640 GB − 141.1 GB = 434.9 GB of KV; at 128k tokens
(41.94 GB a stream) 10 streams fit; at 4k (1.34 GB) 324.
"""

from __future__ import annotations

from dataclasses import dataclass

from hardware.catalog import NodeSpec
from simulator.errors import DoesNotFitError, must
from simulator.kv import DEFAULT_BLOCK_TOKENS, KVLayout, sequence_bytes
from simulator.models import ModelSpec
from simulator.units import GB

DEFAULT_MEMORY_UTILIZATION = 0.9  # vLLM's gpu_memory_utilization default (docs.vllm.ai engine args)
MAX_SEARCH_CONTEXT_TOKENS = 2**30  # longest context the search considers


@dataclass(frozen=True, slots=True, kw_only=True)
class KVBudget:
    """HBM left for KV on one node, per replica and in all."""

    node: str
    model: str
    tp: int
    replicas: int
    usable_bytes_per_replica: float  # tp · hbm · memory_utilization
    weight_bytes_per_replica: float
    kv_bytes_per_replica: float
    memory_utilization: float

    @property
    def kv_bytes(self) -> float:
        """KV budget of the whole node: ``replicas · kv_bytes_per_replica``."""
        return self.replicas * self.kv_bytes_per_replica


def kv_budget(node: NodeSpec, model: ModelSpec, tp: int | None = None,
              memory_utilization: float = DEFAULT_MEMORY_UTILIZATION) -> KVBudget:
    """The KV budget of a node; raises `DoesNotFitError` (with the GB short) when weights don't fit."""
    tp = node.gpus if tp is None else tp
    must(1 <= tp <= node.gpus and node.gpus % tp == 0, f"node {node.key}", "tp",
         f"a divisor of the node's {node.gpus} GPUs", tp)
    must(0 < memory_utilization <= 1, "kv_budget", "memory_utilization", "in (0, 1]", memory_utilization)
    usable = tp * node.gpu.hbm_bytes * memory_utilization
    weights = model.weight_bytes
    kv = usable - weights
    if kv <= 0:
        raise DoesNotFitError(
            f"{model.key} does not fit {tp}×{node.gpu.key}: weights {weights / GB:.1f} GB "
            f"({model.weight_dtype}) exceed usable HBM {usable / GB:.1f} GB "
            f"({memory_utilization:g} × {tp * node.gpu.hbm_bytes / GB:.0f} GB) by {-kv / GB:.1f} GB"
        )
    return KVBudget(node=node.key, model=model.key, tp=tp, replicas=node.gpus // tp,
                    usable_bytes_per_replica=usable, weight_bytes_per_replica=weights,
                    kv_bytes_per_replica=kv, memory_utilization=memory_utilization)


def max_streams(budget: KVBudget, model: ModelSpec, layout: KVLayout | None, context_tokens: int,
                block_tokens: int = DEFAULT_BLOCK_TOKENS) -> int:
    """Concurrent sequences of `context_tokens` that fit: ``replicas · floor(kv / paged bytes)``."""
    must(context_tokens >= 1, "max_streams", "context_tokens", ">= 1", context_tokens)
    per_seq = sequence_bytes(model, layout or KVLayout(), context_tokens, block_tokens)
    return budget.replicas * int(budget.kv_bytes_per_replica // per_seq)


def max_context(budget: KVBudget, model: ModelSpec, layout: KVLayout | None, batch: int,
                block_tokens: int = DEFAULT_BLOCK_TOKENS) -> int:
    """The longest context at which `batch` sequences fit on the node (0 if none fits).

    Sequences are spread over replicas (``ceil(batch / replicas)`` on the fullest one); bytes
    are monotone in context, so a binary search finds the answer. Capped at
    ``MAX_SEARCH_CONTEXT_TOKENS`` (a layout with only sliding-window layers never fills up).
    """
    must(batch >= 1, "max_context", "batch", ">= 1", batch)
    layout = layout or KVLayout()
    per_replica = -(-batch // budget.replicas)

    def fits(n: int) -> bool:
        return per_replica * sequence_bytes(model, layout, n, block_tokens) <= budget.kv_bytes_per_replica

    if not fits(1):
        return 0
    lo, hi = 1, MAX_SEARCH_CONTEXT_TOKENS
    if fits(hi):
        return hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    return lo
