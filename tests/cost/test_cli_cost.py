import json

from click.testing import CliRunner

from simulator.cli.cost import calibrate, cost
from simulator.cost.calibrate import PUBLISHED_FILE
from simulator.cost.params import load_params_file


def test_cost_text_and_json():
    r = CliRunner().invoke(
        cost, ["--hardware", "H100", "--model", "Llama-3.1-8B", "--batch", "8", "--context", "4096"]
    )
    assert r.exit_code == 0, r.output
    assert "decode step" in r.output and "KV reads" in r.output
    r = CliRunner().invoke(
        cost,
        [
            "--hardware",
            "h200",
            "--model",
            "Llama-3.1-70B",
            "--tp",
            "4",
            "--batch",
            "32",
            "--context",
            "8000",
            "--prompt",
            "2000",
            "--layout",
            "fp8",
            "--weight-dtype",
            "fp8",
            "--json",
        ],
    )
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    assert out["decode_bound"] in ("memory", "compute", "communication", "overhead")
    assert out["decode_share_comm"] > 0
    shares = sum(
        out[k]
        for k in ("decode_share_weights", "decode_share_kv", "decode_share_comm", "decode_share_overhead")
    )
    assert abs(shares - 1) < 1e-9


def test_cost_config_error_exits_2():
    r = CliRunner().invoke(
        cost, ["--hardware", "H999", "--model", "Llama-3.1-8B", "--batch", "1", "--context", "1"]
    )
    assert r.exit_code == 2 and "unknown node 'H999'; valid: 8xH100" in r.output
    r = CliRunner().invoke(
        cost,
        ["--hardware", "H100", "--model", "Llama-3.1-8B", "--weight-dtype", "int3", "--batch", "1", "--context", "1"],
    )
    assert r.exit_code == 2 and "'int3' is not one of 'bf16', 'fp8', 'fp8-block', 'fp4', 'mxfp4', 'w4a16'" in r.output


def test_calibrate_published_writes_params(tmp_path):
    out = tmp_path / "p.toml"
    r = CliRunner().invoke(calibrate, [str(PUBLISHED_FILE), "--free", "step_overhead_s", "--out", str(out)])
    assert r.exit_code == 0, r.output
    assert "held-out MAPE" in r.output
    ps = load_params_file(out)
    assert ps["H100"].provenance["e2e_free"] == ["step_overhead_s"]


def test_calibrate_needs_a_source():
    r = CliRunner().invoke(calibrate, [])
    assert r.exit_code == 2 and "either FILE or --from-aiconfigurator" in r.output


def test_cost_refuses_weights_that_do_not_fit():
    # Llama-3.1-70B in bf16 on one H100: 141.1 GB of weights against 0.9 · 80 = 72 GB usable
    r = CliRunner().invoke(cost, ["--hardware", "H100", "--model", "Llama-3.1-70B", "--tp", "1", "--batch", "1",
                                  "--context", "1"])
    assert r.exit_code == 2 and "does not fit TP1 on 8xH100" in r.output and "by 69.1 GB" in r.output
    r = CliRunner().invoke(cost, ["--hardware", "H100", "--model", "Llama-3.1-70B", "--tp", "3", "--batch", "1",
                                  "--context", "1"])
    assert r.exit_code == 2
    assert "Error: --tp: plan TP3 for Llama-3.1-70B: must be a divisor of the 64 query heads (got 3)" in r.output
