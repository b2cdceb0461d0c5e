"""Scores the shipped parameters against aiconfigurator's tables when the package is installed."""

import numpy as np
import pytest

from simulator.cost.params import load_params


def test_shipped_params_score_on_held_out_h100_rows():
    pytest.importorskip("aiconfigurator_core")
    from simulator.cost.aiconfigurator import MIN_FIT_KERNEL_S, _predict, load_rows

    p = load_params("H100")
    recorded = p.provenance
    for rows in load_rows("h100_sxm", "vllm"):
        keep = (rows.holdout != 0) & (rows.measured_s >= MIN_FIT_KERNEL_S)
        err = np.abs(_predict(rows, "H100", p)[keep] / rows.measured_s[keep] - 1).mean()
        key = f"kernels_holdout_mape_{rows.op}"
        assert err == pytest.approx(recorded[key], abs=0.01), rows.op  # reproduces params.toml's provenance
        assert err < 0.5, rows.op  # the truth today: 20-45%, not the 10% target (see README)


def test_missing_package_is_a_config_error(monkeypatch):
    import builtins

    from simulator.cost import aiconfigurator
    from simulator.errors import ConfigError

    real = builtins.__import__

    def fake(name, *a, **k):
        if name.startswith("aiconfigurator"):
            raise ImportError(name)
        return real(name, *a, **k)

    monkeypatch.setattr(builtins, "__import__", fake)
    with pytest.raises(ConfigError, match="not installed"):
        aiconfigurator.data_root()
