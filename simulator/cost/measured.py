"""The cost model against a GEMM table timed on a GPU (`hardware/measure_gemm.py`'s rows).

Each row's error is ``predicted / measured − 1``, the prediction `simulator.cost.kernels.predict_s`
(``op = "gemm"``, ``in_bytes`` 2 for bf16 and 1 for fp8, one scale per tensor) with the GPU's shipped
parameters; an fp8 row is also scored against its GEMM plus the timed cast of its input
(``cast_s``), which is what the formula's quantisation terms price (README, "Checked on a real H200").
A w4a16 row (a weight-only int4 GEMM) is priced as kvsim prices weight-only GEMMs: `gemm_s` at the
bf16 peak, no input quantisation, over ``m·k·2 + n·k·W4A16_WEIGHT_BYTES + m·n·2`` bytes.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from hardware.catalog import load_catalog
from hardware.measure_gemm import W4A16_GROUP
from simulator.cost.kernels import gemm_s, predict_s
from simulator.cost.params import ACTIVATION_BYTES, CostParams, load_params
from simulator.errors import ConfigError
from simulator.models import dtype, gemm_dtype

# the dtypes measure_gemm.py times, bytes an input value (w4a16's activations are bf16), from kv_dtypes.toml
GEMM_DTYPE_BYTES = {"bf16": dtype("bf16").bytes_per_value, "fp8": dtype("fp8").bytes_per_value,
                    "w4a16": dtype("bf16").bytes_per_value}
# bytes a weight of measure_gemm.py's int4 kernel reads (torch._weight_int4pack_mm: 4 bits, and a bf16 scale
# and a bf16 zero point per group of its W4A16_GROUP weights)
W4A16_WEIGHT_BYTES = 0.5 + 2 * dtype("bf16").effective_bytes / W4A16_GROUP


def gemm_errors(table: pd.DataFrame, gpu: str, params: CostParams | None = None) -> pd.DataFrame:
    """`table` (columns ``dtype, m, n, k, measured_s``, and ``cast_s`` for fp8) with ``predicted_s``,
    ``err`` and, where ``cast_s`` is given, ``err_with_cast``; `params` default to `gpu`'s shipped ones."""
    unknown = sorted(set(table["dtype"]) - set(GEMM_DTYPE_BYTES))
    if unknown:
        raise ConfigError(f"GEMM table: 'dtype' must be one of {', '.join(GEMM_DTYPE_BYTES)} (got {unknown[0]!r})")
    spec = load_catalog().gpu(gpu)
    p = params or load_params(spec.key)
    out = table.copy()
    in_bytes = out["dtype"].map(GEMM_DTYPE_BYTES)
    cols = dict(m=out["m"], n=out["n"], k=out["k"], in_bytes=in_bytes)
    out["predicted_s"] = predict_s("gemm", cols, spec, p)
    w4 = (out["dtype"] == "w4a16").to_numpy()
    if w4.any():  # weight-only: bf16 GEMMs over the int4 weights' bytes (`StepModel`'s pricing of w4a16)
        m, n, k = (out.loc[w4, c].to_numpy(dtype=float) for c in ("m", "n", "k"))
        nbytes = m * k * ACTIVATION_BYTES + n * k * W4A16_WEIGHT_BYTES + m * n * ACTIVATION_BYTES
        peak = spec.peak_flops(gemm_dtype("w4a16", spec))  # bf16: weight-only on every GPU
        out.loc[w4, "predicted_s"] = gemm_s(2 * m * n * k, nbytes, m, n, k, peak, False, spec, p)
    out["err"] = out["predicted_s"] / out["measured_s"] - 1
    cast = pd.to_numeric(out.get("cast_s", pd.Series(np.nan, index=out.index)), errors="coerce")
    out["err_with_cast"] = out["predicted_s"] / (out["measured_s"] + cast) - 1
    return out


def gemm_summary(errors: pd.DataFrame) -> pd.DataFrame:
    """Per dtype: rows, mean absolute error, median, least and largest error (and against GEMM + cast)."""
    g = errors.groupby("dtype", sort=False)
    return pd.DataFrame({
        "rows": g.size(),
        "mean_abs_err": g["err"].apply(lambda e: e.abs().mean()),
        "median_err": g["err"].median(),
        "min_err": g["err"].min(),
        "max_err": g["err"].max(),
        "mean_err_with_cast": g["err_with_cast"].mean(),
    })
