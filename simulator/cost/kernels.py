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
from simulator.cost.params import CostParams
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
# which parameters each op class exercises (compute eff, memory eff, fixed latency)
OP_PARAMS = {
    "gemm": ("gemm_compute_eff", "gemm_memory_eff", "gemm_latency_s"),
    "context_attention": ("attn_compute_eff", "attn_memory_eff", "attn_latency_s"),
    "generation_attention": ("attn_compute_eff", "attn_memory_eff", "attn_latency_s"),
    "mla_context": ("attn_compute_eff", "attn_memory_eff", "attn_latency_s"),
    "mla_generation": ("attn_compute_eff", "attn_memory_eff", "attn_latency_s"),
    "all_reduce": ("comm_eff", "collective_latency_s"),
}


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


def predict_s(
    op: str,
    flops: Array,
    bytes_: Array,
    gpu: GPUSpec,
    p: CostParams,
    tp: Array | float = 1.0,
    peak_flops: Array | float | None = None,
) -> Array:
    """Roofline seconds of each row: ``max(flops/(peak·eff_c), bytes/(bw·eff_m)) + latency``;
    for ``all_reduce`` ``2(tp−1)/tp · bytes / (nvlink · comm_eff) + collective_latency_s``."""
    if op == "all_reduce":
        tp_ = np.asarray(tp, dtype=np.float64)
        return 2 * (tp_ - 1) / tp_ * bytes_ / (gpu.nvlink_bytes_per_s * p.comm_eff) + p.collective_latency_s
    ce, me, lat = (getattr(p, n) for n in OP_PARAMS[op])
    peak = gpu.peak_flops(ATTENTION_DTYPE) if peak_flops is None else peak_flops
    return np.maximum(flops / (peak * ce), bytes_ / (gpu.hbm_bytes_per_s * me)) + lat
