"""Model architectures: the facts that decide KV memory and compute.

Specs come from the shipped catalog (``simulator/data/models.toml``), a user catalog with the
same schema, or a Hugging Face ``config.json`` (`from_hf_config`).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from simulator.config import construct
from simulator.errors import ConfigError, must, must_whole
from simulator.tomlfile import read_toml

if TYPE_CHECKING:
    from hardware.catalog import GPUSpec

MODEL_FILE = Path(__file__).parent / "data" / "models.toml"
DTYPE_FILE = Path(__file__).parent / "data" / "kv_dtypes.toml"
ATTENTION_KINDS = ("mha", "mqa", "gqa", "mla")
WEIGHT_PRECISIONS = ("bf16", "fp8", "fp8-block", "fp4", "mxfp4", "w4a16")  # a deployment's weight formats
DEFAULT_MODEL = "Llama-3.1-70B"  # the model every command and a scenario without [model] use
ROUNDING_TOLERANCE = 0.02  # a model card's total may round the shapes' sum down by this much


@dataclass(frozen=True, slots=True, kw_only=True)
class DType:
    """A storage format: ``bytes = bytes_per_value + scale_bytes / group_size`` per value; `gemm`, the
    tensor-core precision weights in it compute in where the GPU has one (empty: weight-only, `gemm_dtype`);
    `kv`, whether a KV cache may store in it (false for a weight format only)."""

    name: str
    bytes_per_value: float
    group_size: int = 0
    scale_bytes: float = 0.0
    gemm: str = ""
    kv: bool = True
    source: str = ""

    @property
    def effective_bytes(self) -> float:
        """Bytes per stored value including the per-group scale overhead."""
        return self.bytes_per_value + (self.scale_bytes / self.group_size if self.group_size else 0.0)


@cache
def _dtype_file() -> dict[str, Any]:
    """``simulator/data/kv_dtypes.toml``, read once: its ``[dtype.*]`` formats and its ``[weights]`` rule."""
    return read_toml(DTYPE_FILE)


@cache
def dtypes() -> dict[str, DType]:
    """The storage formats, by name (``bf16``, ``fp8``, ``int4``, ...)."""
    return {k: DType(name=k, **v) for k, v in _dtype_file()["dtype"].items()}


def dtype(name: str) -> DType:
    table = dtypes()
    if name not in table:
        raise ConfigError(f"unknown dtype {name!r}; valid: {', '.join(table)}")
    return table[name]


def kv_dtypes() -> list[str]:
    """The formats a KV cache may store in (all but the weight-only ones: ``mxfp4``, ``w4a16``)."""
    return [k for k, v in dtypes().items() if v.kv]


def weight_dtypes() -> list[str]:
    """The formats a model's weights may be stored in: those with a tensor-core precision (`DType.gemm`:
    bf16, fp16, fp8, fp4, mxfp4) and the weight-only ones (``kv = false``: w4a16); not fp32, int8 or int4."""
    return [k for k, v in dtypes().items() if v.gemm or not v.kv]


def gemm_dtype(weight_dtype: str, gpu: GPUSpec) -> str:
    """The precision `gpu` runs the GEMMs of weights in `weight_dtype` at: the format's tensor-core
    precision (``gemm`` in ``simulator/data/kv_dtypes.toml``: fp4 for fp4 and mxfp4, fp8, bf16) where the
    GPU has tensor cores for it, else ``[weights] weight_only_gemm`` (bf16): the weights stay 4-bit in HBM
    and the kernel dequantises them, as vLLM's Marlin kernels serve fp4 on Hopper and every w4a16
    checkpoint. gpt-oss (mxfp4) on an H100: bf16; on a B200: fp4."""
    own = dtype(weight_dtype).gemm
    return own if own and gpu.has_tensor_cores(own) else str(_dtype_file()["weights"]["weight_only_gemm"])


def outer_weight_dtype(weight_dtype: str) -> str:
    """The format of the input embeddings and the LM head of weights in `weight_dtype`: that format,
    or for a quantised one (fewer bytes a value than ``[weights] embeddings_dtype`` of
    ``simulator/data/kv_dtypes.toml``, bf16) bf16, as quantised checkpoints keep them (DeepSeek-V3's
    FP8 release, vLLM's fp8: the file's source). Llama-3.1-8B in fp8: 6.98 B parameters at 1 B and
    1.05 B (embeddings and LM head, 128,256 × 4,096 each) at 2 B: 9.08 GB, not 8.03."""
    outer = str(_dtype_file()["weights"]["embeddings_dtype"])
    return outer if dtype(weight_dtype).effective_bytes < dtype(outer).effective_bytes else weight_dtype


def attention_weight_dtype(model: ModelSpec, weight_dtype: str | None = None) -> str:
    """The format of `model`'s attention projections with its weights in `weight_dtype` (None: its own):
    the model's `attention_weight_dtype` where it keeps them apart and is served as released (gpt-oss:
    bf16 beside mxfp4 experts), else the weights' format."""
    name = weight_dtype or model.weight_dtype
    return model.attention_weight_dtype if model.attention_weight_dtype and name == model.weight_dtype else name


def rest_weight_dtype(model: ModelSpec, weight_dtype: str | None = None) -> str:
    """The format of what a layer holds beside its attention and routed experts (`other_params_per_layer`):
    the weights', except in a model whose attention is kept apart (`attention_weight_dtype`) and whose every
    layer is MoE with a rest smaller than one expert (no dense MLP or shared expert fits in it: routers,
    norms, biases, which a quantised release leaves unconverted: gpt-oss's 1.5M a layer against its experts'
    24.9M), where it is the attention's."""
    name = weight_dtype or model.weight_dtype
    attn = attention_weight_dtype(model, name)
    small = model.moe_layers == model.n_layers and model.other_params_per_layer < model.expert_params
    return attn if attn != name and small else name


def weight_bytes(model: ModelSpec, weight_dtype: str | None = None) -> float:
    """Bytes of all of `model`'s weights in `weight_dtype` (None: its own)::

        (total_params − embeddings − lm_head) · bytes(weight_dtype) + (embeddings + lm_head) · bytes(outer)
        + L · attention · (bytes(attn) − bytes(weight_dtype)) + L · rest · (bytes(rest) − bytes(weight_dtype))

    with ``outer = outer_weight_dtype(weight_dtype)`` (bf16 for a quantised format), ``attn`` and ``rest``
    the formats of the attention projections and of the rest of the layers (`attention_weight_dtype`,
    `rest_weight_dtype`: the weights' own, the last two terms 0, unless the model keeps them apart). A
    model of unknown vocabulary (``vocab_size = 0``) counts its embeddings with the layers."""
    name = weight_dtype or model.weight_dtype
    wb = dtype(name).effective_bytes
    ab, rb = (dtype(f(model, name)).effective_bytes for f in (attention_weight_dtype, rest_weight_dtype))
    outer = model.embedding_params + model.lm_head_params
    return ((model.total_params - outer) * wb + outer * dtype(outer_weight_dtype(name)).effective_bytes
            + model.n_layers * (model.attention_params * (ab - wb) + model.other_params_per_layer * (rb - wb)))


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelSpec:
    """A transformer's architecture as far as serving cost goes.

    For MLA models the cache holds ``kv_lora_rank + qk_rope_head_dim`` values per token per
    layer; ``head_dim`` is the query/key head dim and ``v_head_dim`` the value head dim.
    """

    key: str
    n_layers: int
    d_model: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    attention: str
    total_params: float
    active_params: float
    weight_dtype: str = "bf16"
    max_context_tokens: int = 131072
    v_head_dim: int = 0  # 0: same as head_dim
    kv_lora_rank: int = 0
    qk_rope_head_dim: int = 0
    q_lora_rank: int = 0
    sliding_window: int = 0  # tokens; 0: no sliding-window layers
    sliding_window_pattern: int = 0  # every n-th layer is global; 0: all local when sliding_window > 0
    moe_layers: int = 0
    n_experts: int = 0
    experts_per_token: int = 0
    expert_params: float = 0.0
    weight_block_scales: bool = False  # fp8 weights with a scale per 128x128 block (DeepSeek-style)
    attention_weight_dtype: str = ""  # the attention projections' format where a checkpoint keeps them apart
    vocab_size: int = 0  # 0: unknown (embeddings are then counted with the layers)
    tie_word_embeddings: bool = False
    source: str = ""

    def __post_init__(self) -> None:
        w = f"ModelSpec({self.key})"
        for f in ("n_layers", "d_model", "n_heads", "n_kv_heads", "head_dim", "max_context_tokens"):
            must(getattr(self, f) >= 1, w, f, ">= 1", getattr(self, f))
        must(self.attention in ATTENTION_KINDS, w, "attention", f"one of {', '.join(ATTENTION_KINDS)}", self.attention)
        must(self.n_heads % self.n_kv_heads == 0, w, "n_kv_heads", f"a divisor of n_heads={self.n_heads}",
             self.n_kv_heads)
        must(self.total_params > 0, w, "total_params", "> 0", self.total_params)
        must(0 < self.active_params <= self.total_params, w, "active_params",
             f"in (0, total_params={self.total_params:g}]", self.active_params)
        must(self.weight_dtype in weight_dtypes(), w, "weight_dtype", f"one of {', '.join(weight_dtypes())}",
             self.weight_dtype)
        must(self.attention_weight_dtype in ("", *weight_dtypes()), w, "attention_weight_dtype",
             f"one of {', '.join(weight_dtypes())}, or empty (as weight_dtype)", self.attention_weight_dtype)
        must(isinstance(self.weight_block_scales, bool), w, "weight_block_scales", "true or false",
             self.weight_block_scales)
        for f in ("v_head_dim", "kv_lora_rank", "qk_rope_head_dim", "q_lora_rank"):  # (0: none, or as head_dim)
            must(getattr(self, f) >= 0, w, f, ">= 0", getattr(self, f))
        if self.attention == "mla":
            must(self.kv_lora_rank >= 1, w, "kv_lora_rank", ">= 1 for attention='mla'", self.kv_lora_rank)
        if self.attention == "mqa":
            must(self.n_kv_heads == 1, w, "n_kv_heads", "1 for attention='mqa'", self.n_kv_heads)
        if self.attention == "mha":
            must(self.n_kv_heads == self.n_heads, w, "n_kv_heads", "n_heads for attention='mha'", self.n_kv_heads)
        must(self.sliding_window >= 0, w, "sliding_window", ">= 0", self.sliding_window)
        if self.moe_layers:
            must(0 < self.experts_per_token <= self.n_experts, w, "experts_per_token",
                 f"in 1..n_experts={self.n_experts}", self.experts_per_token)
            must(self.moe_layers <= self.n_layers, w, "moe_layers", f"<= n_layers={self.n_layers}",
                 self.moe_layers)
            routed = self.moe_layers * self.experts_per_token * self.expert_params
            must(self.active_params > routed, w, "active_params",
                 f"> the routed experts' moe_layers x experts_per_token x expert_params = {routed:g}",
                 self.active_params)
        must_whole(self, w, "vocab_size", 0, "an integer >= 0")
        must(isinstance(self.tie_word_embeddings, bool), w, "tie_word_embeddings", "true or false",
             self.tie_word_embeddings)
        parts = self.total_params - self._rest_params
        must(parts <= self.total_params * (1 + ROUNDING_TOLERANCE), w, "total_params",
             f">= embeddings + attention + routed experts = {parts:g} (from the shapes, less "
             f"{ROUNDING_TOLERANCE:.0%} for a rounded model-card figure)", self.total_params)

    @property
    def embedding_params(self) -> float:
        """Input embeddings: ``vocab_size · d_model``."""
        return float(self.vocab_size * self.d_model)

    @property
    def lm_head_params(self) -> float:
        """The output projection: ``vocab_size · d_model``, 0 when tied to the embeddings."""
        return 0.0 if self.tie_word_embeddings else self.embedding_params

    @property
    def attention_params(self) -> float:
        """One layer's attention projections (`attention_params`)."""
        return attention_params(self.d_model, self.n_heads, self.n_kv_heads, self.head_dim, self.value_head_dim,
                                mla=self.attention == "mla", q_lora_rank=self.q_lora_rank,
                                kv_lora_rank=self.kv_lora_rank, rope_dim=self.qk_rope_head_dim)

    @property
    def kv_projection_params(self) -> float:
        """The K and V projections of one layer, ``d · n_kv · (d_k + d_v)`` (0 for MLA, whose
        latent projection is one matrix every rank holds): a GPU holds its KV heads' share."""
        return 0.0 if self.attention == "mla" else float(
            self.d_model * self.n_kv_heads * (self.head_dim + self.value_head_dim))

    @property
    def latent_projection_params(self) -> float:
        """MLA's down-projections ``d · q_lora + d · (kv_lora + rope)``, which every attention
        rank holds whole (vLLM's replicated ``q_a_proj`` and ``kv_a_proj_with_mqa``); 0 otherwise."""
        if self.attention != "mla":
            return 0.0
        return float(self.d_model * (self.q_lora_rank + self.kv_lora_rank + self.qk_rope_head_dim))

    @property
    def routed_expert_params(self) -> float:
        """One MoE layer's routed experts: ``n_experts · expert_params``."""
        return self.n_experts * self.expert_params

    @property
    def other_params_per_layer(self) -> float:
        """Everything else, spread evenly over the layers: dense MLPs, shared experts, routers, norms.

        ``max(0, total − embeddings − LM head − L · attention − moe_layers · routed experts) / L``
        (0 where a rounded model-card total falls a little short of the shapes: Qwen3-235B-A22B's
        "235B" against 235.04B of shapes).
        """
        return max(0.0, self._rest_params) / self.n_layers

    @property
    def _rest_params(self) -> float:
        return (self.total_params - self.embedding_params - self.lm_head_params - self.n_layers * self.attention_params
                - self.moe_layers * self.routed_expert_params)

    @property
    def value_head_dim(self) -> int:
        return self.v_head_dim or self.head_dim

    @property
    def group_factor(self) -> int:
        """Query heads per KV head (GQA group size; 1 for MHA, n_heads for MQA)."""
        return self.n_heads // self.n_kv_heads

    @property
    def is_moe(self) -> bool:
        return self.moe_layers > 0

    @property
    def n_global_layers(self) -> int:
        """Layers that attend to the whole context (the rest use `sliding_window`)."""
        if not self.sliding_window:
            return self.n_layers
        if not self.sliding_window_pattern:
            return 0
        return self.n_layers // self.sliding_window_pattern

    @property
    def weight_bytes(self) -> float:
        """Bytes of all weights in `weight_dtype`, the embeddings and LM head of a quantised format
        in bf16 (`weight_bytes`, the function)."""
        return weight_bytes(self)


def attention_params(d: int, n_heads: int, n_kv_heads: int, head_dim: int, v_head_dim: int, *, mla: bool = False,
                     q_lora_rank: int = 0, kv_lora_rank: int = 0, rope_dim: int = 0) -> float:
    """Parameters of one layer's attention projections.

    MHA/GQA/MQA: ``d·h·d_k`` (Q) ``+ d·n_kv·(d_k + d_v)`` (K, V) ``+ h·d_v·d`` (O).
    MLA: Q ``d·q_lora + q_lora·h·d_k`` (``d·h·d_k`` without a Q LoRA), the latent ``d·(kv_lora + rope)``,
    its up-projection ``kv_lora · h · (d_k − rope + d_v)``, and O ``h·d_v·d``. DeepSeek-V3:
    11.0M + 37.7M + 4.1M + 16.8M + 117.4M = 187.1M per layer.
    """
    o = n_heads * v_head_dim * d
    if mla:
        q = d * q_lora_rank + q_lora_rank * n_heads * head_dim if q_lora_rank else d * n_heads * head_dim
        up = kv_lora_rank * n_heads * (head_dim - rope_dim + v_head_dim)
        return float(q + d * (kv_lora_rank + rope_dim) + up + o)
    return float(d * n_heads * head_dim + d * n_kv_heads * (head_dim + v_head_dim) + o)


def weight_precision(model: ModelSpec) -> str:
    """The model's weight format as a deployment names it: ``fp8-block`` for fp8 with block scales."""
    return "fp8-block" if model.weight_dtype == "fp8" and model.weight_block_scales else model.weight_dtype


def weight_only_note(model: ModelSpec, gpus: Sequence[GPUSpec]) -> str:
    """Which of `gpus` run the GEMMs of `model`'s weights weight-only (`gemm_dtype`), for a label beside
    `weight_precision`: ``bf16 GEMMs on H100, H200`` (fp4 on Hopper), ``bf16 GEMMs`` (a weight-only format
    such as w4a16: on every GPU), or "" (every GPU computes in the weights' own precision)."""
    own = dtype(model.weight_dtype).gemm
    only = sorted({g.key for g in gpus if gemm_dtype(model.weight_dtype, g) != own})
    if not only:
        return ""
    how = f"{_dtype_file()['weights']['weight_only_gemm']} GEMMs"
    return f"{how} on {', '.join(only)}" if own else how


def with_weight_precision(model: ModelSpec, precision: str | None, where: str = "weight_dtype") -> ModelSpec:
    """`model` served with weights in `precision` (one of `WEIGHT_PRECISIONS`; None: as it ships).

    Weight bytes follow the storage format (`simulator/data/kv_dtypes.toml`: fp8 1 B; fp4 is
    NVFP4, 0.5 B + an fp8 scale per 16 values = 0.5625 B; mxfp4 0.5 B + an E8M0 scale per 32 =
    0.53125 B; w4a16 0.5 B + an fp16 scale and a 4-bit zero point per 128 = 0.51953125 B), but for the
    embeddings and LM head of a quantised format, which stay in bf16 (`outer_weight_dtype`); the layers'
    GEMMs run at the peak of `gemm_dtype` (the format's own where the GPU has tensor cores for it, else
    bf16, weight-only), block-scaled fp8 at its own fitted efficiency, the LM head's at bf16's
    (`simulator.cost.step_model`).
    """
    if precision is None or precision == weight_precision(model):  # as released (gpt-oss's bf16 attention kept)
        return model
    must(precision in WEIGHT_PRECISIONS, where, "weight_dtype", f"one of {', '.join(WEIGHT_PRECISIONS)}", precision)
    # every layer takes another precision asked: a released model's attention kept apart goes with it
    if precision == "fp8-block":
        return dataclasses.replace(model, weight_dtype="fp8", weight_block_scales=True, attention_weight_dtype="")
    return dataclasses.replace(model, weight_dtype=precision, weight_block_scales=False, attention_weight_dtype="")


def _spec_fields() -> set[str]:
    return {f.name for f in dataclasses.fields(ModelSpec)} - {"key"}


def build_spec(key: str, raw: dict[str, Any], where: str) -> ModelSpec:
    """A `ModelSpec` from a table; unknown keys name the valid ones."""
    unknown = set(raw) - _spec_fields()
    if unknown:
        raise ConfigError(f"{where}: unknown key {sorted(unknown)[0]!r}; valid: {', '.join(sorted(_spec_fields()))}")
    return construct(ModelSpec, raw, where, key=key)


def _load(path: Path) -> dict[str, ModelSpec]:
    """A model catalog file's ``[model.NAME]`` tables; anything else in it (a ``[gpu.H100]`` table meant for
    the hardware catalog, a stray key) is refused rather than ignored, as is a file without a model."""
    data = read_toml(path)
    other = sorted(set(data) - {"model"})
    if other:
        raise ConfigError(f"{path}: {other[0]}: a model catalog holds only [model.NAME] tables "
                          "(GPUs and nodes go in the hardware catalog: `kvsim hardware --catalog`)")
    models = data.get("model")
    if not isinstance(models, dict) or not models or not all(isinstance(v, dict) for v in models.values()):
        raise ConfigError(f"{path}: model: expected one or more [model.NAME] tables (got {models!r})")
    return {k: build_spec(k, v, f"{path}: model.{k}") for k, v in models.items()}


@cache
def _shipped() -> dict[str, ModelSpec]:
    return _load(MODEL_FILE)


def load_models(extra: Path | None = None) -> dict[str, ModelSpec]:
    """The shipped model catalog, extended by a user TOML file with ``[model.NAME]`` tables."""
    models = dict(_shipped())
    if extra is not None:
        models.update(_load(Path(extra)))
    return models


def must_model(model: object, where: str) -> None:
    """Refuse a `model` that is no `ModelSpec` (a model's name, say) where API function `where` takes one."""
    must(isinstance(model, ModelSpec), where, "model", f"a ModelSpec, e.g. get_model('{DEFAULT_MODEL}')", model)


def get_model(name: str, extra: Path | None = None, *, path: bool = False) -> ModelSpec:
    """A model by catalog name (case-insensitive), or by path to a HF ``config.json``; with `path` (a
    ``--model-config`` or ``model.config``), only the file: a folder there is refused even when a catalog
    model has its name (a download folder named after the model)."""
    if isinstance(name, os.PathLike):  # a Path to a config.json (helper-153: refused for a few commits)
        name = os.fspath(name)
    must(isinstance(name, str) and bool(name.strip()), "get_model", "name",
         "a catalog model's name or a path to a config.json", name)  # None, '' (helper-152)
    if path:
        _refuse_folder(name)
        return from_hf_config(Path(name))
    if name.endswith(".json") or "/" in name or (Path(name).suffix and Path(name).is_file()):
        return from_hf_config(Path(name))
    models = load_models(extra)
    for k, v in models.items():
        if k.lower() == name.lower():
            return v
    _refuse_folder(name)  # "." or a model's download folder (no catalog name): the file in it is meant
    raise ConfigError(f"unknown model {name!r}; valid: {', '.join(models)} (or a path to a config.json)")


def _refuse_folder(name: str) -> None:
    if Path(name).is_dir():
        hint = " (it holds one: give that path)" if (Path(name) / "config.json").is_file() else ""
        raise ConfigError(f"{name!r} is a folder; give the path to its config.json{hint}")


def from_hf_config(path: Path, total_params: float | None = None) -> ModelSpec:
    """Read a Hugging Face ``config.json`` (Llama, Qwen, Mistral, DeepSeek, Gemma field names).

    Parameter counts are not in ``config.json``; unless given they are estimated from the
    shapes (embeddings, attention and MLP/expert matrices), and the estimate is marked in
    ``source``.
    """
    from simulator.files import read_json
    from simulator.hf_config import spec_from_hf_dict

    cfg = read_json(path)
    return spec_from_hf_dict(cfg, str(path), total_params)
