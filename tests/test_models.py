"""Model catalog and the Hugging Face config.json reader."""

import json

import pytest

from simulator.errors import ConfigError
from simulator.kv import bytes_per_token
from simulator.models import get_model, load_models

REQUIRED = ["Llama-3.1-8B", "Llama-3.1-70B", "Llama-3.3-70B", "Llama-3.1-405B", "Llama-3-70B", "Qwen3-32B",
            "Qwen3-235B-A22B", "DeepSeek-V3", "DeepSeek-V2", "DeepSeek-LLM-67B", "Kimi-K2", "GLM-4.5",
            "Mistral-Large-2", "Gemma-3-27B"]

# Trimmed copies of real config.json files (the fields kvsim reads).
LLAMA31_8B = {"architectures": ["LlamaForCausalLM"], "hidden_size": 4096, "intermediate_size": 14336,
              "max_position_embeddings": 131072, "num_attention_heads": 32, "num_hidden_layers": 32,
              "num_key_value_heads": 8, "torch_dtype": "bfloat16", "vocab_size": 128256,
              "tie_word_embeddings": False}
DEEPSEEK_V3 = {"hidden_size": 7168, "intermediate_size": 18432, "moe_intermediate_size": 2048,
               "num_hidden_layers": 61, "num_attention_heads": 128, "num_key_value_heads": 128,
               "n_routed_experts": 256, "n_shared_experts": 1, "num_experts_per_tok": 8,
               "first_k_dense_replace": 3, "kv_lora_rank": 512, "q_lora_rank": 1536, "qk_rope_head_dim": 64,
               "qk_nope_head_dim": 128, "v_head_dim": 128, "vocab_size": 129280,
               "max_position_embeddings": 163840, "torch_dtype": "bfloat16",
               "quantization_config": {"quant_method": "fp8", "fmt": "e4m3", "weight_block_size": [128, 128]}}
GEMMA3 = {"architectures": ["Gemma3ForConditionalGeneration"], "torch_dtype": "bfloat16",
          "text_config": {"hidden_size": 5376, "intermediate_size": 21504, "num_hidden_layers": 62,
                          "num_attention_heads": 32, "num_key_value_heads": 16, "head_dim": 128,
                          "sliding_window": 1024, "sliding_window_pattern": 6, "vocab_size": 262208,
                          "max_position_embeddings": 131072}}


def write(tmp_path, cfg):
    p = tmp_path / "config.json"
    p.write_text(json.dumps(cfg))
    return p


def test_catalog_has_required_models():
    assert set(REQUIRED) <= set(load_models())
    for m in load_models().values():
        assert m.source, m.key


def test_unknown_model_lists_valid_ones():
    with pytest.raises(ConfigError, match=r"unknown model 'gpt-5'.*Llama-3\.1-8B"):
        get_model("gpt-5")


def test_llama_config_matches_catalog(tmp_path):
    spec = get_model(str(write(tmp_path, LLAMA31_8B)))
    cat = get_model("Llama-3.1-8B")
    assert (spec.n_layers, spec.n_kv_heads, spec.head_dim, spec.attention) == (32, 8, 128, "gqa")
    assert bytes_per_token(spec) == bytes_per_token(cat) == 131_072
    # embeddings 2 · 128256 · 4096 + 32 · (attention 4096·48·128 + 32·128·4096 + MLP 3·4096·14336) = 8.03e9
    assert spec.total_params == pytest.approx(8.03e9, rel=0.001)


# meta-llama/Llama-3.3-70B-Instruct config.json, trimmed
LLAMA33_70B = {"architectures": ["LlamaForCausalLM"], "hidden_size": 8192, "intermediate_size": 28672,
               "max_position_embeddings": 131072, "num_attention_heads": 64, "num_hidden_layers": 80,
               "num_key_value_heads": 8, "torch_dtype": "bfloat16", "vocab_size": 128256,
               "tie_word_embeddings": False}


def test_llama33_70b_catalog_entry_matches_its_config(tmp_path):
    cat, spec = get_model("Llama-3.3-70B"), get_model(str(write(tmp_path, LLAMA33_70B)))
    assert (cat.n_layers, cat.d_model, cat.n_heads, cat.n_kv_heads, cat.head_dim) == (80, 8192, 64, 8, 128)
    assert (cat.max_context_tokens, cat.vocab_size, cat.weight_dtype) == (131_072, 128_256, "bf16")
    # bf16 KV: 2 (K, V) x 80 layers x 8 heads x 128 dims x 2 bytes = 327,680 bytes a token, as Llama-3.1-70B
    assert bytes_per_token(cat) == bytes_per_token(spec) == bytes_per_token(get_model("Llama-3.1-70B")) == 327_680
    # embeddings 2 x 128256 x 8192 = 2.10e9 + 80 x (attention 8192 x 10240 + 8192 x 8192 = 151.0M
    # + MLP 3 x 8192 x 28672 = 704.6M) = 68.45e9 -> 70.55e9
    assert spec.total_params == pytest.approx(70.55e9, rel=0.001)
    assert cat.total_params == pytest.approx(spec.total_params, rel=0.001)


def test_deepseek_config_reads_mla_and_moe(tmp_path):
    spec = get_model(str(write(tmp_path, DEEPSEEK_V3)))
    assert spec.attention == "mla" and spec.weight_dtype == "fp8"
    assert bytes_per_token(spec) == 70_272
    assert (spec.moe_layers, spec.n_experts, spec.experts_per_token) == (58, 256, 8)
    assert spec.total_params == pytest.approx(671e9, rel=0.01)
    assert spec.active_params == pytest.approx(37e9, rel=0.03)
    assert spec.weight_block_scales and get_model("DeepSeek-V3").weight_block_scales
    assert not get_model("Llama-3.1-8B").weight_block_scales


def test_gemma3_config_reads_sliding_pattern(tmp_path):
    spec = get_model(str(write(tmp_path, GEMMA3)))
    assert (spec.sliding_window, spec.sliding_window_pattern, spec.n_global_layers) == (1024, 6, 10)


def test_gemma3_layer_types(tmp_path):
    text = dict(GEMMA3["text_config"])
    del text["sliding_window_pattern"]
    text["layer_types"] = ["full_attention" if (i + 1) % 6 == 0 else "sliding_attention" for i in range(62)]
    spec = get_model(str(write(tmp_path, {"text_config": text})))
    assert spec.n_global_layers == 10


@pytest.mark.parametrize(("extra", "window", "per_token"), [
    # Mistral-7B-v0.1 (config.json: sliding_window 4096, max_position_embeddings 32768): every
    # layer slides, so a 32k sequence holds 4,096 tokens of KV: 32 layers x 2 x 8 x 128 x 2 B each
    ({"sliding_window": 4096, "max_position_embeddings": 32768}, 4096, 131_072),
    # a window equal to the context (Llama/Qwen2 configs) or switched off changes nothing
    ({"sliding_window": 131072}, 0, 131_072),
    ({"sliding_window": 4096, "use_sliding_window": False}, 0, 131_072),
    # Qwen (Transformers' Qwen2/Qwen3): no window unless use_sliding_window is true, and then only
    # from max_window_layers on: that key at the layer count (as shipped) slides nothing
    ({"model_type": "qwen2", "sliding_window": 4096, "max_position_embeddings": 32768}, 0, 131_072),
    ({"model_type": "qwen2", "sliding_window": 4096, "max_position_embeddings": 32768,
      "use_sliding_window": True, "max_window_layers": 32}, 0, 131_072),
    ({"model_type": "qwen2", "sliding_window": 4096, "max_position_embeddings": 32768,
      "use_sliding_window": True, "max_window_layers": 0}, 4096, 131_072),
])
def test_a_window_below_the_context_slides_every_layer(tmp_path, extra, window, per_token):
    from simulator.kv import KVLayout, sequence_bytes

    spec = get_model(str(write(tmp_path, {**LLAMA31_8B, **extra})))
    assert (spec.sliding_window, spec.sliding_window_pattern, spec.n_global_layers) == (window, 0, 0 if window else 32)
    held = sequence_bytes(spec, KVLayout(), 32768)
    assert held == per_token * (window or 32768)


@pytest.mark.parametrize(("cfg", "msg"), [
    ({k: v for k, v in LLAMA31_8B.items() if k != "num_hidden_layers"}, "missing 'num_hidden_layers'"),
    ({**LLAMA31_8B, "model_type": "qwen2", "sliding_window": 4096, "use_sliding_window": True,
      "max_window_layers": 28}, "'max_window_layers' 28 leaves layers 0-27 of 32 full and the rest sliding"),
    ({**LLAMA31_8B, "torch_dtype": "int3"}, "'torch_dtype' must be one of"),
    ({**{k: v for k, v in LLAMA31_8B.items() if k != "torch_dtype"}, "dtype": "int3"}, "'dtype' must be one of"),
    ({**LLAMA31_8B, "quantization_config": {"quant_method": "awq"}},
     r"'quantization_config' of awq must have bits 4 and group_size 128, as kvsim's w4a16 \(got bits None, "),
    ({**LLAMA31_8B, "quantization_config": {"quant_method": "bitsandbytes"}}, "quant_method' 'bitsandbytes'"),
    ({**LLAMA31_8B, "num_key_value_heads": 5}, "'num_key_value_heads' must be a divisor of num_attention_heads=32"),
    # a GPT-2-style alias is named as the config.json spells it
    ({**{k: v for k, v in LLAMA31_8B.items() if k != "num_attention_heads"}, "n_head": 32, "num_key_value_heads": 5},
     "'num_key_value_heads' must be a divisor of n_head=32 \\(got 5\\)"),
    ({**{k: v for k, v in LLAMA31_8B.items() if k != "num_attention_heads"}, "n_head": "x"},
     "'n_head' must be a positive integer \\(got 'x'\\)"),
])
def test_uninterpretable_configs_fail_in_one_line(tmp_path, cfg, msg):
    with pytest.raises(ConfigError, match=msg) as err:
        get_model(str(write(tmp_path, cfg)))
    assert "config.json" in str(err.value) and "\n" not in str(err.value)


def test_moe_active_params_must_exceed_the_routed_experts():
    from dataclasses import asdict

    from simulator.models import ModelSpec

    raw = asdict(get_model("Qwen3-235B-A22B"))
    raw["active_params"] = 10e9  # the 8 routed experts of 94 layers alone hold 14.2e9
    with pytest.raises(ConfigError, match="active_params"):
        ModelSpec(**raw)


@pytest.mark.parametrize(("text", "said"), [
    ('[gpu.H100]\nsm_count = 132\n', "gpu: a model catalog holds only [model.NAME] tables"),  # the hardware file
    ("x = 1\n", "x: a model catalog holds only [model.NAME] tables"),
    ("[model]\n", "model: expected one or more [model.NAME] tables (got {})"),
    ("model = 3\n", "model: expected one or more [model.NAME] tables (got 3)"),
])
def test_an_extra_model_catalog_holds_models_only(tmp_path, text, said):
    """`kvsim models --catalog FILE` showed the shipped table alone for a file of GPUs or a stray key."""
    from simulator.errors import ConfigError

    path = tmp_path / "extra.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as exc:
        load_models(path)
    assert str(exc.value) == f"{path}: {said}" or str(exc.value).startswith(f"{path}: {said}")


def test_a_config_without_its_context_length_is_refused(tmp_path):
    """helper-130: a config.json without ``max_position_embeddings`` was read as a 131,072-token model, silently."""
    from simulator.errors import ConfigError

    cfg = {k: v for k, v in LLAMA31_8B.items() if k != "max_position_embeddings"}
    with pytest.raises(ConfigError, match="missing 'max_position_embeddings'"):
        get_model(str(write(tmp_path, cfg)))
    assert get_model(str(write(tmp_path, {**cfg, "n_positions": 2048}))).max_context_tokens == 2048  # GPT-2's name


def test_a_config_json_is_read_from_a_path_object(tmp_path):
    """helper-153: a `Path` to a config.json (with ``path=True``, as ``--model-config`` passes it) was refused for a
    few commits by the check that a name is a non-empty string."""
    p = write(tmp_path, LLAMA31_8B)
    assert get_model(p, path=True).n_layers == 32 and get_model(p).n_layers == 32


# Every catalog model's config.json figures, transcribed again from the config.json its `source` names
# (num_hidden_layers, hidden_size, num_attention_heads, num_key_value_heads, head_dim, vocab_size,
# max_position_embeddings; MLA: the KV heads are the query heads, head_dim = qk_nope 128 + qk_rope 64),
# and its KV bytes a token in bf16 worked by hand: GQA 2 · L · n_kv · head_dim · 2, MLA (512 + 64) · L · 2
# (every layer, before any sliding window).
CONFIGS = {
    "Llama-3.1-8B": ((32, 4096, 32, 8, 128, 128256, 131072), 2 * 32 * 8 * 128 * 2),          # 131,072
    "Llama-3.1-70B": ((80, 8192, 64, 8, 128, 128256, 131072), 2 * 80 * 8 * 128 * 2),         # 327,680
    "Llama-3.3-70B": ((80, 8192, 64, 8, 128, 128256, 131072), 2 * 80 * 8 * 128 * 2),         # 327,680
    "Llama-3.1-405B": ((126, 16384, 128, 8, 128, 128256, 131072), 2 * 126 * 8 * 128 * 2),    # 516,096
    "Llama-3-70B": ((80, 8192, 64, 8, 128, 128256, 8192), 2 * 80 * 8 * 128 * 2),             # 327,680
    "Llama-2-70B": ((80, 8192, 64, 8, 128, 32000, 4096), 2 * 80 * 8 * 128 * 2),              # 327,680
    "Qwen3-32B": ((64, 5120, 64, 8, 128, 151936, 40960), 2 * 64 * 8 * 128 * 2),              # 262,144
    "Qwen3-235B-A22B": ((94, 4096, 64, 4, 128, 151936, 40960), 2 * 94 * 4 * 128 * 2),        # 192,512
    "DeepSeek-V3": ((61, 7168, 128, 128, 192, 129280, 163840), (512 + 64) * 61 * 2),         # 70,272
    "DeepSeek-V2": ((60, 5120, 128, 128, 192, 102400, 163840), (512 + 64) * 60 * 2),         # 69,120
    "DeepSeek-LLM-67B": ((95, 8192, 64, 8, 128, 102400, 4096), 2 * 95 * 8 * 128 * 2),        # 389,120
    "Kimi-K2": ((61, 7168, 64, 64, 192, 163840, 131072), (512 + 64) * 61 * 2),               # 70,272
    "GLM-4.5": ((92, 5120, 96, 8, 128, 151552, 131072), 2 * 92 * 8 * 128 * 2),               # 376,832
    "Mistral-Large-2": ((88, 12288, 96, 8, 128, 32768, 131072), 2 * 88 * 8 * 128 * 2),       # 360,448
    "Gemma-3-27B": ((62, 5376, 32, 16, 128, 262208, 131072), 2 * 62 * 16 * 128 * 2),         # 507,904
    "gpt-oss-120b": ((36, 2880, 64, 8, 64, 201088, 131072), 2 * 36 * 8 * 64 * 2),            # 73,728
    "gpt-oss-20b": ((24, 2880, 64, 8, 64, 201088, 131072), 2 * 24 * 8 * 64 * 2),             # 49,152
}


@pytest.mark.parametrize("key", sorted(CONFIGS))
def test_every_catalog_model_is_its_config_json(key):
    m = get_model(key)
    shape, kv = CONFIGS[key]
    assert (m.n_layers, m.d_model, m.n_heads, m.n_kv_heads, m.head_dim, m.vocab_size, m.max_context_tokens) == shape
    assert bytes_per_token(m) == kv


def test_every_shipped_model_has_its_config_row():
    assert set(CONFIGS) == set(load_models())


def test_the_models_table_says_which_kv_figures_sliding_windows_cap_and_hardware_its_nic_direction():
    """helper-194: `kvsim models` printed every layer's KV a token (Gemma-3-27B 507,904 B) without a word that 52 of
    its 62 layers keep only 1,024 tokens (calc says so); `kvsim hardware`'s NIC column read "GB/s/GPU" beside
    NVLink's and PCIe's "/dir", where all three are one direction (400 Gb/s = 50 GB/s each way)."""
    from click.testing import CliRunner

    from simulator.cli import main

    out = CliRunner().invoke(main, ["models"]).output
    assert ("a sliding-window layer keeps only its window, so a longer sequence holds less: Gemma-3-27B (52 of 62 "
            "layers keep 1,024 tokens); gpt-oss-120b (18 of 36 layers keep 128 tokens); gpt-oss-20b (12 of 24 layers "
            "keep 128 tokens)") in out
    assert "Llama-3.1-8B (" not in out  # no window: no note
    header = CliRunner().invoke(main, ["hardware"]).output.splitlines()
    nodes = next(line for line in header if line.strip().startswith("node"))
    assert "  NIC GB/s/GPU/dir  " in nodes


# google/gemma-3-12b-it's config.json as published: its text_config names neither head_dim, vocab_size,
# max_position_embeddings, sliding_window_pattern nor tie_word_embeddings (Gemma3TextConfig's defaults: 256,
# 262,208, 131,072, 6, true); google/gemma-2-9b's names no tie_word_embeddings (Gemma2Config's: true)
GEMMA3_12B_PUBLISHED = {"architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3",
                        "torch_dtype": "bfloat16",
                        "text_config": {"hidden_size": 3840, "intermediate_size": 15360, "model_type": "gemma3_text",
                                        "num_attention_heads": 16, "num_hidden_layers": 48, "num_key_value_heads": 8,
                                        "rope_scaling": {"factor": 8.0, "rope_type": "linear"},
                                        "sliding_window": 1024},
                        "vision_config": {"hidden_size": 1152, "model_type": "siglip_vision_model"}}
GEMMA2_9B_PUBLISHED = {"architectures": ["Gemma2ForCausalLM"], "model_type": "gemma2", "head_dim": 256,
                       "hidden_size": 3584, "intermediate_size": 14336, "max_position_embeddings": 8192,
                       "num_attention_heads": 16, "num_hidden_layers": 42, "num_key_value_heads": 8,
                       "sliding_window": 4096, "torch_dtype": "float32", "vocab_size": 256000}


def test_keys_a_gemma_config_leaves_out_are_transformers_class_defaults(tmp_path):
    """helper-202: a Gemma config.json read its absent keys as kvsim's own defaults: Gemma-3-12B's sparse
    text_config was refused for vocab_size, and given that and its context, read as head_dim 3840 / 16 = 240 (not
    256) on 48 sliding layers (not 8 global of 48); Gemma-2-9B's embeddings as untied, 10.16B parameters."""
    g3 = get_model(str(write(tmp_path, GEMMA3_12B_PUBLISHED)))
    assert (g3.head_dim, g3.vocab_size, g3.max_context_tokens, g3.sliding_window, g3.n_global_layers) == (
        256, 262208, 131072, 1024, 8)
    assert bytes_per_token(g3) == 2 * 48 * 8 * 256 * 2  # 393,216 B a token, every layer
    # tied: 262,208 x 3,840 once + 48 x (attention 3,840 x 32 x 256 + 16 x 256 x 3,840 + MLP 3 x 3,840 x 15,360)
    assert g3.tie_word_embeddings and g3.total_params == 262208 * 3840 + 48 * (
        3840 * 32 * 256 + 16 * 256 * 3840 + 3 * 3840 * 15360)  # 11.77B (the 12B model card counts SigLIP)
    assert "gemma3_text defaults filled: vocab_size 262208, head_dim 256," in g3.source
    g2 = get_model(str(write(tmp_path, GEMMA2_9B_PUBLISHED)))
    assert g2.tie_word_embeddings and g2.total_params == pytest.approx(9.24e9, rel=0.001)  # model card: 9.24B
    assert get_model(str(write(tmp_path, {**GEMMA2_9B_PUBLISHED, "tie_word_embeddings": False}))).total_params == (
        pytest.approx(10.16e9, rel=0.001))  # a key the file gives is the file's
    # where layer_types names each layer, no pattern is filled, nor said to be (helper-205: "sliding_window_pattern
    # 6" was named in the source of a file whose 48 layer_types decided every layer)
    typed = {**GEMMA3_12B_PUBLISHED, "text_config": {**GEMMA3_12B_PUBLISHED["text_config"],
                                                     "layer_types": ["sliding_attention"] * 48}}
    g3t = get_model(str(write(tmp_path, typed)))
    assert g3t.n_global_layers == 0 and "sliding_window_pattern" not in g3t.source
    assert "sliding_window_pattern 6" in g3.source


@pytest.mark.parametrize(("extra", "said"), [
    # Qwen3-Next's hybrid layers (every 4th full_attention, the rest linear_attention: no KV a token) were read as
    # 64 full layers, 262,144 B a token: use_sliding_window false returned before layer_types was read
    ({"model_type": "qwen3_next", "use_sliding_window": False,
      "layer_types": ["full_attention" if (i + 1) % 4 == 0 else "linear_attention" for i in range(32)]},
     "'layer_types' has a 'linear_attention' layer; kvsim sizes only full_attention and sliding_attention layers"),
    # an unknown name was a sliding layer: 32 x 'x' and a window of 128 held 128 tokens a layer
    ({"layer_types": ["x"] * 32, "sliding_window": 128},
     "'layer_types' has a 'x' layer; kvsim sizes only full_attention and sliding_attention layers"),
    # sliding layers without a window were full ones, said nowhere
    ({"layer_types": ["full_attention" if i % 2 else "sliding_attention" for i in range(32)]},
     "'layer_types' has sliding_attention layers but 'sliding_window' gives them no window (got None)"),
])
def test_layer_types_kvsim_cannot_size_are_refused_by_name(tmp_path, extra, said):
    """helper-202."""
    with pytest.raises(ConfigError) as err:
        get_model(str(write(tmp_path, {**LLAMA31_8B, **extra})))
    assert str(err.value) == f"{tmp_path / 'config.json'}: {said}"


# Qwen/Qwen1.5-MoE-A2.7B's config.json, trimmed: 60 routed experts of 1,408 and a shared expert of 5,632
QWEN15_MOE = {"architectures": ["Qwen2MoeForCausalLM"], "model_type": "qwen2_moe", "hidden_size": 2048,
              "intermediate_size": 5632, "moe_intermediate_size": 1408, "shared_expert_intermediate_size": 5632,
              "num_experts": 60, "num_experts_per_tok": 4, "decoder_sparse_step": 1, "mlp_only_layers": [],
              "num_hidden_layers": 24, "num_attention_heads": 16, "num_key_value_heads": 16,
              "max_position_embeddings": 8192, "vocab_size": 151936, "tie_word_embeddings": False,
              "torch_dtype": "bfloat16", "sliding_window": 32768, "use_sliding_window": False, "max_window_layers": 21}


def test_a_moe_models_shared_expert_and_layer_spacing_are_counted(tmp_path):
    """helper-202: Qwen2-MoE's shared_expert_intermediate_size was ignored (Qwen1.5-MoE-A2.7B 13.48B and 1.86B active,
    its model card 14.3B and 2.7B), and every layer was a MoE one whatever decoder_sparse_step (Qwen-MoE) or
    moe_layer_freq (DeepSeek) said."""
    d, L = 2048, 24
    attn, embed = 4 * d * d, 2 * 151936 * d
    routed, shared = 3 * d * 1408, 3 * d * 5632 + d  # an expert; the shared one and its gate
    m = get_model(str(write(tmp_path, QWEN15_MOE)))
    assert m.moe_layers == L and m.total_params == embed + L * (attn + shared + 60 * routed)  # 14.31B
    assert m.active_params == embed + L * (attn + shared + 4 * routed)  # 2.69B
    assert m.total_params == pytest.approx(14.3e9, rel=0.002) and m.active_params == pytest.approx(2.7e9, rel=0.01)
    # every 2nd layer MoE (layers 1, 3, ...), the others a dense MLP of intermediate_size, less layer 5 listed dense
    m = get_model(str(write(tmp_path, {**QWEN15_MOE, "decoder_sparse_step": 2, "mlp_only_layers": [5, 6]})))
    assert m.moe_layers == 11
    assert m.total_params == embed + L * attn + 11 * (shared + 60 * routed) + 13 * 3 * d * 5632
    # DeepSeek: layers from first_k_dense_replace on with i % moe_layer_freq == 0: 2, 4, ..., 26 of 27
    v2 = get_model(str(write(tmp_path, {**DEEPSEEK_V3, "num_hidden_layers": 27, "first_k_dense_replace": 1,
                                        "moe_layer_freq": 2})))
    assert v2.moe_layers == 13
    with pytest.raises(ConfigError, match="'moe_layer_freq' 2 and 'decoder_sparse_step' 2 both space the MoE"):
        get_model(str(write(tmp_path, {**QWEN15_MOE, "decoder_sparse_step": 2, "moe_layer_freq": 2})))


def test_llama4s_chunked_attention_is_refused_not_sized_as_full(tmp_path):
    """helper-202: meta-llama/Llama-4-Scout's text_config (attention_chunk_size 8192: 3 of 4 layers keep a chunk of KV;
    a shared expert in every MoE layer, named by no key) read as 48 full layers, 196,608 B a token, and 101.7B
    parameters (17B active, 109B total on its model card), said nowhere."""
    scout = {"architectures": ["Llama4ForConditionalGeneration"], "model_type": "llama4", "torch_dtype": "bfloat16",
             "text_config": {**LLAMA31_8B, "model_type": "llama4_text", "attention_chunk_size": 8192,
                             "num_local_experts": 16, "num_experts_per_tok": 1, "interleave_moe_layer_step": 1}}
    with pytest.raises(ConfigError) as err:
        get_model(str(write(tmp_path, scout)))
    assert str(err.value) == (f"{tmp_path / 'config.json'}: 'attention_chunk_size' (8192): chunked local "
                              "attention (Llama 4) is not modelled by kvsim, whose KV and parameter figures would be "
                              "wrong for it")


def test_an_ungated_mlp_counts_two_matrices(tmp_path):
    """helper-202: microsoft/phi-2's MLP is fc1 and fc2 (2 x 2,560 x 10,240), read as a gated one of three: 3.62B
    parameters, its model card 2.7B (2.78B of shapes)."""
    phi2 = {"architectures": ["PhiForCausalLM"], "model_type": "phi", "hidden_size": 2560, "intermediate_size": 10240,
            "max_position_embeddings": 2048, "num_attention_heads": 32, "num_hidden_layers": 32,
            "num_key_value_heads": 32, "tie_word_embeddings": False, "torch_dtype": "float16", "vocab_size": 51200}
    m = get_model(str(write(tmp_path, phi2)))
    assert m.total_params == 2 * 51200 * 2560 + 32 * (4 * 2560 * 2560 + 2 * 2560 * 10240)  # 2.78B
    assert get_model(str(write(tmp_path, {**phi2, "model_type": "llama"}))).total_params == (
        2 * 51200 * 2560 + 32 * (4 * 2560 * 2560 + 3 * 2560 * 10240))  # a gated MLP: 3.62B


def test_newer_transformers_dtype_key_is_read_as_torch_dtype(tmp_path):
    """helper-202: newer Transformers releases write ``dtype`` where older ones wrote ``torch_dtype``; a file of
    ``"dtype": "float16"`` alone was labelled bf16 (bfloat16, the default when the key is absent)."""
    bare = {k: v for k, v in LLAMA31_8B.items() if k != "torch_dtype"}
    assert get_model(str(write(tmp_path, {**bare, "dtype": "float16"}))).weight_dtype == "fp16"
    assert get_model(str(write(tmp_path, bare))).weight_dtype == "bf16"
    assert get_model(str(write(tmp_path, {**bare, "torch_dtype": "float16", "dtype": "bfloat16"}))).weight_dtype == \
        "fp16"  # (both written: torch_dtype, as kvsim read it before)


def test_a_wrappers_newer_dtype_key_is_read(tmp_path):
    """helper-205: a multimodal wrapper (Gemma 3) written by a newer Transformers release names its weights'
    ``dtype`` beside ``text_config``, not ``torch_dtype``; only torch_dtype was carried into the text config, so a
    float16 checkpoint was labelled bf16. The wrapper's dtype wins over its text_config's, as its torch_dtype does."""
    bare = {k: v for k, v in GEMMA3_12B_PUBLISHED.items() if k != "torch_dtype"}
    assert get_model(str(write(tmp_path, {**bare, "dtype": "float16"}))).weight_dtype == "fp16"
    text = {**bare["text_config"], "dtype": "float16"}
    assert get_model(str(write(tmp_path, {**bare, "text_config": text}))).weight_dtype == "fp16"
    assert get_model(str(write(tmp_path, {**bare, "text_config": text, "dtype": "bfloat16"}))).weight_dtype == "bf16"
    assert get_model(str(write(tmp_path, bare))).weight_dtype == "bf16"  # neither: the default
