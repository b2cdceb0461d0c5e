"""The one entry point the rest of kvsim calls: `load_workload`."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from simulator.errors import ConfigError, must, shown
from simulator.files import read_toml
from simulator.limits import check_expected_requests, check_horizon
from workloads.generators import GENERATORS, expected_requests, generator_from_dict
from workloads.traces import read_trace
from workloads.workload import Workload


def _spec_from_toml(path: Path) -> dict[str, Any]:
    """The ``[workload]`` table of a TOML file."""
    table = read_toml(path).get("workload")
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: 'workload' must be a table {{name = ..., ...}} (got {shown(table)})")
    return table


def prepare_generator(spec: dict[str, Any], *, duration_s: float | None = None, rate_scale: float = 1.0,
                      base_dir: Path | None = None, where: str = "workload") -> tuple[Any, float]:
    """The generator of `spec` at `rate_scale` and the seconds it will draw, with kvsim's limits
    checked (`simulator.limits`: the horizon, the expected requests); nothing is drawn yet."""
    gen = generator_from_dict(spec, base_dir=base_dir)
    if rate_scale != 1.0:
        gen = gen.scaled(rate_scale)
    duration = duration_s if duration_s is not None else gen.default_duration_s
    check_horizon(duration, where)
    check_expected_requests(expected_requests(gen, duration), f"{where} {gen.name!r} over {duration:g} s")
    return gen, duration


def load_workload(
    spec: dict[str, Any] | str | Path,
    *,
    seed: int = 0,
    duration_s: float | None = None,
    rate_scale: float = 1.0,
    format: str | None = None,
    on_error: str = "stop",
    start_s: float = 0.0,
    time_scale: float = 1.0,
    base_dir: str | Path | None = None,
) -> Workload:
    """A workload from a generator spec, a generator name, a TOML file or a trace file.

    Parameters
    ----------
    spec
        ``{"name": "chat-4k", ...params}``; a registered generator name (its defaults); a
        ``.toml`` file with a ``[workload]`` table; or a trace file (format detected from
        its suffix and header unless `format` is given: azure, burstgpt, kvsim, mooncake).
    seed
        Generators draw from ``np.random.default_rng(np.random.SeedSequence(seed))``; trace
        thinning (``rate_scale < 1``) draws from a generator seeded the same way.
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
    """
    where = "load_workload"
    must(seed >= 0, where, "seed", ">= 0", seed)
    if duration_s is not None:
        check_horizon(duration_s, where)
    must(math.isfinite(rate_scale) and rate_scale > 0, where, "rate_scale", "finite and > 0", rate_scale)
    must(math.isfinite(start_s) and start_s >= 0, where, "start_s", "finite and >= 0", start_s)
    must(math.isfinite(time_scale) and time_scale > 0, where, "time_scale", "finite and > 0", time_scale)
    if isinstance(spec, str) and spec in GENERATORS:
        spec = {"name": spec}
    if isinstance(spec, str | Path):
        path = Path(spec)
        if not path.is_file():
            raise ConfigError(
                f"{where}: 'spec' must be a generator name ({', '.join(sorted(GENERATORS))}) "
                f"or an existing file (got {shown(str(spec))})"
            )
        if path.suffix == ".toml" and format is None:
            spec = _spec_from_toml(path)
            base_dir = path.parent
        else:
            trace = read_trace(path, format=format, on_error=on_error)
            if duration_s is None and start_s == 0 and time_scale == 1 and rate_scale == 1:
                return trace
            return trace.replayed(
                start_s=start_s, duration_s=duration_s, time_scale=time_scale, rate_scale=rate_scale,
                seed=seed,
            )
    if not isinstance(spec, dict):
        raise ConfigError(f"{where}: 'spec' must be a table, a name or a path (got {shown(spec)})")
    if start_s != 0 or time_scale != 1:  # a generator has no window to shift or speed up
        raise ConfigError(f"{where}: 'start_s' and 'time_scale' apply to a trace replay, not to a generated "
                          f"workload (got start_s={start_s:g}, time_scale={time_scale:g}); use duration_s and "
                          "rate_scale")
    gen, duration = prepare_generator(spec, duration_s=duration_s, rate_scale=rate_scale,
                                      base_dir=Path(base_dir) if base_dir is not None else None)
    rng = np.random.default_rng(np.random.SeedSequence(seed))
    return Workload.from_requests(gen.generate(rng, duration), name=gen.name, seed=seed)
