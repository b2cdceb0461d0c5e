"""Charts: functions take a DataFrame and an optional Axes, return the Axes (or a Figure), never show().

One module per chart family: `collapse` (concurrency collapse), `run` (a scenario run's latency,
time series and fleets), `capacity` (the capacity plan), `sweep` (a metric against a swept key);
`base` holds what they share. `simulator.compare` and `simulator.billing.charts` draw their own.
"""

from simulator.charts.base import close_figure, plain_text
from simulator.charts.capacity import capacity_figure
from simulator.charts.collapse import LAYOUT_COLOURS, collapse_figure, layout_colour, plot_collapse_panel
from simulator.charts.run import (
    CACHE_COLOUR,
    SEQUENCE_COLOUR,
    fleet_figure,
    kv_bands,
    latency_figure,
    timeseries_figure,
)
from simulator.charts.sweep import SWEEP_LABELS, plot_sweep

__all__ = ["CACHE_COLOUR", "LAYOUT_COLOURS", "SEQUENCE_COLOUR", "SWEEP_LABELS", "capacity_figure", "close_figure",
           "collapse_figure", "fleet_figure", "kv_bands", "latency_figure", "layout_colour", "plain_text",
           "plot_collapse_panel", "plot_sweep", "timeseries_figure"]
