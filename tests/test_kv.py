"""KV math against hand-worked values (each computed beside its assertion)."""

import math
from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simulator.errors import ConfigError
from simulator.kv import KVLayout, bytes_per_token, footprint, parse_layout, sequence_bytes
from simulator.models import get_model

L70 = get_model("Llama-3-70B")
L8 = get_model("Llama-3.1-8B")
DSV3 = get_model("DeepSeek-V3")
GEMMA = get_model("Gemma-3-27B")


def test_llama3_70b_fp16_bytes_per_token():
    # 2 (K,V) · 80 layers · 8 KV heads · 128 head dim · 2 bytes = 327,680
    assert bytes_per_token(L70, parse_layout("fp16")) == 327_680
    assert bytes_per_token(L70) == 327_680


def test_llama3_70b_128k_and_4k_sequences():
    # 327,680 B · 128,000 tokens = 41.943 GB ; · 4,096 = 1.342 GB
    assert sequence_bytes(L70, KVLayout(), 128_000) / 1e9 == pytest.approx(41.94, abs=0.005)
    assert sequence_bytes(L70, KVLayout(), 4096) / 1e9 == pytest.approx(1.342, abs=0.0005)


def test_llama31_8b_128k_batch8():
    # 2 · 32 · 8 · 128 · 2 = 131,072 B/token; · 131,072 tokens · 8 = 137.44 GB
    fp = footprint(L8, None, 131_072, batch=8)
    assert fp.bytes_per_token == 131_072
    assert fp.batch_bytes / 1e9 == pytest.approx(137.4, abs=0.05)


def test_deepseek_v3_mla_latent():
    # (kv_lora_rank 512 + rope 64) = 576 values per token per layer; · 61 layers · 2 bytes = 70,272
    assert DSV3.kv_lora_rank + DSV3.qk_rope_head_dim == 576
    assert bytes_per_token(DSV3) == 70_272


def test_gqa_divides_mha_by_group_factor():
    mha = bytes_per_token(L70, parse_layout("mha"))
    assert mha == 2 * 80 * 64 * 128 * 2  # 2,621,440
    assert mha / bytes_per_token(L70) == L70.group_factor == 8
    assert bytes_per_token(L70, parse_layout("mqa")) == mha / 64


def test_kv_dtype_scale_overhead():
    # int4 (KIVI): 0.5 B + 4 B of scale/zero per 32 values = 0.625 B/value
    assert bytes_per_token(L70, parse_layout("int4")) == 327_680 / 2 * 0.625
    # fp8 per-tensor scale: exactly half
    assert bytes_per_token(L70, parse_layout("fp8")) == 163_840
    # NVFP4: 0.5 + 1/16 = 0.5625 B/value
    assert bytes_per_token(L70, parse_layout("fp4")) == 327_680 / 2 * 0.5625


def test_cross_layer_rounds_layers_up():
    assert bytes_per_token(L70, parse_layout("cross-layer:0.5")) == 327_680 / 2
    # 80 · 0.33 = 26.4 -> 27 layers keep their own KV
    assert bytes_per_token(L70, parse_layout("cross-layer:0.33")) == 27 * 2 * 8 * 128 * 2


def test_mla_style_retrofit_of_gqa_model():
    # 80 layers · (512 + 64) values · 2 bytes = 92,160
    assert bytes_per_token(L70, parse_layout("mla")) == 92_160


def test_the_retrofit_latent_is_deepseek_v3s_catalog_entry():
    """The retrofit's dims are DeepSeek-V3's in the model catalog (config.json kv_lora_rank 512,
    qk_rope_head_dim 64), read when a layout is made, not constants in kv.py (helper-173)."""
    from simulator.kv import MLA_RETROFIT_MODEL, mla_retrofit_dims

    assert DSV3.key == MLA_RETROFIT_MODEL
    assert mla_retrofit_dims() == (DSV3.kv_lora_rank, DSV3.qk_rope_head_dim) == (512, 64)
    assert KVLayout(attention="mla").latent_dims == (512, 64)
    assert parse_layout("mla") == parse_layout("mla:512") == KVLayout(attention="mla")
    assert parse_layout("mla:256").latent_dims == (256, 64)  # a rank of its own, the retrofit's rope dims
    # another layout holds no latent (None), whatever it was made from: equal layouts compare equal
    assert (KVLayout().mla_rank, KVLayout().mla_rope) == (None, None)
    assert replace(parse_layout("mla:256"), attention="native") == KVLayout()
    with pytest.raises(ConfigError, match=r"^KVLayout: 'mla_rank' must be >= 1 \(got -5\)$"):  # checked, then dropped
        KVLayout(attention="gqa", kv_heads=8, mla_rank=-5)
    with pytest.raises(ConfigError, match=r"^layout 'fp8': stores no latent \(attention='native', not 'mla'\)$"):
        _ = parse_layout("fp8").latent_dims


def test_only_an_mla_layout_reads_the_retrofit_model(monkeypatch):
    """helper-176: every KVLayout read DeepSeek-V3's dims from the catalog when made (default factories), so a
    catalog without that model failed ``--layout native``, ``kvsim models`` and ``EngineConfig()`` alike. Only an
    ``mla`` layout reads them now."""
    import simulator.kv as kv

    kv.mla_retrofit_dims.cache_clear()
    monkeypatch.setattr(kv, "MLA_RETROFIT_MODEL", "No-Such-Model")
    try:
        assert bytes_per_token(L70, parse_layout("native")) == 327_680
        assert bytes_per_token(L70, parse_layout("fp8+cross-layer:0.5")) == 327_680 / 4
        message = (r"^layout 'mla': the 'mla' retrofit's latent dims \(simulator\.kv\.MLA_RETROFIT_MODEL, "
                   r"from .*models\.toml\): unknown model 'No-Such-Model'")
        with pytest.raises(ConfigError, match=message):
            parse_layout("mla")
    finally:
        kv.mla_retrofit_dims.cache_clear()


def test_a_retrofit_model_without_a_latent_is_one_line_naming_it(monkeypatch):
    import simulator.kv as kv

    kv.mla_retrofit_dims.cache_clear()
    monkeypatch.setattr(kv, "MLA_RETROFIT_MODEL", "Llama-3.1-8B")
    try:
        with pytest.raises(ConfigError, match=r"models\.toml: model\.Llama-3\.1-8B\.attention: must be 'mla', "
                                              r"the latent an 'mla' retrofit stores \(got 'gqa'\)$"):
            kv.mla_retrofit_dims()
        monkeypatch.setattr(kv, "MLA_RETROFIT_MODEL", "No-Such-Model")
        with pytest.raises(ConfigError, match=r"^the 'mla' retrofit's latent dims .*unknown model 'No-Such-Model'"):
            kv.mla_retrofit_dims()
    finally:
        kv.mla_retrofit_dims.cache_clear()


def test_a_negative_rope_dim_is_refused_at_its_key(tmp_path):
    """A catalog's MLA model with qk_rope_head_dim = -64 was taken (448 values a token and layer)."""
    from simulator.models import load_models

    f = tmp_path / "m.toml"
    f.write_text('[model.X]\nn_layers = 4\nd_model = 1024\nn_heads = 8\nn_kv_heads = 8\nhead_dim = 192\n'
                 'attention = "mla"\nkv_lora_rank = 512\nqk_rope_head_dim = -64\ntotal_params = 1e9\n'
                 'active_params = 1e9\nsource = "test"\n')
    with pytest.raises(ConfigError, match=r"model\.X\.qk_rope_head_dim: must be >= 0 \(got -64\)$"):
        load_models(f)


def test_gemma3_sliding_window_layers():
    # 62 layers, every 6th global -> 10 global, 52 local capped at 1024 tokens.
    # per layer per token: 2 · 16 · 128 · 2 = 8,192 B
    n = 131_072
    expect = 10 * n * 8192 + 52 * 1024 * 8192
    assert sequence_bytes(GEMMA, KVLayout(), n) == expect
    assert sequence_bytes(GEMMA, parse_layout("no-sliding"), n) == 62 * n * 8192


def test_windowed_compression():
    # recent 4096 at full resolution, then one entry per 8: 4096 + ceil((131072 - 4096) / 8) = 19,968 entries
    b = sequence_bytes(L70, parse_layout("compress:8:4096"), 131_072)
    assert b == 19_968 * 327_680
    assert sequence_bytes(L70, parse_layout("compress:8:4096"), 4096) == 4096 * 327_680


def test_paged_rounding_waste():
    # 1,000 tokens in 16-token blocks = 63 blocks = 1,008 tokens reserved
    fp = footprint(L70, None, 1000, batch=3, block_tokens=16)
    assert fp.sequence_bytes_paged == 1008 * 327_680
    assert fp.paging_waste_bytes == 3 * 8 * 327_680


def test_factors_name_each_lever():
    fp = footprint(L70, parse_layout("mla+cross-layer:0.5+fp8+compress:8:4096"), 131_072)
    assert fp.factors["attention"] == pytest.approx(576 / (64 * 256))
    assert fp.factors["cross-layer"] == 0.5
    assert fp.factors["kv-dtype"] == 0.5
    assert fp.factors["compression"] == pytest.approx(19_968 / 131_072)
    assert math.prod(fp.factors.values()) == pytest.approx(fp.batch_bytes / fp.mha_bf16_batch_bytes)


def test_layout_label_round_trips():
    for text in ["native", "mla+fp8", "gqa:4+cross-layer:0.5+int4", "compress:4:1024", "mqa+no-sliding"]:
        assert parse_layout(parse_layout(text).label) == parse_layout(text)


@pytest.mark.parametrize("bad", ["foo", "fp8+bar", "cross-layer:x", "cross-layer:1.5", "compress:0"])
def test_bad_layouts_name_the_problem(bad):
    with pytest.raises(ConfigError) as err:
        parse_layout(bad)
    assert "\n" not in str(err.value)


LAYOUTS = st.sampled_from(["native", "fp8", "int4", "mla", "cross-layer:0.5", "compress:8:2048", "mqa"])
MODELS = st.sampled_from([L70, L8, DSV3, GEMMA])


@given(MODELS, LAYOUTS, st.integers(1, 2_000_000), st.integers(1, 2_000_000), st.integers(1, 64))
def test_bytes_monotone_in_context_and_batch(model, text, n1, n2, batch):
    layout = parse_layout(text)
    lo, hi = sorted((n1, n2))
    assert sequence_bytes(model, layout, lo) <= sequence_bytes(model, layout, hi)
    assert sequence_bytes(model, layout, lo, 16) <= sequence_bytes(model, layout, hi, 16)
    assert footprint(model, layout, lo, batch).batch_bytes <= footprint(model, layout, lo, batch + 1).batch_bytes


@given(st.sampled_from(["fp8", "int4", "fp4", "int8"]), st.sampled_from([0.25, 0.5, 0.75]),
       st.sampled_from(["native", "mla", "mqa"]), st.integers(1, 300_000))
def test_composed_levers_multiply(dt, frac, attn, n):
    # fraction values chosen so ceil(80 · f) = 80 · f exactly
    base = sequence_bytes(L70, KVLayout(), n)
    f_attn = sequence_bytes(L70, parse_layout(attn), n) / base
    f_dt = sequence_bytes(L70, parse_layout(dt), n) / base
    f_cl = sequence_bytes(L70, parse_layout(f"cross-layer:{frac}"), n) / base
    combined = sequence_bytes(L70, parse_layout(f"{attn}+{dt}+cross-layer:{frac}"), n)
    assert combined == pytest.approx(base * f_attn * f_dt * f_cl, rel=1e-12)
