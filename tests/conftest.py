"""Shared fixtures. Matplotlib draws off-screen in tests."""

import os
from pathlib import Path

import matplotlib
import pytest

matplotlib.use("Agg")
os.environ.setdefault("MPLBACKEND", "Agg")

REPO = Path(__file__).resolve().parents[1]
TRACES = REPO.parent / "shared" / "data" / "traces"


@pytest.fixture(scope="session")
def traces_dir() -> Path:
    """The shared public traces; tests that need them skip where they are absent."""
    if not TRACES.is_dir():
        pytest.skip(f"shared traces not found at {TRACES}")
    return TRACES
