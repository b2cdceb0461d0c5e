"""Shared fixtures. Matplotlib draws off-screen in tests; Hypothesis has no wall-clock deadline.

A deadline turns a slow example into a failure that depends on the machine's load, and Hypothesis
then replays the stored example on every later run. Slowness is tested where it is a property (a
bounded number of evaluations, `make bench`), never by the clock in a property test.
"""

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import matplotlib
import pytest
from hypothesis import settings

matplotlib.use("Agg")
settings.register_profile("kvsim", deadline=None)
settings.load_profile("kvsim")
os.environ.setdefault("MPLBACKEND", "Agg")

REPO = Path(__file__).resolve().parents[1]
# tmp_path longer than this is swapped for a short folder: an error names a path past 120 characters cut in the
# middle (`simulator.files.shown_path`), so a test that finds its file's name in a message needs a short one.
# pytest's own here is ~80 characters (/tmp/pytest-of-root/pytest-N/popen-gwN/<test name, 30>N); a long TMPDIR
# (macOS: /var/folders/xx/.../T/, ~48 characters) or user name pushed 16 tests' paths past the cut (helper-122).
SHORT_TMP_CHARS = 90
TRACES = REPO.parent / "shared" / "data" / "traces"


@contextmanager
def short_tmp(path: Path) -> Iterator[Path]:
    """`path`, or where that is longer than `SHORT_TMP_CHARS`, a fresh folder under /tmp (removed after)."""
    if len(str(path)) <= SHORT_TMP_CHARS:
        yield path
        return
    short = Path(tempfile.mkdtemp(prefix="kv", dir="/tmp" if Path("/tmp").is_dir() else None))
    try:
        yield short
    finally:
        shutil.rmtree(short, ignore_errors=True)


@pytest.fixture
def tmp_path(tmp_path: Path) -> Iterator[Path]:
    """pytest's `tmp_path`, kept short (`short_tmp`)."""
    with short_tmp(tmp_path) as path:
        yield path


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
