"""Least-squares fit of `CostParams` fields to measured times.

Residuals are ``log(predicted_s / measured_s)`` (a relative error, symmetric in over- and
under-prediction), minimised by `scipy.optimize.least_squares` with bounds: efficiencies in
``[EFF_FLOOR, 1]``, latencies in ``[0, MAX_LATENCY_S]`` (fitted in microseconds), kernel-shape
parameters in `FIT_BOUNDS` (each scaled so that all free variables are of order one).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from scipy.optimize import least_squares

from simulator.cost.params import EFFICIENCIES, FITTABLE, SHAPES, CostParams
from simulator.errors import ConfigError

EFF_FLOOR = 1e-3
MAX_LATENCY_S = 0.1
_US = 1e-6
ROBUST_SCALE = 0.1  # soft_l1 loss: log-residuals beyond ~10% count linearly, not squared
MAX_FIT_P = 64.0  # a smooth-max exponent beyond this is a hard max to within 1.1%
# kernel-shape parameters as fitted: (lower, upper, scale of the free variable)
FIT_BOUNDS = {
    name: (lo, min(hi, MAX_FIT_P) if name.endswith("_p") else hi, {"prefill_pair_flops": 100.0}.get(name, 1.0))
    for name, (lo, hi) in SHAPES.items()
}
FIT_BOUNDS["decode_half_ctas"] = (0.0, 1e3, 1.0)
FIT_BOUNDS["decode_compute_half_ctas"] = (0.0, 1e3, 10.0)
FIT_BOUNDS["mla_decode_half_ctas"] = (0.0, 1e3, 1.0)
FIT_BOUNDS["mla_decode_compute_half_ctas"] = (0.0, 1e3, 10.0)
FIT_BOUNDS["decode_d192_half_scale"] = (0.01, 1e3, 10.0)
FIT_BOUNDS["gemm_split_k_tokens"] = (128.0, 1e5, 1000.0)
FIT_BOUNDS["gemm_full_units"] = (1.0, 1e4, 10.0)
FIT_BOUNDS["gemm_quant_s_per_value"] = (0.0, 1e-9, 1e-12)
FIT_BOUNDS["gemm_fp8_block_quant_s_per_value"] = (0.0, 1e-9, 1e-12)
FIT_BOUNDS["gemm_fp4_quant_s_per_value"] = (0.0, 1e-9, 1e-12)
FIT_BOUNDS["comm_nvls_factor"] = (0.05, 2.0, 1.0)  # 0 (no NVLS) has no gradient
FIT_BOUNDS["gemm_k_step_s"] = (0.0, 1e-7, 1e-9)
FIT_BOUNDS["gemm_serial_k_tokens"] = (32.0, 1e5, 1000.0)
FIT_BOUNDS["gemm_fp4_serial_k_tokens"] = (32.0, 1e5, 1000.0)
FIT_BOUNDS["gemm_power_derate"] = (0.0, 2.0, 1.0)
FIT_BOUNDS["gemm_power_time_s"] = (1e-6, 0.1, 1e-4)
FIT_BOUNDS["mla_prefill_quant_s_per_value"] = (0.0, 1e-9, 1e-12)
FIT_BOUNDS["mla_prefill_token_s"] = (0.0, 1e-6, 1e-9)
FIT_BOUNDS["mla_decode_head_latency_s"] = (0.0, 1e-6, 1e-9)
FIT_BOUNDS["mla_decode_fp8_head_latency_s"] = (0.0, 1e-6, 1e-9)


@dataclass(frozen=True, slots=True, kw_only=True)
class FitResult:
    """Fitted parameters, the freed names, training points and relative errors."""

    params: CostParams
    free: tuple[str, ...]
    n_points: int
    rel_errors: np.ndarray

    @property
    def mape(self) -> float:
        return float(np.mean(np.abs(self.rel_errors)))

    @property
    def max_error(self) -> float:
        return float(np.max(np.abs(self.rel_errors)))


def _scale(name: str) -> float:
    if name in FIT_BOUNDS:
        return FIT_BOUNDS[name][2]
    return 1.0 if name in EFFICIENCIES else _US


def _bounds(name: str) -> tuple[float, float]:
    if name in FIT_BOUNDS:
        lo, hi, scale = FIT_BOUNDS[name]
        return lo / scale, hi / scale
    return (EFF_FLOOR, 1.0) if name in EFFICIENCIES else (0.0, MAX_LATENCY_S / _US)


START_INSIDE = 1e-3  # how far inside its bounds a parameter that starts on its lower bound starts (of the span)
ON_BOUND = 1e-6  # a start within this share of that offset above the lower bound counts as on it (rounding)


def fit_params(
    base: CostParams,
    free: tuple[str, ...],
    model: Callable[[CostParams], np.ndarray],
    measured_s: np.ndarray,
    loss: str = "linear",
    f_scale: float = ROBUST_SCALE,
) -> FitResult:
    """Fit the `free` fields of `base` so that ``model(params)`` matches `measured_s`.

    ``loss="soft_l1"`` makes the fit robust to rows the roofline cannot describe (large
    kernel tables), quadratic within `f_scale` of a log-residual and linear beyond; the default
    is plain least squares.

    Raises `ConfigError` when there are fewer points than free parameters, a name is not a
    parameter, or a measured time is not positive.
    """
    unknown = [f for f in free if f not in FITTABLE]
    if unknown:
        raise ConfigError(f"cannot fit {unknown[0]!r}; fittable: {', '.join(FITTABLE)}")
    measured = np.asarray(measured_s, dtype=float)
    if len(measured) < len(free):
        raise ConfigError(
            f"fit for {base.gpu}: {len(measured)} training points for {len(free)} free parameters "
            f"({', '.join(free)}); need at least as many points as parameters"
        )
    if not np.all(measured > 0):
        raise ConfigError(f"fit for {base.gpu}: 'measured_s' must be > 0 (got {measured.min()!r})")

    def params_of(x: np.ndarray) -> CostParams:
        values: dict[str, Any] = {f: float(v) * _scale(f) for f, v in zip(free, x, strict=True)}
        return replace(base, **values)

    def residual(x: np.ndarray) -> np.ndarray:
        return np.log(model(params_of(x)) / measured)

    lo = np.array([_bounds(f)[0] for f in free])
    hi = np.array([_bounds(f)[1] for f in free])
    x0 = np.clip([getattr(base, f) / _scale(f) for f in free], lo, hi)
    # a start on a bound (a shipped step overhead of ~0) stalls the bounded solver there whatever the data
    # (helper-119: one H100 row 3.8 ms above the model's fitted nothing): start `START_INSIDE` of the way in
    x0 = np.where(x0 <= lo + START_INSIDE * (hi - lo) * ON_BOUND, lo + START_INSIDE * (hi - lo), x0)
    sol = least_squares(residual, x0, bounds=(lo, hi), x_scale=1.0, loss=loss, f_scale=f_scale)
    fitted = params_of(sol.x)
    return FitResult(params=fitted, free=free, n_points=len(measured), rel_errors=model(fitted) / measured - 1.0)
