"""What routers read of a replica while a decode jump or a chunked-prefill run is in flight.

The SimPy process yields one timeout for a jump of k steps (or a run of chunked steps) and commits
them at its end; an arrival in between asks the replica for its load as stepping would show it:
the state at the last commit less what the steps finished since have done (`outstanding_at`,
`used_at`). `outstanding_until` also says until when that value holds, for a router that keeps
its view incrementally (`routers.basic._LeastTokens`).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from simulator.engine.series import blocks_crossed, series_s, steps_within

UNTIL_MARGIN = 1e-9  # `outstanding_until` ends its windows this much early (relative to the time)


class InFlight:
    """Mixin of `Replica` (see there for the attributes it uses)."""

    B: int
    S: int
    g0: float
    d: float
    used: int
    n_dec: int
    hist: list[int]
    outstanding_tokens: int
    jump_start_s: float
    jump_n: int
    jump_s: float
    jump_end_s: float
    run_ends: list[float]

    if TYPE_CHECKING:  # provided by `ChunkedRuns`
        run_steps: list[float]

        def run_steps_done(self, now: float) -> int: ...
        def run_outstanding_at(self, now: float) -> int: ...
        def run_used_at(self, now: float) -> int: ...

    def _init_views(self) -> None:
        # `steps_done` remembers its last answer j with the window ``T(j) ≤ now − start < T(j+1)``
        # it holds for: routers ask every replica at every arrival, mostly within one step
        self._done_j, self._done_lo, self._done_hi = 0, math.inf, math.inf

    def begin_jump(self, start_s: float, k: int) -> float:
        """The planned `k` > 1 steps run from `start_s` (the SimPy process yields one timeout for them);
        returns their seconds, ``series_s(g0, d, k)``, kept as ``jump_s`` (the commit's ``T(n)``).

        The steps window starts as the first step's, ``[T(0), T(1)) = [0, g0)`` with j = 0, what `_window`
        sets for a time in it: a router's first look within that step then solves nothing, and one in the
        next step takes `_window`'s step to the next window, not its closed form (in chat-4k-prefix a third
        of the first looks are in the first step and a quarter in the second)."""
        self.jump_start_s, self.jump_n = start_s, k
        span = self.jump_s = k * self.g0 + self.d * (k * (k - 1) // 2)  # series_s(g0, d, k), without its call
        self.jump_end_s = start_s + span
        self._done_j, self._done_lo, self._done_hi = 0, 0.0, self.g0
        return span

    def steps_done(self, now: float) -> int:
        """Whole steps of the jump in flight finished by `now` (not yet committed); a jump an interrupt
        cut to its first step counts that step once it has ended."""
        if not self.jump_n:
            return 0
        e = now - self.jump_start_s
        if not self._done_lo <= e < self._done_hi:  # j = steps_within(e) for all e in [T(j), T(j + 1))
            self._window(e)
        return min(self.jump_n, self._done_j)

    def cut_jump(self, now: float) -> None:
        """Cut the jump in flight to the steps that end at or after `now` first: ``jump_n`` becomes
        ``min(jump_n, steps_to_reach(g0, d, now − jump_start_s))``, the smallest ``j ≥ 1`` with ``T(j) ≥ e``,
        and ``jump_s`` its ``T(jump_n)``. From `steps_done`'s window ``T(j) ≤ e < T(j + 1)`` (an arrival
        that interrupts a jump has just had the router read it for this very time): j when ``T(j) = e``,
        else j + 1, and its T is the window's start or end (``series_s(g0, d, j)`` and of j + 1, the same
        floats), not worked out again (nor again by the commit: `Replica.commit` reads ``jump_s``)."""
        e = now - self.jump_start_s
        if not self._done_lo <= e < self._done_hi:
            self._window(e)
        j = self._done_j
        if j >= 1 and self._done_lo == e:
            if j < self.jump_n:
                self.jump_n, self.jump_s = j, self._done_lo
        elif j + 1 < self.jump_n:
            self.jump_n, self.jump_s = j + 1, self._done_hi

    def _window(self, e: float) -> None:
        """Set ``j = steps_within(e)`` and its window ``[T(j), T(j + 1))``. Time moves on: `e` past the
        last window is most often in the next one (one step later; one `series_s`, written out: routers
        ask at every boundary); ``T(j + 1) ≤ e < T(j + 2)`` makes ``j + 1`` the largest such j (T never
        decreases). A jump just begun is most often read in its first step, ``[T(0), T(1)) = [0, g0)``
        (what `series_s` gives). Else it is solved anew: `steps_within`'s closed-form estimate, taken
        when its window holds `e` (the usual case; then it is the j `steps_within` returns), else its search."""
        g0, d = self.g0, self.d
        if e >= self._done_hi:
            j = self._done_j + 1
            hi = (j + 1) * g0 + d * ((j + 1) * j // 2)  # series_s(g0, d, j + 1)
            if e < hi:
                self._done_j, self._done_lo, self._done_hi = j, self._done_hi, hi
                return
        elif e < g0:
            self._done_j, self._done_lo, self._done_hi = 0, 0.0, g0
            return
        # e ≥ g0 here (a window past the first ends at T(j + 1) ≥ g0): steps_within's estimate, written out
        h = g0 - d / 2
        root = math.sqrt(h * h + 2 * d * e)
        j = int(2 * e / (h + root) if h > 0 else (root - h) / d)
        lo = j * g0 + d * (j * (j - 1) // 2)  # series_s(g0, d, j), then of j + 1
        hi = (j + 1) * g0 + d * ((j + 1) * j // 2)
        if not lo <= e < hi:  # rounding left it a step or so off
            j = steps_within(g0, d, e)
            lo, hi = series_s(g0, d, j), series_s(g0, d, j + 1)
        self._done_j, self._done_lo, self._done_hi = j, lo, hi

    def outstanding_at(self, now: float) -> int:
        """Tokens still to compute, as stepping would show them at `now`: at an arrival, which goes before the
        commit of a step ending at `now` (`cluster.REPLICA_PRIORITY_STEP`), without that step (helper-203: with
        it, a fast-forwarded jump routed otherwise than stepping at an arrival on a step's end)."""
        k = self.jump_n
        if not k:
            return self.run_outstanding_at(now) if self.run_steps else self.outstanding_tokens
        e = now - self.jump_start_s  # `steps_done(now)`, written out (routers ask every replica at every arrival)
        if not self._done_lo <= e < self._done_hi:
            self._window(e)
        j = self._done_j
        if e == self._done_lo and j:  # the step ending at `now`: not committed yet
            j -= 1
        return self.outstanding_tokens - self.n_dec * (j if j < k else k)

    def outstanding_after(self, now: float) -> int:
        """`outstanding_at`, a step of the jump or run in flight that ends at `now` counted as committed: the state
        stepping has at `now` once that step's commit ran (for a replica before another in index order, as the
        other commits at `now`: `disagg.Transfers.dispatch`)."""
        if self.run_steps:
            return self.run_outstanding_at(math.nextafter(now, math.inf))  # (the steps ended by `now` included)
        return self.outstanding_tokens - self.n_dec * self.steps_done(now)  # (0 steps without a jump in flight)

    def outstanding_until(self, now: float, level: int | None = None) -> tuple[int, float, int]:
        """``(outstanding_at(now), t, low)``: the value holds until `t` at least, unless the replica's
        state changes first (an arrival, a plan, a commit): the next step boundary of the jump or run in
        flight, a hair early (``UNTIL_MARGIN``, relative) so that rounding never keeps a stale value.
        Until that state change the value only falls, step by step.

        A router that needs the value only while it is at most `level` (it is no least load above that)
        may ask for more: when the value is above `level`, `t` is instead the boundary where it falls to
        `level` or below (infinite when the jump ends above), and it stays at `low` (> `level`) or above
        until then. Otherwise ``low`` is the value.

        A router keeping its view incrementally calls this for every replica that changed or passed its
        `t` since the last arrival: the jump's case is `steps_done` written out."""
        k = self.jump_n
        if k > 1 and not self.run_steps:  # a jump in flight
            e = now - self.jump_start_s
            if not self._done_lo <= e < self._done_hi:  # j = steps_within(e) for all e in [T(j), T(j + 1))
                self._window(e)
            j, hi = self._done_j, self._done_hi
            if e == self._done_lo and j:  # the step ending at `now` is not committed yet (`outstanding_at`): the
                j, hi = j - 1, e  # value holds at `now` alone (its `t` is past: read again at the next arrival)
            o, nd = self.outstanding_tokens, self.n_dec
            if j >= k:
                return o - nd * k, math.inf, o - nd * k
            value = o - nd * j
            if level is None or value <= level:
                t = self.jump_start_s + hi  # a time, ≥ 0: max(1, |t|) written out
                return value, t - UNTIL_MARGIN * (t if t > 1.0 else 1.0), value
            floor = o - nd * k
            if floor > level:
                return value, math.inf, floor
            i = (o - level + nd - 1) // nd  # the first step count whose value is ≤ level: j < i ≤ k
            t = self.jump_start_s + series_s(self.g0, self.d, i)
            return value, t - UNTIL_MARGIN * (t if t > 1.0 else 1.0), level + 1
        value = self.outstanding_at(now)
        if self.run_steps:
            j = self.run_steps_done(now)
            t = self.run_ends[j] if j < len(self.run_ends) else math.inf
        elif k and self._done_j < k:  # a jump an interrupt cut to its first step (k = 1), that step in flight
            t = self.jump_start_s + self._done_hi  # outstanding_at(now) just set the window
        else:
            return value, math.inf, value
        return value, t - UNTIL_MARGIN * max(1.0, abs(t)), value

    def outstanding_floor(self) -> int:
        """A lower bound of `outstanding_at` from now until the replica's state next changes: its value
        at the end of the jump or run in flight (it only falls until then). Cheaper than
        `outstanding_until`: a router keeping its view incrementally need not read a replica that
        changed while this is well above the least load."""
        if self.run_steps:
            return self.run_outstanding_at(math.inf)  # every step of the run done
        return self.outstanding_tokens - self.n_dec * self.jump_n  # no jump: jump_n = 0, the value holds

    def committed_steps(self, now: float) -> int:
        """Steps of the jump in flight that stepping has committed at `now`, as an arrival then sees them: those
        `steps_done` counts, less a step ending at `now`, whose commit comes after the arrival
        (`cluster.REPLICA_PRIORITY_STEP`). What `used_at` and an arrival's sample read (`Observation._sample`);
        `outstanding_at` and `outstanding_until` write it out."""
        j = self.steps_done(now)
        if j and self._done_j == j and self._done_lo == now - self.jump_start_s:
            j -= 1
        return j

    def used_at(self, now: float) -> int:
        """Blocks in use, as stepping would show them at `now`: at an arrival, before the commit of a step ending
        at `now` (`committed_steps`)."""
        if self.run_steps:
            return self.run_used_at(now)
        j = self.committed_steps(now)
        return self.used + (blocks_crossed(self.hist, self.S, self.B, j) if j else 0)

