"""Invariants of replay billing over random request sequences (hypothesis)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.billing.ledger import bill_many
from simulator.billing.profiles import get_profile
from tests.billing.conftest import req

OPUS = get_profile("anthropic", "opus-4")

gaps = st.lists(st.floats(min_value=0.0, max_value=4000.0), min_size=1, max_size=30)
prefixes = st.lists(st.sampled_from([500, 2000, 50_000]), min_size=1, max_size=30)


@settings(max_examples=60, deadline=None)
@given(gaps=gaps, prefixes=prefixes)
def test_tokens_partition_and_cache_never_costs_more_than_full_writes(gaps, prefixes):
    t, reqs = 0.0, []
    for i, g in enumerate(gaps):
        t += g
        n = prefixes[i % len(prefixes)]
        reqs.append(req(i, t, [(n, n), (10_000 + i, 100)]))  # segment id = prefix size
    results = bill_many(reqs, OPUS, [0.0, 300.0, 3600.0], write_latency_s=1.0)
    none = results[0.0].frame
    for ttl, res in results.items():
        f = res.frame
        assert ((f["read_tokens"] + f["write_tokens"] + f["plain_tokens"]) == f["prompt_tokens"]).all()
        assert (f[["read_tokens", "write_tokens", "plain_tokens"]] >= 0).all().all()
        w = OPUS.write_multiplier(ttl) if ttl else 1.0
        # a request costs at least its all-read price and at most its all-written price
        assert (f["input_usd"] <= none["input_usd"] * w + 1e-12).all()
        assert (f["input_usd"] >= none["input_usd"] * OPUS.read_multiplier - 1e-12).all()
        assert (res.residency["end_s"] >= res.residency["start_s"]).all()
    # a longer TTL never hits less often under the same (sliding) refresh rule
    assert results[3600.0].frame["hit"].sum() >= results[300.0].frame["hit"].sum()
