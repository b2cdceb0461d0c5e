"""A user audit's chart findings: MLA's KV per GPU beside its total, SLO misses on the sweep charts,
collapse charts small enough to read whole.

1. ``kvsim compare`` gave ``prefix+mla`` a ``memory_factor`` of 0.0352 against GQA's 0.125 and the
   collapse legend "mla (92 kB/token)" against "native (328 kB/token)": both read as MLA saving
   memory, but under TP8 the latent is whole on every GPU (92 kB a token on each, GQA 41 kB), so MLA
   holds fewer streams. The figures now say they are totals and give the per-GPU one beside them.
2. The sweep's cost chart drew the cheapest point (goodput 0.17, p99 TTFT 223 s) like the others.
   A later review (helper-158): a share's axis cut at 0.6, a line hidden under another, raw keys in
   the legend, a legend beside the plot on some charts and inside it on others, a linear axis over
   two decades, a cost axis from 12.9, titles without the model or fleet.
3. The collapse chart of three node kinds was 2,354 px wide.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
import pytest
from click.testing import CliRunner

from hardware.catalog import load_catalog
from simulator.charts import collapse_figure, plot_collapse_panel, plot_sweep
from simulator.charts.base import MISSES_COLOUR
from simulator.cli.compare import compare
from simulator.collapse import collapse_table
from simulator.compare import compare_strategies
from simulator.engine import EngineConfig
from simulator.models import get_model
from simulator.placement import ParallelPlan
from simulator.scenario import load_scenario
from simulator.sweep import sweep_setting
from workloads import load_workload

SCENARIOS = Path(__file__).resolve().parents[1] / "scenarios"
L70 = get_model("Llama-3.1-70B")  # 80 layers, 8 KV heads of 128 (K and V), bf16: 327,680 B a token


# --- 1. per token, and on each GPU ------------------------------------------------------------

def test_the_collapse_table_gives_a_tokens_kv_on_one_gpu() -> None:
    """Under TP8 one GPU holds 1 of the 8 KV heads: 327,680 / 8 = 40,960 B a token; an MLA retrofit's
    latent (512 + 64 values · 2 B · 80 layers = 92,160 B) is whole on every GPU. DeepSeek-V3's own
    latent (576 · 61 layers · 2 B = 70,272 B) is whole on a GPU under TP8 and under DP8 attention."""
    df = collapse_table(load_catalog(), L70, ["8xH100"], ["native", "mla"]).drop_duplicates("layout")
    got = df.set_index("layout")[["bytes_per_token", "bytes_per_token_per_gpu"]].to_dict("index")
    assert got == {"native": {"bytes_per_token": 327_680, "bytes_per_token_per_gpu": 40_960},
                   "mla": {"bytes_per_token": 92_160, "bytes_per_token_per_gpu": 92_160}}
    ds = collapse_table(load_catalog(), get_model("DeepSeek-V3"), ["8xH200"], ["native"],
                        plans=[ParallelPlan(tp=8), ParallelPlan(tp=8, dp_attention=True, ep=8)])
    assert set(ds.bytes_per_token_per_gpu) == set(ds.bytes_per_token) == {70_272}


def test_the_collapse_legend_says_a_tokens_kv_and_what_each_gpu_holds() -> None:
    ax = plot_collapse_panel(collapse_table(load_catalog(), L70, ["8xH100"], ["native", "mla"]))
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    # (an MLA latent whole on each of eight GPUs holds no stream from 623k tokens on: its line is marked there)
    assert labels == ["native (328 kB/token, 41 kB on each GPU)", "mla (92 kB/token, 92 kB on each GPU)",
                      "no stream fits from here on (in its line's colour)"]
    assert ax.get_legend().get_title().get_text() == "KV layout (under TP8)"
    plt.close(ax.figure)


def test_the_collapse_legend_tells_windowed_layouts_apart() -> None:
    """helper-143: Gemma-3-27B's native, compress:8:4096 and no-sliding lines all read "508 kB/token" (every
    layer's bytes, before windows). A windowed layout is said as what a token adds past its windows and what
    they hold: native's 10 global layers take 8,192 B a token each (K and V, 16 heads of 128 dims), 81,920 B;
    its 52 sliding layers hold 1,024 tokens each, 52 × 1,024 × 8,192 B = 436 MB; under TP8 an eighth of each.
    compress:8:4096 keeps 4,096 tokens of the 10 global layers whole and one entry in 8 past them: 10 × 8,192 / 8
    = 10,240 B a token, and 10 × 8,192 × 4,096 × 7/8 = 294 MB beside the sliding layers' 436 MB, 730 MB (733 MB
    from block-rounded stream sizes, helper-188)."""
    df = collapse_table(load_catalog(), get_model("Gemma-3-27B"), ["8xB200"], ["native", "compress:8:4096",
                                                                              "no-sliding"])
    ax = plot_collapse_panel(df)
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels == ["native (82 kB/token + 436 MB, 10 kB + 55 MB on each GPU)",
                      "compress:8:4096 (10 kB/token + 730 MB, 1 kB + 91 MB on each GPU)",
                      "no-sliding (508 kB/token, 63 kB on each GPU)"]
    plt.close(ax.figure)


def test_the_windowed_legend_gives_the_exact_bytes_not_the_block_rounded_ones() -> None:
    """helper-188: Llama-3.1-70B's compress:8:4096 read "+ 1,187 MB", from stream sizes rounded up to whole
    16-token blocks. Exactly: 327,680 B a token, one entry in 8 past a 4,096-token window, so a token adds
    327,680 / 8 = 40,960 B and the window holds 327,680 × 4,096 × 7/8 = 1,174,405,120 B more than those
    (under TP8 an eighth: 5,120 B and 147 MB). At 1,048,576 tokens: 4,096 + 1,044,480 / 8 = 134,656 entries,
    44,124,078,080 B, a whole number of blocks (both columns agree); at 741,455: 4,096 + ceil(737,359 / 8) =
    96,266 entries unpaged, 96,272 in blocks."""
    df = collapse_table(load_catalog(), get_model("Llama-3.1-70B"), ["8xH100"], ["native", "compress:8:4096"])
    ax = plot_collapse_panel(df)
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels[:2] == ["native (328 kB/token, 41 kB on each GPU)",
                          "compress:8:4096 (41 kB/token + 1,174 MB, 5 kB + 147 MB on each GPU)"]
    plt.close(ax.figure)
    at = df[df.layout == "compress:8:4096"].set_index("context_tokens")
    assert at.stream_bytes_unpaged[1_048_576] == at.stream_bytes[1_048_576] == 134_656 * 327_680 == 44_124_078_080
    assert (at.stream_bytes_unpaged[741_455], at.stream_bytes[741_455]) == (96_266 * 327_680, 96_272 * 327_680)


def test_the_readme_names_collapse_csvs_byte_columns() -> None:
    """helper-189: collapse.csv gained ``stream_bytes_unpaged`` (helper-188) with no word of it in the README, whose
    collapse section names the CSV's columns (``nodes``, ``streams_on_nodes``, ``beyond_max_context``). Each it
    names, as `name`, is one of the table's, and the stream byte columns are named with what tells them apart."""
    import re

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    section = readme.split("### `kvsim collapse`", 1)[1].split("\n### ", 1)[0]
    columns = collapse_table(load_catalog(), L70, ["8xH100"], ["native"]).columns
    assert set(re.findall(r"`(\w+)`", section)) & set(columns) == {"nodes", "streams_on_nodes", "stream_bytes",
                                                                     "stream_bytes_unpaged"}
    assert ("`stream_bytes` is a stream's KV in whole paged blocks,\n`stream_bytes_unpaged` the same without that "
            "rounding") in section


def test_a_table_without_the_per_gpu_column_still_draws() -> None:
    """A collapse.csv written before the column (or a notebook's own frame) keeps the old label."""
    df = collapse_table(load_catalog(), L70, ["8xH100"], ["native"])
    df = df.drop(columns="bytes_per_token_per_gpu", errors="ignore")
    ax = plot_collapse_panel(df)
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["native (328 kB/token)"]
    assert ax.get_legend().get_title().get_text() == "KV layout"
    plt.close(ax.figure)


def test_compare_gives_the_memory_factor_on_one_gpu() -> None:
    """memory_factor_per_gpu = memory_factor · per-GPU bytes / summed bytes: GQA under TP8 0.125 / 8,
    the MLA retrofit 0.281 / 8 (its latent whole on each GPU: 0.0352 · 8 in all), so MLA costs a
    GPU more, and the replica too."""
    reqs = list(load_workload("chat-4k", seed=0, duration_s=5))
    df = compare_strategies(EngineConfig(model="Llama-3.1-70B"), reqs, ["native", "mla"], seed=0).set_index("strategy")
    assert df.memory_factor_per_gpu["native"] == pytest.approx(df.memory_factor["native"] / 8, rel=1e-12)
    assert df.memory_factor_per_gpu["mla"] == pytest.approx(df.memory_factor["mla"] / 8, rel=1e-12)
    assert df.memory_factor["mla"] > df.memory_factor["native"]
    assert df.memory_factor_per_gpu["mla"] > df.memory_factor_per_gpu["native"]
    assert (df.kv_bytes_per_token["native"], df.kv_bytes_per_token_per_gpu["native"]) == (327_680, 40_960)
    assert (df.kv_bytes_per_token["mla"], df.kv_bytes_per_token_per_gpu["mla"]) == (92_160, 92_160)


def test_the_compare_command_prints_the_per_gpu_column_and_says_what_both_measure() -> None:
    r = CliRunner().invoke(compare, ["--model", "Llama-3.1-8B", "--workload", "chat-4k", "--duration-s", "5",
                                     "--strategy", "native,mla"])
    assert r.exit_code == 0, r.output
    assert "Traceback" not in r.output
    header = next(line for line in r.output.splitlines() if line.lstrip().startswith("strategy"))
    assert header.split()[-3:] == ["memory_factor", "memory_factor_per_gpu", "completed"]
    assert "memory_factor: a sequence's KV in all" in r.output
    assert "what one GPU holds of it under TP8" in r.output


def test_compare_says_when_an_offload_tier_brought_nothing_back() -> None:
    """helper-117: prefix, prefix+dram and prefix+nvme gave the same row with no word why: nothing was evicted
    from HBM, so no tier could bring anything back. The rows say what was evicted and reloaded, and a note why."""
    import json

    args = ["--model", "Llama-3.1-8B", "--workload", "chat-4k", "--duration-s", "30", "--strategy",
            "prefix,prefix+dram,prefix+nvme+dram", "--json"]
    r = CliRunner().invoke(compare, args)
    assert r.exit_code == 0, r.output
    assert "note: prefix+dram: no block came back from dram (0 evicted from HBM), so the tier changes nothing at " \
           "this load" in r.stderr
    assert "note: prefix+nvme+dram: no block came back from dram+nvme" in r.stderr and "note: prefix:" not in r.stderr
    rows = json.loads(r.stdout)
    assert [row["strategy"] for row in rows] == ["prefix", "prefix+dram", "prefix+nvme+dram"]


def test_compare_says_when_a_retention_lever_did_nothing_or_runs_off_its_measured_budget() -> None:
    """helper-120: ``prefix+h2o`` ran as h2o alone (its sequences neither read nor write the prefix cache),
    ``streaming-llm:200000`` evicted nothing, and ``snapkv:16`` carried SnapKV's 1-point debit, measured at
    1,024-4,096 kept tokens: each without a word. And max_concurrency read as the memory's capacity."""
    import json

    args = ["--model", "Llama-3.1-8B", "--workload", "chat-4k", "--duration-s", "5", "--strategy",
            "prefix+h2o,streaming-llm:200000,snapkv:16,snapkv", "--json"]
    r = CliRunner().invoke(compare, args)
    assert r.exit_code == 0, r.output
    err = r.stderr
    assert ("note: prefix+h2o: the sequences h2o shortened neither read nor write the prefix cache (their KV is "
            "no longer a prefix's) and no prompt hit it, so the prefix lever changed nothing") in err
    assert "note: streaming-llm:200000: streaming-llm evicted nothing (every sequence fits its budget), so it ran " \
           "as full KV" in err
    assert "note: snapkv:16: snapkv's debit was measured with 1,024-4,096 tokens kept a sequence, not at this " \
           "budget" in err
    assert "note: snapkv: snapkv's debit" not in err  # the default budget was measured
    rows = {row["strategy"]: row for row in json.loads(r.stdout)}
    assert rows["streaming-llm:200000"]["quality_debit_points"] == 0
    assert rows["snapkv:16"]["quality_debit_points"] == 1.0  # the stated debit, with the note
    assert rows["snapkv:16"]["debit_unsourced_at"] == "1,024-4,096 tokens"
    # helper-166: where the policy evicted nothing, no budget the debit was measured at is named beside its 0
    assert rows["streaming-llm:200000"]["debit_unsourced_at"] == "" and rows["snapkv"]["debit_unsourced_at"] == ""
    r = CliRunner().invoke(compare, args[:-1])
    assert "max_concurrency: the most requests this load ran at once, not what memory holds" in r.stderr


# --- 2. the sweep charts mark SLO misses ------------------------------------------------------

def _sweep(meets: list[object]) -> pd.DataFrame:
    df = pd.DataFrame({"hardware": "8xH100", "cluster.nodes": [1, 2, 3],
                       "usd_per_million_output_tokens": [1.79, 2.61, 3.91], "meets_slo": meets})
    df.attrs.update(swept=["cluster.nodes"], scenario="chat-4k-h100")
    return df


def test_the_sweep_chart_rings_the_points_that_miss_the_slos() -> None:
    ax = plot_sweep(_sweep([False, True, True]), "cluster.nodes", "usd_per_million_output_tokens")
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "misses an SLO (p99 TTFT or TPOT), or rejects or times out requests" in labels
    (ring,) = ax.collections
    assert ring.get_offsets().tolist() == [[1.0, 1.79]]  # the cheap point that misses, and only it
    assert tuple(ring.get_edgecolor()[0]) == pytest.approx(plt.matplotlib.colors.to_rgba(MISSES_COLOUR))
    plt.close(ax.figure)


def test_a_sweep_where_every_point_meets_or_failed_has_no_miss_entry() -> None:
    """A failed point (NaN meets_slo: it raised) is not a miss; a frame without the column draws as before."""
    for df in (_sweep([True, True, None]), _sweep([True, True, True]).drop(columns="meets_slo")):
        ax = plot_sweep(df, "cluster.nodes", "usd_per_million_output_tokens")
        assert not ax.collections
        assert not any("misses" in t.get_text() for t in ax.get_legend().get_texts())
        plt.close(ax.figure)


def _grid(goodput: list[float]) -> pd.DataFrame:
    """The chart review's sweep: nodes 1, 2, 4 at loads 10, 20, 40 (load 10's goodput equal to load 20's)."""
    df = pd.DataFrame({"hardware": "8xH100", "cluster.nodes": [1, 2, 4] * 3,
                       "workload.rate_scale": [10.0] * 3 + [20.0] * 3 + [40.0] * 3, "goodput_fraction": goodput,
                       "ttft_p99_s": [0.09, 0.07, 0.06, 0.19, 0.08, 0.07, 9.4, 0.14, 0.08],
                       "meets_slo": [g == 1.0 for g in goodput]})
    df.attrs.update(swept=["cluster.nodes", "workload.rate_scale"], scenario="chat-4k-h100",
                    setting="Llama-3.1-70B on 8xH100, TP8", slo_ttft_p99_s=2.0)
    return df


def test_a_share_is_drawn_on_0_to_1_and_a_line_under_another_is_named() -> None:
    """helper-158: goodput's axis began at 0.6 (one miss filled the height) and load 10's line lay hidden
    under load 20's (both 1.0 everywhere); the legend read ``8xH100, workload.rate_scale=10.0``."""
    ax = plot_sweep(_grid([1.0] * 6 + [0.62, 1.0, 1.0]), "cluster.nodes", "goodput_fraction")
    assert ax.get_ylim() == (0.0, 1.05)
    lines = ax.lines
    assert [line.get_label() for line in lines] == [
        "8xH100, load 10×", "8xH100, load 20× (the same as load 10×)", "8xH100, load 40×"]
    assert len({line.get_marker() for line in lines}) == 3  # a marker each
    assert lines[0].get_markersize() > lines[1].get_markersize() > lines[2].get_markersize()
    assert lines[1].get_markerfacecolor() == "none" and lines[1].get_linestyle() == "--"  # gaps: the line under shows
    assert ax.get_legend().get_title().get_text() == "node kind / load"
    assert ax.get_title() == "chat-4k-h100 (Llama-3.1-70B on 8xH100, TP8): goodput vs nodes per fleet"
    plt.close(ax.figure)
    # helper-164: two lines of no figure (every point an error) were "the same as" each other
    ax = plot_sweep(_grid([float("nan")] * 9), "cluster.nodes", "goodput_fraction")
    assert [line.get_label() for line in ax.lines] == ["8xH100, load 10×", "8xH100, load 20×", "8xH100, load 40×"]
    plt.close(ax.figure)


def test_the_legend_sits_under_the_plot_at_any_number_of_entries() -> None:
    """helper-158: five entries (the TTFT chart's SLO line the fifth) moved the legend right of the plot,
    which shrank to half the figure, while four stayed inside it, over the lines; now both go under it."""
    for metric, entries in (("goodput_fraction", 4), ("ttft_p99_s", 5)):
        fig, ax = plt.subplots(figsize=(9.5, 5.6))
        plot_sweep(_grid([1.0] * 6 + [0.62, 1.0, 1.0]), "cluster.nodes", metric, ax=ax)
        fig.tight_layout()
        fig.canvas.draw()
        legend = ax.get_legend()
        assert len(legend.get_texts()) == entries
        box, plot = legend.get_window_extent(), ax.get_window_extent()
        assert box.y1 < plot.y0  # under the axes (and their tick labels), not beside or over them
        assert plot.width > 0.8 * fig.bbox.width  # the plot keeps the figure's width
        plt.close(fig)


def test_a_layouts_latency_over_a_decade_is_logarithmic_and_its_cost_starts_at_0() -> None:
    """helper-158: mla-vs-gqa's p99 TTFT (7.7 s native, 168 s mla) was linear, the native point on the 5 s SLO
    line; its cost axis began at 12.9, so a 24% difference filled the height. Each point also says its value."""
    df = pd.DataFrame({"hardware": "8xH100", "cache.layout": ["native", "mla"], "ttft_p99_s": [7.68, 168.0],
                       "usd_per_million_output_tokens": [14.9, 18.5], "meets_slo": [False, False]})
    df.attrs.update(swept=["cache.layout"], scenario="mla-vs-gqa", setting="Llama-3.1-70B on 2× 8xH100, TP8",
                    slo_ttft_p99_s=5.0)
    ttft = plot_sweep(df, "cache.layout", "ttft_p99_s")
    assert ttft.get_yscale() == "log" and ttft.get_ylabel() == "p99 time to first token (s), log"
    assert ttft.get_ylim()[0] < 5.0  # the SLO line in view, under the native point
    assert [t.get_text() for t in ttft.texts] == ["7.68", "168"]
    assert ttft.get_title() == "mla-vs-gqa (Llama-3.1-70B on 2× 8xH100, TP8): p99 time to first token vs KV layout"
    cost = plot_sweep(df, "cache.layout", "usd_per_million_output_tokens")
    assert cost.get_yscale() == "linear" and cost.get_ylim()[0] == 0.0 and cost.get_ylim()[1] >= 18.5 * 1.08
    # under a decade stays linear (5.01 s against 23 s: the value label tells 5.01 from the SLO's 5)
    near = plot_sweep(df.assign(ttft_p99_s=[5.01, 23.0]), "cache.layout", "ttft_p99_s")
    assert near.get_yscale() == "linear" and [t.get_text() for t in near.texts] == ["5.01", "23"]
    plt.close("all")


def test_a_sweeps_setting_names_the_model_and_fleet_less_what_it_sweeps(tmp_path) -> None:
    sc = load_scenario(SCENARIOS / "mla-vs-gqa.toml")
    assert sweep_setting(sc, {"cache.layout": ["native", "mla"]}) == "Llama-3.1-70B on 2× 8xH100, TP8"
    assert sweep_setting(sc, {"cluster.nodes": [1, 2]}) == "Llama-3.1-70B on 8xH100, TP8"
    assert sweep_setting(sc, {"model.name": ["a"], "cluster.tp": [4, 8]}) == "2× 8xH100"
    # helper-164: a model's config.json was named as model.name's default, a DP-attention plan as "tp 8", a split
    # fleet's prefill plan not at all
    import json

    (tmp_path / "q.json").write_text(json.dumps({
        "num_hidden_layers": 32, "hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 8,
        "vocab_size": 128256, "intermediate_size": 14336, "max_position_embeddings": 8192}))
    text = (SCENARIOS / "mla-vs-gqa.toml").read_text()
    p = tmp_path / "s.toml"
    p.write_text(text.replace('name = "Llama-3.1-70B"', f'config = "{tmp_path / "q.json"}"'))
    assert sweep_setting(load_scenario(p), {"cache.layout": ["native"]}) == f"{tmp_path / 'q.json'} on 2× 8xH100, TP8"
    ds = dataclasses.replace(sc, cluster=dataclasses.replace(sc.cluster, dp_attention=True))
    assert sweep_setting(ds, {"cache.layout": ["native"]}) == "Llama-3.1-70B on 2× 8xH100, DP8-attention"
    split = load_scenario("disaggregated")
    assert sweep_setting(split, {"cache.layout": ["native"]}).endswith(", TP8")
    assert sweep_setting(dataclasses.replace(split, disaggregation=dataclasses.replace(
        split.disaggregation, prefill_tp=4)), {"cache.layout": ["native"]}).endswith(", P TP4 / D TP8")


# --- 3. the collapse chart's size -------------------------------------------------------------

def _simulated(kinds: list[str]) -> pd.DataFrame:
    return pd.concat([pd.DataFrame({"hardware": hw, "context_tokens": [4096, 131072], "peak_streams": [150, 4],
                                    "mean_streams": [110.0, 3.6], "goodput_fraction": [0.9, 0.0],
                                    "ttft_ok_fraction": [0.9, 0.0], "tpot_ok_fraction": [1.0, 1.0],
                                    "layout": "native"}) for hw in kinds])


@pytest.mark.parametrize("simulated", [False, True])
def test_three_node_kinds_make_a_chart_readable_whole(simulated: bool) -> None:
    """Three kinds were 21.4 inches wide (2,354 px at 110 dpi), the legend right of the panels: now
    one row of three narrower panels with the legend under them, at most 14.5 inches, text >= 9 pt."""
    kinds = ["8xH100", "8xH200", "8xB200"]
    df = collapse_table(load_catalog(), L70, kinds, ["native", "fp8", "mla"])
    fig = collapse_figure(df, L70.key, L70.max_context_tokens, _simulated(kinds) if simulated else None)
    width, height = fig.get_size_inches()
    assert width <= 14.5 and height <= (11.0 if simulated else 7.0)
    tops = [ax for ax in fig.axes if ax.get_title().startswith("8x")]
    assert len({round(ax.get_position().y0, 3) for ax in tops}) == 1  # one row
    (legend, *rest) = fig.legends
    assert len(rest) == (1 if simulated else 0)  # the goodput legend beside it
    assert "mla (92 kB/token, 92 kB on each GPU)" in [t.get_text() for t in legend.get_texts()]
    assert min(t.get_fontsize() for leg in fig.legends for t in leg.get_texts()) >= 9
    fig.canvas.draw()  # the legend lies under the panels, inside the figure
    box = legend.get_window_extent()
    assert box.y1 < min(ax.get_tightbbox().y0 for ax in fig.axes) and box.x1 <= fig.bbox.x1
    plt.close(fig)


def test_more_kinds_wrap_into_rows() -> None:
    kinds = ["8xH100", "8xH200", "8xB200", "8xMI300X"]
    fig = collapse_figure(collapse_table(load_catalog(), L70, kinds, ["native"]), L70.key)
    assert fig.get_size_inches()[0] <= 14.5
    assert len({round(ax.get_position().y0, 3) for ax in fig.axes}) == 2  # three, then one
    plt.close(fig)


def test_a_sweep_of_preemptions_or_any_other_count_starts_its_axis_at_0() -> None:
    """helper-172: `AMOUNTS` lacked the newer count columns, so a sweep chart of 40 against 50 preemptions drew
    its linear axis from about 39.5 to 50.5: a 25% difference filled the height. Every count a sweep row holds
    is an amount: the axis runs from 0 to 50 · 1.08 = 54."""
    from simulator.charts.sweep import AMOUNTS
    from simulator.sweep import _COUNTS

    assert set(_COUNTS) <= AMOUNTS
    df = pd.DataFrame({"hardware": "8xH100", "scheduler.max_num_seqs": [64, 256], "preemptions": [40, 50],
                       "rejected": [3, 4], "meets_slo": [True, True]})
    df.attrs.update(swept=["scheduler.max_num_seqs"], scenario="chat-4k")
    for metric in ("preemptions", "rejected"):
        ax = plot_sweep(df, "scheduler.max_num_seqs", metric)
        assert ax.get_yscale() == "linear" and ax.get_ylim()[0] == 0.0, metric
        plt.close(ax.figure)
    assert plot_sweep(df, "scheduler.max_num_seqs", "preemptions").get_ylim()[1] == pytest.approx(54.0)
    plt.close("all")


def test_two_plans_titles_stay_within_their_panels() -> None:
    """DeepSeek-V3's TP8 and DP8-attention budgets on one title line overran the narrower panels."""
    ds = get_model("DeepSeek-V3")
    plans = [ParallelPlan(tp=8), ParallelPlan(tp=8, dp_attention=True, ep=8)]
    fig = collapse_figure(collapse_table(load_catalog(), ds, ["8xH200", "8xB200"], ["native", "fp8"], plans=plans),
                          ds.key, ds.max_context_tokens)
    fig.canvas.draw()
    for ax in fig.axes:
        title, panel = ax.title.get_window_extent(), ax.get_window_extent()
        assert panel.x0 - 5 <= title.x0 and title.x1 <= panel.x1 + 5, ax.get_title()
    assert fig.axes[0].get_title().startswith("8xH200: KV budget per GPU\n42 GB (TP8), 31 GB (DP8-attention EP8)")
    plt.close(fig)


def test_a_sweeps_setting_keeps_what_the_grid_does_not_change() -> None:
    """helper-167: sweeping model.weight_dtype dropped the model's name, prefill_nodes the plan (neither changes
    them), and the legend named a TP as "tp 8" beside titles' "TP8"."""
    from simulator.charts.sweep import _entry

    sc = load_scenario(SCENARIOS / "mla-vs-gqa.toml")
    assert sweep_setting(sc, {"model.weight_dtype": ["bf16", "fp8"]}) == "Llama-3.1-70B on 2× 8xH100, TP8"
    split = load_scenario("disaggregated")
    assert sweep_setting(split, {"disaggregation.prefill_nodes": [1, 2]}).endswith(", TP8")
    assert _entry("cluster.tp", 8) == "TP8"


def test_the_collapse_legend_says_dp_attention_keeps_one_copy_helper_191() -> None:
    """helper-191: under DP8 attention the legend read "70 kB on each GPU" for DeepSeek-V3's latent, as it does
    under TP8, where every GPU holds it (eight copies a node); under DP attention a stream's latent, 576 · 61 · 2 B
    = 70,272 B a token, is on the one GPU whose attention serves it (Llama-3-70B's 327,680 B likewise)."""
    ds = collapse_table(load_catalog(), get_model("DeepSeek-V3"), ["8xH200"], ["native"],
                        plans=[ParallelPlan(tp=8), ParallelPlan(tp=8, dp_attention=True, ep=8)])
    ax = plot_collapse_panel(ds)
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels[:2] == ["native (70 kB/token, 70 kB on each GPU), TP8",
                          "native (70 kB/token, 70 kB on the one GPU serving it), DP8-attention EP8"]
    plt.close(ax.figure)
    ax = plot_collapse_panel(collapse_table(load_catalog(), L70, ["8xH100"], ["native"],
                                            plans=[ParallelPlan(tp=8, dp_attention=True)]))
    assert ax.get_legend().get_texts()[0].get_text() == "native (328 kB/token, 328 kB on the one GPU serving it)"
    plt.close(ax.figure)


def test_a_figure_of_one_plan_a_panel_but_not_the_same_names_each_lines_plan():
    """helper-191's per-kind default plans draw 4xH100 under TP4 and 8xH100 under TP8, one plan a panel: the legend,
    titled "KV layout, plan", gave two entries ``native (328 kB/token, 82 kB on each GPU)`` and ``(..., 41 kB ...)``
    naming neither plan (a panel named its plan only where it drew several)."""
    import matplotlib.pyplot as plt
    import pandas as pd

    from hardware.catalog import load_catalog
    from simulator.charts import collapse_figure
    from simulator.collapse import collapse_table
    from simulator.models import get_model
    from simulator.placement import ParallelPlan

    cat, model = load_catalog(), get_model("Llama-3-70B")
    df = pd.concat([collapse_table(cat, model, [hw], ["native"], plans=[ParallelPlan(tp=tp)])
                    for hw, tp in (("4xH100", 4), ("8xH100", 8))], ignore_index=True)
    fig = collapse_figure(df, model)
    legend = fig.legends[0] if fig.legends else fig.axes[0].get_legend()
    texts = [t.get_text() for t in legend.get_texts()]
    assert legend.get_title().get_text() == "KV layout, plan"
    assert "native (328 kB/token, 82 kB on each GPU), TP4" in texts
    assert "native (328 kB/token, 41 kB on each GPU), TP8" in texts
    plt.close(fig)
    # one plan in every panel: named once, in the legend's title, not in each entry
    one = collapse_table(cat, model, ["8xH100", "8xH200"], ["native"], tp=8)
    fig = collapse_figure(one, model)
    legend = fig.legends[0] if fig.legends else fig.axes[0].get_legend()
    assert legend.get_texts()[0].get_text() == "native (328 kB/token, 41 kB on each GPU)"
    assert legend.get_title().get_text() == "KV layout (under TP8)"


def test_collapse_legend_names_each_panels_plan_where_the_kinds_differ_helper_192():
    """helper-192: `kvsim collapse --hardware 4xH100,8xH100` (each kind under its own node's plan since
    helper-191) draws TP4 in one panel and TP8 in the other; the panels named no plan, having one each, so the shared
    legend, titled "KV layout, plan", read two solid ``native`` lines, 82 and 41 kB a GPU (328 kB / 4, / 8), neither
    plan named. Each line now names its plan and keeps the figure's style for it (TP4 solid, TP8 dashed)."""
    df = collapse_table(load_catalog(), L70, ["4xH100", "8xH100"], ["native"], contexts=[4096, 131072])
    assert list(dict.fromkeys(df["plan"])) == ["TP4", "TP8"]
    fig = collapse_figure(df, L70)
    texts = [t.get_text() for leg in fig.legends for t in leg.get_texts()]
    assert [leg.get_title().get_text() for leg in fig.legends][:1] == ["KV layout, plan"]
    assert "native (328 kB/token, 82 kB on each GPU), TP4" in texts
    assert "native (328 kB/token, 41 kB on each GPU), TP8" in texts
    styles = {line.get_label(): line.get_linestyle() for ax in fig.axes for line in ax.get_lines()
              if line.get_label().startswith("native")}
    assert len(set(styles.values())) == 2, styles
    plt.close(fig)
