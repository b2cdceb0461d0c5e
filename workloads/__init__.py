"""Workloads: requests and sessions, generators, arrival processes, trace readers.

The rest of kvsim calls `load_workload`; it returns a `Workload`, a replayable
time-ordered stream of `Request` with ``summary()``, ``to_frame()`` and ``requests()``.
Depends only on `simulator.units`, `simulator.errors`, numpy, scipy and pandas.

The names below load on first use (PEP 562): the engine imports `workloads.request` alone,
and must not pay for scipy.stats and pandas, which the generators and summaries need.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from simulator.lazy import lazy_exports

if TYPE_CHECKING:
    from workloads.arrivals import Bursty, Diurnal, Offline, Poisson, session_turn_times
    from workloads.distributions import LogNormal
    from workloads.generators import GENERATORS, generator_from_dict, register_generator
    from workloads.generators.chat import Chat4k
    from workloads.generators.code_repo import CodeRepo128k
    from workloads.generators.mixture import Component, Mixture
    from workloads.generators.synthetic import Synthetic
    from workloads.load import load_workload
    from workloads.request import Request, Segment
    from workloads.segments import SegmentIds
    from workloads.summary import Quantiles, WorkloadSummary, summarize
    from workloads.traces import read_trace, write_workload
    from workloads.workload import Workload

_WHERE = {
    "Bursty": "arrivals", "Diurnal": "arrivals", "Poisson": "arrivals", "session_turn_times": "arrivals",
    "Offline": "arrivals", "Synthetic": "generators.synthetic",
    "LogNormal": "distributions",
    "GENERATORS": "generators", "generator_from_dict": "generators", "register_generator": "generators",
    "Chat4k": "generators.chat", "CodeRepo128k": "generators.code_repo",
    "Component": "generators.mixture", "Mixture": "generators.mixture",
    "load_workload": "load",
    "Request": "request", "Segment": "request",
    "SegmentIds": "segments",
    "Quantiles": "summary", "WorkloadSummary": "summary", "summarize": "summary",
    "read_trace": "traces", "write_workload": "traces",
    "Workload": "workload",
}

__all__ = [
    "GENERATORS",
    "Bursty",
    "Chat4k",
    "CodeRepo128k",
    "Component",
    "Diurnal",
    "LogNormal",
    "Mixture",
    "Offline",
    "Poisson",
    "Quantiles",
    "Request",
    "Segment",
    "SegmentIds",
    "Synthetic",
    "Workload",
    "WorkloadSummary",
    "generator_from_dict",
    "load_workload",
    "read_trace",
    "register_generator",
    "session_turn_times",
    "summarize",
    "write_workload",
]


__getattr__ = lazy_exports('workloads', _WHERE, globals(), base='workloads.')


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
