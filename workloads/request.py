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

import typing
from dataclasses import dataclass
from operator import itemgetter

from simulator.errors import must

if typing.TYPE_CHECKING:
    Segment: typing.TypeAlias = tuple[int, int]
else:  # typing's alias, unlike ``tuple[int, int]`` (whose __doc__ is tuple's), keeps a docstring: help(Segment).
    # A copy: ``typing.Tuple[int, int]`` is cached, and everyone's would read as a Segment.
    Segment = typing.Tuple[int, int].copy_with((int, int))  # noqa: UP006
    Segment.__name__ = Segment.__qualname__ = "Segment"  # help's heading (its repr stays typing.Tuple[int, int])
    Segment.__doc__ = """Segment: one piece of a prompt, a plain tuple ``(segment_id, tokens)`` of two ints.

    segment_id
        A content address: two segments with the same id hold the same tokens, so two requests share a
        prefix exactly as far as their leading ids agree (a system prompt, a repository context, the history
        of turn k, one of a Mooncake trace's 512-token ``hash_ids`` blocks). A negative id is a prompt's own,
        shared with nothing (a trace without prefix ids: one segment a request).
    tokens
        The tokens the segment holds; a request's segments add up to its ``prompt_tokens``.

    ``Request(..., prompt_tokens=1100, segments=((1, 512), (2, 512), (7, 76)))`` shares 1,024 tokens with
    any earlier request whose segments begin ``(1, 512), (2, 512)``.
    """

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
