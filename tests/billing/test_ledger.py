"""Replay bills, hand-computed to the cent.

Opus 4 tier: input $15/MTok, output $75/MTok; 5-minute write 1.25x, 1-hour write 2x, read 0.1x.
A 100k-token prefix therefore costs $1.50 plain, $1.875 to write for 5 min, $3.00 to write for
1 h and $0.15 to read; 1000 plain suffix tokens $0.015; 100 output tokens $0.0075.
"""

from __future__ import annotations

import dataclasses

import pytest

from simulator.billing.ledger import Ledger, bill_many, bill_requests
from simulator.billing.profiles import get_profile
from simulator.errors import ConfigError
from tests.billing.conftest import DOCS, SYSTEM, req

OPUS = get_profile("anthropic", "opus-4")
PREFIX = [(SYSTEM, 100_000)]
OUT = 0.0075
SUFFIX = 0.015


def turn(rid: int, t: float, prefix: list[tuple[int, int]] = PREFIX, bp: tuple[int, ...] = (1,)):
    return req(rid, t, [*prefix, (9000 + rid, 1000)], bp)


def totals(bills) -> list[float]:
    return [b.total_usd for b in bills]


def test_write_then_read_within_ttl():
    led = Ledger(OPUS, 300)
    b0, b1 = led.bill(turn(0, 0.0)), led.bill(turn(1, 200.0))
    assert (b0.write_tokens, b0.read_tokens, b0.plain_tokens) == (100_000, 0, 1000)
    assert (b1.write_tokens, b1.read_tokens, b1.plain_tokens) == (0, 100_000, 1000)
    assert totals([b0, b1]) == pytest.approx([1.875 + SUFFIX + OUT, 0.15 + SUFFIX + OUT], abs=0.005)
    assert (b0.entry_state, b1.entry_state, b1.hit) == ("cold", "hit", True)
    assert b1.reuse_gap_s == 200.0


def test_hit_refreshes_expiry_and_expiry_is_exclusive():
    led = Ledger(OPUS, 300)
    bills = [led.bill(turn(i, t)) for i, t in enumerate([0.0, 200.0, 450.0, 750.0])]
    # 200 refreshes to 500, 450 hits (would have expired at 300) and refreshes to 750;
    # at exactly 750 the entry is dead (alive iff now < expiry): write again.
    assert [b.hit for b in bills] == [False, True, True, False]
    assert bills[3].entry_state == "expired"
    assert totals(bills) == pytest.approx(
        [1.875 + SUFFIX + OUT, 0.15 + SUFFIX + OUT, 0.15 + SUFFIX + OUT, 1.875 + SUFFIX + OUT], abs=0.005
    )


def test_one_hour_ttl_writes_at_twice_base():
    res = bill_requests([turn(0, 0.0), turn(1, 3000.0), turn(2, 6599.0)], OPUS, 3600)
    assert res.frame["total_usd"].tolist() == pytest.approx(
        [3.00 + SUFFIX + OUT, 0.15 + SUFFIX + OUT, 0.15 + SUFFIX + OUT], abs=0.005
    )
    assert res.totals["total_usd"] == pytest.approx(3.30 + 3 * (SUFFIX + OUT), abs=0.005)


def test_no_cache_bills_everything_as_input():
    res = bill_requests([turn(0, 0.0), turn(1, 1.0)], OPUS, 0)
    assert res.frame["total_usd"].tolist() == pytest.approx([1.5 + SUFFIX + OUT] * 2, abs=0.005)
    assert res.frame["plain_tokens"].tolist() == [101_000, 101_000]


def test_prefix_below_minimum_is_plain_input():
    sonnet = get_profile("anthropic", "sonnet-4")  # minimum 1024 tokens
    led = Ledger(sonnet, 300)
    bills = [led.bill(turn(i, float(i), prefix=[(SYSTEM, 1023)])) for i in range(2)]
    assert [(b.read_tokens, b.write_tokens, b.plain_tokens) for b in bills] == [(0, 0, 2023)] * 2
    assert bills[1].entry_state == "none"
    # 2023 x $3/MTok + 100 x $15/MTok
    assert bills[1].total_usd == pytest.approx(2023 * 3e-6 + 100 * 15e-6, abs=1e-9)


def test_concurrent_cold_requests_both_pay_the_write():
    led = Ledger(OPUS, 300, write_latency_s=2.0)
    bills = [led.bill(turn(i, t)) for i, t in enumerate([0.0, 1.0, 2.5])]
    assert [b.entry_state for b in bills] == ["cold", "pending", "hit"]
    assert totals(bills) == pytest.approx(
        [1.875 + SUFFIX + OUT, 1.875 + SUFFIX + OUT, 0.15 + SUFFIX + OUT], abs=0.005
    )


def test_longer_breakpoint_expired_shorter_alive():
    half = [(SYSTEM, 50_000), (DOCS, 50_000)]
    led = Ledger(OPUS, 300)
    b0 = led.bill(turn(0, 0.0, prefix=half, bp=(1, 2)))  # writes both entries, expiry 300
    b1 = led.bill(turn(1, 200.0, prefix=[(SYSTEM, 50_000)], bp=(1,)))  # reads SYSTEM only -> 500
    b2 = led.bill(turn(2, 400.0, prefix=half, bp=(1, 2)))  # SYSTEM+DOCS dead, SYSTEM alive
    assert (b0.write_tokens, b1.read_tokens) == (100_000, 50_000)
    assert (b2.read_tokens, b2.write_tokens, b2.plain_tokens, b2.entry_state) == (
        50_000,
        50_000,
        1000,
        "expired",
    )
    # 50k x 1.5e-6 + 50k x 18.75e-6 + 1000 x 15e-6 + 100 x 75e-6
    assert b2.total_usd == pytest.approx(0.075 + 0.9375 + SUFFIX + OUT, abs=0.005)


def test_arrivals_out_of_order_raise():
    led = Ledger(OPUS, 300)
    led.bill(turn(0, 10.0))
    with pytest.raises(ConfigError, match="'arrival_s' must be >= the previous arrival"):
        led.bill(turn(1, 5.0))


def test_unsold_ttl_raises_listing_valid_ones():
    with pytest.raises(ConfigError, match="must be one of 5m, 1h"):
        Ledger(OPUS, 600)


def test_openai_automatic_prefix_in_128_token_steps():
    gpt = get_profile("openai", "gpt-4.1")  # $2/MTok, read 0.25x, no write premium
    led = Ledger(gpt, 300)
    b0 = led.bill(req(0, 0.0, [(SYSTEM, 1100), (501, 300)], breakpoints=()))
    b1 = led.bill(req(1, 10.0, [(SYSTEM, 1100), (502, 300)], breakpoints=()))
    # boundaries at 1100 and 1400 tokens cache 1024 and 1280 tokens
    assert (b0.read_tokens, b0.write_tokens) == (0, 1280)
    assert (b1.read_tokens, b1.write_tokens, b1.plain_tokens) == (1024, 256, 120)
    assert b1.input_usd == pytest.approx((120 + 256 + 0.25 * 1024) * 2e-6, abs=1e-12)


def test_gemini_storage_is_billed_per_hour_and_not_refreshed():
    gem = get_profile("gemini", "gemini-2.5-pro")  # $1.25/MTok, read 0.248x, $4.50/MTok/hour
    res = bill_requests([turn(0, 0.0), turn(1, 1800.0), turn(2, 3600.0)], gem, 3600)
    f = res.frame
    assert f["storage_usd"].tolist() == pytest.approx([0.45, 0.0, 0.45], abs=1e-9)
    assert f["hit"].tolist() == [False, True, False]
    assert f["input_usd"][1] == pytest.approx((100_000 * 0.248 + 1000) * 1.25e-6, abs=1e-9)


def test_residency_records_each_entry_life():
    res = bill_many([turn(0, 0.0), turn(1, 100.0), turn(2, 1000.0)], OPUS, [300.0])[300.0]
    lives = res.residency.sort_values("start_s")[["tokens", "start_s", "end_s"]].values.tolist()
    assert lives == [[100_000, 0.0, 400.0], [100_000, 1000.0, 1300.0]]


def test_next_turn_reads_what_the_previous_turn_wrote_at_its_final_breakpoint():
    # Turn 1: [doc 100k, user 1k], breakpoint at the end -> writes 101k (5 min).
    # Turn 2 at 60 s: [doc, user 1k, answer 500, user 2k], breakpoint at the end. Anthropic checks
    # earlier block boundaries (lookback), so it reads turn 1's 101k and writes the 2.5k beyond:
    #   read 101,000 · $1.50/MTok = $0.1515; write 2,500 · $18.75/MTok = $0.046875; output $0.0075.
    t1 = req(1, 0.0, [(DOCS, 100_000), (11, 1000)], (2,))
    t2 = req(2, 60.0, [(DOCS, 100_000), (11, 1000), (12, 500), (13, 2000)], (4,))
    led = Ledger(OPUS, 300)
    b1, b2 = led.bill(t1), led.bill(t2)
    assert (b1.write_tokens, b1.read_tokens) == (101_000, 0)
    assert (b2.read_tokens, b2.write_tokens, b2.plain_tokens) == (101_000, 2_500, 0)
    assert b2.total_usd == pytest.approx(0.1515 + 0.046875 + OUT, abs=0.005)
    assert b2.reuse_gap_s == 60.0
    # without lookback (a profile that only matches exact breakpoints) turn 2 writes everything
    exact = dataclasses.replace(OPUS, lookback_segments=0)
    led = Ledger(exact, 300)
    led.bill(t1)
    assert led.bill(t2).write_tokens == 103_500
