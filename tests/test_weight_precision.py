"""Weight precision as a deployment choice: bytes, quantised configs, GPUs, CLI and scenarios."""

import dataclasses
import json
import re

import pytest
from click.testing import CliRunner

from hardware.catalog import load_catalog
from simulator.capacity import kv_budget, max_streams
from simulator.cli import main
from simulator.cost import StepModel, load_params
from simulator.errors import ConfigError
from simulator.hf_config import spec_from_hf_dict
from simulator.models import get_model, outer_weight_dtype, weight_bytes, weight_precision, with_weight_precision
from simulator.placement import ParallelPlan
from simulator.scenario import load_scenario
from tests.test_models import LLAMA31_8B

CAT = load_catalog()
L70 = get_model("Llama-3.1-70B")


def test_weight_bytes_per_precision():
    # 70.55e9 parameters: bf16 2 B, fp8 1 B, fp4 (NVFP4: 0.5 B + a 1 B scale per 16) 0.5625 B; a quantised
    # checkpoint keeps its embeddings and LM head (128,256 × 8,192 = 1,050,673,152 each) in bf16:
    # fp8 (70.55e9 − 2,101,346,304) · 1 + 2,101,346,304 · 2 = 72,651,346,304 B, not 70.55e9
    # fp4 68,448,653,696 · 0.5625 + 4,202,692,608 = 42,705,060,312 B, not 39.684375e9
    assert with_weight_precision(L70, "bf16").weight_bytes == pytest.approx(141.10e9)
    assert with_weight_precision(L70, "fp8").weight_bytes == pytest.approx(72_651_346_304, abs=1)
    assert with_weight_precision(L70, "fp4").weight_bytes == pytest.approx(42_705_060_312, abs=1)
    # Llama-3.1-8B in fp8 (the docstring's figure): 6.98 B parameters at 1 B, 1.05 B at 2 B
    assert with_weight_precision(get_model("Llama-3.1-8B"), "fp8").weight_bytes / 1e9 == pytest.approx(9.08, abs=0.005)
    blk = with_weight_precision(L70, "fp8-block")
    assert blk.weight_dtype == "fp8" and blk.weight_block_scales and weight_precision(blk) == "fp8-block"
    assert weight_precision(get_model("DeepSeek-V3")) == "fp8-block"  # as released
    assert with_weight_precision(L70, None) is L70
    with pytest.raises(ConfigError, match=r"'weight_dtype' must be one of bf16, fp8, fp8-block, fp4, mxfp4, w4a16 "
                                          r"\(got 'int4'\)"):
        with_weight_precision(L70, "int4")


def test_embeddings_and_lm_head_stay_16_bit_only_under_a_quantised_format():
    # the rule of simulator/data/kv_dtypes.toml [weights]: a format of fewer bytes a value than bf16 keeps
    # the two vocab matrices in bf16; bf16, fp16 and fp32 weights keep them in their own format
    assert [outer_weight_dtype(d) for d in ("fp32", "bf16", "fp16", "fp8", "int8", "fp4", "int4")] == [
        "fp32", "bf16", "fp16", "bf16", "bf16", "bf16", "bf16"]
    # fp32 Llama-3.1-70B: every parameter at 4 B
    assert weight_bytes(L70, "fp32") == pytest.approx(70.55e9 * 4)
    # a model whose vocabulary is unknown counts its embeddings with the layers: all at the format's bytes
    unknown = dataclasses.replace(L70, vocab_size=0)
    assert weight_bytes(unknown, "fp8") == pytest.approx(70.55e9)
    # and its steps price no LM head (a GEMM of no columns divided by zero before)
    step = StepModel(CAT.gpu("H100"), dataclasses.replace(get_model("Llama-3.1-8B"), vocab_size=0), None, 1,
                     load_params("H100"), "fp8")
    assert step._head_s(8) == (0.0, 0.0, 0.0) and step.cost((), 8, 64_000).total_s > 0
    # fp8-block is fp8 weights: the same bytes (its 128×128 block scales, 4 B per 16,384 values, are not counted)
    assert with_weight_precision(L70, "fp8-block").weight_bytes == with_weight_precision(L70, "fp8").weight_bytes


def test_fp8_weights_buy_streams():
    # Llama-3.1-70B on 8×H100 TP8 at 128k: bf16 weights 17.64 GB a GPU -> 54.36 GB KV -> 10 streams;
    # fp8 72.651 / 8 = 9.081 GB (embeddings and LM head in bf16) -> 62.92 GB -> floor(62.92 / 5.369) = 11
    node = CAT.node("8xH100")
    assert max_streams(kv_budget(node, L70), L70, None, 131_072) == 10
    fp8 = with_weight_precision(L70, "fp8")
    b = kv_budget(node, fp8, plan=ParallelPlan(tp=8))
    assert b.stage_kv_bytes(0) / 1e9 == pytest.approx(72 - 72.651346304 / 8, abs=1e-6)
    assert max_streams(b, fp8, None, 131_072) == 11


def test_lower_precision_steps_faster():
    l8 = get_model("Llama-3.1-8B")

    def step(gpu: str, d: str) -> StepModel:
        return StepModel(CAT.gpu(gpu), with_weight_precision(l8, d), None, 1, load_params(gpu))

    # a compute-bound prefill gets faster with every halving of the bits on Blackwell
    pre = {d: step("B200", d).prefill_s(8192) for d in ("bf16", "fp8", "fp4")}
    assert pre["bf16"] > pre["fp8"] > pre["fp4"]
    # a weight-bound decode on Hopper reads half the bytes in fp8
    assert step("H100", "bf16").decode_step_s(8, 8000) > step("H100", "fp8").decode_step_s(8, 8000)
    # on B200 TensorRT-LLM's measured per-tensor fp8 GEMM is slower than bf16 at decode sizes (18.6
    # against 9.9 us at 8 x 4096 x 4096; vLLM's and SGLang's run 9.3-9.6), so the fitted step is
    # too: 4.14 against 3.72 ms here; its NVFP4 GEMM (14.1 us there) reads a quarter of the bytes:
    # 3.14 ms, of which the LM head, kept in bf16 (1.05 GB read by bf16's kernel), 0.177 ms. (4.39,
    # 4.04 and 3.35 ms while fp8 and fp4 quantised the LM head too and B200's fitted step overhead,
    # refitted since on the published rows, was 0.72 ms, not 0.40)
    dec = {d: step("B200", d).decode_step_s(8, 8000) for d in ("bf16", "fp8", "fp4")}
    assert dec["fp8"] > dec["bf16"] > dec["fp4"]
    assert dec["fp4"] == pytest.approx(3.14e-3, rel=0.01)


@pytest.mark.parametrize(("quant", "dtype", "blocks"), [
    ({"quant_method": "fp8", "weight_block_size": [128, 128]}, "fp8", True),
    ({"quant_method": "fp8"}, "fp8", False),
    ({"quant_method": "modelopt", "quant_algo": "NVFP4"}, "fp4", False),
    ({"quant_method": "modelopt", "quant_algo": "FP8"}, "fp8", False),
    ({"quant_method": "compressed-tensors",
      "config_groups": {"g": {"weights": {"num_bits": 8, "type": "float", "strategy": "channel"}}}}, "fp8", False),
    ({"quant_method": "compressed-tensors",
      "config_groups": {"group_0": {"weights": {"num_bits": 8, "type": "float", "strategy": "block"}}}}, "fp8", True),
    ({"quant_method": "compressed-tensors",
      "config_groups": {"group_0": {"weights": {"num_bits": 4, "type": "float"}}}}, "fp4", False),
    ({"quant_method": "mxfp4"}, "mxfp4", False),
    ({"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True, "version": "gemm"}, "w4a16", False),
    ({"quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": False, "sym": True}, "w4a16", False),
    # llm-compressor's W4A16 (RedHatAI's *-quantized.w4a16 checkpoints)
    ({"quant_method": "compressed-tensors", "config_groups": {"group_0": {
        "weights": {"num_bits": 4, "type": "int", "symmetric": True, "strategy": "group", "group_size": 128},
        "input_activations": None, "targets": ["Linear"]}}}, "w4a16", False),
])
def test_quantised_configs(quant, dtype, blocks):
    spec = spec_from_hf_dict({**LLAMA31_8B, "quantization_config": quant}, "config.json")
    assert (spec.weight_dtype, spec.weight_block_scales) == (dtype, blocks)


@pytest.mark.parametrize(("quant", "msg"), [
    ({"quant_method": "modelopt", "quant_algo": "W4A8_AWQ"}, "'quantization_config.quant_algo' must be FP8 or NVFP4"),
    ({"quant_method": "compressed-tensors",
      "config_groups": {"g": {"weights": {"num_bits": 4, "type": "int"}}}},
     "weights must be float with num_bits 8 or 4, or int of num_bits 4 in groups of 128 without quantised activations"),
    ({"quant_method": "compressed-tensors", "config_groups": {"g": {
        "weights": {"num_bits": 4, "type": "int", "group_size": 128},
        "input_activations": {"num_bits": 8, "type": "int"}}}}, "(got type 'int', num_bits 4)"),
    ({"quant_method": "gptq", "bits": 4, "group_size": 32}, "of gptq must have bits 4 and group_size 128, as kvsim's "
                                                             "w4a16 (got bits 4, group_size 32)"),
    ({"quant_method": "awq", "bits": 8, "group_size": 128}, "(got bits 8, group_size 128)"),
    ({"quant_method": "bitsandbytes"}, "cannot interpret 'quantization_config.quant_method' 'bitsandbytes'"),
])
def test_unreadable_quantisation_is_one_line(quant, msg):
    with pytest.raises(ConfigError, match=re.escape(msg)):
        spec_from_hf_dict({**LLAMA31_8B, "quantization_config": quant}, "config.json")


def test_cli_takes_weight_dtype_and_states_it(tmp_path):
    r = CliRunner().invoke(main, ["fit", "--model", "Llama-3.1-70B", "--weight-dtype", "fp8", "--context", "131072"])
    assert r.exit_code == 0 and "(fp8 weights)" in r.output and "max streams at 131,072 tokens: 11" in r.output
    r = CliRunner().invoke(main, ["cost", "--hardware", "H100", "--model", "Llama-3.1-8B", "--weight-dtype", "fp4",
                                  "--batch", "1", "--context", "100"])
    # no fp4 tensor cores on H100: its GEMMs run in bf16 over the 4-bit weights (weight-only), and it says so
    assert r.exit_code == 0 and "(fp4 weights, bf16 GEMMs on H100, KV native)" in r.output
    r = CliRunner().invoke(main, ["collapse", "--model", "Llama-3.1-70B", "--weight-dtype", "fp4", "--hardware",
                                  "8xB200", "--layout", "native", "--out", str(tmp_path)])
    assert r.exit_code == 0 and "(fp4 weights)" in r.output
    r = CliRunner().invoke(main, ["cost", "--hardware", "B200", "--model", "Llama-3.1-8B", "--weight-dtype", "fp4",
                                  "--batch", "1", "--context", "100", "--json"])
    assert json.loads(r.output)["weight_dtype"] == "fp4"


def test_scenario_weight_dtype(tmp_path):
    base = ('name = "t"\n[model]\nname = "Llama-3.1-8B"\nweight_dtype = "{}"\n[cluster]\nhardware = ["{}"]\n'
            'tp = 1\n[workload]\nduration_s = 30\n[workload.spec]\nname = "chat-4k"\n')
    p = tmp_path / "s.toml"
    p.write_text(base.format("fp4", "8xB200"))
    sc = load_scenario(p)
    assert sc.model_spec().weight_dtype == "fp4"
    p.write_text(base.format("fp4", "8xH100"))
    assert load_scenario(p).model_spec().weight_dtype == "fp4"  # served weight-only: no fp4 tensor cores there
    p.write_text(base.format("int3", "8xH100"))
    with pytest.raises(ConfigError, match=r"s.toml: model.weight_dtype: must be one of bf16, fp8, fp8-block, fp4, "
                                          r"mxfp4, w4a16 \(or absent"):
        load_scenario(p)
