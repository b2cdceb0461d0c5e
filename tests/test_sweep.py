"""Sweeps: grid expansion and parsing, parallel runs equal serial ones, figures, the command."""

from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
import pytest
from click.testing import CliRunner

from simulator.charts import plot_sweep
from simulator.cli_sweep import parse_grid, parse_plots, sweep
from simulator.errors import ConfigError
from simulator.scenario import load_scenario
from simulator.sweep import METRICS, expand_grid, run_sweep

TINY = """\
name = "tiny"
seed = 0
[model]
name = "Llama-3.1-70B"
[cluster]
hardware = ["8xH100"]
nodes = 1
tp = 8
[workload]
duration_s = 60
rate_scale = 5.0
[workload.spec]
name = "chat-4k"
[report]
collapse = false
breakeven = false
"""
# rate_scale 40 (20 chat sessions/s) saturates one 8xH100 node (p99 TTFT ~15 s); two take it.
GRID = {"cluster.nodes": ["1", "2"], "workload.rate_scale": ["5", "40"]}


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("sweep") / "tiny.toml"
    path.write_text(TINY)
    return path


@pytest.fixture(scope="module")
def serial(tiny: Path) -> pd.DataFrame:
    return run_sweep(load_scenario(tiny), GRID, workers=1)


# --- expansion --------------------------------------------------------------------------------
def test_expand_grid_is_the_cross_product_in_grid_order_with_typed_values(tiny):
    sc = load_scenario(tiny)
    grid = {"cluster.nodes": ["1", "2"], "cache.layout": ["native", "fp8"], "workload.rate_scale": ["2"],
            "scheduler.max_num_seqs": ["64"], "cluster.hardware": ["8xH200"], "seed": ["3"]}
    points = expand_grid(sc, grid)
    assert [(v["cluster.nodes"], v["cache.layout"]) for v, _ in points] == [
        (1, "native"), (1, "fp8"), (2, "native"), (2, "fp8")]
    values, point = points[3]
    assert values == {"cluster.nodes": 2, "cache.layout": "fp8", "workload.rate_scale": 2.0,
                      "scheduler.max_num_seqs": 64, "cluster.hardware": ("8xH200",), "seed": 3}
    assert point.cluster.nodes == 2 and point.cluster.hardware == ("8xH200",) and point.seed == 3
    assert point.workload.rate_scale == 2.0 and point.scheduler.max_num_seqs == 64
    assert point.cache.layout == "fp8"
    # everything else is the base scenario's, including where it was read from
    assert point.model == sc.model and point.slo == sc.slo and point.cluster.tp == 8
    assert point.path == sc.path


def test_python_values_and_keys_inside_free_tables(tiny):
    sc = load_scenario(tiny)
    [(values, point)] = expand_grid(sc, {"cluster.nodes": [3], "workload.spec.rate": ["0.25"]})
    assert values == {"cluster.nodes": 3, "workload.spec.rate": 0.25}
    assert point.workload.spec == {"name": "chat-4k", "rate": 0.25}


@pytest.mark.parametrize(("key", "message"), [
    ("cluster.node", "--grid cluster.node: unknown key 'node' in cluster; valid: hardware, nodes, tp, "
                     "memory_utilization, block_tokens, catalog"),
    ("clusters", "--grid clusters: unknown key 'clusters' in the scenario; valid: name, description, seed, "
                 "model, cluster, cache, scheduler, router, workload, slo, billing, report"),
    ("cluster", "--grid cluster: is a table; sweep one of its keys: hardware, nodes"),
    ("cluster.nodes.x", "--grid cluster.nodes.x: cluster.nodes is a value, not a table"),
])
def test_unknown_key_path_names_the_key_and_the_valid_keys(tiny, key, message):
    with pytest.raises(ConfigError) as err:
        expand_grid(load_scenario(tiny), {key: ["1"]})
    assert message in str(err.value)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(("key", "value", "message"), [
    ("cluster.nodes", "abc", "tiny.toml.cluster.nodes: must be an integer (got 'abc')"),
    ("cluster.nodes", "0", "'nodes' must be >= 1 (got 0)"),
    ("workload.rate_scale", "fast", "workload.rate_scale: must be a number (got 'fast')"),
    ("cluster.hardware", "9xFoo", "unknown node '9xFoo'; valid: 8xH100"),
    ("cache.layout", "zip", "layout 'zip': unknown lever 'zip'"),
])
def test_bad_value_names_the_key_and_the_value(tiny, key, value, message):
    with pytest.raises(ConfigError) as err:
        expand_grid(load_scenario(tiny), {"seed": ["1"], key: [value]})
    text = str(err.value)
    assert text.startswith(f"sweep point seed='1', {key}={value!r}: ")
    assert message in text
    assert "\n" not in text


def test_empty_value_list_is_an_error(tiny):
    with pytest.raises(ConfigError, match=r"--grid cluster\.nodes: must be a non-empty list of values \(got \[\]\)"):
        expand_grid(load_scenario(tiny), {"cluster.nodes": []})


# --- running ----------------------------------------------------------------------------------
def test_sweep_frame_has_a_row_per_point_and_the_headline_metrics(serial):
    assert list(serial.columns) == ["point", "cluster.nodes", "workload.rate_scale", "hardware", *METRICS]
    assert serial["point"].tolist() == [0, 1, 2, 3]
    assert serial[["cluster.nodes", "workload.rate_scale"]].values.tolist() == [[1, 5.0], [1, 40.0], [2, 5.0],
                                                                               [2, 40.0]]
    assert (serial.hardware == "8xH100").all()
    assert serial.attrs["swept"] == ["cluster.nodes", "workload.rate_scale"]


def test_more_nodes_double_the_fleet_price_and_rescue_a_saturated_node(serial):
    by = serial.set_index(["cluster.nodes", "workload.rate_scale"])
    # 8xH100 lists at 23.92 $/h a node (catalog): one node 23.92, two 47.84
    assert by.loc[(1, 5.0), "usd_per_hour"] == pytest.approx(23.92)
    assert by.loc[(2, 5.0), "usd_per_hour"] == pytest.approx(2 * 23.92)
    # the same requests at every node count: the workload depends on the seed and rate only
    assert by.loc[(1, 40.0), "requests"] == by.loc[(2, 40.0), "requests"]
    for rate in (5.0, 40.0):  # more nodes never raise p99 TTFT
        assert by.loc[(2, rate), "ttft_p99_s"] <= by.loc[(1, rate), "ttft_p99_s"]
    # 40× saturates one node far past the 2 s SLO; two nodes meet it
    assert by.loc[(1, 40.0), "ttft_p99_s"] > 5 and not by.loc[(1, 40.0), "meets_slo"]
    assert by.loc[(2, 40.0), "ttft_p99_s"] < 2 and by.loc[(2, 40.0), "meets_slo"]


def test_worker_processes_give_the_serial_frame(tiny, serial):
    seen: list[float] = []
    parallel = run_sweep(load_scenario(tiny), GRID, workers=2, progress=seen.append)
    pd.testing.assert_frame_equal(parallel, serial)
    assert sorted(seen) == seen and seen[-1] == 1.0 and len(seen) == 4


def test_a_local_dask_cluster_gives_the_serial_frame(tiny, serial):
    distributed = pytest.importorskip("dask.distributed")
    with distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1,
                                  dashboard_address=None) as cluster:
        remote = run_sweep(load_scenario(tiny), GRID, dask_address=cluster.scheduler_address)
    pd.testing.assert_frame_equal(remote, serial)


# --- charts -----------------------------------------------------------------------------------
def test_plot_sweep_draws_a_line_per_split_with_labels_and_units(serial):
    ax = plot_sweep(serial, "workload.rate_scale", "ttft_p99_s")
    labels = [line.get_label() for line in ax.lines]
    assert labels == ["8xH100, cluster.nodes=1", "8xH100, cluster.nodes=2", "p99 SLO 2 s"]
    assert ax.get_xlabel() == "load (× the workload's base rate)"
    assert ax.get_ylabel().startswith("p99 time to first token (s)")
    assert ax.get_title() == "tiny: p99 time to first token vs load"
    assert ax.get_legend() is not None
    tpot = plot_sweep(serial, "cluster.nodes", "tpot_p99_s", hue="workload.rate_scale")
    assert "(ms)" in tpot.get_ylabel()
    assert tpot.lines[0].get_ydata()[0] == pytest.approx(serial.tpot_p99_s.iloc[0] * 1e3)
    plt.close("all")


# --- command ----------------------------------------------------------------------------------
def test_parse_grid_and_plots():
    grid = parse_grid(("cluster.nodes=1,2", "cache.layout = native, fp8"))
    assert grid == {"cluster.nodes": ["1", "2"], "cache.layout": ["native", "fp8"]}
    assert parse_plots((), grid) == [("ttft_p99_s", "cluster.nodes"),
                                     ("usd_per_million_output_tokens", "cluster.nodes")]
    assert parse_plots(("goodput_fraction:cache.layout",), grid) == [("goodput_fraction", "cache.layout")]
    for bad, match in [(("nodes",), "must be KEY=V1,V2"), (("a=1,,2",), "no empty value"),
                       (("a=1", "a=2"), "given twice"), ((), "at least one --grid")]:
        with pytest.raises(ConfigError, match=match):
            parse_grid(bad)
    with pytest.raises(ConfigError, match="unknown metric 'ttft'; valid: requests"):
        parse_plots(("ttft",), grid)
    with pytest.raises(ConfigError, match=r"'seed' is not a grid key; grid keys: cluster\.nodes, cache\.layout"):
        parse_plots(("ttft_p99_s:seed",), grid)


def test_sweep_command_writes_the_table_csv_and_charts(tiny, tmp_path):
    out = tmp_path / "out"
    res = CliRunner().invoke(sweep, [str(tiny), "--grid", "cluster.nodes=1,2", "--grid", "workload.rate_scale=5",
                                     "--workers", "1", "--out", str(out), "--plot", "goodput_fraction",
                                     "--plot", "usd_per_hour:cluster.nodes"])
    assert res.exit_code == 0, res.output
    assert "ttft_p99_s" in res.output and "8xH100" in res.output
    df = pd.read_csv(out / "sweep.csv")
    assert df["cluster.nodes"].tolist() == [1, 2]
    assert df.usd_per_hour.tolist() == pytest.approx([23.92, 47.84])
    for name in ("goodput_fraction", "usd_per_hour"):
        png = out / f"sweep-{name}-vs-cluster.nodes.png"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_sweep_command_reports_bad_input_in_one_line_with_exit_code_2(tiny):
    res = CliRunner().invoke(sweep, [str(tiny), "--grid", "cluster.nodes=1,two"])
    assert res.exit_code == 2
    assert res.output.strip() == ("Error: sweep point cluster.nodes='two': "
                                  f"{tiny}.cluster.nodes: must be an integer (got 'two')")
