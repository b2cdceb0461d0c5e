"""A registry of named plug-ins (cache strategies, retention policies, routers).

A plug-in is a class with a class-level ``name`` whose constructor takes its parameters as
keywords (a frozen dataclass). Registering a name twice raises; an unknown name, or a
parameter the plug-in does not take, is a one-line `ConfigError` listing what is valid.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Mapping
from typing import Any, Generic, TypeVar

from simulator.config import coerce
from simulator.errors import ConfigError, placed, shown

T = TypeVar("T")
C = TypeVar("C", bound=type)


class Registry(Generic[T]):
    """Plug-in classes by ``name``; `make` instantiates one with its parameters."""

    def __init__(self, what: str) -> None:
        self.what = what
        self._classes: dict[str, type] = {}
        self._hints: dict[type, dict[str, Any]] = {}  # `typing.get_type_hints` of each class, once (`build`)

    def register(self, cls: C) -> C:
        """Class decorator: register `cls` under ``cls.name``; a second registration raises."""
        name = cls.name  # type: ignore[attr-defined]
        if name in self._classes:
            raise ConfigError(f"{self.what} {name!r} is already registered ({self._classes[name].__qualname__})")
        self._classes[name] = cls
        return cls

    def names(self) -> list[str]:
        """Registered names, sorted."""
        return sorted(self._classes)

    def make(self, name: str, **params: Any) -> T:
        """An instance of the plug-in `name` with `params` (each checked against its field's type:
        ``dram = "yes"`` for a true-or-false field is an error, not a truthy string)."""
        return self.build(name, params, self.what, f"{self.what} {shown(name)}")

    def build(self, name: str, params: Mapping[str, Any], where_name: str, where_params: str,
              key: str = "name") -> T:
        """`make`, its errors prefixed by where the name (`key` in `where_name`) and the parameters
        (`where_params`) were given: a scenario file's table, say."""
        if not isinstance(name, str) or name not in self._classes:
            raise ConfigError(f"{where_name}.{key}: must be one of {', '.join(self.names())} (got {shown(name)})")
        cls = self._classes[name]
        kwargs = dict(params)
        if dataclasses.is_dataclass(cls):
            valid = [f.name for f in dataclasses.fields(cls) if f.init]
            unknown = sorted(str(k) for k in set(params) - set(valid))
            if unknown:  # its value said too (helper-201)
                raise ConfigError(f"{where_params}: unknown parameter {shown(unknown[0])}; " + (
                    f"valid: {', '.join(valid)}" if valid else f"{self.what} {shown(name)} takes no parameters")
                    + f" (got {unknown[0]} = {shown(params[unknown[0]])})")
            hints = self._hints.get(cls)
            if hints is None:  # (most of a build's time: an `EngineConfig` builds its cache strategy each time)
                hints = self._hints[cls] = typing.get_type_hints(cls)
            kwargs = {k: coerce(hints.get(k, Any), v, f"{where_params}.{k}") for k, v in params.items()}
        try:
            instance: T = cls(**kwargs)
        except ConfigError as exc:  # a rule of `cls` at its parameter
            raise placed(exc, where_params) from None
        except TypeError as exc:
            raise ConfigError(f"{where_params}: {exc}") from None
        return instance
