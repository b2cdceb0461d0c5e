"""Studies over a scenario: one simulated run per hardware kind, and the simulated points of
the concurrency-collapse chart. The report and the CLI call these; so can a notebook.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from simulator.engine import EngineConfig, Result, run
from simulator.engine.config import SchedulerConfig
from simulator.scenario import Scenario
from workloads import Workload
from workloads.request import Request

Progress = Callable[[float], None]


@dataclass(frozen=True, slots=True, kw_only=True)
class ScenarioRun:
    """A scenario's workload simulated on each of its hardware kinds."""

    scenario: Scenario
    seed: int
    workload: Workload
    results: dict[str, Result]  # by node key

    def headline(self) -> pd.DataFrame:
        """One row per hardware kind: the figures a planner reads first."""
        rows = []
        for hw, r in self.results.items():
            s = r.summary
            slo_ok = (s["ttft_p99_s"] <= self.scenario.slo.ttft_p99_s
                      and s["tpot_p99_s"] <= self.scenario.slo.tpot_p99_s and s["timed_out"] == 0)
            rows.append({
                "hardware": hw, "nodes": r.config.n_nodes, "requests": s["requests"],
                "completed": s["completed"], "rejected": s["rejected"], "timed out": s["timed_out"],
                "TTFT p99 (s)": s["ttft_p99_s"], "TPOT p99 (ms)": s["tpot_p99_s"] * 1e3,
                "output tok/s": s["output_tokens_per_s"], "goodput": s["goodput_fraction"],
                "max streams": s["max_concurrency"], "KV util": s["kv_utilization"],
                "$/h": s["cost_usd"] / s["makespan_s"] * 3600, "$/Mtok out": s["usd_per_million_output_tokens"],
                "meets SLO": "yes" if slo_ok else "no",
            })
        return pd.DataFrame(rows)


def run_scenario(scenario: Scenario, seed: int | None = None, *, hardware: Sequence[str] | None = None,
                 progress: Progress | None = None) -> ScenarioRun:
    """Generate (or read) the workload once and simulate it on every hardware kind.

    `progress` receives the fraction done over all kinds.
    """
    seed = scenario.seed if seed is None else seed
    workload = scenario.load_workload(seed)
    scenario.check_context(workload)
    kinds = list(hardware) if hardware else [n.key for n in scenario.nodes()]
    results: dict[str, Result] = {}
    for i, hw in enumerate(kinds):
        def part(f: float, i: int = i) -> None:
            if progress:
                progress((i + f) / len(kinds))

        results[hw] = run(scenario.engine_config(hw), workload, seed, progress=part,
                          total_requests=len(workload.requests()))
    return ScenarioRun(scenario=scenario, seed=seed, workload=workload, results=results)


def saturating_requests(context_tokens: int, output_tokens: int, n: int, rate_per_s: float,
                        rng: np.random.Generator) -> list[Request]:
    """`n` independent requests of one length arriving as a Poisson stream (no shared prefix)."""
    times = np.cumsum(rng.exponential(1 / rate_per_s, n))
    prompt = context_tokens - output_tokens
    return [Request(id=i, arrival_s=float(t), prompt_tokens=prompt, output_tokens=output_tokens,
                    segments=((-(i + 1), prompt),)) for i, t in enumerate(times)]


def simulated_collapse(config: EngineConfig, contexts: Sequence[int], seed: int = 0,
                       output_fraction: float = 1 / 8, max_output_tokens: int = 4096,
                       requests_per_point: int = 400) -> pd.DataFrame:
    """Peak concurrency and throughput under overload, per context length (one node).

    Each point floods one node with requests whose prompt + output = context (the output is
    `output_fraction` of it, at most `max_output_tokens`; long enough that admissions, not
    prefill, fill the pool), with no batch-size cap, so memory alone limits how many run at
    once: the peak is what paged allocation and the scheduler achieve against the analytic
    maximum. Sequences hold between ``prompt`` and ``context`` tokens while they decode, so the
    peak may pass the all-at-full-context bound by up to ``1 / (1 − output_fraction)``.
    """
    rng = np.random.default_rng(np.random.SeedSequence(seed))
    cfg = replace(config, n_nodes=1, more_pools=(), sample_interval_s=0.0,
                  scheduler=replace(config.scheduler, max_num_seqs=1_000_000,
                                    max_num_batched_tokens=max(config.scheduler.max_num_batched_tokens, 8192)))
    rows = []
    for n in contexts:
        out = max(1, min(max_output_tokens, int(n * output_fraction)))
        reqs = saturating_requests(int(n), out, requests_per_point, rate_per_s=1e3, rng=rng)
        res = run(cfg, reqs, seed)
        s = res.summary
        rows.append({"hardware": config.node if isinstance(config.node, str) else config.node.key,
                     "context_tokens": int(n), "peak_streams": s["max_concurrency"],
                     "output_tokens_per_s": s["output_tokens_per_s"], "goodput_fraction": s["goodput_fraction"],
                     "kv_utilization": s["kv_utilization"]})
    return pd.DataFrame(rows)


__all__ = ["ScenarioRun", "SchedulerConfig", "run_scenario", "saturating_requests", "simulated_collapse"]
