"""Replay billing: what each request of a workload pays under one price profile and TTL.

Requests are billed in arrival order against a store of cache entries keyed by the exact
prefix (tuple of leading segment ids) up to a breakpoint. At arrival ``t`` of a request:

* its *candidate* prefixes are its ``cache_breakpoints`` (explicit profiles) or every segment
  boundary (automatic profiles); a prefix whose cacheable length
  (`PriceProfile.cacheable_tokens`) is 0, i.e. shorter than the minimum, is not cached;
* the longest *lookup* prefix whose entry is alive, ``readable_s <= t < expiry_s``, is *read*:
  ``read = cacheable(P_read)`` tokens at ``read_multiplier``; lookups are the candidates plus,
  for explicit profiles with ``lookback_segments = b``, every segment boundary up to ``b``
  before the last breakpoint (Anthropic checks ~20 earlier block boundaries, so turn k+1 of
  a conversation reads what turn k wrote at its own final breakpoint);
* when the longest candidate is longer than the one read, the tokens beyond the read prefix
  are *written*: ``write = cacheable(P_longest) - read`` at the TTL's write multiplier, and the
  entries beyond the read prefix become readable at ``t + write_latency_s`` (the prefill must
  finish first), expiring at ``t + write_latency_s + ttl_s``;
* a read refreshes every candidate entry it covers to ``expiry = t + ttl_s`` (sliding TTL);
* the rest is plain input: ``plain = prompt_tokens - read - write``; output at the output price.

Anthropic's usage fields map as ``cache_read_input_tokens = read``,
``cache_creation_input_tokens = write``, ``input_tokens = plain``.

Explicit storage (Gemini style, ``storage_usd_per_mtok_hour > 0``) is billed to the request
that extends an entry's life, for the cacheable tokens × the hours of extension.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import NamedTuple

import pandas as pd

from simulator.billing.profiles import PriceProfile
from simulator.errors import must
from simulator.units import HOUR_S, MTOK
from workloads.request import Request


class RequestBill(NamedTuple):
    """One request's bill. Tokens by billing class; USD unrounded."""

    request_id: int
    arrival_s: float
    prompt_tokens: int
    read_tokens: int
    write_tokens: int
    plain_tokens: int
    output_tokens: int
    hit: bool  # an entry was alive at arrival and was read
    entry_state: str  # longest candidate prefix at arrival: hit | pending | expired | cold | none | off
    reuse_gap_s: float  # time since the previous use of the longest prefix a read could hit (nan: first)
    input_usd: float
    storage_usd: float
    output_usd: float
    total_usd: float


class Residency(NamedTuple):
    """One life of a cache entry: from its first write to its expiry (or eviction)."""

    key_id: int
    tokens: int  # cacheable tokens of the whole prefix
    own_tokens: int  # tokens beyond the request's next shorter breakpoint (what storage is billed on)
    start_s: float
    end_s: float
    parent_key_id: int  # the longest other entry whose key is a prefix of this one (-1: none)
    held_tokens: int  # tokens beyond that parent: held while this entry or any entry extending it lives


class _Entry:
    __slots__ = ("born_s", "expiry_s", "held_tokens", "key_id", "own_tokens", "parent_id", "readable_s", "tokens")

    def __init__(
        self, key_id: int, tokens: int, own_tokens: int, born_s: float, readable_s: float, expiry_s: float,
        parent_id: int = -1, held_tokens: int = 0,
    ) -> None:
        self.key_id, self.tokens, self.own_tokens = key_id, tokens, own_tokens
        self.born_s, self.readable_s, self.expiry_s = born_s, readable_s, expiry_s
        self.parent_id, self.held_tokens = parent_id, held_tokens


class Ledger:
    """Stateful biller for one profile and TTL; feed it requests in arrival order.

    Parameters
    ----------
    profile : PriceProfile
    ttl_s : float
        Cache TTL in seconds; ``0`` bills everything as plain input (no caching).
    write_latency_s : float
        Delay from arrival until a written entry can be read (the writer's prefill).
    """

    def __init__(self, profile: PriceProfile, ttl_s: float, *, write_latency_s: float = 0.0) -> None:
        must(ttl_s >= 0, "Ledger", "ttl_s", ">= 0", ttl_s)
        must(write_latency_s >= 0, "Ledger", "write_latency_s", ">= 0", write_latency_s)
        self.profile, self.ttl_s, self.write_latency_s = profile, float(ttl_s), float(write_latency_s)
        self.label = profile.ttl_name(self.ttl_s)
        self._write_mult = profile.write_multiplier(self.ttl_s) if self.ttl_s > 0 else 1.0
        self._store: dict[tuple[int, ...], _Entry] = {}
        self._last_use: dict[tuple[int, ...], float] = {}
        self._now = -math.inf
        self.residencies: list[Residency] = []

    def _candidates(self, req: Request) -> list[tuple[tuple[int, ...], int]]:
        ks = (
            range(1, len(req.segments) + 1)
            if self.profile.caching == "automatic"
            else sorted(set(req.cache_breakpoints))
        )
        out: list[tuple[tuple[int, ...], int]] = []
        for k in ks:
            tokens = self.profile.cacheable_tokens(req.prefix_tokens(k))
            # a longer prefix with no more cacheable tokens adds nothing: the shorter key serves
            if tokens > 0 and (not out or tokens > out[-1][1]):
                out.append((tuple(s for s, _ in req.segments[:k]), tokens))
        return out

    def _lookups(self, req: Request, cands: list[tuple[tuple[int, ...], int]]) -> list[tuple[tuple[int, ...], int]]:
        """Prefixes a read may hit: the candidates and the lookback boundaries, shortest first."""
        back = self.profile.lookback_segments
        if self.profile.caching == "automatic" or not back or not req.cache_breakpoints:
            return cands
        last = max(req.cache_breakpoints)
        found = dict(cands)
        for k in range(max(1, last - back), last + 1):
            tokens = self.profile.cacheable_tokens(req.prefix_tokens(k))
            if tokens > 0:
                found.setdefault(tuple(s for s, _ in req.segments[:k]), tokens)
        return sorted(found.items(), key=lambda kv: kv[1])

    def _end_life(self, e: _Entry) -> None:
        self.residencies.append(Residency(e.key_id, e.tokens, e.own_tokens, e.born_s, e.expiry_s, e.parent_id,
                                          e.held_tokens))

    def _parent(self, key: tuple[int, ...]) -> _Entry | None:
        """The entry with the longest key that is a proper prefix of `key` (ever created), if any."""
        for j in range(len(key) - 1, 0, -1):
            e = self._store.get(key[:j])
            if e is not None:
                return e
        return None

    def _extend(
        self, key: tuple[int, ...], tokens: int, own: int, t: float, readable_s: float, expiry_s: float
    ) -> float:
        """Create or extend an entry; return the seconds of life added (for storage billing)."""
        e = self._store.get(key)
        if e is None or e.expiry_s <= t:
            if e is not None:
                self._end_life(e)
                parent_id, held = e.parent_id, e.held_tokens
            else:
                parent = self._parent(key)
                parent_id = parent.key_id if parent else -1
                held = tokens - (parent.tokens if parent else 0)
            self._store[key] = _Entry(
                len(self._store) if e is None else e.key_id, tokens, own, t, readable_s, expiry_s, parent_id, held
            )
            return expiry_s - t
        e.readable_s = min(e.readable_s, readable_s)
        added = max(0.0, expiry_s - e.expiry_s) if self.profile.sliding else 0.0
        e.expiry_s += added
        return added

    def bill(self, req: Request) -> RequestBill:
        """Bill one request (arrivals must not go back in time) and update the cache."""
        t = req.arrival_s
        must(t >= self._now, f"Request({req.id})", "arrival_s", f">= the previous arrival {self._now}", t)
        self._now = t
        p = self.profile
        cands = self._candidates(req)
        state, gap = "none", math.nan
        if cands:
            seen = [key for key, _ in self._lookups(req, cands) if key in self._last_use]
            gap = t - self._last_use[seen[-1]] if seen else math.nan
            for key, _ in cands:
                self._last_use[key] = t
            if seen:
                self._last_use[seen[-1]] = t
        if self.ttl_s == 0:  # no cache: gaps are still observed, everything is plain input
            cands, state = [], "off"
        read, read_key = 0, None
        if cands:
            for key, tokens in self._lookups(req, cands):
                e = self._store.get(key)
                if e is not None and e.readable_s <= t < e.expiry_s and tokens > read:
                    read, read_key = tokens, key
            e = self._store.get(cands[-1][0])
            if read >= cands[-1][1]:
                state = "hit"
            elif e is None:
                state = "cold"
            else:
                state = "pending" if t < e.expiry_s else "expired"
        write = cands[-1][1] - read if cands and read < cands[-1][1] else 0
        extended_token_s = 0.0
        if read_key is not None and read_key not in dict(cands):  # a lookback hit: refresh it
            hit = self._store[read_key]
            extended_token_s += hit.own_tokens * self._extend(read_key, read, hit.own_tokens, t, t, t + self.ttl_s)
        for i, (key, tokens) in enumerate(cands):
            own = tokens - (cands[i - 1][1] if i else 0)
            if tokens <= read:
                added = self._extend(key, tokens, own, t, t, t + self.ttl_s)
            else:
                ready = t + self.write_latency_s
                added = self._extend(key, tokens, own, t, ready, ready + self.ttl_s)
            extended_token_s += own * added
        plain = req.prompt_tokens - read - write
        input_usd = (
            (plain + p.read_multiplier * read + self._write_mult * write) * p.input_usd_per_mtok / MTOK
        )
        storage_usd = extended_token_s / HOUR_S * p.storage_usd_per_mtok_hour / MTOK
        output_usd = req.output_tokens * p.output_usd_per_mtok / MTOK
        return RequestBill(
            req.id,
            t,
            req.prompt_tokens,
            read,
            write,
            plain,
            req.output_tokens,
            read > 0,
            state,
            gap,
            input_usd,
            storage_usd,
            output_usd,
            input_usd + storage_usd + output_usd,
        )

    def close(self, at_s: float | None = None) -> list[Residency]:
        """End every live entry at its expiry (or at `at_s`, an eviction time, if earlier).

        Each record's ``parent_key_id`` and ``held_tokens`` are then those of the key tree of every entry
        the replay created (`_reparent`), not of the entries that existed when its key was first written."""
        for e in self._store.values():
            if at_s is not None:
                e.expiry_s = max(e.born_s, min(e.expiry_s, at_s))
            self._end_life(e)
        self._reparent()
        self._store.clear()
        return self.residencies

    def _reparent(self) -> None:
        """Give each entry the longest other entry whose key is a prefix of its own, among all created.

        An entry's parent is set when its key is first written; a shorter entry written later, between it
        and that parent (a request that adds a breakpoint: ``(3,)`` then ``(2, 3)``), did not become its
        parent, and the two held the shorter prefix's KV each, counted twice by
        `simulator.billing.provider.kv_byte_seconds` and `kv_peak_bytes` (helper-195: 10,000 tokens held
        at the peak for a 6,000-token prefix). Only the keys between the recorded parent's and the entry's
        own are looked up: none where the parent is one segment shorter."""
        length = {e.key_id: len(key) for key, e in self._store.items()}
        fixed: dict[int, tuple[int, int]] = {}
        for key, e in self._store.items():
            for j in range(len(key) - 1, length.get(e.parent_id, 0), -1):
                parent = self._store.get(key[:j])
                if parent is not None:
                    e.parent_id, e.held_tokens = parent.key_id, e.tokens - parent.tokens
                    fixed[e.key_id] = (e.parent_id, e.held_tokens)
                    break
        if fixed:
            self.residencies = [r._replace(parent_key_id=fixed[r.key_id][0], held_tokens=fixed[r.key_id][1])
                                if r.key_id in fixed else r for r in self.residencies]


@dataclass(frozen=True, slots=True, kw_only=True)
class BillResult:
    """The bills of one replay: one row per request, totals, and the entries' residency."""

    profile: PriceProfile
    ttl_s: float
    frame: pd.DataFrame
    residency: pd.DataFrame

    @property
    def totals(self) -> pd.Series:
        """Sums of the token and USD columns, plus ``requests`` and ``hit_rate`` (the share of
        requests that read any cached token; not a token share, not comparable with ``p*``)."""
        cols = [
            "read_tokens",
            "write_tokens",
            "plain_tokens",
            "output_tokens",
            "input_usd",
            "storage_usd",
            "output_usd",
            "total_usd",
        ]
        s = self.frame[cols].sum()
        s["requests"] = len(self.frame)
        s["hit_rate"] = float(self.frame["hit"].mean()) if len(self.frame) else math.nan
        return s


def records_to_frame(bills: Iterable[RequestBill]) -> pd.DataFrame:
    """The one door from bill records into pandas: one row per request."""
    return pd.DataFrame.from_records(list(bills), columns=RequestBill._fields)


def bill_many(
    requests: Iterable[Request],
    profile: PriceProfile,
    ttls_s: Iterable[float],
    *,
    write_latency_s: float = 0.0,
) -> dict[float, BillResult]:
    """Replay `requests` once, billing them under each TTL in `ttls_s` (``0`` = no cache)."""
    ledgers = {float(t): Ledger(profile, t, write_latency_s=write_latency_s) for t in ttls_s}
    rows: dict[float, list[RequestBill]] = {t: [] for t in ledgers}
    for req in requests:
        for t, ledger in ledgers.items():
            rows[t].append(ledger.bill(req))
    return {
        t: BillResult(
            profile=profile,
            ttl_s=t,
            frame=records_to_frame(rows[t]),
            residency=pd.DataFrame.from_records(ledger.close(), columns=Residency._fields),
        )
        for t, ledger in ledgers.items()
    }


def bill_requests(
    requests: Iterable[Request], profile: PriceProfile, ttl_s: float, *, write_latency_s: float = 0.0
) -> BillResult:
    """Replay `requests` in arrival order and bill each under one profile and TTL."""
    return bill_many(requests, profile, [ttl_s], write_latency_s=write_latency_s)[float(ttl_s)]
