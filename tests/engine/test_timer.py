"""`AffineTimer`'s defaults are a test convenience (helper-173 audit): no shipped code constructs one, a run
without a timer is priced by the calibrated cost model, and the round figures its docstring works out by hand
are of the order the catalogs give."""

from __future__ import annotations

from pathlib import Path

import pytest

from hardware.catalog import load_catalog
from simulator.cost import StepModel
from simulator.engine import AffineTimer, EngineConfig
from simulator.engine.cluster import build_cluster
from simulator.kv import bytes_per_token
from simulator.models import get_model

ROOT = Path(__file__).resolve().parents[2]


def test_no_shipped_code_constructs_an_affine_timer() -> None:
    """Outside its own module (and the package's export of it), `AffineTimer` appears in no shipped source,
    scenario or notebook: its defaults price no command's or report's answer."""
    own = {ROOT / "simulator" / "engine" / "timer.py", ROOT / "simulator" / "engine" / "__init__.py"}
    shipped = [p for folder in ("simulator", "workloads", "hardware", "scenarios", "notebooks")
               for p in (ROOT / folder).rglob("*") if p.suffix in (".py", ".toml", ".ipynb") and p not in own]
    assert shipped
    assert [str(p.relative_to(ROOT)) for p in shipped if "AffineTimer" in p.read_text(encoding="utf-8")] == []


def test_a_run_without_a_timer_is_priced_by_the_cost_model() -> None:
    cluster = build_cluster(EngineConfig(model="Llama-3.1-8B", tp=1), None, lambda *a: None, [])
    assert cluster.replicas and all(isinstance(r.timer, StepModel) for r in cluster.replicas)


def test_the_defaults_are_the_docstrings_hand_worked_figures() -> None:
    """``per_context_token_s ≈ 327,680 B / (8 × 3.35e12 B/s) = 1.2227e-8`` and ``per_prefill_token_s ≈
    2 × 70.55e9 FLOP / (8 × 989.4e12 FLOP/s × 0.5) = 3.5653e-5`` (0.5: the docstring's assumed MFU), from the
    catalogs (Llama-3-70B, H100), each rounded to two figures."""
    h100, llama = load_catalog().gpu("H100"), get_model("Llama-3-70B")
    t = AffineTimer()
    assert t.per_context_token_s == pytest.approx(bytes_per_token(llama) / (8 * h100.hbm_bytes_per_s), rel=0.02)
    assert t.per_prefill_token_s == pytest.approx(2 * llama.total_params / (8 * h100.bf16_flops * 0.5), rel=0.02)
    assert (t.overhead_s, t.per_seq_s) == (0.02, 0.0)
