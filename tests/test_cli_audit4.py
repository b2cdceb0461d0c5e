"""The fourth audit's findings on ``--kv-dtype``, ``--usd-per-gpu-hour`` and ``compare``: an empty or
unknown dtype, a GPU priced twice under two spellings, a strategy set named twice, and empty
``--strategy``/``--workload``/``--hardware`` values, each refused in one line naming the option and
what it allows, exit 2 (the contract of `tests.test_hostile_inputs`)."""

from __future__ import annotations

import pytest

from tests.test_hostile_inputs import BASE, error, kvsim, outcome, scenario

DTYPES = "must be one of fp32, bf16, fp16, fp8, int8, int4, fp4"


# --- --kv-dtype -----------------------------------------------------------------------------------
@pytest.mark.parametrize("command", [["calc"], ["fit", "--hardware", "8xH100"]])
@pytest.mark.parametrize("value", ["", " ", "fp9"])
def test_kv_dtype_empty_or_unknown_is_the_options_error(command, value):
    r = kvsim(*command, "--model", "Llama-3.1-8B", "--context", "100", "--kv-dtype", value)
    line = error(r, "--kv-dtype")
    assert f"--kv-dtype: {DTYPES} (got {value!r})" in line
    assert "layout" not in line


def test_kv_dtype_still_adds_its_lever():
    r = kvsim("calc", "--model", "Llama-3.1-8B", "--context", "100", "--kv-dtype", "fp8")
    assert outcome(r) is None and "layout fp8," in r.output


# --- --usd-per-gpu-hour ---------------------------------------------------------------------------
@pytest.mark.parametrize("prices", ["H100=1,h100=2", "H100=1,H100=2", "h100=1, H100 =2"])
def test_a_gpu_priced_twice_under_any_spelling_is_refused(tmp_path, prices):
    r = kvsim("run", scenario(tmp_path), "--usd-per-gpu-hour", prices, "--out", tmp_path / "o")
    line = error(r, "--usd-per-gpu-hour")
    assert "--usd-per-gpu-hour: must be" in line and "each GPU once" in line and repr(prices) in line
    assert not (tmp_path / "o").exists()


def test_a_scenario_pricing_a_gpu_twice_is_refused(tmp_path):
    p = scenario(tmp_path, BASE.replace('hardware = ["8xH100"]\n',
                                        'hardware = ["8xH100"]\nusd_per_gpu_hour = {H100 = 1, h100 = 2}\n'))
    line = error(kvsim("capacity", p), str(p))
    assert "cluster.usd_per_gpu_hour: must name each GPU once (got 'H100' and 'h100', both H100)" in line


def test_distinct_gpus_are_still_priced(tmp_path):
    r = kvsim("compare", scenario(tmp_path), "--strategy", "native", "--usd-per-gpu-hour", "H100=1,h200=2")
    assert outcome(r) is None and "H100 1.00 USD/GPU-hour (overridden" in r.stderr
