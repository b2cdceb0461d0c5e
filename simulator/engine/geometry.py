"""Blocks of a KV layout: what one pool block holds and how many blocks a sequence needs.

The pool is paged in blocks of ``block_tokens`` tokens, and a sequence's blocks must grow by one
every ``block_tokens`` tokens (the fast-forward counts block crossings with that rule). Layouts
whose bytes are linear in tokens (native, MLA, cross-layer, KV dtype) fit exactly: a block is
``block_tokens · bytes_per_token`` bytes. Sliding-window layers and windowed compression are not
linear; they are approximated by the affine upper bound of `sequence_bytes`

    sequence_bytes(n) ≤ m · n + c        for all n (equal once n is past every window)

with ``m`` the marginal bytes per token (full-context layers only, divided by the compression
ratio) and ``c`` the largest ``sequence_bytes(n) − m·n`` (taken at the windows' edges). A block
then holds ``block_tokens · m`` bytes and every sequence carries ``ceil(c / block_bytes)``
overhead blocks (its sliding windows and full-resolution recent window). A layout whose layers
are all sliding (``m = 0``) is instead sized by the full per-token bytes with a per-sequence cap
of ``ceil(sequence_bytes(window) / bytes_per_token)`` tokens. Either way the blocks of a
sequence never under-count `sequence_bytes` (tested).
"""

from __future__ import annotations

import math
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
    overhead_blocks: int
    cap_tokens: int  # KV tokens a sequence can hold at most (NO_CAP: no bound)

    @property
    def block_bytes(self) -> float:
        return self.block_tokens * self.bytes_per_token

    def blocks(self, tokens: int) -> int:
        """Blocks of a sequence holding `tokens` KV tokens: ``ceil(min(t, cap)/B) + overhead``."""
        cap = self.cap_tokens  # `min` by its rule, as a conditional (a call of min() is ~850 instructions)
        return -(-(cap if cap < tokens else tokens) // self.block_tokens) + self.overhead_blocks


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
    overhead = math.ceil(c / (block_tokens * m) - 1e-9) if c else 0
    return BlockGeometry(block_tokens=block_tokens, bytes_per_token=m, overhead_bytes=c,
                         overhead_blocks=overhead, cap_tokens=NO_CAP)
