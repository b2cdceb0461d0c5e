"""synthetic: benchmark traffic, an arrival process and input/output length distributions.

What MLPerf's Server and Offline scenarios and ``trtllm-bench``/``vllm bench`` runs send: single-turn
requests, independent of one another, whose prompt and answer lengths come from a fixed value, a
`scipy.stats` law or an empirical CSV (`workloads.lengths`)::

    [workload.spec]
    name = "synthetic"
    arrivals = {kind = "poisson", rate_per_s = 20}      # or bursty, diurnal, {kind = "offline", count = 1000}
    input_tokens = {dist = "lognorm", s = 0.9, loc = 43, scale = 121, clip = [1, 1023]}
    output_tokens = 128
    system_prompt_tokens = 0                             # > 0: one prompt shared by every request

Each request's prompt is one segment of its own (no two requests share a prefix), after the shared
system prompt when there is one (``segments = [(system, S), (own, input)]``, ``prompt_tokens = S +
input``, as vLLM's random dataset adds its ``prefix_len`` to the input length). Lengths that name the
same CSV are drawn from the same rows, so an input/output pair keeps its correlation. Draw order
for a seed: segment-id salt, arrivals, rows of each CSV (in order of first use: input, then
output), input lengths, output lengths.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from scipy import stats

from simulator.errors import ConfigError, must, must_whole, shown
from workloads.arrivals import ArrivalProcess, Poisson, arrival_from
from workloads.generators import finalize, register_generator
from workloads.lengths import EmpiricalLength, FixedLength, Length, length_from
from workloads.request import Request
from workloads.segments import SegmentIds


@register_generator
@dataclass(frozen=True, slots=True, kw_only=True)
class Synthetic:
    """Parameters of a benchmark workload; defaults and where they come from.

    Parameters
    ----------
    arrivals
        When requests arrive: ``poisson``, ``bursty`` or ``diurnal`` (rate per second), or
        ``offline`` (``count`` requests at t = 0). Default Poisson at 1 request/s (an assumption;
        scale with ``rate_scale``).
    input_tokens, output_tokens
        Prompt (after any shared system prompt) and answer lengths: a whole number, a `scipy.stats`
        law, or a CSV column (`workloads.lengths.length_from`). Default 1,000 and 1,000: the 1000/1000
        pair of TensorRT-LLM's published throughput tables (docs/source/performance/perf-overview.md).
    system_prompt_tokens
        Length of one system prompt every request starts with (0: none, no sharing). Default 0.
    """

    name: ClassVar[str] = "synthetic"
    default_duration_s: ClassVar[float] = 600.0

    arrivals: ArrivalProcess = field(default_factory=lambda: Poisson(rate_per_s=1.0))
    input_tokens: Length = field(default_factory=lambda: FixedLength(tokens=1000))
    output_tokens: Length = field(default_factory=lambda: FixedLength(tokens=1000))
    system_prompt_tokens: int = 0

    def __post_init__(self) -> None:
        must_whole(self, "Synthetic", "system_prompt_tokens", 0, "a whole number >= 0")  # (a numpy integer is one)

    @classmethod
    def from_params(cls, params: dict[str, Any], where: str, base_dir: Path | None = None) -> Synthetic:
        """From a scenario table; a relative ``csv`` path resolves against `base_dir` (the scenario's folder)."""
        valid = sorted(f.name for f in fields(cls))
        kwargs: dict[str, Any] = {}
        for key, value in params.items():
            w = f"{where}.{key}"
            if key not in valid:
                raise ConfigError(f"{w}: unknown key (valid: {', '.join(valid)}) (got {shown(value)})")
            if key == "arrivals":
                try:
                    kwargs[key] = arrival_from(value, w)
                except ConfigError as exc:
                    msg = str(exc)
                    raise ConfigError(msg if msg.startswith(w) else f"{w}: {msg}") from None
            elif key in ("input_tokens", "output_tokens"):
                kwargs[key] = length_from(value, w, column=key, base_dir=base_dir)
            elif isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ConfigError(f"{w}: must be a whole number of tokens >= 0 (got {shown(value)})")
            else:
                kwargs[key] = value
        return cls(**kwargs)

    def scaled(self, factor: float) -> Synthetic:
        """Arrival rate (or, offline, the request count) times `factor`."""
        return replace(self, arrivals=self.arrivals.scaled(factor))

    def generate(self, rng: np.random.Generator, duration_s: float) -> list[Request]:
        """All requests arriving in ``[0, duration_s)`` (offline: all ``count`` at 0), arrival-ordered."""
        ids = SegmentIds(rng)
        times = self.arrivals.times(rng, duration_s)
        n = int(times.size)
        rows: dict[str, np.ndarray] = {}  # one draw of row indices per CSV file, shared by its columns
        for length in (self.input_tokens, self.output_tokens):
            if isinstance(length, EmpiricalLength) and length.path not in rows:
                rows[length.path] = np.asarray(stats.randint(0, length.rows).rvs(size=n, random_state=rng))
        if (isinstance(self.input_tokens, EmpiricalLength) and isinstance(self.output_tokens, EmpiricalLength)
                and self.input_tokens.path == self.output_tokens.path):
            must(self.input_tokens.rows == self.output_tokens.rows, "Synthetic", "output_tokens",
                 f"rows of the same file as input_tokens ({self.input_tokens.rows})", self.output_tokens.rows)

        def draw(length: Length) -> np.ndarray:
            return length.take(rows[length.path]) if isinstance(length, EmpiricalLength) else length.sample(rng, n)

        inputs, outputs = draw(self.input_tokens), draw(self.output_tokens)
        s = self.system_prompt_tokens
        shared: tuple[tuple[int, int], ...] = ((ids.new("system"), s),) if s else ()
        out = [
            Request(
                id=i, arrival_s=float(times[i]), prompt_tokens=s + int(inputs[i]), output_tokens=int(outputs[i]),
                segments=(*shared, (ids.new("prompt"), int(inputs[i]))), session_id=i,
                cache_breakpoints=(1,) if s else (), source=self.name,
            )
            for i in range(n)
        ]
        return finalize(out)

