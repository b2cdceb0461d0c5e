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
     "EngineConfig: router_params: unknown parameter 'max_imbalance_tokens'; router 'least-kv' takes no parameters "
     "(got max_imbalance_tokens = 9)"),
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


# Hand-made workloads whose arrivals fall exactly on step ends: every step takes 0.125 s (a binary fraction:
# 0.125 · j is exact), arrivals on a 0.125 s grid. Stepping routes an arrival before the commit of a step ending
# at its instant (`cluster.REPLICA_PRIORITY_STEP`); fast-forward's router views counted that step as done
# (a decode jump's `outstanding_at` and `used_at`, a chunked run's `run_steps_done`), and routed otherwise
ON_STEP_ENDS = [
    ("least-tokens", {}, 1, ((0.125, 39, 7), (0.625, 37, 4), (1.125, 25, 18), (1.625, 36, 10), (2.25, 36, 20)),
     [0, 1, 0, 1, 1]),
    ("least-tokens", {"max_num_batched_tokens": 16}, 0,
     ((0.0, 43, 24), (0.25, 27, 14), (1.625, 63, 5), (2.25, 24, 5), (2.5, 36, 29), (2.5, 11, 12)),
     [1, 0, 0, 0, 1, 0]),
    ("least-kv", {}, 0, ((0.625, 18, 5), (1.0, 19, 17), (1.125, 15, 27), (1.375, 28, 2), (1.625, 32, 24),
                         (2.875, 6, 25)), [1, 0, 1, 1, 0, 1]),
    # an xPyD fleet (2 decode replicas, then 2 prefill; prompts up to 30 tokens prefill on the decode pool): the
    # decode pool's router at an arrival on a decode replica's step end
    ("least-tokens", {"disagg": True}, 1, ((0.125, 36, 9), (0.25, 26, 8), (1.0, 4, 22), (1.5, 31, 29), (1.5, 29, 23),
                                           (2.375, 42, 19), (2.875, 1, 26)), [2, 1, 0, 3, 1, 3, 0]),
    # and a hand-off's decode replica, chosen as a prefill replica
    # commits, reads a decode replica's step ending then as committed (it comes first in index order)
    ("least-kv", {"disagg": True}, 0, ((0.125, 49, 17), (0.625, 60, 3), (0.875, 11, 25), (1.125, 6, 19),
                                       (1.25, 78, 6), (1.375, 5, 15), (1.75, 51, 27)), None),
    ("least-tokens", {"disagg": True}, 0, ((0.75, 27, 9), (1.125, 70, 17), (1.375, 49, 29), (1.5, 74, 19),
                                           (1.5, 50, 4), (2.25, 74, 13), (2.375, 41, 9)), None),
]


@pytest.mark.parametrize(("router", "kw", "seed", "arrivals", "replicas"), ON_STEP_ENDS)
def test_fast_forward_routes_as_stepping_at_an_arrival_on_a_step_end(
        router: str, kw: dict[str, object], seed: int, arrivals: tuple[tuple[float, int, int], ...],
        replicas: list[int] | None) -> None:
    from dataclasses import replace

    from simulator.engine import AffineTimer, PoolConfig, SchedulerConfig, run
    from workloads.request import Request

    timer = AffineTimer(overhead_s=0.125, per_seq_s=0.0, per_context_token_s=0.0, per_prefill_token_s=0.0)
    reqs = [Request(id=i, arrival_s=t, prompt_tokens=p, output_tokens=o, segments=((10_000 + i, p),))
            for i, (t, p, o) in enumerate(arrivals)]
    config = EngineConfig(n_nodes=1, tp=4, kv_blocks=100, cache="none", router=router, block_tokens=4,
                          scheduler=SchedulerConfig(max_num_batched_tokens=int(kw.get("max_num_batched_tokens", 8192))))
    if kw.get("disagg"):
        config = replace(config, short_prompt_tokens=30, prefill_pool=PoolConfig(node="8xH100", n_nodes=1, tp=4))
    cols = ["request_id", "replica", "decode_replica", "ttft_s", "end_s"]
    jumped = run(config, reqs, seed=seed, timer=timer).requests.sort_values("request_id")[cols]
    stepped = run(replace(config, fast_forward=False), reqs, seed=seed, timer=timer).requests.sort_values(
        "request_id")[cols]
    assert jumped.values.tolist() == stepped.values.tolist()
    if replicas is not None:  # stepping's choices, which fast-forward now makes
        assert jumped.replica.tolist() == replicas
