"""The curated public API (`simulator.__all__`): names, lazy loading, and the README's example.

The README's "Python API" section shows a 10-line example; `test_readme_example_runs_as_shown`
extracts that very block and runs it, so the README and this test cannot drift apart.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

import simulator

README = Path(__file__).resolve().parents[1] / "README.md"
HEAVY = ("pandas", "scipy", "matplotlib", "simpy")


def _section(title: str) -> str:
    text = README.read_text()
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start:end if end > 0 else None]


def _blocks(section: str, lang: str) -> list[str]:
    """The bodies of the fenced blocks of `section` whose info string is `lang` (``""``: none)."""
    blocks, body, info = [], [], None
    for line in section.splitlines():
        if line.startswith("```"):
            if info is None:
                info, body = line[3:].strip(), []
            else:
                if info == lang:
                    blocks.append("\n".join(body) + "\n")
                info = None
        elif info is not None:
            body.append(line)
    return blocks


def test_public_names_are_the_library_objects() -> None:
    from hardware.catalog import load_catalog
    from simulator.engine.result import Result, run
    from simulator.placement import ParallelPlan
    from simulator.scenario import Scenario, load_scenario
    from simulator.study import run_scenario

    assert simulator.load_scenario is load_scenario and simulator.Scenario is Scenario
    assert simulator.run is run and simulator.Result is Result and simulator.run_scenario is run_scenario
    assert simulator.ParallelPlan is ParallelPlan and simulator.load_catalog is load_catalog
    for name in simulator.__all__:
        assert getattr(simulator, name) is not None, name
    assert set(simulator.__all__) <= set(dir(simulator))
    # a curated API: what the README and the notebooks need, no more
    assert len(simulator.__all__) <= 25


def test_an_unknown_name_raises_attribute_error_and_submodules_still_import() -> None:
    try:
        simulator.no_such_name  # noqa: B018
    except AttributeError as exc:
        assert "no_such_name" in str(exc)
    else:
        raise AssertionError("no AttributeError")
    from simulator import units  # a submodule, not a public name: imported as usual

    assert units.GB == 10**9


def test_import_simulator_is_cheap() -> None:
    """A fresh interpreter: ``import simulator`` loads none of pandas, scipy, matplotlib or SimPy (and no
    simulator module but the package and its lazy-export helper); the first public name used loads
    what it needs."""
    code = (f"import json, sys; import simulator; heavy = {HEAVY!r}; "
            "before = sorted(m for m in sys.modules if m.split('.')[0] in heavy or m.startswith('simulator.')); "
            "simulator.kv_budget; "
            "after = sorted({m.split('.')[0] for m in sys.modules} & set(heavy)); "
            "print(json.dumps([before, after]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    before, after = json.loads(out.stdout)
    assert before == ["simulator.lazy"]
    assert "pandas" not in after and "matplotlib" not in after  # the analytic core stays light


def test_readme_example_runs_as_shown() -> None:
    section = _section("Python API")
    (example,) = _blocks(section, "python")
    assert sum(bool(line.strip()) for line in example.splitlines()) <= 10  # "a 10-line example"
    assert "from simulator import" in example
    namespace: dict[str, object] = {}
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(example, str(README), "exec"), namespace)  # the README's own code, as written
    requests = namespace["requests"]
    assert isinstance(requests, pd.DataFrame) and "source" in requests.columns
    counts = requests.groupby("source").size()
    assert set(counts.index) == {"chat-4k", "code-repo-128k"}  # the default scenario's mix
    assert (requests.outcome == "completed").all()
    # agents re-read 32k-112k repositories; chat turns are about a thousand tokens
    prompt = requests.groupby("source").prompt_tokens.median()
    assert prompt["code-repo-128k"] > 20 * prompt["chat-4k"]
    # the output shown under the block has the same columns and one row per class
    (shown,) = [b for b in _blocks(section, "") if "source" in b]
    assert shown.split()[:4] == printed.getvalue().split()[:4] == ["requests", "prompt_p50", "ttft_p99_s", "e2e_p50_s"]
    for label in counts.index:
        assert re.search(rf"^{re.escape(label)}\s+{counts[label]}\s", shown, flags=re.M), (label, shown)


def test_help_on_segment_shows_its_own_docstring() -> None:
    """helper-188: ``help(workloads.Segment)`` showed tuple's docstring ("Built-in immutable sequence"), the
    alias ``tuple[int, int]`` having none of its own. It is still that pair of ints to a type checker and a
    plain tuple at run time; typing's cached ``Tuple[int, int]`` is left as it was."""
    import pydoc
    import typing

    import workloads

    text = pydoc.render_doc(workloads.Segment, renderer=pydoc.plaintext)
    assert "Segment = typing.Tuple[int, int]" in text and "Built-in immutable sequence" not in text
    assert "a plain tuple ``(segment_id, tokens)`` of two ints" in text
    assert "\n    segment_id\n" in text and "\n    tokens\n" in text  # each field said
    assert workloads.Segment == typing.Tuple[int, int] and typing.get_args(workloads.Segment) == (int, int)  # noqa: UP006
    assert typing.Tuple[int, int].__doc__ is None and typing.Tuple[int, int].__name__ == "Tuple"  # noqa: UP006


def test_the_public_names_docstrings_say_what_they_hold() -> None:
    """helper-188: the thinnest docstrings of the README's API table were a line (`load_catalog` 56 characters,
    `ScenarioRun` 62, `get_profile` 84, `Result` 85, `Scenario` 92), and `breakeven_reuse_rate` gave ``p*``
    unexplained. Each now says what it holds; the break-even's figures are worked here as it gives them:
    p* = (1.25 − 1) / (1.25 − 0.1) = 0.2174, λ* = −ln(1 − p*) / 300 s = 0.2451 / 300 s, one reuse per
    1,224 s = 20.4 min; 1 h: p* = 1 / 1.9, −ln(0.9 / 1.9) / 3,600 s, one reuse per 80.3 min."""
    import inspect
    import math

    thin = {name: len(inspect.getdoc(getattr(simulator, name)) or "") for name in simulator.__all__
            if name != "__version__"}
    assert min(thin.values()) >= 150, sorted(thin.items(), key=lambda kv: kv[1])[:3]
    doc = inspect.getdoc(simulator.breakeven_reuse_rate) or ""
    assert "``p* = (w - 1) / (w - r)``" in doc and "``p r + (1 - p) w = 1``" in doc
    assert "``p* = 0.25 / 1.15 =\n0.2174``" in doc and "one reuse per 20.4 min" in doc and "80.3 min" in doc
    five_min = simulator.breakeven_reuse_rate(300.0, 0.1, 1.25)
    assert five_min == pytest.approx(-math.log(1 - 0.25 / 1.15) / 300, rel=1e-12)
    assert round(1 / five_min / 60, 1) == 20.4
    assert round(-math.log(1 - 0.25 / 1.15), 4) == 0.2451
    assert round(1 / simulator.breakeven_reuse_rate(3600.0, 0.1, 2.0) / 60, 1) == 80.3
    for name, words in (("get_profile", "3 USD per million input tokens"), ("load_catalog", "[gpu.NAME]"),
                        ("Result", "``goodput_fraction``"), ("ScenarioRun", "``headline()``"),
                        ("Scenario", "``dataclasses.replace``")):
        assert words in (inspect.getdoc(getattr(simulator, name)) or ""), name
