"""Traffic classes: each request's `source` reaches the per-request frame, noted as it streams past."""

from __future__ import annotations

from dataclasses import replace

import pandas as pd

from simulator.engine import AffineTimer, EngineConfig, run
from simulator.engine.traffic import COLUMN, TrafficClasses
from tests.engine.helpers import poisson_requests

TIMER = AffineTimer()


def test_tag_passes_requests_through_and_keeps_only_the_other_classes() -> None:
    reqs = [replace(r, source=s) for r, s in zip(poisson_requests(5, 1.0, 100, 10), "aabab", strict=True)]
    classes = TrafficClasses()
    assert list(classes.tag(reqs)) == reqs
    assert classes.first == "a" and classes.other == {2: "b", 4: "b"}  # the first class costs nothing
    ids = pd.Series([4, 3, 2, 1, 0], index=[10, 11, 12, 13, 14])
    col = classes.column(ids)
    assert col.name == COLUMN and list(col.index) == [10, 11, 12, 13, 14]
    assert list(col) == ["b", "a", "b", "a", "a"]


def test_one_class_and_no_requests() -> None:
    classes = TrafficClasses()
    assert list(classes.tag(replace(r, source="chat-4k") for r in poisson_requests(3, 1.0, 100, 10))) != []
    assert classes.other == {} and list(classes.column(pd.Series([0, 1, 2]))) == ["chat-4k"] * 3
    empty = TrafficClasses()
    assert list(empty.tag([])) == [] and empty.first is None and len(empty.column(pd.Series([], dtype=int))) == 0


def test_run_splits_a_mixture_without_a_join() -> None:
    """Two classes interleaved (streamed: a generator has no length) come back one per request, in
    request order, and the frame's other columns are those of the records, unchanged."""
    base = poisson_requests(40, 20.0, (100, 400), (5, 20), seed=3)
    reqs = [replace(r, source="agent" if r.id % 3 == 0 else "chat") for r in base]
    res = run(EngineConfig(model="Llama-3.1-8B", tp=8), (r for r in reqs), seed=0, timer=TIMER)
    req = res.requests
    assert list(req.columns[-1:]) == [COLUMN]
    assert list(req[COLUMN]) == [r.source for r in sorted(reqs, key=lambda r: r.id)]
    counts = req.groupby(COLUMN).size()
    assert counts.to_dict() == {"agent": 14, "chat": 26}  # ids 0, 3, ..., 39: 14 of 40


def test_progress_still_sees_the_length_of_a_list() -> None:
    """The tagging stream has no length; `run` takes it from the list before wrapping it."""
    seen: list[float] = []
    run(EngineConfig(model="Llama-3.1-8B", tp=8), poisson_requests(30, 5.0, 200, 10), seed=0, timer=TIMER,
        progress=seen.append)
    assert seen and seen[-1] == 1.0 and len(seen) > 1
