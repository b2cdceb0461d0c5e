"""Closed forms of the decode jump against brute force."""

from __future__ import annotations

import math
from array import array
from collections.abc import Sequence

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from simulator.engine.series import (
    SeriesOrder,
    blocks_crossed,
    gap_quantile,
    gap_quantile_ranges,
    growth_block_s,
    quantile_picks,
    ramp_s,
    series_s,
    steps_to_reach,
    steps_within,
    suffix_gap_quantile,
)


def test_series_hand_worked() -> None:
    # 3 steps of 20 ms + 1 ms growth each: 20 + 21 + 22 = 63 ms
    assert math.isclose(series_s(0.020, 0.001, 3), 0.063)
    assert steps_within(0.020, 0.001, 0.063) == 3
    assert steps_within(0.020, 0.001, 0.0629) == 2
    assert steps_to_reach(0.020, 0.001, 0.0411) == 3
    assert steps_within(0.02, 0.0, 0.019) == 0


@given(st.floats(1e-4, 1.0), st.floats(0, 1e-2), st.floats(0, 50.0))
@example(1e-4, 3.99e-42, 15.0)  # cancelled to j = 0 and walked 150,000 steps (a CI deadline failure)
@example(1e-4, 1e-300, 50.0)
@example(1e-4, 1e-2, 50.0)  # h = g0 − d/2 < 0: the textbook root, no cancellation
def test_steps_within_is_largest(g0: float, d: float, e: float) -> None:
    j = steps_within(g0, d, e)
    assert series_s(g0, d, j) <= e < series_s(g0, d, j + 1)
    r = steps_to_reach(g0, d, e)
    assert r >= 1 and series_s(g0, d, r) >= e
    assert r == 1 or series_s(g0, d, r - 1) < e


@pytest.mark.parametrize(("g0", "d", "e"), [(1e-4, 3.99e-42, 15.0), (1e-4, 1e-300, 50.0), (0.02, 0.001, 0.063),
                                            (1e-4, 0.0, 50.0), (1e-3, 5.0, 49.9)])
def test_steps_within_evaluates_the_series_a_bounded_number_of_times(monkeypatch: pytest.MonkeyPatch, g0: float,
                                                                      d: float, e: float) -> None:
    # the answer is exact and found in O(log) evaluations of T, never a step-by-step walk
    import simulator.engine.series as series

    calls = []

    def counted(g0: float, d: float, k: int) -> float:
        calls.append(k)
        return series_s(g0, d, k)

    monkeypatch.setattr(series, "series_s", counted)
    j = series.steps_within(g0, d, e)
    assert len(calls) <= 8
    assert series_s(g0, d, j) <= e < series_s(g0, d, j + 1)


@given(st.lists(st.integers(0, 500), min_size=1, max_size=20), st.integers(0, 1000), st.integers(1, 300),
       st.sampled_from([1, 4, 16]))
def test_blocks_crossed_matches_brute_force(kvs: list[int], step: int, j: int, b: int) -> None:
    hist = [0] * b
    for kv in kvs:
        hist[(kv - step) % b] += 1
    brute = sum(-(-(kv + j) // b) - (-(-kv // b)) for kv in kvs)
    assert blocks_crossed(hist, step, b, j) == brute


@settings(max_examples=60)
@given(st.lists(st.tuples(st.floats(0.01, 1.0), st.floats(0, 0.01), st.integers(1, 400)),
                min_size=1, max_size=8),
       st.lists(st.floats(0.01, 5.0), max_size=3))
def test_gap_quantile_matches_numpy(segs: list[tuple[float, float, int]], extra: list[float]) -> None:
    g0s = np.array([s[0] for s in segs])
    ds = np.array([s[1] for s in segs])
    ks = np.array([s[2] for s in segs], dtype=np.int64)
    every = np.concatenate([g + d * np.arange(k) for g, d, k in segs] + [np.array(extra)])
    assert math.isclose(gap_quantile(g0s, ds, ks, extra), float(np.percentile(every, 99)), rel_tol=1e-9)


@settings(max_examples=60, deadline=None)
@given(kvs=st.lists(st.integers(0, 200), min_size=1, max_size=12), step=st.integers(0, 50),
       n=st.integers(1, 120), b=st.sampled_from([1, 4, 16]), g0=st.floats(0.01, 1.0), d=st.floats(0.0, 0.01))
def test_growth_block_s_matches_brute_force(kvs: list[int], step: int, n: int, b: int, g0: float, d: float) -> None:
    hist = [0] * b
    for kv in kvs:
        hist[(kv - step) % b] += 1
    brute = sum(blocks_crossed(hist, step, b, i) * (g0 + d * i) for i in range(n))
    blocks, block_s = growth_block_s(hist, step, b, g0, d, n)
    assert blocks == blocks_crossed(hist, step, b, n)
    assert block_s == pytest.approx(brute, rel=1e-9, abs=1e-9)
    assert ramp_s(g0, d, n) == pytest.approx(sum(i * (g0 + d * i) for i in range(n)), rel=1e-9, abs=1e-12)


@settings(max_examples=80)
@given(st.lists(st.tuples(st.floats(0.01, 1.0), st.floats(0, 0.01), st.integers(1, 400)),
                min_size=1, max_size=12),
       st.lists(st.floats(0.01, 5.0), max_size=3), st.integers(0, 3))
def test_gap_quantile_ranges_equals_numpy_version(segs: list[tuple[float, float, int]], extra: list[float],
                                                  cut_at: int) -> None:
    g0s = [s[0] for s in segs]
    ds = [s[1] for s in segs]
    ks = [s[2] for s in segs]
    cut_at = min(cut_at, len(segs))
    ranges = [(0, cut_at), (cut_at, len(segs))]
    expected = gap_quantile(np.array(g0s), np.array(ds), np.array(ks, dtype=np.int64), extra)
    assert gap_quantile_ranges(g0s, ds, ks, ranges, extra) == expected


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.floats(0.01, 1.0), st.floats(0, 0.01), st.integers(1, 40)),
                min_size=25, max_size=300),
       st.lists(st.floats(0.01, 5.0), max_size=3), st.integers(0, 300))
def test_gap_quantile_ranges_on_long_logs_cuts_series_exactly(segs: list[tuple[float, float, int]],
                                                               extra: list[float], cut_at: int) -> None:
    # NUMPY_SERIES or more series in one range: numpy picks the series that can hold the top values
    from array import array

    g0s, ds = array("d", [s[0] for s in segs]), array("d", [s[1] for s in segs])
    ks = array("q", [s[2] for s in segs])
    cut_at = min(cut_at, len(segs))
    ranges = [(0, cut_at), (cut_at, len(segs))]
    every = [g + d * i for g, d, k in segs for i in range(k)] + extra
    expected = gap_quantile(np.array(g0s), np.array(ds), np.array(ks, dtype=np.int64), extra)
    assert gap_quantile_ranges(g0s, ds, ks, ranges, extra) == expected
    assert math.isclose(expected, float(np.percentile(every, 99)), rel_tol=1e-9)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.floats(0.01, 1.0), st.floats(0, 0.01), st.integers(1, 40)),
                min_size=64, max_size=300),
       st.lists(st.floats(0.01, 5.0), max_size=3), st.integers(0, 40))
def test_gap_quantile_ranges_on_one_long_range_with_logged_maxima(segs: list[tuple[float, float, int]],
                                                                 extra: list[float], start: int) -> None:
    # one range of NUMPY_SERIES or more series: numpy picks the candidates, from the logged maxima or not
    from array import array

    from simulator.engine.series import NUMPY_SERIES

    g0s, ds = array("d", [s[0] for s in segs]), array("d", [s[1] for s in segs])
    ks = array("q", [s[2] for s in segs])
    tops = array("d", [g + d * (k - 1) for g, d, k in segs])
    start = min(start, len(segs) - NUMPY_SERIES)
    expected = gap_quantile(np.array(g0s[start:]), np.array(ds[start:]), np.array(ks[start:], dtype=np.int64), extra)
    assert gap_quantile_ranges(g0s, ds, ks, [(start, len(segs))], extra) == expected
    assert gap_quantile_ranges(g0s, ds, ks, [(start, len(segs))], extra, tops=tops) == expected


@settings(max_examples=120, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([0.01, 0.02, 0.03, 0.25, 0.5]), st.sampled_from([0.0, 0.0, 0.001, 0.005]),
                          st.just(1) | st.integers(1, 60)), min_size=2, max_size=120),  # single steps half the time
       st.integers(0, 119), st.integers(0, 119), st.integers(0, 50),
       st.lists(st.sampled_from([0.005, 0.02, 0.03, 0.4, 0.6]), max_size=3))
def test_suffix_gap_quantile_equals_ranges(segs: list[tuple[float, float, int]], a: int, floor: int,
                                           base: int, extra: list[float]) -> None:
    # the log's suffix [a, end) read through the entries ordered by their maxima (ties in maxima and
    # values on purpose: series that only tie the m-th maximum are left out), entries below a
    # floor <= a missing, indices absolute from `base`, with extra values (a disaggregated decode's
    # first gap, a swap's; ties with the series' values on purpose): the same float as the general path
    from array import array

    g0s, ds = array("d", [s[0] for s in segs]), array("d", [s[1] for s in segs])
    ks = array("q", [s[2] for s in segs])
    tops = array("d", [g + d * (k - 1) for g, d, k in segs])
    a = min(a, len(segs) - 1)
    floor = min(floor, a)
    order = sorted((-tops[i], i + base, ks[i]) for i in range(floor, len(segs)))
    expected = gap_quantile_ranges(g0s, ds, ks, [(a, len(segs))], extra, tops=tops)
    _assert_suffix(SeriesOrder(order), g0s, ds, ks, base, a, extra, expected)
    every = [g + d * i for g, d, k in segs[a:] for i in range(k)] + extra
    assert math.isclose(expected, float(np.percentile(every, 99)), rel_tol=1e-9)



@settings(max_examples=150, deadline=None)
@given(st.lists(st.one_of(
    st.tuples(st.sampled_from([0.01, 0.02, 0.03, 0.25]), st.sampled_from([0.0, 0.001, 0.005]), st.integers(1, 40)),
    st.lists(st.sampled_from([0.02, 0.03, 0.25, 0.3, 0.5]), min_size=1, max_size=12)), min_size=2, max_size=60),
    st.integers(0, 59), st.integers(0, 59), st.integers(0, 50), st.lists(st.sampled_from([0.02, 0.3, 0.7]), max_size=2))
def test_suffix_gap_quantile_reads_groups_of_single_steps(items: list[tuple[float, float, int] | list[float]],
                                                          a: int, floor: int, base: int, extra: list[float]) -> None:
    # a chunked-prefill run's single steps take one entry of the order, (−max, i, −r) for r ≥ 2 of them
    # (`ChunkedRuns.commit_run`), beside series' own entries; ranges start between entries: the same
    # float as the general path over the logs, where every step is its own series
    g0s, ds, ks, tops, order, starts = _logs_of(items, base)
    a = starts[min(a, len(starts) - 1)]
    floor = starts[min(floor, len(starts) - 1)]
    floor = min(floor, a)
    order = sorted(e for e in order if e[1] >= floor + base)
    expected = gap_quantile_ranges(g0s, ds, ks, [(a, len(ks))], extra, tops=tops)
    _assert_suffix(SeriesOrder(order), g0s, ds, ks, base, a, extra, expected)


def _logs_of(items: list[tuple[float, float, int] | list[float]], base: int) -> tuple[
        array[float], array[float], array[int], array[float], list[tuple[float, int, int]], list[int]]:
    # the step logs (g0s, ds, ks, tops) of `items`, each a series (g0, d, k) or a chunked-prefill run's single
    # steps (a list of their g0s), the order's entries (−max, i, k) of each, k = −r for a run of r ≥ 2 steps
    # (`ChunkedRuns.commit_run`), unsorted, and the log index where each item starts
    from array import array

    g0s, ds, ks = array("d"), array("d"), array("q")
    order: list[tuple[float, int, int]] = []
    starts: list[int] = []
    for item in items:
        i = len(ks)
        starts.append(i)
        if isinstance(item, tuple):
            g0, d, k = item
            g0s.append(g0)
            ds.append(d)
            ks.append(k)
            order.append((-(g0 + d * (k - 1)), i + base, k))
        else:
            g0s.extend(item)
            ds.extend([0.0] * len(item))
            ks.extend([1] * len(item))
            order.append((-max(item), i + base, 1 if len(item) == 1 else -len(item)))
    tops = array("d", [g + d * (k - 1) for g, d, k in zip(g0s, ds, ks, strict=True)])
    return g0s, ds, ks, tops, order, starts


def _assert_suffix(order: SeriesOrder, g0s: Sequence[float], ds: Sequence[float], ks: Sequence[int], base: int,
                   a: int, extra: list[float], expected: float) -> None:
    # the log's suffix [a, end) (a relative to the logs) read by the order's walk: the expected float
    assert suffix_gap_quantile(order, g0s, ds, base, a + base, sum(ks[a:]), extra=extra) == expected


@settings(max_examples=150, deadline=None)
@given(st.lists(st.one_of(
    st.tuples(st.sampled_from([0.3, 0.4, 0.5]), st.sampled_from([0.0, 0.001]), st.integers(1, 40)),
    st.lists(st.sampled_from([0.3, 0.5]), min_size=2, max_size=12)), min_size=1, max_size=40),
    st.lists(st.one_of(
        st.tuples(st.sampled_from([0.01, 0.02, 0.03, 0.3]), st.sampled_from([0.0, 0.001, 0.005]),
                  st.integers(1, 300)),
        st.lists(st.sampled_from([0.02, 0.03, 0.3]), min_size=2, max_size=12)), min_size=1, max_size=6),
    st.integers(0, 50), st.lists(st.sampled_from([0.02, 0.3, 0.7]), max_size=2))
@example([(0.5, 0.0, 1)] * 80, [(0.01, 0.001, 300), [0.02, 0.03]], 7, [0.3])  # 82 entries for a range of 3
def test_suffix_gap_quantile_walks_past_older_entries_to_a_short_range(
        old: list[tuple[float, float, int] | list[float]], recent: list[tuple[float, float, int] | list[float]],
        base: int, extra: list[float]) -> None:
    # many older entries ahead in the order (larger maxima, mostly) and a range of a few entries (series of
    # up to 300 steps: a large m; groups of single steps): the walk skips the older ones; the same float as
    # the general path, and as numpy's percentile
    g0s, ds, ks, tops, order, starts = _logs_of(old + recent, base)
    a = starts[len(old)]  # the range starts at the first recent entry
    order.sort()
    expected = gap_quantile_ranges(g0s, ds, ks, [(a, len(ks))], extra, tops=tops)
    _assert_suffix(SeriesOrder(order), g0s, ds, ks, base, a, extra, expected)
    every = [g + d * i for g, d, k in zip(g0s[a:], ds[a:], ks[a:], strict=True) for i in range(k)] + extra
    assert math.isclose(expected, float(np.percentile(every, 99)), rel_tol=1e-9)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(
    st.tuples(st.integers(1, 50).map(lambda c: c / 100), st.sampled_from([0.0, 0.001, 0.005]), st.integers(1, 40)),
    st.lists(st.integers(1, 50).map(lambda c: c / 100), min_size=1, max_size=12)), min_size=1, max_size=120),
    st.lists(st.tuples(st.integers(0, 119), st.integers(1, 120),
                       st.lists(st.sampled_from([0.02, 0.3, 0.7]), max_size=2)), max_size=10),
    st.integers(1, 6), st.sampled_from([0, 0, 1, 5]), st.integers(0, 50))
@example([(0.5, 0.0, 1)] * 30 + [(0.01, 0.001, 300)] * 3, [(0, 33, []), (30, 3, [0.3])], 1, 0, 0)
# maxima growing: each entry goes ahead of every older one, and the third largest (m = 3 of 120 values) has
# two newer entries ahead of it, so `most` entries are needed, not one fewer
@example([(j / 1000, 0.0, 1) for j in range(1, 121)], [(0, 120, [])], 1, 0, 0)
def test_series_order_keeping_the_picks_of_open_ranges_gives_the_same_quantiles(
        items: list[tuple[float, float, int] | list[float]], ranges: list[tuple[int, int, list[float]]],
        every: int, slack: int, base: int) -> None:
    # a log grows an item at a time (a series, or a chunked-prefill run's group of single steps) and decoders'
    # ranges open and close between items: range (first, items, extra) runs over `items` items from item
    # `first`, with `extra` values. Every `every` items the order keeps only the entries the ranges open then
    # may pick (`SeriesOrder.keep_picks`, from the first open range's start, with the largest final m, or more
    # by `slack`); a closing range reads the same float from it as from the general path over the logs (and
    # as the order with every entry)
    g0s, ds, ks, tops, entries, starts = _logs_of(items, base)
    entries.sort(key=lambda e: e[1])
    bounds = [*starts, len(ks)]  # item t spans the log entries bounds[t] .. bounds[t + 1] − 1
    spans = [(f, min(f + n, len(items)) - 1, extra) for f, n, extra in ranges if f < len(items)]
    pruned, full = SeriesOrder(), SeriesOrder()
    for t, entry in enumerate(entries):
        pruned.add(*entry)
        full.add(*entry)
        end = bounds[t + 1]
        if t % every == 0:  # the ranges open at item t's commit (those closing at it too), with their final m
            floor, most = end, 1
            for first, last, extra in spans:
                if first <= t <= last:
                    floor = min(floor, bounds[first])
                    most = max(most, quantile_picks(sum(ks[bounds[first]:bounds[last + 1]]) + len(extra)) + slack)
            pruned.keep_picks(floor + base, most)
        for first, last, extra in spans:
            if last == t:
                a = bounds[first]
                logs = g0s[:end], ds[:end], ks[:end]
                expected = gap_quantile_ranges(*logs, [(a, end)], extra, tops=tops[:end])
                _assert_suffix(pruned, *logs, base, a, extra, expected)
                _assert_suffix(full, *logs, base, a, extra, expected)


def test_quantile_picks_never_falls() -> None:
    # a bound on a range's values bounds its picks (`Observation._prune_order`)
    from itertools import pairwise

    picks = [quantile_picks(n) for n in range(1, 5000)]
    assert picks[:3] == [1, 2, 2] and picks[-1] == 51
    assert all(b >= a for a, b in pairwise(picks))


def _growth_reference(hist: list[int], shift: int, b: int, g0: float, d: float, n: int) -> tuple[int, float]:
    # growth_block_s phase by phase, every term from scratch (the form before the m-terms were shared)
    tn = series_s(g0, d, n)
    blocks, total = 0, 0.0
    for p, count in enumerate(hist):
        if count:
            t0 = (-(p + shift)) % b + 1
            if t0 <= n:
                blocks += count * ((n - t0) // b + 1)
                if t0 <= n - 1:
                    m = (n - 1 - t0) // b + 1
                    q = m * (m - 1)
                    s1 = m * t0 + b * (q // 2)
                    s2 = m * t0 * t0 + t0 * b * q + b * b * (q * (2 * m - 1) // 6)
                    total += count * (m * tn - g0 * s1 - d * (s2 - s1) / 2)
    return blocks, total


@settings(max_examples=300, deadline=None)
@given(hist=st.lists(st.integers(0, 40), min_size=1, max_size=64), shift=st.integers(0, 10**6),
       n=st.integers(1, 500), g0=st.floats(0.001, 1.0), d=st.floats(0.0, 0.01))
def test_growth_block_s_is_the_phase_by_phase_sum_exactly(hist: list[int], shift: int, n: int, g0: float,
                                                          d: float) -> None:
    assert growth_block_s(hist, shift, len(hist), g0, d, n) == _growth_reference(hist, shift, len(hist), g0, d, n)


@settings(max_examples=300, deadline=None)
@given(hist=st.lists(st.integers(0, 40), min_size=1, max_size=64), shift=st.integers(0, 10**6),
       steps=st.integers(1, 65), g0=st.floats(0.001, 1.0), d=st.floats(0.0, 0.01))
def test_growth_block_s_of_a_short_jump_is_the_phase_by_phase_sum_exactly(hist: list[int], shift: int, steps: int,
                                                                          g0: float, d: float) -> None:
    # n ≤ B + 1 steps: every phase takes at most one block before step n (its own loop, over the cyclic run
    # of phases that do: wrapping past phase 0 or not)
    n = min(steps, len(hist) + 1)
    assert growth_block_s(hist, shift, len(hist), g0, d, n) == _growth_reference(hist, shift, len(hist), g0, d, n)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([0.01, 0.02, 0.25, 0.5]), st.sampled_from([1, 2, -3])), max_size=80))
def test_series_order_adds_where_insort_puts_the_tuples(entries: list[tuple[float, int]]) -> None:
    # entries in log order (i grows), maxima tied on purpose: bisect_right on the maxima alone is insort on
    # (−max, i, k), since a new i is the largest
    from bisect import insort

    order, expected = SeriesOrder(), []
    for i, (top, k) in enumerate(entries):
        order.add(-top, i, k)
        insort(expected, (-top, i, k))
    assert list(order) == expected
    assert len(order) == len(order.neg_top) == len(order.k) == len(expected)


def test_series_order_refuses_an_entry_older_than_the_newest() -> None:
    order = SeriesOrder([(-0.5, 3, 1)])
    with pytest.raises(ValueError, match="entry 3 is not newer than 3"):
        order.add(-0.2, 3, 1)
