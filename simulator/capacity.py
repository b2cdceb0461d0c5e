"""Capacity: how much HBM each GPU has left for KV, how many streams fit, how long a context fits.

Per GPU of pipeline stage ``s`` of a replica (`simulator.placement` says what it holds)::

    kv_budget_s = hbm · memory_utilization − weights_s

``memory_utilization`` (0.9 by default, as vLLM's ``gpu_memory_utilization``) of the datasheet's
HBM. vLLM takes that share of the memory it sees (an H100's 81,559 MiB, 85.5 GB, not 80 GB) and then
subtracts the activation peak it profiles; kvsim subtracts no activations, the gap (0.9 · 5.5 GB a
GPU on an H100) standing in for them, CUDA graphs and workspace: an approximation. Streams at
context n, on the binding GPU::

    max_streams = replicas · groups · min_s floor(kv_budget_s / kv_s(n))

with ``kv_s(n)`` the paged KV one GPU of stage ``s`` holds for a sequence (its layers, its heads
or the whole MLA latent) and ``groups`` the replica's independent KV pools (``tp`` under DP
attention, else 1). ``replicas`` counts those on the node, or 1 on the nodes one replica spans.

Llama-3-70B bf16 on 8×H100 (TP8): 0.9 · 80 GB − 141.1 GB / 8 = 54.36 GB of KV a GPU; a 128k
stream holds 41.94 GB / 8 = 5.24 GB of it on each GPU, so 10 streams fit; at 4k, 324.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from hardware.catalog import NodeSpec
from simulator.errors import ConfigError, DoesNotFitError, is_number, is_whole, must
from simulator.kv import DEFAULT_BLOCK_TOKENS, KVLayout, check_layout_arg, sequence_bytes
from simulator.models import ModelSpec, must_model, weight_precision
from simulator.placement import ParallelPlan, Stage, kv_share, span, stages
from simulator.units import GB

if TYPE_CHECKING:
    from simulator.cost import StepModel

DEFAULT_MEMORY_UTILIZATION = 0.9  # vLLM's gpu_memory_utilization default (docs.vllm.ai engine args)
MAX_SEARCH_CONTEXT_TOKENS = 2**30  # longest context the search considers
_REF_TOKENS = 1 << 22  # a context beyond every window: where a stage's share of a block is taken


@dataclass(frozen=True, slots=True, kw_only=True)
class KVBudget:
    """HBM left for KV on each GPU of a replica, and how replicas sit on the nodes.

    ``replicas`` replicas occupy ``nodes`` nodes (one node, or the nodes one replica spans).
    """

    node: str
    model: str
    plan: ParallelPlan
    replicas: int
    nodes: int
    usable_bytes_per_gpu: float  # hbm · memory_utilization
    stages: tuple[Stage, ...]
    memory_utilization: float

    @property
    def tp(self) -> int:
        return self.plan.tp

    def stage_kv_bytes(self, s: int) -> float:
        """KV budget of one GPU of stage `s`: ``usable − weights_s``."""
        return self.usable_bytes_per_gpu - self.stages[s].weight_bytes

    @property
    def weight_bytes_per_replica(self) -> float:
        """Weights over all GPUs of a replica (replicated parts counted on each GPU)."""
        return sum(st.weight_bytes for st in self.stages) * self.plan.tp

    @property
    def usable_bytes_per_replica(self) -> float:
        return self.usable_bytes_per_gpu * self.plan.gpus

    @property
    def kv_bytes_per_replica(self) -> float:
        """HBM left for KV over all GPUs of a replica (a sum: the binding GPU decides capacity)."""
        return self.usable_bytes_per_replica - self.weight_bytes_per_replica

    @property
    def kv_bytes(self) -> float:
        """HBM left for KV over the ``nodes`` nodes: ``replicas · kv_bytes_per_replica``."""
        return self.replicas * self.kv_bytes_per_replica


def kv_budget(node: NodeSpec, model: ModelSpec, tp: int | None = None,
              memory_utilization: float = DEFAULT_MEMORY_UTILIZATION, *, plan: ParallelPlan | None = None,
              weight_dtype: str | None = None) -> KVBudget:
    """The per-GPU KV budget of a replica under `plan` (default: ``tp`` GPUs, all of the node's
    when not given; a `tp` given beside a `plan` must be the plan's); raises `DoesNotFitError` naming
    the GPU and the GB short when weights don't fit. Weights in a format the GPU has no tensor cores for
    (fp4 on a Hopper) fit as stored: the GPU runs their GEMMs weight-only (`simulator.models.gemm_dtype`)."""
    must(isinstance(node, NodeSpec), "kv_budget", "node", "a NodeSpec, e.g. load_catalog().node('8xH100')", node)
    must_model(model, "kv_budget")
    must(plan is None or tp is None or tp == plan.tp, "kv_budget", "tp", f"the plan's tp ({plan and plan.tp}) "
         "or None when a plan is given", tp)
    plan = plan or ParallelPlan(tp=node.gpus if tp is None else tp)
    must(is_number(memory_utilization) and 0 < memory_utilization <= 1, "kv_budget", "memory_utilization",
         "a number in (0, 1]", memory_utilization)  # "0.9" failed in the comparison (helper-159)
    sp = span(node, plan)
    usable = node.gpu.hbm_bytes * memory_utilization
    sts = stages(model, plan, weight_dtype)
    for s, st in enumerate(sts):
        if st.weight_bytes >= usable:
            where = f"stage {s + 1} of {plan.pp}, " if plan.pp > 1 else ""
            raise DoesNotFitError(
                f"{model.key} does not fit {plan.label} on {node.key}: {where}one GPU holds weights of "
                f"{st.weight_bytes / GB:.1f} GB ({weight_dtype or weight_precision(model)}), more than its usable "
                f"{usable / GB:.1f} GB ({memory_utilization:g} × {node.gpu.hbm_bytes / GB:,.4g} GB) "
                f"by {(st.weight_bytes - usable) / GB:.1f} GB"
                + (f" ({(st.weight_bytes - usable) * plan.tp / GB:.1f} GB over the stage's {plan.tp} GPUs)"
                   if plan.tp > 1 else "")
            )
    return KVBudget(node=node.key, model=model.key, plan=plan, replicas=sp.replicas, nodes=sp.nodes,
                    usable_bytes_per_gpu=usable, stages=sts, memory_utilization=memory_utilization)


def gpu_sequence_bytes(budget: KVBudget, model: ModelSpec, layout: KVLayout, context_tokens: int, stage: int,
                       block_tokens: int = 0) -> float:
    """KV bytes one GPU of `stage` holds for a sequence: ``sequence_bytes(n, its layers) · kv_share``."""
    return stage_sequence_bytes(model, layout, budget.plan, budget.stages[stage], context_tokens, block_tokens)


def stage_sequence_bytes(model: ModelSpec, layout: KVLayout, plan: ParallelPlan, stage: Stage, context_tokens: int,
                         block_tokens: int = 0) -> float:
    """`gpu_sequence_bytes` from the plan and stage alone (no budget: it holds whether or not the
    weights fit): ``sequence_bytes(n, the stage's layers) · kv_share(plan's tp_attn)``."""
    share = kv_share(model, layout, plan.attention_tp)
    return sequence_bytes(model, layout, context_tokens, block_tokens, stage.layer_range) * share


def sequences_per_group(budget: KVBudget, model: ModelSpec, layout: KVLayout, context_tokens: int,
                        block_tokens: int = DEFAULT_BLOCK_TOKENS) -> int:
    """Sequences of `context_tokens` one KV pool holds: ``min_s floor(kv_budget_s / kv_s(n))``."""
    return stage_sequences(model, layout, budget.plan, budget.stages, budget.usable_bytes_per_gpu, context_tokens,
                           block_tokens)


def stage_sequences(model: ModelSpec, layout: KVLayout, plan: ParallelPlan, stages_: tuple[Stage, ...],
                    usable_bytes_per_gpu: float, context_tokens: int, block_tokens: int = 0) -> int:
    """`sequences_per_group` from the plan, its stages and a GPU's usable bytes alone (no budget: negative
    when the weights do not fit): ``min_s floor((usable − weights_s) / kv_s(n))``."""
    fits = []
    for st in stages_:
        per_seq = stage_sequence_bytes(model, layout, plan, st, context_tokens, block_tokens)
        kv = usable_bytes_per_gpu - st.weight_bytes
        fits.append(int(kv // per_seq) if per_seq else MAX_SEARCH_CONTEXT_TOKENS)
    return min(fits)


def check_batch(budget: KVBudget, model: ModelSpec, layout: KVLayout, context_tokens: int, batch: int,
                block_tokens: int = DEFAULT_BLOCK_TOKENS) -> None:
    """Raise `DoesNotFitError` unless `batch` sequences of `context_tokens` fit one KV pool: on every
    stage's GPU ``weights_s + batch · kv_s(n) <= usable`` (the test of `max_context`); it names the
    binding GPU, the GB it is short and how many sequences do fit (`sequences_per_group`)."""
    need = [(batch * gpu_sequence_bytes(budget, model, layout, context_tokens, s, block_tokens), s)
            for s in range(len(budget.stages))]
    over, s = max((kv - budget.stage_kv_bytes(s), s) for kv, s in need)
    if over <= 0:
        return
    st, usable = budget.stages[s], budget.usable_bytes_per_gpu
    where = f"stage {s + 1} of {budget.plan.pp}, " if budget.plan.pp > 1 else ""
    raise DoesNotFitError(
        f"{model.key} does not fit {budget.plan.label} on {budget.node} at batch {batch} × {context_tokens:,} tokens: "
        f"{where}one GPU holds weights of {st.weight_bytes / GB:.1f} GB and KV of {need[s][0] / GB:.1f} GB, more "
        f"than its usable {usable / GB:.1f} GB ({budget.memory_utilization:g} of its HBM) by {over / GB:.1f} GB; "
        f"{sequences_per_group(budget, model, layout, context_tokens, block_tokens):,} sequences fit")


def max_streams(budget: KVBudget, model: ModelSpec, layout: KVLayout | None, context_tokens: int,
                block_tokens: int = DEFAULT_BLOCK_TOKENS) -> int:
    """Concurrent sequences of `context_tokens` on the ``budget.nodes`` nodes:
    ``replicas · groups · min_s floor(kv_budget_s / kv_s(n))``. `context_tokens` and `block_tokens` are integers
    >= 1, as `simulator.kv.footprint` takes them (helper-152: a block of 0 or -16 tokens, or 1.5 tokens of
    context, gave streams)."""
    must(isinstance(budget, KVBudget), "max_streams", "budget", "a KVBudget, e.g. kv_budget(load_catalog()"
         ".node('8xH100'), model)", budget)
    must_model(model, "max_streams")
    layout = check_layout_arg(layout, "max_streams")
    for key, value in (("context_tokens", context_tokens), ("block_tokens", block_tokens)):
        must(is_whole(value, minimum=1), "max_streams", key, "an integer >= 1", value)
    per_group = sequences_per_group(budget, model, layout, context_tokens, block_tokens)
    return budget.replicas * budget.plan.kv_groups * per_group


def block_share(budget: KVBudget, model: ModelSpec, layout: KVLayout, stage: int) -> float:
    """Fraction of a replica-wide KV block one GPU of `stage` holds (its layers and heads), taken
    past every window: ``kv_s(n) / sequence_bytes(n)`` at ``n = 2^22``."""
    whole = sequence_bytes(model, layout, _REF_TOKENS)
    return gpu_sequence_bytes(budget, model, layout, _REF_TOKENS, stage) / whole if whole else 1.0


def blocks_per_group(budget: KVBudget, model: ModelSpec, layout: KVLayout, block_bytes: float) -> int:
    """Blocks of `block_bytes` (a replica-wide block, `simulator.engine.geometry`) one KV pool
    holds: ``min_s floor(kv_budget_s / (block_bytes · share_s))``. With one stage and sharded
    heads this is ``floor(kv_bytes_per_replica / block_bytes)``."""
    return min(int(budget.stage_kv_bytes(s) // (block_bytes * block_share(budget, model, layout, s)))
               for s in range(len(budget.stages)))


def max_context(budget: KVBudget, model: ModelSpec, layout: KVLayout | None, batch: int,
                block_tokens: int = DEFAULT_BLOCK_TOKENS) -> int:
    """The longest context at which `batch` sequences fit on the ``budget.nodes`` nodes (0 if none fits).

    Sequences are spread over the KV pools (``ceil(batch / (replicas · groups))`` on the fullest);
    bytes are monotone in context, so a binary search finds the answer. Capped at
    ``MAX_SEARCH_CONTEXT_TOKENS`` (a layout with only sliding-window layers never fills up).
    """
    must(batch >= 1, "max_context", "batch", ">= 1", batch)
    layout = check_layout_arg(layout, "max_context")
    per_group = -(-batch // (budget.replicas * budget.plan.kv_groups))

    def fits(n: int) -> bool:
        return all(per_group * gpu_sequence_bytes(budget, model, layout, n, s, block_tokens) <= budget.stage_kv_bytes(s)
                   for s in range(len(budget.stages)))

    if not fits(1):
        return 0
    lo, hi = 1, MAX_SEARCH_CONTEXT_TOKENS
    if fits(hi):
        return hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    return lo


@dataclass(frozen=True, slots=True, kw_only=True)
class PlanCapacity:
    """One plan's per-GPU arithmetic and streams at a context (`compare_plans`).

    ``gpus`` is one replica's; ``nodes`` the nodes its replicas tile (one node, or those one
    replica spans). ``max_streams`` counts every replica on those ``nodes`` (`max_streams`):
    ``replicas · streams_per_replica``; ``streams_per_replica = kv_groups · min_s floor(kv_budget_s /
    kv_s(n))``; ``streams_per_node = max_streams / nodes``. A plan whose weights do not fit has no
    streams (0) but its stream's bytes all the same: they do not depend on the weights.
    """

    plan: str
    gpus: int  # one replica's
    nodes: int
    weight_bytes_per_gpu: float  # the binding GPU's
    kv_bytes_per_gpu: float
    stream_bytes_per_gpu: float  # the binding GPU's share of one stream at the context
    max_streams: int  # all replicas on `nodes`
    streams_per_node: float
    fits: bool
    why: str = ""
    streams_per_replica: int = 0


def compare_plans(node: NodeSpec, model: ModelSpec, layout: KVLayout, context_tokens: int,
                  plans: list[ParallelPlan], memory_utilization: float = DEFAULT_MEMORY_UTILIZATION,
                  block_tokens: int = DEFAULT_BLOCK_TOKENS) -> list[PlanCapacity]:
    """Each plan's binding GPU (the stage with the fewest streams) and streams at `context_tokens`;
    a plan whose weights do not fit is kept with ``fits = False``, the reason, no streams, and its
    heaviest GPU's weights and share of a stream (`stage_sequence_bytes`)."""
    rows = []
    for plan in plans:
        try:
            b = kv_budget(node, model, memory_utilization=memory_utilization, plan=plan)
        except (DoesNotFitError, ConfigError) as exc:
            heaviest = max(stages(model, plan), key=lambda st: st.weight_bytes)
            rows.append(PlanCapacity(plan=plan.label, gpus=plan.gpus, nodes=max(1, plan.gpus // node.gpus),
                                     weight_bytes_per_gpu=heaviest.weight_bytes,
                                     kv_bytes_per_gpu=node.gpu.hbm_bytes * memory_utilization - heaviest.weight_bytes,
                                     stream_bytes_per_gpu=stage_sequence_bytes(model, layout, plan, heaviest,
                                                                               context_tokens, block_tokens),
                                     max_streams=0, streams_per_node=0.0, fits=False, why=str(exc)))
            continue
        seq = [gpu_sequence_bytes(b, model, layout, context_tokens, s, block_tokens) for s in range(len(b.stages))]
        # the binding stage: the fewest streams; among stages that tie, the heaviest weights (helper-155: the
        # lighter one was shown)
        s = min(range(len(seq)), key=lambda i: (b.stage_kv_bytes(i) // seq[i], -b.stages[i].weight_bytes, i))
        streams = max_streams(b, model, layout, context_tokens, block_tokens)
        rows.append(PlanCapacity(
            plan=plan.label, gpus=plan.gpus, nodes=b.nodes, weight_bytes_per_gpu=b.stages[s].weight_bytes,
            kv_bytes_per_gpu=b.stage_kv_bytes(s), stream_bytes_per_gpu=seq[s],
            max_streams=streams, streams_per_node=streams / b.nodes, fits=True,
            streams_per_replica=streams // b.replicas))
    return rows


@dataclass(frozen=True, slots=True, kw_only=True)
class KVTransfer:
    """A prompt's KV moving from a prefill replica to a decode replica (`kv_transfer`)."""

    payload_bytes: float  # the sequence's KV in the layout: what a transfer carries
    send_bytes_per_gpu: float  # the most one prefill GPU sends (its layers, its heads or the latent)
    recv_bytes_per_gpu: float  # the most one decode GPU receives
    link_bytes: float  # bytes on one decode GPU's NIC, sender-limited: max(recv, send · nic_d / nic_p)
    link_bytes_per_s: float  # one decode GPU's NIC
    latency_s: float
    seconds: float  # alone on the link: link_bytes / link_bytes_per_s + latency_s


def kv_transfer(model: ModelSpec, layout: KVLayout, tokens: int, prefill: KVBudget, decode: KVBudget,
                prefill_node: NodeSpec, decode_node: NodeSpec, block_tokens: int = 0) -> KVTransfer:
    """The KV of a `tokens`-token prompt sent from prefill GPUs to decode GPUs over their NICs.

    Every GPU sends or receives its own share at once (GPU-direct RDMA, one NIC a GPU, as Dynamo
    and Mooncake move KV): a prefill GPU sends what it holds, ``kv_s(n)`` of its stage and heads;
    a decode GPU receives what it will hold. An MLA latent, whole on every TP rank, is received
    whole by every decode GPU. Alone on the link the transfer takes
    ``max(recv, send · nic_d / nic_p) / nic_d + latency``.
    """
    for node in (prefill_node, decode_node):
        must(node.nic_bytes_per_s > 0, f"node {node.key}", "nic_bytes_per_s", "> 0 to move KV between pools",
             node.nic_bytes_per_s)
    payload = sequence_bytes(model, layout, tokens, block_tokens)
    send, recv, link = _send_recv_link(model, layout, tokens, prefill, decode, prefill_node, decode_node, block_tokens)
    rate = decode_node.nic_bytes_per_s
    latency = max(prefill_node.nic_latency_s, decode_node.nic_latency_s)
    return KVTransfer(payload_bytes=payload, send_bytes_per_gpu=send, recv_bytes_per_gpu=recv, link_bytes=link,
                      link_bytes_per_s=rate, latency_s=latency, seconds=link / rate + latency)


def kv_link_bytes(model: ModelSpec, layout: KVLayout, tokens: int, prefill: KVBudget, decode: KVBudget,
                  prefill_node: NodeSpec, decode_node: NodeSpec, block_tokens: int = 0) -> float:
    """`kv_transfer`'s ``link_bytes`` alone (the same float), for a caller that has checked the two nodes
    with `kv_transfer` once: the engine prices every hand-off so (its payload and the checks were ~60 % of
    the call)."""
    return _send_recv_link(model, layout, tokens, prefill, decode, prefill_node, decode_node, block_tokens)[2]


def _send_recv_link(model: ModelSpec, layout: KVLayout, tokens: int, prefill: KVBudget, decode: KVBudget,
                    prefill_node: NodeSpec, decode_node: NodeSpec, block_tokens: int) -> tuple[float, float, float]:
    """``(send, recv, link)`` bytes of `kv_transfer`: the most one prefill GPU sends and one decode GPU
    receives, and on a decode GPU's NIC ``max(recv, send · nic_d / nic_p)``."""
    send = max(gpu_sequence_bytes(prefill, model, layout, tokens, s, block_tokens) for s in range(len(prefill.stages)))
    recv = max(gpu_sequence_bytes(decode, model, layout, tokens, s, block_tokens) for s in range(len(decode.stages)))
    return send, recv, max(recv, send * decode_node.nic_bytes_per_s / prefill_node.nic_bytes_per_s)


def sustained_requests_per_s(timer: StepModel, batch: int, prompt_tokens: float, output_tokens: float,
                             context_tokens: float, cached_tokens: float = 0.0) -> float:
    """Requests a second one replica sustains with `batch` streams decoding at once::

        step_s = a(batch) + b(batch) · batch · priced(context_tokens)   (`decode_coefficients`: a full batch;
                                                                  `StepModel.priced_context`)
        rate = batch / (batch · prefill_s(prompt_tokens − cached_tokens after cached_tokens) + o · step_s)

    Each request takes the replica for its prefill (of what a prefix cache did not serve: `cached_tokens`, a
    mean, 0 without one) and for a 1/batch share of its ``o`` decode steps
    (to first order: chunked prefill adds its compute to the steps it shares). The collapse study offers
    load against it (`simulator.study.simulated_collapse`) and the provider's HBM holding is capped by
    it (`simulator.billing.provider.output_ceiling_per_stream`)."""
    a, b = timer.decode_coefficients(batch)
    step_s = a + b * batch * timer.priced_context(context_tokens)  # (shorter than a window: what it reads)
    prefill_s = (timer.prefill_s(prompt_tokens - cached_tokens, cached_tokens) if cached_tokens
                 else timer.prefill_s(prompt_tokens, 0))
    return batch / (batch * prefill_s + output_tokens * step_s)
