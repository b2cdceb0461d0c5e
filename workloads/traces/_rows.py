"""Shared plumbing for trace readers: field parsing and per-row error policy.

A reader turns each row into a `Request` (or ``None`` to drop a row by the format's own
rule, such as a failed request). A bad field raises `FieldError`; `guarded` reports it as
``file:line: 'Field' must be <rule> (got <value>)`` and stops (``on_error="stop"``) or skips
the row and counts it (``on_error="skip"``, count in `ReadStats.skipped_rows`).
"""

from __future__ import annotations

import csv
import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import TypeVar

from simulator.errors import ConfigError, RuleError, shown
from workloads.request import Request
from workloads.workload import ReadStats

ON_ERROR = ("stop", "skip")
T = TypeVar("T")


MISSING = "present"  # a FieldError's rule for a field the row lacks or leaves null (said so, not "got None")


class FieldError(Exception):
    """One bad field of one row (internal; `guarded` turns it into a `ConfigError`)."""

    def __init__(self, key: str, rule: str, value: object) -> None:
        super().__init__(f"{key!r} has no value in the row" if rule == MISSING else
                         f"{key!r} must be {rule} (got {shown(value)})")


def no_prefix_ids(fmt: str) -> str:
    """`Workload.prefix_note` for a trace format whose rows carry no prefix ids: each prompt is read
    as a segment of its own, so the trace cannot show what prompts share."""
    return (f"the {fmt} trace format carries no prefix ids (each prompt is read as its own segment), so "
            "prefix_hit_share and the reuse gaps are unknown, not zero")


def check_on_error(on_error: str, where: str = "read_trace") -> None:
    """Refuse an `on_error` that is neither ``"stop"`` nor ``"skip"``, said at `where`."""
    if on_error not in ON_ERROR:
        raise ConfigError(f"{where}: 'on_error' must be 'stop' or 'skip' (got {on_error!r})")


def get(row: dict[str, T], key: str) -> T:
    """``row[key]``, or a `FieldError` naming the missing field."""
    try:
        value = row[key]
    except KeyError:
        raise FieldError(key, MISSING, None) from None
    if value is None:
        raise FieldError(key, MISSING, None)
    return value


def _decimal(text: str) -> bool:
    """Whether `text` is what ``int()`` reads exactly: decimal digits after at most one sign, spaces about it
    (helper-192: ``lstrip("+-")`` took ``"+-5"`` and ``"--5"``, and int() raised ValueError, a traceback)."""
    s = text.strip()
    return (s[1:] if s[:1] in ("+", "-") else s).isdecimal()


def as_int(value: object, key: str, minimum: int) -> int:
    """An integer ``>= minimum`` from an int or a decimal string (``"12"``, ``"12.0"``)."""
    rule = "a 64-bit integer" if minimum <= -(2**63) else f"an integer >= {minimum}"  # (an id may be any)
    if isinstance(value, bool):
        raise FieldError(key, rule, value)
    if isinstance(value, int):
        n = value
    elif isinstance(value, str) and _decimal(value):  # what int() reads (helper-191: isdigit took "²", and
        # int("²") raised ValueError, a traceback from `kvsim workload describe`)
        n = int(value)  # exact, also for 63-bit segment ids
    elif isinstance(value, float | str):
        try:
            x = float(value)
        except ValueError:
            raise FieldError(key, rule, value) from None
        if not math.isfinite(x) or x != int(x):
            raise FieldError(key, rule, value)
        n = int(x)
    else:
        raise FieldError(key, rule, value)
    if n < minimum or n >= 2**63:  # an int64, as every count and id is
        raise FieldError(key, rule, value)
    return n


def as_float(value: object, key: str, minimum: float = 0.0) -> float:
    """A finite float ``>= minimum``."""
    rule = f"a number >= {minimum:g}"
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise FieldError(key, rule, value)
    try:
        x = float(value)
    except ValueError:
        raise FieldError(key, rule, value) from None
    if not math.isfinite(x) or x < minimum:
        raise FieldError(key, rule, value)
    return x


# how to go on past a malformed row, said with it
SKIP_HINT = ("skip such rows with workload.skip_bad_rows = true (or --skip-bad-rows on kvsim workload and kvsim "
             "breakeven)")


class BadRowError(ConfigError):
    """A malformed row that stopped a read (``on_error="stop"``): whoever chose to stop can say how to skip."""


class BinaryFileError(ConfigError):
    """A trace line holding NUL bytes: the file is not text, and none of it is echoed."""


def text_lines(path: Path, lines: Iterable[str]) -> Iterator[str]:
    """`lines`, refusing a line with a NUL byte (a binary file, such as ``/proc/self/environ``)."""
    for line in lines:
        if "\x00" in line:
            raise BinaryFileError(f"{path.name}: not a text file (it holds NUL bytes); a trace must be UTF-8 text")
        yield line


def first_text_line(lines: Iterable[str]) -> str:
    """The first of `lines` that is not blank, stripped (``""`` when there is none): where a JSON-lines file's first
    row is, as its readers pass blank lines over (`detect_format`, `native.read_native`)."""
    for line in lines:
        if line.strip():
            return line.strip()
    return ""


def csv_rows(path: Path, needs: Sequence[str] = (), fmt: str = "") -> Iterator[tuple[int, dict[str, str]]]:
    """``(line number, row)`` of a CSV file with a header, streamed (a UTF-8 BOM is skipped; the header's names
    are read stripped of spaces, as `detect_format` reads them, and may be quoted). A header without
    one of the columns `needs` is the file's error, before any row (each row would read as short of it)."""
    with path.open(newline="", encoding="utf-8-sig") as f:
        reader = csv.DictReader(text_lines(path, f))
        header = [c.strip() for c in reader.fieldnames or []]  # 'TIMESTAMP, ContextTokens' names ContextTokens
        if header:
            reader.fieldnames = header
        missing = [c for c in needs if c not in header]
        if missing and header:
            raise ConfigError(f"{path.name}: the header lacks column {missing[0]!r} ({fmt} needs "
                              f"{', '.join(needs)}; got {shown(', '.join(header))})")
        for row in reader:
            yield reader.line_num, row


def _readable(path: Path, rows: Iterator[tuple[int, T]]) -> Iterator[tuple[int, T]]:
    """`rows`, with an undecodable or malformed file reported in one line instead of a traceback."""
    try:
        yield from rows
    except UnicodeDecodeError as e:
        raise ConfigError(f"{path.name}: not UTF-8 text (byte {e.start}: {e.reason})") from None
    except csv.Error as e:
        raise ConfigError(f"{path.name}: not a readable CSV ({e})") from None


def check_fields(row: object) -> None:
    """A CSV row (`csv.DictReader`'s dict) has no more fields than its header: the reader files the
    extras under the key None, and dropping them would read a misaligned row as if it were whole."""
    if isinstance(row, dict) and None in row:
        extra = row[None]
        header = len(row) - 1
        raise ConfigError(f"the row has {header + len(extra)} fields, the header {header}: one field a column "
                          f"(extra: {shown(extra)})")


def guarded(
    path: Path,
    rows: Iterator[tuple[int, T]],
    parse: Callable[[int, T], Request | None],
    stats: ReadStats,
    on_error: str,
    time_key: str,
) -> Iterator[Request]:
    """Parse ``(line, row)`` pairs; on a bad row stop with ``file:line: ...`` or skip and count.

    Rows dropped by rule (``parse`` returns ``None``) are counted as skipped too. A CSV row with
    more fields than the header is a bad row (`check_fields`). Arrival times must not decrease (a
    streamed trace cannot be re-sorted); a row that goes back in time is a bad row, named by
    `time_key`, the format's own arrival column. Request ids count kept rows from 0.
    """
    last_s = 0.0
    n = 0
    for line, row in _readable(path, rows):
        try:
            check_fields(row)
            r = parse(n, row)
            if r is not None and r.arrival_s < last_s:
                raise ConfigError(f"{time_key!r} must be >= the previous row's (this row arrives at "
                                  f"{r.arrival_s!r} s, the previous one at {last_s!r} s)")
        except (FieldError, ConfigError) as e:
            if on_error == "stop":  # a request's rule at its field, not the class's name (Request(1):)
                said = e.quoted() if isinstance(e, RuleError) else e
                raise BadRowError(f"{path.name}:{line}: {said}; {SKIP_HINT}") from None
            stats.skipped_rows += 1
            continue
        if r is None:
            stats.skipped_rows += 1
            continue
        last_s = r.arrival_s
        n += 1
        yield r
