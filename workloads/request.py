"""The request: what one API call asks of a serving system, and what its prompt shares.

A prompt is a chain of content-addressed *segments*: ``(segment_id, tokens)`` pairs whose
token counts add up to ``prompt_tokens``. Two requests share a prefix exactly as far as their
leading segment ids agree (a system prompt, a repository context, the history of turn k,
or a trace's 512-token ``hash_ids`` blocks). ``output_segment_id`` names the tokens this
request generates, so that a later turn whose history includes them can reference them.

``cache_breakpoints`` are where a client puts prompt-cache breakpoints, as counts of leading
segments (at most 4): breakpoint ``k`` marks the prefix ``segments[:k]`` as cacheable.
"""

from __future__ import annotations

from dataclasses import dataclass
from operator import itemgetter

from simulator.errors import must

Segment = tuple[int, int]
"""``(segment_id, tokens)``; ids are content addresses (equal id = equal content)."""

MAX_BREAKPOINTS = 4


@dataclass(frozen=True, slots=True, kw_only=True)
class Request:
    """One request. Times in seconds from the start of the workload."""

    id: int
    arrival_s: float
    prompt_tokens: int
    output_tokens: int
    segments: tuple[Segment, ...]
    session_id: int = -1
    turn: int = 0
    output_segment_id: int = -1
    cache_breakpoints: tuple[int, ...] = ()
    source: str = ""  # which generator or trace produced it

    def __post_init__(self) -> None:
        where = f"Request({self.id})"
        must(self.arrival_s >= 0, where, "arrival_s", ">= 0", self.arrival_s)
        must(self.prompt_tokens >= 1, where, "prompt_tokens", ">= 1", self.prompt_tokens)
        must(self.output_tokens >= 1, where, "output_tokens", ">= 1", self.output_tokens)
        seg_tokens = sum(map(itemgetter(1), self.segments))  # (in C: a day's trace makes millions)
        must(
            seg_tokens == self.prompt_tokens,
            where,
            "segments",
            f"token counts summing to prompt_tokens={self.prompt_tokens}",
            seg_tokens,
        )
        must(
            len(self.cache_breakpoints) <= MAX_BREAKPOINTS,
            where,
            "cache_breakpoints",
            f"at most {MAX_BREAKPOINTS}",
            self.cache_breakpoints,
        )
        for k in self.cache_breakpoints:
            must(1 <= k <= len(self.segments), where, "cache_breakpoints", "in 1..len(segments)", k)

    def prefix_tokens(self, n_segments: int) -> int:
        """Tokens in the leading `n_segments` segments."""
        return sum(t for _, t in self.segments[:n_segments])

    @property
    def cacheable_prefix_tokens(self) -> int:
        """Tokens up to the last cache breakpoint (0 when the request has none)."""
        return self.prefix_tokens(max(self.cache_breakpoints)) if self.cache_breakpoints else 0
