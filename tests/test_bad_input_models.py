"""Bad input about models, their shapes and what fits (audit u2: F7, F8, F10, F12, F13, F17, F18).

The contract of tests/test_hostile_inputs.py: exit 2 and one ``Error: ...`` line that names the
file or option, the key, the value and what is allowed; never a traceback, never a silent default.
"""

from __future__ import annotations

from pathlib import Path

from tests.test_hostile_inputs import error, kvsim, outcome

CAL_HEADER = "gpu,model,tp,phase,batch,new_tokens,context,measured_s,tokens_per_s,source\n"
CAL_ROW = "H100,Llama-3.1-8B,1,decode,1,1,1024,0.006,,x\n"


# --- F7: calibrate --out ---------------------------------------------------------------------------
def _measurements(tmp: Path) -> Path:
    f = tmp / "cal.csv"
    f.write_text(CAL_HEADER + CAL_ROW)
    return f


def test_calibrate_refuses_an_existing_out_without_force(tmp_path):
    cal, notes = _measurements(tmp_path), tmp_path / "notes.txt"
    notes.write_text("my notes\n")
    line = error(kvsim("calibrate", cal, "--out", notes), str(notes))
    assert "--out" in line and "exists" in line and "--force" in line
    assert notes.read_text() == "my notes\n"
    assert outcome(kvsim("calibrate", cal, "--out", notes, "--force")) is None
    assert "[gpu.H100]" in notes.read_text()


def test_calibrate_never_overwrites_its_measurements(tmp_path):
    cal = _measurements(tmp_path)
    for extra in ((), ("--force",)):
        line = error(kvsim("calibrate", cal, "--out", cal, *extra), str(cal))
        assert "--out" in line and "FILE" in line and "measurements" in line
        assert cal.read_text() == CAL_HEADER + CAL_ROW


def test_calibrate_writes_a_new_out_and_refits_params_in_place_with_force(tmp_path):
    cal = _measurements(tmp_path)
    out = tmp_path / "p.toml"
    assert outcome(kvsim("calibrate", cal, "--out", out)) is None and out.is_file()
    # make calibrate's shape: --out is the --params it starts from
    assert outcome(kvsim("calibrate", cal, "--params", out, "--out", out, "--force")) is None
