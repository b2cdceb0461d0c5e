"""Simulated TTL comparison: replay one workload under several TTLs and price profiles.

The replay (`simulator.billing.ledger`) bills every request; this module reduces the bills to
one row per (profile, TTL) with the savings against no caching, picks the cheapest TTL, and
reports the reuse-gap percentiles that explain the choice: the share of reuses a TTL catches
(``share_gaps_below_ttl``), and the share of cached tokens read, which is what compares with the
break-even ``p* = (w - 1) / (w - r)`` (every prefix is written once whatever the TTL, so a TTL that
catches every reuse can still lose).

Which share of hits compares with ``p*``: the prefix input of the cached tokens costs
``r R + w W`` with a cache against ``R + W`` without (``R`` read, ``W`` written tokens), so the
cache pays on them iff ``R / (R + W) > p*``. That token share is ``share_cached_tokens_read``;
``share_requests_with_read`` (requests that read anything) is a different measure and is not
compared with ``p*``. A profile that bills storage (Gemini, whose TTL is fixed at the write) stores each
written token one TTL, ``S_T`` of its plain price, so its ``p*`` takes a write of ``w + S_T``
(`compare_ttls`); the plain input beyond the cached prefixes is outside this comparison.

A profile that caches only at explicit breakpoints caches nothing for requests that mark none
(a trace of block hashes, say), nor does any profile where no request's prefix reaches its minimum
cacheable length (chat-4k's prompts, at most 4,096 tokens, none of which reached gemini-2.5-pro's 4,096 in 10 minutes
of seed 0);
`TTLComparison.uncached_reason` says which.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from numbers import Real

import numpy as np
import pandas as pd

from simulator.billing.ledger import BillResult, bill_many
from simulator.billing.numeric import poisson_breakeven
from simulator.billing.profiles import PriceProfile, parse_ttl
from simulator.errors import is_number, must, must_differ, shown
from workloads.request import Request

DEFAULT_TTLS = ("none", "5m", "1h")
DEFAULT_PERCENTILES = (10, 25, 50, 75, 90, 99)


@dataclass(frozen=True, slots=True, kw_only=True)
class TTLComparison:
    """Bills of one workload under several TTLs for one profile."""

    profile: PriceProfile
    summary: pd.DataFrame  # one row per TTL
    gap_percentiles_s: pd.Series  # reuse gaps of the longest cacheable prefix, seconds
    results: dict[str, BillResult]
    requests_with_breakpoints: int = 0  # requests that mark at least one cache breakpoint
    # the longest prefix any request offers the cache (`longest_candidate_tokens`)
    longest_prefix_tokens: int = 0

    @property
    def breakpoints_missing(self) -> bool:
        """Whether the profile caches only at breakpoints and no request marks one."""
        return self.profile.caching == "explicit" and not self.requests_with_breakpoints

    @property
    def uncached_reason(self) -> str | None:
        """Why nothing could be cached (every TTL then bills as no cache), or ``None``: the profile caches only
        at breakpoints and no request marks one (`breakpoints_missing`), or no request's prefix reaches the
        profile's ``min_cacheable_tokens`` (helper-178: chat-4k under gemini-2.5-pro billed every TTL alike
        and printed NaN gap percentiles with no word why)."""
        if self.breakpoints_missing:
            return (f"no request marks a cache breakpoint: the {self.profile.key} profile caches only at "
                    "breakpoints, so nothing is cached and every TTL bills as no cache")
        least = self.profile.min_cacheable_tokens
        if self.summary["requests"].iloc[0] and self.longest_prefix_tokens < least:
            return (f"no request's prefix reaches {least:,} tokens, the {self.profile.key} profile's minimum to "
                    f"cache: the longest is {self.longest_prefix_tokens:,} tokens, so nothing is cached and every "
                    "TTL bills as no cache")
        return None

    @property
    def best_ttl(self) -> str:
        """The TTL with the smallest total bill (``none`` included)."""
        i = int(np.argmin(self.summary["total_usd"].to_numpy()))
        return str(self.summary["ttl"].iloc[i])


def compare_ttls(
    requests: Iterable[Request],
    profile: PriceProfile,
    ttls: Sequence[str | float] = DEFAULT_TTLS,
    *,
    write_latency_s: float = 0.0,
    percentiles: Sequence[float] = DEFAULT_PERCENTILES,
) -> TTLComparison:
    """Replay `requests` once under every TTL (``"none"`` is always added) and summarise.

    Summary columns: ``ttl, ttl_s, requests, share_requests_with_read, read_tokens, write_tokens,
    plain_tokens, input_usd, storage_usd, total_usd, savings_usd, savings_pct_of_input,
    savings_pct_of_bill, share_prompt_tokens_read, share_gaps_below_ttl, share_cached_tokens_read,
    breakeven_p_hit`` where ``savings_usd = total_usd(none) - total_usd(ttl)`` (input and storage:
    the output bill is the same under every TTL), ``savings_pct_of_input = 100 savings_usd /
    input_usd(none)``, the saving on the input bill without a cache (what a TTL is chosen on),
    ``savings_pct_of_bill = 100 savings_usd / total_usd(none)``, the same saving as a share of the
    whole bill, output included (context: how much of the bill caching touches);
    ``share_prompt_tokens_read = R / prompt tokens``
    and ``share_cached_tokens_read = R / (R + W)`` (NaN where nothing was cached), the share to
    compare with ``breakeven_p_hit``, ``p* = (w' − 1) / (w' − r)`` with ``w' = w + S_T``, a write dearer by the
    storage of one TTL (`simulator.billing.numeric.poisson_breakeven`: exact for a TTL without storage or fixed
    at the write, whose every write stores its tokens one TTL: the cached input costs less than plain input iff
    the share is above it; helper-147: Gemini's read 0, storage left out). `percentiles` are each in [0, 100]
    (``gap_percentiles_s`` names them ``p50``, ``p90``, ...).
    """
    must(isinstance(profile, PriceProfile), "compare_ttls", "profile", "a PriceProfile, e.g. "
         "get_profile('anthropic', 'sonnet-4')", profile)
    # (helper-159: None or a number failed as "not iterable", a string was read letter by letter, a TTL named twice
    # or none at all was taken, where the CLI's --ttl and billing.ttls refuse both)
    must(isinstance(requests, Iterable) and not isinstance(requests, str | bytes), "compare_ttls", "requests",
         "an iterable of Requests, e.g. load_workload('chat-4k')", requests)
    must(isinstance(percentiles, Iterable) and not isinstance(percentiles, str), "compare_ttls", "percentiles",
         "a list of numbers in [0, 100], e.g. [50, 99]", percentiles)
    percentiles = list(percentiles)  # a generator is read once (helper-167: the check used it up)
    for p in percentiles:
        must(isinstance(p, Real) and 0 <= p <= 100, "compare_ttls", "percentiles", "numbers in [0, 100]",
             list(percentiles))
    must(isinstance(ttls, Iterable) and not isinstance(ttls, str) and len(ttls := list(ttls)) >= 1, "compare_ttls",
         "ttls", f"a non-empty list of TTLs, e.g. {shown(list(DEFAULT_TTLS))}", ttls)
    ttls = [float(t) if is_number(t) and not isinstance(t, int | float) else t
            for t in ttls]  # numpy's numbers of seconds as Python's (helper-167: np.int64(300) was "no TTL")
    for t in ttls:
        must(isinstance(t, str | int | float) and not isinstance(t, bool), "compare_ttls", "ttls",
             "TTLs like '5m', '1h', 'none' or seconds", t)
    seconds = [parse_ttl(t) for t in ttls]
    must_differ([str(t) for t in ttls], [f"{t:g} s" for t in seconds], "compare_ttls: ttls", "TTL")
    ttls_s = sorted({0.0, *seconds})
    marked, longest = [0], [0]
    automatic = profile.caching == "automatic"

    def counted(reqs: Iterable[Request]) -> Iterable[Request]:
        for r in reqs:
            marked[0] += bool(r.cache_breakpoints)
            offered = longest_candidate_tokens(r, automatic)
            if offered > longest[0]:
                longest[0] = offered
            yield r

    results = bill_many(counted(requests), profile, ttls_s, write_latency_s=write_latency_s)
    base, base_input = results[0.0].totals["total_usd"], results[0.0].totals["input_usd"]
    gaps = results[0.0].frame["reuse_gap_s"].dropna().to_numpy()
    rows = []
    for t, res in results.items():
        tot = res.totals
        read, cached = int(tot["read_tokens"]), int(tot["read_tokens"] + tot["write_tokens"])
        prompt = int(res.frame["prompt_tokens"].sum())
        rows.append({
            "profile": profile.key, "ttl": profile.ttl_name(t), "ttl_s": t, "requests": int(tot["requests"]),
            "share_requests_with_read": tot["hit_rate"], "read_tokens": int(tot["read_tokens"]),
            "write_tokens": int(tot["write_tokens"]), "plain_tokens": int(tot["plain_tokens"]),
            "input_usd": tot["input_usd"], "storage_usd": tot["storage_usd"], "total_usd": tot["total_usd"],
            "savings_usd": base - tot["total_usd"],
            "savings_pct_of_input": _pct(base - tot["total_usd"], base_input),
            "savings_pct_of_bill": _pct(base - tot["total_usd"], base),
            "share_prompt_tokens_read": read / prompt if prompt else float("nan"),
            "share_gaps_below_ttl": float(np.mean(gaps < t)) if gaps.size else float("nan"),
            "share_cached_tokens_read": read / cached if cached else float("nan"),
            "breakeven_p_hit": poisson_breakeven(profile, t)[1] if t else float("nan"),
        })  # fmt: skip
    pct = pd.Series(
        np.percentile(gaps, percentiles) if gaps.size else [float("nan")] * len(percentiles),
        index=[f"p{p:g}" for p in percentiles],
        name="reuse_gap_s",
    )
    return TTLComparison(
        profile=profile,
        summary=pd.DataFrame(rows),
        gap_percentiles_s=pct,
        results={profile.ttl_name(t): r for t, r in results.items()},
        requests_with_breakpoints=marked[0],
        longest_prefix_tokens=longest[0],
    )


def longest_candidate_tokens(request: Request, automatic: bool) -> int:
    """The longest prefix `request` offers a cache, in tokens, as the ledger's candidates take them
    (`simulator.billing.ledger.Ledger`): all its segments under a profile that caches automatically, else up
    to its last cache breakpoint (0 without one)."""
    return request.prefix_tokens(len(request.segments)) if automatic else request.cacheable_prefix_tokens


def _pct(saved: float, base: float) -> float:
    """``100 saved / base``; 0 when the base is 0 (nothing billed, nothing saved)."""
    return 100.0 * saved / base if base else 0.0


def compare_profiles(
    requests: Iterable[Request],
    profiles: Sequence[PriceProfile],
    ttls: Sequence[str | float] = DEFAULT_TTLS,
    *,
    write_latency_s: float = 0.0,
) -> pd.DataFrame:
    """`compare_ttls` for each profile (the requests are materialised once); summaries stacked."""
    reqs = list(requests)
    frames = [compare_ttls(reqs, p, ttls, write_latency_s=write_latency_s).summary for p in profiles]
    return pd.concat(frames, ignore_index=True)
