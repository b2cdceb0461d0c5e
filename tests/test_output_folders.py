"""The ``--out`` policy (`simulator.cli.common.OutputFolder`, README "Limits"): what a command may
remove, overwrite or leave behind, from the audit's findings A, B, C, E, G, H, O and P (generate)."""

import os
from pathlib import Path

import pytest

from simulator.cli.common import MANIFEST
from tests.test_hostile_inputs import edit, error, kvsim, outcome, scenario

SEVEN = ("id,arrival_s,session_id,turn,prompt_tokens,output_tokens,output_segment_id,segments,cache_breakpoints,"
         "source\n" + "".join(f"{i},{i * 0.5},{i},0,100,10,{i},{i}:100,,x\n" for i in range(7)))
LONG = "a" * 300  # one name past the file system's 255 bytes


def listing(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def stopped(result: object, command: str) -> str:
    """Exit 130 with one line on stderr that says the command stopped and what is left; no traceback."""
    assert result.exit_code == 130, result.output  # type: ignore[attr-defined]
    lines = [line for line in result.stderr.splitlines() if line.strip()]  # type: ignore[attr-defined]
    assert "Traceback" not in result.output and "Aborted" not in result.output  # type: ignore[attr-defined]
    assert lines[-1].startswith(f"{command} stopped by SIGINT: "), lines
    return lines[-1]


# --- A: generate never writes over what it reads ---------------------------------------------------
def test_generate_refuses_an_out_that_is_its_own_input(tmp_path):
    trace = tmp_path / "tr.csv"
    trace.write_text(SEVEN)
    toml = tmp_path / "wltr.toml"
    toml.write_text('[workload]\ntrace = "tr.csv"\n')
    line = error(kvsim("workload", "generate", toml, "--out", trace, "--force"), "--out")
    assert "is the trace SPEC reads" in line and "wltr.toml: workload.trace" in line
    line = error(kvsim("workload", "generate", trace, "--out", trace, "--force"), "--out")
    assert "is SPEC, the workload being read" in line
    os.link(trace, tmp_path / "hard.csv")
    (tmp_path / "soft.csv").symlink_to(trace)
    for other in ("hard.csv", "soft.csv"):  # the same file by another name
        assert "is the trace SPEC reads" in error(kvsim("workload", "generate", toml, "--out", tmp_path / other,
                                                        "--force"), "--out")
    assert trace.read_text() == SEVEN


def test_generate_replaces_a_link_at_out_instead_of_writing_through_it(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("VICTIM")
    out = tmp_path / "w.csv"
    out.symlink_to(victim)
    assert outcome(kvsim("workload", "generate", "chat-4k", "--duration-s", "5", "--out", out, "--force")) is None
    assert victim.read_text() == "VICTIM" and not out.is_symlink() and out.read_text().startswith("id,")
    assert [p.name for p in tmp_path.iterdir() if "partial" in p.name] == []


# --- B: no write through a symbolic link ------------------------------------------------------------
def _planted(tmp_path: Path, rel: str) -> tuple[Path, Path]:
    """An --out folder ``o`` whose `rel` is a symbolic link to a file outside it: ``(o, that file)``."""
    victim, out = tmp_path / "victim.txt", tmp_path / "o"
    victim.write_text("VICTIM")
    (out / rel).parent.mkdir(parents=True, exist_ok=True)
    (out / rel).symlink_to(victim)
    return out, victim


def test_run_refuses_a_symlinked_output_name_before_simulating(tmp_path):
    out, victim = _planted(tmp_path, "summary.md")
    r = kvsim("run", scenario(tmp_path), "--out", out)
    line = error(r, "--out")
    assert "summary.md is a symbolic link" in line and "victim.txt" in line and "simulating" not in r.stderr
    assert victim.read_text() == "VICTIM"


def test_a_link_inside_a_fleet_folder_is_refused(tmp_path):
    out, victim = _planted(tmp_path, "8xH100/summary.json")
    line = error(kvsim("run", scenario(tmp_path), "--out", out), "--out")
    assert "8xH100/summary.json is a symbolic link" in line and victim.read_text() == "VICTIM"


def test_capacity_refuses_a_symlinked_output_name(tmp_path):
    out, victim = _planted(tmp_path, "capacity.png")
    assert "capacity.png is a symbolic link" in error(kvsim("capacity", scenario(tmp_path), "--out", out), "--out")
    assert victim.read_text() == "VICTIM"


def test_a_symlinked_out_folder_still_works(tmp_path):
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    assert outcome(kvsim("run", scenario(tmp_path), "--out", tmp_path / "link")) is None
    assert (real / "summary.md").is_file()


# --- C: a failing command keeps the previous output ------------------------------------------------
def test_capacity_with_a_bad_option_keeps_the_previous_files(tmp_path):
    out = tmp_path / "capo"
    sc = scenario(tmp_path)
    assert outcome(kvsim("capacity", sc, "--out", out)) is None
    before = listing(out)
    assert "unknown node 'nope'" in error(kvsim("capacity", sc, "--hardware", "nope", "--out", out), "--hardware")
    assert listing(out) == before and "capacity.csv" in before


def test_run_whose_generator_draws_nothing_keeps_the_previous_report(tmp_path):
    out = tmp_path / "rpo"
    assert outcome(kvsim("run", scenario(tmp_path), "--out", out)) is None
    before = listing(out)
    tiny = scenario(tmp_path, edit("duration_s = 5", "duration_s = 0.001"), name="tiny.toml")
    assert "drew no request" in error(kvsim("run", tiny, "--out", out), "tiny.toml")
    assert listing(out) == before and "summary.md" in before


# --- E: one command never overwrites or deletes another's output -----------------------------------
def test_capacity_into_a_run_report_with_a_capacity_plan_is_refused(tmp_path):
    out = tmp_path / "mix"
    withcap = scenario(tmp_path, edit("capacity = false", "capacity = true"), name="withcap.toml")
    assert outcome(kvsim("run", withcap, "--out", out)) is None
    before = listing(out)
    r = kvsim("capacity", scenario(tmp_path), "--hardware", "8xH200", "--out", out)
    line = error(r, "--out")
    assert "capacity.csv is kvsim run's output there and kvsim capacity would overwrite it" in line
    assert "capacity search" not in r.stderr and listing(out) == before


def test_run_with_a_capacity_plan_into_a_capacity_folder_is_refused(tmp_path):
    out = tmp_path / "mix"
    assert outcome(kvsim("capacity", scenario(tmp_path), "--out", out)) is None
    withcap = scenario(tmp_path, edit("capacity = false", "capacity = true"), name="withcap.toml")
    line = error(kvsim("run", withcap, "--out", out), "--out")
    assert "is kvsim capacity's output there and kvsim run would overwrite it" in line
    # a run without a capacity plan shares the folder, and keeps capacity's files
    assert outcome(kvsim("run", scenario(tmp_path), "--out", out)) is None
    assert outcome(kvsim("run", scenario(tmp_path), "--out", out)) is None
    assert (out / "capacity.csv").is_file() and (out / "summary.md").is_file()
    manifest = (out / MANIFEST).read_text()
    assert "capacity\tcapacity.csv" in manifest and "run\tcapacity.csv" not in manifest


# --- G: an interrupt exits 130 in one line and leaves no partial output ------------------------------
def test_run_interrupted_while_writing_removes_its_partial_report(tmp_path, monkeypatch):
    import simulator.report

    out = tmp_path / "o"
    (out / "notes.txt").parent.mkdir()
    (out / "notes.txt").write_text("mine")

    def half(run, folder, *args, **kwargs):
        (folder / "headline.csv").write_text("partial")
        (folder / "8xH100").mkdir()
        (folder / "8xH100" / "requests.csv").write_text("partial")
        raise KeyboardInterrupt

    monkeypatch.setattr(simulator.report, "write_report", half)
    line = stopped(kvsim("run", scenario(tmp_path), "--out", out), "run")
    assert "partial output was removed" in line
    assert listing(out) == {"notes.txt": b"mine"}  # and no empty file list (no command's output is left)


@pytest.mark.parametrize(("command", "module", "function"), [("run", "study", "run_scenario"),
                                                           ("capacity", "planning", "plan_capacity")])
def test_a_command_interrupted_while_computing_keeps_the_previous_files(tmp_path, monkeypatch, command, module,
                                                                        function):
    import importlib

    out = tmp_path / "o"
    assert outcome(kvsim(command, scenario(tmp_path), "--out", out)) is None
    before = listing(out)

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(importlib.import_module(f"simulator.{module}"), function, interrupted)
    assert "is as it was" in stopped(kvsim(command, scenario(tmp_path), "--out", out), command)
    assert listing(out) == before


@pytest.mark.parametrize(("args", "target", "function"), [
    (["compare", "{s}", "--strategy", "native"], "simulator.cli.compare", "compare_strategies"),
    (["breakeven", "--workload", "chat-4k", "--duration-s", "30"], "simulator.billing.compare", "compare_ttls"),
    (["collapse", "--hardware", "8xH100", "--layout", "native"], "simulator.charts", "collapse_figure"),
])
def test_compare_breakeven_and_collapse_interrupted_exit_130_in_one_line(tmp_path, monkeypatch, args, target,
                                                                         function):
    """They exited 1 with click's "Aborted!" and could leave a partial folder; now as run and capacity do."""
    import importlib

    out = tmp_path / "o"
    argv = [str(scenario(tmp_path)) if a == "{s}" else a for a in args]

    def interrupted(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(importlib.import_module(target), function, interrupted)
    stopped(kvsim(*argv, "--out", out), argv[0])
    assert not out.exists() or set(listing(out)) <= {MANIFEST}


def test_generate_interrupted_leaves_no_file(tmp_path, monkeypatch):
    import simulator.cli.workload as cli_workload

    def half(workload, path):
        Path(path).write_text("id,arrival_s\n0,0\n")  # whole rows: would read as a complete trace
        raise KeyboardInterrupt

    monkeypatch.setattr(cli_workload, "write_workload", half)
    out = tmp_path / "big.csv"
    assert "nothing written" in stopped(kvsim("workload", "generate", "chat-4k", "--out", out), "workload generate")
    assert list(tmp_path.iterdir()) == []


# --- H: an empty --out is refused --------------------------------------------------------------------
@pytest.mark.parametrize("args", [["run", "{s}"], ["capacity", "{s}"], ["compare", "{s}", "--strategy", "native"],
                                  ["collapse", "--hardware", "8xH100", "--layout", "native"], ["breakeven"]])
def test_an_empty_out_is_refused(tmp_path, monkeypatch, args):
    sc = scenario(tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    r = kvsim(*[a.format(s=sc) for a in args], "--out", "")
    assert error(r, "--out") == "Error: --out: must name a folder (got '')"
    assert list(work.iterdir()) == []


def test_generate_refuses_an_empty_out(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert error(kvsim("workload", "generate", "chat-4k", "--out", ""), "--out") == \
        "Error: --out: must name a file (got '')"


# --- O: a name too long keeps the option and the reason ----------------------------------------------
@pytest.mark.parametrize("args", [["run", "{s}", "--out", "{d}/" + LONG],
                                  ["compare", "{s}", "--strategy", "native", "--out", "{d}/" + "b" * 5000],
                                  ["workload", "generate", "chat-4k", "--out", "{d}/" + LONG + ".csv"]])
def test_a_name_too_long_says_which_option_and_why(tmp_path, args):
    sc = scenario(tmp_path)
    line = error(kvsim(*[a.format(s=sc, d=tmp_path) for a in args]), "--out")
    assert line.startswith("Error: --out ") and line.endswith("File name too long") and "…" in line


# --- P: generate's folder that is missing or a file --------------------------------------------------
def test_generate_into_a_missing_folder_names_out(tmp_path):
    line = error(kvsim("workload", "generate", "chat-4k", "--out", tmp_path / "newdir" / "w.csv"), "--out")
    assert "newdir does not exist" in line
    (tmp_path / "afile.txt").write_text("x")
    line = error(kvsim("workload", "generate", "chat-4k", "--out", tmp_path / "afile.txt" / "w.csv"), "--out")
    assert "afile.txt is not a folder" in line



def test_calibrate_refuses_an_empty_out_before_fitting(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    r = kvsim("calibrate", "--from-aiconfigurator", "--out", "", "--force")
    assert error(r, "--out") == "Error: --out: must name a file (got '')" and "fitting" not in r.stderr


@pytest.mark.parametrize(("args", "said"), [
    # refused inside the table (kv_budget): the folder was made first
    (["collapse", "--model", "Llama-3.1-405B", "--hardware", "1xH100"], "does not fit"),
    (["compare", "--model", "nope", "--workload", "chat-4k", "--duration-s", "10", "--strategy", "prefix"], "nope"),
    (["compare", "--workload", "chat-4k", "--duration-s", "10", "--strategy", "prefix+prefix"], "prefix"),
])
def test_a_refused_input_leaves_no_out_folder(tmp_path, args, said):
    """`collapse` and `compare` made their --out folder before every input was checked: a refusal left it
    behind, empty. Now the folder comes once the inputs hold (still before any simulation)."""
    out = tmp_path / "out" / "here"
    error(kvsim(*args, "--out", out), said)
    assert not (tmp_path / "out").exists()


def test_an_out_folder_is_listed_only_where_the_command_writes(tmp_path, monkeypatch):
    """helper-159: `kvsim run --out /` simulated, then walked the whole disk to list what it wrote and stopped at
    ``/proc/1/cwd: Permission denied`` (``--out ~`` walked the home folder). The listing walks only the entries
    the command writes: a folder of the user's beside them is never entered."""
    from click.testing import CliRunner

    from simulator.cli import main

    out = tmp_path / "home"
    (out / "photos" / "2026").mkdir(parents=True)
    (out / "photos" / "2026" / "a.jpg").write_bytes(b"x")
    entered: list[Path] = []
    rglob = Path.rglob

    def watched(self: Path, pattern: str, *args: object, **kwargs: object):
        entered.append(self)
        return rglob(self, pattern, *args, **kwargs)

    monkeypatch.setattr(Path, "rglob", watched)
    r = CliRunner().invoke(main, ["collapse", "--model", "Llama-3.1-8B", "--hardware", "1xH100", "--layout", "native",
                                  "--out", str(out)])
    assert r.exit_code == 0, r.output
    assert not any(p == out or out / "photos" in (p, *p.parents) for p in entered)
    assert sorted((out / MANIFEST).read_text().splitlines()) == ["collapse\tcollapse.csv", "collapse\tcollapse.png"]
    assert (out / "photos" / "2026" / "a.jpg").read_bytes() == b"x"


def test_every_file_a_command_writes_is_among_the_names_it_lists():
    """helper-164: OUTPUTS['run'] lacked fleets.png, which every disaggregated report writes; once the listing read
    only the names a command writes (87bcfb6), a fleets.png was never listed, so a later run into the folder left
    it beside a report without fleets. Every name report.py and the commands write (``out / "name"``) is listed."""
    import re

    from simulator.cli.common import OUTPUTS

    root = Path(__file__).parents[1] / "simulator"
    written = {(path.stem, name) for path in [root / "report.py", *root.glob("cli/*.py")]
               for name in re.findall(r'out / "([\w.]+\.(?:png|csv|md|json))"', path.read_text())}
    assert ("report", "fleets.png") in written
    # the module -> the commands whose folders it writes (sweep keeps its own folder's rules: --resume)
    commands = {"report": ("run",), "run": ("run", "capacity"), "spec": ("collapse",), "breakeven": ("breakeven",),
                "compare": ("compare",), "sweep": ()}
    unlisted = sorted((module, name) for module, name in written if commands[module]
                      and not any(name in OUTPUTS[c] for c in commands[module]))
    assert unlisted == []
