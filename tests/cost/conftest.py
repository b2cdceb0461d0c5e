import pytest

from hardware.catalog import load_catalog
from simulator.cost import CostParams, StepModel
from simulator.kv import KVLayout, parse_layout
from simulator.models import get_model


@pytest.fixture
def ideal() -> CostParams:
    """Datasheet peaks, no latencies: hand computations are exact."""
    return CostParams(
        gpu="ideal",
        gemm_compute_eff=1.0,
        gemm_memory_eff=1.0,
        attn_compute_eff=1.0,
        attn_memory_eff=1.0,
        comm_eff=1.0,
        step_overhead_s=0.0,
        collective_latency_s=0.0,
    )


@pytest.fixture
def make():
    def _make(
        gpu: str,
        model: str,
        params: CostParams,
        tp: int = 1,
        layout: str = "native",
        dtype: str | None = None,
    ) -> StepModel:
        lay: KVLayout = parse_layout(layout)
        return StepModel(load_catalog().gpu(gpu), get_model(model), lay, tp, params, dtype)

    return _make
