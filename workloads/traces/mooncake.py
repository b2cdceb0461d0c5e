"""Mooncake traces (Qin et al., FAST'25), streamed.

JSONL rows ``{"timestamp": ms, "input_length": n, "output_length": m, "hash_ids": [...]}``;
each hash id names one 512-token block of the prompt, chained (equal leading ids = shared
prefix). Segments: one per hash id, ``min(512, tokens left)`` tokens each, so that they
sum to ``input_length`` (ids past the prompt's end are dropped); tokens the ids do not
cover form one more segment of its own, id ``-(row number + 1)`` (a row without ``hash_ids``, or with
an empty list, is then a prompt that shares nothing: the format carries its sharing in them). Arrival times are
``(timestamp - first timestamp) / 1000`` seconds.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from itertools import repeat
from pathlib import Path
from typing import Any

from workloads.request import Request
from workloads.traces._rows import FieldError, as_float, as_int, check_on_error, get, guarded, text_lines
from workloads.workload import ReadStats, Workload

BLOCK_TOKENS = 512


def block_segments(hash_ids: list[int], input_length: int, unique_id: int) -> tuple[tuple[int, int], ...]:
    """Segments of a prompt of `input_length` tokens whose 512-token blocks are `hash_ids`.

    >>> block_segments([7, 8, 9], 1100, -1)
    ((7, 512), (8, 512), (9, 76))
    >>> block_segments([7], 600, -1)
    ((7, 512), (-1, 88))
    """
    full, rest = divmod(input_length, BLOCK_TOKENS)
    if len(hash_ids) > full:  # the ids cover the prompt: `full` whole blocks, then the next id's `rest` tokens
        blocks = tuple(zip(hash_ids[:full], repeat(BLOCK_TOKENS)))  # (in C: a day's trace reads 12M rows)
        return (*blocks, (hash_ids[full], rest)) if rest else blocks
    blocks = tuple(zip(hash_ids, repeat(BLOCK_TOKENS)))
    left = input_length - len(hash_ids) * BLOCK_TOKENS
    return (*blocks, (unique_id, left)) if left else blocks


def read_mooncake(path: str | Path, *, on_error: str = "stop") -> Workload:
    """A workload replaying a Mooncake JSONL trace (streamed, one line at a time)."""
    check_on_error(on_error)
    path = Path(path)
    source = f"mooncake:{path.name}"

    def rows() -> Iterator[tuple[int, str]]:
        with path.open(encoding="utf-8-sig") as f:
            for line_no, line in enumerate(text_lines(path, f), start=1):
                if line.strip():
                    yield line_no, line

    def run(stats: ReadStats) -> Iterator[Request]:
        first: list[float] = []

        def parse(n: int, line: str) -> Request:
            try:
                row: Any = json.loads(line)
            except RecursionError:
                raise FieldError("row", "a JSON object", "(nested too deeply)") from None
            except json.JSONDecodeError as e:
                raise FieldError("row", "a JSON object", f"{line.strip()[:40]}... ({e.msg})") from None
            if not isinstance(row, dict):
                raise FieldError("row", "a JSON object", row)
            t_ms = as_float(get(row, "timestamp"), "timestamp")
            prompt = as_int(get(row, "input_length"), "input_length", 1)
            output = as_int(get(row, "output_length"), "output_length", 1)
            hash_ids = row.get("hash_ids", [])
            # integers ≥ 0: JSON's ints are exactly `int` (true and false are `bool`), checked in C
            if not isinstance(hash_ids, list) or (
                    hash_ids and (not set(map(type, hash_ids)) <= {int} or min(hash_ids) < 0)):
                raise FieldError("hash_ids", "a list of integers >= 0", hash_ids)
            if not first:
                first.append(t_ms)
            if t_ms < first[0]:
                raise FieldError("timestamp", f">= the first row's ({first[0]!r})", t_ms)
            return Request(
                id=n, arrival_s=(t_ms - first[0]) / 1000.0, prompt_tokens=prompt, output_tokens=output,
                segments=block_segments(hash_ids, prompt, -(n + 1)), source=source,
            )

        yield from guarded(path, rows(), parse, stats, on_error, "timestamp")

    return Workload(run, name=path.name)
