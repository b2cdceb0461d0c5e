"""Lazy package exports (PEP 562): a package names what it offers and loads it on first use."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(package: str, where: Mapping[str, str], namespace: dict[str, Any],
                 base: str = "") -> Callable[[str], Any]:
    """A module ``__getattr__`` for `package`: ``name`` comes from the module ``base + where[name]``,
    imported when first asked for and then kept in `namespace` (the package's globals) as a plain
    attribute; any other name is an `AttributeError`, as for a module without it."""

    def __getattr__(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(base + module), name)
        namespace[name] = value
        return value

    return __getattr__
