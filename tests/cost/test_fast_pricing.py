"""The engine's hot path prices a step with the same floats as the reference forms, bit for bit.

`PrefillKernel` (Python floats) against `prefill_schedule` / `prefill_kernel_s` (NumPy), `GemmKernel`
against `gemm_s`, and
`StepModel.step_s` against ``StepModel.cost(...).total_s`` and `prefill_attention`'s bytes, over
random chunks on models, layouts and plans that take every branch (GQA, sliding windows, MLA, fp8
KV, cross-layer, DP attention with EP, pipeline stages).
"""

from __future__ import annotations

import dataclasses
import math
import random
from collections.abc import Iterator

import pytest

from hardware.catalog import GPUSpec, load_catalog
from simulator.cost import StepModel, load_params
from simulator.cost.kernels import GemmKernel, PrefillKernel, gemm_s, prefill_kernel_s, prefill_schedule
from simulator.cost.params import CostParams
from simulator.cost.step_model import _kv_shards
from simulator.kv import parse_layout, sequence_bytes
from simulator.models import get_model
from simulator.placement import ParallelPlan

CATALOG = load_catalog()
SHAPES = [(128, 128, False, False), (128, 128, False, True), (192, 128, True, False), (192, 128, True, True),
          (64, 64, False, False), (96, 96, False, True), (256, 256, False, False)]


def _gpu_params(gpu_key: str, overlap_p: float | None) -> tuple[GPUSpec, CostParams]:
    """The GPU and its calibrated cost parameters, with the smooth maximum's exponent `overlap_p` if given."""
    gpu = CATALOG.gpu(gpu_key)
    p = load_params(gpu.key)
    return gpu, (p if overlap_p is None else dataclasses.replace(p, attn_overlap_p=overlap_p))


def _chunk(rng: random.Random) -> tuple[float, float]:
    """A random prefill chunk ``(new, cached)``: small, large or tile-sized, after no, a long or a short prefix."""
    n = float(rng.choice([rng.randint(1, 600), rng.randint(1, 20000), 512, 128, 64, 1]))
    return n, float(rng.choice([0, rng.randint(0, 100000), rng.randint(0, 600)]))


@pytest.mark.parametrize("gpu_key", ["H100", "B200"])
@pytest.mark.parametrize("overlap_p", [None, math.inf, 2.5])
def test_prefill_kernel_on_floats_is_the_numpy_form(gpu_key: str, overlap_p: float | None) -> None:
    gpu, p = _gpu_params(gpu_key, overlap_p)
    rng = random.Random(1)
    for d, dv, mla, fp8 in SHAPES:
        kernel = PrefillKernel(d, dv, mla, fp8, gpu, p)
        for _ in range(400):
            n, c = _chunk(rng)
            w = rng.choice([0, 0, 4096, 1024, 100, 128, 129])
            sched = kernel.schedule(n, c, w)
            assert sched == tuple(float(x) for x in prefill_schedule(n, c, w)), (n, c, w)
            h, nbytes = rng.choice([8.0, 16.0, 64.0, 128.0]), rng.uniform(0, 1e10)
            ref = tuple(float(x) for x in prefill_kernel_s(h * sched[0], h * sched[1], sched[2], nbytes, d, dv, mla,
                                                          fp8, gpu, p, n, h))
            assert kernel.seconds(h * sched[0], h * sched[1], sched[2], nbytes, n, h) == ref
            if not w:
                assert kernel.chunk_s(n, c, nbytes, h) == ref[0]


@pytest.mark.parametrize("gpu_key", ["H100", "B200"])
@pytest.mark.parametrize("overlap_p", [None, math.inf, 1.0])
def test_gemm_kernel_on_floats_is_the_numpy_form(gpu_key: str, overlap_p: float | None) -> None:
    """Every dtype branch (bf16, fp8 per tensor, fp8 block-scaled, fp4), shapes from one column tile
    (``u < 1``) to many, token counts from 1 to a long prefill."""
    gpu = CATALOG.gpu(gpu_key)
    p = load_params(gpu.key)
    if overlap_p is not None:
        p = dataclasses.replace(p, gemm_overlap_p=overlap_p)
    rng = random.Random(4)
    dtypes = [("bf16", False, False, False), ("fp8", True, False, False), ("fp8", True, True, False),
              ("fp4", True, False, True)]
    for dtype, low, blk, fp4 in dtypes:
        peak = gpu.peak_flops("fp8" if fp4 and gpu.fp4_flops <= 0 else dtype)  # H100 has no fp4 peak: any will do
        for _ in range(60):
            n, k = float(rng.choice([64, 128, 1000, 7168, 28672])), float(rng.choice([128, 4096, 8192, 16384]))
            groups = float(rng.choice([1, 1, 3, 8.5]))
            kernel = GemmKernel(n, k, peak, low, gpu, p, groups=groups, block_scaled=blk, fp4=fp4)
            for _ in range(10):
                m = float(rng.choice([1, rng.randint(1, 300), rng.randint(1, 20000)]))
                flops, nbytes, quant = 2 * m * n * k * groups, rng.uniform(1e3, 1e10), m * k * rng.uniform(0.1, 2)
                ref = float(gemm_s(flops, nbytes, m, n, k, peak, low, gpu, p, groups=groups, block_scaled=blk,
                                   quant_values=quant, fp4=fp4))
                assert kernel.seconds(flops, nbytes, quant) == ref, (dtype, n, k, groups, m)


CASES = [("H100", "Llama-3.1-8B", 1, "native", None), ("H100", "Llama-3-70B", 8, "native", None),
         ("H100", "Gemma-3-27B", 2, "native", None), ("H200", "DeepSeek-V3", 8, "native", None),
         ("H100", "Llama-3.1-70B", 4, "fp8", None), ("H100", "Llama-3.1-8B", 1, "mla", None),
         ("H100", "Llama-3.1-8B", 1, "cross-layer", None), ("H100", "Llama-3.1-8B", 1, "compress", None),
         ("B200", "Qwen3-235B-A22B", 8, "native", ParallelPlan(tp=8, dp_attention=True, ep=8)),
         ("H100", "Llama-3.1-70B", 8, "native", ParallelPlan(tp=8, pp=2))]


def _model(gpu_key: str, model: str, tp: int, layout: str, plan: ParallelPlan | None) -> StepModel:
    gpu = CATALOG.gpu(gpu_key)
    node = CATALOG.node(f"8x{gpu_key}") if plan else None
    return StepModel(gpu, get_model(model), parse_layout(layout), tp, load_params(gpu.key), plan=plan, node=node)


@pytest.mark.parametrize(("gpu_key", "model", "tp", "layout", "plan"), CASES)
def test_linear_layers_are_gemm_s(gpu_key: str, model: str, tp: int, layout: str, plan: ParallelPlan | None) -> None:
    """`StepModel._gemms` (through `GemmKernel`) is ``count · gemm_s`` of its shape, bit for bit."""
    sm = _model(gpu_key, model, tp, layout, plan)
    rng = random.Random(5)
    for _ in range(200):
        tokens = float(rng.choice([1, rng.randint(1, 300), rng.randint(1, 20000)]))
        count, n = rng.choice([1, 7, sm._gemm_count]), rng.choice([sm._gemm_n, 1000.0])
        flops, nbytes, quant = sm._lin_flops_per_token * tokens, sm._dense_weight_bytes, tokens * rng.uniform(1, 9e4)
        ref = count * float(gemm_s(flops / count, nbytes / count, tokens, n, sm._gemm_k, sm._peak, sm._low, sm.gpu,
                                   sm.params, block_scaled=sm._blk, fp4=sm._fp4, quant_values=quant / count))
        assert sm._gemms(count, flops, nbytes, tokens, n, quant) == ref, (tokens, count, n)


def _steps(seed: int, count: int) -> Iterator[tuple[list[tuple[int, int]], int, int]]:
    """`count` random steps ``(chunks, decode batch, decode context)``: none, one or a few chunks
    (some empty), short and long, after no, short or long contexts; a decode batch or none."""
    rng = random.Random(seed)
    for _ in range(count):
        chunks = [(rng.choice([rng.randint(1, 512), rng.randint(1, 9000), 0]),
                   rng.choice([0, rng.randint(0, 60000), rng.randint(0, 600)]))
                  for _ in range(rng.choice([0, 1, 1, 2, 3]))]
        b = rng.choice([0, rng.randint(1, 256)])
        yield chunks, b, rng.randint(b, b * 8000) if b else 0


def _chunk_bytes(sm: StepModel, n: int, c: int) -> float:
    """A chunk's attention bytes from `sequence_bytes` (what `StepModel._chunk_bytes` inlines for a plain
    layout): the KV cache's over its shards (MLA: decompressed K and V, as many as Q and O), plus Q and O."""
    n_l, total = sm.model.n_layers, c + n
    if sm._mla:
        kv = n_l * total * sm._qo_bytes
    else:
        kv = sequence_bytes(sm.model, sm.layout, int(total)) / _kv_shards(sm.model, sm.layout, sm._attn_tp)
    return kv + n_l * n * sm._qo_bytes


@pytest.mark.parametrize(("gpu_key", "model", "tp", "layout", "plan"), CASES)
def test_step_s_is_the_cost_breakdowns_total(gpu_key: str, model: str, tp: int, layout: str,
                                             plan: ParallelPlan | None) -> None:
    sm = _model(gpu_key, model, tp, layout, plan)
    for chunks, b, ctx in _steps(2, 600):
        first, again = sm.step_s(chunks, b, ctx), sm.step_s(list(chunks), b, ctx)  # a miss, then the memo
        assert first == again == sm.cost(chunks, b, ctx).total_s, (chunks, b, ctx)
        for n, c in chunks:
            if n > 0:
                assert sm._chunk_bytes(float(n), float(c)) == _chunk_bytes(sm, n, c), (n, c)


@pytest.mark.parametrize(("gpu_key", "model", "tp", "layout", "plan"), CASES)
def test_utilisation_is_the_cost_breakdowns(gpu_key: str, model: str, tp: int, layout: str,
                                            plan: ParallelPlan | None) -> None:
    """What a time-series sample records (MFU, HBM share) is `cost`'s, to the last bit."""
    sm = _model(gpu_key, model, tp, layout, plan)
    hbm_bytes_per_s = CATALOG.gpu(gpu_key).hbm_bytes_per_s
    for chunks, b, ctx in _steps(3, 300):
        c = sm.cost(chunks, b, ctx)
        mfu, hbm = sm.utilisation(chunks, b, ctx)
        assert mfu == c.mfu, (chunks, b, ctx)
        if c.total_s > 0:
            assert hbm == c.bytes / (c.total_s * hbm_bytes_per_s), (chunks, b, ctx)
        else:
            assert math.isnan(hbm)


@pytest.mark.parametrize("gpu_key", ["H100", "B200"])
@pytest.mark.parametrize("overlap_p", [None, math.inf, 2.5])
def test_prefill_kernel_over_several_chunks_is_the_summed_schedule(gpu_key: str, overlap_p: float | None) -> None:
    """`PrefillKernel.chunks_s` (fused) is `seconds` over the chunks' `schedule` sums, bit for bit."""
    gpu, p = _gpu_params(gpu_key, overlap_p)
    rng = random.Random(6)
    for d, dv, mla, fp8 in SHAPES:
        kernel = PrefillKernel(d, dv, mla, fp8, gpu, p)
        for _ in range(300):
            chunks = [_chunk(rng) for _ in range(rng.randint(1, 5))]
            h, nbytes, tokens = rng.choice([8.0, 16.0, 64.0, 128.0]), rng.uniform(0, 1e10), sum(n for n, _ in chunks)
            ctas = scores = longest = 0.0
            for n, c in chunks:  # as `StepModel._prefill_attention_s` sums them
                t, sc, lg = kernel.schedule(n, c, 0)
                ctas, scores, longest = ctas + t, scores + sc, max(longest, lg)
            ref = kernel.seconds(h * ctas, h * scores, longest, nbytes, tokens, h)[0]
            assert kernel.chunks_s(chunks, nbytes, tokens, h) == ref, chunks


@pytest.mark.parametrize(("gpu_key", "model", "tp", "layout", "plan"), CASES)
def test_several_chunks_fused_are_the_reference(gpu_key: str, model: str, tp: int, layout: str,
                                                plan: ParallelPlan | None) -> None:
    """A step of several chunks (`StepModel._chunks_s`) is `_prefill_attention_s`'s float, on every
    layout (windows, MLA, fp8 KV, cross-layer, compression: the fused form where it applies, the
    reference elsewhere)."""
    sm = _model(gpu_key, model, tp, layout, plan)
    for chunks, _, _ in _steps(7, 400):
        assert sm._chunks_s(chunks) == sm._prefill_attention_s(chunks)[0], chunks
