"""Every command that prints a table takes --json: one JSON document, snake_case keys, numbers as numbers."""

import json

from click.testing import CliRunner

from simulator.cli import main


def as_json(*args: str) -> object:
    r = CliRunner().invoke(main, [*args, "--json"])
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


def test_catalog_commands():
    models = as_json("models")
    l70 = next(m for m in models if m["key"] == "Llama-3-70B")
    assert l70["kv_bytes_per_token"] == 327_680 and l70["weight_precision"] == "bf16"
    hw = as_json("hardware")
    h100 = next(n for n in hw["nodes"] if n["key"] == "8xH100")
    assert h100["gpu"] == "H100" and h100["gpus"] == 8 and h100["nic_bytes_per_s"] == 50e9


def test_table_commands(tmp_path):
    rows = as_json("collapse", "--hardware", "8xH100", "--layout", "native", "--out", str(tmp_path / "c"))
    at_4k = next(r for r in rows if r["context_tokens"] == 4096)
    assert at_4k["max_streams"] == 324 and at_4k["plan"] == "TP8"
    rows = as_json("compare", "--model", "Llama-3.1-8B", "--tp", "1", "--workload", "chat-4k", "--duration-s", "5",
                   "--strategy", "native,fp8")
    assert [r["strategy"] for r in rows] == ["native", "fp8"] and rows[1]["memory_factor"] == 0.125
    doc = as_json("run", "trace-replay", "--out", str(tmp_path / "r"))
    assert doc["fleets"]["8xH100"]["completed"] == 656 and doc["capacity"] is None
    rows = as_json("sweep", "trace-replay", "--grid", "cluster.nodes=1,2", "--workers", "1")
    assert [r["cluster.nodes"] for r in rows] == [1, 2] and all(r["completed"] == 656 for r in rows)


def test_breakeven_json():
    doc = as_json("breakeven", "--rate", "0.5")
    five = next(r for r in doc["breakeven"] if r["ttl"] == "5m")
    # the 5-minute cache pays above one reuse per 20.4 minutes (write 1.25x, read 0.1x: p_hit 0.2174)
    assert round(five["breakeven_gap_min"], 1) == 20.4 and doc["profile"].startswith("anthropic")
    assert doc["costs"] and doc["best_ttl"] is None
