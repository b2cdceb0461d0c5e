"""The README's decode-MFU figure (`simulator/cost/figures.py`) says what its lines are and labels context as
the other charts do (helper-158)."""

import matplotlib.pyplot as plt
import pytest

from simulator.cost import step_model
from simulator.cost.figures import FIT_NOTE, decode_mfu_table, plot_decode_mfu

BATCHES, CONTEXTS = [1, 8, 32, 128, 256], [512, 2048, 8192, 32768, 131072]


def test_decode_mfu_figure_labels_contexts_in_tokens_and_says_lines_stop_where_batches_stop_fitting():
    """docs/figures/decode_mfu_llama8b_h100.png read 2⁹…2¹⁷ where every other chart writes 512 … 128k, and its
    title (the one its docstring passes) dropped "(batches that fit)", so nothing said why batch 128's line
    stops at 2k and batch 256 is one point. Its numbers are what they were: 27% MFU for batch 256 at 512
    tokens, under 5% for every batch that fits at 8k and more."""
    table = decode_mfu_table(step_model("H100", "Llama-3.1-8B"), BATCHES, CONTEXTS)
    ax = plot_decode_mfu(table, title="Decode MFU of Llama-3.1-8B bf16 on one H100")
    fig = ax.figure
    fig.canvas.draw()
    assert ax.get_title() == f"Decode MFU of Llama-3.1-8B bf16 on one H100\n({FIT_NOTE})"
    assert "batches that fit" in FIT_NOTE
    assert [t.get_text() for t in ax.get_xticklabels() if t.get_text()] == ["512", "2k", "8k", "32k", "128k"]
    assert ax.get_xlabel() == "context tokens per sequence (log)" and ax.get_ylabel() == "decode MFU (%)"
    lines = {line.get_label(): line for line in ax.lines}
    assert list(lines["batch 256"].get_xdata()) == [512]
    assert list(lines["batch 128"].get_xdata()) == [512, 2048]
    assert list(lines["batch 1"].get_xdata()) == CONTEXTS
    assert lines["batch 256"].get_ydata()[0] == pytest.approx(27.0, abs=0.1)
    assert (table[table.context_tokens >= 8192].mfu < 0.05).all()
    legend = ax.get_legend().get_window_extent()
    assert legend.x0 > ax.get_window_extent().x1  # right of the panel, off the lines
    plt.close(fig)
