"""Observation side of a replica: a request's end record (with its exact TPOT p99) and samples."""

from __future__ import annotations

import math
from array import array
from collections import deque
from collections.abc import Callable
from typing import Any

import numpy as np

from simulator.engine.sequence import DONE, Seq
from simulator.engine.series import gap_quantile

# (seq, outcome, reason, end_s, tpot_p99_s, tpot_mean_s)
Observer = Callable[[Seq, str, str, float, float, float], None]


class Observation:
    """Mixin of `Replica` (see there for the attributes it uses)."""

    index: int
    observer: Observer
    log_g0: array
    log_d: array
    log_k: array
    last_sample_s: float
    samples: list[tuple[Any, ...]]
    kv_sum: int
    used: int
    n_dec: int
    prefilling: dict[int, Seq]
    running: dict[int, Seq]
    waiting: deque[Seq]
    swapped: deque[Seq]
    chunks: list[tuple[Seq, int]]
    timer: Any

    def _end(self, seq: Seq, outcome: str, reason: str, end_s: float) -> None:
        seq.state = DONE
        p99 = mean = math.nan
        out = seq.request.output_tokens
        if outcome == "completed" and out > 1:
            mean = (end_s - seq.first_s) / (out - 1)
            p99 = self._gap_p99(seq)
        self.observer(seq, outcome, reason, end_s, p99, mean)

    def _gap_p99(self, seq: Seq) -> float:
        ranges = seq.ranges
        if len(ranges) == 1 and not seq.extra_gaps:
            a, b = ranges[0]
            if b - a == 1:  # one segment: the series' own quantile
                k = self.log_k[a]
                pos = 0.99 * (k - 1)
                return self.log_g0[a] + self.log_d[a] * pos
        g0s = np.concatenate([np.frombuffer(self.log_g0[a:b]) for a, b in ranges])
        ds = np.concatenate([np.frombuffer(self.log_d[a:b]) for a, b in ranges])
        ks = np.concatenate([np.frombuffer(self.log_k[a:b], dtype=np.int64) for a, b in ranges])
        return gap_quantile(g0s, ds, ks, seq.extra_gaps)

    # ----------------------------------------------------------------- observation
    def _sample(self, now: float) -> None:
        self.last_sample_s = now
        tokens = self.kv_sum + sum(s.prefilled for s in self.prefilling.values())
        batch_tokens = self.n_dec + sum(c for _, c in self.chunks)
        mfu = bw = math.nan
        breakdown = getattr(self.timer, "cost", None)  # the cost model's full step breakdown
        if breakdown is not None and batch_tokens:
            c = breakdown([(n, s.prefilled) for s, n in self.chunks], self.n_dec, self.kv_sum + self.n_dec)
            mfu = c.mfu
            bw = c.bytes / (c.total_s * self.timer.gpu.hbm_bytes_per_s) if c.total_s > 0 else math.nan
        self.samples.append((now, self.index, self.used, tokens, len(self.running), len(self.waiting),
                             len(self.swapped), batch_tokens, mfu, bw))

    def sample(self, now: float) -> None:
        """Record a time-series row now (used at the end of the run)."""
        self._sample(now)
