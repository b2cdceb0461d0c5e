"""Audit h203: the request routers as a capacity planner choosing a gateway policy reads them: `EngineConfig`
checking its router and parameters when it is made."""

from __future__ import annotations

import pytest

from simulator.engine import EngineConfig
from simulator.errors import ConfigError

NAMES = "least-dispatched, least-kv, least-tokens, prefix-affinity, round-robin"


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"router": "least-token"}, f"EngineConfig.router: must be one of {NAMES} (got 'least-token')"),
    ({"router": 3}, f"EngineConfig.router: must be one of {NAMES} (got 3)"),
    ({"router": "prefix-affinity", "router_params": {"max_imbalance_tokens": -1}},
     "EngineConfig: router_params.max_imbalance_tokens: must be >= 0 (got -1)"),
    ({"router": "prefix-affinity", "router_params": {"max_imbalance_tokens": 1.5}},
     "EngineConfig: router_params.max_imbalance_tokens: must be an integer (got 1.5)"),
    ({"router": "least-kv", "router_params": {"max_imbalance_tokens": 9}},
     "EngineConfig: router_params: unknown parameter 'max_imbalance_tokens'; router 'least-kv' takes no parameters"),
    ({"router_params": 5}, "EngineConfig: 'router_params' must be a mapping of the router's parameters (got 5)"),
])
def test_engine_config_checks_its_router_when_made(kwargs: dict[str, object], message: str) -> None:
    """``EngineConfig(router="least-token")`` was made, and failed only when `run` started (``router_params=5``
    there as a TypeError, 'int' object is not iterable)."""
    with pytest.raises(ConfigError) as err:
        EngineConfig(**kwargs)  # type: ignore[arg-type]
    assert str(err.value) == message


def test_engine_config_takes_a_good_router() -> None:
    config = EngineConfig(router="prefix-affinity", router_params={"max_imbalance_tokens": 4096})
    assert config.router_params == {"max_imbalance_tokens": 4096}
