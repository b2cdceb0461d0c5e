"""Numbers of a user's GPU and node catalog (helper-159): inf was taken where NaN was refused (hbm_bytes = inf
ended in a NaN traceback at capacity's stage_sequences, a price of inf printed ``$/h inf``), a price of 0 ran at
$0 where ``cluster.usd_per_gpu_hour`` and ``--usd-per-gpu-hour`` refuse it, and NVMe given with no read bandwidth
ended in a ZeroDivisionError once an nvme tier reloaded a block."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from hardware.catalog import GPU_FILE, NODE_FILE, load_catalog
from simulator.errors import ConfigError
from simulator.tomlfile import read_toml
from tests.test_bad_input_models import GPU_Z1
from tests.test_hostile_inputs import error, kvsim, outcome

GPU_X1 = GPU_Z1.replace("[gpu.Z1]", "[gpu.X1]")  # the same test GPU (tests/test_bad_input_models.py)
NODE_1XX1 = """\
[node.1xX1]
gpu = "X1"
gpus = 1
host_dram_bytes = 2.0e12
nvme_bytes = 30.72e12
nvme_bytes_per_s = 25e9
nic_bytes_per_s = 50e9
nic_latency_s = 5e-6
nvlink_domain_gpus = 1
source = "test"
"""
POSITIVE = ("hbm_bytes", "hbm_bytes_per_s", "bf16_flops", "nvlink_bytes_per_s", "pcie_bytes_per_s", "usd_per_gpu_hour")
NONE_AT_ZERO = ("fp8_flops", "fp4_flops")
NODE_FIELDS = ("host_dram_bytes", "nvme_bytes", "nvme_bytes_per_s", "nic_bytes_per_s", "nic_latency_s")


def _catalog(tmp: Path, key: str, value: str) -> Path:
    text = GPU_X1 + "\n" + NODE_1XX1
    lines = [line for line in text.splitlines() if line.startswith(f"{key} = ")]
    assert len(lines) == 1, key
    f = tmp / "x.toml"
    f.write_text(text.replace(lines[0], f"{key} = {value}"))
    return f


@pytest.mark.parametrize("command", [("fit", "--context", "1024"), ("collapse",)])
def test_an_infinite_hbm_is_refused_not_a_nan_traceback(tmp_path, command):
    f = _catalog(tmp_path, "hbm_bytes", "inf")
    line = error(kvsim(*command, "--hardware", "1xX1", "--model", "Llama-3.1-8B", "--catalog", f,
                       *(("--out", tmp_path / "o") if command[0] == "collapse" else ())), str(f))
    assert line == f"Error: {f}: gpu.X1.hbm_bytes: must be a finite number > 0 (got inf)"


@pytest.mark.parametrize("value", ["inf", "-inf"])
@pytest.mark.parametrize("key", POSITIVE + NONE_AT_ZERO + NODE_FIELDS)
def test_every_catalog_number_refuses_inf(tmp_path, key, value):
    f = _catalog(tmp_path, key, value)
    rule = ("a finite number > 0" if key in POSITIVE else "a finite number >= 0" +
            (" (0: no tensor cores of that dtype)" if key in NONE_AT_ZERO else ""))
    table = "node.1xX1" if key in NODE_FIELDS else "gpu.X1"
    line = error(kvsim("hardware", "--catalog", f), str(f))
    assert line == f"Error: {f}: {table}.{key}: must be {rule} (got {value})"


@pytest.mark.parametrize("key", POSITIVE)
def test_a_catalog_figure_that_cannot_be_0_is_refused_at_0(tmp_path, key):
    """A price of 0 priced every run at $0 while cluster.usd_per_gpu_hour = 0 and --usd-per-gpu-hour 0 are refused."""
    f = _catalog(tmp_path, key, "0")
    assert error(kvsim("hardware", "--catalog", f), str(f)) == \
        f"Error: {f}: gpu.X1.{key}: must be a finite number > 0 (got 0)"


@pytest.mark.parametrize("key", (*NONE_AT_ZERO, "host_dram_bytes", "nvme_bytes"))
def test_0_still_means_none_where_it_does(tmp_path, key):
    """No FP8/FP4 tensor cores, no host DRAM or NVMe for an offload tier: 0 stays a catalog's way to say so."""
    f = _catalog(tmp_path, key, "0")
    assert outcome(kvsim("hardware", "--catalog", f)) is None
    cat = load_catalog(f)
    assert getattr(cat.gpus["X1"] if key in NONE_AT_ZERO else cat.nodes["1xX1"], key) == 0


def test_nvme_without_its_bandwidth_is_refused(tmp_path):
    """nvme_bytes > 0 with nvme_bytes_per_s = 0 reloaded an nvme tier's blocks in bytes / 0 (ZeroDivisionError)."""
    f = _catalog(tmp_path, "nvme_bytes_per_s", "0")
    assert error(kvsim("hardware", "--catalog", f), str(f)) == \
        f"Error: {f}: node.1xX1.nvme_bytes_per_s: must be > 0 where nvme_bytes is (the drives' read bandwidth) (got 0)"
    f.write_text((GPU_X1 + "\n" + NODE_1XX1).replace("nvme_bytes = 30.72e12", "nvme_bytes = 0")
                 .replace("nvme_bytes_per_s = 25e9", "nvme_bytes_per_s = 0"))
    assert load_catalog(f).nodes["1xX1"].nvme_bytes_per_s == 0  # no drives, no bandwidth: none


def test_the_api_says_the_same(tmp_path):
    with pytest.raises(ConfigError) as err:
        load_catalog(_catalog(tmp_path, "usd_per_gpu_hour", "inf"))
    assert str(err.value) == f"{tmp_path / 'x.toml'}: gpu.X1.usd_per_gpu_hour: must be a finite number > 0 (got inf)"


def test_every_shipped_figure_is_finite():
    for path, table in ((GPU_FILE, "gpu"), (NODE_FILE, "node")):
        for entry in read_toml(path)[table].values():
            for v in entry.values():
                assert not isinstance(v, float) or math.isfinite(v)
    assert load_catalog().gpus and all(g.usd_per_gpu_hour > 0 for g in load_catalog().gpus.values())
