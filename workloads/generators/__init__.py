"""Workload generators: a registry of frozen parameter specs that generate requests.

A generator is a frozen dataclass whose fields are its parameters, with a class-level
``name``, ``generate(rng, duration_s) -> list[Request]`` (arrival-ordered, ids from 0) and
``scaled(factor)`` (the same workload at ``factor`` times the load). Register one with
`register_generator`; build one from a scenario table with `generator_from_dict`::

    generator_from_dict({"name": "chat-4k", "max_prompt_tokens": 8192})
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any, ClassVar, Protocol, TypeVar

import numpy as np

from simulator.errors import ConfigError
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


def generator_class(name: str) -> type[Any]:
    """The registered class for `name`; unknown names raise listing the valid ones."""
    try:
        return GENERATORS[name]
    except KeyError:
        raise ConfigError(
            f"workload: 'name' must be one of {', '.join(sorted(GENERATORS))} (got {name!r})"
        ) from None


def generator_from_dict(spec: dict[str, Any], where: str = "workload") -> Any:
    """A generator from a table ``{name = "...", ...params}``; unknown keys are rejected.

    Fields typed `LogNormal` accept a number (the mean) or ``{mean, cv, low, high}``;
    fields typed `ArrivalProcess` accept ``{kind = "poisson" | "bursty" | "diurnal", ...}``;
    lists become tuples. A class may instead provide ``from_params(params, where)``.
    """
    if "name" not in spec:
        raise ConfigError(f"{where}: 'name' is required (valid: {', '.join(sorted(GENERATORS))})")
    params = dict(spec)
    cls = generator_class(params.pop("name"))
    from_params = getattr(cls, "from_params", None)
    if from_params is not None:
        return from_params(params, where)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    kwargs: dict[str, Any] = {}
    for key, value in params.items():
        f = fields.get(key)
        if f is None:
            raise ConfigError(f"{where}.{key}: unknown key (valid: {', '.join(sorted(fields))})")
        kind = str(f.type)
        if "LogNormal" in kind:
            value = lognormal_from(value, f"{where}.{key}")
        elif "ArrivalProcess" in kind:
            value = arrival_from(value, f"{where}.{key}")
        elif isinstance(value, list):
            value = tuple(value)
        elif kind in ("int", "float"):
            require_numbers({key: value}, where)
        kwargs[key] = value
    try:
        return cls(**kwargs)
    except TypeError as e:
        raise ConfigError(f"{where}: {e}") from None


def finalize(requests: Iterable[Request]) -> list[Request]:
    """Sort by ``(arrival_s, session_id, turn)`` and number ids from 0 in that order."""
    ordered = sorted(requests, key=lambda r: (r.arrival_s, r.session_id, r.turn))
    return [dataclasses.replace(r, id=i) for i, r in enumerate(ordered)]


from workloads.generators import chat, code_repo, mixture  # noqa: E402  (registers the built-ins)

__all__ = [
    "GENERATORS",
    "WorkloadGenerator",
    "chat",
    "code_repo",
    "finalize",
    "generator_class",
    "generator_from_dict",
    "mixture",
    "register_generator",
]
