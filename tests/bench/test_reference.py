"""The machine yardstick of `make bench` (`tests.bench.reference`) must stay the same work."""

from __future__ import annotations

from tests.bench.reference import _workload, reference_s


def test_the_reference_workload_is_fixed() -> None:
    """Its reference times are compared across benches (README): a change to the loop changes this
    total and makes them incomparable, so it fails here first (1,000 rounds: 16 items, each step's
    cost ``1e-3 + (load mod 1024) · 2.5e-6``)."""
    assert _workload(1000) == 1.2778299999999982
    assert _workload(1000) == _workload(1000)
    # the costs it sums lie in [1e-3, 1e-3 + 1023 · 2.5e-6]
    assert 1000 * 1e-3 <= _workload(1000) <= 1000 * (1e-3 + 1023 * 2.5e-6)


def test_reference_s_is_the_best_of_its_repeats() -> None:
    assert 0 < reference_s(rounds=2_000, repeats=3) < 1.0
