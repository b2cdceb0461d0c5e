"""Blocks of a KV layout: what one pool block holds and how many blocks a sequence needs.

The pool is paged in blocks of ``block_tokens`` tokens, and a sequence's blocks must grow by one
every ``block_tokens`` tokens (the fast-forward counts block crossings with that rule). Layouts
whose bytes are linear in tokens (native, MLA, cross-layer, KV dtype) fit exactly: a block is
``block_tokens · bytes_per_token`` bytes. Sliding-window layers and windowed compression are not
linear; they are approximated by the affine upper bound of `sequence_bytes`

    sequence_bytes(n) ≤ paged(n) ≤ m · B · ceil(n / B) + c        for all n

with ``paged(n)`` its bytes in pages of ``B = block_tokens`` entries a layer (as a paged pool holds a
full-resolution window: `sequence_bytes` with ``block_tokens``), ``m`` the marginal bytes per token
(full-context layers only, divided by the compression ratio) and ``c`` the largest ``paged(n) −
m·B·ceil(n/B)``. A block then holds ``B · m`` bytes and a sequence carries overhead blocks for its
sliding windows and full-resolution recent window: as many as the longest it will be needs,

    overhead(T) = ceil(max_{t ≤ T} (paged(t) − m·B·ceil(t/B)) / block_bytes)     (at most ceil(c / block_bytes))

for a sequence that holds at most ``T`` KV tokens (its prompt plus output, or its retention cap). Its
blocks at ``t ≤ T`` tokens, ``ceil(t / B) + overhead(T)``, are then at least ``paged(t)``, and at its
longest exactly ``paged(T)`` inside the windows, at most ``w − 1`` blocks more past them (a compressed
page of ``B`` entries comes every ``w·B`` tokens; both tested): under ``compress:8:4096``,
Llama-3.1-8B's 1,050-token sequence takes 66 + 462 blocks of 262 kB (138.4 MB, its pages' bytes), where
one overhead for every sequence (the whole window's 1,793 blocks) charged it 3.5× (a bug).

A sequence does not hold ``overhead(T)`` from its admission, though, as full attention's blocks grow as it
decodes: admitted at ``t`` tokens it holds the overhead of the block ``t`` ends in (`block_overhead`: a
window's step inside a block opens no block of its own), and each block it opens as it decodes brings a whole
number of blocks of window (`growth`; the fast-forward's block crossings, weighted:
`simulator.engine.decode`), up to ``overhead(T)``. The rate follows a growth line ``L(k) ≥ overhead`` at block
``k``, from ``L(0) = c``, rising ``ρ`` blocks a block, ``ρ`` changing only at a window's edge
(`_growth_pieces`): on or above the line a sequence rises at ``ρ``, below it at the steepest step of its piece
until it meets it, and where it would pass ``overhead(T)`` that block brings only what is left, so it never
holds more than ``overhead(T)`` nor less than ``overhead(t)``; an event where its rate changes. Under
``compress:w:r`` the window opens ``w − 1`` blocks a block (``ρ = w − 1``, ``c = 0``): a sequence holds its
pages exactly at every length (as many 1,000 + 1,000-token sequences at once as native attention, tested).
Gemma-3-27B's sliding layers open 5.2 blocks a block (``ρ = 5`` from ``c = 13``; 6 below the line): up to 10
blocks above its pages (25 under ``compress:8:4096``), none at admission. Under a retention policy a sequence
holds ``overhead(T)`` from admission (its cap bounds it); a prefill replica hands its decode replica the
prompt's window, which grows there, and admission "reserve" promises the growth. A layout whose layers are all
sliding (``m = 0``) is instead sized by the full per-token bytes with a per-sequence cap of
``ceil(sequence_bytes(window) / bytes_per_token)`` tokens. Either way the blocks of a sequence never
under-count `sequence_bytes` (tested).

A prefix cache counts its blocks at ``m`` a token and, for each chain end it keeps (a leaf of its
radix tree no running sequence references), the chain's window: ``overhead(depth)`` blocks
(`CacheContext.window_overhead`, `Node.extra`), so that a cached chain of ``d`` tokens, like a
sequence, counts ``ceil(d / B) + overhead(d)`` blocks, at least ``sequence_bytes(d)`` (tested). A
referenced chain end's window is its sequences' (``Seq.ov``) until they finish: a sequence admitted onto
a whole chain end takes its window over, and one reloaded from a lower tier leaves it there. Where an
evicted tail moved to a lower tier, its window moves with it and the chain's head in HBM counts at ``m``
(a window that straddles the tiers is counted below).
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from dataclasses import dataclass

from simulator.engine.retention import NO_CAP
from simulator.kv import KVLayout, _entries, _groups, bytes_per_token, sequence_bytes
from simulator.models import ModelSpec


@dataclass(frozen=True, slots=True, kw_only=True)
class BlockGeometry:
    """Per-token bytes a block is sized by, per-sequence overhead blocks and cap."""

    block_tokens: int
    bytes_per_token: float  # m: bytes one more token adds (full-context layers)
    overhead_blocks: int  # a sequence's most: overhead(T) for T past every window
    cap_tokens: int  # KV tokens a sequence can hold at most (NO_CAP: no bound)
    # overhead_from[j]: the fewest tokens T with overhead(T) > j (ascending; overhead_blocks of them)
    overhead_from: tuple[int, ...] = ()
    # the growth line ``L(k) ≥ overhead(t)`` for ``t`` in block ``k = ceil(t/B)`` (`growth`; empty: none): pieces
    # ``(k_end, L(k_end), rate, steepest)``, ascending in ``k_end``, ``L`` rising by ``rate`` a block up to ``k_end``,
    # and ``steepest`` the most blocks of window one block there opens (`overhead`'s largest step up a block)
    grow_pieces: tuple[tuple[int, int, int, int], ...] = ()
    grow_rate: int = 0  # the most blocks of window a block opens anywhere (0: no window grows)

    @property
    def block_bytes(self) -> float:
        return self.block_tokens * self.bytes_per_token

    def overhead(self, longest: int) -> int:
        """Overhead blocks of a sequence that holds at most `longest` KV tokens (module docstring)."""
        return bisect_right(self.overhead_from, longest)

    def line(self, k: int) -> int:
        """The growth line at block `k` (module docstring): ``L(k_end) − rate·(k_end − k)`` on the piece that
        holds `k`, rising at the last piece's rate past it."""
        pieces = self.grow_pieces
        i = bisect_left(pieces, (k,))
        end, at_end, rate, _ = pieces[i] if i < len(pieces) else pieces[-1]
        return at_end - rate * (end - k)

    def block_overhead(self, tokens: int, most: int) -> int:
        """The overhead blocks a sequence of `tokens` KV tokens takes when its window grows as it does (`growth`),
        up to `most` (``overhead(T)`` of its longest): the overhead of the last token of the block `tokens` ends
        in, since a window's step inside a block comes with no block of its own (``compress:4:1000``'s at token
        1,033, inside the block opened at 1,025)."""
        held = self.overhead(-(-tokens // self.block_tokens) * self.block_tokens)
        return most if most < held else held

    def growth(self, tokens: int, held: int, most: int) -> tuple[int, int]:
        """``(rate, token)`` for a sequence at `tokens` KV tokens holding `held` overhead blocks, at least
        `block_overhead` and less than `most` (``overhead(T)`` of its longest): the window blocks each
        block it opens next adds, and the token after whose writing that changes (one opening a block, ``(k −
        1)·B + 1``). Below the growth line it rises by the most a block of its piece opens, so that it stays
        at or above ``overhead`` however the steps fall, until it meets the line; on or above the line, by
        the line's rate; the rate changes where its piece ends. Where it would pass `most`, the rate holds up
        to the block before and that block brings only what is left: it never holds more than `most` (a
        sequence whose whole length fits a pool fits it at every length)."""
        B, pieces = self.block_tokens, self.grow_pieces
        k = -(-tokens // B) + 1  # the next block it opens
        i = bisect_left(pieces, (k,))
        end, at_end, rate, steepest = pieces[i] if i < len(pieces) else (k, self.line(k), *pieces[-1][2:])
        under = at_end - rate * (end - k + 1) - held  # how far below the line it is, before block k
        if under > 0 and steepest > rate:  # rise by the steepest step until on the line: after j blocks
            end = min(end, k - 1 - (-under // (steepest - rate)))
            rate = steepest
        n = -(-(most - held) // rate)  # blocks at this rate until it holds `most` or more
        if k - 1 + n <= end:
            end = k - 1 + n
            if held + rate * n > most:  # it would pass `most` there: that block brings only what is left
                if n == 1:
                    return most - held, (k - 1) * B + 1
                end -= 1
        return rate, (end - 1) * B + 1

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
        return BlockGeometry(block_tokens=block_tokens, bytes_per_token=full_bpt, overhead_blocks=0,
                             cap_tokens=cap)
    edges = {win for _, win in groups if win} | {layout.compress_recent_tokens if w > 1 else 0}
    if w == 1 and max(edges) == 0:  # no window: linear, blocks of B·m bytes hold it exactly (compress:w:0 is
        # not: every token compressed, a page of B entries spans w·B tokens, its first token opens it)
        return BlockGeometry(block_tokens=block_tokens, bytes_per_token=m, overhead_blocks=0, cap_tokens=NO_CAP)
    # past every window edge (and two together) the paged excess repeats every w blocks: one such period more
    last = max(edges) * 2 + (w + 1) * block_tokens
    overhead_from = _overhead_from(model, layout, m, block_tokens, last)
    pieces = _growth_pieces(overhead_from, block_tokens, edges)
    return BlockGeometry(block_tokens=block_tokens, bytes_per_token=m, overhead_blocks=len(overhead_from),
                         cap_tokens=NO_CAP, overhead_from=overhead_from, grow_pieces=pieces,
                         grow_rate=max((steepest for *_, steepest in pieces), default=0))


def _growth_pieces(overhead_from: tuple[int, ...], block_tokens: int,
                   edges: set[int]) -> tuple[tuple[int, int, int, int], ...]:
    """The growth line (module docstring): ``L(k) ≥ overhead(t)`` for every ``t`` in block ``k = ceil(t/B)``,
    continuous, from ``L(0) = c`` rising a whole number of blocks a block, its rate changing only at the window
    edges (`edges`, in tokens: the blocks that hold them end its pieces) and ending where ``overhead`` last
    steps up (``overhead(t_j) = j + 1`` at ``t_j = overhead_from[j]``). On each piece the rate is the mean
    steps a block there, its floor or ceiling (at least 1), whichever leaves the line the fewer blocks above
    the steps; each piece starts as high as the next one needs (a backward pass), so the line never has to
    jump. Exact (``c = 0``) where each block opens a whole number of blocks of window, as under
    ``compress:w:r`` (``w − 1``); Gemma-3-27B's sliding layers open 5.2 a block (5, from ``c = 13``)."""
    if not overhead_from:
        return ()
    last = -(-overhead_from[-1] // block_tokens)
    at_block = [0] * (last + 1)  # overhead once block k has opened
    for j, t in enumerate(overhead_from):
        at_block[-(-t // block_tokens)] = j + 1
    for k in range(1, last + 1):
        at_block[k] = max(at_block[k], at_block[k - 1])
    ends = sorted({min(last, -(-e // block_tokens)) for e in edges if e > 0} | {last})
    spans = list(zip([0, *ends], ends, strict=False))
    chosen: list[tuple[int, int]] = []  # (rate, start needed) per piece
    for lo, hi in spans:
        mean = (at_block[hi] - at_block[lo]) / (hi - lo)
        best: tuple[int, int, int] | None = None
        for rate in sorted({max(1, math.floor(mean)), max(1, math.ceil(mean))}):
            start = max(at_block[k] - rate * (k - lo) for k in range(lo, hi + 1))
            slack = sum(start + rate * (k - lo) - at_block[k] for k in range(lo, hi + 1))
            if best is None or slack < best[0]:
                best = (slack, rate, start)
        assert best is not None
        chosen.append((best[1], best[2]))
    need = 0  # backward: each piece starts at least where the next one must
    starts = [0] * len(spans)
    for i in range(len(spans) - 1, -1, -1):
        (lo, hi), (rate, start) = spans[i], chosen[i]
        starts[i] = max(start, need - rate * (hi - lo))
        need = starts[i]
    pieces: list[tuple[int, int, int, int]] = []
    value = starts[0]
    for (lo, hi), (rate, _) in zip(spans, chosen, strict=True):
        value += rate * (hi - lo)
        steepest = max(at_block[k] - at_block[k - 1] for k in range(lo + 1, hi + 1))
        if pieces and pieces[-1][2:] == (rate, steepest):  # one piece where neither rate changes
            pieces[-1] = (hi, value, rate, steepest)
        else:
            pieces.append((hi, value, rate, steepest))
    return tuple(pieces)


def _overhead_from(model: ModelSpec, layout: KVLayout, m: float, block_tokens: int, last: int) -> tuple[int, ...]:
    """The tokens ``T`` at which ``overhead(T)`` (module docstring) steps up, over ``t = 0 .. last``
    (past every window edge and a period of its compression groups' pages): ``overhead(T) > j`` from the
    first ``t`` whose excess ``paged(t) − B·m·ceil(t/B)`` passes ``j`` blocks (``paged``: `sequence_bytes` in
    pages of ``B`` entries a layer, as a paged pool holds the full-resolution window; less than a millionth
    of a token's bytes counts as none, and a block's billionth as within it).

    The excess rises only where ``paged`` does, at a token that opens a page of some layer group (its
    entries reach ``k·B + 1``; the other term only grows), so only those tokens are looked at: entries
    ``v`` are reached at ``t = v`` at full resolution (``v ≤ r``, or no compression) and at ``t = r + (v −
    r − 1)·w + 1`` past the recent window, a group with a sliding window ``W`` reaching none past ``W``."""
    r, w = layout.compress_recent_tokens, layout.compress_ratio
    opens: set[int] = set()
    for _, window in _groups(model, layout):
        for v in range(1, _entries(last, window, layout) + 1, block_tokens):
            t = v if w == 1 or v <= r else r + (v - r - 1) * w + 1
            if window and t > window:
                break
            opens.add(t)
    block = block_tokens * m
    steps: list[int] = []
    for t in sorted(opens):
        excess = sequence_bytes(model, layout, t, block_tokens) - block * -(-t // block_tokens)
        if excess < 1e-6 * m:
            continue
        while excess / block - 1e-9 > len(steps):
            steps.append(t)
    return tuple(steps)
