"""Provider side of a TTL: the KV it keeps resident against the prefill it saves.

Pure formulas over the residency records of a replay (`simulator.billing.ledger.Residency`);
`provider_costs_for` derives the cost figures of a concrete deployment from the KV math,
the cost model and a simulated run (the report does this for each scenario).

* KV byte-seconds held: each entry's tokens beyond its parent entry, held while it or any entry
  extending it lives (shared prefixes counted once; see `kv_byte_seconds`).
* Priced as displaced concurrency on HBM: ``B / bytes_per_stream`` stream-seconds displaced,
  × ``revenue_usd_per_stream_s`` (for a deployment, at most the fleet's output ceiling spread over the
  streams its pool holds: `output_ceiling_per_stream`).
* Priced as capacity: ``B / GB / HOUR_S × usd_per_gb_hour`` (DRAM or SSD).
* Prefill saved: ``read_tokens × prefill_gpu_s_per_token × usd_per_gpu_s``; for a deployment
  (`provider_costs_for`) each request's own saving from the cost model, ``Σ tp · (prefill_s(p, 0) −
  prefill_s(p − r', r')) × usd_per_gpu_s`` over its prompt ``p`` and read tokens ``r``, ``r' = min(r, p − 1)``
  (`PrefillPrice`).
* Margin against no caching: ``(revenue_ttl - revenue_none) + prefill_saved - holding``.
* Against the fleet's KV pool (``kv_pool_bytes``, when known): the peak KV the entries hold at
  once (`kv_peak_bytes`) over the pool, and the byte-seconds over ``pool × span`` (first write to
  last expiry). Above 1 the TTL's entries cannot all live in HBM at once (before counting the
  running sequences' KV), so the HBM holding cost prices capacity the fleet does not have.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from simulator.billing.compare import TTLComparison
from simulator.errors import ConfigError, is_number, must, placed
from simulator.tomlfile import read_toml
from simulator.units import GB, HOUR_S, MTOK

if TYPE_CHECKING:
    from hardware.catalog import NodeSpec
    from simulator.cost import StepModel
    from simulator.kv import KVLayout
    from simulator.models import ModelSpec

PROVIDER_FILE = Path(__file__).parent / "provider.toml"
HOLDING_TIERS = ("hbm", "dram", "ssd")


@dataclass(frozen=True, slots=True)
class PrefillPrice:
    """The prefill a cache hit saves, priced by the cost model: a replica of `tp` GPUs prefills a
    prompt of ``p`` tokens in ``prefill_s(p, 0)`` seconds, or, with ``r`` of them read from the cache,
    its last ``p − r`` after ``r`` of context in ``prefill_s(p − r, r)``. Over the requests that read,
    the saving is

        saved_gpu_s = Σ tp · (prefill_s(p, 0) − prefill_s(p − r', r')),     r' = min(r, p − 1)

    (a read of the whole prompt still computes its last token, whose logits give the first output
    token, as the engine does: `max_hit_tokens`). Attention's cost grows with the context, so a token
    read from a long prompt saves more than one from a short one: a per-token mean prices them alike."""

    step: StepModel
    tp: int

    def saved_gpu_s(self, prompt_tokens: pd.Series, read_tokens: pd.Series) -> float:
        """``saved_gpu_s`` above over requests' prompt and read tokens (each distinct pair priced once)."""
        pairs = pd.DataFrame({"p": prompt_tokens, "r": read_tokens})
        counts = pairs[pairs.r > 0].value_counts().reset_index(name="n")
        prefill = self.step.prefill_s
        total = 0.0
        for p, r, n in zip(counts.p.tolist(), counts.r.tolist(), counts.n.tolist(), strict=True):
            r = min(r, p - 1)  # the last token is computed (`max_hit_tokens`)
            total += n * (prefill(p, 0) - prefill(p - r, r))
        return self.tp * total


# what `provider_costs_for` works out of a deployment and a file never sets (the cost model, the run's speeds)
_WORKED_OUT = ("prefill", "decode_tokens_per_s_per_stream", "ceiling_tokens_per_s_per_stream")
_DEPLOYMENT = ("kv_pool_bytes", *_WORKED_OUT)  # ... and the pool: none of them a non-negative figure to check


@dataclass(frozen=True, slots=True, kw_only=True)
class ProviderCosts:
    """What KV residency and prefill cost a provider. Defaults in ``provider.toml``."""

    kv_bytes_per_token: float
    bytes_per_stream: float
    revenue_usd_per_stream_s: float
    dram_usd_per_gb_hour: float
    ssd_usd_per_gb_hour: float
    prefill_gpu_s_per_token: float
    usd_per_gpu_s: float
    source: str = ""
    kv_pool_bytes: float | None = None  # the fleet's HBM KV pool, all replicas (None: not known, no check)
    prefill: PrefillPrice | None = None  # each request's saving from the cost model (None: the per-token figure)
    # of a concrete deployment (`provider_costs_for`): a stream's decode speed, and the fleet's output ceiling a
    # stream; the revenue is the lesser at the output price (None: not worked out)
    decode_tokens_per_s_per_stream: float | None = None
    ceiling_tokens_per_s_per_stream: float | None = None

    def __post_init__(self) -> None:
        # a number, finite (helper-195: a provider file's "x" failed in Python's words, inf priced the holding at
        # inf and every margin at -inf)
        for f in fields(self):
            if f.name not in ("source", *_DEPLOYMENT):
                v = getattr(self, f.name)
                must(is_number(v) and 0 <= v < math.inf, "ProviderCosts", f.name, "a finite number >= 0", v)
        must(self.bytes_per_stream > 0, "ProviderCosts", "bytes_per_stream", "> 0", self.bytes_per_stream)
        if self.kv_pool_bytes is not None:
            must(self.kv_pool_bytes > 0, "ProviderCosts", "kv_pool_bytes", "> 0 bytes", self.kv_pool_bytes)


_FILE_KEYS = frozenset(f.name for f in fields(ProviderCosts)) - set(_WORKED_OUT)  # the keys a provider file sets


@cache
def _shipped() -> ProviderCosts:
    return _parse(read_toml(PROVIDER_FILE), PROVIDER_FILE)


def _parse(data: dict[str, object], path: Path) -> ProviderCosts:
    raw = data.get("provider")
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: missing table 'provider'")
    valid = _FILE_KEYS
    bad = set(raw) - valid
    if bad:
        raise ConfigError(
            f"{path}: provider: unknown key {sorted(bad)[0]!r}; valid: {', '.join(sorted(valid))}"
        )
    try:
        return ProviderCosts(**raw)
    except TypeError as exc:
        raise ConfigError(f"{path}: provider: {exc}") from None
    except ConfigError as exc:  # said at the file's key (helper-195: "ProviderCosts: ..." named no file)
        raise placed(exc, f"{path}: provider") from None


def load_provider_costs(extra: Path | str | None = None) -> ProviderCosts:
    """The shipped defaults, or a user TOML file's ``[provider]`` table (missing keys default)."""
    base = _shipped()
    if extra is None:
        return base
    data = read_toml(extra)
    # one [provider] table and nothing else (helper-195: a file of [provder] gave the shipped figures without a word,
    # provider = 5 failed in Python's words)
    if set(data) != {"provider"} or not isinstance(data["provider"], dict):
        other = sorted(set(data) - {"provider"})
        raise ConfigError(f"{extra}: " + (f"unknown key {other[0]!r}; valid: provider" if other else
                                          "must hold a [provider] table of the figures it sets"))
    merged = {f.name: getattr(base, f.name) for f in fields(ProviderCosts) if f.name in _FILE_KEYS} | dict(
        data["provider"])
    return _parse({"provider": merged}, Path(extra))


def kv_byte_seconds(residency: pd.DataFrame, kv_bytes_per_token: float, *,
                    spans: list[tuple[float, list[tuple[float, float]]]] | None = None) -> float:
    """KV byte-seconds the cache entries hold, shared prefixes counted once.

    Entries nest (turn k+1's prefix extends turn k's): each entry owns ``held_tokens`` beyond
    its parent entry, and those tokens are held while the entry *or any entry extending it* is
    alive, so ``B = Σ_E held_tokens(E) · |∪ lives of E's subtree| · kv_bytes_per_token``.
    Records without a parent column count ``own_tokens × (end_s − start_s)``. `spans` is
    ``_held_spans(residency)`` when the caller has it (`provider_table` needs it for the peak too).
    """
    if residency.empty:
        return 0.0
    if "parent_key_id" not in residency:
        life_s = (residency["end_s"] - residency["start_s"]).to_numpy(dtype=float)
        return float(np.dot(residency["own_tokens"].to_numpy(dtype=float), life_s) * kv_bytes_per_token)
    token_s = 0.0
    for held, union in _held_spans(residency) if spans is None else spans:
        token_s += held * sum(b - a for a, b in union)
    return token_s * kv_bytes_per_token


def _held_spans(residency: pd.DataFrame) -> list[tuple[float, list[tuple[float, float]]]]:
    """Per entry, in post-order: its ``held_tokens`` and the union of its subtree's lives (disjoint
    spans, sorted), the times those tokens are held (`kv_byte_seconds`)."""
    lives: dict[int, list[tuple[float, float]]] = {}
    parent: dict[int, int] = {}
    held: dict[int, float] = {}
    for k, p, h, a, b in residency[["key_id", "parent_key_id", "held_tokens", "start_s", "end_s"]].itertuples(
            index=False):
        lives.setdefault(int(k), []).append((float(a), float(b)))
        parent[int(k)], held[int(k)] = int(p), float(h)
    children: dict[int, list[int]] = {}
    for k, p in parent.items():
        children.setdefault(p, []).append(k)
    out: list[tuple[float, list[tuple[float, float]]]] = []
    stack: list[tuple[int, bool]] = [(k, False) for k in children.get(-1, [])]
    merged: dict[int, list[tuple[float, float]]] = {}
    while stack:  # post-order: a node's union needs its children's
        k, done = stack.pop()
        if not done:
            stack.append((k, True))
            stack.extend((c, False) for c in children.get(k, []))
            continue
        spans = sorted([*lives[k], *(iv for c in children.get(k, []) for iv in merged.pop(c))])
        union: list[tuple[float, float]] = []
        for a, b in spans:
            if union and a <= union[-1][1]:
                union[-1] = (union[-1][0], max(union[-1][1], b))
            else:
                union.append((a, b))
        merged[k] = union
        out.append((held[k], union))
    return out


def kv_peak_bytes(residency: pd.DataFrame, kv_bytes_per_token: float, *,
                  spans: list[tuple[float, list[tuple[float, float]]]] | None = None) -> float:
    """The most KV bytes the entries hold at one instant, shared prefixes counted once.

    The same holdings as `kv_byte_seconds` (``held_tokens`` over the union of the subtree's
    lives; ``own_tokens`` over each life without a parent column), summed by a sweep over the
    spans' ends and starts (an end before a start at the same instant: spans are ``[a, b)``).
    `spans` as `kv_byte_seconds` takes it.
    """
    if residency.empty:
        return 0.0
    if "parent_key_id" not in residency:
        spans = [(float(h), [(float(a), float(b))]) for h, a, b in
                 residency[["own_tokens", "start_s", "end_s"]].itertuples(index=False)]
    elif spans is None:
        spans = _held_spans(residency)
    events = sorted((t, sign, held) for held, union in spans for a, b in union
                    for t, sign in ((a, 1), (b, -1)))  # -1 sorts first at a tie
    level = peak = 0.0
    for _, sign, held in events:
        level += sign * held
        peak = max(peak, level)
    return peak * kv_bytes_per_token


def pool_notes(table: pd.DataFrame) -> list[str]:
    """One line per TTL whose peak held KV exceeds the fleet's pool (`provider_table`'s columns)."""
    out = []
    for row in table.to_dict("records"):
        ratio = row["kv_peak_over_pool"]
        if ratio == ratio and ratio > 1:  # NaN (pool unknown) compares false
            out.append(
                f"TTL {row['ttl']}: at its peak the cache holds {row['kv_peak_gb']:,.0f} GB of KV, {ratio:.2f}× "
                f"the fleet's {row['kv_pool_gb']:,.0f} GB KV pool ({row['kv_gb_hours']:,.0f} GB-hours = "
                f"{row['kv_gb_hours_over_pool']:.2f}× the pool held from the first write to the last expiry): "
                "it cannot all live in HBM, even before the running sequences' KV, so its HBM holding cost "
                "prices capacity the fleet does not have"
            )
    return out


def hbm_holding_usd(byte_s: float, bytes_per_stream: float, revenue_usd_per_stream_s: float) -> float:
    """Displaced concurrency: ``byte_s / bytes_per_stream × revenue_usd_per_stream_s``."""
    return byte_s / bytes_per_stream * revenue_usd_per_stream_s


def capacity_holding_usd(byte_s: float, usd_per_gb_hour: float) -> float:
    """Capacity rent: ``byte_s / GB / HOUR_S × usd_per_gb_hour``."""
    return byte_s / GB / HOUR_S * usd_per_gb_hour


def prefill_saved_usd(hit_tokens: float, prefill_gpu_s_per_token: float, usd_per_gpu_s: float) -> float:
    """GPU cost of the prefill that cache hits skip: ``hit_tokens × s/token × $/GPU-s``."""
    return hit_tokens * prefill_gpu_s_per_token * usd_per_gpu_s


def provider_table(comparison: TTLComparison, costs: ProviderCosts) -> pd.DataFrame:
    """Provider economics per TTL of a simulated comparison.

    Columns: ``ttl, revenue_usd, revenue_delta_usd, kv_gb_hours, kv_peak_gb, kv_pool_gb,
    kv_peak_over_pool, kv_gb_hours_over_pool, prefill_saved_usd, holding_{hbm,dram,ssd}_usd,
    margin_{hbm,dram,ssd}_usd`` (margins against no caching). The pool columns are NaN when
    ``costs.kv_pool_bytes`` is unknown; ``kv_gb_hours_over_pool`` divides by the pool held over
    the span from the first write to the last expiry.
    """
    base = comparison.results["none"].totals["total_usd"]
    pool = costs.kv_pool_bytes
    rows = []
    for label, res in comparison.results.items():
        r = res.residency
        spans = _held_spans(r) if len(r) and "parent_key_id" in r else None  # the subtree walk, once for both
        b = kv_byte_seconds(r, costs.kv_bytes_per_token, spans=spans)
        peak = kv_peak_bytes(r, costs.kv_bytes_per_token, spans=spans)
        span_s = float(r["end_s"].max() - r["start_s"].min()) if len(r) else 0.0
        holding = {
            "hbm": hbm_holding_usd(b, costs.bytes_per_stream, costs.revenue_usd_per_stream_s),
            "dram": capacity_holding_usd(b, costs.dram_usd_per_gb_hour),
            "ssd": capacity_holding_usd(b, costs.ssd_usd_per_gb_hour),
        }
        if costs.prefill is not None:
            saved = costs.prefill.saved_gpu_s(res.frame.prompt_tokens, res.frame.read_tokens) * costs.usd_per_gpu_s
        else:
            saved = prefill_saved_usd(res.totals["read_tokens"], costs.prefill_gpu_s_per_token, costs.usd_per_gpu_s)
        revenue = res.totals["total_usd"]
        row: dict[str, object] = {
            "ttl": label,
            "revenue_usd": revenue,
            "revenue_delta_usd": revenue - base,
            "kv_gb_hours": b / GB / HOUR_S,
            "kv_peak_gb": peak / GB,
            "kv_pool_gb": pool / GB if pool else math.nan,
            "kv_peak_over_pool": peak / pool if pool else math.nan,
            "kv_gb_hours_over_pool": b / (pool * span_s) if pool and span_s > 0 else math.nan,
            "prefill_saved_usd": saved,
        }
        for tier in HOLDING_TIERS:
            row[f"holding_{tier}_usd"] = holding[tier]
        for tier in HOLDING_TIERS:
            row[f"margin_{tier}_usd"] = revenue - base + saved - holding[tier]
        rows.append(row)
    return pd.DataFrame(rows)


def best_ttls(comparison: TTLComparison, table: pd.DataFrame) -> dict[str, str]:
    """The TTL that minimises the customer bill and, per holding tier, the one that maximises
    the provider's margin: ``{"customer": ..., "provider_hbm": ..., ...}``."""
    out = {"customer": comparison.best_ttl}
    for tier in HOLDING_TIERS:
        out[f"provider_{tier}"] = str(
            table["ttl"].iloc[int(np.argmax(table[f"margin_{tier}_usd"].to_numpy()))]
        )
    return out


def provider_costs_for(node: NodeSpec, model: ModelSpec, layout: KVLayout, tp: int, *,
                       stream_context_tokens: float, tokens_per_s_per_stream: float,
                       output_usd_per_mtok: float, prompt_tokens: float,
                       base: ProviderCosts | None = None, kv_pool_bytes: float | None = None,
                       output_tokens: float | None = None, replicas: int = 1,
                       max_num_seqs: int | None = None, prefill_node: NodeSpec | None = None,
                       prefill_tp: int | None = None, cached_prompt_tokens: float = 0.0) -> ProviderCosts:
    """`ProviderCosts` of a concrete deployment, from the specs, the cost model and a run.

    - ``kv_bytes_per_token = bytes_per_token(model, layout)`` (`simulator.kv`);
    - ``bytes_per_stream = sequence_bytes(model, layout, stream_context_tokens)`` (mean context);
    - ``revenue_usd_per_stream_s = min(tokens_per_s_per_stream, ceiling_per_stream) × output_usd_per_mtok
      / MTOK``: the simulated decode speed (1 / mean TPOT) at the profile's output price, at most the
      fleet's output ceiling spread over the streams its pool holds (`output_ceiling_per_stream`, when
      `kv_pool_bytes` and `output_tokens` are given; each prompt prefilled after the mean
      `cached_prompt_tokens` a prefix cache served it), so that the HBM holding cost of a TTL never
      exceeds the output revenue the fleet could earn with the memory it holds; both speeds are kept
      (``decode_tokens_per_s_per_stream``, ``ceiling_tokens_per_s_per_stream``);
    - ``prefill``, the cost model that prices each request's saving (`PrefillPrice`: what `provider_table`
      uses), and ``prefill_gpu_s_per_token = tp × prefill_s(prompt_tokens) / prompt_tokens``, the mean
      prompt's figure a token (shown in the costs; `provider_table` reads it only without ``prefill``);
    - ``usd_per_gpu_s = usd_per_gpu_hour / 3600`` (the price in use);
    - a disaggregated fleet's prompts prefill on its prefill pool: `prefill_node` and `prefill_tp` (default
      `node` and `tp`) price the prefill, its GPU-seconds and their price;
    - ``kv_pool_bytes``: the fleet's KV pool as simulated (blocks × block bytes), when given.
    DRAM and SSD prices come from `base` (default: ``provider.toml``).
    """
    from simulator.cost import StepModel, load_params
    from simulator.kv import bytes_per_token, sequence_bytes

    base = base or load_provider_costs()
    step = StepModel(node.gpu, model, layout, tp, load_params(node.gpu.key))
    p_node, p_tp = prefill_node or node, prefill_tp or tp
    p_step = step if (p_node, p_tp) == (node, tp) else StepModel(p_node.gpu, model, layout, p_tp,
                                                                 load_params(p_node.gpu.key))
    n = max(1, int(prompt_tokens))
    context = max(1, int(stream_context_tokens))
    stream_bytes = sequence_bytes(model, layout, context)
    speed, ceiling = tokens_per_s_per_stream, None
    if kv_pool_bytes and output_tokens:
        ceiling = output_ceiling_per_stream(step, pool_streams=kv_pool_bytes / stream_bytes, replicas=replicas,
                                            max_num_seqs=max_num_seqs, prompt_tokens=n, output_tokens=output_tokens,
                                            context_tokens=context, cached_tokens=min(cached_prompt_tokens, n - 1))
        speed = min(speed, ceiling)
    return replace(
        base,
        kv_bytes_per_token=bytes_per_token(model, layout),
        bytes_per_stream=stream_bytes,
        revenue_usd_per_stream_s=speed * output_usd_per_mtok / MTOK,
        decode_tokens_per_s_per_stream=tokens_per_s_per_stream, ceiling_tokens_per_s_per_stream=ceiling,
        prefill_gpu_s_per_token=p_tp * p_step.prefill_s(n, 0) / n,
        prefill=PrefillPrice(p_step, p_tp),
        usd_per_gpu_s=p_node.gpu.usd_per_gpu_hour / HOUR_S,
        kv_pool_bytes=kv_pool_bytes,
        source=f"{model.key} on {tp}×{node.gpu.key}"
               + (f", prefill on {p_tp}×{p_node.gpu.key}" if p_step is not step else "")
               + f", layout {layout.label}: KV math, cost model and a simulated run; DRAM/SSD prices from "
               "provider.toml",
    )


def output_ceiling_per_stream(step: StepModel, *, pool_streams: float, replicas: int, max_num_seqs: int | None,
                              prompt_tokens: int, output_tokens: float, context_tokens: int,
                              cached_tokens: float = 0.0) -> float:
    """The fleet's most output tokens a second, spread over the streams its KV pool holds:

        m = ⌊min(pool_streams / replicas, max_num_seqs)⌋      streams one replica decodes at once at most
        step_s = a(m) + b(m) · m · priced(context_tokens)     a full batch's decode step (`decode_coefficients`;
                                                              `StepModel.priced_context` under a window)
        ceiling = replicas · o · m / (m · prefill_s(prompt_tokens − cached_tokens after cached_tokens) + o · step_s)
        ceiling_per_stream = ceiling / pool_streams

    Each request takes its replica for its prefill and for a 1/m share of its ``o`` decode steps
    (`simulator.capacity.sustained_requests_per_s`, as the collapse study offers load). Holding KV for
    ``bytes_per_stream`` seconds then forgoes at most ``ceiling_per_stream`` output tokens, and holding
    the whole pool at most the fleet's
    output (before 2026-12-04 every displaced stream was priced at the single stream's speed, 1 / TPOT,
    as if compute and ``max_num_seqs`` did not bind, and a TTL's HBM holding could pass the revenue of the
    whole replay). 0 when the pool holds no whole stream."""
    from simulator.capacity import sustained_requests_per_s

    m = int(min(pool_streams / replicas, max_num_seqs if max_num_seqs else math.inf))
    if m < 1:
        return 0.0
    rate = sustained_requests_per_s(step, m, prompt_tokens, output_tokens, context_tokens, cached_tokens)
    return replicas * output_tokens * rate / pool_streams
