"""Scores the shipped parameters against aiconfigurator's held-out rows (aiconfigurator-core is a
dev dependency, so this runs in CI).

The shipped fit is ``--framework mixed`` (`simulator.cost.aiconfigurator.MIXED`): TensorRT-LLM's
GEMM, prefill attention and MLA tables, vLLM's decode attention table, NCCL's all-reduce. Bounds
are what the fit achieves, rounded up by 0.3-0.8 points, per GPU and op class, over every
held-out row (one in five by shape hash, kernels of every length). The 10% target (issue 3)
holds everywhere except in `MISSES` (MLA decode on Blackwell at 10.9-11.3%, block-scaled fp8
GEMMs on Hopper at 14-15%, NVFP4 GEMMs on B300 at 12.6%; README, "Cost model and calibration",
says why).
"""

import numpy as np
import pytest

from simulator.cost.params import load_params

GPUS = ("H100", "H200", "B200", "GB200", "B300")
TARGET = 0.10
# held-out MAPE bounds, all held-out rows: (H100, H200, B200, GB200, B300)
BOUNDS = {
    "gemm_bf16": (0.07, 0.07, 0.09, 0.09, 0.095),
    "gemm_fp8": (0.055, 0.06, 0.06, 0.06, 0.065),
    "gemm_fp8_block": (0.15, 0.16, 0.095, 0.095, 0.1),
    "gemm_fp4": (None, None, 0.068, 0.07, 0.13),  # NVFP4: Blackwell only (Hopper has no fp4 tensor cores)
    "context_attention": (0.075, 0.075, 0.08, 0.08, 0.075),
    "generation_attention": (0.09, 0.09, 0.105, 0.1, 0.1),
    "mla_context": (0.07, 0.07, 0.07, 0.08, 0.08),
    "mla_generation": (0.09, 0.09, 0.12, 0.115, 0.115),
    "all_reduce": (0.06, 0.065, 0.07, 0.06, 0.08),
}
MEETS_TARGET = (
    "gemm_bf16",
    "gemm_fp8",
    "gemm_fp8_block",
    "gemm_fp4",
    "context_attention",
    "generation_attention",
    "mla_context",
    "mla_generation",
    "all_reduce",
)
# where the fit misses 10% (README, "Cost model and calibration", says why)
MISSES = {
    ("H100", "gemm_fp8_block"),
    ("H200", "gemm_fp8_block"),
    ("B300", "gemm_fp4"),
    ("B200", "mla_generation"),
    ("GB200", "mla_generation"),
    ("B300", "mla_generation"),
}


@pytest.mark.parametrize("gpu", GPUS)
def test_shipped_params_score_on_held_out_rows(gpu):
    pytest.importorskip("aiconfigurator_core")
    from simulator.cost.aiconfigurator import SYSTEMS, _predict, system_rows

    system = {v: k for k, v in SYSTEMS.items()}[gpu]
    p = load_params(gpu)
    i = GPUS.index(gpu)
    seen = set()
    for label, rows in system_rows(system, p.provenance["kernels_framework"]).items():
        ho = rows.holdout != 0
        mape = np.abs(_predict(rows, gpu, p) / rows.measured_s - 1)[ho].mean()
        assert mape == pytest.approx(p.provenance[f"kernels_holdout_mape_{label}"], abs=0.005), label
        assert mape < BOUNDS[label][i], label
        if label in MEETS_TARGET and (gpu, label) not in MISSES:
            assert mape < TARGET, label
        seen.add(label)
    assert seen == {label for label, bounds in BOUNDS.items() if bounds[i] is not None}


def test_mixed_fit_takes_each_op_class_from_its_engine():
    # the shipped parameters say which measured table each op class was fitted to
    p = load_params("H100")
    assert p.provenance["kernels_framework"] == "mixed"
    for label, engine in (("gemm_bf16", "trtllm"), ("context_attention", "trtllm"), ("generation_attention", "vllm")):
        assert f"/{engine}/" in p.provenance[f"kernels_table_{label}"], label


def test_missing_package_is_a_config_error(monkeypatch):
    import builtins

    from simulator.cost import aiconfigurator
    from simulator.errors import ConfigError

    real = builtins.__import__

    def fake(name, *a, **k):
        if name.startswith("aiconfigurator"):
            raise ImportError(name)
        return real(name, *a, **k)

    monkeypatch.setattr(builtins, "__import__", fake)
    with pytest.raises(ConfigError, match="not installed"):
        aiconfigurator.data_root()


def test_fp4_gemms_have_their_own_fit_on_blackwell_and_borrow_fp8_on_hopper():
    from simulator.cost.aiconfigurator import FP4_FROM_FP8

    b200, h100 = load_params("B200"), load_params("H100")
    # the NVFP4 kernel as fitted: about 70% of the fp8 kernel's share of its (doubled) peak, no
    # split-K (k beyond 70k runs in one slice), a main loop ~1.9x and memory time ~1.2x fp8's
    assert b200.gemm_fp4_eff == pytest.approx(0.70, abs=0.03)
    assert b200.gemm_fp4_serial_k_tokens > 50_000
    assert b200.gemm_fp4_k_factor == pytest.approx(1.9, abs=0.15)
    assert b200.gemm_fp4_memory_factor == pytest.approx(1.19, abs=0.05)
    # Hopper has no nvfp4 table: its fp4 parameters are its fp8 ones (and fp4 has no peak there)
    for fp4, fp8 in FP4_FROM_FP8.items():
        assert getattr(h100, fp4) == getattr(h100, fp8), fp4
    assert (h100.gemm_fp4_memory_factor, h100.gemm_fp4_k_factor) == (1.0, 1.0)


def test_the_short_kernel_bound_is_past_what_l2_holds():
    """helper-187: "L2 (50 MB on H100)" was written in simulator/cost/aiconfigurator.py without a source; the L2 now
    lives in hardware/gpus.toml beside the other datasheet figures (H100 and H200: 50 MB, the H100 architecture
    whitepaper). Reading it whole from HBM takes 50e6 / 3.35e12 = 14.93 µs on H100 and 50e6 / 4.8e12 = 10.42 µs on
    H200, under a third of `MIN_FIT_KERNEL_S` (50 µs): a kernel that long reads more than L2 holds."""
    from hardware.catalog import load_catalog
    from simulator.cost.aiconfigurator import MIN_FIT_KERNEL_S

    cat = load_catalog()
    assert (cat.gpu("H100").l2_bytes, cat.gpu("H200").l2_bytes) == (50e6, 50e6)
    reads = {g: cat.gpu(g).l2_bytes / cat.gpu(g).hbm_bytes_per_s for g in ("H100", "H200")}
    assert reads["H100"] == pytest.approx(14.925e-6, rel=1e-4)
    assert reads["H200"] == pytest.approx(10.417e-6, rel=1e-4)
    assert all(3 * t < MIN_FIT_KERNEL_S for t in reads.values())


def test_no_shipped_table_is_thinned():
    """`MAX_TRAIN_ROWS` is a guard on fit time, not a tuning: a table of k training rows trains on every
    (k // 20,000)-th, and every shipped table has fewer than 40,000, so the fit trains on all of them (the largest,
    H100's and H200's context attention: 29,172)."""
    from simulator.cost.aiconfigurator import MAX_TRAIN_ROWS, SYSTEMS, KernelRows, _train_rows, system_rows

    def table(k: int) -> KernelRows:
        return KernelRows("gemm", {}, np.ones(k), np.zeros(k, dtype=bool), "", "gemm_bf16")

    assert MAX_TRAIN_ROWS == 20000
    assert [_train_rows([table(k)]) for k in (29172, 39999, 40000, 59999, 60000)] == [29172, 39999, 20000, 30000,
                                                                                      20000]
    pytest.importorskip("aiconfigurator_core")
    largest = {}
    for system in SYSTEMS:
        rows = system_rows(system, "mixed")
        train = {op: int((r.holdout == 0).sum()) for op, r in rows.items()}
        assert all(_train_rows([r]) == train[op] for op, r in rows.items()), system
        largest[system] = max(train.values())
    assert max(largest.values()) == largest["h100_sxm"] == largest["h200_sxm"] == 29172
