"""$/GPU-hour without copying the catalog: `Catalog.priced`, ``[cluster] usd_per_gpu_hour`` and
``--usd-per-gpu-hour`` on the commands that print money.

Hand-worked: an 8xH100 node at 2.50 USD/GPU-hour costs 8 × 2.50 = 20.00 USD/hour; at 1.00,
8.00. A cost per token is the fleet's dollars over its tokens, so the same run priced at 1.50
instead of the catalog's 2.99 costs 1.50 / 2.99 of it per token.
"""

import json
import re
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from hardware.catalog import load_catalog, parse_catalog, parse_prices, price_note
from simulator.cli import main
from simulator.errors import ConfigError
from simulator.scenario import load_scenario

H100_CATALOG_USD = 2.99  # hardware/gpus.toml, gpu.H100.usd_per_gpu_hour
SCENARIO = """\
name = "priced"
[model]
name = "Llama-3.1-8B"
[cluster]
hardware = ["8xH100"]
tp = 8
{price}
[workload]
duration_s = 10
[workload.spec]
name = "chat-4k"
[report]
capacity = false
collapse = false
breakeven = false
"""
RULE = "must be a finite number > 0 (USD per GPU-hour) for every GPU, or one per GPU"


def shipped_table(path: Path, header: str) -> str:
    """The keys of the shipped catalog's ``[header]`` table, as the file writes them (comments included): what a
    user copies into a catalog of their own."""
    match = re.search(rf"^\[{re.escape(header)}\]\n(.*?)\n\n", path.read_text(), re.S | re.M)
    assert match, header
    return match.group(1)


def scenario(tmp_path: Path, price: str = "") -> Path:
    p = tmp_path / "priced.toml"
    p.write_text(SCENARIO.format(price=price))
    return p


def kvsim(*args: object) -> tuple[int, str, str]:
    r = CliRunner().invoke(main, [str(a) for a in args])
    return r.exit_code, r.stdout, r.stderr


def test_catalog_priced_replaces_the_named_gpus_and_keeps_the_catalog_figure():
    shipped = load_catalog()
    assert shipped.gpu("H100").usd_per_gpu_hour == H100_CATALOG_USD
    cat = shipped.priced({"h100": 2.5}, "--usd-per-gpu-hour")
    h100, h200 = cat.node("8xH100"), cat.node("8xH200")
    assert (h100.gpu.usd_per_gpu_hour, h100.gpu.catalog_usd_per_gpu_hour, h100.usd_per_hour) == (2.5, 2.99, 20.0)
    assert h200.gpu == shipped.gpu("H200") and h200.gpu.catalog_usd_per_gpu_hour is None  # untouched
    assert cat.node("1xH100").usd_per_hour == 2.5  # every node of the GPU follows it
    again = cat.priced(1.0, "x")  # a second override still remembers the catalog's figure
    assert {g.usd_per_gpu_hour for g in again.gpus.values()} == {1.0}
    assert again.gpu("H100").catalog_usd_per_gpu_hour == 2.99
    assert shipped.priced(None, "x") is shipped
    assert price_note([h100, h200, cat.node("1xH100")]) == (
        f"GPU prices: H100 2.50 USD/GPU-hour (overridden; catalog 2.99), "
        f"H200 {shipped.gpu('H200').usd_per_gpu_hour:,.2f} USD/GPU-hour (catalog)")


@pytest.mark.parametrize(("prices", "says"), [
    (-1, f"k: {RULE} (got -1)"),
    (0.0, f"k: {RULE} (got 0.0)"),
    (float("inf"), f"k: {RULE} (got inf)"),
    (float("nan"), f"k: {RULE} (got nan)"),
    ("2", f"k: {RULE} (got '2')"),
    (True, f"k: {RULE} (got True)"),
    ({}, f"k: {RULE} (got an empty table)"),
    ({"H100": -2}, f"k.H100: {RULE} (got -2)"),
    ({"X100": 2}, "k: unknown GPU 'X100'; valid: H100, H200, B200"),
])
def test_catalog_priced_refuses_what_is_not_a_price(prices, says):
    with pytest.raises(ConfigError) as err:
        load_catalog().priced(prices, "k")
    assert str(err.value).startswith(says)


@pytest.mark.parametrize(("text", "value"), [("2.5", 2.5), (" 3 ", 3.0), ("H100=2.1,B200=4.5", {"H100": 2.1,
                                                                                             "B200": 4.5})])
def test_parse_prices(text, value):
    assert parse_prices(text, "--usd-per-gpu-hour") == value


@pytest.mark.parametrize("text", ["abc", "0", "-1", "nan", "inf", "H100=", "=2", "H100=2,H100=3", "H100=x"])
def test_parse_prices_refuses_in_one_line_naming_the_option(text):
    with pytest.raises(ConfigError) as err:
        parse_prices(text, "--usd-per-gpu-hour")
    assert str(err.value).startswith(f"--usd-per-gpu-hour: {RULE} like H100=2.1,H200=3.4")
    assert str(err.value).endswith(f"(got {text!r})")


def test_a_user_catalog_cannot_set_the_remembered_price(tmp_path):
    raw = {"gpu": {"X": {"catalog_usd_per_gpu_hour": 1.0}}}
    with pytest.raises(ConfigError, match="unknown key 'catalog_usd_per_gpu_hour'"):
        parse_catalog(raw, tmp_path / "mine.toml")


def test_scenario_key_prices_the_run_and_the_report_says_so(tmp_path):
    sc = scenario(tmp_path, "usd_per_gpu_hour = {H100 = 1.0}")
    assert load_scenario(sc).nodes()[0].usd_per_hour == 8.0
    code, _, err = kvsim("run", sc, "--out", tmp_path / "rep")
    assert code == 0
    note = "GPU prices: H100 1.00 USD/GPU-hour (overridden; catalog 2.99)"
    assert note in err.splitlines()
    assert f"{note}.\n" in (tmp_path / "rep" / "summary.md").read_text()
    headline = pd.read_csv(tmp_path / "rep" / "headline.csv")
    assert headline["$/h"].tolist() == [8.0]  # 8 GPUs × 1.00
    # without the key: the catalog's price, stated as such
    code, _, err = kvsim("run", scenario(tmp_path), "--out", tmp_path / "rep0", "--usd-per-gpu-hour", "2.5")
    assert code == 0 and "GPU prices: H100 2.50 USD/GPU-hour (overridden; catalog 2.99)" in err
    assert pd.read_csv(tmp_path / "rep0" / "headline.csv")["$/h"].tolist() == [20.0]
    assert "note:" not in err  # every GPU priced runs
    # a price for a GPU no fleet runs on was taken without a word (helper-115)
    code, _, err = kvsim("run", scenario(tmp_path), "--out", tmp_path / "rep1", "--usd-per-gpu-hour", "B200=2.1")
    assert code == 0 and ("note: B200 is priced (cluster.usd_per_gpu_hour or --usd-per-gpu-hour), but no fleet "
                          "here runs on it") in err.splitlines()
    assert "GPU prices: H100 2.99 USD/GPU-hour (catalog)" in err.splitlines()


@pytest.mark.parametrize(("value", "says"), [
    ("-3", f"cluster.usd_per_gpu_hour: {RULE} (got -3)"),
    ('"2.5"', f"cluster.usd_per_gpu_hour: {RULE} (got '2.5')"),
    ("{Z = 1}", "cluster.usd_per_gpu_hour: unknown GPU 'Z'; valid: H100"),
])
def test_scenario_key_is_validated_in_one_line(tmp_path, value, says):
    sc = scenario(tmp_path, f"usd_per_gpu_hour = {value}")
    code, out, err = kvsim("run", sc, "--out", tmp_path / "rep")
    assert code == 2 and out == "" and err.count("\n") == 1
    assert err.startswith(f"Error: {sc}: {says}")


@pytest.mark.parametrize("command", [["run"], ["capacity"], ["sweep", "--grid", "cluster.nodes=1"],
                                     ["compare", "--strategy", "native"]])
def test_every_money_command_refuses_a_bad_price_in_one_line(tmp_path, command):
    sc = scenario(tmp_path)
    code, out, err = kvsim(command[0], sc, *command[1:], "--usd-per-gpu-hour", "free")
    assert code == 2 and out == ""
    assert err == f"Error: --usd-per-gpu-hour: {RULE} like H100=2.1,H200=3.4 (got 'free')\n"
    code, _, err = kvsim(command[0], sc, *command[1:], "--usd-per-gpu-hour", "B201=3")
    assert code == 2 and err.startswith("Error: --usd-per-gpu-hour: unknown GPU 'B201'; valid: H100")


def test_compare_cost_per_token_scales_with_the_price(tmp_path):
    args = ["compare", "--model", "Llama-3.1-8B", "--tp", "1", "--workload", "chat-4k", "--duration-s", "20",
            "--strategy", "native", "--json"]
    code, out, err = kvsim(*args)
    assert code == 0 and "GPU prices: H100 2.99 USD/GPU-hour (catalog)" in err
    catalog = json.loads(out)[0]["usd_per_million_output_tokens"]
    code, out, err = kvsim(*args, "--usd-per-gpu-hour", "1.5")
    assert code == 0 and "GPU prices: H100 1.50 USD/GPU-hour (overridden; catalog 2.99)" in err
    assert json.loads(out)[0]["usd_per_million_output_tokens"] == pytest.approx(catalog * 1.5 / 2.99, rel=1e-9)


def test_capacity_and_sweep_price_their_fleets(tmp_path):
    sc = scenario(tmp_path)
    code, out, err = kvsim("capacity", sc, "--usd-per-gpu-hour", "H100=1", "--json")
    assert code == 0 and "GPU prices: H100 1.00 USD/GPU-hour (overridden; catalog 2.99)" in err
    [row] = json.loads(out)
    assert row["usd_per_hour"] == pytest.approx(8.0 * row["nodes"])
    code, out, err = kvsim("sweep", sc, "--grid", "cluster.nodes=1,2", "--workers", "1", "--usd-per-gpu-hour", "2",
                           "--json")
    assert code == 0 and "GPU prices: H100 2.00 USD/GPU-hour (overridden; catalog 2.99)" in err
    assert [r["usd_per_hour"] for r in json.loads(out)] == pytest.approx([16.0, 32.0])
    code, out, err = kvsim("sweep", sc, "--grid", "cluster.usd_per_gpu_hour=1,3", "--workers", "1", "--json")
    assert code == 0 and "(cluster.usd_per_gpu_hour swept)" in err
    assert [r["usd_per_hour"] for r in json.loads(out)] == pytest.approx([8.0, 24.0])


def test_a_user_catalog_that_redefines_a_gpu_carries_its_nodes_with_it(tmp_path):
    """helper-112: ``[gpu.H100]`` copied with a price of 1.00 and 94 GB was listed by ``kvsim hardware`` but every
    shipped H100 node, `fit` and `run` kept 2.99 and 80 GB. Now the nodes of a GPU a user file defines again
    are that GPU's; the key matches in any case."""
    from hardware.catalog import GPU_FILE, load_catalog

    h100 = shipped_table(GPU_FILE, "gpu.H100")
    mine = h100.replace("usd_per_gpu_hour = 2.99", "usd_per_gpu_hour = 1.00").replace("hbm_bytes = 80e9",
                                                                                     "hbm_bytes = 94e9")
    for header in ("[gpu.H100]", "[gpu.h100]"):
        (tmp_path / "c.toml").write_text(f"{header}\n{mine}\n")
        cat = load_catalog(tmp_path / "c.toml")
        assert list(cat.gpus).count("H100") == 1 and "h100" not in cat.gpus
        for key in ("8xH100", "1xH100"):
            node = cat.node(key)
            assert (node.gpu.usd_per_gpu_hour, node.gpu.hbm_bytes) == (1.0, 94e9), (header, key)
            assert node.usd_per_hour == pytest.approx(node.gpus * 1.0)
        assert cat.node("8xH200").gpu.usd_per_gpu_hour == load_catalog().node("8xH200").gpu.usd_per_gpu_hour
    assert load_catalog().node("8xH100").gpu.hbm_bytes == 80e9  # the shipped catalog untouched


def test_cost_says_a_gpu_of_the_users_is_priced_with_the_default_fit(tmp_path):
    """helper-112: a GPU without a cost fit of its own is priced with the default table (a copy of H100's fit),
    as the README says; `kvsim cost` said nothing of it."""
    from hardware.catalog import GPU_FILE, NODE_FILE

    gpu = shipped_table(GPU_FILE, "gpu.H100")
    node = shipped_table(NODE_FILE, "node.1xH100")
    (tmp_path / "c.toml").write_text(f"[gpu.MyGPU]\n{gpu}\n\n[node.1xMyGPU]\n{node.replace('H100', 'MyGPU')}\n")
    args = ["cost", "--catalog", str(tmp_path / "c.toml"), "--model", "Llama-3.1-8B", "--batch", "8", "--context",
            "4096"]
    r = CliRunner().invoke(main, [*args, "--hardware", "1xMyGPU"])
    assert r.exit_code == 0, r.output
    assert ("  note: MyGPU has no cost fit of its own: its datasheet figures, priced with the params file's default "
            "table (no fit for MyGPU): copy of the H100 fit, for GPUs without a fit of their own (an assumption)"
            ) in r.output.splitlines()
    r = CliRunner().invoke(main, [*args, "--hardware", "1xH100"])
    assert r.exit_code == 0 and "no cost fit" not in r.output


def test_a_run_report_with_a_redefined_gpu_uses_it_in_the_collapse_study_too(tmp_path):
    """helper-113: the report's collapse study read the shipped catalog while the run used the scenario's (an
    H100 of 200 GB simulated, 80 GB in the collapse table beside it)."""
    from hardware.catalog import GPU_FILE
    from tests.test_hostile_inputs import kvsim, outcome

    h100 = shipped_table(GPU_FILE, "gpu.H100")
    (tmp_path / "c.toml").write_text("[gpu.h100]\n" + h100.replace("hbm_bytes = 80e9", "hbm_bytes = 200e9") + "\n")
    (tmp_path / "s.toml").write_text(
        'name = "s"\n[model]\nname = "Llama-3.1-8B"\n[cluster]\nhardware = ["8xH100"]\ntp = 8\ncatalog = "c.toml"\n'
        '[workload]\nduration_s = 10\n[workload.spec]\nname = "chat-4k"\n'
        '[report]\ncollapse = true\ncollapse_points = [4096]\ncapacity = false\nbreakeven = false\n')
    assert outcome(kvsim("run", tmp_path / "s.toml", "--out", tmp_path / "o")) is None
    table = pd.read_csv(tmp_path / "o" / "collapse.csv")
    assert (table.kv_budget_bytes_per_gpu > 150e9).all()  # 200 GB × 0.9 − weights, not 80 GB's ~70


def test_a_user_node_in_another_case_replaces_the_shipped_one_and_a_name_twice_is_refused(tmp_path):
    """helper-113: ``[node.8xh100]`` was listed beside ``8xH100`` while every lookup of either found the shipped
    one; ``[gpu.Foo]`` and ``[gpu.foo]`` in one file hid one another."""
    from hardware.catalog import NODE_FILE, load_catalog

    node = shipped_table(NODE_FILE, "node.8xH100")
    mine = re.sub(r"(?m)^host_dram_bytes = .*$", "host_dram_bytes = 1e12", node)
    (tmp_path / "c.toml").write_text(f"[node.8xh100]\n{mine}\n")
    cat = load_catalog(tmp_path / "c.toml")
    assert [k for k in cat.nodes if k.lower() == "8xh100"] == ["8xH100"]
    assert cat.node("8xh100").host_dram_bytes == cat.node("8xH100").host_dram_bytes == 1e12
    (tmp_path / "c.toml").write_text(f"[node.8xh100]\n{mine}\n\n[node.8xH100]\n{mine}\n")
    with pytest.raises(ConfigError, match=r"c\.toml: node\.8xH100: given twice, as node\.8xh100 too \(names match in "
                                          r"any case\); keep one"):
        load_catalog(tmp_path / "c.toml")
