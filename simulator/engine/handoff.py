"""A replica's side of prefill/decode disaggregation: holding, reserving and receiving a sequence's KV.

A disaggregated fleet has prefill replicas (role ``PREFILL``) and decode replicas (``DECODE_ONLY``);
an aggregated one has only ``BOTH``, for which nothing here runs. A sequence moves through

    prefill replica: waiting → prefilling → HANDING (first token out; blocks held, counted as used)
    decode replica:  incoming (its blocks reserved, KV on the link) → arrived → decoding

- **hold** (`_hold`, from `Replica.commit` when a prefill completes and more tokens are to come):
  the prefix cache takes the prefilled blocks as on the aggregated path (`on_prefilled`, so that
  concurrent requests share the prompt at once); the sequence keeps its private blocks and leaves
  the running set. Its retained KV, ``kv0 = min(kept_after_prefill, cap)`` tokens, is what moves.
- **reserve** (`can_hold`, `reserve`, decided by the cluster): a decode replica takes
  ``blocks(kv0)`` blocks at once, under the rules of a swap-in: room for ``kv0 + 1`` tokens within
  ``free − watermark`` plus the evictable cache (evicted as needed), and fewer than ``max_num_seqs``
  sequences running or incoming. The blocks the step in flight will grow into are not free
  (`pending_blocks`): stepping would count them, so fast-forward must too.
- **release** (`release_handed`, at the transfer's end): the prefill replica frees the blocks, the
  prefix cache keeping what it keeps on a normal finish (`on_finish`).
- **join** (`receive`, then `_join_arrived` at the next plan): the sequence joins the decode batch
  as a swapped-in one rejoins, its first gap measured from its first token (transfer included).
  On the decode side its KV is private: the decode replica's prefix cache serves only what it
  prefills itself (short prompts, recomputes), so a handed-off sequence is not ``exact`` there.

State changes at arbitrary times (a reservation or a release while a step or jump is in flight)
keep the time integrals exact: the commit that follows integrates the new state from ``acc_s``, so
``Δ · (now − acc_s)`` is taken off first (`_shift_integrals`).
"""

from __future__ import annotations

import bisect
from typing import TYPE_CHECKING, Any

from simulator.engine.sequence import HANDING, Seq
from simulator.engine.series import blocks_crossed

if TYPE_CHECKING:
    from collections import deque

    from simulator.engine.caches import CacheCounts, CacheState
    from simulator.engine.config import SchedulerConfig
    from simulator.engine.geometry import BlockGeometry
    from simulator.engine.retention import RetentionPolicy

BOTH, PREFILL, DECODE_ONLY = "both", "prefill", "decode"


class HandOff:
    """Mixin of `Replica` (see there for the attributes it uses)."""

    B: int
    S: int
    used: int
    total_blocks: int
    watermark_blocks: int
    n_dec: int
    hist: list[int]
    kv_sum: int
    private_off: int
    outstanding_tokens: int
    acc_s: float
    used_block_s: float
    cache_block_s: float
    evictable_block_s: float
    private_block_s: float
    private_token_s: float
    running: dict[int, Seq]
    ov_running: int
    waiting: deque[Seq]
    rejoined: list[Seq]
    cache: CacheState
    counts: CacheCounts
    sched: SchedulerConfig
    geometry: BlockGeometry
    retention: RetentionPolicy
    jump_n: int
    run_ends: list[float]
    run_steps: list[Any]

    if TYPE_CHECKING:
        def steps_done(self, now: float) -> int: ...
        def _join_decode(self, seq: Seq) -> None: ...
        def _window_step(self, seq: Seq) -> int: ...

    def _init_handoff(self, role: str) -> None:
        self.role = role
        self.handing: dict[int, Seq] = {}  # prefill side: prefilled, KV not yet moved
        self.handoffs: list[Seq] = []  # prefill side: held by the last commit, for the cluster to place
        self.incoming: dict[int, Seq] = {}  # decode side: blocks reserved, KV on the link
        self.arrived: list[Seq] = []  # decode side: KV here, to join at the next plan
        self.in_flight = False  # a step, jump or run is under way (set by the SimPy process)
        self.run_interruptible = False
        self.decode_room = 0  # prefill side: the most blocks a decode replica offers (pool − watermark)
        self.link: Any = None  # decode side: the ingress `Link`
        self.n_preempt = 0  # preemptions so far (they free blocks: a reason to retry the hand-off queue) ...
        self.n_preempt_seen = 0  # ... and as many as the cluster has acted on
        self.link_busy_mark = 0.0  # the link's busy seconds at the last sample ...
        self.link_sample_s = 0.0  # ... and its time

    # ----------------------------------------------------------------- prefill side
    def _hold(self, seq: Seq) -> None:
        """`seq` finished its prefill here and decodes elsewhere: keep its blocks, hand it over."""
        if seq.exact:  # the cache takes over the prefilled blocks, still referenced by seq (as `commit`)
            shared, kept = self.cache.on_prefilled(seq, seq.target)
            moved = (shared - seq.hit_tokens) // self.B
            self.used -= moved - kept
            seq.blocks -= moved
            seq.hit_tokens = shared
        req = seq.request
        seq.kv0 = min(self.retention.kept_after_prefill(req.prompt_tokens, seq.target), seq.cap)
        seq.state = HANDING
        del self.running[seq.key]
        self.ov_running -= seq.ov
        self.handing[seq.key] = seq
        self.private_off += seq.target - seq.hit_tokens
        self.outstanding_tokens -= req.output_tokens - seq.gen0
        self.handoffs.append(seq)

    def release_handed(self, seq: Seq, now: float) -> None:
        """The KV of `seq` has moved: free its blocks here (the cache keeps what it keeps on a finish)."""
        del self.handing[seq.key]
        cache0, evictable0 = self.counts.blocks[0], self.counts.evictable
        kept = self.cache.on_finish(seq, seq.target, seq.blocks) if seq.exact else 0
        d_used = kept - seq.blocks
        tokens = seq.target - seq.hit_tokens
        self.used += d_used
        self.private_off -= tokens
        self._shift_integrals(now, d_used, self.counts.blocks[0] - cache0, -tokens,
                              self.counts.evictable - evictable0)
        # from here on the sequence is the decode replica's: its KV private there, no prefix-cache links
        seq.exact = False
        seq.hit_tokens = 0
        seq.cache_node = None
        seq.cache_tokens = 0
        seq.blocks = self.geometry.blocks(seq.kv0, seq.ov)

    # ----------------------------------------------------------------- decode side
    def pending_blocks(self, now: float) -> int:
        """Blocks the step in flight at `now` will have grown into when it ends (0 between steps)."""
        if not self.in_flight or not self.n_dec:
            return 0
        if self.run_steps:
            j = min(bisect.bisect_right(self.run_ends, now) + 1, len(self.run_ends))
        elif self.jump_n > 1:
            j = min(self.steps_done(now) + 1, self.jump_n)
        else:
            return self.hist[-self.S % self.B]
        return blocks_crossed(self.hist, self.S, self.B, j)

    def can_hold(self, seq: Seq, now: float) -> bool:
        """Whether `seq` (prefilled elsewhere, ``kv0`` tokens) may reserve its blocks here now."""
        if len(self.running) + len(self.incoming) + len(self.arrived) >= self.sched.max_num_seqs:
            return False
        grow, room = self._hold_needs(seq, now)
        return grow <= room + self.counts.evictable

    def _hold_needs(self, seq: Seq, now: float) -> tuple[int, int]:
        """``(grow, room)``: the blocks `seq` holds here once its first decode step has written its next token
        (that token's window blocks too: `_window_step`), and the blocks free now beyond those the step in
        flight takes and the watermark (`can_hold` and `reserve` ask the same)."""
        grow = self.geometry.blocks(min(seq.kv0 + 1, seq.cap), seq.ov) + self._window_step(seq)
        return grow, self.total_blocks - self.used - self.pending_blocks(now) - self.watermark_blocks

    def reserve(self, seq: Seq, now: float) -> None:
        """Take `seq`'s blocks now (`can_hold` said yes), evicting cached blocks as needed."""
        grow, room = self._hold_needs(seq, now)
        d_used, d_cache, d_evictable = 0, 0, 0
        if grow > room:
            used0, cache0, evictable0 = self.used, self.counts.blocks[0], self.counts.evictable
            self.used -= self.cache.evict(grow - room)
            d_used, d_cache = self.used - used0, self.counts.blocks[0] - cache0
            d_evictable = self.counts.evictable - evictable0
        blocks = self.geometry.blocks(seq.kv0, seq.ov)
        self.used += blocks
        self.private_off += seq.kv0
        self._shift_integrals(now, d_used + blocks, d_cache, seq.kv0, d_evictable)
        self.incoming[seq.key] = seq
        self.outstanding_tokens += seq.request.output_tokens - seq.gen0

    def receive(self, seq: Seq) -> None:
        """`seq`'s KV has arrived: it joins the decode batch at the next plan."""
        del self.incoming[seq.key]
        seq.decode_replica = self.index  # type: ignore[attr-defined]
        self.arrived.append(seq)

    def _join_arrived(self) -> None:
        """Join the arrived sequences (their blocks already counted) to the decode batch, as a swap-in does."""
        for seq in self.arrived:
            self.private_off -= seq.kv0  # its tokens move to kv_sum
            seq.rejoin_from_s = seq.last_tok_s = seq.first_s
            self._join_decode(seq)
            self.ov_running += seq.ov
            self.rejoined.append(seq)
        self.arrived.clear()

    def _unjoin(self, seq: Seq) -> bool:
        """`seq` is preempted in the plan it joined in: True (its last token stays its first)."""
        if self.rejoined and self.rejoined[-1] is seq:
            self.rejoined.pop()
            return True
        return False

    @property
    def holds_transfers(self) -> bool:
        """Blocks held or reserved for KV transfers: a replica running nothing will be woken, not stuck."""
        return bool(self.handing or self.incoming)

    # ----------------------------------------------------------------- integrals
    def _shift_integrals(self, now: float, d_used: int, d_cache: int, d_tokens: int, d_evictable: int) -> None:
        """A change of state at `now` between commits: the next commit or accrual integrates the new
        state from ``acc_s``; take ``Δ · (now − acc_s)`` off so that the old state counts until `now`.
        Every integral whose state changed is shifted: blocks in use, the cache's HBM blocks and those
        of them no sequence references (a release lets the prompt's cached blocks go; a reservation
        may evict some), private blocks and tokens."""
        lag = now - self.acc_s
        if lag > 0:
            self.used_block_s -= d_used * lag
            self.cache_block_s -= d_cache * lag
            self.evictable_block_s -= d_evictable * lag
            self.private_block_s -= (d_used - d_cache) * lag
            self.private_token_s -= d_tokens * lag


__all__ = ["BOTH", "DECODE_ONLY", "PREFILL", "HandOff"]
