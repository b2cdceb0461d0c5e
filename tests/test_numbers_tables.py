"""Printed figures of the compare, fit, cost and models tables, against hand-computed values
(numbers audit r7: D1, D6, D8, D10, D12)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from hardware.catalog import load_catalog
from simulator.capacity import compare_plans
from simulator.cli import main
from simulator.compare import compare_strategies
from simulator.cost.params import load_params
from simulator.engine import AffineTimer, EngineConfig
from simulator.kv import KVLayout
from simulator.models import get_model
from simulator.placement import candidate_plans
from workloads.request import Request

# three short requests and a fast timer: the memory factors depend on the plan and layout alone
REQS = [Request(id=i, arrival_s=float(i), prompt_tokens=p, output_tokens=o, segments=((i, p),))
        for i, (p, o) in enumerate([(1000, 200), (3000, 100), (500, 50)])]
TIMER = AffineTimer(overhead_s=1e-3, per_context_token_s=1e-9, per_prefill_token_s=1e-6)


# --- D1: compare's memory_factor sums every GPU's copy ------------------------------------------

def _factors(config: EngineConfig) -> dict[str, tuple[float, float]]:
    df = compare_strategies(config, REQS, ["native", "mla"], timer=TIMER).set_index("strategy")
    return {s: (df.memory_factor[s], df.memory_factor_per_gpu[s]) for s in df.index}


def test_memory_factor_counts_the_mla_latent_on_each_of_tp8s_gpus() -> None:
    """Llama-3.1-70B (64 heads of 128, 8 KV heads, 80 layers) under TP8. MHA bf16: 2·64·128 = 16,384
    values a layer. GQA: 2·8·128 = 2,048, 0.125 of it, its 8 heads one a GPU: 0.125 in all, 0.125/8 =
    0.015625 a GPU. The MLA retrofit's 576-value latent: 576/16,384 = 0.03515625, whole on each of the
    8 GPUs: 8 · 0.03515625 = 0.28125 in all (2.25× GQA's), 0.03515625 a GPU."""
    got = _factors(EngineConfig(model="Llama-3.1-70B"))
    assert got["native"] == pytest.approx((0.125, 0.015625), rel=1e-12)
    assert got["mla"] == pytest.approx((0.28125, 0.03515625), rel=1e-12)


def test_memory_factor_counts_replicated_kv_heads() -> None:
    """TP16 over two 8×H100 nodes: 8 KV heads over 16 GPUs, one a GPU, so each is held twice:
    2 · 0.125 = 0.25 in all, 0.125/8 = 0.015625 a GPU (0.25 / 16 GPUs). The latent: 16 · 0.03515625
    = 0.5625 in all, 0.03515625 a GPU."""
    got = _factors(EngineConfig(model="Llama-3.1-70B", tp=16, n_nodes=2))
    assert got["native"] == pytest.approx((0.25, 0.015625), rel=1e-12)
    assert got["mla"] == pytest.approx((0.5625, 0.03515625), rel=1e-12)


def test_memory_factor_sums_the_pipeline_stages() -> None:
    """TP8 PP2 over two nodes: each stage holds 40 of the 80 layers. GQA: every GPU 1 head of 40 layers,
    0.125/16 = 0.0078125 a GPU, 16 of them: 0.125 in all. The latent, whole on the 8 GPUs of each
    stage for its 40 layers: 0.03515625/2 = 0.017578125 a GPU, 16 of them: 0.28125 in all."""
    got = _factors(EngineConfig(model="Llama-3.1-70B", pp=2, n_nodes=2))
    assert got["native"] == pytest.approx((0.125, 0.0078125), rel=1e-12)
    assert got["mla"] == pytest.approx((0.28125, 0.017578125), rel=1e-12)


# --- D6, D8: fit's plans table ------------------------------------------------------------------

def _fit_plans() -> dict[str, dict]:
    r = CliRunner().invoke(main, ["fit", "--hardware", "8xH100", "--model", "Llama-3-70B", "--context", "131072",
                                  "--batch", "32", "--json"])
    assert r.exit_code == 0, r.output
    return {p["plan"]: p for p in json.loads(r.output)["plans"]}


def test_a_plan_whose_weights_do_not_fit_still_gives_its_streams_bytes() -> None:
    """Llama-3-70B at 131,072 tokens: 80 layers · 8 KV heads · 2 · 128 · 2 B = 327,680 B a token; TP1's
    one GPU holds all 8 heads: 327,680 · 131,072 = 42,949,672,960 B (42.950 GB), though its 141.1 GB
    of weights do not fit. DeepSeek-V3's latent at 32,768 tokens on 8xH200, TP4 (does not fit):
    61 layers · 576 values · 2 B = 70,272 B a token, whole on the GPU: · 32,768 = 2,302,672,896 B."""
    tp1 = _fit_plans()["TP1"]
    assert not tp1["fits"] and tp1["max_streams"] == 0
    assert tp1["stream_bytes_per_gpu"] == 42_949_672_960
    dsv3 = {r.plan: r for r in compare_plans(load_catalog().node("8xH200"), get_model("DeepSeek-V3"), KVLayout(),
                                              32_768, candidate_plans(load_catalog().node("8xH200"),
                                                                      get_model("DeepSeek-V3")))}
    assert not dsv3["TP4"].fits and dsv3["TP4"].stream_bytes_per_gpu == 2_302_672_896


def test_fit_table_prints_the_real_stream_size_of_a_plan_that_does_not_fit() -> None:
    r = CliRunner().invoke(main, ["fit", "--hardware", "8xH100", "--model", "Llama-3-70B", "--context", "131072",
                                  "--batch", "32"])
    assert r.exit_code == 0, r.output
    tp1 = next(line.split() for line in r.output.splitlines() if line.split()[:1] == ["TP1"])
    # plan, GPUs, nodes, weights, KV, GB/stream/GPU, streams/replica, streams (nodes), streams/node
    assert tp1 == ["TP1", "1", "1", "141.10", "-69.10", "42.950", "0", "0", "0.0"]


def test_fit_plans_give_one_replicas_streams_beside_all_replicas_on_the_nodes() -> None:
    """TP4 on 8xH100: 2 replicas of 4 GPUs. A GPU: 80 GB · 0.9 − 35.27 GB weights = 36.73 GB of KV; a
    131,072-token stream holds 2 of 8 heads there, 327,680 / 4 · 131,072 = 10.737 GB: floor(36.73 /
    10.737) = 3 a replica, 6 on the node. TP16: one replica over 2 nodes, 11 both ways. DP8-attention
    PP2: 8 KV pools (one a GPU of a stage), 2 streams each (its own count): 16 a replica."""
    plans = _fit_plans()
    assert (plans["TP4"]["gpus"], plans["TP4"]["streams_per_replica"], plans["TP4"]["max_streams"]) == (4, 3, 6)
    assert (plans["TP16"]["streams_per_replica"], plans["TP16"]["max_streams"]) == (11, 11)
    assert (plans["DP8-attention PP2"]["streams_per_replica"], plans["DP8-attention PP2"]["max_streams"]) == (16, 16)
    r = CliRunner().invoke(main, ["fit", "--hardware", "8xH100", "--model", "Llama-3-70B", "--context", "131072",
                                  "--batch", "32"])
    header = next(line for line in r.output.splitlines() if line.split()[:2] == ["plan", "GPUs"])
    assert "streams/replica  streams (nodes)  streams/node" in header
    assert "streams (nodes): all replicas on the plan's nodes" in r.output
    tp4 = next(line.split() for line in r.output.splitlines() if line.split()[:1] == ["TP4"])
    assert tp4[1] == "4" and tp4[-3:] == ["3", "6", "6.0"]


def test_fit_lists_the_plan_asked_for_and_a_streams_share_under_one_a_node() -> None:
    """``--tp 64`` on 1xH100 nodes: the plans table left out the plan asked for (TP64 is no candidate plan) and
    marked none with ``*``. Llama-3.1-405B in fp8 KV at 1M tokens: 13.61 GB of bf16 weights a GPU (fit's own weights
    line), 80 · 0.9 − 13.61 = 58.39 GB of KV, a stream 1,048,576 · 126 layers · 8 heads ·
    256 B (K and V, fp8) / 8 heads a GPU = 33.823 GB there: one stream on 64 nodes, 1/64 = 0.015625 a node,
    which read 0.0 at one decimal (as none does); three significant figures now, 0.0156."""
    r = CliRunner().invoke(main, ["fit", "--model", "Llama-3.1-405B", "--hardware", "1xH100", "--tp", "64",
                                  "--context", "1048576", "--layout", "fp8"])
    assert r.exit_code == 0, r.output
    row = next(line.split() for line in r.output.splitlines() if line.split()[:2] == ["TP64", "*"])
    # plan *, GPUs, nodes, weights, KV, GB/stream/GPU, streams/replica, streams (nodes), streams/node
    assert row == ["TP64", "*", "64", "64", "13.61", "58.39", "33.823", "1", "1", "0.0156"]
    tp1 = next(line.split() for line in r.output.splitlines() if line.split()[:1] == ["TP1"])
    assert tp1[-1] == "0.0000"  # none: the column's decimals are the 0.0156's


# --- D10: cost's attention share, its fixed kernel latency apart from its KV reads -----------------

def test_cost_splits_the_attention_share_into_fixed_latency_and_kv_reads() -> None:
    """Llama-3.1-8B, batch 1 at 1,024 tokens on one H100 (`decode_kernel_terms`' docstring, H100 params):
    a layer's decode kernel, 8 KV heads of d = 128 (r = 1), is fixed at attn_latency_s + decode_head_dim_latency_s
    + 8 · decode_head_latency_s + decode_seq_latency_s + Q read and O write (32 heads · 128 · 2 B · 2 =
    16,384 B at 3.35 TB/s · decode_qo_eff) = 9.557 + 1.631 + 0.178 + 0.007 + 0.005 = 11.377 us; 32 layers
    0.364 ms of the 6.213 ms step (5.9%). Reading the KV, 131,072 B · 1,024 = 0.134 GB, takes 0.047 ms
    (0.8%): attention's 7% is mostly latency, not KV reads."""
    p = load_params("H100")
    per_layer = (p.attn_latency_s + p.decode_head_dim_latency_s + 8 * p.decode_head_latency_s
                 + p.decode_seq_latency_s + 32 * 128 * 2 * 2 / (3.35e12 * p.decode_qo_eff))
    args = ["cost", "--hardware", "1xH100", "--model", "Llama-3.1-8B", "--batch", "1", "--context", "1024"]
    out = json.loads(CliRunner().invoke(main, [*args, "--json"]).output)
    step = out["decode_step_s"]
    assert step == pytest.approx(6.213e-3, abs=5e-7)
    assert out["decode_share_attention_fixed"] * step == pytest.approx(32 * per_layer, rel=1e-9)
    assert 32 * per_layer == pytest.approx(0.364e-3, abs=5e-7)
    assert out["decode_share_kv_reads"] * step == pytest.approx(0.047e-3, abs=5e-7)
    assert out["decode_share_attention_fixed"] + out["decode_share_kv_reads"] == pytest.approx(
        out["decode_share_kv"], rel=1e-12)
    text = CliRunner().invoke(main, args).output
    assert ("attention 7% (fixed kernel latency 5.9%, KV reads 0.8%: 0.13 GB/GPU)" in text
            and "KV reads 6%" not in text)


# --- D12: the models table's parameter counts; the README's collapse header ------------------------

def test_models_prints_70_55_billion_parameters_as_70_6() -> None:
    """models.toml gives the 70B Llamas 70.55e9 parameters (model card 70.6B); ``f"{70.55:.1f}"`` is 70.5
    (the float nearest 70.55 is 70.5499…). Half up from the decimal 70.55: 70.6. Llama-3.1-405B's
    405.85e9: 405.9; Llama-2-70B's 68.98e9: 69.0; Kimi-K2's 1,026.2e9: 1,026.2."""
    rows = {line.split()[0]: line.split() for line in CliRunner().invoke(main, ["models"]).output.splitlines()}
    for name in ("Llama-3.1-70B", "Llama-3.3-70B", "Llama-3-70B"):
        assert rows[name][6:8] == ["70.6", "70.6"]
    assert rows["Llama-3.1-405B"][6] == "405.9" and rows["Llama-2-70B"][6] == "69.0"
    assert rows["Kimi-K2"][6:8] == ["1,026.2", "32.0"]


def test_the_readme_collapse_example_has_the_header_the_tool_prints(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    # the README's command as written, from a folder of its own: its default --out is ./report, which a
    # checkout's `make demo` fills with kvsim run's report (collapse then refuses to overwrite it)
    monkeypatch.chdir(tmp_path)
    r = CliRunner().invoke(main, ["collapse", "--hardware", "8xH100", "--model", "Llama-3-70B", "--layout", "native"])
    assert r.exit_code == 0, r.output
    header = r.output.splitlines()[0]
    assert header == "max concurrent streams per node, Llama-3-70B (bf16 weights):"
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    assert f"--model Llama-3-70B\n{header}\n" in readme


def test_cost_under_pipeline_parallelism_gives_a_gpu_its_stage_share() -> None:
    """`cost` on TP8 PP2: a GPU holds one stage (fit: 50.73 GB of Llama-3.1-405B's weights on 8xH200),
    and a step reads both stages' in turn; the per-GPU figures were the whole pipeline's (101.46 GB)."""
    args = ["cost", "--hardware", "8xH200", "--model", "Llama-3.1-405B", "--tp", "8", "--pp", "2", "--batch", "4",
            "--context", "8192"]
    out = json.loads(CliRunner().invoke(main, [*args, "--json"]).output)
    assert out["decode_weight_bytes_per_gpu"] == pytest.approx(out["decode_weight_bytes_per_step"] / 2)
    # 126 layers' KV of 4 sequences of 8,192 tokens: 126 x 8 heads x 256 values x 2 B x 8192 x 4 over
    # 8 GPUs a stage (one KV head each), half the layers a stage: 1.057 GB a GPU
    assert out["decode_kv_bytes_per_gpu"] == pytest.approx(126 * 8 * 256 * 2 * 8192 * 4 / 8 / 2, rel=1e-3)
    text = CliRunner().invoke(main, args).output
    # the weights a GPU reads: fit's 811.7e9 B over 8 GPUs and 2 stages less the input embeddings
    # (128,256 x 16,384 x 2 B over 8 GPUs, gathered, not read): 50.73 - 0.26 GB
    assert "(50.47 GB/GPU)" in text and ": 1.06 GB/GPU)" in text and "passes the 2 stages in turn" in text
