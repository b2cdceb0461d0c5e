"""What every chart shares: plain text (no mathtext in user strings), closing a figure, token ticks."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any, TypeVar, cast

import matplotlib.pyplot as plt
from matplotlib.figure import Figure
from matplotlib.text import Text

F = TypeVar("F", bound=Callable[..., Any])

#: Meeting the SLOs and missing them, in every chart that tells them apart (compare, capacity, sweep).
MEETS_COLOUR, MISSES_COLOUR = "#2ca02c", "#d62728"


def plain_text(fn: F) -> F:
    """Decorator of a chart function: the texts of the figure it draws are plain, ``$`` included.

    Titles, labels, legends and annotations embed user strings (scenario, file, model, node,
    strategy and profile names); matplotlib reads ``$...$`` as mathtext and a formula it cannot
    parse fails when the figure is laid out or saved, after the tables are written. This is the one
    place that turns parsing off: while `fn` draws (``text.parse_math``, this one setting, not
    `plt.rc_context`, whose exit would also restore ``interactive`` and hide a notebook's later
    charts), and afterwards on every text of its figure but the tick labels, which never hold user
    strings and which a log axis writes as ``$\\mathdefault{10^{2}}$``.
    """

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        parse_math = plt.rcParams["text.parse_math"]
        plt.rcParams["text.parse_math"] = False
        try:
            out = fn(*args, **kwargs)
        finally:
            plt.rcParams["text.parse_math"] = parse_math
        fig = out if isinstance(out, Figure) else getattr(out, "figure", None)
        if fig is not None:
            ticks = {id(t) for ax in fig.axes for axis in (ax.xaxis, ax.yaxis)
                     for tick in (*axis.get_major_ticks(), *axis.get_minor_ticks())
                     for t in (tick.label1, tick.label2)}
            for text in fig.findobj(Text):
                text.set_parse_math(id(text) in ticks and parse_math)
        return out

    return cast(F, wrapper)


def close_figure(fig: Any) -> None:
    """Release a figure the command line drew to a file (a long session must not pile them up)."""
    plt.close(fig)


def tokens_tick(x: float, _pos: int = 0) -> str:
    if x >= 2**20:
        return f"{x / 2**20:g}M"
    if x >= 2**10:
        return f"{x / 2**10:g}k"
    return f"{x:g}"


#: A log axis spanning at most this many decades labels some ticks between its powers of ten too.
MINOR_LABEL_DECADES = 2.0
#: Those between-decade ticks labelled (their leading digit), so that labels never collide; all under half a decade.
MINOR_LABEL_DIGITS = (2, 3, 5)
#: An axis wider than `MINOR_LABEL_DECADES` but at most this many decades (a TTFT of 0.012 to 3 s: 2.4) labels
#: fewer of them, `WIDE_MINOR_LABEL_DIGITS`; a wider one its powers of ten alone.
WIDE_MINOR_LABEL_DECADES = 3.0
WIDE_MINOR_LABEL_DIGITS = (2, 5)


def plain_log_ticks(axis: Any) -> None:
    """Label the log-scaled `axis` (``ax.xaxis``) in plain numbers: 0.1, 1, 20, 300, where matplotlib writes
    10⁻¹ and 2×10¹ and, on an axis of about a decade, prints 3×10¹ over 4×10¹. Powers of ten are always
    labelled; the ticks between them when the axis spans at most `MINOR_LABEL_DECADES` decades, those of
    leading digit `MINOR_LABEL_DIGITS` (every one under half a decade); on an axis of up to
    `WIDE_MINOR_LABEL_DECADES` decades those of leading digit `WIDE_MINOR_LABEL_DIGITS` (0.01 0.02 0.05 0.1 0.2
    0.5 1 2: helper-158, an axis of 0.012 to 3 s labelled only 0.1 and 1, none where most requests lay)."""
    from matplotlib.ticker import FuncFormatter

    def minor(x: float, _pos: int = 0) -> str:
        lo, hi = axis.get_view_interval()
        decades = math.log10(hi / lo) if lo > 0 and hi > lo else math.inf
        if decades > WIDE_MINOR_LABEL_DECADES:
            return ""
        digit = round(x / 10 ** math.floor(math.log10(x) + 1e-9))
        digits = MINOR_LABEL_DIGITS if decades <= MINOR_LABEL_DECADES else WIDE_MINOR_LABEL_DIGITS
        return f"{x:g}" if decades < 0.5 or digit in digits else ""

    axis.set_major_formatter(FuncFormatter(lambda x, _pos=0: f"{x:g}"))
    axis.set_minor_formatter(FuncFormatter(minor))
