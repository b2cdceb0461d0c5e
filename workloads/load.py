"""The one entry point the rest of kvsim calls: `load_workload`."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from simulator.errors import ConfigError, at_key, is_number, is_whole, must, shown
from simulator.files import read_toml, shown_path
from simulator.limits import check_expected_requests, check_horizon
from workloads.generators import GENERATORS, by_name, expected_requests, generator_from_dict, runs_by_name
from workloads.generators.mixture import NEEDS_COMPONENTS
from workloads.traces import read_trace
from workloads.traces._rows import check_on_error
from workloads.workload import SKIPPED_WHY, Workload

# a scenario's [workload] (`simulator.scenario.WorkloadSection`): its keys, and the seconds a generator
# draws when it gives no duration_s (a generator's own default may differ: code-repo-128k's is an hour)
SCENARIO_KEYS = ("spec", "trace", "duration_s", "rate_scale", "start_s", "time_scale", "skip_bad_rows")
SCENARIO_DURATION_S = 600.0


def _spec_from_toml(path: Path) -> dict[str, Any]:
    """The ``[workload]`` table of a TOML file: a generator table (``name = ..., ...params``) or a
    scenario's (``[workload.spec]`` or ``trace``, with ``duration_s`` and the like; `_scenario_table`)."""
    table = read_toml(path).get("workload")
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: 'workload' must be a table {{name = ..., ...}} or a scenario's "
                          f"[workload] with [workload.spec] (got {shown(table)})")
    return table


def _scenario_table(table: dict[str, Any], path: Path) -> dict[str, Any] | None:
    """The options of a scenario-shaped ``[workload]`` (a ``spec`` table or a ``trace`` instead of a
    generator's ``name``), checked against `SCENARIO_KEYS`; None for a generator table."""
    if "name" in table:
        return None
    if not ("spec" in table or "trace" in table):
        raise ConfigError(f"{path}: workload: 'name' is required: [workload] is a generator table (name = "
                          f"\"chat-4k\", ...params) or a scenario's, with a [workload.spec] table or a trace "
                          f"(generators: {', '.join(sorted(GENERATORS))})")
    unknown = sorted(str(k) for k in table if k not in SCENARIO_KEYS)
    if unknown:
        raise ConfigError(f"{path}: workload.{shown(unknown[0])[1:-1]}: unknown key in a scenario's [workload] "
                          f"(valid: {', '.join(SCENARIO_KEYS)}) (got {shown(table[unknown[0]])})")
    spec, trace = table.get("spec"), table.get("trace")
    if "spec" in table and not isinstance(spec, dict):
        raise ConfigError(f"{path}: workload.spec must be a generator table {{name = ..., ...}} (got {shown(spec)})")
    if "trace" in table and (not isinstance(trace, str) or "spec" in table):
        raise ConfigError(f"{path}: workload.trace must be a path (a string), given instead of [workload.spec] "
                          f"(got {shown(trace)})")
    for key in SCENARIO_KEYS[2:-1]:
        value = table.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
            raise ConfigError(f"{path}: workload.{key} must be a number (got {shown(value)})")
    if not isinstance(table.get("skip_bad_rows", False), bool):
        raise ConfigError(f"{path}: workload.skip_bad_rows must be true or false (got {shown(table['skip_bad_rows'])})")
    return table


def prepare_generator(spec: dict[str, Any], *, duration_s: float | None = None, rate_scale: float = 1.0,
                      base_dir: Path | None = None, where: str = "workload",
                      table: str = "workload") -> tuple[Any, float]:
    """The generator of `spec` at `rate_scale` and the seconds it will draw, with kvsim's limits
    checked (`simulator.limits`: the horizon, the expected requests); nothing is drawn yet.
    `table` is the key a bad parameter is named under (``workload.spec`` in a scenario)."""
    gen = generator_from_dict(spec, table, base_dir=base_dir)
    if rate_scale != 1.0:
        gen = gen.scaled(rate_scale)
    duration = duration_s if duration_s is not None else gen.default_duration_s
    check_horizon(duration, where)
    check_expected_requests(expected_requests(gen, duration), f"{where} {gen.name!r} over {duration:g} s")
    return gen, duration


def not_a_folder(called: str, spec: str | Path) -> str:
    """The error for a folder given as a workload (``--workload``, ``SPEC``, `load_workload`'s `spec`): said as
    ``--gaps`` and `simulator.files.read_bytes` say one, ``<called>: 'DIR' is a folder, not a file (...)``."""
    return (f"{called}: '{shown_path(spec)}' is a folder, not a file (a workload is a generator name "
            f"({', '.join(by_name())}), a TOML file with [workload] or a trace file)")


def load_workload(
    spec: dict[str, Any] | str | Path,
    *,
    seed: int | None = None,
    duration_s: float | None = None,
    rate_scale: float = 1.0,
    format: str | None = None,
    on_error: str = "stop",
    start_s: float = 0.0,
    time_scale: float = 1.0,
    base_dir: str | Path | None = None,
    allow_empty: bool = False,
    table: str = "workload",
    name: str = "",
) -> Workload:
    """A workload from a generator spec, a generator name, a TOML file or a trace file.

    Parameters
    ----------
    spec
        ``{"name": "chat-4k", ...params}``; a generator name that runs by its defaults alone
        (`workloads.generators.by_name`: not ``mixture``, which needs its components); a
        ``.toml`` file with a ``[workload]`` table; or a trace file (format detected from
        its first line, whatever its suffix, unless `format` is given: azure, burstgpt, kvsim, mooncake).
    seed
        Generators draw from ``np.random.default_rng(np.random.SeedSequence(seed))``; default 0, or
        a scenario file's own top-level ``seed`` (what ``kvsim run`` draws its workload with); trace
        thinning (``rate_scale < 1``) draws from a generator seeded the same way, a session's turns
        kept or dropped together (`Workload.replayed`).
    duration_s
        Generated: arrivals in ``[0, duration_s)`` (default: the generator's
        ``default_duration_s``). Trace: replay seconds kept after `start_s` (default: all).
    rate_scale
        Generated: the generator's arrival rate times `rate_scale` (``generator.scaled``).
        Trace: thinning for < 1, time compression for > 1 (see `Workload.replayed`).
    format, on_error
        Trace format override; ``"stop"`` (default) or ``"skip"`` on a malformed row.
    start_s, time_scale
        Trace window start (trace seconds) and speed-up (``2`` plays twice as fast).
    base_dir
        Where a generator table's relative paths (an empirical lengths CSV) resolve: the folder of
        the scenario it came from. A ``.toml`` `spec` uses its own folder; default the working directory.
    allow_empty
        A workload with no request is a `ConfigError` saying why (the generator drew none in
        `duration_s`; the trace has no row, or none in the window) unless this is true: a search
        that thins the rate (`simulator.maxrate`) may reach a load of nothing.
    table
        The key a generator table's errors are named under (``workload.spec`` in a scenario).
    name
        What the caller calls `spec` in its errors (``SPEC``, ``--workload``); default ``load_workload``.
    """
    where = "load_workload"
    called = name or f"{where}: spec"  # what `spec` is called: "SPEC: no such file ..."
    # an integer >= 0 (1.5 failed in numpy's SeedSequence); a reader's on_error, for a generator too (helper-152)
    must(seed is None or is_whole(seed), where, "seed", "an integer >= 0 (the same seed, the same workload)", seed)
    seed_given = seed is not None
    seed = 0 if seed is None else seed
    check_on_error(on_error, where)
    # numbers, not their text (helper-159: duration_s="10" and rate_scale="2" failed in a comparison)
    for key, value in (("duration_s", duration_s), ("rate_scale", rate_scale), ("start_s", start_s),
                       ("time_scale", time_scale)):
        must((value is None and key == "duration_s") or is_number(value), where, key,
             "a number" + " (or None: the generator's default or the whole trace)" * (key == "duration_s"), value)
    if duration_s is not None:
        check_horizon(duration_s, where)
    must(math.isfinite(rate_scale) and rate_scale > 0, where, "rate_scale", "finite and > 0", rate_scale)
    must(math.isfinite(start_s) and start_s >= 0, where, "start_s", "finite and >= 0", start_s)
    must(math.isfinite(time_scale) and time_scale > 0, where, "time_scale", "finite and > 0", time_scale)
    if isinstance(spec, str) and spec in GENERATORS:
        if not runs_by_name(spec):  # its name is no spec: say what it needs rather than fail on a missing key
            raise ConfigError(f"{called}: {spec!r} does not run by name alone ({', '.join(by_name())} do): "
                              f"{NEEDS_COMPONENTS}")
        spec = {"name": spec}
    if isinstance(spec, str | Path):
        path = Path(spec)
        if str(spec).strip() and path.is_dir():  # helper-159: said "no such file" of a folder that is there ("": ".")
            raise ConfigError(not_a_folder(called, spec))
        if not path.is_file():
            others = sorted(set(GENERATORS) - set(by_name()))
            if path.suffix or len(path.parts) > 1:  # a file name or a path, not a misspelt generator: say so
                raise ConfigError(
                    f"{called}: no such file '{shown_path(spec)}' (a workload is a generator name "
                    f"({', '.join(by_name())}), a TOML file with [workload] or a trace file)")
            raise ConfigError(
                f"{called}: must be a generator name ({', '.join(by_name())}) or an existing file: a TOML "
                f"file with [workload] (as {', '.join(others)} needs) or a trace (got '{shown_path(spec)}')"
            )
        if path.suffix == ".toml" and format is None:
            spec = _spec_from_toml(path)
            base_dir = path.parent
            table = f"{path}: workload"
            scenario = _scenario_table(spec, path)
            if scenario is not None:  # a scenario's [workload]: its options (and seed) unless the call gives them
                seed = seed if seed_given else _scenario_seed(path)
                return _from_scenario_table(scenario, path, seed=seed, duration_s=duration_s, rate_scale=rate_scale,
                                            allow_empty=allow_empty, on_error=on_error)
        else:
            trace = read_trace(path, format=format, on_error=on_error)
            if duration_s is None and start_s == 0 and time_scale == 1 and rate_scale == 1:
                replay = trace
            else:
                replay = trace.replayed(start_s=start_s, duration_s=duration_s, time_scale=time_scale,
                                        rate_scale=rate_scale, seed=seed)
            if not allow_empty and replay.first() is None:
                raise ConfigError(_empty_trace(path, trace, start_s=start_s, duration_s=duration_s,
                                               time_scale=time_scale, rate_scale=rate_scale))
            return replay
    if not isinstance(spec, dict):
        raise ConfigError(f"{where}: 'spec' must be a table, a name or a path (got {shown(spec)})")
    # a trace file's format: a generator has none (helper-159: it was ignored without a word)
    must(format is None, where, "format", "None for a generated workload (it names a trace file's format)", format)
    if start_s != 0 or time_scale != 1:  # a generator has no window to shift or speed up
        raise ConfigError(f"{where}: 'start_s' and 'time_scale' apply to a trace replay, not to a generated "
                          f"workload (got start_s={start_s:g}, time_scale={time_scale:g}); use duration_s and "
                          "rate_scale")
    gen, duration = prepare_generator(spec, duration_s=duration_s, rate_scale=rate_scale, table=table, where=table,
                                      base_dir=Path(base_dir) if base_dir is not None else None)
    rng = np.random.default_rng(np.random.SeedSequence(seed))
    try:
        requests = gen.generate(rng, duration)
    except ConfigError as exc:  # a draw out of bounds: name the table it came from
        msg = str(exc)
        raise ConfigError(msg if msg.startswith(table) else f"{table}: {msg}") from None
    if not requests and not allow_empty:
        scale = f", rate_scale={rate_scale:g}" if rate_scale != 1 else ""
        raise ConfigError(f"{table}: the generator {gen.name!r} drew no request in duration_s={duration:g} s "
                          f"(seed {seed}{scale}); lengthen duration_s, raise its rate or loosen its length bounds "
                          "(max_prompt_tokens)")
    return Workload.from_requests(requests, name=gen.name, seed=seed)


def _scenario_seed(path: Path) -> int:
    """A scenario file's top-level ``seed`` (0 where it has none), which its run draws the workload with
    (`simulator.scenario.Scenario.load_workload`): describing or writing the scenario's workload without
    ``--seed`` gives the requests ``kvsim run`` simulates (helper-196: it drew seed 0's whatever the file's)."""
    seed = read_toml(path).get("seed", 0)
    if not is_whole(seed):
        raise ConfigError(f"{path}: seed: must be an integer >= 0 (got {shown(seed)})")
    return int(seed)


def _from_scenario_table(table: dict[str, Any], path: Path, *, seed: int, duration_s: float | None,
                         rate_scale: float, allow_empty: bool, on_error: str = "stop") -> Workload:
    """The workload a scenario's ``[workload]`` in `path` names (`_scenario_table`): its ``spec`` or
    its ``trace`` (relative to `path`), its ``duration_s`` unless `duration_s` is given (as a scenario:
    default, or ``inf``, the whole trace, or `SCENARIO_DURATION_S` of a generator), and its ``rate_scale`` times
    `rate_scale`; a trace's malformed rows skipped when its ``skip_bad_rows`` or `on_error` says so."""
    where = f"{path}: workload"
    duration = duration_s if duration_s is not None else table.get("duration_s")
    if duration == math.inf and "trace" in table and duration_s is None:  # the whole trace, as a scenario reads it
        duration = None  # (`simulator.scenario.WorkloadSection`; it was refused here as "must be finite")
    if duration is not None:
        check_horizon(duration, where)
    must(0 < table.get("rate_scale", 1.0) < math.inf, where, "rate_scale", "finite and > 0", table.get("rate_scale"))
    scale = rate_scale * float(table.get("rate_scale", 1.0))
    if "trace" in table:
        must(0 <= table.get("start_s", 0) < math.inf, where, "start_s", "finite and >= 0", table.get("start_s"))
        must(0 < table.get("time_scale", 1) < math.inf, where, "time_scale", "finite and > 0", table.get("time_scale"))
        return load_workload(path.parent / table["trace"], seed=seed, duration_s=duration, rate_scale=scale,
                             start_s=float(table.get("start_s", 0.0)), time_scale=float(table.get("time_scale", 1.0)),
                             allow_empty=allow_empty, on_error="skip" if table.get("skip_bad_rows") else on_error)
    for key in ("start_s", "time_scale", "skip_bad_rows"):
        if key in table:
            raise ConfigError(f"{path}: workload.{key} applies to a trace replay, not to a generated workload "
                              f"(got {table[key]!r}); use duration_s and rate_scale")
    duration = SCENARIO_DURATION_S if duration is None else duration
    return load_workload(table["spec"], seed=seed, duration_s=duration, rate_scale=scale, base_dir=path.parent,
                         allow_empty=allow_empty, table=at_key(where, "spec"))


def _empty_trace(path: Path, trace: Workload, *, start_s: float, duration_s: float | None, time_scale: float,
                 rate_scale: float) -> str:
    """Why a trace replay holds no request: the trace has none (rows skipped or dropped by its format's
    rule), or the window (`start_s`, `duration_s`, `time_scale`, `rate_scale`) keeps none of them."""
    n, first, last = 0, math.nan, math.nan
    for r in trace:
        first = r.arrival_s if n == 0 else first
        last, n = r.arrival_s, n + 1
    if n == 0:
        skipped = trace.skipped_rows or 0
        rows = f"no row was kept ({skipped:,} skipped: {SKIPPED_WHY})" if skipped else "it has no row after the header"
        return f"{path.name}: the trace holds no request: {rows}"
    window = [f"start_s={start_s:g}"]
    if duration_s is not None:
        window.append(f"duration_s={duration_s:g}")
    if time_scale != 1:
        window.append(f"time_scale={time_scale:g}")
    if rate_scale != 1:
        window.append(f"rate_scale={rate_scale:g}")
    return (f"{path.name}: the replay keeps no request of the trace ({', '.join(window)}): its {n:,} requests "
            f"arrive from {first:g} s to {last:g} s")
