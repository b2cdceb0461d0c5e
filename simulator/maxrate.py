"""Max sustainable rate and offline throughput of a fixed fleet, by simulation.

**Max rate.** For one of the scenario's fleets (a node kind × ``cluster.nodes``, or with
``[disaggregation]`` its disaggregated fleet: `Scenario.fleets`) the highest arrival rate
that meets the SLOs: the workload's rate scaled by ``s`` (`Scenario.load_workload` with
``rate_scale=s``: a generator's arrival rates times ``s``, a trace time-compressed or thinned). A
rate *meets* when `planning.meets_slo` holds (p99 TTFT, p99 TPOT, nothing rejected or timed out) **and** the
waiting queue did not grow through the run's steady window (`simulator.engine.steady`: first
admissions there at least 90 % of its arrivals), so a rate whose queue is still building at the end
of a finite run never passes, however short the run. (A window too short to judge, with under 10
completions, is judged on the SLOs alone: at a low rate that is a short run, not an overload.)
When the run at the answer was too short to tell (`simulator.engine.steady`'s ``steady_too_short``:
under 10 completions, or the batch still filling through the window) the answer is an artefact of
the run's length, not a capacity: `MaxRate.describe` says so in its first line, naming
``--duration-s``, and ``as_dict`` sets ``too_short``.

Search (`bisect_rate`), assuming success is monotone in the rate:

1. **bracket**: try ``s = start``; while it meets, multiply by ``step``, else divide, until the
   outcome flips (between `min_scale` and `max_scale`). A step below 2 squares after each try
   (capped at 2), so a close guess costs two runs and a poor one few more;
2. **bisect** in log space (``s = √(lo · hi)``) until ``hi / lo ≤ 1 + rel_tol``.

The answer is the last rate that met (``lo``), with the first that failed (``hi``) beside it as
its confidence; the figures reported are the **sustained** ones of the run at ``lo``: completions
and output tokens per second over its steady window. `max_rate` repeats the search for several
seeds (each its own workload draw and engine seed; seeds after the first start from the first's
answer with a small step) and reports each seed's answer and their spread
``(max − min) / mean``. Runs last the scenario's ``workload.duration_s`` (or `duration_s`).

**Offline** (`offline_throughput`): the scenario's requests (rate scale 1) all arrive at t = 0;
throughput is sustained over the steady window of an all-at-once run (from the warm-up to the last
admission, while the queue still holds work), with the makespan figure beside it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

import pandas as pd

from simulator.engine import EngineConfig, Result, SteadyWindow, StepTimer, run
from simulator.engine.result import must_seed
from simulator.engine.steady import NOT_STEADY, RUN_LONGER
from simulator.errors import ConfigError, is_number, must
from simulator.planning import keeps_up
from simulator.progress import GENERATE_COST, Meter, Progress
from simulator.scenario import Scenario
from simulator.study import fleet_nodes
from simulator.units import measure_against
from workloads import Workload
from workloads.workload import say_left_out

MIN_SCALE = 1 / 1024
MAX_SCALE = 1024.0
DEFAULT_SEEDS = 3  # a max rate's and an offline throughput's seeds, unless told (the spread needs more than one)


@dataclass(frozen=True, slots=True, kw_only=True)
class Trial:
    """One simulated rate: what was offered and sustained, the SLO figures, the verdict."""

    rate_scale: float
    ok: bool
    steady: bool
    offered_requests_per_s: float
    sustained_requests_per_s: float
    sustained_output_tokens_per_s: float
    ttft_p99_s: float
    tpot_p99_s: float
    timed_out: int
    warning: str = ""  # the steady window's (`steady_state_warning`); "" when steady
    too_short: bool = False  # the run was too short to tell (`steady_too_short`)
    queue_growing: bool = False  # arrivals outran admissions through the window (`steady_queue_growing`): it fails
    arrival_span_s: float = math.nan  # first to last arrival of the run's workload
    trace_cut: bool = False  # a trace's later rows were left out past the run's window (`Workload.cut_at_s`)

    @property
    def unsteady_label(self) -> str:
        """Why a run is not steady, as a search line says it ("" when steady): its queue grew (it fails),
        it was too short to tell (it may still meet), or neither (no steady window)."""
        if self.steady:
            return ""
        return (", queue growing" if self.queue_growing else ", too short to tell" if self.too_short
                else ", not steady")

    @classmethod
    def of(cls, rate_scale: float, result: Result, ttft_p99_s: float, tpot_p99_s: float) -> Trial:
        s = result.summary
        ok = keeps_up(result, ttft_p99_s, tpot_p99_s)
        return cls(rate_scale=rate_scale, ok=ok, steady=bool(s["steady_state"]),
                   offered_requests_per_s=s["offered_requests_per_s"],
                   sustained_requests_per_s=s["sustained_requests_per_s"],
                   sustained_output_tokens_per_s=s["sustained_output_tokens_per_s"],
                   ttft_p99_s=s["ttft_p99_s"], tpot_p99_s=s["tpot_p99_s"], timed_out=s["timed_out"],
                   warning=s["steady_state_warning"], too_short=bool(s["steady_too_short"]),
                   queue_growing=bool(s["steady_queue_growing"]), arrival_span_s=_arrival_span(result))


def _arrival_span(result: Result) -> float:
    """Seconds from the run's first arrival to its last (NaN without a request)."""
    arrival = result.requests["arrival_s"]
    return float(arrival.max() - arrival.min()) if len(arrival) else math.nan


@dataclass(frozen=True, slots=True, kw_only=True)
class Bracket:
    """The search's end: ``lo`` the highest scale that met (0 when none did down to `MIN_SCALE`),
    ``hi`` the lowest that failed (inf when none did up to `MAX_SCALE`), and every trial in order."""

    lo_scale: float
    hi_scale: float
    trials: tuple[Trial, ...]

    def at(self, scale: float) -> Trial | None:
        return next((t for t in self.trials if t.rate_scale == scale), None)

    @property
    def best(self) -> Trial | None:
        """The trial at ``lo`` (None when nothing met)."""
        return self.at(self.lo_scale)

    @property
    def width(self) -> float:
        """``hi / lo − 1``: the answer's relative uncertainty."""
        return self.hi_scale / self.lo_scale - 1 if self.lo_scale > 0 else math.inf


def bisection_steps(lo: float, hi: float, rel_tol: float) -> int:
    """Log-space bisections that take the bracket ``[lo, hi]`` to ``hi / lo ≤ 1 + rel_tol``:
    ``ceil(log2(ln(hi / lo) / ln(1 + rel_tol)))``, 0 when it is there already."""
    if not (0 < lo < hi < math.inf) or hi / lo <= 1 + rel_tol:
        return 0
    return math.ceil(math.log2(math.log(hi / lo) / math.log1p(rel_tol)))


def scales_left(lo: float, hi: float, f: float, rel_tol: float, start: float) -> float:
    """The rate scales of the trials a `bisect_rate` search still has, summed (a trial's cost grows
    with its scale), counted optimistically: before a flip, the next step is assumed to flip (the
    bracket's next end is tried, then it is bisected, each trial near its middle)."""
    if lo == 0.0 and hi == math.inf:  # nothing tried: `start`, then a climb that fails at once
        return start + scales_left(start, math.inf, f, rel_tol, start)
    if hi == math.inf:
        return lo * f + bisection_steps(lo, lo * f, rel_tol) * lo * math.sqrt(f)
    if lo == 0.0:
        return hi / f + bisection_steps(hi / f, hi, rel_tol) * hi / math.sqrt(f)
    return bisection_steps(lo, hi, rel_tol) * math.sqrt(lo * hi)


def bisect_rate(trial: Callable[[float], Trial], *, start: float = 1.0, step: float = 2.0, rel_tol: float = 0.05,
                min_scale: float = MIN_SCALE, max_scale: float = MAX_SCALE,
                left: Callable[[float], None] | None = None) -> Bracket:
    """Bracket, then bisect, the highest rate scale whose `trial` is ok (module docstring). `left` is
    told, before each trial, the scales of the trials still to come, summed (`scales_left`)."""
    where = "bisect_rate"
    must(0 < rel_tol < math.inf, where, "rel_tol", "a finite number > 0", rel_tol)
    must(step > 1, where, "step", "> 1", step)
    must(0 < min_scale <= start <= max_scale, where, "start", f"in [{min_scale:g}, {max_scale:g}]", start)
    seen: dict[float, Trial] = {}
    lo, hi = 0.0, math.inf
    f = step

    def ok(s: float) -> bool:
        if s not in seen:
            if left:
                left(scales_left(lo, hi, f, rel_tol, start))
            seen[s] = trial(s)
        return seen[s].ok

    def grow(f: float) -> float:
        return f if f >= 2 else min(f * f, 2.0)

    if ok(start):  # climb until a rate fails
        lo = start
        while lo * f <= max_scale:
            if not ok(lo * f):
                hi = lo * f
                break
            lo, f = lo * f, grow(f)
    else:  # descend until a rate meets
        hi = start
        while hi / f >= min_scale:
            if ok(hi / f):
                lo = hi / f
                break
            hi, f = hi / f, grow(f)
    while lo > 0 and hi < math.inf and hi / lo > 1 + rel_tol:
        mid = math.sqrt(lo * hi)
        lo, hi = (mid, hi) if ok(mid) else (lo, mid)
    return Bracket(lo_scale=lo, hi_scale=hi, trials=tuple(seen.values()))


@dataclass(frozen=True, slots=True, kw_only=True)
class SeedAnswer:
    """One seed's max rate: the bracket in rate scale and in offered requests/s (measured over each
    run's steady window), and the sustained figures of the run at ``lo``."""

    seed: int
    lo_scale: float
    hi_scale: float
    lo_requests_per_s: float
    hi_requests_per_s: float
    requests_per_s: float
    output_tokens_per_s: float
    ttft_p99_s: float
    tpot_p99_s: float
    simulations: int
    too_short: bool = False  # the run at ``lo`` was too short to tell (`Trial.too_short`): no answer
    steady_warning: str = ""  # that run's steady-window warning
    arrival_span_s: float = math.nan  # that run's first to last arrival (`Trial.arrival_span_s`)
    trace_cut: bool = False  # that run's trace was cut at duration_s (`Trial.trace_cut`)


def _spread(xs: Sequence[float]) -> dict[str, float]:
    mean = sum(xs) / len(xs) if xs else math.nan
    lo, hi = (min(xs), max(xs)) if xs else (math.nan, math.nan)
    return {"mean": mean, "min": lo, "max": hi, "spread": (hi - lo) / mean if mean else math.nan}


@dataclass(frozen=True, slots=True, kw_only=True)
class MaxRate:
    """The max sustainable rate of one fleet over several seeds."""

    hardware: str
    nodes: int
    ttft_p99_s: float
    tpot_p99_s: float
    rel_tol: float
    duration_s: float
    answers: tuple[SeedAnswer, ...]
    trace: bool = False  # the workload replays a trace: a longer run needs a longer trace, not --duration-s

    @property
    def requests_per_s(self) -> dict[str, float]:
        """Sustained requests/s at each seed's answer: mean, min, max and ``(max − min) / mean``."""
        return _spread([a.requests_per_s for a in self.answers])

    @property
    def output_tokens_per_s(self) -> dict[str, float]:
        return _spread([a.output_tokens_per_s for a in self.answers])

    def to_frame(self) -> pd.DataFrame:
        """One row per seed, each with what it was searched at: the SLOs, ``rel_tol`` and ``duration_s`` (helper-190:
        ``max_rate.csv`` gave a rate without the SLOs it meets, which only the JSON carried)."""
        searched = {"slo_ttft_p99_s": self.ttft_p99_s, "slo_tpot_p99_s": self.tpot_p99_s, "rel_tol": self.rel_tol,
                    "duration_s": self.duration_s}
        return pd.DataFrame([{"hardware": self.hardware, "nodes": self.nodes, **asdict(a), **searched}
                             for a in self.answers])

    def describe(self) -> list[str]:
        """The answer in words: the sustained rate over the seeds, then each seed's bracket."""
        r, o = self.requests_per_s, self.output_tokens_per_s
        n = len(self.answers)
        short = next((a for a in self.answers if a.too_short), None)
        if short:  # the answer would be an artefact of the run's length: say so instead
            why = short.steady_warning.removeprefix(NOT_STEADY).removesuffix(RUN_LONGER)  # the reason alone
            # a trace at a rate scale holds the arrivals it holds: --duration-s only cuts it (helper-156: "raise
            # --duration-s" was said of a 598 s trace that ×39.74 made 15 s long, at --duration-s 3000 as at 600)
            # ... unless --duration-s cut it (helper-164; helper-167: as the workload recorded it, not guessed from
            # the arrivals' span, which a trace ending at 598.6 s of a 600 s window passed for cut)
            ended = self.trace and not short.trace_cut
            lines = [f"{self.hardware} × {self.nodes} node(s): " + (
                f"the trace is too short to tell the max rate: at rate ×{short.lo_scale:.4g} its arrivals span "
                f"{short.arrival_span_s:,.1f} s; a longer trace is needed" if ended else
                f"runs of {self._run_length()} are too short to tell the max rate; raise --duration-s")
                + f" (seed {short.seed} at rate ×{short.lo_scale:.4g}: {why})"]
        else:
            lines = [f"{self.hardware} × {self.nodes} node(s) sustains {r['mean']:,.3g} req/s, {o['mean']:,.0f} output "
                     f"tok/s at p99 TTFT ≤ {self.ttft_p99_s:g} s, p99 TPOT ≤ {self.tpot_p99_s * 1e3:g} ms "
                     + (f"(mean of {n} seeds: {r['min']:,.3g}-{r['max']:,.3g} req/s, spread {r['spread']:.1%})"
                        if n > 1 else "(1 seed)")]
        for a in self.answers:
            # a run too short to tell measured no sustained rate (helper-156: "sustained 0 req/s, 2,060 output tok/s")
            held = ("sustained: too short to tell" if a.too_short else
                    f"sustained {a.requests_per_s:,.3g} req/s, {a.output_tokens_per_s:,.0f} output tok/s")
            lines.append(f"  seed {a.seed}: met at rate ×{a.lo_scale:.4g} ({a.lo_requests_per_s:,.3g} req/s offered), "
                         f"failed at ×{a.hi_scale:.4g} ({a.hi_requests_per_s:,.3g} req/s); {held} "
                         f"({a.simulations} runs of {self._run_length()})")
        return lines

    def _run_length(self) -> str:
        """What each run replays: ``600 s``, ``the whole trace`` (a replay with no ``duration_s``: inf), or ``the
        trace up to 600 s`` (a trace is cut there, and at a high rate scale may end long before)."""
        if not math.isfinite(self.duration_s):
            return "the whole trace"
        return f"the trace up to {self.duration_s:g} s" if self.trace else f"{self.duration_s:g} s"

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready: an unbounded bracket end (nothing failed, or nothing met) is None."""
        doc = {"hardware": self.hardware, "nodes": self.nodes,
               "slo": {"ttft_p99_s": self.ttft_p99_s, "tpot_p99_s": self.tpot_p99_s},
               "rel_tol": self.rel_tol, "duration_s": self.duration_s,
               "too_short": any(a.too_short for a in self.answers),  # then the figures are no answer (`describe`)
               "requests_per_s": self.requests_per_s, "output_tokens_per_s": self.output_tokens_per_s,
               "seeds": [asdict(a) for a in self.answers]}
        return _finite(doc)


def _finite(x: Any) -> Any:
    if isinstance(x, dict):
        return {k: _finite(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_finite(v) for v in x]
    return None if isinstance(x, float) and not math.isfinite(x) else x


def _must_runs(seeds: object, seed: object, where: str) -> None:
    """Refuse `seeds` that is not a whole number >= 1 (helper-190: 1.5 ended in a TypeError from ``range``) and a
    `seed` (None: the scenario's) that is not one >= 0, before any run."""
    must(isinstance(seeds, int) and not isinstance(seeds, bool) and seeds >= 1, where, "seeds", "an integer >= 1",
         seeds)
    if seed is not None:
        must_seed(seed, where)


def _with_duration(scenario: Scenario, duration_s: float | None) -> Scenario:
    if duration_s is None:
        return scenario
    must(duration_s > 0, "max_rate", "duration_s", "> 0", duration_s)
    return replace(scenario, workload=replace(scenario.workload, duration_s=duration_s))


def fleet_config(scenario: Scenario, hardware: str, fleet: str | None,
                 where: str) -> tuple[str, EngineConfig, int]:
    """The fleet labelled `fleet` among ``scenario.fleets(hardware)`` (None: the aggregated one, `hardware`
    itself, as `kvsim run` labels them), its engine config and its nodes (`study.fleet_nodes`: every pool's)."""
    fleets = dict(scenario.fleets(hardware))
    label = hardware if fleet is None else fleet
    if label not in fleets and fleet is None:  # a scenario that compares no aggregated fleet
        config = scenario.engine_config(hardware)
    else:
        must(label in fleets, where, "fleet", f"one of the scenario's fleets on {hardware} ({', '.join(fleets)})",
             fleet)
        config = fleets[label]
    return label, config, fleet_nodes(config)


def max_rate(scenario: Scenario, hardware: str | None = None, *, fleet: str | None = None, seeds: int = DEFAULT_SEEDS,
             seed: int | None = None, rel_tol: float = 0.05, ttft_p99_s: float | None = None,
             tpot_p99_s: float | None = None,
             duration_s: float | None = None, window: SteadyWindow | None = None,
             timer: StepTimer | None = None, on_step: Callable[[str], None] | None = None,
             progress: Progress | None = None) -> MaxRate:
    """The highest rate `hardware` × ``cluster.nodes`` sustains within the SLOs, per seed (module docstring);
    `fleet` names another of the scenario's fleets on `hardware` (`Scenario.fleets`: ``"8xH100-2P4D"``,
    its disaggregated one), which the answer is labelled by.

    Seeds are ``seed, seed + 1, …`` (default: the scenario's seed). `progress` receives the fraction
    done, a trial weighing its rate scale (its requests, generated and simulated), the trials to
    come as `scales_left` says; a seed after the first is expected to cost at least what the first
    did (seeds differ: one may climb or descend much further than the first's answer).
    """
    _must_runs(seeds, seed, "max_rate")
    must(0 < rel_tol < 1, "max_rate", "rel_tol", "in (0, 1): a bracket's width over its low rate, 0.05 for 5%",
         rel_tol)  # before scales_left
    for key, slo in (("ttft_p99_s", ttft_p99_s), ("tpot_p99_s", tpot_p99_s)):  # before any simulation
        # (helper-190: 0 read as not given, the scenario's SLO searched in silence; NaN met every TPOT, -1 none)
        must(slo is None or (is_number(slo) and 0 < slo < math.inf), "max_rate", key,
             "a finite number of seconds > 0 (None: the scenario's)", slo)
    sc = _with_duration(scenario, duration_s)
    label, config, nodes = fleet_config(sc, hardware or sc.cluster.hardware[0], fleet, "max_rate")
    ttft = sc.slo.ttft_p99_s if ttft_p99_s is None else ttft_p99_s
    tpot = sc.slo.tpot_p99_s if tpot_p99_s is None else tpot_p99_s
    first = sc.seed if seed is None else seed
    answers: list[SeedAnswer] = []
    per_scale = 1 + GENERATE_COST
    # the seeds after the first are expected to cost what it does, then what it did
    meter = Meter(progress, [per_scale * scales_left(0.0, math.inf, 2.0, rel_tol, 1.0)] * seeds, alike=seeds - 1)
    first_cost, spent = 0.0, [0.0]  # the first seed's trials' cost; this seed's so far
    for k in range(seeds):
        sd = first + k
        spent[0] = 0.0

        def trial(scale: float, sd: int = sd) -> Trial:
            # the workload as stated (scale 1, the first trial) must hold a request; a thinned one may not
            wl = sc.load_workload(sd, rate_scale=scale, allow_empty=scale != 1.0)
            n = sc.check_context(wl)  # (the count of its pass: no list held to count them)
            if on_step and sd == first and scale == 1.0:
                say_left_out(wl, on_step)
            meter.add(GENERATE_COST * scale)
            result = run(config, wl, sd, timer=timer, window=window, progress=meter.piece(scale), total_requests=n)
            meter.add(scale)
            spent[0] += per_scale * scale
            t = replace(Trial.of(scale, result, ttft, tpot), trace_cut=wl.cut_at_s is not None)
            if scale == 1.0 and not t.offered_requests_per_s > 0:  # a scale would change the count, not a rate
                raise ConfigError(f"{sc.where}: max rate: the workload's {n:,} request(s) all arrive at one instant "
                                  "(offline arrivals), so it has no arrival rate to scale; its throughput is the "
                                  "offline run's (kvsim capacity --offline)")
            if on_step:
                on_step(f"{label} seed {sd}: rate ×{scale:.4g} ({t.offered_requests_per_s:,.3g} req/s offered) -> "
                        f"TTFT p99 {measure_against(t.ttft_p99_s, ttft, 's')}, "
                        f"TPOT p99 {measure_against(t.tpot_p99_s * 1e3, tpot * 1e3, 'ms')}, sustained "
                        f"{t.sustained_requests_per_s:,.3g} req/s{t.unsteady_label}: "
                        f"{'meets' if t.ok else 'fails'}")
            return t

        def left(scales: float, floor: float = first_cost) -> None:  # at least what the first seed cost
            meter.expect(max(per_scale * scales, floor - spent[0]))

        guess = answers[0].lo_scale if answers and answers[0].lo_scale > 0 else 1.0
        b = bisect_rate(trial, start=min(max(guess, MIN_SCALE), MAX_SCALE),
                        step=2.0 if not answers else 1 + 2 * rel_tol, rel_tol=rel_tol, left=left)
        best, failed = b.best, b.at(b.hi_scale)
        nan = math.nan
        answers.append(SeedAnswer(
            seed=sd, lo_scale=b.lo_scale, hi_scale=b.hi_scale,
            lo_requests_per_s=best.offered_requests_per_s if best else 0.0,
            hi_requests_per_s=failed.offered_requests_per_s if failed else math.inf,
            requests_per_s=best.sustained_requests_per_s if best else 0.0,
            output_tokens_per_s=best.sustained_output_tokens_per_s if best else 0.0,
            ttft_p99_s=best.ttft_p99_s if best else nan, tpot_p99_s=best.tpot_p99_s if best else nan,
            simulations=len(b.trials), too_short=best.too_short if best else False,
            steady_warning=best.warning if best else "", arrival_span_s=best.arrival_span_s if best else nan,
            trace_cut=best.trace_cut if best else False))
        first_cost = first_cost or spent[0]
        meter.next_stage(later=[first_cost] * (seeds - 1 - k))
    meter.finish()
    return MaxRate(hardware=label, nodes=nodes, ttft_p99_s=ttft, tpot_p99_s=tpot, rel_tol=rel_tol,
                   duration_s=sc.workload.duration_s, answers=tuple(answers), trace=bool(sc.workload.trace))


@dataclass(frozen=True, slots=True, kw_only=True)
class OfflineRun:
    """One seed's offline run: every request at t = 0."""

    seed: int
    requests: int
    completed: int
    steady_window_start_s: float
    steady_window_end_s: float
    requests_per_s: float  # sustained, over the steady window
    output_tokens_per_s: float  # sustained
    makespan_s: float
    makespan_output_tokens_per_s: float
    steady_state_warning: str


def all_at_once(workload: Workload) -> Workload:
    """The same requests, all arriving at t = 0 (ids and order kept)."""
    return Workload.from_requests([replace(r, arrival_s=0.0) for r in workload], name=f"{workload.name} (offline)",
                                  seed=workload.seed)


def offline_throughput(scenario: Scenario, hardware: str | None = None, *, fleet: str | None = None,
                       seeds: int = DEFAULT_SEEDS, seed: int | None = None, duration_s: float | None = None,
                       window: SteadyWindow | None = None,
                       timer: StepTimer | None = None, on_step: Callable[[str], None] | None = None,
                       progress: Progress | None = None) -> pd.DataFrame:
    """One `OfflineRun` row per seed: the scenario's requests (of `duration_s` of arrivals) all at t = 0,
    on `hardware` × ``cluster.nodes`` or the scenario's fleet `fleet` on it (as `max_rate`).

    `progress` receives the fraction done: each seed an equal share, `GENERATE_COST` of it generating."""
    _must_runs(seeds, seed, "offline_throughput")
    sc = _with_duration(scenario, duration_s)
    label, config, nodes = fleet_config(sc, hardware or sc.cluster.hardware[0], fleet, "offline_throughput")
    first = sc.seed if seed is None else seed
    meter = Meter(progress, [seeds * (1 + GENERATE_COST)])
    rows = []
    for sd in range(first, first + seeds):
        wl = sc.load_workload(sd)
        n = sc.check_context(wl)
        if on_step and sd == first:
            say_left_out(wl, on_step)
        meter.add(GENERATE_COST)
        s = run(config, all_at_once(wl), sd, timer=timer, window=window, progress=meter.piece(1.0),
                total_requests=n).summary
        meter.add(1.0)
        row = OfflineRun(seed=sd, requests=s["requests"], completed=s["completed"],
                         steady_window_start_s=s["steady_window_start_s"],
                         steady_window_end_s=s["steady_window_end_s"],
                         requests_per_s=s["sustained_requests_per_s"],
                         output_tokens_per_s=s["sustained_output_tokens_per_s"], makespan_s=s["makespan_s"],
                         makespan_output_tokens_per_s=s["output_tokens_per_s"],
                         steady_state_warning=s["steady_state_warning"])
        if on_step:
            held = (f"{row.requests_per_s:,.3g} req/s, {row.output_tokens_per_s:,.0f} output tok/s sustained over "
                    f"[{row.steady_window_start_s:,.0f}, {row.steady_window_end_s:,.0f}] s"
                    # no steady window (helper-156: "nan req/s"), or one too short to tell (helper-190: "0 req/s,
                    # 7,325 output tok/s sustained over [2, 3] s" of a 1.7-s window with no completion in it)
                    if math.isfinite(row.requests_per_s) and not row.steady_state_warning else
                    f"no sustained rate ({row.steady_state_warning.removeprefix(NOT_STEADY)})")
            on_step(f"{label} seed {sd}: {row.requests:,} requests at t = 0 -> {held}")
        rows.append({"hardware": label, "nodes": nodes, **asdict(row)})
    meter.finish()
    return pd.DataFrame(rows)
