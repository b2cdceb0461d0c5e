"""Calibrate `CostParams` to measured step, kernel or end-to-end figures in a CSV file.

Format (one row per measurement; ``measured_s`` or ``tokens_per_s``, the other empty)::

    gpu,model,tp,phase,batch,new_tokens,context,measured_s,tokens_per_s,source[,dtype,layout,output_tokens,gpus,split]

``phase``:
- ``prefill``: one step prefilling ``batch`` chunks of ``new_tokens`` after ``context`` each;
- ``decode``: one decode step of ``batch`` sequences at ``context`` tokens each;
- ``attention_prefill`` / ``attention_decode``: one layer's attention kernel for the same
  shapes (``attention_decode`` reads ``new_tokens`` query tokens per sequence, default 1);
- ``throughput``: end-to-end output ``tokens_per_s`` of ``gpus`` GPUs at ``new_tokens`` in,
  ``output_tokens`` out, batch capped at ``batch`` (`simulator.cost.throughput`).

``dtype`` is the weight/GEMM dtype (default the model's), ``layout`` a KV layout
(`simulator.kv.parse_layout`), ``split`` ``train`` or ``test``; without it one row in
``HOLDOUT_EVERY`` (by a hash of the row) is held out. Fits run per GPU.

The shipped published set is refitted with::

    kvsim calibrate simulator/cost/published.csv --params simulator/cost/params.toml \
        --out simulator/cost/params.toml
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from hardware.catalog import load_catalog
from simulator.cost.fit import fit_params
from simulator.cost.params import FITTABLE, CostParams
from simulator.cost.step_model import StepModel
from simulator.cost.throughput import throughput_tokens_per_s
from simulator.errors import ConfigError, KvsimError
from simulator.kv import parse_layout
from simulator.models import get_model

PUBLISHED_FILE = Path(__file__).parent / "published.csv"
REQUIRED = (
    "gpu",
    "model",
    "tp",
    "phase",
    "batch",
    "new_tokens",
    "context",
    "measured_s",
    "tokens_per_s",
    "source",
)
OPTIONAL = ("dtype", "layout", "output_tokens", "gpus", "split")
PHASES = ("prefill", "decode", "attention_prefill", "attention_decode", "throughput")
HOLDOUT_EVERY = 4
# freed in this order while a GPU has training points for them
DEFAULT_FREE = (
    "step_overhead_s",
    "decode_memory_eff",
    "gemm_memory_eff",
    "attn_compute_eff",
    "gemm_compute_eff",
)


def read_rows(path: Path) -> pd.DataFrame:
    """Read and validate a calibration CSV; errors name the file, row and column."""
    try:
        df = pd.read_csv(path, comment="#", skipinitialspace=True)
    except FileNotFoundError:
        raise ConfigError(f"{path}: file not found") from None
    except (pd.errors.ParserError, pd.errors.EmptyDataError) as exc:
        raise ConfigError(f"{path}: not a calibration CSV ({str(exc).strip()})") from None
    missing = [c for c in REQUIRED if c not in df.columns]
    if missing:
        raise ConfigError(f"{path}: missing column {missing[0]!r}; required: {', '.join(REQUIRED)}")
    unknown = [c for c in df.columns if c not in REQUIRED + OPTIONAL]
    if unknown:
        raise ConfigError(f"{path}: unknown column {unknown[0]!r}; valid: {', '.join(REQUIRED + OPTIONAL)}")
    for c in OPTIONAL:
        if c not in df.columns:
            df[c] = np.nan
    for i, r in df.iterrows():
        where = f"{path}: row {int(str(i)) + 2}"
        if r["phase"] not in PHASES:
            raise ConfigError(f"{where}: 'phase' must be one of {PHASES} (got {r['phase']!r})")
        has_s, has_tps = pd.notna(r["measured_s"]), pd.notna(r["tokens_per_s"])
        if has_s == has_tps:
            raise ConfigError(f"{where}: give exactly one of 'measured_s' and 'tokens_per_s'")
        if (r["phase"] == "throughput") != has_tps:
            raise ConfigError(f"{where}: 'tokens_per_s' goes with phase 'throughput', 'measured_s' with the rest")
        if pd.notna(r["split"]) and r["split"] not in ("train", "test"):
            raise ConfigError(f"{where}: 'split' must be 'train' or 'test' (got {r['split']!r})")
    holdout = [
        (r["split"] == "test")
        if pd.notna(r["split"])
        else zlib.crc32("|".join(str(r[c]) for c in REQUIRED[:7]).encode()) % HOLDOUT_EVERY == 0
        for _, r in df.iterrows()
    ]
    df["holdout"] = holdout
    return df


def _int(v: Any, default: int) -> int:
    return default if pd.isna(v) else int(v)


def predict_row(r: pd.Series, p: CostParams) -> float:
    """The model's figure for one row: seconds, or tokens/s for ``throughput`` rows."""
    gpu = load_catalog().gpu(str(r["gpu"]))
    model = get_model(str(r["model"]))
    layout = parse_layout(str(r["layout"])) if pd.notna(r["layout"]) else None
    sm = StepModel(gpu, model, layout, int(r["tp"]), p, None if pd.isna(r["dtype"]) else str(r["dtype"]))
    b, n, c, phase = int(r["batch"]), _int(r["new_tokens"], 0), _int(r["context"], 0), r["phase"]
    if phase == "prefill":
        return sm.step_s([(n, c)] * b, 0, 0.0)
    if phase == "decode":
        return sm.decode_step_s(b, b * c)
    if phase == "attention_prefill":
        return sm.attention_layer_s([(n, c)] * b)
    if phase == "attention_decode":
        return sm.attention_layer_s((), b, b * c, query_tokens=max(1, n))
    return throughput_tokens_per_s(sm, n, _int(r["output_tokens"], 1), b, _int(r["gpus"], int(r["tp"])))


def _measured_s_like(r: pd.Series) -> float:
    return float(r["measured_s"]) if pd.notna(r["measured_s"]) else 1.0 / float(r["tokens_per_s"])


def _predicted_s_like(r: pd.Series, p: CostParams) -> float:
    v = predict_row(r, p)
    return 1.0 / v if r["phase"] == "throughput" else v


@dataclass(frozen=True, slots=True, kw_only=True)
class Calibration:
    """Fitted parameters per GPU and a report row per data row."""

    params: dict[str, CostParams]
    rows: pd.DataFrame  # input rows + predicted, rel_error
    free: dict[str, tuple[str, ...]] = field(default_factory=dict)
    borrowed: dict[str, str] = field(default_factory=dict)  # GPU -> how its step overhead was set

    def summary(self) -> pd.DataFrame:
        """MAPE and max |error| per GPU, for fitted and held-out rows."""
        d = self.rows.assign(
            abs_err=self.rows["rel_error"].abs(), set=np.where(self.rows["holdout"], "held-out", "fit")
        )
        return d.groupby(["gpu", "set"])["abs_err"].agg(mape="mean", max_error="max", rows="count").reset_index()


def calibrate(df: pd.DataFrame, base: dict[str, CostParams], free: tuple[str, ...] | None = None) -> Calibration:
    """Fit each GPU's parameters on its training rows (``holdout`` false).

    With `free` given, every GPU frees exactly those and `ConfigError` is raised when a GPU has
    fewer training rows than free parameters; by default a GPU frees the first ``n_train`` of
    `DEFAULT_FREE`. The relative error of a throughput row is on its time per token.
    """
    if free is not None:
        bad = [f for f in free if f not in FITTABLE]
        if bad:
            raise ConfigError(f"cannot fit {bad[0]!r}; fittable: {', '.join(FITTABLE)}")
    cat = load_catalog()
    out: dict[str, CostParams] = dict(base)
    freed: dict[str, tuple[str, ...]] = {}
    for gpu_name, g in df.groupby("gpu", sort=True):
        key = cat.gpu(str(gpu_name)).key
        start = base.get(key) or replace(base["default"], gpu=key)
        train = g[~g["holdout"]]
        names = free if free is not None else DEFAULT_FREE[: min(len(train), len(DEFAULT_FREE))]
        if not len(train):
            raise ConfigError(f"fit for {key}: no training rows (all {len(g)} are held out)")
        measured = np.array([_measured_s_like(r) for _, r in train.iterrows()])

        def model(p: CostParams, train: pd.DataFrame = train) -> np.ndarray:
            return np.array([_predicted_s_like(r, p) for _, r in train.iterrows()])

        try:
            res = fit_params(start, tuple(names), model, measured)
        except KvsimError as exc:
            raise ConfigError(f"fit for {key}: {exc}") from None
        out[key] = res.params
        freed[key] = tuple(names)
    borrowed: dict[str, str] = {}
    overheads = [out[k].step_overhead_s for k, names in freed.items() if "step_overhead_s" in names]
    if overheads:
        shared = float(np.median(overheads))
        for key in out:
            if key not in freed and key != "default":
                out[key] = replace(out[key], step_overhead_s=shared)
                borrowed[key] = f"step_overhead_s = median of the fitted GPUs ({', '.join(sorted(freed))})"
    rows = df.copy()
    rows["gpu"] = [cat.gpu(str(x)).key for x in rows["gpu"]]
    pred = [_predicted_s_like(r, out[r["gpu"]]) for _, r in rows.iterrows()]
    rows["predicted_s"] = pred
    rows["rel_error"] = [p / _measured_s_like(r) - 1 for p, (_, r) in zip(pred, rows.iterrows(), strict=True)]
    return Calibration(params=out, rows=rows, free=freed, borrowed=borrowed)
