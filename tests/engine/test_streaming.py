"""Long runs hold nothing per finished request: records stream to CSV, the step log is compacted."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any, get_type_hints

import numpy as np
import pandas as pd
import pytest

import simulator.engine.observe as observe_module
from simulator.engine import EngineConfig, PoolConfig, SchedulerConfig
from simulator.engine.cluster import simulate
from simulator.engine.handoff import PREFILL
from simulator.engine.records import CsvRows, RequestRecord, SampleRecord, records_to_frame
from tests.engine.helpers import shared_prefix_requests
from tests.engine.test_regressions import TIMER

CONFIG = EngineConfig(kv_blocks=150, cache="prefix", n_nodes=2, tp=4, scheduler=SchedulerConfig(
    max_num_seqs=8, max_num_batched_tokens=300, preemption="swap"))


def test_streamed_records_and_samples_equal_the_kept_ones(tmp_path: Path) -> None:
    reqs = shared_prefix_requests(60, 3, rate_per_s=15, output_tokens=(50, 500))
    kept, end_kept, events_kept = simulate(CONFIG, reqs, 3, timer=TIMER)
    with CsvRows(tmp_path / "requests.csv") as rec, CsvRows(tmp_path / "ts.csv", SampleRecord) as ts:
        streamed, end, events = simulate(CONFIG, reqs, 3, timer=TIMER, records=rec, samples=ts)
    assert (end, events) == (end_kept, events_kept)
    assert streamed.records == [] and streamed.samples == []  # nothing held
    assert rec.rows == len(kept.records) == len(reqs) and ts.rows == len(kept.samples)
    for path, rows, kind in ((tmp_path / "requests.csv", kept.records, RequestRecord),
                             (tmp_path / "ts.csv", kept.samples, SampleRecord)):
        floats = [f for f, t in get_type_hints(kind).items() if t is float]  # NaN is an empty field there
        read = pd.read_csv(path, keep_default_na=False, na_values={f: [""] for f in floats})
        assert "nan" not in path.read_text()
        expected = records_to_frame(rows, kind)
        pd.testing.assert_frame_equal(read, expected, check_dtype=False, check_exact=True)


@pytest.mark.parametrize("preemption", ["recompute", "swap"])
def test_compacted_step_log_gives_the_same_records(monkeypatch: pytest.MonkeyPatch, preemption: str) -> None:
    """The step log drops what no sequence refers to (here every few steps, with preemptions that
    keep old decode ranges alive): the TPOT percentiles read from it are unchanged."""
    config = replace(CONFIG, scheduler=replace(CONFIG.scheduler, preemption=preemption))
    reqs = shared_prefix_requests(60, 5, rate_per_s=20, output_tokens=(100, 600))
    whole, _, _ = simulate(config, reqs, 5, timer=TIMER)
    monkeypatch.setattr(observe_module, "LOG_MIN_ENTRIES", 4)
    compacted, _, _ = simulate(config, reqs, 5, timer=TIMER)
    assert any(r.log_base > 0 for r in compacted.replicas)
    assert sum(r.preemptions for r in compacted.records) > 0
    assert sorted(compacted.records) == sorted(whole.records)


@pytest.mark.parametrize("preemption", ["recompute", "swap", "disaggregated"])
def test_order_of_step_maxima_gives_the_same_records(monkeypatch: pytest.MonkeyPatch, preemption: str) -> None:
    """A finishing sequence's TPOT p99 read through the log's steps ordered by their maxima
    (`series.suffix_gap_quantile`), pruned every few steps to the entries a decoder may pick and with
    the log compacted too, equals the general path over the logs (`series.gap_quantile_ranges`) for
    every record; with an extra gap too (a disaggregated decode's first, from the prefill replica's
    token; a swapped-in sequence has two ranges, read from the logs)."""
    from simulator.engine.series import gap_quantile_ranges

    if preemption == "disaggregated":
        config = replace(CONFIG, n_nodes=1, kv_blocks=0,
                         prefill_pool=PoolConfig(node="8xH100", n_nodes=1, tp=4))
    else:
        config = replace(CONFIG, scheduler=replace(CONFIG.scheduler, preemption=preemption))
    reqs = shared_prefix_requests(60, 5, rate_per_s=20, output_tokens=(100, 600))
    used = [0, 0, 0]  # suffix reads, those with extra gaps, those whose range lost entries of the order
    reading: list[Any] = []  # the replica whose `_gap_p99` runs: its log's step counts, `log_k`
    gap_p99 = observe_module.Observation._gap_p99

    def read_by(self, seq):  # type: ignore[no-untyped-def]
        reading.append(self)
        try:
            return gap_p99(self, seq)
        finally:
            reading.pop()

    def general(order, g0s, ds, base, a, n_total, q=0.99, extra=()):  # type: ignore[no-untyped-def]
        # the range's step counts from the log; the order holds its entries that the quantile may pick only
        # (`SeriesOrder.keep_picks`): a series, or a group of −k single steps (a chunked-prefill run's) from i
        log_ks = reading[-1].log_k
        used[0] += 1
        used[1] += bool(extra)
        steps = 0
        for _, i, k in order:
            if i >= a:
                steps += k if k > 0 else -k
        assert sum(log_ks[a - base:]) == n_total >= steps
        used[2] += steps < n_total
        return gap_quantile_ranges(g0s, ds, log_ks, [(a - base, len(log_ks))], extra, q)

    monkeypatch.setattr(observe_module, "ORDER_MIN_ENTRIES", 2)
    monkeypatch.setattr(observe_module, "LOG_MIN_ENTRIES", 8)
    ordered, _, _ = simulate(config, reqs, 5, timer=TIMER)
    assert any(r.log_floor > 0 for r in ordered.replicas)
    monkeypatch.setattr(observe_module, "suffix_gap_quantile", general)
    monkeypatch.setattr(observe_module.Observation, "_gap_p99", read_by)
    reference, _, _ = simulate(config, reqs, 5, timer=TIMER)
    assert used[0] >= 10  # sequences that never left the decode set finish on the suffix path
    assert used[2] >= 10
    if preemption == "disaggregated":  # every decode replica's sequence has its first gap as an extra one
        assert used[1] >= 10
        # a prefill replica's steps have no decoders: no range holds them, none goes into the order
        prefill = [r for r in ordered.replicas if r.role == PREFILL]
        assert prefill and all(r.log_base + len(r.log_k) and not len(r.log_order) for r in prefill)
    else:
        assert sum(r.preemptions for r in reference.records) > 0
    assert sorted(ordered.records) == sorted(reference.records)


def test_records_to_frame_is_from_records_column_by_column() -> None:
    """`records_to_frame` builds the frame a column at a time: the same frame, dtypes included, as
    `DataFrame.from_records`, on a run's records and samples and on a mixed column (ints and floats:
    float64), NumPy scalars, NaN, strings and none at all."""
    reqs = shared_prefix_requests(60, 3, rate_per_s=15, output_tokens=(50, 500))
    kept, _, _ = simulate(CONFIG, reqs, 3, timer=TIMER)
    mixed = [RequestRecord(*r)._replace(queue_s=i, replica=np.int64(r.replica), reason=f"r{i}")
             if i % 2 else r for i, r in enumerate(kept.records)]
    for rows, kind in ((kept.records, RequestRecord), (kept.samples, SampleRecord), (mixed, RequestRecord),
                       ([], RequestRecord), ([], SampleRecord)):
        got = records_to_frame(rows, kind)
        expected = pd.DataFrame.from_records(list(rows), columns=list(kind._fields))
        pd.testing.assert_frame_equal(got, expected, check_exact=True)
        assert list(got.dtypes) == list(expected.dtypes)
    frame = records_to_frame(mixed)
    assert frame.queue_s.dtype == np.float64 and frame.queue_s[1] == 1.0
    assert frame.replica.dtype == np.int64 and frame.outcome.iloc[0] == "completed"
