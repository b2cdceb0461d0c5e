"""Steady-state figures: throughput over a window that leaves out warm-up and drain.

A finite run starts empty (warm-up: the batch fills) and ends with a drain (no new arrivals, the
batch empties), so makespan-based figures (``output_tokens_per_s`` = output tokens / (last
completion − first arrival)) understate what the fleet sustains. `SteadyWindow` says which part
of the run counts, `steady_state` measures it from the per-request records.

The window ``(start, end]``, with ``a0``, ``a1`` the first and last arrivals and ``A = a1 − a0``:

- **end** = ``a1`` (after the last arrival the run only drains); when every request arrives at
  once (``A = 0``, an offline run) ``end`` = the last first-admission, the moment the queue
  empties (after it the batch only drains);
- **start** = ``a0 + max(f · A', min(W, h · A'))`` with ``A' = end − a0``, ``f`` = `warmup_fraction`
  (0.1), ``W`` the mean sojourn of completed requests and ``h`` = `max_warmup_fraction` (0.5). By
  Little's law the number in the system reaches its level about one mean sojourn after load begins,
  so a fixed fraction alone is too short when latency is a sizeable part of the run; the cap keeps an
  overloaded run (whose ``W`` grows without bound) a window to measure. ``W`` is end − arrival, or
  in an offline run end − first admission (everyone waits from t = 0, so the wait says nothing about
  when the batch is full).

Figures over the window (``L = end − start``):

- ``sustained_output_tokens_per_s``: output tokens produced in the window / L. A request's first
  token is counted at its first-token time; its other ``o − 1`` are spread evenly over
  ``(first token, end]`` (each boundary misplaces at most one token a request);
- ``sustained_requests_per_s``: completions in the window / L;
- ``offered_requests_per_s``: arrivals in the window / L; a different quantity from the
  workload's rate over the whole run (``n / (last arrival − first arrival)``,
  `workloads.summary.offered_rate_per_s`, which ``kvsim workload describe`` and ``kvsim compare``
  print), since warm-up and drain are left out.

**Not steady** (``steady_state = False``, with the reason in ``steady_state_warning``) when the window
is empty or holds fewer than `min_completions` (10) completions (too short to tell, and then no more is
said), or, the overload case (``steady_queue_growing``), when arrivals fall in it and the waiting queue
(arrived, never admitted) grew through it by more than the lesser of a tenth of the window's queued
arrivals (first admissions there fewer than `min_admission_ratio`, 0.9, of them; requests rejected on
arrival never queue and are left out) and `max_growth_sigmas` (3) standard deviations of their count
(``3·√queued``, a Poisson count's spread): it was still building, so the sustained figures are a fleet
at saturation, not a load it keeps up with. A queue a fleet keeps up with ends the window about where it
started (its length does not grow with the window), where an overload of ``ε`` builds about ``ε`` of the
arrivals: the second bound finds one of a few percent in a long window (3,000 queued: 5.5%; 30,000:
1.7%) that the tenth missed; below 900 queued the tenth is the lesser. An overload that grows the
running batch instead of the queue (admission keeps up while every decode slows:
``mlperf-llama2-70b-server`` at 111 req/s reads steady over 300 s and fails over 900 s) is not told
apart from a batch still filling after warm-up (that run's batch grew by 1,860 in its window, and by 818
at 95% of that rate, which 900-s runs meet): only a longer run tells. The queue, not the number in the
system, is what the rule watches: a workload whose rate still ramps (sessions accumulating) with long
decodes holds more requests in its running batch at the end of the window than at its start without any
backlog, and that is not overload (it is the next case). Under a queue timeout, requests that time out
waiting leave the queue without an admission: the rule counts them as it counts the queue's growth (the
fleet fell behind), and the warning says the two apart ("arrivals outran admissions ...: N timed out waiting
and the queue grew (or shrank) by M").

A disaggregated fleet has a second queue the rule watches the same way: requests prefilled (their first token)
that wait on their prefill replica for room on a decode replica. Its arrivals are the requests whose prefill ended
in the window and went on to decode, its admissions those whose KV started moving there (``transfer_start_s``);
where it outran them by the same bounds the run is not steady and ``steady_queue_growing`` (a decode side falling
behind: "the hand-off queue grew ..."), where the prefill-side rule alone read a batch still filling (helper-190).

**Too short** (``steady_state = False``; ``steady_too_short``, as in the few-completions case) when,
in a run with arrivals spread over time (``A > 0``), the queue did not grow but completions in the
window are fewer than `min_admission_ratio` of its queued arrivals: the number in the system (the
running batch) grew by more than a tenth of them, so the batch was still filling (or the arrival
rate still ramping) and the sustained figures understate the load the fleet keeps up with. In
``kvsim capacity mlperf-llama2-70b-server --max-rate --duration-s 60`` the run at 141 req/s offered
(window [24.5, 60] s) completed 3,001 for 5,007 arrivals: 84.6 req/s "sustained", where 300-s runs
meet at 111 and fail at 116. Only a longer run can tell.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from simulator.errors import must

if TYPE_CHECKING:
    import pandas as pd


# the words around a warning's reason: `simulator.maxrate` takes them off to quote the reason in its own sentence
NOT_STEADY = "not steady: "
RUN_LONGER = "; run longer"  # ends the warnings of a run too short to tell (`SteadyState.too_short`)
# ... of an offline run (every request at once), which lasts as long as its requests take
MORE_REQUESTS = "; give the run more requests (an offline run lasts as long as its requests take)"


@dataclass(frozen=True, slots=True, kw_only=True)
class SteadyWindow:
    """The rule choosing the steady-state window (see the module docstring)."""

    warmup_fraction: float = 0.1
    max_warmup_fraction: float = 0.5
    min_admission_ratio: float = 0.9
    min_completions: int = 10
    max_growth_sigmas: float = 3.0

    def __post_init__(self) -> None:
        w = "SteadyWindow"
        must(0 <= self.warmup_fraction < 1, w, "warmup_fraction", "in [0, 1)", self.warmup_fraction)
        must(self.warmup_fraction <= self.max_warmup_fraction < 1, w, "max_warmup_fraction",
             f"in [warmup_fraction={self.warmup_fraction:g}, 1)", self.max_warmup_fraction)
        must(0 < self.min_admission_ratio <= 1, w, "min_admission_ratio", "in (0, 1]", self.min_admission_ratio)
        must(self.min_completions >= 1, w, "min_completions", ">= 1", self.min_completions)
        must(self.max_growth_sigmas > 0, w, "max_growth_sigmas", "> 0", self.max_growth_sigmas)


@dataclass(frozen=True, slots=True, kw_only=True)
class SteadyState:
    """What the run sustained over its steady window (seconds from the workload start)."""

    start_s: float
    end_s: float
    arrivals: int
    admissions: int
    completions: int
    output_tokens: float
    warning: str
    queue_growing: bool = False  # arrivals outran admissions through the window (the overload case of `warning`)
    queued: int = 0  # arrivals in the window that queued (not rejected on arrival): `admissions` is weighed against it
    too_short: bool = False  # too few completions, or the batch still filling: only a longer run can tell

    @property
    def window_s(self) -> float:
        return max(self.end_s - self.start_s, 0.0)

    @property
    def steady(self) -> bool:
        return not self.warning

    def _per_s(self, x: float) -> float:
        return x / self.window_s if self.window_s > 0 else math.nan

    @property
    def sustained_output_tokens_per_s(self) -> float:
        return self._per_s(self.output_tokens)

    @property
    def sustained_requests_per_s(self) -> float:
        return self._per_s(self.completions)

    @property
    def offered_requests_per_s(self) -> float:
        return self._per_s(self.arrivals)

    def as_summary(self) -> dict[str, Any]:
        """The summary's keys for these figures."""
        return {
            "steady_window_start_s": self.start_s,
            "steady_window_end_s": self.end_s,
            "steady_window_s": self.window_s,
            "offered_requests_per_s": self.offered_requests_per_s,
            "sustained_requests_per_s": self.sustained_requests_per_s,
            "sustained_output_tokens_per_s": self.sustained_output_tokens_per_s,
            "steady_arrivals": self.arrivals,
            "steady_admissions": self.admissions,
            "steady_queued": self.queued,
            "steady_completions": self.completions,
            "steady_state": self.steady,
            "steady_state_warning": self.warning,
            "steady_queue_growing": self.queue_growing,
            "steady_too_short": self.too_short,
        }


WINDOW_CHUNK = 1 << 16  # requests `window_tokens` works on at a time (its temporaries: a few MB)


def window_tokens(arrival_s: np.ndarray, ttft_s: np.ndarray, end_s: np.ndarray, output_tokens: np.ndarray,
                  start: float, end: float) -> float:
    """Output tokens produced in ``(start, end]``: each request's first at ``first_s = arrival_s + ttft_s``,
    the other ``o − 1`` spread evenly over ``(first_s, end_s]``.

    Each request's share of ``(first_s, end_s]`` inside the window (0 where that span is empty), times
    ``o − 1``, is computed `WINDOW_CHUNK` requests at a time into one array, summed once: one array of
    the requests' length (a day of 4M requests: 32 MB, where whole-length temporaries took 130), and
    the same sum as whole-length arithmetic gives (the same values, summed in the same order)."""
    shares = np.empty(len(end_s))
    first_in = 0
    for lo in range(0, len(end_s), WINDOW_CHUNK):
        hi = lo + WINDOW_CHUNK
        first = arrival_s[lo:hi] + ttft_s[lo:hi]
        first_in += int(((first > start) & (first <= end)).sum())
        ends = end_s[lo:hi]
        share = shares[lo:hi]
        np.minimum(ends, end, out=share)
        share -= np.maximum(first, start)
        np.clip(share, 0.0, None, out=share)
        dur = ends - first
        spans = dur > 0
        np.divide(share, dur, out=share, where=spans)
        share[~spans] = 0.0
        np.multiply(output_tokens[lo:hi] - 1, share, out=share)  # integer counts: o − 1 is exact, as a float is
    return float(first_in + shares.sum())


def completed_rows(requests: pd.DataFrame, columns: Sequence[str]) -> pd.DataFrame:
    """The completed requests of `requests`, for a reader of `columns` only: the frame itself when every
    request completed (the usual case; no copy), else a copy of those columns' completed rows alone (a
    day of 4M requests, five columns: 144 MB, where all a streamed run's frame's take 440)."""
    completed = (requests.outcome == "completed").to_numpy()
    return requests if completed.all() else requests.loc[completed, list(columns)]


STEADY_COLUMNS = ("outcome", "arrival_s", "ttft_s", "end_s", "admit_s", "output_tokens")
"""The request records' columns `steady_state` reads (its completed rows': all but ``outcome``)."""


def _outran(queued: int, admitted: int, w: SteadyWindow) -> bool:
    """Whether a queue's `admitted` of its `queued` arrivals in the window fell behind them: fewer than
    ``min_admission_ratio`` of them, or short by more than ``max_growth_sigmas · √queued``."""
    return bool(queued and (admitted < w.min_admission_ratio * queued
                            or queued - admitted > w.max_growth_sigmas * math.sqrt(queued)))


def _bound(queued: int, w: SteadyWindow) -> int:
    """The growth `_outran` allows a queue of `queued` arrivals in the window."""
    return math.floor(min((1 - w.min_admission_ratio) * queued, w.max_growth_sigmas * math.sqrt(queued)) + 1e-9)


def _handoffs(requests: pd.DataFrame, arrival: np.ndarray, start: float, end: float) -> tuple[int, int]:
    """A disaggregated fleet's hand-off queue through the window ``(start, end]``: ``(ready, moved)``, the
    requests whose prefill ended there (their first token, ``arrival_s + ttft_s``) that went on to a decode
    replica, and the requests whose KV started moving to one there (``transfer_start_s``); ``(0, 0)`` for an
    aggregated fleet (no ``transfer_start_s``, or every one NaN).

    A prefilled request waits on its prefill replica for decode room (`simulator.engine.disagg`), a queue the
    arrivals-against-admissions rule cannot see: admission is the prefill's (helper-190: on 8xH100 4P1D it grew from
    0 to 864 through a 120-s window, read as "the batch was still filling ... run longer")."""
    if "transfer_start_s" not in requests:
        return 0, 0
    moved_at = requests.transfer_start_s.to_numpy(dtype=float)
    handed = ~np.isnan(moved_at)
    if not handed.any():
        return 0, 0
    ready_at = arrival + requests.ttft_s.to_numpy(dtype=float)
    ready = int((handed & (ready_at > start) & (ready_at <= end)).sum())
    return ready, int(((moved_at > start) & (moved_at <= end)).sum())


def steady_state(requests: pd.DataFrame, window: SteadyWindow | None = None) -> SteadyState:
    """The steady window of a run and what was sustained in it, from its request records."""
    w = window or SteadyWindow()
    if not len(requests):
        return SteadyState(start_s=math.nan, end_s=math.nan, arrivals=0, admissions=0, completions=0,
                           output_tokens=0.0, warning="no requests")
    arrival = requests.arrival_s.to_numpy(dtype=float)
    done = completed_rows(requests, STEADY_COLUMNS[1:])
    a0, a1 = float(arrival.min()), float(arrival.max())
    end = a1
    if a1 <= a0 and len(done):  # all at once: measure while the queue lasts
        end = float(done.admit_s.max())
    span = end - a0
    sojourn = done.end_s - (done.admit_s if a1 <= a0 else done.arrival_s)
    mean_sojourn = float(sojourn.mean()) if len(done) else math.inf
    del sojourn
    start = a0 + max(w.warmup_fraction * span, min(mean_sojourn, w.max_warmup_fraction * span))
    if not span > 0:
        return SteadyState(start_s=start, end_s=end, arrivals=0, admissions=0, completions=0, output_tokens=0.0,
                           warning="no steady window: the queue never held work after the first arrival")
    ends = done.end_s.to_numpy(dtype=float)
    tokens = window_tokens(done.arrival_s.to_numpy(dtype=float), done.ttft_s.to_numpy(dtype=float), ends,
                           done.output_tokens.to_numpy(), start, end)
    in_window = (arrival > start) & (arrival <= end)
    arrivals = int(in_window.sum())
    queued = int((in_window & (requests.outcome != "rejected").to_numpy()).sum())  # rejected ones never wait
    admit = requests.admit_s.to_numpy(dtype=float)  # first admission; NaN if never admitted
    admissions = int(((admit > start) & (admit <= end)).sum())
    completions = int(((ends > start) & (ends <= end)).sum())
    short = completions < w.min_completions  # too few to tell; the queue test is left out too
    longer = RUN_LONGER if a1 > a0 else MORE_REQUESTS
    grew = queued - admissions  # the queue's growth through the window plus those that timed out waiting (left)
    growing = not short and _outran(queued, admissions, w)
    # the hand-off queue, read only where the waiting queue's verdict leaves it to decide
    ready, moved = (0, 0) if short or growing else _handoffs(requests, arrival, start, end)
    handoff_growing = _outran(ready, moved, w)
    growing = growing or handoff_growing
    filling = not short and not growing and a1 > a0 and completions < w.min_admission_ratio * queued
    warning = ""
    if short:
        warning = (f"{NOT_STEADY}{completions} completion(s) in the window [{start:,.1f}, {end:,.1f}] s, "
                   f"fewer than {w.min_completions}{longer}")
    elif handoff_growing:
        warning = (f"{NOT_STEADY}the hand-off queue grew through the window [{start:,.1f}, {end:,.1f}] s ({moved:,} "
                   f"moved to a decode replica of {ready:,} prefilled there: it grew by {ready - moved:,}, more than "
                   f"{_bound(ready, w):,})")
    elif growing:
        bound = _bound(queued, w)
        # requests that timed out waiting in the window left the queue (helper-156: 6,382 of a "grew by 6,508" had,
        # while the queue itself grew by ~620), whenever they arrived (helper-164: those queued before the window
        # count too): queued − admitted − timed out is the queue's change through the window
        ended = requests.end_s.to_numpy(dtype=float)
        left = int((np.isnan(admit) & (requests.outcome == "timed_out").to_numpy() & (ended > start)
                    & (ended <= end)).sum())
        change = grew - left
        growth = (f"it grew by {grew:,}, more than {bound:,}" if not left else
                  f"{grew:,} more queued than admitted, more than {bound:,}: {left:,} timed out waiting and the queue "
                  + (f"grew by {change:,}" if change >= 0 else f"shrank by {-change:,}"))
        what = "the queue grew" if not left else "arrivals outran admissions"  # timed out: the queue may not grow
        warning = (f"{NOT_STEADY}{what} through the window [{start:,.1f}, {end:,.1f}] s ({admissions:,} "
                   f"admitted of {queued:,} queued there: {growth})")
    elif filling:
        warning = (f"{NOT_STEADY}the batch was still filling through the window [{start:,.1f}, {end:,.1f}] s "
                   f"({completions:,} completed for {queued:,} queued there, under {w.min_admission_ratio:.0%})"
                   f"{RUN_LONGER}")
    return SteadyState(start_s=start, end_s=end, arrivals=arrivals, admissions=admissions, completions=completions,
                       output_tokens=tokens, warning=warning, queue_growing=growing, queued=queued,
                       too_short=short or filling)
