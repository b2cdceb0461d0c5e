"""Closed forms for a stable decode batch: an arithmetic series of step times.

Step ``i`` (0-based) of a stable batch of ``n`` sequences attending ``C`` tokens costs
``g_i = g0 + d·i`` with ``g0 = a + b·C`` and ``d = b·n`` (each step adds ``n`` tokens of
context), so k steps take

    T(k) = Σ_{i<k} (g0 + d·i) = k·g0 + d·k(k−1)/2.

Inverting: the whole steps finished within ``e`` seconds are the largest ``j`` with
``T(j) ≤ e``, the floor of the positive root of ``d/2·x² + h·x − e = 0`` with ``h = g0 − d/2``:
``x = 2e / (h + sqrt(h² + 2de))`` (``e / g0`` when ``d = 0``), made exact against float rounding
by a bounded search on ``T``.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Iterable, Iterator, Sequence
from heapq import heappush, heapreplace

import numpy as np


def series_s(g0: float, d: float, k: int) -> float:
    """``T(k) = k·g0 + d·k(k−1)/2``: seconds of k steps."""
    return k * g0 + d * (k * (k - 1) // 2)


def steps_within(g0: float, d: float, e: float) -> int:
    """Largest ``j ≥ 0`` with ``T(j) ≤ e`` (``g0 > 0``, ``d ≥ 0``, ``e`` finite).

    The root is taken as ``2e / (h + sqrt(h² + 2de))`` while ``h = g0 − d/2 > 0``: the textbook
    ``(−h + sqrt(h² + 2de)) / d`` cancels to 0 when ``2de ≪ h²`` (``d = 4e-42``) and left a walk of
    one step per loop from there. For ``h ≤ 0`` the textbook form has no cancellation. Rounding
    leaves the estimate a step or so off; a gallop then a bisection on ``T`` (monotone in ``j``)
    makes it exact in at most ~130 evaluations of ``T``, whatever the inputs.
    """
    if e < g0:
        return 0
    h = g0 - d / 2
    root = math.sqrt(h * h + 2 * d * e)
    j = int(2 * e / (h + root) if h > 0 else (root - h) / d)
    return _largest_within(g0, d, e, j)


def _largest_within(g0: float, d: float, e: float, j: int) -> int:
    """Largest ``i ≥ 0`` with ``T(i) ≤ e``, starting from the guess ``j``: gallop, then bisect."""
    step = 1
    if series_s(g0, d, j) <= e:  # T(lo) ≤ e; gallop up until T(hi) > e
        lo = j
        while series_s(g0, d, lo + step) <= e:
            lo += step
            step *= 2
        hi = lo + step
    else:  # T(hi) > e; gallop down until T(lo) ≤ e (T(0) = 0 ≤ e)
        hi = j
        while hi - step > 0 and series_s(g0, d, hi - step) > e:
            hi -= step
            step *= 2
        lo = max(0, hi - step)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if series_s(g0, d, mid) <= e:
            lo = mid
        else:
            hi = mid
    return lo


def steps_to_reach(g0: float, d: float, e: float) -> int:
    """Smallest ``j ≥ 1`` with ``T(j) ≥ e``: `steps_within`'s ``j`` where ``T(j) = e`` exactly, else ``j + 1``."""
    j = steps_within(g0, d, e)
    return j if j >= 1 and series_s(g0, d, j) >= e else j + 1


def blocks_crossed(hist: Sequence[int], shift: int, block_tokens: int, j: int) -> int:
    """New blocks ``Σ_seqs ceil((kv + j)/B) − ceil(kv/B)`` that j decode steps need.

    ``hist[p]`` counts sequences with ``(kv − S) mod B = p`` and ``shift = S``; a sequence at
    phase ``r = kv mod B`` needs ``floor((r + j − 1)/B) + [r = 0]`` new blocks in j ≥ 1 steps. With
    ``j − 1 = q·B + t`` (``0 ≤ t < B``) that is ``q + [r ≥ B − t] + [r = 0]``: every sequence takes
    q, those at the phases ``B − t .. B − 1`` one more (a cyclic run of t entries of `hist`, from
    ``p = (B − t − S) mod B``), those at phase 0 one more: three sums, O(1) Python operations.
    """
    if j <= 0:
        return 0
    b = block_tokens
    q, t = divmod(j - 1, b)
    total = hist[-shift % b]  # phase r = 0 sits at p = −S mod B
    if q:
        total += q * sum(hist)
    if t:
        lo = (b - t - shift) % b
        hi = lo + t
        total += sum(hist[lo:hi]) if hi <= b else sum(hist[lo:]) + sum(hist[:hi - b])
    return total


def growth_block_s(hist: Sequence[int], shift: int, block_tokens: int, g0: float, d: float,
                   n: int, tn: float | None = None) -> tuple[int, float]:
    """``(G(n), Σ_{i<n} G(i)·g_i)``: blocks n steps cross (``G = blocks_crossed``) and the block-seconds they add.
    `tn` is ``T(n) = series_s(g0, d, n)`` where the caller has it (a jump's seconds), else worked out here.

    During step ``i`` the decoders hold ``G(i)`` new blocks; a decoder at phase ``r`` takes one at
    each step ``t = t0 + B·q`` (``t0 = (−r mod B) + 1``), held for the rest of the n steps,
    ``T(n) − T(t)``; summing over its ``m`` such ``t ≤ n − 1`` needs only ``Σt`` and ``Σt²``:
    O(phases), not O(n). (The ``t ≤ n`` count the blocks crossed, as `blocks_crossed`.) As ``t0``
    runs over ``1..B``, ``m = ⌊(n − 1 − t0)/B⌋ + 1`` takes two values at most (``mh`` up to ``t0 =
    cut``, then ``mh − 1``), so what depends on ``m`` alone is worked out for both first (integers:
    the same sums; the float terms are the same operations on the same operands, phase by phase).

    A jump of at most ``B + 1`` steps (most) has ``m ≤ 1`` everywhere: a phase takes one block at ``t0``
    if ``t0 ≤ n − 1`` (``m = 1``: ``Σt = t0``, ``Σt² = t0²``, and ``m·T(n) = T(n)`` exactly), so its term is
    ``count·(T(n) − g0·t0 − d·(t0² − t0)/2)``, the same operations; and the phase whose ``t0 ≡ n (mod B)``
    takes one more block at step n (``t0 = n``, or ``t0 = 1`` when ``n = B + 1``). Phase ``p``'s first step
    is ``t0 = (first − p) mod B + 1`` (``first = −S mod B``), so the phases with ``t0 ≤ last = n − 1`` are
    the ``last`` ones from ``first − last + 1`` up to ``first``, cyclically, ``t0`` falling from ``last`` to
    1: only they are read (a short jump has few), in ascending ``p`` as a pass over every phase would add
    them (the same terms in the same order: the same float). When that run wraps past phase 0 it is read
    as ``0..first`` (``t0`` from ``first + 1``), then ``first − last + 1 + B .. B − 1`` (``t0`` from
    ``last``). Done here, not in a function of its own, and over slices of `hist`: a jump of 5 steps
    (chat-4k-prefix's mean at 100k requests) took ~11.4 k instructions, now ~10.1 k.
    """
    b = block_tokens
    if tn is None:
        tn = series_s(g0, d, n)
    last = n - 1
    if last <= b:
        first = -shift % b  # the phase whose first block comes at step t0 = 1
        blocks = hist[(first - last) % b]
        total = 0.0
        lo = first - last + 1
        # t0 counted as a float (exact: an integer ≤ B + 1), so the products below are float-float ones, which
        # 3.11 specialises, not int-float ones (the same floats; 0.3 % of chat-4k's instructions)
        if lo >= 0:
            p, t0, rest = lo, float(last), 0
        else:  # 0..first now, then the rest of the run (rest > 0: lo > −B)
            p, t0, rest = 0, float(first + 1), lo + b
        end = first + 1
        while True:
            for count in hist[p:end]:
                if count:
                    blocks += count
                    total += count * (tn - g0 * t0 - d * (t0 * t0 - t0) / 2.0)
                t0 -= 1.0
            if not rest:
                return blocks, total
            p, end, t0, rest = rest, b, float(last), 0
    blocks = 0
    total = 0.0
    bh = (n - 1) // b + 1  # blocks a phase with t0 <= bcut takes in n steps (one less beyond)
    bcut = n - (bh - 1) * b
    mh = (last - 1) // b + 1
    cut = last - (mh - 1) * b
    terms = []
    for m in (mh, mh - 1):
        q = m * (m - 1)
        terms.append((m, m * tn, b * (q // 2), b * q, b * b * (q * (2 * m - 1) // 6)))
    high, low = terms
    t0 = -shift % b + 1  # phase p's first step (−(p + S) mod B) + 1, for p = 0, then one less a phase, cyclically
    for count in hist:
        if count and t0 <= n:
            blocks += count * (bh if t0 <= bcut else bh - 1)
            if t0 <= last:
                m, m_tn, s1_add, s2_mul, s2_add = high if t0 <= cut else low
                s1 = m * t0 + s1_add
                s2 = m * t0 * t0 + t0 * s2_mul + s2_add
                total += count * (m_tn - g0 * s1 - d * (s2 - s1) / 2)
        t0 = t0 - 1 if t0 > 1 else b
    return blocks, total


def ramp_s(g0: float, d: float, n: int) -> float:
    """``Σ_{i<n} i·g_i``: token-seconds one growing decoder adds over n steps."""
    return g0 * (n * (n - 1) // 2) + d * ((n - 1) * n * (2 * n - 1) // 6)


def _rank(n_total: int, q: float) -> tuple[int, float]:
    """``(m, frac)`` of quantile `q` of `n_total` values (numpy's linear rule): it lies `frac` of the
    way from the ``m``-th largest value to the ``(m−1)``-th, ``m = N − floor(q(N−1))``."""
    pos = q * (n_total - 1)
    lo = math.floor(pos)
    return n_total - lo, pos - lo


def quantile_picks(n_total: int, q: float = 0.99) -> int:
    """The ``m`` of `_rank`: quantile `q` of `n_total` values lies among their ``m`` largest. It never falls
    as `n_total` grows (``floor(q(N−1))`` grows by at most one a value), so a bound on `n_total` bounds it."""
    return _rank(n_total, q)[0]


def gap_quantile(g0s: np.ndarray, ds: np.ndarray, ks: np.ndarray, extra: Sequence[float],
                 q: float = 0.99) -> float:
    """Quantile `q` (numpy's linear rule) of the union of arithmetic series and `extra` values.

    Series ``s`` holds ``g0s[s] + ds[s]·i`` for ``i < ks[s]`` (``ds ≥ 0``). With N values the
    quantile interpolates the ascending values ``x[lo]`` and ``x[lo+1]``, ``lo = floor(q(N−1))``,
    which are among the ``m = N − lo`` largest; each series offers only its top ``min(k, m)``, so
    the cost is ``O(series · m)``, independent of N for the p99 of a few thousand tokens.
    """
    n_total = int(ks.sum()) + len(extra)
    if n_total == 0:
        return math.nan
    m, frac = _rank(n_total, q)
    take = np.minimum(ks, m)
    tot = int(take.sum())
    seg = np.repeat(np.arange(len(ks)), take)
    offs = np.arange(tot) - np.repeat(np.cumsum(take) - take, take)
    vals = g0s[seg] + ds[seg] * (ks[seg] - 1 - offs)
    if len(extra):
        vals = np.concatenate([vals, np.asarray(extra, dtype=float)])
    top = np.partition(vals, len(vals) - m)[len(vals) - m:]
    top.sort()
    x_lo = float(top[0])
    x_hi = float(top[1]) if m >= 2 else x_lo
    return x_lo + frac * (x_hi - x_lo)


NUMPY_SERIES = 64  # from this many series numpy finds the candidates faster than a Python pass


def gap_quantile_ranges(g0s: Sequence[float], ds: Sequence[float], ks: Sequence[int],
                        ranges: Sequence[tuple[int, int]], extra: Sequence[float], q: float = 0.99,
                        tops: Sequence[float] | None = None) -> float:
    """`gap_quantile` over the series ``s`` in the index ranges ``[a, b)`` of the logs.

    Same values, same rule. The quantile interpolates the ``m``-th and ``(m−1)``-th largest values,
    ``m = N − floor(q(N−1))``. The ``m`` largest series maxima ``g0 + d·(k − 1)`` are ``m`` of the
    values, so every value among the ``m`` largest is at least the ``m``-th largest maximum ``θ``:
    only the series whose maximum reaches ``θ`` are read, from their top down while ``≥ θ`` (a series
    decreases from its top): ``O(series log series + m²)``, the selection in C (numpy for long logs).
    `tops`, when the caller logs them, are the series' maxima (the same floats).
    """
    n_total = len(extra) + sum(sum(ks[a:b]) for a, b in ranges)
    if n_total == 0:
        return math.nan
    m, frac = _rank(n_total, q)
    index: list[int] = []  # candidate series, with their maxima
    maxima: list[float] = []
    if len(ranges) == 1 and ranges[0][1] - ranges[0][0] >= NUMPY_SERIES:
        a, b = ranges[0]
        top = (np.asarray(tops[a:b], dtype=float) if tops is not None
               else np.asarray(g0s[a:b], dtype=float) + np.asarray(ds[a:b], dtype=float)
               * (np.asarray(ks[a:b], dtype=np.int64) - 1))
        theta = float(np.partition(top, len(top) - m)[len(top) - m]) if len(top) >= m else -math.inf
        picked = np.flatnonzero(top >= theta)
        maxima = top[picked].tolist()
        index = (picked + a).tolist()
    else:
        for a, b in ranges:
            index += range(a, b)
            maxima += tops[a:b] if tops is not None else [g0s[i] + ds[i] * (ks[i] - 1) for i in range(a, b)]
        theta = sorted(maxima)[-m] if len(maxima) >= m else -math.inf
    values = [x for x in extra if x >= theta]
    for p, top_value in enumerate(maxima):
        if top_value < theta:
            continue
        values.append(top_value)
        i = index[p]
        _below_top(values, g0s[i], ds[i], ks[i], m, theta)
    return _interpolated(values, m, frac)


def _below_top(values: list[float], g0: float, d: float, k: int, m: int, theta: float) -> None:
    """Append a series' values after its top (``g0 + d·j``, ``j = k−2`` down), largest first, while
    they are ``≥ theta`` and among its ``m`` largest."""
    for j in range(k - 2, max(k - m, 0) - 1, -1):
        v = g0 + d * j
        if v < theta:
            break
        values.append(v)


def _interpolated(values: list[float], m: int, frac: float) -> float:
    """The quantile between the ``m``-th and ``(m−1)``-th largest of `values` (sorted here)."""
    values.sort(reverse=True)
    x_lo = values[m - 1]
    x_hi = x_lo if m < 2 else values[m - 2]
    return x_lo + frac * (x_hi - x_lo)


class SeriesOrder:
    """The step log's series by their maxima, largest first: entries ``(−max, i, k)`` ascending, as
    `suffix_gap_quantile` reads them (see there for ``k``), held side by side in three lists: the
    maxima, ``i`` and ``k``.

    Entries come in log order (``i`` grows: a commit logs its series after every earlier one), so a new
    entry goes after every entry of equal maximum, where `bisect.insort` on the tuples puts it (``i``
    is unique): `bisect_right` on the maxima alone finds the place. A list of ~500 tuples read ~9
    tuples and their floats a bisection, scattered over the heap: 3.8-4.6 µs an insertion in
    chat-4k-prefix (cache misses), ~4 % of the run. The maxima alone in a list of floats read ~9 floats
    and compare them in C; in an array (an earlier choice) a bisection makes a float object at every
    probe and an insertion converts its item with `PyArg_Parse`: ~1.5 k instructions an insertion more
    (Vidur's shape, 10,000 requests: `run` 6,234 -> 6,165 M instructions, -1.1 %; timed side by side,
    5 pairs each, CPU s medians 0.98× on chat-4k-prefix and 0.92× on Vidur's shape, within the noise)."""

    __slots__ = ("index", "k", "last", "neg_top")

    def __init__(self, entries: Iterable[tuple[float, int, int]] = ()) -> None:
        """From `entries` in ascending order (a test's sorted list)."""
        rows = list(entries)
        self.neg_top = [e[0] for e in rows]
        self.index = [e[1] for e in rows]
        self.k = [e[2] for e in rows]
        self.last = max(self.index, default=-1)  # the newest entry's i

    def add(self, neg_top: float, i: int, k: int) -> None:
        """Insert ``(neg_top, i, k)``; `i` must be newer than every entry's."""
        if i <= self.last:
            raise ValueError(f"series order: entry {i} is not newer than {self.last}")
        self.last = i
        p = bisect_right(self.neg_top, neg_top)
        self.neg_top.insert(p, neg_top)
        self.index.insert(p, i)
        self.k.insert(p, k)

    def keep_picks(self, floor: int, most: int) -> None:
        """Keep only the entries a query may still pick: of those from `floor` on (``i ≥ floor``), each with
        fewer than `most` newer entries ahead of it; the kept ones keep their order. Exact for every later
        query over a range ``[a, end)`` open now (``a ≥ floor``; one that opens later holds new entries only)
        with at most `most` picks (`suffix_gap_quantile`: the first ``m`` entries with ``i ≥ a``), whatever
        entries come in meanwhile.

        An entry newer than ``e`` and ahead of it has a larger maximum (an equal one goes after ``e``) and is
        in every range that holds ``e``. Call the order without any drop ``F`` and the one held ``P`` (``P ⊆ F``,
        in ``F``'s order). Invariant: for each open range, its first ``m ≤ most`` entries in ``F`` are in ``P``.
        Then they are ``P``'s first ``m`` in it too (``P`` holds them and, being a subsequence of ``F``, nothing
        of the range before them), so the query reads the same entries, hence the same floats, from ``P`` as
        from ``F`` (with fewer than ``m`` entries in the range, ``P`` holds them all). This call keeps it: an
        entry it drops has `most` newer entries ahead of it in ``P``, so in ``F``, all in the range: not among
        its first ``m``. An `add` keeps it: a range's first ``m`` in ``F`` are then among its old first ``m``
        and the new entry, which ``P`` gets too.

        Done over the order once, holding the `most` newest indices met so far in a heap (C calls): ~21 k
        instructions for 64 entries (chat-4k-prefix's prunes, which keep ~38 of them)."""
        index = self.index
        newest: list[int] = []  # the `most` newest i met, oldest first (a heap)
        kept: list[int] = []  # positions
        for p, i in enumerate(index):
            if i < floor:
                continue
            if len(newest) < most:
                heappush(newest, i)
                kept.append(p)
            elif i > newest[0]:
                heapreplace(newest, i)
                kept.append(p)
        neg_top, k = self.neg_top, self.k
        self.neg_top = [neg_top[p] for p in kept]
        self.index = [index[p] for p in kept]
        self.k = [k[p] for p in kept]

    def __len__(self) -> int:
        return len(self.index)

    def __iter__(self) -> Iterator[tuple[float, int, int]]:
        return zip(self.neg_top, self.index, self.k, strict=True)


def suffix_gap_quantile(order: SeriesOrder, g0s: Sequence[float], ds: Sequence[float], base: int, a: int,
                        n_total: int, q: float = 0.99, extra: Sequence[float] = ()) -> float:
    """`gap_quantile_ranges` over one range of the logs that runs to their end, ``[a, end)``, and `extra` values.

    `order` (`SeriesOrder`) holds ``(−max, i, k)`` for the log's series from ``i`` (absolute indices; the
    logs' entry ``i`` is at ``i − base``), ascending: by their maxima, largest first (``i`` is unique, so ``k`` never
    orders them), for every ``i ≥ a`` but those no query may pick (`SeriesOrder.keep_picks`: it holds the
    first ``m`` the whole order would), and older ones, which the walk skips. An entry is either one series
    of ``k > 0`` steps, ``g0 + d·j`` for ``j < k`` with maximum ``g0 + d·(k − 1)`` (the entry's ``k``
    spares a read of the logs for a single step, most picked series: prefill steps, whose values are
    their top alone), or, with ``k < 0``, a *group*: the ``−k`` single steps at the logs' entries
    ``i .. i − k − 1`` (a chunked-prefill run's, `simulator.engine.chunked`; each one's value is its
    ``g0``), with the largest of them as maximum; no range starts inside a group. `n_total` is the
    range's steps, to which the `extra` values add. The ``m`` largest maxima in the range are the first
    ``m`` entries with ``i ≥ a``; the ``m``-th is ``θ``, and the values ``≥ θ`` of those entries and of
    `extra` hold every value above ``θ`` (a value above ``θ`` makes its entry's maximum above ``θ``) and
    at least ``m`` values, so their ``m``-th and ``(m−1)``-th largest are the whole range's (entries whose
    maximum only ties ``θ`` add values equal to ``θ``, which cannot change them): the same floats as
    `gap_quantile_ranges`, in ``O(entries walked + m² + steps of the picked groups + extra values)``.
    (A decode replica's sequences have one extra value: the gap from their first token, made on the
    prefill replica, to their first step there.)

    The walk skips the older entries ahead (``i < a``, kept for longer ranges). A 2P2D chat-4k run's decode
    replicas walked ~148 entries of ~770 a call for ~3.6 picks before the order kept only what a query may
    pick (`SeriesOrder.keep_picks`); since, ~38 of ~128 (10,000 requests; chat-4k ~18 of ~88). A selection
    from the range's own log entries in place of a long walk (where the order held over 24 entries for each of
    the range's) then ran in 32 of that run's 6,724 calls: without it, and its test at every call, the run's
    engine takes 3,194 M instructions, not 3,203 M.
    """
    n_total += len(extra)
    if n_total == 0:
        return math.nan
    m, frac = _rank(n_total, q)
    neg_tops, index, order_ks = order.neg_top, order.index, order.k
    picked: list[int] = []  # the first m entries with i ≥ a
    singles = True  # ... all single steps
    for p, i in enumerate(index):
        if i >= a:
            picked.append(p)
            if order_ks[p] != 1:
                singles = False
            if len(picked) == m:
                break
    if singles and len(picked) == m and not extra:
        # the usual case (prefill steps): the values are the picked maxima, largest first (`_interpolated`'s
        # sort keeps them so), so the m-th and (m−1)-th are read off: 4k instructions of ~26k a request
        x_lo = -neg_tops[picked[-1]]
        x_hi = x_lo if m < 2 else -neg_tops[picked[-2]]
        return x_lo + frac * (x_hi - x_lo)
    theta = -neg_tops[picked[-1]] if len(picked) == m else -math.inf
    values = [x for x in extra if x >= theta]
    for p in picked:
        neg_top, i, k = neg_tops[p], index[p], order_ks[p]
        if k == 1:  # a single step (a prefill step, most of the largest) has nothing below its top
            values.append(-neg_top)
        elif k > 1:
            values.append(-neg_top)
            i -= base
            _below_top(values, g0s[i], ds[i], k, m, theta)
        else:  # a group of single steps: its values ≥ θ, its maximum among them
            i -= base
            for g in g0s[i:i - k]:  # a loop: in a comprehension θ would be a cell, made at every call
                if g >= theta:
                    values.append(g)
    return _interpolated(values, m, frac)

