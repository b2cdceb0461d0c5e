"""One model replica: paged KV pool and an iteration-level scheduler (vLLM/SGLang-like).

`plan` forms the next batch (timeouts, block growth and preemption, swap-in, chunked prefill,
FCFS admission under a watermark: on the prompt's blocks, or with ``admission = "reserve"`` on the
whole sequence's beside the growth promised to the running ones) and prices it; `commit` applies
``n`` steps of it. A batch of decodes only is *stable* until the next completion, the next block shortage or the next
queue deadline, and is planned as one jump of k steps (see `simulator.engine.series`).
Running aggregates (`simulator.engine.decode`) make planning and committing O(changes), not
O(batch). Blocks per sequence come from the layout's `BlockGeometry` and the retention policy
(a per-sequence cap); sharing and eviction of cached prefixes from the `CacheState`.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections import deque
from collections.abc import Callable
from fractions import Fraction
from typing import Any

from simulator.engine import observe
from simulator.engine.caches import NO_HIT, CacheState, counts_of, max_hit_tokens
from simulator.engine.chunked import ChunkedRuns
from simulator.engine.config import SchedulerConfig
from simulator.engine.decode import DECODE
from simulator.engine.geometry import BlockGeometry
from simulator.engine.handoff import BOTH, PREFILL, HandOff
from simulator.engine.observe import Observation, Observer
from simulator.engine.pool import BlockPool
from simulator.engine.records import RowSink
from simulator.engine.retention import NO_CAP, FullRetention, RetentionPolicy
from simulator.engine.sequence import RUNNING, Seq
from simulator.engine.series import SeriesOrder, blocks_crossed, growth_block_s, steps_to_reach
from simulator.engine.timer import StepTimer
from simulator.engine.views import InFlight

SAMPLE_SLACK_S = 1e-7  # a time-series sample falls due this early (`Replica.sample_interval_s`)


def watermark_blocks(watermark: float, total_blocks: int) -> int:
    """The blocks a watermark keeps free: ``ceil(watermark × total_blocks)`` of the fraction as written (its
    shortest repr, exactly, as a `Fraction`). 0.07's double is a hair above 0.07, and 0.07 × 100 in floating point
    is 7.000000000000001: 8 blocks were kept back, not 7 (helper-200). Rounding the product to 9 places (the fix
    that followed) left the hair at a pool of 10^8 blocks (0.07: 7,000,001; helper-205)."""
    return math.ceil(Fraction(repr(float(watermark))) * total_blocks)


class Replica(BlockPool, Observation, ChunkedRuns, InFlight, HandOff):
    """Scheduler and block pool of one replica. SimPy-free: `cluster` drives it."""

    # Every attribute its parts set is a slot, read and written at a fixed offset rather than looked up in
    # an instance dict of 84 keys: the scheduler does that hundreds of times a request (3-5 % of a run's
    # CPU time, side by side). The mixins declare no slots (one base of a class may lay some out, and
    # mypy checks a mixin's assignments against its own), so instances keep a `__dict__` for anything else.
    __slots__ = (  # noqa: RUF023  (grouped by the part that sets them, not sorted)
        # its own: configuration, queues, counters and the step log (`Observation` reads the log)
        "index", "local", "role", "total_blocks", "geometry", "retention", "keeps_all", "shares", "full_cap", "B",
        "swap_s_per_block", "swap_in_s_per_block", "host_blocks", "max_context_tokens", "timer", "coefs", "cache",
        "sched", "watermark_blocks",
        "times_out", "counts", "reserving", "reserved", "reserves", "fast_forward", "observer", "sample_interval_s",
        "samples", "last_sample_s", "waiting", "swapped", "running", "prefilling", "chunks", "rejoined", "S", "kv_sum",
        "private_off", "heap", "used", "host_used", "outstanding_tokens", "carried_swap_s", "g0", "d", "k", "log_g0",
        "log_d", "log_k", "log_top", "log_base", "log_compact_at", "log_order", "log_floor", "log_order_at",
        # the SimPy process's flags and jump in flight (`cluster`, `views`); a router's first-token hook (`cluster`)
        "proc", "wake", "on_first", "idle", "interruptible", "jump_start_s", "jump_n", "jump_s", "jump_end_s",
        "jump_sample",
        # `DecodeSet`, `BlockPool`
        "n_dec", "n_grow", "ov_running", "hist", "ohist", "o_grow", "grows_ov", "win_hi", "win_c", "win_e", "win_top",
        "win_n", "win_g", "win_k",
        "n_preempt",
        # `Observation`'s time integrals
        "acc_s", "used_block_s", "cache_block_s", "evictable_block_s", "private_block_s", "private_token_s", "busy_s",
        "link_busy_mark",
        "link_sample_s",
        # `InFlight`'s window
        "_done_j", "_done_lo", "_done_hi",
        # `ChunkedRuns`
        "run_steps", "run_chunks", "run_ends", "run_sample",
        # `HandOff`
        "handing", "handoffs", "incoming", "arrived", "in_flight", "run_interruptible", "decode_room", "link",
        "n_preempt_seen",
    )

    def __init__(self, *, index: int, total_blocks: int, geometry: BlockGeometry, retention: RetentionPolicy,
                 swap_bytes_per_s: float, host_blocks: int, max_context_tokens: int, timer: StepTimer,
                 cache: CacheState, sched: SchedulerConfig, fast_forward: bool, observer: Observer,
                 sample_interval_s: float, samples: RowSink, role: str = BOTH,
                 swap_in_bytes_per_s: float | None = None) -> None:
        self.index = index
        self.local = index  # index among the replicas its router chooses from (its pool's role)
        self.total_blocks = total_blocks
        self.geometry = geometry
        self.retention = retention
        # the plain policy (every token kept) needs no call at an arrival: its cap is NO_CAP and
        # kept_after_prefill(p, p) = p, so a sequence's cap is the layout's and exactness is ``need − 1 ≤ cap``
        self.keeps_all = isinstance(retention, FullRetention)
        self.full_cap = min(NO_CAP, geometry.cap_tokens)
        self.B = geometry.block_tokens
        # out: one copy of a block leaves; in: every GPU that holds it takes its own (`cluster.build_cluster`)
        self.swap_s_per_block = geometry.block_bytes / swap_bytes_per_s
        self.swap_in_s_per_block = geometry.block_bytes / (swap_in_bytes_per_s or swap_bytes_per_s)
        self.host_blocks = host_blocks
        self.max_context_tokens = max_context_tokens
        self.timer = timer
        self.coefs: dict[int, tuple[float, float]] = {}  # decode_coefficients by batch size (`_coefficients`)
        self.cache = cache
        # a cache that shares blocks; without one (strategy "none") its hooks are no-ops, skipped on the hot path:
        # no sequence uses it (`Seq.exact` False) and it holds no block
        self.shares: bool = getattr(cache, "shares", True)
        # its evictable and HBM blocks, read as attributes where the cache keeps them so: the method calls were
        # 0.7 % of chat-4k-prefix's instructions (8 a request)
        self.counts = counts_of(cache)
        self.sched = sched
        self.watermark_blocks = watermark_blocks(sched.watermark, total_blocks)
        self.times_out = not math.isinf(sched.queue_timeout_s)  # queued requests have deadlines
        self.reserving = sched.admission == "reserve"
        self.reserved = 0  # blocks of decode growth promised to running sequences (admission "reserve")
        # a windowed sequence admitted here holds the overhead blocks of its length so far, growing them as it decodes
        # (`BlockGeometry.growth`; a prefill replica's hands its decode replica the prompt's, which grow there, and
        # admission "reserve" promises the growth); under a retention policy it holds its longest's from admission
        # (what a cap bounds)
        self.grows_ov = bool(geometry.grow_rate) and self.keeps_all
        self.reserves: dict[int, tuple[int, int]] = {}  # seq key -> (growth blocks promised, blocks at its start)
        self.fast_forward = fast_forward
        self.observer = observer
        # the interval a sample's test reads, less a slack (`SAMPLE_SLACK_S`): a step start that falls due at
        # ``last + interval`` to within rounding is due in both modes, whose times differ in their last bits
        # (fast-forward's ``start + T(j)``, stepping's sum of step times: an exact tie went either way)
        self.sample_interval_s = (sample_interval_s - SAMPLE_SLACK_S if sample_interval_s > 2 * SAMPLE_SLACK_S
                                  else sample_interval_s)
        self.samples = samples
        self.last_sample_s = -math.inf
        self.waiting: deque[Seq] = deque()
        self.swapped: deque[Seq] = deque()
        self.running: dict[int, Seq] = {}  # admission order
        self.prefilling: dict[int, Seq] = {}
        self.S = 0  # steps run
        discount = getattr(timer, "decode_discount", None)  # a timer without windows may not have it
        self._init_decode(self.B, discount() if discount is not None else ())
        self.used = 0  # blocks held by sequences and by the cache
        self.host_used = 0
        self.outstanding_tokens = 0  # prefill + output tokens still to compute
        self._init_integrals()
        # the step log, a series an entry, in lists: an array converts every item it takes with `PyArg_Parse`
        # (~470 instructions an append, four a commit), a list keeps the float it is given
        self.log_g0: list[float] = []
        self.log_d: list[float] = []
        self.log_k: list[int] = []
        # each committed series' largest gap g0 + d·(k − 1), for a TPOT p99 over several ranges
        # (`series.gap_quantile_ranges`: a sequence that left the decode set and came back)
        self.log_top: list[float] = []
        self.log_base = 0  # entries dropped from the front of the logs (indices stay absolute)
        self.log_compact_at = observe.LOG_MIN_ENTRIES
        # (−log_top[i], i, log_k[i]) ascending (by the first two: i is unique), for i ≥ log_floor at least;
        # a chunked-prefill run's single steps i..j as one (−max, i, −(j − i + 1)) (`series.suffix_gap_quantile`)
        self.log_order = SeriesOrder()
        self.log_floor = 0  # no decoder's range starts below it (entries below may be gone from log_order)
        self.log_order_at = observe.ORDER_MIN_ENTRIES  # log_order is pruned when it holds this many
        # driven by the SimPy process (see `cluster`)
        self.idle = False
        self.interruptible = False
        self.jump_start_s = 0.0
        self.jump_n = 0  # steps the jump in flight commits (0: none, or a single step planned)
        self.jump_s = 0.0  # their seconds, T(jump_n) (`InFlight.begin_jump`, `cut_jump`): the last jump's after it
        self.jump_end_s = 0.0
        self.jump_sample = 0  # the next step of the jump in flight whose plan, in stepping, would take a sample
        self._init_views()
        self.carried_swap_s = 0.0  # swap-out seconds of a plan that preempted everything
        self.wake: Any = None
        self.proc: Any = None
        self.on_first: Callable[[Seq], None] | None = None  # told of each first token (`cluster.simulate`)
        # the plan
        self.chunks: list[tuple[Seq, int]] = []
        self.rejoined: list[Seq] = []
        self.g0 = 0.0
        self.d = 0.0
        self.k = 0
        self._init_runs()
        self._init_handoff(role)

    # ----------------------------------------------------------------- arrivals
    def enqueue(self, seq: Seq, now: float) -> bool:
        """Queue `seq`; reject it at once (returns False) when it can never be served."""
        req = seq.request
        need = req.prompt_tokens + req.output_tokens
        if need > self.max_context_tokens:
            self._end(seq, "rejected", f"context {need} > max_context_tokens {self.max_context_tokens}", now)
            return False
        prompt = req.prompt_tokens
        if self.keeps_all:
            cap = seq.cap = self.full_cap
            seq.exact = need - 1 <= cap and self.shares
        else:
            cap = seq.cap = min(self.retention.cap_tokens(prompt), self.geometry.cap_tokens)
            seq.exact = (self.retention.kept_after_prefill(prompt, prompt) == prompt and need - 1 <= cap
                         and self.shares)
        # the most KV tokens it holds: its last token's KV is never stored (it ends the request), so prompt + output − 1
        # at most (helper-144: one more promised a compress:8:4096 sequence 7 window blocks it never took)
        held = cap if cap < need - 1 else need - 1  # max(prompt, min(need − 1, cap)) by their rules, not calls
        if held < prompt:
            held = prompt
        if self.geometry.overhead_blocks:  # a windowed layout: the overhead of the most KV tokens it will hold,
            longest = held  # or that admission "reserve" promises it (the output it reserves)
            if self.reserving:
                longest = min(prompt + self._reserved_output(seq) - 1, cap)
                if longest < prompt:
                    longest = prompt
            seq.ov = seq.ovcap = self.geometry.overhead(longest)
        ov = seq.ov
        blocks = self.geometry.blocks(held, ov)
        if self.reserving:  # what admission will ask for: the prompt's blocks and the promised growth
            kv0 = min(self.retention.kept_after_prefill(prompt, seq.target), seq.cap)
            blocks = self.geometry.blocks(self._prefill_tokens(seq), ov) + self._growth(seq, kv0, seq.gen0 + 1)
        if self.role == PREFILL:  # it holds the prompt here, and all of it on a decode replica
            if req.output_tokens > 1 and blocks > self.decode_room:
                self._end(seq, "rejected", f"needs {blocks} blocks > a decode replica's room {self.decode_room}", now)
                return False
            blocks = self.geometry.blocks(prompt, ov)
        if blocks > self.total_blocks - self.watermark_blocks:
            room = f"pool {self.total_blocks} - watermark {self.watermark_blocks}"
            what = " (prompt + reserved output)" if self.reserving else ""
            self._end(seq, "rejected", f"needs {blocks} blocks{what} > {room}", now)
            return False
        # a sample due is the state the request arrives to, before it joins the queue: arrivals see time
        # averages (a Poisson stream's, PASTA), where one taken after would count each sampling arrival as waiting
        if now - self.last_sample_s >= self.sample_interval_s:
            self._sample(now)
        self.waiting.append(seq)
        self.outstanding_tokens += need
        return True

    # ----------------------------------------------------------------- planning
    def plan(self, now: float) -> bool:
        """Form the next batch; False when there is nothing to do."""
        B = self.B
        if now > self.acc_s:
            self._accrue(now)
        if self.waiting and self.times_out:
            self._drop_timed_out(now)
        if self.chunks:  # the plan's lists start empty: the last plan's, if it left them so, or new ones
            self.chunks = []
        if self.rejoined:
            self.rejoined = []
        if self.arrived:  # KV moved here from a prefill replica
            self._join_arrived()
        swap_s, self.carried_swap_s = self.carried_swap_s, 0.0
        preempted = False
        need = self.hist[-self.S % B] if self.n_dec else 0
        if need > self.total_blocks - self.used:
            self._evict(need - self.free_blocks)
            while need > self.free_blocks:  # cached blocks go before anyone is preempted
                swap_s += self._preempt(now)
                preempted = True
                need = self.hist[-self.S % B] if self.n_dec else 0
                self._evict(need - self.free_blocks)  # a recompute may have handed its blocks to the cache
        budget = 0  # the step's token budget left after its chunks: read only when it has chunks
        if self.swapped or self.prefilling or self.waiting:  # else a decode-only batch: nothing can join it
            budget, swap_s = self._fill(now, need, swap_s, preempted)
        if not self.chunks and not self.n_dec:
            if preempted and (self.waiting or self.swapped):  # everything was preempted: admit afresh
                self.carried_swap_s = swap_s  # the swap-outs are paid by the step planned next
                return self.plan(now)
            if not self.running and (self.waiting or self.swapped) and not self.holds_transfers:  # never deadlock
                self._unblock_empty_replica(now)
                return self.plan(now)
            self._sample(now)  # going idle: the time series shows it
            return False
        n = self.n_dec
        prices = None  # a run's steps, priced with this one (`run_prices`)
        # after a preemption the next step may re-admit from the cache's evictable blocks: one step
        if self.chunks or swap_s or self.rejoined or (preempted and self.waiting):
            if self.chunks or swap_s:
                # a run needs a step that fills the budget (`ChunkedRuns._may_run`): none follows one with budget
                # left, the usual prompt's step (`run_prices` and `plan_run` then only found that out)
                prices = None if budget else self.run_prices(budget, swap_s, preempted)
                if prices is None:
                    chunks = []  # a loop, not a comprehension: a function made and called (~1 k instructions)
                    for s, c in self.chunks:
                        chunks.append((c, s.prefilled))
                    ctx = self.kv_sum + n if not self.win_top else self.priced_context()
                    g0 = self.timer.step_s(chunks, n, ctx) + swap_s
                else:
                    g0 = prices[0] + swap_s
            else:
                a, b = self._coefficients(n)
                g0 = a + b * (self.kv_sum + n if not self.win_top else self.priced_context())
            self.g0, self.d, self.k = g0, 0.0, 1
        else:  # a decode-only batch, most plans: `_coefficients` read here (a call the less when remembered)
            ab = self.coefs.get(n)
            a, b = ab if ab is not None else self._coefficients(n)
            if self.win_top:  # sequences shorter than a window are priced at what they read (`decode`)
                self.g0, self.d = a + b * self.priced_context(), b * self.priced_rate()
            else:
                self.g0, self.d = a + b * (self.kv_sum + n), b * self.n_grow
            self.k = self._stable_steps(now)  # evicts what the k steps need: stepping too, so modes match
            if not self.fast_forward:
                self.d, self.k = 0.0, 1
        if self.g0 <= 0:
            raise ValueError(f"replica {self.index}: step time must be > 0 (got {self.g0!r})")
        if now - self.last_sample_s >= self.sample_interval_s:
            self._sample(now)
        if self.chunks and self.k == 1 and not budget:  # (with budget left `run_steps` stays empty: no run)
            self.plan_run(now, budget, swap_s, preempted, prices)  # the next full chunked-prefill steps at once
        return True

    def _coefficients(self, n: int) -> tuple[float, float]:
        """The timer's ``decode_coefficients(n)`` (pure: `StepTimer`), remembered here: the batch size
        changes only at admissions and completions (the timer's own memo costs two calls a plan)."""
        ab = self.coefs.get(n)
        if ab is None:
            ab = self.coefs[n] = self.timer.decode_coefficients(n)
        return ab

    def _fill(self, now: float, need: int, swap_s: float, preempted: bool) -> tuple[int, float]:
        """Swap sequences back in, add the prefilling ones' chunks and admit waiting ones (FCFS, under
        the watermark) to the plan's batch; `need` is the blocks this step's decoders take. Returns the
        token budget the chunks left (`plan_run` takes it) and the swap seconds, these swap-ins' added."""
        B = self.B
        room = self.total_blocks - self.used - need - self.watermark_blocks  # for swap-in and admission
        cap_seqs = self.sched.max_num_seqs - len(self.incoming)  # reserved sequences will run
        while self.swapped and not preempted and len(self.running) < cap_seqs:
            seq = self.swapped[0]
            grow = self._private(seq, seq.kv0 + 1) + self._window_step(seq)
            if grow > room:
                if grow > room + self.counts.evictable:
                    break
                free0 = self.free_blocks
                self._evict(grow - room)
                room += self.free_blocks - free0
            self.swapped.popleft()
            self.host_used -= seq.blocks
            self.used += seq.blocks
            room -= grow
            swap_s += seq.blocks * self.swap_in_s_per_block
            seq.rejoin_from_s = seq.last_tok_s
            self._join_decode(seq)
            self.ov_running += seq.ov
            if self.reserving:
                self._reserve(seq, self._growth(seq, seq.kv0, seq.gen0), seq.kv0)
            need = self.hist[-self.S % B]
            self.rejoined.append(seq)
        budget = self.sched.max_num_batched_tokens - self.n_dec
        most = self.sched.long_prefill_token_threshold or budget  # one sequence's prefill tokens a step
        for seq in self.prefilling.values():
            if budget <= 0:
                break
            chunk = _chunk(seq.target - seq.prefilled, budget, most)
            self.chunks.append((seq, chunk))
            budget -= chunk
        if not preempted and not self.swapped:
            while self.waiting and budget > 0 and len(self.running) < cap_seqs:
                seq = self.waiting[0]
                if seq.exact:
                    max_hit = max_hit_tokens(seq.target, B)
                    hbm, unref = self.cache.probe(seq, max_hit)
                else:
                    max_hit = hbm = unref = 0
                tokens = self._prefill_tokens(seq)  # KV tokens while it prefills, and their blocks
                if self.grows_ov:  # the window of its tokens now, grown as it decodes (`BlockGeometry.growth`)
                    seq.ov = self.geometry.block_overhead(tokens, seq.ovcap)
                full = self.geometry.blocks(tokens, seq.ov)
                blocks = full - hbm // B
                spare = room + (self.counts.evictable if self.shares else 0) - unref
                if self.reserving:  # the promised growth (this step's `need` is part of it) is not room
                    kv0 = min(self.retention.kept_after_prefill(seq.request.prompt_tokens, seq.target), seq.cap)
                    growth = self._growth(seq, kv0, seq.gen0 + 1)
                    if blocks + growth > spare - max(0, self.reserved - need):
                        break
                    self._reserve(seq, growth, kv0)
                elif blocks > spare:
                    break
                self.waiting.popleft()
                adm = self.cache.on_admit(seq, max_hit) if seq.exact else NO_HIT
                hit = adm.hit_tokens
                seq.hit_tokens = hit
                if math.isnan(seq.admit_s):  # first admission: what other requests left in the cache
                    seq.admit_s = now
                    seq.first_hit = hit  # < prompt: max_hit keeps one token to compute
                    seq.hit_hbm, seq.hit_dram, seq.hit_nvme = adm.hbm_tokens, adm.dram_tokens, adm.nvme_tokens
                    seq.recomputed = adm.recomputed_tokens
                else:  # re-admission after a recompute preemption: mostly its own KV
                    seq.resume_hit += hit
                seq.blocks = full - hit // B
                new = seq.blocks + adm.reload_blocks
                if new > self.total_blocks - self.used - need:
                    self._evict(new - (self.free_blocks - need))
                self.used += new
                swap_s += adm.reload_s
                room = self.total_blocks - self.used - need - self.watermark_blocks
                seq.prefilled = hit
                self.outstanding_tokens -= hit
                self.private_off += tokens - hit
                seq.prefill_kv = tokens
                seq.state = RUNNING
                self.running[seq.key] = seq
                self.ov_running += seq.ov
                self.prefilling[seq.key] = seq
                chunk = _chunk(seq.target - seq.prefilled, budget, most)
                self.chunks.append((seq, chunk))
                budget -= chunk
        return budget, swap_s

    def _stable_steps(self, now: float) -> int:
        """Steps until the next completion, block shortage or queue deadline; evicts what they need.

        Blocks available are free plus evictable cache blocks; the cache blocks the k steps need
        are evicted up front, in the cache's order, so a jump costs one eviction however many
        blocks it crosses (stepping calls this too and evicts the same blocks at the same step).
        """
        hist, S, B = self.hist, self.S, self.B
        top = self.heap[0]  # `_next_event_step`, without its call when the heap's top is live (the usual case)
        k = (top[0] if top[3].state == DECODE and top[3].base == top[2] else self._next_event_step()) - S
        free = self.total_blocks - self.used
        # a growing decoder takes at most ⌊(k − 1)/B⌋ + 1 blocks in k steps (`blocks_crossed`): when the free ones
        # cover that for all of them, no k steps' shortage nor eviction needs G(k) (every jump of chat-4k and
        # chat-4k-prefix: G(k) and the deadlines' cut, which only lowers k, are then skipped)
        if (self.n_grow + self.o_grow) * ((k - 1) // B + 1) <= free:
            return self._deadline_steps(k, now) if self.waiting and self.times_out else k
        evictable = self.counts.evictable if self.shares else 0
        avail = free + evictable
        crossed = blocks_crossed(hist, S, B, k)  # G(k): the blocks k steps need
        if crossed > avail:
            lo, hi = 1, k  # G(lo) ≤ avail < G(hi)
            while hi - lo > 1:
                mid = (lo + hi) // 2
                if blocks_crossed(hist, S, B, mid) <= avail:
                    lo = mid
                else:
                    hi = mid
            k = lo
            crossed = -1
        if self.waiting and self.times_out:
            k2 = self._deadline_steps(k, now)
            if k2 != k:
                k, crossed = k2, -1
        if evictable:  # `_evict` inlined: the cache's evictable blocks were read above
            short = (crossed if crossed >= 0 else blocks_crossed(hist, S, B, k)) - free
            if short > 0:
                self.used -= self.cache.evict(short)
        return k

    def _deadline_steps(self, k: int, now: float) -> int:
        """`k`, or fewer steps when the first queued deadline comes before they end."""
        for seq in self.waiting:
            if not math.isinf(seq.deadline_s):
                return min(k, steps_to_reach(self.g0, self.d, seq.deadline_s - now))
        return k

    # ----------------------------------------------------------------- commit
    def commit(self, n: int, end_s: float) -> None:
        """Apply `n` steps of the plan (``n ≤ k``), ending at `end_s`."""
        B = self.B
        n_dec = self.n_dec
        g0, d = self.g0, self.d
        grow, grow_s = 0, 0.0
        if n_dec:
            if n == 1:
                grow = self.hist[-self.S % B]
            else:  # n > 1 steps: a jump's, whose seconds T(n) its start or its cut worked out (`jump_s`)
                grow, grow_s = growth_block_s(self.hist, self.S, B, g0, d, n, self.jump_s)
        # integrate the n steps: the state as planned, plus the decoders' growth (`grow_s`, and one token a
        # step each). Written out here, its one caller, rather than called (it was `Observation._accrue_steps`:
        # the call was about 0.9 % of chat-4k's instructions)
        used, n_grow = self.used, self.n_grow
        dt = end_s - self.acc_s
        cache = self.counts.blocks[0] if self.shares else 0  # HBM's
        tokens = (self.kv_sum + self.private_off) * dt
        if n > 1 and n_grow:  # `series.ramp_s(g0, d, n)` written out (a call a jump)
            tokens += n_grow * (g0 * (n * (n - 1) // 2) + d * ((n - 1) * n * (2 * n - 1) // 6))
        self.used_block_s += used * dt + grow_s
        # without cache blocks ``+= 0 · dt`` adds +0.0 (a no-op: the sums start at +0.0) and none is evictable
        # (a cache's evictable blocks are among its HBM ones): skipped (0.8 % of chat-4k's instructions)
        if cache:
            self.cache_block_s += cache * dt
            self.evictable_block_s += self.counts.evictable * dt
        self.private_block_s += (used - cache - self.ov_running) * dt + grow_s
        if self.o_grow:  # windows growing (`Seq.ow`): their new blocks are overhead, not private
            if n == 1:
                self.ov_running += self.ohist[-self.S % B]
            else:
                og, og_s = growth_block_s(self.ohist, self.S, B, g0, d, n, self.jump_s)
                self.ov_running += og
                self.private_block_s -= og_s
        self.private_token_s += tokens
        self.busy_s += dt
        self.acc_s = end_s
        log_k = self.log_k
        self.log_g0.append(g0)
        self.log_d.append(d)
        log_k.append(n)
        logged = self.log_base + len(log_k)  # absolute index of the next entry (compaction keeps it)
        top = g0 + d * (n - 1)
        self.log_top.append(top)
        if n_dec:  # without decoders no range holds the step: one that opens later starts after it (`_prune_order`)
            # `log_order.add(-top, logged - 1, n)` written out (a call a commit, ~540 instructions): the entry is the
            # newest (its index grows with every commit), so it goes after every entry of equal maximum
            order = self.log_order
            neg_tops, neg_top = order.neg_top, -top
            p = bisect_right(neg_tops, neg_top)
            neg_tops.insert(p, neg_top)
            order.index.insert(p, logged - 1)
            order.k.insert(p, n)
            order.last = logged - 1
            if len(neg_tops) >= self.log_order_at:
                self._prune_order()
        if len(log_k) >= self.log_compact_at:
            self._compact_log()
        if n_dec:
            self.used = used + grow
            if self.reserving:  # every decoder's growth was promised
                self.reserved -= grow
            self.kv_sum += n_grow * n
            if self.win_top:
                self._grow_windows(n)
            self.outstanding_tokens -= n_dec * n
        self.S += n
        for seq in self.rejoined:
            seq.extra_gaps.append(end_s - seq.rejoin_from_s)
            seq.seg_start = logged
            seq.seg_steps = self.S
        if self.heap and self.heap[0][0] <= self.S:
            for seq in self._due():
                kv = self._leave_decode(seq)
                if self.reserving:
                    self._unreserve_decoder(seq, kv)
                self._release(seq, kv, self._private(seq, kv), end_s)
        for seq, chunk in self.chunks:
            seq.prefilled += chunk
            self.outstanding_tokens -= chunk
            if seq.prefilled < seq.target:
                continue
            del self.prefilling[seq.key]
            self.private_off -= seq.prefill_kv - seq.hit_tokens
            gen = seq.gen0 + 1
            if gen == 1:
                seq.first_s = end_s
                if self.on_first is not None:  # a router that counts what it dispatched
                    self.on_first(seq)
            else:
                seq.extra_gaps.append(end_s - seq.last_tok_s)
            seq.gen0 = gen
            self.outstanding_tokens -= 1
            if gen >= seq.request.output_tokens:
                del self.running[seq.key]
                self.ov_running -= seq.ov
                if self.reserving:
                    self._unreserve(seq, 0)
                self._release(seq, seq.target, seq.blocks, end_s)
            elif self.role == PREFILL:  # it decodes on a decode replica
                self._hold(seq)
            else:
                if seq.exact:  # the cache takes over the prefilled blocks, still referenced by seq
                    shared, kept = self.cache.on_prefilled(seq, seq.target)
                    moved = (shared - seq.hit_tokens) // B
                    self.used -= moved - kept  # blocks the cache already held are freed
                    seq.blocks -= moved
                    seq.hit_tokens = shared
                target = seq.target  # the plain policy keeps it all (kept_after_prefill's own answer)
                kept_kv = (target if self.keeps_all
                           else self.retention.kept_after_prefill(seq.request.prompt_tokens, target))
                cap = seq.cap  # (a call of min() is ~850 instructions)
                keep = cap if cap < kept_kv else kept_kv  # min(kept_kv, cap) by its rule, not a call
                # retention drops KV once the prompt is scored: its private blocks at keep ≤ cap
                self.used -= seq.blocks - self._private(seq, keep)
                seq.kv0 = keep
                self._join_decode(seq)  # its range starts after this step (seg_start, seg_steps)

    def _release(self, seq: Seq, tokens: int, blocks: int, end_s: float) -> None:
        r = seq.request
        # `_note_evicted`, written out: a finish's call of it would cost every request ~600 instructions
        most, cap = r.prompt_tokens + r.output_tokens - 1, self.full_cap
        dropped = (most if most < cap else cap) - tokens
        if dropped > seq.evicted:
            seq.evicted = dropped
        kept = self.cache.on_finish(seq, tokens, blocks) if seq.exact else 0
        self.used -= blocks - kept
        self._end(seq, "completed", "", end_s)


def _chunk(left: int, budget: int, most: int) -> int:
    """A prefilling sequence's tokens this step: ``min(left, budget, most)``, by `min`'s rule (the first of
    equals), without its call (a call of min() parses its arguments: ~850 instructions)."""
    if budget < left:
        left = budget
    return most if most < left else left
