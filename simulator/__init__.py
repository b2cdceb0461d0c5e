"""kvsim: a discrete-event cluster simulator for the economics of LLM KV-cache memory.

The public API, what the README's "Python API" section and the notebooks use::

    from simulator import load_scenario, run_scenario

    scenarios    Scenario, load_scenario
    running      run_scenario, ScenarioRun (one Result per node kind), run, Result,
                 EngineConfig, SchedulerConfig, PoolConfig (a disaggregated fleet's prefill pool)
    planning     plan_capacity
    analytic     kv_budget, max_streams, footprint, bytes_per_token, parse_layout,
                 collapse_table, ParallelPlan
    specs        get_model, load_catalog
    workloads    load_workload
    billing      get_profile, compare_ttls, breakeven_reuse_rate

Every name loads on first use (PEP 562), so ``import simulator`` imports nothing else: `hardware`
and `workloads` (the lowest layers) import the leaf modules `simulator.units` and
`simulator.errors` and must not pull the engine, pandas, scipy.stats or matplotlib in with them.
Charts live in `simulator.charts` and `simulator.billing.charts` (they import matplotlib).
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING

from simulator.lazy import lazy_exports

try:
    __version__ = version("kvsim")
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0+unknown"

if TYPE_CHECKING:
    from hardware.catalog import load_catalog
    from simulator.billing import breakeven_reuse_rate, compare_ttls, get_profile
    from simulator.capacity import kv_budget, max_streams
    from simulator.collapse import collapse_table
    from simulator.engine import EngineConfig, PoolConfig, Result, SchedulerConfig, run
    from simulator.kv import bytes_per_token, footprint, parse_layout
    from simulator.models import get_model
    from simulator.placement import ParallelPlan
    from simulator.planning import plan_capacity
    from simulator.scenario import Scenario, load_scenario
    from simulator.study import ScenarioRun, run_scenario
    from workloads.load import load_workload

# public name -> the module that defines it (imported on first access)
_WHERE = {
    "Scenario": "simulator.scenario", "load_scenario": "simulator.scenario",
    "ScenarioRun": "simulator.study", "run_scenario": "simulator.study",
    "run": "simulator.engine", "Result": "simulator.engine",
    "EngineConfig": "simulator.engine", "SchedulerConfig": "simulator.engine", "PoolConfig": "simulator.engine",
    "plan_capacity": "simulator.planning",
    "kv_budget": "simulator.capacity", "max_streams": "simulator.capacity",
    "footprint": "simulator.kv", "bytes_per_token": "simulator.kv", "parse_layout": "simulator.kv",
    "collapse_table": "simulator.collapse", "ParallelPlan": "simulator.placement",
    "get_model": "simulator.models", "load_catalog": "hardware.catalog",
    "load_workload": "workloads.load",
    "get_profile": "simulator.billing", "compare_ttls": "simulator.billing",
    "breakeven_reuse_rate": "simulator.billing",
}

__all__ = [
    "EngineConfig",
    "ParallelPlan",
    "PoolConfig",
    "Result",
    "Scenario",
    "ScenarioRun",
    "SchedulerConfig",
    "__version__",
    "breakeven_reuse_rate",
    "bytes_per_token",
    "collapse_table",
    "compare_ttls",
    "footprint",
    "get_model",
    "get_profile",
    "kv_budget",
    "load_catalog",
    "load_scenario",
    "load_workload",
    "max_streams",
    "parse_layout",
    "plan_capacity",
    "run",
    "run_scenario",
]


__getattr__ = lazy_exports('simulator', _WHERE, globals())


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
