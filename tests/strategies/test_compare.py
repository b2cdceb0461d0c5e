"""`compare_strategies`, its spec parser and chart, and the `kvsim compare` command."""

from __future__ import annotations

import re
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from simulator.cli.compare import compare
from simulator.compare import compare_figure, compare_strategies, parse_strategy_set
from simulator.engine import AffineTimer, EngineConfig
from simulator.errors import ConfigError
from workloads import load_workload
from workloads.request import Request

BASE = EngineConfig(model="Llama-3.1-70B")


def test_strategy_sets_parse_into_configs() -> None:
    c = parse_strategy_set("prefix+dram+fp8", BASE)
    assert (c.cache, dict(c.cache_params), c.layout.label) == ("prefix", {"dram": True}, "fp8")
    c = parse_strategy_set("mla+streaming-llm:4096", BASE)
    assert (c.layout.label, c.retention, dict(c.retention_params)) == ("mla", "streaming-llm", {"window_tokens": 4096})
    assert dict(parse_strategy_set("h2o:0.1", BASE).retention_params) == {"budget_fraction": 0.1, "budget_tokens": 0}
    assert dict(parse_strategy_set("prefix+lfu", BASE).cache_params) == {"eviction": "lfu"}
    with pytest.raises(ConfigError, match="streaming-llm"):
        parse_strategy_set("fp9", BASE)


def test_levers_on_the_code_repo_workload() -> None:
    """A few simulated minutes of the 128k code-repo workload on 8×H100, at 3× its default rate."""
    reqs = list(load_workload("code-repo-128k", seed=0, duration_s=300, rate_scale=3))
    specs = ["native", "fp8", "mla", "cross-layer:0.5", "streaming-llm", "prefix", "prefix+dram"]
    df = compare_strategies(BASE, reqs, specs, seed=0).set_index("strategy")
    assert (df.completed == len(reqs)).all()
    assert df.kv_blocks_per_replica["fp8"] == pytest.approx(2 * df.kv_blocks_per_replica["native"], rel=1e-3)
    # a token's bytes, one copy; summed over TP8's GPUs the MLA latent (whole on each) is the largest
    assert df.layout_memory_factor["mla"] < df.layout_memory_factor["fp8"] < df.layout_memory_factor["native"]
    assert df.memory_factor["fp8"] < df.memory_factor["native"] < df.memory_factor["mla"]
    assert df.prefix_hit_ratio_tokens["native"] == 0 and df.prefix_hit_ratio_tokens["prefix"] > 0.5
    assert df.ttft_p99_s["prefix"] < df.ttft_p99_s["native"]
    debit = df.quality_debit_points
    assert debit["streaming-llm"] > debit["mla"] > 0 == debit["prefix"]
    # every code-repo prompt is past the 31,500 tokens the retention debits were measured on (helper-180)
    assert df.debit_caveats["streaming-llm"].startswith(
        f"streaming-llm evicted KV from {len(reqs)} requests, {len(reqs)} (100%) of them with prompts over 31,500 "
        f"tokens (up to {max(r.prompt_tokens for r in reqs):,})")
    # each row says whether it met the SLOs (EngineConfig's defaults: p99 TTFT 2 s, p99 TPOT 100 ms), as the
    # capacity planner judges a fleet
    slo_met = (df.ttft_p99_s <= 2.0) & ~(df.tpot_p99_s > 0.1) & (df.timed_out == 0)
    assert (df.meets_slo == slo_met).all() and (df.slo_ttft_s == 2.0).all() and (df.slo_tpot_s == 0.1).all()
    assert df.offered_requests_per_s.nunique() == 1
    assert (df.usd_per_million_output_tokens > df.usd_per_million_tokens).all()
    fig = compare_figure(df.reset_index(), "test")
    assert len(fig.axes) == 2 and all(ax.get_title() for ax in fig.axes)
    plt.close(fig)


def _rows() -> pd.DataFrame:
    """Four strategy sets at SLOs of 10 s and 100 ms: two meet them within 1% of each other's cost
    (fp8 with a 0.1-point debit, cross-layer with 1 point), prefix misses TPOT, native both."""
    return pd.DataFrame({
        "strategy": ["native", "prefix", "prefix+cross-layer:0.5", "prefix+fp8"],
        "meets_slo": [False, False, True, True],
        "usd_per_million_output_tokens": [150.0, 55.0, 55.1, 55.3],
        "quality_debit_points": [0.0, 0.0, 1.0, 0.1],
        "ttft_p99_s": [6000.0, 9.0, 8.0, 7.0], "tpot_p99_s": [0.5, 0.16, 0.08, 0.07], "timed_out": [0, 0, 0, 0],
        "slo_ttft_s": 10.0, "slo_tpot_s": 0.1, "offered_requests_per_s": 0.476})


def test_compare_chart_answers_which_set_is_cheapest_within_the_slos() -> None:
    from matplotlib.colors import to_hex

    from simulator.compare import MEETS_COLOUR, MISSES_COLOUR

    fig = compare_figure(_rows(), "Llama-3.1-70B on 8xH100 (tp 8): code-repo-128k")
    cost, latency = fig.axes
    # those that meet first, the cost tie broken by the smaller quality debit; then those that miss, cheapest first
    assert [t.get_text().split("\n")[0] for t in cost.get_yticklabels()] == [
        "prefix+fp8", "prefix+cross-layer:0.5", "prefix", "native"]
    assert [to_hex(bar.get_facecolor()) for bar in cost.patches[:4]] == [MEETS_COLOUR, MEETS_COLOUR, MISSES_COLOUR,
                                                                         MISSES_COLOUR]
    assert [bar.get_width() for bar in cost.patches[:4]] == [55.3, 55.1, 55.0, 150.0]
    notes = [t.get_text() for t in cost.texts]
    assert notes[0].startswith("$55.3  ← the cheapest within the SLOs") and "a tie on cost" in notes[0]
    assert notes[2] == "$55  misses TPOT" and notes[3] == "$150  misses TTFT and TPOT"
    assert [t.get_text() for t in cost.get_legend().get_texts()] == ["meets both p99 SLOs", "misses an SLO"]
    assert cost.get_xlabel().startswith("USD per million output tokens")
    # latency as a multiple of each SLO, on a log axis when the spread is wide (native's 600× TTFT)
    assert latency.get_xscale() == "log"
    widths = [bar.get_width() for bar in latency.patches[:8]]
    assert widths[:4] == pytest.approx([0.7, 0.8, 0.9, 600.0]) and widths[4:] == pytest.approx([0.7, 0.8, 1.6, 5.0])
    title = fig.get_suptitle()
    assert "0.476 requests/s offered" in title and "p99 TTFT ≤ 10 s, p99 TPOT ≤ 100 ms" in title
    plt.close(fig)


def test_a_cost_tie_of_equal_debits_goes_to_the_cheaper_and_says_no_debit_decided_it() -> None:
    """A Gemma-3-27B chat-4k compare put native ($46.4) first as "the cheapest within the SLOs (a tie on cost:
    the smaller quality debit)" above prefix ($46.3) of the same 0-point debit: within a tie the cheaper of
    equal debits goes first, and the tie note stays for where a debit put a dearer set first (here the best is also
    the cheapest, and the note counts the sets within the tie: helper-197)."""
    rows = _rows().assign(strategy=["native", "prefix", "prefix+compress:8:4096", "a"],
                          meets_slo=[True, True, True, False], usd_per_million_output_tokens=[46.4, 46.3, 46.3, 50.0],
                          quality_debit_points=[0.0, 0.0, 2.5, 0.0], ttft_p99_s=[1.0, 1.0, 1.0, 20.0])
    fig = compare_figure(rows, "Gemma-3-27B on 8xH100 (tp 8): chat-4k")
    cost = fig.axes[0]
    assert [t.get_text().split("\n")[0] for t in cost.get_yticklabels()] == [
        "prefix", "native", "prefix+compress:8:4096", "a"]
    assert cost.texts[0].get_text() == ("$46.3  ← the cheapest within the SLOs\n(by under 1%: 2 other sets within it, "
                                        "a tie on cost)")
    plt.close(fig)


def test_cli_compare(tmp_path: Path) -> None:
    runner = CliRunner()
    res = runner.invoke(compare, ["--workload", "chat-4k", "--duration-s", "20", "--strategy", "native,prefix+fp8",
                                  "--out", str(tmp_path)])
    assert res.exit_code == 0, res.output
    assert "prefix+fp8" in res.output and (tmp_path / "compare.png").stat().st_size > 10_000
    # 20 s of chat-4k is a handful of requests: meets_slo rests on their slowest (helper-134)
    assert "a p99 over them lies between its 2 slowest, so one slow request can decide meets_slo" in res.output
    bad = runner.invoke(compare, ["--workload", "chat-4k", "--duration-s", "5", "--strategy", "native,nope"])
    assert bad.exit_code == 2 and "nope" in bad.output


def test_compare_command_on_a_scenario_does_not_inherit_its_levers(tmp_path):
    from click.testing import CliRunner

    from simulator.cli import main

    sc = tmp_path / "s.toml"
    sc.write_text("""
name = "s"
[model]
name = "Llama-3.1-8B"
[cluster]
hardware = ["8xH100"]
tp = 8
[cache]
layout = "fp8"
strategy = "prefix"
[workload]
duration_s = 120
[workload.spec]
name = "chat-4k"
""")
    r = CliRunner().invoke(main, ["compare", str(sc), "--strategy", "native,prefix+fp8", "--out", str(tmp_path)])
    assert r.exit_code == 0, r.output
    import pandas as pd

    df = pd.read_csv(tmp_path / "compare.csv").set_index("strategy")
    assert df.prefix_hit_ratio_tokens["native"] == 0 and df.prefix_hit_ratio_tokens["prefix+fp8"] > 0.5
    assert df.memory_factor["prefix+fp8"] == df.memory_factor["native"] / 2


def test_memory_factor_counts_the_kv_retention_keeps() -> None:
    """Issue 16: memory_factor showed native's value for streaming-llm, h2o and snapkv.

    Three requests (prompt, output) = (1000, 200), (3000, 100), (500, 50) end with the KV of
    prompt + output − 1 tokens each: 1199, 3099, 549 (Σ 4847). StreamingLLM with 4 sinks and a
    1020-token window keeps at most 1024: 1024, 1024, 549 (Σ 2597), a kept fraction of 2597 / 4847.
    H2O with a 256-token budget keeps 256, 256, 256: 768 / 4847; SnapKV with the same budget
    compresses the prompt only: 256 + 199, 256 + 99, 256 + 49 = 1115 / 4847. Llama-3.1-8B's GQA
    (8 KV heads of 32) gives native 1/4 of MHA's bytes and fp8 half that again:
    memory_factor = layout factor · kept fraction.
    """
    reqs = [Request(id=i, arrival_s=float(i), prompt_tokens=p, output_tokens=o, segments=((i, p),))
            for i, (p, o) in enumerate([(1000, 200), (3000, 100), (500, 50)])]
    timer = AffineTimer(overhead_s=1e-3, per_context_token_s=1e-9, per_prefill_token_s=1e-6)
    df = compare_strategies(EngineConfig(model="Llama-3.1-8B"), reqs,
                            ["native", "streaming-llm:1020", "h2o:256", "snapkv:256",
                             "fp8+streaming-llm:1020"], timer=timer)
    df = df.set_index("strategy")
    assert (df.completed == 3).all()
    assert (df.memory_factor["native"], df.kept_kv_fraction["native"]) == (0.25, 1.0)
    assert df.kept_kv_fraction["streaming-llm:1020"] == pytest.approx(2597 / 4847, rel=1e-12)
    assert df.memory_factor["streaming-llm:1020"] == pytest.approx(0.25 * 2597 / 4847, rel=1e-12)
    assert df.memory_factor["h2o:256"] == pytest.approx(0.25 * 768 / 4847, rel=1e-12)
    assert df.memory_factor["snapkv:256"] == pytest.approx(0.25 * 1115 / 4847, rel=1e-12)
    assert df.layout_memory_factor["fp8+streaming-llm:1020"] == 0.125
    assert df.memory_factor["fp8+streaming-llm:1020"] == pytest.approx(0.125 * 2597 / 4847, rel=1e-12)


def test_a_retention_debit_on_prompts_longer_than_its_sources_measured_says_so() -> None:
    """helper-180: the retention debits are LongBench's, whose prompts the sources' runs cut to 31,500 tokens
    (simulator/data/retention.toml); a policy that evicted from longer prompts (a 128k code repository) was charged
    them without a word. Three prompts of 1,000, 40,000 and 31,500 tokens (the last at the limit, not past it),
    each past h2o:256's budget: one of the three (33%) is longer than any source measured."""
    from simulator.engine.retention import unsourced_prompts

    reqs = [Request(id=i, arrival_s=float(i), prompt_tokens=p, output_tokens=o, segments=((i, p),))
            for i, (p, o) in enumerate([(1000, 200), (40000, 100), (31500, 50)])]
    timer = AffineTimer(overhead_s=1e-3, per_context_token_s=1e-9, per_prefill_token_s=1e-6)
    df = compare_strategies(EngineConfig(model="Llama-3.1-8B"), reqs, ["native", "h2o:256", "gqa:2+h2o:256"],
                            timer=timer).set_index("strategy")
    said = ("h2o evicted KV from 3 requests, 1 (33%) of them with prompts over 31,500 tokens (up to 40,000), the "
            "longest prompt its sources measured its debit on (LongBench, cut to the model's window): its debit there "
            "is no source's figure")
    assert df.debit_caveats["native"] == "" and df.debit_caveats["h2o:256"] == said
    # beside the layout's own caveat, "; "-joined
    caveats = df.debit_caveats["gqa:2+h2o:256"].split("; ")
    assert len(caveats) == 2 and caveats[0].startswith("gqa:2 keeps fewer KV heads") and caveats[1] == said
    # the rule alone: none past the limit (or none evicted, or a policy with no sourced prompts) says nothing
    assert unsourced_prompts("snapkv", [31500, 4096]) is None and unsourced_prompts("snapkv", []) is None
    assert unsourced_prompts("full", [200000]) is None
    assert unsourced_prompts("streaming-llm", [31501]).startswith(
        "streaming-llm evicted KV from 1 request, 1 (100%) of them with prompts over 31,500 tokens (up to 31,501)")


def test_compare_with_a_scenario_refuses_the_flags_it_would_ignore():
    from click.testing import CliRunner

    from simulator.cli.compare import compare

    r = CliRunner().invoke(compare, ["chat-4k-h100", "--model", "Llama-3.1-8B", "--strategy", "native"])
    assert r.exit_code == 2 and "--model applies without a SCENARIO" in r.output
    r = CliRunner().invoke(compare, ["chat-4k-h100", "--nodes", "3", "--strategy", "native"])
    assert r.exit_code == 2 and "--nodes applies without a SCENARIO" in r.output


def test_compare_serves_the_weight_precision_asked():
    from click.testing import CliRunner

    from simulator.cli.compare import compare

    r = CliRunner().invoke(compare, ["--model", "Llama-3.1-8B", "--weight-dtype", "fp4", "--hardware", "8xH100",
                                     "--tp", "1", "--workload", "chat-4k", "--duration-s", "5", "--strategy", "native"])
    # H100 has no fp4 tensor cores: it serves the fp4 weights weight-only (bf16 GEMMs), as it once refused to
    assert r.exit_code == 0 and "native" in r.output


def test_compare_chart_keeps_its_notes_inside_the_cost_panel(tmp_path) -> None:
    """helper-109: where every set costs about the same, the cheapest one's note (with its tie line) ran past the
    frame into the latency panel; a quality debit read 0.0987654 pt."""
    rows = _rows().assign(usd_per_million_output_tokens=[55.4, 55.0, 55.1, 55.3], meets_slo=[True, False, True, True],
                          quality_debit_points=[0.0, 0.0, 0.0987654, 0.1])
    fig = compare_figure(rows, "Llama-3.1-8B on 1xH100 (tp 1): chat-4k")
    cost = fig.axes[0]
    renderer = fig.canvas.get_renderer()
    right = cost.get_window_extent(renderer).x1
    assert cost.texts and all(t.get_window_extent(renderer).x1 <= right for t in cost.texts)
    assert cost.get_xlim()[1] > 55.4 * 1.55  # widened for them
    assert any(t.get_text() == "prefix+cross-layer:0.5\nquality debit 0.0988 pt" for t in cost.get_yticklabels())
    fig.savefig(tmp_path / "c.png", dpi=110)
    plt.close(fig)


def test_a_set_that_left_requests_unanswered_says_how_many(tmp_path: Path) -> None:
    """helper-147: `kvsim compare`'s table had no count of the requests a set timed out (only compare.csv), and
    its chart said "misses TTFT and TPOT and timeouts" where half the requests had timed out. The table gains
    `timed_out` (and `rejected`) where any set has them; the chart's note counts them."""
    from simulator.compare import _missed

    row = pd.Series({"ttft_p99_s": 68.1, "slo_ttft_s": 15.0, "tpot_p99_s": 0.5, "slo_tpot_s": 0.1, "timed_out": 173,
                     "rejected": 2})
    assert _missed(row) == "TTFT and TPOT and 173 timed out and 2 rejected"
    sc = tmp_path / "t.toml"
    sc.write_text('name = "t"\n[model]\nname = "Llama-3.1-70B"\n[cluster]\nhardware = ["8xH100"]\ntp = 8\n'
                  '[scheduler]\nqueue_timeout_s = 0.5\n[workload]\nduration_s = 20\nrate_scale = 400\n'
                  '[workload.spec]\nname = "chat-4k"\n')
    r = CliRunner().invoke(compare, [str(sc), "--strategy", "native,fp8"])
    assert r.exit_code == 0, r.output
    header, *rows = r.stdout.splitlines()
    assert header.split()[-3:] == ["completed", "timed_out", "queue_grows"]  # (none rejected: no such column)
    for line in rows:
        completed, timed_out = (int(x.replace(",", "")) for x in line.split()[-3:-1])
        assert timed_out > completed > 0 and line.split()[-1] == "True"  # 4,294 requests, most timed out
    assert "note: native, fp8: arrivals outran admissions through the steady window (column queue_grows)" in r.stderr


def test_a_compression_charges_its_debit_only_where_it_compressed(tmp_path: Path) -> None:
    """helper-151: `compress:8:16384` on chat-4k compressed nothing (no sequence passed its 16,384-token
    full-resolution window), read like native in every figure, and was charged its 2.5-point debit, with no
    note, where a retention policy that evicted nothing is charged 0 and said so. A request is charged the
    compression's debit only where its prompt + output − 1 KV tokens pass the window: here 2 of 4."""
    requests = [Request(id=i, arrival_s=i * 0.5, prompt_tokens=p, output_tokens=20, segments=((i, p),))
                for i, p in enumerate((500, 1500, 800, 3000))]
    sets = ["native", "compress:8:1000", "compress:8:16384", "fp8+compress:8:1000", "compress:8:0",
            "streaming-llm:500", "compress:8:1000+streaming-llm:500"]
    df = compare_strategies(BASE, requests, sets, seed=0, timer=AffineTimer()).set_index("strategy")
    # (compress:8:0 compresses every token; under streaming-llm:500 a sequence keeps 504 tokens, under the window:
    # nothing compressed, the retention policy's 8 points alone, helper-153)
    assert df.quality_debit_points.to_dict() == pytest.approx(
        {"native": 0.0, "compress:8:1000": 2.5 / 2, "compress:8:16384": 0.0, "fp8+compress:8:1000": 0.1 + 2.5 / 2,
         "compress:8:0": 2.5, "streaming-llm:500": 8.0, "compress:8:1000+streaming-llm:500": 8.0})
    assert df.compressed_share.to_dict() == pytest.approx(
        {"native": np.nan, "compress:8:1000": 0.5, "compress:8:16384": 0.0, "fp8+compress:8:1000": 0.5,
         "compress:8:0": 1.0, "streaming-llm:500": np.nan, "compress:8:1000+streaming-llm:500": 0.0}, nan_ok=True)
    sc = tmp_path / "c.toml"
    sc.write_text('name = "c"\n[model]\nname = "Llama-3.1-70B"\n[cluster]\nhardware = ["8xH100"]\ntp = 8\n'
                  '[workload]\nduration_s = 20\n[workload.spec]\nname = "chat-4k"\n')
    r = CliRunner().invoke(compare, [str(sc), "--strategy", "native,compress:8:16384"])
    assert r.exit_code == 0, r.output
    assert ("note: compress:8:16384: no completed request's KV passed compress:8:16384's full-resolution window, "
            "so it compressed nothing and ran uncompressed (its debit, charged a request past the window, is 0)"
            ) in r.stderr


def test_compare_says_which_debits_no_source_states() -> None:
    """helper-180: ``gqa:2`` and ``mqa`` read as 0-point levers and ``cross-layer:0.1`` as cross-layer:0.5's 1 point,
    with no note (a retention policy at another budget gets one; kvsim run's report names the unpriced parts)."""
    r = CliRunner().invoke(compare, ["--model", "Llama-3.1-8B", "--hardware", "1xH100", "--workload", "chat-4k",
                                     "--duration-s", "5", "--strategy", "native,gqa:2,cross-layer:0.1,cross-layer:0.5"])
    assert r.exit_code == 0, r.output
    debits = {line.split()[0]: float(line.split()[8]) for line in r.stdout.splitlines()[1:]}
    assert debits == {"native": 0.0, "gqa:2": 0.0, "cross-layer:0.1": 1.0, "cross-layer:0.5": 1.0}
    notes = [line for line in r.stderr.splitlines() if line.startswith("note: ") and "debit" in line]
    assert notes == [
        "note: gqa:2: gqa:2 keeps fewer KV heads (2) than Llama-3.1-8B was trained with (8): "
        "simulator/data/levers.toml states no debit for it, and the debit shown leaves it out",
        "note: cross-layer:0.1: cross-layer's 1-point debit is what its source states for cross-layer:0.5 (fraction of "
        "layers with their own KV 0.5), not measured at cross-layer:0.1: a guide, not a figure"]


@pytest.mark.parametrize(("model", "sets", "got"), [
    ("DeepSeek-V3", ["native", "mla"], "'native' and 'mla', both layout native, reuse none"),  # its own latent
    ("Llama-3.1-8B", ["native", "gqa:8"], "'native' and 'gqa:8', both layout native"),  # its own 8 KV heads
    ("Llama-3.1-8B", ["fp8+prefix", "gqa:8+fp8+prefix"], "'fp8+prefix' and 'gqa:8+fp8+prefix', both layout fp8"),
])
def test_a_set_that_spells_out_the_models_own_attention_is_the_native_set(model, sets, got) -> None:
    """helper-180: ``native,mla`` on DeepSeek-V3 (and ``native,gqa:8`` on a model of 8 KV heads) ran one layout twice
    under two labels, two identical rows, where ``fp8,native+fp8`` is refused."""
    from simulator.compare import check_distinct_sets

    base = EngineConfig(model=model, node="8xH200" if model == "DeepSeek-V3" else "1xH100",
                        tp=8 if model == "DeepSeek-V3" else 1)
    with pytest.raises(ConfigError, match=r"--strategy: must name each strategy set once \(got " + re.escape(got)):
        check_distinct_sets(sets, base, "--strategy")
    # a different attention stays a set of its own: gqa:4 of 8 heads, mha, DeepSeek-V3's MHA expansion
    for other in (["native", "gqa:4"], ["native", "mha"]):
        assert len(check_distinct_sets(other, base, "--strategy")) == 2


def test_compare_says_fp4_kv_is_a_blackwell_lever_on_hopper() -> None:
    """helper-180: an fp4 set on H100 ran and read as a 1-point lever with no word that NVFP4 KV is Blackwell's."""
    args = ["--model", "Llama-3.1-8B", "--workload", "chat-4k", "--duration-s", "5", "--strategy", "native,fp4"]
    r = CliRunner().invoke(compare, [*args, "--hardware", "1xH100"])
    assert r.exit_code == 0, r.output
    assert [line for line in r.stderr.splitlines() if "Blackwell" in line] == [
        "note: fp4: fp4 KV on H100, which has no fp4 tensor cores: kvsim runs its bytes, but the fp4 lever's source "
        "(NVIDIA's NVFP4 KV cache) is a Blackwell feature"]
    r = CliRunner().invoke(compare, [*args, "--hardware", "1xB200"])
    assert r.exit_code == 0 and "Blackwell" not in r.stderr


def test_a_debit_no_source_states_is_in_compare_csv_and_on_the_chart() -> None:
    """helper-180: the chart put ``gqa:8`` on DeepSeek-V3 (8 KV heads of its 128, a model it was not trained as)
    with no debit line, as lossless, first among sets of equal cost; compare.csv had no word of it either."""
    requests = [Request(id=i, arrival_s=i * 0.5, prompt_tokens=1000, output_tokens=20, segments=((i, 1000),))
                for i in range(4)]
    base = EngineConfig(model="DeepSeek-V3", node="8xH200", tp=8)
    df = compare_strategies(base, requests, ["native", "gqa:8", "fp8", "cross-layer:0.25+int4"], seed=0,
                            timer=AffineTimer()).set_index("strategy")
    assert df.quality_debit_points.to_dict() == pytest.approx(
        {"native": 0.0, "gqa:8": 0.0, "fp8": 0.1, "cross-layer:0.25+int4": 1.6})
    assert df.debit_caveats.to_dict() == {
        "native": "", "fp8": "",
        "gqa:8": "gqa:8 keeps fewer KV heads (8) than DeepSeek-V3 was trained with (128): simulator/data/levers.toml "
                 "states no debit for it, and the debit shown leaves it out",
        "cross-layer:0.25+int4": "cross-layer's 1-point debit is what its source states for cross-layer:0.5 (fraction "
                                 "of layers with their own KV 0.5), not measured at cross-layer:0.25: a guide, not a "
                                 "figure"}
    assert df.debit_not_stated.to_dict() == {"native": "", "gqa:8": "gqa:8", "fp8": "", "cross-layer:0.25+int4": ""}
    fig = compare_figure(df.reset_index(), "t")
    labels = {t.get_text() for t in fig.axes[0].get_yticklabels()}
    assert {"gqa:8\nquality debit not stated", "native", "fp8\nquality debit 0.1 pt",
            "cross-layer:0.25+int4\nquality debit 1.6 pt, a guide"} == labels
    plt.close(fig)


def test_compare_csv_keeps_its_older_columns_in_place_and_debit_caveats_last(tmp_path: Path) -> None:
    """helper-186: ``debit_caveats``, added after the others, sat between ``debit_unsourced_at`` and
    ``kv_utilization``, moving every later column one place for a reader that took them by position; it goes
    last, the columns before it keep the order they had, and a newer one (``debit_not_stated``) follows it."""
    r = CliRunner().invoke(compare, ["--model", "Llama-3.1-8B", "--hardware", "1xH100", "--workload", "chat-4k",
                                     "--duration-s", "5", "--strategy", "native", "--out", str(tmp_path)])
    assert r.exit_code == 0, r.output
    header = (tmp_path / "compare.csv").read_text().splitlines()[0].split(",")
    assert header == [
        "strategy", "layout", "cache", "retention", "meets_slo", "slo_ttft_s", "slo_tpot_s", "offered_requests_per_s",
        "kv_blocks_per_replica", "completed", "max_concurrency", "mean_concurrency", "tokens_per_s",
        "output_tokens_per_s", "ttft_p50_s", "ttft_p99_s", "tpot_p99_s", "usd_per_million_tokens",
        "usd_per_million_output_tokens", "goodput_fraction", "timed_out", "rejected", "queue_grows",
        "compressed_share", "prefix_hit_ratio_tokens", "cache_evicted_blocks", "cache_reloaded_blocks",
        "hit_dram_tokens", "hit_nvme_tokens", "offload_tiers", "quality_debit_points", "retention_evicted_tokens",
        "debit_unsourced_at", "kv_utilization", "memory_factor", "memory_factor_per_gpu", "layout_memory_factor",
        "kept_kv_fraction", "kv_bytes_per_token", "kv_bytes_per_token_per_gpu", "kv_bytes_per_token_summed",
        "debit_caveats", "debit_not_stated", "cache_dram_reloaded_blocks", "cache_nvme_reloaded_blocks"]


@pytest.mark.parametrize("spec, said", [
    ("dram", "'dram' is a tier of the prefix cache, which the set does not name; add the prefix lever "
             "('prefix+dram')"),
    ("nvme+fp8", "'nvme' is a tier of the prefix cache, which the set does not name; add the prefix lever "
                 "('prefix+nvme+fp8')"),
    ("lru", "'lru' is an eviction policy of the prefix cache, which the set does not name; add the prefix lever "
            "('prefix+lru')"),
    ("fp8 + fifo+h2o", "'fifo' is an eviction policy of the prefix cache, which the set does not name; add the "
                       "prefix lever ('prefix+fp8+fifo+h2o')"),
])
def test_a_tier_or_an_eviction_without_the_prefix_lever_is_refused(spec, said) -> None:
    """helper-186: ``dram`` (or ``lru``) alone ran the prefix cache, a lever the set never named, where a set names
    every lever it uses (``native`` is no reuse): the row read as the tier's effect. It is one line naming the set to
    give; with the prefix lever it runs the cache with that tier or eviction."""
    with pytest.raises(ConfigError) as exc:
        parse_strategy_set(spec, BASE)
    assert str(exc.value) == f"strategy set {spec!r}: {said}"
    for ok, params in (("prefix+dram", {"dram": True}), ("lru+prefix", {"eviction": "lru"}),
                       ("nvme+prefix+fp8", {"nvme": True})):
        c = parse_strategy_set(ok, BASE)
        assert (c.cache, dict(c.cache_params)) == ("prefix", params)
    r = CliRunner().invoke(compare, ["--workload", "chat-4k", "--duration-s", "5", "--strategy", "native,dram"])
    assert r.exit_code == 2 and r.output.count("\n") == 1 and "add the prefix lever ('prefix+dram')" in r.output


def test_a_cost_tie_ranks_a_debit_no_source_states_after_the_stated_ones() -> None:
    """helper-186: within a cost tie the smaller ``quality_debit_points`` went first, and a debit no source states
    (``gqa:2``: fewer KV heads than trained) counts 0 there, so it beat fp8's stated 0.1 as if known to be smaller.
    Within the tie the wholly stated go first (by debit, then cost), then the not stated (the same); outside it
    cost alone orders, and the note says what decided it."""
    rows = _rows().iloc[[0, 0, 0, 0, 0, 0, 0]].reset_index(drop=True).assign(
        strategy=["gqa:2", "fp8", "int4", "gqa:2+fp8", "mqa", "native", "x"],
        meets_slo=[True, True, True, True, True, True, False],
        # the tie: within 1% of the cheapest, $50.00 -> up to $50.50
        usd_per_million_output_tokens=[50.0, 50.2, 50.1, 50.0, 51.0, 52.0, 40.0],
        quality_debit_points=[0.0, 0.1, 0.6, 0.1, 0.0, 0.0, 0.0],
        ttft_p99_s=[1.0] * 6 + [20.0], tpot_p99_s=[0.05] * 7,
        debit_caveats=["gqa:2 ...", "", "", "gqa:2 ...", "mqa ...", "", ""],
        debit_not_stated=["gqa:2", "", "", "gqa:2", "mqa", "", ""])
    fig = compare_figure(rows, "Llama-3-70B on 8xH100 (TP8): chat-4k")
    cost = fig.axes[0]
    assert [t.get_text() for t in cost.get_yticklabels()] == [
        "fp8\nquality debit 0.1 pt", "int4\nquality debit 0.6 pt", "gqa:2\nquality debit not stated",
        "gqa:2+fp8\nquality debit 0.1 pt + not stated", "mqa\nquality debit not stated", "native", "x"]
    assert cost.texts[0].get_text() == ("$50.2  ← the cheapest within the SLOs\n(a tie on cost: a stated quality "
                                        "debit before one no source states)")
    plt.close(fig)
    # all in the tie not stated: the smaller debit decides, and the note says so
    fig = compare_figure(rows[rows.strategy.isin(["gqa:2", "gqa:2+fp8", "mqa"])].assign(
        usd_per_million_output_tokens=[50.1, 50.0, 50.2]), "t")
    assert [t.get_text().split("\n")[0] for t in fig.axes[0].get_yticklabels()] == ["gqa:2", "mqa", "gqa:2+fp8"]
    assert fig.axes[0].texts[0].get_text().endswith("(a tie on cost: the smaller quality debit)")
    plt.close(fig)


def test_the_cheapest_by_less_than_the_tie_says_so() -> None:
    """helper-197: eight sets that met the SLOs printed $6.31 and one was marked the cheapest, by 0.1%, with no word
    that the others tie it; where the best is also the cheapest but others are within `TIE`, the note counts them."""
    rows = _rows().iloc[[0, 0, 0, 0]].reset_index(drop=True).assign(
        strategy=["prefix", "prefix+dram", "prefix+nvme", "native"], meets_slo=[True] * 4,
        usd_per_million_output_tokens=[6.312, 6.309, 6.315, 7.0], quality_debit_points=[0.0] * 4,
        ttft_p99_s=[1.0] * 4, tpot_p99_s=[0.05] * 4, debit_caveats=[""] * 4, debit_not_stated=[""] * 4)
    fig = compare_figure(rows, "t")
    assert fig.axes[0].texts[0].get_text() == ("$6.31  ← the cheapest within the SLOs\n(by under 1%: 2 other sets "
                                               "within it, a tie on cost)")
    plt.close(fig)
    fig = compare_figure(rows.iloc[[1, 3]], "t")  # 7.0 is 11% above: no tie, no note
    assert fig.axes[0].texts[0].get_text() == "$6.31  ← the cheapest within the SLOs"
    plt.close(fig)
