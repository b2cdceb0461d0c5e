"""Engine configuration: frozen, validated, no I/O. Variants by `dataclasses.replace`."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from hardware.catalog import NodeSpec
from simulator.capacity import DEFAULT_MEMORY_UTILIZATION
from simulator.config import check_types
from simulator.errors import must
from simulator.kv import DEFAULT_BLOCK_TOKENS, KVLayout
from simulator.models import DEFAULT_MODEL, ModelSpec, get_model
from simulator.placement import ParallelPlan

PREEMPTION_MODES = ("recompute", "swap")
# "prompt": admit on the prompt's blocks, preempt when decode growth runs out (vLLM, SGLang);
# "reserve": set aside the KV of prompt + output at admission, never preempt (TensorRT-LLM's
# GUARANTEED_NO_EVICT capacity scheduler, its default)
ADMISSION_POLICIES = ("prompt", "reserve")


#: What a ``dram_fraction`` beside swap preemption must be, as `EngineConfig` and a scenario file both say it.
SWAP_DRAM_RULE = ('below 1 with scheduler.preemption = "swap" (1 gives the cache tier all host DRAM and leaves none to '
                  'swap to: every preemption would recompute)')


def takes_all_dram(cache_params: Mapping[str, object]) -> bool:
    """The prefix cache's DRAM tier takes the whole of host DRAM (``dram_fraction = 1``), leaving no swap space."""
    return bool(cache_params.get("dram")) and cache_params.get("dram_fraction") == 1


@dataclass(frozen=True, slots=True, kw_only=True)
class SchedulerConfig:
    """Per-replica iteration-level scheduler limits (vLLM's names where they exist).

    Parameters
    ----------
    max_num_seqs : int
        Most sequences running (prefilling or decoding) at once.
    max_num_batched_tokens : int
        Token budget of one iteration: one per decode plus the prefill chunks.
    watermark : float
        Fraction of the pool (its blocks rounded up) that admission and swap-in keep free; decode growth
        may use it. A request whose KV at its longest (prompt + output − 1 tokens) needs more than the
        pool less the watermark is rejected when it arrives.
    preemption : "recompute" | "swap"
        What happens to the newest running sequence when blocks run out mid-decode.
    queue_timeout_s : float
        A request not yet admitted this long after arrival leaves with outcome ``timed_out``, at the
        first step boundary at or after that deadline (the scheduler looks at its queue between
        steps: a request whose deadline falls inside a long prefill step waits for its end). A
        request once admitted never times out, even when a recompute preemption puts it back in the
        queue.
    admission : "prompt" | "reserve"
        ``prompt`` (vLLM, SGLang): a request is admitted when its prompt's blocks fit; decode
        growth takes blocks as it goes, and preempts when they run out. ``reserve``
        (TensorRT-LLM's default, GUARANTEED_NO_EVICT): a request is admitted only when the blocks
        of its whole sequence fit beside the growth already promised to the running ones, so no
        running sequence is ever preempted; fewer run at once.
    reserve_output_tokens : int
        With ``admission = "reserve"``: the output length set aside per request, as a request's
        ``max_tokens`` (a request that generates more sets aside its own length); 0: each
        request's own output length (an engine that knew it in advance).
    long_prefill_token_threshold : int
        Most prompt tokens one sequence prefills in a step (vLLM's
        ``--long-prefill-token-threshold``: a longer prefill is chunked at it even when the budget
        has room, so several prompts share a step); 0: no cap but the budget.
    """

    max_num_seqs: int = 256
    max_num_batched_tokens: int = 8192
    watermark: float = 0.01
    preemption: str = "recompute"
    queue_timeout_s: float = math.inf
    admission: str = "prompt"
    reserve_output_tokens: int = 0
    long_prefill_token_threshold: int = 0

    def __post_init__(self) -> None:
        w = "SchedulerConfig"
        check_types(self, w)  # (helper-159: max_num_seqs=1.5 ran, "4" failed in '>=')
        must(self.max_num_seqs >= 1, w, "max_num_seqs", ">= 1", self.max_num_seqs)
        budget = self.max_num_batched_tokens
        must(budget >= 1, w, "max_num_batched_tokens", ">= 1", budget)
        must(0 <= self.watermark < 1, w, "watermark", "in [0, 1)", self.watermark)
        mode = self.preemption
        must(mode in PREEMPTION_MODES, w, "preemption", f"one of {', '.join(PREEMPTION_MODES)}", mode)
        must(self.queue_timeout_s > 0, w, "queue_timeout_s", "> 0", self.queue_timeout_s)
        must(self.admission in ADMISSION_POLICIES, w, "admission", f"one of {', '.join(ADMISSION_POLICIES)}",
             self.admission)
        lp = self.long_prefill_token_threshold
        must(lp >= 0, w, "long_prefill_token_threshold", ">= 0 (0: off)", lp)
        res = self.reserve_output_tokens
        must(res >= 0, w, "reserve_output_tokens", ">= 0", res)
        if res:
            must(self.admission == "reserve", w, "reserve_output_tokens", '0 unless admission = "reserve"', res)


@dataclass(frozen=True, slots=True, kw_only=True)
class PoolConfig:
    """`n_nodes` nodes of one kind serving replicas of the plan ``tp, pp, dp_attention, ep``
    (`simulator.placement.ParallelPlan`): ``node.gpus / (tp · pp)`` replicas a node, or one replica
    on every ``tp · pp / node.gpus`` nodes."""

    node: str | NodeSpec = "8xH100"
    n_nodes: int = 1
    tp: int = 8
    pp: int = 1
    dp_attention: bool = False
    ep: int = 1

    def __post_init__(self) -> None:
        must(self.n_nodes >= 1, "PoolConfig", "n_nodes", ">= 1", self.n_nodes)
        self.plan  # noqa: B018  # validates tp, pp, dp_attention, ep

    @property
    def plan(self) -> ParallelPlan:
        return ParallelPlan(tp=self.tp, pp=self.pp, dp_attention=self.dp_attention, ep=self.ep)


@dataclass(frozen=True, slots=True, kw_only=True)
class EngineConfig:
    """A cluster serving one model, its scheduler, router, cache strategy and SLOs.

    ``node``/``n_nodes``/``tp`` name the first pool; ``more_pools`` make a mixed fleet.
    With ``prefill_pool`` the fleet is disaggregated: that pool prefills every prompt, its KV
    moves over the nodes' NICs (`simulator.engine.link`), and the other pools decode; prompts of
    at most ``short_prompt_tokens`` tokens (0: none) prefill on the decode pool instead.
    ``kv_blocks`` > 0 overrides the pool size computed from `simulator.capacity.kv_budget`
    (``floor(kv_bytes_per_replica / block_bytes)``, a block sized by the layout: see
    `simulator.engine.geometry`), for what-ifs and tests. ``cache`` names the reuse strategy
    (`simulator.engine.caches`), ``retention`` the per-sequence retention policy
    (`simulator.engine.retention`), each with its parameters.
    A request is *good* (counts to goodput) when ``ttft ≤ slo_ttft_s`` and its mean TPOT
    ``≤ slo_tpot_s``. Time-series rows are thinned to one per replica per ``sample_interval_s``, taken where
    stepping's plans would take them, inside a decode jump too (0: a row at every plan and arrival, which
    is a row a step when stepping but only a jump's start and end in fast-forward); a replica going idle
    takes a row whatever the interval.
    ``layout`` is a `KVLayout` (``parse_layout("fp8")`` of a layout's text).
    """

    model: str | ModelSpec = DEFAULT_MODEL
    node: str | NodeSpec = "8xH100"
    n_nodes: int = 1
    tp: int = 8
    pp: int = 1
    dp_attention: bool = False
    ep: int = 1
    more_pools: tuple[PoolConfig, ...] = ()
    prefill_pool: PoolConfig | None = None
    short_prompt_tokens: int = 0
    layout: KVLayout = field(default_factory=KVLayout)
    block_tokens: int = DEFAULT_BLOCK_TOKENS
    memory_utilization: float = DEFAULT_MEMORY_UTILIZATION
    kv_blocks: int = 0
    scheduler: SchedulerConfig = field(default_factory=SchedulerConfig)
    router: str = "least-tokens"
    router_params: Mapping[str, object] = field(default_factory=dict)
    cache: str = "prefix"
    cache_params: Mapping[str, object] = field(default_factory=dict)
    retention: str = "full"
    retention_params: Mapping[str, object] = field(default_factory=dict)
    slo_ttft_s: float = 2.0
    slo_tpot_s: float = 0.1
    fast_forward: bool = True
    sample_interval_s: float = 1.0

    def __post_init__(self) -> None:
        w = "EngineConfig"
        must(self.n_nodes >= 1, w, "n_nodes", ">= 1", self.n_nodes)
        must(self.tp >= 1, w, "tp", ">= 1", self.tp)
        self.plan  # noqa: B018  # validates the first pool's plan
        must(self.block_tokens >= 1, w, "block_tokens", ">= 1", self.block_tokens)
        # (helper-152: a layout's text failed deep in a run, an AttributeError)
        must(isinstance(self.layout, KVLayout), w, "layout", "a KVLayout, e.g. parse_layout('fp8')", self.layout)
        must(0 < self.memory_utilization <= 1, w, "memory_utilization", "in (0, 1]", self.memory_utilization)
        must(self.kv_blocks >= 0, w, "kv_blocks", ">= 0", self.kv_blocks)
        must(self.slo_ttft_s > 0, w, "slo_ttft_s", "> 0", self.slo_ttft_s)
        must(self.slo_tpot_s > 0, w, "slo_tpot_s", "> 0", self.slo_tpot_s)
        must(self.sample_interval_s >= 0, w, "sample_interval_s", ">= 0", self.sample_interval_s)
        must(self.short_prompt_tokens >= 0, w, "short_prompt_tokens", ">= 0", self.short_prompt_tokens)
        # the cache strategy as the run will make it (`cluster.build_cluster`): an unknown name, parameter or value
        # (``cache_params={"dram": "yes"}``) is refused here, as every other field is, not when `run` starts
        must(isinstance(self.cache_params, Mapping), w, "cache_params", "a mapping of the strategy's parameters",
             self.cache_params)
        # (imported here: the routers bring numpy, which `import simulator.engine` need not load, 0.07 s against 0.2)
        from simulator.engine.caches import STRATEGIES
        from simulator.engine.routers import ROUTERS

        STRATEGIES.build(self.cache, self.cache_params, w, f"{w}: cache_params", key="cache")
        # the router too (`cluster.simulate` makes it): helper-203, ``router="least-token"`` was taken and failed when
        # `run` started, and ``router_params=5`` there as a TypeError
        must(isinstance(self.router_params, Mapping), w, "router_params", "a mapping of the router's parameters",
             self.router_params)
        ROUTERS.build(self.router, self.router_params, w, f"{w}: router_params", key="router")
        # swap space is the host DRAM the prefix cache's tier leaves (`cluster.build_cluster`): a tier given all of it
        # left none, and every swap preemption recomputed without a word (helper-197)
        must(not (self.scheduler.preemption == "swap" and takes_all_dram(self.cache_params)), w,
             "cache_params.dram_fraction", SWAP_DRAM_RULE, self.cache_params.get("dram_fraction"))
        if self.prefill_pool is None:
            must(self.short_prompt_tokens == 0, w, "short_prompt_tokens", "0 without a prefill_pool",
                 self.short_prompt_tokens)
        else:  # a decode replica takes KV from the link, not from its queue: nothing to reserve at
            must(self.scheduler.admission == "prompt", w, "scheduler.admission",
                 '"prompt" in a disaggregated fleet (reserve is not modelled there)', self.scheduler.admission)

    def model_spec(self) -> ModelSpec:
        """The model served: ``model`` itself, or the one its name gives (`simulator.models.get_model`: the
        catalog's, or a config.json's)."""
        return self.model if isinstance(self.model, ModelSpec) else get_model(self.model)

    @property
    def pools(self) -> tuple[PoolConfig, ...]:
        """All pools, the first from ``node``/``n_nodes`` and the plan ``tp``/``pp``/``dp_attention``/``ep``."""
        first = PoolConfig(node=self.node, n_nodes=self.n_nodes, tp=self.tp, pp=self.pp,
                           dp_attention=self.dp_attention, ep=self.ep)
        return (first, *self.more_pools)

    @property
    def plan(self) -> ParallelPlan:
        """The first pool's parallelism plan."""
        return self.pools[0].plan

    def as_dict(self) -> dict[str, object]:
        """A JSON-ready view (specs by key) for ``summary.json``."""
        def key(x: object) -> object:
            return getattr(x, "key", x)

        def pool(p: PoolConfig) -> dict[str, object]:
            return {"node": key(p.node), "n_nodes": p.n_nodes, "tp": p.tp, "pp": p.pp, "dp_attention": p.dp_attention,
                    "ep": p.ep, "plan": p.plan.label}

        return {
            "model": key(self.model),
            "pools": [pool(p) for p in self.pools],
            "prefill_pool": pool(self.prefill_pool) if self.prefill_pool else None,
            "short_prompt_tokens": self.short_prompt_tokens,
            "layout": self.layout.label,
            "block_tokens": self.block_tokens,
            "memory_utilization": self.memory_utilization,
            "kv_blocks": self.kv_blocks,
            "scheduler": {
                "max_num_seqs": self.scheduler.max_num_seqs,
                "max_num_batched_tokens": self.scheduler.max_num_batched_tokens,
                "watermark": self.scheduler.watermark,
                "preemption": self.scheduler.preemption,
                "queue_timeout_s": None if math.isinf(self.scheduler.queue_timeout_s)
                else self.scheduler.queue_timeout_s,
                "admission": self.scheduler.admission,
                "reserve_output_tokens": self.scheduler.reserve_output_tokens,
                "long_prefill_token_threshold": self.scheduler.long_prefill_token_threshold,
            },
            "router": {"name": self.router, **self.router_params},
            "cache": {"name": self.cache, **self.cache_params},
            "retention": {"name": self.retention, **self.retention_params},
            "slo_ttft_s": self.slo_ttft_s,
            "slo_tpot_s": self.slo_tpot_s,
            "fast_forward": self.fast_forward,
            "sample_interval_s": self.sample_interval_s,
        }
