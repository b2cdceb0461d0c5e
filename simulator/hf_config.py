"""Read a Hugging Face ``config.json`` dict into a `ModelSpec`.

Understands the field names of Llama, Qwen (2/3, MoE), Mistral, DeepSeek (V2/V3, MLA + MoE)
and Gemma (2/3, ``text_config``, sliding-window pattern or ``layer_types``). Anything it
cannot interpret is a one-line `ConfigError` naming the file and the field. A key the file leaves out
takes its ``model_type``'s Transformers class default where ``simulator/data/hf_defaults.toml`` lists one
(Gemma's ``head_dim``, ``vocab_size``, context, ``sliding_window_pattern``, ``tie_word_embeddings``), as
Transformers reads the file (`with_class_defaults`); the spec's ``source`` names the keys so filled.

Parameter counts are not stored in ``config.json``; they are estimated from the shapes:

- embeddings: ``vocab · d_model`` (× 2 unless ``tie_word_embeddings``)
- attention per layer (GQA): ``d_model · (n_heads + 2 · n_kv) · head_dim + n_heads · head_dim · d_model``
- attention per layer (MLA): ``d_model · q_lora + q_lora · n_heads · qk_dim`` (or ``d_model · n_heads · qk_dim``)
  ``+ d_model · (kv_lora + rope) + kv_lora · n_heads · (nope + v) + n_heads · v · d_model``
- dense MLP (gated): ``3 · d_model · intermediate`` (``2 ·`` for the ungated MLPs of Phi-2, StarCoder2, GPT-NeoX:
  `mlp_matrices`); a MoE layer: ``(n_experts + n_shared) · 3 · d_model ·
  moe_intermediate`` with ``experts_per_token + n_shared`` of them active.
"""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path
from typing import Any

from simulator.errors import ConfigError, RuleError, is_whole, shown
from simulator.models import ModelSpec, attention_params, dtype
from simulator.tomlfile import read_toml

DEFAULTS_FILE = Path(__file__).parent / "data" / "hf_defaults.toml"

# a checkpoint's torch_dtype -> the weights as served: vLLM's --dtype auto "will use FP16 precision for FP32 and
# FP16 models, and BF16 precision for BF16 models" (docs.vllm.ai, engine arguments, read 2026-12)
_TORCH_DTYPES = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp16"}


@cache
def _defaults_file() -> dict[str, Any]:
    return read_toml(DEFAULTS_FILE)


def class_defaults() -> dict[str, dict[str, Any]]:
    """Transformers' config-class defaults of the keys a config.json may leave out, by ``model_type``
    (`DEFAULTS_FILE`, ``simulator/data/hf_defaults.toml``; each table's ``source`` names the class)."""
    return dict(_defaults_file()["defaults"])


def mlp_matrices(model_type: str) -> int:
    """Matrices of a dense MLP of `model_type`: 2 (up, down) for those ``[mlp] two_matrices`` of `DEFAULTS_FILE`
    lists (Phi-2, StarCoder2, GPT-NeoX), else 3 (gate, up, down: Llama's gated MLP)."""
    return 2 if model_type in _defaults_file()["mlp"]["two_matrices"] else 3


def with_class_defaults(cfg: dict[str, Any], wrapper_type: str = "") -> tuple[dict[str, Any], str]:
    """`cfg` with each key its ``model_type``'s config class defaults (`class_defaults`) filled where it is
    absent or null, as Transformers reads the file, and a note of those filled ("" if none). A text_config
    without a model_type of its own takes `wrapper_type` + ``_text`` (gemma3 -> gemma3_text)."""
    own = cfg.get("model_type")
    kind = str(own) if own else (f"{wrapper_type}_text" if wrapper_type else "")
    table = class_defaults().get(kind)
    if not table:
        return cfg, ""
    # (a pattern where `layer_types` names each layer would be filled unused, and said as filled: helper-205)
    unused = {"source", "sliding_window_pattern"} if cfg.get("layer_types") is not None else {"source"}
    filled = {k: v for k, v in table.items() if k not in unused and cfg.get(k) is None}
    note = ", ".join(f"{k} {json.dumps(v)}" for k, v in filled.items())
    return {**cfg, **filled, "model_type": kind}, (f"{kind} defaults filled: {note}" if note else "")


def _get(cfg: dict[str, Any], where: str, *names: str, default: Any = None, required: bool = True) -> Any:
    for n in names:
        if cfg.get(n) is not None:
            return cfg[n]
    if required and default is None:
        raise ConfigError(
            f"{where}: cannot interpret config: missing {names[0]!r} "
            "(expected Llama/Qwen/Mistral/DeepSeek/Gemma field names)"
        )
    return default


def _spelled(cfg: dict[str, Any], *names: str) -> str:
    """The name of `names` (a key and its aliases) that `cfg` gives a value to, as `_get` reads it: the first
    not null; else the first (``n_head`` in a GPT-2-style config, else ``num_attention_heads``)."""
    return next((n for n in names if cfg.get(n) is not None), names[0])


def _int(cfg: dict[str, Any], where: str, *names: str, default: int | None = None, minimum: int = 0) -> int:
    v = _get(cfg, where, *names, default=default)
    if not isinstance(v, int) or isinstance(v, bool) or v < minimum:
        rule = "a positive integer" if minimum == 1 else f"an integer >= {minimum}"
        raise ConfigError(f"{where}: {_spelled(cfg, *names)!r} must be {rule} (got {shown(v)})")
    return v


def _bool(cfg: dict[str, Any], where: str, name: str) -> bool | None:
    """A JSON true/false, or None when absent or null: never Python's truth of a value (``"false"``
    is a true string, and would tie the embeddings)."""
    v = cfg.get(name)
    if v is not None and not isinstance(v, bool):
        raise ConfigError(f"{where}: {name!r} must be true or false (got {shown(v)})")
    return v


def _opt_int(cfg: dict[str, Any], where: str, name: str) -> int:
    """An optional count (absent, null or 0: 0)."""
    return _int(cfg, where, name, default=0) if cfg.get(name) else 0


def _list(cfg: dict[str, Any], where: str, name: str) -> list[Any]:
    v = cfg.get(name) or []
    if not isinstance(v, list):
        raise ConfigError(f"{where}: {name!r} must be a list (got {shown(v)})")
    return v


LAYER_TYPES = ("full_attention", "sliding_attention")  # the layer_types kvsim sizes (Transformers' names)


def _sliding(cfg: dict[str, Any], where: str, n_layers: int, context: int) -> tuple[int, int]:
    """(window, pattern): every `pattern`-th layer is global, the others local (pattern 0: all).

    A ``sliding_window`` with neither a pattern nor ``layer_types`` (Mistral-7B-v0.1, Phi-3) is a
    window on every layer when it is below the context (`context`, ``max_position_embeddings``),
    as vLLM and Transformers run it, and nothing when it is not (Llama configs may name the
    context itself). Qwen configs slide only with ``use_sliding_window`` true, and then the layers
    from ``max_window_layers`` on (all of them, or none when it is the layer count)."""
    layer_types = _list(cfg, where, "layer_types")
    window = _opt_int(cfg, where, "sliding_window")
    use_window = _bool(cfg, where, "use_sliding_window")
    # a layer kvsim cannot size (Qwen3-Next's linear_attention holds no KV a token, Llama 4's chunked_attention
    # a chunk): refused by name, whatever else the file says, not read as a sliding layer or a full one
    other = next((t for t in layer_types if t not in LAYER_TYPES), None)
    if other is not None:
        raise ConfigError(f"{where}: 'layer_types' has a {shown(other)} layer; kvsim sizes only "
                          f"{' and '.join(LAYER_TYPES)} layers")
    if use_window is False:
        return 0, 0
    if str(cfg.get("model_type", "")).startswith("qwen") and not layer_types:
        # Qwen2/Qwen2-MoE/Qwen3 (Transformers): no window unless use_sliding_window is true, and then
        # only on the layers from max_window_layers on
        if use_window is not True or not window:
            return 0, 0
        first = _int(cfg, where, "max_window_layers", default=n_layers)
        if first >= n_layers:
            return 0, 0
        if first > 0:
            raise ConfigError(f"{where}: 'max_window_layers' {first} leaves layers 0-{first - 1} of {n_layers} "
                              "full and the rest sliding; kvsim's layer pattern is every n-th layer global")
        return int(window), 0
    if layer_types:
        if len(layer_types) != n_layers:
            raise ConfigError(f"{where}: 'layer_types' must have num_hidden_layers={n_layers} entries "
                              f"(got {len(layer_types)})")
        if not window and "sliding_attention" in layer_types:
            raise ConfigError(f"{where}: 'layer_types' has sliding_attention layers but 'sliding_window' gives "
                              f"them no window (got {shown(cfg.get('sliding_window'))})")
        globals_at = [i for i, t in enumerate(layer_types) if t == "full_attention"]
        if len(globals_at) == n_layers:
            return 0, 0
        period = globals_at[0] + 1 if globals_at else 0
        if (period and any((i + 1) % period != 0 for i in globals_at)) or len(globals_at) != (
            n_layers // period if period else 0
        ):
            raise ConfigError(f"{where}: cannot interpret 'layer_types': full-attention layers are not "
                              "every n-th layer")
        return int(window), period
    if window and "sliding_window_pattern" in cfg:
        return int(window), _int(cfg, where, "sliding_window_pattern")
    if window and str(cfg.get("model_type", "")).startswith("gemma2"):
        return int(window), 2
    if window and window < context:  # every layer slides (Mistral-7B-v0.1, Phi-3)
        return int(window), 0
    return 0, 0


def _moe_layers(cfg: dict[str, Any], where: str, n_layers: int) -> int:
    """Layers of a MoE model that hold the experts: those from ``first_k_dense_replace`` (DeepSeek) on, every
    ``moe_layer_freq``-th (DeepSeek: layer ``i`` with ``i % freq == 0``) or ``decoder_sparse_step``-th (Qwen-MoE:
    ``(i + 1) % step == 0``), less those ``mlp_only_layers`` lists (Qwen-MoE), as Transformers builds them; the
    first and the list together at most the model's layers."""
    first = _opt_int(cfg, where, "first_k_dense_replace")
    if first > n_layers:
        raise ConfigError(f"{where}: 'first_k_dense_replace' must be at most num_hidden_layers={n_layers} "
                          f"(got {first})")
    listed = _list(cfg, where, "mlp_only_layers")
    bad = [i for i in listed if not (is_whole(i) and i < n_layers)]
    if bad or len(set(listed)) != len(listed) or first + len(listed) > n_layers:
        raise ConfigError(f"{where}: 'mlp_only_layers' must list distinct layer indices in [0, {n_layers}), at most "
                          f"num_hidden_layers={n_layers} with first_k_dense_replace={first} (got {shown(listed)})")
    freq = _int(cfg, where, "moe_layer_freq", default=1, minimum=1)
    step = _int(cfg, where, "decoder_sparse_step", default=1, minimum=1)
    if freq > 1 and step > 1:
        raise ConfigError(f"{where}: 'moe_layer_freq' {freq} and 'decoder_sparse_step' {step} both space the MoE "
                          "layers; give one")

    def moe(i: int) -> bool:
        return i >= first and i % freq == 0 and (i + 1) % step == 0

    # layers first..n-1 with i % freq == 0 (multiples of freq) and (i + 1) % step == 0 (one of them is 1)
    counted = ((n_layers - 1) // freq - (first - 1) // freq) if freq > 1 else (n_layers // step - first // step)
    return counted - sum(1 for i in listed if moe(int(i)))


def _torch_dtype(cfg: dict[str, Any], where: str) -> str:
    """The weights' format as served from ``torch_dtype``, or ``dtype``, the name newer Transformers releases
    write (bfloat16 when neither is given), `_TORCH_DTYPES` (helper-202: a file of ``"dtype": "float16"`` alone
    was labelled bf16)."""
    key = "torch_dtype" if cfg.get("torch_dtype") is not None else "dtype"
    raw = cfg.get(key) or "bfloat16"
    if not isinstance(raw, str) or raw not in _TORCH_DTYPES:
        raise ConfigError(f"{where}: {key!r} must be one of {sorted(_TORCH_DTYPES)} (got {shown(raw)})")
    return _TORCH_DTYPES[raw]


def keeps_attention(qcfg: dict[str, Any], where: str) -> bool:
    """Whether a quantised release keeps its attention projections unquantised: its
    ``modules_to_not_convert`` (Hugging Face's list of module patterns left in ``torch_dtype``) names the
    layers' ``self_attn``, as gpt-oss's does (``model.layers.*.self_attn``, with its routers, embeddings
    and LM head: only the MoE experts are MXFP4)."""
    kept = qcfg.get("modules_to_not_convert") or []
    if not isinstance(kept, list) or not all(isinstance(m, str) for m in kept):
        raise ConfigError(f"{where}: 'quantization_config.modules_to_not_convert' must be a list of module names "
                          f"(got {shown(kept)})")
    # every layer's attention (a wildcard layer); one layer's module left out is not read
    return any(m == "self_attn" or m.endswith("*.self_attn") for m in kept)


def quantized_weights(qcfg: dict[str, Any], where: str) -> tuple[str, bool]:
    """``(weight dtype, block scales)`` from a ``quantization_config``:

    - ``fp8`` (DeepSeek, Qwen FP8): fp8, block-scaled when ``weight_block_size`` is set;
    - ``modelopt`` (TensorRT Model Optimizer): ``quant_algo`` FP8 -> fp8, NVFP4 -> fp4;
    - ``compressed-tensors`` (llm-compressor): the weights of its first config group,
      ``num_bits`` 8 / 4 of ``type`` float -> fp8 / fp4 (block-scaled when ``strategy = "block"``),
      ``num_bits`` 4 of ``type`` int in groups of 128 without quantised activations -> w4a16;
    - ``mxfp4`` (gpt-oss): mxfp4;
    - ``awq``, ``gptq`` of ``bits`` 4 in groups of 128 (``group_size``): w4a16.
    Anything else (other bits or group sizes, bitsandbytes) is refused by name.
    """
    method = str(qcfg.get("quant_method"))
    if method == "fp8":
        return "fp8", bool(qcfg.get("weight_block_size"))
    if method == "mxfp4":
        return "mxfp4", False
    if method in ("awq", "gptq"):
        bits, group = qcfg.get("bits", qcfg.get("w_bit")), qcfg.get("group_size", qcfg.get("q_group_size"))
        w4a16 = dtype("w4a16").group_size  # the format kvsim sizes (simulator/data/kv_dtypes.toml)
        if bits == 4 and group == w4a16:
            return "w4a16", False
        raise ConfigError(f"{where}: 'quantization_config' of {method} must have bits 4 and group_size {w4a16}, "
                          f"as kvsim's w4a16 (got bits {shown(bits)}, group_size {shown(group)})")
    if method == "modelopt":
        algo = str(qcfg.get("quant_algo", "")).upper()
        if algo in ("FP8", "NVFP4"):
            return ("fp8" if algo == "FP8" else "fp4"), False
        raise ConfigError(f"{where}: 'quantization_config.quant_algo' must be FP8 or NVFP4 (got {algo!r})")
    if method == "compressed-tensors":
        groups = qcfg.get("config_groups") or {}
        first: Any = next(iter(groups.values()), {}) if isinstance(groups, dict) else {}
        w: Any = (first.get("weights") or {}) if isinstance(first, dict) else {}
        w = w if isinstance(w, dict) else {}
        bits, kind = w.get("num_bits"), w.get("type")
        if kind == "float" and bits in (8, 4):
            return ("fp8" if bits == 8 else "fp4"), bits == 8 and w.get("strategy") == "block"
        # llm-compressor's W4A16 (int4 weights in groups, activations left in 16 bits): kvsim's w4a16, whose
        # 4-bit zero point a symmetric checkpoint does not store (0.5 B more a group of 128: +0.75%)
        acts = first.get("input_activations") if isinstance(first, dict) else None
        if kind == "int" and bits == 4 and w.get("group_size") == dtype("w4a16").group_size and not acts:
            return "w4a16", False
        raise ConfigError(f"{where}: 'quantization_config.config_groups' weights must be float with num_bits 8 or 4, "
                          f"or int of num_bits 4 in groups of {dtype('w4a16').group_size} without quantised "
                          f"activations (got type {kind!r}, num_bits {bits!r})")
    raise ConfigError(f"{where}: cannot interpret 'quantization_config.quant_method' {method[:40]!r}; "
                      "supported: fp8, modelopt (FP8, NVFP4), compressed-tensors (float 8 or 4 bits, int 4 bits), "
                      "mxfp4, awq and gptq (4 bits, groups of 128)")


# config.json keys of shapes kvsim does not size, with what they are: refused rather than read as a plain model
UNMODELLED = {
    # Llama 4: 3 of 4 layers attend within chunks of this many tokens (their KV capped at a chunk), and every MoE
    # layer runs a shared expert beside its routed ones, which no key names
    "attention_chunk_size": "chunked local attention (Llama 4)",
}

# ModelSpec's fields as config.json spells them (a key and the aliases read for it), where a rule of the spec
# names its field in an error: by the name the config.json gave (`_spelled`)
HF_KEYS = {"n_layers": ("num_hidden_layers", "n_layer", "num_layers"), "d_model": ("hidden_size", "d_model", "n_embd"),
           "n_heads": ("num_attention_heads", "n_head"), "n_kv_heads": ("num_key_value_heads",),
           "max_context_tokens": ("max_position_embeddings",), "experts_per_token": ("num_experts_per_tok",)}


def spec_from_hf_dict(cfg: dict[str, Any], where: str, total_params: float | None = None) -> ModelSpec:
    if not isinstance(cfg, dict):
        raise ConfigError(f"{where}: must be a JSON object of a Hugging Face config (got a {type(cfg).__name__})")
    wrapper = ""
    if "text_config" in cfg:  # multimodal wrappers (Gemma 3) keep the language model here
        text = cfg["text_config"]
        if not isinstance(text, dict):
            raise ConfigError(f"{where}: 'text_config' must be an object (got {shown(text)})")
        wrapper = str(cfg.get("model_type") or "")
        # the weights' dtype is the wrapper's, under either name (`_torch_dtype`; helper-205: a wrapper's newer
        # "dtype" was dropped here, and a float16 Gemma 3 read as bf16)
        cfg = {**text, "torch_dtype": cfg.get("torch_dtype", text.get("torch_dtype")),
               "dtype": cfg.get("dtype", text.get("dtype"))}
    cfg, filled = with_class_defaults(cfg, wrapper)  # the keys Transformers' class defaults (Gemma's)
    for key, what in UNMODELLED.items():  # a shape kvsim would size wrong, silently: refused by name
        if cfg.get(key) is not None:
            raise ConfigError(f"{where}: {key!r} ({shown(cfg[key])}): {what} is not modelled by kvsim, whose KV "
                              "and parameter figures would be wrong for it")
    L = _int(cfg, where, *HF_KEYS["n_layers"], minimum=1)
    d = _int(cfg, where, *HF_KEYS["d_model"], minimum=1)
    h = _int(cfg, where, *HF_KEYS["n_heads"], minimum=1)
    kv = _int(cfg, where, "num_key_value_heads", default=h, minimum=1)
    vocab = _int(cfg, where, "vocab_size", minimum=1)
    mla = cfg.get("kv_lora_rank") is not None
    if mla:
        kv_lora = _int(cfg, where, "kv_lora_rank", minimum=1)
        rope = _int(cfg, where, "qk_rope_head_dim")
        nope = _int(cfg, where, "qk_nope_head_dim")
        v = _int(cfg, where, "v_head_dim", minimum=1)
        q_lora = _opt_int(cfg, where, "q_lora_rank")
        head_dim, kv = nope + rope, h
        kind = "mla"
    else:
        kv_lora = rope = v = q_lora = 0
        if cfg.get("head_dim") is None and d % h:  # the heads' width is hidden_size / heads: a whole number
            raise ConfigError(f"{where}: 'hidden_size' must be a multiple of num_attention_heads={h} when 'head_dim' "
                              f"is not given (got {d})")
        head_dim = _int(cfg, where, "head_dim", default=max(1, d // h), minimum=1)
        kind = "mha" if kv == h else "mqa" if kv == 1 else "gqa"
    attn = attention_params(d, h, kv, head_dim, v or head_dim, mla=mla, q_lora_rank=q_lora, kv_lora_rank=kv_lora,
                            rope_dim=rope)
    n_experts = next((_opt_int(cfg, where, k) for k in ("n_routed_experts", "num_experts", "num_local_experts")
                      if cfg.get(k)), 0)
    dense_inter = _int(cfg, where, "intermediate_size", minimum=1)
    moe_layers = experts_per_token = 0
    expert_params = 0
    shared = shared_params = 0
    if n_experts:
        experts_per_token = _int(cfg, where, "num_experts_per_tok", minimum=1)
        if experts_per_token > n_experts:
            raise ConfigError(f"{where}: 'num_experts_per_tok' must be at most the {n_experts} routed experts "
                              f"(got {experts_per_token})")
        moe_inter = _int(cfg, where, "moe_intermediate_size", default=dense_inter, minimum=1)
        shared = _opt_int(cfg, where, "n_shared_experts")
        moe_layers = _moe_layers(cfg, where, L)
        expert_params = 3 * d * moe_inter
        # Qwen2-MoE's shared expert: an MLP of its own width (and a gate of d), beside the routed ones
        shared_inter = _opt_int(cfg, where, "shared_expert_intermediate_size")
        shared_params = 3 * d * shared_inter + (d if shared_inter else 0)
    dense_layers = L - moe_layers
    tied = bool(_bool(cfg, where, "tie_word_embeddings"))
    embed = vocab * d * (1 if tied else 2)
    non_expert = (embed + L * attn + dense_layers * mlp_matrices(str(cfg.get("model_type"))) * d * dense_inter
                  + moe_layers * (shared * expert_params + shared_params))
    estimated_total = non_expert + moe_layers * n_experts * expert_params
    active = non_expert + moe_layers * experts_per_token * expert_params
    qcfg = cfg.get("quantization_config") or {}
    if not isinstance(qcfg, dict):
        raise ConfigError(f"{where}: 'quantization_config' must be a table (got {type(qcfg).__name__})")
    attn_dtype = ""  # the attention projections' format where the release keeps them apart
    if qcfg.get("quant_method"):
        wdtype, block_scales = quantized_weights(qcfg, where)
        if keeps_attention(qcfg, where):
            attn_dtype = _torch_dtype(cfg, where)
    else:
        wdtype, block_scales = _torch_dtype(cfg, where), False
    # the context the model reads: never assumed (a config without it is refused, naming the key)
    context = _int(cfg, where, "max_position_embeddings", "n_positions", "max_sequence_length", "seq_length",
                   minimum=1)
    window, pattern = _sliding(cfg, where, L, context)
    total = float(total_params) if total_params else float(estimated_total)
    key = str(cfg.get("_name_or_path") or where)
    try:
        return ModelSpec(
            key=key,
            n_layers=L, d_model=d, n_heads=h, n_kv_heads=kv, head_dim=head_dim, attention=kind,
            total_params=total, active_params=min(float(active), total), weight_dtype=wdtype,
            max_context_tokens=context,
            v_head_dim=v, kv_lora_rank=kv_lora, qk_rope_head_dim=rope, q_lora_rank=q_lora,
            sliding_window=window, sliding_window_pattern=pattern,
            moe_layers=moe_layers, n_experts=n_experts, experts_per_token=experts_per_token,
            expert_params=float(expert_params), weight_block_scales=block_scales, vocab_size=vocab,
            attention_weight_dtype=attn_dtype if attn_dtype != wdtype else "",
            tie_word_embeddings=tied,
            source=(f"{where} (parameter counts estimated from shapes)" if not total_params else where)
            + (f" ({filled})" if filled else ""),
        )
    except RuleError as exc:  # a rule of the spec: at the config.json keys it came from, not the class's fields
        spelled = {field: _spelled(cfg, *names) for field, names in HF_KEYS.items()}
        rule = re.sub(r"\b(" + "|".join(spelled) + r")\b", lambda m: spelled[m.group(1)], exc.rule)
        raise ConfigError(f"{where}: {RuleError(exc.owner, exc.key, rule, exc.value).quoted(spelled.get(exc.key))}"
                          ) from None
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from None
