"""Cost-model parameters: efficiency factors and overheads per GPU, loaded from ``params.toml``.

The shipped ``params.toml`` is the output of the calibration (see `simulator.cost.calibrate`
and `simulator.cost.aiconfigurator` for the commands that regenerate it); every GPU table
carries its provenance (data, command, date, error). A GPU without a fitted table uses the
``[default]`` table, and says so in its ``source``.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from simulator.config import construct
from simulator.errors import ConfigError, must
from simulator.files import read_text
from simulator.models import dtype
from simulator.tomlfile import parse_toml

PARAMS_FILE = Path(__file__).parent / "params.toml"
# `load_params_file` keeps the tables of this many texts of params files (the shipped one and a few a
# calibration writes): more than a process reads, few enough that the store stays small
PARSED_TEXTS = 8

EFFICIENCIES = ("gemm_compute_eff", "gemm_memory_eff", "attn_compute_eff", "attn_memory_eff", "comm_eff")
LATENCIES = (
    "step_overhead_s",
    "collective_latency_s",
    "collective_hop_latency_s",
    "comm_simple_latency_s",
    "gemm_latency_s",
    "attn_latency_s",
    "prefill_latency_s",
    "prefill_fp8_latency_s",
    "prefill_cta_s",
    "decode_seq_latency_s",
    "decode_head_latency_s",
    "decode_head_dim_latency_s",
    "decode_fp8_latency_s",
    "mla_decode_latency_s",
    "mla_decode_seq_latency_s",
    "mla_prefill_token_s",
    "mla_decode_head_latency_s",
    "mla_decode_fp8_head_latency_s",
    "mla_prefill_fp8_latency_s",
    "gemm_fp8_latency_s",
    "gemm_fp8_block_latency_s",
    "gemm_fp4_latency_s",
)
# the most any of LATENCIES may be, seconds: ten times the fit's bound (`simulator.cost.fit.MAX_LATENCY_S`); a
# finite but huge one (1e308 s) overflowed a step's price to "inf ms" as an infinite one did (helper-185)
MAX_PARAM_LATENCY_S = 1.0
# kernel-shape parameters: name -> (lower, upper) bound; each default leaves the plain roofline
SHAPES = {
    "gemm_fp8_eff": (0.05, 1.0),
    "gemm_overlap_p": (1.0, math.inf),
    "attn_overlap_p": (1.0, math.inf),
    "decode_overlap_p": (1.0, math.inf),
    "decode_compute_eff": (1e-3, 1.0),
    "decode_memory_eff": (1e-3, 1.0),
    "decode_fp8_kv_factor": (0.25, 4.0),
    "decode_head_dim_growth": (-0.9, 3.0),
    "decode_half_ctas": (0.0, 1e4),
    "decode_saturation_exp": (0.1, 8.0),
    "decode_compute_half_ctas": (0.0, 1e4),
    "decode_d192_factor": (0.01, 2.0),
    "decode_d512_factor": (0.01, 2.0),
    "decode_qo_eff": (1e-3, 1.0),
    "decode_d192_half_scale": (0.01, 1e4),
    "decode_compute_group_exp": (0.0, 1.0),
    "mla_decode_compute_factor": (0.01, 100.0),
    "mla_decode_memory_factor": (0.01, 10.0),
    "mla_decode_half_ctas": (0.0, 1e4),
    "mla_decode_fp8_kv_factor": (0.25, 4.0),
    "mla_decode_fp8_compute_factor": (0.1, 2.0),
    "mla_decode_overlap_p": (1.0, math.inf),
    "mla_decode_compute_half_ctas": (0.0, 1e4),
    "decode_d64_factor": (0.01, 2.0),
    "prefill_pair_flops": (0.0, 1e4),
    "prefill_fp8_factor": (0.1, 5.0),
    "prefill_d64_factor": (0.05, 5.0),
    "prefill_odd_d_factor": (0.01, 5.0),
    "mla_prefill_compute_factor": (0.05, 5.0),
    "mla_prefill_memory_factor": (0.05, 5.0),
    "mla_prefill_fp8_factor": (0.1, 5.0),
    "mla_prefill_longest_factor": (0.1, 10.0),
    "mla_prefill_quant_s_per_value": (0.0, 1e-9),
    "gemm_split_k_tokens": (1.0, math.inf),
    "gemm_full_units": (1.0, 1e6),
    "gemm_parallel_exp": (0.0, 4.0),
    "gemm_quant_s_per_value": (0.0, 1e-9),
    "gemm_fp8_block_eff": (0.05, 1.5),
    "gemm_fp8_block_quant_s_per_value": (0.0, 1e-9),
    "gemm_fp4_eff": (0.05, 1.5),
    "gemm_fp4_quant_s_per_value": (0.0, 1e-9),
    "gemm_fp4_memory_factor": (0.1, 10.0),
    "gemm_fp4_k_factor": (0.0, 10.0),
    "gemm_fp4_serial_k_tokens": (1.0, math.inf),
    "comm_ll_factor": (0.05, 1.0),
    "comm_nvls_factor": (0.0, 2.0),
    "gemm_k_step_s": (0.0, 1e-6),
    "gemm_serial_k_tokens": (1.0, math.inf),
    "gemm_power_derate": (0.0, 4.0),
    "gemm_power_time_s": (1e-7, math.inf),
}
FITTABLE = EFFICIENCIES + LATENCIES + tuple(SHAPES)
# Kernel shapes of the cost model (helper-173: audited as possible per-GPU facts): the grains in which
# `simulator.cost.kernels` and the step model count a kernel's work, one for every GPU. They are modelling choices,
# named here, not hardware figures for hardware/gpus.toml: a library picks its tiles per problem shape (cuBLAS's
# heuristics, the attention kernel's build), so a GPU has no single tile size to cite, and each GPU's table in
# params.toml is fitted in these units (`gemm_full_units` counts 128-column tiles; `prefill_cta_s`,
# `attn_compute_eff` and `prefill_pair_flops` price scores counted in these tiles and grains), so another value for
# one GPU would change what its fitted figures mean and need `make calibrate`. Each names the kernel it follows.
PREFILL_TILE_TOKENS = 128  # query rows (and keys) per prefill attention tile (FMHA / FlashAttention block M, N)
PREFILL_GRAIN_TOKENS = 64
"""Tokens in which a partial prefill attention tile computes its rows and keys (`kernels.prefill_schedule` rounds
them up to it). A modelling choice, the same on every GPU: it follows Hopper's warpgroup MMA, whose M is 64 rows
(PTX ISA, ``wgmma.mma_async`` shapes ``m64nNk16``); Blackwell's ``tcgen05.mma`` takes an M of 64 as well as 128
(and 256 over a CTA pair; its CUTLASS kernels mostly run 128), AMD's MFMA other shapes. Where the real grain
differs, that GPU's fitted prefill figures (params.toml) absorb it."""
MLA_DECODE_HEAD_TILE = 64  # query heads per thread block of an absorbed MLA decode (FlashMLA block_h = 64)
GEMM_TILE = 128
"""Output columns of one GEMM tile: `kernels.gemm_s` counts a GEMM's parallel work as ``ceil(n / GEMM_TILE)``
column tiles (× split-K slices) against each GPU's fitted `gemm_full_units`. A modelling choice, the same on
every GPU: 128 × 128 is a common CTA tile of CUTLASS's and cuBLAS's Hopper and Blackwell GEMMs, but a library
picks its tile per shape (other widths too), so it is the unit of the fitted parallelism, not a figure of a GPU."""

MAIN_HEAD_DIMS = (64, 128, 256)  # head dims of the main prefill kernels; others take `prefill_odd_d_factor`
ATTENTION_DTYPE = "bf16"  # attention kernels compute in bf16 (FlashAttention-3, FlashMLA)
# activations, Q/O and all-reduce payloads in bf16: its bytes a value from simulator/data/kv_dtypes.toml
ACTIVATION_BYTES = dtype(ATTENTION_DTYPE).bytes_per_value


@dataclass(frozen=True, slots=True, kw_only=True)
class CostParams:
    """Efficiency factors (fractions of the datasheet peak) and fixed latencies for one GPU.

    Parameters
    ----------
    gemm_compute_eff, gemm_memory_eff : float
        Linear layers reach ``eff · peak_flops(dtype)`` and ``eff · hbm_bytes_per_s``; in (0, 1].
    attn_compute_eff, attn_memory_eff : float
        Prefill attention: tensor-core efficiency of a score tile, share of HBM bandwidth on
        the Q/K/V/O bytes.
    comm_eff : float
        Share of the NVLink per-direction bandwidth a ring all-reduce (Simple protocol) reaches;
        in (0, 1].
    step_overhead_s : float
        Fixed time per engine step: launch, scheduling, sampling.
    collective_latency_s : float
        Fixed time per all-reduce (`simulator.cost.kernels.allreduce_s`).
    collective_hop_latency_s : float
        Extra fixed time of an all-reduce per GPU beyond the first (one more ring step).
    comm_ll_factor : float
        Bandwidth of NCCL's low-latency (LL) protocol relative to Simple (it sends a flag with
        every data word); 1: LL is Simple.
    comm_simple_latency_s : float
        Extra fixed time of the Simple protocol (pipeline fill of its large chunks) over LL.
    comm_nvls_factor : float
        NVLS all-reduce (NVSwitch multicast: each byte crosses a link once, not ``2(tp−1)/tp``
        times) efficiency relative to `comm_eff`; 0: no NVLS.
    gemm_latency_s, attn_latency_s : float
        Fixed time per GEMM kernel and per decode attention kernel (launch and tail).
    decode_seq_latency_s, decode_head_latency_s : float
        Extra time of a decode attention kernel per sequence in the batch, and per thread block
        (one per sequence and KV head on the GPU: Q load, page-table walk, O write, split-KV
        merge); constants for a fixed batch, so decode stays affine in context.
    decode_head_dim_growth : float
        The per-block time grows with the head dim as ``1 + decode_head_dim_growth · (d/128 − 1)``.
    decode_head_dim_latency_s, decode_fp8_latency_s : float
        Fixed time of a decode kernel per ``d/128`` (pipeline fill of the first KV tile), and its
        extra over an fp8 KV cache.
    decode_half_ctas, decode_saturation_exp, decode_compute_half_ctas : float
        A decode grid of ``n = batch · kv_heads`` blocks keeps ``sat(n) = (1 + (n0/n)^q)^(−1/q)``
        of the HBM bandwidth (``n0 = decode_half_ctas``, ``q = decode_saturation_exp``) and of the
        tensor cores (``n0 = decode_compute_half_ctas``, ``q = 1``) busy; ``n0 = 0``: all of it.
    decode_d192_factor, decode_d512_factor : float
        Efficiency multipliers of the decode kernels at head dims 192 and 512 (other kernels).
    decode_d64_factor : float
        Efficiency multiplier of the decode kernel at head dim 64 (same kernel, half-width KV rows:
        fewer bytes in flight per load and per block).
    decode_d192_half_scale : float
        Multiplies `decode_half_ctas` at head dim 192, which runs a kernel path of its own (on
        Blackwell one without split-KV, fitted > 1: more blocks to saturate; on Hopper < 1);
        1: the same saturation as the other head dims.
    decode_qo_eff : float
        Share of the HBM bandwidth at which a decode kernel reads Q and writes O (per query
        head, small scattered accesses); 1: the datasheet bandwidth.
    decode_compute_group_exp : float
        The compute saturation counts ``n · g^x`` blocks, ``g = h/kvh`` query rows per block
        (a large GQA group fills the tensor cores of one block); 0: ``n`` blocks.
    mla_decode_latency_s, mla_decode_seq_latency_s, mla_decode_compute_factor, mla_decode_memory_factor : float
        MLA (absorbed) decode: its fixed time per kernel and per sequence (in place of the GQA
        ones), and multipliers of the decode compute and memory efficiencies (the compute one
        capped at the bf16 peak).
    mla_decode_head_latency_s, mla_decode_fp8_head_latency_s : float
        MLA decode: fixed time per sequence and query head (Q load, output merge), and its extra
        over an fp8 KV cache (quantising Q); constant for a batch, so decode stays affine.
    mla_decode_fp8_kv_factor, mla_decode_fp8_compute_factor, mla_decode_overlap_p : float
        MLA decode over an fp8 KV cache: multiplier of the memory time per byte and of the compute
        efficiency (itself capped at the bf16 peak; up to 2: fp8 MMAs where the kernel has them);
        smooth-max exponent of the MLA kernel's compute and memory time (for `decode_overlap_p`).
    mla_decode_half_ctas : float
        MLA decode bandwidth saturates with its ``batch · ceil(heads / 64)`` blocks (FlashMLA tiles of
        64 query heads) as ``sat(n; mla_decode_half_ctas, 1)``.
    mla_decode_compute_half_ctas : float
        MLA decode tensor-core parallelism saturates with the same blocks, ``sat(n;
        mla_decode_compute_half_ctas, 1)`` (as `decode_compute_half_ctas` for GQA); 0: all of it.
    gemm_fp8_eff, gemm_fp8_latency_s : float
        Multiplies `gemm_compute_eff` for fp8/fp4 GEMMs (their kernels do not reach twice the
        bf16 rate; scaling epilogues cost time), and the extra fixed time of each (the kernel
        that quantises the activations).
    gemm_overlap_p, attn_overlap_p, decode_overlap_p : float
        Exponent of the smooth maximum of compute and memory time of GEMMs, prefill attention
        and decode attention, ``(t_c^p + t_m^p)^(1/p)``: ``inf`` is the hard max of the plain
        roofline, ``1`` the sum (no overlap of compute and memory).
    decode_compute_eff, decode_memory_eff : float
        Efficiencies of decode attention kernels (paged, split-KV: a different kernel from
        prefill's, which uses `attn_compute_eff` and `attn_memory_eff`).
    decode_fp8_kv_factor : float
        Multiplies the memory time of decode attention over an fp8 KV cache (dequantisation).
    prefill_pair_flops : float
        Extra FLOP-equivalents per (query, key) score per head of a prefill: the softmax
        (exp, max, rescale) that does not scale with the head dimension.
    prefill_latency_s, prefill_fp8_latency_s, prefill_cta_s : float
        Fixed time of a prefill attention kernel, its extra fixed time over an fp8 KV cache
        (quantising Q/K/V), and the fixed time of one thread block (CTA) on its SM.
    prefill_fp8_factor, prefill_d64_factor, prefill_odd_d_factor : float
        Prefill score time over an fp8 KV cache relative to bf16; tensor-core efficiency
        multipliers at head dim 64 and at head dims outside `MAIN_HEAD_DIMS` (192, 512).
    mla_prefill_compute_factor, mla_prefill_memory_factor : float
        MLA prefill (decompressed K/V, one KV head per query head): multiplier of the compute
        efficiency and of the byte time (fitted on MLA rows after the other prefill terms).
    mla_prefill_token_s : float
        MLA prefill: seconds per new token of the passes that do not scale with the query heads
        (latent KV-cache append, RoPE of the shared key part).
    mla_prefill_longest_factor : float
        MLA prefill: multiplies the score time of the longest causal CTA (the bound of a grid of
        few CTAs): a CTA alone on its SM at its own rate rather than its share of a full GPU's.
    mla_prefill_fp8_factor, mla_prefill_fp8_latency_s, mla_prefill_quant_s_per_value : float
        MLA prefill over an fp8 KV cache (the fp8 kernel): its score time relative to bf16, its
        extra fixed time, and seconds per value of the pass that quantises Q, K and V
        (``2·d_qk + d_v`` values per token and query head).
    gemm_split_k_tokens, gemm_full_units, gemm_parallel_exp : float
        GEMM parallelism: a GEMM offers ``units = groups · ceil(n/128) · max(1, k / split_k)``
        independent pieces of work (output column tiles, each split over ``k`` in slices of
        `gemm_split_k_tokens`; the library spreads the rows itself); with fewer than
        `gemm_full_units` the SMs are not all busy and both roofline terms are divided by
        ``(units / full)^exp``.
    gemm_quant_s_per_value : float
        Seconds per activation value of the pass that quantises a low-precision (fp8/fp4) GEMM's
        input (``m · k`` values: read bf16, write fp8, per-token scale); 0 for bf16 GEMMs.
    gemm_fp8_block_eff, gemm_fp8_block_latency_s, gemm_fp8_block_quant_s_per_value : float
        The same three for fp8 GEMMs with a scale per 128×128 weight block and per 1×128
        activation group (DeepSeek-style checkpoints, DeepGEMM-type kernels), in place of
        `gemm_fp8_eff`, `gemm_fp8_latency_s` and `gemm_quant_s_per_value`.
    gemm_fp4_eff, gemm_fp4_latency_s, gemm_fp4_quant_s_per_value : float
        The same three for fp4 GEMMs (NVFP4: a scale per 16 values; Blackwell's fp4 tensor cores,
        against the fp4 peak), fitted to the GPU's nvfp4 GEMM table; a GPU without one prices
        fp4 GEMMs as its per-tensor fp8 ones (`simulator.cost.aiconfigurator.fit_system`).
    gemm_fp4_serial_k_tokens, gemm_fp4_k_factor, gemm_fp4_memory_factor : float
        The fp4 kernel's shape: the ``k`` beyond which it splits (in place of
        `gemm_serial_k_tokens`; TensorRT-LLM's NVFP4 GEMM does not split), a multiplier of its
        serial main loop's time per ``k`` element (scale-factor loads and unpacking) and of its
        memory time (it does not reach the fp8 kernels' bandwidth); 1 and 1 on a GPU without
        an nvfp4 table.
    gemm_k_step_s, gemm_serial_k_tokens : float
        Seconds per ``k`` element of one thread block's serial main loop (load, MMA chain), over
        at most `gemm_serial_k_tokens` of ``k`` (the kernel splits a deeper ``k``): the floor
        ``gemm_k_step_s · min(k, gemm_serial_k_tokens)`` of a GEMM with few tiles; 0: none.
    gemm_power_derate, gemm_power_time_s : float
        Long compute-bound GEMMs run at a lower clock (power limit): the compute time ``t_c`` is
        multiplied by ``1 + gemm_power_derate · t_c / (t_c + gemm_power_time_s)``; 0: none.
    """

    gpu: str
    gemm_compute_eff: float
    gemm_memory_eff: float
    attn_compute_eff: float
    attn_memory_eff: float
    comm_eff: float
    step_overhead_s: float
    collective_latency_s: float
    gemm_latency_s: float = 0.0
    attn_latency_s: float = 0.0
    decode_seq_latency_s: float = 0.0
    decode_head_latency_s: float = 0.0
    gemm_fp8_eff: float = 1.0
    gemm_fp8_latency_s: float = 0.0
    gemm_overlap_p: float = math.inf
    attn_overlap_p: float = math.inf
    decode_overlap_p: float = math.inf
    decode_compute_eff: float = 1.0
    decode_memory_eff: float = 1.0
    decode_fp8_kv_factor: float = 1.0
    decode_head_dim_latency_s: float = 0.0
    decode_fp8_latency_s: float = 0.0
    decode_head_dim_growth: float = 0.0
    decode_half_ctas: float = 0.0
    decode_saturation_exp: float = 1.0
    decode_compute_half_ctas: float = 0.0
    decode_d192_factor: float = 1.0
    decode_d512_factor: float = 1.0
    decode_qo_eff: float = 1.0
    decode_d192_half_scale: float = 1.0
    decode_compute_group_exp: float = 0.0
    mla_decode_latency_s: float = 0.0
    mla_decode_seq_latency_s: float = 0.0
    mla_decode_compute_factor: float = 1.0
    mla_decode_memory_factor: float = 1.0
    mla_decode_half_ctas: float = 0.0
    mla_decode_head_latency_s: float = 0.0
    mla_decode_fp8_head_latency_s: float = 0.0
    mla_decode_fp8_kv_factor: float = 1.0
    mla_decode_fp8_compute_factor: float = 1.0
    mla_decode_overlap_p: float = math.inf
    mla_decode_compute_half_ctas: float = 0.0
    decode_d64_factor: float = 1.0
    prefill_pair_flops: float = 0.0
    prefill_latency_s: float = 0.0
    prefill_fp8_latency_s: float = 0.0
    prefill_cta_s: float = 0.0
    prefill_fp8_factor: float = 1.0
    prefill_d64_factor: float = 1.0
    prefill_odd_d_factor: float = 1.0
    mla_prefill_compute_factor: float = 1.0
    mla_prefill_memory_factor: float = 1.0
    mla_prefill_token_s: float = 0.0
    mla_prefill_longest_factor: float = 1.0
    mla_prefill_fp8_factor: float = 1.0
    mla_prefill_fp8_latency_s: float = 0.0
    mla_prefill_quant_s_per_value: float = 0.0
    gemm_split_k_tokens: float = math.inf
    gemm_full_units: float = 1.0
    gemm_parallel_exp: float = 1.0
    gemm_quant_s_per_value: float = 0.0
    gemm_fp8_block_eff: float = 1.0
    gemm_fp8_block_latency_s: float = 0.0
    gemm_fp8_block_quant_s_per_value: float = 0.0
    gemm_fp4_eff: float = 1.0
    gemm_fp4_latency_s: float = 0.0
    gemm_fp4_quant_s_per_value: float = 0.0
    gemm_fp4_memory_factor: float = 1.0
    gemm_fp4_k_factor: float = 1.0
    gemm_fp4_serial_k_tokens: float = math.inf
    collective_hop_latency_s: float = 0.0
    comm_ll_factor: float = 1.0
    comm_simple_latency_s: float = 0.0
    comm_nvls_factor: float = 0.0
    gemm_k_step_s: float = 0.0
    gemm_serial_k_tokens: float = math.inf
    gemm_power_derate: float = 0.0
    gemm_power_time_s: float = 1e-3
    source: str = ""
    provenance: dict[str, Any] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        where = f"CostParams({self.gpu})"
        for f in EFFICIENCIES:
            v = getattr(self, f)
            must(0 < v <= 1, where, f, "in (0, 1]", v)
        for f in LATENCIES:  # bounded: an infinite one priced every step "inf ms" and its shares "nan%" (helper-183)
            v = getattr(self, f)
            must(0 <= v <= MAX_PARAM_LATENCY_S, where, f, f"in [0, {MAX_PARAM_LATENCY_S:g}] s", v)
        for f, (lo, hi) in SHAPES.items():
            v = getattr(self, f)
            must(lo <= v <= hi, where, f, f"in [{lo}, {hi}]", v)

    def as_table(self) -> dict[str, Any]:
        """The TOML table of these parameters (`gpu` is the table's key)."""
        out: dict[str, Any] = {f: getattr(self, f) for f in FITTABLE}
        out["source"] = self.source
        if self.provenance:
            out["provenance"] = dict(self.provenance)
        return out


def _build(gpu: str, raw: dict[str, Any], where: str) -> CostParams:
    valid = set(FITTABLE) | {"source", "provenance"}
    unknown = set(raw) - valid
    if unknown:
        raise ConfigError(f"{where}: unknown key {sorted(unknown)[0]!r}; valid: {', '.join(sorted(valid))}")
    return construct(CostParams, raw, where, gpu=gpu)


def load_params_file(path: Path = PARAMS_FILE) -> dict[str, CostParams]:
    """All tables of a params file, by GPU key; ``default`` is the fallback table.

    The file is read every time and its text parsed once (kept by path and text, `PARSED_TEXTS` of
    them): every run builds its timers from it, and parsing took ~5 ms a run, ~0.7 % of the Mooncake
    bench's. A new dict each call (the tables are frozen)."""
    text = read_text(path, "a TOML file")
    key = (str(path), text)
    tables = _PARSED.get(key)
    if tables is None:
        tables = _parse_params(parse_toml(text, path), path)
        if len(_PARSED) >= PARSED_TEXTS:
            _PARSED.clear()
        _PARSED[key] = tables
    return dict(tables)


_PARSED: dict[tuple[str, str], dict[str, CostParams]] = {}


def _parse_params(data: dict[str, Any], path: Path) -> dict[str, CostParams]:
    unknown = set(data) - {"gpu", "default", "provenance"}
    if unknown:
        raise ConfigError(f"{path}: unknown table {sorted(unknown)[0]!r}; valid: default, gpu, provenance")
    must(isinstance(data.get("default"), dict), str(path), "default", "a table", data.get("default"))
    must(isinstance(data.get("gpu", {}), dict), str(path), "gpu", "a table of tables", data.get("gpu"))
    for key, raw in data.get("gpu", {}).items():
        must(isinstance(raw, dict), str(path), f"gpu.{key}", "a table", raw)
    out = {"default": _build("default", data["default"], f"{path}: default")}
    for key, raw in data.get("gpu", {}).items():
        merged = {**data["default"], "provenance": {}, **raw}
        out[key] = _build(key, merged, f"{path}: gpu.{key}")
    return out


def load_params(gpu: str, path: Path = PARAMS_FILE) -> CostParams:
    """The parameters for `gpu` (case-insensitive), or the default table relabelled for it."""
    table = load_params_file(path)
    for key, p in table.items():
        if key.lower() == gpu.lower() and key != "default":
            return p
    d = table["default"]
    return dataclasses.replace(d, gpu=gpu, source=f"default table (no fit for {gpu}): {d.source}")


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float) and math.isinf(v):
        return "inf" if v > 0 else "-inf"
    if isinstance(v, int | float):
        return repr(float(v)) if isinstance(v, float) else str(v)
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(v, list | tuple):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    raise TypeError(f"cannot write {type(v).__name__} to TOML")


def dumps_params(params: dict[str, CostParams], header: str, provenance: dict[str, Any]) -> str:
    """Write params back as TOML (``[provenance]``, ``[default]``, ``[gpu.KEY]`` with provenance)."""
    lines = [f"# {line}" if line else "#" for line in header.splitlines()] + ["", "[provenance]"]
    lines += [f"{k} = {_toml_value(v)}" for k, v in provenance.items()]
    for key in ["default", *sorted(k for k in params if k != "default")]:
        table = params[key].as_table()
        prov = table.pop("provenance", {})
        lines += ["", "[default]" if key == "default" else f"[gpu.{key}]"]
        lines += [f"{k} = {_toml_value(v)}" for k, v in table.items()]
        if prov and key != "default":
            lines += ["", f"[gpu.{key}.provenance]"]
            lines += [f"{k} = {_toml_value(v)}" for k, v in prov.items()]
    return "\n".join(lines) + "\n"
