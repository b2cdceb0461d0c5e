"""A file of reuse gaps in seconds, as ``kvsim breakeven --gaps FILE`` reads it.

Two shapes, nothing guessed:

* one number a line (``np.savetxt`` of a vector, ``printf '100\\n250\\n'``);
* a table whose gaps are its first numeric column, with or without a header row.

The separator is decided from the first data line, in this order: a comma, a tab, a semicolon,
else runs of blanks; every line is split the same way. A digit is never a separator (the csv
sniffer's guess, which read ``100`` as ``1``, ``0``, ``0``). The first row is a header when none of
its fields is a number. The gaps column is the first field of the first data row that is a number;
every later row must hold a number there. Numbers are parsed by Python's `float` (correctly
rounded: ``%.18e`` text reads back to the very float written). Blank lines and lines starting with
``#`` (``np.savetxt``'s header) are skipped; line numbers in errors count every line of the file.
Each gap must be a finite number of seconds >= 0: ``nan``, ``inf`` and ``-5`` are refused with
their line, never dropped.
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from simulator.errors import ConfigError, shown
from simulator.files import read_text, shown_path

SEPARATORS = (",", "\t", ";")  # in order of precedence; none of them: blanks separate
RULE = "a finite number of seconds >= 0"


def _number(field: str) -> float | None:
    try:
        return float(field)
    except ValueError:
        return None


def _separator(line: str) -> str | None:
    """The first of `SEPARATORS` in `line`, or None for blank-separated fields."""
    return next((sep for sep in SEPARATORS if sep in line), None)


def _fields(line: str, sep: str | None) -> list[str]:
    if sep is None:
        return line.split()
    return [f.strip() for f in next(csv.reader([line], delimiter=sep))]


def _data_lines(text: str) -> list[tuple[int, str]]:
    """``(line number, line)`` of each line that is neither blank nor a ``#`` comment."""
    return [(n, line) for n, line in enumerate(text.splitlines(), start=1)
            if line.strip() and not line.lstrip().startswith("#")]


def read_gaps(path: str | Path) -> np.ndarray:
    """The gaps of `path` in seconds, in file order (see the module docstring for the format).

    Raises `ConfigError` naming the file, the line, the value and the rule on anything else:
    no data line, a row without a number in the gaps column, a gap that is not finite or < 0.
    """
    where = f"--gaps {shown_path(path)}"
    lines = _data_lines(read_text(path, "a gaps file"))
    if not lines:
        raise ConfigError(f"{where}: no gaps found; the file must hold one gap in seconds a line, "
                          "or a CSV whose first numeric column holds them")
    sep = _separator(lines[0][1])
    rows = [(n, _fields(line, sep)) for n, line in lines]
    if all(_number(f) is None for f in rows[0][1]):  # a header row
        rows = rows[1:]
        if not rows:
            raise ConfigError(f"{where}: a header line and no gaps under it")
    first = rows[0][1]
    column = next((i for i, f in enumerate(first) if _number(f) is not None), 0)
    gaps = np.empty(len(rows))
    for k, (n, fields) in enumerate(rows):
        field = fields[column] if column < len(fields) else ""
        value = _number(field)
        if value is None:
            at = f" (column {column + 1}, the first numeric one)" if column else ""
            raise ConfigError(f"{where}: line {n}: the gap{at} must be a number of seconds (got {shown(field)})")
        if not (np.isfinite(value) and value >= 0):
            raise ConfigError(f"{where}: line {n}: the gap must be {RULE} (got {shown(field)})")
        gaps[k] = value
    return gaps
