"""What a workload looks like to a KV cache: sizes, rate, prefix reuse and reuse gaps.

The prefix-hit share assumes an unbounded cache that keeps every prefix it has seen, at
segment granularity: a request's hit tokens are the tokens of its leading segments whose
whole chain ``segments[:k+1]`` appeared in an earlier request (ids compared in order, as a
radix tree would), stopping at the first chain not seen before::

    prefix_hit_share = sum_r hit_tokens(r) / sum_r prompt_tokens(r)

A reuse gap is the time between consecutive uses of the same chain ``segments[:k+1]``, one
observation per (request, reused chain); it is what a TTL must outlast for a hit.

Both need prefix ids. A trace format without them (Azure, BurstGPT: each prompt is its own
segment) would show no reuse whatever its prompts shared, so there the summary reports them as
unknown (NaN, ``n_reuses`` None) with ``prefix_note`` saying why, never as 0.

Both also need every distinct chain seen so far, which grows with a long trace of hashed blocks
(Mooncake's: ~11 new chains a request). The summary follows at most `MAX_SUMMARY_CHAINS` of them: once
its tree holds that many (the request that reached it finishes its walk: a few chains more), the requests
after it are left out of both figures, which
are then those of the first k requests (``hit_tokens / their prompt tokens``), and ``prefix_note`` says
so. Lengths, sessions and rate cover every request.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable
from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd

from simulator.errors import must
from simulator.limits import MAX_SUMMARY_CHAINS
from workloads.request import Request

PERCENTILES = (50, 90, 99)


def offered_rate_per_s(n_requests: int, span_s: float) -> float:
    """The workload's offered rate, the one figure every command prints for it (``kvsim workload
    describe``'s ``rate_per_s``, ``kvsim run``'s summary.md line, ``kvsim compare``'s
    ``offered_requests_per_s``): ``n_requests / span_s`` with ``span_s`` = last arrival − first
    arrival; NaN when the span is 0 (every request at one instant: no rate). Not the run summary's
    ``offered_requests_per_s``, the arrivals in the steady window over its length
    (`simulator.engine.steady`)."""
    return n_requests / span_s if span_s > 0 else float("nan")


@dataclass(frozen=True, slots=True, kw_only=True)
class Quantiles:
    """Mean and p50/p90/p99 of one quantity (NaN when there are no observations)."""

    mean: float
    p50: float
    p90: float
    p99: float

    @classmethod
    def of(cls, x: np.ndarray) -> Quantiles:
        if x.size == 0:
            return cls(mean=float("nan"), p50=float("nan"), p90=float("nan"), p99=float("nan"))
        p = np.percentile(x, PERCENTILES)
        return cls(mean=float(x.mean()), p50=float(p[0]), p90=float(p[1]), p99=float(p[2]))


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkloadSummary:
    """Summary of one pass over a workload.

    ``duration_s`` is last arrival minus first; ``rate_per_s = n_requests / duration_s``
    (`offered_rate_per_s`).
    ``skipped_rows`` counts malformed trace rows skipped (``on_error="skip"``) or failed
    requests a reader drops by rule (BurstGPT rows with 0 response tokens). ``prefix_note`` is
    empty when the segment ids show prefix reuse over the whole workload; otherwise why they cannot, and
    then ``prefix_hit_share`` and ``reuse_gap_s`` are NaN and ``n_reuses`` None (unknown), or, past
    `MAX_SUMMARY_CHAINS`, which first requests those figures cover.
    """

    name: str
    n_requests: int
    n_sessions: int
    duration_s: float
    rate_per_s: float
    prompt_tokens: Quantiles
    output_tokens: Quantiles
    prefix_hit_share: float
    reuse_gap_s: Quantiles
    n_reuses: int | None
    skipped_rows: int = 0
    prefix_note: str = ""

    def to_dict(self) -> dict[str, object]:
        """Nested plain dict (JSON-serialisable)."""
        return asdict(self)

    def to_record(self) -> dict[str, object]:
        """One flat row with snake_case keys, each statistic before the unit as in ``ttft_p99_s``:
        ``prompt_tokens_mean``, ``prompt_tokens_p99``, ``reuse_gap_p50_s`` (the ``--json`` row);
        ``prefix_note`` is None when there is none."""
        row: dict[str, object] = {}
        for key, value in self.to_dict().items():
            if isinstance(value, dict):
                stem, unit = (key[:-2], "_s") if key.endswith("_s") else (key, "")
                row.update({f"{stem}_{k}{unit}": v for k, v in value.items()})
            else:
                row[key] = value
        row["prefix_note"] = self.prefix_note or None
        return row

    def to_frame(self) -> pd.DataFrame:
        """One row per figure: columns ``metric``, ``value`` (``prefix_note`` is prose, not a figure:
        left out, for the caller to print under the table)."""
        rows: list[tuple[str, object]] = []
        for key, value in self.to_dict().items():
            if key == "prefix_note":
                continue
            if isinstance(value, dict):
                rows.extend((f"{key}.{k}", v) for k, v in value.items())
            else:
                rows.append((key, value))
        return pd.DataFrame(rows, columns=["metric", "value"])


def summarize(requests: Iterable[Request], *, name: str = "", skipped_rows: int = 0,
              prefix_note: str = "", max_chains: int | None = None) -> WorkloadSummary:
    """One streaming pass: O(requests + `max_chains`) memory, no request list kept (a request's
    lengths take 16 bytes: `array`s, not lists of ints). A non-empty `prefix_note`
    (`Workload.prefix_note`: the segment ids carry no prefix information) makes the prefix-hit share
    and reuse gaps unknown, and the pass then keeps no chain (a day of an Azure trace: 4M of them).
    Once the chains reach `max_chains` (default `MAX_SUMMARY_CHAINS`), later requests are left out of the
    prefix figures (module docstring). `requests` must be an iterable of `Request` (a `Workload`, a list),
    else a one-line `ConfigError` naming it (helper-188: None failed as "'NoneType' object is not iterable")."""
    must(isinstance(requests, Iterable) and not isinstance(requests, str | bytes), "summarize", "requests",
         "an iterable of Request, e.g. a Workload or a list", requests)
    if max_chains is None:
        max_chains = MAX_SUMMARY_CHAINS
    prompt = array("q")
    output = array("q")
    gaps = array("d")
    sessions: set[int] = set()
    # radix tree of chains: (parent node, segment id) -> node; node -> last use time
    children: dict[tuple[int, int], int] = {}
    last_use: list[float] = [0.0]
    hit_tokens = 0
    followed = followed_prompt = 0  # the requests the prefix figures cover, and their prompt tokens
    first_s = last_s = 0.0
    known = not prefix_note
    for r in requests:
        if not isinstance(r, Request):  # (an AttributeError on 'arrival_s' else)
            must(False, "summarize", "requests", "Requests, e.g. load_workload('chat-4k')", r)
        if not prompt:
            first_s = r.arrival_s
        last_s = r.arrival_s
        prompt.append(r.prompt_tokens)
        output.append(r.output_tokens)
        if r.session_id >= 0:
            sessions.add(r.session_id)
        if not known or len(last_use) > max_chains:  # (the tree's root is no chain)
            continue
        followed += 1
        followed_prompt += r.prompt_tokens
        node, on_hit_path = 0, True
        for seg_id, tokens in r.segments:
            key = (node, seg_id)
            child = children.get(key)
            if child is None:
                child = len(last_use)
                children[key] = child
                last_use.append(r.arrival_s)
                on_hit_path = False
            else:
                gaps.append(r.arrival_s - last_use[child])
                last_use[child] = r.arrival_s
                if on_hit_path:
                    hit_tokens += tokens
            node = child
    n = len(prompt)
    duration_s = last_s - first_s
    if known and followed < n:
        prefix_note = (f"over the first {followed:,} of {n:,} requests: the summary stops at "
                       f"{max_chains:,} distinct prefix chains")
    return WorkloadSummary(
        name=name,
        n_requests=n,
        n_sessions=len(sessions),
        duration_s=duration_s,
        rate_per_s=offered_rate_per_s(n, duration_s),
        prompt_tokens=Quantiles.of(np.asarray(prompt, dtype=np.float64)),
        output_tokens=Quantiles.of(np.asarray(output, dtype=np.float64)),
        prefix_hit_share=hit_tokens / followed_prompt if followed_prompt and known else float("nan"),
        reuse_gap_s=Quantiles.of(np.asarray(gaps, dtype=np.float64)),
        n_reuses=len(gaps) if known else None,
        skipped_rows=skipped_rows,
        prefix_note=prefix_note,
    )
