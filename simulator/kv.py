"""KV-cache bytes: per token, per sequence, per batch, for any composition of layout levers.

The one formula, per layer group (full-context layers and sliding-window layers)::

    bytes(n, B) = B · Σ_groups  L_g · (ceil(L·f) / L) · entries_g(n) · values_per_entry · bytes_per_value

with
- ``values_per_entry = n_kv · (d_k + d_v)`` for MHA/GQA/MQA (``2 · n_kv · d_head`` when ``d_k = d_v``),
  or ``kv_lora_rank + qk_rope_head_dim`` for an MLA latent;
- ``f`` the fraction of layers that keep their own KV (cross-layer sharing);
- ``bytes_per_value`` the KV dtype's payload plus its per-group scale overhead;
- ``entries_g(n) = n`` for full layers, ``min(n, window)`` for sliding-window layers, and with
  windowed compression ``r + ceil((n - r) / w)`` beyond a full-resolution recent window ``r``.

This is the product's ``cache = 2 · L_eff · n_eff · d_kv · bytes · B``. Llama-3-70B in bf16:
``2 · 80 · 8 · 128 · 2 = 327,680`` bytes per token.

Paged allocation rounds each group's entries up to whole blocks of ``block_tokens``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from functools import cache

from simulator.errors import ConfigError, is_whole, must, shown
from simulator.models import MODEL_FILE, ModelSpec, dtype, get_model, kv_dtypes, must_model

DEFAULT_BLOCK_TOKENS = 16
BASELINE_DTYPE = "bf16"
MLA_RETROFIT_MODEL = "DeepSeek-V3"
"""The catalog model whose latent dims an ``mla`` retrofit of a GQA/MHA model stores (`mla_retrofit_dims`): a
modelling choice, not a fact about the model retrofitted (DeepSeek's own MLA, the design MHA2MLA, the retrofit
``simulator/data/levers.toml`` prices, carries over to other models; ``mla:N`` takes another rank). The figures
are that model's in ``simulator/data/models.toml``, each from its config.json."""


@cache
def mla_retrofit_dims() -> tuple[int, int]:
    """``(kv_lora_rank, qk_rope_head_dim)`` of `MLA_RETROFIT_MODEL` in the shipped model catalog (DeepSeek-V3's
    config.json: 512 and 64): the latent an ``mla`` layout stores per token and layer on a model without one,
    ``mla`` alone its rank and every retrofit its rope dims (helper-173: they were constants here). The catalog
    checks them as any model's (`ModelSpec`: an MLA model's kv_lora_rank >= 1, its rope dim >= 0); a catalog whose
    model is no MLA model is a `ConfigError` naming the file and the model."""
    try:
        m = get_model(MLA_RETROFIT_MODEL)
    except ConfigError as exc:
        raise ConfigError(f"the 'mla' retrofit's latent dims (simulator.kv.MLA_RETROFIT_MODEL, from {MODEL_FILE}): "
                          f"{exc}") from None
    if m.attention != "mla":
        raise ConfigError(f"{MODEL_FILE}: model.{MLA_RETROFIT_MODEL}.attention: must be 'mla', the latent an 'mla' "
                          f"retrofit stores (got {m.attention!r})")
    return m.kv_lora_rank, m.qk_rope_head_dim


def _retrofit_rank() -> int:
    """An ``mla`` layout's rank by default: `mla_retrofit_dims`' rank."""
    return mla_retrofit_dims()[0]


@dataclass(frozen=True, slots=True, kw_only=True)
class KVLayout:
    """A composition of KV layout levers; the default is the model as it ships (bf16).

    Parameters
    ----------
    attention : "native" | "mha" | "mqa" | "mla" | "gqa"
        ``native`` keeps the model's own attention; ``mha``/``mqa``/``gqa`` set the KV heads
        (``gqa`` needs ``kv_heads``); ``mla`` stores a latent of ``mla_rank + mla_rope`` values
        (the model's own dims when it is an MLA model: another rank there is an error, not ignored).
    mla_rank, mla_rope : int | None
        An ``mla`` layout's latent dims; each not given is `mla_retrofit_dims`' (DeepSeek-V3's 512 and 64),
        read from the model catalog when such a layout is made. None on every other layout: only an ``mla``
        layout reads the catalog for them (helper-176: every layout did, so a catalog without DeepSeek-V3
        failed ``--layout native``), and two layouts that differ only in dims they do not use are equal.
    own_layer_fraction : float
        Cross-layer sharing: the fraction of layers that keep their own KV, in (0, 1].
    kv_dtype : str
        Storage format of KV values (see ``simulator/data/kv_dtypes.toml``).
    compress_ratio, compress_recent_tokens : int
        Windowed sequence compression: one entry per ``compress_ratio`` tokens beyond a
        full-resolution window of the most recent ``compress_recent_tokens``. 1 = off.
    use_sliding_window : bool
        Honour the model's sliding-window layers (KV capped at the window).
    """

    attention: str = "native"
    kv_heads: int = 0
    mla_rank: int | None = None
    mla_rope: int | None = None
    own_layer_fraction: float = 1.0
    kv_dtype: str = BASELINE_DTYPE
    compress_ratio: int = 1
    compress_recent_tokens: int = 4096
    use_sliding_window: bool = True

    def __post_init__(self) -> None:
        w = "KVLayout"
        kinds = ("native", "mha", "mqa", "gqa", "mla")
        must(self.attention in kinds, w, "attention", f"one of {', '.join(kinds)}", self.attention)
        if self.attention == "gqa":
            must(self.kv_heads >= 1, w, "kv_heads", ">= 1 with attention='gqa'", self.kv_heads)
        must(0 < self.own_layer_fraction <= 1, w, "own_layer_fraction", "in (0, 1]", self.own_layer_fraction)
        must(self.kv_dtype in kv_dtypes(), w, "kv_dtype", f"one of {', '.join(kv_dtypes())}", self.kv_dtype)
        must(self.compress_ratio >= 1, w, "compress_ratio", ">= 1", self.compress_ratio)
        must(self.compress_recent_tokens >= 0, w, "compress_recent_tokens", ">= 0", self.compress_recent_tokens)
        if self.attention != "mla":  # dims given are checked, then dropped (frozen: set as __init__ does)
            must(self.mla_rank is None or self.mla_rank >= 1, w, "mla_rank", ">= 1", self.mla_rank)
            must(self.mla_rope is None or self.mla_rope >= 0, w, "mla_rope", ">= 0", self.mla_rope)
            object.__setattr__(self, "mla_rank", None)
            object.__setattr__(self, "mla_rope", None)
            return
        rank, rope = self.mla_rank, self.mla_rope
        if rank is None or rope is None:
            retrofit_rank, retrofit_rope = mla_retrofit_dims()
            rank = retrofit_rank if rank is None else rank
            rope = retrofit_rope if rope is None else rope
            object.__setattr__(self, "mla_rank", rank)
            object.__setattr__(self, "mla_rope", rope)
        must(rank >= 1, w, "mla_rank", ">= 1", rank)
        must(rope >= 0, w, "mla_rope", ">= 0", rope)

    @property
    def latent_dims(self) -> tuple[int, int]:
        """``(mla_rank, mla_rope)`` of an ``mla`` layout (`ConfigError` on any other: it stores no latent)."""
        rank, rope = self.mla_rank, self.mla_rope
        if rank is None or rope is None:
            raise ConfigError(f"layout {self.label!r}: stores no latent (attention={self.attention!r}, not 'mla')")
        return rank, rope

    @property
    def label(self) -> str:
        """A short name, the inverse of `parse_layout` (``native``, ``mla+fp8``, ...)."""
        parts = []
        if self.attention == "gqa":
            parts.append(f"gqa:{self.kv_heads}")
        elif self.attention == "mla" and self.mla_rank != _retrofit_rank():
            parts.append(f"mla:{self.mla_rank}")
        elif self.attention != "native":
            parts.append(self.attention)
        if self.own_layer_fraction != 1.0:
            parts.append(f"cross-layer:{self.own_layer_fraction:g}")
        if self.kv_dtype != BASELINE_DTYPE:
            parts.append(self.kv_dtype)
        if self.compress_ratio > 1:
            parts.append(f"compress:{self.compress_ratio}:{self.compress_recent_tokens}")
        if not self.use_sliding_window:
            parts.append("no-sliding")
        return "+".join(parts) or "native"


LEVERS = ("native, mha, mqa, gqa:N, mla[:rank], cross-layer[:fraction], compress[:ratio[:recent]], no-sliding, "
          "or a KV dtype (bf16, fp16, fp8, int8, int4, fp4)")
_FAMILY = {"mha": "attention", "mqa": "attention", "gqa": "attention", "mla": "attention",
           "cross-layer": "cross-layer", "compress": "compress", "no-sliding": "no-sliding"}
_ARGS = {"native": 0, "mha": 0, "mqa": 0, "no-sliding": 0, "gqa": 1, "mla": 1, "cross-layer": 1, "compress": 2}


def _whole(text: str, raw: str, arg: str, minimum: int, what: str) -> int:
    """A lever's integer parameter `what` (``gqa:2.5`` is refused, not run as ``gqa:2``)."""
    try:
        x = float(arg)
    except ValueError:
        x = math.nan
    if not (math.isfinite(x) and x == int(x) and x >= minimum):
        lever = f"{raw!r}: " if raw != text else ""  # (a layout of one lever is named once)
        raise ConfigError(f"layout {shown(text)}: {lever}{what} must be an integer >= {minimum} (got {arg!r})")
    return int(x)


def lever_parts(text: str, what: str, allowed: str) -> list[str]:
    """The ``+``-joined levers of `text` (a layout, a strategy set), each stripped; an empty one
    (an empty `text`, a leading, trailing or doubled ``+``) is a `ConfigError` naming `text`
    and the `allowed` levers: left out, it would silently mean ``native``."""
    parts = [p.strip() for p in str(text).split("+")]
    if not all(parts):
        raise ConfigError(f"{what} {shown(text)}: has an empty lever; give lever[+lever...], levers: {allowed}")
    return parts


def lever_family(part: str) -> str:
    """The family of one ``+``-part of a layout (``fp8`` -> ``dtype``, ``gqa:4`` -> ``attention``,
    ``cross-layer:0.5`` -> ``cross-layer``, ``native`` -> ``native``): a layout sets each family once
    (`parse_layout`); ``native`` changes nothing, so it joins any."""
    name = part.strip().split(":")[0]
    return _FAMILY.get(name, "native" if name == "native" else "dtype")


def _retention_hint(name: str, text: str) -> str:
    """Where a retention policy named as a lever of the layout `text` goes instead: `text` itself, as a strategy set
    of ``kvsim compare --strategy`` (``gqa:2+h2o``); none for any other name."""
    from simulator.engine.retention import retention_names

    if name not in retention_names():
        return ""
    return f" (a retention policy: kvsim compare --strategy takes it, as {shown(str(text))})"


def parse_layout(text: str) -> KVLayout:
    """Parse ``lever[+lever...]``: ``native``, ``mha``, ``mqa``, ``gqa:N``, ``mla[:rank]``,
    ``cross-layer[:fraction]`` (default 0.5), a KV dtype (``fp8``, ``int4``, ...),
    ``compress[:ratio[:recent]]`` (default 8 and 4096), ``no-sliding``.

    Each family appears once: ``fp8+int4`` or ``mla+gqa:4`` is an error, not "the last wins". ``native`` is the
    model as it ships, a lever that changes nothing: ``native+mla`` is ``mla`` (a base layout plus a lever, as
    a notebook composes them), and the label says what runs.
    Integer parameters must be whole numbers, the fraction a finite number in (0, 1]. An empty
    lever (``""``, ``"+"``, ``"fp8+"``) is an error too, not ``native``.
    """
    layout = KVLayout()
    seen: dict[str, str] = {}
    for raw in lever_parts(text, "layout", LEVERS):
        name, *args = raw.split(":")
        family = lever_family(raw)
        if family == "dtype" and name not in kv_dtypes():  # (mxfp4 and w4a16 are weight formats only)
            raise ConfigError(f"layout {shown(text)}: unknown lever {shown(name)}{_retention_hint(name, text)}; "
                              f"valid: {LEVERS}")
        if family != "native" and family in seen:  # the same lever twice is no conflict (it read "'fp8' conflicts
            # with 'fp8'", helper-197): said as the strategy sets say it
            raise ConfigError(f"layout {shown(text)}: " + (
                f"{raw!r} is given twice (each lever once)" if seen[family] == raw else
                f"{raw!r} conflicts with {seen[family]!r} (one {family} lever at most)"))
        seen[family] = raw
        if len(args) > _ARGS.get(name, 0):
            raise ConfigError(f"layout {shown(text)}: {raw!r} takes at most {_ARGS.get(name, 0)} parameter(s); "
                              f"levers: {LEVERS}")
        try:
            if name == "native":
                continue
            if name in ("mha", "mqa"):
                layout = replace(layout, attention=name)
            elif name == "gqa":
                if not args:
                    raise ConfigError(f"layout {shown(text)}: 'gqa' needs its KV heads, as gqa:N")
                layout = replace(layout, attention="gqa", kv_heads=_whole(text, raw, args[0], 1, "gqa:N's KV heads N"))
            elif name == "mla":
                rank = _whole(text, raw, args[0], 1, "mla:rank's latent rank") if args else None  # None: the retrofit's
                layout = replace(layout, attention="mla", mla_rank=rank)
            elif name == "cross-layer":
                try:
                    f = float(args[0]) if args else 0.5
                except ValueError:
                    f = math.nan
                if not 0 < f <= 1:  # NaN fails too
                    raise ConfigError(f"layout {shown(text)}: {raw!r} needs a fraction of layers in (0, 1] "
                                      f"(got {args[0]!r})")
                layout = replace(layout, own_layer_fraction=f)
            elif name == "compress":
                ratio = _whole(text, raw, args[0], 2, "compress:w:r's ratio w") if args else 8  # (1: none)
                recent = (_whole(text, raw, args[1], 0, "compress:w:r's full-resolution window r") if len(args) > 1
                          else 4096)
                layout = replace(layout, compress_ratio=ratio, compress_recent_tokens=recent)
            elif name == "no-sliding":
                layout = replace(layout, use_sliding_window=False)
            else:  # a KV dtype (an unknown name was refused above)
                layout = replace(layout, kv_dtype=name)
        except ConfigError as exc:
            msg = str(exc)
            raise ConfigError(msg if msg.startswith("layout ") else f"layout {shown(text)}: {msg}") from None
    return layout


def compresses(layout: KVLayout, kv_tokens: int) -> bool | None:
    """Whether `layout`'s compression (``compress:w:r``) compresses any of a sequence holding `kv_tokens` tokens
    of KV: those past its ``r`` most recent, which it keeps whole (``r = 0``: every one); None for a layout with
    no compression. The test `simulator.compare.compressed_share` and `idle_compression` make, and the engine's
    records make inline (``prompt + output − evicted > r + 1``, the same) for the quality debit
    (`simulator.levers.window_debit_points`)."""
    if layout.compress_ratio <= 1:
        return None
    return kv_tokens > layout.compress_recent_tokens


def idle_compression(layout: KVLayout, context_tokens: int) -> str:
    """A note where `layout`'s windowed compression keeps all of a `context_tokens` sequence whole (its recent
    window is at least that long), so it saves nothing there; else ``""``."""
    r = layout.compress_recent_tokens
    if compresses(layout, context_tokens) is not False:
        return ""
    return (f"compress:{layout.compress_ratio}:{r} keeps the most recent {r:,} tokens whole: at {context_tokens:,} "
            "tokens it compresses nothing")


def idle_sliding(model: ModelSpec, layout: KVLayout) -> str:
    """A note where `layout` turns off sliding windows (``no-sliding``) on a `model` that has no sliding-window
    layer (every one of its ``n_layers`` global: Llama-3.1-8B), so it changes nothing: the model as it ships, as
    ``mla`` on an MLA model is (`simulator.levers.layout_levers`: no lever); else ``""`` (helper-186: it was taken
    without a word, and ``kvsim compare`` ran ``native,no-sliding`` as two sets)."""
    if layout.use_sliding_window or model.n_global_layers < model.n_layers:
        return ""
    return (f"{model.key} has no sliding-window layers (all {model.n_layers} attend to the whole context), so "
            "no-sliding changes nothing: the KV is the same without it")


def values_per_token_per_layer(model: ModelSpec, layout: KVLayout) -> int:
    """Values one layer stores per token: ``n_kv · (d_k + d_v)`` or ``kv_lora_rank + rope``."""
    d_kv = model.head_dim + model.value_head_dim
    match layout.attention:
        case "native":
            if model.attention == "mla":
                return model.kv_lora_rank + model.qk_rope_head_dim
            return model.n_kv_heads * d_kv
        case "mha":
            return model.n_heads * d_kv
        case "mqa":
            return d_kv
        case "gqa":
            must(model.n_heads % layout.kv_heads == 0, f"layout {layout.label!r}", "kv_heads",
                 f"a divisor of {model.key}'s n_heads={model.n_heads}", layout.kv_heads)
            return layout.kv_heads * d_kv
        case _:  # mla
            if model.attention == "mla":
                # an MLA model keeps its own latent: a rank that differs would be computed as the model's
                must(layout.mla_rank in (_retrofit_rank(), model.kv_lora_rank), f"layout {layout.label!r}", "mla_rank",
                     f"{model.key}'s own kv_lora_rank={model.kv_lora_rank} (an MLA model keeps its latent; "
                     "give 'mla')", layout.mla_rank)
                return model.kv_lora_rank + model.qk_rope_head_dim
            return sum(layout.latent_dims)


def own_layers(model: ModelSpec, layout: KVLayout) -> int:
    """Layers that store their own KV: ``ceil(L · own_layer_fraction)``, at least one (a fraction that
    keeps no layer is an error, not a cache of 0 bytes per token)."""
    n = math.ceil(model.n_layers * layout.own_layer_fraction - 1e-9)
    if n < 1:
        f = layout.own_layer_fraction
        raise ConfigError(f"layout 'cross-layer:{f:g}': must keep at least one of {model.key}'s {model.n_layers} "
                          f"layers, a fraction >= {1 / model.n_layers:.4g} (got {f:g})")
    return n


def check_layout(model: ModelSpec, layout: KVLayout) -> KVLayout:
    """`layout` if `model` can take it (a GQA lever's KV heads divide its query heads, an MLA model keeps its own
    latent rank, cross-layer sharing keeps a layer), else its `ConfigError`: for a command to say at its option as
    soon as the model is known (helper-150: `kvsim calc --layout gqa:3` said it at no option): its bytes a token,
    which those rules decide (`bytes_per_token`)."""
    bytes_per_token(model, layout)
    return layout


def check_layout_arg(layout: KVLayout | None, where: str) -> KVLayout:
    """`layout` as an API function `where` takes it: a `KVLayout`, or None for the model as it ships. A layout's
    text is refused, as `EngineConfig` refuses it (helper-159: ``"fp8"`` failed as an AttributeError)."""
    must(layout is None or isinstance(layout, KVLayout), where, "layout",
         "a KVLayout or None, e.g. parse_layout('fp8')", layout)
    return layout or KVLayout()


def bytes_per_token(model: ModelSpec, layout: KVLayout | None = None) -> float:
    """Bytes one token adds to the cache when every layer holds it (no window caps).

    ``ceil(L·f) · values_per_token_per_layer · bytes_per_value``; Llama-3-70B bf16: 327,680.
    """
    must_model(model, "bytes_per_token")
    layout = check_layout_arg(layout, "bytes_per_token")
    per_layer = values_per_token_per_layer(model, layout) * dtype(layout.kv_dtype).effective_bytes
    return own_layers(model, layout) * per_layer


def _entries(n: int, window: int, layout: KVLayout) -> int:
    kept = min(n, window) if window else n
    r, w = layout.compress_recent_tokens, layout.compress_ratio
    if w > 1 and kept > r:
        return r + math.ceil((kept - r) / w)
    return kept


def _groups(model: ModelSpec, layout: KVLayout, layers: tuple[int, int] | None = None) -> list[tuple[int, int]]:
    """(layers, window) per layer group of the layers ``[a, b)`` (default all); window 0 = full context.

    Layer ``i`` is global when ``(i + 1) % sliding_window_pattern == 0``, so ``[a, b)`` holds
    ``floor(b / p) − floor(a / p)`` global layers.
    """
    a, b = layers or (0, model.n_layers)
    if not (model.sliding_window and layout.use_sliding_window):
        return [(b - a, 0)]
    p = model.sliding_window_pattern
    g = b // p - a // p if p else 0
    return [(g, 0), (b - a - g, model.sliding_window)]


def sequence_bytes(model: ModelSpec, layout: KVLayout, context_tokens: int, block_tokens: int = 0,
                   layers: tuple[int, int] | None = None) -> float:
    """KV bytes of one sequence of `context_tokens`; with `block_tokens` > 0, as paged blocks;
    with `layers` ``(a, b)``, of the layers ``[a, b)`` only (a pipeline stage's).

    ``Σ_groups L_g · entries_g(n) · values · bytes_per_value · ceil(L·f)/L``
    """
    must(context_tokens >= 0, "sequence_bytes", "context_tokens", ">= 0", context_tokens)
    per_layer_entry = values_per_token_per_layer(model, layout) * dtype(layout.kv_dtype).effective_bytes
    total = 0.0
    for group_layers, window in _groups(model, layout, layers):
        e = _entries(context_tokens, window, layout)
        if block_tokens:
            e = math.ceil(e / block_tokens) * block_tokens
        total += group_layers * e
    return total * per_layer_entry * own_layers(model, layout) / model.n_layers


@dataclass(frozen=True, slots=True, kw_only=True)
class KVFootprint:
    """What `footprint` returns: bytes at one context and batch, and each lever's factor."""

    model: str
    layout: str
    context_tokens: int
    batch: int
    block_tokens: int
    bytes_per_token: float
    sequence_bytes: float
    sequence_bytes_paged: float
    batch_bytes: float
    batch_bytes_paged: float
    mha_bf16_batch_bytes: float
    factors: dict[str, float] = field(default_factory=dict)

    @property
    def paging_waste_bytes(self) -> float:
        return self.batch_bytes_paged - self.batch_bytes


def footprint(model: ModelSpec, layout: KVLayout | None, context_tokens: int, batch: int = 1,
              block_tokens: int = DEFAULT_BLOCK_TOKENS) -> KVFootprint:
    """Bytes of a batch of `batch` sequences of `context_tokens`, with each lever's factor.

    Factors telescope from an MHA, bf16, all-layers, full-context baseline: each lever's
    factor is bytes with it applied over bytes with the previous levers only, so the
    product of the factors equals ``batch_bytes / mha_bf16_batch_bytes`` exactly. `context_tokens`,
    `batch` and `block_tokens` are integers >= 1 (as ``kvsim calc`` takes them).
    """
    must_model(model, "footprint")
    layout = check_layout_arg(layout, "footprint")
    for key, value in (("context_tokens", context_tokens), ("batch", batch), ("block_tokens", block_tokens)):
        must(is_whole(value, minimum=1), "footprint", key, "an integer >= 1", value)
    values_per_token_per_layer(model, layout)  # refused under its own name, not a step's ('gqa:3+no-sliding')
    steps = [
        ("baseline", KVLayout(attention="mha", use_sliding_window=False)),
        ("attention", replace(layout, own_layer_fraction=1.0, kv_dtype=BASELINE_DTYPE, compress_ratio=1,
                              use_sliding_window=False)),
        ("cross-layer", replace(layout, kv_dtype=BASELINE_DTYPE, compress_ratio=1, use_sliding_window=False)),
        ("kv-dtype", replace(layout, compress_ratio=1, use_sliding_window=False)),
        ("sliding-window", replace(layout, compress_ratio=1)),
        ("compression", layout),
    ]
    sizes = [sequence_bytes(model, lay, context_tokens) for _, lay in steps]
    factors = {name: (sizes[i] / sizes[i - 1] if sizes[i - 1] else 1.0)
               for i, (name, _) in enumerate(steps) if i > 0}
    seq = sizes[-1]
    paged = sequence_bytes(model, layout, context_tokens, block_tokens)
    return KVFootprint(
        model=model.key, layout=layout.label, context_tokens=context_tokens, batch=batch,
        block_tokens=block_tokens, bytes_per_token=bytes_per_token(model, layout),
        sequence_bytes=seq, sequence_bytes_paged=paged, batch_bytes=seq * batch,
        batch_bytes_paged=paged * batch, mha_bf16_batch_bytes=sizes[0] * batch, factors=factors,
    )
