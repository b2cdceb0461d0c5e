"""Findings of the helper-195 audit of the TTL billing (customer bills, provider KV, charts, bad input),
each pinned by a test that fails without its fix."""

from __future__ import annotations

import pytest
from click.testing import CliRunner, Result

from simulator.billing import bill_requests, get_profile, kv_byte_seconds
from simulator.billing.provider import kv_peak_bytes
from simulator.cli import main
from tests.billing.conftest import req


def kvsim(*args: str) -> Result:
    return CliRunner().invoke(main, list(args))


@pytest.mark.parametrize(("second", "held_token_s", "peak_tokens"), [
    # the same 6,000 tokens, a breakpoint added at 4,000: one prefix held 0-310 s (the read at 10 s slides it)
    (([(1, 2000), (2, 2000), (3, 2000)], (2, 3)), 6000 * 310, 6000),
    # a request that stops at 4,000 tokens and goes on elsewhere: 4,000 held 0-310 s, the last 2,000 0-300 s
    (([(1, 2000), (2, 2000), (4, 2000)], (2,)), 4000 * 310 + 2000 * 300, 6000),
])
def test_a_shorter_prefix_cached_later_shares_the_kv_of_the_longer(second, held_token_s, peak_tokens):
    """A 6,000-token prefix cached at 0 s, then one of its first 4,000 tokens cached at 10 s: the provider
    holds those 4,000 tokens once. The shorter entry did not become the longer one's parent (it was written
    after it), and `kv_byte_seconds` counted them twice: 3,060,000 token-seconds and a peak of 10,000 tokens
    in the first case."""
    segments, breakpoints = second
    first = req(0, 0.0, [(1, 2000), (2, 2000), (3, 2000)], breakpoints=(3,))
    res = bill_requests([first, req(1, 10.0, segments, breakpoints=breakpoints)], get_profile("anthropic"), 300)
    assert kv_byte_seconds(res.residency, 1.0) == pytest.approx(held_token_s)
    assert kv_peak_bytes(res.residency, 1.0) == pytest.approx(peak_tokens)
    # the 6,000-token entry's parent is the 4,000-token one, beyond which it holds 2,000 tokens
    longest = res.residency[res.residency.tokens == 6000].iloc[0]
    shorter = res.residency[res.residency.tokens == 4000].iloc[0]
    assert (longest.parent_key_id, longest.held_tokens) == (shorter.key_id, 2000)


@pytest.mark.parametrize("savings", [(-22.7, -90.9), (25.7, 18.4), (-40.0, 60.0), (90.0, 80.0)])
def test_savings_labels_stay_inside_the_axes(savings):
    """Each bar's five-line label lies within the axes, clear of the x tick labels: a single request billed
    under 5m and 1h (−22.7% and −90.9% of the bill) drew the 1h label over 'TTL 1h', below the axes."""
    import pandas as pd

    from simulator.billing.charts import plot_savings_vs_ttl

    summary = pd.DataFrame({"profile": "anthropic/sonnet-4", "ttl": ["none", "5m", "1h"],
                            "savings_pct_of_bill": [0.0, *savings], "share_prompt_tokens_read": [0.0, 0.5, 0.5],
                            "share_requests_with_read": [0.0, 0.3, 0.3]})
    ax = plot_savings_vs_ttl(summary)
    ax.figure.canvas.draw()
    box = ax.get_window_extent()
    labels = [t for t in ax.texts if "of prompt tokens" in t.get_text()]
    assert len(labels) == 2
    for t in labels:
        b = t.get_window_extent()
        assert box.y0 <= b.y0 and b.y1 <= box.y1, (t.get_text(), b, box)
    import matplotlib.pyplot as plt

    plt.close(ax.figure)


@pytest.mark.parametrize(("spec", "words"), [
    ("expon:scale=0", "--gaps expon: parameters outside the distribution's domain"),
    ("uniform:loc=0,scale=0", "--gaps uniform: parameters outside the distribution's domain"),
    ("expon:loc=1e308,scale=1e308", "must be a distribution of gaps >= 0 seconds with a finite mean"),
])
def test_a_bad_gaps_distribution_is_one_line(spec, words):
    """scipy's RuntimeWarning (divide by zero, overflow) was printed first, two lines of its source, before the
    one-line error: here a warning raises, and only the error may come out."""
    import warnings

    from simulator.cli.breakeven import parse_gaps
    from simulator.errors import ConfigError

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ConfigError) as info:
            parse_gaps(spec)
    assert words in str(info.value) and "\n" not in str(info.value)
    r = kvsim("breakeven", "--gaps", spec)
    lines = r.output.strip().splitlines()
    assert r.exit_code == 2 and len(lines) == 1 and lines[0].startswith("Error: --gaps") and words in lines[0], lines


def test_gaps_all_zero_are_counted_not_said_as_one(tmp_path):
    """Three gaps of 0 s: the note said "1 of the gaps are 0 s" (the share 1, read as one gap)."""
    f = tmp_path / "zeros.txt"
    f.write_text("0\n0\n0\n")
    r = kvsim("breakeven", "--gaps", str(f), "--ttl", "5m")
    assert r.exit_code == 0, r.output
    assert ("breakeven_scale inf at 5m: caching pays however far the gaps stretch (3 of the 3 gaps are 0 s, a share "
            "of 1, at least breakeven_p_hit 0.2174)") in r.output
    assert "(1 of the gaps" not in r.output


RULE = "must be a finite number >= 0"


@pytest.mark.parametrize(("text", "error"), [
    ("[provider]\ndram_usd_per_gb_hour = inf\n", f"provider.dram_usd_per_gb_hour: {RULE} (got inf)"),
    ('[provider]\ndram_usd_per_gb_hour = "x"\n', f"provider.dram_usd_per_gb_hour: {RULE} (got 'x')"),
    ("[provider]\nssd_usd_per_gb_hour = -1\n", f"provider.ssd_usd_per_gb_hour: {RULE} (got -1)"),
    ("[provder]\ndram_usd_per_gb_hour = 1.0\n", "unknown key 'provder'; valid: provider"),
    ("provider = 5\n", "must hold a [provider] table"),
])
def test_a_bad_provider_file_is_refused_at_its_key(tmp_path, text, error):
    """`load_provider_costs(FILE)`: inf was taken (every HBM margin -inf), "x" failed in Python's words, -1 was
    refused without the file's name, and a misspelt [provder] table gave the shipped figures without a word."""
    from simulator.billing import load_provider_costs
    from simulator.errors import ConfigError

    f = tmp_path / "costs.toml"
    f.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_provider_costs(f)
    assert str(info.value).startswith(f"{f}: {error}") and "\n" not in str(info.value), str(info.value)


def test_a_provider_file_sets_only_its_figures(tmp_path):
    from simulator.billing import load_provider_costs

    f = tmp_path / "costs.toml"
    f.write_text("[provider]\nssd_usd_per_gb_hour = 1e-5\n")
    costs = load_provider_costs(f)
    assert (costs.ssd_usd_per_gb_hour, costs.dram_usd_per_gb_hour) == (1e-5, load_provider_costs().dram_usd_per_gb_hour)


def test_no_crossover_note_when_no_cache_bills_best(tmp_path):
    """One request: no TTL pays (each writes the prefix, none reads), so the bills' best is none; the note that
    a shorter TTL may bill cheaper than the 5m/1h crossover says was printed all the same."""
    from workloads import Workload, write_workload

    trace = tmp_path / "one.jsonl"
    write_workload(Workload.from_requests([req(0, 0.0, [(1, 10_000), (2, 500)])]), trace)
    r = kvsim("breakeven", "--workload", str(trace))
    assert r.exit_code == 0, r.output
    assert "best TTL for the customer: none" in r.output
    assert "crossover rate says" not in r.output
    # its reuse-gap percentiles, a row of NaN, are said to be so (no prefix sent twice)
    assert " NaN  NaN  NaN  NaN  NaN  NaN\nno reuse gaps: no prefix was sent twice, so the percentiles are NaN\n" \
        in r.output
