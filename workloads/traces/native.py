"""kvsim's own request format (CSV or JSONL), with a writer that round-trips exactly.

One row per request with every `Request` field::

    id,arrival_s,session_id,turn,prompt_tokens,output_tokens,output_segment_id,segments,cache_breakpoints,source
    0,0.25,3,0,1030,212,981,7:1000;981:30,1;2,chat-4k

``segments`` is ``id:tokens;id:tokens``; ``cache_breakpoints`` is ``k;k`` (may be empty).
Floats are written with ``repr`` (shortest round-tripping form), so reading back gives
equal `Request` objects. An ``id`` must be an integer >= 0, and is read as the row's place: ids
count the kept rows from 0, as every reader's and every replay window's, so each request has its
own (helper-179: two files concatenated repeat ids, and a run gave one request the other's
traffic class); `write_workload` numbers its rows so, and they read back unchanged. JSONL rows
carry the same keys (segments may also be a list of ``[id, tokens]`` pairs). A file is read as
JSON lines when its first line is a JSON object, as CSV otherwise, whatever its suffix.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable, Iterator
from os import PathLike
from pathlib import Path
from typing import Any

from simulator.errors import ConfigError, must, shown
from simulator.files import shown_path
from workloads.request import Request
from workloads.traces._rows import (
    FieldError,
    as_float,
    as_int,
    check_on_error,
    csv_rows,
    first_text_line,
    get,
    guarded,
    text_lines,
)
from workloads.workload import ReadStats, Workload, format_segments

WRITE_SUFFIXES = (".csv", ".jsonl")  # what `write_workload` writes: the formats `read_trace` reads back

COLUMNS = (
    "id", "arrival_s", "session_id", "turn", "prompt_tokens", "output_tokens",
    "output_segment_id", "segments", "cache_breakpoints", "source",
)  # fmt: skip


def _row(r: Request) -> dict[str, Any]:
    return {
        "id": r.id, "arrival_s": r.arrival_s, "session_id": r.session_id, "turn": r.turn,
        "prompt_tokens": r.prompt_tokens, "output_tokens": r.output_tokens,
        "output_segment_id": r.output_segment_id, "segments": format_segments(r.segments),
        "cache_breakpoints": ";".join(map(str, r.cache_breakpoints)), "source": r.source,
    }  # fmt: skip


def check_suffix(path: str | Path, where: str = "write_workload") -> Path:
    """`path`, if its suffix names a format `write_workload` writes (`WRITE_SUFFIXES`, any case);
    otherwise `ConfigError` naming `where`, the path and the suffixes allowed (a ``.parquet`` name
    must not hold CSV; a name that is a suffix alone, ``.csv``, is said to want a name before it)."""
    must(isinstance(path, str | PathLike), where, "path", "a file's path (a str or Path) ending in "
         + " or ".join(WRITE_SUFFIXES), path)
    path = Path(path)
    if path.name.lower() in WRITE_SUFFIXES:  # '.csv' alone: a hidden file, no suffix (helper-150: "got 'no suffix'")
        raise ConfigError(f"{where} '{shown_path(path)}': needs a name before its suffix, e.g. "
                          f"'requests{path.name}' (a name that is the suffix alone has none)")
    if path.suffix.lower() not in WRITE_SUFFIXES:
        raise ConfigError(f"{where} '{shown_path(path)}': must end in {' or '.join(WRITE_SUFFIXES)} (kvsim's request "
                          f"formats, which it reads back; got {shown(path.suffix or 'no suffix')})")
    return path


def write_workload(workload: Iterable[Request], path: str | Path) -> int:
    """Write requests to `path` in the format its suffix names (``.csv`` or ``.jsonl``, any case;
    another suffix is a `ConfigError` before anything is written); returns the count."""
    path = check_suffix(path)
    n = 0
    with path.open("w", newline="", encoding="utf-8") as f:
        if path.suffix.lower() == ".jsonl":
            for r in workload:
                f.write(json.dumps(_row(r)) + "\n")
                n += 1
        else:
            writer = csv.DictWriter(f, fieldnames=COLUMNS, lineterminator="\n")
            writer.writeheader()
            for r in workload:
                writer.writerow(_row(r))
                n += 1
    return n


def parse_segments(value: object) -> tuple[tuple[int, int], ...]:
    """``"7:512;9:30"`` (or ``[[7, 512], [9, 30]]``) -> ``((7, 512), (9, 30))``."""
    rule = "'id:tokens;id:tokens' with integer ids and tokens >= 1"
    pairs: list[Any]
    if isinstance(value, str):
        pairs = [p.split(":") for p in value.split(";")] if value else []
    elif isinstance(value, list):
        pairs = value
    else:
        raise FieldError("segments", rule, value)
    out = []
    for p in pairs:
        if not isinstance(p, list | tuple) or len(p) != 2:
            raise FieldError("segments", rule, value)
        try:  # whole numbers only: 4.5 tokens is an error, not 4
            seg_id, tokens = as_int(p[0], "segments", -(2**63)), as_int(p[1], "segments", 1)
        except FieldError:
            raise FieldError("segments", rule, value) from None
        out.append((seg_id, tokens))
    return tuple(out)


def parse_breakpoints(value: object) -> tuple[int, ...]:
    """``"1;3"`` (or ``[1, 3]``) -> ``(1, 3)``; empty -> ``()``."""
    items = (value.split(";") if value else []) if isinstance(value, str) else value
    if not isinstance(items, list):
        raise FieldError("cache_breakpoints", "'k;k' with integers >= 1", value)
    return tuple(as_int(k, "cache_breakpoints", 1) for k in items)


def _request(row: dict[str, Any], n: int) -> Request:
    """The request of `row`, the `n`-th kept (its ``id`` checked, then `n`: see the module docstring)."""
    source = get(row, "source")
    as_int(get(row, "id"), "id", 0)
    return Request(
        id=n,
        arrival_s=as_float(get(row, "arrival_s"), "arrival_s"),
        session_id=as_int(get(row, "session_id"), "session_id", -1),
        turn=as_int(get(row, "turn"), "turn", 0),
        prompt_tokens=as_int(get(row, "prompt_tokens"), "prompt_tokens", 1),
        output_tokens=as_int(get(row, "output_tokens"), "output_tokens", 1),
        output_segment_id=as_int(get(row, "output_segment_id"), "output_segment_id", -(2**63)),
        segments=parse_segments(get(row, "segments")),
        cache_breakpoints=parse_breakpoints(get(row, "cache_breakpoints")),
        source=str(source),
    )


class _BadLine:
    """A JSONL line that is not JSON (reported, or skipped, by `guarded`)."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


def _json_lines(path: Path) -> bool:
    """Whether `path` holds JSON lines (its first non-blank line starts with ``{``) rather than CSV: what the
    file holds, not its suffix (helper-179: JSONL saved as ``.json`` was read as CSV, "lacks column 'id'"). Blank
    lines are passed over, as the JSON reader passes them (helper-181: a JSONL file opening with one, read as
    ``format="kvsim"``, was read as CSV: "the row has 10 fields, the header 0")."""
    with path.open(encoding="utf-8-sig", errors="replace") as f:
        return first_text_line(f).startswith("{")


def read_native(path: str | Path, *, on_error: str = "stop") -> Workload:
    """A workload replaying a file written by `write_workload` (streamed)."""
    check_on_error(on_error)
    path = Path(path)

    def rows() -> Iterator[tuple[int, Any]]:
        if not _json_lines(path):  # a header short of a column is the file's error, said once (helper-150)
            yield from csv_rows(path, COLUMNS, "kvsim's own format")
            return
        with path.open(newline="", encoding="utf-8-sig") as f:
            for line_no, line in enumerate(text_lines(path, f), start=1):
                if line.strip():
                    try:
                        yield line_no, json.loads(line)
                    except (json.JSONDecodeError, RecursionError):
                        yield line_no, _BadLine(line.strip())

    def run(stats: ReadStats) -> Iterator[Request]:
        def parse(n: int, row: Any) -> Request:
            if isinstance(row, _BadLine):
                raise FieldError("row", "a JSON object", row.text[:40])
            if not isinstance(row, dict):  # 5, null, [1, 2]: valid JSON, no request
                raise FieldError("row", "a JSON object with the request's keys", row)
            return _request(row, n)

        yield from guarded(path, rows(), parse, stats, on_error, "arrival_s")

    return Workload(run, name=path.name)
