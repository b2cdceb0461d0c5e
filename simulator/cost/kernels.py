"""Kernel-level rooflines: GEMM, attention and all-reduce times for arrays of shapes.

These are the same formulas the step model uses (`simulator.cost.step_model`), written for
one kernel call so that measured kernel tables (aiconfigurator, `hardware/measure_attention.py`)
can fit the efficiencies. All inputs are NumPy arrays or floats; times in seconds.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.typing import NDArray

from hardware.catalog import GPUSpec
from simulator.cost.params import (
    ACTIVATION_BYTES,
    ATTENTION_DTYPE,
    GEMM_TILE,
    MAIN_HEAD_DIMS,
    MLA_DECODE_HEAD_TILE,
    PREFILL_GRAIN_TOKENS,
    PREFILL_TILE_TOKENS,
    CostParams,
)

Array = NDArray[np.float64]
OP_CLASSES = (
    "gemm",
    "context_attention",
    "generation_attention",
    "mla_context",
    "mla_generation",
    "all_reduce",
)
LOW_PRECISION_BYTES = 1.0  # an input or KV element of this many bytes is fp8
NEW_TERMS_ENTRIES = 1 << 12  # chunk sizes whose terms a `PrefillKernel` remembers


def work(op: str, cols: dict[str, Any]) -> tuple[Array, Array]:
    """(flops, bytes) of each row of an op class.

    - ``gemm``: ``2mnk`` FLOPs; ``(mk + kn)·in_bytes + mn·2`` bytes.
    - ``context_attention`` (causal, no cached prefix): ``b · 2h(2d) · s(s+1)/2`` FLOPs;
      ``b · s · (2·h·d·2 + 2·kvh·d·kv_bytes)`` bytes (Q, O, K, V).
    - ``generation_attention``: ``b · 4hd · ctx`` FLOPs; ``b · ctx · 2·kvh·d·kv_bytes + b · 2hd · 2``
      bytes (K/V, then Q and O).
    - ``mla_generation`` (absorbed, latent rank r = 512, rope 64, ``q`` query tokens a sequence,
      default 1): ``b · q · h · (2(r+rope) + 2r) · ctx`` FLOPs; ``b · ctx · (r + rope) · kv_bytes``
      bytes (the latent; its Q/O traffic is priced in `decode_kernel_terms`).
    - ``mla_context`` (decompressed, d_qk = 192, d_v = 128): ``b · 2h(d_qk + d_v) · s(s+1)/2`` FLOPs;
      ``b · s · h · (2·d_qk + 2·d_v) · 2`` bytes.
    - ``all_reduce``: no FLOPs; ``message_bytes`` in ``bytes``.
    """
    f = {k: np.asarray(v, dtype=np.float64) for k, v in cols.items() if k != "dtype"}
    if op == "gemm":
        m, n, k, ib = f["m"], f["n"], f["k"], f["in_bytes"]
        return 2 * m * n * k, (m * k + k * n) * ib + m * n * ACTIVATION_BYTES
    if op == "context_attention":
        b, s, h, kvh, d, kvb = f["b"], f["s"], f["h"], f["kvh"], f["d"], f["kv_bytes"]
        return b * 4 * h * d * s * (s + 1) / 2, b * s * (2 * h * d * ACTIVATION_BYTES + 2 * kvh * d * kvb)
    if op == "generation_attention":
        b, c, h, kvh, d, kvb = f["b"], f["ctx"], f["h"], f["kvh"], f["d"], f["kv_bytes"]
        return b * 4 * h * d * c, b * c * 2 * kvh * d * kvb + b * 2 * h * d * ACTIVATION_BYTES
    if op == "mla_generation":
        b, c, h, kvb, r, rope = f["b"], f["ctx"], f["h"], f["kv_bytes"], f["rank"], f["rope"]
        q = f.get("q", np.ones_like(b))
        return b * q * h * (2 * (r + rope) + 2 * r) * c, b * c * (r + rope) * kvb
    if op == "mla_context":
        b, s, h, dqk, dv = f["b"], f["s"], f["h"], f["d_qk"], f["d_v"]
        return b * 2 * h * (dqk + dv) * s * (s + 1) / 2, b * s * h * (2 * dqk + 2 * dv) * ACTIVATION_BYTES
    if op == "all_reduce":
        return np.zeros_like(f["message_bytes"]), f["message_bytes"]
    raise ValueError(f"unknown op class {op!r}; valid: {', '.join(OP_CLASSES)}")


def smooth_max(a: Any, b: Any, p: float = math.inf) -> Any:
    """``(a^p + b^p)^(1/p)`` for ``a, b >= 0`` (floats or arrays): ``max(a, b)`` when ``p = inf``,
    ``a + b`` when ``p = 1``.

    Kernels overlap compute with memory traffic imperfectly near the ridge point; a finite
    ``p`` rounds the roofline's corner (at ``a = b`` the time is ``2^(1/p)`` times the max).
    """
    hi, lo = np.maximum(a, b), np.minimum(a, b)
    if np.isinf(p):
        return hi
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.where(hi > 0, lo / hi, 0.0)
    return hi * (1.0 + r**p) ** (1.0 / p)


def gemm_s(
    flops: Any,
    bytes_: Any,
    m: Any,
    n: Any,
    k: Any,
    peak_flops: Any,
    low_precision: Any,
    gpu: GPUSpec,
    p: CostParams,
    groups: Any = 1.0,
    block_scaled: Any = False,
    quant_values: Any = None,
    fp4: Any = False,
) -> Any:
    """Seconds of GEMM kernels (floats or NumPy arrays, element-wise)::

        units = groups · ceil(n / 128) · max(1, k / gemm_split_k_tokens)
        u     = min(1, units / gemm_full_units) ^ gemm_parallel_exp
        t_c0  = flops / (peak_flops · gemm_compute_eff · [gemm_fp8_eff]) / u
        t_c   = t_c0 · (1 + gemm_power_derate · t_c0 / (t_c0 + gemm_power_time_s))
        t_m   = bytes / (hbm_bytes_per_s · gemm_memory_eff) / u  {· gemm_fp4_memory_factor}
        t_k   = gemm_k_step_s · min(k, gemm_serial_k_tokens)
                {fp4: gemm_k_step_s · gemm_fp4_k_factor · min(k, gemm_fp4_serial_k_tokens)}
        t     = smax_p(smax_p(t_c, t_m), t_k) + gemm_latency_s
                [+ groups · m · k · gemm_quant_s_per_value + gemm_fp8_latency_s]

    with ``p = gemm_overlap_p``; the braced terms apply to fp4 GEMMs only, the bracketed ones to
    low-precision (fp8/fp4) GEMMs only:
    `peak_flops` is the dense peak of the GEMM's dtype, and each low-precision call quantises its
    ``m × k`` input first (`quant_values` in its place when the caller knows better: a
    row-parallel GEMM's input is sharded, an MoE layer quantises a token once before dispatch); a
    `block_scaled` one (a scale per 128×128 weight block) takes
    `gemm_fp8_block_eff`, `gemm_fp8_block_latency_s` and `gemm_fp8_block_quant_s_per_value` in
    their place, an `fp4` one (NVFP4, against the fp4 peak) `gemm_fp4_eff`, `gemm_fp4_latency_s`
    and `gemm_fp4_quant_s_per_value`. A GEMM with few output column tiles and a short ``k`` cannot keep
    every SM busy (``u < 1``): the library spreads a GEMM's rows over the SMs as it needs (split-K,
    smaller tiles), so rows add no parallelism of their own and a GEMM never gets faster with more
    of them. `groups` is the number of equal GEMMs one grouped kernel runs (MoE experts, each
    ``m × n × k``); `flops` and `bytes_` are totals, passed apart from the shape so that an MoE
    step can charge the experts its tokens touch. ``t_k``
    is one thread block's serial main loop over its ``k`` slice (the floor of a small GEMM: the
    kernel splits ``k`` beyond `gemm_serial_k_tokens`); long compute-bound kernels run at a
    lower clock (power limit), ``t_c`` growing by up to `gemm_power_derate`.
    """
    low, blk = np.asarray(low_precision, dtype=bool), np.asarray(block_scaled, dtype=bool)
    f4 = np.asarray(fp4, dtype=bool)
    eff = np.where(f4, p.gemm_fp4_eff, np.where(blk, p.gemm_fp8_block_eff, p.gemm_fp8_eff))
    peak = peak_flops * np.where(low, eff, 1.0)
    units = groups * np.ceil(n / GEMM_TILE) * np.maximum(1.0, k / p.gemm_split_k_tokens)
    u = np.minimum(1.0, units / p.gemm_full_units) ** p.gemm_parallel_exp
    tc = flops / (peak * p.gemm_compute_eff) / u
    tc = tc * (1.0 + p.gemm_power_derate * tc / (tc + p.gemm_power_time_s))
    tm = bytes_ / (gpu.hbm_bytes_per_s * p.gemm_memory_eff) / u * np.where(f4, p.gemm_fp4_memory_factor, 1.0)
    serial_k = np.where(f4, p.gemm_fp4_serial_k_tokens, p.gemm_serial_k_tokens)
    tk = p.gemm_k_step_s * np.minimum(k, serial_k) * np.where(f4, p.gemm_fp4_k_factor, 1.0)
    quant = np.where(
        f4, p.gemm_fp4_quant_s_per_value, np.where(blk, p.gemm_fp8_block_quant_s_per_value, p.gemm_quant_s_per_value)
    )
    lat8 = np.where(f4, p.gemm_fp4_latency_s, np.where(blk, p.gemm_fp8_block_latency_s, p.gemm_fp8_latency_s))
    values = groups * m * k if quant_values is None else quant_values
    extra = np.where(low, values * quant + lat8, 0.0)
    return smooth_max(smooth_max(tc, tm, p.gemm_overlap_p), tk, p.gemm_overlap_p) + p.gemm_latency_s + extra


class GemmKernel:
    """`gemm_s` of one GEMM shape (``n``, ``k``, `groups`, dtype) on Python floats: the linear layers'
    hot path (a step of a token count not seen before prices its GEMMs anew: chunked prefill with
    cached prefixes does so at most steps).

    What depends on the shape alone (``u``, ``t_k``, the efficiencies, the fixed latency) is worked
    out once, by `gemm_s`'s own NumPy expressions; a call does the rest with the same operations in
    the same order, hence the same floats (tested bit for bit against `gemm_s`). Each smooth maximum's
    first power goes through NumPy's ufunc on a 0-d array, as `smooth_max` does (the C library's
    ``pow`` may differ from it in the last bit); its second is a scalar power, as there.
    """

    __slots__ = ("_hbm", "_lat", "_low", "_mem", "_overlap", "_peak", "_power", "_quant", "_tk", "_u")

    def __init__(self, n: float, k: float, peak_flops: float, low_precision: bool, gpu: GPUSpec, p: CostParams,
                 groups: float = 1.0, block_scaled: bool = False, fp4: bool = False) -> None:
        f4, blk = fp4, block_scaled
        eff = np.where(f4, p.gemm_fp4_eff, np.where(blk, p.gemm_fp8_block_eff, p.gemm_fp8_eff))
        self._peak = float(peak_flops * np.where(low_precision, eff, 1.0) * p.gemm_compute_eff)
        units = groups * np.ceil(n / GEMM_TILE) * np.maximum(1.0, k / p.gemm_split_k_tokens)
        self._u = float(np.minimum(1.0, units / p.gemm_full_units) ** p.gemm_parallel_exp)
        self._power = (p.gemm_power_derate, p.gemm_power_time_s)
        self._hbm = gpu.hbm_bytes_per_s * p.gemm_memory_eff
        self._mem = float(np.where(f4, p.gemm_fp4_memory_factor, 1.0))
        serial_k = np.where(f4, p.gemm_fp4_serial_k_tokens, p.gemm_serial_k_tokens)
        self._tk = float(p.gemm_k_step_s * np.minimum(k, serial_k) * np.where(f4, p.gemm_fp4_k_factor, 1.0))
        self._low = bool(low_precision)
        quant = np.where(f4, p.gemm_fp4_quant_s_per_value,
                         np.where(blk, p.gemm_fp8_block_quant_s_per_value, p.gemm_quant_s_per_value))
        lat8 = np.where(f4, p.gemm_fp4_latency_s, np.where(blk, p.gemm_fp8_block_latency_s, p.gemm_fp8_latency_s))
        self._quant = (float(quant), float(lat8))
        self._lat = p.gemm_latency_s
        self._overlap = _overlap(p.gemm_overlap_p)

    def seconds(self, flops: float, bytes_: float, quant_values: float) -> float:
        """``gemm_s(flops, bytes_, m, n, k, ..., quant_values=quant_values)`` of this shape (floats)."""
        u = self._u
        tc = flops / self._peak / u
        derate, time_s = self._power
        tc = tc * (1.0 + derate * tc / (tc + time_s))
        tm = bytes_ / self._hbm / u * self._mem
        if self._low:
            quant, lat8 = self._quant
            extra = quant_values * quant + lat8
        else:
            extra = 0.0
        overlap = self._overlap
        return _smooth_max_float(_smooth_max_float(tc, tm, overlap), self._tk, overlap) + self._lat + extra


Overlap = tuple[float, Any, float]
"""A smooth maximum's exponent as `_smooth_max_float` takes it (`_overlap`): ``(p, p as a 0-d array, 1 / p)``."""


def _overlap(p: float) -> Overlap:
    """The exponent `p` (≥ 1: `simulator.cost.params.SHAPES`) of a kernel's smooth maximum, with what its powers
    take worked out once: `p` as a 0-d array, the power ufunc's operand converted once, not at every call, and
    ``1 / p`` (the same float `smooth_max` divides out)."""
    return p, np.asarray(p), 1.0 / p


def _smooth_max_float(a: float, b: float, overlap: Overlap) -> float:
    """`smooth_max` of two floats, with the same operations: its first power NumPy's ``power`` ufunc on a 0-d
    array, as ``r**p`` calls it for an exponent ≥ 1 (0.5 alone would take ``sqrt``), with the exponent already an
    array; the rest on Python floats, the same IEEE operations as on NumPy's float64 scalars (its ``**`` is C's
    ``pow``, as Python's: ≥ 1 to a finite power). ~6.4 k instructions a call against 9.1 k on NumPy scalars
    with the exponent converted at each (11.6 k calls in vidur 10000)."""
    hi, lo = (a, b) if a >= b else (b, a)
    p, p_array, inv = overlap
    if p == math.inf:
        return hi
    r = lo / hi if hi > 0.0 else 0.0  # (a float's comparison with 0.0, not 0: 3.11 specialises it)
    return hi * (1.0 + float(np.power(r, p_array))) ** inv


def prefill_schedule(new: Any, cached: Any = 0.0, window: float = 0.0) -> tuple[Any, Any, Any]:
    """``(ctas, scores, longest)`` of one causal prefill chunk per query head (floats or arrays).

    A chunk of ``n`` new tokens after ``c`` cached ones runs ``T = ceil(n / M)`` thread blocks
    (CTAs) of ``M = PREFILL_TILE_TOKENS`` query rows. CTA ``j`` scores its rows against
    ``k_j = c + min(n, (j+1)·M)`` keys (the whole cached prefix, causal over the new tokens),
    capped at ``w + M`` in a sliding-window layer of window ``w``; a partial tile's rows and keys
    are rounded up to ``g = PREFILL_GRAIN_TOKENS``. With ``C = ceil_g(c)`` and ``K = ceil_g(w + M)``
    (``inf`` without a window), the ``J`` full CTAs below the cap and the last CTA give::

        scores  = M · (J·C + M·J(J+1)/2 + (T−1−J)·K) + r_T · k_T
        longest = max(M · min(C + (T−1)·M, K), r_T · k_T)
        r_T = ceil_g(n − (T−1)·M),  k_T = min(ceil_g(c + n), K)
    """
    m, g = float(PREFILL_TILE_TOKENS), float(PREFILL_GRAIN_TOKENS)
    n, c = np.asarray(new, dtype=np.float64), np.asarray(cached, dtype=np.float64)
    t = np.ceil(n / m)
    cg = np.ceil(c / g) * g
    cap = np.ceil((window + m) / g) * g if window else np.inf
    j = np.clip(np.ceil((cap - cg) / m) - 1.0, 0.0, t - 1.0) if window else t - 1.0
    full = m * (j * cg + m * j * (j + 1) / 2 + (t - 1 - j) * np.minimum(cap, 1e300) * (t - 1 > j))
    r_last = np.ceil((n - (t - 1) * m) / g) * g
    k_last = np.minimum(np.ceil((c + n) / g) * g, cap)
    last = r_last * k_last * (n > 0)
    longest = np.maximum(m * np.minimum(cg + (t - 1) * m, cap) * (t > 1), last)
    return t, full * (t > 1) + last, longest


def prefill_kernel_s(
    ctas: Any,
    scores: Any,
    longest: Any,
    bytes_: Any,
    head_dim: Any,
    v_head_dim: Any,
    mla: Any,
    fp8_kv: Any,
    gpu: GPUSpec,
    p: CostParams,
    tokens: Any = 0.0,
    heads: Any = 0.0,
) -> tuple[Any, Any, Any]:
    """``(seconds, schedule s, memory s)`` of one prefill attention kernel call (element-wise).

    `ctas`, `scores` and `longest` are summed over the call's chunks and heads
    (`prefill_schedule` times the heads; `longest` is the largest CTA's scores)::

        τ       = (2(d + d_v) + prefill_pair_flops) / (peak_bf16 / sm_count · attn_compute_eff · f_d · [f_mla])
                  · [prefill_fp8_factor | mla_prefill_fp8_factor]   SM-seconds per (query, key) score
        t_sched = max(ceil(ctas / sm_count) · prefill_cta_s + τ · scores / sm_count,
                      prefill_cta_s + τ · longest · [mla_prefill_longest_factor])
        t_mem   = bytes / (hbm_bytes_per_s · attn_memory_eff) · [mla_prefill_memory_factor]
        t       = smax_p(t_sched, t_mem) + prefill_latency_s + [fp8 KV: prefill_fp8_latency_s]   (p = attn_overlap_p)
        MLA:      + tokens · mla_prefill_token_s, and over fp8 KV, in place of prefill_fp8_latency_s,
                  + mla_prefill_fp8_latency_s + tokens · heads · (2d + d_v) · mla_prefill_quant_s_per_value

    The SMs share the scores evenly and pay each wave's fixed block cost, and the longest causal
    CTA bounds a call with few of them (both terms only grow when work is added). ``f_d`` is
    `prefill_d64_factor` at head dim 64, `prefill_odd_d_factor` outside
    `MAIN_HEAD_DIMS` (not for MLA), else 1; ``f_mla`` is `mla_prefill_compute_factor` for an MLA
    prefill (K/V decompressed, one KV head per query head); brackets: fp8 KV or MLA only. An MLA
    prefill also pays per new token (`tokens`, over the call's sequences) the passes that do not
    scale with the heads (latent KV-cache append, RoPE of the shared key part), its lone longest
    CTA runs at its own rate (`mla_prefill_longest_factor`), and over an fp8 KV cache it runs
    the fp8 kernel after quantising Q, K and V (``2d + d_v`` values per token and query head,
    `heads` per GPU).
    """
    d = np.asarray(head_dim, dtype=np.float64)
    is_mla, low = np.asarray(mla, dtype=bool), np.asarray(fp8_kv, dtype=bool)
    sms = float(gpu.sm_count)
    main = np.logical_or.reduce([d == x for x in MAIN_HEAD_DIMS])
    odd = np.where(main | is_mla, 1.0, p.prefill_odd_d_factor)
    f_d = np.where(d == 64, p.prefill_d64_factor, odd)
    eff = p.attn_compute_eff * f_d * np.where(is_mla, p.mla_prefill_compute_factor, 1.0)
    tau = (2 * (d + v_head_dim) + p.prefill_pair_flops) / (gpu.peak_flops(ATTENTION_DTYPE) / sms * eff)
    tau = tau * np.where(low, np.where(is_mla, p.mla_prefill_fp8_factor, p.prefill_fp8_factor), 1.0)
    ctas = np.maximum(ctas, 1.0)
    lone = tau * longest * np.where(is_mla, p.mla_prefill_longest_factor, 1.0)
    t_sched = np.maximum(np.ceil(ctas / sms) * p.prefill_cta_s + tau * scores / sms, p.prefill_cta_s + lone)
    t_mem = bytes_ / (gpu.hbm_bytes_per_s * p.attn_memory_eff) * np.where(is_mla, p.mla_prefill_memory_factor, 1.0)
    quant = p.mla_prefill_fp8_latency_s + tokens * heads * (2 * d + v_head_dim) * p.mla_prefill_quant_s_per_value
    lat = p.prefill_latency_s + np.where(low, np.where(is_mla, quant, p.prefill_fp8_latency_s), 0.0)
    lat = lat + np.where(is_mla, tokens * p.mla_prefill_token_s, 0.0)
    return smooth_max(t_sched, t_mem, p.attn_overlap_p) + lat, t_sched, t_mem


class PrefillKernel:
    """`prefill_schedule` and `prefill_kernel_s` of one attention shape on Python floats: the engine's hot path.

    A chunked prefill prices a new ``(new, cached)`` pair almost every step, so the NumPy forms
    (whose per-call overhead is most of their cost on scalars) would dominate a run. These are the
    same formulas with the same operations in the same order, hence the same floats (tested bit for
    bit against the NumPy forms): IEEE ``+ − × ÷`` round the same in C, NumPy and Python, and
    ``ceil``, ``min`` and ``max`` are exact. The shape's constants (``τ``, the memory rate, the
    latencies) are worked out once. The one transcendental step, the smooth maximum's first power,
    goes through NumPy's ufunc as `smooth_max` does: NumPy's SIMD ``power`` and the C library's
    ``pow`` may differ in the last bit.
    """

    __slots__ = ("_cta_s", "_lat", "_lat_low", "_lone", "_mem", "_mla", "_new_terms", "_overlap", "_quant", "_sms",
                 "_tau", "_token_s")

    def __init__(self, head_dim: float, v_head_dim: float, mla: bool, fp8_kv: bool, gpu: GPUSpec,
                 p: CostParams) -> None:
        d = float(head_dim)
        self._sms = sms = float(gpu.sm_count)
        main = d in MAIN_HEAD_DIMS
        odd = 1.0 if (main or mla) else p.prefill_odd_d_factor
        f_d = p.prefill_d64_factor if d == 64 else odd
        eff = p.attn_compute_eff * f_d * (p.mla_prefill_compute_factor if mla else 1.0)
        tau = (2 * (d + v_head_dim) + p.prefill_pair_flops) / (gpu.peak_flops(ATTENTION_DTYPE) / sms * eff)
        self._tau = tau * ((p.mla_prefill_fp8_factor if mla else p.prefill_fp8_factor) if fp8_kv else 1.0)
        self._lone = p.mla_prefill_longest_factor if mla else 1.0
        self._cta_s = p.prefill_cta_s
        self._mem = (gpu.hbm_bytes_per_s * p.attn_memory_eff, p.mla_prefill_memory_factor if mla else 1.0)
        self._mla = mla
        # latency: prefill_latency_s [+ fp8: prefill_fp8_latency_s | MLA over fp8: quant(tokens)] [+ MLA: per token]
        self._lat = p.prefill_latency_s
        self._lat_low = (p.prefill_fp8_latency_s if fp8_kv and not mla else None)
        self._quant = ((p.mla_prefill_fp8_latency_s, 2 * d + v_head_dim, p.mla_prefill_quant_s_per_value)
                       if fp8_kv and mla else None)
        self._token_s = p.mla_prefill_token_s
        self._overlap = _overlap(p.attn_overlap_p)
        self._new_terms: dict[tuple[float, float], tuple[float, ...]] = {}  # `_terms`, by (new tokens, heads)

    @staticmethod
    def schedule(n: float, c: float, window: float) -> tuple[float, float, float]:
        """`prefill_schedule` of one chunk of `n` > 0 new tokens after `c` cached ones (floats)."""
        m, g = float(PREFILL_TILE_TOKENS), float(PREFILL_GRAIN_TOKENS)
        ceil = math.ceil
        t = float(ceil(n / m))
        cg = float(ceil(c / g)) * g
        if window:
            cap = float(ceil((window + m) / g)) * g
            j = min(max(float(ceil((cap - cg) / m)) - 1.0, 0.0), t - 1.0)
        else:
            cap = math.inf
            j = t - 1.0
        many = 1.0 if t > 1 else 0.0
        full = m * (j * cg + m * j * (j + 1) / 2 + (t - 1 - j) * min(cap, 1e300) * (1.0 if t - 1 > j else 0.0))
        r_last = float(ceil((n - (t - 1) * m) / g)) * g
        k_last = min(float(ceil((c + n) / g)) * g, cap)
        last = r_last * k_last * (1.0 if n > 0 else 0.0)
        longest = max(m * min(cg + (t - 1) * m, cap) * many, last)
        return t, full * many + last, longest

    def _latency_s(self, n: float, heads: float) -> float:
        """The fixed seconds of a call over `n` new tokens (one chunk's, or a step's chunks'): the
        kernel's latency, plus an fp8 KV cache's quantisation (or its fixed cost), plus MLA's
        per-token passes."""
        lat = self._lat
        if self._quant is not None:
            q0, per_token, q = self._quant
            lat = lat + (q0 + n * heads * per_token * q)
        elif self._lat_low is not None:
            lat = lat + self._lat_low
        else:
            lat = lat + 0.0
        if self._mla:
            lat = lat + n * self._token_s
        return lat

    def _terms(self, n: float, heads: float) -> tuple[float, ...]:
        """What the price of a chunk of `n` > 0 new tokens in a full-attention layer takes from `n` and
        `heads` alone, worked out once: ``(j, many, tri, r_last, reach, grid_s, lat)``: ``J = T − 1`` for
        ``T`` tiles, 1 for more than one tile (else 0), ``M·J(J+1)/2``, ``r_T``, ``(T − 1)·M``, the waves'
        block seconds and the call's fixed seconds, by `schedule`'s and `seconds`' own operations."""
        terms = self._new_terms.get((n, heads))
        if terms is None:
            m, g = float(PREFILL_TILE_TOKENS), float(PREFILL_GRAIN_TOKENS)
            t = float(math.ceil(n / m))
            j = t - 1.0
            grid_s = float(math.ceil(max(heads * t, 1.0) / self._sms)) * self._cta_s
            terms = (j, 1.0 if t > 1 else 0.0, m * j * (j + 1) / 2, float(math.ceil((n - (t - 1) * m) / g)) * g,
                     (t - 1) * m, grid_s, self._latency_s(n, heads))
            if len(self._new_terms) >= NEW_TERMS_ENTRIES:
                self._new_terms.clear()
            self._new_terms[(n, heads)] = terms
        return terms

    def chunk_s(self, n: float, c: float, bytes_: float, heads: float) -> float:
        """Seconds of one call over a single chunk of `n` > 0 new tokens after `c` in a full-attention
        layer: ``seconds(heads · schedule(n, c, 0), bytes_, n, heads)[0]``, fused: the same operations
        (what depends on `n` alone from `_terms`), without those that leave their operand as it is
        (the window's ``+ pad``, ``· 1.0``), so the same float."""
        g = float(PREFILL_GRAIN_TOKENS)
        j, many, tri, r_last, reach, grid_s, lat = self._terms(n, heads)
        m, ceil = float(PREFILL_TILE_TOKENS), math.ceil
        cg = float(ceil(c / g)) * g
        last = r_last * (float(ceil((c + n) / g)) * g)
        longest = m * (cg + reach) * many
        if last > longest:  # `max(longest, last)`, by its rule
            longest = last
        tau, sms, cta_s = self._tau, self._sms, self._cta_s
        t_sched = grid_s + tau * (heads * (m * (j * cg + tri) * many + last)) / sms
        lone = cta_s + tau * longest * self._lone
        if lone > t_sched:
            t_sched = lone
        rate, factor = self._mem
        t_mem = bytes_ / rate * factor
        return _smooth_max_float(t_sched, t_mem, self._overlap) + lat

    def chunks_s(self, chunks: list[tuple[float, float]], bytes_: float, tokens: float, heads: float) -> float:
        """Seconds of one call over several chunks ``(n, c)`` (each `n` > 0) in a full-attention layer:
        ``seconds(heads · Σ ctas, heads · Σ scores, max longest, bytes_, tokens, heads)[0]`` over each
        chunk's ``schedule(n, c, 0)``, summed in the chunks' order as `StepModel._prefill_attention_s`
        sums them; the schedule fused as in `chunk_s`, what depends on a chunk's `n` alone from `_terms`
        (the same operations, without those that leave their operand as it is: the window's ``+ pad``
        and ``· 1.0``; ``J + 1`` is ``T`` exactly), so the same float."""
        m, g = float(PREFILL_TILE_TOKENS), float(PREFILL_GRAIN_TOKENS)
        ceil = math.ceil
        ctas = scores = longest = 0.0
        for n, c in chunks:  # `max(x, y)` written as `y if y > x else x` (its rule)
            j, many, tri, r_last, reach, _, _ = self._terms(n, heads)
            cg = float(ceil(c / g)) * g
            last = r_last * (float(ceil((c + n) / g)) * g)
            top = m * (cg + reach) * many  # the chunk's longest CTA
            if last > top:
                top = last
            ctas, scores = ctas + (j + 1.0), scores + (m * (j * cg + tri) * many + last)
            if top > longest:
                longest = top
        return self.seconds(heads * ctas, heads * scores, longest, bytes_, tokens, heads)[0]

    def chunk_s_many(self, n: float, cs: list[float], bytes_: list[float], heads: float,
                     layers: float = 1.0) -> list[float]:
        """``[0.0 + layers · chunk_s(n, c, b, heads) for c, b in zip(cs, bytes_)]``: a run of chunks of `n` > 0
        new tokens after `cs` (integer-valued, ≥ 0: token counts), in `layers` layers alike (``0.0 + 1.0 · x`` is
        `x`, a positive float).

        The same operations on the same operands (what depends on `n` alone worked out once), so the
        same floats; the smooth maximum's first power is one NumPy call over the run, which gives each
        element what a call on it alone gives (NumPy's ``power`` is elementwise, SIMD or not); its
        second is C's ``pow`` on a Python float, as in `chunk_s` (`_smooth_max_float`).
        Operations that leave their operand as it is are left out: ``· many`` with ``many = 1`` (more
        than one tile: a chunk of one tile goes through `chunk_s`), ``· 1.0``, and ``+ pad`` (``+0.0``
        added to a sum of terms ≥ +0)."""
        j, many, tri, r_last, reach, grid_s, lat = self._terms(n, heads)
        # loops, not comprehensions: a comprehension's names would be cells, made at every call (~1 k instructions)
        out: list[float] = []
        if not many:
            for c, b in zip(cs, bytes_, strict=True):
                out.append(0.0 + layers * self.chunk_s(n, c, b, heads))
            return out
        m, ng = float(PREFILL_TILE_TOKENS), -float(PREFILL_GRAIN_TOKENS)
        tau, sms, cta_s, lone_f = self._tau, self._sms, self._cta_s, self._lone
        rate, factor = self._mem
        his: list[float] = []
        rs: list[float] = []
        # a run's chunk starts where the last one ended (c = its c + n): its cached keys rounded up, ``ceil_g(c)``,
        # are the last one's keys rounded up, ``ceil_g(c + n)``, the same float. Token counts are integers, and
        # for an integer x ≥ 0 ``ceil(x / g)·g`` is ``x − (x mod −g)`` exactly (fmod is exact, and so are sums
        # of integers below 2**53): two operations for a division, two calls and a product (~5 % of this loop)
        end = kg = math.nan
        for c, b in zip(cs, bytes_, strict=True):  # `max(x, y)` written as `y if y > x else x` (its rule)
            cg = kg if c == end else c - c % ng
            end = c + n
            kg = end - end % ng
            last = r_last * kg
            longest = m * (cg + reach)
            if last > longest:
                longest = last
            t_sched = grid_s + tau * (heads * (m * (j * cg + tri) + last)) / sms
            lone = cta_s + tau * longest * lone_f
            if lone > t_sched:
                t_sched = lone
            t_mem = b / rate * factor
            # (the ratios' guards compare with 0.0, not 0: 3.11 specialises a float compared with a float, not an int)
            if t_sched >= t_mem:
                his.append(t_sched)
                rs.append(t_mem / t_sched if t_sched > 0.0 else 0.0)
            else:
                his.append(t_mem)
                rs.append(t_sched / t_mem if t_mem > 0.0 else 0.0)
        p, p_array, inv = self._overlap
        if p == math.inf:
            for hi in his:
                out.append(0.0 + layers * (hi + lat))
            return out
        # the ufunc takes the list as it is (an array made of it first: ~1.9 k instructions more a call)
        for hi, x in zip(his, np.power(rs, p_array).tolist(), strict=True):
            out.append(0.0 + layers * (hi * (1.0 + x) ** inv + lat))
        return out

    def seconds(self, ctas: float, scores: float, longest: float, bytes_: float, tokens: float,
                heads: float) -> tuple[float, float, float]:
        """`prefill_kernel_s` ``(seconds, schedule s, memory s)`` of one call (floats)."""
        tau, sms, cta_s = self._tau, self._sms, self._cta_s
        ctas = 1.0 if ctas < 1.0 else ctas  # `max`es by their rule, not calls (~850 instructions each)
        lone = tau * longest * self._lone
        t_sched = float(math.ceil(ctas / sms)) * cta_s + tau * scores / sms
        if cta_s + lone > t_sched:
            t_sched = cta_s + lone
        rate, factor = self._mem
        t_mem = bytes_ / rate * factor
        return _smooth_max_float(t_sched, t_mem, self._overlap) + self._latency_s(tokens, heads), t_sched, t_mem


def _saturation(n: Any, half: Any, q: float) -> Any:
    """Share of the GPU a grid of `n` blocks keeps busy: ``(1 + (half/n)^q)^(−1/q)``."""
    return (1.0 + (half / np.maximum(n, 1e-300)) ** q) ** (-1.0 / q)


def decode_kernel_terms(
    batch: Any,
    kv_heads: Any,
    head_dim: Any,
    qo_bytes_per_seq: Any,
    flops_per_kv_byte: Any,
    mla: Any,
    fp8_kv: Any,
    gpu: GPUSpec,
    p: CostParams,
    heads: Any = 1.0,
) -> tuple[Any, Any, Any, Any]:
    """``(fixed_s, s_per_kv_byte, s_c, s_m)`` of one decode attention kernel (element-wise): its time over
    ``K`` bytes of cached KV is ``fixed_s + s_per_kv_byte · K``, affine in context for a batch.
    GQA/MHA/MQA (`heads` query heads and `kv_heads` KV heads per GPU, group ``g = heads / kv_heads``)::

        n, r  = batch · kv_heads, d / 128                       blocks (sequence, KV head)
        fixed = attn_latency_s + decode_head_dim_latency_s · r + [decode_fp8_latency_s · r]
                + n · decode_head_latency_s · (1 + decode_head_dim_growth · (r − 1)) + batch · decode_seq_latency_s
                + batch · qo_bytes / (hbm_bytes_per_s · decode_qo_eff)            Q read and O write
        s_c   = flops_per_kv_byte / (peak_bf16 · decode_compute_eff · sat(n · g^x; decode_compute_half_ctas, 1) · e_d)
        s_m   = [decode_fp8_kv_factor] / (hbm_bytes_per_s · decode_memory_eff · sat(n; n_m, q) · e_d)
        s_per_kv_byte = smax_p(s_c, s_m)                        (p = decode_overlap_p, q = decode_saturation_exp)

    with ``sat`` from `_saturation`, ``e_d`` the head-dim factor (64, 192, 512), ``x`` =
    `decode_compute_group_exp` (a block computes the group's query rows) and ``n_m`` =
    `decode_half_ctas`, times `decode_d192_half_scale` at head dim 192 (a path without split-KV).
    An MLA (absorbed) decode of `heads` query rows per GPU (heads times query tokens) runs one
    block per sequence and tile of ``MLA_DECODE_HEAD_TILE`` query heads (FlashMLA)::

        n     = batch · ceil(heads / 64)
        fixed = mla_decode_latency_s + batch · mla_decode_seq_latency_s
                + batch · heads · (mla_decode_head_latency_s + [mla_decode_fp8_head_latency_s])
                + batch · qo_bytes / hbm_bytes_per_s
        s_c   = flops_per_kv_byte / (peak_bf16 · min(1, decode_compute_eff · mla_decode_compute_factor)
                                     · [mla_decode_fp8_compute_factor] · sat(n; mla_decode_compute_half_ctas, 1))
        s_m   = [mla_decode_fp8_kv_factor] / (hbm_bytes_per_s · decode_memory_eff · mla_decode_memory_factor
                                              · sat(n; mla_decode_half_ctas, 1))
        s_per_kv_byte = smax_p(s_c, s_m)                        (p = mla_decode_overlap_p)

    (per query head: the Q read and fp8 quantisation, the output merge; over an fp8 cache the
    kernel's MMAs may run in fp8: `mla_decode_fp8_compute_factor` up to 2, the fp8 peak). Every
    term depends on the batch's shape, none on the context. No sequences: no kernel (zeros).
    """
    d = np.asarray(head_dim, dtype=np.float64)
    is_mla, low = np.asarray(mla, dtype=bool), np.asarray(fp8_kv, dtype=bool)
    tiles = np.ceil(np.asarray(heads, dtype=np.float64) / MLA_DECODE_HEAD_TILE)
    n, r = np.maximum(batch * np.where(is_mla, tiles, kv_heads), 1.0), d / 128.0
    f_d = np.where(d == 64, p.decode_d64_factor, np.where(d == 512, p.decode_d512_factor, 1.0))
    e_d = np.where(is_mla, 1.0, np.where(d == 192, p.decode_d192_factor, f_d))
    # fixed parts
    gqa_fixed = p.attn_latency_s + p.decode_head_dim_latency_s * r + np.where(low, p.decode_fp8_latency_s * r, 0.0)
    gqa_fixed = gqa_fixed + n * p.decode_head_latency_s * (1.0 + p.decode_head_dim_growth * (r - 1.0))
    gqa_fixed = gqa_fixed + batch * p.decode_seq_latency_s
    head_s = p.mla_decode_head_latency_s + np.where(low, p.mla_decode_fp8_head_latency_s, 0.0)
    mla_fixed = p.mla_decode_latency_s + batch * p.mla_decode_seq_latency_s + batch * heads * head_s
    qo_s = batch * qo_bytes_per_seq / (gpu.hbm_bytes_per_s * np.where(is_mla, 1.0, p.decode_qo_eff))
    fixed = np.where(is_mla, mla_fixed, gqa_fixed) + qo_s
    # per KV byte
    mla_c = min(1.0, p.decode_compute_eff * p.mla_decode_compute_factor)  # at most the bf16 peak
    c_eff = np.where(is_mla, mla_c * np.where(low, p.mla_decode_fp8_compute_factor, 1.0), p.decode_compute_eff)
    m_eff = p.decode_memory_eff * np.where(is_mla, p.mla_decode_memory_factor, 1.0)
    group = np.maximum(np.asarray(heads, dtype=np.float64) / np.maximum(kv_heads, 1e-300), 1.0)
    gqa_c_sat = _saturation(n * group**p.decode_compute_group_exp, p.decode_compute_half_ctas, 1.0)
    c_sat = np.where(is_mla, _saturation(n, p.mla_decode_compute_half_ctas, 1.0), gqa_c_sat)
    m_half = p.decode_half_ctas * np.where(d == 192, p.decode_d192_half_scale, 1.0)
    m_sat = np.where(
        is_mla, _saturation(n, p.mla_decode_half_ctas, 1.0), _saturation(n, m_half, p.decode_saturation_exp)
    )
    s_c = flops_per_kv_byte / (gpu.peak_flops(ATTENTION_DTYPE) * c_eff * c_sat * e_d)
    fp8_f = np.where(is_mla, p.mla_decode_fp8_kv_factor, p.decode_fp8_kv_factor)
    s_m = np.where(low, fp8_f, 1.0) / (gpu.hbm_bytes_per_s * m_eff * m_sat * e_d)
    on = np.asarray(batch, dtype=np.float64) > 0  # no sequences: no kernel
    s_kv = np.where(is_mla, smooth_max(s_c, s_m, p.mla_decode_overlap_p), smooth_max(s_c, s_m, p.decode_overlap_p))
    return fixed * on, s_kv * on, s_c * on, s_m * on


def allreduce_s(message_bytes: Any, tp: Any, gpu: GPUSpec, p: CostParams) -> Any:
    """Seconds of one NCCL all-reduce of `message_bytes` over `tp` GPUs (floats or arrays; 0 at
    ``tp = 1``). NCCL runs the fastest of its algorithm/protocol pairs for the message::

        lat    = collective_latency_s + collective_hop_latency_s · (tp − 1)
        B      = nvlink_bytes_per_s · comm_eff,  a = 2(tp − 1)/tp     (ring: link bytes per byte)
        t_LL   = lat + a · S / (B · comm_ll_factor)                    ring, LL (flag per word)
        t_ring = lat + comm_simple_latency_s + a · S / B               ring, Simple
        t_NVLS = lat + comm_simple_latency_s + S / (B · comm_nvls_factor)
        t      = min(t_LL, t_ring, t_NVLS)

    The latency grows with the ring's hops; the LL protocol has the lowest latency but moves
    only part of its words as data; Simple pipelines large chunks (a fill latency) at full
    bandwidth; NVLS (NVSwitch multicast, the switch reduces) sends each byte over a link once.
    NVLS needs a switch that reduces (`GPUSpec.nvswitch_reduce`; not on AMD's Infinity Fabric).
    Defaults (``comm_ll_factor = 1``, no Simple or hop latency, ``comm_nvls_factor = 0``: no
    NVLS) give the plain ring ``a · S / B + collective_latency_s``.
    """
    lat = p.collective_latency_s + p.collective_hop_latency_s * (tp - 1)
    bw = gpu.nvlink_bytes_per_s * p.comm_eff
    link = 2 * (tp - 1) / tp * message_bytes / bw
    simple = lat + p.comm_simple_latency_s
    t = np.minimum(lat + link / p.comm_ll_factor, simple + link)
    if p.comm_nvls_factor > 0 and gpu.nvswitch_reduce:
        t = np.minimum(t, simple + message_bytes / (bw * p.comm_nvls_factor))
    return t * (tp > 1)


def predict_s(op: str, cols: dict[str, Any], gpu: GPUSpec, p: CostParams) -> Array:
    """Seconds of each row of an op class (`work` gives its FLOPs and bytes).

    - ``gemm``: `gemm_s` (rows with ``in_bytes <= 1`` are low-precision GEMMs: ``block = 1``
      block-scaled fp8, ``fp4 = 1`` NVFP4, the others per-tensor fp8).
    - ``context_attention``, ``mla_context`` (prefill, no cached prefix): `prefill_kernel_s` over
      ``b · h`` times `prefill_schedule(s)`; MLA runs decompressed (one KV head per query head,
      ``d_qk`` = 192 for the scores, ``d_v`` = 128; K/V in bf16, or fp8 over an fp8 KV cache).
    - ``generation_attention``, ``mla_generation`` (decode): `decode_kernel_terms` with the KV
      bytes and FLOPs of `work` (Q read and O write priced at HBM bandwidth in the fixed part;
      an MLA latent is one KV head of ``rank + rope`` values).
    - ``all_reduce``: `allreduce_s` of ``message_bytes`` over ``tp`` GPUs.
    """
    f = {k: np.asarray(v, dtype=np.float64) for k, v in cols.items()}
    if op == "all_reduce":
        return np.asarray(allreduce_s(f["message_bytes"], f["tp"], gpu, p), dtype=np.float64)
    flops, bytes_ = work(op, {k: v for k, v in f.items() if k != "tp"})
    if op == "gemm":
        low = f["in_bytes"] <= LOW_PRECISION_BYTES
        f4 = f.get("fp4", np.zeros_like(low, dtype=float)) > 0
        peak = np.where(low, gpu.peak_flops("fp8") if low.any() else 0.0, gpu.peak_flops("bf16"))
        peak = np.where(f4, gpu.peak_flops("fp4") if f4.any() else 0.0, peak)
        blk = f.get("block", np.zeros_like(low, dtype=float)) > 0
        t = gemm_s(flops, bytes_, f["m"], f["n"], f["k"], peak, low, gpu, p, block_scaled=blk, fp4=f4)
        return np.asarray(t, dtype=np.float64)
    b, h = f["b"], f["h"]
    if op in ("context_attention", "mla_context"):
        ctas, scores, longest = prefill_schedule(f["s"])
        mla = op == "mla_context"
        d, dv = (f["d_qk"], f["d_v"]) if mla else (f["d"], f["d"])
        low = f.get("kv_bytes", np.full_like(b, ACTIVATION_BYTES)) <= LOW_PRECISION_BYTES
        tokens = b * f["s"]
        t, _, _ = prefill_kernel_s(b * h * ctas, b * h * scores, longest, bytes_, d, dv, mla, low, gpu, p, tokens, h)
        return np.asarray(t, dtype=np.float64)
    if op in ("generation_attention", "mla_generation"):
        low = f["kv_bytes"] <= LOW_PRECISION_BYTES
        if op == "mla_generation":
            kvh, d, mla = np.ones_like(b), f["rank"] + f["rope"], True
            q = f.get("q", np.ones_like(b))
            qo = h * q * (2 * f["rank"] + f["rope"]) * ACTIVATION_BYTES
            kv_bytes = b * f["ctx"] * d * f["kv_bytes"]
            per_byte = h * q * (2 * d + 2 * f["rank"]) / (d * f["kv_bytes"])
        else:
            kvh, d, mla = f["kvh"], f["d"], False
            qo = 2 * h * d * ACTIVATION_BYTES
            kv_bytes = b * f["ctx"] * 2 * kvh * d * f["kv_bytes"]
            per_byte = 4 * h * d / (2 * kvh * d * f["kv_bytes"])
        rows = h * f.get("q", np.ones_like(b))  # query rows per sequence (MLA head tiles)
        fixed, s_per_byte, _, _ = decode_kernel_terms(b, kvh, d, qo, per_byte, mla, low, gpu, p, rows)
        return np.asarray(fixed + s_per_byte * kv_bytes, dtype=np.float64)
    raise ValueError(f"unknown op class {op!r}; valid: {', '.join(OP_CLASSES)}")
