"""Azure LLM inference traces (2023 code/conversation; 2024 week-long), streamed.

CSV ``TIMESTAMP,ContextTokens,GeneratedTokens``; timestamps are datetime strings such as
``2023-11-16 18:15:46.6805900`` (7 fractional digits, read to the microsecond; an offset
like ``+00:00`` is honoured, naive times are taken as UTC). Arrival times are seconds after
the first row. The trace says nothing about shared prefixes: each prompt is one segment of
its own, id ``-(n + 1)`` for the n-th row kept, counted from 0 as the request ids are (negative ids never
collide with generated or trace hash ids).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

from workloads.request import Request
from workloads.traces._rows import FieldError, as_int, check_on_error, csv_rows, get, guarded, no_prefix_ids
from workloads.workload import ReadStats, Workload

COLUMNS = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")


def parse_timestamp(text: str, key: str = "TIMESTAMP") -> float:
    """Seconds since the epoch of an ISO-like datetime string (7 fractional digits allowed)."""
    try:
        t = datetime.fromisoformat(text.strip())
    except ValueError:
        raise FieldError(key, "a datetime like '2023-11-16 18:15:46.6805900'", text) from None
    if t.tzinfo is None:
        t = t.replace(tzinfo=UTC)
    return t.timestamp()


def read_azure(path: str | Path, *, on_error: str = "stop") -> Workload:
    """A workload replaying an Azure LLM inference trace (streamed, one row at a time)."""
    check_on_error(on_error)
    path = Path(path)
    source = f"azure:{path.name}"

    def run(stats: ReadStats) -> Iterator[Request]:
        first: list[float] = []

        def parse(n: int, row: dict[str, str]) -> Request | None:
            t = parse_timestamp(get(row, "TIMESTAMP"))
            prompt = as_int(get(row, "ContextTokens"), "ContextTokens", 0)
            output = as_int(get(row, "GeneratedTokens"), "GeneratedTokens", 0)
            if not first:
                first.append(t)
            if t < first[0]:
                raise FieldError("TIMESTAMP", "at or after the first row's", get(row, "TIMESTAMP"))
            if prompt == 0 or output == 0:
                return None  # an empty prompt or a failed request: dropped by rule, counted as skipped
            return Request(
                id=n, arrival_s=t - first[0],
                prompt_tokens=prompt, output_tokens=output,
                segments=((-(n + 1), prompt),), source=source,
            )

        yield from guarded(path, csv_rows(path, COLUMNS, "azure"), parse, stats, on_error, "TIMESTAMP")

    return Workload(run, name=path.name, prefix_note=no_prefix_ids("azure"))
