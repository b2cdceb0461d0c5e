"""Block pool side of a replica: block counts, queue timeouts, cache eviction and preemption.

A mixin of `Replica`: preemption takes the newest running sequence; a decoder goes to host
memory when ``preemption = "swap"`` and the host has room, otherwise it gives its blocks back
(to the cache, which may keep its prefix) and waits to be prefilled again.
"""

from __future__ import annotations

import math
from collections import deque
from typing import TYPE_CHECKING

from simulator.engine.decode import DECODE, DecodeSet
from simulator.engine.sequence import SWAPPED, WAITING, Seq

if TYPE_CHECKING:
    from simulator.engine.caches import CacheCounts, CacheState
    from simulator.engine.config import SchedulerConfig
    from simulator.engine.geometry import BlockGeometry
    from simulator.engine.retention import RetentionPolicy


class BlockPool(DecodeSet):
    """Mixin of `Replica` (see there for the attributes it uses)."""

    cache: CacheState
    counts: CacheCounts
    sched: SchedulerConfig
    waiting: deque[Seq]
    swapped: deque[Seq]
    prefilling: dict[int, Seq]
    used: int
    host_used: int
    host_blocks: int
    outstanding_tokens: int
    swap_s_per_block: float
    full_cap: int
    total_blocks: int
    geometry: BlockGeometry
    retention: RetentionPolicy
    private_off: int
    n_preempt: int
    max_context_tokens: int
    reserving: bool
    reserved: int
    reserves: dict[int, tuple[int, int]]

    rejoined: list[Seq]

    if TYPE_CHECKING:  # provided by `Observation` and `HandOff`
        def _end(self, seq: Seq, outcome: str, reason: str, end_s: float) -> None: ...
        def _unjoin(self, seq: Seq) -> bool: ...

    def _prefill_tokens(self, seq: Seq) -> int:
        """KV tokens `seq` holds while it prefills `target` tokens: ``max(prompt, retained)``.

        The first prefill holds the whole prompt (the policy scores it before dropping anything).
        A re-prefill after a recompute preemption (``target = prompt + generated``) holds at most
        what the policy keeps, ``min(kept_after_prefill(prompt, target), cap)``, or the prompt if
        larger: it rebuilds the retained KV, evicting as it goes as decode does, so a request that
        fit at `enqueue` still fits (``≤ max(prompt, min(prompt + output, cap))``). Its compute is
        still priced as the full ``target`` tokens (conservative for StreamingLLM, whose window
        alone would do). Exact sequences keep everything: ``target``.
        """
        prompt = seq.request.prompt_tokens
        if seq.target == prompt:  # the first prefill
            return prompt
        return max(prompt, min(self.retention.kept_after_prefill(prompt, seq.target), seq.cap))

    # ----------------------------------------------------------------- admission "reserve"
    def _growth(self, seq: Seq, kv0: int, gen0: int) -> int:
        """Blocks `seq` adds from ``kv0`` KV tokens and ``gen0`` generated to its last token (of
        the request's output, or ``reserve_output_tokens`` if more, capped at the context left
        after the prompt as TensorRT-LLM caps ``max_tokens``): ``blocks(min(kv0 + left, cap)) −
        blocks(kv0)``, ``left = out − gen0`` tokens still to append, and the window's overhead blocks it may
        still grow into (``Seq.ovcap − Seq.ov``: `BlockGeometry.growth`)."""
        out = self._reserved_output(seq)
        return (self.geometry.blocks(min(kv0 + max(0, out - gen0), seq.cap), 0) - self.geometry.blocks(kv0, 0)
                + seq.ovcap - seq.ov)

    def _reserved_output(self, seq: Seq) -> int:
        """The output tokens admission "reserve" promises `seq`: its own, or ``reserve_output_tokens`` if more,
        capped at the context left after the prompt."""
        req = seq.request
        left = self.max_context_tokens - req.prompt_tokens
        return max(req.output_tokens, min(self.sched.reserve_output_tokens, left))

    def _reserve(self, seq: Seq, growth: int, kv0: int) -> None:
        """Promise `seq` `growth` blocks of decode growth from ``kv0`` KV tokens on."""
        self.reserved += growth
        self.reserves[seq.key] = (growth, self.geometry.blocks(kv0, seq.ov))

    def _unreserve(self, seq: Seq, grown: int) -> None:
        """`seq` leaves having grown `grown` of its promised blocks (the commits took those off
        `reserved` already): the rest is free to promise again."""
        growth, _ = self.reserves.pop(seq.key)
        self.reserved -= growth - grown

    def _unreserve_decoder(self, seq: Seq, kv: int) -> None:
        """`seq` leaves the decode set at `kv` KV tokens (`_unreserve` with what it grew)."""
        self._unreserve(seq, self.geometry.blocks(kv, seq.ov) - self.reserves[seq.key][1])

    def _window_step(self, seq: Seq) -> int:
        """The window blocks `seq`'s next token brings (besides its own block) when its window still grows
        (``Seq.ov < Seq.ovcap``) and that token, ``kv0 + 1``, opens a block (`BlockGeometry.growth`), else 0."""
        if seq.ov < seq.ovcap and not seq.kv0 % self.B:
            return self.geometry.growth(seq.kv0, seq.ov, seq.ovcap)[0]
        return 0

    def _private(self, seq: Seq, kv_tokens: int) -> int:
        """Blocks `seq` holds privately at `kv_tokens`: its blocks less its cached prefix."""
        cap = seq.cap  # `min` by its rule, as a conditional (a call of min() is ~850 instructions)
        # `geometry.blocks`, without its call (~700 instructions) nor its min with the layout's cap: a sequence's
        # cap is at most the layout's (`Replica.enqueue`), so that min leaves these tokens as they are
        held, B = cap if cap < kv_tokens else kv_tokens, self.B
        return -(-held // B) + seq.ov - seq.hit_tokens // B

    @property
    def free_blocks(self) -> int:
        return self.total_blocks - self.used

    def _drop_timed_out(self, now: float) -> None:
        w = self.waiting
        i = 0
        while i < len(w) and math.isinf(w[i].deadline_s):
            i += 1
        while i < len(w) and w[i].deadline_s <= now:
            seq = w[i]
            del w[i]
            r = seq.request
            self.outstanding_tokens -= r.prompt_tokens + r.output_tokens
            self._end(seq, "timed_out", f"waited > queue_timeout_s {self.sched.queue_timeout_s:g}", now)

    def _evict(self, n_blocks: int) -> None:
        if n_blocks > 0 and self.counts.evictable:
            self.used -= self.cache.evict(n_blocks)

    def _note_evicted(self, seq: Seq, tokens: int, held: int) -> None:
        """``seq.evicted``, the tokens whose KV retention dropped, at least what a sequence of `tokens` holding
        `held` misses: its most (`full_cap`: a model whose every layer slides holds its window alone, which is no
        eviction, helper-154) less `held`; the largest over its life, a recompute restoring what was dropped."""
        cap = self.full_cap
        dropped = (tokens if tokens < cap else cap) - held
        if dropped > seq.evicted:
            seq.evicted = dropped

    # ----------------------------------------------------------------- preemption
    def _preempt(self, now: float) -> float:
        """Preempt the newest running sequence; return the swap-out seconds it costs."""
        seq = next(reversed(self.running.values()))
        seq.preemptions += 1
        self.n_preempt += 1
        if seq.state == DECODE:
            kv = self._leave_decode(seq)
            if self.reserving:  # cannot happen while the promises hold; kept exact if it does
                self._unreserve_decoder(seq, kv)
            blocks = self._private(seq, kv)
            if not (self.rejoined and self._unjoin(seq)):  # one that joined this plan keeps its last token's time
                seq.last_tok_s = now
            if self.sched.preemption == "swap" and self.host_used + blocks <= self.host_blocks:
                seq.state = SWAPPED
                seq.blocks = blocks
                self.used -= blocks
                self.host_used += blocks
                self.swapped.append(seq)
                return blocks * self.swap_s_per_block
            tokens = seq.kv0
            # what retention dropped so far stays dropped for the tokens it generated, though the recompute
            # restores the KV (helper-154: a request recomputed at its last token read 0 evicted)
            self._note_evicted(seq, seq.request.prompt_tokens + seq.gen0 - 1, kv)
        else:
            if self.reserving:
                self._unreserve(seq, 0)
            del self.running[seq.key]
            self.ov_running -= seq.ov
            del self.prefilling[seq.key]
            self.private_off -= seq.prefill_kv - seq.hit_tokens
            blocks = seq.blocks
            tokens = seq.prefilled
        kept = self.cache.on_finish(seq, tokens, blocks) if seq.exact else 0
        self.used -= blocks - kept
        self._to_recompute(seq)
        return 0.0

    def _to_recompute(self, seq: Seq) -> None:
        """Put `seq` (holding no HBM blocks now) back at the queue head, to be prefilled again."""
        req = seq.request
        self.outstanding_tokens += req.prompt_tokens + seq.gen0 - (seq.target - seq.prefilled)
        seq.target = req.prompt_tokens + seq.gen0
        seq.prefilled = 0
        seq.hit_tokens = 0
        seq.blocks = 0
        seq.state = WAITING
        seq.deadline_s = math.inf
        self.waiting.appendleft(seq)

    def _unblock_empty_replica(self, now: float) -> None:
        """Nothing runs and nothing could be scheduled: make progress (never deadlock).

        A swapped sequence that cannot come back (the pool is pinned by other swapped sequences'
        cached prefixes) drops its host copy and is recomputed instead; that unpins its prefix, so
        once nothing is swapped every queued request fits (`enqueue` checked it). A queued request
        that still does not fit an empty replica is rejected (cannot happen; kept as a guard).
        """
        if self.swapped:
            seq = self.swapped.popleft()
            self.host_used -= seq.blocks
            if seq.exact:  # unpin; nothing of it is in HBM but its cached prefix, whose chain end takes the window
                # its host copy held (a windowed layout's `_windowed_finish`: at most the free blocks; none elsewhere)
                self.used += self.cache.on_finish(seq, seq.hit_tokens, self.total_blocks - self.used)
            self._to_recompute(seq)
            return
        seq = self.waiting.popleft()
        r = seq.request
        self.outstanding_tokens -= seq.target - seq.prefilled + r.output_tokens - seq.gen0
        self._end(seq, "rejected", "cannot be scheduled on an empty replica", now)

