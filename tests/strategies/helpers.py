"""Mooncake-format traces for strategy tests, and the block-granular prefix-hit share computed directly."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from workloads.request import Request


def write_mooncake(path: Path, n: int, *, docs: int, seed: int, gap_ms: float, blocks: tuple[int, int] = (2, 6),
                   out: tuple[int, int] = (4, 64)) -> Path:
    """`n` rows whose prompts are a popular document (Zipf) + a follow-up chain; 512-token hash blocks.

    Each document is a chain of hash ids; a request takes a document's first k blocks, then
    0-2 blocks of its own, and a tail of under 512 tokens (its own, as the trace's unique tail).
    """
    rng = np.random.default_rng(seed)
    next_id = [0]

    def new(k: int) -> list[int]:
        ids = list(range(next_id[0], next_id[0] + k))
        next_id[0] += k
        return ids

    chains = [new(int(rng.integers(blocks[0], blocks[1] + 1))) for _ in range(docs)]
    weights = 1.0 / np.arange(1, docs + 1)
    weights /= weights.sum()
    with path.open("w") as f:
        t = 0.0
        for _ in range(n):
            d = chains[int(rng.choice(docs, p=weights))]
            k = int(rng.integers(1, len(d) + 1))
            ids = d[:k] + new(int(rng.integers(0, 3)))
            tail = int(rng.integers(1, 512))
            row = {"timestamp": round(t), "input_length": 512 * len(ids) + tail,
                   "output_length": int(rng.integers(out[0], out[1] + 1)), "hash_ids": ids}
            f.write(json.dumps(row) + "\n")
            t += float(rng.exponential(gap_ms))
    return path


def direct_hit_share(requests: Iterable[Request], block_tokens: int, max_context_tokens: int = 1 << 62) -> float:
    """Σ hit / Σ prompt for an unbounded block cache that has seen every earlier prompt.

    Block ``j`` of segment ``s`` after the chain ``c`` of earlier segments is keyed
    ``(c, s, j)``; hits are the leading blocks already seen, at most ``(prompt − 1) // B``
    (the last token is always computed, as the engine does); requests over the context limit
    are rejected (no hit, nothing cached). Valid when segments before the last are whole blocks.
    """
    B = block_tokens
    seen: set[tuple[int, object, int]] = set()
    chain: dict[tuple[int, object, int], int] = {}
    hit = total = 0
    for r in requests:
        total += r.prompt_tokens
        if r.prompt_tokens + r.output_tokens > max_context_tokens:
            continue
        node, keys = 0, []
        for sid, t in r.segments:
            keys += [(node, sid, j) for j in range(t // B)]
            node = chain.setdefault((node, sid, t), len(chain) + 1)
        h = 0
        for k in keys[:(r.prompt_tokens - 1) // B]:
            if k not in seen:
                break
            h += 1
        seen.update(keys)
        hit += h * B
    return hit / total
