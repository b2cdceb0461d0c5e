"""The one entry point the rest of kvsim calls: `load_workload`."""

from __future__ import annotations

import math
import tomllib
from pathlib import Path
from typing import Any

import numpy as np

from simulator.errors import ConfigError, must
from workloads.generators import GENERATORS, generator_from_dict
from workloads.traces import read_trace
from workloads.workload import Workload


def _spec_from_toml(path: Path) -> dict[str, Any]:
    """The ``[workload]`` table of a TOML file."""
    try:
        with path.open("rb") as f:
            doc = tomllib.load(f)
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{path.name}: invalid TOML ({e})") from None
    table = doc.get("workload")
    if not isinstance(table, dict):
        raise ConfigError(f"{path.name}: 'workload' must be a table {{name = ..., ...}} (got {table!r})")
    return table


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
    """
    where = "load_workload"
    must(seed >= 0, where, "seed", ">= 0", seed)
    must(duration_s is None or (math.isfinite(duration_s) and duration_s > 0), where, "duration_s",
         "finite and > 0", duration_s)
    must(math.isfinite(rate_scale) and rate_scale > 0, where, "rate_scale", "finite and > 0", rate_scale)
    if isinstance(spec, str) and spec in GENERATORS:
        spec = {"name": spec}
    if isinstance(spec, str | Path):
        path = Path(spec)
        if not path.is_file():
            raise ConfigError(
                f"{where}: 'spec' must be a generator name ({', '.join(sorted(GENERATORS))}) "
                f"or an existing file (got {str(spec)!r})"
            )
        if path.suffix == ".toml" and format is None:
            spec = _spec_from_toml(path)
        else:
            trace = read_trace(path, format=format, on_error=on_error)
            if duration_s is None and start_s == 0 and time_scale == 1 and rate_scale == 1:
                return trace
            return trace.replayed(
                start_s=start_s, duration_s=duration_s, time_scale=time_scale, rate_scale=rate_scale,
                seed=seed,
            )
    if not isinstance(spec, dict):
        raise ConfigError(f"{where}: 'spec' must be a table, a name or a path (got {spec!r})")
    gen = generator_from_dict(spec)
    if rate_scale != 1.0:
        gen = gen.scaled(rate_scale)
    rng = np.random.default_rng(np.random.SeedSequence(seed))
    requests = gen.generate(rng, duration_s if duration_s is not None else gen.default_duration_s)
    return Workload.from_requests(requests, name=gen.name, seed=seed)
