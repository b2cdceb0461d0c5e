"""Audit h5: the notebooks' text against what their cells compute now."""

import dataclasses

from simulator import load_scenario, run
from simulator.planning import meets_slo
from tests.test_notebooks import _generator  # notebooks/make_notebooks.py, loaded as a module


def test_capacity_notebook_says_fp8_kv_saves_a_node_on_the_default_mix():
    """capacity_planning.ipynb, section 4, shipped `default` at DURATION_S = 60 on 8xH100: the lever
    table reads as configured 2 nodes (KV util 0.14), fp8 KV 1 node (KV util 0.11, p99 TPOT 94 ms),
    cross-layer 0.5 2 nodes, prefix cache off 4. The text said the layout levers move the node count
    only where memory binds, and memory does not bind here (every KV util < 0.8), yet fp8 KV halves
    the fleet: it reads half the bytes per decode step. By hand here: one node, the same requests,
    fails the SLOs as configured and meets them with fp8 KV."""
    sc = load_scenario("default")
    sc = dataclasses.replace(sc, workload=dataclasses.replace(sc.workload, duration_s=60.0))
    workload = sc.load_workload()
    met = {}
    for layout in (sc.cache.layout, f"{sc.cache.layout}+fp8"):
        variant = dataclasses.replace(sc, cache=dataclasses.replace(sc.cache, layout=layout))
        result = run(variant.engine_config("8xH100", n_nodes=1), workload, variant.seed)
        met[layout] = meets_slo(result, sc.slo.ttft_p99_s, sc.slo.tpot_p99_s)
        assert result.summary["kv_utilization"] < 0.8  # memory does not bind
    assert met == {sc.cache.layout: False, f"{sc.cache.layout}+fp8": True}

    cells = dict(enumerate(_generator().CAPACITY_PLANNING))
    text = " ".join(" ".join(src.split()) for kind, src in cells.values() if kind == "md")
    code = "\n".join(src for kind, src in cells.values() if kind == "code")
    assert "on one node instead of two here" in text  # (at the 60 s warm-up; helper-199 quotes 600 s too)
    assert 'levers.nodes["fp8 KV"] < base.nodes' in code  # the notebook checks what its text says


def test_breakeven_counts_a_fixed_ttl_and_storage():
    """`kvsim breakeven --profile gemini --rate 0.1 --prefix-tokens 20000` printed p_hit 0.9975,
    relative_cost 0.2499, savings_pct 75.01 for the 1h TTL: the sliding-TTL formula 1 − exp(−λT),
    λT = 0.1/min × 60 min = 6, with no storage fee. Gemini's explicit cache runs its TTL from the
    write (profiles.toml: sliding = false) and bills storage at $4.50/MTok-hour. By hand, Poisson
    reuse under a fixed 1 h TTL: a write, then λT = 6 hits on average before it expires, so 7 requests
    a cycle and p_hit = 6/7 = 0.857; input (1 + 6 × 0.248) / 7 = 0.355 of plain; storage 20,000 tokens
    × 1 h × $4.50/MTok = $0.09 a cycle = 0.09 / 7 / (20,000 × $1.25/MTok = $0.025) = 0.514 of plain;
    relative cost 0.870, a 13% saving, not 75%. A note had said the tables assumed a sliding TTL; since
    helper-114 (its break-even read p* 0, "pays at any rate", where storage needs 4.79 reuses an hour) the
    Poisson tables count both, and the note says that only the --gaps table does not."""
    from click.testing import CliRunner

    from simulator.cli.breakeven import breakeven

    p_hit = 6 / 7
    relative = (1 + 6 * 0.248) / 7 + 20_000 * 1 * 4.50 / 1e6 / 7 / (20_000 * 1.25 / 1e6)
    assert round(p_hit, 3) == 0.857 and round(100 * (1 - relative)) == 13
    gemini = CliRunner().invoke(breakeven, ["--profile", "gemini", "--rate", "0.1", "--prefix-tokens", "20000"])
    assert gemini.exit_code == 0, gemini.output
    rows = [line.split() for line in gemini.output.splitlines() if line.split()[:2] == ["1h", "3600"]]
    row = next(r for r in rows if len(r) == 7)  # ttl ttl_s rate p_hit relative_cost usd_per_request savings_pct
    assert row[3:5] == [f"{p_hit:.4g}", f"{relative:.4g}"] and row[6] == f"{100 * (1 - relative):.4g}"
    # S_T = 4.5 × 1 h / 1.25 = 3.6; x* = (1 + 3.6 − 1) / (1 − 0.248) = 4.787: 0.0798 a minute, p* = x*/(1 + x*)
    x = 3.6 / 0.752
    row = next(r for r in rows if len(r) == 9)  # the break-even table's
    assert row[4:9] == ["3.6", f"{x / (1 + x):.4g}", f"{x / 60:.4g}", f"{60 / x:.4g}", "5"]
    assert ("note: under gemini/gemini-2.5-pro its TTL runs from the write, not refreshed by reads and it bills "
            "storage at $4.5/MTok-hour") in gemini.output
    assert "the --gaps table assumes a sliding TTL and no storage fee" in gemini.output
    anthropic = CliRunner().invoke(breakeven, ["--rate", "0.1"])
    assert anthropic.exit_code == 0 and "note:" not in anthropic.output
