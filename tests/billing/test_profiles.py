"""Price profiles: shipped figures, user additions, validation messages."""

from __future__ import annotations

import pytest

from simulator.billing.profiles import get_profile, load_profiles, parse_ttl, ttl_label
from simulator.errors import ConfigError


def test_default_is_anthropic_sonnet_with_published_multipliers():
    p = get_profile()
    assert p.key == "anthropic/sonnet-4"
    assert (p.input_usd_per_mtok, p.output_usd_per_mtok) == (3.0, 15.0)
    assert p.write_multiplier(300) * p.input_usd_per_mtok == pytest.approx(3.75)
    assert p.write_multiplier(3600) * p.input_usd_per_mtok == pytest.approx(6.0)
    assert p.read_multiplier * p.input_usd_per_mtok == pytest.approx(0.30)
    tiers = ("opus-4", "haiku-3.5", "haiku-4.5")
    assert [get_profile("anthropic", t).min_cacheable_tokens for t in tiers] == [1024, 2048, 4096]


def test_every_shipped_tier_cites_a_source_and_date():
    cat = load_profiles()
    tiers = [t for by_tier in cat.tiers.values() for t in by_tier.values()]
    assert len(tiers) >= 10
    assert set(cat.tiers) == {"anthropic", "openai", "deepseek", "gemini"}
    for t in tiers:
        assert t.source and t.tier_source and t.as_of[:2] == "20"


def test_openai_rounds_to_128_tokens_and_accepts_any_ttl():
    p = get_profile("openai", "gpt-4o")
    assert [p.cacheable_tokens(n) for n in (1023, 1024, 1151, 1152, 5000)] == [0, 1024, 1024, 1152, 4992]
    assert p.write_multiplier(600.0) == 1.0 and p.read_multiplier == 0.5


def test_user_file_adds_a_tier_and_errors_name_the_key(tmp_path):
    f = tmp_path / "mine.toml"
    f.write_text(
        '[profile.anthropic.tier."cheap"]\ninput_usd_per_mtok = 1.0\noutput_usd_per_mtok = 2.0\n'
        'min_cacheable_tokens = 512\nsource = "my contract"\nas_of = "2026-01"\n'
    )
    cat = load_profiles(extra=f)
    assert cat.get("anthropic", "cheap").write_multiplier(3600) == 2.0
    assert cat.get("anthropic").key == "anthropic/sonnet-4"  # default tier kept
    f.write_text('[profile.x.tier."y"]\ninput_usd_per_mtok = -1.0\n')
    with pytest.raises(ConfigError, match="missing key"):
        load_profiles(extra=f)
    with pytest.raises(ConfigError, match="unknown price profile 'nope'; valid: anthropic, openai"):
        get_profile("nope")
    with pytest.raises(ConfigError, match="unknown tier 'x' of profile 'anthropic'; valid: sonnet-4"):
        get_profile("anthropic", "x")


def test_parse_ttl():
    assert [parse_ttl(s) for s in ("5m", "1h", "90s", "none", "300", 42)] == [300, 3600, 90, 0, 300, 42]
    assert [ttl_label(t) for t in (0, 300, 3600, 90, 86400)] == ["none", "5m", "1h", "90s", "1d"]
    with pytest.raises(ConfigError, match="'ttl' must be like 5m"):
        parse_ttl("soon")
