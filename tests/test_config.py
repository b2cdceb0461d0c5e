"""The table -> config dataclass builder: types, unknown keys, rules, key paths."""

from dataclasses import dataclass, field
from typing import Literal

import pytest

from simulator.config import build
from simulator.errors import ConfigError, must


@dataclass(frozen=True, slots=True, kw_only=True)
class Inner:
    rate: float = 1.0
    mode: Literal["a", "b"] = "a"

    def __post_init__(self) -> None:
        must(self.rate > 0, "Inner", "rate", "> 0", self.rate)


@dataclass(frozen=True, slots=True, kw_only=True)
class Outer:
    name: str
    count: int = 1
    flag: bool = False
    names: tuple[str, ...] = ()
    inner: Inner = field(default_factory=Inner)
    limit: float | None = None


def test_builds_nested_and_coerces_ints_to_floats():
    o = build(Outer, {"name": "x", "inner": {"rate": 2, "mode": "b"}, "names": ["p", "q"], "limit": 3}, "f.toml")
    assert o == Outer(name="x", inner=Inner(rate=2.0, mode="b"), names=("p", "q"), limit=3.0)
    assert isinstance(o.inner.rate, float)


@pytest.mark.parametrize(("table", "msg"), [
    ({"name": "x", "cuont": 2}, "f.toml: cuont: unknown key; valid: name, count, flag, names, inner, limit (got 2)"),
    ({}, "f.toml: name: required key is missing"),
    ({"name": "x", "count": "2"}, "f.toml: count: must be an integer (got '2')"),
    ({"name": "x", "count": True}, "f.toml: count: must be an integer (got True)"),
    ({"name": "x", "flag": 1}, "f.toml: flag: must be true or false (got 1)"),
    ({"name": "x", "inner": {"mode": "c"}}, "f.toml: inner.mode: must be one of 'a', 'b' (got 'c')"),
    ({"name": "x", "inner": {"rate": -1}}, "f.toml: inner.rate: must be > 0 (got -1.0)"),
    ({"name": "x", "inner": {"speed": 1}}, "f.toml: inner.speed: unknown key; valid: rate, mode (got 1)"),
    ({"name": "x", "names": "p"}, "f.toml: names: must be a list (got 'p')"),
    ({"name": "x", "limit": "no"}, "f.toml: limit: must be a number (got 'no')"),
])
def test_errors_name_the_key_path_rule_and_value(table, msg):
    with pytest.raises(ConfigError) as err:
        build(Outer, table, "f.toml")
    assert str(err.value) == msg
