"""Step time of one batch iteration on a tensor-parallel replica: `StepModel` and `StepCost`.

A step runs prefill chunks ``(new_tokens, context_tokens)`` and a decode batch of ``B``
sequences holding ``C`` context tokens in all. Its time is the sum of four parts::

    t = t_linear + t_attention + t_comm + step_overhead_s

- linear: ``flops = 2 · (active_params − embeddings − LM head) · T / tp + 2 · vocab · d_model · R / tp``
  for ``T`` tokens in the step, ``R`` of them taking logits (each decode sequence's token and each
  prefill chunk's last: vLLM computes logits for every scheduled sequence); ``bytes = (the layers'
  dense weights + E_touched · expert_params · moe_layers) · bytes(dtype) / tp + vocab · d_model ·
  bytes(outer) / tp`` with ``E_touched = E · (1 − (1 − k/E)^T)`` (`expected_experts`) and the LM
  head in ``outer = models.outer_weight_dtype(dtype)`` (bf16 for fp8 and fp4 weights, as quantised
  checkpoints keep it; its GEMM then runs at bf16's peak and quantises nothing). The input embeddings are a
  gather of the step's rows: no GEMM, no read of the table. The layers' dense part (what a GPU
  holds of it: `placement.stages`) runs as ``G = n_layers · GEMMS_PER_LAYER`` GEMM kernels of
  equal shape (``m = T``, ``k = d_model``, ``n = dense weights / (G · d_model · bytes(dtype))`` per
  GPU: the shape only sets how many tiles keep the SMs busy), or, where a release keeps its attention
  in a format of its own (gpt-oss: bf16 beside MXFP4 experts), as the attention's
  ``n_layers · ATTENTION_GEMMS_PER_LAYER`` GEMMs at that format's precision and bytes and the rest's
  (`models.rest_weight_dtype`), the dense FLOPs shared by parameters (`_layers_s`); the LM head as one GEMM of
  ``m = R``, ``n = vocab / tp``; the experts as ``moe_layers · EXPERT_GEMMS_PER_LAYER`` grouped
  kernels over the touched experts (`linear_s`); each timed by `simulator.cost.kernels.gemm_s`
  at the peak of ``models.gemm_dtype(dtype, gpu)``, and fp8/fp4 GEMMs also quantise their input
  (block-scaled fp8 for a model with `weight_block_scales`). Weights in a format the GPU has no
  tensor cores for (fp4, mxfp4 on Hopper) or in a weight-only one (w4a16) run weight-only: bf16
  GEMMs (bf16's fitted efficiencies, no input quantisation) reading the weights' 4-bit bytes; the
  kernel's dequantisation is not priced (no measured table of such kernels: aiconfigurator's
  H100/H200/B200 GEMM tables hold bf16, fp8, block fp8 and NVFP4 only).
- prefill attention: one kernel per layer (`simulator.cost.kernels.prefill_kernel_s`): the
  chunks' thread blocks (``n_heads/tp · Σ prefill_schedule(n, c, w)``: 128 query rows each,
  causal keys plus the cached prefix, capped at the window in sliding-window layers) in waves
  over the SMs, and the chunk's bytes (KV `sequence_bytes(c + n)` per layer, or MLA's
  decompressed K/V, plus Q and O). FLOPs reported: ``2 · n_heads · (d_k + d_v) · pairs`` per
  layer (``pairs = n·c + n(n+1)/2``, `causal_pairs`).
- decode attention reads every cached KV byte (`sequence_bytes`, so the layout scales it) and
  pays ``2 · n_heads · (d_k + d_v)`` FLOPs per cached entry per layer, or for an MLA latent the
  absorbed ``2 · n_heads · (2 · kv_lora_rank + rope)``; per layer it costs
  ``fixed(B) + s_per_kv_byte(B) · KV bytes`` (`simulator.cost.kernels.decode_kernel_terms`:
  kernel, per-sequence and per-(sequence, KV head) latencies, Q/O traffic, and efficiencies
  that saturate with the ``B · kv_heads`` thread blocks of the grid).
  FLOPs split over ``tp``; KV bytes over ``min(tp, kv_heads)`` (an MLA latent is replicated).
- comm: 2 all-reduces per layer of ``T · d_model · ACTIVATION_BYTES``
  (`simulator.cost.kernels.allreduce_s`: the fastest of NCCL's ring LL, ring Simple and NVLS).

Under a parallelism plan (`simulator.placement.ParallelPlan`; the default is ``tp`` GPUs), first
principles on top of the fitted kernels (nothing below was fitted):

- DP attention (one scheduler per GPU, ``dp = tp`` of them in step): attention runs on the GPU's
  own sequences with every head (``tp_attn = 1`` above) and its projections as GEMMs of ``T``
  rows over whole attention weights; the dense MLPs and experts run on all ranks' tokens
  (``dp · T``, ranks assumed equally loaded) split over ``tp``. Instead of the attention
  all-reduces, a dense layer gathers and scatters the ``dp · T`` tokens (an all-reduce of
  ``dp · T · d`` bytes); an MoE layer with expert parallelism dispatches and combines each token
  to its ``k`` experts (two all-to-alls of ``T · k · d · (ep − 1)/ep`` bytes a GPU, at the link's
  bandwidth plus a zero-byte all-reduce's latency).
- EP: an MoE layer's kernels run whole experts, ``1/ep`` of the touched ones a GPU.
- PP: a scheduler's step passes every stage in turn (``pp`` of them in flight, vLLM's virtual
  engines), so it costs the whole model on ``tp`` GPUs plus ``pp − 1`` hand-offs of
  ``T · d`` activations (NVLink inside a domain, the NIC across, with its latency).
- A TP group larger than an NVLink domain all-reduces hierarchically: inside the domain
  (`allreduce_s`), then a ring over the ``N`` domains on each GPU's NIC:
  ``2(N − 1)/N · S/g / nic_bytes_per_s + 2(N − 1) · nic_latency_s`` (``g`` GPUs a domain).

Decode time is affine in ``C`` for a fixed ``B`` (`decode_coefficients`): a decode entry's
FLOPs are a fixed multiple of its bytes, so the smooth-max roofline is ``kv_bytes · s_per_byte(B)``
(homogeneous of degree one), every size-dependent term depends on ``B`` only, and
``kv_bytes(C) = B · α + β · C`` is exact for full-context layers and for sequences longer
than any sliding window or full-resolution compression window. A shorter sequence reads less
than that line says: `decode_discount` gives the piecewise-linear deficit ``δ(a)`` in tokens, and
a step over ``B`` sequences attending ``a_i`` tokens is priced exactly at ``C = Σ (a_i − δ(a_i))``
(`priced_context`; the engine keeps that sum per decode set, `simulator.engine.decode`). The
kernel forms and their fit are in `simulator.cost.kernels` and `simulator.cost.aiconfigurator`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any, TypeVar, cast

from hardware.catalog import GPUSpec, NodeSpec
from simulator.cost.kernels import GemmKernel, PrefillKernel, allreduce_s, decode_kernel_terms, gemm_s
from simulator.cost.params import ACTIVATION_BYTES, MLA_DECODE_HEAD_TILE, CostParams
from simulator.cost.roofline import (
    COMPUTE,
    MEMORY,
    causal_pairs,
    expected_experts,
)
from simulator.errors import must
from simulator.kv import KVLayout, own_layers, sequence_bytes, values_per_token_per_layer
from simulator.models import (
    ModelSpec,
    attention_weight_dtype,
    dtype,
    gemm_dtype,
    outer_weight_dtype,
    rest_weight_dtype,
    weight_dtypes,
)
from simulator.placement import ParallelPlan, check_plan, stages

GEMMS_PER_LAYER = 4  # qkv, o, gate+up, down projections: one kernel each
LOW_PRECISION = ("fp8", "fp4")  # GEMM precisions that quantise their input (`kernels.gemm_s`' low_precision)
ATTENTION_GEMMS_PER_LAYER = 2  # qkv and o of those four
EXPERT_GEMMS_PER_LAYER = 2  # an MoE layer's experts: one grouped kernel for gate+up, one for down
ALLREDUCES_PER_LAYER = 2  # after attention and after the MLP (Megatron tensor parallelism)
_REF_TOKENS = 1 << 22  # reference context for the affine KV fit: beyond any window
MEMO_ENTRIES = 1 << 16  # hot-path results remembered per StepModel (a few MB)
# chunks' attention seconds remembered per StepModel (`_pf_row`), ~100 B each (≤ 13 MB): vidur 10000 prices 74.8 k
# distinct chunks, and at 1 << 16 its rows were forgotten mid-run and 7.2 k chunks priced again (67 M instructions)
CHUNK_ENTRIES = 1 << 17
T = TypeVar("T")


@dataclass(frozen=True, slots=True, kw_only=True)
class StepCost:
    """One step's time and where it went (seconds; FLOPs and bytes per GPU)."""

    total_s: float
    linear_s: float
    linear_bound: str
    attention_s: float
    attention_bound: str
    comm_s: float
    overhead_s: float
    flops: float
    bytes: float
    weight_bytes: float
    kv_bytes: float
    tokens: float
    # ``flops / (total_s · peak(gemm dtype))``: all the step's FLOPs against the peak the layers' GEMMs run at
    # (the weights' format's, or bf16's weight-only), the bf16 LM head's of fp8/fp4 weights included (a
    # 16-bit GEMM counted at the quantised peak: the head is ~7% of a Llama-3.1-8B decode step's linear
    # FLOPs at batch 8). Under PP the step passes the stages in turn and its FLOPs are every stage's: one GPU's
    # MFU with that step alone in flight is ``mfu / pp`` (`kvsim cost`'s prefill's); with pp steps in flight, one a
    # stage (the engine's pp schedulers a replica), each GPU computes a 1/pp share of each, and its MFU is the mean
    # of their ``mfu`` (what the time series' rows of one replica's schedulers average to; `kvsim cost`'s decode's)
    mfu: float
    # of attention_s, the decode kernels' fixed part (`decode_terms`' fixed_s: launch and per-block
    # latencies, the Q read and O write), the same at any context; the rest of a decode-only step's
    # attention_s is its time over the KV bytes, ``kv_bytes · s_per_kv_byte``
    attention_fixed_s: float = 0.0

    @property
    def arithmetic_intensity(self) -> float:
        """FLOPs per byte moved from HBM."""
        return self.flops / self.bytes if self.bytes else float("inf")

    @property
    def bound(self) -> str:
        """What most of the time went to: ``compute``, ``memory``, ``communication`` or ``overhead``."""
        t = {"communication": self.comm_s, "overhead": self.overhead_s, COMPUTE: 0.0, MEMORY: 0.0}
        t[self.linear_bound] += self.linear_s
        t[self.attention_bound] += self.attention_s
        return max(t, key=t.__getitem__)


def _kv_heads(model: ModelSpec, layout: KVLayout) -> int:
    heads = {"native": model.n_kv_heads, "mha": model.n_heads, "mqa": 1, "gqa": layout.kv_heads}
    return heads[layout.attention]


def _kv_shards(model: ModelSpec, layout: KVLayout, tp: int) -> int:
    if layout.attention == "mla" or (layout.attention == "native" and model.attention == "mla"):
        return 1
    return max(1, min(tp, _kv_heads(model, layout)))


def _is_latent(model: ModelSpec, layout: KVLayout) -> bool:
    return layout.attention == "mla" or (layout.attention == "native" and model.attention == "mla")


class StepModel:
    """Precomputed step-time model of one replica; the hot-path methods take and return floats.

    Parameters
    ----------
    gpu, model, layout : specs
    tp : int
        Tensor-parallel GPUs of the replica.
    params : CostParams
        Efficiencies and latencies (`load_params(gpu.key)`).
    dtype : str | None
        Weight storage dtype (``bf16``, ``fp8``, ``fp4``, ``mxfp4``, ``w4a16``); default the model's. The
        GEMMs compute in `gemm_dtype` of it on the GPU (bf16 where it has no tensor cores for the format).
    plan : ParallelPlan | None
        The replica's parallelism plan (default: ``tp`` GPUs, one stage); its ``tp`` must be `tp`.
    node : NodeSpec | None
        The node, for its interconnect: needed when the plan spans more than one NVLink domain.
    """

    __slots__ = (
        "_a2a_bytes_per_token",
        "_ar_bytes_per_token",
        "_attn_flops_per_token",
        "_attn_gemm",
        "_attn_param_share",
        "_attn_tp",
        "_attn_weight_bytes",
        "_bw",
        "_dec_flops_per_byte",
        "_dec_head_dim",
        "_dec_kv_heads",
        "_dec_qo_bytes",
        "_dec_terms",
        "_dense_quant_per_token",
        "_dense_weight_bytes",
        "_discount",
        "_dtype",
        "_expert_bytes",
        "_expert_flops_per_token",
        "_expert_gemm_count",
        "_expert_n",
        "_expert_quant_per_token",
        "_fp8_kv",
        "_full_windows",
        "_gemm_count",
        "_gemm_dtype",
        "_gemm_k",
        "_gemm_kernels",
        "_gemm_n",
        "_gpu",
        "_head_bytes",
        "_head_flops_per_row",
        "_head_kernel",
        "_head_n",
        "_head_t",
        "_heads",
        "_kv_alpha",
        "_kv_beta",
        "_kv_simple",
        "_last_run",
        "_layout",
        "_lin_comm",
        "_lin_flops_per_token",
        "_memo",
        "_mla",
        "_model",
        "_node",
        "_overhead_s",
        "_params",
        "_peak",
        "_pf_entries",
        "_pf_flops_per_pair",
        "_pf_groups",
        "_pf_kernel",
        "_pf_plain",
        "_pf_rows",
        "_plan",
        "_qo_bytes",
        "_rest_bytes",
        "_rest_gemm",
        "_tp",
        "_windows",
    )

    def __init__(
        self,
        gpu: GPUSpec,
        model: ModelSpec,
        layout: KVLayout | None,
        tp: int,
        params: CostParams,
        dtype_name: str | None = None,
        plan: ParallelPlan | None = None,
        node: NodeSpec | None = None,
    ) -> None:
        must(tp >= 1, "StepModel", "tp", ">= 1", tp)
        plan = plan or ParallelPlan(tp=tp)
        must(plan.tp == tp, "StepModel", "plan", f"a plan of tp={tp}", plan.label)
        check_plan(model, plan)
        layout = layout or KVLayout()
        self._gpu, self._model, self._layout, self._tp, self._params = gpu, model, layout, tp, params
        self._plan, self._node = plan, node
        at = self._attn_tp = plan.attention_tp
        if plan.gpus > (node.domain_gpus if node else plan.gpus):
            must(bool(node and node.nic_bytes_per_s), f"node {node.key if node else '?'}", "nic_bytes_per_s",
                 f"> 0 for {plan.label} over more than one NVLink domain", node.nic_bytes_per_s if node else None)
        self._dtype = dtype_name or model.weight_dtype
        must(self.dtype in weight_dtypes(), "weights", "weight_dtype", f"one of {', '.join(weight_dtypes())}",
             self.dtype)
        self._gemm_dtype = gemm_dtype(self.dtype, gpu)  # the weights' own, or bf16 weight-only (fp4 on Hopper)
        self._peak = gpu.peak_flops(self._gemm_dtype)
        self._bw = gpu.hbm_bytes_per_s
        wb = dtype(self.dtype).effective_bytes
        moe_params = model.moe_layers * model.n_experts * model.expert_params
        # What one GPU holds of the layers (`placement.stages` with every layer in one stage: what
        # `fit` says it holds): under TP the dense weights split over tp, except the K/V projections
        # of KV heads replicated when tp > the KV heads and an MLA model's latent down-projections,
        # which every rank holds whole (and multiplies every token by: the FLOPs scale with them).
        # The input embeddings are a gather of a step's token rows (no GEMM, no read of the table);
        # the LM head is its own GEMM (`_head_s`), over the rows that take logits.
        one_stage = stages(model, replace(plan, pp=1), self.dtype)[0]
        outer = model.embedding_params + model.lm_head_params  # the embeddings, and the LM head unless tied
        # the attention projections in a format of their own where the release keeps them apart (gpt-oss:
        # bf16 beside mxfp4 experts; `_layers_s` then prices their GEMMs apart), and the rest of the dense
        # part with them when it is routers and norms (`rest_weight_dtype`): ab = rb = wb otherwise
        attn_dtype, rest_dtype = attention_weight_dtype(model, self.dtype), rest_weight_dtype(model, self.dtype)
        ab, rb = dtype(attn_dtype).effective_bytes, dtype(rest_dtype).effective_bytes
        dense_params = model.total_params - moe_params - outer
        even = (dense_params * wb / tp + model.n_layers * model.attention_params * (ab - wb) / tp
                + model.n_layers * model.other_params_per_layer * (rb - wb) / tp)
        held = one_stage.attention_bytes + one_stage.other_bytes
        if plan.kv_groups > 1:  # DP attention prices its whole attention projections apart (`_layers_s`)
            held = even
        self._dense_weight_bytes = held  # the layers' dense weights
        # the dense parameters a GPU holds against an even split (> 1 where KV heads are replicated), and
        # the attention's share of them: ratios of bytes where all are in one format
        held_params = one_stage.attention_bytes / ab + one_stage.other_bytes / rb
        replication = held / even if ab == wb or plan.kv_groups > 1 else held_params / (dense_params / tp)
        self._attn_param_share = one_stage.attention_bytes / ab / held_params if held_params else 0.0
        self._attn_gemm = gemm_dtype(attn_dtype, gpu) if ab != wb else ""  # "": as the other weights
        self._rest_gemm = gemm_dtype(rest_dtype, gpu) if rb != wb else ""
        self._rest_bytes = rb
        # the LM head (the embeddings' matrix when tied), vocab-parallel over tp: one GEMM of
        # ``vocab / tp`` columns over the step's logit rows
        head_params = float(model.vocab_size * model.d_model)
        head_dtype = outer_weight_dtype(self.dtype)  # bf16 for quantised weights
        self._head_bytes = head_params * dtype(head_dtype).effective_bytes / tp
        self._head_flops_per_row = 2.0 * head_params / tp
        self._head_n = model.vocab_size / tp
        self._expert_bytes = model.moe_layers * model.expert_params * wb / tp  # one expert in every MoE layer
        self._gemm_count = model.n_layers * GEMMS_PER_LAYER
        self._gemm_k = float(model.d_model)
        self._gemm_n = self._dense_weight_bytes / (self._gemm_count * model.d_model * wb) if ab == wb \
            else held_params / (self._gemm_count * model.d_model)
        # memo of the hot path (the specs are read-only): decode coefficients and decode kernel
        # terms by batch, linear and all-reduce time by tokens, prefill attention by chunks
        self._memo: dict[tuple[Any, ...], Any] = {}
        expert_active = model.moe_layers * model.experts_per_token * model.expert_params
        # dense layers' GEMMs (the embeddings and LM head apart)
        self._lin_flops_per_token = 2.0 * (model.active_params - expert_active - outer) / tp * replication
        self._expert_flops_per_token = 2.0 * expert_active / tp
        self._expert_gemm_count = model.moe_layers * EXPERT_GEMMS_PER_LAYER
        # one expert's GEMM width a GPU: sharded over tp, or over tp/ep within an expert-parallel group
        self._expert_n = model.expert_params / (EXPERT_GEMMS_PER_LAYER * model.d_model * tp / plan.ep)
        # DP attention: the attention projections run whole on each GPU's own tokens
        self._attn_weight_bytes = one_stage.attention_bytes
        self._attn_flops_per_token = 2.0 * model.n_layers * model.attention_params / at
        self._a2a_bytes_per_token = model.experts_per_token * model.d_model * ACTIVATION_BYTES * (plan.ep - 1) / plan.ep
        # activation values an fp8/fp4 step quantises per token: the inputs of the column-parallel
        # GEMMs (qkv, gate+up: d_model, replicated) and of the row-parallel ones (o, down: sharded
        # over tp); an MoE layer quantises a token once before dispatch and each routed copy's
        # intermediate. Dense d_ff is estimated from the parameter count (embeddings included).
        d = model.d_model
        o_in = model.n_heads * model.value_head_dim
        attn_params = d * model.head_dim * (model.n_heads + 2 * model.n_kv_heads) + o_in * d
        dense_layers = model.n_layers - model.moe_layers
        d_ff = max(0.0, (model.total_params - moe_params) / model.n_layers - attn_params) / (3 * d)
        self._dense_quant_per_token = model.n_layers * (d + o_in / tp) + dense_layers * (d + d_ff / tp)
        moe_inter = model.expert_params / (3 * d)
        self._expert_quant_per_token = model.moe_layers * (d + model.experts_per_token * moe_inter / tp)
        self._ar_bytes_per_token = model.d_model * ACTIVATION_BYTES
        # attention
        d_k, d_v = model.head_dim, model.value_head_dim
        self._pf_flops_per_pair = 2.0 * model.n_heads * (d_k + d_v) / at  # per layer
        self._qo_bytes = model.n_heads * (d_k + d_v) * ACTIVATION_BYTES / at  # per token per layer
        self._heads = model.n_heads / at  # query heads per GPU: prefill CTAs per query tile, MLA decode tiles
        self._mla = _is_latent(model, layout)
        self._fp8_kv = dtype(layout.kv_dtype).effective_bytes <= 1
        entry_bytes = values_per_token_per_layer(model, layout) * dtype(layout.kv_dtype).effective_bytes
        if self._mla:
            rank, rope = ((model.kv_lora_rank, model.qk_rope_head_dim) if model.attention == "mla"
                          else layout.latent_dims)
            entry_flops = 2.0 * model.n_heads * (2 * rank + rope)
        else:
            entry_flops = 2.0 * model.n_heads * (d_k + d_v)
        shards = _kv_shards(model, layout, at)
        # all layers compute on their entries; sharing layers read what the owners stored
        full = replace(layout, own_layer_fraction=1.0)
        self._dec_flops_per_byte = entry_flops / at / (entry_bytes / shards)
        b1 = sequence_bytes(model, layout, _REF_TOKENS)
        b2 = sequence_bytes(model, layout, 2 * _REF_TOKENS)
        f_scale = sequence_bytes(model, full, _REF_TOKENS) / b1 if b1 else 1.0
        self._dec_flops_per_byte *= f_scale
        self._kv_beta = (b2 - b1) / _REF_TOKENS / shards  # KV bytes per context token, per GPU
        self._kv_alpha = max(0.0, (b1 / shards) - self._kv_beta * _REF_TOKENS)  # per sequence
        self._discount = self._window_discount(shards)
        self._windows = self._layer_groups()
        # the hot path (`step_s`): prefill attention priced on floats (`PrefillKernel`), remembered
        # per chunk list; linear and communication seconds per token count
        self._pf_kernel = PrefillKernel(d_k, d_v, self._mla, self._fp8_kv, gpu, params)
        self._gemm_kernels: dict[tuple[float, str], GemmKernel] = {}  # by GEMM width n and precision (`_gemms`)
        # the LM head's GEMM, in its own format (bf16 beside quantised layers, else the layers'): a 16-bit
        # GEMM, neither low precision nor block-scaled, at that format's peak (`_head_s`)
        self._head_kernel = GemmKernel(self._head_n, self._gemm_k, gpu.peak_flops(head_dtype), False, gpu, params)
        self._pf_groups = [(layers, w) for layers, w in self._windows if layers]
        # layers of the one full-attention group (0: windows), for the fused single-chunk price
        self._pf_plain = self._pf_groups[0][0] if len(self._pf_groups) == 1 and not self._pf_groups[0][1] else 0
        # one chunk's attention seconds by new tokens, then context (a run's lookups need no tuples;
        # a step of several chunks' goes in `_memo` by its chunk list)
        self._pf_rows: dict[float, dict[float, float]] = {}
        self._pf_entries = 0  # in all rows
        self._lin_comm: dict[float, tuple[float, float]] = {}  # the layers' and all-reduce seconds by tokens
        # the last `prefill_run_s` call: (new tokens, decode batch, growth, context, decode context) and its prices
        self._last_run: tuple[tuple[int, int, int, int, int], list[float]] | None = None
        self._head_t: dict[float, float] = {}  # the LM head's seconds by logit rows
        self._dec_terms: dict[int, tuple[float, float]] = {}
        self._overhead_s = params.step_overhead_s
        # `sequence_bytes` of a layout without windows or compression: ``L·n · entry · own / L``
        simple = not (model.sliding_window and layout.use_sliding_window) and layout.compress_ratio <= 1
        self._kv_simple = (entry_bytes, own_layers(model, layout), shards) if simple else None
        # decode kernel shape per layer and GPU: KV heads (an MLA latent is one), the head dim of
        # the latency terms, the Q read and O write per sequence
        self._dec_kv_heads = 1.0 if self._mla else _kv_heads(model, layout) / shards
        if self._mla:
            self._dec_head_dim = float(rank + rope)
            self._dec_qo_bytes = model.n_heads / at * (2 * rank + rope) * ACTIVATION_BYTES
        else:
            self._dec_head_dim = float(d_k)
            self._dec_qo_bytes = self._qo_bytes

    def _window_discount(self, shards: int) -> tuple[tuple[int, float, float], ...]:
        """`decode_discount`'s segments: at each breakpoint ``p`` of the per-sequence bytes (the
        compression's full-resolution ``compress_recent_tokens``, the sliding window), the deficit
        ``δ(p) = (α + β·p − bytes(p)) / β`` tokens, ``δ(0) = α/β`` and 0 at the last breakpoint (from there
        on the affine fit is the bytes, up to a compressed entry's rounding); linear in between."""
        model, layout, alpha, beta = self.model, self.layout, self._kv_alpha, self._kv_beta
        points = set()
        if layout.compress_ratio > 1 and layout.compress_recent_tokens > 0:
            points.add(layout.compress_recent_tokens)
        if model.sliding_window and layout.use_sliding_window:
            points.add(model.sliding_window)
        self._full_windows = bool(points) and alpha > 0 and not beta > 0  # every layer windowed (see there)
        if not points or not alpha > 0 or not beta > 0:
            return ()
        top = max(points)
        ps = [0, *sorted(points)]
        deficit = [alpha / beta, *((alpha + beta * p - sequence_bytes(model, layout, p) / shards) / beta
                                   for p in ps[1:-1]), 0.0]
        segments = []
        for lo, hi, d_lo, d_hi in zip(ps, ps[1:], deficit, deficit[1:], strict=False):
            e = (d_lo - d_hi) / (hi - lo)
            segments.append((hi, d_lo + e * lo, e))
        assert segments[-1][0] == top
        return tuple(segments)

    def decode_discount(self) -> tuple[tuple[int, float, float], ...]:
        """The decode model's correction for sequences shorter than a window: segments ``(hi, c, e)``,
        ascending in ``hi``, each covering the attended tokens ``a`` from the previous ``hi`` (0 first) to
        its own. The affine decode model (`decode_coefficients`) charges a sequence attending ``a``
        tokens ``α + β·a`` KV bytes, which is exact from the last ``hi`` on (every sliding window and
        full-resolution compression window full); a shorter one reads ``δ(a) = c − e·a`` tokens' worth
        (``β·δ`` bytes) less, so a decode step whose sequences attend ``a_i`` tokens costs exactly
        ``a + b·(Σ a_i − Σ δ(a_i))`` (`priced_context`). Empty for a layout without windows, and where
        ``β = 0``: every layer windowed (compressed or not), the step is then charged as if every window
        were full (`charges_full_windows`), the affine model's one shape that cannot express it.

        Compression ``compress:w:r`` on full-context layers: ``α = L·e·r·(1 − 1/w)``, ``β = L·e/w`` (``L·e``
        bytes a token over the layers), so ``δ(a) = (w − 1)·(r − a)`` below ``r``: one segment
        ``(r, (w − 1)·r, w − 1)``, and ``α + β·(a − δ(a)) = L·e·a``, the full-resolution bytes."""
        return self._discount

    @property
    def charges_full_windows(self) -> bool:
        """Whether a sequence shorter than a window is charged as if it filled it: every layer windowed
        (no full-context slope ``β`` to take its deficit off, `decode_discount`)."""
        return self._full_windows

    def priced_context(self, attended: float) -> float:
        """``a − δ(a)`` (`decode_discount`): the context whose affine price ``α + β·priced`` is the KV
        bytes one sequence attending `attended` tokens reads (`attended` itself without a window, or
        from the last window on)."""
        for hi, c, e in self._discount:
            if attended < hi:
                return attended - (c - e * attended)
        return attended

    def priced_context_sum(self, first: int, steps: int) -> float:
        """``Σ_{j<steps} priced_context(first + j)``: one sequence's priced context over `steps` decode
        steps from `first` attended tokens, ``steps·first + steps·(steps − 1)/2`` without a window."""
        total = steps * first + steps * (steps - 1) / 2
        lo = 0
        for hi, c, e in self._discount:  # take δ off over the steps' attended counts in [lo, hi)
            a0, a1 = max(first, lo), min(first + steps, hi)  # the integers a0..a1 − 1
            if a1 > a0:
                n = a1 - a0
                total -= n * c - e * (n * a0 + n * (n - 1) / 2)
            lo = hi
        return total

    def decode_blocks(self, batch: int) -> float:
        """Thread blocks of one decode attention kernel on a GPU, the ``n`` of `decode_kernel_terms`:
        ``batch · KV heads per GPU``, or ``batch · ceil(query heads per GPU / MLA_DECODE_HEAD_TILE)`` for
        an absorbed MLA decode. Fewer than the GPU's SMs leave some idle, so such a kernel can be bound by
        the compute of the SMs it occupies at a small share of the GPU's peak."""
        per_seq = math.ceil(self._heads / MLA_DECODE_HEAD_TILE) if self._mla else self._dec_kv_heads
        return batch * per_seq

    def decode_terms(self, batch: int, query_tokens: int = 1) -> tuple[float, float, float, float]:
        """``(fixed_s, s_per_kv_byte, s_c, s_m)`` of the decode attention of all layers for `batch`
        sequences (`simulator.cost.kernels.decode_kernel_terms` per layer, ``n_layers`` times the
        fixed part); its time over ``K`` KV bytes per GPU is ``fixed_s + s_per_kv_byte · K``."""
        if batch <= 0:
            return 0.0, 0.0, 0.0, 0.0
        return self._memoized(("decode", batch, query_tokens), self._decode_terms, batch, query_tokens)

    def _decode_terms(self, batch: int, query_tokens: int) -> tuple[float, float, float, float]:
        fixed, s_b, s_c, s_m = decode_kernel_terms(
            float(batch), self._dec_kv_heads, self._dec_head_dim, self._dec_qo_bytes * query_tokens,
            self._dec_flops_per_byte * query_tokens, self._mla, self._fp8_kv, self.gpu, self.params,
            self._heads * query_tokens,
        )
        return self.model.n_layers * float(fixed), float(s_b), float(s_c), float(s_m)

    def _memoized(self, key: tuple[Any, ...], fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)``, remembered under `key` (at most `MEMO_ENTRIES`, then forgotten at once)."""
        hit = self._memo.get(key)
        if hit is None:
            if len(self._memo) >= MEMO_ENTRIES:
                self._memo.clear()
            hit = self._memo[key] = fn(*args)
        return hit

    # read-only: everything below is precomputed from them (and the hot path memoised)
    @property
    def gpu(self) -> GPUSpec:
        return self._gpu

    @property
    def model(self) -> ModelSpec:
        return self._model

    @property
    def layout(self) -> KVLayout:
        return self._layout

    @property
    def tp(self) -> int:
        return self._tp

    @property
    def params(self) -> CostParams:
        return self._params

    @property
    def plan(self) -> ParallelPlan:
        return self._plan

    @property
    def dense_weight_bytes(self) -> float:
        """Bytes per GPU of the weights every step reads: the layers' dense weights and the LM head
        (all but the routed experts and the input embeddings, which a step gathers rows of)."""
        return self._dense_weight_bytes + self._head_bytes

    @property
    def expert_bytes(self) -> float:
        """Bytes per GPU of one routed expert in every MoE layer."""
        return self._expert_bytes

    @property
    def dtype(self) -> str:
        """Weight storage dtype (bytes read, bytes held)."""
        return self._dtype

    @property
    def gemm_dtype(self) -> str:
        """The precision the layers' GEMMs compute in (`simulator.models.gemm_dtype`): the weights' own where
        the GPU has tensor cores for it, else bf16 (weight-only: fp4 or mxfp4 on Hopper, w4a16 anywhere)."""
        return self._gemm_dtype

    @property
    def attention_gemm_dtype(self) -> str:
        """The precision the attention projections' GEMMs compute in where a release keeps them in a format of its
        own (gpt-oss: bf16 beside MXFP4 experts), else `gemm_dtype`."""
        return self._attn_gemm or self._gemm_dtype

    def _layer_groups(self) -> list[tuple[int, int]]:
        m = self.model
        if not (m.sliding_window and self.layout.use_sliding_window):
            return [(m.n_layers, 0)]
        g = m.n_global_layers
        return [(g, 0), (m.n_layers - g, m.sliding_window)]

    # ---- parts (floats) -------------------------------------------------------------------
    def linear_s(self, tokens: float, rows: float | None = None) -> tuple[float, str, float, float]:
        """Linear layers for `tokens` tokens of which `rows` take logits (default: all, a decode
        step's): (seconds, bound, flops, bytes) per GPU, the layers' (`_layers_s`, remembered by
        tokens) then the LM head's (`_head_s`, by rows): a step's token count and its rows vary
        apart (a prefill chunk's length against the decoders beside it), so each is remembered alone."""
        t, flops, wbytes = self._linear_work(tokens, tokens if rows is None else rows)
        p = self.params
        low_eff = p.gemm_fp4_eff if self._fp4 else p.gemm_fp8_block_eff if self._blk else p.gemm_fp8_eff
        eff_c = p.gemm_compute_eff * (low_eff if self._low else 1.0)
        mem_factor = p.gemm_fp4_memory_factor if self._fp4 else 1.0
        bound = COMPUTE if flops / (self._peak * eff_c) >= wbytes / (self._bw * p.gemm_memory_eff) * mem_factor \
            else MEMORY
        return t, bound, flops, wbytes

    def _linear_work(self, tokens: float, rows: float) -> tuple[float, float, float]:
        """`linear_s`' (seconds, flops, bytes), without its bound (what `utilisation` needs)."""
        t, flops, wbytes = self._memoized(("linear", tokens), self._layers_s, tokens)
        h_t, h_flops, h_bytes = self._memoized(("head", rows), self._head_s, rows)
        return t + h_t, flops + h_flops, wbytes + h_bytes

    def _head_s(self, rows: float) -> tuple[float, float, float]:
        """The LM head over `rows` logit rows (all ranks' under DP attention): one GEMM of ``vocab /
        tp`` columns, reading the ``vocab · d_model`` matrix once: (seconds, flops, bytes) per GPU. A model
        of unknown vocabulary (``vocab_size = 0``: its embeddings counted with the layers) has none."""
        rows = self._plan.kv_groups * rows
        if not rows or not self._head_n:
            return 0.0, 0.0, 0.0
        h_flops = self._head_flops_per_row * rows
        return self._head_kernel.seconds(h_flops, self._head_bytes, 0.0), h_flops, self._head_bytes

    def _layers_s(self, tokens: float) -> tuple[float, float, float]:
        """The layers' linear work for `tokens` tokens: (seconds, flops, bytes) per GPU.

        Dense projections: ``n_layers · GEMMS_PER_LAYER`` GEMMs of ``m = T`` rows. MoE experts:
        ``moe_layers · EXPERT_GEMMS_PER_LAYER`` grouped kernels, each over the ``E_touched``
        experts the step's tokens reach (`expected_experts`) with ``m = T · k / E_touched`` rows
        an expert (``E_touched / ep`` of them a GPU under expert parallelism); all timed by
        `simulator.cost.kernels.gemm_s`. Under DP attention the attention projections are
        ``n_layers · ATTENTION_GEMMS_PER_LAYER`` GEMMs of the GPU's own ``T`` rows over whole
        weights, and the MLPs and experts take all ranks' ``dp · T`` tokens. A model whose attention
        projections are in a format of their own (`models.attention_weight_dtype`: gpt-oss's bf16) prices
        them as those ``ATTENTION_GEMMS_PER_LAYER`` GEMMs a layer at that format's precision, their share of
        the dense FLOPs by parameters, and the rest of the dense part as the other GEMMs (in the attention's
        precision where every layer is MoE: routers, norms, biases). The LM head is apart
        (`_head_s`): its rows are each decode sequence's token and each prefill chunk's last (vLLM
        computes logits for every scheduled sequence and drops a partial prefill's)."""
        m, dp = self.model, self._plan.kv_groups
        flops = self._lin_flops_per_token * tokens
        wbytes = self._dense_weight_bytes
        g = self._gemm_count
        if dp == 1 and not self._attn_gemm:
            t = self._gemms(g, flops, wbytes, tokens, self._gemm_n, tokens * self._dense_quant_per_token)
        elif dp == 1:  # the attention projections in a format of their own (gpt-oss: bf16), priced apart
            ga = m.n_layers * ATTENTION_GEMMS_PER_LAYER
            share, a_bytes, quant = self._attn_param_share, self._attn_weight_bytes, self._dense_quant_per_token / g
            t = self._gemms(ga, flops * share, a_bytes, tokens, self._gemm_n * g * share / ga, tokens * quant * ga,
                            self._attn_gemm)
            if share < 1.0:
                t += self._gemms(g - ga, flops * (1.0 - share), wbytes - a_bytes, tokens,
                                 self._gemm_n * g * (1.0 - share) / (g - ga), tokens * quant * (g - ga),
                                 self._rest_gemm)
        else:
            ga = m.n_layers * ATTENTION_GEMMS_PER_LAYER
            a_flops, a_bytes = self._attn_flops_per_token * tokens, self._attn_weight_bytes
            mlp_tokens = dp * tokens
            attn_sharded = 2.0 * m.n_layers * m.attention_params / self.tp
            # the layers' weights beyond attention: dense MLPs, shared experts, norms (none in a model whose
            # every layer is MoE and whose rounded total leaves nothing beside attention: Qwen3-235B-A22B)
            ab = dtype(attention_weight_dtype(m, self.dtype)).effective_bytes
            mlp_bytes = max(0.0, wbytes - m.n_layers * m.attention_params * ab / self.tp)
            mlp_flops = (self._lin_flops_per_token - attn_sharded) * mlp_tokens if mlp_bytes else 0.0
            quant = self._dense_quant_per_token / g
            t = self._gemms(ga, a_flops, a_bytes, tokens, a_bytes / (ga * m.d_model * ab), tokens * quant * ga,
                            self._attn_gemm)
            if mlp_bytes:
                t += self._gemms(g - ga, mlp_flops, mlp_bytes, mlp_tokens,
                                 mlp_bytes / ((g - ga) * m.d_model * self._rest_bytes), mlp_tokens * quant * (g - ga),
                                 self._rest_gemm)
            flops, wbytes, tokens = a_flops + mlp_flops, a_bytes + mlp_bytes, mlp_tokens
        if m.moe_layers:
            rows = max(float(tokens), 1.0)
            touched = max(expected_experts(m.n_experts, m.experts_per_token, tokens), 1.0)
            e_flops, e_bytes = self._expert_flops_per_token * tokens, self._expert_bytes * touched
            ge, e_rows = self._expert_gemm_count, max(rows * m.experts_per_token / touched, 1.0)
            t += ge * float(
                gemm_s(
                    e_flops / ge, e_bytes / ge, e_rows, self._expert_n, self._gemm_k, self._peak, self._low, self.gpu,
                    self.params, groups=touched / self._plan.ep, block_scaled=self._blk, fp4=self._fp4,
                    quant_values=tokens * self._expert_quant_per_token / ge,
                )
            )
            flops, wbytes = flops + e_flops, wbytes + e_bytes
        return t, flops, wbytes

    def _gemms(self, count: int, flops: float, wbytes: float, tokens: float, n: float, quant_values: float,
               gemm: str = "") -> float:
        """Seconds of `count` equal dense GEMMs sharing `flops` and `wbytes`, ``m = tokens`` rows, width `n`, in
        precision `gemm` (`gemm_dtype`; "": the weights', `_gemm_dtype`; the attention's of gpt-oss, bf16)."""
        kernel = self._gemm_kernels.get((n, gemm))  # `gemm_s` of this shape on floats (``m`` is not needed: it
        if kernel is None:  # only sizes the quantisation, which `quant_values` gives)
            if gemm:
                kernel = GemmKernel(n, self._gemm_k, self.gpu.peak_flops(gemm), gemm in LOW_PRECISION, self.gpu,
                                    self.params, fp4=gemm == "fp4")
            else:
                kernel = GemmKernel(n, self._gemm_k, self._peak, self._low, self.gpu, self.params,
                                    block_scaled=self._blk, fp4=self._fp4)
            self._gemm_kernels[(n, gemm)] = kernel
        return count * kernel.seconds(flops / count, wbytes / count, quant_values / count)

    @property
    def _wb(self) -> float:
        return dtype(self.dtype).effective_bytes

    @property
    def _low(self) -> bool:
        return self._gemm_dtype in LOW_PRECISION

    @property
    def _fp4(self) -> bool:
        return self._gemm_dtype == "fp4"

    @property
    def _blk(self) -> bool:
        return self._gemm_dtype == "fp8" and self.model.weight_block_scales

    def comm_s(self, tokens: float) -> float:
        """Communication of one step over `tokens` tokens (the module docstring's comm and plan terms)."""
        return self._memoized(("comm", tokens), self._comm_s, tokens)

    def _comm_s(self, tokens: float) -> float:
        m, plan = self.model, self._plan
        t = 0.0
        if plan.dp_attention:
            gathered = self._allreduce_s(plan.kv_groups * tokens * self._ar_bytes_per_token)
            if plan.ep > 1:
                t += (m.n_layers - m.moe_layers) * gathered + m.moe_layers * 2 * self._all_to_all_s(tokens)
            else:
                t += m.n_layers * gathered
        elif self.tp > 1:
            t += m.n_layers * ALLREDUCES_PER_LAYER * self._allreduce_s(tokens * self._ar_bytes_per_token)
        if plan.pp > 1:
            t += (plan.pp - 1) * self._p2p_s(tokens * self._ar_bytes_per_token)
        return t

    def _crosses_domains(self, gpus: int) -> bool:
        return self._node is not None and gpus > self._node.domain_gpus

    def _allreduce_s(self, message_bytes: float) -> float:
        """One all-reduce over the ``tp`` GPUs: NCCL inside an NVLink domain; across domains
        hierarchically, the domain's all-reduce then a ring over the domains on the NICs."""
        tp, gpu, p, node = self.tp, self.gpu, self.params, self._node
        if node is None or not self._crosses_domains(tp):
            return float(allreduce_s(message_bytes, tp, gpu, p))
        g = node.domain_gpus
        n = tp // g
        ring = 2 * (n - 1) / n * message_bytes / g / node.nic_bytes_per_s + 2 * (n - 1) * node.nic_latency_s
        return float(allreduce_s(message_bytes, g, gpu, p)) + ring

    def _all_to_all_s(self, tokens: float) -> float:
        """One expert-parallel all-to-all (dispatch or combine) of a GPU's `tokens`: each sends
        ``T · k · d · (ep − 1)/ep`` bytes over its link, plus a zero-byte all-reduce's latency."""
        ep, node = self._plan.ep, self._node
        lat = float(allreduce_s(0.0, ep, self.gpu, self.params))
        if node is not None and self._crosses_domains(ep):
            return lat + node.nic_latency_s + tokens * self._a2a_bytes_per_token / node.nic_bytes_per_s
        return lat + tokens * self._a2a_bytes_per_token / (self.gpu.nvlink_bytes_per_s * self.params.comm_eff)

    def _p2p_s(self, message_bytes: float) -> float:
        """One pipeline hand-off of `message_bytes`: the NIC when the replica spans NVLink domains."""
        node = self._node
        if node is not None and self._crosses_domains(self._plan.gpus):
            return node.nic_latency_s + message_bytes / node.nic_bytes_per_s
        return self.params.collective_latency_s + message_bytes / (self.gpu.nvlink_bytes_per_s * self.params.comm_eff)

    def prefill_attention(self, new_tokens: float, context_tokens: float) -> tuple[float, float]:
        """(flops, bytes) per GPU of one prefill chunk's attention over all layers (MLA: the
        decompressed K/V the prefill kernel reads)."""
        key = ("chunk", new_tokens, context_tokens)
        return self._memoized(key, self._prefill_attention, new_tokens, context_tokens)

    def _prefill_attention(self, new_tokens: float, context_tokens: float) -> tuple[float, float]:
        flops: float = 0  # `sum`'s start (an int) and adds, without a generator
        for layers, w in self._windows:
            flops = flops + layers * causal_pairs(new_tokens, context_tokens, w)
        flops *= self._pf_flops_per_pair
        return flops, self._chunk_bytes(new_tokens, context_tokens)

    def prefill_attention_s(self, chunks: Iterable[tuple[float, float]]) -> tuple[float, float, float]:
        """(seconds, schedule s, memory s) of one step's prefill attention (`_prefill_attention_s`)."""
        key = tuple((float(n), float(c)) for n, c in chunks)
        return self._memoized(("prefill", key), self._prefill_attention_s, key)

    def _prefill_attention_s(self, chunks: Iterable[tuple[float, float]]) -> tuple[float, float, float]:
        """(seconds, schedule s, memory s) of the prefill attention kernels of all layers for one
        step's chunks: per layer group (full or sliding window), one `prefill_kernel_s` call over
        ``heads/tp · Σ prefill_schedule(n, c, w)``; bytes as `prefill_attention` per layer. Priced
        by `simulator.cost.kernels.PrefillKernel`, the same floats as the NumPy forms."""
        chunks = [(float(n), float(c)) for n, c in chunks if n > 0]
        if not chunks:
            return 0.0, 0.0, 0.0
        kernel, h = self._pf_kernel, self._heads
        schedule = kernel.schedule
        total = t_sched = t_mem = 0.0
        if len(chunks) == 1:  # the usual case, without the sums (a sum of one term is that term)
            n, c = chunks[0]
            bytes_ = self._chunk_bytes(n, c) / self.model.n_layers
            for layers, w in self._pf_groups:
                ctas, scores, longest = schedule(n, c, w)
                t, ts, tm = kernel.seconds(h * ctas, h * scores, longest, bytes_, n, h)
                total, t_sched, t_mem = total + layers * t, t_sched + layers * ts, t_mem + layers * tm
            return total, t_sched, t_mem
        bytes_ = sum(self._chunk_bytes(n, c) for n, c in chunks) / self.model.n_layers
        tokens = sum(n for n, _ in chunks)
        for layers, w in self._pf_groups:
            ctas = scores = longest = 0.0
            for n, c in chunks:
                t, sc, lg = schedule(n, c, w)
                ctas, scores, longest = ctas + t, scores + sc, max(longest, lg)
            t, ts, tm = kernel.seconds(h * ctas, h * scores, longest, bytes_, tokens, h)
            total, t_sched, t_mem = total + layers * t, t_sched + layers * ts, t_mem + layers * tm
        return total, t_sched, t_mem

    def _chunk_s(self, n: float, c: float) -> float:
        """``_prefill_attention_s([(n, c)])[0]`` (`n` > 0): with one full-attention layer group, the
        kernel's fused single-chunk form (`PrefillKernel.chunk_s`); the same float."""
        layers = self._pf_plain
        if layers:
            return 0.0 + layers * self._pf_kernel.chunk_s(n, c, self._chunk_bytes(n, c) / self._model.n_layers,
                                                          self._heads)
        return self._prefill_attention_s(((n, c),))[0]

    def _chunks_s(self, chunks: list[tuple[float, float]]) -> float:
        """``_prefill_attention_s(chunks)[0]`` of a step of several chunks: with one full-attention layer
        group, the kernel's fused form (`PrefillKernel.chunks_s`) over the same sums of bytes and new
        tokens; the same float."""
        layers = self._pf_plain
        if layers:
            # loops, not comprehensions (see `prefill_run_s`); the sums by `sum`, as `_prefill_attention_s` sums
            pos: list[tuple[float, float]] = []
            for n, c in chunks:
                if n > 0:
                    pos.append((float(n), float(c)))
            if len(pos) > 1:
                n_l = self._model.n_layers
                sizes: list[float] = []
                news: list[float] = []
                for n, c in pos:
                    sizes.append(self._chunk_bytes(n, c))
                    news.append(n)
                return 0.0 + layers * self._pf_kernel.chunks_s(pos, sum(sizes) / n_l, sum(news), self._heads)
        return self._prefill_attention_s(chunks)[0]

    def _chunk_bytes(self, new_tokens: float, context_tokens: float) -> float:
        """`prefill_attention`'s bytes (no memo): the KV cache's `sequence_bytes` of ``c + n`` tokens over
        its shards (inlined for a plain layout), plus Q and O of the new tokens, in every layer."""
        total = context_tokens + new_tokens
        n_l = self._model.n_layers
        if self._mla:
            # MLA prefill runs decompressed: K and V of every query head, as many bytes as Q and O
            kv = n_l * total * self._qo_bytes
        elif self._kv_simple is not None:
            entry, own, shards = self._kv_simple
            kv = float(n_l * int(total)) * entry * own / n_l / shards
        else:
            kv = sequence_bytes(self.model, self.layout, int(total)) / _kv_shards(self.model, self.layout,
                                                                                  self._attn_tp)
        return kv + n_l * new_tokens * self._qo_bytes

    def _layer_bytes_many(self, new_tokens: float, contexts: Sequence[float]) -> list[float]:
        """``[_chunk_bytes(new_tokens, c) / n_layers for c in contexts]`` (integer-valued floats), a run's bytes a
        layer: for a plain layout `_chunk_bytes`' operations written out, without a call a chunk, the integer
        operands as floats (exact: 3.11 specialises float-float arithmetic), so the same floats; its
        ``float(n_layers · int(c + n))`` is the float product here (exact: integers below 2**53)."""
        n_l = self._model.n_layers
        per_layer: list[float] = []  # (loops, not comprehensions: see `prefill_run_s`)
        if self._mla or self._kv_simple is None:
            for c in contexts:
                per_layer.append(self._chunk_bytes(new_tokens, c) / n_l)
            return per_layer
        entry, own, shards = self._kv_simple
        qo = n_l * new_tokens * self._qo_bytes
        own_f, layers, shards_f = float(own), float(n_l), float(shards)
        for c in contexts:
            per_layer.append((layers * (c + new_tokens) * entry * own_f / layers / shards_f + qo) / layers)
        return per_layer

    def attention_layer_s(
        self,
        prefill_chunks: Iterable[tuple[float, float]] = (),
        decode_batch: int = 0,
        decode_context_tokens: float = 0.0,
        query_tokens: int = 1,
    ) -> float:
        """Seconds of ONE layer's attention kernels (for kernel-level calibration rows);
        `query_tokens` > 1 is a decode that scores several query tokens per sequence (MTP)."""
        n_l = self.model.n_layers
        chunks = list(prefill_chunks)
        t = self.prefill_attention_s(chunks)[0] / n_l if chunks else 0.0
        if decode_batch:
            kv = (decode_batch * self._kv_alpha + self._kv_beta * decode_context_tokens) / n_l
            fixed, s_b, _, _ = self.decode_terms(decode_batch, query_tokens)
            t += (fixed + s_b * kv * n_l) / n_l
        return t

    # ---- hot path -------------------------------------------------------------------------
    def decode_coefficients(self, batch: int) -> tuple[float, float]:
        """``(a_s, b_s_per_token)`` with ``decode_step_s(batch, C) = a_s + b_s_per_token · C``.

        k steps of a stable batch starting at total context ``C`` (each step adds ``batch``
        tokens) take ``k · (a + b·C) + b · batch · k(k−1)/2``.
        """
        return self._memoized(("coefficients", batch), self._decode_coefficients, batch)

    def _decode_coefficients(self, batch: int) -> tuple[float, float]:
        fixed, s_b, _, _ = self.decode_terms(batch)
        lin = self.linear_s(batch)[0]
        a = lin + self.comm_s(batch) + self.params.step_overhead_s + fixed + batch * self._kv_alpha * s_b
        return a, self._kv_beta * s_b

    def decode_step_s(self, batch: int, total_context_tokens: float) -> float:
        """Seconds of one decode step of `batch` sequences holding `total_context_tokens`."""
        if batch <= 0:
            return 0.0
        a, b = self.decode_coefficients(batch)
        return a + b * total_context_tokens

    def prefill_s(self, new_tokens: float, context_tokens: float = 0.0) -> float:
        """Seconds of a step that prefills one chunk of `new_tokens` after `context_tokens`."""
        return self.step_s(((new_tokens, context_tokens),), 0, 0.0)

    def step_s(
        self, prefill_chunks: Iterable[tuple[float, float]], decode_batch: int, decode_context_tokens: float
    ) -> float:
        """Seconds of a mixed step: prefill chunks ``(new, context)`` plus a decode batch.

        ``cost(...).total_s`` without the breakdown, the same sums in the same order (so the same
        float): the engine's hot path. A chunked prefill prices a new ``(new, context)`` pair almost
        every step, so the prefill attention is priced on floats and remembered: one chunk's by new
        tokens, then context (`_pf_row`, shared with `prefill_run_s`), several chunks' by their list.
        """
        chunks = prefill_chunks if type(prefill_chunks) is list else list(prefill_chunks)
        at_t = 0.0
        if len(chunks) == 1:  # the usual case: one chunk, its attention remembered by (new, context)
            key = chunks[0]
            n, c = key
            tokens = (0.0 + n if n > 0 else 0.0) + decode_batch
            rows = decode_batch + 1 if n > 0 else decode_batch
            if n > 0:
                row = self._pf_rows.get(n)
                hit = None if row is None else row.get(c)
                if hit is None:
                    hit = self._pf_row(n, 1)[c] = self._chunk_s(float(n), float(c))
                at_t = hit
            chunks = []
        else:
            new, rows = 0.0, decode_batch
            for n, _ in chunks:
                if n > 0:
                    new, rows = new + n, rows + 1
            tokens = new + decode_batch
        lc = self._lin_comm.get(tokens)
        if lc is None:
            lc = self._lin_comm[tokens] = (self._memoized(("linear", tokens), self._layers_s, tokens)[0],
                                           self.comm_s(tokens))
        head = self._head_t.get(rows)
        if head is None:
            head = self._head_t[rows] = self._memoized(("head", rows), self._head_s, rows)[0]
        if chunks:
            try:
                at_t = self._memoized(("steps", tuple(chunks)), self._chunks_s, chunks)
            except TypeError:  # chunks as lists (unhashable)
                at_t = self._memoized(("steps", tuple((n, c) for n, c in chunks)), self._chunks_s, chunks)
        if decode_batch:
            kv_dec = decode_batch * self._kv_alpha + self._kv_beta * decode_context_tokens
            terms = self._dec_terms.get(decode_batch)
            if terms is None:
                terms = self._dec_terms[decode_batch] = self.decode_terms(decode_batch)[:2]
            at_t += terms[0] + kv_dec * terms[1]
        return (lc[0] + head) + at_t + lc[1] + self._overhead_s

    def prefill_run_s(self, new_tokens: int, context_tokens: int, steps: int, decode_batch: int,
                      decode_context_tokens: int, growth_tokens: int) -> list[float]:
        """``step_s([(new, c + i·new)], decode_batch, C + i·growth)`` for ``i < steps``: the steps of a
        chunked prefill run (`simulator.engine.chunked`), one chunk of `new_tokens` > 0 a step while
        the decoders add `growth_tokens` of context a step. The same operations as `step_s` (so the same
        floats), with what the steps share (the linear and communication times, the decode terms)
        looked up once.

        A run cut short (by a sample, say) is priced again from where it stopped, with the same chunks and
        decoders: when the steps asked for are steps ``j..j + steps − 1`` of the last call's, they are its
        prices (the same floats: the same operations on the same operands, the contexts ``c + i·new`` and
        ``C + i·growth`` being exact integers), handed out without pricing them again (a fifth of vidur's
        steps). The caller may not change the list it gets."""
        last = self._last_run
        if last is not None:
            (new0, batch0, growth0, context0, decode0), priced = last
            if new0 == new_tokens and batch0 == decode_batch and growth0 == growth_tokens:
                j, off = divmod(context_tokens - context0, new_tokens)
                if not off and j >= 0 and j + steps <= len(priced) and \
                        decode0 + j * growth_tokens == decode_context_tokens:
                    return priced[j:j + steps]
        prices = self._prefill_run_s(new_tokens, context_tokens, steps, decode_batch, decode_context_tokens,
                                     growth_tokens)
        self._last_run = (new_tokens, decode_batch, growth_tokens, context_tokens, decode_context_tokens), prices
        return prices

    def _prefill_run_s(self, new_tokens: int, context_tokens: int, steps: int, decode_batch: int,
                       decode_context_tokens: int, growth_tokens: int) -> list[float]:
        """`prefill_run_s`, priced."""
        tokens = (0.0 + new_tokens) + decode_batch
        rows = decode_batch + 1
        lc = self._lin_comm.get(tokens)
        if lc is None:
            lc = self._lin_comm[tokens] = (self._memoized(("linear", tokens), self._layers_s, tokens)[0],
                                           self.comm_s(tokens))
        head = self._head_t.get(rows)
        if head is None:
            head = self._head_t[rows] = self._memoized(("head", rows), self._head_s, rows)[0]
        lin, comm, overhead = lc[0] + head, lc[1], self._overhead_s
        # the chunks' contexts ``c + i·new`` (integers: a range gives the same ones)
        contexts = range(context_tokens, context_tokens + steps * new_tokens, new_tokens)
        row = self._pf_rows.get(new_tokens)
        found: list[float | None] = [None] * steps if row is None else list(map(row.get, contexts))
        if None in found:
            self._price_chunks(new_tokens, contexts, found)
        ats = cast("list[float]", found)  # no hole left
        # loops, not comprehensions: a comprehension's names would be cells, made at every call (~1.5 k instructions)
        prices = []
        if not decode_batch:
            for at_t in ats:
                prices.append(lin + at_t + comm + overhead)
            return prices
        terms = self._dec_terms.get(decode_batch)
        if terms is None:
            terms = self._dec_terms[decode_batch] = self.decode_terms(decode_batch)[:2]
        fixed, per_byte = terms
        alpha_kv, beta = decode_batch * self._kv_alpha, self._kv_beta
        # `step_s`'s ``at_t += fixed + kv_dec · per_byte`` and its sum, in its order; the decoders' context
        # ``C + i·growth`` as a float (the step added each time: exact on integers), as `step_s`'s product takes it
        kv, growth = float(decode_context_tokens), float(growth_tokens)
        for at_t in ats:
            prices.append(lin + (at_t + (fixed + (alpha_kv + beta * kv) * per_byte)) + comm + overhead)
            kv += growth
        return prices

    def _pf_row(self, new_tokens: float, count: int) -> dict[float, float]:
        """The memo row of chunks of `new_tokens`, about to take `count` more entries: every row is
        forgotten at once when they would hold more than `CHUNK_ENTRIES`."""
        self._pf_entries += count
        if self._pf_entries > CHUNK_ENTRIES:
            self._pf_rows.clear()
            self._pf_entries = count
        row = self._pf_rows.get(new_tokens)
        if row is None:
            row = self._pf_rows[new_tokens] = {}
        return row

    def _price_chunks(self, new_tokens: int, contexts: range, ats: list[float | None]) -> None:
        """Fill the holes (None) of `ats` with the attention seconds of the chunks ``(new_tokens,
        contexts[i])`` (`_chunk_s`'s floats), and remember them: one kernel call for them all when it can.
        A run is usually all holes or none (a run priced again starts where an earlier one went on)."""
        whole = ats.count(None) == len(ats)
        miss = range(len(ats)) if whole else [i for i, at_t in enumerate(ats) if at_t is None]
        row = self._pf_row(new_tokens, len(miss))
        n = float(new_tokens)
        ints = contexts if whole else list(map(contexts.__getitem__, miss))  # (no comprehension: `prefill_run_s`)
        cs = list(map(float, ints))
        layers = self._pf_plain
        if layers:
            # `_chunk_s`'s ``0.0 + layers · x`` (layers as a float, exact: 3.11 specialises float-float products)
            priced = self._pf_kernel.chunk_s_many(n, cs, self._layer_bytes_many(n, cs), self._heads,
                                                  float(layers))
        else:
            priced = []
            for c in cs:
                priced.append(self._chunk_s(n, c))
        if whole:
            ats[:] = priced
            row.update(zip(contexts, priced, strict=True))
            return
        for i, price in zip(miss, priced, strict=True):
            ats[i] = row[contexts[i]] = price

    def _prefill_work(self, chunks: list[tuple[float, float]]) -> tuple[float, float, float, int]:
        """The chunks' attention ``(FLOPs, bytes)`` (`prefill_attention`'s, not remembered: a step's chunks are
        rarely priced twice), new tokens, summed in order, and the chunks that have new tokens (each one's last
        takes logits)."""
        pf_flops = pf_bytes = new = 0.0
        pieces = 0
        for n, c in chunks:
            if n <= 0:
                continue
            f, b = self._prefill_attention(n, c)
            pf_flops, pf_bytes, new = pf_flops + f, pf_bytes + b, new + n
            pieces += 1
        return pf_flops, pf_bytes, new, pieces

    def utilisation(self, prefill_chunks: Iterable[tuple[float, float]], decode_batch: int,
                    decode_context_tokens: float) -> tuple[float, float]:
        """``(mfu, hbm)`` of a step: ``cost(...).mfu`` (0 for a step of no time) and ``cost(...).bytes /
        (total_s · HBM bytes/s)`` (NaN for a step of no time), what a time-series sample records. The
        same FLOPs and bytes summed in the same order as `cost`, over the time `step_s` gives
        (``cost().total_s``'s float), without timing each kernel again."""
        chunks = list(prefill_chunks)
        pf_flops, pf_bytes, new, pieces = self._prefill_work(chunks)
        _, lin_flops, w_bytes = self._linear_work(new + decode_batch, decode_batch + pieces)
        kv_dec = decode_batch * self._kv_alpha + self._kv_beta * decode_context_tokens if decode_batch else 0.0
        total = self.step_s(chunks, decode_batch, decode_context_tokens)
        flops = lin_flops + (pf_flops + kv_dec * self._dec_flops_per_byte)
        mfu = flops / (total * self._peak) if total else 0.0
        return mfu, ((w_bytes + (pf_bytes + kv_dec)) / (total * self._bw) if total > 0 else math.nan)

    def cost(
        self,
        prefill_chunks: Iterable[tuple[float, float]] = (),
        decode_batch: int = 0,
        decode_context_tokens: float = 0.0,
    ) -> StepCost:
        """The full breakdown of a step (see the module docstring for the formulas)."""
        p = self.params
        chunks = list(prefill_chunks)
        pf_flops, pf_bytes, new, pieces = self._prefill_work(chunks)
        tokens = new + decode_batch
        lin_t, lin_bound, lin_flops, w_bytes = self.linear_s(tokens, decode_batch + pieces)
        at_t, tc, tm = self.prefill_attention_s(chunks)
        kv_dec = fixed = 0.0
        if decode_batch:
            kv_dec = decode_batch * self._kv_alpha + self._kv_beta * decode_context_tokens
            fixed, s_b, s_c, s_m = self.decode_terms(decode_batch)
            at_t += fixed + kv_dec * s_b
            tc, tm = tc + kv_dec * s_c, tm + kv_dec * s_m
        at_flops = pf_flops + kv_dec * self._dec_flops_per_byte
        at_bytes = pf_bytes + kv_dec
        at_bound = COMPUTE if tc >= tm else MEMORY
        comm = self.comm_s(tokens)
        total = lin_t + at_t + comm + p.step_overhead_s
        flops = lin_flops + at_flops
        return StepCost(
            total_s=total,
            linear_s=lin_t,
            linear_bound=lin_bound,
            attention_s=at_t,
            attention_bound=at_bound,
            comm_s=comm,
            overhead_s=p.step_overhead_s,
            flops=flops,
            bytes=w_bytes + at_bytes,
            weight_bytes=w_bytes,
            kv_bytes=at_bytes,
            tokens=tokens,
            mfu=flops / (total * self._peak) if total else 0.0,
            attention_fixed_s=fixed,
        )
