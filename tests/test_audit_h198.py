"""Audit h198: the prefix cache's offload tiers (host DRAM, NVMe) as a capacity planner reads them: the
summary's tier figures defined, `kvsim compare`'s idle-tier note counting every reload, a DRAM tier too
small for one block refused, and `EngineConfig` checking its cache parameters when it is made."""

from __future__ import annotations

import pytest

from simulator.engine import EngineConfig
from simulator.errors import ConfigError


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"cache_params": {"dram": "yes"}}, "EngineConfig: cache_params.dram: must be true or false (got 'yes')"),
    ({"cache": "lru"}, "EngineConfig.cache: must be one of none, prefix (got 'lru')"),
    ({"cache_params": {"tiers": 2}}, "EngineConfig: cache_params: unknown parameter 'tiers'; valid: eviction, dram, "
                                     "nvme, dram_fraction"),
    ({"cache_params": {"dram": True, "dram_fraction": 1.5}},
     "EngineConfig: cache_params.dram_fraction: must be in (0, 1] (got 1.5)"),
])
def test_engine_config_checks_its_cache_parameters_when_made(kwargs: dict[str, object], message: str) -> None:
    """``EngineConfig(cache_params={'dram': 'yes'})`` was made, and failed only when `run` built the cluster."""
    with pytest.raises(ConfigError) as err:
        EngineConfig(**kwargs)  # type: ignore[arg-type]
    assert str(err.value) == message
