"""chat-4k: many users, a few shared system prompts, multi-turn sessions up to ~4k tokens.

Turn ``k + 1`` of a session sends everything turn ``k`` sent, then turn ``k``'s answer
(its ``output_segment_id``), then a new user message::

    segments(k+1) = segments(k) + [(output_id(k), output_tokens(k)), (user_id(k+1), user_tokens(k+1))]

so history is shared by leading ids, and every session's chain starts with its system
prompt's id. A session stops at the first turn whose prompt would exceed
``max_prompt_tokens`` (clients truncate or start over; stopping keeps the chains honest).
Cache breakpoints: after the system prompt and at the end of the prompt (``(1, n)``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import ClassVar

import numpy as np

from simulator.errors import must
from simulator.limits import MAX_SHARED_PREFIXES
from workloads.arrivals import ArrivalProcess, Poisson, session_turn_times
from workloads.distributions import LogNormal, geometric_counts
from workloads.generators import finalize, register_generator
from workloads.request import Request
from workloads.segments import SegmentIds

# defaults (frozen, shared safely); see the class docstring for sources
_SYSTEM_PROMPT_TOKENS = LogNormal(mean=600, cv=0.5, low=50, high=2000)
_USER_TOKENS = LogNormal(mean=70, cv=1.5, low=1, high=2000)
_OUTPUT_TOKENS = LogNormal(mean=215, cv=1.0, low=1, high=2048)
_THINK_TIME_S = LogNormal(mean=60, cv=1.5, low=1, high=3600)


@register_generator
@dataclass(frozen=True, slots=True, kw_only=True)
class Chat4k:
    """Parameters of the chat workload; defaults and where they come from.

    Parameters
    ----------
    sessions
        Arrival process of new sessions. Default Poisson at 0.5/s (30 sessions a minute;
        an assumption, scale with ``rate_scale``).
    n_system_prompts, system_prompt_zipf
        System prompts shared by all users; prompt ``j`` (1-based) is chosen with weight
        ``j ** -system_prompt_zipf``. Default 4 prompts, Zipf 1 (an assumption).
    system_prompt_tokens
        Length of each system prompt, drawn once per prompt. Default mean 600, CV 0.5
        (an assumption: product system prompts of a few hundred to ~2k tokens).
    user_tokens
        New user message per turn. Default mean 70, CV 1.5: LMSYS-Chat-1M (Zheng et al.
        2023) reports 69.5 tokens per user prompt.
    output_tokens
        Answer per turn. Default mean 215, CV 1.0, at most 2,048: LMSYS-Chat-1M reports
        214.5 tokens per response; the Azure 2023 conversation trace 211 (measured).
    mean_turns
        Turns per session, geometric with this mean. Default 3 (LMSYS-Chat-1M averages 2.0
        turns; a little more exercises history growth).
    think_time_s
        Arrival-to-arrival gap between turns (reading, thinking, typing; includes the
        answer's generation). Default lognormal mean 60 s, CV 1.5, within [1 s, 1 h]
        (an assumption; this is what decides whether a 5-minute TTL pays).
    max_prompt_tokens
        Prompt cap; a session stops at the first turn that would exceed it. Default 4,096.
    """

    name: ClassVar[str] = "chat-4k"
    default_duration_s: ClassVar[float] = 600.0

    sessions: ArrivalProcess = field(default_factory=lambda: Poisson(rate_per_s=0.5))
    n_system_prompts: int = 4
    system_prompt_zipf: float = 1.0
    system_prompt_tokens: LogNormal = _SYSTEM_PROMPT_TOKENS
    user_tokens: LogNormal = _USER_TOKENS
    output_tokens: LogNormal = _OUTPUT_TOKENS
    mean_turns: float = 3.0
    think_time_s: LogNormal = _THINK_TIME_S
    max_prompt_tokens: int = 4096

    def __post_init__(self) -> None:
        where = "Chat4k"
        must(1 <= self.n_system_prompts <= MAX_SHARED_PREFIXES, where, "n_system_prompts",
             f">= 1 and at most {MAX_SHARED_PREFIXES:,} (kvsim's limit)", self.n_system_prompts)
        must(self.system_prompt_zipf >= 0, where, "system_prompt_zipf", ">= 0", self.system_prompt_zipf)
        must(self.mean_turns >= 1, where, "mean_turns", ">= 1", self.mean_turns)
        must(math.isfinite(self.system_prompt_zipf) and math.isfinite(self.mean_turns), where,
             "system_prompt_zipf and mean_turns", "finite", (self.system_prompt_zipf, self.mean_turns))
        must(self.max_prompt_tokens >= 2, where, "max_prompt_tokens", ">= 2", self.max_prompt_tokens)
        for tokens in (self.system_prompt_tokens, self.user_tokens, self.output_tokens):
            tokens.check_tokens()

    def expected_requests(self, duration_s: float) -> float:
        """Turns drawn: sessions expected in `duration_s` times `mean_turns`."""
        return self.sessions.expected_count(duration_s) * self.mean_turns

    def scaled(self, factor: float) -> Chat4k:
        """Session arrival rate times `factor`."""
        return replace(self, sessions=self.sessions.scaled(factor))

    def generate(self, rng: np.random.Generator, duration_s: float) -> list[Request]:
        """All turns arriving in ``[0, duration_s)``, arrival-ordered."""
        ids = SegmentIds(rng)
        sys_ids = [ids.new("system") for _ in range(self.n_system_prompts)]
        sys_tokens = self.system_prompt_tokens.sample_tokens(rng, self.n_system_prompts)
        weights = np.arange(1, self.n_system_prompts + 1, dtype=np.float64) ** -self.system_prompt_zipf
        starts = self.sessions.times(rng, duration_s)
        n_sessions = starts.size
        prompt_of = rng.choice(self.n_system_prompts, size=n_sessions, p=weights / weights.sum())
        turns = geometric_counts(rng, self.mean_turns, n_sessions)
        total = int(turns.sum())
        users = self.user_tokens.sample_tokens(rng, total)
        outputs = self.output_tokens.sample_tokens(rng, total)
        thinks = self.think_time_s.sample(rng, total)
        out: list[Request] = []
        at = 0
        for s in range(n_sessions):
            n_turns = int(turns[s])
            times = session_turn_times(float(starts[s]), thinks[at : at + n_turns - 1])
            p = int(prompt_of[s])
            segments: tuple[tuple[int, int], ...] = ((sys_ids[p], int(sys_tokens[p])),)
            used = int(sys_tokens[p])
            for k in range(n_turns):
                t, user, answer = float(times[k]), int(users[at + k]), int(outputs[at + k])
                if t >= duration_s or used + user > self.max_prompt_tokens:
                    break
                segments = (*segments, (ids.new("user"), user))
                used += user
                out_id = ids.new("output")
                out.append(
                    Request(
                        id=0, arrival_s=t, prompt_tokens=used, output_tokens=answer,
                        segments=segments, session_id=s, turn=k, output_segment_id=out_id,
                        cache_breakpoints=(1, len(segments)), source=self.name,
                    )
                )
                segments = (*segments, (out_id, answer))
                used += answer
            at += n_turns
        return finalize(out)
