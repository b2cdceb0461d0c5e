"""Blocks of a KV layout: what one pool block holds and how many blocks a sequence needs.

The pool is paged in blocks of ``block_tokens`` tokens, and a sequence's blocks must grow by one
every ``block_tokens`` tokens (the fast-forward counts block crossings with that rule). Layouts
whose bytes are linear in tokens (native, MLA, cross-layer, KV dtype) fit exactly: a block is
``block_tokens · bytes_per_token`` bytes. Sliding-window layers and windowed compression are not
linear; they are approximated by the affine upper bound of `sequence_bytes`

    sequence_bytes(n) ≤ m · n + c        for all n (equal once n is past every window)

with ``m`` the marginal bytes per token (full-context layers only, divided by the compression
ratio) and ``c`` the largest ``sequence_bytes(n) − m·n`` (taken at the windows' edges). A block
then holds ``block_tokens · m`` bytes and a sequence carries overhead blocks for its sliding windows
and full-resolution recent window: as many as the longest it will be needs,

    overhead(T) = ceil(max_{t ≤ T} (sequence_bytes(t) − m·t) / block_bytes)     (at most ceil(c / block_bytes))

for a sequence that holds at most ``T`` KV tokens (its prompt plus output, or its retention cap). Its
blocks at ``t ≤ T`` tokens, ``ceil(t / B) + overhead(T)``, are then at least ``sequence_bytes(t)``, and
at its longest at most one block more than its bytes paged in blocks (both tested): under
``compress:8:4096``, Llama-3.1-8B's 1,050-token sequence takes 66 + 460 blocks of 262 kB (138 MB, its
bytes), where one overhead for every sequence (the whole window's 1,793 blocks) charged it 3.5× (a bug).
Before its last token a sequence still holds the overhead of its longest, up to ``(ρ − 1)·(T − t)/B``
blocks more than its bytes (``ρ·m`` a token's bytes inside the windows; ``ρ = w`` under
``compress:w:r``), since the fast-forward counts one block per ``B`` tokens (growth at the window's rate
would need phase counts of its own). A layout whose layers are all sliding (``m = 0``) is instead sized
by the full per-token bytes with a per-sequence cap of ``ceil(sequence_bytes(window) /
bytes_per_token)`` tokens. Either way the blocks of a sequence never under-count `sequence_bytes`
(tested).

A prefix cache's blocks are counted at ``m`` a token: an unreferenced prefix inside a window holds more
(`simulator.study.windowed_cache_note` says how much, where it applies). Exact would need the cache to
carry a window overhead per chain end, as sequences do.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from dataclasses import dataclass

from simulator.engine.retention import NO_CAP
from simulator.kv import KVLayout, _groups, bytes_per_token, sequence_bytes
from simulator.models import ModelSpec


@dataclass(frozen=True, slots=True, kw_only=True)
class BlockGeometry:
    """Per-token bytes a block is sized by, per-sequence overhead blocks and cap."""

    block_tokens: int
    bytes_per_token: float  # m: bytes one more token adds (full-context layers)
    overhead_bytes: float  # c
    overhead_blocks: int  # a sequence's most: overhead(T) for T past every window
    cap_tokens: int  # KV tokens a sequence can hold at most (NO_CAP: no bound)
    # overhead_from[j]: the fewest tokens T with overhead(T) > j (ascending; overhead_blocks of them)
    overhead_from: tuple[int, ...] = ()

    @property
    def block_bytes(self) -> float:
        return self.block_tokens * self.bytes_per_token

    def overhead(self, longest: int) -> int:
        """Overhead blocks of a sequence that holds at most `longest` KV tokens (module docstring)."""
        return bisect_right(self.overhead_from, longest)

    def blocks(self, tokens: int, overhead: int) -> int:
        """Blocks of a sequence holding `tokens` KV tokens, with `overhead` blocks (`overhead` of its
        longest): ``ceil(min(t, cap)/B) + overhead``."""
        cap = self.cap_tokens  # `min` by its rule, as a conditional (a call of min() is ~850 instructions)
        return -(-(cap if cap < tokens else tokens) // self.block_tokens) + overhead


def block_geometry(model: ModelSpec, layout: KVLayout, block_tokens: int) -> BlockGeometry:
    """The geometry above for `model` under `layout`."""
    full_bpt = bytes_per_token(model, layout)
    groups = _groups(model, layout)
    full_layers = sum(n for n, window in groups if window == 0)
    w = layout.compress_ratio
    m = full_bpt * full_layers / model.n_layers / w
    if m == 0:  # every layer is sliding: the KV stops growing at the window
        window = max(win for _, win in groups)
        cap = math.ceil(sequence_bytes(model, layout, window) / full_bpt)
        return BlockGeometry(block_tokens=block_tokens, bytes_per_token=full_bpt, overhead_bytes=0.0,
                             overhead_blocks=0, cap_tokens=cap)
    edges = {win for _, win in groups if win} | {layout.compress_recent_tokens if w > 1 else 0}
    edges |= {a + b for a in edges for b in edges}
    candidates = [n for e in edges for n in range(e, e + w + 1)]
    c = max(0.0, *(sequence_bytes(model, layout, n) - m * n for n in candidates))
    c = 0.0 if c < 1e-6 * m else c
    overhead_from = _overhead_from(model, layout, m, block_tokens, max(candidates)) if c else ()
    return BlockGeometry(block_tokens=block_tokens, bytes_per_token=m, overhead_bytes=c,
                         overhead_blocks=len(overhead_from), cap_tokens=NO_CAP, overhead_from=overhead_from)


def _overhead_from(model: ModelSpec, layout: KVLayout, m: float, block_tokens: int, last: int) -> tuple[int, ...]:
    """The tokens ``T`` at which ``overhead(T)`` (module docstring) steps up, scanning ``t = 0 .. last``
    (past every window edge and its compression group, where ``c`` is reached): ``overhead(T) > j`` from the
    first ``t`` whose excess ``sequence_bytes(t) − m·t`` passes ``j`` blocks (less than a millionth of a
    token's bytes counts as none, and a block's billionth as within it)."""
    block = block_tokens * m
    steps: list[int] = []
    for t in range(last + 1):
        excess = sequence_bytes(model, layout, t) - m * t
        if excess < 1e-6 * m:
            continue
        while excess / block - 1e-9 > len(steps):
            steps.append(t)
    return tuple(steps)
