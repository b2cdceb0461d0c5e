"""Chunked prefill in runs: the steps of a long prompt planned at once, committed one by one.

A long prompt under a token budget (vLLM's ``max_num_batched_tokens``, Sarathi's chunk) takes many
steps whose every plan is the same: the prefilling sequences' chunks fill the budget, so nothing is
admitted, and the decoders each add a token. Only the numbers move (the chunks' cached context, the
decoders' context), so `plan_run` works out those steps in one go, ``(chunks_i, g_i)`` for
``i = 1..k−1`` after the step just planned, and the SimPy process yields one timeout for all of them;
`commit_run` then commits each step as stepping would (`Replica.commit`, with the step's chunks and
time, at the end time stepping would reach: ``t_{i+1} = t_i + g_i`` in floating point, as SimPy sums).

A step joins the run only when its plan would have done nothing but form those chunks and price
them, so records, samples and the time integrals are stepping's, bit for bit:

- its chunks fill the budget (no admission: arrivals during the run wait, as in stepping), and no
  earlier step of the run completes a prefill or reaches a decoder's next event (completion, cap):
  such a step may only be the run's last;
- the decoders' new blocks fit the free blocks at every step (no eviction, no preemption);
- nothing is swapped, swapped in or preempted, and the queue has no timeout (no deadline falls
  inside the run);
- each step ends after the one before (every plan inside the run has a time of its own).

A time-series sample may fall due inside the run (an aggregated fleet's: a disaggregated one's ends
before, `_begin_run`): stepping takes it at the first arrival or plan from then on, from the state
it has there. What a sample reads either does not change in a run (the queues, the running set,
the cache's blocks: an arrival is queued, as in stepping) or is worked out for ``q`` steps
committed (`sample_in_run`: the decoders' blocks ``G(q)`` and context, the chunks prefilled), so
an arrival's sample reads the run's state at its time, and a plan's is taken at that plan's time
by a timeout of its own (`run_sample`, `cluster._ReplicaProcess`), in stepping's order. Runs used
to end before a sample fell due, the step after them alone: 4,729 of Vidur's 17,399 runs priced
were cut so, 2,570 of them to that one step (4.2 % of its engine's instructions, 10k requests).

A KV transfer into a decode replica (`simulator.engine.disagg`) changes the blocks its later steps
would find, so it interrupts a run there: the steps finished and the one in progress are committed
(``commit_run(m)``) and the replica plans again, where stepping would.

While the run is in flight, `outstanding_at` and `used_at` (what routers read) count its steps
finished before then, as decode jumps do (`simulator.engine.views`). Without ``fast_forward`` there are
no runs: stepping stays the reference, and the tests hold runs to it bit for bit. What changes is
the engine's own work: one SimPy event a run instead of one a step (the summary's ``events``).
"""

from __future__ import annotations

import bisect
import math
from typing import TYPE_CHECKING

from simulator.engine.handoff import BOTH
from simulator.engine.series import blocks_crossed

_NO_SLOPE = [0.0]  # a single step's log entry: d = 0 ...
_ONE_STEP = [1]  # ... and k = 1 (repeated, the entries of a run's steps)

if TYPE_CHECKING:
    from collections import deque
    from collections.abc import Callable

    from simulator.engine.caches import CacheCounts, CacheState
    from simulator.engine.config import SchedulerConfig
    from simulator.engine.geometry import BlockGeometry
    from simulator.engine.sequence import Seq
    from simulator.engine.series import SeriesOrder
    from simulator.engine.timer import StepTimer


class ChunkedRuns:
    """Mixin of `Replica` (see there for the attributes it uses)."""

    B: int
    S: int
    g0: float
    d: float
    used: int
    total_blocks: int
    kv_sum: int
    n_dec: int
    n_grow: int
    o_grow: int
    win_top: int
    hist: list[int]
    ohist: list[int]
    heap: list[tuple[int, int, int, Seq]]
    chunks: list[tuple[Seq, int]]
    rejoined: list[Seq]
    prefilling: dict[int, Seq]
    swapped: deque[Seq]
    sched: SchedulerConfig
    timer: StepTimer
    fast_forward: bool
    role: str
    last_sample_s: float
    sample_interval_s: float
    outstanding_tokens: int
    log_g0: list[float]
    log_d: list[float]
    log_k: list[int]
    log_top: list[float]
    log_base: int
    log_order: SeriesOrder
    log_order_at: int
    log_compact_at: int

    reserving: bool
    reserved: int
    cache: CacheState
    counts: CacheCounts
    geometry: BlockGeometry
    running: dict[int, Seq]
    ov_running: int
    acc_s: float
    private_off: int
    used_block_s: float
    cache_block_s: float
    evictable_block_s: float
    private_block_s: float
    private_token_s: float
    busy_s: float

    if TYPE_CHECKING:
        def commit(self, n: int, end_s: float) -> None: ...
        def _next_event_step(self) -> int: ...
        def _compact_log(self) -> None: ...
        def _prune_order(self) -> None: ...
        def _put_sample(self, now: float, used: int, kv_sum: int, step: list[tuple[Seq, int]],
                        done: dict[int, int], ahead: int = 0) -> None: ...
        def priced_context(self, ahead: int = 0) -> float | int: ...
        def _grow_windows(self, steps: int) -> None: ...

    def _init_runs(self) -> None:
        self.run_steps: list[float] = []  # the times g_i of steps 1.. of the run in flight
        self.run_chunks: list[list[tuple[Seq, int]]] | None = None  # their chunks (None: step 0's, each step)
        self.run_ends: list[float] = []  # end time of each step of the run (step 0 first)
        self.run_sample = 0  # the next step of the run whose plan, in stepping, would take a sample (0: none)

    def _may_run(self, budget_left: int, swap_s: float, preempted: bool) -> bool:
        """Whether the plan just formed may start a run, whatever its chunks: no budget left (nothing
        admitted), no swap, preemption or rejoined sequence, no queue deadline, fast-forward on."""
        return not (budget_left or not self.chunks or not self.fast_forward or swap_s or preempted or self.rejoined
                    or self.swapped or not math.isinf(self.sched.queue_timeout_s))

    def _last_run_step(self) -> int:
        """The last step a run may take: the one whose commit meets the decoders' next event (none
        without decoders)."""
        return self._next_event_step() - self.S - 1 if self.n_dec else 1 << 62

    def run_prices(self, budget_left: int, swap_s: float, preempted: bool) -> list[float] | None:
        """The times of the step just planned (``self.chunks``) and of the next ``count`` steps a run of
        one prompt may take (`plan_run`), priced in one call (the cost model's `prefill_run_s`: one NumPy
        power over the chunks, where step 0 alone took one of its own); None when no such run can
        follow (the caller prices step 0 alone). Where a time-series sample falls due in the run is
        `_begin_run`'s to find, with every step's time."""
        if len(self.prefilling) != 1 or not self._may_run(budget_left, swap_s, preempted):
            return None
        # one long prompt: step 0's chunk is ``(seq, budget)`` (it leaves no budget), and so is every step's
        seq, c0 = self.chunks[0]
        pre0 = seq.prefilled + c0
        if pre0 >= seq.target:
            return None  # the step completes the prefill: the next plan differs
        n, B, S, hist = self.n_dec, self.B, self.S, self.hist
        last_step = self._last_run_step()
        if last_step < 1:
            return None
        budget = self.sched.max_num_batched_tokens - n
        free = self.total_blocks - self.used
        # steps 1..count fill the budget (the prompt's tokens left hold one more budget at each)
        count = (seq.target - pre0) // budget
        if last_step < count:  # `min` by its rule, without a call (~850 instructions)
            count = last_step
        # a growing decoder takes at most ⌊(j − 1)/B⌋ + 1 blocks in j steps: when the free ones cover that for
        # all of them, G(count + 1) is not needed (as in `Replica._stable_steps`)
        if (n and count > 0 and (self.n_grow + self.o_grow) * (count // B + 1) > free
                and blocks_crossed(hist, S, B, count + 1) > free):
            count = self._steps_with_blocks(count, free)  # some step's new blocks are not free
        if count <= 0:
            return None
        # step i (0..count) prefills (budget, prefilled + i·budget) beside n decoders at kv0 + i·n_grow
        kv0, n_grow, pre = self.kv_sum + n, self.n_grow, seq.prefilled
        run_s = getattr(self.timer, "prefill_run_s", None)
        if run_s is not None and not self.win_top:
            return run_s(budget, pre, count + 1, n, kv0, n_grow)
        # a loop, not a comprehension: a comprehension's names would be cells, made at every call (~1 k instructions)
        step_s, prices = self.timer.step_s, []
        for i in range(count + 1):  # each step's context as stepping prices it (`priced_context`)
            prices.append(step_s([(budget, pre + i * budget)], n, self.priced_context(i)))
        return prices

    def plan_run(self, now: float, budget_left: int, swap_s: float, preempted: bool,
                 prices: list[float] | None = None) -> None:
        """Extend the step just planned (``self.chunks``, ``self.g0``, starting at `now`) into a run
        of full chunked-prefill steps, when stepping would plan the same (module docstring); `prices`:
        `run_prices`' (one prompt), else None."""
        self.run_steps = []
        end = now + self.g0
        if prices is not None:  # one long prompt: steps 1..count, priced with step 0
            gs = prices[1:]
            ends = [end]
            for g in gs:
                # each step ends after the last (a price ≤ 0, or one lost to rounding, ends the run): every plan
                # inside the run has a time of its own, before the run's end (`run_sample`)
                nxt = end + g
                if not nxt > end:
                    break
                end = nxt
                ends.append(end)
            if len(ends) > 1:
                del gs[len(ends) - 1:]
                self._begin_run(gs, None, ends)
            return
        if len(self.prefilling) == 1 or not self._may_run(budget_left, swap_s, preempted):
            return  # (one prompt: `run_prices` found no run)
        for seq, c in self.chunks:
            if seq.prefilled + c >= seq.target:
                return  # the step completes a prefill: the next plan differs
        n = self.n_dec
        last_step = self._last_run_step()
        if last_step < 1:
            return
        budget = self.sched.max_num_batched_tokens - n
        free = self.total_blocks - self.used
        self._plan_many(end, budget, free, last_step, self.kv_sum + n, self.n_grow)

    def _steps_with_blocks(self, count: int, free: int) -> int:
        """The steps 1..count whose plans find the decoders' new blocks free: stepping's step i
        (after the commits of steps 0..i−1) needs ``hist[−(S + i) mod B]`` more."""
        hist, S, B = self.hist, self.S, self.B
        crossed = hist[-S % B]  # new blocks the decoders take in steps 0..i−1 (the commits)
        for i in range(1, count + 1):
            crossed += hist[-(S + i) % B]
            if crossed > free:
                return i - 1
        return count

    def _plan_many(self, end: float, budget: int, free: int, last_step: int, kv0: int, n_grow: int) -> None:
        """`plan_run` of several prefilling sequences: their next steps' chunks from `_chunks_after`,
        priced one by one; `end` is step 0's end."""
        n, B, S, hist = self.n_dec, self.B, self.S, self.hist
        step_s = self.timer.step_s
        crossed = hist[-S % B] if n else 0  # new blocks the decoders take in steps 0..i−1 (the commits)
        ends = [end]
        gs: list[float] = []
        all_chunks: list[list[tuple[Seq, int]]] = []
        chunk_at = self._chunks_after(budget)
        i = 1
        while True:
            need = hist[-(S + i) % B] if n else 0  # step i's plan: these must be free, as in stepping
            if crossed + need > free:
                break  # step i's plan would evict or preempt
            crossed += need
            step = chunk_at()
            if step is None:
                break  # not full: step i's plan would admit from the queue
            chunks, priced, completes = step
            g = step_s(priced, n, kv0 + i * n_grow if not self.win_top else self.priced_context(i))
            end = ends[-1] + g
            if not end > ends[-1]:  # (each step ends after the last: see `plan_run`)
                break
            gs.append(g)
            all_chunks.append(chunks)
            ends.append(end)
            if completes or i >= last_step:
                break
            i += 1
        if gs:
            self._begin_run(gs, all_chunks, ends)

    def _begin_run(self, gs: list[float], all_chunks: list[list[tuple[Seq, int]]] | None, ends: list[float]) -> None:
        """Set the run of steps 1..len(gs) in flight: their times, chunks (None: step 0's) and `ends`.

        A replica of a disaggregated fleet ends it before the first step end where a sample falls due,
        as runs always did (the step ending there runs alone, and the plan after it takes the sample): a
        state change between its commits (a hand-off's release, a reservation: `HandOff._shift_integrals`)
        is integrated from the last commit, so moving its commits would move the integrals' last bits
        (and a decode replica's run may be interrupted, by a KV transfer)."""
        if self.role == BOTH:
            q = self._sample_due(ends, 0, len(ends) - 1)  # (the plan after the run's last step takes its own)
        else:
            q = self._sample_due(ends, 0, len(ends))
            if q:
                if q < 3:
                    return  # steps 0 and 1 at most: no run
                del ends[q - 1:], gs[q - 2:]
                if all_chunks is not None:
                    del all_chunks[q - 2:]
                q = 0
        self.run_steps, self.run_chunks, self.run_ends, self.run_sample = gs, all_chunks, ends, q

    def _sample_due(self, ends: list[float], q: int, n: int) -> int:
        """The first of steps q + 1..n of a run ending its steps at `ends` (step i starts at ``ends[i − 1]``)
        whose plan would take a sample (``t − last_sample_s ≥ sample_interval_s`` at its start ``t``, as
        `Replica.plan` asks); 0: none."""
        last, interval = self.last_sample_s, self.sample_interval_s
        # the starts grow, and so does ``t − last``: none is due unless the last one is (the usual run)
        if n <= q or ends[n - 1] - last < interval:
            return 0
        for i in range(q, n):
            if not ends[i] - last < interval:
                return i + 1
        return 0

    def take_run_sample(self, now: float) -> int:
        """At `now`, the start of step ``run_sample`` of the run in flight: the sample its plan would take
        in stepping, unless one was taken since (an arrival's, `Replica.enqueue`); returns the next such
        step (`run_sample`, 0: none)."""
        q = self.run_sample
        if now - self.last_sample_s >= self.sample_interval_s:
            self.sample_in_run(now, q)
        ends = self.run_ends
        q = self.run_sample = self._sample_due(ends, q, len(ends) - 1)
        return q

    def sample_in_run(self, now: float, q: int) -> None:
        """A sample of the state stepping would have at `now`, with steps 0..q − 1 of the run in flight
        committed and step q planned (its chunks): the decoders' blocks and context grown by q steps,
        the prefilling sequences' chunks of those steps prefilled. What else a sample reads (the
        queues, the running set, the cache's blocks) no step of a run changes."""
        used, kv_sum = self.used, self.kv_sum
        if q and self.n_dec:
            used += blocks_crossed(self.hist, self.S, self.B, q)
            kv_sum += self.n_grow * q
        done: dict[int, int] = {}  # prefilled by steps 0..q − 1
        if self.run_chunks is None:  # one prompt, the same chunk every step
            ((seq, c),) = step = self.chunks
            done[seq.key] = c * q
        else:
            for chunks in [self.chunks, *self.run_chunks][:q]:
                for seq, c in chunks:
                    done[seq.key] = done.get(seq.key, 0) + c
            step = self.chunks if not q else self.run_chunks[q - 1]
        self._put_sample(now, used, kv_sum, step, done, q)

    def _chunks_after(self, budget: int) -> Callable[[], tuple[list[tuple[Seq, int]], list[tuple[int, int]], bool]
                                                              | None]:
        """A function giving, call by call, the next steps' chunks as the plans of stepping would form
        them (the prefilling sequences in order, each ``min(left to prefill, budget left,
        long_prefill_token_threshold)``), with
        their ``(new, context)`` pairs and whether one completes; None once a step is not full."""
        done = {seq.key: seq.prefilled + c for seq, c in self.chunks}  # prefilled after the steps so far
        prefilling = list(self.prefilling.values())
        most = self.sched.long_prefill_token_threshold or budget  # a sequence's tokens a step, as `plan` caps them
        if len(prefilling) == 1:  # the usual case: one long prompt
            seq = prefilling[0]
            pre, target = done[seq.key], seq.target

            def one() -> tuple[list[tuple[Seq, int]], list[tuple[int, int]], bool] | None:
                nonlocal pre
                if target - pre < budget or most < budget:
                    return None
                before, pre = pre, pre + budget
                return [(seq, budget)], [(budget, before)], pre >= target

            return one

        def many() -> tuple[list[tuple[Seq, int]], list[tuple[int, int]], bool] | None:
            chunks: list[tuple[Seq, int]] = []
            priced: list[tuple[int, int]] = []
            left = budget
            for seq in prefilling:
                if left <= 0:
                    break
                before = done.get(seq.key, seq.prefilled)
                c = min(seq.target - before, left, most)
                chunks.append((seq, c))
                priced.append((c, before))
                left -= c
            if left:
                return None
            completes = False
            for (seq, c), (_, before) in zip(chunks, priced, strict=True):
                done[seq.key] = before + c
                completes = completes or before + c >= seq.target
            return chunks, priced, completes

        return many

    def commit_run(self, m: int = 0) -> None:
        """Commit the run in flight, or its first `m` steps (0: all; fewer when a KV transfer
        interrupted it, `simulator.engine.handoff`): each step at its end time, with its chunks and time.

        All steps but the last complete no prefill and meet no decoder event, so their commits
        (`Replica.commit`) reduce to: integrate the step (as `Replica.commit` does, unrolled here:
        the cache and the running set do not change), log it, grow the decoders' blocks and context
        (and take the growth off the promised blocks), count the tokens computed (every step computes
        the whole budget: its chunks and one token a decoder). The last step is an ordinary commit.
        The k − 1 steps take one entry of `log_order`, as a group (``k = −(k − 1)``), not one each: no
        decoder's range starts inside them (decoders join at commits and plans), and the TPOT p99
        reads a group's steps from the log (`series.suffix_gap_quantile`).
        Stale heap entries the skipped commits would have dropped wait for it (it drops them the same way).
        """
        steps, ends = self.run_steps, self.run_ends
        self.run_steps = []
        k = m or len(steps) + 1
        gs = [self.g0, *steps[:k - 1]]
        g_last = gs.pop()  # the last step's time goes to `commit`; gs: the k − 1 steps committed here
        n_dec, n_grow, B, hist = self.n_dec, self.n_grow, self.B, self.hist
        cache, evictable = self.counts.blocks[0], self.counts.evictable
        held = cache + self.ov_running  # the integers of `private`
        used, S, acc = self.used, self.S, self.acc_s
        used_s, cache_s, evictable_s, private_s, token_s = self.used_block_s, self.cache_block_s, \
            self.evictable_block_s, self.private_block_s, self.private_token_s
        busy = self.busy_s
        # `Replica.commit`'s sums, less what adds +0.0 to them (its ``+ grow_block_s``, and ``cache · dt`` without
        # a cache): a no-op, since they start at +0.0 and so never hold −0.0. The integer factors are kept
        # as floats (exact): 3.11 specialises float-float arithmetic, not int-float (these sums were 4.1 % of
        # vidur's instructions; the two choices take 1.0 % and 0.8 % of them off)
        blocks, private, tokens, cache_f = float(used), float(used - held), float(self.kv_sum + self.private_off), \
            float(cache)
        evictable_f = float(evictable)
        grow_f = float(n_grow)
        ohist = self.ohist if self.o_grow else None  # windows growing (`Seq.ow`): overhead, not private
        grown_ov = 0
        # the phase of `hist` whose decoders cross a block at step S (``−S mod B``) is one less at each step,
        # cyclically: counted down, not worked out (a negation and a remainder of ints a step, neither specialised)
        p = -S % B
        for end in ends[:k - 1]:
            dt = end - acc
            busy += dt
            used_s += blocks * dt
            if cache:
                cache_s += cache_f * dt
                if evictable:  # unreferenced cache blocks: constant too (no prefill completes, no one leaves)
                    evictable_s += evictable_f * dt
            private_s += private * dt
            token_s += tokens * dt
            acc = end
            if n_dec:
                grow = hist[p]
                if grow:
                    blocks += grow
                    private += grow
                    if ohist is not None:
                        private -= ohist[p]
                        grown_ov += ohist[p]
                tokens += grow_f
                p = p - 1 if p else B - 1
        S += k - 1
        used = int(blocks)
        self.ov_running += grown_ov
        kv_sum = self.kv_sum + n_grow * (k - 1) if n_dec else self.kv_sum
        if self.win_top:
            self._grow_windows(k - 1)
        if self.reserving:  # the decoders' growth was promised (admission "reserve")
            self.reserved -= used - self.used
        self.used, self.kv_sum, self.S, self.acc_s, self.busy_s = used, kv_sum, S, acc, busy
        self.used_block_s, self.cache_block_s, self.evictable_block_s, self.private_block_s, self.private_token_s = \
            used_s, cache_s, evictable_s, private_s, token_s
        self.outstanding_tokens -= (k - 1) * self.sched.max_num_batched_tokens
        if self.run_chunks is None:  # every step's chunks are step 0's: one sequence, the whole budget
            for seq, c in self.chunks:
                seq.prefilled += c * (k - 1)
        else:
            all_chunks = [self.chunks, *self.run_chunks[:k - 1]]
            for chunks in all_chunks[:-1]:
                for seq, c in chunks:
                    seq.prefilled += c
            self.chunks = all_chunks[-1]
        self.log_g0.extend(gs)
        self.log_d.extend(_NO_SLOPE * (k - 1))
        self.log_k.extend(_ONE_STEP * (k - 1))
        self.log_top.extend(gs)  # g0 + d·(k − 1) with d = 0 and k = 1
        # one `log_order` entry for them all, a group of k − 1 single steps (`series.suffix_gap_quantile`); none
        # without decoders, as `Replica.commit`
        if gs and n_dec:
            self.log_order.add(-max(gs), self.log_base + len(self.log_k) - (k - 1), 1 if k == 2 else 1 - k)
            if len(self.log_order) >= self.log_order_at:
                self._prune_order()
        if len(self.log_k) >= self.log_compact_at:
            self._compact_log()
        self.g0, self.d = g_last, 0.0
        self.commit(1, ends[k - 1])

    def run_steps_done(self, now: float) -> int:
        """Steps of the run in flight committed by `now` in stepping: those that ended before it. A step ending at
        `now` does not count: a router reads at an arrival, which goes before that step's commit
        (`cluster.REPLICA_PRIORITY_STEP`), as an arrival's sample reads it (`Observation._sample`; helper-203: it
        counted, and a fast-forwarded run routed otherwise than stepping at an arrival on a step's end)."""
        return bisect.bisect_left(self.run_ends, now)

    def run_outstanding_at(self, now: float) -> int:
        return self.outstanding_tokens - self.run_steps_done(now) * self.sched.max_num_batched_tokens

    def run_used_at(self, now: float) -> int:
        j = self.run_steps_done(now)
        return self.used + (blocks_crossed(self.hist, self.S, self.B, j) if j else 0)
