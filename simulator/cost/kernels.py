"""Kernel-level rooflines: GEMM, attention and all-reduce times for arrays of shapes.

These are the same formulas the step model uses (`simulator.cost.step_model`), written for
one kernel call so that measured kernel tables (aiconfigurator, `hardware/measure_attention.py`)
can fit the efficiencies. All inputs are NumPy arrays or floats; times in seconds.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from hardware.catalog import GPUSpec
from simulator.cost.params import PREFILL_TILE_TOKENS, CostParams
from simulator.cost.step_model import ACTIVATION_BYTES, ATTENTION_DTYPE

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


def work(op: str, cols: dict[str, Any]) -> tuple[Array, Array]:
    """(flops, bytes) of each row of an op class.

    - ``gemm``: ``2mnk`` FLOPs; ``(mk + kn)·in_bytes + mn·2`` bytes.
    - ``context_attention`` (causal, no cached prefix): ``b · 2h(2d) · s(s+1)/2`` FLOPs;
      ``b · s · (2·h·d·2 + 2·kvh·d·kv_bytes)`` bytes (Q, O, K, V).
    - ``generation_attention``: ``b · 4hd · ctx`` FLOPs; ``b · ctx · 2·kvh·d·kv_bytes`` bytes.
    - ``mla_generation`` (absorbed, latent rank r = 512, rope 64): ``b · h · (2(r+rope) + 2r) · ctx``
      FLOPs; ``b · ctx · (r + rope) · kv_bytes`` bytes.
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


def _smax(a: Array, b: Array, p: float) -> Array:
    """Vectorised `simulator.cost.roofline.smooth_max`."""
    hi, lo = np.maximum(a, b), np.minimum(a, b)
    if np.isinf(p):
        return hi
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.where(hi > 0, lo / hi, 0.0)
    return hi * (1.0 + r**p) ** (1.0 / p)


def predict_s(op: str, cols: dict[str, Any], gpu: GPUSpec, p: CostParams) -> Array:
    """Seconds of each row of an op class (`work` gives its FLOPs and bytes).

    - ``gemm``: ``smax_p(flops / (peak(dtype) · eff_c · [fp8_eff]), bytes / (bw · eff_m))
      + gemm_latency_s [+ gemm_fp8_latency_s]`` with ``p = gemm_overlap_p``; rows with
      ``in_bytes == 1`` are fp8 GEMMs (the bracketed factors apply to them only).
    - ``context_attention``, ``mla_context`` (prefill)::

          t_c = (flops + pair_flops · b · h · s(s+1)/2) / (peak · attn_compute_eff) · (1 + half / tiles)
          t_m = bytes / (bw · attn_memory_eff);  tiles = b · h · ceil(s / PREFILL_TILE_TOKENS)
          t = smax_p(t_c, t_m) + attn_latency_s          (p = attn_overlap_p)

    - ``generation_attention``, ``mla_generation`` (decode)::

          t = smax_p(flops / (peak · decode_compute_eff), bytes · [fp8_kv_factor] / (bw · decode_memory_eff))
              + attn_latency_s + b · (decode_seq_latency_s + kvh · decode_head_latency_s)
          (p = decode_overlap_p; an MLA latent counts as one KV head)

    - ``all_reduce``: ``2(tp−1)/tp · bytes / (nvlink · comm_eff) + collective_latency_s``.
    """
    f = {k: np.asarray(v, dtype=np.float64) for k, v in cols.items()}
    if op == "all_reduce":
        tp_ = f["tp"]
        return 2 * (tp_ - 1) / tp_ * f["message_bytes"] / (gpu.nvlink_bytes_per_s * p.comm_eff) + p.collective_latency_s
    flops, bytes_ = work(op, {k: v for k, v in f.items() if k != "tp"})
    bw = gpu.hbm_bytes_per_s
    if op == "gemm":
        low = f["in_bytes"] <= LOW_PRECISION_BYTES
        peak = np.where(low, gpu.peak_flops("fp8") * p.gemm_fp8_eff, gpu.peak_flops("bf16"))
        tc = flops / (peak * p.gemm_compute_eff)
        lat = p.gemm_latency_s + np.where(low, p.gemm_fp8_latency_s, 0.0)
        return _smax(tc, bytes_ / (bw * p.gemm_memory_eff), p.gemm_overlap_p) + lat
    attn_peak = gpu.peak_flops(ATTENTION_DTYPE)
    b, h = f["b"], f["h"]
    if op in ("context_attention", "mla_context"):
        s = f["s"]
        tiles = b * h * np.ceil(s / PREFILL_TILE_TOKENS)
        tc = (flops + p.prefill_pair_flops * b * h * s * (s + 1) / 2) / (attn_peak * p.attn_compute_eff)
        tc = tc * (1.0 + p.prefill_half_tiles / tiles)
        return _smax(tc, bytes_ / (bw * p.attn_memory_eff), p.attn_overlap_p) + p.attn_latency_s
    if op in ("generation_attention", "mla_generation"):
        kv_factor = np.where(f["kv_bytes"] <= LOW_PRECISION_BYTES, p.decode_fp8_kv_factor, 1.0)
        tc = flops / (attn_peak * p.decode_compute_eff)
        tm = bytes_ * kv_factor / (bw * p.decode_memory_eff)
        kvh = f.get("kvh", np.ones_like(b))  # an MLA latent is one KV head
        per_seq = p.decode_seq_latency_s + kvh * p.decode_head_latency_s
        return _smax(tc, tm, p.decode_overlap_p) + p.attn_latency_s + b * per_seq
    raise ValueError(f"unknown op class {op!r}; valid: {', '.join(OP_CLASSES)}")
