"""Content-addressed segment ids, owned by one run.

Ids are 63-bit integers ``blake2b(salt, kind, n)``: ``salt`` is drawn once from the run's
rng, ``kind`` names the content family ("system", "repo", "user", "output", ...) and ``n``
counts within the kind. Equal content gets the id it was given once; unrelated content
never shares an id (collision odds about ``k**2 / 2**64`` for ``k`` ids), and the same seed
gives the same ids in any process (no ``hash()``, no class-level counters).
"""

from __future__ import annotations

import hashlib
import itertools
from collections import defaultdict
from collections.abc import Iterator

import numpy as np


class SegmentIds:
    """Allocator of fresh segment ids for one run (or one component of a mixture)."""

    __slots__ = ("_counters", "_salt")

    def __init__(self, rng: np.random.Generator) -> None:
        self._salt = int(rng.integers(0, 2**63 - 1))
        self._counters: defaultdict[str, Iterator[int]] = defaultdict(itertools.count)

    def new(self, kind: str) -> int:
        """A fresh id for one piece of content of family `kind`."""
        n = next(self._counters[kind])
        digest = hashlib.blake2b(f"{self._salt}:{kind}:{n}".encode(), digest_size=8).digest()
        return int.from_bytes(digest, "big") >> 1  # non-negative, fits int64

    def __repr__(self) -> str:
        return f"SegmentIds(salt={self._salt})"
