"""Weight-only formats: 4-bit weights whose GEMMs run in bf16 (w4a16 everywhere; fp4 and mxfp4 on a GPU
without fp4 tensor cores), MXFP4's own storage, and the configs that name them (gpt-oss, AWQ, GPTQ)."""

import dataclasses
import json

import pytest
from click.testing import CliRunner

from hardware.catalog import load_catalog
from simulator.capacity import kv_budget, max_streams
from simulator.cli import main
from simulator.cost import StepModel, load_params
from simulator.cost.kernels import gemm_s
from simulator.cost.step_model import GEMMS_PER_LAYER
from simulator.engine import EngineConfig
from simulator.errors import ConfigError
from simulator.kv import KVLayout, parse_layout
from simulator.models import dtype, gemm_dtype, get_model, rest_weight_dtype, weight_only_note, with_weight_precision
from simulator.study import weights_column

CAT = load_catalog()
L8, L70 = get_model("Llama-3.1-8B"), get_model("Llama-3.1-70B")
OUTER_70B = 2 * 128_256 * 8_192  # Llama-3.1-70B's embeddings and LM head: kept in bf16 by a 4-bit checkpoint

# gpt-oss-120b's config.json as released (huggingface.co/openai/gpt-oss-120b), the keys kvsim reads
GPT_OSS_120B = {
    "architectures": ["GptOssForCausalLM"], "model_type": "gpt_oss", "hidden_size": 2880, "intermediate_size": 2880,
    "num_hidden_layers": 36, "num_attention_heads": 64, "num_key_value_heads": 8, "head_dim": 64,
    "num_local_experts": 128, "num_experts_per_tok": 4, "experts_per_token": 4, "vocab_size": 201088,
    "tie_word_embeddings": False, "max_position_embeddings": 131072, "sliding_window": 128,
    "layer_types": ["sliding_attention", "full_attention"] * 18, "torch_dtype": "bfloat16",
    "quantization_config": {"quant_method": "mxfp4", "modules_to_not_convert": [
        "model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"]},
}


def test_storage_bytes_of_the_4_bit_weight_formats():
    # MXFP4: 4 bits and an 8-bit E8M0 scale per 32 values = 4.25 bits (the gpt-oss model card's figure);
    # w4a16 (AWQ/GPTQ): 4 bits, an fp16 scale and a 4-bit zero point per 128 = 4.15625 bits
    assert dtype("mxfp4").effective_bytes * 8 == 4.25
    assert dtype("w4a16").effective_bytes * 8 == 4.15625
    # Llama-3.1-70B: 68,448,653,696 layer parameters in the format, 2,101,346,304 (embeddings, LM head) at 2 B
    layers = L70.total_params - OUTER_70B
    assert layers == 68_448_653_696
    assert with_weight_precision(L70, "mxfp4").weight_bytes == pytest.approx(layers * 0.53125 + OUTER_70B * 2, abs=1)
    assert with_weight_precision(L70, "mxfp4").weight_bytes == pytest.approx(40_566_039_884, abs=1)
    assert with_weight_precision(L70, "w4a16").weight_bytes == pytest.approx(39_763_907_223.5, abs=1)
    # NVFP4 (fp4) stores a scale per 16: 42,705,060,312 B, 2.1 GB more than MXFP4
    assert with_weight_precision(L70, "fp4").weight_bytes == pytest.approx(42_705_060_312, abs=1)


@pytest.mark.parametrize(("gpu", "gemms"), [
    ("H100", {"bf16": "bf16", "fp16": "bf16", "fp8": "fp8", "fp4": "bf16", "mxfp4": "bf16", "w4a16": "bf16"}),
    ("H200", {"bf16": "bf16", "fp16": "bf16", "fp8": "fp8", "fp4": "bf16", "mxfp4": "bf16", "w4a16": "bf16"}),
    ("MI300X", {"bf16": "bf16", "fp16": "bf16", "fp8": "fp8", "fp4": "bf16", "mxfp4": "bf16", "w4a16": "bf16"}),
    ("B200", {"bf16": "bf16", "fp16": "bf16", "fp8": "fp8", "fp4": "fp4", "mxfp4": "fp4", "w4a16": "bf16"}),
    ("MI355X", {"bf16": "bf16", "fp16": "bf16", "fp8": "fp8", "fp4": "fp4", "mxfp4": "fp4", "w4a16": "bf16"}),
])
def test_gemm_precision_is_the_formats_own_where_the_gpu_has_it_else_bf16(gpu, gemms):
    assert {w: gemm_dtype(w, CAT.gpu(gpu)) for w in gemms} == gemms


def test_weight_only_gemms_are_priced_as_bf16_gemms_over_the_4_bit_bytes():
    # Llama-3.1-8B w4a16 on one H100: the layers' 6,979,326,848 parameters at 0.51953125 B, the LM head
    # (525,336,576) at 2 B; every GEMM at bf16's peak (989.4 TFLOP/s), no input quantisation
    gpu, p = CAT.gpu("H100"), load_params("H100")
    sm = StepModel(gpu, with_weight_precision(L8, "w4a16"), None, 1, p)
    head = 128_256 * 4_096
    layers = (L8.total_params - 2 * head) * 0.51953125
    assert sm.dense_weight_bytes == pytest.approx(layers + 2 * head, abs=1) == pytest.approx(4_676_651_553.5, abs=1)
    for tokens in (1, 64, 8192):
        flops = 2 * (L8.total_params - 2 * head) * tokens
        g = L8.n_layers * GEMMS_PER_LAYER
        n = layers / (g * L8.d_model * 0.51953125)
        want = g * gemm_s(flops / g, layers / g, tokens, n, 4096.0, 989.4e12, False, gpu, p) \
            + gemm_s(2 * head * tokens, 2 * head, tokens, 128_256.0, 4096.0, 989.4e12, False, gpu, p)
        assert sm.linear_s(tokens)[0] == pytest.approx(float(want), rel=1e-12)
    # decode at batch 1 reads 3.2x fewer weight bytes than bf16 (latencies keep the step from 3.2x faster);
    # a compute-bound 8k prefill costs what bf16's does
    bf16 = StepModel(gpu, L8, None, 1, p)
    assert bf16.dense_weight_bytes / sm.dense_weight_bytes == pytest.approx(3.209, abs=1e-3)
    assert 2.5 < bf16.linear_s(1)[0] / sm.linear_s(1)[0] < 3.209
    assert sm.prefill_s(8192) == pytest.approx(bf16.prefill_s(8192), rel=1e-3)


def test_fp4_is_priced_alike_on_hopper_and_w4a16_only_by_its_bytes():
    # on an H100 fp4 and mxfp4 run weight-only as w4a16 does: the same kernels, more scale bytes
    p = load_params("H100")
    steps = {w: StepModel(CAT.gpu("H100"), with_weight_precision(L8, w), None, 1, p) for w in ("fp4", "mxfp4", "w4a16")}
    assert {s.gemm_dtype for s in steps.values()} == {"bf16"}
    assert steps["fp4"].decode_step_s(1, 4096) > steps["mxfp4"].decode_step_s(1, 4096) > \
        steps["w4a16"].decode_step_s(1, 4096)


def test_gpt_oss_120b_config_fits_one_h100_weight_only(tmp_path):
    # 36 layers: attention 26,542,080 parameters each (2880·64·64 Q, 2880·8·128 K and V, 64·64·2880 O), experts
    # 128 × 3·2880·2880 = 128 × 24,883,200; embeddings and LM head 201,088 × 2,880 each: 116,775,567,360 in all
    path = tmp_path / "config.json"
    path.write_text(json.dumps(GPT_OSS_120B))
    spec = get_model(str(path))
    assert (spec.weight_dtype, spec.attention_weight_dtype) == ("mxfp4", "bf16")
    assert (spec.moe_layers, spec.n_experts) == (36, 128)
    attn, outer = 36 * 26_542_080, 2 * 201_088 * 2_880
    assert spec.total_params == attn + 36 * 128 * 24_883_200 + outer == 116_775_567_360
    # only the experts in MXFP4 (0.53125 B): modules_to_not_convert keeps self_attn, embeddings and LM head in
    # bf16: 114,661,785,600 · 0.53125 + 955,514,880 · 2 + 1,158,266,880 · 2
    # = 60,914,073,600 + 1,911,029,760 + 2,316,533,760 = 65,141,637,120 B
    experts = spec.total_params - attn - outer
    assert spec.weight_bytes == pytest.approx(experts * 0.53125 + attn * 2 + outer * 2, abs=1)
    assert spec.weight_bytes == pytest.approx(65_141_637_120, abs=1)  # the model card's checkpoint: 60.8 GiB = 65.28 GB
    b = kv_budget(CAT.node("1xH100"), spec)
    assert b.stage_kv_bytes(0) == pytest.approx(72e9 - 65_141_637_120, abs=1)
    # a 128k stream: 18 full layers × 131,072 tokens + 18 sliding ones × 128, 8 heads × 128 values × 2 B
    stream = 18 * 131_072 * 2_048 + 18 * 128 * 2_048
    assert stream == 4_836_556_800 and (72e9 - 65_141_637_120) // stream == 1
    assert max_streams(b, spec, None, 131_072) == 1
    r = CliRunner().invoke(main, ["cost", "--hardware", "1xH100", "--model", str(path), "--batch", "4",
                                  "--context", "8192"])
    assert r.exit_code == 0, r.output
    assert "(mxfp4 weights, bf16 GEMMs on H100, KV native)" in r.output
    # served in another precision, every layer takes it: all bf16, or all w4a16
    assert with_weight_precision(spec, "bf16").weight_bytes == pytest.approx(spec.total_params * 2)
    assert with_weight_precision(spec, "w4a16").attention_weight_dtype == ""
    assert with_weight_precision(spec, "mxfp4") is spec  # as released


def test_gpt_oss_prices_its_bf16_attention_apart():
    # the catalog's gpt-oss-120b (the model card's 116.83B and 5.13B + 0.579B input embeddings) on one GPU: the
    # attention projections' GEMMs run in bf16 and read 2 B a weight; the experts' in fp4 on a B200 (bf16 on H100)
    spec = get_model("gpt-oss-120b")
    assert spec.weight_bytes / 1e9 == pytest.approx(65.25, abs=0.005)
    all_mxfp4 = dataclasses.replace(spec, attention_weight_dtype="")
    # in bf16, not MXFP4: the attention (26,542,080 a layer) and the rest beside it, routers, norms and biases
    # ((116.83e9 − 116,775,567,360) / 36 = 1,512,017.8 a layer: less than one expert's 24,883,200)
    rest = (116.83e9 - 116_775_567_360) / 36
    assert spec.other_params_per_layer == pytest.approx(rest) and rest < 24_883_200
    assert spec.weight_bytes - all_mxfp4.weight_bytes == pytest.approx(36 * (26_542_080 + rest) * (2 - 0.53125))
    for gpu, experts in (("H100", "bf16"), ("B200", "fp4")):
        sm = StepModel(CAT.gpu(gpu), spec, None, 1, load_params(gpu))
        flat = StepModel(CAT.gpu(gpu), all_mxfp4, None, 1, load_params(gpu))
        assert (sm.gemm_dtype, sm._attn_gemm, sm._rest_gemm, flat._attn_gemm) == (experts, "bf16", "bf16", "")
        # the dense part reads its bf16 bytes: 36 × (26,542,080 + 1,512,018) × 2 B, not all-MXFP4's ~0.53 B
        assert sm.dense_weight_bytes - flat.dense_weight_bytes == pytest.approx(
            36 * (26_542_080 + rest) * (2 - 0.53125))
        # the FLOPs are the same; the attention GEMMs' part of them is 26.5M of the 26.5M + 1.5M dense parameters
        assert sm.linear_s(512)[2] == pytest.approx(flat.linear_s(512)[2], rel=1e-12)
        assert sm._attn_param_share == pytest.approx(36 * 26_542_080 / (36 * 26_542_080 + (
            116.83e9 - 116_775_567_360)), rel=1e-9)
        if gpu == "H100":  # bf16 GEMMs either way: only the bytes differ
            assert sm.decode_step_s(1, 4096) > flat.decode_step_s(1, 4096)
        else:  # B200's fitted fp4 GEMM carries an input quantisation and a latency a bf16 one does not: its
            # 72 small attention GEMMs cost less in bf16, for all their 3.8x the bytes
            assert sm.decode_step_s(1, 4096) < flat.decode_step_s(1, 4096)
    # on a B200 a compute-bound prefill pays the bf16 peak (2.25 PFLOP/s) for the attention projections,
    # not the fp4 one (9): slower than pricing every GEMM in fp4
    b200 = StepModel(CAT.gpu("B200"), spec, None, 1, load_params("B200"))
    assert b200.prefill_s(8192) > StepModel(CAT.gpu("B200"), all_mxfp4, None, 1, load_params("B200")).prefill_s(8192)


def test_kv_caches_do_not_store_in_weight_only_formats():
    for name in ("mxfp4", "w4a16"):
        with pytest.raises(ConfigError, match=rf"'kv_dtype' must be one of fp32, bf16, fp16, fp8, int8, int4, fp4 "
                                              rf"\(got '{name}'\)"):
            KVLayout(kv_dtype=name)
        with pytest.raises(ConfigError, match=f"unknown lever '{name}'"):
            parse_layout(f"native+{name}")
    r = CliRunner().invoke(main, ["fit", "--kv-dtype", "w4a16", "--context", "4096"])
    assert r.exit_code == 2 and "--kv-dtype: must be one of fp32, bf16, fp16, fp8, int8, int4, fp4 (got" in r.output


def test_commands_say_which_gemms_run_weight_only():
    r = CliRunner().invoke(main, ["cost", "--hardware", "1xB200", "--model", "Llama-3.1-8B", "--weight-dtype",
                                  "w4a16", "--batch", "8", "--context", "8192", "--json"])
    out = json.loads(r.output)
    assert (out["weight_dtype"], out["gemm_dtype"]) == ("w4a16", "bf16")
    r = CliRunner().invoke(main, ["cost", "--hardware", "1xB200", "--model", "Llama-3.1-8B", "--weight-dtype",
                                  "fp4", "--batch", "8", "--context", "8192"])
    assert "(fp4 weights, KV native)" in r.output  # B200 computes in fp4: nothing to say
    fp4 = with_weight_precision(L70, "fp4")
    assert weight_only_note(fp4, [CAT.gpu("B200"), CAT.gpu("H200"), CAT.gpu("H100")]) == "bf16 GEMMs on H100, H200"
    assert weight_only_note(with_weight_precision(L70, "w4a16"), [CAT.gpu("B200")]) == "bf16 GEMMs"
    assert weight_only_note(L70, [CAT.gpu("H100")]) == ""
    # the run table's weights column names the fleet's GPUs that serve them weight-only
    assert weights_column(EngineConfig(model=fp4, node=CAT.node("8xH100"))) == "fp4 (bf16 GEMMs on H100)"
    assert weights_column(EngineConfig(model=fp4, node=CAT.node("8xB200"))) == "fp4"


def test_a_float32_checkpoint_is_served_in_fp16():
    # vLLM's --dtype auto serves FP32 checkpoints in FP16: 2 B a weight, as kvsim reads them (fp32 weights
    # could not be planned before: no GPU in the catalog computes in fp32)
    from simulator.hf_config import spec_from_hf_dict
    from tests.test_models import LLAMA31_8B

    spec = spec_from_hf_dict({**LLAMA31_8B, "torch_dtype": "float32"}, "config.json")
    assert spec.weight_dtype == "fp16" and spec.weight_bytes == pytest.approx(L8.weight_bytes)
    with pytest.raises(ConfigError, match=r"'weight_dtype' must be one of bf16, fp16, fp8, fp4, mxfp4, w4a16 "
                                          r"\(got 'fp32'\)"):
        dataclasses.replace(L8, weight_dtype="fp32")


def test_review_mends_weight_formats_the_api_refuses_and_configs_read_narrowly():
    from simulator.hf_config import spec_from_hf_dict

    # a KV-cache format is no weight format: the Python API refuses it as the CLI does
    for bad in ("int4", "int8", "fp32"):
        with pytest.raises(ConfigError, match=rf"'weight_dtype' must be one of bf16, fp16, fp8, fp4, mxfp4, w4a16 "
                                              rf"\(got '{bad}'\)"):
            kv_budget(CAT.node("1xH100"), L8, weight_dtype=bad)
        with pytest.raises(ConfigError, match="weight_dtype"):
            StepModel(CAT.gpu("H100"), L8, None, 1, load_params("H100"), bad)
    # only every layer's attention left out (a wildcard layer) keeps it apart; one layer's module is not read
    quant = {"quant_method": "mxfp4", "modules_to_not_convert": ["model.layers.0.self_attn.o_proj"]}
    assert spec_from_hf_dict({**GPT_OSS_120B, "quantization_config": quant}, "c.json").attention_weight_dtype == ""
    with pytest.raises(ConfigError, match=r"c.json: 'torch_dtype' must be one of"):
        spec_from_hf_dict({**GPT_OSS_120B, "torch_dtype": "int3"}, "c.json")


def test_the_rest_of_an_all_moe_models_dense_part_runs_with_its_attention():
    # gpt-oss: what is neither attention nor routed experts is routers, norms and biases (1.5M parameters a
    # layer), priced in the attention's bf16, not as fp4 GEMMs with fp4's latency and input quantisation; a
    # dense model with its attention apart keeps its MLPs' GEMMs in the weights' precision
    oss = StepModel(CAT.gpu("B200"), get_model("gpt-oss-120b"), None, 8, load_params("B200"))
    assert (oss.gemm_dtype, oss._attn_gemm, oss._rest_gemm) == ("fp4", "bf16", "bf16")
    dense = dataclasses.replace(with_weight_precision(L70, "fp8"), attention_weight_dtype="bf16")
    sm = StepModel(CAT.gpu("B200"), dense, None, 8, load_params("B200"))
    assert (sm.gemm_dtype, sm._attn_gemm, sm._rest_gemm) == ("fp8", "bf16", "")
    # its weights: the attention's 80 × 150,994,944 parameters at 2 B, not 1
    assert dense.weight_bytes - with_weight_precision(L70, "fp8").weight_bytes == pytest.approx(80 * 150_994_944)
    # an all-MoE model whose rest holds shared experts (two of 24,883,200 a layer: more than one expert) keeps
    # them in the experts' format: quantised MLPs, not routers
    spec = get_model("gpt-oss-120b")
    shared = dataclasses.replace(spec, total_params=spec.total_params + 36 * 2 * 24_883_200,
                                 active_params=spec.active_params + 36 * 2 * 24_883_200)
    assert rest_weight_dtype(shared) == "mxfp4" and rest_weight_dtype(spec) == "bf16"
    sm = StepModel(CAT.gpu("B200"), shared, None, 8, load_params("B200"))
    assert (sm._attn_gemm, sm._rest_gemm) == ("bf16", "")


def test_the_readmes_gpt_oss_figures():
    # README, "Weight precision": `kvsim fit --model gpt-oss-120b --hardware 1xH100 --context 32768` and
    # `kvsim cost --model gpt-oss-120b --hardware 1xH100 --batch 16 --context 8192` (and 1xB200)
    spec, small = get_model("gpt-oss-120b"), get_model("gpt-oss-20b")
    assert (round(spec.weight_bytes / 1e9, 2), round(small.weight_bytes / 1e9, 2)) == (65.25, 13.75)
    for model, streams in ((spec, 5), (small, 72)):
        assert max_streams(kv_budget(CAT.node("1xH100"), model), model, None, 32_768) == streams
    steps = {g: StepModel(CAT.gpu(g), spec, None, 1, load_params(g)).decode_step_s(16, 16 * 8192)
             for g in ("H100", "B200")}
    assert (round(steps["H100"] * 1e3, 2), round(steps["B200"] * 1e3, 2)) == (12.83, 7.82)
