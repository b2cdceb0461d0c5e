"""`compare_strategies`, its spec parser and chart, and the `kvsim compare` command."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from simulator.cli_compare import compare
from simulator.compare import compare_figure, compare_strategies, parse_strategy_set
from simulator.engine import EngineConfig
from simulator.errors import ConfigError
from workloads import load_workload

BASE = EngineConfig(model="Llama-3.1-70B")


def test_strategy_sets_parse_into_configs() -> None:
    c = parse_strategy_set("prefix+dram+fp8", BASE)
    assert (c.cache, dict(c.cache_params), c.layout.label) == ("prefix", {"dram": True}, "fp8")
    c = parse_strategy_set("mla+streaming-llm:4096", BASE)
    assert (c.layout.label, c.retention, dict(c.retention_params)) == ("mla", "streaming-llm", {"window_tokens": 4096})
    assert dict(parse_strategy_set("h2o:0.1", BASE).retention_params) == {"budget_fraction": 0.1, "budget_tokens": 0}
    assert dict(parse_strategy_set("prefix+lfu", BASE).cache_params) == {"eviction": "lfu"}
    with pytest.raises(ConfigError, match="streaming-llm"):
        parse_strategy_set("fp9", BASE)


def test_levers_on_the_code_repo_workload() -> None:
    """A few simulated minutes of the 128k code-repo workload on 8×H100, at 3× its default rate."""
    reqs = list(load_workload("code-repo-128k", seed=0, duration_s=300, rate_scale=3))
    specs = ["native", "fp8", "mla", "cross-layer:0.5", "streaming-llm", "prefix", "prefix+dram"]
    df = compare_strategies(BASE, reqs, specs, seed=0).set_index("strategy")
    assert (df.completed == len(reqs)).all()
    assert df.kv_blocks_per_replica["fp8"] == pytest.approx(2 * df.kv_blocks_per_replica["native"], rel=1e-3)
    assert df.memory_factor["mla"] < df.memory_factor["fp8"] < df.memory_factor["native"]
    assert df.prefix_hit_ratio_tokens["native"] == 0 and df.prefix_hit_ratio_tokens["prefix"] > 0.5
    assert df.ttft_p99_s["prefix"] < df.ttft_p99_s["native"]
    debit = df.quality_debit_points
    assert debit["streaming-llm"] > debit["mla"] > 0 == debit["prefix"]
    fig = compare_figure(df.reset_index(), "test")
    assert len(fig.axes) == 6 and all(ax.get_title() for ax in fig.axes)


def test_cli_compare(tmp_path: Path) -> None:
    runner = CliRunner()
    res = runner.invoke(compare, ["--workload", "chat-4k", "--duration", "20", "--strategies", "native,prefix+fp8",
                                  "--out", str(tmp_path)])
    assert res.exit_code == 0, res.output
    assert "prefix+fp8" in res.output and (tmp_path / "compare.png").stat().st_size > 10_000
    bad = runner.invoke(compare, ["--workload", "chat-4k", "--duration", "5", "--strategies", "native,nope"])
    assert bad.exit_code == 2 and "nope" in bad.output


def test_compare_command_on_a_scenario_does_not_inherit_its_levers(tmp_path):
    from click.testing import CliRunner

    from simulator.cli import main

    sc = tmp_path / "s.toml"
    sc.write_text("""
name = "s"
[model]
name = "Llama-3.1-8B"
[cluster]
hardware = ["8xH100"]
tp = 8
[cache]
layout = "fp8"
strategy = "prefix"
[workload]
duration_s = 120
[workload.spec]
name = "chat-4k"
""")
    r = CliRunner().invoke(main, ["compare", str(sc), "--strategies", "native,prefix+fp8", "--out", str(tmp_path)])
    assert r.exit_code == 0, r.output
    import pandas as pd

    df = pd.read_csv(tmp_path / "compare.csv").set_index("strategy")
    assert df.prefix_hit_ratio_tokens["native"] == 0 and df.prefix_hit_ratio_tokens["prefix+fp8"] > 0.5
    assert df.memory_factor["prefix+fp8"] == df.memory_factor["native"] / 2
