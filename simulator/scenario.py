"""Scenario files: one TOML file -> a validated, frozen `Scenario`.

A scenario names the model, the hardware (one or more node kinds to compare, a node count
and tensor parallelism), the KV layout and cache strategy, the scheduler and router, the
workload (a generator table or a trace path), the SLOs, the price profile and the seed::

    name = "chat-4k-h100"
    seed = 0
    [model]      name = "Llama-3.1-70B"            # or config = "path/to/config.json" (not both)
    [cluster]    hardware = ["8xH100"]  nodes = 1  tp = 8  pp = 1  dp_attention = false  ep = 1
    [cache]      layout = "native"  strategy = "prefix"     # the default, as vLLM and SGLang; "none": off
    [scheduler]  max_num_seqs = 256                 # SchedulerConfig fields
    [router]     name = "least-tokens"
    [workload]   duration_s = 600  rate_scale = 1.0  [workload.spec] name = "chat-4k" ...
    [slo]        ttft_p99_s = 2.0  tpot_p99_s = 0.1
    [billing]    profile = "anthropic"  ttls: every TTL the profile sells
    [report]     capacity = false  collapse = true  breakeven = true
    [disaggregation]  prefill_nodes = 2  decode_nodes = 4  prefill_hardware = ""  prefill_tp = 8
                 short_prompt_tokens = 0  compare_aggregated = true   # optional: xPyD fleets

Every error names the file, the key path, the value and the rule, in one line.
"""

from __future__ import annotations

import math
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields, is_dataclass, replace
from importlib.resources import files
from os import PathLike
from pathlib import Path
from typing import Any

from hardware.catalog import Catalog, NodeSpec, load_catalog
from simulator.capacity import DEFAULT_MEMORY_UTILIZATION, KVBudget, kv_budget
from simulator.config import SET_BY_KVSIM, build, check_types
from simulator.engine.config import SWAP_DRAM_RULE, EngineConfig, PoolConfig, SchedulerConfig, takes_all_dram
from simulator.errors import (
    MAX_MESSAGE_CHARS,
    ConfigError,
    DoesNotFitError,
    FileName,
    RuleError,
    at_key,
    must,
    must_differ,
    shown,
)
from simulator.files import said_at, shown_path
from simulator.kv import check_layout, parse_layout
from simulator.limits import MAX_NODES, check_horizon
from simulator.models import (
    DEFAULT_MODEL,
    WEIGHT_PRECISIONS,
    ModelSpec,
    get_model,
    weight_precision,
    with_weight_precision,
)
from simulator.placement import ParallelPlan, idle_levers, tiles_nodes
from simulator.tomlfile import read_toml
from simulator.units import figure
from workloads import Workload, load_workload
from workloads.load import SCENARIO_DURATION_S, prepare_generator
from workloads.request import Request

SCENARIO_DIR = Path(str(files("scenarios")))  # package data: the same from a checkout and a pip install
DEFAULT_SCENARIO = SCENARIO_DIR / "default.toml"
MAX_COLLAPSE_POINTS = 16  # contexts the report's simulated collapse runs (two simulations each)
MAX_COLLAPSE_CONTEXT = 2**24  # tokens (16M: beyond any model's window; longer points are dropped anyway)


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelSection:
    name: str = DEFAULT_MODEL
    config: str = ""  # path to a Hugging Face config.json, relative to the scenario file
    weight_dtype: str = ""  # bf16, fp8, fp8-block, fp4, mxfp4 or w4a16; "": as the model was released

    def __post_init__(self) -> None:
        check_types(self, "model")
        if self.weight_dtype:
            must(self.weight_dtype in WEIGHT_PRECISIONS, "model", "weight_dtype",
                 f"one of {', '.join(WEIGHT_PRECISIONS)} (or absent: as released)", self.weight_dtype)


DEFAULT_TP = 8
"""``cluster.tp`` when a scenario does not set it: one plan for every node kind it lists (the commands that take
``--hardware`` and no scenario default to a node's own GPUs instead); `default_tp_notes` says where a node holds
another count (``kvsim run`` and ``capacity`` print them)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ClusterSection:
    hardware: tuple[str, ...] = ("8xH100",)  # node kinds to compare, each a separate fleet
    nodes: int = 1
    tp: int = DEFAULT_TP  # GPUs per pipeline stage (the plan: `simulator.placement.ParallelPlan`), every node kind's
    pp: int = 1
    dp_attention: bool = False
    ep: int = 1
    memory_utilization: float = DEFAULT_MEMORY_UTILIZATION
    block_tokens: int = 16
    catalog: str = ""  # extra hardware TOML, relative to the scenario file
    usd_per_gpu_hour: Any = None  # a price for every GPU, or a table GPU = price; None: the catalog's

    def __post_init__(self) -> None:
        check_types(self, "cluster")  # (helper-159: nodes="2" failed in '>=', hardware="8xH100" was read by letter)
        must(len(self.hardware) >= 1, "cluster", "hardware", "a non-empty list", self.hardware)
        must(self.nodes >= 1, "cluster", "nodes", ">= 1", self.nodes)
        must(self.nodes <= MAX_NODES, "cluster", "nodes", f"at most {MAX_NODES:,} (kvsim's fleet limit)", self.nodes)
        must(self.tp >= 1, "cluster", "tp", ">= 1", self.tp)
        must(self.pp >= 1, "cluster", "pp", ">= 1", self.pp)
        must(self.ep >= 1 and self.tp % self.ep == 0, "cluster", "ep", f">= 1 and a divisor of tp={self.tp}", self.ep)
        must(0 < self.memory_utilization <= 1, "cluster", "memory_utilization", "in (0, 1]",
             self.memory_utilization)
        must(self.block_tokens >= 1, "cluster", "block_tokens", ">= 1", self.block_tokens)


@dataclass(frozen=True, slots=True, kw_only=True)
class DisaggregationSection:
    """A disaggregated fleet per hardware kind: ``prefill_nodes`` prefill and ``decode_nodes`` decode
    (the kind itself, under ``[cluster]``'s plan); the prefill pool on ``prefill_hardware`` (default:
    the same kind) under its own plan (``prefill_tp``, ... default ``[cluster]``'s). Prompts of at
    most ``short_prompt_tokens`` prefill on the decode pool. With ``compare_aggregated`` an aggregated
    fleet of the same total nodes (``cluster.nodes``, which must equal the sum) runs beside it."""

    prefill_nodes: int  # required: a default split would run without a word (helper-117)
    decode_nodes: int
    prefill_hardware: str = ""
    prefill_tp: int | None = None
    prefill_pp: int | None = None
    prefill_dp_attention: bool | None = None
    prefill_ep: int | None = None
    short_prompt_tokens: int = 0
    compare_aggregated: bool = True

    def __post_init__(self) -> None:
        w = "disaggregation"
        check_types(self, w)
        for key in ("prefill_nodes", "decode_nodes"):
            n = getattr(self, key)
            must(1 <= n <= MAX_NODES, w, key, f"in 1..{MAX_NODES:,} (kvsim's fleet limit)", n)
        total = self.prefill_nodes + self.decode_nodes
        must(total <= MAX_NODES, w, "prefill_nodes + decode_nodes", f"at most {MAX_NODES:,}", total)
        for key in ("prefill_tp", "prefill_pp", "prefill_ep"):
            v = getattr(self, key)
            must(v is None or v >= 1, w, key, ">= 1 (or absent: [cluster]'s)", v)
        must(self.short_prompt_tokens >= 0, w, "short_prompt_tokens", ">= 0", self.short_prompt_tokens)


# what the API's xPyD calls on a scenario without [disaggregation] split by (`Scenario.disaggregated_config`,
# given the pools' node counts): a scenario file's section names its own
ONE_EACH = DisaggregationSection(prefill_nodes=1, decode_nodes=1)


@dataclass(frozen=True, slots=True, kw_only=True)
class CacheSection:
    layout: str = "native"
    strategy: str = "prefix"
    params: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_types(self, "cache")


@dataclass(frozen=True, slots=True, kw_only=True)
class RouterSection:
    name: str = "least-tokens"
    params: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_types(self, "router")


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkloadSection:
    """A generator table (`spec`) or a trace file (`trace`), and how much of it to run.

    ``duration_s``: seconds of arrivals a generator draws (default 600), or the replay window of a
    trace (default, or ``inf``: the whole trace); at most `simulator.limits.MAX_HORIZON_S`.
    ``start_s`` and ``time_scale`` shift and speed up a trace replay; a generator has neither.
    ``skip_bad_rows``: a trace's malformed rows, and its requests longer than the model's context, are skipped
    and counted (said on stderr and in the report) instead of stopping the run at the first.
    """

    spec: dict[str, Any] = field(default_factory=lambda: {"name": "chat-4k"})  # generator table
    trace: str = ""  # a trace file instead of `spec`, relative to the scenario file
    duration_s: float = SCENARIO_DURATION_S
    rate_scale: float = 1.0
    start_s: float = 0.0
    time_scale: float = 1.0
    skip_bad_rows: bool = False

    def __post_init__(self) -> None:
        check_types(self, "workload")
        if not (self.trace and self.duration_s == math.inf):  # inf: a whole trace
            check_horizon(self.duration_s, "workload")
        must(0 < self.rate_scale < math.inf, "workload", "rate_scale", "finite and > 0", self.rate_scale)
        must(0 < self.time_scale < math.inf, "workload", "time_scale", "finite and > 0", self.time_scale)
        must(0 <= self.start_s < math.inf, "workload", "start_s", "finite and >= 0", self.start_s)
        if not self.trace:
            must(self.start_s == 0, "workload", "start_s", "0 for a generated workload (it shifts a trace replay)",
                 self.start_s)
            must(self.time_scale == 1, "workload", "time_scale",
                 "1 for a generated workload (it speeds up a trace replay; use rate_scale)", self.time_scale)
            must(not self.skip_bad_rows, "workload", "skip_bad_rows",
                 "false for a generated workload (it skips a trace's malformed rows)", self.skip_bad_rows)


@dataclass(frozen=True, slots=True, kw_only=True)
class SLOSection:
    ttft_p99_s: float = 2.0
    tpot_p99_s: float = 0.1

    def __post_init__(self) -> None:
        check_types(self, "slo")
        for key in ("ttft_p99_s", "tpot_p99_s"):
            slo = getattr(self, key)
            must(slo > 0, "slo", key, "> 0", slo)
            # any run meets an infinite SLO, so every fleet would pass (--slo-*-p99-s refuse it too)
            must(slo < math.inf, "slo", key, "a finite number of seconds", slo)


@dataclass(frozen=True, slots=True, kw_only=True)
class BillingSection:
    """The price profile the TTL study bills under, and its TTLs (none given: every TTL the profile sells, as
    `kvsim breakeven` takes them; helper-147: the default ``["5m", "1h"]`` gave a Gemini report a 5m row, and an
    OpenAI one an error naming ``billing.ttls[1]``, a TTL no one wrote)."""

    profile: str = "anthropic"
    tier: str = ""
    ttls: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        check_types(self, "billing")
        must(self.ttls is None or len(self.ttls) >= 1, "billing", "ttls",
             'a non-empty list of cache TTLs, e.g. ["5m", "1h"] (or no key: every TTL the profile sells)',
             None if self.ttls is None else list(self.ttls))

    def chosen_ttls(self, sold: Sequence[str]) -> tuple[str, ...]:
        """The TTLs written, or `sold` (the profile's ``ttl_names``) where the key is absent."""
        return tuple(sold) if self.ttls is None else self.ttls


@dataclass(frozen=True, slots=True, kw_only=True)
class ReportSection:
    """What `kvsim run` adds to the headline: each study costs some simulations."""

    capacity: bool = False  # search the smallest fleet per hardware kind at the SLOs
    collapse: bool = True  # analytic collapse chart with simulated peaks
    collapse_layouts: tuple[str, ...] = ("native", "fp8", "mla", "cross-layer:0.5")
    collapse_points: tuple[int, ...] = (4096, 16384, 65536, 131072)
    breakeven: bool = True  # TTL break-even of the workload under the price profile

    def __post_init__(self) -> None:
        check_types(self, "report")
        n = self.collapse_points
        must(1 <= len(n) <= MAX_COLLAPSE_POINTS, "report", "collapse_points",
             f"1 to {MAX_COLLAPSE_POINTS} contexts (each is two simulations)", list(n))
        for x in n:
            must(1 <= x <= MAX_COLLAPSE_CONTEXT, "report", "collapse_points",
                 f"context lengths in 1..{MAX_COLLAPSE_CONTEXT:,} tokens", x)
        # a context written twice was simulated twice (helper-159), as collapse_layouts refuses a layout twice
        must_differ([str(x) for x in n], [str(x) for x in n], "report.collapse_points", "context")


@dataclass(frozen=True, slots=True, kw_only=True)
class Scenario:
    """A whole study, validated: one section a table of the scenario file (``[model]``, ``[cluster]``,
    ``[cache]``, ``[scheduler]``, ``[router]``, ``[workload]``, ``[slo]``, ``[billing]``, ``[report]``, and
    ``[disaggregation]`` when a prefill pool serves apart), each a frozen config whose unknown keys were refused.
    `run_scenario` simulates it on every node kind of ``cluster.hardware``, from ``seed``; `plan_capacity`
    sizes a fleet for its SLOs. Frozen: vary it with ``dataclasses.replace`` (a section too:
    ``replace(sc, workload=replace(sc.workload, duration_s=120))``). ``path`` is where it was read from
    (relative paths resolve there)."""

    name: str
    description: str = ""
    seed: int = 0
    model: ModelSection = field(default_factory=ModelSection)
    cluster: ClusterSection = field(default_factory=ClusterSection)
    cache: CacheSection = field(default_factory=CacheSection)
    scheduler: SchedulerConfig = field(default_factory=SchedulerConfig)
    router: RouterSection = field(default_factory=RouterSection)
    workload: WorkloadSection = field(default_factory=WorkloadSection)
    slo: SLOSection = field(default_factory=SLOSection)
    billing: BillingSection = field(default_factory=BillingSection)
    report: ReportSection = field(default_factory=ReportSection)
    disaggregation: DisaggregationSection | None = None
    path: str = field(default="", metadata=SET_BY_KVSIM)  # the file read, never a key in it

    def __post_init__(self) -> None:
        check_types(self, "scenario")
        must(self.seed >= 0, "scenario", "seed", ">= 0", self.seed)

    # --- resolution -------------------------------------------------------------------------
    def _resolve(self, rel: str) -> Path:
        p, base = Path(rel), self._base_dir
        return p if p.is_absolute() or base is None else base / p

    @property
    def where(self) -> str:
        return self.path or f"scenario {self.name!r}"

    @property
    def argument(self) -> str:
        """How a command line names this scenario: a shipped one by its name (``disaggregated``, not its path in
        the installed package), any other by its file, or by its name when it has none."""
        if self.path and Path(self.path).parent.resolve() == SCENARIO_DIR.resolve():
            return Path(self.path).stem
        return self.path or self.name

    def model_spec(self) -> ModelSpec:
        """The model as served: the catalog's or the config.json's, in ``[model] weight_dtype``."""
        m = self.model
        path = str(self._resolve(m.config)) if m.config else None
        with said_at("model.config" if m.config else "model.name", path):
            model = get_model(path, path=True) if path else get_model(m.name)
        return with_weight_precision(model, self.model.weight_dtype or None)

    @property
    def affinity_without_cache(self) -> bool:
        """Whether it routes by prefix-affinity with no prefix cache, which routes as least-tokens, draw for draw
        (`AFFINITY_WITHOUT_CACHE`, which `load_scenario` and `kvsim sweep` say)."""
        return self.router.name == "prefix-affinity" and self.cache.strategy == "none"

    def subject(self, *, replayed_s: float | None = None) -> str:
        """What a chart of the scenario's runs is of (helper-158: the capacity and fleet charts named the scenario
        alone): ``default: Llama-3.1-70B (bf16 weights), chat-4k + code-repo-128k, 600 s of arrivals``; a trace by
        its file's name, replayed whole or up to ``duration_s``. `replayed_s`, where a run knows it, is how far a
        replay that its window did not cut reached (its last arrival: `ScenarioRun.subject`), said in place of
        that bound: a 600 s trace replayed 4× as fast spans ``150 s of its replay``, not ``up to 600 s``."""
        w = self.workload
        if w.trace:  # its window: from start_s (helper-164: "its first 600 s" of a replay from 3,600 s)
            cut = math.isfinite(w.duration_s)
            # duration_s counts replay seconds, start_s the trace's (helper-167: "600 s of it" read as trace seconds)
            said = cut or replayed_s is not None  # a window, or how far a replay it did not cut reached
            # how far it reached, as a table's figure (helper-192: a last arrival under 0.5 s read "0 s of its replay")
            span = f"up to {w.duration_s:,g}" if replayed_s is None else figure(replayed_s)
            what = Path(w.trace).name + (
                f", {span} s of replay from the trace's {w.start_s:,g} s" if said and w.start_s else
                f", {span} s of its replay" if said else
                f", from the trace's {w.start_s:,g} s" if w.start_s else "")
            what += f", replayed {w.time_scale:g}× as fast" if w.time_scale != 1 else ""
            what += f" at {w.rate_scale:g}× its rate" if w.rate_scale != 1 else ""
        else:
            parts = w.spec.get("components") if w.spec.get("name") == "mixture" else None
            names = [str(c.get("name", "?")) for c in parts] if isinstance(parts, list) else [str(w.spec.get("name"))]
            arrivals = w.spec.get("arrivals")
            count = arrivals.get("count") if isinstance(arrivals, Mapping) and arrivals.get("kind") == "offline" \
                else None
            # offline arrivals: a count at t = 0, not a duration (helper-164: "1 s of arrivals" of 3,000 requests)
            what = " + ".join(names) + (  # a rate scale multiplies an offline count (helper-170)
                f", {max(1, round(count * w.rate_scale)):,} requests at t = 0" if isinstance(count, int)
                else f", {w.duration_s:g} s of arrivals" + (f" at {w.rate_scale:g}× its rate" if w.rate_scale != 1
                                                             else ""))
        model = self.model_spec()
        return f"{self.name}: {model.key} ({weight_precision(model)} weights), {what}"

    def hardware_catalog(self) -> Catalog:
        """The catalog the scenario names its nodes from: the shipped one, extended by `cluster.catalog`, priced
        by `cluster.usd_per_gpu_hour`."""
        path = self._resolve(self.cluster.catalog) if self.cluster.catalog else None
        with said_at("cluster.catalog", path):
            catalog = load_catalog(path)
        return catalog.priced(self.cluster.usd_per_gpu_hour, "cluster.usd_per_gpu_hour")

    @property
    def plan(self) -> ParallelPlan:
        """The replicas' parallelism plan (``[cluster] tp, pp, dp_attention, ep``)."""
        c = self.cluster
        return ParallelPlan(tp=c.tp, pp=c.pp, dp_attention=c.dp_attention, ep=c.ep)

    @property
    def prefill_plan(self) -> ParallelPlan:
        """The prefill pool's plan: ``[disaggregation] prefill_*``, each defaulting to ``[cluster]``'s."""
        d, c = self.disaggregation or ONE_EACH, self.cluster
        return ParallelPlan(tp=c.tp if d.prefill_tp is None else d.prefill_tp,
                            pp=c.pp if d.prefill_pp is None else d.prefill_pp,
                            dp_attention=c.dp_attention if d.prefill_dp_attention is None else d.prefill_dp_attention,
                            ep=c.ep if d.prefill_ep is None else d.prefill_ep)

    def fleets(self, hardware: str) -> list[tuple[str, EngineConfig]]:
        """The fleets `kvsim run` simulates for one kind: ``(label, config)``; the aggregated one is
        labelled by the kind, a disaggregated one ``"<kind>-<x>P<y>D"`` (a folder name too)."""
        d = self.disaggregation
        if d is None:
            return [(hardware, self.engine_config(hardware))]
        split = (self.fleet_label(hardware), self.disaggregated_config(hardware))
        return [(hardware, self.engine_config(hardware)), split] if d.compare_aggregated else [split]

    def fleet_label(self, hardware: str, prefill_nodes: int | None = None, decode_nodes: int | None = None) -> str:
        d = self.disaggregation or ONE_EACH
        x = d.prefill_nodes if prefill_nodes is None else prefill_nodes
        y = d.decode_nodes if decode_nodes is None else decode_nodes
        on = f"-P{d.prefill_hardware}" if d.prefill_hardware and d.prefill_hardware != hardware else ""
        return f"{hardware}-{x}P{y}D{on}"

    def disaggregated_config(self, hardware: str | NodeSpec, prefill_nodes: int | None = None,
                             decode_nodes: int | None = None) -> EngineConfig:
        """The disaggregated fleet on `hardware`: ``decode_nodes`` of it decode under ``[cluster]``'s plan,
        ``prefill_nodes`` of ``prefill_hardware`` (default: `hardware`) prefill under `prefill_plan`."""
        d = self.disaggregation or ONE_EACH
        catalog = self.hardware_catalog()
        node = hardware if isinstance(hardware, NodeSpec) else catalog.node(hardware)
        with said_at("disaggregation.prefill_hardware"):
            p_node = catalog.node(d.prefill_hardware) if d.prefill_hardware else node
        plan = self.prefill_plan
        pool = PoolConfig(node=p_node, n_nodes=d.prefill_nodes if prefill_nodes is None else prefill_nodes,
                          tp=plan.tp, pp=plan.pp, dp_attention=plan.dp_attention, ep=plan.ep)
        return replace(self.engine_config(node, d.decode_nodes if decode_nodes is None else decode_nodes),
                       prefill_pool=pool, short_prompt_tokens=d.short_prompt_tokens)

    def nodes(self, hardware: Sequence[str] | None = None) -> list[NodeSpec]:
        """The node kinds of ``cluster.hardware``, from the catalog (plus ``cluster.catalog``); or those
        `hardware` names (an option that replaces it: its caller names it in an error)."""
        catalog = self.hardware_catalog()
        if hardware is not None:
            return [catalog.node(h) for h in hardware]
        with said_at("cluster.hardware"):
            return [catalog.node(h) for h in self.cluster.hardware]

    def priced_nodes(self) -> list[NodeSpec]:
        """Every node kind the scenario's fleets run on, each once: `nodes` and ``[disaggregation]
        prefill_hardware`` (what a price note names: each GPU priced)."""
        d, nodes = self.disaggregation, self.nodes()
        with said_at("disaggregation.prefill_hardware"):
            extra = [self.hardware_catalog().node(d.prefill_hardware)] if d is not None and d.prefill_hardware else []
        return list({n.key: n for n in [*nodes, *extra]}.values())

    def unused_prices(self) -> list[str]:
        """The GPUs ``cluster.usd_per_gpu_hour`` prices by name that no fleet of the scenario runs on (a price for
        B200 beside an 8xH100-only fleet: a mistake worth a word, not an error; `priced_nodes`)."""
        prices = self.cluster.usd_per_gpu_hour
        if not isinstance(prices, Mapping):
            return []
        used = {n.gpu.key.lower() for n in self.priced_nodes()}
        return [gpu for gpu in prices if str(gpu).lower() not in used]

    def engine_config(self, hardware: str | NodeSpec | None = None, n_nodes: int | None = None) -> EngineConfig:
        """The engine configuration for one node kind (the scenario's first by default)."""
        if isinstance(hardware, NodeSpec):
            node = hardware
        else:
            node = self.hardware_catalog().node(hardware or self.cluster.hardware[0])
        return EngineConfig(
            model=self.model_spec(), node=node, n_nodes=n_nodes or self.cluster.nodes, tp=self.cluster.tp,
            pp=self.cluster.pp, dp_attention=self.cluster.dp_attention, ep=self.cluster.ep,
            layout=parse_layout(self.cache.layout), block_tokens=self.cluster.block_tokens,
            memory_utilization=self.cluster.memory_utilization, scheduler=self.scheduler,
            router=self.router.name, router_params=self.router.params, cache=self.cache.strategy,
            cache_params=self.cache.params, slo_ttft_s=self.slo.ttft_p99_s, slo_tpot_s=self.slo.tpot_p99_s,
        )

    @property
    def _base_dir(self) -> Path | None:
        """The folder a relative path in the spec (a synthetic length's ``csv``) is read from: the
        scenario file's, both where the spec is checked and where it is drawn."""
        return Path(self.path).parent if self.path else None

    def load_workload(self, seed: int | None = None, rate_scale: float = 1.0, *,
                      allow_empty: bool = False) -> Workload:
        """The scenario's workload (generated with `seed`, default the scenario's), at `rate_scale`
        times its rate; one with no request is an error saying why unless `allow_empty` (a search's
        trial at a thinned rate: `workloads.load.load_workload`)."""
        w = self.workload
        spec: Any = str(self._resolve(w.trace)) if w.trace else dict(w.spec)
        if w.trace and not Path(spec).is_file():  # a trace key names a file: no generator names to suggest
            said = (f"'{shown_path(spec)}' is a folder, not a trace file" if Path(spec).is_dir()  # (helper-162)
                    else f"no such file '{shown_path(spec)}'")
            raise ConfigError(f"{self.where}: workload.trace: {said} (a path relative to the scenario's folder)")
        try:
            loaded = load_workload(spec, seed=self.seed if seed is None else seed,
                                   duration_s=None if w.duration_s == math.inf else w.duration_s,
                                   rate_scale=w.rate_scale * rate_scale, start_s=w.start_s, time_scale=w.time_scale,
                                   allow_empty=allow_empty, table="workload.spec", base_dir=self._base_dir,
                                   on_error="skip" if w.skip_bad_rows else "stop")
        except ConfigError as exc:  # named at its key (workload.spec.x) or, if not, under [workload]
            raise ConfigError(f"{self.where}: {_under_workload(exc)}") from None
        if not w.skip_bad_rows:
            return loaded
        # a trace's requests longer than the model's context are skipped rows too (`check_context`)
        model = self.model_spec()
        kept = loaded.within(model.max_context_tokens)
        if not allow_empty and kept.first() is None:  # (`load_workload` found a request: every one was too long)
            # (helper-181: the run simulated no request, and its report stopped on a traceback, NaN to int)
            skipped = kept.skipped_rows or 0
            raise ConfigError(f"{self.where}: workload.skip_bad_rows: every request of {loaded.name} in the replay "
                              f"window is longer than {model.key}'s context of {model.max_context_tokens:,} tokens, "
                              f"so none is left to replay ({skipped:,} trace row{'s' * (skipped != 1)} skipped); "
                              "serve a model with a longer context or replay another window (start_s, duration_s)")
        return kept

    def _check_block(self, node: NodeSpec, model: ModelSpec, budget: Any) -> None:
        """One KV block of ``cluster.block_tokens`` fits the pool, as the engine will size it."""
        from simulator.capacity import blocks_per_group
        from simulator.engine.geometry import block_geometry

        layout = parse_layout(self.cache.layout)
        geo = block_geometry(model, layout, self.cluster.block_tokens)
        if blocks_per_group(budget, model, layout, geo.block_bytes) // self.plan.pp < 1:
            raise ConfigError(f"{self.where}: cluster.block_tokens must be small enough for the KV pool of {node.key} "
                              f"{self.plan.label} to hold one block (got {self.cluster.block_tokens:,} tokens, "
                              f"{geo.block_bytes / 1e9:,.3g} GB a block)")

    def _check_dram_tier(self, model: ModelSpec) -> None:
        """A DRAM tier (``cache.params.dram``) holds a KV block in every pool's replicas, as the engine sizes it
        (`cluster.check_dram_tier`): a ``dram_fraction`` too small for one is refused naming the smallest that
        holds one, not run as if there were no tier."""
        if not self.cache.params.get("dram"):
            return
        from simulator.engine.cluster import check_dram_tier, engines_per_node
        from simulator.engine.geometry import block_geometry

        block_bytes = block_geometry(model, parse_layout(self.cache.layout), self.cluster.block_tokens).block_bytes
        pools = [(node, self.plan) for node in self.nodes()]
        d = self.disaggregation
        if d is not None:
            prefill = [self.hardware_catalog().node(d.prefill_hardware)] if d.prefill_hardware else self.nodes()
            pools += [(node, self.prefill_plan) for node in prefill]
        for node, plan in pools:
            budget = kv_budget(node, model, memory_utilization=self.cluster.memory_utilization, plan=plan)
            check_dram_tier(self.cache.params, node, engines_per_node(budget, plan), block_bytes,
                            f"{self.where}: cache.params")

    def _check_plugins(self) -> None:
        """The cache strategy and router as the run will make them: a bad parameter
        (``cache.params.dram = "yes"``) fails here, naming its key, not after the simulation."""
        from simulator.engine.caches import STRATEGIES
        from simulator.engine.routers import ROUTERS

        STRATEGIES.build(self.cache.strategy, self.cache.params, "cache", "cache.params", key="strategy")
        if self.scheduler.preemption == "swap" and takes_all_dram(self.cache.params):  # (`EngineConfig`'s rule)
            raise ConfigError(f"{self.where}: cache.params.dram_fraction: must be {SWAP_DRAM_RULE} "
                              f"(got {shown(self.cache.params['dram_fraction'])})")
        ROUTERS.build(self.router.name, self.router.params, "router", "router.params")

    def _check_layouts(self, model: ModelSpec) -> None:
        """``cache.layout`` (and the collapse chart's layouts, each once, and its points:
        `_check_collapse_points`) parse and suit the model, each error naming its key; before anything
        sizes a KV block with them."""
        layouts = [("cache.layout", self.cache.layout)]
        layouts += [("report.collapse_layouts", x) for x in self.report.collapse_layouts]  # parsed even when off
        labels = []
        for i, (key, text) in enumerate(layouts):
            try:
                layout = parse_layout(text)
                if i == 0 or self.report.collapse:  # suits the model where it will be used
                    check_layout(model, layout)
            except ConfigError as exc:
                raise ConfigError(f"{key}: {exc}") from None
            labels.append(layout.label)
        if self.report.collapse:
            must_differ(self.report.collapse_layouts, labels[1:], "report.collapse_layouts", "KV layout")
            self._check_collapse_points(model)

    def _check_collapse_points(self, model: ModelSpec) -> None:
        """The collapse study simulates the points within the model's context window (it drops the
        others): at least one must be."""
        points = self.report.collapse_points
        if not any(n <= model.max_context_tokens for n in points):
            raise ConfigError(f"report.collapse_points: must hold a context within {model.key}'s window of "
                              f"{model.max_context_tokens:,} tokens (got {shown(list(points))})")

    def _check_workload(self) -> None:
        """The workload within kvsim's limits before anything is drawn: a generator's expected
        requests, a trace's file and format and a first request in its window (a trace's rows are
        checked as they stream)."""
        w = self.workload
        if w.trace:
            self.load_workload()  # finds the file and its format, reads up to its first request (none: an error)
            return
        try:
            prepare_generator(dict(w.spec), duration_s=w.duration_s, rate_scale=w.rate_scale, table="workload.spec",
                              base_dir=self._base_dir)
        except ConfigError as exc:
            raise ConfigError(_under_workload(exc)) from None

    def validate(self) -> None:
        """Cross-field rules: a replica of tp × pp GPUs divides a node or spans whole nodes (and the
        fleet is whole replicas), the plan suits the model, and the model fits every node kind."""
        model = self.model_spec()
        self._check_layouts(model)
        nodes = self.nodes()
        must_differ(self.cluster.hardware, [n.key for n in nodes], f"{self.where}: cluster.hardware", "node kind")
        for node in nodes:
            what = "cluster.tp" if self.cluster.pp == 1 else "cluster.tp × cluster.pp"
            budget = self._pool_budget(node, model, self.plan, self.cluster.nodes, what, "cluster.nodes")
            self._check_block(node, model, budget)
        if self.disaggregation is not None:
            self._check_disaggregation(model)
        self._check_plugins()
        from simulator.engine.cluster import check_tiers

        for node in self.priced_nodes():  # every node kind a fleet runs on, a split fleet's prefill pool's too
            check_tiers(self.cache.params, node, self.where)
        self._check_dram_tier(model)
        self._check_workload()
        self._check_billing()

    def _check_billing(self) -> None:
        """``[billing]``'s profile, tier and TTLs exist, each error naming its key: a typo fails now,
        not after the simulation, and fails whether or not the report runs the break-even study."""
        from simulator.billing import get_profile, parse_ttl

        b = self.billing
        for key, tier in (("billing.profile", None), ("billing.tier", b.tier or None)):
            try:
                profile = get_profile(b.profile, tier)
            except ConfigError as exc:
                raise ConfigError(f"{key}: {exc}") from None
        seconds = []
        ttls = b.chosen_ttls(profile.ttl_names)
        for i, ttl in enumerate(ttls):
            try:
                seconds.append(parse_ttl(ttl))
                # no cache is the study's baseline row already (helper-178: under a profile whose TTL is settable,
                # "none" passed here and the run failed after its simulation, in compare_ttls, naming no key)
                must(seconds[-1] > 0, "billing", "ttls", "TTLs > 0 (no cache, 'none', is the study's baseline "
                     "already)", ttl)
                profile.write_multiplier(seconds[-1])
            except RuleError as exc:
                raise ConfigError(exc.at(f"billing.ttls[{i}]", got=ttl)) from None
        # (one row a TTL: a second would be dropped, silently)
        must_differ([str(t) for t in ttls], [f"{t:g} s" for t in seconds], "billing.ttls", "TTL")

    def _plan_key(self, part: str, pool: str) -> str:
        """The scenario key that set `part` (tp, pp, ep, dp_attention) of the `pool`'s plan ("decode": the
        [cluster] plan; "prefill": [disaggregation]'s prefill_<part>, or [cluster]'s when it is left out)."""
        d = self.disaggregation
        if pool != "prefill" or d is None:
            return f"cluster.{part}"
        if getattr(d, f"prefill_{part}", None) is not None:
            return f"disaggregation.prefill_{part}"
        own = [f for f in ("tp", "pp", "dp_attention", "ep") if getattr(d, f"prefill_{f}") is not None]
        # the prefill plan takes this part from [cluster] but another from its own keys: both had a say
        return f"disaggregation.prefill_{part} (cluster.{part}, which it follows)" if own else f"cluster.{part}"

    def _pool_budget(self, node: NodeSpec, model: ModelSpec, plan: ParallelPlan, nodes: int, plan_keys: str,
                     nodes_key: str, context: str = "", pool: str = "decode") -> KVBudget:
        """The KV budget of `plan` on `node` for a pool of `nodes` nodes, with the rules a pool meets
        (its replicas tile the nodes, the weights fit, the pool is whole replicas) as one-line errors
        naming the scenario's keys (`plan_keys`, also before a plan the model cannot take, `nodes_key`);
        `context` prefixes a weights error."""
        if not tiles_nodes(node.gpus, plan.gpus):
            raise ConfigError(f"{self.where}: {plan_keys} must divide the {node.gpus} GPUs of {node.key} or be a "
                              f"multiple of them (got {plan.gpus})")
        try:
            budget = kv_budget(node, model, memory_utilization=self.cluster.memory_utilization, plan=plan)
        except DoesNotFitError as exc:
            raise ConfigError(f"{self.where}: {context}{exc}") from None
        except RuleError as exc:  # the plan does not suit the model (check_plan): at the key that set the part
            raise ConfigError(f"{self.where}: {exc.at(self._plan_key(exc.key, pool))}") from None
        except ConfigError as exc:
            raise ConfigError(f"{self.where}: {plan_keys}: {exc}") from None
        if nodes % budget.nodes:
            unset = f"; {DEFAULT_TP} by default" if plan_keys.startswith("cluster.tp") else ""
            raise ConfigError(f"{self.where}: {nodes_key} must be a multiple of the {budget.nodes} {node.key} nodes "
                              f"one {plan.label} replica spans ({plan_keys}{unset}) (got {nodes})")
        return budget

    def _check_disaggregation(self, model: ModelSpec) -> None:
        """Admission on the prompt (``reserve`` is not modelled in a disaggregated fleet); the prefill
        pool's plan suits the model and fits its node kind in whole replicas; the decode pool is whole
        replicas of ``[cluster]``'s plan; both node kinds have NICs to move the KV; an aggregated fleet
        compared has the same nodes."""
        d = self.disaggregation
        assert d is not None
        catalog = self.hardware_catalog()
        if self.scheduler.admission != "prompt":  # the engine's rule (`EngineConfig`), named by the file's keys
            raise ConfigError(f"{self.where}: scheduler.admission must be \"prompt\" with [disaggregation] (a decode "
                              "replica takes its KV from the link, so nothing is reserved at admission; reserve is "
                              f"not modelled there) (got {shown(self.scheduler.admission)})")
        total = d.prefill_nodes + d.decode_nodes
        if d.compare_aggregated and self.cluster.nodes != total:
            raise ConfigError(f"{self.where}: cluster.nodes must equal disaggregation.prefill_nodes + decode_nodes = "
                              f"{total} when compare_aggregated is true (the fleets compared have the same nodes) "
                              f"(got {self.cluster.nodes})")
        try:
            plan = self.prefill_plan
        except RuleError as exc:  # at the key that set the part (prefill_ep, or cluster.ep it follows)
            raise ConfigError(f"{self.where}: {exc.at(self._plan_key(exc.key, 'prefill'))}") from None
        except ConfigError as exc:
            raise ConfigError(f"{self.where}: disaggregation: {exc}") from None
        with said_at("disaggregation.prefill_hardware"):
            p_nodes = [catalog.node(d.prefill_hardware)] if d.prefill_hardware else self.nodes()
        for node in p_nodes:
            self._pool_budget(node, model, plan, d.prefill_nodes, "disaggregation.prefill_tp × prefill_pp",
                              "disaggregation.prefill_nodes", "disaggregation: ", pool="prefill")
        for node in self.nodes():
            self._pool_budget(node, model, self.plan, d.decode_nodes, "cluster.tp", "disaggregation.decode_nodes")
        for node in [*p_nodes, *self.nodes()]:
            if not node.nic_bytes_per_s > 0:
                raise ConfigError(f"{self.where}: disaggregation needs a scale-out NIC on {node.key} to move KV "
                                  f"between pools: its catalog entry's nic_bytes_per_s must be > 0 (got "
                                  f"{node.nic_bytes_per_s:g}; 0 where the entry leaves it out)")

    def check_context(self, workload: Workload) -> int:
        """Rule: every request's prompt + output fits the model's context window. Returns how many
        requests the workload holds (counted in the same pass: a trace is read once, not held)."""
        model = self.model_spec()
        limit = model.max_context_tokens
        longest = n = over = 0
        first: Request | None = None  # the first request over the context: said, so that it can be found
        for r in workload:
            n += 1
            tokens = r.prompt_tokens + r.output_tokens
            if tokens > limit:
                over += 1
                first = first or r
            if tokens > longest:
                longest = tokens
        if first is not None:
            of = f" of {Path(self.workload.trace).name}" if self.workload.trace else ""  # (the line keeps its "(got")
            skip = (" ([workload] skip_bad_rows = true skips them)"
                    if self.workload.trace else "")  # (helper-179: a trace's few long rows had no way past them)
            raise ConfigError(
                f"{self.where}: workload requests must fit {model.key}'s context of {limit:,} tokens{skip} (got "
                f"{over:,} over it, the first request {first.id}{of} at {first.arrival_s:,.3f} s: "
                f"{first.prompt_tokens + first.output_tokens:,} prompt + output tokens; the longest {longest:,})")
        return n


def _under_workload(exc: ConfigError) -> str:
    """`exc`'s message, said under ``[workload]`` unless it names its key there (``workload.spec.n_teams``)."""
    msg = str(exc)
    return msg if msg.startswith(("workload.spec", "workload.trace")) else f"[workload] {msg}"


def _sections() -> dict[str, tuple[str, ...]]:
    """The keys of each table of a scenario file, ``""`` the file's own (``name``, ``description``, ``seed``)."""
    hints = typing.get_type_hints(Scenario)
    own: list[str] = []
    tables: dict[str, tuple[str, ...]] = {}
    for f in fields(Scenario):
        if f.metadata.get("set_by_kvsim"):
            continue
        cls = next((t for t in typing.get_args(hints[f.name]) or (hints[f.name],) if is_dataclass(t)), None)
        if cls is None:
            own.append(f.name)
        else:
            tables[f.name] = tuple(g.name for g in fields(cls))
    return {"": tuple(own), **tables}


def _misplaced(data: Mapping[str, Any], where: str) -> None:
    """Refuse a key written in the wrong table, naming the one that takes it: ``max_num_seqs`` under
    ``[workload]``, ``seed`` after a table's header (TOML puts it in that table), ``nodes`` before any
    table (helper-201: "unknown key; valid: ..." listed the table's keys, not where the key belongs)."""
    sections = _sections()
    for table, keys in sections.items():
        t = data if table == "" else data.get(table)
        if not isinstance(t, Mapping):
            continue
        for key, value in t.items():
            if key in keys or (table == "" and key in sections):
                continue
            if table == "workload" and key == "name":  # a generator table, as `kvsim workload describe` reads one
                raise ConfigError(f"{at_key(where, 'workload.name')}: not a [workload] key; a generator's name and "
                                  f"parameters go in [workload.spec] (got {shown(value)})")
            homes = [h for h, hk in sections.items() if h != table and key in hk]
            if not homes:
                continue  # misspelt: `build` lists the valid keys
            parts = ["a top-level key (write it before the first [table])"] if "" in homes else []
            if tables := [f"[{h}]" for h in homes if h]:
                parts.append(f"a {' or '.join(tables)} key")
            path, here = (key, "a top-level key") if table == "" else (f"{table}.{key}", f"a [{table}] key")
            raise ConfigError(f"{at_key(where, str(path))}: not {here}; {key} is {' or '.join(parts)} "
                              f"(got {shown(value)})")


def parse_scenario(data: Mapping[str, Any], where: str) -> Scenario:
    """A `Scenario` from a parsed table; `where` (the file) prefixes every error.

    A ``[workload]`` with a ``trace`` and no ``duration_s`` replays the whole trace.
    """
    m = data.get("model")
    if isinstance(m, Mapping) and "name" in m and m.get("config", "") != "":  # two models: neither may silently win
        # (config = "", its default, is no model: a copy of the documented defaults names one)
        raise ConfigError(f"{where}: model.name and model.config are two models; give one (got name = "
                          f"{shown(m['name'])} and config = {shown(m['config'])})")
    w = data.get("workload")
    if isinstance(w, Mapping) and w.get("trace", "") != "" and "spec" in w:  # two workloads (trace = "": none)
        raise ConfigError(f"{where}: workload.trace and [workload.spec] are two workloads; give one (got trace = "
                          f"{shown(w['trace'])} and a [workload.spec] table)")
    if isinstance(w, Mapping) and w.get("trace") and "duration_s" not in w:
        data = {**data, "workload": {**w, "duration_s": math.inf}}
    _misplaced(data, where)
    try:
        scenario = replace(build(Scenario, data, where), path=where)
    except ConfigError as exc:
        msg = str(exc)
        raise ConfigError(msg if msg.startswith(where) else f"{where}: {msg}") from None
    try:
        scenario.validate()
    except ConfigError as exc:
        msg = str(exc)
        raise ConfigError(msg if msg.startswith(where) else f"{where}: {msg}") from None
    return scenario


AFFINITY_WITHOUT_CACHE = ("router prefix-affinity beside cache.strategy = \"none\": no prefix is cached, so it routes "
                          "as least-tokens")


def _unused_nodes_note(data: Mapping[str, Any], scenario: Scenario) -> str:
    """What a file's ``cluster.nodes`` beside ``[disaggregation] compare_aggregated = false`` sizes, where it is not
    the xPyD fleet's nodes: the aggregated fleet `kvsim compare` and the capacity searches run, not `kvsim run`'s,
    which runs the xPyD fleet alone (helper-159: ``nodes = 5`` beside a 1P1D fleet said nothing of it). Read from
    the file's own table, where a key left out is told from one written. "" where there is nothing to say."""
    d, c = scenario.disaggregation, data.get("cluster")
    if d is None or d.compare_aggregated or not isinstance(c, Mapping) or "nodes" not in c:
        return ""
    total = d.prefill_nodes + d.decode_nodes
    if scenario.cluster.nodes == total:
        return ""
    return (f"cluster.nodes = {scenario.cluster.nodes} sizes the aggregated fleet kvsim compare and the capacity "
            f"searches run; with compare_aggregated = false kvsim run runs the {d.prefill_nodes}P{d.decode_nodes}D "
            f"fleet alone ({total} nodes)")


def layout_notes(scenario: Scenario) -> list[str]:
    """Where ``cache.layout`` names a lever that changes nothing on the scenario's model, a note a line, as ``kvsim
    calc --layout`` and ``kvsim compare`` say it: an attention lever that is the model's own
    (``mla`` on DeepSeek-V3), ``no-sliding`` on a model without sliding-window layers (Llama-3.1-8B):
    `simulator.placement.idle_levers`; helper-189: ``kvsim run`` said nothing of either."""
    text = scenario.cache.layout
    model, layout = scenario.model_spec(), parse_layout(text)
    return [f"cache.layout = {shown(text)}: {idle}" for idle in idle_levers(model, layout)]


def _not_found(path: Path) -> str:
    """What follows the path when `path` is no file: a shipped scenario's file named by a path that is
    not there (``scenarios/default.toml`` outside a checkout) runs by its name; otherwise the shipped
    names, as many as fit one error line (`MAX_MESSAGE_CHARS`), then how many more and where they are."""
    shipped = sorted(x.stem for x in SCENARIO_DIR.glob("*.toml"))
    if path.stem in shipped:
        return (f"scenario file not found; the shipped scenario {path.stem!r} runs by its name "
                f"(e.g. kvsim run {path.stem})")
    room = MAX_MESSAGE_CHARS - len(f"{shown_path(path)}: ")
    for k in range(len(shipped), -1, -1):
        more = [f"and {len(shipped) - k} more in the README's Scenarios table"] if k < len(shipped) else []
        text = f"scenario file not found (shipped: {', '.join(shipped[:k] + more)})"
        if len(text) <= room:
            break
    return text


def load_scenario(path: str | Path | None = None, *, trace: str | Path | None = None,
                  say: Callable[[str], None] | None = None, **overrides: Any) -> Scenario:
    """Read and validate a scenario: `path` is a TOML file or a shipped scenario's name
    (``"chat-4k-h100"``); None is ``scenarios/default.toml``, an empty path is an error.

    `trace` replays that file instead of the scenario's workload (``kvsim run --trace``): the whole
    trace unless the scenario's ``[workload]`` sets ``duration_s``; validated with the rest. Replacing
    a trace, it keeps the scenario's ``rate_scale``, ``start_s`` and ``time_scale`` (the same replay of
    another trace); replacing a generator, it drops its ``rate_scale``, a multiple of the generator's own
    rate that means nothing for a trace, which then replays at its own rate (still checked). `say`, when given,
    is told of either in one line (``kvsim run`` prints it as a note).
    `overrides` replace whole `Scenario` fields by name (`override_names`: ``seed=3``,
    ``cluster=replace(s.cluster, nodes=2)``; a dotted key such as ``cluster.nodes`` is no name), ``seed``
    an integer >= 0; the result is validated as the file is.
    """
    # a file's path or a name (helper-159: 5 failed in Path() as a TypeError)
    for key, value in (("path", path), ("trace", trace)):
        must(value is None or isinstance(value, str | PathLike), "load_scenario", key,
             "a file's path (a str or Path)" if key == "trace" else
             "a scenario file or a shipped scenario's name (None: the default)", value)
    must(path is None or str(path).strip() != "", "load_scenario", "path",
         "a scenario file or a shipped scenario's name (None: the default)", path)
    _check_overrides(overrides)
    p = Path(path) if path is not None else DEFAULT_SCENARIO
    if not p.is_file() and p.suffix != ".toml" and (SCENARIO_DIR / f"{p}.toml").is_file():
        p = SCENARIO_DIR / f"{p}.toml"  # a shipped scenario by name
    data = read_toml(p, missing=_not_found(p))
    if trace is not None:
        must(Path(trace).is_file(), "load_scenario", "trace", "an existing trace file", shown_path(trace))
        if Path(trace).suffix.lower() == ".toml":  # a generator's spec, which load_workload would generate
            raise ConfigError(f"--trace: must be a trace file (CSV or JSONL: kvsim's own, Azure, BurstGPT, Mooncake; "
                              f"kvsim workload describe reads it), not a TOML workload spec; put a generated "
                              f"workload in the scenario's [workload] table (got {shown_path(trace)})")
        table = data.get("workload")
        old: dict[str, Any] = table if isinstance(table, dict) else {}
        w = {k: v for k, v in old.items() if k not in ("spec", "trace")}  # the trace replaces the file's workload
        named = f"--trace {Path(trace).name}"
        if "trace" not in old and "rate_scale" in w:  # a generator's: a multiple of its own rate
            # dropped, but checked as the file is without --trace
            build(WorkloadSection, old, at_key(str(p), "workload"))
            scale = w.pop("rate_scale")
            if say is not None and scale != 1:
                say(f"{named} replaces {p.name}'s generated workload and its workload.rate_scale = {shown(scale)} "
                    "(a multiple of the generator's rate) with it: the trace replays at its own rate")
        kept = [f"{k} = {shown(w[k])}" for k in ("rate_scale", "start_s", "time_scale")
                if k in w and w[k] != (0 if k == "start_s" else 1)]
        if say is not None and kept:
            say(f"{named} replays under {p.name}'s workload keys {', '.join(kept)}")
        data = {**data, "workload": {**w, "trace": str(Path(trace).resolve())}}
    scenario = parse_scenario(data, FileName(p))  # named as a file in errors, with or without .toml
    if say is not None and (unused := _unused_nodes_note(data, scenario)):
        say(unused)
    if say is not None and scenario.affinity_without_cache:
        say(AFFINITY_WITHOUT_CACHE)  # (helper-169: byte for byte least-tokens' run, without a word)
    if overrides:
        scenario = replace(scenario, **overrides)
        try:
            scenario.validate()
        except ConfigError as exc:
            msg = str(exc)
            raise ConfigError(msg if msg.startswith(scenario.where) else f"{scenario.where}: {msg}") from None
    if say is not None:  # a layout lever that changes nothing on the model that runs, overrides applied (helper-189;
        for line in layout_notes(scenario):  # helper-192: before them, a model= override was noted as the file's)
            say(line)
    return scenario


def default_tp_notes(scenario: Scenario) -> list[str]:
    """Where a scenario file that does not set ``cluster.tp`` (so `DEFAULT_TP` on every kind) runs a replica
    over another count of GPUs than a node of a kind it lists holds (its kinds as the command has them:
    ``kvsim capacity --hardware`` replaces them): one line a kind, ``s.toml: cluster.tp is not set, so 8 on every
    node kind: on 4xH100 (4 GPUs) a TP8 replica spans 2 nodes; set cluster.tp to choose``. None for a scenario
    made in Python (no file) or one that sets it."""
    path = Path(scenario.path)
    if not scenario.path or not path.is_file():
        return []
    cluster = read_toml(path).get("cluster")
    if isinstance(cluster, dict) and "tp" in cluster:
        return []
    plan, notes = scenario.plan, []
    for node in scenario.nodes():
        if node.gpus == plan.gpus:
            continue
        where = (f"a {plan.label} replica spans {-(-plan.gpus // node.gpus)} nodes" if plan.gpus > node.gpus
                 else f"{node.gpus // plan.gpus} {plan.label} replicas share a node")
        gpus = f"{node.gpus} GPU{'' if node.gpus == 1 else 's'}"
        notes.append(f"{path.name}: cluster.tp is not set, so {DEFAULT_TP} on every node kind: on {node.key} ({gpus}) "
                     f"{where}; set cluster.tp to choose")
    return notes


def override_names() -> list[str]:
    """The `Scenario` fields `load_scenario` overrides by name: every one but those kvsim sets itself."""
    return [f.name for f in fields(Scenario) if not f.metadata.get("set_by_kvsim")]


def _check_overrides(overrides: Mapping[str, Any]) -> None:
    """Refuse an override that names no field (a dotted key among them) and a seed that is no integer >= 0."""
    valid = override_names()
    for key in overrides:
        if key not in valid:
            raise ConfigError(f"load_scenario: unknown override {shown(key)}; valid: {', '.join(valid)} "
                              "(whole fields, e.g. cluster=replace(s.cluster, nodes=2))")
    hints = typing.get_type_hints(Scenario)
    for key, value in overrides.items():  # a field's own type (helper-152: cluster=5 failed deep inside)
        kinds = tuple(t for t in (typing.get_args(hints[key]) or (hints[key],)) if t is not type(None))
        if key == "seed" or (value is None and len(kinds) < len(typing.get_args(hints[key]))):
            continue
        must(isinstance(value, kinds), "load_scenario", key, f"a {kinds[0].__name__}" + (
            f", e.g. replace(scenario.{key}, ...)" if kinds[0] is not str else ""), value)
    if "seed" in overrides:
        from simulator.engine.result import must_seed  # the engine's rule; it needs pandas

        must_seed(overrides["seed"], "load_scenario")
