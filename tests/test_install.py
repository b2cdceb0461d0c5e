"""What ships works outside this checkout: the wheel, installed (not editable), run from another folder."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The project's wheel installed into a folder of its own (dependencies from this venv)."""
    tmp = tmp_path_factory.mktemp("install")
    wheels, target = tmp / "wheels", tmp / "site"
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run([*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", str(wheels), str(REPO)], check=True,
                   cwd=tmp)
    (wheel,) = wheels.glob("kvsim-*.whl")
    subprocess.run([*pip, "install", "--no-deps", "--target", str(target), str(wheel)], check=True, cwd=tmp)
    return target


def kvsim(installed: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``kvsim ARGS`` from `cwd` on the installed copy only: ``-S`` leaves out the site folder, whose
    editable-install hook would import the checkout; the dependencies come from its path, after."""
    deps = sysconfig.get_paths()["purelib"]
    code = ("import sys; sys.path[:0] = [sys.argv.pop(1), sys.argv.pop(1)]; import simulator; "
            "assert not simulator.__file__.startswith(sys.argv.pop(1)), simulator.__file__; "
            "from simulator.cli import main; main(sys.argv[1:], prog_name='kvsim')")
    env = {**os.environ, "MPLBACKEND": "Agg"}
    return subprocess.run([sys.executable, "-S", "-c", code, str(installed), deps, str(REPO), *args], cwd=cwd,
                          capture_output=True, text=True, env=env, timeout=300)


def test_the_wheel_runs_shipped_scenarios_from_another_folder(installed: Path, tmp_path: Path) -> None:
    # every shipped scenario resolves by name from the package and validates
    names = sorted(p.stem for p in (installed / "scenarios").glob("*.toml"))
    assert {"default", "trace-replay", "capacity-plan"} <= set(names)
    assert (installed / "scenarios" / "traces" / "chat-sample.csv").stat().st_size > 10_000
    r = kvsim(installed, tmp_path, "run", "trace-replay", "--out", str(tmp_path / "tr"))
    assert r.returncode == 0, r.stderr
    assert "656        656" in r.stdout  # the shipped sample's 656 requests, all completed
    assert (tmp_path / "tr" / "summary.md").is_file()
    r = kvsim(installed, tmp_path, "fit", "--model", "DeepSeek-V3", "--hardware", "8xH200", "--context", "32768")
    assert r.returncode == 0 and "max streams at 32,768 tokens: 18" in r.stdout
    r = kvsim(installed, tmp_path, "run", "no-such-scenario")
    assert r.returncode == 2 and "shipped: capacity-plan" in r.stderr and "Traceback" not in r.stderr
