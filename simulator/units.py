"""Units, defined once. Names carry their unit (`_bytes`, `_s`, `_tokens`, ...).

Printed output uses decimal GB (1e9) unless it says GiB.
"""

from typing import Final

KB: Final = 10**3
MB: Final = 10**6
GB: Final = 10**9
TB: Final = 10**12
KIB: Final = 2**10
MIB: Final = 2**20
GIB: Final = 2**30
TIB: Final = 2**40

TFLOPS: Final = 1e12  # FLOP/s
PFLOPS: Final = 1e15

MS: Final = 1e-3  # seconds
MINUTE_S: Final = 60.0
HOUR_S: Final = 3600.0

MTOK: Final = 10**6  # tokens in "per million tokens" prices


def figure(x: float) -> str:
    """One printed style for a figure in a table: whole numbers with thousands separators from
    1,000 up (``7,590`` tok/s, not ``7.59e+03``), three significant digits below (``0.282``)."""
    return f"{x:,.0f}" if abs(x) >= 999.5 else f"{x:.3g}"  # 999.6 rounds to 1,000, not 1e+03


FIGURE_MAX_DIGITS: Final = 6  # significant digits `figure_against` goes up to


def figure_against(x: float, limit: float) -> str:
    """`figure`, with more significant digits (up to `FIGURE_MAX_DIGITS`) where three would put `x` on the
    other side of `limit` (a p99 printed beside its SLO: ``10.3`` against 10, where `figure` reads ``10``, and
    ``10.04`` against 10.03, where it reads ``10``): the figure shown is at most `limit` exactly when `x` is."""
    shown = figure(x)
    if abs(x) >= 999.5 or x != x:  # whole numbers beyond; NaN (none measured) as it is
        return shown
    digits = 3
    while (float(shown) <= limit) != (x <= limit) and digits < FIGURE_MAX_DIGITS:
        digits += 1
        shown = f"{x:.{digits}g}"
    return shown
