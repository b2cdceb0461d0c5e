"""What ships works outside this checkout: the wheel, installed (not editable), run from another folder."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


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


def test_the_wheel_installs_its_four_top_level_packages_and_every_scenario_loads(installed: Path,
                                                                                 tmp_path: Path) -> None:
    # the layout fixes four top-level names; from the installed copy each is the installed one, and
    # every shipped scenario resolves by name and builds its workload and engine configuration
    deps = sysconfig.get_paths()["purelib"]
    code = ("import sys; sys.path[:0] = [sys.argv[1], sys.argv[2]]\n"
            "import hardware, scenarios, simulator, workloads\n"
            "for m in (hardware, scenarios, simulator, workloads):\n"
            "    assert m.__file__.startswith(sys.argv[1]), m.__file__\n"
            "from simulator import load_scenario\n"
            "from simulator.scenario import SCENARIO_DIR\n"
            "names = sorted(p.stem for p in SCENARIO_DIR.glob('*.toml'))\n"
            "for n in names:\n"
            "    sc = load_scenario(n)\n"
            "    sc.engine_config(sc.cluster.hardware[0])\n"
            "print(len(names), 'scenarios')\n")
    r = subprocess.run([sys.executable, "-S", "-c", code, str(installed), deps], cwd=tmp_path, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    shipped = len(list((installed / "scenarios").glob("*.toml")))
    assert shipped == len(list((REPO / "scenarios").glob("*.toml")))
    assert r.stdout.strip() == f"{shipped} scenarios"
