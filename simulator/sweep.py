"""Parameter sweeps: a scenario run at every point of a grid of scenario keys, in parallel.

A grid maps dotted scenario key paths to lists of values, e.g.
``{"cluster.nodes": [1, 2, 4], "cache.layout": ["native", "fp8"]}``; its points are the cross
product, in grid order (the last key varies fastest). Each point is the scenario's table
(`dataclasses.asdict`) with the keys set, re-parsed by `parse_scenario`, so a swept value is
validated and reported exactly as the same value in a scenario file would be. String values
(the command line's) are first read with the field's type: ``"2"`` for ``cluster.nodes`` is
the integer 2; a single node kind for ``cluster.hardware`` is a one-element list.

`run_sweep` simulates every point on each of its hardware kinds and returns one row per
(point, hardware kind): the swept keys, then the headline metrics (`METRICS`), then ``error``
and ``digest``. Points run in worker processes or on a Dask cluster; each is seeded by its
scenario, so the frame is the same whichever runs it.

Faults cost one point, never the sweep:

- A point that raises gets rows whose metrics are empty and whose ``error`` is the exception
  in one line (``ValueError: ...``); the others go on.
- A worker process that dies (``kill -9``, the OOM killer) fails the one point it was running
  (``error`` = ``worker process killed by SIGKILL``); a fresh worker takes its place. Each worker
  runs one point at a time over its own pipe, so the parent knows which point that was.
- With a CSV log (``csv_path``) each finished point's rows are appended, flushed and fsynced
  as it finishes: a crash or a stop keeps every finished point. With ``resume`` the points
  whose rows are already there without an error are not run again; they are matched by
  ``digest``, a hash of the point's whole scenario (not its row number), so a changed scenario
  or grid is refused rather than mixed in, and so is a row whose cells are not what the sweep
  writes (a hand edit). At the end the file is rewritten once, atomically,
  in grid order, without the failed rows a rerun replaced.
- Any exception in the parent (``KeyboardInterrupt`` from Ctrl-C, or what the caller's
  signal handler raises) terminates the workers before it propagates; the rows already
  logged stay on disk. Workers ignore SIGINT (a terminal's Ctrl-C reaches the whole process
  group; the parent decides) and exit when the parent's end of their pipe closes.
"""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import hashlib
import io
import itertools
import json
import math
import os
import pickle
import signal
import sys
import typing
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

import pandas as pd

from simulator.config import set_by_kvsim
from simulator.errors import ConfigError, is_whole, must_differ, shown
from simulator.scenario import Scenario, parse_scenario

if TYPE_CHECKING:
    from multiprocessing.connection import Connection
    from multiprocessing.context import ForkServerContext
    from multiprocessing.process import BaseProcess

Progress = Callable[[float], None]
Row = dict[str, Any]
#: What simulates one point: ``(scenario table, scenario path, labels) -> rows`` (`run_point`'s signature);
#: top-level and picklable, for worker processes and Dask.
PointFn = Callable[[dict[str, Any], str, dict[str, Any]], list[Row]]
Finish = Callable[[int, list[Row] | None, str], None]  # (job index, its rows or None if it failed, error or "")

#: Headline metric columns of a sweep frame, in order, with units in the names. ``trace_rows_skipped`` and
#: ``trace_cut_at_s``: the rows of the point's trace its replay left out (`workloads.workload.SKIPPED_WHY`; 0 for
#: a generator) and where its window cut the trace's later rows (replay seconds; empty when it did not), so
#: that a sweep over a trace never drops traffic without a word.
METRICS: tuple[str, ...] = (
    "requests", "trace_rows_skipped", "trace_cut_at_s", "completed", "rejected", "timed_out", "ttft_p50_s",
    "ttft_p99_s",
    "tpot_p50_s", "tpot_p99_s", "output_tokens_per_s", "goodput_fraction", "max_concurrency", "preemptions",
    "kv_utilization", "usd_per_hour", "usd_per_million_output_tokens", "slo_ttft_p99_s", "slo_tpot_p99_s",
    "meets_slo", "queue_grows",
)
#: Metric columns a sweep.csv written before kvsim had them lacks (2026-12-05, the SLOs 2026-12-06): `--resume`
#: says so.
NEWER_METRICS = ("trace_rows_skipped", "trace_cut_at_s", "rejected", "queue_grows", "preemptions", "slo_ttft_p99_s",
                 "slo_tpot_p99_s")
#: The point's ``[slo]`` (swept or not) that its ``meets_slo`` is judged against, beside it in every row.
SLO_COLUMNS = ("slo_ttft_p99_s", "slo_tpot_p99_s")
#: True/False columns: ``meets_slo`` (the p99s, nothing rejected or timed out: `planning.meets_slo`) and
#: ``queue_grows``, arrivals outran admissions through the steady window (``steady_queue_growing``: the queue grew,
#: or requests timed out waiting): the fleet falls behind its load, so a longer run would read worse p99s or more
#: timed out (`kvsim capacity` fails such a run: `planning.keeps_up`).
FLAGS = ("meets_slo", "queue_grows")
#: Columns after the metrics: the point's failure in one line ("" when it ran), and the hash of its scenario.
TRAILER: tuple[str, ...] = ("error", "digest")
_ERROR_CHARS = 500  # longest error kept in the ``error`` column
_SCENARIO_ONLY = set_by_kvsim(Scenario)  # fields of `Scenario` that are not scenario-file keys (``path``)


# --- grid expansion ---------------------------------------------------------------------------
#: Keys a sweep row cannot show, by their first part: `run_point` simulates the workload and prices the
#: GPUs; it never runs `kvsim run`'s report studies or prices cache TTLs, and a row does not hold the name.
_NO_EFFECT = {
    "name": "the scenario's name is not in a sweep row",
    "description": "the scenario's description is not in a sweep row",
    "report": "sweep runs no report study (capacity, collapse, breakeven): only the simulation's metrics",
    "billing": "sweep rows price GPU hours (cluster.usd_per_gpu_hour), not cache TTLs (kvsim breakeven does)",
}


def _field_type(key: str) -> Any:
    """The declared type of dotted key path `key` in a scenario, or raise listing the valid keys.

    Keys below a table-valued field (``workload.spec.rate``, ``cache.params.ttl_s``) are free:
    the component that reads the table checks them when the point runs. An optional table
    (``disaggregation``) is looked into as the table it holds; an optional value (``prefill_tp``)
    has the type of its value.
    """
    cls: Any = Scenario
    parts = key.split(".")
    if parts[0] in _NO_EFFECT:
        raise ConfigError(f"--grid {key}: cannot change a sweep row: {_NO_EFFECT[parts[0]]}")
    for depth, part in enumerate(parts):
        if not dataclasses.is_dataclass(cls):
            if typing.get_origin(cls) is dict:
                return Any
            prefix = ".".join(parts[:depth])
            raise ConfigError(f"--grid {key}: {prefix} is a value, not a table")
        fields = [f.name for f in dataclasses.fields(cls) if f.init and f.name not in _SCENARIO_ONLY]
        if part not in fields:
            level = ".".join(parts[:depth]) or "the scenario"
            raise ConfigError(f"--grid {key}: unknown key {part!r} in {level}; valid: {', '.join(fields)}")
        cls = _optional_of(typing.get_type_hints(cls)[part])
    if dataclasses.is_dataclass(cls):
        raise ConfigError(f"--grid {key}: is a table; sweep one of its keys: "
                          f"{', '.join(f.name for f in dataclasses.fields(cls))}")
    return cls


def _optional_of(tp: Any) -> Any:
    """``X | None`` -> ``X``; any other type as it is."""
    args = typing.get_args(tp)
    if type(None) in args and len(args) == 2:
        return next(a for a in args if a is not type(None))
    return tp


def _check_applies(scenario: Scenario, key: str, grid: Mapping[str, Any]) -> None:
    """Refuse a key the scenario has no place for: one below an optional table it lacks
    (``disaggregation.*`` without ``[disaggregation]``), a generator's (``workload.spec.*``) when
    it replays a trace, which ignores the generator, ``model.name`` when it reads a config.json, or ``cluster.nodes``
    when no aggregated fleet runs."""
    head = key.split(".")[0]
    if "." in key and head not in grid and getattr(scenario, head, 0) is None:
        raise ConfigError(f"--grid {key}: {scenario.where} has no [{head}] table; add one to sweep its keys")
    if (key == "workload.spec" or key.startswith("workload.spec.")) and scenario.workload.trace \
            and "workload.trace" not in grid:
        raise ConfigError(f"--grid {key}: cannot change a sweep row: {scenario.where} replays a trace "
                          f"(workload.trace = {shown(scenario.workload.trace)}), which ignores workload.spec; "
                          "sweep workload.rate_scale or workload.duration_s")
    d = scenario.disaggregation
    compared = grid.get("disaggregation.compare_aggregated", [d.compare_aggregated] if d is not None else [])
    # (helper-164: identical rows, no word; helper-170: a grid of compare_aggregated = false alone too)
    if key == "cluster.nodes" and d is not None and not any(
            v is True or str(v).strip().lower() == "true" for v in compared):
        # the grid's false, not the file's, said as the grid's (helper-171)
        alone = (f"{scenario.where} runs" if "disaggregation.compare_aggregated" not in grid else
                 "every point of --grid disaggregation.compare_aggregated runs")
        raise ConfigError(f"--grid {key}: cannot change a sweep row: {alone} its xPyD fleet alone "
                          "(disaggregation.compare_aggregated = false), whose nodes are disaggregation.prefill_nodes "
                          "and decode_nodes; sweep those")
    if key == "model.name" and scenario.model.config and "model.config" not in grid:
        raise ConfigError(f"--grid {key}: cannot change a sweep row: {scenario.where} reads its model from "
                          f"model.config = {shown(scenario.model.config)}, which model.name cannot override; "
                          "sweep model.config or model.weight_dtype")


def _parse_value(tp: Any, value: Any) -> Any:
    """`value` read with type `tp` when it is a string; what cannot be read is left for `build`."""
    if not isinstance(value, str):
        return list(value) if isinstance(value, tuple) else value
    text = value.strip()
    if typing.get_origin(tp) is tuple:
        return [_parse_value(typing.get_args(tp)[0], text)]
    if tp is bool:
        return {"true": True, "false": False}.get(text.lower(), text)
    if tp is int:
        try:
            return int(text)
        except ValueError:
            return text
    if tp is float:
        try:
            return float(text)
        except ValueError:
            return text
    if tp is Any:  # inside a free table: a TOML literal if it reads as one, else the string
        import tomllib

        try:
            return tomllib.loads(f"v = {text}")["v"]
        except tomllib.TOMLDecodeError:
            return text
    return text


def _set(table: dict[str, Any], key: str, value: Any) -> None:
    *heads, last = key.split(".")
    for h in heads:
        table[h] = dict(table.get(h) or {})
        table = table[h]
    table[last] = value


def _get(scenario: Scenario, key: str) -> Any:
    obj: Any = scenario
    for part in key.split("."):
        obj = obj[part] if isinstance(obj, Mapping) else getattr(obj, part)
    return obj


def scenario_table(scenario: Scenario) -> dict[str, Any]:
    """The scenario as a scenario-file table: every field, so both ``model.name`` and ``model.config`` and
    both ``workload.trace`` and ``workload.spec`` (a grid may set either); `_parse` keeps the one in use
    before `parse_scenario`, which refuses two, reads it back."""
    table = dataclasses.asdict(scenario)
    for k in _SCENARIO_ONLY:
        table.pop(k)
    return table


def expand_grid(scenario: Scenario, grid: Mapping[str, Sequence[Any]]) -> list[tuple[dict[str, Any], Scenario]]:
    """Every point of `grid` applied to `scenario`, in grid order (the last key varies fastest).

    Parameters
    ----------
    scenario : Scenario
        The base scenario; keys not in the grid keep its values.
    grid : mapping of str to sequence
        Dotted key path (``cluster.nodes``, ``workload.rate_scale``, ``seed``, ...) to values;
        strings are read with the field's type.

    Returns
    -------
    list of (dict, Scenario)
        Per point, the swept values as the scenario holds them (``cluster.hardware`` a tuple)
        and the validated scenario.

    Raises
    ------
    ConfigError
        An unknown key path (naming the valid keys at that level), a key no row can show (the
        report's, billing's, the name; a generator's in a trace replay; one below an optional table
        the scenario lacks), an empty value list, a value given twice (read with the field's type
        and resolved as the scenario resolves it: ``1`` and ``1.0``, ``H100`` and ``8xH100``,
        ``fp8`` and ``native+fp8`` are one), a value the scenario rejects (the scenario file's
        message, naming the key and the value), or a point whose generator draws no request.
    """
    types = {key: _field_type(key) for key in grid}
    names: dict[str, list[str]] = {}
    for key, values in grid.items():
        _check_applies(scenario, key, grid)
        if isinstance(values, str) or not len(values):
            raise ConfigError(f"--grid {key}: must be a non-empty list of values (got {values!r})")
        parsed = [_parse_value(types[key], v) for v in values]
        names[key] = [v if isinstance(v, str) else repr(v) for v in values]
        must_differ(names[key], _alike(parsed), f"--grid {key}", "value")
    resolved: dict[str, dict[int, str]] = {key: {} for key in grid}  # value index -> what the point made of it
    drawn: set[str] = set()  # the generated workloads seen to draw a request (a draw depends only on its key)
    points = []
    for combo, at in zip(itertools.product(*grid.values()), itertools.product(*(range(len(v)) for v in grid.values())),
                         strict=True):
        table = scenario_table(scenario)  # a deep copy
        for key, value in zip(grid, combo, strict=True):
            _set(table, key, _parse_value(types[key], value))
        try:
            point = _parse(table, scenario.path)
            _check_workload(point, drawn)
        except ConfigError as exc:
            values = ", ".join(f"{k}={v!r}" for k, v in zip(grid, combo, strict=True))
            raise ConfigError(f"sweep point {values}: {exc}") from None
        for key, j in zip(grid, at, strict=True):
            resolved[key].setdefault(j, _resolved(point, key))
        points.append(({key: _get(point, key) for key in grid}, point))
    for key in grid:  # H100 and 8xH100, fp8 and native+fp8: one point twice under two labels
        must_differ(names[key], [resolved[key][j] for j in range(len(names[key]))], f"--grid {key}", "value")
    return points


def _resolved(point: Scenario, key: str) -> str:
    """What `point` made of its value for `key`, as the simulation sees it: node kinds by their catalog
    keys (``H100`` is ``8xH100``), a KV layout by its label (``native+fp8`` is ``fp8``), a model by its
    catalog key; any other value as read (``01`` is ``1``)."""
    if key == "cluster.hardware":
        return "+".join(n.key for n in point.nodes())
    if key == "cache.layout":
        from simulator.kv import parse_layout

        return parse_layout(point.cache.layout).label
    if key == "model.name":
        return point.model_spec().key
    value = _get(point, key)
    return f"{type(value).__name__}:{value!r}" if isinstance(value, bool) else repr(value)


def _check_workload(point: Scenario, drawn: set[str]) -> None:
    """Draw the point's generated workload (each distinct one once) before any point runs: a generator
    that draws nothing is refused, saying why, as `kvsim run` refuses it, rather than failing every
    point after the others simulated. (A trace's replay window is checked when the scenario is validated.)
    `drawn` holds the keys of the workloads this grid has drawn already."""
    w = point.workload
    if w.trace:
        return
    key = json.dumps([w.spec, w.duration_s, w.rate_scale, point.seed, point.path], sort_keys=True, default=str)
    if key not in drawn:
        point.load_workload()
        drawn.add(key)


def _alike(values: Sequence[Any]) -> list[str]:
    """Per value, the repr of the first value equal to it (``1`` and ``1.0`` are one; ``True`` and
    ``1`` are not): a grid value given twice would run the same point twice under two rows."""
    out = []
    for i, v in enumerate(values):
        j = next(j for j, f in enumerate(values[:i + 1])
                 if (f is v or f == v) and isinstance(f, bool) == isinstance(v, bool))
        out.append(repr(values[j]))
    return out


def _parse(table: dict[str, Any], path: str) -> Scenario:
    """`parse_scenario` keeping `path` (where relative paths resolve) as the base scenario had it."""
    where = path or f"scenario {table.get('name')!r}"
    for head, used, other in (("workload", "trace", "spec"), ("model", "config", "name")):
        t = table.get(head)  # `scenario_table` holds both a trace and a generator, a config and a name
        if isinstance(t, dict) and used in t and other in t:  # keep the one in use
            table = {**table, head: {k: v for k, v in t.items() if k != (other if t[used] else used)}}
    return dataclasses.replace(parse_scenario(table, where), path=path)


# --- running ----------------------------------------------------------------------------------
def run_point(table: dict[str, Any], path: str, labels: dict[str, Any]) -> list[Row]:
    """Simulate one grid point (a scenario table) on each of its hardware kinds; plain rows.

    Top-level and picklable both ways, so worker processes and Dask workers can run it.
    """
    from simulator.planning import meets_slo
    from simulator.study import run_scenario

    sc = _parse(table, path)
    rows = []
    run = run_scenario(sc)
    for hw, r in run.results.items():
        s = r.summary
        metrics = {
            "requests": s["requests"], "trace_rows_skipped": run.workload.skipped_rows,
            "trace_cut_at_s": math.nan if run.workload.cut_at_s is None else run.workload.cut_at_s,
            "completed": s["completed"], "rejected": s["rejected"], "timed_out": s["timed_out"],
            "ttft_p50_s": s["ttft_p50_s"], "ttft_p99_s": s["ttft_p99_s"], "tpot_p50_s": s["tpot_p50_s"],
            "tpot_p99_s": s["tpot_p99_s"], "output_tokens_per_s": s["output_tokens_per_s"],
            "goodput_fraction": s["goodput_fraction"], "max_concurrency": s["max_concurrency"],
            "preemptions": s["preemptions"], "kv_utilization": s["kv_utilization"],
            "usd_per_hour": s["cost_usd"] / s["makespan_s"] * 3600 if s["makespan_s"] else math.nan,
            "usd_per_million_output_tokens": s["usd_per_million_output_tokens"],
            "slo_ttft_p99_s": sc.slo.ttft_p99_s, "slo_tpot_p99_s": sc.slo.tpot_p99_s,
            "meets_slo": meets_slo(r, sc.slo.ttft_p99_s, sc.slo.tpot_p99_s),
            "queue_grows": bool(s["steady_queue_growing"]),
        }
        rows.append({**labels, "hardware": hw, **{k: _plain_value(v) for k, v in metrics.items()}})
    return rows


def _plain_value(v: Any) -> Any:
    return v.item() if hasattr(v, "item") else v


def _label(v: Any) -> Any:
    """A swept value as a frame cell: tuples (``cluster.hardware``) joined with ``+``."""
    return "+".join(map(str, v)) if isinstance(v, tuple) else v


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class _Job:
    """One grid point as the workers get it (`args`), with what the parent needs to log it."""

    args: tuple[dict[str, Any], str, dict[str, Any]]  # run_point's (table, path, labels)
    hardware: tuple[str, ...]  # the fleets it runs (`fleets`): one row each
    digest: str  # the first 16 hex digits of the SHA-256 of its scenario table: --resume matches on it


def _job(index: int, values: Mapping[str, Any], sc: Scenario, path: str) -> _Job:
    table = scenario_table(sc)
    text = json.dumps(table, sort_keys=True, default=str, separators=(",", ":"))
    labels = {"point": index, **{k: _label(v) for k, v in values.items()}}
    return _Job(args=(table, path, labels), hardware=fleets(sc),
                digest=hashlib.sha256(text.encode()).hexdigest()[:16])


def fleets(sc: Scenario) -> tuple[str, ...]:
    """The labels of the fleets a point simulates, one row each, as `run_scenario` keys them: per node
    kind, the kind (aggregated) and, with ``[disaggregation]``, its disaggregated fleet (`Scenario.fleets`)."""
    d = sc.disaggregation
    labels = []
    for node in sc.nodes():
        if d is None or d.compare_aggregated:
            labels.append(node.key)
        if d is not None:
            labels.append(sc.fleet_label(node.key))
    return tuple(labels)


def sweep_setting(scenario: Scenario, grid: Mapping[str, Sequence[Any]]) -> str:
    """The model and fleet a sweep's charts are of, as compare's title names them, less what the grid
    sweeps (the chart's axis or legend names that): ``Llama-3.1-70B on 2× 8xH100, TP8``; with
    ``cluster.nodes`` swept ``Llama-3.1-70B on 8xH100, TP8``, with ``model.name`` swept ``2× 8xH100,
    TP8``. Several node kinds are joined by " / "; a disaggregated scenario's fleet is its node
    kinds alone (each row's ``hardware`` names its prefill and decode nodes)."""
    c = scenario.cluster
    kinds = "" if "cluster.hardware" in grid else " / ".join(node.key for node in scenario.nodes())
    nodes = None if "cluster.nodes" in grid or scenario.disaggregation is not None else c.nodes
    if kinds:  # (one node: "1× 8xH100" reads oddly, as in compare's title)
        fleet = f"{nodes}× {kinds}" if nodes and nodes > 1 else kinds
    else:
        fleet = f"{nodes} node{'s' * (nodes != 1)}" if nodes else ""
    # the plan as the headline labels it (TP8 PP2, DP8-attention EP8; P TP4 / D TP8 for a split fleet), left out
    # where the grid sweeps a part of it (helper-164: "tp 8" of a DP-attention plan, a prefill plan left out)
    parts = {"cluster.tp", "cluster.pp", "cluster.dp_attention", "cluster.ep", "disaggregation.prefill_tp",
             "disaggregation.prefill_pp", "disaggregation.prefill_dp_attention", "disaggregation.prefill_ep"}
    swept = bool(parts & set(grid))  # (prefill_nodes or prefill_hardware are no part of a plan)
    d = scenario.disaggregation
    plan = "" if swept else (scenario.plan.label if d is None or scenario.prefill_plan == scenario.plan else
                             f"P {scenario.prefill_plan.label} / D {scenario.plan.label}")
    # the model served, a config.json's too (helper-164: model.name, the default, was named beside model.config)
    model = "" if {"model.name", "model.config"} & set(grid) else scenario.model_spec().key  # (weight_dtype: the same)
    text = " on ".join(part for part in (model, fleet) if part)
    return f"{text}, {plan}" if text and plan else text


def resumable_points(scenario: Scenario, grid: Mapping[str, Sequence[Any]],
                     points: Sequence[tuple[Mapping[str, Any], Scenario]],
                     csv_path: str | os.PathLike[str]) -> list[int]:
    """The indices of `points` (`expand_grid`'s for `grid`) that ``run_sweep(..., resume=True)`` takes
    from the log at `csv_path` (they ran on every kind without an error) rather than running again;
    the log is read and checked as the resume will, and left as it is.
    """
    jobs = [_job(i, values, sc, scenario.path) for i, (values, sc) in enumerate(points)]
    log = _CsvLog.reader(Path(csv_path), ["point", *grid, "hardware", *METRICS, *TRAILER], jobs)
    return [i for i, job in enumerate(jobs) if log.finished(i, job) is not None]


def run_sweep(scenario: Scenario, grid: Mapping[str, Sequence[Any]], workers: int | None = None,
              dask_address: str | None = None, progress: Progress | None = None, *,
              csv_path: str | os.PathLike[str] | None = None, resume: bool = False,
              point: PointFn | None = None,
              points: Sequence[tuple[Mapping[str, Any], Scenario]] | None = None) -> pd.DataFrame:
    """Simulate every grid point on each hardware kind; one row per (point, hardware kind).

    Parameters
    ----------
    workers : int, optional
        Worker processes on this machine (default ``os.cpu_count()``); 1 (or a single point to
        run) runs in this process, where a crash ends the sweep (the logged rows stay).
    dask_address : str, optional
        A Dask scheduler (``tcp://host:port``) to run the points on instead; needs the
        ``dask`` extra (``pip install 'kvsim[dask]'``) and kvsim installed on the workers.
    progress : callable, optional
        Called with the fraction of points done (failed ones included; first with the share
        reused when resuming).
    csv_path : path, optional
        The CSV log: each point's rows appended, flushed and fsynced as it finishes, and the
        file rewritten in grid order at the end. Without `resume` an existing file is replaced.
    resume : bool
        Keep the rows `csv_path` already holds and run only the points that have none there
        without an error (matched on ``digest``). A file absent or empty starts afresh.
    point : callable, optional
        What simulates one point (default `run_point`); top-level and picklable.
    points : list, optional
        ``expand_grid(scenario, grid)``, when the caller has it already: the grid is then not expanded
        (every point parsed and its workload drawn) a second time.

    Returns
    -------
    DataFrame
        Columns ``point`` (grid index), the swept keys, ``hardware``, `METRICS`, ``error`` (""
        when the point ran; its metrics are empty otherwise) and ``digest``; rows in grid order
        whatever ran them. ``attrs["swept"]`` lists the swept keys, ``attrs["scenario"]`` the
        scenario's name, ``attrs["setting"]`` its model and fleet (`sweep_setting`), ``attrs["slo_*"]``
        its SLOs, ``attrs["reused_points"]`` how many points came from the log.

    Raises
    ------
    ConfigError
        A bad grid (see `expand_grid`), ``workers < 1``, a `dask_address` that is empty, without
        dask or with no scheduler (`dask_client`), or with `resume` a log whose columns or rows are
        not this sweep's (another grid or an edited scenario; a row cut short; a cell unlike what
        the sweep writes: `_checked_row`). All of these are raised before `csv_path` is opened.
    """
    if workers is not None and workers < 1:
        raise ConfigError(f"run_sweep: 'workers' must be >= 1 (got {workers})")
    expanded = points if points is not None else expand_grid(scenario, grid)
    jobs = [_job(i, values, sc, scenario.path) for i, (values, sc) in enumerate(expanded)]
    columns = ["point", *grid, "hardware", *METRICS, *TRAILER]
    # what can still fail comes before the log is opened: a missing dask or an unreachable scheduler
    # must leave an earlier sweep.csv as it was
    client = dask_client(dask_address) if dask_address is not None else None
    try:
        log = _CsvLog(Path(csv_path), columns, jobs, resume) if csv_path is not None else None
    except BaseException:
        if client is not None:
            client.close()
        raise
    results: list[list[Row] | None] = [log.finished(i, job) if log else None for i, job in enumerate(jobs)]
    todo = [i for i, rows in enumerate(results) if rows is None]
    done = reused = len(jobs) - len(todo)
    if reused:
        _report(progress, done, len(jobs))

    def finish(i: int, rows: list[Row] | None, error: str) -> None:
        nonlocal done
        job = jobs[i]
        if rows is None:
            rows = [{**job.args[2], "hardware": hw, **dict.fromkeys(METRICS, math.nan)} for hw in job.hardware]
        results[i] = rows = [{**row, "error": error, "digest": job.digest} for row in rows]
        if log:
            log.append(rows)
        done += 1
        _report(progress, done, len(jobs))

    fn = point or run_point
    try:
        if todo and client is not None:
            _run_dask(jobs, todo, fn, finish, client)
        elif todo:
            _run_local(jobs, todo, fn, finish, workers or os.cpu_count() or 1)
    finally:
        if client is not None:
            client.close()
        if log:
            log.close()
    rows = [row for point_rows in results for row in point_rows or ()]
    if log:
        log.rewrite(rows)
    df = pd.DataFrame(rows, columns=columns)
    df.attrs.update(swept=list(grid), scenario=scenario.name, setting=sweep_setting(scenario, grid),
                    slo_ttft_p99_s=scenario.slo.ttft_p99_s,
                    slo_tpot_p99_s=scenario.slo.tpot_p99_s, reused_points=reused)
    return df


def _report(progress: Progress | None, done: int, total: int) -> None:
    if progress:
        progress(done / total)


def _error_text(exc: BaseException) -> str:
    """An exception as one line for the ``error`` column: ``Type: message``, at most `_ERROR_CHARS`."""
    text = " ".join(f"{type(exc).__name__}: {exc}".split())
    return text if len(text) <= _ERROR_CHARS else text[:_ERROR_CHARS - 1] + "…"


def _died(exitcode: int | None) -> str:
    """Why a worker process ended mid-point, from its exit code (negative: the signal that killed it)."""
    if exitcode is not None and exitcode < 0:
        try:
            return f"worker process killed by {signal.Signals(-exitcode).name}"
        except ValueError:
            return f"worker process killed by signal {-exitcode}"
    return f"worker process exited with code {exitcode} during the point"


def _run_local(jobs: list[_Job], todo: list[int], fn: PointFn, finish: Finish, workers: int) -> None:
    if workers == 1 or len(todo) == 1:
        for i in todo:
            try:
                rows = fn(*jobs[i].args)
            except Exception as exc:
                finish(i, None, _error_text(exc))
            else:
                finish(i, rows, "")
        return
    _run_workers(jobs, todo, fn, finish, workers)


# --- worker processes -------------------------------------------------------------------------
# Each worker owns one duplex pipe: the parent sends ``(fn, args)``, the worker answers
# ``("ok", rows)`` or ``("error", text)``. A worker runs one point at a time, so when its process
# sentinel fires without an answer the parent knows which point died with it. (A
# ProcessPoolExecutor cannot say: one dead worker breaks the pool and fails every pending future.)
# What a worker needs to run `run_point`: the forkserver imports it once, as it starts, and every worker it
# forks has it. Else each worker imports pandas, scipy.stats and the simulator itself before its first
# point (~1.5 CPU s here). The forkserver imports them as `python -c` would from the sweep's folder (its
# sys.path is the interpreter's, PYTHONPATH's and the folder's, not a path the caller added at run time);
# a module that fails to import there is left to the worker, which has the caller's sys.path.
WORKER_PRELOAD = ("simulator.sweep", "simulator.study", "simulator.planning")


@dataclasses.dataclass(slots=True)
class _Worker:
    process: BaseProcess
    conn: Connection
    job: int | None = None  # the job index it is running


def _serve(conn: Connection, sys_path: list[str]) -> None:
    """A worker's loop: run jobs from `conn` until the parent closes it."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the process group: the parent decides
    sys.path[:] = sys_path  # forkserver children do not inherit it: import what the parent can
    while True:
        try:
            data = conn.recv_bytes()
        except (EOFError, OSError):  # the parent is gone or done
            return
        try:
            fn, args = pickle.loads(data)
            reply: tuple[str, Any] = ("ok", fn(*args))
        except Exception as exc:
            reply = ("error", _error_text(exc))
        try:
            conn.send(reply)
        except OSError:
            return
        except Exception as exc:  # rows that do not pickle
            conn.send(("error", _error_text(exc)))


def _spawn(ctx: ForkServerContext) -> _Worker:
    conn, child = ctx.Pipe()
    process = ctx.Process(target=_serve, args=(child, list(sys.path)), name="kvsim-sweep", daemon=True)
    process.start()
    child.close()
    return _Worker(process=process, conn=conn)


def _run_workers(jobs: list[_Job], todo: list[int], fn: PointFn, finish: Finish, workers: int) -> None:
    """Run the `todo` jobs on `workers` processes; whatever ends this, no worker outlives it."""
    import multiprocessing
    from multiprocessing.connection import wait

    ctx = multiprocessing.get_context("forkserver")  # never a fork of a process holding threads
    ctx.set_forkserver_preload(list(WORKER_PRELOAD))  # (it applies when the sweep starts the forkserver)
    queue = deque(todo)
    pool: list[_Worker] = []
    try:
        while len(pool) < min(workers, len(queue)):
            pool.append(_spawn(ctx))
        while True:
            for w in pool:
                if w.job is None and queue:
                    w.job = queue.popleft()
                    with contextlib.suppress(OSError):  # it died before the point: its sentinel says so below
                        w.conn.send((fn, jobs[w.job].args))
            busy = [(w, w.job) for w in pool if w.job is not None]
            if not busy:
                return
            ready = set(wait([o for w, _ in busy for o in (w.conn, w.process.sentinel)]))
            for w, i in busy:
                if w.conn not in ready and w.process.sentinel not in ready:
                    continue
                w.job = None
                try:
                    reply = w.conn.recv() if w.conn.poll() else None
                except (EOFError, OSError):
                    reply = None
                if reply is not None:
                    status, value = reply
                    finish(i, value if status == "ok" else None, "" if status == "ok" else value)
                    continue
                w.process.join(5)  # the worker died with point i: fail it, replace the worker
                finish(i, None, _died(w.process.exitcode))
                pool.remove(w)
                _stop([w])
                if queue:
                    pool.append(_spawn(ctx))
    finally:
        _stop(pool)


def _stop(pool: list[_Worker]) -> None:
    """Terminate the workers (SIGTERM), then kill any still alive after 5 s; reap them all."""
    for w in pool:
        w.conn.close()
        if w.process.is_alive():
            w.process.terminate()
    for w in pool:
        w.process.join(5)
        if w.process.is_alive():
            w.process.kill()
            w.process.join()


def check_dask(address: str) -> None:
    """Refuse, naming ``--dask``, an empty scheduler address or a machine without dask.distributed."""
    if not address.strip():
        raise ConfigError(f"--dask: must be a scheduler address, e.g. tcp://host:8786 (got {address!r})")
    try:
        import dask.distributed  # noqa: F401
    except ImportError:
        raise ConfigError("--dask needs dask.distributed: pip install 'kvsim[dask]'") from None


def dask_client(address: str) -> Any:
    """A `dask.distributed.Client` connected to the scheduler at `address`, or a `ConfigError` naming
    ``--dask`` (`check_dask`'s, or no scheduler there)."""
    check_dask(address)
    from dask.distributed import Client

    try:
        return Client(address, timeout="10s")
    except (OSError, TimeoutError, ValueError) as exc:
        raise ConfigError(f"--dask {address}: cannot reach the Dask scheduler ({exc})") from None


def _run_dask(jobs: list[_Job], todo: list[int], fn: PointFn, finish: Finish, client: Any) -> None:
    from dask.distributed import as_completed as dask_completed

    futures = [client.submit(fn, *jobs[i].args, pure=False) for i in todo]
    index = {f.key: i for f, i in zip(futures, todo, strict=True)}
    try:
        for fut in dask_completed(futures):
            try:
                rows = fut.result()
            except Exception as exc:  # the point raised, or its workers kept dying (KilledWorker)
                finish(index[fut.key], None, _error_text(exc))
            else:
                finish(index[fut.key], rows, "")
    except BaseException:
        client.cancel(futures)  # stopped early: leave nothing running on the cluster for us
        raise


# --- the CSV log ------------------------------------------------------------------------------
class _CsvLog:
    """An append-only CSV of finished points: one header, then each point's rows as it finishes.

    Every append is flushed and fsynced, so a crash keeps every point logged before it; a line
    cut short by a crash (no newline) is dropped when the log is resumed. Resuming checks that
    the header is this sweep's and that every row's ``digest`` is one of its points.
    """

    def __init__(self, path: Path, columns: list[str], jobs: list[_Job], resume: bool) -> None:
        self.path, self.columns = path, columns
        self.done: dict[tuple[str, str], Row] = {}  # (digest, hardware) -> the metrics of a logged row that ran
        old = self._read(jobs, cut=True) if resume else False
        self._file: TextIO = path.open("a" if old else "w", newline="", encoding="utf-8")
        self._csv = csv.writer(self._file, lineterminator="\n")
        if not old:
            self.append([], header=True)

    @classmethod
    def reader(cls, path: Path, columns: list[str], jobs: list[_Job]) -> _CsvLog:
        """The log's finished rows (`finished`), read and checked as a resume reads them, the file untouched."""
        log = cls.__new__(cls)
        log.path, log.columns, log.done = path, columns, {}
        log._read(jobs, cut=False)
        return log

    def _read(self, jobs: list[_Job], *, cut: bool) -> bool:
        """Load the rows already logged (dropping, with `cut`, a last line a crash cut short); False
        when there is nothing to resume."""
        if not self.path.exists():
            return False
        data = self.path.read_bytes()
        whole = data[:data.rfind(b"\n") + 1]  # a last line without its newline was cut by a crash
        if not whole:
            return False
        try:
            lines = list(csv.reader(io.StringIO(whole.decode("utf-8-sig"))))  # a BOM an editor added is no column
        except (UnicodeDecodeError, csv.Error) as exc:
            raise ConfigError(f"{self.path}: --resume: not a sweep CSV ({exc})") from None
        newer = [c for c in self.columns if c not in lines[0]]
        if newer and set(newer) <= set(NEWER_METRICS) and set(lines[0]) <= set(self.columns):
            raise ConfigError(f"{self.path}: --resume: written by an older kvsim, before the columns "
                              f"{', '.join(newer)}; write elsewhere, or delete it to run every point again")
        if lines[0] != self.columns and sorted(lines[0]) == sorted(self.columns):  # the same, in another order
            keys = [c for c in lines[0] if c not in ("point", "hardware", *METRICS, *TRAILER)]
            raise ConfigError(f"{self.path}: --resume: its grid keys come in another order than this sweep's: give "
                              f"the --grid options in its order ({', '.join(keys)[:120]}), or write elsewhere")
        if lines[0] != self.columns:
            missing = ", ".join(c for c in self.columns if c not in lines[0])[:80] or "none"
            extra = ", ".join(c for c in lines[0] if c not in self.columns)[:80] or "none"
            raise ConfigError(f"{self.path}: --resume: its columns are not this sweep's (missing: {missing}; "
                              f"extra: {extra}); sweep the same keys, in the same order, or write elsewhere")
        if cut and len(whole) < len(data):
            with self.path.open("r+b") as f:
                f.truncate(len(whole))
        ours = {job.digest: job for job in jobs}
        at = {c: self.columns.index(c) for c in ("hardware", *METRICS, *TRAILER)}
        for line, cells in enumerate(lines[1:], start=2):
            where = f"{self.path} line {line}: --resume"
            if len(cells) != len(self.columns):
                raise ConfigError(f"{where}: has {len(cells)} fields where the header has {len(self.columns)} (a row "
                                  "cut short or edited); delete that line to run its point again")
            digest = cells[at["digest"]]
            if digest not in ours:
                raise ConfigError(f"{where}: not a point of this sweep (digest "
                                  f"{digest[:16]!r}): the scenario, its seed or the grid changed since it was "
                                  "written (a grid may grow, not lose points); resume with the same ones or write "
                                  "elsewhere")
            key = (digest, cells[at["hardware"]])
            if cells[at["error"]]:
                self.done.pop(key, None)
            else:
                slo = ours[digest].args[0]["slo"]
                self.done[key] = _checked_row({m: cells[at[m]] for m in METRICS}, slo, where)
        return True

    def finished(self, index: int, job: _Job) -> list[Row] | None:
        """Job `index`'s logged rows if it ran on every hardware kind, else None."""
        metrics = [self.done.get((job.digest, hw)) for hw in job.hardware]
        if not all(metrics):
            return None
        return [{**job.args[2], "hardware": hw, **m, "error": "", "digest": job.digest}
                for hw, m in zip(job.hardware, metrics, strict=True) if m]

    def append(self, rows: list[Row], header: bool = False) -> None:
        if header:
            self._csv.writerow(self.columns)
        self._csv.writerows([_cell(row.get(c)) for c in self.columns] for row in rows)
        self._file.flush()
        os.fsync(self._file.fileno())

    def close(self) -> None:
        self._file.close()

    def rewrite(self, rows: list[Row]) -> None:
        """Replace the log, atomically, by `rows` (grid order, one row per point and node kind)."""
        tmp = self.path.with_name(f".{self.path.name}.tmp")
        try:
            with tmp.open("w", newline="", encoding="utf-8") as f:
                writer = csv.writer(f, lineterminator="\n")
                writer.writerow(self.columns)
                writer.writerows([_cell(row.get(c)) for c in self.columns] for row in rows)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
        except BaseException:  # the log itself is untouched
            tmp.unlink(missing_ok=True)
            raise


def _cell(v: Any) -> Any:
    """A CSV cell: missing and NaN values empty (as pandas writes them), numbers by `str` (exact)."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return ""
    return _plain_value(v)


# integers >= 0; the other figures floats
_COUNTS = ("requests", "trace_rows_skipped", "completed", "rejected", "timed_out", "max_concurrency", "preemptions")
_FRACTIONS = ("goodput_fraction",)  # in [0, 1]


def _checked_row(cells: Mapping[str, str], slo: Mapping[str, float], where: str) -> Row:
    """A logged row's metric cells read back as `run_point` writes them, or a `ConfigError` at `where`
    naming the column and what it holds: counts integers >= 0 (``completed``, ``rejected`` and ``timed_out``
    adding up to ``requests``), figures numbers >= 0 or empty (NaN: none measured), fractions in [0, 1],
    ``slo_ttft_p99_s`` and ``slo_tpot_p99_s`` the point's ``[slo]``, and ``meets_slo`` True or False as
    `simulator.planning.meets_slo` finds it from the row's figures and those SLOs. A row edited by hand is
    refused rather than reused as the sweep's result."""
    row = {m: _parse_cell(cells[m]) for m in METRICS}

    def bad(column: str, allowed: str) -> ConfigError:
        return ConfigError(f"{where}: column {column}: got {shown(cells[column])}, the sweep writes {allowed}; "
                           "delete that line to run its point again")

    for m in METRICS:
        v = row[m]
        if m in FLAGS:
            if not isinstance(v, bool):
                raise bad(m, "True or False")
        elif m in _COUNTS:
            if not is_whole(v):
                raise bad(m, "an integer >= 0")
        elif isinstance(v, bool) or not isinstance(v, int | float) or not (math.isnan(v) or 0 <= v < math.inf):
            raise bad(m, "a finite number >= 0 (or empty)")
        elif m in _FRACTIONS and v > 1:
            raise bad(m, "a number in [0, 1] (or empty)")
    from simulator.planning import figures_meet_slo

    for m in SLO_COLUMNS:  # the SLOs written are the point's
        if row[m] != slo[m.removeprefix("slo_")]:
            raise bad(m, f"the point's [slo] {m.removeprefix('slo_')} = {slo[m.removeprefix('slo_')]:g}")
    ended = row["completed"] + row["rejected"] + row["timed_out"]  # every request leaves one of the three ways
    if ended != row["requests"]:
        raise bad("requests", f"completed + rejected + timed_out = {ended}")
    meets = figures_meet_slo(row, slo["ttft_p99_s"], slo["tpot_p99_s"])
    if row["meets_slo"] != meets:
        raise bad("meets_slo", f"{meets} for the row's figures and the SLOs (ttft_p99_s <= {slo['ttft_p99_s']:g}, "
                               f"tpot_p99_s <= {slo['tpot_p99_s']:g}, none rejected or timed out)")
    return row


def _parse_cell(text: str) -> Any:
    """A metric cell read back as it was written: empty is NaN, then bool, int, float, or the text."""
    if not text:
        return math.nan
    if text in ("True", "False"):
        return text == "True"
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


__all__ = ["METRICS", "SLO_COLUMNS", "TRAILER", "PointFn", "expand_grid", "resumable_points", "run_point", "run_sweep",
           "scenario_table"]
