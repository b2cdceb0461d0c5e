"""The decode set of a replica: running aggregates that make a stable batch O(changes).

``n_dec`` decoders, ``n_grow`` of them still growing (not at their retention cap), ``kv_sum``
(Σ KV tokens at step ``S``), ``hist[p]`` = the blocks growing decoders with ``(kv − S) mod B = p`` open
each ``B`` tokens (so ``blocks_crossed(hist, S, B, j)`` counts the blocks j more steps need), and a heap of
each decoder's next event: its completion, or the step its KV reaches its cap, whichever is first.
A decoder opens one block every ``B`` tokens, and under a windowed layout ``1 + ow`` while its window's
overhead grows (``Seq.ow = ρ``, `simulator.engine.geometry`'s growth line): ``ohist`` and ``o_grow`` hold
those ``ow`` apart (they are overhead, ``ov_running``, not private blocks). Where that rate changes is an
event (`BlockGeometry.growth`: a piece of the growth line ends, or the sequence reaches its most).
At the cap a sequence leaves ``hist`` and stops adding context; the planner never jumps past an
event, so fast-forward and stepping see the same states.

A layout with a sliding or compression window reads less KV for a sequence shorter than the window
than the affine decode model charges (`simulator.cost.StepModel.decode_discount`: the deficit
``δ(a) = c_s − e_s·a`` tokens for ``a`` attended tokens in segment ``s``). Per segment the set keeps
its decoders ``win_n[s]``, the growing ones ``win_g[s]`` and their attended tokens ``win_k[s]``
(``Σ (kv + 1)``, integers, so stepping and a jump reach the same sums); a growing decoder's next event
is also the step it leaves its segment. The step is then priced at ``kv_sum + n_dec − Σ_s (win_n[s]·c_s −
e_s·win_k[s])`` (`priced_context`), which grows by ``n_grow + Σ_s e_s·win_g[s]`` a step (`priced_rate`).
"""

from __future__ import annotations

import heapq
from bisect import bisect_right
from collections.abc import Sequence

from simulator.engine.geometry import BlockGeometry
from simulator.engine.sequence import Seq

DECODE = 4  # a RUNNING sequence whose prefill is complete


class DecodeSet:
    """Mixin of `Replica`: the decode set's aggregates and its join/leave/event rules."""

    B: int
    S: int
    geometry: BlockGeometry
    running: dict[int, Seq]
    log_k: list[int]
    log_base: int

    def _init_decode(self, block_tokens: int, discount: Sequence[tuple[int, float, float]] = ()) -> None:
        self.n_dec = 0
        self.n_grow = 0
        self.ov_running = 0  # Σ overhead blocks of the running sequences (`Seq.ov`)
        self.kv_sum = 0  # Σ kv tokens of decoders at step S
        # private KV tokens of the running sequences = kv_sum + private_off, where private_off =
        # Σ_prefilling (prefill tokens − hit) − Σ_decoders hit (a shared prefix is the cache's)
        self.private_off = 0
        self.hist = [0] * block_tokens  # blocks growing decoders open by (kv0 − base) mod B: 1 each, + `Seq.ow`
        # the overhead blocks among them (`Seq.ow` by phase) and their sum: windowed sequences growing their window
        self.ohist = [0] * block_tokens
        self.o_grow = 0
        self.heap: list[tuple[int, int, int, Seq]] = []  # (event step, key, base, seq)
        # the window segments (module docstring): their upper ends, deficit lines and sums; win_top 0: none
        self.win_hi = [hi for hi, _, _ in discount]
        self.win_c = [c for _, c, _ in discount]
        self.win_e = [e for _, _, e in discount]
        self.win_top = self.win_hi[-1] if discount else 0
        self.win_n = [0] * len(discount)
        self.win_g = [0] * len(discount)
        self.win_k = [0] * len(discount)

    def _join_decode(self, seq: Seq) -> None:
        seq.state = DECODE
        seq.seg_start = self.log_base + len(self.log_k)
        seq.seg_steps = self.S
        self.n_dec += 1
        self.kv_sum += seq.kv0
        self.private_off -= seq.hit_tokens
        self.running[seq.key] = seq
        self._rebase(seq)

    def _rebase(self, seq: Seq) -> None:
        """Count `seq` (at ``kv0`` tokens, ``gen0`` generated) from step S; push its next event."""
        S, kv0 = self.S, seq.kv0
        seq.base = S
        left = seq.request.output_tokens - seq.gen0
        grow = seq.cap - kv0
        seq.capped = grow <= 0
        ow = stop = 0
        if grow > 0:
            self.n_grow += 1
            if seq.ov < seq.ovcap:  # its window's overhead grows with it (`BlockGeometry.growth`)
                ow, stop = self.geometry.growth(kv0, seq.ov, seq.ovcap)
                p = (kv0 - S) % self.B
                self.hist[p] += 1 + ow
                self.ohist[p] += ow
                self.o_grow += ow
            else:
                self.hist[(kv0 - S) % self.B] += 1
            if grow < left:  # `min` by its rule, without a call (~850 instructions)
                left = grow
        seq.ow = ow
        if kv0 + 1 < self.win_top:  # in a window segment: counted there, and the step it leaves it is an event
            a = kv0 + 1
            s = seq.win = bisect_right(self.win_hi, a)
            self.win_n[s] += 1
            self.win_k[s] += a
            if grow > 0:
                self.win_g[s] += 1
                if self.win_hi[s] - a < left:
                    left = self.win_hi[s] - a
        # an event once it has written `stop`, where its growth takes another rate or stops at its most, unless no
        # block opens after `stop` before its next event: then nothing would change
        if ow and stop + self.B <= kv0 + left:
            left = stop - kv0
        heapq.heappush(self.heap, (S + left, seq.key, S, seq))

    def overhead_held(self, seq: Seq) -> int:
        """The overhead blocks `seq` holds at step S: ``Seq.ov``, and while decoding its ``ow`` a block it
        opened since ``kv0`` (`Seq.base`), ``ow · (ceil(kv/B) − ceil(kv0/B))``."""
        if not seq.ow:
            return seq.ov
        B = self.B
        return seq.ov + seq.ow * (-(-seq.kv_tokens(self.S) // B) + -seq.kv0 // B)

    def _stop_overhead(self, seq: Seq, p: int) -> None:
        """`seq`, at phase `p`, stops growing its overhead: ``Seq.ov`` becomes what it holds now
        (`overhead_held`). Its blocks stay counted (``used``, ``ov_running``: the commits added them)."""
        ow = seq.ow
        self.hist[p] -= ow
        self.ohist[p] -= ow
        self.o_grow -= ow
        seq.ov = self.overhead_held(seq)
        seq.ow = 0

    def _unwindow(self, seq: Seq, kv: int, growing: bool) -> None:
        """Take `seq`, at `kv` tokens, out of its window segment's sums."""
        s = seq.win
        seq.win = -1
        self.win_n[s] -= 1
        self.win_k[s] -= kv + 1
        if growing:
            self.win_g[s] -= 1

    def priced_context(self, ahead: int = 0) -> float | int:
        """The decode context a step `ahead` steps from S is priced at (no event between): ``Σ (kv + 1)``
        over the decoders, less their window deficits (module docstring); an int without windows."""
        ctx = self.kv_sum + self.n_dec + ahead * self.n_grow
        if not self.win_top:
            return ctx
        off = 0.0
        for s in range(len(self.win_hi)):
            if self.win_n[s]:
                off += self.win_n[s] * self.win_c[s] - self.win_e[s] * (self.win_k[s] + ahead * self.win_g[s])
        return ctx - off

    def _grow_windows(self, steps: int) -> None:
        """`steps` committed: each growing decoder in a window segment attends `steps` tokens more."""
        k, g = self.win_k, self.win_g
        for s in range(len(k)):
            k[s] += g[s] * steps

    def priced_rate(self) -> float | int:
        """What `priced_context` grows by a step: ``n_grow``, plus ``e_s`` for each growing decoder in a
        window segment."""
        rate = self.n_grow
        if not self.win_top:
            return rate
        return rate + sum(e * g for e, g in zip(self.win_e, self.win_g, strict=True))

    def _leave_decode(self, seq: Seq) -> int:
        """Take `seq` out of the decode set; materialise its counts; return its KV tokens."""
        S = self.S
        steps = S - seq.base  # since its counts were set (`Seq.kv_tokens` and `Seq.generated` inlined)
        if seq.capped:
            kv = seq.kv0
        else:
            kv = seq.kv0 + steps
            self.n_grow -= 1
            p = (kv - S) % self.B
            self.hist[p] -= 1
            if seq.ow:
                self._stop_overhead(seq, p)
        if seq.win >= 0:
            self._unwindow(seq, kv, not seq.capped)
        seq.gen0 += steps
        seq.kv0 = kv
        self.n_dec -= 1
        self.kv_sum -= kv
        self.private_off += seq.hit_tokens
        seq.ranges.append((seq.seg_start, self.log_base + len(self.log_k)))
        del self.running[seq.key]
        self.ov_running -= seq.ov
        return kv

    def _due(self) -> list[Seq]:
        """Pop events up to step S: sequences reaching their cap or leaving a window segment are re-based;
        return finished ones."""
        heap, S = self.heap, self.S
        done: list[Seq] = []
        while heap and heap[0][0] <= S:
            _, _, base, seq = heapq.heappop(heap)
            if seq.state != DECODE or seq.base != base:
                continue
            gen = seq.gen0 + (S - base)  # seq.generated(S)
            if gen >= seq.request.output_tokens:
                done.append(seq)
                continue
            # it grows (a capped decoder's only event is its completion): at its cap, or leaving its window segment
            kv = seq.kv_tokens(S)
            self.n_grow -= 1
            p = (kv - S) % self.B
            self.hist[p] -= 1
            if seq.ow:
                self._stop_overhead(seq, p)
            if seq.win >= 0:
                self._unwindow(seq, kv, True)
            seq.gen0 = gen
            seq.kv0 = kv
            self._rebase(seq)
        return done

    def _next_event_step(self) -> int:
        heap = self.heap
        while heap[0][3].state != DECODE or heap[0][3].base != heap[0][2]:
            heapq.heappop(heap)
        return heap[0][0]
