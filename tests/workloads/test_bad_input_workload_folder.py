"""A folder given as a workload (helper-159): ``kvsim workload describe DIR.csv``, ``kvsim breakeven --workload DIR``
and ``load_workload(Path(DIR))`` said ``no such file`` (or "must be a generator name ...") of a folder that is
there, and ``kvsim compare --workload DIR`` "must be a generator name"; ``--gaps DIR`` already said it is a folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from simulator.errors import ConfigError
from tests.test_hostile_inputs import error, kvsim
from workloads import load_workload

KINDS = ("(a workload is a generator name (chat-4k, code-repo-128k, synthetic), a TOML file with [workload] "
         "or a trace file)")


@pytest.fixture(params=["DIR", "DIR.csv"])
def folder(request, tmp_path) -> Path:
    d = tmp_path / request.param
    d.mkdir()
    return d


def test_workload_describe_says_a_folder_is_a_folder(folder):
    assert error(kvsim("workload", "describe", folder), str(folder)) == \
        f"Error: SPEC: '{folder}' is a folder, not a file {KINDS}"


@pytest.mark.parametrize("command", [("breakeven",), ("compare", "--strategy", "native")])
def test_workload_option_says_a_folder_is_a_folder(folder, command, tmp_path):
    line = error(kvsim(*command, "--workload", folder, "--out", tmp_path / "o"), str(folder))
    assert line == f"Error: --workload: '{folder}' is a folder, not a file {KINDS}"


def test_load_workload_says_a_folder_is_a_folder(folder):
    with pytest.raises(ConfigError) as err:
        load_workload(folder)
    assert str(err.value) == f"load_workload: spec: '{folder}' is a folder, not a file {KINDS}"
    with pytest.raises(ConfigError) as err:
        load_workload(str(folder), name="--workload")
    assert str(err.value) == f"--workload: '{folder}' is a folder, not a file {KINDS}"
