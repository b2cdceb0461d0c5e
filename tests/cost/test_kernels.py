"""The kernel formulas of `simulator.cost.kernels`, against hand-worked values and brute force."""

import itertools
import math
from dataclasses import replace

import numpy as np
import pytest

from hardware.catalog import load_catalog
from simulator.cost import step_model
from simulator.cost.kernels import decode_kernel_terms, gemm_s, prefill_kernel_s, prefill_schedule

H100 = load_catalog().gpu("H100")


def _brute_schedule(n, c, w):
    """CTA by CTA, as `prefill_schedule`'s docstring describes it."""
    m, g = 128, 64

    def up(x):
        return math.ceil(x / g) * g

    t = math.ceil(n / m)
    cap = up(w + m) if w else math.inf
    scores = longest = 0
    for j in range(t):
        rows, keys = (m, c + (j + 1) * m) if j < t - 1 else (up(n - (t - 1) * m), c + n)
        keys = min(up(keys), cap)
        scores, longest = scores + rows * keys, max(longest, rows * keys)
    return t, scores, longest


def test_prefill_schedule_by_hand():
    # 300 new tokens, nothing cached: CTAs of 128, 128 and 44 -> 64 rows; keys 128, 256, 320
    # scores 128x128 + 128x256 + 64x320 = 69,632; the longest CTA is the second (32,768)
    assert tuple(map(float, prefill_schedule(300))) == (3.0, 69_632.0, 32_768.0)
    # 100 new tokens after 1,000 cached: one CTA of 128 rows against 1,152 keys
    assert tuple(map(float, prefill_schedule(100, 1000))) == (1.0, 147_456.0, 147_456.0)
    # a 256-token window caps every CTA at 384 keys: 1,000 tokens -> 8 CTAs, 7 full
    # (128, 256, then 384 x 5) and a last of 128 rows x 384: 128 x (128 + 256 + 5 x 384 + 384)
    assert tuple(map(float, prefill_schedule(1000, 0, 256))) == (8.0, 128 * (128 + 256 + 5 * 384 + 384), 49_152.0)
    assert tuple(map(float, prefill_schedule(0, 500))) == (0.0, 0.0, 0.0)


def test_prefill_schedule_closed_form_equals_brute_force():
    ns = [*range(1, 300, 7), 383, 384, 385, 1000, 4097]
    for n, c, w in itertools.product(ns, (0, 1, 63, 64, 65, 1000), (0, 1, 64, 100, 128, 129, 1024)):
        got = tuple(float(x) for x in prefill_schedule(n, c, w))
        assert got == pytest.approx(_brute_schedule(n, c, w), rel=1e-12), (n, c, w)


def test_prefill_kernel_by_hand(ideal):
    # 4,096 equal CTAs of 128 x 1,024 scores, d = 128 on H100 (132 SMs), ideal parameters plus a
    # 2 us fixed cost per CTA: 32 waves x 2 us + 4096 x 131,072 x 512 FLOPs / 989.4e12 FLOP/s
    p = replace(ideal, prefill_cta_s=2e-6)
    t, sched, mem = prefill_kernel_s(4096, 4096 * 131_072, 131_072, 0.0, 128, 128, False, False, H100, p)
    assert float(sched) == pytest.approx(32 * 2e-6 + 4096 * 131_072 * 512 / 989.4e12)
    assert float(t) == pytest.approx(float(sched)) and float(mem) == 0.0
    # a single CTA is bound by its own length on one SM (1/132 of the GPU)
    one = prefill_kernel_s(1, 131_072, 131_072, 0.0, 128, 128, False, False, H100, p)[1]
    assert float(one) == pytest.approx(2e-6 + 131_072 * 512 * 132 / 989.4e12)


def test_gemm_parallelism_and_fp8_quantisation(ideal):
    f, b = 2 * 128 * 256 * 1024, (128 * 1024 + 1024 * 256) * 2 + 128 * 256 * 2
    roof = max(f / 989.4e12, b / 3.35e12)
    assert float(gemm_s(f, b, 128, 256, 1024, 989.4e12, False, H100, ideal)) == pytest.approx(roof)
    # 2 output tiles against 10 for full speed, exponent 1: a fifth of the rate
    p = replace(ideal, gemm_full_units=10.0)
    assert float(gemm_s(f, b, 128, 256, 1024, 989.4e12, False, H100, p)) == pytest.approx(5 * roof)
    # split-K slices of 256 make 2 x 4 = 8 units: 8/10 of the rate
    p = replace(p, gemm_split_k_tokens=256.0)
    assert float(gemm_s(f, b, 128, 256, 1024, 989.4e12, False, H100, p)) == pytest.approx(roof / 0.8)
    # an fp8 GEMM quantises its 128 x 1,024 input first
    q = replace(ideal, gemm_quant_s_per_value=1e-12, gemm_fp8_latency_s=3e-6)
    low = float(gemm_s(f, b, 128, 256, 1024, 1978.9e12, True, H100, q))
    assert low == pytest.approx(max(f / 1978.9e12, b / 3.35e12) + 128 * 1024 * 1e-12 + 3e-6)
    # a block-scaled fp8 GEMM takes its own three: half the fp8 rate, 2 ps a value, 4 us
    qb = replace(q, gemm_fp8_block_eff=0.5, gemm_fp8_block_quant_s_per_value=2e-12, gemm_fp8_block_latency_s=4e-6)
    blk = float(gemm_s(f, b, 128, 256, 1024, 1978.9e12, True, H100, qb, block_scaled=True))
    assert blk == pytest.approx(max(f / 989.45e12, b / 3.35e12) + 128 * 1024 * 2e-12 + 4e-6)


def test_decode_kernel_terms_by_hand(ideal):
    # 4 sequences x 8 KV heads = 32 blocks, d = 128, bf16 KV, GQA group 4 (2 x 4 = 8 FLOPs/byte)
    p = replace(ideal, attn_latency_s=5e-6, decode_head_latency_s=10e-9, decode_seq_latency_s=20e-9)
    qo = 2 * 32 * 128 * 2  # Q read and O write of 32 query heads
    fixed, s_b, s_c, s_m = decode_kernel_terms(4, 8, 128, qo, 8.0, False, False, H100, p)
    assert float(fixed) == pytest.approx(5e-6 + 32 * 10e-9 + 4 * 20e-9 + 4 * qo / 3.35e12)
    assert float(s_m) == pytest.approx(1 / 3.35e12) and float(s_c) == pytest.approx(8 / 989.4e12)
    assert float(s_b) == float(s_m)  # p = inf: the hard max; memory-bound
    # half the bandwidth when the grid has decode_half_ctas blocks (q = 1)
    half = replace(p, decode_half_ctas=32.0)
    assert float(decode_kernel_terms(4, 8, 128, qo, 8.0, False, False, H100, half)[3]) == pytest.approx(2 / 3.35e12)
    # no sequences: no kernel, and nothing undefined
    assert [float(x) for x in decode_kernel_terms(0, 8, 128, qo, 8.0, False, False, H100, half)] == [0.0] * 4


@pytest.mark.parametrize("model", ["Llama-3.1-8B", "DeepSeek-V3", "Gemma-3-27B"])
def test_prefill_step_never_gets_cheaper_with_more_tokens(model):
    sm = step_model("H100", model, tp=8 if model == "DeepSeek-V3" else 1)
    for c in (0, 3000):
        ts = np.array([sm.step_s([(n, c)], 0, 0.0) for n in range(1, 4097)])
        assert np.all(np.diff(ts) >= -1e-12 * ts[1:]), (model, c, int(np.argmin(np.diff(ts))) + 1)


@pytest.mark.parametrize(("gpu", "model", "tp"), [("H100", "Llama-3.1-70B", 8), ("B200", "Qwen3-235B-A22B", 8)])
def test_decode_step_never_gets_cheaper_with_a_larger_batch(gpu, model, tp):
    # at 2,000 tokens a sequence; the MoE experts run as grouped GEMMs of their own shape, so
    # crossing a tile boundary of the dense projections does not speed up the expert reads
    sm = step_model(gpu, model, tp=tp)
    ts = np.array([sm.decode_step_s(b, 2000 * b) for b in range(1, 600)])
    assert np.all(np.diff(ts) > 0)


def test_step_accepts_chunks_as_lists():
    sm = step_model("H100", "Llama-3.1-8B")
    assert sm.step_s([[512, 0]], 0, 0.0) == sm.step_s(((512, 0),), 0, 0.0)


def test_fp8_moe_quantises_a_token_once_before_dispatch():
    # DeepSeek-V3 at tp 8: per MoE layer a token's 7,168 hidden values, then its 8 routed copies'
    # intermediates (2,048 / 8 = 256 each a GPU): 58 x (7,168 + 8 x 256) = 534,528 values a token
    sm = step_model("H100", "DeepSeek-V3", tp=8)
    assert sm._expert_quant_per_token == pytest.approx(58 * (7168 + 8 * 2048 / 8), rel=0.01)
