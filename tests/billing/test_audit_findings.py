"""Findings of a user audit of the TTL billing, each pinned by a test.

2. ``hit_rate`` (requests with any read) sat beside ``breakeven_p_hit`` as if comparable: it is now
   ``share_requests_with_read``, beside the token shares, ``share_cached_tokens_read`` being the one
   to compare with ``p*``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from simulator.billing import compare_ttls
from simulator.billing.charts import plot_savings_vs_ttl
from tests.billing.conftest import poisson_stream

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
