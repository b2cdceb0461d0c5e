"""The workload: a replayable, time-ordered stream of requests.

A `Workload` wraps a *source*: a function that, given a fresh `ReadStats`, returns an
iterator of requests in arrival order. Iterating twice replays the same stream (a
generated workload keeps its list; a trace is re-read from disk, streaming). Replay
transforms (a window, a time scale, a rate scale) wrap the source lazily.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Generator, Iterator
from dataclasses import replace

import numpy as np
import pandas as pd
from scipy import stats

from simulator.errors import ConfigError, is_whole, must
from simulator.limits import MAX_HORIZON_S, MAX_REQUESTS, MAX_STREAMED_REQUESTS
from workloads.request import Request
from workloads.summary import WorkloadSummary, summarize


class ReadStats:
    """What one pass over a source tells of the rows it left out: those skipped as malformed or failed
    (`skipped_rows`), and the replay window's end when a later row was left out past it (`cut_at_s`,
    replay seconds; None when the pass reached the trace's end); and of what it yielded, the last request's
    arrival (`last_arrival_s`; None when it yielded none)."""

    __slots__ = ("cut_at_s", "last_arrival_s", "skipped_rows")

    def __init__(self) -> None:
        self.skipped_rows = 0
        self.cut_at_s: float | None = None
        self.last_arrival_s: float | None = None


SKIPPED_WHY = ("malformed, with skip_bad_rows or --skip-bad-rows, or dropped by the format's rule: a failed "
               "request, 0 tokens; under a scenario's skip_bad_rows, longer than its model's context")
"""Why a trace reader skips a row (`ReadStats.skipped_rows`)."""


def skipped_note(skipped: int) -> str:
    """``"N trace rows skipped (why)"``: what a replay says of the rows it left out, so that a run over a
    trace never drops traffic silently."""
    return f"{skipped:,} trace row{'' if skipped == 1 else 's'} skipped ({SKIPPED_WHY})"


def cut_note(cut_at_s: float, key: str = "workload.duration_s") -> str:
    """``"the trace cut at 600 s of replay (workload.duration_s; its later rows not replayed)"``: what a
    replay says of the window that left the trace's later rows out (`Workload.cut_at_s`); `key` is what set it."""
    return f"the trace cut at {cut_at_s:,g} s of replay ({key}; its later rows not replayed)"


def say_left_out(workload: Workload, say: Callable[[str], None], key: str = "workload.duration_s") -> None:
    """Tell `say` (a search's line of progress, a warning) what `workload`'s last pass left out of its
    trace, if anything: ``workload: N trace rows skipped (why)`` and ``workload: the trace cut at …`` (`key`
    set the window)."""
    if workload.skipped_rows:
        say(f"workload: {skipped_note(workload.skipped_rows)}")
    if workload.cut_at_s is not None:
        say(f"workload: {cut_note(workload.cut_at_s, key)}")


Source = Callable[[ReadStats], Iterator[Request]]


def session_kept(session_id: int, keep_p: float, seed: int) -> bool:
    """Whether a thinned replay (`Workload.replayed`, ``rate_scale = keep_p < 1``) keeps session `session_id`:
    ``u < keep_p`` with ``u`` uniform in [0, 1) from ``blake2b(seed, session_id)``, so that every turn of a
    session gets the same verdict, for the same seed in any replay, with nothing held per session (a streamed
    trace may hold millions of them); sessions are kept independently, each with probability `keep_p`."""
    digest = hashlib.blake2b(f"{seed}:{session_id}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") < keep_p * 2**64


def _seconds(t_s: float) -> str:
    """``40,000,000`` below 1e13 s (about 317,000 years), ``1e+305`` past them (helper-179: a Mooncake timestamp of
    1e308 ms printed 306 digits, and the line was cut before its remedy)."""
    return f"{t_s:,.0f}" if t_s < 1e13 else f"{t_s:.3g}"


def format_segments(segments: tuple[tuple[int, int], ...]) -> str:
    """``((7, 512), (9, 30))`` -> ``"7:512;9:30"``."""
    return ";".join(f"{i}:{t}" for i, t in segments)


class Workload:
    """A replayable, time-ordered stream of `Request`.

    Parameters
    ----------
    source
        ``source(stats)`` returns a fresh iterator over the requests, arrival-ordered.
    name
        What produced it (generator name or trace file name).
    seed
        The seed it was generated (or thinned) with, for the record.
    prefix_note
        Empty when the requests' segment ids say what their prompts share (generated workloads,
        Mooncake's ``hash_ids``, kvsim's own format); otherwise why they cannot (a trace format with
        no prefix ids gives each prompt a segment of its own), and then `summary` reports prefix
        reuse as unknown rather than as none.
    """

    __slots__ = ("_last", "_source", "max_requests", "name", "prefix_note", "seed")

    def __init__(self, source: Source, *, name: str = "", seed: int = 0, prefix_note: str = "") -> None:
        self._source = source
        self._last: ReadStats | None = None
        self.name = name
        self.seed = seed
        self.prefix_note = prefix_note
        self.max_requests = MAX_REQUESTS  # the most it yields (`streamed` raises it)

    def streamed(self) -> Workload:
        """The same stream for a run that holds no record (`simulator.engine.run`'s ``stream_to``):
        bounded by `MAX_STREAMED_REQUESTS` instead of `MAX_REQUESTS`."""
        out = Workload(self._source, name=self.name, seed=self.seed, prefix_note=self.prefix_note)
        out.max_requests = MAX_STREAMED_REQUESTS
        return out

    @classmethod
    def from_requests(cls, requests: list[Request], *, name: str = "", seed: int = 0) -> Workload:
        """A workload over a list already in arrival order."""
        frozen = tuple(requests)
        return cls(lambda _stats: iter(frozen), name=name, seed=seed)

    def _iter(self, stats_: ReadStats) -> Generator[Request, None, None]:
        """The source's requests, within kvsim's limits (`simulator.limits`): at most `max_requests`
        of them, none arriving after `MAX_HORIZON_S` (a trace is streamed, so it is checked here)."""
        most = self.max_requests
        r = None
        for n, r in enumerate(self._source(stats_), start=1):
            if n > most or r.arrival_s > MAX_HORIZON_S:
                what = (f"more than {most:,} requests" if n > most
                        else f"a request at {_seconds(r.arrival_s)} s, after {MAX_HORIZON_S:,.0f} s (366 days)")
                stream = (f"; kvsim run --stream replays a trace of up to {MAX_STREAMED_REQUESTS:,}"
                          if n > most and most < MAX_STREAMED_REQUESTS else "")
                raise ConfigError(f"{self.name or 'workload'}: {what}, beyond kvsim's limit; replay a window "
                                  f"(duration_s), thin it (rate_scale < 1) or speed it up (time_scale){stream}")
            yield r
        stats_.last_arrival_s = None if r is None else r.arrival_s
        self._last = stats_

    def __iter__(self) -> Iterator[Request]:
        return self._iter(ReadStats())

    def first(self) -> Request | None:
        """The first request (None when there is none), reading no further: a trace is read up to its
        first kept row, and its file closed."""
        it = self._iter(ReadStats())
        try:
            return next(it, None)
        finally:
            it.close()

    def __repr__(self) -> str:
        return f"Workload(name={self.name!r}, seed={self.seed})"

    @property
    def skipped_rows(self) -> int | None:
        """Rows skipped in the last complete pass (None before one has completed)."""
        return None if self._last is None else self._last.skipped_rows

    @property
    def cut_at_s(self) -> float | None:
        """The replay window's end (`replayed`'s ``duration_s``) when the last complete pass left a trace's
        later rows out past it; None when it read to the end, or before a pass has completed."""
        return None if self._last is None else self._last.cut_at_s

    @property
    def last_arrival_s(self) -> float | None:
        """The last request's arrival in the last complete pass (a replay's: replay seconds); None when it
        yielded none, or before a pass has completed. How far a trace's replay reached when its window
        (`cut_at_s`) cut nothing: a 600 s trace replayed 4× as fast ends near 150 s, whatever ``duration_s``."""
        return None if self._last is None else self._last.last_arrival_s

    @property
    def reached_s(self) -> float | None:
        """How far the last complete pass reached where its window cut nothing (`cut_at_s` None): its last
        arrival (`last_arrival_s`); None where the window cut it (the window says how far), or before a pass.
        What a chart of a replay says in place of its window's bound (`simulator.scenario.Scenario.subject`)."""
        return self.last_arrival_s if self.cut_at_s is None else None

    def requests(self) -> list[Request]:
        """All requests, in arrival order."""
        return list(self)

    def summary(self) -> WorkloadSummary:
        """One streaming pass; see `workloads.summary.summarize` (prefix reuse unknown when
        `prefix_note` says why)."""
        stats_ = ReadStats()
        s = summarize(self._iter(stats_), name=self.name, prefix_note=self.prefix_note)
        return replace(s, skipped_rows=stats_.skipped_rows)

    def to_frame(self) -> pd.DataFrame:
        """One row per request; segments as ``"id:tokens;..."``, breakpoints as ``"1;3"``."""
        cols = (
            "id", "arrival_s", "session_id", "turn", "prompt_tokens", "output_tokens",
            "output_segment_id", "n_segments", "segments", "cache_breakpoints", "source",
        )
        rows = [
            (
                r.id, r.arrival_s, r.session_id, r.turn, r.prompt_tokens, r.output_tokens,
                r.output_segment_id, len(r.segments), format_segments(r.segments),
                ";".join(map(str, r.cache_breakpoints)), r.source,
            )
            for r in self
        ]
        return pd.DataFrame(rows, columns=list(cols))

    def within(self, max_tokens: int) -> Workload:
        """The requests whose ``prompt_tokens + output_tokens`` is at most `max_tokens` (a model's context
        window), the others counted as skipped rows (`skipped_rows`: said with the run, as a malformed row
        skipped is); ids renumbered from 0 over the requests kept, as `replayed`'s. What a scenario's
        ``skip_bad_rows`` does with a trace's requests longer than its model's context, which a server refuses
        (helper-179: the development copy of the Mooncake synthetic trace, not shipped, 3 rows over Llama-3.1-70B's
        131,072 tokens in its first 600 s and 10 in all, could not be replayed without editing the trace)."""
        must(is_whole(max_tokens, minimum=1), "Workload.within", "max_tokens", "an integer >= 1 (a context window)",
             max_tokens)  # (None or "4096" raised a TypeError from the comparison; 1.5 kept no request)
        parent = self

        def source(stats_: ReadStats) -> Iterator[Request]:
            n = 0
            for r in parent._source(stats_):
                if r.prompt_tokens + r.output_tokens > max_tokens:
                    stats_.skipped_rows += 1
                    continue
                yield replace(r, id=n)
                n += 1

        out = Workload(source, name=self.name, seed=self.seed, prefix_note=self.prefix_note)
        out.max_requests = self.max_requests
        return out

    def replayed(
        self,
        *,
        start_s: float = 0.0,
        duration_s: float | None = None,
        time_scale: float = 1.0,
        rate_scale: float = 1.0,
        seed: int = 0,
    ) -> Workload:
        """A window of this workload, sped up and thinned or compressed for what-if load.

        A request at source time ``t >= start_s`` is replayed at
        ``t' = (t - start_s) / (time_scale * max(rate_scale, 1))`` and kept while
        ``t' < duration_s`` (replay seconds). ``time_scale = 2`` plays twice as fast.
        ``rate_scale < 1`` thins: each request is kept with probability `rate_scale`
        (Bernoulli draws from ``np.random.default_rng(seed)``, the same every replay), and a
        request of a session (``session_id >= 0``: kvsim's own format) goes with its session,
        every turn kept or none (`session_kept`): thinning turns one by one kept turns whose
        history was dropped, and a half-rate replay of the shipped chat sample read 0.70 of its
        prompt tokens as shared where the whole trace shares 0.81 (each session thinned whole: 0.80).
        ``rate_scale > 1`` compresses time by that factor (same requests, same prefix
        structure, gaps shorter; reuse gaps shrink with it) rather than replicating requests
        under fresh ids, which would invent sharing the trace does not show.
        Ids are renumbered from 0 in replay order.
        """
        where = "Workload.replayed"
        must(start_s >= 0, where, "start_s", ">= 0", start_s)
        must(duration_s is None or duration_s > 0, where, "duration_s", "> 0", duration_s)
        must(time_scale > 0, where, "time_scale", "> 0", time_scale)
        must(rate_scale > 0, where, "rate_scale", "> 0", rate_scale)
        speed = time_scale * max(rate_scale, 1.0)
        keep_p = min(rate_scale, 1.0)
        parent = self

        def source(stats_: ReadStats) -> Iterator[Request]:
            rng = np.random.default_rng(seed)
            buf: np.ndarray = np.empty(0)
            n = 0
            for r in parent._source(stats_):
                if r.arrival_s < start_s:
                    continue
                t = (r.arrival_s - start_s) / speed
                if duration_s is not None and t >= duration_s:
                    stats_.cut_at_s = duration_s  # said with the run (`say_left_out`, the report)
                    break
                if keep_p < 1.0 and r.session_id >= 0:  # a session is kept or dropped whole
                    if not session_kept(r.session_id, keep_p, seed):
                        continue
                elif keep_p < 1.0:
                    if buf.size == 0:  # uniforms drawn in blocks, same sequence every replay
                        buf = np.asarray(stats.uniform.rvs(size=4096, random_state=rng))
                    u, buf = float(buf[0]), buf[1:]
                    if u >= keep_p:
                        continue
                yield replace(r, id=n, arrival_s=t)
                n += 1

        out = Workload(source, name=self.name, seed=seed, prefix_note=self.prefix_note)
        out.max_requests = self.max_requests  # a window of a streamed workload streams too
        return out
