"""Shared fixtures. Matplotlib draws off-screen in tests; Hypothesis has no wall-clock deadline.

A deadline turns a slow example into a failure that depends on the machine's load, and Hypothesis
then replays the stored example on every later run. Slowness is tested where it is a property (a
bounded number of evaluations, `make bench`), never by the clock in a property test.
"""

import os
from pathlib import Path

import matplotlib
import pytest
from hypothesis import settings

matplotlib.use("Agg")
settings.register_profile("kvsim", deadline=None)
settings.load_profile("kvsim")
os.environ.setdefault("MPLBACKEND", "Agg")

REPO = Path(__file__).resolve().parents[1]
TRACES = REPO.parent / "shared" / "data" / "traces"


@pytest.fixture(scope="session")
def traces_dir() -> Path:
    """The shared public traces; tests that need them skip where they are absent."""
    if not TRACES.is_dir():
        pytest.skip(f"shared traces not found at {TRACES}")
    return TRACES
