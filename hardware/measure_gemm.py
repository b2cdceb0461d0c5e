"""Measure GEMM times on this machine's GPU for dense-model weight shapes; write a kernel table.

Needs PyTorch with CUDA (not a kvsim dependency). Times ``y = x · Wᵀ`` (``x`` of ``m × k``, ``W`` of
``n × k``) with cuBLAS, as `torch.matmul` in bf16 and `torch._scaled_mm` in fp8 (e4m3, one scale per
tensor, on inputs already in fp8), in a CUDA graph (`graph_time_s`). The
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


def _matmul(x: Any, weights: Iterator[Any]) -> Any:
    """``x · Wᵀ`` in bf16, W the next of `weights`."""
    import torch

    return torch.matmul(x, next(weights).t())


def _scaled_mm(x: Any, weights: Iterator[Any], scale: Any) -> Any:
    """``x · Wᵀ`` in fp8 (one `scale` for each input), W the next of `weights`; the output in bf16."""
    import torch

    return torch._scaled_mm(x, next(weights).t(), scale_a=scale, scale_b=scale, out_dtype=torch.bfloat16)


def _cast(x: Any, inv_scale: Any) -> Any:
    """`x` quantised to fp8 with one scale, as eager PyTorch runs it: a multiply, then a conversion."""
    import torch

    return (x * inv_scale).to(torch.float8_e4m3fn)


def measure(gpu: str) -> list[dict[str, object]]:
    """Rows for every shape of `SHAPES` and `ROWS`, bf16 and (m ≥ `FP8_MIN_ROWS`) fp8."""
    import torch

    from hardware.measure_attention import graph_time_s, past_l2

    dev = "cuda"
    torch.backends.cuda.matmul.allow_tf32 = False
    source = (f"hardware/measure_gemm.py (CUDA graph) on {torch.cuda.get_device_name()}, torch {torch.__version__}, "
              f"{date.today()}")
    one = torch.ones((), device=dev, dtype=torch.float32)
    rows: list[dict[str, object]] = []
    for name, (n, k) in SHAPES.items():
        copies, repeats = past_l2(n * k, least=2)  # in fp8 bytes: bf16 reads twice as many
        weights = [torch.randn(n, k, device=dev, dtype=torch.bfloat16) for _ in range(copies)]
        weights8 = [w.to(torch.float8_e4m3fn) for w in weights]
        for m in ROWS:
            x = torch.randn(m, k, device=dev, dtype=torch.bfloat16)
            t = graph_time_s(partial(_matmul, x, itertools.cycle(weights)), repeats)  # each call the next copy
            rows.append(dict(gpu=gpu, shape=name, dtype="bf16", m=m, n=n, k=k, measured_s=t, cast_s="", source=source))
            if m >= FP8_MIN_ROWS:
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
    args = ap.parse_args(argv)
    from hardware.measure_attention import write_measured

    rc = write_measured("measure_gemm", args.out, partial(measure, args.gpu))
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
