"""Measure GEMM times on this machine's GPU for dense-model weight shapes; write a kernel table.

Needs PyTorch with CUDA (not a kvsim dependency). Times ``y = x · Wᵀ`` (``x`` of ``m × k``, ``W`` of
``n × k``) with cuBLAS, as `torch.matmul` in bf16 and `torch._scaled_mm` in fp8 (e4m3, one scale per
tensor, on inputs already in fp8), and with ``--dtypes w4a16`` a weight-only int4 GEMM (PyTorch's own,
`torch._weight_int4pack_mm`: gpt-fast's tinygemm, int4 weights with a bf16 scale and zero point per group
of 128, bf16 activations; not vLLM's Marlin), in a CUDA graph (`graph_time_s`). The
captured calls cycle through copies of the weights that total at least ``4 × L2`` bytes (`past_l2`),
so no call finds its weights in L2, as in a model's forward pass, which reads each layer's weights once::

    python hardware/measure_gemm.py --gpu H200 --out gemm.csv

An fp8 row also times, as ``cast_s``, the quantisation of its ``m × k`` input that an engine runs
before the GEMM unless it fuses it into the op before (`_cast`: two kernels, a multiply and a
conversion). Each row is ``gpu,shape,dtype,m,n,k,measured_s,cast_s,source``. Then it prints how
kvsim's parameters for ``--gpu`` price the table (`scored`, with `simulator.cost.measured`), as
``tests/cost/test_measured_h200.py`` checks for the table measured on an H200.
"""

from __future__ import annotations

import argparse
import itertools
import sys
from collections.abc import Iterator
from datetime import date
from functools import partial
from pathlib import Path
from typing import Any

# (n, k) of y = x · Wᵀ: Llama-3.1-8B's fused projections (tp 1), Llama-3.1-70B's at tp 8 and tp 1
SHAPES = {
    "8B qkv": (6144, 4096), "8B o": (4096, 4096), "8B gate_up": (28672, 4096), "8B down": (4096, 14336),
    "8B lm_head": (128256, 4096),
    "70B/tp8 qkv": (1280, 8192), "70B/tp8 o": (8192, 1024), "70B/tp8 gate_up": (7168, 8192),
    "70B/tp8 down": (8192, 3584), "70B qkv": (10240, 8192), "70B gate_up": (57344, 8192),
}
ROWS = (1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192)  # m: tokens in the step
FP8_MIN_ROWS = 16  # torch._scaled_mm needs m a multiple of 16
DTYPES = ("bf16", "fp8", "w4a16")  # what --dtypes may name
W4A16_GROUP = 128  # the int4 kernel's group: a bf16 scale and zero point per 128 weights of a row
W4A16_INNER_K_TILES = 8  # torch._convert_weight_to_int4pack's packing (k a multiple of 16 · 8)


def _matmul(x: Any, weights: Iterator[Any]) -> Any:
    """``x · Wᵀ`` in bf16, W the next of `weights`."""
    import torch

    return torch.matmul(x, next(weights).t())


def _scaled_mm(x: Any, weights: Iterator[Any], scale: Any) -> Any:
    """``x · Wᵀ`` in fp8 (one `scale` for each input), W the next of `weights`; the output in bf16."""
    import torch

    return torch._scaled_mm(x, next(weights).t(), scale_a=scale, scale_b=scale, out_dtype=torch.bfloat16)


def _int4_mm(x: Any, weights: Iterator[tuple[Any, Any]]) -> Any:
    """``x · Wᵀ`` with W int4 (the next packed weights and scales-and-zeros of `weights`), x and y in bf16."""
    import torch

    packed, scales_zeros = next(weights)
    return torch._weight_int4pack_mm(x, packed, W4A16_GROUP, scales_zeros)


def _int4_weights(n: int, k: int) -> tuple[Any, Any]:
    """Random int4 weights of ``n × k``, packed for `torch._weight_int4pack_mm`, and their scales and zeros."""
    import torch

    w = torch.randint(0, 16, (n, k), dtype=torch.int32, device="cuda")
    packed = torch._convert_weight_to_int4pack((w[:, ::2] << 4 | w[:, 1::2]).to(torch.uint8), W4A16_INNER_K_TILES)
    return packed, torch.rand(k // W4A16_GROUP, n, 2, device="cuda", dtype=torch.bfloat16)


def _cast(x: Any, inv_scale: Any) -> Any:
    """`x` quantised to fp8 with one scale, as eager PyTorch runs it: a multiply, then a conversion."""
    import torch

    return (x * inv_scale).to(torch.float8_e4m3fn)


def measure(gpu: str, dtypes: tuple[str, ...] = ("bf16", "fp8")) -> list[dict[str, object]]:
    """Rows for every shape of `SHAPES` and `ROWS` in `dtypes`: bf16, fp8 (m ≥ `FP8_MIN_ROWS`), w4a16."""
    import torch

    from hardware.measure_attention import graph_time_s, l2_bytes, past_l2

    dev = "cuda"
    torch.backends.cuda.matmul.allow_tf32 = False
    source = (f"hardware/measure_gemm.py (CUDA graph) on {torch.cuda.get_device_name()}, torch {torch.__version__}, "
              f"{date.today()}")
    one = torch.ones((), device=dev, dtype=torch.float32)
    l2 = l2_bytes(gpu)
    rows: list[dict[str, object]] = []
    for name, (n, k) in SHAPES.items():
        if "w4a16" in dtypes:
            copies4, repeats4 = past_l2(n * k // 2, l2, least=2)
            weights4 = [_int4_weights(n, k) for _ in range(copies4)]
            for m in ROWS:
                x = torch.randn(m, k, device=dev, dtype=torch.bfloat16)
                t = graph_time_s(partial(_int4_mm, x, itertools.cycle(weights4)), repeats4)
                rows.append(dict(gpu=gpu, shape=name, dtype="w4a16", m=m, n=n, k=k, measured_s=t, cast_s="",
                                 source=source))
            del weights4
        if "bf16" not in dtypes and "fp8" not in dtypes:
            continue
        copies, repeats = past_l2(n * k, l2, least=2)  # in fp8 bytes: bf16 reads twice as many
        weights = [torch.randn(n, k, device=dev, dtype=torch.bfloat16) for _ in range(copies)]
        weights8 = [w.to(torch.float8_e4m3fn) for w in weights]
        for m in ROWS:
            x = torch.randn(m, k, device=dev, dtype=torch.bfloat16)
            if "bf16" in dtypes:
                t = graph_time_s(partial(_matmul, x, itertools.cycle(weights)), repeats)  # each call the next copy
                rows.append(dict(gpu=gpu, shape=name, dtype="bf16", m=m, n=n, k=k, measured_s=t, cast_s="",
                                 source=source))
            if "fp8" in dtypes and m >= FP8_MIN_ROWS:
                x8 = x.to(torch.float8_e4m3fn)
                t = graph_time_s(partial(_scaled_mm, x8, itertools.cycle(weights8), one), repeats)
                cast = graph_time_s(partial(_cast, x, one))
                rows.append(dict(gpu=gpu, shape=name, dtype="fp8", m=m, n=n, k=k, measured_s=t, cast_s=cast,
                                 source=source))
        del weights, weights8
        torch.cuda.empty_cache()
    return rows


def main(argv: list[str] | None = None) -> int:
    """Parse arguments, measure, write the CSV; returns an exit code."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--gpu", required=True, help="kvsim GPU key of this machine's GPU (H100, H200, ...)")
    ap.add_argument("--out", type=Path, default=Path("gemm.csv"))
    ap.add_argument("--dtypes", default="bf16,fp8", help=f"a comma list of {', '.join(DTYPES)} (default bf16,fp8)")
    args = ap.parse_args(argv)
    dtypes = tuple(d.strip() for d in args.dtypes.split(","))
    if not dtypes or not set(dtypes) <= set(DTYPES):
        print(f"measure_gemm: --dtypes must be a comma list of {', '.join(DTYPES)} (got {args.dtypes!r})",
              file=sys.stderr)
        return 2
    from hardware.measure_attention import write_measured

    rc = write_measured("measure_gemm", args.out, partial(measure, args.gpu, dtypes))
    if rc == 0:
        print(scored(args.out, args.gpu))
    return rc


def scored(path: Path, gpu: str) -> str:
    """How kvsim's parameters for `gpu` price the table at `path` (`simulator.cost.measured`), a line
    per dtype; one line saying why not when kvsim has no such GPU."""
    import pandas as pd

    from simulator.cost.measured import gemm_errors, gemm_summary
    from simulator.errors import ConfigError

    try:
        summary = gemm_summary(gemm_errors(pd.read_csv(path), gpu))
    except ConfigError as e:
        return f"not scored: {e}"
    lines = []
    for dtype, r in summary.iterrows():
        cast = "" if pd.isna(r["mean_err_with_cast"]) else (
            f"; against the GEMM plus its input's cast {r['mean_err_with_cast']:+.1%} on average")
        lines.append(f"{dtype}: kvsim's {gpu} parameters price {int(r['rows'])} GEMMs {r['mean_abs_err']:.1%} off on "
                     f"average (median {r['median_err']:+.1%}, {r['min_err']:+.0%} to {r['max_err']:+.0%}){cast}")
    return "\n".join(lines)


if __name__ == "__main__":
    if not __package__:  # run as `python hardware/measure_gemm.py`: kvsim from this checkout
        sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    raise SystemExit(main())
