"""Shared fixtures. Matplotlib draws off-screen in tests; Hypothesis has no wall-clock deadline.

A deadline turns a slow example into a failure that depends on the machine's load, and Hypothesis
then replays the stored example on every later run. Slowness is tested where it is a property (a
bounded number of evaluations, `make bench`), never by the clock in a property test.
"""

import os
import shutil
import subprocess
import sys
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


@pytest.fixture(scope="session")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The project's wheel installed into a folder of its own (dependencies from this venv)."""
    tmp = tmp_path_factory.mktemp("install")
    wheels, target, src = tmp / "wheels", tmp / "site", tmp / "src"
    # build from the files git would ship (tracked, or new and not ignored): a checkout's own
    # build/ folder keeps files setuptools would put in the wheel though they left the tree
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=REPO, check=True,
                            capture_output=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        if (REPO / name).is_file():
            (src / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, src / name)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run([*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", str(wheels), str(src)], check=True,
                   cwd=tmp)
    (wheel,) = wheels.glob("kvsim-*.whl")
    subprocess.run([*pip, "install", "--no-deps", "--target", str(target), str(wheel)], check=True, cwd=tmp)
    return target
