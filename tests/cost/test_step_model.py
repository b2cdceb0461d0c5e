import itertools
import math
from dataclasses import replace

import pytest

from simulator.cost import (
    StepModel,
    allreduce_s,
    causal_pairs,
    expected_experts,
    load_params,
    step_model,
)
from simulator.cost.params import CostParams
from simulator.errors import ConfigError

EMBED_8B = 128_256 * 4096  # Llama-3.1-8B's input embeddings, and (untied) its LM head: vocab x d_model params


def test_llama8b_decode_batch1_h100_is_weight_read(make, ideal):
    # Hand computation: Llama-3.1-8B bf16 holds 8.03e9 params x 2 B = 16.06 GB of weights. A decode
    # step reads all but the input embeddings (a gather of one row: 525,336,576 params x 2 B =
    # 1,050,673,152 B not read): 15,009,326,848 B / 3.35e12 B/s = 4.480 ms.
    # Its KV at 1,000 tokens: 32 layers x 8 heads x 256 values x 2 B = 131,072 B/token
    # -> 131.07 MB / 3.35e12 = 0.039 ms. FLOPs: 2 x (8.03e9 - 525,336,576) = 15.01 GFLOP -> 0.015 ms.
    sm = make("H100", "Llama-3.1-8B", ideal)
    c = sm.cost((), 1, 1000)
    assert c.linear_bound == "memory" and c.bound == "memory"
    assert c.weight_bytes == pytest.approx(16.06e9 - 2 * EMBED_8B)
    assert c.linear_s == pytest.approx((16.06e9 - 2 * EMBED_8B) / 3.35e12)
    # plus the decode kernel's Q read and O write: 32 layers x 32 heads x (128 + 128) x 2 B = 524,288 B
    assert c.attention_s == pytest.approx((131_072_000 + 524_288) / 3.35e12)
    assert c.total_s == pytest.approx(4.480e-3 + 0.039e-3, rel=2e-3)


def test_the_embeddings_are_gathered_and_the_lm_head_runs_on_the_logit_rows(make, ideal):
    """The input embeddings cost no GEMM; the LM head (vocab x d_model) runs once for each decode
    sequence and for each prefill chunk's last token, not for every prompt token."""
    sm = make("H100", "Llama-3.1-8B", ideal)
    layers = 8.03e9 - 2 * EMBED_8B  # params in the 32 layers (the embeddings and LM head apart)
    # a 1,000-token prefill chunk: the layers multiply 1,000 tokens, the LM head one row
    assert sm.linear_s(1000, 1)[2] == pytest.approx(2 * layers * 1000 + 2 * EMBED_8B * 1)
    assert sm.cost([(1000, 0)]).flops - sm.cost([(1000, 0)]).kv_bytes * 0 == pytest.approx(
        2 * layers * 1000 + 2 * EMBED_8B + sm.prefill_attention(1000, 0)[0])
    # two chunks and 3 decoders: 5 logit rows
    c = sm.cost([(500, 0), (300, 200)], 3, 3000)
    assert sm.linear_s(803, 5)[2] == pytest.approx(2 * layers * 803 + 2 * EMBED_8B * 5)
    assert c.weight_bytes == pytest.approx(2 * (layers + EMBED_8B))
    # decode: every token takes logits
    assert sm.linear_s(64)[2] == pytest.approx(2 * (layers + EMBED_8B) * 64)
    # the step time follows: a prefill of 8,192 tokens priced as one chunk is cheaper than the same
    # tokens' decode-like linear work by the LM head of 8,191 rows
    assert sm.linear_s(8192, 1)[0] < sm.linear_s(8192)[0]


def test_llama8b_decode_batch1_with_shipped_params_is_a_few_ms():
    sm = step_model("H100", "Llama-3.1-8B")
    t = sm.decode_step_s(1, 1000)
    assert 4.794e-3 < t < 10e-3  # the weight-read floor, divided by a memory efficiency <= 1
    assert sm.cost((), 1, 1000).bound == "memory"


def test_decode_is_affine_in_total_context():
    sm = step_model("H100", "Llama-3.1-8B")
    ts = [sm.decode_step_s(16, c) for c in (10_000, 20_000, 30_000, 40_000)]
    steps = [b - a for a, b in itertools.pairwise(ts)]
    assert steps[0] > 0
    assert steps == pytest.approx([steps[0]] * 3, rel=1e-9)
    a, b = sm.decode_coefficients(16)
    assert sm.decode_step_s(16, 12_345) == pytest.approx(a + b * 12_345)


def test_k_steps_are_an_arithmetic_series():
    sm = step_model("H200", "Llama-3.1-70B", tp=4)
    batch, c0, k = 32, 32 * 2000, 50
    a, b = sm.decode_coefficients(batch)
    direct = sum(sm.decode_step_s(batch, c0 + i * batch) for i in range(k))
    assert direct == pytest.approx(k * (a + b * c0) + b * batch * k * (k - 1) / 2)


def test_long_prefill_is_compute_bound(make, ideal):
    sm = make("H100", "Llama-3.1-8B", ideal)
    c = sm.cost([(16384, 0)])
    assert c.linear_bound == "compute" and c.attention_bound == "compute" and c.bound == "compute"
    # linear: the layers' 8.03e9 - 2 x 525,336,576 params (the embeddings and LM head apart):
    # 2 x 6.979e9 x 16384 / 989.4e12 = 0.2311 s, plus the LM head on the prompt's last token,
    # memory-bound: 525,336,576 x 2 B / 3.35e12 B/s = 0.31 ms
    assert c.linear_s == pytest.approx(2 * (8.03e9 - 2 * EMBED_8B) * 16384 / 989.4e12 + 2 * EMBED_8B / 3.35e12)
    # attention: 32 heads x 128 query tiles = 4,096 CTAs a layer, sharing 132 SMs evenly (no fixed
    # CTA cost in the ideal parameters). Causal scores per head: 128^2 x 128 x 127 / 2 (full tiles)
    # + 128 x 16,384 (last) = 135,266,304 at 4 x 128 FLOPs each:
    # 32 layers x 32 heads x 135,266,304 x 512 / 989.4e12 = 71.68 ms, i.e. the ideal
    # 32 x 4 x 32 x 128 x 16384 x 16385 / 2 / 989.4e12 = 71.13 ms times 1.00776 (tile rounding)
    assert c.attention_s == pytest.approx(32 * 32 * 135_266_304 * 512 / 989.4e12)
    ideal_s = 32 * 4 * 32 * 128 * 16384 * 16385 / 2 / 989.4e12
    assert c.attention_s == pytest.approx(ideal_s * 1.00776, rel=1e-5)


def test_mla_reads_3_56x_fewer_kv_bytes_than_gqa8(make, ideal):
    # GQA, 8 KV heads x (128 + 128) = 2,048 values/token/layer; MLA latent 512 + 64 = 576.
    gqa = make("H100", "Llama-3.1-70B", ideal).cost((), 8, 8 * 4096).kv_bytes
    mla = make("H100", "Llama-3.1-70B", ideal, layout="mla").cost((), 8, 8 * 4096).kv_bytes
    assert gqa / mla == pytest.approx(2048 / 576)
    assert pytest.approx(3.56, abs=0.01) == 2048 / 576


def test_mla_decode_pays_absorbed_flops(make, ideal):
    # DeepSeek-V3: 128 heads x (2 x (512 + 64) + 2 x 512) = 278,528 FLOPs per cached token per layer
    sm = make("H100", "DeepSeek-V3", ideal)
    c0, c1 = sm.cost((), 1, 0), sm.cost((), 1, 1000)
    assert (c1.flops - c0.flops) == pytest.approx(61 * 1000 * 128 * (2 * 576 + 2 * 512))


def test_decode_mfu_under_5_percent_at_long_context_not_at_short_large_batch():
    # The claim "KV fetches hold decode MFU under 5% at long context", Llama-3.1-8B bf16 on 1xH100:
    sm = step_model("H100", "Llama-3.1-8B")
    long = sm.cost((), 8, 8 * 32768)  # 8 x 32k tokens: 34 GB of KV, about all that fits
    assert long.mfu < 0.05 and long.attention_s > long.linear_s
    short = sm.cost((), 256, 256 * 512)  # short context, large batch: weights amortised
    assert short.mfu > 0.05


def test_fp8_peak_and_weights_follow_dtype(make, ideal):
    bf16_model = make("H100", "Llama-3.1-8B", ideal)
    bf = bf16_model.cost([(8192, 0)])
    f8 = make("H100", "Llama-3.1-8B", ideal, dtype="fp8").cost([(8192, 0)])
    # the layers' weights halve; the LM head (128,256 × 4,096) stays in bf16, as fp8 checkpoints keep it
    head = 128_256 * 4096 * 2
    assert f8.weight_bytes == pytest.approx((bf.weight_bytes - head) / 2 + head, rel=1e-12)
    # the layers' GEMMs take half the time (1,978.9 vs 2 x 989.4 TFLOP/s); the LM head's one logit row
    # is the same bf16 GEMM in both (1.05 GB read: 0.31 ms at 3.35 TB/s)
    head_s = bf16_model._head_s(1)[0]
    assert head_s == pytest.approx(128_256 * 4096 * 2 / 3.35e12, rel=0.01)
    assert f8.linear_s - head_s == pytest.approx((bf.linear_s - head_s) / 2, rel=1e-3)


def test_fp4_runs_weight_only_on_a_gpu_without_fp4_tensor_cores(make, ideal):
    # H100 has no fp4 peak: its GEMMs run in bf16 (vLLM's Marlin), reading the weights' 4-bit bytes
    h, b = make("H100", "Llama-3.1-8B", ideal, dtype="fp4"), make("B200", "Llama-3.1-8B", ideal, dtype="fp4")
    assert (h.gemm_dtype, h._peak, h._low) == ("bf16", 989.4e12, False)
    assert (b.gemm_dtype, b._peak, b._low) == ("fp4", 9000e12, True)
    assert h.dense_weight_bytes == b.dense_weight_bytes


def test_moe_reads_only_touched_experts(make, ideal):
    sm = make("H100", "Qwen3-235B-A22B", ideal, tp=8)
    one, many = sm.cost((), 1, 1000), sm.cost((), 512, 512 * 1000)
    assert one.weight_bytes < many.weight_bytes
    full = sm.dense_weight_bytes + sm.expert_bytes * 128
    assert many.weight_bytes == pytest.approx(full, rel=0.01)


def test_expected_experts_limits():
    assert expected_experts(256, 8, 1) == pytest.approx(8)
    assert expected_experts(256, 8, 10_000) == pytest.approx(256)
    assert expected_experts(256, 8, 0) == 0


@pytest.mark.parametrize(
    ("n", "c", "w"), [(10, 0, 0), (10, 5, 0), (10, 0, 4), (10, 2, 4), (3, 8, 4), (7, 3, 9)]
)
def test_causal_pairs_match_brute_force(n, c, w):
    brute = sum(min(p, w) if w else p for p in range(c + 1, c + n + 1))
    assert causal_pairs(n, c, w) == pytest.approx(brute)


def test_tp_adds_allreduce_and_splits_weights(make, ideal):
    one = make("H100", "Llama-3.1-70B", ideal, tp=1).cost((), 64, 64 * 1000)
    four = make("H100", "Llama-3.1-70B", ideal, tp=4).cost((), 64, 64 * 1000)
    assert one.comm_s == 0 and four.comm_s > 0
    assert four.weight_bytes == pytest.approx(one.weight_bytes / 4)
    # ring: 2 x 3/4 x 64 x 8192 x 2 B / 450e9 per all-reduce, 2 per layer, 80 layers
    assert four.comm_s == pytest.approx(160 * 2 * 0.75 * 64 * 8192 * 2 / 450e9)
    from hardware.catalog import load_catalog

    assert allreduce_s(1e6, 1, load_catalog().gpu("H100"), ideal) == 0


def test_allreduce_takes_the_fastest_nccl_protocol(ideal):
    from dataclasses import replace

    from hardware.catalog import load_catalog

    h100 = load_catalog().gpu("H100")  # 450 GB/s per direction
    p = replace(
        ideal,
        collective_latency_s=5e-6,
        collective_hop_latency_s=1e-6,
        comm_ll_factor=0.5,
        comm_simple_latency_s=20e-6,
        comm_nvls_factor=0.5,
    )
    # 4.5 kB over 8 GPUs: LL, 5 + 7 us latency, 1.75 x 4.5e3 / 225e9 = 35 ns
    assert allreduce_s(4.5e3, 8, h100, p) == pytest.approx(12e-6 + 35e-9)
    # 450 MB over 2 GPUs: ring Simple (NVLS is half as fast), 26 us + 1 ms
    assert allreduce_s(450e6, 2, h100, p) == pytest.approx(26e-6 + 1e-3)
    # 450 MB over 8 GPUs: the ring moves 1.75 bytes per byte (1.75 ms), NVLS one, here at half
    # the bandwidth (2 ms): the ring wins; at 0.6 of it NVLS does (1.67 ms)
    assert allreduce_s(450e6, 8, h100, p) == pytest.approx(32e-6 + 1.75e-3)
    assert allreduce_s(450e6, 8, h100, replace(p, comm_nvls_factor=0.6)) == pytest.approx(32e-6 + 1e-3 / 0.6)
    # defaults: the plain ring
    assert allreduce_s(450e6, 4, h100, ideal) == pytest.approx(1.5e-3)


def test_mixed_step_costs_more_than_either_part():
    sm = step_model("H100", "Llama-3.1-8B")
    mixed = sm.step_s([(512, 0)], 32, 32 * 4000)
    assert mixed > sm.prefill_s(512) and mixed > sm.decode_step_s(32, 32 * 4000)


def test_hot_path_prices_a_batch_once(monkeypatch):
    """A decode step of a batch already priced is an affine read of remembered coefficients: 20,000 steps at new
    contexts run the kernel model once (counted, not timed: a wall-clock bound fails on a stalled machine,
    helper-122; `make bench` times the engine)."""
    from simulator.cost.step_model import StepModel

    calls = []
    real = StepModel._decode_coefficients
    monkeypatch.setattr(StepModel, "_decode_coefficients", lambda self, batch: calls.append(batch) or real(self, batch))
    sm = step_model("H100", "Llama-3.1-8B")
    a, b = sm.decode_coefficients(32)
    for i in range(20_000):
        assert sm.decode_step_s(32, 1000 + i) == a + b * (1000 + i)
    assert calls == [32]


def test_params_validate_and_load():
    with pytest.raises(ConfigError, match="'gemm_compute_eff' must be in"):
        CostParams(
            gpu="x",
            gemm_compute_eff=1.2,
            gemm_memory_eff=1,
            attn_compute_eff=1,
            attn_memory_eff=1,
            comm_eff=1,
            step_overhead_s=0,
            collective_latency_s=0,
        )
    p = load_params("H100")
    assert 0 < p.gemm_memory_eff <= 1 and p.source
    assert "default" in load_params("MI300X").source
    assert isinstance(step_model("H100", "Llama-3.1-8B"), StepModel)
    assert math.isfinite(step_model("MI300X", "Llama-3.1-8B").decode_step_s(1, 10))


def test_smooth_max_limits():
    from simulator.cost.kernels import smooth_max

    assert smooth_max(3.0, 4.0) == 4.0  # p = inf: the hard max of the plain roofline
    assert smooth_max(3.0, 4.0, 1.0) == pytest.approx(7.0)  # p = 1: no overlap, the sum
    assert smooth_max(3.0, 4.0, 2.0) == pytest.approx(5.0)  # 3-4-5
    assert smooth_max(0.0, 0.0, 2.0) == 0.0


def test_decode_per_sequence_latency_is_a_batch_constant(make, ideal):
    # Llama-3.1-8B: 32 layers, 8 KV heads on one GPU. Per layer a decode kernel adds
    # B x (1 us + 8 x 0.1 us); batch 4 over 32 layers: 32 x 4 x 1.8 us = 230.4 us.
    from dataclasses import replace

    p = replace(ideal, decode_seq_latency_s=1e-6, decode_head_latency_s=1e-7)
    base, lat = make("H100", "Llama-3.1-8B", ideal), make("H100", "Llama-3.1-8B", p)
    a0, b0 = base.decode_coefficients(4)
    a1, b1 = lat.decode_coefficients(4)
    assert a1 - a0 == pytest.approx(230.4e-6)
    assert b1 == b0  # the slope in context is untouched: decode stays affine
    assert lat.step_s((), 4, 40_000) == pytest.approx(a1 + b1 * 40_000, rel=1e-12)


def test_fp8_gemm_factor_scales_compute_only(make, ideal):
    from dataclasses import replace

    half = replace(ideal, gemm_fp8_eff=0.5)
    # 8,192 tokens all taking logits: every GEMM compute-bound (a prefill's one-row LM head is not)
    bf = make("H100", "Llama-3.1-8B", ideal).linear_s(8192)[0]
    f8 = make("H100", "Llama-3.1-8B", half, dtype="fp8").linear_s(8192)[0]
    # fp8 peak 1,978.9 TFLOP/s x 0.5 = the bf16 peak: compute-bound GEMMs take as long
    assert f8 == pytest.approx(bf, rel=1e-3)
    assert make("H100", "Llama-3.1-8B", half).linear_s(8192)[0] == bf  # bf16 untouched


def test_step_model_attention_matches_the_kernel_formulas():
    # The step model and `kernels.predict_s` are one model: a prefill layer and a decode layer of
    # Llama-3.1-8B (32 heads, 8 KV heads, d 128, bf16 KV) on one GPU, and of DeepSeek-V3's MLA at
    # tp 8 (16 heads a GPU, the latent replicated) agree exactly.
    import numpy as np

    from hardware.catalog import load_catalog
    from simulator.cost.aiconfigurator import _mla_dims
    from simulator.cost.kernels import predict_s

    sm, p, gpu = step_model("H100", "Llama-3.1-8B"), load_params("H100"), load_catalog().gpu("H100")
    shape = {"b": [2.0], "h": [32.0], "kvh": [8.0], "d": [128.0], "kv_bytes": [2.0]}
    pf = predict_s("context_attention", shape | {"s": [3000.0]}, gpu, p)[0]
    assert sm.attention_layer_s([(3000, 0)] * 2) == pytest.approx(pf, rel=1e-9)
    dec = predict_s("generation_attention", shape | {"ctx": [8192.0]}, gpu, p)[0]
    assert sm.attention_layer_s((), 2, 2 * 8192) == pytest.approx(dec, rel=1e-9)
    assert np.isfinite(pf) and pf > p.prefill_latency_s
    ds = step_model("H100", "DeepSeek-V3", tp=8)
    rank, rope, _, _ = _mla_dims()
    assert (rank, rope) == (512, 64)  # DeepSeek-V3's, from the model catalog
    mla = {"b": [4.0], "h": [16.0], "kv_bytes": [2.0], "rank": [rank], "rope": [rope], "ctx": [4096.0]}
    kernel = predict_s("mla_generation", mla, gpu, p)[0]
    assert ds.attention_layer_s((), 4, 4 * 4096) == pytest.approx(kernel, rel=1e-9)


def test_a_step_reads_the_weights_a_gpu_holds_replicated_kv_and_latent_projections_included(make, ideal):
    """Under TP the dense weights split over tp, except what every rank holds whole (as `fit` says):
    the K/V projections of KV heads replicated when tp > the KV heads, an MLA model's latent
    down-projections. A step reads them and multiplies every token by them (the FLOPs scale alike);
    the LM head is read too, the input embeddings are only gathered."""
    # Llama-3-70B on TP16 (8 KV heads: each is on 2 GPUs): the even split is
    # (70.55e9 params x 2 B) / 16 = 8,818,750,000 B, of which the input embeddings are
    # 128,256 x 8192 x 2 B / 16 = 131,334,144 B (not read); each GPU holds its KV head's K and V
    # projections whole, 80 layers x 8192 x (8 heads x 256 values) x (1/8 - 1/16) x 2 B = 167,772,160 B more.
    llama = make("H100", "Llama-3-70B", ideal, tp=16)
    assert llama.dense_weight_bytes == 8_818_750_000 - 131_334_144 + 80 * 8192 * 8 * 256 * (1 / 8 - 1 / 16) * 2
    # DeepSeek-V3 on TP8 (fp8 weights, 1 B): the latent down-projections, 61 layers x 7168 x
    # (1536 + 512 + 64) B, are whole on each GPU, 7/8 of them beyond the even split (2,136,403,648 B
    # with the embeddings and LM head at 1 B, 129,280 x 7168 B / 8 = 115,834,880 B each: the input
    # embeddings are not read, the LM head is, in bf16 as the checkpoint keeps it: 2 x 115,834,880 B)
    deepseek = make("H100", "DeepSeek-V3", ideal, tp=8)
    assert deepseek.dense_weight_bytes == pytest.approx(
        2_136_403_648 - 2 * 115_834_880 + 2 * 115_834_880 + 61 * 7168 * 2112 * 7 / 8, rel=1e-12)
    assert deepseek.dense_weight_bytes == pytest.approx(2_944_437_952, rel=1e-12)
    # `cost` prints what `fit` holds (3,176,107,712 B with the embeddings and LM head in bf16: the test of
    # `fit` in test_placement), less the input embeddings: at a batch that touches every expert, all of it
    c = deepseek.cost((), 512, 512 * 1024)
    assert c.weight_bytes == pytest.approx(3_176_107_712 - 2 * 115_834_880 + 81_739_448_320, rel=1e-3)
    # the FLOPs follow the weights: 2 a token per layer weight a GPU holds (8,723,853,872 B of the
    # 8,855,188,016 above are the layers', 2 B each), and 2 per LM head weight (128,256 x 8192 / 16)
    # for each row that takes logits (all 64 of a decode step)
    assert llama.linear_s(64)[2] == pytest.approx(64 * (8_723_853_872 + 2 * 128_256 * 8192 / 16), rel=1e-12)


@pytest.mark.parametrize(("model", "layout", "tp", "segments"), [
    # compress:8:4096 on full layers: δ(a) = (8 − 1)·(4096 − a) tokens below 4,096 (`decode_discount`'s docstring)
    ("Llama-3.1-8B", "compress:8:4096", 1, ((4096, 7 * 4096, 7.0),)),
    # Gemma-3-27B: 62 layers, every 6th global (10), 52 sliding at 1,024: β = 10 layers' entry a token, α = 52 x
    # 1,024 of them, so δ(0) = α/β = 5,324.8 and e = 52/10 (the 52 sliding layers stop growing at 1,024)
    ("Gemma-3-27B", "native", 2, ((1024, 52 * 1024 / 10, 5.2),)),
    # both, in layer entries: at a >= 1,024 the 10 global layers hold 512 + (a − 512)/4 and the 52 sliding ones
    # 512 + 512/4 = 640, so α = 37,120 and β = 2.5; below 512 all 62 hold a. δ(0) = α/β = 14,848, δ(512) =
    # (37,120 + 2.5 x 512 − 62 x 512)/2.5 = 2,662.4, δ(1,024) = 0: slopes 23.8 and 5.2, and c = δ(lo) + e·lo
    ("Gemma-3-27B", "compress:4:512", 2, ((512, 14848.0, 23.8), (1024, 5324.8, 5.2))),
    ("Llama-3.1-8B", "native", 1, ()),
    ("Llama-3.1-8B", "no-sliding", 1, ()),
])
def test_decode_discount_prices_a_short_sequence_at_the_bytes_it_holds(make, ideal, model, layout, tp, segments):
    """`priced_context(a)` is the context whose affine decode price reads the bytes a sequence of ``a``
    attended tokens holds (`sequence_bytes`, a GPU's share): inside, across and past every window."""
    from simulator.kv import sequence_bytes

    sm = make("H100", model, ideal, tp=tp, layout=layout)
    if segments is not None:
        got = sm.decode_discount()
        assert [hi for hi, _, _ in got] == [hi for hi, _, _ in segments]
        assert [x for _, *ce in got for x in ce] == pytest.approx([x for _, *ce in segments for x in ce], rel=1e-12)
    share = sm.cost((), 1, 1e6).kv_bytes / sequence_bytes(sm.model, sm.layout, 1_000_000)  # a GPU's share
    # a compressed entry is rounded up (`simulator.kv._entries`: ceil), the line is not: within an entry a layer
    entry = sequence_bytes(sm.model, replace(sm.layout, compress_ratio=1), 1) * share
    for a in [1, 100, 511, 512, 513, 1000, 1023, 1024, 1025, 4095, 4096, 4097, 50_000]:
        held = sequence_bytes(sm.model, sm.layout, a) * share
        assert sm.cost((), 1, sm.priced_context(a)).kv_bytes == pytest.approx(held, rel=1e-12, abs=entry), a
        assert sm.priced_context_sum(a, 700) == pytest.approx(sum(sm.priced_context(a + j) for j in range(700)),
                                                              rel=1e-12, abs=1e-6)
    assert sm.priced_context_sum(3, 5) == sum(sm.priced_context(a) for a in range(3, 8))
