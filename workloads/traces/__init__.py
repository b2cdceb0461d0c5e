"""Trace readers (streamed) and the writer of kvsim's own format.

`read_trace` detects the format from the first line (a JSON object or a CSV header), whatever the suffix:

- a CSV header with ``TIMESTAMP,ContextTokens,GeneratedTokens`` -> ``azure``
- a CSV header with ``Request tokens`` and ``Response tokens`` -> ``burstgpt``
- a CSV header or a JSON line with a ``segments`` column -> ``kvsim`` (our own format)
- a JSON line with ``input_length`` -> ``mooncake``

``format=`` overrides the detection.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Callable
from os import PathLike
from pathlib import Path

from simulator.errors import ConfigError, RuleError, must, shown
from simulator.files import shown_path
from workloads.traces._rows import first_text_line
from workloads.traces.azure import read_azure
from workloads.traces.burstgpt import read_burstgpt
from workloads.traces.mooncake import read_mooncake
from workloads.traces.native import read_native, write_workload
from workloads.workload import Workload

READERS: dict[str, Callable[..., Workload]] = {
    "azure": read_azure,
    "burstgpt": read_burstgpt,
    "kvsim": read_native,
    "mooncake": read_mooncake,
}


# what `detect_format` looks for, in order: a CSV header's columns, or a JSON line's keys
CSV_HEADERS: dict[str, tuple[str, ...]] = {
    "azure": ("TIMESTAMP", "ContextTokens", "GeneratedTokens"),
    "burstgpt": ("Request tokens", "Response tokens"),
    "kvsim": ("segments",),
}
JSON_KEYS: dict[str, tuple[str, ...]] = {"kvsim": ("segments",), "mooncake": ("input_length",)}


def detect_format(path: Path) -> str:
    """The trace format of `path`, from its first line (`JSON_KEYS` of a JSON object, else `CSV_HEADERS`; a
    ``.jsonl`` suffix only tries JSON first). Blank lines before a JSON line are passed over, as the JSON readers
    pass them (helper-185: a kvsim or Mooncake JSONL file opening with one was "unknown trace format (first line
    '')", where ``format="kvsim"`` read it); a CSV's header must be its first line."""
    try:
        with path.open(newline="", encoding="utf-8-sig") as f:
            first = f.readline(4096).strip()
            lead = first or first_text_line(iter(lambda: f.readline(4096), ""))
            if lead.startswith("{"):
                first = lead
    except UnicodeDecodeError as e:
        raise ConfigError(f"{path.name}: not UTF-8 text (byte {e.start}: {e.reason})") from None
    if "\x00" in first:  # a binary file (/proc/self/environ): say so, and echo none of it
        raise ConfigError(f"{path.name}: not a text file (it holds NUL bytes); a trace must be UTF-8 text")
    if path.suffix.lower() == ".jsonl" or first.startswith("{"):
        try:
            keys = set(json.loads(first)) if first else set()
        except (json.JSONDecodeError, TypeError, RecursionError):
            keys = set()
        for fmt, needed in JSON_KEYS.items():
            if set(needed) <= keys:
                return fmt
    if not first.startswith("{"):  # a CSV header, whatever the suffix says (an Azure CSV saved as .jsonl)
        header = {c.strip() for c in next(csv.reader([first]), [])}  # as `csv_rows` reads it: quotes, spaces
        for fmt, needed in CSV_HEADERS.items():
            if set(needed) <= header:
                return fmt
    heads = "; ".join(f"{fmt}: {', '.join(cols)}" for fmt, cols in CSV_HEADERS.items())
    lines = "; ".join(f"{fmt}: {', '.join(keys)}" for fmt, keys in JSON_KEYS.items())
    what = "empty file" if path.stat().st_size == 0 else f"unknown trace format (first line {shown(first[:40])})"
    raise ConfigError(f"{path.name}: {what}; a trace starts with a CSV header ({heads}) or a JSON line ({lines})")


def read_trace(path: str | Path, *, format: str | None = None, on_error: str = "stop") -> Workload:
    """A streamed workload from a trace file (format detected unless given)."""
    must(isinstance(path, str | PathLike), "read_trace", "path", "a trace file's path (a str or Path)", path)
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"read_trace: 'path' must be an existing file (got '{shown_path(path)}')")
    fmt = format if format is not None else detect_format(path)
    reader = READERS.get(fmt)
    if reader is None:
        raise RuleError("read_trace", "format", f"one of {', '.join(sorted(READERS))}", fmt)
    return reader(path, on_error=on_error)


__all__ = [
    "READERS",
    "detect_format",
    "read_azure",
    "read_burstgpt",
    "read_mooncake",
    "read_native",
    "read_trace",
    "write_workload",
]
