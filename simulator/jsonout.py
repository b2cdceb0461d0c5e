"""JSON as kvsim writes it (every ``--json``, ``summary.json``, ``scenario.json``): strict JSON, where a figure
not measured (NaN) or without a bound (an infinite ``queue_timeout_s``, a window with no end) is ``null``.

Python's `json` writes them as the bare words ``NaN`` and ``Infinity``, which JSON does not have: JavaScript's
``JSON.parse``, ``jq`` and strict parsers refuse the whole document. NumPy scalars are written as the numbers
they hold.
"""

from __future__ import annotations

import json
import math
from typing import Any


def plain(obj: Any) -> Any:
    """`obj` with every NaN and infinity (float or NumPy scalar) as None, NumPy scalars and arrays as Python
    numbers and lists, tuples as lists; dicts and lists walked through."""
    if isinstance(obj, dict):
        return {k: plain(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [plain(v) for v in obj]
    if hasattr(obj, "tolist") and not isinstance(obj, str):  # a NumPy scalar or array
        return plain(obj.tolist())
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


def dumps(obj: Any, *, default: Any = str, **kwargs: Any) -> str:
    """`json.dumps` of `plain(obj)`; what is not JSON goes through `default` (``str``: a path, a date)."""
    return json.dumps(plain(obj), default=default, **kwargs)
