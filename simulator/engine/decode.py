"""The decode set of a replica: running aggregates that make a stable batch O(changes).

``n_dec`` decoders, ``n_grow`` of them still growing (not at their retention cap), ``kv_sum``
(Σ KV tokens at step ``S``), ``hist[p]`` = growing decoders with ``(kv − S) mod B = p`` (so
``blocks_crossed(hist, S, B, j)`` counts the blocks j more steps need), and a heap of each
decoder's next event: its completion, or the step its KV reaches its cap, whichever is first.
At the cap a sequence leaves ``hist`` and stops adding context; the planner never jumps past an
event, so fast-forward and stepping see the same states.
"""

from __future__ import annotations

import heapq

from simulator.engine.sequence import Seq

DECODE = 4  # a RUNNING sequence whose prefill is complete


class DecodeSet:
    """Mixin of `Replica`: the decode set's aggregates and its join/leave/event rules."""

    B: int
    S: int
    running: dict[int, Seq]
    log_k: list[int]
    log_base: int

    def _init_decode(self, block_tokens: int) -> None:
        self.n_dec = 0
        self.n_grow = 0
        self.kv_sum = 0  # Σ kv tokens of decoders at step S
        # private KV tokens of the running sequences = kv_sum + private_off, where private_off =
        # Σ_prefilling (prefill tokens − hit) − Σ_decoders hit (a shared prefix is the cache's)
        self.private_off = 0
        self.hist = [0] * block_tokens  # growing decoders by (kv0 − base) mod B
        self.heap: list[tuple[int, int, int, Seq]] = []  # (event step, key, base, seq)

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
        if grow > 0:
            self.n_grow += 1
            self.hist[(kv0 - S) % self.B] += 1
            if grow < left:  # `min` by its rule, without a call (~850 instructions)
                left = grow
        heapq.heappush(self.heap, (S + left, seq.key, S, seq))

    def _leave_decode(self, seq: Seq) -> int:
        """Take `seq` out of the decode set; materialise its counts; return its KV tokens."""
        S = self.S
        steps = S - seq.base  # since its counts were set (`Seq.kv_tokens` and `Seq.generated` inlined)
        if seq.capped:
            kv = seq.kv0
        else:
            kv = seq.kv0 + steps
            self.n_grow -= 1
            self.hist[(kv - S) % self.B] -= 1
        seq.gen0 += steps
        seq.kv0 = kv
        self.n_dec -= 1
        self.kv_sum -= kv
        self.private_off += seq.hit_tokens
        seq.ranges.append((seq.seg_start, self.log_base + len(self.log_k)))
        del self.running[seq.key]
        return kv

    def _due(self) -> list[Seq]:
        """Pop events up to step S: sequences reaching their cap are re-based; return finished ones."""
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
            kv = seq.kv_tokens(S)  # == cap
            self.n_grow -= 1
            self.hist[(kv - S) % self.B] -= 1
            seq.gen0 = gen
            seq.kv0 = kv
            self._rebase(seq)
        return done

    def _next_event_step(self) -> int:
        heap = self.heap
        while heap[0][3].state != DECODE or heap[0][3].base != heap[0][2]:
            heapq.heappop(heap)
        return heap[0][0]
