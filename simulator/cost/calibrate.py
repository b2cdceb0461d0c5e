"""Calibrate `CostParams` to measured step, kernel or end-to-end figures in a CSV file.

Format (one row per measurement; ``measured_s`` or ``tokens_per_s``, the other empty or its column
left out: a file of step times may have no ``tokens_per_s`` column at all)::

    gpu,model,tp,phase,batch,new_tokens,context,measured_s,tokens_per_s,source[,dtype,layout,output_tokens,gpus,split]

Every value is checked when the file is read, each error naming the file, the row and the column:
``tp`` and ``batch`` whole numbers >= 1, ``new_tokens`` and ``context`` whole numbers >= 0,
``measured_s``/``tokens_per_s`` finite and > 0, a ``decode`` row's ``new_tokens`` 0 or 1, and the row must
price (a known GPU and model, a plan the model's shapes allow, weights that fit) and, for a whole step
(``prefill``, ``decode``), hold its batch's KV beside the weights in its GPUs' HBM (`_check_holds`).

``phase``:
- ``prefill``: one step prefilling ``batch`` chunks of ``new_tokens`` after ``context`` each;
- ``decode``: one decode step of ``batch`` sequences at ``context`` tokens each;
- ``attention_prefill`` / ``attention_decode``: one layer's attention kernel for the same
  shapes (``attention_decode`` reads ``new_tokens`` query tokens per sequence, default 1);
- ``throughput``: end-to-end output ``tokens_per_s`` of ``gpus`` GPUs (default one replica's) at
  ``new_tokens`` in, ``output_tokens`` out (required), batch capped at ``batch`` (`simulator.cost.throughput`).

``dtype`` is the weights' storage format (default the model's; the GEMMs compute in
`simulator.models.gemm_dtype` of it), ``layout`` a KV layout
(`simulator.kv.parse_layout`), ``split`` ``train`` or ``test``; without it one row in
``HOLDOUT_EVERY`` (by a hash of the row) is held out. Fits run per GPU.

The shipped step overheads are refitted on the published set (the second step of ``make calibrate``, after the
kernel fit, `simulator.cost.aiconfigurator`) with::

    kvsim calibrate simulator/cost/published.csv --free step_overhead_s --out simulator/cost/params.toml --force

(without ``--free`` a GPU frees one of `DEFAULT_FREE` per `ROWS_PER_FREE` training rows, `default_free`: the
H100's five would refit its decode memory efficiency beside the step overhead, not the shipped fit.)
"""

from __future__ import annotations

import csv
import io
import math
import zlib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from hardware.catalog import load_catalog
from simulator.cost.fit import fit_params
from simulator.cost.params import FITTABLE, CostParams, load_params
from simulator.cost.step_model import StepModel
from simulator.cost.throughput import throughput_tokens_per_s
from simulator.errors import ConfigError, DoesNotFitError, KvsimError, shown
from simulator.files import read_text
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
MEASURES = ("measured_s", "tokens_per_s")  # one of these columns at least; the other may be left out
OPTIONAL = ("dtype", "layout", "output_tokens", "gpus", "split")
# whole-number columns and their least value (empty allowed where the model has a default)
WHOLE = {"tp": 1, "batch": 1, "new_tokens": 0, "context": 0, "output_tokens": 1, "gpus": 1}
PHASES = ("prefill", "decode", "attention_prefill", "attention_decode", "throughput")
HOLDOUT_EVERY = 4
# freed in this order while a GPU has training rows enough for them (`default_free`)
DEFAULT_FREE = (
    "step_overhead_s",
    "decode_memory_eff",
    "gemm_memory_eff",
    "attn_compute_eff",
    "gemm_compute_eff",
)
# training rows each parameter freed by default needs: p parameters fitted to 2p rows leave p residuals to judge
# them by, where p = rows fits every file exactly whatever the parameters (helper-187: five H100 decode rows, which
# barely see the GEMMs' compute, freed gemm_compute_eff and drove it from 0.80 to 0.26, every row within 3%)
ROWS_PER_FREE = 2


def read_rows(path: Path) -> pd.DataFrame:
    """Read and validate a calibration CSV; errors name the file, row and column."""
    text = read_text(path, "a calibration CSV")
    try:
        # only an empty cell is missing: "nan" or "NA" written in a cell is a value to refuse, not an absent one
        # (helper-119: measured_s = nan read "give exactly one of 'measured_s' and 'tokens_per_s'")
        df = pd.read_csv(io.StringIO(text), comment="#", skipinitialspace=True, keep_default_na=False,
                         na_values=[""])
    except (pd.errors.ParserError, pd.errors.EmptyDataError, csv.Error) as exc:
        raise ConfigError(f"{path}: not a calibration CSV ({shown(str(exc).strip())})") from None
    if not isinstance(df.index, pd.RangeIndex):  # pandas took a row's fields beyond the header for an index
        raise ConfigError(f"{_long_row(path, text)}: more fields than the header's {len(df.columns)} columns; give "
                          "each row one value a column (a comma inside a value needs quotes)")
    df.columns = [str(c).strip() for c in df.columns]
    required = [c for c in REQUIRED if c not in MEASURES]
    missing = [c for c in required if c not in df.columns]
    if missing:
        raise ConfigError(f"{path}: missing column {missing[0]!r}; required: {', '.join(required)} and "
                          "measured_s or tokens_per_s")
    if not any(c in df.columns for c in MEASURES):
        raise ConfigError(f"{path}: missing column 'measured_s' (or 'tokens_per_s' for throughput rows)")
    unknown = [c for c in df.columns if c not in REQUIRED + OPTIONAL]
    if unknown:
        raise ConfigError(f"{path}: unknown column {shown(unknown[0])}; valid: {', '.join(REQUIRED + OPTIONAL)}")
    if df.empty:
        raise ConfigError(f"{path}: no rows after the header; give one measurement a row")
    for c in (*MEASURES, *OPTIONAL):
        if c not in df.columns:
            df[c] = np.nan
    # each row's line in the file (the header and rows are its lines neither blank nor a comment: pandas skips
    # those), so that an error reads ``file.csv:6:`` as a trace's does (helper-119: "row 3" was line 6)
    lines = [n for n, line in enumerate(text.splitlines(), 1) if line.strip() and not line.lstrip().startswith("#")]
    for i, r in df.iterrows():
        at = int(str(i)) + 1
        where = f"{path}:{lines[at]}" if at < len(lines) else f"{path}: row {at + 1}"
        _check_numbers(r, where)
        if r["phase"] not in PHASES:
            raise ConfigError(f"{where}: 'phase' must be one of {', '.join(PHASES)} (got {shown(r['phase'])})")
        has_s, has_tps = pd.notna(r["measured_s"]), pd.notna(r["tokens_per_s"])
        if has_s == has_tps:
            raise ConfigError(f"{where}: give exactly one of 'measured_s' and 'tokens_per_s'")
        if (r["phase"] == "throughput") != has_tps:
            raise ConfigError(f"{where}: 'tokens_per_s' goes with phase 'throughput', 'measured_s' with the rest")
        if r["phase"] == "throughput" and pd.isna(r["output_tokens"]):  # (helper-183: it was priced at 1 output token)
            raise ConfigError(f"{where}: a 'throughput' row needs 'output_tokens', the output tokens of each request "
                              "of the benchmark (its 'new_tokens' are their input tokens)")
        if pd.notna(r["split"]) and r["split"] not in ("train", "test"):
            raise ConfigError(f"{where}: 'split' must be 'train' or 'test' (got {shown(r['split'])})")
        if r["phase"] == "decode" and pd.notna(r["new_tokens"]) and int(r["new_tokens"]) > 1:
            raise ConfigError(f"{where}: 'new_tokens' must be 0 or 1 for phase 'decode' (a decode step adds one "
                              "token a sequence; phase 'prefill' or 'attention_decode' takes more) (got "
                              f"{shown(r['new_tokens'])})")
        try:  # a row the model cannot price (unknown GPU or model, a plan its shapes rule out) fails here
            value = predict_row(r, load_params(load_catalog().gpu(str(r["gpu"])).key))
            _check_holds(r)
        except KvsimError as exc:
            raise ConfigError(f"{where}: {exc}") from None
        if not (math.isfinite(value) and value > 0):
            raise ConfigError(f"{where}: the model prices this row at {value!r}; check its shapes")
    holdout = [
        (r["split"] == "test")
        if pd.notna(r["split"])
        else zlib.crc32("|".join(str(r[c]) for c in REQUIRED[:7]).encode()) % HOLDOUT_EVERY == 0
        for _, r in df.iterrows()
    ]
    df["holdout"] = holdout
    return df


def _long_row(path: Path, text: str) -> str:
    """``file:line`` of the first row with more fields than the header (its lines neither blank nor a comment, as
    pandas reads them), or the file alone where none is found on its own line (a quoted line break)."""
    width = None
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        fields = len(next(csv.reader([line], skipinitialspace=True)))
        if width is None:
            width = fields
        elif fields > width:
            return f"{path}:{n}"
    return str(path)


def _check_numbers(r: pd.Series, where: str) -> None:
    """The row's numbers: whole counts at least their least value, measurements finite and > 0."""
    for c, least in WHOLE.items():
        v = r[c]
        if c in ("tp", "batch") or pd.notna(v):
            x = pd.to_numeric(v, errors="coerce")
            if not (pd.notna(x) and math.isfinite(x) and x == int(x) and x >= least):
                raise ConfigError(f"{where}: {c!r} must be a whole number >= {least} (got {shown(v)})")
    for c in MEASURES:
        v = r[c]
        if pd.notna(v):
            x = pd.to_numeric(v, errors="coerce")
            if not (pd.notna(x) and math.isfinite(x) and x > 0):
                raise ConfigError(f"{where}: {c!r} must be a finite number > 0 (got {shown(v)})")


def _check_holds(r: pd.Series) -> None:
    """A whole step's sequences must fit its GPUs: the weights and ``batch`` sequences' KV at ``context +
    new_tokens`` tokens within their whole HBM (`simulator.capacity.check_batch` at a memory utilisation of 1: a
    step that was measured ran, so it fit), else `DoesNotFitError` saying by how much (helper-150: a decode row at
    999,999,999 tokens, a petabyte of KV, was fitted at 41,761 times its time, exit 0). An attention kernel's row
    is one layer's and a throughput row runs its own batch: not checked."""
    from simulator.capacity import check_batch, kv_budget

    if r["phase"] not in ("prefill", "decode"):
        return
    model = get_model(str(r["model"]))
    layout = parse_layout(str(r["layout"])) if pd.notna(r["layout"]) else parse_layout("native")
    budget = kv_budget(load_catalog().node(str(r["gpu"])), model, int(r["tp"]), 1.0,
                       weight_dtype=None if pd.isna(r["dtype"]) else str(r["dtype"]))
    try:
        check_batch(budget, model, layout, _int(r["context"], 0) + _int(r["new_tokens"], 0), int(r["batch"]))
    except DoesNotFitError as exc:  # the format has no DP attention, whose GPUs each hold their own (helper-153)
        raise DoesNotFitError(f"{exc} (the row is priced as tensor parallel: a step measured under DP attention, "
                              "each GPU holding its own sequences, is not one this format can state)") from None


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
    if phase == "decode":  # (a context shorter than a window: at what it reads, `StepModel.priced_context`)
        return sm.decode_step_s(b, b * sm.priced_context(c))
    if phase == "attention_prefill":
        return sm.attention_layer_s([(n, c)] * b)
    if phase == "attention_decode":
        return sm.attention_layer_s((), b, b * sm.priced_context(c), query_tokens=max(1, n))
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


def default_free(n_train: int) -> tuple[str, ...]:
    """The parameters a GPU with `n_train` training rows frees without ``--free``: the first
    ``min(len(DEFAULT_FREE), max(1, n_train // ROWS_PER_FREE))`` of `DEFAULT_FREE`, so one, the step overhead (an
    offset every step pays), from one row on, and never more than half the rows (1 row: 1; 5 rows: 2; 10 or more: 5).
    """
    return DEFAULT_FREE[: min(len(DEFAULT_FREE), max(1, n_train // ROWS_PER_FREE))]


def calibrate(df: pd.DataFrame, base: dict[str, CostParams], free: tuple[str, ...] | None = None) -> Calibration:
    """Fit each GPU's parameters on its training rows (``holdout`` false). A GPU the rows do not name keeps its
    parameters, but one with no step overhead fitted of its own (its provenance's ``e2e_free``) takes the
    median of the fitted GPUs' (`Calibration.borrowed`).

    With `free` given, every GPU frees exactly those and `ConfigError` is raised when a GPU has
    fewer training rows than free parameters; by default a GPU frees `default_free` of its
    training rows. The relative error of a throughput row is on its time per token.
    """
    if free is not None:
        bad = [f for f in free if f not in FITTABLE]
        if bad:
            raise ConfigError(f"--free: cannot fit {shown(bad[0])}; fittable: {', '.join(FITTABLE)}")
    cat = load_catalog()
    out: dict[str, CostParams] = dict(base)
    freed: dict[str, tuple[str, ...]] = {}
    for gpu_name, g in df.groupby("gpu", sort=True):
        key = cat.gpu(str(gpu_name)).key
        start = base.get(key) or replace(base["default"], gpu=key)
        train = g[~g["holdout"]]
        names = free if free is not None else default_free(len(train))
        if not len(train):
            raise ConfigError(f"fit for {key}: no training rows (all {len(g)} are held out)")
        measured = np.array([_measured_s_like(r) for _, r in train.iterrows()])

        def model(p: CostParams, train: pd.DataFrame = train) -> np.ndarray:
            return np.array([_predicted_s_like(r, p) for _, r in train.iterrows()])

        try:
            res = fit_params(start, tuple(names), model, measured)
        except (KvsimError, ValueError) as exc:  # scipy: residuals not finite at the start
            raise ConfigError(f"fit for {key}: {exc}") from None
        out[key] = res.params
        freed[key] = tuple(names)
    borrowed: dict[str, str] = {}
    # a GPU FILE does not name borrows the median step overhead only if it has none fitted of its own (helper-119:
    # one H100 file overwrote B200's own fit, -11% on its decode step, without a word); the median is over every
    # GPU with its own, fitted now or kept
    own = {k for k in out if k != "default" and k not in freed
           and "step_overhead_s" in out[k].provenance.get("e2e_free", ())}
    fitted = {k for k, names in freed.items() if "step_overhead_s" in names}
    if fitted:
        shared = float(np.median([out[k].step_overhead_s for k in sorted(fitted | own)]))
        for key in out:
            if key not in freed and key != "default" and key not in own:
                out[key] = replace(out[key], step_overhead_s=shared)
                borrowed[key] = f"step_overhead_s = median of the fitted GPUs ({', '.join(sorted(fitted | own))})"
    rows = df.copy()
    rows["gpu"] = [cat.gpu(str(x)).key for x in rows["gpu"]]
    pred = [_predicted_s_like(r, out[r["gpu"]]) for _, r in rows.iterrows()]
    rows["predicted_s"] = pred
    rows["rel_error"] = [p / _measured_s_like(r) - 1 for p, (_, r) in zip(pred, rows.iterrows(), strict=True)]
    return Calibration(params=out, rows=rows, free=freed, borrowed=borrowed)
