"""Which KV levers make a target fit, ranked by their stated quality debit.

A lever is a named `KVLayout` change with a debit (``simulator/data/levers.toml``, each with
its source). `rank_fixes` tries every lever alone and every combination of levers that do
not override each other, keeps those under which ``batch`` sequences of ``context`` tokens
fit the KV budget, and orders them by total debit (the sum of the levers' debits), then by
memory left.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from hardware.catalog import GPUSpec
from simulator.capacity import KVBudget, max_streams
from simulator.kv import KVLayout, lever_family, parse_layout, sequence_bytes
from simulator.models import ModelSpec
from simulator.placement import kv_heads, kv_share
from simulator.tomlfile import read_toml

LEVER_FILE = Path(__file__).parent / "data" / "levers.toml"
MAX_COMBINED = 3


@dataclass(frozen=True, slots=True, kw_only=True)
class Lever:
    name: str
    layout: str
    debit_points: float
    retrain: bool
    source: str
    basis: str  # how the source's statement was read into points (the data file's header)


@cache
def levers() -> dict[str, Lever]:
    raw = read_toml(LEVER_FILE)["lever"]
    return {k: Lever(name=k, **v) for k, v in raw.items()}


def layout_levers(layout: KVLayout, model: ModelSpec | None = None) -> list[Lever]:
    """The levers `layout` applies to `model` (``fp8``, ``mla``, ``cross-layer``, ``compress``, ...): each
    ``+``-part of ``layout.label`` matched to a lever by its name before any ``:``; parts with no lever
    (``native``, ``bf16``) are none, and so is ``mla`` on a model whose own attention is MLA (DeepSeek-V3:
    its latent as released, no retrofit to pay for; `parse_layout` lets it keep only its own rank)."""
    table = levers()
    own_mla = model is not None and model.attention == "mla"
    return [table[name] for name in (p.split(":")[0] for p in layout.label.split("+"))
            if name in table and not (name == "mla" and own_mla)]


def layout_debit_points(layout: KVLayout, model: ModelSpec | None = None) -> float:
    """Σ debits of the levers `layout` applies to `model` (`layout_levers`); parts with no lever cost nothing."""
    return round(sum(lv.debit_points for lv in layout_levers(layout, model)), 6)


def window_debit_points(layout: KVLayout, model: ModelSpec | None = None) -> tuple[float, float]:
    """`layout_debit_points` in two parts: what every sequence pays, and what only a sequence the compression
    compressed pays (`simulator.kv.compresses`: its KV, after what a retention policy dropped, past the
    ``r``-token full-resolution window of ``compress:w:r``; below it nothing is compressed, so nothing is lost;
    helper-151: chat-4k under ``compress:8:16384`` was charged 2.5 points, identical to native in every other
    figure). The second is 0 without a compression lever."""
    parts = layout_levers(layout, model)
    windowed = sum(lv.debit_points for lv in parts if lv.name == "compress")
    return round(sum(lv.debit_points for lv in parts) - windowed, 6), round(windowed, 6)


# layout parts that change what a model was trained with but that simulator/data/levers.toml prices no debit for
UNPRICED_PARTS = ("gqa", "mqa")

# a parametrised lever's parameter (the `KVLayout` field) and what it is, for `unsourced_levers`
_PARAMETER = {"cross-layer": ("own_layer_fraction", "fraction of layers with their own KV"),
              "mla": ("mla_rank", "latent rank"), "compress": ("compress_ratio", "compression ratio")}


def unpriced_parts(layout: KVLayout, model: ModelSpec) -> list[str]:
    """The parts of `layout` that keep fewer KV heads than `model` was trained with (``gqa:4`` of 8, ``mqa``) and
    that ``simulator/data/levers.toml`` prices no debit for: their debit is not 0 but unstated (helper-153; ``gqa:8``
    of 8 is the model as trained)."""
    return [p for p in layout.label.split("+") if p.split(":")[0] in UNPRICED_PARTS and p.split(":")[0]
            not in levers() and kv_heads(model, layout) < model.n_kv_heads]


def unsourced_levers(layout: KVLayout, model: ModelSpec | None = None) -> list[tuple[Lever, str]]:
    """The levers `layout` applies to `model` (`layout_levers`) at another parameter than the one their source
    measured (the lever's ``layout`` in ``simulator/data/levers.toml``: ``cross-layer:0.5``, ``mla``'s retrofit rank,
    ``compress:8``'s ratio), each with that part of `layout` (``cross-layer:0.1``): such a lever is charged the
    sourced setting's debit, which is then a guide, not a figure (as a retention policy at another budget,
    `simulator.engine.retention.unsourced_budget`)."""
    parts = {p.split(":")[0]: p for p in layout.label.split("+")}
    out = []
    for lv in layout_levers(layout, model):
        field, _ = _PARAMETER.get(lv.name, ("", ""))
        if field and getattr(layout, field) != getattr(parse_layout(lv.layout), field):
            out.append((lv, parts.get(lv.name, lv.name)))
    return out


def unsourced_notes(layout: KVLayout, model: ModelSpec | None = None) -> list[str]:
    """One sentence for each of `unsourced_levers`: whose setting its debit was measured at, and that it is a guide
    at `layout`'s (``cross-layer's 1-point debit is what its source states for cross-layer:0.5 (...), not measured
    at cross-layer:0.1: a guide, not a figure``)."""
    said = []
    for lv, part in unsourced_levers(layout, model):
        field, what = _PARAMETER[lv.name]
        said.append(f"{lv.name}'s {lv.debit_points:g}-point debit is what its source states for {lv.layout} "
                    f"({what} {getattr(parse_layout(lv.layout), field):g}), not measured at {part}: a guide, "
                    "not a figure")
    return said


def debit_caveats(layout: KVLayout, model: ModelSpec) -> list[str]:
    """What `layout`'s stated debit (`layout_debit_points`) does not cover, one sentence each: a part with no stated
    debit (`unpriced_parts`) and a lever at a parameter its source did not measure (`unsourced_notes`)."""
    said = [f"{p} keeps fewer KV heads ({kv}) than {model.key} was trained with ({model.n_kv_heads}): "
            "simulator/data/levers.toml states no debit for it, and the debit shown leaves it out"
            for p, kv in ((p, kv_heads(model, layout)) for p in unpriced_parts(layout, model))]
    return said + unsourced_notes(layout, model)


def fp4_kv_note(gpu: GPUSpec, what: str) -> str:
    """What fp4 KV means on `gpu` where it has no fp4 tensor cores (H100, H200, MI300X), else ``""``: kvsim does
    `what` with its bytes (prices its reads, counts its streams), but the fp4 lever's source, NVIDIA's NVFP4 KV
    cache, is a Blackwell feature (helper-180: fit offered fp4 as a no-training lever on 8×H100 without a word,
    where ``kvsim cost`` said this)."""
    if gpu.fp4_flops > 0:
        return ""
    return (f"fp4 KV on {gpu.key}, which has no fp4 tensor cores: kvsim {what}, but the fp4 lever's source (NVIDIA's "
            "NVFP4 KV cache) is a Blackwell feature")


@dataclass(frozen=True, slots=True, kw_only=True)
class Fix:
    """A set of levers under which the target fits: `debit_points` and `retrain` are those of the whole
    `layout`, the base layout's own levers included (an ``mla`` base's 1.5 points and its training)."""

    levers: tuple[str, ...]
    layout: str
    debit_points: float
    retrain: bool
    sequence_bytes: float  # one sequence's KV of `context_tokens`, paged (`sequence_bytes`)
    # what the replica's GPUs hold of it in all, each GPU's copy summed: ``sequence_bytes · kv_share · attention
    # tp`` (a latent is whole on each attention rank: tp copies; KV heads fewer than the ranks, replicated)
    held_bytes: float
    max_streams: int
    sources: tuple[str, ...]  # each lever's source (`levers.toml`), the base layout's first


def _compatible(combo: tuple[Lever, ...]) -> bool:
    """Levers of one family (two KV dtypes; `lever_family`) cannot stack."""
    return len({lever_family(lv.layout) for lv in combo}) == len(combo)


def _on(base: KVLayout, combo: tuple[Lever, ...]) -> str | None:
    """The layout text of `combo` applied to `base`, or None where `base` already sets one of its families
    with a lever of its own (``fp8`` in ``--layout fp8``: its debit is paid, and a second dtype cannot
    stack). A part of `base` that is no lever (``bf16``, ``native``) gives way to the combo's lever of its
    family: ``bf16`` + the fp8 lever is ``fp8``."""
    families = {lever_family(lv.layout) for lv in combo}
    kept = []
    for part in base.label.split("+"):
        if lever_family(part) in families:
            if part.split(":")[0] in levers():
                return None
            continue
        kept.append(part)
    return "+".join([*kept, *(lv.layout for lv in combo)])


def rank_fixes(budget: KVBudget, model: ModelSpec, base: KVLayout, context_tokens: int, batch: int,
               block_tokens: int) -> list[Fix]:
    """Every lever combination (up to `MAX_COMBINED` levers) that fits on top of `base`, cheapest debit first
    (a lever of a family `base` already sets with a lever, its KV dtype say, is left out: `_on`); each fix's
    debit is its whole layout's, `base`'s own levers' included."""
    fixes = []
    table = list(levers().values())
    own = layout_levers(base, model)
    for r in range(1, MAX_COMBINED + 1):
        for combo in itertools.combinations(table, r):
            text = _on(base, combo) if _compatible(combo) else None
            if text is None:
                continue
            layout = parse_layout(text)
            if layout == base:
                continue
            streams = max_streams(budget, model, layout, context_tokens, block_tokens)
            if streams >= batch:
                charged = layout_levers(layout, model)  # mla on an MLA model is none
                paid = [*own, *(lv for lv in combo if lv in charged)]
                seq = sequence_bytes(model, layout, context_tokens, block_tokens)
                tp = budget.plan.attention_tp
                fixes.append(Fix(
                    levers=tuple(lv.name for lv in combo), layout=layout.label,
                    debit_points=round(sum(lv.debit_points for lv in paid), 6),
                    retrain=any(lv.retrain for lv in paid),
                    sequence_bytes=seq, held_bytes=seq * kv_share(model, layout, tp) * tp, max_streams=streams,
                    sources=tuple(lv.source for lv in paid),
                ))
    # a combination that contains a cheaper fix adds debit for nothing: keep minimal sets only
    minimal = [f for f in fixes
               if not any(set(g.levers) < set(f.levers) for g in fixes)]
    return sorted(minimal, key=lambda f: (f.debit_points, -f.max_streams))
