"""Parameter sweeps: a scenario run at every point of a grid of scenario keys, in parallel.

A grid maps dotted scenario key paths to lists of values, e.g.
``{"cluster.nodes": [1, 2, 4], "cache.layout": ["native", "fp8"]}``; its points are the cross
product, in grid order (the last key varies fastest). Each point is the scenario's table
(`dataclasses.asdict`) with the keys set, re-parsed by `parse_scenario`, so a swept value is
validated and reported exactly as the same value in a scenario file would be. String values
(the command line's) are first read with the field's type: ``"2"`` for ``cluster.nodes`` is
the integer 2; a single node kind for ``cluster.hardware`` is a one-element list.

`run_sweep` simulates every point on each of its hardware kinds and returns one row per
(point, hardware kind): the swept keys, then the headline metrics (`METRICS`). Points run in
worker processes (`concurrent.futures.ProcessPoolExecutor`) or on a Dask cluster; each is
seeded by its scenario, so the frame is the same whichever runs it.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import os
import typing
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import Any

import pandas as pd

from simulator.errors import ConfigError
from simulator.scenario import Scenario, parse_scenario

Progress = Callable[[float], None]
Row = dict[str, Any]

#: Headline metric columns of a sweep frame, in order, with units in the names.
METRICS: tuple[str, ...] = (
    "requests", "completed", "timed_out", "ttft_p50_s", "ttft_p99_s", "tpot_p50_s", "tpot_p99_s",
    "output_tokens_per_s", "goodput_fraction", "max_concurrency", "kv_utilization", "usd_per_hour",
    "usd_per_million_output_tokens", "meets_slo",
)
_SCENARIO_ONLY = ("path",)  # fields of `Scenario` that are not scenario-file keys


# --- grid expansion ---------------------------------------------------------------------------
def _field_type(key: str) -> Any:
    """The declared type of dotted key path `key` in a scenario, or raise listing the valid keys.

    Keys below a table-valued field (``workload.spec.rate``, ``cache.params.ttl_s``) are free:
    the component that reads the table checks them when the point runs.
    """
    cls: Any = Scenario
    parts = key.split(".")
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
        cls = typing.get_type_hints(cls)[part]
    if dataclasses.is_dataclass(cls):
        raise ConfigError(f"--grid {key}: is a table; sweep one of its keys: "
                          f"{', '.join(f.name for f in dataclasses.fields(cls))}")
    return cls


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
    """The scenario as a scenario-file table (what `parse_scenario` reads back)."""
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
        An unknown key path (naming the valid keys at that level), an empty value list, or a
        value the scenario rejects (the scenario file's message, naming the key and the value).
    """
    types = {key: _field_type(key) for key in grid}
    for key, values in grid.items():
        if isinstance(values, str) or not len(values):
            raise ConfigError(f"--grid {key}: must be a non-empty list of values (got {values!r})")
    points = []
    for combo in itertools.product(*grid.values()):
        table = scenario_table(scenario)  # a deep copy
        for key, value in zip(grid, combo, strict=True):
            _set(table, key, _parse_value(types[key], value))
        try:
            point = _parse(table, scenario.path)
        except ConfigError as exc:
            at = ", ".join(f"{k}={v!r}" for k, v in zip(grid, combo, strict=True))
            raise ConfigError(f"sweep point {at}: {exc}") from None
        points.append(({key: _get(point, key) for key in grid}, point))
    return points


def _parse(table: dict[str, Any], path: str) -> Scenario:
    """`parse_scenario` keeping `path` (where relative paths resolve) as the base scenario had it."""
    where = path or f"scenario {table.get('name')!r}"
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
    for hw, r in run_scenario(sc).results.items():
        s = r.summary
        metrics = {
            "requests": s["requests"], "completed": s["completed"], "timed_out": s["timed_out"],
            "ttft_p50_s": s["ttft_p50_s"], "ttft_p99_s": s["ttft_p99_s"], "tpot_p50_s": s["tpot_p50_s"],
            "tpot_p99_s": s["tpot_p99_s"], "output_tokens_per_s": s["output_tokens_per_s"],
            "goodput_fraction": s["goodput_fraction"], "max_concurrency": s["max_concurrency"],
            "kv_utilization": s["kv_utilization"],
            "usd_per_hour": s["cost_usd"] / s["makespan_s"] * 3600 if s["makespan_s"] else math.nan,
            "usd_per_million_output_tokens": s["usd_per_million_output_tokens"],
            "meets_slo": meets_slo(r, sc.slo.ttft_p99_s, sc.slo.tpot_p99_s),
        }
        rows.append({**labels, "hardware": hw, **{k: _plain_value(v) for k, v in metrics.items()}})
    return rows


def _plain_value(v: Any) -> Any:
    return v.item() if hasattr(v, "item") else v


def _label(v: Any) -> Any:
    """A swept value as a frame cell: tuples (``cluster.hardware``) joined with ``+``."""
    return "+".join(map(str, v)) if isinstance(v, tuple) else v


def run_sweep(scenario: Scenario, grid: Mapping[str, Sequence[Any]], workers: int | None = None,
              dask_address: str | None = None, progress: Progress | None = None) -> pd.DataFrame:
    """Simulate every grid point on each hardware kind; one row per (point, hardware kind).

    Parameters
    ----------
    workers : int, optional
        Worker processes on this machine (default ``os.cpu_count()``); 1 runs in this process.
    dask_address : str, optional
        A Dask scheduler (``tcp://host:port``) to run the points on instead; needs the
        ``dask`` extra (``pip install 'kvsim[dask]'``) and kvsim installed on the workers.
    progress : callable, optional
        Called with the fraction of points done.

    Returns
    -------
    DataFrame
        Columns ``point`` (grid index), the swept keys, ``hardware``, then `METRICS`; rows in
        grid order whatever ran them. ``attrs["swept"]`` lists the swept keys and
        ``attrs["scenario"]`` the scenario's name, ``attrs["slo_*"]`` its SLOs.
    """
    points = expand_grid(scenario, grid)
    jobs = [(scenario_table(sc), scenario.path, {"point": i, **{k: _label(v) for k, v in values.items()}})
            for i, (values, sc) in enumerate(points)]
    if dask_address:
        results = _run_dask(jobs, dask_address, progress)
    else:
        results = _run_local(jobs, workers or os.cpu_count() or 1, progress)
    rows = [row for rs in results for row in rs]
    df = pd.DataFrame(rows, columns=["point", *grid, "hardware", *METRICS])
    df.attrs.update(swept=list(grid), scenario=scenario.name, slo_ttft_p99_s=scenario.slo.ttft_p99_s,
                    slo_tpot_p99_s=scenario.slo.tpot_p99_s)
    return df


def _report(progress: Progress | None, done: int, total: int) -> None:
    if progress:
        progress(done / total)


def _run_local(jobs: list[tuple[Any, ...]], workers: int, progress: Progress | None) -> list[list[Row]]:
    if workers < 1:
        raise ConfigError(f"run_sweep: 'workers' must be >= 1 (got {workers})")
    results: list[list[Row]] = [[] for _ in jobs]
    if workers == 1 or len(jobs) == 1:
        for i, job in enumerate(jobs):
            results[i] = run_point(*job)
            _report(progress, i + 1, len(jobs))
        return results
    import multiprocessing

    # forkserver: workers start from a clean process, never a fork of one holding threads
    ctx = multiprocessing.get_context("forkserver")
    with ProcessPoolExecutor(max_workers=min(workers, len(jobs)), mp_context=ctx) as pool:
        futures = {pool.submit(run_point, *job): i for i, job in enumerate(jobs)}
        for done, fut in enumerate(as_completed(futures), start=1):
            results[futures[fut]] = fut.result()
            _report(progress, done, len(jobs))
    return results


def _run_dask(jobs: list[tuple[Any, ...]], address: str, progress: Progress | None) -> list[list[Row]]:
    try:
        from dask.distributed import Client
        from dask.distributed import as_completed as dask_completed
    except ImportError:
        raise ConfigError("--dask needs dask.distributed: pip install 'kvsim[dask]'") from None
    try:
        client = Client(address, timeout="10s")
    except (OSError, TimeoutError) as exc:
        raise ConfigError(f"--dask {address}: cannot reach the Dask scheduler ({exc})") from None
    with client:
        futures = [client.submit(run_point, *job, pure=False) for job in jobs]
        index = {f.key: i for i, f in enumerate(futures)}
        results: list[list[Row]] = [[] for _ in jobs]
        for done, fut in enumerate(dask_completed(futures), start=1):
            results[index[fut.key]] = fut.result()
            _report(progress, done, len(jobs))
    return results


__all__ = ["METRICS", "expand_grid", "run_point", "run_sweep", "scenario_table"]
