"""Audit h198: the prefix cache's offload tiers (host DRAM, NVMe) as a capacity planner reads them: the
summary's tier figures defined, `kvsim compare`'s idle-tier note counting every reload, a DRAM tier too
small for one block refused, and `EngineConfig` checking its cache parameters when it is made."""

from __future__ import annotations

import re

import pytest

from simulator.engine import EngineConfig
from simulator.errors import ConfigError


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"cache_params": {"dram": "yes"}}, "EngineConfig: cache_params.dram: must be true or false (got 'yes')"),
    ({"cache": "lru"}, "EngineConfig.cache: must be one of none, prefix (got 'lru')"),
    ({"cache_params": {"tiers": 2}}, "EngineConfig: cache_params: unknown parameter 'tiers'; valid: eviction, dram, "
                                     "nvme, dram_fraction (got tiers = 2)"),
    ({"cache_params": {"dram": True, "dram_fraction": 1.5}},
     "EngineConfig: cache_params.dram_fraction: must be in (0, 1] (got 1.5)"),
])
def test_engine_config_checks_its_cache_parameters_when_made(kwargs: dict[str, object], message: str) -> None:
    """``EngineConfig(cache_params={'dram': 'yes'})`` was made, and failed only when `run` built the cluster."""
    with pytest.raises(ConfigError) as err:
        EngineConfig(**kwargs)  # type: ignore[arg-type]
    assert str(err.value) == message


# --- a DRAM tier too small for one block --------------------------------------------------------------------------
SCENARIO = {"name": "s", "model": {"name": "Llama-3.1-70B"}, "cluster": {"hardware": ["8xH100"], "nodes": 1, "tp": 8},
            "cache": {"strategy": "prefix", "params": {"dram": True, "nvme": True, "dram_fraction": 1e-9}},
            "workload": {"duration_s": 10, "spec": {"name": "chat-4k"}}}
# Llama-3.1-70B bf16: 80 layers × 8 KV heads × 128 × 2 (K, V) × 2 bytes = 327,680 bytes a token, a block of 16
# tokens 5,242,880 bytes; one TP8 replica on an 8xH100 node has its 2,000 GB of host DRAM (hardware/nodes.toml):
# 5,242,880 / 2e12 = 2.62144e-06 of it holds one block, 2.63e-06 rounded up to three digits
BLOCK_BYTES, HOST_BYTES = 16 * 327_680, 2e12


def test_a_dram_fraction_whose_tier_holds_no_block_is_refused_naming_the_smallest_that_holds_one() -> None:
    """``dram_fraction = 1e-9`` gave the tier 0 blocks: every block evicted from HBM was dropped (the NVMe tier
    below got none either) and the run read as one without tiers, 'nothing came back from the dram + nvme tiers'."""
    from simulator.scenario import parse_scenario

    with pytest.raises(ConfigError) as err:
        parse_scenario(SCENARIO, "s.toml")
    assert str(err.value) == (
        "s.toml: cache.params.dram_fraction: 1e-09 of a replica's 2,000 GB of 8xH100 host DRAM holds 0 KV blocks "
        "of 0.00524 GB, so its dram tier would keep nothing; the smallest fraction that holds one is 2.63e-06")
    ok = {**SCENARIO, "cache": {"strategy": "prefix", "params": {"dram": True, "dram_fraction": 2.63e-6}}}
    assert parse_scenario(ok, "s.toml").cache.params["dram_fraction"] == 2.63e-6


def test_the_smallest_dram_fraction_holds_one_block_and_the_next_smaller_none() -> None:
    from simulator.engine.cluster import dram_tier_blocks, smallest_dram_fraction

    assert smallest_dram_fraction(HOST_BYTES, BLOCK_BYTES) == 2.63e-6
    assert dram_tier_blocks(HOST_BYTES, 2.63e-6, BLOCK_BYTES) == 1
    assert dram_tier_blocks(HOST_BYTES, 2.62e-6, BLOCK_BYTES) == 0
    assert smallest_dram_fraction(3.0, 1.0) == 0.334  # 1/3 rounded up, not to 0.333 (which holds 0.999 of a block)
    assert smallest_dram_fraction(1.0, 3.0) == 3.0  # over 1: no fraction holds one


def test_the_engine_refuses_a_dram_tier_of_no_block_too() -> None:
    """`run` of an `EngineConfig` (the Python API, no scenario file) refuses it when it sizes the tier."""
    from simulator.engine import run

    config = EngineConfig(model="Llama-3.1-70B", cache_params={"dram": True, "dram_fraction": 1e-9})
    with pytest.raises(ConfigError, match=r"^EngineConfig: cache_params.dram_fraction: 1e-09 of a replica's 2,000 GB "
                                          r"of 8xH100 host DRAM holds 0 KV blocks .* is 2.63e-06$"):
        run(config, [])


# --- each tier's reloads, re-admissions included -------------------------------------------------------------------
def test_the_cache_counts_the_blocks_each_tier_brought_back() -> None:
    """helper-197's case (tests/strategies/test_radix.py): a 10-block leaf sent down to a DRAM tier of 3 blocks and
    an NVMe tier of 100 ends as 1 block in DRAM and 9 in NVMe; an admission of the whole prompt brings back 1 + 9.
    The summary's ``cache_dram_reloaded_blocks`` and ``cache_nvme_reloaded_blocks`` are these counts."""
    from simulator.engine.caches import CacheContext, make_strategy
    from simulator.engine.sequence import Seq
    from tests.strategies.test_radix import B, finish, req, run_one

    ctx = CacheContext(block_bytes=1.0, dram_bytes=3.0, dram_bytes_per_s=1e3, nvme_bytes=100.0,
                       nvme_bytes_per_s=1e3, prefill_s=lambda tokens, context: 1.0 * tokens)
    st = make_strategy("prefix", dram=True, nvme=True, dram_fraction=1.0).bind(B, 1000, ctx)
    seq, _ = run_one(st, req(0, ((1, 40),)))
    finish(st, seq, 40)
    st.evict(10)
    assert st.tree.blocks == [0, 1, 9]
    st.on_admit(Seq(req(1, ((1, 40), (2, 4))), 1, 0, float("inf")), 40)
    stats = st.stats()
    assert (stats["reloaded_blocks"], stats["dram_reloaded_blocks"], stats["nvme_reloaded_blocks"]) == (10, 1, 9)


ROW = {"offload_tiers": "dram+nvme", "cache_evicted_blocks": 40_000, "cache_reloaded_blocks": 13_598,
       "hit_dram_tokens": 167_440, "hit_nvme_tokens": 0}  # 10,465 blocks of 16 tokens at first admissions


def test_compare_calls_a_tier_idle_only_where_no_block_came_back_from_it() -> None:
    """The NVMe tier served no first admission (``hit_nvme_tokens`` 0) but brought back 3,133 blocks to preempted
    requests' re-admissions (13,598 reloaded in all against 10,465 blocks of first-admission hits): it was called
    idle, 'no prompt token was served from its nvme tier ... so it changes nothing at this load'."""
    from simulator.compare import tier_note

    assert tier_note({**ROW, "cache_dram_reloaded_blocks": 10_465, "cache_nvme_reloaded_blocks": 3_133}) == ""
    assert tier_note({**ROW, "cache_dram_reloaded_blocks": 13_598, "cache_nvme_reloaded_blocks": 0}) == (
        "no block came back from its nvme tier (the dram tier brought back 13,598, at first admissions and "
        "re-admissions after preemptions), so it changes nothing at this load")
    none_back = {**ROW, "cache_reloaded_blocks": 0, "cache_dram_reloaded_blocks": 0, "cache_nvme_reloaded_blocks": 0}
    assert tier_note(none_back) == ("no block came back from dram+nvme (40,000 evicted from HBM), so the tier "
                                    "changes nothing at this load")
    assert tier_note({**ROW, "offload_tiers": ""}) == ""


# --- the summary's tier figures, defined ---------------------------------------------------------------------------
def test_every_cache_figure_of_a_tiered_run_is_defined_and_holds_to_its_formula() -> None:
    """``cache_hbm_cached_blocks`` and the other tier counts, ``cache_bytes_down`` and ``cache_dropped_blocks`` were
    in summary.json with no definition; the end-of-run tier counts read as if they were occupancies. Each
    ``cache_*`` key is now defined in `_cache_summary`'s docstring, and holds to it on a small run that sends blocks
    down both tiers and back: bytes up = reloaded blocks × block bytes, reloaded = DRAM's + NVMe's, every evicted
    block went down (none dropped at this size), and HBM's count at the end is above its time-mean."""
    import dataclasses

    from simulator.engine import AffineTimer, run
    from simulator.engine.geometry import block_geometry
    from simulator.engine.result import _cache_summary
    from tests.engine.helpers import shared_prefix_requests

    config = EngineConfig(model="Llama-3.1-8B", node="1xH100", tp=1, kv_blocks=120, sample_interval_s=0)
    config = dataclasses.replace(config, cache_params={"dram": True, "nvme": True, "dram_fraction": 1e-4})
    # prefill priced at 1 ms a token: reloading from NVMe beats recomputing, so both tiers serve
    s = run(config, shared_prefix_requests(60, 3, docs=12), 0, timer=AffineTimer(per_prefill_token_s=1e-3)).summary
    doc = _cache_summary.__doc__ or ""
    keys = sorted(k for k in s if k.startswith("cache_"))
    assert keys == ["cache_bytes_down", "cache_bytes_up", "cache_dram_cached_blocks", "cache_dram_reloaded_blocks",
                    "cache_dropped_blocks", "cache_evicted_blocks", "cache_hbm_cached_blocks",
                    "cache_nvme_cached_blocks", "cache_nvme_reloaded_blocks", "cache_reloaded_blocks"]
    assert [k for k in keys if not re.search(rf"``{k}\b", doc)] == []
    assert "at the end of the run" in doc and "not a time-mean" in doc
    block_bytes = block_geometry(config.model_spec(), config.layout, config.block_tokens).block_bytes
    assert s["cache_dram_reloaded_blocks"] > 0 and s["cache_nvme_reloaded_blocks"] > 0  # both tiers served
    assert s["cache_reloaded_blocks"] == s["cache_dram_reloaded_blocks"] + s["cache_nvme_reloaded_blocks"]
    assert s["cache_bytes_up"] == s["cache_reloaded_blocks"] * block_bytes
    # every block down to DRAM came from HBM (none dropped), and NVMe's from DRAM: what NVMe holds and gave back
    assert s["cache_dropped_blocks"] == 0
    dram_to_nvme = s["cache_nvme_cached_blocks"] + s["cache_nvme_reloaded_blocks"]
    assert s["cache_bytes_down"] == (s["cache_evicted_blocks"] + dram_to_nvme) * block_bytes
    assert s["cache_dram_cached_blocks"] == s["cache_evicted_blocks"] - dram_to_nvme - s["cache_dram_reloaded_blocks"]
    # this run preempts: NVMe brought back more blocks than its first-admission hits hold (re-admissions too)
    assert s["preemptions"] > 0 and s["cache_nvme_reloaded_blocks"] * 16 > s["hit_nvme_tokens"]
    assert s["cache_hbm_cached_blocks"] > s["kv_cache_blocks_mean"]  # one replica: the end above the time-mean
