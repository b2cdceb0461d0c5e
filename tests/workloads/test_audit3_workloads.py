"""The third audit's workload findings: a mixture by name alone."""

import json
import re
import tomllib
from pathlib import Path

import pytest
from click.testing import CliRunner

from simulator.cli.workload import workload
from simulator.errors import ConfigError
from workloads import load_workload
from workloads.generators import GENERATORS

REPO = Path(__file__).resolve().parents[2]


def _one_line_error(output: str) -> str:
    assert "Traceback" not in output
    assert output.startswith("Error: ") and output.count("\n") == 1, output
    return output


# --- 1. mixture: no defaults, so no spec by name alone -------------------------------------------

@pytest.mark.parametrize("args", [["describe", "mixture"], ["generate", "mixture", "--out", "m.csv"]])
def test_mixture_by_name_says_it_needs_components_and_how(args: list[str], tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    r = CliRunner().invoke(workload, args)
    assert r.exit_code == 2
    out = _one_line_error(r.output)
    assert "'mixture' does not run by name alone (chat-4k, code-repo-128k, synthetic do)" in out
    assert 'name = "mixture", components = [{name = "chat-4k", weight = 0.7}' in out and "README" in out
    assert "…" not in out  # whole: not cut at the error's length limit
    assert not (tmp_path / "m.csv").exists()


def test_load_workload_mixture_by_name_is_the_same_error() -> None:
    with pytest.raises(ConfigError, match=r"^load_workload: 'mixture' does not run by name alone .* components = \["):
        load_workload("mixture")


def test_the_example_the_mixture_error_gives_runs(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as e:
        load_workload("mixture")
    example = re.search(r"(\[workload\] name = .*\]) \(README", str(e.value))
    assert example is not None
    spec = tmp_path / "mix.toml"
    spec.write_text(example.group(1).replace("[workload] ", "[workload]\n").replace(", components", "\ncomponents"))
    assert tomllib.loads(spec.read_text())["workload"]["name"] == "mixture"
    r = CliRunner().invoke(workload, ["describe", str(spec), "--duration-s", "60", "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)[0]["n_requests"] > 0


def test_a_mixture_table_without_components_names_the_file_and_the_key(tmp_path: Path) -> None:
    spec = tmp_path / "m.toml"
    spec.write_text('[workload]\nname = "mixture"\n')
    r = CliRunner().invoke(workload, ["describe", str(spec)])
    assert r.exit_code == 2
    out = _one_line_error(r.output)
    assert out.startswith(f"Error: {spec}: workload: 'components' is required: a mixture needs its components")
    spec.write_text('[workload]\nname = "mixture"\ncomponents = []\n')  # the wrong type keeps its own message
    r = CliRunner().invoke(workload, ["describe", str(spec)])
    assert r.exit_code == 2 and "'components' must be a non-empty list of tables (got [])" in r.output


def test_generators_by_name_and_the_unknown_spec_error() -> None:
    from workloads.generators import by_name

    assert by_name() == ["chat-4k", "code-repo-128k", "synthetic"]
    assert set(GENERATORS) - set(by_name()) == {"mixture"}
    r = CliRunner().invoke(workload, ["describe", "no-such"])
    assert r.exit_code == 2
    out = _one_line_error(r.output)
    assert out.startswith("Error: load_workload: 'spec' must be a generator name (chat-4k, code-repo-128k, synthetic)")
    assert "(as mixture needs)" in out and "(got 'no-such')" in out


def test_readme_lists_the_generators_that_run_by_name_and_synthetic() -> None:
    from workloads.generators import by_name

    readme = (REPO / "README.md").read_text()
    names = re.search(r"`SPEC` is a generator name that runs alone \(([^)]*)\)", readme)
    assert names is not None
    assert [n.strip(" `") for n in names.group(1).split(",")] == by_name()
    assert "`synthetic` is benchmark traffic" in readme
    assert 'a `mixture` needs one: `name = "mixture"`, `components = [' in readme
