"""Tables (parsed TOML) -> frozen config dataclasses, with one-line errors naming the key path.

`build(cls, table, where)` checks that every key is a field of `cls` (unknown keys list the
valid ones), that each value has the field's type (int, float, bool, str, Literal, tuple,
nested dataclass, Optional), then constructs `cls`, whose ``__post_init__`` checks the rules.
Every error is a `ConfigError` of the form ``<where>.<key>: must be ... (got ...)``.
"""

from __future__ import annotations

import dataclasses
import numbers
import os
import types
import typing
from collections.abc import Collection, Mapping
from typing import Any, Literal, TypeVar, get_args, get_origin

from simulator.errors import ConfigError, RuleError, at_key, is_number, placed, shown

C = TypeVar("C")

#: ``field(metadata=SET_BY_KVSIM)``: a field kvsim fills in itself (``Scenario.path``), not a key of the
#: table: `build` refuses it there as an unknown key and leaves it out of the valid keys it lists.
SET_BY_KVSIM: Mapping[str, bool] = types.MappingProxyType({"set_by_kvsim": True})


def set_by_kvsim(cls: Any) -> tuple[str, ...]:
    """The fields of dataclass `cls` marked `SET_BY_KVSIM`: kvsim's own, never keys of its table."""
    return tuple(f.name for f in dataclasses.fields(cls) if f.metadata.get("set_by_kvsim"))


def _type_name(tp: Any) -> str:
    if get_origin(tp) is Literal:
        return "one of " + ", ".join(repr(a) for a in get_args(tp))
    if isinstance(tp, type):
        return {"int": "an integer", "float": "a number", "bool": "true or false", "str": "a string"}.get(
            tp.__name__, tp.__name__)
    return str(tp)


def _coerce(tp: Any, value: Any, where: str) -> Any:
    origin = get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = get_args(tp)
        if value is None and type(None) in args:
            return None
        errors = []
        for arg in args:
            if arg is type(None):
                continue
            try:
                return _coerce(arg, value, where)
            except ConfigError as exc:
                errors.append(str(exc))
        raise ConfigError(errors[0] if len(errors) == 1 else
                          f"{where}: must be {' or '.join(_type_name(a) for a in args)} (got {shown(value)})")
    if origin is Literal:
        if value not in get_args(tp):
            raise ConfigError(f"{where}: must be {_type_name(tp)} (got {shown(value)})")
        return value
    if origin is tuple:
        if not isinstance(value, list | tuple):
            raise ConfigError(f"{where}: must be a list (got {shown(value)})")
        (item,) = get_args(tp)[:1]
        return tuple(_coerce(item, v, f"{where}[{i}]") for i, v in enumerate(value))
    if origin is dict:
        if not isinstance(value, Mapping):
            raise ConfigError(f"{where}: must be a table (got {shown(value)})")
        return dict(value)
    if dataclasses.is_dataclass(tp):
        if not isinstance(value, Mapping):
            raise ConfigError(f"{where}: must be a table (got {shown(value)})")
        return build(typing.cast(type, tp), value, where)
    if tp is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{where}: must be true or false (got {shown(value)})")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{where}: must be an integer (got {shown(value)})")
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
            raise ConfigError(f"{where}: must be a number (got {shown(value)})")
        try:
            return float(value)
        except OverflowError:  # an integer beyond any float
            raise ConfigError(f"{where}: must be a number a float can hold (got {shown(value)})") from None
    if tp is str:
        if not isinstance(value, str):
            raise ConfigError(f"{where}: must be a string (got {shown(value)})")
        return value
    return value  # Any


_HINTS: dict[type, dict[str, Any]] = {}


def _hints(cls: type) -> dict[str, Any]:
    """`cls`'s field types, read once a class (``__post_init__`` asks at every construction)."""
    if cls not in _HINTS:
        _HINTS[cls] = typing.get_type_hints(cls)
    return _HINTS[cls]


def _holds(tp: Any, value: Any) -> bool:
    """Whether `value` already has type `tp` as `build` would give it: an int where a float is asked, a list where
    a tuple (numpy's integers and floats are numbers too); a field typed `Any` or a class of its own holds anything
    that is one."""
    origin = get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        return any(_holds(arg, value) for arg in get_args(tp))
    if tp is type(None):
        return value is None
    if origin is tuple:
        return isinstance(value, list | tuple) and all(_holds(get_args(tp)[0], v) for v in value)
    if origin is dict or tp is dict:
        return isinstance(value, Mapping)
    if tp is bool:
        return isinstance(value, bool)
    if tp is int:
        return isinstance(value, numbers.Integral) and not isinstance(value, bool)
    if tp is float:
        return is_number(value)
    if tp is str:
        return isinstance(value, str)
    return tp is Any or not isinstance(tp, type) or isinstance(value, tp)


def _rule(tp: Any, value: Any, example: bool = True) -> str:
    """What a field of type `tp` must be, as a rule says it (``an integer``, ``a list of strings, e.g. ['8xH100']``,
    ``a list of strings or None, e.g. ['5m']``: the example last)."""
    origin = get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        text = " or ".join("None" if a is type(None) else _rule(a, value, False) for a in get_args(tp))
        lists = any(get_origin(a) is tuple for a in get_args(tp))
        return text + (f", e.g. [{shown(value)}]" if example and lists and isinstance(value, str) else "")
    if origin is tuple:
        item = {int: "integers", float: "numbers", str: "strings"}.get(get_args(tp)[0], "values")
        return f"a list of {item}" + (f", e.g. [{shown(value)}]" if example and isinstance(value, str) else "")
    if origin is dict or tp is dict:
        return "a table (a dict)"
    return _type_name(tp) if isinstance(tp, type) and tp in (bool, int, float, str) else (
        f"a {getattr(tp, '__name__', tp)}")


def check_types(obj: Any, where: str) -> None:
    """Raise `RuleError` at the first field of dataclass `obj` whose value lacks its field's type: what `build`
    checks of a table, for an object built in code (``dataclasses.replace(s.cluster, nodes="2")``, whose rules
    would fail on Python's ``'>='`` comparison error, or ``hardware="8xH100"``, read letter by letter). Call it
    first in ``__post_init__``, before the rules compare.

    A numpy number or bool is stored as Python's, and a path where text is asked as its text (helper-167:
    ``nodes=np.int64(2)`` passed here and failed later in a sweep's re-parse and the report's arithmetic;
    ``trace=Path(...)`` was refused)."""
    for name, tp in _hints(type(obj)).items():
        value = getattr(obj, name)
        # a numpy scalar (no array: helper-170, `np.array([...]).item()` raised, and one of a single item passed)
        plain = value.item() if type(value).__module__ == "numpy" and getattr(value, "ndim", None) == 0 else value
        if isinstance(plain, os.PathLike) and not _holds(tp, plain):
            plain = os.fspath(plain)
        if not _holds(tp, plain):
            raise RuleError(where, name, _rule(tp, value), value)
        if plain is not value:
            object.__setattr__(obj, name, plain)


def coerce(tp: Any, value: Any, where: str) -> Any:
    """`value` as type `tp` (the rules of `build` for one field); `where` names it in the error."""
    return _coerce(tp, value, where)


def missing_fields(cls: Any, table: Mapping[str, Any], given: Collection[str] = ()) -> list[str]:
    """The init fields of dataclass `cls` that have no default and that neither `table` nor `given`
    (fields filled another way) holds, in field order: the required keys a table leaves out."""
    return [f.name for f in dataclasses.fields(cls) if f.init and f.name not in table and f.name not in given
            and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]


def construct(cls: type[C], table: Mapping[str, Any], where: str, **given: Any) -> C:
    """``cls(**given, **table)`` for a data file's entry at `where` (``m.toml: model.M``) whose keys
    the caller has checked: every field the table leaves out that has no default is named
    (``<where>: missing key 'k'``), every value takes its field's type (`coerce`: ``n_layers = "x"``
    is ``<where>.n_layers: must be an integer``, not Python's comparison error) and a rule of `cls`
    is said at its key (`placed`), not under the class's name."""
    missing = missing_fields(cls, table, given)
    if missing:
        raise ConfigError(f"{where}: missing key {missing[0]!r}")
    hints = typing.get_type_hints(cls)
    kwargs = {k: _coerce(hints.get(k, Any), v, at_key(where, k)) for k, v in table.items()}
    # a whole number in a number field stays as written (`kvsim models --json` prints what the file says)
    kwargs = {k: table[k] if type(table[k]) is int and type(v) is float else v for k, v in kwargs.items()}
    try:
        return cls(**given, **kwargs)
    except ConfigError as exc:
        raise placed(exc, where) from None


def build(cls: type[C], table: Mapping[str, Any], where: str) -> C:
    """Construct config dataclass `cls` from `table`; `where` prefixes every error."""
    hints = typing.get_type_hints(cls)
    own = set_by_kvsim(cls)
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init and f.name not in own}  # type: ignore[arg-type]
    unknown = [k for k in table if k not in fields]
    if unknown:
        key = unknown[0]  # its value said too, as every other error says it (helper-201)
        raise ConfigError(f"{at_key(where, str(key)[:80])}: unknown key; valid: {', '.join(fields)} "
                          f"(got {shown(table[key])})")
    missing = missing_fields(cls, table, own)
    if missing:
        raise ConfigError(f"{at_key(where, missing[0])}: required key is missing")
    kwargs = {k: _coerce(hints[k], v, at_key(where, k)) for k, v in table.items()}
    try:
        return cls(**kwargs)
    except ConfigError as exc:  # a rule of `cls` at its key; no class name the user never wrote
        raise placed(exc, where) from None
