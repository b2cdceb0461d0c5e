"""`kvsim breakeven` through click's CliRunner on the command object."""

from __future__ import annotations

import pandas as pd
import pytest
from click.testing import CliRunner

from simulator.cli.breakeven import breakeven, parse_gaps
from simulator.cli.common import KvsimClickError, config_errors
from simulator.errors import ConfigError


def run(*args: str):
    return CliRunner().invoke(breakeven, list(args))


def test_rate_table_and_files(tmp_path):
    r = run("--rate", "0.1", "--prefix-tokens", "20000", "--out", str(tmp_path))
    assert r.exit_code == 0, r.output
    assert "0.04902" in r.output and "0.01245" in r.output  # break-even reuses per minute, 5m and 1h
    costs = pd.read_csv(tmp_path / "costs.csv").set_index("ttl")
    # λT = 0.5 for 5 min: p = 1 - e^-0.5 = 0.3935, cost 0.1 p + 1.25 (1 - p) = 0.79751 x $0.06
    assert costs.loc["5m", "relative_cost"] == pytest.approx(0.79751, abs=1e-5)
    assert costs.loc["5m", "usd_per_request"] == pytest.approx(0.79751 * 0.06, abs=1e-6)
    assert (tmp_path / "breakeven.png").stat().st_size > 10_000
    be = pd.read_csv(tmp_path / "breakeven.csv")
    assert be["reads_to_break_even"].tolist() == [1, 2]
    # what it counts, said under the table (helper-131 read a 1 where writes cost no more as a defect)
    assert "reads_to_break_even: the fewest reads within a TTL of a write that make caching" in r.output


def test_gaps_distribution_and_file(tmp_path):
    r = run("--gaps", "expon:scale=120", "--ttl", "5m")
    assert r.exit_code == 0, r.output
    assert "0.9179" in r.output  # 1 - exp(-300/120)
    f = tmp_path / "gaps.csv"
    f.write_text("gap_s\n10\n100\n200\n400\n1000\n")
    r = run("--gaps", str(f), "--ttl", "5m", "--out", str(tmp_path / "o"))
    assert r.exit_code == 0, r.output
    assert pd.read_csv(tmp_path / "o" / "gaps.csv")["p_hit"].tolist() == [0.6]
    assert (tmp_path / "o" / "gaps.png").exists()


def test_a_gaps_distribution_draws_gaps_png(tmp_path, monkeypatch):
    # helper-158: --gaps lognorm:... wrote gaps.csv but no chart of it (breakeven.png is Poisson only);
    # gaps.png now draws its CDF with each TTL's p_hit from the gaps table
    from simulator.billing import charts

    drawn = {}
    real = charts.save_png

    def keep(ax, path, dpi=120):
        drawn[path.name] = ([t.get_text() for t in ax.get_legend().get_texts()], ax.get_title(loc="left"))
        return real(ax, path, dpi)

    monkeypatch.setattr(charts, "save_png", keep)
    out = tmp_path / "d"
    r = run("--gaps", "lognorm:s=1.2,scale=60", "--prefix-tokens", "20000", "--profile", "gemini", "--out", str(out))
    assert r.exit_code == 0, r.output
    assert "wrote breakeven.csv, crossovers.csv, gaps.csv, breakeven.png, gaps.png to" in r.output
    assert (out / "gaps.png").stat().st_size > 10_000
    legend, title = drawn["gaps.png"]
    assert legend == ["reuse gaps: lognorm:s=1.2,scale=60", "TTL 1h", "break-even p* (1h) = 0.827",
                      "p_hit (1h) = 0.9997, the gaps table's"]  # the gaps table's p_hit, 0.9997
    assert title.startswith("Reuse gaps, gemini/gemini-2.5-pro: a sliding TTL catches")
    # a file of gaps: its name and count, p_hit 0.6 (3 of 5 gaps under 5 min)
    f = tmp_path / "gaps.txt"
    f.write_text("10\n100\n200\n400\n1000\n")
    r = run("--gaps", str(f), "--ttl", "5m", "--out", str(tmp_path / "f"))
    assert r.exit_code == 0, r.output
    assert drawn["gaps.png"][0][0] == "reuse gaps: gaps.txt (5 gaps)"
    assert drawn["gaps.png"][0][-1] == "p_hit (5m) = 0.6, the gaps table's"


def test_gaps_with_a_prefix_cost_usd(tmp_path):
    # expon gaps of mean 120 s under 5m: p = 1 - e^-2.5 = 0.917915, cost 0.1 p + 1.25 (1 - p) = 0.194398;
    # 20,000 tokens x $3/MTok = $0.06 a request without a cache, so $0.0116639 with it
    r = run("--gaps", "expon:scale=120", "--ttl", "5m", "--prefix-tokens", "20000", "--out", str(tmp_path))
    assert r.exit_code == 0, r.output
    g = pd.read_csv(tmp_path / "gaps.csv")
    assert list(g.columns[:5]) == ["ttl", "p_hit", "relative_cost", "usd_per_request", "savings_pct"]
    assert g.loc[0, "relative_cost"] == pytest.approx(0.194398, abs=1e-6)
    assert g.loc[0, "usd_per_request"] == pytest.approx(0.0116639, abs=1e-7)
    # without --prefix-tokens there is no USD column; the break-even scale does not depend on the prefix
    r = run("--gaps", "expon:scale=120", "--ttl", "5m", "--out", str(tmp_path / "plain"))
    plain = pd.read_csv(tmp_path / "plain" / "gaps.csv")
    assert "usd_per_request" not in plain.columns
    assert plain.loc[0, "breakeven_scale"] == pytest.approx(g.loc[0, "breakeven_scale"], rel=1e-12)
    # 500 tokens < sonnet-4's 1,024 minimum: never cached, billed as plain input, 500 x $3/MTok = $0.0015
    r = run("--gaps", "expon:scale=120", "--ttl", "5m", "--prefix-tokens", "500", "--out", str(tmp_path / "short"))
    short = pd.read_csv(tmp_path / "short" / "gaps.csv")
    assert (short.loc[0, "p_hit"], short.loc[0, "relative_cost"], short.loc[0, "savings_pct"]) == (0.0, 1.0, 0.0)
    assert short.loc[0, "usd_per_request"] == pytest.approx(0.0015, rel=1e-12)
    assert short.loc[0, "breakeven_scale"] == pytest.approx(g.loc[0, "breakeven_scale"], rel=1e-12)


def test_gaps_rows_of_no_ttl_is_an_empty_table():
    # the library call with no TTL: no rows, the same columns (the CLI asks for at least one TTL)
    from scipy import stats

    from simulator.billing import gaps_rows, get_profile

    for tokens, usd in ((None, []), (20000, ["usd_per_request"])):
        table = gaps_rows(get_profile("anthropic"), [], stats.expon(scale=120), tokens)
        assert table.empty
        assert list(table.columns) == ["ttl", "p_hit", "relative_cost", *usd, "savings_pct", "breakeven_scale",
                                       "breakeven_rate_per_min"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--ttl", "10m"], "--ttl: must be one of 5m, 1h (the TTLs anthropic/sonnet-4 sells) (got '10m')"),
        # helper-131: a TTL named twice was one row, silently
        (["--ttl", "5m,300s"], "--ttl: must name each TTL once (got '5m' and '300s', both 300 s)"),
        # helper-147: '' ran every TTL sold, and a 0 among TTLs was dropped, both without a word
        (["--ttl", ""], "--ttl: must be like 5m, 1h, 90s or none (got '')"),
        (["--profile", "gemini", "--ttl", "0s,1h"],
         "--ttl: must be TTLs > 0 (no cache, 'none', is every table's baseline already) (got '0s')"),
        (["--ttl", "none,5m"], "--ttl: must be TTLs > 0 (no cache, 'none', is every table's baseline already) "
                               "(got 'none')"),
        (["--gaps", "nosuch:scale=1"], "'gaps' must be a file or a scipy.stats continuous distribution"),
        (["--gaps", "/no/such/gaps.txt"], "--gaps: no such file '/no/such/gaps.txt' (nor a scipy.stats distribution"),
        (["--gaps", "/"], "--gaps: '/' is a folder, not a file of gaps"),  # helper-132: it said "no such file"
        (["--rate", "0.1", "--gaps", "expon:scale=1"], "at most one of them"),
        (["--rate", "fast"], "--rate: must be a number or a comma list of numbers (got 'fast')"),
        # helper-195: 1e308 overflowed the chart's rate axis (10× the rate) and failed on a NaN after the tables
        (["--rate", "0.5,1e308"], "--rate: must be at most 1,000,000,000 reuses a minute each (a limit: README, "
                                  "Limits) (got '0.5,1e308')"),
        (["--prefix-tokens", "0"], "--prefix-tokens: must be >= 1 token (got 0)"),
        (["--profile", "acme"], "unknown price profile 'acme'"),
    ],
)
def test_config_errors_exit_2_with_one_line(args, message):
    r = run(*args)
    assert r.exit_code == 2
    assert message in r.output
    assert r.output.strip().count("\n") == 0 or "Error:" in r.output.splitlines()[-1]


def test_other_profile_without_write_premium_always_pays():
    r = run("--profile", "openai", "--tier", "gpt-4o", "--ttl", "5m,10m", "--rate", "0.01")
    assert r.exit_code == 0, r.output
    assert "breakeven_p_hit" in r.output


def test_config_errors_context_and_parse_gaps():
    with pytest.raises(KvsimClickError) as info, config_errors():
        raise ConfigError("x: 'y' must be z (got 1)")
    assert info.value.exit_code == 2
    assert parse_gaps("lognorm:s=1.2,scale=60").cdf(60.0) == pytest.approx(0.5)


def test_workload_option_replays_a_trace_file(tmp_path):
    """A Poisson stream (one reuse per 50 min) written in kvsim's own format, replayed by the CLI."""
    import numpy as np

    from tests.billing.conftest import poisson_stream
    from workloads import Workload, write_workload

    trace = tmp_path / "stream.jsonl"
    write_workload(Workload.from_requests(poisson_stream(np.random.default_rng(5), 1 / 3000, 300, 20_000)), trace)
    r = run("--workload", str(trace), "--out", str(tmp_path))
    assert r.exit_code == 0, r.output
    assert "best TTL for the customer: 1h" in r.output  # one reuse per 50 min: only 1 h pays
    assert "Poisson tables price" not in r.output  # the bills' best is the longest TTL: as the tables say
    summary = pd.read_csv(tmp_path / "workload.csv")
    assert summary["ttl"].tolist() == ["none", "5m", "1h"]
    assert summary["requests"].tolist() == [300, 300, 300]
    assert (tmp_path / "savings.png").exists() and (tmp_path / "gaps.png").exists()


def test_bills_that_prefer_a_shorter_ttl_than_the_tables_say_why():
    """helper-131: code-repo-128k reuses its repositories seconds apart, far above the 5m/1h crossover, yet bills
    cheaper under 5m: its requests write their new tokens at 2x under 1h. The note says so (`_writes_note`)."""
    r = run("--workload", "code-repo-128k", "--duration-s", "120")
    assert r.exit_code == 0 and "best TTL for the customer: 5m" in r.output, r.output
    assert "at each TTL's write price (x1.25 under 5m, x2 under 1h), for every new prefix's first write" in r.output


def test_workload_option_with_a_generator():
    r = run("--workload", "chat-4k", "--duration-s", "1800", "--ttl", "5m")
    assert r.exit_code == 0, r.output
    assert "best TTL for the customer: 5m" in r.output
    assert "Poisson tables price" not in r.output  # one TTL: no crossover to set the bills against
    # helper-132: Gemini writes at the input price under every TTL, and here caches nothing: no word of write prices
    r = run("--profile", "gemini", "--ttl", "5m,1h", "--workload", "chat-4k", "--duration-s", "600")
    assert r.exit_code == 0 and "Poisson tables price" not in r.output, r.output


@pytest.mark.parametrize(("args", "says"), [
    (["--profiles", "openai"], "Error: --catalog: openai: file not found"),
    (["--catalog", "missing.toml"], "Error: --catalog: missing.toml: file not found"),
    (["--profile", "antropic"], "Error: --profile: unknown price profile 'antropic'; valid: anthropic, openai"),
    (["--profile", "anthropic", "--tier", "sonet"], "Error: --tier: unknown tier 'sonet' of profile 'anthropic'"),
    (["--tier", "sonet"], "Error: --tier: unknown tier 'sonet' of profile 'anthropic'"),  # the default profile's
    (["--profile", "ANTHROPIC", "--tier", "sonet"], "Error: --tier: unknown tier 'sonet' of profile 'anthropic'"),
])
def test_breakeven_errors_name_the_option(tmp_path, monkeypatch, args, says):
    """helper-124: these read 'openai: file not found' and 'unknown price profile ...' without the option."""
    monkeypatch.chdir(tmp_path)
    r = CliRunner().invoke(breakeven, args)
    assert r.exit_code == 2 and says in r.output


def test_a_profile_named_in_capitals_in_a_catalog_can_be_chosen(tmp_path):
    """helper-126: a --catalog's [profile.Acme] could never be selected: the lookup lower-cased the name asked."""
    from simulator.billing.profiles import load_profiles

    f = tmp_path / "p.toml"
    f.write_text('[profile.Acme]\nsource = "mine"\nas_of = "2026-12"\n[profile.Acme.tier.t]\n'
                 'input_usd_per_mtok = 3.0\noutput_usd_per_mtok = 15.0\ncaching = "explicit"\nttl_names = ["5m"]\n'
                 'ttl_s = [300]\nwrite_multipliers = [1.25]\nttl_settable = false\nread_multiplier = 0.1\n'
                 'min_cacheable_tokens = 1024\ncache_increment_tokens = 1\nsliding = true\n'
                 'storage_usd_per_mtok_hour = 0.0\n')
    profiles = load_profiles(extra=f)
    assert profiles.get("Acme").key == profiles.get("acme").key == "Acme/t"
    r = CliRunner().invoke(breakeven, ["--catalog", str(f), "--profile", "Acme", "--tier", "x"])
    assert r.exit_code == 2 and "Error: --tier: unknown tier 'x' of profile 'Acme'" in r.output


def test_a_trace_with_no_prefix_ids_gets_no_best_ttl(tmp_path):
    """helper-128: an Azure trace (no prefix ids: each prompt its own segment) read 'best TTL for the customer:
    none' with no note, where its reuse is unknown, not zero (`kvsim workload describe` says so)."""
    import json

    trace = tmp_path / "az.csv"
    trace.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n" + "".join(
        f"2023-11-16 18:15:{i:02d}.0,{2000 + i},{50 + i}\n" for i in range(20)))
    r = CliRunner().invoke(breakeven, ["--workload", str(trace), "--profile", "openai"])
    assert r.exit_code == 0, r.output
    assert "note: the azure trace format carries no prefix ids" in r.output
    assert "best TTL for the customer: unknown (the trace's reuse is unknown: see the note above)" in r.output
    doc = json.loads(CliRunner().invoke(breakeven, ["--workload", str(trace), "--profile", "openai", "--json"]).stdout)
    assert doc["best_ttl"] is None and doc["reuse_unknown"] is True


def test_a_malformed_trace_row_fails_before_any_table_and_can_be_skipped(tmp_path):
    """helper-128: breakeven printed its tables, then failed on a malformed --workload row (exit 2 after output),
    and its hint named a --skip-bad-rows it did not have."""
    trace = tmp_path / "az.csv"
    rows = [f"2023-11-16 18:15:{i:02d}.0,{2000 + i},{50 + i}\n" for i in range(8)]
    rows[3] = "2023-11-16 18:15:03.0,abc,10\n"
    trace.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n" + "".join(rows))
    r = CliRunner().invoke(breakeven, ["--workload", str(trace)])
    assert r.exit_code == 2 and r.stdout == ""
    assert "az.csv:5: 'ContextTokens' must be an integer >= 0 (got 'abc')" in r.stderr
    assert "--skip-bad-rows on kvsim workload and kvsim breakeven" in r.stderr
    r = CliRunner().invoke(breakeven, ["--workload", str(trace), "--skip-bad-rows"])
    assert r.exit_code == 0 and "workload: 1 trace row skipped" in r.stderr and "Simulated bills per TTL" in r.stdout
    r = CliRunner().invoke(breakeven, ["--skip-bad-rows"])
    assert r.exit_code == 2 and "--skip-bad-rows applies only with --workload" in r.output


def test_an_uncacheable_prefix_chart_marks_no_break_even(tmp_path, monkeypatch):
    """helper-178: with --prefix-tokens 500 (below sonnet-4's 1,024-token minimum) every TTL's curve is the flat
    no-cache line at 500 x $3/MTok = $0.0015, yet the chart marked "5m pays above 0.049/min", "1h pays above
    0.0125/min" and "1h cheaper than 5m above 0.00913/min" on it, the boxes pushed over the title."""
    from simulator.billing import charts

    drawn = {}
    real = charts.save_png

    def keep(ax, path, dpi=120):
        drawn[path.name] = ([t.get_text() for t in ax.texts], ax.get_title(), [ln.get_ydata() for ln in ax.lines])
        return real(ax, path, dpi)

    monkeypatch.setattr(charts, "save_png", keep)
    r = run("--prefix-tokens", "500", "--out", str(tmp_path / "u"))
    assert r.exit_code == 0, r.output
    texts, title, lines = drawn["breakeven.png"]
    assert not any("pays above" in t or "cheaper than" in t for t in texts)
    assert title == ("Prompt-cache break-even, anthropic/sonnet-4, 500-token prefix\n(below the 1,024-token minimum: "
                     "not cacheable, plain input under every TTL)")
    assert all(y == pytest.approx(0.0015) for ys in lines for y in ys)  # every curve the plain price
    r = run("--prefix-tokens", "1024", "--out", str(tmp_path / "c"))  # at the minimum: cached, both marked
    texts, title, _ = drawn["breakeven.png"]
    assert r.exit_code == 0 and title == "Prompt-cache break-even, anthropic/sonnet-4, 1,024-token prefix"
    assert sum("pays above" in t for t in texts) == 2 and sum("1h cheaper than 5m" in t for t in texts) == 1


def test_the_readme_s_code_repo_bills_per_seed():
    """helper-178: the README said code-repo-128k "bills cheaper under 5m", which `kvsim breakeven --workload
    code-repo-128k` (seed 0) contradicts: its 1h bill is the lower. The README now gives both seeds' figures."""
    import json

    totals = {}
    for seed in ("0", "1"):
        r = run("--workload", "code-repo-128k", "--seed", seed, "--json")
        assert r.exit_code == 0, r.output
        doc = json.loads(r.stdout)
        totals[seed] = (doc["best_ttl"], {row["ttl"]: round(row["total_usd"], 2) for row in doc["workload"]})
    assert totals["0"] == ("1h", {"none": 265.88, "5m": 50.09, "1h": 48.85})
    assert totals["1"] == ("5m", {"none": 324.12, "5m": 55.38, "1h": 56.62})


def test_without_out_the_charts_and_matplotlib_are_not_imported(monkeypatch, tmp_path):
    """helper-204: `kvsim breakeven` imported `simulator.billing.charts` (matplotlib.pyplot) on every run, drawing
    nothing without --out: 1.84 against 1.30 CPU s for the README's `--rate 0.02,0.1,1 --prefix-tokens 20000`.
    Here the charts module cannot be imported: the tables print without it, and --out still needs it."""
    import sys

    import simulator.billing

    monkeypatch.setitem(sys.modules, "simulator.billing.charts", None)  # an import of it raises ImportError
    monkeypatch.delattr(simulator.billing, "charts", raising=False)  # (an earlier test's import left it there)
    r = run("--rate", "0.1", "--prefix-tokens", "20000")
    assert r.exit_code == 0 and "0.04902" in r.output, r.output
    r = run("--rate", "0.1", "--prefix-tokens", "20000", "--out", str(tmp_path))
    assert r.exit_code != 0 and isinstance(r.exception, ImportError)
