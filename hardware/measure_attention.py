"""Measure attention prefill and decode times on this machine's GPU; write calibration rows.

Needs PyTorch with CUDA (not a kvsim dependency). Times one layer's
``torch.nn.functional.scaled_dot_product_attention`` for a model's head shapes, in a CUDA graph
with CUDA events (`graph_time_s`), and writes rows in the calibration format (`simulator/cost/calibrate.py`) with
phases ``attention_prefill`` and ``attention_decode``::

    python hardware/measure_attention.py --gpu H100 --model Llama-3.1-8B --out my_attention.csv
    kvsim calibrate my_attention.csv --free attn_compute_eff,decode_memory_eff --out my_params.toml

Decode is timed as one query token per sequence against a dense (unpaged) bf16 KV of
``context`` tokens, so it measures HBM streaming as the cost model sees it; a paged kernel
(vLLM, FlashInfer) will be somewhat slower. Each timed call reads inputs of its own, cycled through
copies past the L2 cache (`past_l2`), as a model's layers each read their own KV.
"""

from __future__ import annotations

import argparse
import csv
import itertools
import statistics
import sys
from collections.abc import Callable, Iterator
from datetime import date
from functools import partial
from pathlib import Path
from typing import Any

PREFILL_SHAPES = ((1, 1024), (1, 4096), (1, 16384), (4, 4096))  # (batch, prompt tokens)
DECODE_SHAPES = ((1, 4096), (16, 4096), (64, 4096), (16, 32768), (64, 16384))  # (batch, context tokens)
WARMUP, REPEATS, REPLAYS = 3, 10, 5
L2_MULTIPLE = 4  # the inputs one replay cycles through total at least this many L2 caches


def graph_time_s(fn: Callable[[], object], repeats: int = REPEATS) -> float:
    """Seconds of one call of `fn`: `repeats` calls captured in one CUDA graph after `WARMUP` eager
    calls, the graph replayed `REPLAYS` times, timed with CUDA events; the median replay over `repeats`.

    A graph launches its calls at once, so the host's time to launch each (~20 µs from Python) never
    shows. A plain loop measured launches instead of short kernels: on an H200 (torch 2.11), decode of
    one sequence of 4,096 tokens timed 24.4 µs in a loop of calls and 9.8 µs in a graph (a scratch run
    on 2026-12-04, the same K/V each call)."""
    import torch

    side = torch.cuda.Stream()  # warm-up and capture off the default stream, as CUDA graphs need
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(WARMUP):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=side):
        for _ in range(repeats):
            fn()
    graph.replay()
    times = []
    for _ in range(REPLAYS):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        torch.cuda.synchronize()
        times.append(float(start.elapsed_time(end)) / repeats / 1e3)
    return statistics.median(times)


def l2_bytes(gpu: str) -> int:
    """The L2 cache in bytes of the GPU this runs on: PyTorch's ``L2_cache_size``, else the catalog's
    ``l2_bytes`` for `gpu` (the kvsim key given as ``--gpu``, `hardware/gpus.toml`); a `ConfigError`
    naming both when neither says (no size is guessed: too small a guess would time calls whose
    inputs the L2 still holds)."""
    import torch

    from hardware.catalog import load_catalog
    from simulator.errors import ConfigError

    said = int(getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 0) or 0)
    if said > 0:
        return said
    try:
        known = load_catalog().gpu(gpu).l2_bytes
    except ConfigError:
        known = 0.0
    if known > 0:
        return int(known)
    raise ConfigError(f"--gpu {gpu!r}: PyTorch does not give this GPU's L2 cache size and hardware/gpus.toml has no "
                      f"l2_bytes for it; add l2_bytes (the datasheet's L2 in bytes) to a GPU entry of that name")


def past_l2(nbytes: int, l2: int, least: int = 1) -> tuple[int, int]:
    """``(copies, repeats)``: copies of inputs of `nbytes` that total at least `L2_MULTIPLE` L2 caches of
    `l2` bytes (`l2_bytes`), and at least `least`, so a call never finds its inputs in L2 as the one
    before left them, and the calls a graph captures for them: whole cycles through the copies,
    `REPEATS` or more, so that one replay's last call and the next replay's first read different copies."""
    copies = max(least, -(-L2_MULTIPLE * l2 // nbytes))
    return copies, copies * -(-REPEATS // copies)


def _attend(inputs: Iterator[tuple[Any, Any, Any]], **kwargs: Any) -> Any:
    """One layer's SDPA on the next ``(q, k, v)`` of `inputs`."""
    import torch.nn.functional as F

    q, k, v = next(inputs)
    return F.scaled_dot_product_attention(q, k, v, **kwargs)


def measure(gpu: str, model_name: str) -> list[dict[str, object]]:
    """Rows for one model's head shapes (tp 1, bf16)."""
    import torch

    from simulator.models import get_model

    m = get_model(model_name)
    h, kvh, d = m.n_heads, m.n_kv_heads, m.head_dim
    dev, dt = "cuda", torch.bfloat16
    name = torch.cuda.get_device_name()
    l2 = l2_bytes(gpu)
    rows: list[dict[str, object]] = []

    def row(phase: str, batch: int, new_tokens: int, context: int, sec: float) -> None:
        rows.append(dict(gpu=gpu, model=m.key, tp=1, phase=phase, batch=batch, new_tokens=new_tokens,
                         context=context, measured_s=sec, tokens_per_s="",
                         source=f"hardware/measure_attention.py (CUDA graph) on {name}, torch {torch.__version__}, "
                                f"{date.today().isoformat()}"))

    def timed(q_shape: tuple[int, ...], kv_shape: tuple[int, ...], **kwargs: Any) -> float:
        nbytes = (q_shape[0] * q_shape[1] * q_shape[2] + 2 * kv_shape[0] * kv_shape[1] * kv_shape[2]) * d * 2
        copies, repeats = past_l2(nbytes, l2)  # one call's q, k and v in bf16
        inputs = [(torch.randn(*q_shape, d, device=dev, dtype=dt), torch.randn(*kv_shape, d, device=dev, dtype=dt),
                   torch.randn(*kv_shape, d, device=dev, dtype=dt)) for _ in range(copies)]
        return graph_time_s(partial(_attend, itertools.cycle(inputs), enable_gqa=True, **kwargs), repeats)

    for b, s in PREFILL_SHAPES:
        row("attention_prefill", b, s, 0, timed((b, h, s), (b, kvh, s), is_causal=True))
    for b, c in DECODE_SHAPES:
        row("attention_decode", b, 1, c, timed((b, h, 1), (b, kvh, c)))
    return rows


def main(argv: list[str] | None = None) -> int:
    """Parse arguments, measure, write the CSV; returns an exit code."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--gpu", required=True, help="kvsim GPU key of this machine's GPU (H100, H200, ...)")
    ap.add_argument("--model", default="Llama-3.1-8B", help="model whose head shapes to time")
    ap.add_argument("--out", type=Path, default=Path("attention_calibration.csv"))
    args = ap.parse_args(argv)
    return write_measured("measure_attention", args.out, partial(measure, args.gpu, args.model))


def write_measured(script: str, out: Path, rows_of: Callable[[], list[dict[str, object]]]) -> int:
    """Measure (`rows_of`) and write the rows to `out` as CSV; returns an exit code: 2, after one line on
    stderr naming `script` and what is missing, without PyTorch or a CUDA GPU."""
    try:
        import torch
    except ImportError:
        print(f"{script}: PyTorch is not installed (pip install torch)", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print(f"{script}: no CUDA GPU visible", file=sys.stderr)
        return 2
    from simulator.errors import ConfigError

    try:
        rows = rows_of()
    except ConfigError as e:
        print(f"{script}: {e}", file=sys.stderr)
        return 2
    with out.open("w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    print(f"wrote {len(rows)} rows to {out}")
    return 0


if __name__ == "__main__":
    if not __package__:  # run as `python hardware/measure_attention.py`: kvsim from this checkout
        sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    raise SystemExit(main())
