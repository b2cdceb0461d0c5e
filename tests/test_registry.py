"""The plug-in registry: names, duplicates, unknown names and parameters as one-line errors."""

from dataclasses import dataclass
from typing import ClassVar

import pytest

from simulator.engine.caches import make_strategy, strategy_names
from simulator.engine.retention import make_retention
from simulator.engine.routers import make_router
from simulator.errors import ConfigError
from simulator.registry import Registry


def test_register_make_and_errors():
    reg: Registry[object] = Registry("widget")

    @reg.register
    @dataclass(frozen=True)
    class Knob:
        name: ClassVar[str] = "knob"
        turns: int = 1

    assert reg.names() == ["knob"] and reg.make("knob", turns=3) == Knob(turns=3)
    with pytest.raises(ConfigError, match="widget 'knob' is already registered"):
        reg.register(Knob)
    with pytest.raises(ConfigError, match=r"widget.name: must be one of knob \(got 'dial'\)"):
        reg.make("dial")
    with pytest.raises(ConfigError, match="widget 'knob': unknown parameter 'spins'; valid: turns"):
        reg.make("knob", spins=2)


@pytest.mark.parametrize(("make", "name"), [(make_strategy, "prefix"), (make_retention, "streaming-llm"),
                                            (make_router, "least-kv")])
def test_engine_plugins_reject_unknown_parameters_in_one_line(make, name):
    with pytest.raises(ConfigError, match=f"'{name}': unknown parameter 'bogus'"):
        make(name, bogus=1)


def test_shipped_strategies():
    assert {"none", "prefix"} <= set(strategy_names())
