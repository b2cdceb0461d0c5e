"""A registry of named plug-ins (cache strategies, retention policies, routers).

A plug-in is a class with a class-level ``name`` whose constructor takes its parameters as
keywords (a frozen dataclass). Registering a name twice raises; an unknown name, or a
parameter the plug-in does not take, is a one-line `ConfigError` listing what is valid.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Generic, TypeVar

from simulator.errors import ConfigError

T = TypeVar("T")
C = TypeVar("C", bound=type)


class Registry(Generic[T]):
    """Plug-in classes by ``name``; `make` instantiates one with its parameters."""

    def __init__(self, what: str) -> None:
        self.what = what
        self._classes: dict[str, type] = {}

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
        """An instance of the plug-in `name` with `params`."""
        if name not in self._classes:
            raise ConfigError(f"{self.what}: 'name' must be one of {self.names()} (got {name!r})")
        cls = self._classes[name]
        if dataclasses.is_dataclass(cls):
            valid = [f.name for f in dataclasses.fields(cls) if f.init]
            unknown = sorted(set(params) - set(valid))
            if unknown:
                raise ConfigError(f"{self.what} {name!r}: unknown parameter {unknown[0]!r}; "
                                  f"valid: {', '.join(valid) or 'none'}")
        try:
            instance: T = cls(**params)
        except TypeError as exc:
            raise ConfigError(f"{self.what} {name!r}: {exc}") from None
        return instance
