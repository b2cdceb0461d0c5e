"""Workloads: requests and sessions, generators, arrival processes, trace readers.

The rest of kvsim calls `load_workload`; it returns a `Workload`, a replayable
time-ordered stream of `Request` with ``summary()``, ``to_frame()`` and ``requests()``.
Depends only on `simulator.units`, `simulator.errors`, numpy, scipy and pandas.
"""

from workloads.arrivals import Bursty, Diurnal, Poisson, session_turn_times
from workloads.distributions import LogNormal
from workloads.generators import GENERATORS, generator_from_dict, register_generator
from workloads.generators.chat import Chat4k
from workloads.generators.code_repo import CodeRepo128k
from workloads.generators.mixture import Component, Mixture
from workloads.load import load_workload
from workloads.request import Request, Segment
from workloads.segments import SegmentIds
from workloads.summary import Quantiles, WorkloadSummary, summarize
from workloads.traces import read_trace, write_workload
from workloads.workload import Workload

__all__ = [
    "GENERATORS",
    "Bursty",
    "Chat4k",
    "CodeRepo128k",
    "Component",
    "Diurnal",
    "LogNormal",
    "Mixture",
    "Poisson",
    "Quantiles",
    "Request",
    "Segment",
    "SegmentIds",
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
