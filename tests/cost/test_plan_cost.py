"""Step times under a parallelism plan: the first-principles terms by hand, and monotone properties."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hardware.catalog import load_catalog
from simulator.cost import StepModel, load_params
from simulator.cost.kernels import allreduce_s
from simulator.cost.params import ACTIVATION_BYTES
from simulator.models import get_model
from simulator.placement import ParallelPlan

CAT = load_catalog()
H100, H200 = CAT.node("8xH100"), CAT.node("8xH200")
L70, L405, DSV3 = get_model("Llama-3.1-70B"), get_model("Llama-3.1-405B"), get_model("DeepSeek-V3")


def sm(node, model, plan: ParallelPlan) -> StepModel:
    return StepModel(node.gpu, model, None, plan.tp, load_params(node.gpu.key), plan=plan, node=node)


def test_the_default_plan_prices_as_before():
    plain = StepModel(H100.gpu, L70, None, 8, load_params("H100"))
    planned = sm(H100, L70, ParallelPlan(tp=8))
    for chunks, b, c in [([], 64, 64 * 3000), ([(2048, 0)], 10, 20_000), ([(512, 4096), (100, 0)], 0, 0)]:
        assert planned.step_s(chunks, b, c) == plain.step_s(chunks, b, c)


def test_pipeline_adds_the_hand_offs_over_the_nic():
    # TP8 PP2 over two 8×H100 nodes: a step is the whole model on 8 GPUs plus one hand-off of
    # T · d · 2 B over a 400 Gb/s NIC: 64 tokens · 16,384 · 2 B = 2.097 MB / 50 GB/s + 5 µs = 46.9 µs
    one = StepModel(H100.gpu, L405, None, 8, load_params("H100"))
    two = sm(H100, L405, ParallelPlan(tp=8, pp=2))
    hand_off = 5e-6 + 64 * 16_384 * ACTIVATION_BYTES / 50e9
    assert hand_off == pytest.approx(46.94e-6, rel=1e-3)
    assert two.decode_step_s(64, 64 * 4000) - one.decode_step_s(64, 64 * 4000) == pytest.approx(hand_off, rel=1e-9)


def test_tp_across_nodes_all_reduces_over_the_nics():
    # TP16 on 8×H100: inside each node NCCL's all-reduce, then a ring of 2 nodes on each GPU's NIC:
    # 2 · (2 − 1)/2 · S / 8 / 50 GB/s + 2 · 5 µs, twice per layer, 80 layers
    p = load_params("H100")
    t16 = sm(H100, L70, ParallelPlan(tp=16))
    tokens = 32
    s = tokens * 8192 * ACTIVATION_BYTES
    per = float(allreduce_s(s, 8, H100.gpu, p)) + s / 8 / 50e9 + 2 * 5e-6
    assert t16.comm_s(tokens) == pytest.approx(80 * 2 * per, rel=1e-12)
    assert t16.comm_s(tokens) > sm(H100, L70, ParallelPlan(tp=8)).comm_s(tokens)


def test_dp_attention_runs_attention_on_the_ranks_own_sequences():
    tp8 = sm(H200, DSV3, ParallelPlan(tp=8))
    dp8 = sm(H200, DSV3, ParallelPlan(tp=8, dp_attention=True, ep=8))
    # a rank's decode attention reads its sequences' whole latent with all 128 heads: with the same
    # sequences it is no cheaper than TP8's, where every rank reads the latent too but runs 16 heads
    b, ctx = 32, 32 * 8000
    a_tp = tp8.attention_layer_s(decode_batch=b, decode_context_tokens=ctx)
    a_dp = dp8.attention_layer_s(decode_batch=b, decode_context_tokens=ctx)
    assert a_dp >= a_tp
    # but the eight ranks decode 8 × 32 sequences in one step, where TP8 decodes 32: per sequence DP is cheaper
    assert dp8.decode_step_s(b, ctx) / b < tp8.decode_step_s(8 * b, 8 * ctx) / b
    # the experts see every rank's tokens: the linear time of 32 tokens a rank is TP8's of 256, less
    # nothing for attention GEMMs (which DP runs whole on 32 rows)
    assert dp8.linear_s(b)[2] > tp8.linear_s(b)[2]


@given(st.sampled_from([ParallelPlan(tp=8), ParallelPlan(tp=8, dp_attention=True, ep=8),
                        ParallelPlan(tp=8, pp=2), ParallelPlan(tp=16), ParallelPlan(tp=8, ep=8)]),
       st.integers(1, 256), st.integers(1, 256), st.integers(16, 64_000))
def test_steps_grow_with_batch_and_context(plan, b1, b2, ctx):
    model = DSV3 if plan.dp_attention or plan.ep > 1 else L70
    node = H200 if model is DSV3 else H100
    m = sm(node, model, plan)
    lo, hi = sorted((b1, b2))
    assert m.decode_step_s(hi, hi * ctx) >= m.decode_step_s(lo, lo * ctx) * (1 - 1e-12)
    assert m.decode_step_s(lo, lo * (ctx + 100)) >= m.decode_step_s(lo, lo * ctx)
    assert m.comm_s(hi) >= m.comm_s(lo)
    assert m.prefill_s(hi * 16) >= m.prefill_s(lo * 16) * (1 - 1e-12)
