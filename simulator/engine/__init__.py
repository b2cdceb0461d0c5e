"""The SimPy cluster engine: router, replica schedulers over paged KV pools, fast-forwarded decode.

Public API: `run(config, requests, seed) -> Result`; configuration in `EngineConfig`,
`SchedulerConfig`, `PoolConfig`; the `StepTimer` protocol the cost model plugs into (with the
`AffineTimer` test double); records (`RequestRecord`, `SampleRecord`, `records_to_frame`).
Cache strategies and routers are registries in `simulator.engine.caches` and
`simulator.engine.routers`.
"""

from simulator.engine.config import EngineConfig, PoolConfig, SchedulerConfig
from simulator.engine.records import RequestRecord, SampleRecord, records_to_frame
from simulator.engine.result import Result, run
from simulator.engine.timer import AffineTimer, StepTimer

__all__ = ["AffineTimer", "EngineConfig", "PoolConfig", "RequestRecord", "Result", "SampleRecord",
           "SchedulerConfig", "StepTimer", "records_to_frame", "run"]
