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


@pytest.mark.parametrize(("line", "error"), [
    # helper-114: 1e17 made a traceback (the break-even probability rounded to 1: ln 0), -1.25 a message
    # without the file ("PriceProfile(my/t): ..."), ["a"] Python's own ("'>=' not supported ...")
    ("write_multipliers = [1e17]", "write_multipliers: must be in [1, 100] each (got [1e+17])"),
    ("write_multipliers = [-1.25]", "write_multipliers: must be in [1, 100] each (got [-1.25])"),
    ('write_multipliers = ["a"]', "write_multipliers: must be a list of numbers (got ['a'])"),
    ("write_multipliers = [1.25, 2.0]", "write_multipliers: must be one value per ttl_s (1) (got [1.25, 2.0])"),
    ("ttl_s = [0]", "ttl_s: must be > 0 seconds each, finite (got [0.0])"),
    ('ttl_s = ["5m"]', "ttl_s: must be a list of numbers (got ['5m'])"),
    ("input_usd_per_mtok = 1e308", "input_usd_per_mtok: must be in (0, 1,000,000] (got 1e+308)"),
    ("storage_usd_per_mtok_hour = nan", "storage_usd_per_mtok_hour: must be a number (got nan)"),
    ('read_multiplier = "x"', "read_multiplier: must be a number (got 'x')"),
    ("read_multiplier = 1", "read_multiplier: must be in [0, 1) (got 1)"),
    ("ttl_settable = 1", "ttl_settable: must be true or false (got 1)"),
    ("min_cacheable_tokens = 1.5", "min_cacheable_tokens: must be a whole number (got 1.5)"),
    # helper-178: -3 was taken, looking back at no boundary; '5m' named a 1-hour TTL's row
    ("lookback_segments = -3", "lookback_segments: must be >= 0 segments (got -3)"),
    ('ttl_names = ["1h"]', "ttl_names: must be names that read as their ttl_s (5m = 300 s, 1h = 3600 s): '1h' is "
                           "not 300 s (got ['1h'])"),
    ('ttl_names = ["short"]', "ttl_names: must be names that read as their ttl_s (5m = 300 s, 1h = 3600 s): 'short' "
                              "is not 300 s (got ['short'])"),
])
def test_a_price_file_error_names_the_file_the_key_the_value_and_the_rule(tmp_path, line, error):
    from click.testing import CliRunner

    from simulator.cli import main

    good = {"input_usd_per_mtok": "3.0", "output_usd_per_mtok": "15.0", "caching": '"explicit"',
            "ttl_names": '["5m"]', "ttl_s": "[300]", "write_multipliers": "[1.25]", "ttl_settable": "false",
            "read_multiplier": "0.1", "min_cacheable_tokens": "1024", "cache_increment_tokens": "1",
            "sliding": "true", "storage_usd_per_mtok_hour": "0.0", "lookback_segments": "0"}
    key, value = (x.strip() for x in line.split("=", 1))
    f = tmp_path / "p.toml"
    f.write_text('[profile.my]\nsource = "mine"\nas_of = "2026-12"\n[profile.my.tier.t]\n'
                 + "".join(f"{k} = {value if k == key else v}\n" for k, v in good.items()))
    with pytest.raises(ConfigError) as err:
        load_profiles(extra=f)
    assert str(err.value) == f"{f}: profile.my.tier.t.{error}"
    r = CliRunner().invoke(main, ["breakeven", "--catalog", str(f), "--profile", "my"])
    assert r.exit_code == 2 and r.output == f"Error: {f}: profile.my.tier.t.{error}\n"
    f.write_text(f.read_text().replace(line, f"{key} = {good[key]}"))
    assert load_profiles(extra=f).get("my").key == "my/t"  # the file with that line mended loads


def test_a_ttl_sold_twice_is_refused_not_priced_at_its_first_write_price(tmp_path):
    """helper-178: ttl_s = [300, 300] with writes [1.25, 2.0] loaded, and every table priced 300 s at 1.25: the
    second TTL's 2.0 was never used, without a word."""
    f = tmp_path / "p.toml"
    f.write_text('[profile.my]\nsource = "mine"\nas_of = "2026-12"\n[profile.my.tier.t]\ninput_usd_per_mtok = 3.0\n'
                 'output_usd_per_mtok = 15.0\ncaching = "explicit"\nttl_names = ["5m", "300s"]\nttl_s = [300, 300]\n'
                 'write_multipliers = [1.25, 2.0]\nttl_settable = false\nread_multiplier = 0.1\n'
                 'min_cacheable_tokens = 1024\ncache_increment_tokens = 1\nsliding = true\n'
                 'storage_usd_per_mtok_hour = 0.0\n')
    with pytest.raises(ConfigError) as err:
        load_profiles(extra=f)
    assert str(err.value) == f"{f}: profile.my.tier.t.ttl_s: must be each TTL once (got [300.0, 300.0])"
    f.write_text(f.read_text().replace('"300s"', '"1h"').replace("[300, 300]", "[300, 3600]"))
    assert load_profiles(extra=f).get("my").write_multiplier(3600) == 2.0


def test_parse_ttl():
    assert [parse_ttl(s) for s in ("5m", "1h", "90s", "none", "300", 42)] == [300, 3600, 90, 0, 300, 42]
    assert [ttl_label(t) for t in (0, 300, 3600, 90, 86400)] == ["none", "5m", "1h", "90s", "1d"]
    with pytest.raises(ConfigError, match="'ttl' must be like 5m"):
        parse_ttl("soon")


def test_a_key_the_profile_sets_for_its_tiers_is_said_at_the_profile(tmp_path):
    """helper-131: a bad value set at ``[profile.my]`` (for every tier) was said at ``profile.my.tier.t``, a key
    the file does not have."""
    f = tmp_path / "p.toml"
    f.write_text('[profile.my]\nsource = "mine"\ncaching = "explicit"\nttl_names = ["5m"]\nttl_s = [300]\n'
                 'write_multipliers = [0.5]\nttl_settable = false\nread_multiplier = 0.1\ncache_increment_tokens = 1\n'
                 'sliding = true\nstorage_usd_per_mtok_hour = 0.0\n[profile.my.tier.t]\ninput_usd_per_mtok = 3.0\n'
                 'output_usd_per_mtok = 15.0\nmin_cacheable_tokens = 1024\nread_multiplier = "x"\n')
    with pytest.raises(ConfigError) as err:  # the tier's own bad key: at the tier
        load_profiles(extra=f)
    assert str(err.value) == f"{f}: profile.my.tier.t.read_multiplier: must be a number (got 'x')"
    f.write_text(f.read_text().replace('read_multiplier = "x"\n', ""))
    with pytest.raises(ConfigError) as err:  # the profile's: at the profile
        load_profiles(extra=f)
    assert str(err.value) == f"{f}: profile.my.write_multipliers: must be in [1, 100] each (got [0.5])"
