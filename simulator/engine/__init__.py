"""The SimPy cluster engine: router, replica schedulers over paged KV pools, fast-forwarded decode.

Public API: `run(config, requests, seed) -> Result`; configuration in `EngineConfig`,
`SchedulerConfig`, `PoolConfig`; the `StepTimer` protocol the cost model plugs into (with the
`AffineTimer` test double); the steady-state window (`SteadyWindow`, `steady_state`); records
(`RequestRecord`, `SampleRecord`, `records_to_frame`).
Cache strategies and routers are registries in `simulator.engine.caches` and
`simulator.engine.routers`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from simulator.engine.config import EngineConfig, PoolConfig, SchedulerConfig
from simulator.engine.records import RequestRecord, SampleRecord, records_to_frame
from simulator.engine.timer import AffineTimer, StepTimer
from simulator.lazy import lazy_exports

if TYPE_CHECKING:
    from simulator.engine.result import Result, run
    from simulator.engine.steady import SteadyState, SteadyWindow, steady_state

# `run` and the frames it returns need pandas: loaded on first use (PEP 562), so that the engine
# itself (`simulator.engine.cluster.simulate`) imports without pandas, scipy.stats or matplotlib
_LAZY = {"Result": "result", "run": "result", "SteadyState": "steady", "SteadyWindow": "steady",
         "steady_state": "steady"}

__all__ = ["AffineTimer", "EngineConfig", "PoolConfig", "RequestRecord", "Result", "SampleRecord",
           "SchedulerConfig", "SteadyState", "SteadyWindow", "StepTimer", "records_to_frame", "run", "steady_state"]


__getattr__ = lazy_exports('simulator.engine', _LAZY, globals(), base='simulator.engine.')
