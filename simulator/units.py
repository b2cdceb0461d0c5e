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


FIGURE_MAX_DIGITS: Final = 6  # significant digits `figure_against` goes up to below 1,000
FIGURE_MAX_DECIMALS: Final = 3  # decimals it goes up to from 1,000 on


def figure_against(x: float, limit: float) -> str:
    """`figure`, with more digits where its own would put `x` on the other side of `limit` (a p99 printed
    beside its SLO: ``10.3`` against 10, where `figure` reads ``10``; ``10.04`` against 10.03; ``1,000.2``
    against 1,000): up to `FIGURE_MAX_DIGITS` significant digits below 1,000 and `FIGURE_MAX_DECIMALS`
    decimals from there, so the figure shown is at most `limit` exactly when `x` is, unless `x` is closer
    to it than those digits tell (``10.0000001`` against 10 reads ``10``). NaN (none measured) as it is."""
    def wrong(shown: str) -> bool:
        return (float(shown.replace(",", "")) <= limit) != (x <= limit)

    shown = figure(x)
    if x != x:
        return shown
    if abs(x) >= 999.5:  # whole numbers with separators, then decimals
        decimals = 0
        while wrong(shown) and decimals < FIGURE_MAX_DECIMALS:
            decimals += 1
            shown = f"{x:,.{decimals}f}"
        return shown
    digits = 3
    while wrong(shown) and digits < FIGURE_MAX_DIGITS:
        digits += 1
        shown = f"{x:.{digits}g}"
    return shown


def measure_against(x: float, limit: float, unit: str) -> str:
    """A measured figure beside its limit, with its unit: ``10.3 ms`` (`figure_against`), or ``n/a`` where none
    was measured (NaN: no request completed, or none made a second token)."""
    return "n/a" if x != x else f"{figure_against(x, limit)} {unit}"
