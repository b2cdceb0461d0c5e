"""A request in flight on a replica. Plain ``__slots__`` object: no per-token state.

While decoding, a sequence's token counts are lazy: with the replica's step counter ``S``,
``generated = gen0 + (S - base)`` and ``kv_tokens = kv0 + (S - base)``, so a jump of k steps
touches no sequence. ``kv_tokens = target + generated_since_prefill``: after a prefill of
``target`` tokens the cache holds them, and each decode step stores one more token's KV,
until a retention cap (``cap``): then ``capped`` is set and ``kv_tokens`` stays at ``kv0``.
"""

from __future__ import annotations

import math

from workloads.request import Request

WAITING, RUNNING, SWAPPED, DONE = 0, 1, 2, 3
HANDING = 5  # prefilled on a prefill replica, holding its blocks there until its KV has moved (disaggregated)


class Seq:
    """Scheduler state of one request on one replica."""

    __slots__ = (
        "admit_s", "base", "blocks", "cache_at", "cache_node", "cache_tokens", "cap", "capped", "deadline_s",
        "decode_replica", "evicted", "exact", "extra_gaps", "first_hit", "first_s", "gen0", "hit_dram", "hit_hbm",
        "hit_nvme", "hit_tokens", "key", "kv0", "last_tok_s", "ov", "ovcap", "ow", "pieces", "preemptions",
        "prefill_kv", "prefilled", "ranges", "recomputed", "rejoin_from_s", "replica", "request", "resume_hit",
        "routed", "seg_start", "seg_steps", "state", "target", "transfer_bytes", "transfer_end_s", "transfer_start_s",
        "win",
    )

    def __init__(self, request: Request, key: int, replica: int, timeout_s: float) -> None:
        self.request = request
        self.key = key  # run-unique id, also the heap tie-break
        self.replica = replica  # where it was routed (in a disaggregated fleet: where it prefilled)
        self.decode_replica = replica  # where it generated its tokens after the first
        self.routed = -1  # its replica's index among its router's, while a router counting dispatches counts it
        self.state = WAITING
        self.target = request.prompt_tokens  # tokens the next prefill must have in cache
        self.prefilled = 0
        self.prefill_kv = 0  # KV tokens it holds while it prefills (`BlockPool._prefill_tokens` at its admission)
        self.hit_tokens = 0  # prefix tokens reused at the current admission (block accounting)
        self.first_hit = 0  # ... at the first admission: the request's cross-request prefix hit
        self.resume_hit = 0  # Σ reused at re-admissions after recompute preemptions
        self.blocks = 0  # private blocks, while prefilling or swapped
        self.gen0 = 0
        self.kv0 = 0
        self.base = 0
        self.admit_s = math.nan
        self.first_s = math.nan
        self.last_tok_s = math.nan
        self.rejoin_from_s = math.nan
        self.deadline_s = request.arrival_s + timeout_s
        self.preemptions = 0
        self.seg_start = 0  # the step log's entry where its current decode range starts
        self.seg_steps = 0  # ... and the replica's step count there (the range's steps: S − seg_steps)
        self.ranges: list[tuple[int, int]] = []  # step-log segment ranges spent decoding
        self.extra_gaps: list[float] = []  # gaps across preemptions
        self.cap = 1 << 62  # most KV tokens while decoding (retention / layout)
        # its overhead blocks (windowed layouts): those it holds (at `base` while decoding), and the most it will,
        # `BlockGeometry.overhead` of its longest; decoding, it grows them by `ow` a block it opens (0: it does not)
        self.ov = 0
        self.ovcap = 0
        self.ow = 0
        self.capped = False
        self.win = -1  # its window segment while decoding (`simulator.engine.decode`), -1: none
        self.exact = True  # KV is the exact KV of its tokens: may use the prefix cache (False without one)
        self.pieces: tuple[tuple[object, int, int], ...] | None = None  # the prefix cache's key chain
        self.cache_node: object = None  # the prefix cache's deepest referenced node
        self.cache_tokens = 0  # ... and where it ends, in tokens of the sequence's chain
        self.cache_at = (0, 0)  # ... and in its pieces: (piece, offset in that piece's segment)
        self.hit_hbm = self.hit_dram = self.hit_nvme = self.recomputed = 0
        self.evicted = 0  # tokens whose KV retention dropped
        self.transfer_start_s = math.nan  # its KV's move from a prefill to a decode replica (disaggregated)
        self.transfer_end_s = math.nan
        self.transfer_bytes = 0.0

    def generated(self, step: int) -> int:
        """Output tokens so far, at replica step counter `step` (valid while decoding)."""
        return self.gen0 + (step - self.base)

    def kv_tokens(self, step: int) -> int:
        """Tokens whose KV is cached, at replica step counter `step` (valid while decoding)."""
        return self.kv0 if self.capped else self.kv0 + (step - self.base)

    def __repr__(self) -> str:
        return f"Seq(request={self.request.id}, replica={self.replica}, state={self.state})"
