"""The figures the shipped scenarios' comments give are what the scenarios run (helper-201: capacity-plan said
~22 requests/s of the ~24.4 its chat-4k draw holds; trtllm-offline-1000-1000 said 63.7 GB of KV after the
weights, where its pool is 62.92 GB since the LM head and embeddings stay in bf16 under fp8 weights)."""

from __future__ import annotations

import re

import pytest

from simulator.capacity import kv_budget
from simulator.scenario import SCENARIO_DIR, load_scenario


def _said(name: str, pattern: str) -> float:
    text = (SCENARIO_DIR / f"{name}.toml").read_text(encoding="utf-8")
    found = re.findall(pattern, text)
    assert len(found) == 1, (name, pattern, found)
    return float(found[0].replace(",", ""))


def test_capacity_plan_says_the_request_rate_it_draws():
    said = _said("capacity-plan", r"~([\d.]+) requests/s")
    sc = load_scenario("capacity-plan")
    n = sum(1 for _ in sc.load_workload())
    rate = n / sc.workload.duration_s
    assert rate == pytest.approx(24.4, abs=0.05)  # 14,644 requests in 600 s at seed 0
    assert said == pytest.approx(rate, rel=0.05)


def test_trtllm_offline_says_its_kv_pool():
    said = _said("trtllm-offline-1000-1000", r"\(([\d.]+) GB of KV after the weights\)")
    sc = load_scenario("trtllm-offline-1000-1000")
    budget = kv_budget(sc.nodes()[0], sc.model_spec(), plan=sc.plan,
                       memory_utilization=sc.cluster.memory_utilization)
    # 80 GB x 0.9 = 72 GB less 9.08 GB of fp8 weights (embeddings and LM head in bf16): 62.92 GB
    assert budget.kv_bytes_per_replica / 1e9 == pytest.approx(62.92, abs=0.005)
    assert said == round(budget.kv_bytes_per_replica / 1e9, 1)


def test_code_repo_h100_says_by_how_much_the_prefix_cache_misses_its_slo():
    """The comment gave no figure ("a little past p99 TPOT") for a p99 TPOT of 161 ms against 100; its figures
    are the README's `kvsim compare code-repo-128k-h100` prefix row (what a run prints: 10.6 s, 0.161 s)."""
    tpot_ms = _said("code-repo-128k-h100", r"misses p99 TPOT:\n# (\d+) ms against")
    ttft_s = _said("code-repo-128k-h100", r"meets p99 TTFT \(([\d.]+) s\)")
    readme = (SCENARIO_DIR.parent / "README.md").read_text(encoding="utf-8")
    row = re.search(r"^ +prefix +False +([\d.]+) +([\d.]+) ", readme, re.M)
    assert row is not None
    assert (ttft_s, tpot_ms / 1000) == (float(row[1]), float(row[2])) == (10.6, 0.161)
    sc = load_scenario("code-repo-128k-h100")
    assert tpot_ms / 1000 > 1.5 * sc.slo.tpot_p99_s and ttft_s < sc.slo.ttft_p99_s  # not "a little" past
    assert "a little past" not in readme
