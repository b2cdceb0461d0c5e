"""Per-GPU placement of weights and KV under a parallelism plan, against hand arithmetic."""

import json

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from hardware.catalog import load_catalog
from simulator.capacity import compare_plans, kv_budget, max_context, max_streams
from simulator.cli import main
from simulator.errors import ConfigError
from simulator.kv import KVLayout, parse_layout, sequence_bytes
from simulator.models import get_model, with_weight_precision
from simulator.placement import (
    ParallelPlan,
    candidate_plans,
    heads_per_gpu,
    kv_share,
    parse_plan,
    stage_layers,
    stages,
)

CAT = load_catalog()
H100, H200 = CAT.node("8xH100"), CAT.node("8xH200")
DSV3, L70, L405 = get_model("DeepSeek-V3"), get_model("Llama-3-70B"), get_model("Llama-3.1-405B")
GB = 1e9


def test_deepseek_v3_tp8_on_8xh200_holds_the_whole_latent_on_every_gpu():
    # fp8 weights (1 B each), per GPU under TP8:
    #   embeddings + LM head, kept in bf16 as the checkpoint does: 2 · 129,280 · 7,168 · 2 B / 8 = 0.4633 GB
    #   attention 61 · ((187.105M − 15.139M latent down-projections) / 8 + 15.139M) = 2.2347 GB
    #   dense rest 61 · 62.70M / 8 = 0.4781 GB; routed experts 58 · 256 · 44.04M / 8 = 81.7383 GB
    #   total 84.915 GB; KV budget 0.9 · 141 − 84.915 = 41.985 GB (84.683 and 42.217 with fp8 embeddings)
    b = kv_budget(H200, DSV3, plan=ParallelPlan(tp=8))
    st0 = b.stages[0]
    assert st0.embedding_bytes / GB == pytest.approx(0.46334, abs=1e-4)
    assert st0.attention_bytes / GB == pytest.approx(2.2348, abs=1e-3)
    assert st0.expert_bytes / GB == pytest.approx(81.7383, abs=1e-3)
    assert st0.weight_bytes / GB == pytest.approx(84.915, abs=1e-3)
    assert b.stage_kv_bytes(0) / GB == pytest.approx(41.985, abs=1e-3)
    # the latent (512 + 64 values, bf16, 61 layers = 70,272 B/token) is whole on every rank:
    # 32,768 · 70,272 = 2.3027 GB a stream a GPU -> floor(41.985 / 2.3027) = 18 (the pooled model said 149)
    assert kv_share(DSV3, KVLayout(), 8) == 1.0
    assert max_streams(b, DSV3, None, 32_768) == 18


def test_deepseek_v3_dp8_attention_ep8_on_8xh200():
    # DP attention: every GPU holds the whole attention, 61 · 187.105M = 11.4134 GB, instead of 2.2347, and the
    # whole input embedding, as SGLang does (helper-155): 129,280 · 7,168 · 2 B = 1.8534 GB instead of an eighth,
    # 0.2317 (the LM head stays split: 0.2317): weights 84.9147 − 2.2347 + 11.4134 − 0.2317 + 1.8534 = 95.715 GB,
    # KV 126.9 − 95.715 = 31.185 GB a GPU; each GPU holds its own sequences: 8 · floor(31.185 / 2.3027) = 8 · 13
    # = 104 streams (112 with the embedding split)
    b = kv_budget(H200, DSV3, plan=ParallelPlan(tp=8, dp_attention=True, ep=8))
    assert b.stages[0].embedding_bytes / GB == pytest.approx(1.8534 + 0.2317, abs=1e-4)
    assert b.stages[0].weight_bytes / GB == pytest.approx(95.715, abs=1e-3)
    assert b.stage_kv_bytes(0) / GB == pytest.approx(31.185, abs=1e-3)
    assert max_streams(b, DSV3, None, 32_768) == 104


def test_llama3_70b_tp16_over_two_nodes_replicates_kv_heads():
    # 8 KV heads over 16 ranks: each GPU holds 1 head (replicated twice), 80 · 256 · 2 B = 40,960 B/token
    b = kv_budget(H100, L70, plan=ParallelPlan(tp=16))
    assert (b.nodes, b.replicas) == (2, 1)
    assert heads_per_gpu(L70, KVLayout(), 16) == 1 and kv_share(L70, KVLayout(), 16) == 1 / 8
    # weights per GPU: 141.1 GB / 16 = 8.819 GB, plus the K/V projections of the replicated head:
    # all heads' K/V weights are 80 · 8192 · 8 · 256 · 2 B = 2.684 GB; a GPU holds 1/8 of them, not
    # 1/16: + 2.684 / 16 = 0.168 GB -> 8.987 GB; KV 72 − 8.987 = 63.013 GB
    assert b.stages[0].weight_bytes / GB == pytest.approx(141.1 / 16 + 2.684 / 16, abs=1e-3)
    # a 128k stream: 131,072 · 40,960 = 5.369 GB a GPU -> floor(63.01 / 5.369) = 11 streams on the 2 nodes,
    # where two TP8 nodes hold 2 · 10 = 20
    assert max_streams(b, L70, None, 131_072) == 11
    assert 2 * max_streams(kv_budget(H100, L70, plan=ParallelPlan(tp=8)), L70, None, 131_072) == 20


def test_llama31_405b_bf16_on_two_8xh100_with_pp2():
    # 126 layers -> 63 a stage. Per GPU (bf16): layers 63 · (570.43M + 2,617.25M) / 8 · 2 B = 50.205 GB,
    # embeddings (stage 1) or LM head (stage 2) 128,256 · 16,384 / 8 · 2 B = 0.5253 GB: 50.731 GB
    b = kv_budget(H100, L405, plan=ParallelPlan(tp=8, pp=2))
    assert stage_layers(126, 2) == [(0, 63), (63, 126)]
    assert (b.nodes, b.replicas) == (2, 1)
    for s in (0, 1):
        assert b.stages[s].weight_bytes / GB == pytest.approx(50.731, abs=1e-3)
        assert b.stage_kv_bytes(s) / GB == pytest.approx(72 - 50.731, abs=1e-3)
    # KV a GPU: 63 layers · 1 head · 256 · 2 B = 32,256 B/token; 128k: 4.228 GB -> floor(21.269 / 4.228) = 5
    assert max_streams(b, L405, None, 131_072) == 5
    # one node cannot hold it: 811.7 GB / 8 = 101.5 GB a GPU
    with pytest.raises(Exception, match=r"101\.5 GB \(bf16\)"):
        kv_budget(H100, L405, plan=ParallelPlan(tp=8))


def test_stage_sequence_bytes_add_up_to_the_sequence():
    # Gemma-3-27B (5 local : 1 global) over 4 stages: the stages' layers add up to the whole
    gemma = get_model("Gemma-3-27B")
    bounds = stage_layers(gemma.n_layers, 4)
    assert bounds == [(0, 15), (15, 31), (31, 47), (47, 62)]  # vLLM's: the remainder to the stages before the last
    for n in (100, 5000, 200_000):
        parts = sum(sequence_bytes(gemma, KVLayout(), n, 16, r) for r in bounds)
        assert parts == pytest.approx(sequence_bytes(gemma, KVLayout(), n, 16))


def test_plan_rules_name_what_is_wrong():
    with pytest.raises(ConfigError, match="'ep' must be 1 for a dense model"):
        kv_budget(H100, L70, plan=ParallelPlan(tp=8, ep=8))
    with pytest.raises(ConfigError, match="'ep' must be an integer >= 1 that divides tp=8"):
        ParallelPlan(tp=8, ep=3)
    with pytest.raises(ConfigError, match="'tp' must be a multiple of its 8 KV heads"):
        kv_share(L70, KVLayout(), 12)
    with pytest.raises(ConfigError, match=r"'tp × pp' must be a multiple of the node's 8 GPUs"):
        kv_budget(H100, L70, plan=ParallelPlan(tp=4, pp=3))


def test_candidate_plans_and_side_by_side():
    plans = candidate_plans(H200, DSV3)
    labels = [p.label for p in plans]
    assert labels == ["TP8", "TP4", "TP2", "TP1", "DP8-attention EP8", "TP16", "TP8 PP2", "DP8-attention PP2 EP8"]
    rows = {r.plan: r for r in compare_plans(H200, DSV3, KVLayout(), 32_768, plans)}
    assert rows["TP8"].max_streams == 18 and rows["DP8-attention EP8"].max_streams == 104
    assert not rows["TP4"].fits and rows["TP4"].max_streams == 0 and "does not fit" in rows["TP4"].why
    # DP attention helps only where KV is replicated: Llama-3-70B has 8 heads for 8 GPUs already
    l70 = {r.plan: r for r in compare_plans(H100, L70, KVLayout(), 4096, candidate_plans(H100, L70))}
    assert l70["TP8"].max_streams == 324 and l70["DP8-attention"].max_streams < 324


@given(st.sampled_from(["native", "fp8", "mla", "gqa:4"]), st.integers(1, 300_000),
       st.sampled_from([ParallelPlan(tp=8), ParallelPlan(tp=16), ParallelPlan(tp=8, pp=2), ParallelPlan(tp=4)]))
def test_streams_fit_the_binding_gpu_exactly(text, n, plan):
    layout = parse_layout(text)
    b = kv_budget(H100, L70, plan=plan)
    m = max_streams(b, L70, layout, n)
    per_pool = m // (b.replicas * plan.kv_groups)
    share = kv_share(L70, layout, plan.attention_tp)
    for s, st_ in enumerate(b.stages):
        one = sequence_bytes(L70, layout, n, 16, st_.layer_range) * share
        assert per_pool * one <= b.stage_kv_bytes(s)
    assert any((per_pool + 1) * sequence_bytes(L70, layout, n, 16, st_.layer_range) * share > b.stage_kv_bytes(s)
               for s, st_ in enumerate(b.stages))
    # the longest context for that many streams is at least n
    if m:
        assert max_context(b, L70, layout, m) >= n


def test_weights_add_up_to_the_model_when_nothing_is_replicated():
    # Llama-3-70B, TP8 (8 heads, 8 GPUs): the GPUs hold exactly the model's 141.1 GB
    sts = stages(L70, ParallelPlan(tp=8))
    assert 8 * sum(s.weight_bytes for s in sts) == pytest.approx(L70.weight_bytes, rel=1e-12)
    sts = stages(L405, ParallelPlan(tp=8, pp=2))
    assert 8 * sum(s.weight_bytes for s in sts) == pytest.approx(L405.weight_bytes, rel=1e-12)
    # in fp8 too, the embeddings (stage 0) and LM head (stage 1) in bf16 on both sides
    f8 = with_weight_precision(L405, "fp8")
    sts = stages(f8, ParallelPlan(tp=8, pp=2))
    assert 8 * sum(s.weight_bytes for s in sts) == pytest.approx(f8.weight_bytes, rel=1e-12)
    assert 8 * sts[1].embedding_bytes == 2 * f8.lm_head_params  # 2 B a value


def test_fit_prints_per_gpu_arithmetic_and_plans():
    r = CliRunner().invoke(main, ["fit", "--hardware", "8xH200", "--model", "DeepSeek-V3", "--context", "32768"])
    assert r.exit_code == 0, r.output
    assert "per GPU: 141 GB × 0.9 − weights 84.91 GB" in r.output and "= KV 41.99 GB" in r.output
    assert "max streams at 32,768 tokens: 18" in r.output
    assert "DP8-attention EP8" in r.output and "104" in r.output
    r = CliRunner().invoke(main, ["fit", "--hardware", "8xH100", "--model", "Llama-3.1-405B", "--context", "131072",
                                  "--pp", "2", "--json"])
    assert r.exit_code == 0, r.output
    import json

    doc = json.loads(r.output)
    assert doc["plan"] == "TP8 PP2" and doc["nodes"] == 2 and doc["max_streams"] == 5
    assert [s["layers"] for s in doc["stages"]] == [[0, 63], [63, 126]]


def test_parse_plan():
    assert parse_plan("tp8") == ParallelPlan(tp=8)
    assert parse_plan("dp8+ep8") == ParallelPlan(tp=8, dp_attention=True, ep=8)
    assert parse_plan("TP8+PP2") == ParallelPlan(tp=8, pp=2)
    for bad in ("pp2", "tp8+tp4", "tp8+dp8", "xx8", "tp", "tp8+ep3"):
        with pytest.raises(ConfigError):
            parse_plan(bad)


def test_collapse_draws_tp_and_dp_attention_for_an_mla_model(tmp_path):
    from simulator.collapse import collapse_table, default_plans

    assert default_plans(8, L70) == [ParallelPlan(tp=8)]
    plans = default_plans(8, DSV3)
    assert plans == [ParallelPlan(tp=8), ParallelPlan(tp=8, dp_attention=True, ep=8)]
    df = collapse_table(CAT, DSV3, ["8xH200"], ["native"], contexts=np.array([32_768]), plans=plans)
    assert list(df.plan) == ["TP8", "DP8-attention EP8"] and list(df.max_streams) == [18, 104]
    # a multi-node plan's streams are per node: TP8 PP2 holds 5 streams of 128k on 2 nodes -> 2.5 a node
    df = collapse_table(CAT, L405, ["8xH100"], ["native"], contexts=np.array([131_072]),
                        plans=[ParallelPlan(tp=8, pp=2)])
    assert list(df.max_streams) == [2.5] and list(df.streams_on_nodes) == [5]
    r = CliRunner().invoke(main, ["collapse", "--model", "DeepSeek-V3", "--hardware", "8xH200", "--layout",
                                  "native", "--out", str(tmp_path)])
    assert r.exit_code == 0, r.output
    assert "DP8-attention EP8" in r.output and (tmp_path / "collapse.png").stat().st_size > 10_000
    r = CliRunner().invoke(main, ["collapse", "--model", "DeepSeek-V3", "--plan", "tp8,zz", "--out", str(tmp_path)])
    assert r.exit_code == 2 and "'zz' is not one of tpN" in r.output


def test_collapse_keeps_a_multi_node_plans_streams_per_node_exact(tmp_path):
    """helper-172: the table floored streams per node, so TP16 over two 8xH100 nodes read 5 streams of 128k a node
    where `kvsim fit` says 5.5. Llama-3-70B at 131,072 tokens, 327,680 B a token over 8 KV heads:
    TP16: 8 heads on 16 ranks, one a GPU (each stored twice): 131,072 · 40,960 B = 5.369 GB a stream of the
      0.9 · 80 − 8.99 = 63.01 GB a GPU holds: floor(63.01 / 5.369) = 11 on the replica's 2 nodes, 5.5 a node
      (at 4k, 167.8 MB a stream: 375, 187.5 a node);
    TP8 PP2: 40 layers and one head a GPU, 2.684 GB a stream of 63.18 GB: 23 on 2 nodes, 11.5 a node;
    TP8: one node, one head a GPU, 5.369 GB a stream of 54.36 GB: 10, a whole number."""
    import matplotlib.pyplot as plt
    import pandas as pd

    from simulator.charts import plot_collapse_panel
    from simulator.collapse import collapse_table

    plans = [ParallelPlan(tp=8), ParallelPlan(tp=16), ParallelPlan(tp=8, pp=2)]
    df = collapse_table(CAT, L70, ["8xH100"], ["native"], contexts=np.array([4096, 131_072]), plans=plans)
    at = df[df.context_tokens == 131_072]
    assert list(at.nodes) == [1, 2, 2] and list(at.streams_on_nodes) == [10, 11, 23]
    assert list(at.max_streams) == [10.0, 5.5, 11.5]
    fit = {p.plan: p.streams_per_node for p in compare_plans(H100, L70, KVLayout(), 131_072, plans)}
    assert list(at.max_streams) == [fit["TP8"], fit["TP16"], fit["TP8 PP2"]]  # fit's streams/node
    one = collapse_table(CAT, L70, ["8xH100"], ["native"], contexts=np.array([131_072]))  # one node: whole numbers
    assert one.max_streams.dtype.kind == "i" and list(one.max_streams) == [10] and list(one.nodes) == [1]
    # the chart draws the exact figure, and the CLI and its CSV give it (whole ones without a decimal)
    ax = plot_collapse_panel(df)
    tp16 = next(line for line in ax.lines if line.get_label().endswith(", TP16"))
    assert list(tp16.get_ydata()) == [187.5, 5.5]
    plt.close(ax.figure)
    r = CliRunner().invoke(main, ["collapse", "--model", "Llama-3-70B", "--hardware", "8xH100", "--plan",
                                  "tp8,tp16,tp8+pp2", "--layout", "native", "--out", str(tmp_path)])
    assert r.exit_code == 0, r.output
    rows = {" ".join(line.split()[:-4]): line.split()[-4:] for line in r.output.splitlines()
            if line.endswith(("1", "0.5"))}
    assert rows["8xH100 TP8 native"] == ["324", "40", "10", "1"]
    assert rows["TP16 native"] == ["187.5", "23", "5.5", "0.5"]  # 1M: one stream on the 2 nodes
    assert rows["TP8 PP2 native"] == ["376.5", "47", "11.5", "1"]
    assert ("TP16 (8xH100): one replica over 2 nodes; per node, its streams ÷ 2 (collapse.csv: nodes, "
            "streams_on_nodes)") in r.output
    # four figures print as a table of whole counts prints them, without a thousands separator (helper-176)
    r = CliRunner().invoke(main, ["collapse", "--model", "Llama-3.1-8B", "--hardware", "8xH100", "--plan",
                                  "tp8,tp16", "--layout", "native", "--out", str(tmp_path / "8b")])
    assert r.exit_code == 0, r.output
    assert [line.split()[-4:] for line in r.output.splitlines() if " native " in line] == [
        ["1042", "130", "32", "4"], ["528.5", "66", "16.5", "2"]]
    # under one stream a node, three significant figures: TP64 over 64 1xH100 nodes holds one 1M-token stream of
    # Llama-3.1-405B in fp8, 1/64 = 0.015625 a node, which one decimal printed "0.0" beside native's "0" (none)
    r = CliRunner().invoke(main, ["collapse", "--model", "Llama-3.1-405B", "--hardware", "1xH100", "--plan", "tp64",
                                  "--layout", "native,fp8", "--out", str(tmp_path / "405b")])
    assert r.exit_code == 0, r.output
    assert [line.split()[-4:] for line in r.output.splitlines() if line.split()[-5:-4] in (["native"], ["fp8"])] == [
        ["3.4", "0.422", "0.0938", "0"], ["6.9", "0.859", "0.203", "0.0156"]]
    csv = pd.read_csv(tmp_path / "collapse.csv").set_index(["plan", "context_tokens"])
    assert csv.loc[("TP16", 131_072), ["max_streams", "nodes", "streams_on_nodes"]].tolist() == [5.5, 2, 11]


def test_a_multi_node_plans_simulated_streams_are_drawn_per_node():
    """helper-176: a report's collapse study of a TP16 plan over two 8xH100 nodes simulates the replica on both
    nodes, so its peak and mean streams are the two nodes' (``nodes`` 2; ``analytic_streams`` 46 at 32k, the
    table's ``streams_on_nodes``), and the chart drew them whole on its per-node axis: at 32k a flooded peak of
    52 against the line's 23 a node. The chart draws them ÷ 2 (26, within the line's 23 · 8/7: a decoding
    sequence holds n − o to n tokens, o = n/8), a table without ``nodes`` (an older CSV) as it is."""
    import matplotlib.pyplot as plt
    import pandas as pd

    from simulator.charts import plot_collapse_panel
    from simulator.collapse import collapse_table
    from simulator.engine import EngineConfig
    from simulator.study import simulated_collapse

    config = EngineConfig(model="Llama-3-70B", node="8xH100", n_nodes=2, tp=16)
    sim = simulated_collapse(config, [32_768], requests_per_point=60)
    assert list(sim.nodes) == [2] and list(sim.analytic_streams) == [46]
    df = collapse_table(CAT, L70, ["8xH100"], ["native"], contexts=np.array([4096, 32_768]),
                        plans=[ParallelPlan(tp=16)])
    assert df.set_index("context_tokens").streams_on_nodes[32_768] == 46
    drawn = pd.DataFrame({"hardware": "8xH100", "context_tokens": [32_768], "nodes": [2], "peak_streams": [52],
                          "mean_streams": [22.4]})
    ax = plot_collapse_panel(df, simulated=drawn)
    peak, mean = (c.get_offsets()[:, 1].tolist() for c in ax.collections)
    assert (peak, mean) == ([26.0], [11.2])
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend[1] == "simulated: peak, flooded (÷ the replica's 2 nodes)"
    plt.close(ax.figure)
    ax = plot_collapse_panel(df, simulated=drawn.drop(columns="nodes"))
    assert [c.get_offsets()[:, 1].tolist() for c in ax.collections] == [[52.0], [22.4]]
    plt.close(ax.figure)


def test_under_one_stream_a_node_the_axis_reads_fractions_and_the_marks_stay_under_the_lines():
    """helper-176: TP64 over eight 8xH100 nodes holds one stream of 512k to 882k tokens of Llama-3.1-405B on its
    eight nodes, 0.125 a node. The streams axis printed its 0.1 tick as "0" and kept the no-stream marks' row at
    0.3, so the line ran along the marks. The foot now sits under a third of the lowest stream drawn (0.042) and
    the tick reads 0.1."""
    import matplotlib.pyplot as plt

    from simulator.charts import plot_collapse_panel
    from simulator.collapse import collapse_table

    l405 = get_model("Llama-3.1-405B")
    df = collapse_table(CAT, l405, ["8xH100"], ["native"], plans=[ParallelPlan(tp=64)])
    assert df.max_streams[df.max_streams > 0].min() == 0.125 and (df.max_streams == 0).any()
    ax = plot_collapse_panel(df)
    ax.figure.canvas.draw()
    assert ax.get_ylim()[0] <= 0.125 / 3
    labels = {t.get_text() for t in ax.get_yticklabels() if ax.get_ylim()[0] <= t.get_position()[1] <= ax.get_ylim()[1]}
    assert {"0.1", "1", "10", "100"} <= labels and "0" not in labels
    plt.close(ax.figure)


def test_calc_prints_one_gpus_share():
    r = CliRunner().invoke(main, ["calc", "--model", "Llama-3-70B", "--context", "32768", "--tp", "16"])
    assert r.exit_code == 0, r.output
    # 327,680 B/token / 8 heads = 40,960 B on each of 16 GPUs (1 head, replicated twice)
    # (helper-191: without "each on 2 GPUs" it read as a TP8 share)
    assert "one GPU of TP16 holds 0.125 of it (1 of 8 KV heads, each on 2 GPUs): 40,960 B per token" in r.output
    r = CliRunner().invoke(main, ["calc", "--model", "Llama-3-70B", "--context", "32768", "--tp", "8"])
    assert "one GPU of TP8 holds 0.125 of it (1 of 8 KV heads): 40,960 B per token" in r.output  # no copies
    r = CliRunner().invoke(main, ["fit", "--model", "Llama-3-70B", "--hardware", "8xH100", "--tp", "16",
                                  "--context", "131072"])
    assert "a 131,072-token stream holds 5.369 GB here (1 of 8 KV heads, each on 2 GPUs) -> 11 per KV pool" \
        in r.output
    r = CliRunner().invoke(main, ["calc", "--model", "DeepSeek-V3", "--context", "32768", "--tp", "8"])
    assert "70,272 B per token, batch 2.303 GB paged" in r.output
    # --json has the figures the text prints (helper-191: only the share): 40,960 B a token; 32,768 tokens of
    # 16-token blocks, 1,342,177,280 B a GPU; DeepSeek-V3's latent whole on each GPU, 70,272 B
    r = CliRunner().invoke(main, ["calc", "--model", "Llama-3-70B", "--context", "32768", "--tp", "16", "--json"])
    out = json.loads(r.output)
    assert (out["kv_share_per_gpu"], out["bytes_per_token_per_gpu"], out["batch_bytes_paged_per_gpu"]) == \
        (0.125, 40960, 32768 * 40960)
    r = CliRunner().invoke(main, ["calc", "--model", "DeepSeek-V3", "--context", "32768", "--tp", "8", "--json"])
    assert json.loads(r.output)["bytes_per_token_per_gpu"] == 70272
    r = CliRunner().invoke(main, ["calc", "--model", "DeepSeek-V3", "--context", "32768", "--json"])
    assert "bytes_per_token_per_gpu" not in json.loads(r.output)  # no --tp: no GPU's share


def test_kv_transfer_by_hand():
    from simulator.capacity import kv_transfer

    # Llama-3-70B TP8 -> TP8 on 8×H100: a 4,096-token prompt is 1.342 GB; each GPU sends and receives
    # its 1 of 8 heads, 167.8 MB, over its 400 Gb/s NIC: 167.8e6 / 50e9 = 3.355 ms + 5 µs
    b = kv_budget(H100, L70, plan=ParallelPlan(tp=8))
    t = kv_transfer(L70, KVLayout(), 4096, b, b, H100, H100)
    assert t.payload_bytes == 327_680 * 4096 == 1_342_177_280
    assert t.recv_bytes_per_gpu == t.send_bytes_per_gpu == 1_342_177_280 / 8
    assert t.seconds == pytest.approx(1_342_177_280 / 8 / 50e9 + 5e-6, rel=1e-12)
    # DeepSeek-V3: the latent is whole on every rank, so every decode GPU receives all 70,272 B a token
    d = kv_budget(H200, DSV3, plan=ParallelPlan(tp=8))
    t = kv_transfer(DSV3, KVLayout(), 4096, d, d, H200, H200)
    assert t.recv_bytes_per_gpu == pytest.approx(70_272 * 4096) and t.payload_bytes == pytest.approx(70_272 * 4096)
    # fp8 KV halves it
    t8 = kv_transfer(DSV3, parse_layout("fp8"), 4096, d, d, H200, H200)
    assert t8.link_bytes == pytest.approx(t.link_bytes / 2)


def test_kv_link_bytes_is_kv_transfers_link_bytes():
    """The engine's per-hand-off price (`kv_link_bytes`) is `kv_transfer`'s ``link_bytes``, the same float,
    paged or not, across plans (TP8 -> TP4: a decode GPU holds twice the heads) and nodes (sender-limited)."""
    from simulator.capacity import kv_link_bytes, kv_transfer

    b8 = kv_budget(H100, L70, plan=ParallelPlan(tp=8))
    b4 = kv_budget(H200, L70, plan=ParallelPlan(tp=4))
    for tokens in (1, 15, 16, 4097, 123_457):
        for args in ((b8, b8, H100, H100), (b8, b4, H100, H200), (b4, b8, H200, H100)):
            for block in (0, 16):
                got = kv_link_bytes(L70, KVLayout(), tokens, *args, block)
                assert got == kv_transfer(L70, KVLayout(), tokens, *args, block).link_bytes
    # by hand: TP8 -> TP4, 4,096 tokens: a decode GPU receives 2 of 8 heads, 327,680 · 4096 / 4 bytes
    assert kv_link_bytes(L70, KVLayout(), 4096, b8, b4, H100, H200) == 327_680 * 4096 / 4


def test_fit_names_the_plans_that_hold_a_target_with_no_lever():
    """helper-114: DP8-attention EP8 holds 104 streams of DeepSeek-V3 at 32k on one 8xH200, where TP8 holds 18;
    a target of 64 named only lossy levers."""
    import json

    args = ["fit", "--hardware", "8xH200", "--model", "DeepSeek-V3", "--context", "32768", "--batch", "64"]
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 0, r.output
    assert "target 64 × 32,768 tokens does NOT fit on plan TP8.\n  plans above that hold it with no lever (no " \
           "quality debit): DP8-attention EP8 (104 streams on 1 node); TP8 PP2 (73 streams on 2 nodes); " \
           "DP8-attention PP2 EP8 (536 streams on 2 nodes)\n" in r.output
    doc = json.loads(CliRunner().invoke(main, [*args, "--json"]).output)
    assert doc["plans_that_fit"] == ["DP8-attention EP8", "TP8 PP2", "DP8-attention PP2 EP8"]
    assert not doc["fits"] and doc["max_streams"] == 18
    doc = json.loads(CliRunner().invoke(main, [*args[:-1], "16", "--json"]).output)
    assert doc["fits"] and doc["plans_that_fit"] == []


@pytest.mark.parametrize(("layout", "batch", "fixes"), [
    # a layout's own lever is paid and stays: no second KV dtype on fp8, and cross-layer alone then fits
    ("fp8", 32, [("cross-layer", "cross-layer:0.5+fp8", 40), ("compress", "fp8+compress:8:4096", 132)]),
    ("int4", 64, [("cross-layer", "cross-layer:0.5+int4", 64), ("compress", "int4+compress:8:4096", 212)]),
    ("cross-layer:0.5", 32, [("fp8", "cross-layer:0.5+fp8", 40), ("int8", "cross-layer:0.5+int8", 39),
                             ("int4", "cross-layer:0.5+int4", 64), ("fp4", "cross-layer:0.5+fp4", 72),
                             ("compress", "cross-layer:0.5+compress:8:4096", 132)]),
    # a part that is no lever gives way to a lever of its family: bf16 to the KV dtypes
    ("bf16", 32, [("int4", "int4", 32), ("fp4", "fp4", 36), ("fp8+cross-layer", "cross-layer:0.5+fp8", 40),
                  ("int8+cross-layer", "cross-layer:0.5+int8", 39), ("compress", "compress:8:4096", 66)]),
])
def test_fit_levers_stack_on_the_layout_given(layout, batch, fixes):
    """helper-114: any --layout or --kv-dtype whose target did not fit failed (``'fp8+fp8': 'fp8' conflicts
    with 'fp8'``): the lever search appended every lever to the layout, its own family's too."""
    import json

    for args in (["--layout", layout], ["--kv-dtype", layout]) if layout in ("fp8", "int4", "bf16") else (
            ["--layout", layout],):
        r = CliRunner().invoke(main, ["fit", "--hardware", "8xH100", "--model", "Llama-3.1-70B", "--context",
                                      "131072", "--batch", str(batch), *args, "--json"])
        assert r.exit_code == 0, r.output
        doc = json.loads(r.output)
        assert [("+".join(f["levers"]), f["layout"], f["max_streams"]) for f in doc["fixes"]] == fixes


def test_fit_says_what_the_engine_holds_under_a_pipeline():
    """helper-115: fit read 23 streams of 131k tokens under TP8 PP2 where the engine holds 22: it runs a
    scheduler per stage in flight, each with half the pool's blocks (96,406 of 192,813; a stream takes 8,192,
    11 each). Fit now says so, from the engine's own pool size."""
    import json

    from simulator.scenario import parse_scenario
    from simulator.study import run_scenario

    args = ["fit", "--hardware", "8xH100", "--model", "Llama-3.1-70B", "--context", "131072", "--pp", "2"]
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 0, r.output
    assert ("  the simulator runs a scheduler per pipeline stage in flight (vLLM's virtual engines), each with 1/2 of "
            "a KV pool's 192,813 blocks (96,406; a stream takes 8,192): 22 streams there\n") in r.output
    doc = json.loads(CliRunner().invoke(main, [*args, "--json"]).output)
    assert (doc["max_streams"], doc["simulated_max_streams"]) == (23, 22)
    sc = parse_scenario({"name": "pp", "model": {"name": "Llama-3.1-70B"},
                         "cluster": {"hardware": ["8xH100"], "nodes": 2, "tp": 8, "pp": 2},
                         "workload": {"duration_s": 2, "spec": {"name": "synthetic", "input_tokens": 100,
                                                                "output_tokens": 2}},
                         "report": {"collapse": False, "breakeven": False}}, "pp")
    summary = run_scenario(sc).results["8xH100"].summary
    assert summary["kv_blocks_per_replica"] == 96_406 and doc["simulated_max_streams"] == 96_406 // 8_192 * 2
    # one stage: the engine holds what fit counts, and no line says otherwise
    r = CliRunner().invoke(main, [*args[:-2], "--json"])
    doc = json.loads(r.output)
    assert doc["max_streams"] == doc["simulated_max_streams"] == 10
    assert "virtual engines" not in CliRunner().invoke(main, args[:-2]).output
    # nor where a compressed layout's blocks, not a pipeline, make the engine's count differ (helper-116)
    r = CliRunner().invoke(main, ["fit", "--hardware", "1xH100", "--model", "Llama-3.1-8B", "--context", "1000",
                                  "--layout", "compress:8:4096", "--json"])
    doc = json.loads(r.output)
    # both page the full-resolution window in 16-token pages (1,008 tokens' bytes: 63 + 441 blocks of a
    # sixteenth of a page). When every sequence carried the window's 1,793 overhead blocks the engine held
    # 114, not 423; counted by the token (63 + 438 blocks), 425 (helper-138) (`BlockGeometry.overhead`)
    assert (doc["max_streams"], doc["simulated_max_streams"]) == (423, 423)
    r = CliRunner().invoke(main, ["fit", "--hardware", "1xH100", "--model", "Llama-3.1-8B", "--context", "1000",
                                  "--layout", "compress:8:4096"])
    assert r.exit_code == 0 and "virtual engines" not in r.output


def test_fit_of_weights_that_do_not_fit_names_the_plans_they_fit():
    """helper-115: Llama-3.1-405B on one 8xH100 said by how much TP8 misses, and nothing of TP8 PP2 on two
    nodes, which holds it (the plans table, which would show it, was never reached)."""
    r = CliRunner().invoke(main, ["fit", "--model", "Llama-3.1-405B", "--hardware", "8xH100", "--context", "8192"])
    assert r.exit_code == 2
    assert r.output == ("Error: Llama-3.1-405B does not fit TP8 on 8xH100: one GPU holds weights of 101.5 GB (bf16), "
                        "more than its usable 72.0 GB (0.9 × 80 GB) by 29.5 GB (235.7 GB over the stage's 8 GPUs); "
                        "plans whose weights fit: TP8 PP2 (2 nodes), TP16 (2 nodes)\n")  # most streams first
    r = CliRunner().invoke(main, ["fit", "--model", "Llama-3.1-405B", "--hardware", "1xH100", "--context", "8192"])
    # nor do fp8's 410 GB or fp4's 234 GB fit the plans of up to 2 nodes of 72 GB (helper-155: it said "try fp8")
    assert r.exit_code == 2 and r.output.rstrip().endswith(
        "; no plan kvsim fit compares holds them, nor with fp8 or fp4 weights")
    # 2 x 4xH100: bf16 TP8 holds 811.7 / 8 = 101.5 GB a GPU, over 72; fp8 (410.1 GB) 51.3: the hint names it
    r = CliRunner().invoke(main, ["fit", "--model", "Llama-3.1-405B", "--hardware", "4xH100", "--context", "8192"])
    assert r.exit_code == 2 and r.output.rstrip().endswith(
        "; no plan kvsim fit compares holds them; with fp8 weights (--weight-dtype fp8) TP8 (2 nodes) does")
    # fp8 weights already: no such advice (helper-118); more plans than FIT_PLANS_NAMED: the rest counted
    r = CliRunner().invoke(main, ["fit", "--model", "Llama-3.1-405B", "--hardware", "1xH100", "--context", "8192",
                                  "--weight-dtype", "fp8"])
    assert r.exit_code == 2 and r.output.rstrip().endswith("; no plan kvsim fit compares holds them, nor with fp4 "
                                                           "weights")
    r = CliRunner().invoke(main, ["fit", "--model", "Llama-3.1-70B", "--hardware", "8xH100", "--context", "8192",
                                  "--tp", "1"])
    assert r.exit_code == 2 and r.output.rstrip().endswith(" and 4 more") and len(r.output) < 290


def test_placement_follows_vllm_and_sglang_helper_155():
    """helper-155's four: vLLM's pipeline split (the remainder to the stages before the last), the heavier of two
    stages that tie shown as the binding GPU, DP attention over one GPU not listed beside TP1, and the weights-do-
    not-fit error's plans ordered by streams a node (TP8 on one node was behind "and 4 more")."""
    # 61 layers over 4 stages: 15, 15, 16, 15 (vLLM's get_pp_indices); the first stage held 16 with the 3 dense
    assert stage_layers(61, 4) == [(0, 15), (15, 30), (30, 46), (46, 61)]
    assert stage_layers(80, 3) == [(0, 27), (27, 54), (54, 80)] and stage_layers(61, 2) == [(0, 31), (31, 61)]
    # TP8 PP2 on 8xH200 at 32k: both stages hold 73 streams; the table shows stage 2's 43.84 GB, not stage 1's 41.07
    row = {r.plan: r for r in compare_plans(H200, DSV3, KVLayout(), 32_768, candidate_plans(H200, DSV3))}["TP8 PP2"]
    sts = stages(DSV3, ParallelPlan(tp=8, pp=2))
    assert row.weight_bytes_per_gpu == sts[1].weight_bytes > sts[0].weight_bytes
    assert row.weight_bytes_per_gpu / GB == pytest.approx(43.84, abs=5e-3)
    assert [p.label for p in candidate_plans(CAT.node("1xH100"), L70)] == ["TP1", "TP2", "TP1 PP2"]
    from simulator.collapse import default_plans  # nor does the collapse chart draw it (helper-164)

    assert default_plans(1, DSV3) == [ParallelPlan(tp=1)] and len(default_plans(8, DSV3)) == 2
    r = CliRunner().invoke(main, ["fit", "--model", "Llama-3.1-70B", "--hardware", "8xH100", "--context", "4096",
                                  "--tp", "1"])
    # streams a node at 4k: TP8 PP2 375.5, TP8 324, DP8-attention PP2 313 (TP16: 187)
    assert r.exit_code == 2 and "plans whose weights fit: TP8 PP2 (2 nodes), TP8 (1 node), DP8-attention PP2 " \
                                "(2 nodes) and 4 more" in r.output
    # under DP attention a sequence's latent is on one GPU, not on every rank
    r = CliRunner().invoke(main, ["fit", "--hardware", "8xH200", "--model", "DeepSeek-V3", "--context", "32768",
                                  "--dp-attention", "--ep", "8"])
    assert "a 32,768-token stream holds 2.303 GB here (the whole MLA latent, on the one GPU whose attention serves " \
           "it) -> 13 per KV pool" in r.output


def test_a_plan_takes_numpy_integers_and_holds_ints():
    """helper-185: ``ParallelPlan(tp=np.int64(4))``, a notebook's loop over ``np.array([2, 4, 8])``, was refused with
    "'tp' must be an integer >= 1 (got np.int64(4))", and so was ``kv_budget(node, model, tp=np.int64(8))``, where
    `footprint` and `max_streams` take numpy integers. It is the plan of Python ints, equal and hashed alike."""
    plan = ParallelPlan(tp=np.int64(4), pp=np.int32(2), ep=np.int64(2))
    assert plan == ParallelPlan(tp=4, pp=2, ep=2) and hash(plan) == hash(ParallelPlan(tp=4, pp=2, ep=2))
    assert all(type(v) is int for v in (plan.tp, plan.pp, plan.ep))
    node, model = load_catalog().node("8xH100"), get_model("Llama-3.1-8B")
    assert kv_budget(node, model, tp=np.int64(8)) == kv_budget(node, model, tp=8)
    for bad in (2.0, True, 0, "2"):  # still refused: not a whole number >= 1
        with pytest.raises(ConfigError, match=r"^ParallelPlan: 'tp' must be an integer >= 1 \(got "):
            ParallelPlan(tp=bad)


@pytest.mark.parametrize("text", ["tp²", "tp8+pp²", "dp⁸+ep8", "tp8+ep①"])
def test_parse_plan_refuses_digits_int_cannot_read_helper_191(text):
    # "²" is a digit to str.isdigit but not to int(): parse_plan passed it on and raised ValueError (a traceback
    # from `kvsim collapse --plan tp²`); now it is the one-line ConfigError of any other bad part
    with pytest.raises(ConfigError, match="is not one of tpN, dpN"):
        parse_plan(text)
    assert parse_plan("tp8+pp2") == ParallelPlan(tp=8, pp=2)


def test_collapse_plan_with_superscript_digit_is_one_line_helper_191(tmp_path):
    r = CliRunner().invoke(main, ["collapse", "--model", "Llama-3-70B", "--hardware", "8xH100", "--plan", "tp²",
                                  "--layout", "native", "--out", str(tmp_path / "c")])
    assert r.exit_code == 2, r.output
    assert "'tp²' is not one of tpN" in r.output and "Traceback" not in r.output


def test_fit_of_weights_that_do_not_fit_names_plans_that_hold_a_stream_helper_191():
    """helper-191: the hint named plans whose weights fit but that hold no stream of the context asked for.
    Llama-3.1-70B (141.1 GB) on 1xH100 at 32k: TP2 leaves 72 − 70.55 = 1.45 GB a GPU for a 32,768 · 327,680 / 2 =
    5.37 GB share, TP1 PP2 the same 1.45 GB for its 40 layers' 5.37 GB: neither holds one, and the hint now says so.
    On 8xH100 at
    2,000,000 tokens only TP8 PP2 holds one (63.18 GB over 2e6 · 327,680 / 16 = 40.96 GB); TP8 (54.36 over 81.92),
    TP4 and the rest none: it was named beside TP8 and TP4, now alone."""
    def err(hw: str, context: int) -> str:
        r = CliRunner().invoke(main, ["fit", "--model", "Llama-3.1-70B", "--hardware", hw, "--context", str(context),
                                      "--tp", "1"])
        assert r.exit_code == 2
        return r.output.rstrip()

    assert err("1xH100", 32768).endswith("by 69.1 GB; plans whose weights fit, though none holds a 32,768-token "
                                         "stream: TP2 (2 nodes), TP1 PP2 (2 nodes)")
    assert err("1xH100", 2048).endswith("by 69.1 GB; plans whose weights fit: TP2 (2 nodes), TP1 PP2 (2 nodes)")
    assert err("8xH100", 2_000_000).endswith("by 69.1 GB; plans whose weights fit: TP8 PP2 (2 nodes) and 6 more")
    assert err("8xH100", 8192).endswith("plans whose weights fit: TP8 PP2 (2 nodes), TP8 (1 node), "
                                        "DP8-attention PP2 (2 nodes) and 4 more")


def test_fit_prints_the_hbm_its_arithmetic_uses_helper_191(tmp_path):
    """helper-191: a catalog GPU of 80.5 GB printed "80 GB × 0.9 − weights 17.64 GB ... = KV 54.81 GB" (0.9 · 80 −
    17.64 is 54.36) and "usable 72.5 GB (0.9 × 80 GB)": the HBM was rounded to whole GB. Now 0.9 · 80.5 = 72.45,
    − 17.64 = 54.81, as printed."""
    from pathlib import Path

    text = (Path(__file__).parents[1] / "hardware" / "gpus.toml").read_text(encoding="utf-8")
    h100 = text[text.index("[gpu.H100]"):text.index("\n[", text.index("[gpu.H100]") + 1)]
    assert "hbm_bytes = 80e9 " in h100
    (tmp_path / "c.toml").write_text(
        h100.replace("[gpu.H100]", "[gpu.H100half]").replace("hbm_bytes = 80e9 ", "hbm_bytes = 80.5e9")
        + '\n[node.8xH100half]\ngpu = "H100half"\ngpus = 8\nhost_dram_bytes = 2.0e12\nnvme_bytes = 30.72e12\n'
        'nvme_bytes_per_s = 25e9\nnic_bytes_per_s = 50e9\nnic_latency_s = 5e-6\nnvlink_domain_gpus = 8\n'
        'source = "test"\n',
        encoding="utf-8")
    base = ["fit", "--hardware", "8xH100half", "--catalog", str(tmp_path / "c.toml"), "--context", "131072"]
    r = CliRunner().invoke(main, [*base, "--model", "Llama-3-70B"])
    assert r.exit_code == 0, r.output
    assert "per GPU: 80.5 GB × 0.9 − weights 17.64 GB (attention 3.02, experts 0.00, dense 14.09, embeddings 0.53) = " \
           "KV 54.81 GB" in r.output
    r = CliRunner().invoke(main, [*base, "--model", "Llama-3.1-405B"])
    assert r.exit_code == 2
    assert ("one GPU holds weights of 101.5 GB (bf16), more than its usable 72.5 GB (0.9 × 80.5 GB) by 29.0 GB"
            in r.output)
