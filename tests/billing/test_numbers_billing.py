"""Printed figures of ``kvsim breakeven`` and the workload rate, checked against hand arithmetic
(numbers audit D7, D11, D12)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from click.testing import CliRunner

from simulator.billing import compare_ttls, get_profile
from simulator.billing.numeric import cost_curves
from simulator.cli import main
from simulator.compare import compare_strategies
from simulator.engine import EngineConfig
from tests.billing.conftest import SYSTEM, req
from workloads.request import Request
from workloads.summary import offered_rate_per_s, summarize
from workloads.traces.native import write_workload

# sonnet-4: input $3/MTok, output $15/MTok, read x0.1, 5m write x1.25, 1h write x2


def kvsim(*args: object) -> object:
    return CliRunner().invoke(main, [str(a) for a in args])


def _two_turns() -> list[Request]:
    """Two requests 10 s apart sharing a 2,000-token prefix (a breakpoint after it), each with 100
    tokens of its own and 100 output tokens."""
    return [req(0, 0.0, [(SYSTEM, 2000), (1000, 100)]), req(1, 10.0, [(SYSTEM, 2000), (1001, 100)])]


# no cache: input 4,200 x $3/MTok = $0.0126, output 200 x $15/MTok = $0.003, bill $0.0156.
# 5m: r0 writes 2,000 at x1.25 + 100 plain, r1 reads 2,000 at x0.1 + 100 plain:
#     (2,500 + 100 + 200 + 100) x $3/MTok = $0.0087; bill $0.0117; saved $0.0039.
#     savings_pct_of_input = 0.0039 / 0.0126 = 30.952 %, savings_pct_of_bill = 0.0039 / 0.0156 = 25 %.
# 1h: the write at x2: (4,000 + 100 + 200 + 100) x $3/MTok = $0.0132; saved -$0.0006:
#     of input -0.0006 / 0.0126 = -4.762 %, of bill -0.0006 / 0.0156 = -3.846 %.
HAND = {"5m": (0.0039, 100 * 0.0039 / 0.0126, 25.0), "1h": (-0.0006, -100 * 0.0006 / 0.0126, -100 * 0.0006 / 0.0156)}


def test_simulated_savings_name_their_base(sonnet):
    s = compare_ttls(_two_turns(), sonnet, ["none", "5m", "1h"]).summary.set_index("ttl")
    assert "savings_pct" not in s  # one name, one meaning: the Poisson tables' prefix saving
    assert s.input_usd["none"] == pytest.approx(0.0126) and s.total_usd["none"] == pytest.approx(0.0156)
    for ttl, (usd, of_input, of_bill) in HAND.items():
        assert s.savings_usd[ttl] == pytest.approx(usd, abs=1e-12)
        assert s.savings_pct_of_input[ttl] == pytest.approx(of_input, rel=1e-9)
        assert s.savings_pct_of_bill[ttl] == pytest.approx(of_bill, rel=1e-9)
    assert s.savings_pct_of_input["5m"] == pytest.approx(30.952381, abs=1e-6)


def test_cli_simulated_table_and_its_legend(tmp_path):
    trace = tmp_path / "two.csv"
    write_workload(_two_turns(), trace)
    r = kvsim("breakeven", "--workload", trace, "--out", tmp_path / "o")
    assert r.exit_code == 0, r.output
    assert "savings_pct_of_input = 100 × savings_usd / input_usd(none)" in r.output
    assert "savings_pct_of_bill = 100 × savings_usd / total_usd(none)" in r.output
    import pandas as pd

    w = pd.read_csv(tmp_path / "o" / "workload.csv").set_index("ttl")
    assert w.savings_pct_of_input["5m"] == pytest.approx(30.952381, abs=1e-6)
    assert w.savings_pct_of_bill["5m"] == pytest.approx(25.0, rel=1e-9)


def test_cli_prefix_savings_say_their_base():
    # 20,000-token prefix at 0.1/min, 5m: p = 1 - exp(-0.1/60 x 300) = 1 - e^-0.5 = 0.393469;
    # relative cost = 0.1 p + 1.25 (1 - p) = 1.25 - 1.15 p = 0.797511; savings 20.2489 % of the prefix's cost
    r = kvsim("breakeven", "--rate", "0.1", "--prefix-tokens", "20000", "--ttl", "5m")
    assert r.exit_code == 0, r.output
    assert "  5m    300           0.1 0.3935         0.7975          0.04785        20.25" in r.output
    assert "savings_pct = 100 × (1 − relative_cost): the saving as a share of the prefix's input cost" \
        in r.output


# --- D12: the profile's own TTL names; a prefix below the minimum --------------------------------

def test_deepseek_ttl_is_printed_as_the_profile_names_it():
    # deepseek: input $0.28/MTok, read x0.1, 24h write x1. At 0.5/min for 86,400 s: p = 1 - e^-720 = 1;
    # relative cost 0.1; 5,000 tokens x $0.28/MTok x 0.1 = $0.00014 a request; savings 90 %
    r = kvsim("breakeven", "--rate", "0.5", "--prefix-tokens", "5000", "--profile", "deepseek", "--json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert [row["ttl"] for row in doc["breakeven"]] == ["24h"]
    cached = [row for row in doc["costs"] if row["ttl"] != "none"]
    assert [row["ttl"] for row in cached] == ["24h"]
    # (helper-178) deepseek caches in 64-token units: 4,992 of the 5,000 tokens, the last 8 plain input:
    # (4,992 x 0.1 + 8) x $0.28/MTok = $0.000142016 a request; savings 100 (1 - 507.2 / 5,000) = 89.856 %
    assert cached[0]["usd_per_request"] == pytest.approx((4992 * 0.1 + 8) * 0.28e-6, rel=1e-9)
    assert cached[0]["savings_pct"] == pytest.approx(89.856, rel=1e-9)
    deepseek = get_profile("deepseek")
    assert deepseek.ttl_name(86400) == "24h" and deepseek.ttl_name(0) == "none"
    cmp = compare_ttls(_two_turns(), deepseek, ["none", 86400])
    assert cmp.summary.ttl.tolist() == ["none", "24h"] and set(cmp.results) == {"none", "24h"}


def test_a_prefix_past_the_last_cache_increment_pays_its_tail_as_plain_input():
    """helper-178: the closed forms priced a whole prefix as cached where the profile caches it in steps
    (`cache_increment_tokens`), as the replay does not: openai gpt-4.1 ($2/MTok in, read x0.25, no write premium)
    caches 1,024 of a 1,100-token prefix (1,024 + 128 k), the other 76 tokens are plain input.
    At 1 reuse a minute, 5m: p = 1 - e^-5 = 0.993262; the cached part costs c = 0.25 p + (1 - p) = 0.255053;
    the prefix k c + (1 - k), k = 1,024 / 1,100: 0.306522 (was 0.255053); 1,100 x $2/MTok x 0.306522 =
    $0.00067435 a request (was $0.000561); savings 69.348 %."""
    p = 1 - math.exp(-5)
    k = 1024 / 1100
    rel = k * (0.25 * p + (1 - p)) + (1 - k)
    assert rel == pytest.approx(0.306522, abs=1e-6)
    for args, table in ((["--rate", "1"], "costs"), (["--gaps", "expon:scale=60"], "gaps")):
        r = kvsim("breakeven", "--profile", "openai", "--prefix-tokens", "1100", *args, "--json")
        assert r.exit_code == 0, r.output
        row = next(x for x in json.loads(r.stdout)[table] if x["ttl"] == "5m")
        assert row["p_hit"] == pytest.approx(p, rel=1e-9)
        assert row["relative_cost"] == pytest.approx(rel, rel=1e-9)
        assert row["usd_per_request"] == pytest.approx(1100 * 2e-6 * rel, rel=1e-9)
        assert row["usd_per_request"] == pytest.approx(0.00067435, rel=1e-6)
        assert row["savings_pct"] == pytest.approx(69.3478, abs=1e-4)
    # the replay of Poisson reuse at that rate bills the same (2,000 requests: within 3 %)
    rng = np.random.default_rng(3)
    arrivals = np.cumsum(rng.exponential(60.0, 2000))
    reqs = [Request(id=i, arrival_s=float(t), prompt_tokens=1100, output_tokens=1, segments=((1, 1100),),
                    cache_breakpoints=(1,)) for i, t in enumerate(arrivals)]
    bill = compare_ttls(reqs, get_profile("openai"), ["none", "5m"]).summary.set_index("ttl")
    assert bill.input_usd["5m"] / len(reqs) == pytest.approx(0.00067435, rel=0.03)


def test_prefix_below_the_minimum_is_billed_as_plain_input(sonnet):
    # 500 < sonnet-4's 1,024-token minimum: not cacheable; every row p_hit 0, relative cost 1,
    # 500 x $3/MTok = $0.0015 a request, savings 0
    r = CliRunner().invoke(main, ["breakeven", "--prefix-tokens", "500", "--rate", "0.1,1", "--json"])
    assert r.exit_code == 0, r.output
    rows = json.loads(r.stdout)["costs"]
    assert len(rows) == 6  # none, 5m, 1h x two rates
    for row in rows:
        assert (row["p_hit"], row["relative_cost"], row["savings_pct"]) == (0.0, 1.0, 0.0)
        assert row["usd_per_request"] == pytest.approx(0.0015, rel=1e-12)
    assert ("a 500-token prefix is below anthropic/sonnet-4's minimum cacheable prefix of 1,024 tokens: it cannot "
            "be cached under this profile, so every request pays the plain input price, $0.0015 a request") in r.stderr
    # at the minimum it is cached: 1,024 tokens at 0.1/min under 5m, relative cost 0.797511 (as above)
    at_min = cost_curves(sonnet, [300.0], [0.1], 1024).set_index("ttl")
    assert at_min.relative_cost["5m"] == pytest.approx(1.25 - 1.15 * -math.expm1(-0.5), rel=1e-12)
    assert cost_curves(sonnet, [300.0], [0.1], 1023).relative_cost.tolist() == [1.0, 1.0]


def test_prefix_of_no_tokens_is_refused():
    r = kvsim("breakeven", "--prefix-tokens", "0")
    assert r.exit_code == 2 and "Error: --prefix-tokens: must be >= 1 token (got 0)" in r.output


# --- D11: one offered rate, n / (last arrival - first arrival) ----------------------------------

def _three() -> list[Request]:
    return [Request(id=i, arrival_s=t, prompt_tokens=100, output_tokens=4, segments=((10 + i, 100),))
            for i, t in enumerate((0.0, 1.0, 4.0))]


def test_offered_rate_of_three_requests_by_hand(tmp_path):
    # arrivals 0, 1, 4 s: n / span = 3 / 4 = 0.75 per s ((n - 1) / span would be 0.5)
    assert offered_rate_per_s(3, 4.0) == 0.75 and math.isnan(offered_rate_per_s(3, 0.0))
    assert summarize(_three()).rate_per_s == 0.75
    trace = tmp_path / "three.csv"
    write_workload(_three(), trace)
    r = kvsim("workload", "describe", trace, "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)[0]["rate_per_s"] == 0.75
    df = compare_strategies(EngineConfig(model="Llama-3.1-8B"), _three(), ["native"])
    assert df.offered_requests_per_s.tolist() == [0.75]
