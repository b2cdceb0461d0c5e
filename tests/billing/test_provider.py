"""Provider economics by hand.

One 100k-token prefix (Opus tier) used at 0 s and 100 s with a 5-minute TTL: one entry life
from 0 s to 400 s. With kv 1000 bytes/token: B = 100_000 x 1000 x 400 = 4e10 byte-s.
HBM: 4e10 / 1e9 bytes per stream = 40 stream-s x $0.01 = $0.40.
DRAM at $0.36/GB-hour: 4e10 / 1e9 / 3600 x 0.36 = $0.004.
Prefill saved: 100_000 hit tokens x 1e-4 GPU-s x $0.001/GPU-s = $0.01.
Revenue: none 2 x $1.515 + output; 5m $1.875 + $0.15 + 2 x $0.015 + output -> delta -$0.975.
"""

from __future__ import annotations

from dataclasses import replace

import pandas as pd
import pytest

from simulator.billing.compare import compare_ttls
from simulator.billing.profiles import get_profile
from simulator.billing.provider import (
    ProviderCosts,
    best_ttls,
    capacity_holding_usd,
    hbm_holding_usd,
    kv_byte_seconds,
    load_provider_costs,
    provider_table,
)
from simulator.errors import ConfigError
from tests.billing.conftest import SYSTEM, req

COSTS = ProviderCosts(
    kv_bytes_per_token=1000.0,
    bytes_per_stream=1e9,
    revenue_usd_per_stream_s=0.01,
    dram_usd_per_gb_hour=0.36,
    ssd_usd_per_gb_hour=0.036,
    prefill_gpu_s_per_token=1e-4,
    usd_per_gpu_s=1e-3,
)


def test_formulas_by_hand():
    res = pd.DataFrame({"own_tokens": [100_000, 10], "start_s": [0.0, 5.0], "end_s": [400.0, 5.0]})
    b = kv_byte_seconds(res, 1000.0)
    assert b == pytest.approx(4e10)
    assert hbm_holding_usd(b, 1e9, 0.01) == pytest.approx(0.40)
    assert capacity_holding_usd(b, 0.36) == pytest.approx(0.004)


def test_provider_table_per_ttl():
    reqs = [req(i, t, [(SYSTEM, 100_000), (9000 + i, 1000)]) for i, t in enumerate([0.0, 100.0])]
    cmp = compare_ttls(reqs, get_profile("anthropic", "opus-4"), ["none", "5m"])
    table = provider_table(cmp, COSTS).set_index("ttl")
    five = table.loc["5m"]
    assert five["kv_gb_hours"] == pytest.approx(40 / 3600)
    assert five["holding_hbm_usd"] == pytest.approx(0.40)
    assert five["holding_dram_usd"] == pytest.approx(0.004)
    assert five["prefill_saved_usd"] == pytest.approx(0.01)
    assert five["revenue_delta_usd"] == pytest.approx(-0.975, abs=0.005)
    assert five["margin_dram_usd"] == pytest.approx(-0.975 + 0.01 - 0.004, abs=0.005)
    assert table.loc["none", "margin_hbm_usd"] == 0.0
    best = best_ttls(cmp, table.reset_index())
    assert best == {"customer": "5m", "provider_hbm": "none", "provider_dram": "none", "provider_ssd": "none"}
    # a provider paid well enough for saved prefill prefers the cache
    rich = replace(COSTS, usd_per_gpu_s=1.0)
    assert best_ttls(cmp, provider_table(cmp, rich))["provider_dram"] == "5m"


def test_shipped_defaults_and_validation(tmp_path):
    c = load_provider_costs()
    assert c.kv_bytes_per_token == 2 * 80 * 8 * 128 * 2  # Llama-3.1-70B, bf16
    assert c.usd_per_gpu_s == pytest.approx(2.99 / 3600, rel=1e-4)
    f = tmp_path / "p.toml"
    f.write_text("[provider]\nkv_bytes_per_token = 70000.0\n")
    assert load_provider_costs(f).kv_bytes_per_token == 70000.0
    f.write_text("[provider]\nkv_bytes = 1.0\n")
    with pytest.raises(ConfigError, match="unknown key 'kv_bytes'"):
        load_provider_costs(f)
    with pytest.raises(ConfigError, match="'bytes_per_stream' must be > 0"):
        replace(COSTS, bytes_per_stream=0.0)


def test_the_shipped_h100_figures_are_the_catalogs_they_say_they_copy():
    """provider.toml's five deployment figures are one deployment's, Llama-3.1-70B bf16 on 8xH100 (helper-173): those
    it copies from the catalogs still agree with them (a catalog figure that moves shows here), each to the
    rounding written; a report works them out of its own deployment (`provider_costs_for`) and keeps only the
    DRAM and SSD prices."""
    from hardware.catalog import load_catalog
    from simulator.billing.profiles import get_profile
    from simulator.kv import bytes_per_token
    from simulator.models import get_model

    c, h100, llama = load_provider_costs(), load_catalog().gpu("H100"), get_model("Llama-3.1-70B")
    assert c.kv_bytes_per_token == bytes_per_token(llama) == 327_680
    assert c.bytes_per_stream == 8192 * c.kv_bytes_per_token  # the 8,192-token context: an estimate
    assert c.usd_per_gpu_s == pytest.approx(h100.usd_per_gpu_hour / 3600, rel=1e-5)  # 8.30556e-4, written 8.3056e-4
    # 2 x 70.55e9 / (989.4e12 x 0.4) = 3.5653e-4 (the file's 70.6e9: 3.5678e-4), written 3.57e-4; 40% MFU an estimate
    assert c.prefill_gpu_s_per_token == pytest.approx(2 * llama.total_params / (h100.bf16_flops * 0.4), rel=2e-3)
    # 50 tok/s (an estimate) x Sonnet 4's output price in profiles.toml, $15/MTok
    sonnet_4 = get_profile("anthropic", "sonnet-4")
    assert c.revenue_usd_per_stream_s == pytest.approx(50 * sonnet_4.output_usd_per_mtok / 1e6)
    assert (c.dram_usd_per_gb_hour, c.ssd_usd_per_gb_hour) == (pytest.approx(5 / 26_280, rel=2e-3),
                                                              pytest.approx(0.10 / 43_800, rel=8e-3))


def test_provider_costs_of_a_deployment_by_hand():
    # Llama-3.1-70B bf16 on 8×H100 (tp 8): 327,680 B/token; a 4,096-token stream holds
    # 327,680 · 4,096 = 1.342 GB; 40 tokens/s at $15/MTok = $6e-4 per stream-second;
    # an H100-hour at $2.99 = $8.3056e-4 per GPU-second; prefill GPU-s/token = 8 · prefill_s(2000) / 2000.
    from hardware.catalog import load_catalog
    from simulator.billing.provider import provider_costs_for
    from simulator.cost import StepModel, load_params
    from simulator.kv import KVLayout
    from simulator.models import get_model

    node, model = load_catalog().node("8xH100"), get_model("Llama-3.1-70B")
    c = provider_costs_for(node, model, KVLayout(), 8, stream_context_tokens=4096, tokens_per_s_per_stream=40,
                           output_usd_per_mtok=15.0, prompt_tokens=2000)
    assert c.kv_bytes_per_token == 327_680
    assert c.bytes_per_stream == 327_680 * 4096
    assert c.revenue_usd_per_stream_s == pytest.approx(6e-4)
    assert c.usd_per_gpu_s == pytest.approx(2.99 / 3600)
    step = StepModel(node.gpu, model, KVLayout(), 8, load_params("H100"))
    assert c.prefill_gpu_s_per_token == pytest.approx(8 * step.prefill_s(2000, 0) / 2000)
    # 2 · 70.55e9 FLOP/token at the dense peak of 8 H100s is 1.78e-5 s/token, i.e. 1.43e-4 GPU-s:
    # the model can only be slower than peak
    assert c.prefill_gpu_s_per_token > 2 * 70.55e9 / 989.4e12
    # a disaggregated fleet prefilling on 4 B200s: its prefill and GPU price are those (helper-118: the H100
    # decode pool's were published as the provider table's inputs); the KV and decode speed stay the H100's
    b200 = load_catalog().node("8xB200")
    d = provider_costs_for(node, model, KVLayout(), 8, stream_context_tokens=4096, tokens_per_s_per_stream=40,
                           output_usd_per_mtok=15.0, prompt_tokens=2000, prefill_node=b200, prefill_tp=4)
    assert d.usd_per_gpu_s == pytest.approx(5.99 / 3600) and d.revenue_usd_per_stream_s == c.revenue_usd_per_stream_s
    step = StepModel(b200.gpu, model, KVLayout(), 4, load_params("B200"))
    assert d.prefill_gpu_s_per_token == pytest.approx(4 * step.prefill_s(2000, 0) / 2000)
    assert "prefill on 4×B200" in d.source and "prefill on" not in c.source


def test_a_displaced_stream_earns_at_most_the_fleets_output_ceiling():
    """Llama-3.1-70B bf16 on one 8×H100 replica (tp 8), max_num_seqs 256: a 2,048-token stream holds
    327,680 · 2,048 B = 671.1 MB; a pool of 648 such streams runs m = min(648, 256) = 256 at once.
    Prefill of the 1,792-token prompt: 0.06966 s; a full batch's step a(256) + b(256) · 256 · 2,048 =
    0.018956 + 1.26786e-8 · 524,288 = 0.025603 s. The replica produces at most 512 · 256 / (256 · 0.06966
    + 512 · 0.025603) = 131,072 / 30.942 = 4,236 output tokens/s: 6.537 a stream of the pool's 648, so a
    stream that decodes at 40 tokens/s on its own is priced as earning 6.537 ($15/MTok: $9.81e-5 a
    second, not $6e-4)."""
    from hardware.catalog import load_catalog
    from simulator.billing.provider import output_ceiling_per_stream, provider_costs_for
    from simulator.cost import StepModel, load_params
    from simulator.kv import KVLayout
    from simulator.models import get_model

    node, model = load_catalog().node("8xH100"), get_model("Llama-3.1-70B")
    step = StepModel(node.gpu, model, KVLayout(), 8, load_params("H100"))
    assert step.prefill_s(1792, 0) == pytest.approx(0.06966, abs=1e-5)
    assert sum(x * w for x, w in zip(step.decode_coefficients(256), (1, 256 * 2048), strict=True)) == pytest.approx(
        0.025603, abs=1e-6)
    kw = {"replicas": 1, "max_num_seqs": 256, "prompt_tokens": 1792, "output_tokens": 512, "context_tokens": 2048}
    assert output_ceiling_per_stream(step, pool_streams=648.0, **kw) == pytest.approx(6.537, abs=1e-3)
    assert output_ceiling_per_stream(step, pool_streams=0.5, **kw) == 0.0  # the pool holds no whole stream
    # two replicas of the same: twice the streams and twice the output, the same a stream
    two = output_ceiling_per_stream(step, pool_streams=1296.0, **(kw | {"replicas": 2}))
    assert two == pytest.approx(6.537, abs=1e-3)
    pool = 648 * 327_680 * 2048
    c = provider_costs_for(node, model, KVLayout(), 8, stream_context_tokens=2048, tokens_per_s_per_stream=40,
                           output_usd_per_mtok=15.0, prompt_tokens=1792, kv_pool_bytes=pool, output_tokens=512,
                           replicas=1, max_num_seqs=256)
    assert c.revenue_usd_per_stream_s == pytest.approx(6.537 * 15 / 1e6, rel=1e-3)
    # holding the whole pool for an hour forgoes the replica's hour of output at most: 4,236 · 3,600 · $15/MTok
    assert hbm_holding_usd(pool * 3600.0, c.bytes_per_stream, c.revenue_usd_per_stream_s) == pytest.approx(
        4236 * 3600 * 15 / 1e6, rel=1e-3)
    slow = provider_costs_for(node, model, KVLayout(), 8, stream_context_tokens=2048, tokens_per_s_per_stream=2,
                              output_usd_per_mtok=15.0, prompt_tokens=1792, kv_pool_bytes=pool, output_tokens=512,
                              replicas=1, max_num_seqs=256)
    assert slow.revenue_usd_per_stream_s == pytest.approx(2 * 15 / 1e6)  # below the ceiling: its own speed
    assert (c.decode_tokens_per_s_per_stream, slow.decode_tokens_per_s_per_stream) == (40, 2)  # both kept
    assert c.ceiling_tokens_per_s_per_stream == slow.ceiling_tokens_per_s_per_stream == pytest.approx(6.537, abs=1e-3)
    # helper-131: with 1,536 of each prompt served by the prefix cache a request prefills its last 256 tokens
    # after them, 0.02083 s: 131,072 / (256 · 0.02083 + 512 · 0.025603) = 7,107 tokens/s, 10.97 a stream. The
    # ceiling had every prompt prefilled cold, and so priced a displaced stream at 60% of what it forgoes
    assert step.prefill_s(256, 1536) == pytest.approx(0.02083, abs=1e-5)
    warm = provider_costs_for(node, model, KVLayout(), 8, stream_context_tokens=2048, tokens_per_s_per_stream=40,
                              output_usd_per_mtok=15.0, prompt_tokens=1792, kv_pool_bytes=pool, output_tokens=512,
                              replicas=1, max_num_seqs=256, cached_prompt_tokens=1536)
    assert warm.ceiling_tokens_per_s_per_stream == pytest.approx(10.97, abs=1e-2)
    assert warm.revenue_usd_per_stream_s == pytest.approx(10.97 * 15 / 1e6, rel=1e-3)


def test_prefill_saved_by_each_request_from_the_cost_model():
    """Llama-3.1-70B bf16 on 8×H100 (tp 8). A 2,000-token prompt prefills in 0.07685 s; with its first
    1,000 read from the cache its last 1,000 take 0.04393 s (they still attend to the 1,000 before them),
    so the read saves 0.03293 s, less than the 0.04271 s of a 1,000-token prompt's own prefill and than
    the per-token mean of the whole prompt (1,000 · 0.07685 / 2,000 = 0.03843 s). Read whole, it still
    computes its last token (0.01234 s after 1,999 of context: `max_hit_tokens`), so it saves 0.07685 −
    0.01234 = 0.06451 s; a request that reads nothing saves nothing. Two such reads and one whole read:
    8 · (2 · 0.03293 + 0.06451) = 1.0430 GPU-s. At 128k read halfway: 9.337 − 5.823 = 3.514 s, 38% of
    its prefill for half its tokens."""
    from hardware.catalog import load_catalog
    from simulator.billing.provider import PrefillPrice
    from simulator.cost import StepModel, load_params
    from simulator.kv import KVLayout
    from simulator.models import get_model

    node, model = load_catalog().node("8xH100"), get_model("Llama-3.1-70B")
    step = StepModel(node.gpu, model, KVLayout(), 8, load_params("H100"))
    assert [step.prefill_s(2000, 0), step.prefill_s(1000, 1000)] == pytest.approx([0.07685, 0.04393], abs=1e-5)
    price = PrefillPrice(step, 8)
    prompts, reads = pd.Series([2000, 2000, 2000, 500]), pd.Series([1000, 1000, 2000, 0])
    assert step.prefill_s(1, 1999) == pytest.approx(0.01234, abs=1e-5)
    assert price.saved_gpu_s(prompts, reads) == pytest.approx(8 * (2 * (0.07685 - 0.04393) + 0.06451), abs=1e-3)
    assert price.saved_gpu_s(pd.Series([131072]), pd.Series([65536])) == pytest.approx(8 * (9.337 - 5.823), abs=1e-2)
    assert price.saved_gpu_s(pd.Series([500]), pd.Series([0])) == 0.0
    # a deployment's costs carry it, and the TOML's keys do not take it
    from simulator.billing.provider import provider_costs_for
    c = provider_costs_for(node, model, KVLayout(), 8, stream_context_tokens=4096, tokens_per_s_per_stream=40,
                           output_usd_per_mtok=15.0, prompt_tokens=2000)
    assert c.prefill is not None and c.prefill.tp == 8
    assert load_provider_costs().prefill is None


def test_held_kv_counts_a_conversation_prefix_once():
    # Opus 5-minute cache, breakpoint at the end of each turn; each turn reads the previous
    # turn's entry (lookback) and writes only what it adds:
    #   E1 (D,11): 101,000 tokens, lives [0, 360) (refreshed by turn 2's read at 60 s)
    #   E2 (...,12,13): +2,500 tokens, lives [60, 500) (refreshed by turn 3 at 200 s)
    #   E3 (...,14,15): +1,300 tokens, lives [200, 500)
    # E1's tokens are held while E1, E2 or E3 lives: [0, 500). Token-seconds:
    #   101,000·500 + 2,500·440 + 1,300·300 = 51,990,000
    from simulator.billing.ledger import bill_requests
    from simulator.billing.profiles import get_profile
    from tests.billing.conftest import DOCS, req

    turns = [
        req(1, 0.0, [(DOCS, 100_000), (11, 1000)], (2,)),
        req(2, 60.0, [(DOCS, 100_000), (11, 1000), (12, 500), (13, 2000)], (4,)),
        req(3, 200.0, [(DOCS, 100_000), (11, 1000), (12, 500), (13, 2000), (14, 300), (15, 1000)], (6,)),
    ]
    res = bill_requests(turns, get_profile("anthropic", "opus-4"), 300)
    assert list(res.frame.write_tokens) == [101_000, 2_500, 1_300]
    assert kv_byte_seconds(res.residency, 1.0) == pytest.approx(51_990_000)
