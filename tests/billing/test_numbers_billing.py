"""Printed figures of ``kvsim breakeven`` and the workload rate, checked against hand arithmetic
(numbers audit D7, D11, D12)."""

from __future__ import annotations

import json
import math

from click.testing import CliRunner

from simulator.cli import main
from simulator.compare import compare_strategies
from simulator.engine import EngineConfig
from workloads.request import Request
from workloads.summary import offered_rate_per_s, summarize
from workloads.traces.native import write_workload


def kvsim(*args: object) -> object:
    return CliRunner().invoke(main, [str(a) for a in args])


# --- D11: one offered rate, n / (last arrival - first arrival) ----------------------------------

def _three() -> list[Request]:
    return [Request(id=i, arrival_s=t, prompt_tokens=100, output_tokens=4, segments=((10 + i, 100),))
            for i, t in enumerate((0.0, 1.0, 4.0))]


def test_offered_rate_of_three_requests_by_hand(tmp_path):
    # arrivals 0, 1, 4 s: n / span = 3 / 4 = 0.75 per s ((n - 1) / span would be 0.5)
    assert offered_rate_per_s(3, 4.0) == 0.75 and math.isnan(offered_rate_per_s(3, 0.0))
    assert summarize(_three()).rate_per_s == 0.75
    trace = tmp_path / "three.csv"
    write_workload(_three(), trace)
    r = kvsim("workload", "describe", trace, "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)[0]["rate_per_s"] == 0.75
    df = compare_strategies(EngineConfig(model="Llama-3.1-8B"), _three(), ["native"])
    assert df.offered_requests_per_s.tolist() == [0.75]
