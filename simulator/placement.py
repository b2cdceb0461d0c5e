"""Where the weights and the KV live: a replica's parallelism plan and what each of its GPUs holds.

A replica runs ``tp`` GPUs per pipeline stage and ``pp`` stages (``tp · pp`` GPUs, on one node or
spanning several). Stage ``s`` owns the layers ``[a_s, b_s)`` (split as evenly as possible, the
stages before the last taking the remainder, as vLLM does: `stage_layers`), ``m_s`` of them MoE
layers (a model's dense layers come first). One GPU of stage ``s`` holds, in weight bytes::

    weights_s = bytes(attn) · L_s · ((attention − kv_proj − latent_proj) / tp_attn + kv_proj · h_gpu / h
                                     + latent_proj)
              + bytes(rest) · L_s · other / tp + bytes(dtype) · m_s · routed_experts / tp
              + bytes(outer) · ( [s = 0] · embeddings / tp_attn + [s = pp − 1] · lm_head / tp )

with ``outer = models.outer_weight_dtype(dtype)``: the embeddings and LM head of a quantised format
(fp8, fp4, mxfp4, w4a16) stay in bf16, as quantised checkpoints keep them; ``attn`` and ``rest`` are
``dtype``, or where a release keeps its attention apart (gpt-oss: bf16 beside mxfp4 experts) the
attention's format, and the rest's too when it is routers and norms (`models.attention_weight_dtype`,
`models.rest_weight_dtype`).
``kv_budget_s = hbm · memory_utilization − weights_s``. ``tp_attn`` is the attention's tensor parallelism: ``tp``,
or 1 under DP attention (MLA's down-projections ``latent_proj`` are whole on every rank, as
vLLM's replicated ``q_a_proj`` and ``kv_a_proj``), where each GPU runs attention for its own sequences
with every head and the whole attention weights, and the whole input embedding: SGLang's
``--enable-dp-attention`` (its ``VocabParallelEmbedding(enable_tp=not is_dp_attention_enabled())``), whose LM
head and dense MLPs stay split over the ``tp`` GPUs (by default; helper-155: the embedding was split too, which
overstated DeepSeek-V3's DP8 attention on 8×H200 at 32k by 8 streams). vLLM's DP ranks of TP1 hold their dense
MLPs and LM head whole as well: more weights a GPU than this plan, which does not model them.
Routed experts are split over the stage's ``tp`` GPUs by tensor (``ep = 1``) or expert
parallelism (``ep > 1``): the bytes per GPU are the same, the kernels and traffic differ
(`simulator.cost.step_model`). ``h`` is the layout's KV heads and ``h_gpu`` those one GPU holds:
``h / tp_attn`` when ``tp_attn ≤ h``, else 1 (a head replicated on ``tp_attn / h`` GPUs, as vLLM
does). An MLA latent is one shared vector per token: every attention rank holds all of it.

A sequence of ``n`` tokens costs on one GPU of stage ``s``::

    kv_s(n) = sequence_bytes(n, layers [a_s, b_s)) · share,    share = h_gpu / h, or 1 for a latent

and a replica holds ``groups · min_s floor(kv_budget_s / kv_s(n))`` sequences: capacity is the
binding GPU, not a pooled sum; ``groups = tp`` under DP attention (each GPU its own sequences),
else 1. DeepSeek-V3 (fp8) on 8×H200 at 32k: TP8 holds 18 sequences, DP8 attention 104.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from hardware.catalog import NodeSpec
from simulator.errors import ConfigError, RuleError, must, must_whole
from simulator.kv import KVLayout
from simulator.models import (
    ModelSpec,
    attention_weight_dtype,
    dtype,
    outer_weight_dtype,
    rest_weight_dtype,
    weight_dtypes,
)


@dataclass(frozen=True, slots=True, kw_only=True)
class ParallelPlan:
    """How one replica is split over GPUs.

    Parameters
    ----------
    tp : int
        GPUs per pipeline stage: the tensor-parallel group of the dense and MoE layers.
    pp : int
        Pipeline stages; a replica spans ``tp · pp`` GPUs.
    dp_attention : bool
        Attention data-parallel over the ``tp`` GPUs: each runs attention (all heads, whole
        attention weights) for its own sequences, which it alone holds the KV of.
    ep : int
        Expert parallelism of the routed experts (1: experts tensor-parallel over ``tp``).
    """

    tp: int = 8
    pp: int = 1
    dp_attention: bool = False
    ep: int = 1

    def __post_init__(self) -> None:
        w = "ParallelPlan"
        for f in ("tp", "pp", "ep"):  # a numpy integer is one (helper-185: "an integer >= 1 (got np.int64(2))")
            must_whole(self, w, f, 1, "an integer >= 1")
        must(isinstance(self.dp_attention, bool), w, "dp_attention", "true or false", self.dp_attention)
        must(self.tp % self.ep == 0, w, "ep", f"an integer >= 1 that divides tp={self.tp}", self.ep)

    @property
    def gpus(self) -> int:
        """GPUs of one replica: ``tp · pp``."""
        return self.tp * self.pp

    @property
    def attention_tp(self) -> int:
        """Tensor parallelism of attention: 1 under DP attention, else ``tp``."""
        return 1 if self.dp_attention else self.tp

    @property
    def kv_groups(self) -> int:
        """Independent KV pools of a replica: ``tp`` under DP attention (one per GPU), else 1."""
        return self.tp if self.dp_attention else 1

    @property
    def label(self) -> str:
        """``TP8``, ``TP8 PP2``, ``DP8-attention EP8``, ``TP8 EP8``."""
        head = f"DP{self.tp}-attention" if self.dp_attention else f"TP{self.tp}"
        return " ".join([head] + ([f"PP{self.pp}"] if self.pp > 1 else []) + ([f"EP{self.ep}"] if self.ep > 1 else []))


@dataclass(frozen=True, slots=True, kw_only=True)
class Stage:
    """One pipeline stage's layers and what one of its GPUs holds (bytes)."""

    first_layer: int
    layers: int
    moe_layers: int
    attention_bytes: float
    other_bytes: float
    expert_bytes: float
    embedding_bytes: float

    @property
    def layer_range(self) -> tuple[int, int]:
        return self.first_layer, self.first_layer + self.layers

    @property
    def weight_bytes(self) -> float:
        """Weight bytes on one GPU of the stage."""
        return self.attention_bytes + self.other_bytes + self.expert_bytes + self.embedding_bytes


def check_plan(model: ModelSpec, plan: ParallelPlan) -> None:
    """The rules a plan must meet for `model` (query heads split over the attention ranks,
    layers over the stages, experts over the EP ranks); raises `ConfigError` naming the rule."""
    w = f"plan {plan.label} for {model.key}"
    must(model.n_heads % plan.attention_tp == 0, w, "tp", f"a divisor of the {model.n_heads} query heads", plan.tp)
    must(plan.pp <= model.n_layers, w, "pp", f"<= the {model.n_layers} layers", plan.pp)
    if plan.ep > 1:
        must(model.is_moe, w, "ep", "1 for a dense model (expert parallelism needs MoE layers)", plan.ep)
        must(model.n_experts % plan.ep == 0, w, "ep", f"a divisor of the {model.n_experts} routed experts", plan.ep)


def kv_heads(model: ModelSpec, layout: KVLayout) -> int:
    """KV heads the layout stores per layer (0 for an MLA latent, which has none)."""
    if is_latent(model, layout):
        return 0
    return {"native": model.n_kv_heads, "mha": model.n_heads, "mqa": 1, "gqa": layout.kv_heads}[layout.attention]


def is_latent(model: ModelSpec, layout: KVLayout) -> bool:
    """Whether the layout caches an MLA latent (the model's own or a retrofit)."""
    return layout.attention == "mla" or (layout.attention == "native" and model.attention == "mla")


def idle_attention(model: ModelSpec, layout: KVLayout) -> str:
    """A note where `layout`'s attention lever spells out `model`'s own attention, so it changes nothing: ``mla`` on
    an MLA model (DeepSeek-V3: it keeps the model's latent, another rank is refused by `simulator.kv.check_layout`),
    or ``gqa:N``, ``mha`` or ``mqa`` storing ``kv_heads(model, layout) = n_kv`` heads on a model of ``n_kv`` KV
    heads (``gqa:8`` on Llama-3.1-8B); else ``""``. `as_run` runs such a layout as ``native``, as
    `simulator.kv.idle_sliding` notes ``no-sliding`` on a model without sliding-window layers."""
    lever = layout.label.split("+")[0]
    if layout.attention == "native":
        return ""
    if layout.attention == "mla":
        if model.attention != "mla":
            return ""
        return f"{model.key}'s own attention is MLA, so {lever} changes nothing: the KV is the same without it"
    if model.attention == "mla" or kv_heads(model, layout) != model.n_kv_heads:
        return ""
    return (f"{model.key} has {model.n_kv_heads} KV heads of its own, so {lever} changes nothing: the KV is the same "
            "without it")


def idle_levers(model: ModelSpec, layout: KVLayout) -> list[str]:
    """The notes of `layout`'s levers that change nothing on `model`, each a sentence: an attention lever that is the
    model's own (`idle_attention`), then ``no-sliding`` on a model without sliding-window layers
    (`simulator.kv.idle_sliding`); what ``--layout`` (calc, fit, collapse, cost), ``kvsim compare`` and a scenario's
    ``cache.layout`` say of them, and what `as_run` runs as ``native``."""
    from simulator.kv import idle_sliding

    return [note for note in (idle_attention(model, layout), idle_sliding(model, layout)) if note]


def as_run(model: ModelSpec, layout: KVLayout) -> KVLayout:
    """`layout` as it runs on `model`: an attention lever that spells out the model's own attention is ``native``
    (`idle_attention`: ``mla`` on DeepSeek-V3, whose latent it keeps; ``gqa:8`` on a model of 8 KV heads; ``mha`` on
    an MHA model), the same bytes and no lever (helper-180: ``native,mla`` on DeepSeek-V3 ran one set twice under two
    labels); so is ``no-sliding`` on a model with no sliding-window layer (`simulator.kv.idle_sliding`; helper-186).
    Two layouts whose ``as_run`` labels match draw one line and run one set (`kvsim compare`, `kvsim collapse`)."""
    from simulator.kv import idle_sliding

    if idle_sliding(model, layout):
        layout = replace(layout, use_sliding_window=True)
    if idle_attention(model, layout):
        layout = replace(layout, attention="native", kv_heads=0)
    return layout


def heads_phrase(model: ModelSpec, layout: KVLayout, attention_tp: int) -> str:
    """What one attention rank holds of the KV heads, in words: ``1 of 8 KV heads`` (`heads_per_gpu`), and where
    the ranks outnumber the heads, that each head is replicated: ``1 of 8 KV heads, each on 2 GPUs`` (TP16; helper-191:
    it read as a TP8 share, though the 16 GPUs hold two copies of every head)."""
    h = kv_heads(model, layout)
    said = f"{heads_per_gpu(model, layout, attention_tp)} of {h} KV heads"
    return said + (f", each on {attention_tp // h} GPUs" if h and attention_tp > h else "")


def heads_per_gpu(model: ModelSpec, layout: KVLayout, attention_tp: int) -> int:
    """KV heads one attention rank holds: ``h / tp_attn``, or 1 (replicated) when ``tp_attn > h``.

    vLLM's rule: ``h`` must divide by ``tp_attn`` or ``tp_attn`` by ``h``. A latent: 0 (see `kv_share`).
    """
    h = kv_heads(model, layout)
    if not h:
        return 0
    if attention_tp <= h:
        must(h % attention_tp == 0, f"{model.key} ({layout.label})", "tp", f"a divisor of its {h} KV heads "
             f"or a multiple of them", attention_tp)
        return h // attention_tp
    must(attention_tp % h == 0, f"{model.key} ({layout.label})", "tp", f"a multiple of its {h} KV heads "
         "or a divisor of them", attention_tp)
    return 1


def kv_share(model: ModelSpec, layout: KVLayout, attention_tp: int) -> float:
    """Fraction of a sequence's KV (of a stage's layers) one GPU holds: ``h_gpu / h``; 1 for a
    latent, which every attention rank holds whole."""
    h = kv_heads(model, layout)
    return 1.0 if not h else heads_per_gpu(model, layout, attention_tp) / h


def stage_layers(n_layers: int, pp: int) -> list[tuple[int, int]]:
    """``[a_s, b_s)`` per stage: ``n_layers // pp`` each, and the ``r = n_layers % pp`` left over one each to
    the ``r`` stages before the last (vLLM's `get_pp_indices`: the first stage holds the embeddings, the last
    the LM head). DeepSeek-V3's 61 layers over 4 stages: 15, 15, 16, 15 (helper-155: the first stages took
    them, 16, 15, 15, 15, putting the extra layer on the stage of the 3 dense layers, the lighter one)."""
    base, extra = divmod(n_layers, pp)
    bounds, a = [], 0
    for s in range(pp):
        b = a + base + (1 if pp - 1 - extra <= s < pp - 1 else 0)
        bounds.append((a, b))
        a = b
    return bounds


def stages(model: ModelSpec, plan: ParallelPlan, weight_dtype: str | None = None) -> tuple[Stage, ...]:
    """What one GPU of each stage holds (the module docstring's ``weights_s``)."""
    check_plan(model, plan)
    name = weight_dtype or model.weight_dtype
    must(name in weight_dtypes(), "weights", "weight_dtype", f"one of {', '.join(weight_dtypes())}", name)
    wb = dtype(name).effective_bytes
    ab = dtype(attention_weight_dtype(model, name)).effective_bytes  # wb, or gpt-oss's bf16 attention's
    rb = dtype(rest_weight_dtype(model, name)).effective_bytes  # wb, or gpt-oss's bf16 routers and norms
    ob = dtype(outer_weight_dtype(name)).effective_bytes  # the embeddings' and LM head's
    kv_proj = model.kv_projection_params
    h = model.n_kv_heads
    h_gpu = h // plan.attention_tp if plan.attention_tp <= h else 1
    latent = model.latent_projection_params
    attn_per_layer = (model.attention_params - kv_proj - latent) / plan.attention_tp + kv_proj * h_gpu / h + latent
    first_moe = model.n_layers - model.moe_layers
    head_params = model.embedding_params if model.tie_word_embeddings and plan.pp > 1 else model.lm_head_params
    out = []
    bounds = stage_layers(model.n_layers, plan.pp)
    for s, (a, b) in enumerate(bounds):
        moe = max(0, b - max(a, first_moe))
        embed = ((model.embedding_params / plan.attention_tp if s == 0 else 0.0)
                 + (head_params / plan.tp if s == len(bounds) - 1 else 0.0))
        out.append(Stage(
            first_layer=a, layers=b - a, moe_layers=moe, attention_bytes=(b - a) * attn_per_layer * ab,
            other_bytes=(b - a) * model.other_params_per_layer / plan.tp * rb,
            expert_bytes=moe * model.routed_expert_params / plan.tp * wb, embedding_bytes=embed * ob))
    return tuple(out)


@dataclass(frozen=True, slots=True, kw_only=True)
class Span:
    """How replicas sit on nodes: ``replicas`` replicas on every ``nodes`` nodes."""

    replicas: int
    nodes: int


def tiles_nodes(node_gpus: int, gpus: int) -> bool:
    """Whether replicas of `gpus` GPUs tile nodes of `node_gpus`: a divisor of a node or whole nodes."""
    return node_gpus % gpus == 0 if gpus <= node_gpus else gpus % node_gpus == 0


def span(node: NodeSpec, plan: ParallelPlan) -> Span:
    """A replica on part of a node (``node.gpus / gpus`` per node) or on several whole nodes
    (`tiles_nodes`).

    A replica over more than one NVLink domain crosses the nodes' NICs, which the catalog must name.
    """
    g = plan.gpus
    if g <= node.gpus:
        must(tiles_nodes(node.gpus, g), f"node {node.key}", "tp × pp", f"a divisor of the node's {node.gpus} GPUs "
             f"or a multiple of them", g)
        return Span(replicas=node.gpus // g, nodes=1)
    must(tiles_nodes(node.gpus, g), f"node {node.key}", "tp × pp", f"a multiple of the node's {node.gpus} GPUs "
         f"or a divisor of them", g)
    if g > node.domain_gpus and not node.nic_bytes_per_s:
        raise ConfigError(f"node {node.key}: a replica of {g} GPUs spans {g // node.gpus} nodes over the network, "
                          "but the catalog gives no 'nic_bytes_per_s' for it")
    return Span(replicas=1, nodes=g // node.gpus)


def candidate_plans(node: NodeSpec, model: ModelSpec, max_nodes: int = 2) -> list[ParallelPlan]:
    """The plans worth comparing for `model` on `node`: tensor parallelism over each divisor of the
    node's GPUs; DP attention over the node (with EP for an MoE model); and over up to `max_nodes`
    nodes, one TP group across them, and a TP group per node with one pipeline stage per node.
    Plans the model's shapes rule out (`check_plan`) are left out."""
    g = node.gpus
    ep = g if model.is_moe and model.n_experts % g == 0 else 1
    plans = [ParallelPlan(tp=t) for t in sorted((t for t in range(1, g + 1) if g % t == 0), reverse=True)]
    dp = g > 1  # DP attention over one GPU is TP1 (helper-155: 1xH100 listed both)
    if dp:
        plans.append(ParallelPlan(tp=g, dp_attention=True, ep=ep))
    for k in range(2, max_nodes + 1):
        plans += [ParallelPlan(tp=g * k), ParallelPlan(tp=g, pp=k)]
        if dp:
            plans.append(ParallelPlan(tp=g, pp=k, dp_attention=True, ep=ep))
    out = []
    for p in plans:
        try:
            check_plan(model, p)
        except ConfigError:
            continue
        out.append(p)
    return out


def parse_plan(text: str) -> ParallelPlan:
    """A plan from ``tpN[+ppN][+epN]`` or ``dpN[+ppN][+epN]`` (DP attention over N GPUs): ``tp8``,
    ``tp8+pp2``, ``dp8+ep8``, ``tp16``."""
    fields: dict[str, int | bool] = {}
    for raw in (p.strip() for p in text.strip().lower().split("+")):
        key, num = raw[:2], raw[2:]  # an empty part ("tp8+", "+tp8", "tp8++pp2") fails as no tpN/ppN/...
        # isdecimal, what int() reads (helper-191: isdigit let "tp²" through to int(), a traceback)
        if key not in ("tp", "dp", "pp", "ep") or not num.isdecimal() or key in fields or \
                (key in ("tp", "dp") and ("tp" in fields or "dp_attention" in fields)):
            raise ConfigError(f"plan {text!r}: {raw!r} is not one of tpN, dpN (DP attention over N GPUs), ppN, epN, "
                              "each at most once, joined by '+' (e.g. tp8, tp8+pp2, dp8+ep8)")
        if key == "dp":
            fields.update(tp=int(num), dp_attention=True)
        else:
            fields[key] = int(num)
    if "tp" not in fields:
        raise ConfigError(f"plan {text!r}: name its GPUs a stage with tpN or dpN (e.g. tp8, dp8+ep8)")
    try:
        return ParallelPlan(**fields)  # type: ignore[arg-type]
    except RuleError as exc:  # the part of the text that sets it: pp0 in "tp8+pp0", not ParallelPlan's field
        part = "tpN or dpN" if exc.key in ("tp", "dp_attention") else f"{exc.key}N"
        raise ConfigError(f"plan {text!r}: {exc.at(part)}") from None
