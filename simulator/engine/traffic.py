"""Traffic classes: which generator or trace produced each request, for the per-request frame.

A request's class is its `Request.source` (``chat-4k``, ``code-repo-128k``, ``azure:trace.csv``,
a native trace's ``source`` column). The engine's records do not carry it (the hot path appends
fixed tuples); instead `run` streams the requests through `TrafficClasses.tag`, which notes each
class as the injector draws the request, and `column` adds it to the frame once, at the end.

Memory: a workload is nearly always a few classes, one of them dominant, so only the requests
whose class differs from the first request's are kept (``id -> source``); a single-class run
keeps nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

from workloads.request import Request

if TYPE_CHECKING:
    import pandas as pd

COLUMN = "source"
"""The per-request frame's traffic-class column (named as `Request.source`)."""


class TrafficClasses:
    """The classes of the requests a run streamed, filled in by `tag` as they pass."""

    __slots__ = ("first", "other")

    def __init__(self) -> None:
        self.first: str | None = None  # the first request's class
        self.other: dict[int, str] = {}  # request id -> class, for classes other than `first`

    def tag(self, requests: Iterable[Request]) -> Iterator[Request]:
        """Yield `requests` unchanged, noting the class of each."""
        it = iter(requests)
        for r in it:
            self.first = first = r.source
            yield r
            break
        else:
            return
        other = self.other
        for r in it:
            if r.source != first:
                other[r.id] = r.source
            yield r

    def of(self, request_id: int) -> str:
        """The class of request `request_id`, once tagged (`column`'s value for it)."""
        return self.other.get(request_id, self.first or "")

    def column(self, request_ids: pd.Series) -> pd.Series:
        """The class of each id in `request_ids` (ids never tagged get the first class)."""
        import pandas as pd

        first = self.first if self.first is not None else ""
        if not self.other:
            return pd.Series([first] * len(request_ids), index=request_ids.index, dtype=str, name=COLUMN)
        return request_ids.map(self.other).fillna(first).astype(str).rename(COLUMN)


__all__ = ["COLUMN", "TrafficClasses"]
