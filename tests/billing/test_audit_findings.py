"""Findings of a user audit of the TTL billing, each pinned by a test.

1. A profile that caches only at breakpoints, replaying a trace that marks none (Mooncake's
   block hashes), cached nothing and said nothing: it now says so, and draws no empty gaps chart.
2. ``hit_rate`` (requests with any read) sat beside ``breakeven_p_hit`` as if comparable: it is now
   ``share_requests_with_read``, beside the token shares, ``share_cached_tokens_read`` being the one
   to compare with ``p*``.
3. The HBM holding cost could price more KV than the fleet's pool holds: the provider table now gives
   the peak KV held against the pool and says when it does not fit.
"""

from __future__ import annotations

import json
import math
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from simulator.billing import compare_ttls, get_profile, kv_byte_seconds
from simulator.billing.charts import nothing_cached_title, plot_gap_cdf, plot_savings_vs_ttl
from simulator.billing.numeric import ttl_rows
from simulator.billing.provider import ProviderCosts, kv_peak_bytes, load_provider_costs, pool_notes, provider_table
from simulator.cli import main
from simulator.kv import KVLayout, bytes_per_token
from simulator.models import get_model
from simulator.units import GB
from tests.billing.conftest import DOCS, SYSTEM, poisson_stream, req

NOTE = "no request marks a cache breakpoint"


def _mooncake(path):
    """A small Mooncake-style trace (block hashes, no breakpoints): every request shares blocks 0-3."""
    rows = [{"timestamp": 1000 * i, "input_length": 4 * 512 + 100, "output_length": 10,
             "hash_ids": [0, 1, 2, 3, 100 + i]} for i in range(12)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _no_breakpoints(n=12):
    return [req(i, 30.0 * i, [(SYSTEM, 4096), (DOCS, 2048), (1000 + i, 100)], breakpoints=()) for i in range(n)]


# 1. nothing cached without breakpoints ------------------------------------------------------------

def test_explicit_profile_says_why_nothing_is_cached(sonnet):
    cmp = compare_ttls(_no_breakpoints(), sonnet)
    assert cmp.requests_with_breakpoints == 0
    assert (cmp.summary.read_tokens == 0).all() and (cmp.summary.write_tokens == 0).all()
    assert cmp.uncached_reason is not None
    assert NOTE in cmp.uncached_reason and "caches only at breakpoints" in cmp.uncached_reason
    # the same requests with a breakpoint, or an automatic profile: no reason, and hits
    marked = [replace(r, cache_breakpoints=(2,)) for r in _no_breakpoints()]
    assert compare_ttls(marked, sonnet).uncached_reason is None
    auto = compare_ttls(_no_breakpoints(), get_profile("openai"))
    assert auto.uncached_reason is None and auto.summary.read_tokens.iloc[1] > 0


def test_breakeven_workload_without_breakpoints_warns_and_skips_the_gaps_chart(tmp_path):
    trace = _mooncake(tmp_path / "moon.jsonl")
    out = tmp_path / "be"
    r = CliRunner().invoke(main, ["breakeven", "--workload", str(trace), "--out", str(out)])
    assert r.exit_code == 0, r.output
    assert "Traceback" not in r.output
    assert NOTE in r.output and "caches only at breakpoints" in r.output
    assert "--profile openai" in r.output and "caches prefixes automatically" in r.output
    assert "best TTL for the customer: none (nothing was cached" in r.output
    assert not (out / "gaps.png").exists() and "no gaps.png" in r.output
    assert (out / "savings.png").exists()
    # --json carries the reason too
    r = CliRunner().invoke(main, ["breakeven", "--workload", str(trace), "--json"])
    assert r.exit_code == 0
    doc = json.loads(r.stdout)
    assert NOTE in doc["nothing_cached"]
    # an automatic profile caches the shared blocks: no note, a gaps chart
    out2 = tmp_path / "be2"
    r = CliRunner().invoke(main, ["breakeven", "--workload", str(trace), "--profile", "openai", "--out", str(out2)])
    assert r.exit_code == 0, r.output
    assert NOTE not in r.output and (out2 / "gaps.png").exists()
    assert pd.read_csv(out2 / "workload.csv").read_tokens.iloc[1] > 0


def test_an_empty_gap_chart_says_so(sonnet):
    ax = plot_gap_cdf(np.array([]), ttl_rows(sonnet, [300.0, 3600.0]))
    assert "none observed" in ax.get_title(loc="left")
    assert "reuse gaps" not in [t.get_text() for t in ax.get_legend().get_texts()]
    assert any("no reuse gaps" in t.get_text() for t in ax.texts)


def _tiny_report(tmp_path):
    """`kvsim run` of an 8B model on one 8×H100 node replaying `_mooncake`, with the TTL break-even on."""
    trace = _mooncake(tmp_path / "moon.jsonl")
    sc = tmp_path / "tiny.toml"
    sc.write_text(f"""
name = "tiny"
[model]
name = "Llama-3.1-8B"
[cluster]
hardware = ["8xH100"]
tp = 1
[workload]
trace = "{trace}"
[report]
collapse = false
breakeven = true
""")
    out = tmp_path / "rep"
    r = CliRunner().invoke(main, ["run", str(sc), "--out", str(out)])
    assert r.exit_code == 0, r.output
    return out


def test_report_says_nothing_was_cached(tmp_path):
    md = (_tiny_report(tmp_path) / "summary.md").read_text()
    assert "**Nothing was cached**" in md and NOTE in md and 'profile = "openai"' in md


SHORT = "no request's prefix reaches"


def test_a_prefix_below_the_minimum_says_why_nothing_is_cached(sonnet):
    """helper-178: every prefix shorter than the profile's minimum bills every TTL alike; the reason names the
    minimum and the longest prefix offered (6,144 tokens up to the breakpoint under an explicit profile, all 6,244
    under an automatic one), and offers no automatic profile (none would cache these either)."""
    reqs = [req(i, 30.0 * i, [(SYSTEM, 4096), (DOCS, 2048), (1000 + i, 100)], breakpoints=(2,)) for i in range(12)]
    cmp = compare_ttls(reqs, replace(sonnet, min_cacheable_tokens=8192))
    assert (cmp.summary.read_tokens == 0).all() and (cmp.summary.write_tokens == 0).all()
    assert not cmp.breakpoints_missing and cmp.longest_prefix_tokens == 6144
    assert cmp.uncached_reason == (f"{SHORT} 8,192 tokens, the anthropic/sonnet-4 profile's minimum to cache: the "
                                   "longest is 6,144 tokens, so nothing is cached and every TTL bills as no cache")
    auto = compare_ttls(reqs, replace(get_profile("openai"), min_cacheable_tokens=8192))
    assert auto.longest_prefix_tokens == 6244 and SHORT in auto.uncached_reason
    # at the minimum it caches: no reason
    held = compare_ttls(reqs, replace(sonnet, min_cacheable_tokens=6144))
    assert held.uncached_reason is None and held.summary.read_tokens.iloc[1] > 0
    assert compare_ttls([], get_profile("openai")).uncached_reason is None  # no request: nothing to explain
    # the savings chart's title holds the reason on lines that fit the figure
    title = nothing_cached_title(cmp.uncached_reason)
    assert title.splitlines() == ["Nothing cached: no request's prefix reaches 8,192 tokens, the anthropic/sonnet-4",
                                  "profile's minimum to cache", "(the longest is 6,144 tokens)"]


def test_breakeven_and_report_say_the_minimum_was_not_reached(tmp_path):
    """chat-4k's prompts (at most 4,096 tokens; none of 10 minutes of seed 0 reaches it) under gemini-2.5-pro's
    4,096-token minimum: the CLI's note and
    the savings chart say why nothing was cached, without the breakpoints' hint of an automatic profile."""
    r = CliRunner().invoke(main, ["breakeven", "--workload", "chat-4k", "--profile", "gemini", "--duration-s", "600",
                                  "--out", str(tmp_path / "be")])
    assert r.exit_code == 0, r.output
    assert f"note: {SHORT} 4,096 tokens, the gemini/gemini-2.5-pro profile's minimum to cache" in r.output
    assert "caches prefixes automatically" not in r.output
    assert "best TTL for the customer: none (nothing was cached" in r.output
    assert "no gaps.png" in r.output


# 2. which hit share compares with p* ----------------------------------------------------------------

def test_hit_shares_are_named_for_what_they_count(sonnet):
    reqs = poisson_stream(np.random.default_rng(3), 1 / 60, 300, 20_000)
    s = compare_ttls(reqs, sonnet).summary.set_index("ttl")
    assert "hit_rate" not in s.columns
    five = s.loc["5m"]
    prompt = sum(r.prompt_tokens for r in reqs)
    assert five.share_prompt_tokens_read == pytest.approx(five.read_tokens / prompt)
    assert five.share_cached_tokens_read == pytest.approx(five.read_tokens / (five.read_tokens + five.write_tokens))
    assert 0 < five.share_requests_with_read < 1
    assert math.isnan(s.loc["none"].share_cached_tokens_read)  # nothing cached: undefined, not 0
    cols = list(s.columns)
    assert cols.index("share_cached_tokens_read") + 1 == cols.index("breakeven_p_hit")


@pytest.mark.parametrize("rate_per_s", [1 / 30, 1 / 400, 1 / 3000])
def test_cached_token_share_above_p_star_is_when_the_cached_input_pays(sonnet, rate_per_s):
    """No storage fee: the prefix input ``r R + w W`` is below ``R + W`` iff ``R / (R + W) > p*``."""
    reqs = poisson_stream(np.random.default_rng(7), rate_per_s, 200, 20_000)
    for row in compare_ttls(reqs, sonnet).summary.to_dict("records"):
        if row["ttl"] == "none":
            continue
        r, w = sonnet.read_multiplier, sonnet.write_multiplier(row["ttl_s"])
        cached_cost = r * row["read_tokens"] + w * row["write_tokens"]
        pays = cached_cost < row["read_tokens"] + row["write_tokens"]
        assert pays == (row["share_cached_tokens_read"] > row["breakeven_p_hit"])
        assert pays == (row["savings_usd"] > 0)  # the rest of the bill is the same with and without


def test_savings_chart_labels_say_what_was_read(sonnet):
    reqs = poisson_stream(np.random.default_rng(3), 1 / 60, 300, 20_000)
    ax = plot_savings_vs_ttl(compare_ttls(reqs, sonnet).summary)
    labels = [t.get_text() for t in ax.texts]
    assert labels and all("of prompt tokens\nread from cache" in t and "of requests\nread from cache" in t
                          for t in labels)
    assert not any("hit " in t for t in labels)


# 3. the fleet's KV pool -------------------------------------------------------------------------------

def _residency(rows):
    return pd.DataFrame(rows, columns=["key_id", "tokens", "own_tokens", "start_s", "end_s", "parent_key_id",
                                       "held_tokens"])


def test_peak_kv_by_hand():
    # a root of 100 tokens alive [0, 10) and [20, 30); its child (50 more) alive [5, 25), which keeps the root
    # held over [5, 25) too; an unrelated entry of 30 tokens alive [8, 9); one of 1,000 ending where it starts
    res = _residency([(0, 100, 100, 0.0, 10.0, -1, 100), (0, 100, 100, 20.0, 30.0, -1, 100),
                      (1, 150, 50, 5.0, 25.0, 0, 50), (2, 30, 30, 8.0, 9.0, -1, 30), (3, 1000, 1000, 30.0, 31.0,
                                                                                           -1, 1000)])
    assert kv_peak_bytes(res, 2.0) == 2.0 * 1000  # 100 + 50 + 30 = 180 at t in [8, 9) < 1,000 after 30
    assert kv_peak_bytes(res.iloc[:4], 2.0) == 2.0 * 180
    assert kv_peak_bytes(res.iloc[:0], 2.0) == 0.0
    # the union of the root's lives with its child's: [0, 30) for 100 tokens, [5, 25) for 50, 1 s for 30
    assert kv_byte_seconds(res.iloc[:4], 1.0) == 100 * 30 + 50 * 20 + 30 * 1


def test_report_compares_with_the_simulated_pool(tmp_path):
    out = _tiny_report(tmp_path)
    provider = pd.read_csv(out / "breakeven_provider.csv")
    doc = json.loads((out / "8xH100" / "summary.json").read_text())
    # the simulated pool: every replica's blocks × a block's bytes (a plain layout: block tokens × bytes a token)
    block_bytes = doc["config"]["block_tokens"] * bytes_per_token(get_model("Llama-3.1-8B"), KVLayout())
    assert provider.kv_pool_gb.iloc[0] == pytest.approx(doc["summary"]["kv_blocks_total"] * block_bytes / GB)
    assert "The fleet's KV pool is" in (out / "summary.md").read_text()
    # helper-114: the figures the provider table is priced from were written nowhere; now a CSV and a line hold
    # them, and the table's holding costs follow from them and its GB-hours
    inputs = pd.read_csv(out / "breakeven_provider_inputs.csv").iloc[0]
    assert inputs.kv_bytes_per_token == bytes_per_token(get_model("Llama-3.1-8B"), KVLayout())
    for row in provider.itertuples():
        stream_s = row.kv_gb_hours * 3600 * GB / inputs.bytes_per_stream
        assert row.holding_hbm_usd == pytest.approx(stream_s * inputs.revenue_usd_per_stream_s, rel=1e-12)
        assert row.holding_dram_usd == pytest.approx(row.kv_gb_hours * inputs.dram_usd_per_gb_hour, rel=1e-12)
        assert row.holding_ssd_usd == pytest.approx(row.kv_gb_hours * inputs.ssd_usd_per_gb_hour, rel=1e-12)
    assert inputs.usd_per_gpu_s * 3600 == pytest.approx(2.99)  # H100's catalog price
    assert "Priced from (`breakeven_provider_inputs.csv`): KV 131,072 bytes a token" in (out / "summary.md").read_text()


def test_provider_table_compares_the_held_kv_with_the_pool(sonnet):
    reqs = poisson_stream(np.random.default_rng(3), 1 / 60, 300, 20_000)
    cmp = compare_ttls(reqs, sonnet)
    costs = load_provider_costs()
    unknown = provider_table(cmp, costs).set_index("ttl")
    assert unknown.kv_pool_gb.isna().all() and unknown.kv_peak_over_pool.isna().all()
    assert pool_notes(unknown.reset_index()) == []
    peak_gb = unknown.loc["1h", "kv_peak_gb"]
    assert peak_gb == pytest.approx(20_000 * costs.kv_bytes_per_token / GB, rel=0.01)  # one prefix, held once
    small = replace(costs, kv_pool_bytes=peak_gb * GB / 4)
    table = provider_table(cmp, small).set_index("ttl")
    assert table.loc["1h", "kv_peak_over_pool"] == pytest.approx(4.0)
    span_h = (cmp.results["1h"].residency.end_s.max() - cmp.results["1h"].residency.start_s.min()) / 3600
    assert table.loc["1h", "kv_gb_hours_over_pool"] == pytest.approx(
        table.loc["1h", "kv_gb_hours"] / (table.loc["1h", "kv_pool_gb"] * span_h))
    # the figures the table had are unchanged by knowing the pool
    cols = [c for c in unknown.columns if not c.startswith("kv_pool") and not c.endswith("_over_pool")]
    pd.testing.assert_frame_equal(unknown[cols], table[cols])
    notes = pool_notes(table.reset_index())
    assert len(notes) == 2 and notes[1].startswith("TTL 1h") and "4.00×" in notes[1]
    assert "cannot all live in HBM" in notes[1]
    # a pool big enough: no note
    assert pool_notes(provider_table(cmp, replace(costs, kv_pool_bytes=peak_gb * GB * 2))) == []


def test_a_pool_size_must_be_positive():
    from simulator.errors import ConfigError

    with pytest.raises(ConfigError, match="kv_pool_bytes"):
        ProviderCosts(**{**{f: 1.0 for f in ("kv_bytes_per_token", "bytes_per_stream", "revenue_usd_per_stream_s",
                                              "dram_usd_per_gb_hour", "ssd_usd_per_gb_hour",
                                              "prefill_gpu_s_per_token", "usd_per_gpu_s")}, "kv_pool_bytes": 0.0})


@pytest.mark.parametrize("rate_per_s", [1 / 30, 1 / 400, 1 / 3000])
def test_with_storage_the_break_even_share_counts_one_ttl_of_it(rate_per_s):
    """helper-147: under Gemini (writes at the input price, storage billed one TTL from the write) the simulated
    bills' ``breakeven_p_hit`` read 0, ``(w − 1) / (w − r)`` with ``w = 1``, beside a 1-hour TTL that lost
    money at a cached-token share of 0.88. With the write dearer by one TTL's storage, ``w' = 1 + S_T``
    (``S_T = 4.5 · 1 h / 1.25 = 3.6`` for 1 h, 0.3 for 5 min), ``p* = (w' − 1) / (w' − r)``: 0.8272 and 0.2852,
    as `kvsim breakeven`'s own table gives, and the TTL saves exactly where the share is above it."""
    from simulator.billing.profiles import get_profile

    gemini = get_profile("gemini", "gemini-2.5-pro")
    reqs = poisson_stream(np.random.default_rng(7), rate_per_s, 200, 20_000)
    rows = compare_ttls(reqs, gemini, ["5m", "1h"]).summary.set_index("ttl")
    assert rows.loc["1h"].breakeven_p_hit == pytest.approx(3.6 / (4.6 - 0.248))
    assert rows.loc["5m"].breakeven_p_hit == pytest.approx(0.3 / (1.3 - 0.248))
    for ttl in ("5m", "1h"):
        row = rows.loc[ttl]
        assert (row.savings_usd > 0) == (row.share_cached_tokens_read > row.breakeven_p_hit)
