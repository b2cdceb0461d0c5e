"""Observation side of a replica: a request's end record (with its exact TPOT p99) and samples."""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from simulator.engine.decode import DECODE
from simulator.engine.records import RowSink
from simulator.engine.sequence import DONE, Seq
from simulator.engine.series import (
    SeriesOrder,
    blocks_crossed,
    gap_quantile_ranges,
    quantile_picks,
    series_s,
    steps_to_reach,
    suffix_gap_quantile,
)

if TYPE_CHECKING:
    from simulator.engine.caches import CacheCounts

LOG_MIN_ENTRIES = 1 << 16  # the step log is compacted once it holds this many entries, or twice the last count
TPOT_QUANTILE = 0.99  # a record's ``tpot_p99_s``: the quantile of its decode gaps (`_gap_p99`, `_prune_order`)
ORDER_MIN_ENTRIES = 64  # log_order is pruned once it holds this many entries, or twice the last count
# (seq, outcome, reason, end_s, tpot_p99_s, tpot_mean_s)
Observer = Callable[[Seq, str, str, float, float, float], None]


class Observation:
    """Mixin of `Replica` (see there for the attributes it uses)."""

    index: int
    observer: Observer
    log_g0: list[float]
    log_d: list[float]
    log_k: list[int]
    log_top: list[float]
    log_base: int
    log_compact_at: int
    log_order: SeriesOrder
    log_floor: int
    log_order_at: int
    last_sample_s: float
    samples: RowSink
    kv_sum: int
    private_off: int
    used: int
    n_grow: int
    win_top: int
    hist: list[int]
    S: int
    B: int
    g0: float
    d: float
    cache: Any
    counts: CacheCounts
    geometry: Any
    n_dec: int
    prefilling: dict[int, Seq]
    running: dict[int, Seq]
    ov_running: int
    waiting: deque[Seq]
    swapped: deque[Seq]
    chunks: list[tuple[Seq, int]]
    timer: Any
    link: Any
    link_busy_mark: float
    link_sample_s: float
    run_steps: list[float]
    sample_interval_s: float
    jump_start_s: float
    jump_n: int
    jump_sample: int

    if TYPE_CHECKING:  # provided by `ChunkedRuns`, `DecodeSet` and `InFlight`
        def sample_in_run(self, now: float, q: int) -> None: ...
        def priced_context(self, ahead: int = 0) -> float | int: ...
        def committed_steps(self, now: float) -> int: ...
        def run_steps_done(self, now: float) -> int: ...

    def _end(self, seq: Seq, outcome: str, reason: str, end_s: float) -> None:
        seq.state = DONE
        p99 = mean = math.nan
        out = seq.request.output_tokens
        if outcome == "completed" and out > 1:
            mean = (end_s - seq.first_s) / (out - 1)
            p99 = self._gap_p99(seq)
        self.observer(seq, outcome, reason, end_s, p99, mean)

    def _gap_p99(self, seq: Seq) -> float:
        """The exact p99 of `seq`'s decode gaps (its steps in the log, and `extra_gaps`).

        The usual range, one that runs to the log's end (the sequence finishes at this commit),
        is read from `log_order` (`series.suffix_gap_quantile`), with its extra gaps (a decode
        replica's sequence has one: a disaggregated run read its p99s from the logs, 16 % of its
        CPU time); any other from the logs (`series.gap_quantile_ranges`)."""
        ranges = seq.ranges
        if len(ranges) == 1:
            a, b = ranges[0]
            end = self.log_base + len(self.log_k)
            if b == end and a >= self.log_floor and b - a > 1:
                # the range's steps: the log's entries and the step count grow together (commit)
                return suffix_gap_quantile(self.log_order, self.log_g0, self.log_d, self.log_base, a,
                                           self.S - seq.seg_steps, TPOT_QUANTILE, seq.extra_gaps)
        if self.log_base:  # indices are absolute; the logs start at entry log_base
            base = self.log_base
            ranges = [(a - base, b - base) for a, b in ranges]
        if len(ranges) == 1 and not seq.extra_gaps:
            a, b = ranges[0]
            if b - a == 1:  # one segment: the series' own quantile
                k = self.log_k[a]
                pos = TPOT_QUANTILE * (k - 1)
                return self.log_g0[a] + self.log_d[a] * pos
        return gap_quantile_ranges(self.log_g0, self.log_d, self.log_k, ranges, seq.extra_gaps, TPOT_QUANTILE,
                                   tops=self.log_top)

    def _compact_log(self) -> None:
        """Drop the step log's entries that no sequence on this replica refers to any more (the
        decode ranges of a finished request are read once, at its end): memory stays flat over a
        long run. Amortised O(1) a step: it runs when the log has doubled since the last time.
        `log_order` keeps its entries below the new base until its next prune (`_prune_order`), which drops
        them; no range starts below the base, and a range's walk skips entries older than it
        (`series.suffix_gap_quantile`)."""
        keep = self.log_base + len(self.log_k)
        for seqs in (self.running.values(), self.waiting, self.swapped):
            for seq in seqs:
                if seq.ranges:
                    keep = min(keep, seq.ranges[0][0])
                elif seq.state == DECODE:
                    keep = min(keep, seq.seg_start)
        drop = keep - self.log_base
        if drop > 0:
            del self.log_g0[:drop], self.log_d[:drop], self.log_k[:drop], self.log_top[:drop]
            self.log_base = keep
        self.log_compact_at = max(LOG_MIN_ENTRIES, 2 * len(self.log_k))

    def _prune_order(self) -> None:
        """Keep in `log_order` only the entries a decoder's TPOT p99 may still pick (`SeriesOrder.keep_picks`).

        Only a decoder reads `log_order`, at its end, over the range it has decoded in since it joined
        the decode set (one that left the set and came back has two ranges and reads the logs; one
        that joins later has a range of later entries only): none below the decoders' first entry,
        ``floor``. Its gaps are its request's ``output_tokens − 1`` (its range's steps and its extra
        ones), so its quantile (`TPOT_QUANTILE`, the one `_gap_p99` reads) picks
        ``quantile_picks(output_tokens − 1)`` entries at most, the most for the longest output.
        Amortised O(1) a step: it runs when the order has doubled since the last time."""
        floor = self.log_base + len(self.log_k)
        longest = 1
        for seq in self.running.values():
            if seq.state == DECODE:
                if seq.seg_start < floor:
                    floor = seq.seg_start
                out = seq.request.output_tokens
                if out > longest:
                    longest = out
        self.log_order.keep_picks(floor, quantile_picks(longest - 1, TPOT_QUANTILE))
        if floor > self.log_floor:
            self.log_floor = floor
        self.log_order_at = max(ORDER_MIN_ENTRIES, 2 * len(self.log_order))

    # ----------------------------------------------------------------- time integrals
    def _init_integrals(self) -> None:
        """Exact time integrals (from t = 0) behind the summary's KV metrics.

        ``used_block_s = ∫ used dt``; ``cache_block_s = ∫ cache HBM blocks dt``;
        ``evictable_block_s = ∫ cache blocks no running sequence references dt`` (the cache gives
        them up when a sequence needs room);
        ``private_block_s = ∫ (used − cache − overhead · running) dt``, the blocks sequences hold
        privately for tokens; ``private_token_s = ∫ private tokens dt`` (KV tokens less each
        sequence's shared prefix). State is constant between events except in a decode jump,
        where blocks and tokens grow step by step: closed forms in `series`.
        """
        self.acc_s = 0.0
        self.used_block_s = 0.0
        self.cache_block_s = 0.0
        self.evictable_block_s = 0.0
        self.private_block_s = 0.0
        self.private_token_s = 0.0
        self.busy_s = 0.0  # ∫ [a step in flight] dt

    def _accrue(self, now: float) -> None:
        """Integrate the state, constant since the last event, up to `now`."""
        dt = now - self.acc_s
        if dt > 0:
            cache = self.counts.blocks[0]
            self.used_block_s += self.used * dt
            self.cache_block_s += cache * dt
            self.evictable_block_s += self.counts.evictable * dt
            self.private_block_s += (self.used - cache - self.ov_running) * dt
            self.private_token_s += (self.kv_sum + self.private_off) * dt
        self.acc_s = now

    # ----------------------------------------------------------------- observation
    def _sample(self, now: float) -> None:
        """A time-series row of the state at `now`: the plan's, or with a chunked-prefill run or a decode
        jump in flight (an arrival during it) the state stepping would have then (`ChunkedRuns.sample_in_run`,
        `sample_in_jump`)."""
        if self.run_steps:  # the steps ended before `now`: an arrival at a step's end goes before its commit
            self.sample_in_run(now, self.run_steps_done(now))  # (`cluster.REPLICA_PRIORITY_STEP`)
            return
        if self.jump_n:  # (helper-169's fix: an arrival's sample read the state at the jump's start)
            self.sample_in_jump(now, self.committed_steps(now))
            return
        self._put_sample(now, self.used, self.kv_sum, self.chunks, {})

    def sample_in_jump(self, now: float, j: int) -> None:
        """A sample of the state stepping would have at `now` with steps 1..j of the decode jump in flight
        committed: the decoders' blocks ``used + G(j)`` (`series.blocks_crossed`), their KV tokens
        ``kv_sum + n_grow · j`` and the context the next step is priced at (`priced_context(j)`), as
        `Replica.commit` of j steps leaves them. Nothing else a sample reads changes within a jump: the
        cache blocks its steps need were evicted at its start (`Replica._stable_steps`), and the queues
        change only by arrivals, which a sample reads as they are."""
        used, kv_sum = self.used, self.kv_sum
        if j:
            used += blocks_crossed(self.hist, self.S, self.B, j)
            kv_sum += self.n_grow * j
        self._put_sample(now, used, kv_sum, self.chunks, {}, j)

    def jump_sample_due(self, q: int) -> float:
        """The start of the first of steps q + 1 .. ``jump_n`` − 1 of the jump in flight (step i starts at
        ``jump_start_s + T(i)``, `series.series_s`) whose plan would take a sample in stepping (its start t
        with ``t − last_sample_s ≥ sample_interval_s``, as `Replica.plan` asks), kept as ``jump_sample``;
        0 and ``jump_sample = 0`` when none is (the plan after the jump's last step takes its own). A
        ``sample_interval_s`` of 0 takes none inside a jump: stepping's row a step would be an event a
        decoded token; then the rows are the plans' (a jump's start and end) and the arrivals'."""
        interval, n = self.sample_interval_s, self.jump_n
        start, last, g0, d = self.jump_start_s, self.last_sample_s, self.g0, self.d
        self.jump_sample = 0
        # the starts grow, and so does ``t − last``: none is due unless the last one is (the usual jump)
        if interval <= 0 or q + 1 >= n or (start + series_s(g0, d, n - 1)) - last < interval:
            return 0.0
        j = steps_to_reach(g0, d, last + interval - start)  # T(j) ≥ last + interval − start, then the exact test
        j = j if j > q else q + 1
        while j > q + 1 and (start + series_s(g0, d, j - 1)) - last >= interval:  # rounding: a step at most
            j -= 1
        while (start + series_s(g0, d, j)) - last < interval:  # ends by n − 1, which is due (above)
            j += 1
        self.jump_sample = j
        return start + series_s(g0, d, j)

    def take_jump_sample(self, now: float) -> float:
        """At `now`, the start of step ``jump_sample`` of the jump in flight: the sample its plan would take
        in stepping, unless one was taken since (an arrival's, `Replica.enqueue`); returns the start of the
        next such step (`jump_sample_due`, 0: none)."""
        q = self.jump_sample
        if now - self.last_sample_s >= self.sample_interval_s:
            self.sample_in_jump(now, q)
        return self.jump_sample_due(q)

    def _put_sample(self, now: float, used: int, kv_sum: int, step: list[tuple[Seq, int]],
                    done: dict[int, int], ahead: int = 0) -> None:
        """Append the row of a state: its blocks used, decoders' KV tokens, the chunks ``(seq, new)`` of the
        step planned, and `done`: the tokens a prefilling sequence (by key) has prefilled beyond its
        ``prefilled`` (a run's steps committed since, `ChunkedRuns.sample_in_run`: `ahead` of them, for
        the decode context the step's utilisation is priced at); the rest (queues, cache, link) as they
        are now."""
        self.last_sample_s = now
        # loops, not generators or comprehensions (a function made and called each: ~1-1.5 k instructions)
        tokens = kv_sum
        for s in self.prefilling.values():
            tokens += s.prefilled + done.get(s.key, 0)
        batch_tokens = self.n_dec
        chunks = []
        for s, n in step:
            batch_tokens += n
            chunks.append((n, s.prefilled + done.get(s.key, 0)))
        mfu = bw = math.nan
        utilisation = getattr(self.timer, "utilisation", None)  # the cost model's MFU and HBM share
        if utilisation is not None and batch_tokens:
            mfu, bw = utilisation(chunks, self.n_dec, self.priced_context(ahead))  # (= kv_sum + n_dec without windows)
        link_util = math.nan
        if self.link is not None:  # share of the time since the last sample the ingress link moved KV
            span = now - self.link_sample_s
            if span > 0:
                busy = self.link.busy_until(now)
                link_util = (busy - self.link_busy_mark) / span
                self.link_busy_mark, self.link_sample_s = busy, now
        self.samples.append((now, self.index, used, tokens, len(self.running), len(self.waiting),
                             len(self.swapped), batch_tokens, mfu, bw, link_util, self.counts.evictable))

    def sample(self, now: float) -> None:
        """Integrate up to `now` and record a time-series row (used at the end of the run)."""
        self._accrue(now)
        self._sample(now)
