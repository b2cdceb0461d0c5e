"""Step-time cost model: how long one batch iteration takes on a replica of GPUs.

Pure functions and a precomputed `StepModel`; no SimPy. Parameters come from the calibrated
``params.toml`` shipped beside this module (`load_params`).
"""

from simulator.cost.kernels import allreduce_s, smooth_max
from simulator.cost.params import CostParams, load_params, load_params_file
from simulator.cost.roofline import causal_pairs, expected_experts
from simulator.cost.step_model import StepCost, StepModel

__all__ = [
    "CostParams",
    "StepCost",
    "StepModel",
    "allreduce_s",
    "causal_pairs",
    "expected_experts",
    "load_params",
    "load_params_file",
    "smooth_max",
    "step_model",
]


def step_model(gpu: str, model: str, tp: int = 1, layout: str = "native", dtype: str | None = None) -> StepModel:
    """A `StepModel` from catalog names: ``step_model("H100", "Llama-3.1-8B")``."""
    from hardware.catalog import load_catalog
    from simulator.kv import parse_layout
    from simulator.models import get_model

    g = load_catalog().gpu(gpu)
    return StepModel(g, get_model(model), parse_layout(layout), tp, load_params(g.key), dtype)
