"""Progress of long library calls, as fractions for a caller's callback (no terminal, no click).

A long call takes ``progress: Progress``, a function told the fraction of the call's work done:
numbers in [0, 1] that never decrease, 1.0 last and once. A call made of distinct phases (the
report: its files and charts, the collapse study, the TTL break-even) takes ``phases: Phases``
instead, a function called with each phase's label as it begins that returns the phase's
`Progress`. The CLI draws a click progress bar from them (`simulator.cli.progress`); a notebook
may pass ``print``.

A bar's time left is its time so far scaled by the work left over the work done, so the
fractions weigh work by what it costs, not by how many pieces there are. `Meter` keeps that
account: the caller names pieces by their expected cost (requests simulated, rows fitted) and
re-estimates the cost still to come as it learns more (a search that needs another doubling);
the fraction reported is ::

    done / (done + left of this stage + priors of the stages after it)

held at its highest so far (a larger estimate stalls the bar rather than move it back) and
below 1 until `Meter.finish`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

Progress = Callable[[float], None]
Phases = Callable[[str], Progress]

# what generating (or reading) one request costs against simulating it once: 28 µs against
# 125-145 µs a request on the default scenario's fleets (2 cores, kvsim 0.1, 2025)
GENERATE_COST = 0.2
BEFORE_FINISH = 0.999  # the highest fraction before `finish`: a short estimate stalls here, never ends early


class Meter:
    """The fraction of a task's expected cost done, for a `Progress` callback (module docstring).

    `stages` are the expected costs of the task's stages in order (in any one unit); the first
    is under way. `expect` replaces the current stage's estimate of the cost it still has to
    come, `next_stage` moves to the next one (its prior becomes its estimate; stages alike, such
    as one search per node kind, may be expected to cost what it turns out to: `alike` of them
    after the first), `piece` gives the callback of a piece of work under way and `add` books a
    finished piece. A `quiet` meter reports nothing until `inform`.
    """

    __slots__ = ("_alike", "_done", "_later", "_left", "_progress", "_quiet", "_shown", "_stage_start")

    def __init__(self, progress: Progress | None, stages: Sequence[float] = (1.0,), *, alike: int = 0,
                 quiet: bool = False) -> None:
        if not stages or any(not (c >= 0 and math.isfinite(c)) for c in stages):
            raise ValueError(f"Meter: 'stages' must be finite costs >= 0, at least one (got {list(stages)})")
        self._progress = progress
        self._done = 0.0
        self._left = float(stages[0])
        self._later = [float(c) for c in stages[1:]]
        self._shown = 0.0
        self._stage_start = 0.0
        self._alike = min(max(alike, 0), len(self._later))  # as `next_stage` says, for the first stage
        self._quiet = quiet

    @property
    def fraction(self) -> float:
        """The fraction last reported (0 before any)."""
        return self._shown

    def _report(self, under_way: float = 0.0) -> None:
        left = max(self._left, under_way)
        this = self._done - self._stage_start + left  # the current stage's cost, as now expected
        later = this * self._alike + sum(self._later[self._alike:])
        total = self._done + left + later
        f = min((self._done + under_way) / total if total > 0 else 0.0, BEFORE_FINISH)
        if f > self._shown and not self._quiet:
            self._shown = f
            if self._progress is not None:
                self._progress(f)

    def inform(self) -> None:
        """The estimate rests on the task's own work from the next `expect` on: a meter made `quiet`
        (its priors mere guesses) reports from then, so a bar's first time left comes from an
        informed estimate (click averages its first few)."""
        self._quiet = False

    def expect(self, left: float) -> None:
        """The current stage's cost still to come, from here on (pieces under way included)."""
        self._left = max(float(left), 0.0)
        self._report()

    def piece(self, cost: float) -> Progress:
        """The callback of a piece of expected `cost` under way: its fraction ``f`` counts
        ``f · cost`` as done (book it with `add` when it ends)."""
        def update(f: float) -> None:
            self._report(min(max(f, 0.0), 1.0) * cost)

        return update

    def add(self, cost: float) -> None:
        """A piece of the current stage ended: `cost` is done and no longer to come."""
        self._done += cost
        self._left = max(self._left - cost, 0.0)
        self._report()

    def next_stage(self, alike: int = 0, later: Sequence[float] | None = None) -> None:
        """The current stage ended (whatever its estimate said); the next one begins, and the
        `alike` stages after it are expected to cost what it does (its prior, then as `expect` says,
        then what it cost). `later`: new priors of the stages after the one that ended."""
        spent = self._done - self._stage_start
        self._later[:self._alike] = [spent] * self._alike  # the stages alike the one that ended
        if later is not None:
            self._later = [float(c) for c in later]
        self._left = self._later.pop(0) if self._later else 0.0
        self._stage_start = self._done
        self._alike = min(max(alike, 0), len(self._later))
        self._report()

    def finish(self) -> None:
        """The task ended: report 1.0 (once)."""
        self._quiet = False
        if self._shown < 1.0:
            self._shown = 1.0
            if self._progress is not None:
                self._progress(1.0)


def search_runs_left(lo: int, hi: int, found: bool) -> int:
    """Runs a doubling-then-bisection search over integers still has, counted optimistically.

    The search brackets the answer in ``(lo, hi]``: ``lo`` failed (or is below the start) and ``hi``
    met (`found`) or is the next to try. Bisecting a bracket of width ``w`` takes at most
    ``ceil(log2(w))`` runs; before anything met, the next doubling is assumed to meet (one run),
    which a failure corrects with the next estimate.
    """
    width = max(hi - lo, 1)
    return (0 if found else 1) + math.ceil(math.log2(width))


__all__ = ["BEFORE_FINISH", "GENERATE_COST", "Meter", "Phases", "Progress", "search_runs_left"]
