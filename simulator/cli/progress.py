"""Progress on stderr: click's progress bar, driven by the library's fractions (`simulator.progress`).

On a terminal each phase is a bar with its label, the percentage done and click's ETA (time so far
scaled by the work left over the work done; the library weighs the work by its cost, so the ETA
holds from the first seconds). Elsewhere (a pipe, a CI log, ``--json`` into a file) click draws no
bar and prints only the label, once, so a log still says which phase is running; lines a phase
notes (a capacity-search run's verdict) are printed as they come there, while on a terminal the
latest shows beside the bar and all of them follow it once it ends.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import click

from simulator.progress import Progress

STEPS = 1000  # a bar's resolution: the library's fractions in thousandths
# the bar line's fixed parts beside the label and the note: "  [", "]", "  100%", "  00:00:00", separators
CLUTTER = 24
MIN_BAR = 20


def _on_terminal() -> bool:
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):  # a closed or replaced stream
        return False


class Bar:
    """One phase's bar; call it with the fraction done, `note` a line about the work."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.notes: list[str] = []
        self._terminal = _on_terminal()
        self._bar = click.progressbar(length=STEPS, label=label, file=sys.stderr, item_show_func=self._item)
        self._bar.__enter__()  # draws the bar (on a terminal) or prints the label (elsewhere) now

    def _item(self, note: str | None) -> str | None:
        """The latest note, cut to what the terminal's width leaves beside a bar of `MIN_BAR`."""
        if not note:
            return None
        room = shutil.get_terminal_size().columns - len(self.label) - CLUTTER - MIN_BAR
        return note if len(note) <= room else (note[:room - 1] + "…" if room > 10 else None)

    def __call__(self, fraction: float) -> None:
        steps = round(min(max(fraction, 0.0), 1.0) * STEPS) - self._bar.pos
        if steps > 0:
            self._bar.update(steps)

    def note(self, line: str) -> None:
        """A line about the work: printed now off a terminal; on one, shown beside the bar and
        printed below it when the phase ends."""
        if not self._terminal:
            click.echo(f"  {line}", err=True)
            return
        self.notes.append(line)
        self._bar.current_item = line
        self._bar.render_progress()

    def close(self) -> None:
        if self._bar.current_item is not None:  # the finished bar without its latest note (all of them follow)
            self._bar.current_item = None
            self._bar.render_progress()
        self._bar.__exit__(None, None, None)
        for line in self.notes:
            click.echo(f"  {line}", err=True)


@contextmanager
def progress_bar(label: str) -> Iterator[Bar]:
    """A bar for one phase, closed (and its notes printed) when the block ends."""
    bar = Bar(label)
    try:
        yield bar
    finally:
        bar.close()


class PhaseBars:
    """`simulator.progress.Phases` as bars: each phase's bar opens as the phase begins and closes
    when the next one begins or the block ends."""

    def __init__(self) -> None:
        self._bar: Bar | None = None

    def __call__(self, label: str) -> Progress:
        self.close()
        self._bar = Bar(label)
        return self._bar

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None


@contextmanager
def phase_bars() -> Iterator[PhaseBars]:
    bars = PhaseBars()
    try:
        yield bars
    finally:
        bars.close()
