"""Printed figures of the compare, fit, cost and models tables, against hand-computed values
(numbers audit r7: D1, D6, D8, D10, D12)."""

from __future__ import annotations

import pytest

from simulator.compare import compare_strategies
from simulator.engine import AffineTimer, EngineConfig
from workloads.request import Request

# three short requests and a fast timer: the memory factors depend on the plan and layout alone
REQS = [Request(id=i, arrival_s=float(i), prompt_tokens=p, output_tokens=o, segments=((i, p),))
        for i, (p, o) in enumerate([(1000, 200), (3000, 100), (500, 50)])]
TIMER = AffineTimer(overhead_s=1e-3, per_context_token_s=1e-9, per_prefill_token_s=1e-6)


# --- D1: compare's memory_factor sums every GPU's copy ------------------------------------------

def _factors(config: EngineConfig) -> dict[str, tuple[float, float]]:
    df = compare_strategies(config, REQS, ["native", "mla"], timer=TIMER).set_index("strategy")
    return {s: (df.memory_factor[s], df.memory_factor_per_gpu[s]) for s in df.index}


def test_memory_factor_counts_the_mla_latent_on_each_of_tp8s_gpus() -> None:
    """Llama-3.1-70B (64 heads of 128, 8 KV heads, 80 layers) under TP8. MHA bf16: 2·64·128 = 16,384
    values a layer. GQA: 2·8·128 = 2,048, 0.125 of it, its 8 heads one a GPU: 0.125 in all, 0.125/8 =
    0.015625 a GPU. The MLA retrofit's 576-value latent: 576/16,384 = 0.03515625, whole on each of the
    8 GPUs: 8 · 0.03515625 = 0.28125 in all (2.25× GQA's), 0.03515625 a GPU."""
    got = _factors(EngineConfig(model="Llama-3.1-70B"))
    assert got["native"] == pytest.approx((0.125, 0.015625), rel=1e-12)
    assert got["mla"] == pytest.approx((0.28125, 0.03515625), rel=1e-12)


def test_memory_factor_counts_replicated_kv_heads() -> None:
    """TP16 over two 8×H100 nodes: 8 KV heads over 16 GPUs, one a GPU, so each is held twice:
    2 · 0.125 = 0.25 in all, 0.125/8 = 0.015625 a GPU (0.25 / 16 GPUs). The latent: 16 · 0.03515625
    = 0.5625 in all, 0.03515625 a GPU."""
    got = _factors(EngineConfig(model="Llama-3.1-70B", tp=16, n_nodes=2))
    assert got["native"] == pytest.approx((0.25, 0.015625), rel=1e-12)
    assert got["mla"] == pytest.approx((0.5625, 0.03515625), rel=1e-12)


def test_memory_factor_sums_the_pipeline_stages() -> None:
    """TP8 PP2 over two nodes: each stage holds 40 of the 80 layers. GQA: every GPU 1 head of 40 layers,
    0.125/16 = 0.0078125 a GPU, 16 of them: 0.125 in all. The latent, whole on the 8 GPUs of each
    stage for its 40 layers: 0.03515625/2 = 0.017578125 a GPU, 16 of them: 0.28125 in all."""
    got = _factors(EngineConfig(model="Llama-3.1-70B", pp=2, n_nodes=2))
    assert got["native"] == pytest.approx((0.125, 0.0078125), rel=1e-12)
    assert got["mla"] == pytest.approx((0.28125, 0.017578125), rel=1e-12)

