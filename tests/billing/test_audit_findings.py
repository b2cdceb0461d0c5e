"""Findings of a user audit of the TTL billing, each pinned by a test.

1. A profile that caches only at breakpoints, replaying a trace that marks none (Mooncake's
   block hashes), cached nothing and said nothing: it now says so, and draws no empty gaps chart.
2. ``hit_rate`` (requests with any read) sat beside ``breakeven_p_hit`` as if comparable: it is now
   ``share_requests_with_read``, beside the token shares, ``share_cached_tokens_read`` being the one
   to compare with ``p*``.
"""

from __future__ import annotations

import json
import math
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from simulator.billing import compare_ttls, get_profile
from simulator.billing.charts import plot_gap_cdf, plot_savings_vs_ttl
from simulator.billing.numeric import ttl_rows
from simulator.cli import main
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
    assert "none observed" in ax.get_title()
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
