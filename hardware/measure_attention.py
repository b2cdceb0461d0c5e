"""Measure attention prefill and decode times on this machine's GPU; write calibration rows.

Needs PyTorch with CUDA (not a kvsim dependency). Times one layer's
``torch.nn.functional.scaled_dot_product_attention`` for a model's head shapes, in a CUDA graph
with CUDA events (`graph_time_s`), and writes rows in the calibration format (`simulator/cost/calibrate.py`) with
phases ``attention_prefill`` and ``attention_decode``::

    python hardware/measure_attention.py --gpu H100 --model Llama-3.1-8B --out my_attention.csv
    kvsim calibrate my_attention.csv --free attn_compute_eff,decode_memory_eff --out my_params.toml

Decode is timed as one query token per sequence against a dense (unpaged) bf16 KV of
``context`` tokens, so it measures HBM streaming as the cost model sees it; a paged kernel
(vLLM, FlashInfer) will be somewhat slower.
"""

from __future__ import annotations

import argparse
import csv
import statistics
import sys
from collections.abc import Callable
from datetime import date
from functools import partial
from pathlib import Path

PREFILL_SHAPES = ((1, 1024), (1, 4096), (1, 16384), (4, 4096))  # (batch, prompt tokens)
DECODE_SHAPES = ((1, 4096), (16, 4096), (64, 4096), (16, 32768), (64, 16384))  # (batch, context tokens)
WARMUP, REPEATS, REPLAYS = 3, 10, 5


def graph_time_s(fn: Callable[[], object], repeats: int = REPEATS) -> float:
    """Seconds of one call of `fn`: `repeats` calls captured in one CUDA graph after `WARMUP` eager
    calls, the graph replayed `REPLAYS` times, timed with CUDA events; the median replay over `repeats`.

    A graph launches its calls at once, so the host's time to launch each (~20 µs from Python) never
    shows. A plain loop measured launches instead of short kernels: on an H200 (torch 2.11), decode of
    one sequence of 4,096 tokens timed 24.4 µs in a loop of calls and 9.8 µs in a graph."""
    import torch

    side = torch.cuda.Stream()  # warm-up and capture off the default stream, as CUDA graphs need
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(WARMUP):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
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


def measure(gpu: str, model_name: str) -> list[dict[str, object]]:
    """Rows for one model's head shapes (tp 1, bf16)."""
    import torch
    import torch.nn.functional as F

    from simulator.models import get_model

    m = get_model(model_name)
    h, kvh, d = m.n_heads, m.n_kv_heads, m.head_dim
    dev, dt = "cuda", torch.bfloat16
    name = torch.cuda.get_device_name()
    rows: list[dict[str, object]] = []

    def row(phase: str, batch: int, new_tokens: int, context: int, sec: float) -> None:
        rows.append(dict(gpu=gpu, model=m.key, tp=1, phase=phase, batch=batch, new_tokens=new_tokens,
                         context=context, measured_s=sec, tokens_per_s="",
                         source=f"hardware/measure_attention.py (CUDA graph) on {name}, torch {torch.__version__}, "
                                f"{date.today().isoformat()}"))

    for b, s in PREFILL_SHAPES:
        q = torch.randn(b, h, s, d, device=dev, dtype=dt)
        k = torch.randn(b, kvh, s, d, device=dev, dtype=dt)
        v = torch.randn_like(k)
        row("attention_prefill", b, s, 0,
            graph_time_s(partial(F.scaled_dot_product_attention, q, k, v, is_causal=True, enable_gqa=True)))
    for b, c in DECODE_SHAPES:
        q = torch.randn(b, h, 1, d, device=dev, dtype=dt)
        k = torch.randn(b, kvh, c, d, device=dev, dtype=dt)
        v = torch.randn_like(k)
        attend = partial(F.scaled_dot_product_attention, q, k, v, enable_gqa=True)
        row("attention_decode", b, 1, c, graph_time_s(attend))
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
    rows = rows_of()
    with out.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    print(f"wrote {len(rows)} rows to {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
