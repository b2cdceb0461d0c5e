"""The concurrency-collapse table: max streams per node as context grows, per layout and GPU.

Per parallelism plan, over a log grid of contexts from 1k to 1M tokens, on the binding GPU (see
`simulator.capacity`)::

    streams_on_nodes(n) = replicas · groups · min_s floor(kv_budget_s / kv_s(n))
    max_streams(n)      = streams_on_nodes(n) / nodes

``nodes`` are the nodes the plan's replicas tile: one, or those one replica spans. Streams per node are
that quotient exactly: TP16 over two 8×H100 nodes holds 11 streams of 128k of Llama-3-70B, 5.5 a node
(``kvsim fit``'s streams/node), not a floored 5. The column is whole numbers (int) when every plan in the
table sits on one node, and float when one spans several. ``bytes_per_token`` is a token's KV in all (every
GPU's share summed), and ``bytes_per_token_per_gpu`` what one GPU of the first stage holds of it
(`simulator.capacity.gpu_sequence_bytes` of one token): an eighth of it for GQA heads under TP8, all of it
for an MLA latent, which every attention rank holds whole. ``stream_bytes`` is a stream's KV in whole paged
blocks of ``block_tokens`` (what capacity reads), ``stream_bytes_unpaged`` the same without that rounding
(`simulator.kv.sequence_bytes` with no blocks: what the chart's legend says of a windowed layout). The table
is what the chart draws and what ``kvsim collapse`` writes as CSV.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
import pandas as pd

from hardware.catalog import Catalog
from simulator.capacity import DEFAULT_MEMORY_UTILIZATION, gpu_sequence_bytes, kv_budget, max_streams
from simulator.errors import DoesNotFitError, is_whole, must, must_differ, shown
from simulator.kv import DEFAULT_BLOCK_TOKENS, bytes_per_token, parse_layout, sequence_bytes
from simulator.models import ModelSpec, must_model
from simulator.placement import ParallelPlan

DEFAULT_LAYOUTS = ("native", "fp8", "cross-layer:0.5", "mla", "compress:8:4096", "mla+fp8")
DEFAULT_HARDWARE = ("8xH100", "8xH200", "8xB200")
STEPS_PER_OCTAVE = 4


def context_grid(min_tokens: int = 2**10, max_tokens: int = 2**20) -> np.ndarray:
    """Contexts ``2^(k/4)`` tokens from `min_tokens` to `max_tokens`; powers of two are exact."""
    lo, hi = np.log2(min_tokens), np.log2(max_tokens)
    exps = np.arange(lo * STEPS_PER_OCTAVE, hi * STEPS_PER_OCTAVE + 1) / STEPS_PER_OCTAVE
    return np.unique(np.round(2.0**exps).astype(np.int64))


def _whole(value: object, key: str) -> int:
    """`value` as an int where it is a whole number >= 1 (``1024`` or ``1024.0``), else `collapse`'s error at `key`."""
    whole = is_whole(value, minimum=1) or (isinstance(value, float | np.floating) and float(value).is_integer()
                                            and value >= 1)
    must(bool(whole), "collapse", key, "whole numbers >= 1" if key == "contexts" else "a whole number >= 1", value)
    return int(value)  # type: ignore[call-overload]


def collapse_table(catalog: Catalog, model: ModelSpec, hardware: Sequence[str] = DEFAULT_HARDWARE,
                   layouts: Sequence[str] = DEFAULT_LAYOUTS, contexts: np.ndarray | None = None,
                   tp: int | None = None, memory_utilization: float = DEFAULT_MEMORY_UTILIZATION,
                   block_tokens: int = DEFAULT_BLOCK_TOKENS, plans: Sequence[ParallelPlan] = (),
                   node_defaults: bool = False) -> pd.DataFrame:
    """One row per (hardware, plan, layout, context): the binding GPU's KV budget, bytes per stream,
    max streams per node (``streams_on_nodes / nodes``, see the module docstring), the nodes the plan's
    replicas tile and every replica's streams on them, and whether the context is beyond the model's max
    (memory alone: the model cannot read that far). `plans` default to one: ``tp`` GPUs (all of the node's when
    not given); `tp` is that default's alone, refused beside `plans`. `node_defaults` instead draws each kind under
    its own node's `default_plans` (TP over the node, DP attention too for an MLA model: ``kvsim collapse``'s
    default; helper-191: every kind was drawn under the first kind's), refused beside `plans` or `tp`. A kind and
    plan whose weights do not fit get no rows, and ``df.attrs["left_out"]`` says why (`DoesNotFitError`'s
    message); with none left, that error is raised."""
    must(isinstance(catalog, Catalog), "collapse", "catalog", "a Catalog, e.g. load_catalog()", catalog)
    must_model(model, "collapse")
    for key, names in (("hardware", hardware), ("layouts", layouts)):  # a string would be read letter by letter
        must(not isinstance(names, str), "collapse", key, f"a list of names, e.g. [{shown(names)}]", names)
    block_tokens = _whole(block_tokens, "block_tokens")
    must(len(hardware) >= 1, "collapse", "hardware", "at least one node kind, e.g. 8xH100 (comma-separated)",
         ",".join(hardware))
    must(len(layouts) >= 1, "collapse", "layouts", "at least one KV layout, e.g. native (comma-separated)",
         ",".join(layouts))
    nodes, parsed = [catalog.node(hw) for hw in hardware], [parse_layout(text) for text in layouts]
    # a kind, layout or plan named twice would give two rows per key (and the chart two lines for one)
    must_differ(hardware, [n.key for n in nodes], "collapse: hardware", "node kind")
    must_differ(layouts, [x.label for x in parsed], "collapse: layouts", "KV layout")
    # (helper-185: plans="tp8" or ["tp8"] failed as an AttributeError, 'str' object has no attribute 'label')
    must(isinstance(plans, Iterable) and not isinstance(plans, str), "collapse", "plans",
         "a list of ParallelPlan, e.g. [ParallelPlan(tp=8)] (empty: tp GPUs)", plans)
    plans = tuple(plans)
    for p in plans:
        must(isinstance(p, ParallelPlan), "collapse", "plans", "ParallelPlans, e.g. ParallelPlan(tp=8)", p)
    must_differ([p.label for p in plans], [p.label for p in plans], "collapse: plans", "plan")
    # (helper-188: tp=2 beside plans was ignored without a word, and tp=0 read as not given: TP over the node)
    must(tp is None or is_whole(tp, minimum=1), "collapse", "tp", "a whole number >= 1 (None: the node's GPUs)", tp)
    must(tp is None or not plans, "collapse", "tp", "None when plans are given (each ParallelPlan names its own tp: "
         f"plans=[ParallelPlan(tp={tp})] draws TP{tp})", tp)
    must(not node_defaults or (tp is None and not plans), "collapse", "node_defaults",
         "False beside plans or tp (it chooses each node kind's plans)", node_defaults)
    # each a whole number >= 1, as np.logspace gives them too (1000.5 tokens was read as 1,000; 1024.0 is 1,024)
    must(contexts is None or (isinstance(contexts, Iterable) and not isinstance(contexts, str)), "collapse", "contexts",
         "a list of context lengths, e.g. [4096] (None: 1k to 1M)", contexts)
    contexts = context_grid() if contexts is None else np.array([_whole(n, "contexts") for n in contexts])
    # (helper-159: none at all failed as an IndexError)
    must(len(contexts) >= 1, "collapse", "contexts", "at least one context length, e.g. [4096] (None: 1k to 1M)",
         [int(n) for n in contexts])
    rows = []
    left_out: list[str] = []
    for node in nodes:
        chosen = plans or (default_plans(node.gpus, model) if node_defaults else
                           [ParallelPlan(tp=node.gpus if tp is None else tp)])
        for plan in chosen:
            try:
                budget = kv_budget(node, model, memory_utilization=memory_utilization, plan=plan)
            except DoesNotFitError as exc:  # the other kinds and plans still answer; all left out is an error
                left_out.append(str(exc))
                continue
            for layout in parsed:
                for n in contexts:
                    streams = max_streams(budget, model, layout, int(n), block_tokens)  # on budget.nodes
                    rows.append((node.key, plan.label, layout.label, int(n), budget.kv_bytes / budget.nodes,
                                 budget.stage_kv_bytes(0), bytes_per_token(model, layout),
                                 gpu_sequence_bytes(budget, model, layout, 1, 0),
                                 sequence_bytes(model, layout, int(n), block_tokens),
                                 sequence_bytes(model, layout, int(n)), streams, budget.nodes,
                                 streams, int(n) > model.max_context_tokens))
    if not rows:  # the first reason whole, then how many more (the line is cut past `MAX_MESSAGE_CHARS`)
        n = len(left_out) - 1
        more = (f" (and {n} more kind{'s' * (n > 1)} or plan{'s' * (n > 1)} that do{'es' * (n == 1)} not fit)"
                if n else "")
        raise DoesNotFitError(f"no node kind or plan fits: {left_out[0]}{more}")
    df = pd.DataFrame(rows, columns=["hardware", "plan", "layout", "context_tokens", "kv_budget_bytes",
                                     "kv_budget_bytes_per_gpu", "bytes_per_token", "bytes_per_token_per_gpu",
                                     "stream_bytes", "stream_bytes_unpaged", "max_streams", "nodes",
                                     "streams_on_nodes",
                                     "beyond_max_context"])
    if (df["nodes"] > 1).any():  # a plan over several nodes: its per-node figure is a quotient, kept exact
        df["max_streams"] = df["streams_on_nodes"] / df["nodes"]  # (helper-172: int() read TP16's 5.5 as 5)
    df.attrs["left_out"] = left_out  # why a kind or plan has no rows: its weights do not fit
    return df


def streams_text(streams: float, *, grouped: bool = True) -> str:
    """Streams per node as the chart's box quotes them: ``1,302`` whole, ``5.5`` a quotient (one decimal, as
    ``kvsim fit``'s streams/node; a plan over three nodes holding 11 reads ``3.7``); under one stream, three
    significant figures (``0.0156``: TP64 over 64 1xH100 nodes holding one 1M-token stream of Llama-3.1-405B in fp8
    read ``0.0`` beside the table's ``0`` for no stream, 0.75 read ``0.8``). ``grouped=False`` leaves out
    the thousands separator, as ``kvsim collapse``'s table prints every count (``1302``, whole or not: a table
    with a multi-node plan's quotients printed ``1,302`` where one without printed ``1302``)."""
    group = "," if grouped else ""
    if float(streams).is_integer():
        return f"{streams:{group}.0f}"
    return f"{streams:.3g}" if abs(streams) < 1 else f"{streams:{group}.1f}"


def default_plans(node_gpus: int, model: ModelSpec) -> list[ParallelPlan]:
    """The plans a collapse study draws by default: TP over the node, and for an MLA model (whose
    latent every TP rank holds whole) DP attention too, with EP for its experts, on a node of more than one GPU
    (DP attention over one GPU is TP1, as `placement.candidate_plans` has it; helper-164)."""
    plans = [ParallelPlan(tp=node_gpus)]
    if model.attention == "mla" and node_gpus > 1:
        ep = node_gpus if model.is_moe and model.n_experts % node_gpus == 0 else 1
        plans.append(ParallelPlan(tp=node_gpus, dp_attention=True, ep=ep))
    return plans
