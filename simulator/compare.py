"""Strategy sets side by side: the same requests (same seed) under each, one row per set.

A strategy set is a ``+``-joined spec of levers from the three families::

    layout     native, fp8 (or bf16, int8, int4, fp4), mla[:rank], cross-layer[:fraction],
               compress[:ratio[:recent]], mha, mqa, gqa:N, no-sliding
    retention  streaming-llm[:window], h2o[:budget], snapkv[:budget]
               (a budget below 1 is a fraction of the prompt, else tokens)
    reuse      prefix, dram, nvme (tiers under the prefix cache), lru, lfu, fifo (its eviction), each
               without an argument (``prefix:3`` is an error); a tier or an eviction needs ``prefix`` in
               the set (``dram`` alone is an error)

e.g. ``native``, ``fp8``, ``prefix+dram``, ``prefix+fp8``, ``streaming-llm:4096``. Each lever
appears once, and at most one of a family (a KV dtype, a retention policy, an eviction policy):
``fp8+int4``, ``h2o+snapkv``, ``prefix+lru+lfu`` and ``prefix+prefix`` are errors, not "the last wins".
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.text import Annotation
from matplotlib.ticker import FuncFormatter
from matplotlib.transforms import ScaledTranslation, Transform

from simulator.charts import plain_text
from simulator.charts.base import MEETS_COLOUR, MISSES_COLOUR
from simulator.engine import EngineConfig, StepTimer, run
from simulator.engine.caches import make_strategy, offload_tiers
from simulator.engine.caches.radix import EVICTION_POLICIES
from simulator.engine.cluster import TimerFactory
from simulator.engine.retention import make_retention, unsourced_budget, unsourced_prompts
from simulator.errors import ConfigError, must_differ, shown
from simulator.kv import KVLayout, check_layout, compresses, lever_parts, parse_layout
from simulator.levers import debit_caveats, unpriced_parts
from simulator.placement import as_run  # (its home: `simulator.compare.as_run` still names it)
from simulator.progress import Meter, Progress
from workloads.request import Request
from workloads.summary import offered_rate_per_s

RETENTIONS = {"streaming-llm": "window_tokens", "h2o": "budget_tokens", "snapkv": "budget_tokens"}
REUSE = ("prefix", "dram", "nvme", *EVICTION_POLICIES)  # the prefix cache, its tiers and its eviction (one at most)


def parse_strategy_set(spec: str, base: EngineConfig) -> EngineConfig:
    """`base` (hardware, model, scheduler) with exactly the levers of `spec`: a set names every
    lever it uses, so the base's own layout, cache and retention are not inherited (``native``
    is the model as it ships, full KV, no reuse), and a tier (``dram``, ``nvme``) or an eviction
    policy (``lru``, ...) of the prefix cache does not turn the cache on: without ``prefix`` it is
    an error naming the set to give (``prefix+dram``), where it had silently meant that set."""
    layout_parts: list[str] = []
    cache, retention = "none", "full"
    cache_params: dict[str, object] = {}
    retention_params: dict[str, object] = {}
    allowed = f"a layout's (as --layout), retention ({', '.join(RETENTIONS)}) or reuse ({', '.join(REUSE)})"
    seen: dict[str, str] = {}  # a family -> the lever of it given (the layout's: `parse_layout`'s rule)
    given = lever_parts(spec, "strategy set", allowed)
    for raw in given:
        name, colon, arg = raw.partition(":")
        if name in REUSE and colon:  # (helper-189: 'prefix:3', 'dram:5', 'lru:x' ran as if written without it)
            raise ConfigError(f"strategy set {shown(spec)}: {raw!r} takes no argument (give {name!r}: the reuse "
                              f"levers {', '.join(REUSE)} have no parameter)")
        family = "retention" if name in RETENTIONS else "eviction" if name in EVICTION_POLICIES else name
        if name in (*RETENTIONS, *REUSE):  # each once, as a layout's family: not "the last wins"
            if family in seen:
                raise ConfigError(f"strategy set {shown(spec)}: " + (
                    f"{raw!r} is given twice (each lever once)" if seen[family] == raw else
                    f"{raw!r} conflicts with {seen[family]!r} (one {family} lever at most)"))
            seen[family] = raw
        if name in RETENTIONS:
            retention, retention_params = name, {}
            if colon:  # (an empty argument, 'h2o:', is refused below: it ran at the default budget without a word)
                try:
                    value = float(arg)
                except ValueError:
                    value = math.nan
                fraction = name != "streaming-llm" and 0 < value < 1
                if not (fraction or (math.isfinite(value) and value >= 1 and value == int(value))):
                    rule = "whole tokens >= 1" + ("" if name == "streaming-llm" else ", or a fraction in (0, 1)")
                    raise ConfigError(f"strategy set {shown(spec)}: {name!r} takes {rule} (got {shown(arg)})")
                if name == "streaming-llm":
                    retention_params = {"window_tokens": int(value)}
                elif fraction:
                    retention_params = {"budget_fraction": value, "budget_tokens": 0}
                else:
                    retention_params = {"budget_tokens": int(value)}
        elif name in REUSE:
            cache = "prefix"
            if name in ("dram", "nvme"):
                cache_params[name] = True
            elif name != "prefix":
                cache_params["eviction"] = name
        else:
            layout_parts.append(raw)
    under = [raw for family, raw in seen.items() if family in ("dram", "nvme", "eviction")]  # the prefix cache's
    if under and "prefix" not in seen:  # named, not implied: a set names every lever it uses (helper-186)
        what = "a tier" if under[0] in ("dram", "nvme") else "an eviction policy"
        raise ConfigError(f"strategy set {shown(spec)}: {under[0]!r} is {what} of the prefix cache, which the set "
                          f"does not name; add the prefix lever ({shown('+'.join(['prefix', *given]))})")
    try:
        layout = parse_layout("+".join(layout_parts) or "native")  # the layout levers as the set wrote them
    except ConfigError as e:
        also = (f"; or a retention ({', '.join(RETENTIONS)}) or reuse lever ({', '.join(REUSE)})"
                if "unknown lever" in str(e) else "")  # a name no layout knows may be one of these
        raise ConfigError(f"strategy set {shown(spec)}: {e}{also}") from None
    make_strategy(cache, **cache_params)  # its parameters fail now, before any run
    make_retention(retention, **retention_params)
    return replace(base, layout=layout, cache=cache, cache_params=cache_params, retention=retention,
                   retention_params=retention_params)


def check_context(config: EngineConfig, requests: Sequence[Request], what: str = "compare") -> None:
    """Every request's prompt + output fits the model's context window (as `kvsim run` requires):
    a longer one could never run, and a comparison of nothing completed is no answer."""

    model = config.model_spec()
    longest = max((r.prompt_tokens + r.output_tokens for r in requests), default=0)
    if longest > model.max_context_tokens:
        raise ConfigError(f"{what}: workload requests must fit {model.key}'s context of {model.max_context_tokens:,} "
                          f"tokens (got a request of {longest:,} prompt + output tokens); choose a model with a "
                          "longer context or a workload of shorter requests")


def _what_runs(config: EngineConfig) -> str:
    """What a strategy set runs, however it is spelled: ``fp8`` and ``native+fp8`` are one layout,
    ``prefix`` and ``prefix+native`` one set (`parse_strategy_set` resolves the spellings)."""
    def named(name: str, params: Mapping[str, object]) -> str:
        return name + "".join(f" {k}={v}" for k, v in sorted(params.items()))

    return (f"layout {config.layout.label}, reuse {named(config.cache, config.cache_params)}, "
            f"retention {named(config.retention, config.retention_params)}")


def check_distinct_sets(specs: Sequence[str], base: EngineConfig, where: str) -> list[EngineConfig]:
    """Each set parses on `base`, and no two run the same thing: a set named twice (under any
    spelling: ``fp8`` and ``native+fp8``, ``prefix`` and ``prefix+lru``, its default eviction)
    would be two identical rows under two labels. Two sets are one when their layout, cache and
    retention policy compare equal once built with their defaults; the message, at `where` (the
    option or argument that named them), names the first's `_what_runs`. Returns the sets' configs."""
    first: dict[str, str] = {}
    resolved: list[str] = []
    configs = [parse_strategy_set(spec, base) for spec in specs]
    model = base.model_spec()
    for spec, config in zip(specs, configs, strict=True):  # a lever this model cannot take, said at its set
        try:
            check_layout(model, config.layout)
        except ConfigError as exc:
            raise ConfigError(f"{where} {spec}: {exc}") from None
    for config in configs:
        layout = as_run(model, config.layout)
        built = repr((layout, make_strategy(config.cache, **config.cache_params),
                      make_retention(config.retention, **config.retention_params)))
        resolved.append(first.setdefault(built, _what_runs(replace(config, layout=layout))))
    must_differ(list(specs), resolved, where, "strategy set")
    return configs


def compare_strategies(base_config: EngineConfig, requests: Sequence[Request], specs: list[str], seed: int = 0, *,
                       timer: StepTimer | TimerFactory | None = None, progress: Progress | None = None) -> pd.DataFrame:
    """Run `requests` under each strategy set; one row per set with the headline figures.

    ``usd_per_million_tokens = cost_usd / (prompt + output tokens of completed requests) · 1e6``;
    ``usd_per_million_output_tokens`` the same over output tokens alone (the run summary's).
    ``meets_slo``: p99 TTFT and p99 TPOT within the config's SLOs (``slo_ttft_s``, ``slo_tpot_s``)
    and nothing rejected or timed out (`simulator.planning.meets_slo`); ``offered_requests_per_s = n /
    (last arrival − first arrival)``, the workload's rate as ``kvsim workload describe`` and the run
    summary's workload line print it (`workloads.summary.offered_rate_per_s`), not the run summary's
    steady-window ``offered_requests_per_s``.
    ``memory_factor = layout_memory_factor · kept_kv_fraction · copies``: KV bytes a sequence ends
    with in all (every GPU's share summed), against an MHA, bf16, full-retention baseline (the
    layout's `simulator.kv.footprint` factors at the mean context, times the share of its tokens'
    KV retention keeps: `kept_kv_fraction`, times ``copies = kv_bytes_per_token_summed /
    kv_bytes_per_token``, the copies the plan stores: 1 where heads split over the GPUs, more
    where they are replicated (an MLA latent whole on each of TP8's GPUs: 8; 8 GQA heads over
    TP16: 2)). ``memory_factor_per_gpu = memory_factor · kv_bytes_per_token_per_gpu /
    kv_bytes_per_token_summed``, the same against the same baseline on the GPU that holds the most
    (`gpu_kv_bytes_per_token`); without PP, ``memory_factor = memory_factor_per_gpu · tp_attn``
    (the GPUs sharing the sequence). Llama-3.1-70B under TP8: GQA 0.125 · 1 in all, 0.125 · 1/8 a
    GPU; an MLA retrofit 0.0352 · 8 = 0.281 in all, 0.0352 a GPU: fewer bytes a token, more a replica.

    ``cache_evicted_blocks`` and ``cache_reloaded_blocks`` are the blocks the prefix cache evicted from HBM
    and brought back from a lower tier (``offload_tiers``, the set's ``dram``/``nvme``), the latter split by tier in
    ``cache_dram_reloaded_blocks`` and ``cache_nvme_reloaded_blocks``, at every admission (a re-admission after a
    recompute preemption too): a tier that brought none back changed nothing. ``hit_dram_tokens`` and
    ``hit_nvme_tokens`` are the prompt tokens each tier served requests at their first admission only (what other
    requests left; a preempted request's reloads of its own KV are not among them).

    ``quality_debit_points`` sums the debits sources state; ``debit_not_stated`` names the layout's parts whose
    debit none states (``gqa:2``, ``mqa``: fewer KV heads than trained), which it leaves out, and ``debit_caveats``
    says in words what the figure does not cover.

    `progress` receives the fraction done: each set an equal share (the same requests), advanced
    by its share of requests ended.
    """
    must_specs = [s.strip() for s in specs if s.strip()]
    if not must_specs:
        raise ConfigError("compare: 'strategies' must name at least one strategy set (got none)")
    # all errors before any run; a set named twice: one row, not two
    configs = check_distinct_sets(must_specs, base_config, "compare: 'strategies'")
    check_context(base_config, requests)
    from simulator.planning import meets_slo

    model = base_config.model_spec()
    arrivals = [r.arrival_s for r in requests]
    span_s = max(arrivals) - min(arrivals) if arrivals else 0.0
    offered = offered_rate_per_s(len(arrivals), span_s)
    rows: list[dict[str, Any]] = []
    meter = Meter(progress, [len(configs)])
    for spec, config in zip(must_specs, configs, strict=True):
        res = run(config, requests, seed=seed, timer=timer, progress=meter.piece(1.0))
        meter.add(1.0)
        s, req = res.summary, res.requests
        done = req[req.outcome == "completed"]
        tokens = int(done.prompt_tokens.sum() + done.output_tokens.sum())
        layout_factor = math.prod(s["layout_factors"].values())
        kept = kept_kv_fraction(req) if config.retention != "full" else 1.0
        in_all, per_gpu, summed = gpu_kv_bytes_per_token(config)
        long_prompts = unsourced_prompts(config.retention, req.prompt_tokens[req.evicted_tokens > 0].tolist())
        in_all_factor = layout_factor * kept * summed / in_all  # every GPU's copy counted
        rows.append({
            "strategy": spec, "layout": config.layout.label, "cache": config.cache, "retention": config.retention,
            "meets_slo": meets_slo(res, config.slo_ttft_s, config.slo_tpot_s),
            "slo_ttft_s": config.slo_ttft_s, "slo_tpot_s": config.slo_tpot_s, "offered_requests_per_s": offered,
            "kv_blocks_per_replica": s["kv_blocks_per_replica"], "completed": s["completed"],
            "max_concurrency": s["max_concurrency"], "mean_concurrency": s["mean_concurrency"],
            "tokens_per_s": s["tokens_per_s"], "output_tokens_per_s": s["output_tokens_per_s"],
            "ttft_p50_s": s["ttft_p50_s"], "ttft_p99_s": s["ttft_p99_s"], "tpot_p99_s": s["tpot_p99_s"],
            "usd_per_million_tokens": s["cost_usd"] / tokens * 1e6 if tokens else math.nan,
            "usd_per_million_output_tokens": s["usd_per_million_output_tokens"],
            "goodput_fraction": s["goodput_fraction"], "timed_out": s["timed_out"], "rejected": s["rejected"],
            "queue_grows": bool(s["steady_queue_growing"]),  # falls behind its load (`planning.keeps_up`)
            # the completed requests whose KV passed a compression's full-resolution window (NaN without one)
            "compressed_share": compressed_share(config.layout, done),
            "prefix_hit_ratio_tokens": s["prefix_hit_ratio_tokens"],
            "cache_evicted_blocks": s.get("cache_evicted_blocks", 0),
            "cache_reloaded_blocks": s.get("cache_reloaded_blocks", 0),
            "hit_dram_tokens": s["hit_dram_tokens"], "hit_nvme_tokens": s["hit_nvme_tokens"],  # first admissions'
            "offload_tiers": "+".join(offload_tiers(config.cache_params)),
            "quality_debit_points": s["quality_debit_points"],
            "retention_evicted_tokens": s["retention_evicted_tokens"],
            # the KV budget the retention policy's debit was measured at, where this one keeps another and evicted
            # (helper-166: it was filled beside a debit of 0 where the policy evicted nothing)
            "debit_unsourced_at": (unsourced_budget(config.retention, config.retention_params) or "")
            if s["retention_evicted_tokens"] else "",
            "kv_utilization": s["kv_utilization"],
            "memory_factor": in_all_factor,
            "memory_factor_per_gpu": in_all_factor * per_gpu / summed,
            "layout_memory_factor": layout_factor,
            "kept_kv_fraction": kept,
            "kv_bytes_per_token": in_all,
            "kv_bytes_per_token_per_gpu": per_gpu,
            "kv_bytes_per_token_summed": summed,
            # what the stated debit does not cover: a lever at another parameter than its source measured, fewer KV
            # heads than trained (`simulator.levers.debit_caveats`; helper-180), a retention policy that evicted from
            # prompts longer than its sources measured on (`simulator.engine.retention.unsourced_prompts`;
            # helper-180), "; "-joined. Last: a column added later goes after those a reader may have taken by
            # position (helper-186)
            "debit_caveats": "; ".join([*debit_caveats(config.layout, model), *filter(None, [long_prompts])]),
            # the layout's parts whose debit no source states (`simulator.levers.unpriced_parts`: gqa:2, mqa),
            # "+"-joined: quality_debit_points leaves them out, and a cost tie ranks such a set after the stated ones
            # (`_ranked`); after debit_caveats, the newest column last
            "debit_not_stated": "+".join(unpriced_parts(config.layout, model)),
            # each tier's reloads, blocks at every admission, re-admissions after preemptions too (helper-198: the
            # first admissions' hit tokens alone called a tier idle that served only re-admissions); newest, last
            "cache_dram_reloaded_blocks": s.get("cache_dram_reloaded_blocks", 0),
            "cache_nvme_reloaded_blocks": s.get("cache_nvme_reloaded_blocks", 0),
        })
    meter.finish()
    return pd.DataFrame(rows)


def gpu_kv_bytes_per_token(config: EngineConfig) -> tuple[float, float, float]:
    """A token's KV bytes: one copy in all (`simulator.kv.bytes_per_token`); on the GPU of the
    config's first pool that holds the most of it, ``max_s gpu_sequence_bytes(1 token, stage s)``
    (`simulator.capacity`, from `simulator.placement`'s ``kv_share``: ``h_gpu / h`` of the stage's
    layers, or all of an MLA latent); and summed over the GPUs that hold the sequence,
    ``tp_attn · Σ_s gpu_sequence_bytes(1 token, stage s)`` (each stage's ``tp_attn`` attention
    ranks hold a share each; replicated heads or a latent are counted on every rank)."""
    from hardware.catalog import load_catalog
    from simulator.capacity import gpu_sequence_bytes, kv_budget
    from simulator.kv import bytes_per_token

    model = config.model_spec()
    node = config.node if not isinstance(config.node, str) else load_catalog().node(config.node)
    budget = kv_budget(node, model, memory_utilization=config.memory_utilization, plan=config.plan)
    stage_bytes = [gpu_sequence_bytes(budget, model, config.layout, 1, s) for s in range(len(budget.stages))]
    return bytes_per_token(model, config.layout), max(stage_bytes), budget.plan.attention_tp * sum(stage_bytes)


def kept_kv_fraction(requests: pd.DataFrame) -> float:
    """Share of its KV a completed request still held at its end, over completed requests::

        kept = 1 − Σ evicted_tokens / Σ (prompt + output − 1)

    (a finished sequence has the KV of ``prompt + output − 1`` tokens: the last output token's
    is never written; retention dropped ``evicted_tokens`` of them). 1 under full retention; NaN
    when nothing completed.
    """
    done = requests[requests.outcome == "completed"]
    full = int((done.prompt_tokens + done.output_tokens - 1).sum())
    return 1.0 - int(done.evicted_tokens.sum()) / full if full > 0 else math.nan




TIE = 0.01  # costs within 1% of each other are a tie, broken by the smaller quality debit


def _not_stated(df: pd.DataFrame) -> pd.Series:
    """Per row, whether part of its debit is stated by no source (``debit_not_stated`` non-empty: ``gqa:2``,
    ``mqa``); False for a frame without that column (one written before it, or made by hand)."""
    if "debit_not_stated" not in df:
        return pd.Series(False, index=df.index)
    return df["debit_not_stated"].fillna("").astype(str) != ""


def _ranked(df: pd.DataFrame) -> pd.DataFrame:
    """The strategy sets that meet the SLOs first, cheapest first (costs within `TIE` of the cheapest
    tie; within the tie a set whose debit is wholly stated goes before one with a part no source states
    (`_not_stated`: its ``quality_debit_points`` leaves that part out, so a 0 there is no figure of 0 and
    cannot win the tie; helper-186: ``gqa:2`` went before ``fp8``'s stated 0.1), then the smaller quality
    debit, then the cheaper); then those that miss, cheapest first."""
    cost = df["usd_per_million_output_tokens"].astype(float)
    meets = df["meets_slo"].astype(bool)
    floor = cost[meets].min() if meets.any() else math.nan
    tied = meets & (cost <= floor * (1 + TIE))
    tier = cost.where(~tied, floor)  # the cheapest ones' cost, as one
    unstated = _not_stated(df) & tied  # (outside the tie cost alone orders)
    return df.assign(_miss=~meets, _tier=tier, _unstated=unstated, _cost=cost).sort_values(
        ["_miss", "_tier", "_unstated", "quality_debit_points", "_cost"], kind="stable").drop(
        columns=["_miss", "_tier", "_unstated", "_cost"])


def compressed_share(layout: KVLayout, done: pd.DataFrame) -> float:
    """The share of `done` (completed requests) that `layout`'s compression compressed (`simulator.kv.compresses`:
    the ``prompt + output − 1`` KV tokens a request kept, less what retention dropped, past its full-resolution
    window), the only ones charged its debit (`simulator.levers.window_debit_points`); NaN for a layout without
    one, or none done."""
    if compresses(layout, 0) is None or not len(done):
        return math.nan
    kept = done.prompt_tokens + done.output_tokens - 1 - done.evicted_tokens
    return float((kept > layout.compress_recent_tokens).mean())


def _missed(row: pd.Series) -> str:
    """What a strategy set that misses the SLOs misses: ``TTFT``, ``TPOT``, ``173 timed out``, ``2 rejected`` (the
    requests it never answered, counted: helper-147 read "timeouts" where half of them had)."""
    parts = [name for name, col, slo in (("TTFT", "ttft_p99_s", "slo_ttft_s"), ("TPOT", "tpot_p99_s", "slo_tpot_s"))
             if row[col] > row[slo]]  # a NaN TPOT (one-token answers) breaks no SLO
    parts += [f"{int(row[key]):,} {what}" for key, what in (("timed_out", "timed out"), ("rejected", "rejected"))
              if row.get(key, 0) > 0]
    return " and ".join(parts) if parts else "an SLO"


def _debit_label(debit: float, caveats: str, unstated: bool = False) -> str:
    """A set's quality debit under its name on the chart: ``quality debit 0.1 pt``, nothing for none; where no source
    states it (`simulator.levers.debit_caveats`: fewer KV heads than trained, a lever at another parameter than its
    source's) the label says so, not a clean 0 (helper-180: ``gqa:8`` on DeepSeek-V3 read as a free lever), and
    where a part of it is stated by none (`unstated`: compare.csv's ``debit_not_stated``) beside a stated part, the
    label says that part is left out (``quality debit 0.1 pt + not stated``: ``gqa:2+fp8``); compare.csv's
    ``debit_caveats`` says why."""
    if not caveats and not unstated:
        return f"\nquality debit {debit:.3g} pt" if debit > 0 else ""
    if debit <= 0:
        return "\nquality debit not stated"
    return f"\nquality debit {debit:.3g} pt + not stated" if unstated else f"\nquality debit {debit:.3g} pt, a guide"


def _figure(v: float, unit: str) -> str:
    return f"{v:,.0f} {unit}" if v >= 1000 else f"{v:,.3g} {unit}"


@plain_text
def compare_figure(df: pd.DataFrame, title: str) -> Figure:
    """Which strategy set serves this traffic cheapest within the SLOs (`compare_strategies`' rows).

    Left: USD per million output tokens on this fleet at this load, one bar a set, green where it
    meets both p99 SLOs and red (hatched) where it misses one, cheapest first among those that meet;
    each set's stated quality debit beside its name. Right: its p99 TTFT and TPOT as a share of
    their SLOs (log scale when they span over 20×), the SLO at 100%: how much room each set leaves.
    """
    from matplotlib.patches import Patch

    d = _ranked(df).reset_index(drop=True)
    n = len(d)
    fig, (a, b) = plt.subplots(1, 2, figsize=(15, 2.8 + 0.55 * n), sharey=True,
                               gridspec_kw={"width_ratios": [1.15, 1]})
    y = list(range(n))
    meets = d["meets_slo"].astype(bool).to_list()
    cost = d["usd_per_million_output_tokens"].to_numpy(dtype=float)
    a.barh(y, cost, color=[MEETS_COLOUR if ok else MISSES_COLOUR for ok in meets],
           hatch=["" if ok else "//" for ok in meets], edgecolor="0.25", height=0.65)
    best = next((i for i, ok in enumerate(meets) if ok), None)
    # the debit decided it where a set within the tie costs less (a Gemma-3-27B chat-4k compare read "$46.4, a
    # tie: the smaller quality debit" above a $46.3 of the same debit, which now goes first)
    tied = best is not None and any(ok and c < cost[best] for c, ok in zip(cost, meets, strict=True))
    unstated = _not_stated(d).to_list()
    # what decided it: a cheaper set in the tie whose debit no source states, or a larger stated debit
    by_unstated = best is not None and not unstated[best] and any(
        ok and c < cost[best] and u for c, ok, u in zip(cost, meets, unstated, strict=True))
    # the sets within `TIE` of the best that meet the SLOs too: where it is also the cheapest, it is so by less than
    # the tie (helper-197: eight sets printed $6.31, one marked the cheapest, by 0.1%)
    alike = 0 if best is None else sum(ok and i != best and c <= cost[best] * (1 + TIE)
                                       for i, (c, ok) in enumerate(zip(cost, meets, strict=True)))
    notes = []
    for i, (v, ok) in enumerate(zip(cost, meets, strict=True)):
        text = f"${v:,.3g}" + ("" if ok else "  misses " + _missed(d.iloc[i]))
        if i == best:
            text += "  ← the cheapest within the SLOs"
            text += ("\n(a tie on cost: a stated quality debit before one no source states)" if by_unstated else
                     "\n(a tie on cost: the smaller quality debit)" if tied else
                     f"\n(by under {TIE:.0%}: {alike} other set{'s' if alike > 1 else ''} within it, a tie on cost)"
                     if alike else "")
        notes.append(a.annotate(text, (v if math.isfinite(v) else 0.0, i), xytext=(4, 0), textcoords="offset points",
                                va="center", fontsize=9, fontweight="bold" if i == best else "normal"))
    a.set_xlim(0, float(pd.Series(cost).max()) * 1.55 if n and pd.Series(cost).notna().any() else 1.0)
    caveats = d["debit_caveats"].fillna("") if "debit_caveats" in d else pd.Series([""] * n)
    debits = d["quality_debit_points"].fillna(0.0)
    labels = [f"{name}" + _debit_label(debit, str(caveat), u)
              for name, debit, caveat, u in zip(d["strategy"], debits, caveats, unstated, strict=True)]
    a.set_yticks(y, labels, fontsize=9)
    a.invert_yaxis()
    a.set_xlabel("USD per million output tokens (this fleet, this load)")
    a.set_title("Cost per output token at this load (one fleet: it differs where a run overruns)", fontsize=11)
    slo_ttft, slo_tpot = float(d["slo_ttft_s"].iloc[0]), float(d["slo_tpot_s"].iloc[0])
    a.legend(handles=[Patch(facecolor=MEETS_COLOUR, edgecolor="0.25", label="meets both p99 SLOs"),
                      Patch(facecolor=MISSES_COLOUR, edgecolor="0.25", hatch="//", label="misses an SLO")],
             fontsize=9, loc="upper center", bbox_to_anchor=(0.5, 0), bbox_transform=_below(a), ncol=2)
    h = 0.36
    ttft = d["ttft_p99_s"].to_numpy(dtype=float) / slo_ttft
    tpot = d["tpot_p99_s"].to_numpy(dtype=float) / slo_tpot
    b.barh([i - h / 2 for i in y], ttft, h, color="C0", label=f"TTFT p99 (SLO {slo_ttft:g} s)")
    b.barh([i + h / 2 for i in y], tpot, h, color="C4", label=f"TPOT p99 (SLO {slo_tpot * 1e3:g} ms)")
    for i in y:
        for off, share, text in ((-h / 2, ttft[i], _figure(d["ttft_p99_s"].iloc[i], "s")),
                                 (h / 2, tpot[i], _figure(d["tpot_p99_s"].iloc[i] * 1e3, "ms"))):
            if math.isfinite(share):
                # on a white ground: a bar ending near 1× puts its label on the SLO line (helper-134)
                b.annotate(text, (share, i + off), xytext=(3, 0), textcoords="offset points", va="center",
                           fontsize=7.5, bbox={"facecolor": "white", "edgecolor": "none", "pad": 0.5, "alpha": 0.85})
    b.axvline(1, color="red", ls=":", lw=1.5, label="the SLO (1×)")
    shares = pd.Series([*ttft, *tpot]).replace([math.inf, -math.inf], math.nan).dropna()
    shares = shares[shares > 0]
    if len(shares) and shares.max() > 20 * shares.min():
        b.set_xscale("log")
        b.set_xlim(min(0.1, float(shares.min()) / 1.5), float(shares.max()) * 8)
        b.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:,g}×"))
        b.set_xlabel("p99 latency ÷ its SLO (log scale; past 1× misses it)")
    else:
        b.set_xlim(0, max(1.3, float(shares.max()) * 1.3) if len(shares) else 1.3)
        b.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}×"))
        b.set_xlabel("p99 latency ÷ its SLO (past 1× misses it)")
    b.set_title("Latency against the SLOs: the room each leaves", fontsize=11)
    b.legend(fontsize=9, loc="upper center", bbox_to_anchor=(0.5, 0), bbox_transform=_below(b), ncol=3)
    for ax in (a, b):
        ax.grid(True, axis="x", alpha=0.3)
    rate = d["offered_requests_per_s"].iloc[0] if "offered_requests_per_s" in d else math.nan
    load = f", {rate:,.3g} requests/s offered" if math.isfinite(rate) else ""
    fig.suptitle(f"{title}{load}\nWhich strategy serves this traffic cheapest within the SLOs "
                 f"(p99 TTFT ≤ {slo_ttft:g} s, p99 TPOT ≤ {slo_tpot * 1e3:g} ms)?", fontsize=12)
    fig.tight_layout()
    _fit_notes(a, notes)
    return fig


LEGEND_DROP_IN = 0.5  # a legend's top this far below its axes' bottom: under the tick labels and the x label


def _below(ax: Axes) -> Transform:
    """Axes coordinates moved down `LEGEND_DROP_IN` inches: a legend anchored at ``(0.5, 0)`` in them sits under
    the x label however tall the axes are (at ``-0.1`` of the axes it covered the label of a short one)."""
    return ax.transAxes + ScaledTranslation(0, -LEGEND_DROP_IN, ax.figure.dpi_scale_trans)


NOTE_MARGIN_PX = 6.0  # room `_fit_notes` leaves between a note's end and the frame


def _fit_notes(ax: Axes, notes: list[Annotation]) -> None:
    """Widen `ax`'s x range ``[0, R]`` until the notes beside its bars end inside it; the text had run past the
    frame into the next panel where every set cost about the same. A note starts at its bar's end ``b``
    (data) and is ``t`` pixels long, so on an axis ``W`` pixels wide it ends at ``b · W / R + t``: inside
    once ``R ≥ b · W / (W − t − NOTE_MARGIN_PX)`` (a note longer than the axis keeps the range it has)."""
    renderer = ax.figure.canvas.get_renderer()  # type: ignore[attr-defined]
    box = ax.get_window_extent(renderer)
    lo, hi = ax.get_xlim()
    need = hi
    for note in notes:
        end = ax.transData.transform((note.xy[0], 0))[0]
        t = note.get_window_extent(renderer).x1 - end
        room = box.width - t - NOTE_MARGIN_PX
        if room > 0 and note.xy[0] > 0:
            need = max(need, note.xy[0] * box.width / room)
    if need > hi:
        ax.set_xlim(lo, need)


def tier_note(row: Mapping[Any, Any]) -> str:
    """What `kvsim compare` says of a row's offload tiers that changed nothing (`compare_strategies`' columns), or "".

    A tier changed nothing where no block came back from it (``cache_{tier}_reloaded_blocks`` = 0): blocks it kept
    and never brought back were as good as dropped. Each tier apart (helper-166: an NVMe tier below a DRAM tier that
    never filled hid behind it), by the blocks it brought back at any admission (helper-198: the first admissions'
    ``hit_{tier}_tokens`` alone called a tier idle that served only the re-admissions of preempted requests; a
    heavily preempting run reloaded 13,598 blocks against 10,465 blocks of first-admission hits)."""
    tiers = [t for t in str(row["offload_tiers"]).split("+") if t]
    back = {t: int(row[f"cache_{t}_reloaded_blocks"]) for t in tiers}
    idle = [t for t in tiers if not back[t]]
    if not idle:
        return ""
    if len(idle) == len(tiers):
        return (f"no block came back from {'+'.join(tiers)} ({int(row['cache_evicted_blocks']):,} evicted from HBM), "
                "so the tier changes nothing at this load")
    used = [t for t in tiers if back[t]]
    return (f"no block came back from its {' or '.join(idle)} tier (the {' and '.join(used)} tier brought back "
            f"{sum(back[t] for t in used):,}, at first admissions and re-admissions after preemptions), so "
            f"{'it changes' if len(idle) == 1 else 'they change'} nothing at this load")
