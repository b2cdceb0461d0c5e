"""What the engine emits: one record per request, one row per replica sample.

`records_to_frame` is the one door into pandas; the engine itself only appends tuples, to a list
or to any `RowSink`: `CsvRows` writes each row to a CSV file as it comes, so that a long run (a day
of traffic, millions of requests) holds no record in memory.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Iterable, Sequence
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, get_type_hints

if TYPE_CHECKING:
    import pandas as pd


class RequestRecord(NamedTuple):
    """The fate of one request. Times in seconds from the workload start; NaN where not reached.

    ``tpot_mean_s = (end − first token) / (output_tokens − 1)``; ``tpot_p99_s`` is the p99
    (numpy's linear rule) of the request's ``output_tokens − 1`` inter-token gaps, computed
    exactly from the arithmetic series of the jumps it decoded in (see `series.gap_quantile`).
    ``hit_tokens`` are the prefix tokens other requests left cached, reused at its first admission
    (``< prompt_tokens``), ``hit_{hbm,dram,nvme}_tokens`` the same by the tier they came from;
    ``resume_hit_tokens`` are those reused at re-admissions after recompute preemptions (mostly its
    own KV: recompute savings, not prefix hits); ``recomputed_tokens`` were found in a lower tier but
    recomputed (faster than reloading); ``evicted_tokens`` are the tokens whose KV retention
    dropped (``prompt + output − 1 − kept``); ``quality_debit_points`` adds the layout levers'
    debits (a compression's only where its ``prompt + output − 1`` KV tokens passed the full-resolution
    window: `simulator.levers.window_debit_points`) and, when it evicted anything, the retention policy's.

    In a disaggregated fleet ``replica`` is the prefill replica (where it was routed, queued and
    admitted: ``queue_s``, ``ttft_s``) and ``decode_replica`` the one it decoded on; the gap from its
    first token to its second includes the wait for decode room and the transfer
    (``transfer_start_s`` to ``transfer_end_s``), so ``tpot_mean_s`` and ``tpot_p99_s`` do too.
    """

    request_id: int
    arrival_s: float
    replica: int
    queue_s: float
    ttft_s: float
    tpot_mean_s: float
    tpot_p99_s: float
    end_s: float
    e2e_s: float
    prompt_tokens: int
    output_tokens: int
    hit_tokens: int
    preemptions: int
    outcome: str  # completed | rejected | timed_out
    reason: str
    admit_s: float
    hit_hbm_tokens: int = 0
    hit_dram_tokens: int = 0
    hit_nvme_tokens: int = 0
    recomputed_tokens: int = 0
    evicted_tokens: int = 0
    quality_debit_points: float = 0.0
    resume_hit_tokens: int = 0
    transfer_start_s: float = math.nan  # disaggregated: its KV left the prefill replica ...
    transfer_end_s: float = math.nan  # ... and arrived at the decode replica
    transfer_bytes: float = 0.0  # on one decode GPU's NIC (`simulator.capacity.kv_transfer`)
    decode_replica: int = -1  # the replica that generated its tokens after the first (`replica` unless handed off)


class SampleRecord(NamedTuple):
    """A replica's state at a state change or a step start inside a jump or run (thinned to one per
    ``sample_interval_s``: `simulator.engine.config.EngineConfig`), and whenever the replica goes idle,
    whatever the interval."""

    time_s: float
    replica: int
    kv_blocks_used: int
    kv_tokens: int
    running: int
    waiting: int
    swapped: int
    batch_tokens: int
    mfu: float  # model FLOPs utilisation of the step as formed (NaN when the timer has no `utilisation`)
    hbm_bw_util: float  # HBM bytes the step moves / (step time × bandwidth), per GPU
    link_util: float = math.nan  # decode replica of a disaggregated fleet: share of the time since its
    # last sample its ingress link moved KV (`simulator.engine.link`, work-conserving: bytes / capacity)
    kv_evictable_blocks: int = 0  # of kv_blocks_used, those only the prefix cache holds (no running
    # sequence references them: evictable); kv_blocks_used − this = the sequences' blocks


def records_to_frame(records: Iterable[Sequence[Any]],
                     kind: type[NamedTuple] = RequestRecord) -> pd.DataFrame:
    """A DataFrame with the fields of `kind` as columns, one row per record (pandas loads here).

    The frame `DataFrame.from_records` makes, built a column at a time: a column of numbers (Python or
    NumPy ints, floats, bools) as the NumPy array of its values (NumPy promotes a mixed column as
    pandas does: ints and floats to float64), any other (strings) as a list that pandas infers. Where
    `from_records` turns every value into an object and infers each column back, this takes 35-40 %
    less time (~2 % of a chat run's `simulator.engine.run`)."""
    import numpy as np
    import pandas as pd

    rows: list[Any] = list(records)
    fields = list(kind._fields)
    if not rows:
        return pd.DataFrame.from_records(rows, columns=fields)
    columns: dict[str, Any] = {}
    for name, values in zip(fields, zip(*rows, strict=True), strict=True):
        array = np.array(values)
        columns[name] = array if array.dtype.kind in "biuf" else list(values)
    return pd.DataFrame(columns, columns=fields)


class RowSink(Protocol):
    """Where the engine appends records or samples as they happen (a list, or a `CsvRows`)."""

    def append(self, row: tuple[Any, ...], /) -> None: ...


class CsvRows:
    """A `RowSink` writing rows of `kind` to a CSV file as they come (header: the field names).

    Floats are written as Python's shortest round-trip repr and NaN as an empty field (as
    `pandas.DataFrame.to_csv` writes them), so reading the file back
    (`pandas.read_csv`) gives the same values as `records_to_frame` on the rows. `header` replaces
    the field names (a sink that adds columns). Use as a context manager, or call `close`. ``rows``
    counts what was written.
    """

    def __init__(self, path: str | Path, kind: type[NamedTuple] = RequestRecord,
                 buffer_bytes: int = 1 << 20, header: Sequence[str] | None = None) -> None:
        self.path = Path(path)
        self.rows = 0
        self._file: io.TextIOWrapper = self.path.open("w", newline="", buffering=buffer_bytes, encoding="utf-8")
        self._writer = csv.writer(self._file, lineterminator="\n")  # LF, as pandas' to_csv ends a line
        self._writer.writerow(kind._fields if header is None else header)

    def append(self, row: Sequence[Any], /) -> None:
        self._writer.writerow([v if v == v else "" for v in row])  # NaN: an empty field, as pandas writes it
        self.rows += 1

    def close(self) -> None:
        if not self._file.closed:
            self._file.close()

    def __enter__(self) -> CsvRows:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


def read_samples(path: str | Path) -> pd.DataFrame:
    """The `SampleRecord` CSV at `path` (written by `CsvRows`), its integer columns int32 (counts of
    blocks, tokens, sequences; a replica's index), the floats as written."""
    import numpy as np
    import pandas as pd

    kinds = get_type_hints(SampleRecord)
    return pd.read_csv(path, dtype={f: (np.int32 if kinds[f] is int else np.float64) for f in SampleRecord._fields})


OUTCOMES = ("completed", "rejected", "timed_out")
"""`RequestRecord.outcome`'s values."""

READ_CHUNK_ROWS = 1 << 18  # rows `read_records` parses at a time: ~10 MB of parser buffers for 22 columns


def read_records(path: str | Path, rows: int, columns: Sequence[str], sort_by: str = "request_id") -> pd.DataFrame:
    """`columns` of the `RequestRecord` CSV at `path` (written by `CsvRows`: `rows` rows), ordered by `sort_by`.

    The frame a streamed run's summary is computed from (`simulator.engine.result.run`), in less memory
    than `records_to_frame` gives a held run's: integer columns are int32 (a token count or an index;
    `sort_by` stays int64), ``outcome`` is categorical (`OUTCOMES`: one byte a row), each column is
    filled in place chunk by chunk, so that the parser's buffers are one chunk's. Floats are read back
    as `CsvRows` wrote them (their shortest repr: the same values), so the summary of the frame, ordered
    as `records_to_frame`'s is, is the held run's."""
    import numpy as np
    import pandas as pd

    kinds = get_type_hints(RequestRecord)
    wanted = [sort_by, *(c for c in columns if c != sort_by)]

    def dtype(c: str) -> Any:
        return np.int64 if c == sort_by else np.int8 if c == "outcome" else np.int32 if kinds[c] is int else \
            np.float64

    arrays = {c: np.empty(rows, dtype(c)) for c in wanted}
    parse = {c: ("category" if c == "outcome" else dtype(c)) for c in wanted}
    at = 0
    for chunk in pd.read_csv(path, usecols=wanted, dtype=parse, chunksize=READ_CHUNK_ROWS):
        n = len(chunk)
        if at + n > rows:
            raise ValueError(f"{path}: more than the {rows:,} rows written")
        for c in wanted:
            col = chunk[c]
            arrays[c][at:at + n] = (col.cat.set_categories(OUTCOMES).cat.codes if c == "outcome" else col).to_numpy()
        at += n
    if at != rows:
        raise ValueError(f"{path}: {at:,} rows, not the {rows:,} written")
    if (arrays.get("outcome", np.zeros(0, np.int8)) < 0).any():
        raise ValueError(f"{path}: an outcome other than {', '.join(OUTCOMES)}")
    order = np.argsort(arrays[sort_by], kind="stable")
    frame = {}
    for c in wanted:  # one column at a time: the sort's copies never hold more than one extra column
        a = arrays.pop(c)[order]
        frame[c] = pd.Categorical.from_codes(a, categories=pd.Index(OUTCOMES)) if c == "outcome" else a
    return pd.DataFrame(frame, columns=wanted, copy=False)
