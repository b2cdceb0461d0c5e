"""Workload generators: a registry of frozen parameter specs that generate requests.

A generator is a frozen dataclass whose fields are its parameters, with a class-level
``name``, ``generate(rng, duration_s) -> list[Request]`` (arrival-ordered, ids from 0) and
``scaled(factor)`` (the same workload at ``factor`` times the load). Register one with
`register_generator`; build one from a scenario table with `generator_from_dict`::

    generator_from_dict({"name": "chat-4k", "max_prompt_tokens": 8192})
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Iterable
from pathlib import Path
from typing import Any, ClassVar, Protocol, TypeVar

import numpy as np

from simulator.config import missing_fields
from simulator.errors import ConfigError, RuleError, at_key, placed, shown
from workloads.arrivals import arrival_from
from workloads.distributions import lognormal_from, require_numbers
from workloads.request import Request


class WorkloadGenerator(Protocol):
    name: ClassVar[str]
    default_duration_s: ClassVar[float]

    def generate(self, rng: np.random.Generator, duration_s: float) -> list[Request]: ...

    def scaled(self, factor: float) -> WorkloadGenerator: ...


G = TypeVar("G")
GENERATORS: dict[str, type[Any]] = {}


def register_generator(cls: type[G]) -> type[G]:
    """Class decorator: register `cls` under ``cls.name``; a name registered twice raises."""
    name = getattr(cls, "name", None)
    if not isinstance(name, str) or not name:
        raise ConfigError(f"register_generator: {cls.__name__} must have a class-level 'name' string")
    if name in GENERATORS:
        raise ConfigError(f"register_generator: 'name' must be unique (got {name!r}, already registered)")
    GENERATORS[name] = cls
    return cls


def generator_class(name: str, where: str = "workload") -> type[Any]:
    """The registered class for `name`; unknown names raise listing the valid ones, at ``<where>.name``."""
    if isinstance(name, str) and name in GENERATORS:
        return GENERATORS[name]
    raise ConfigError(f"{at_key(where, 'name')}: must be one of {', '.join(sorted(GENERATORS))} (got {shown(name)})")


def generator_from_dict(spec: dict[str, Any], where: str = "workload", base_dir: Path | None = None) -> Any:
    """A generator from a table ``{name = "...", ...params}``; unknown keys are rejected.

    Fields typed `LogNormal` accept a number (the mean) or ``{mean, cv, low, high}``;
    fields typed `ArrivalProcess` accept ``{kind = "poisson" | "bursty" | "diurnal" | "offline", ...}``;
    lists become tuples. A class may instead provide ``from_params(params, where)``, or
    ``from_params(params, where, base_dir)`` to resolve relative paths (`base_dir`: the folder of
    the file the table came from; None: the working directory).
    """
    if "name" not in spec:
        raise ConfigError(f"{where}: 'name' is required (valid: {', '.join(sorted(GENERATORS))})")
    params = dict(spec)
    cls = generator_class(params.pop("name"), where)
    from_params = getattr(cls, "from_params", None)
    if from_params is not None:
        if base_dir is not None and "base_dir" in inspect.signature(from_params).parameters:
            return from_params(params, where, base_dir=base_dir)
        return from_params(params, where)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    kwargs: dict[str, Any] = {}
    for key, value in params.items():
        f = fields.get(key)
        if f is None:
            raise ConfigError(f"{where}.{str(key)[:80]}: unknown key (valid: {', '.join(sorted(fields))}) "
                              f"(got {shown(value)})")
        kind = str(f.type)
        if "LogNormal" in kind:
            value = lognormal_from(value, f"{where}.{key}")
        elif "ArrivalProcess" in kind:
            value = arrival_from(value, f"{where}.{key}")
        elif isinstance(value, list):
            value = tuple(value)
        elif kind in ("int", "float"):
            require_numbers({key: value}, where)
            if kind == "int" and not isinstance(value, int):  # 2.5 system prompts is no count
                raise ConfigError(f"{where}.{key}: must be a whole number (got {shown(value)})")
        kwargs[key] = value
    missing = missing_fields(cls, kwargs)
    if missing:
        raise ConfigError(f"{where}.{missing[0]}: required key is missing")
    try:
        return cls(**kwargs)
    except TypeError as e:
        raise ConfigError(f"{where}: {e}") from None
    except ConfigError as e:  # a rule at its key (``workload.spec.n_teams``), not the generator's class name
        if isinstance(e, RuleError):
            raise placed(e, where) from None
        msg = str(e)
        raise ConfigError(msg if msg.startswith(where) else f"{where}: {msg}") from None


def runs_by_name(name: str) -> bool:
    """Whether generator `name` builds from its defaults alone, so that its name is a whole spec
    (``kvsim workload describe chat-4k``); a mixture does not: it needs its components."""
    try:
        generator_from_dict({"name": name})
    except ConfigError:
        return False
    return True


def by_name() -> list[str]:
    """The registered generators that run by name alone (`runs_by_name`), sorted."""
    return [name for name in sorted(GENERATORS) if runs_by_name(name)]


def expected_requests(generator: Any, duration_s: float) -> float:
    """Requests `generator` draws on average for `duration_s`: its own ``expected_requests`` when it
    has one, else one per expected arrival of each arrival process among its fields (a single-turn
    generator). Checked against `simulator.limits.MAX_REQUESTS` before anything is drawn."""
    own = getattr(generator, "expected_requests", None)
    if own is not None:
        return float(own(duration_s))
    total = 0.0
    for f in dataclasses.fields(generator):
        count = getattr(getattr(generator, f.name), "expected_count", None)
        if count is not None:
            total += float(count(duration_s))
    return total


def finalize(requests: Iterable[Request]) -> list[Request]:
    """Sort by ``(arrival_s, session_id, turn)`` and number ids from 0 in that order."""
    ordered = sorted(requests, key=lambda r: (r.arrival_s, r.session_id, r.turn))
    return [dataclasses.replace(r, id=i) for i, r in enumerate(ordered)]


from workloads.generators import chat, code_repo, mixture, synthetic  # noqa: E402  (registers the built-ins)

__all__ = [
    "GENERATORS",
    "WorkloadGenerator",
    "by_name",
    "chat",
    "code_repo",
    "expected_requests",
    "finalize",
    "generator_class",
    "generator_from_dict",
    "mixture",
    "register_generator",
    "runs_by_name",
    "synthetic",
]
