"""BurstGPT traces (Wang et al. 2024), streamed.

CSV ``Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type``; ``Timestamp``
is seconds from the start of the trace, and a request arrives at its row's ``Timestamp`` less the
first row's. Rows with 0 response tokens are failed requests (0 request tokens, empty prompts):
dropped and counted in ``skipped_rows``, the first row's time still the origin. No prefix information:
each prompt is one segment of its own, id ``-(kept row number + 1)``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from workloads.request import Request
from workloads.traces._rows import FieldError, as_float, as_int, check_on_error, csv_rows, get, guarded, no_prefix_ids
from workloads.workload import ReadStats, Workload

COLUMNS = ("Timestamp", "Model", "Request tokens", "Response tokens", "Total tokens", "Log Type")


def read_burstgpt(path: str | Path, *, on_error: str = "stop") -> Workload:
    """A workload replaying a BurstGPT CSV (streamed; failures dropped and counted)."""
    check_on_error(on_error)
    path = Path(path)

    def run(stats: ReadStats) -> Iterator[Request]:
        first: list[float] = []

        def parse(n: int, row: dict[str, str]) -> Request | None:
            t = as_float(get(row, "Timestamp"), "Timestamp")
            prompt = as_int(get(row, "Request tokens"), "Request tokens", 0)
            output = as_int(get(row, "Response tokens"), "Response tokens", 0)
            # time counts from the first row, dropped or not, and a dropped row keeps the order too (as in
            # `read_azure`; helper-196: a trace opening with a failed row counted from the next one)
            if not first:
                first.append(t)
            if t < first[0]:
                raise FieldError("Timestamp", f">= the first row's ({first[0]!r})", t)
            if output == 0 or prompt == 0:  # a failed request or an empty prompt: dropped, counted
                return None
            return Request(
                id=n, arrival_s=t - first[0], prompt_tokens=prompt, output_tokens=output,
                segments=((-(n + 1), prompt),), source=f"burstgpt:{get(row, 'Model')}",
            )

        yield from guarded(path, csv_rows(path, COLUMNS, "burstgpt"), parse, stats, on_error, "Timestamp")

    return Workload(run, name=path.name, prefix_note=no_prefix_ids("burstgpt"))
