"""The README's "Scenario keys" table against the scenario schema: every key the schema takes is a row, every
row a key it takes, and each default the table writes as a TOML value is the code's (helper-201: the README
named no default for most of the 58 keys, and no key at all for `description`, `cluster.block_tokens`,
`billing.ttls`, `report.collapse_layouts` and `report.collapse_points`)."""

from __future__ import annotations

import dataclasses
import math
import re
import tomllib
import typing
from pathlib import Path
from typing import Any

import pytest

from simulator.config import set_by_kvsim
from simulator.engine.caches import STRATEGIES
from simulator.engine.caches.prefix import dram_share
from simulator.engine.routers import ROUTERS
from simulator.scenario import Scenario, load_scenario

README = Path(__file__).resolve().parents[1] / "README.md"
NO_DEFAULT = "required"


def _rows() -> dict[str, str]:
    """key path -> the default cell, from the table under "### Scenario keys"."""
    text = README.read_text(encoding="utf-8").split("### Scenario keys", 1)[1].split("\n## ", 1)[0]
    rows: dict[str, str] = {}
    for line in text.splitlines():
        if not line.startswith("| `"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        names = re.findall(r"`([^`]+)`", cells[0])
        section = names[0].rsplit(".", 1)[0] if "." in names[0] else ""
        for n in names:  # `disaggregation.prefill_tp`, `prefill_pp`: the later ones in the first one's table
            rows[n if "." in n or not section else f"{section}.{n}"] = cells[1]
    return rows


def _schema() -> dict[str, Any]:
    """key path -> the code's default (`dataclasses.MISSING` where the key is required)."""
    keys: dict[str, Any] = {}
    hints = typing.get_type_hints(Scenario)
    for f in dataclasses.fields(Scenario):
        if f.name in set_by_kvsim(Scenario):
            continue
        section = next((t for t in typing.get_args(hints[f.name]) or (hints[f.name],) if dataclasses.is_dataclass(t)),
                       None)
        if section is None:
            keys[f.name] = f.default
            continue
        for g in dataclasses.fields(section):
            default = g.default if g.default_factory is dataclasses.MISSING else g.default_factory()
            keys[f"{f.name}.{g.name}"] = default
    for table, registry in (("cache", STRATEGIES), ("router", ROUTERS)):  # every plug-in's parameters
        del keys[f"{table}.params"]
        for name in registry.names():
            for g in dataclasses.fields(registry.make(name)):
                keys[f"{table}.params.{g.name}"] = g.default
    keys["cache.params.dram_fraction"] = dram_share(True, None)  # None in the field: the tier's default share
    return keys


def _plain(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


def test_every_schema_key_is_a_readme_row_and_every_row_a_key():
    rows, keys = _rows(), _schema()
    assert sorted(set(keys) - set(rows)) == []  # accepted, not documented
    assert sorted(set(rows) - set(keys)) == []  # documented, not accepted
    assert len(rows) == 58


@pytest.mark.parametrize("key", sorted(_schema()))
def test_the_readme_default_is_the_codes(key):
    cell, default = _rows()[key], _schema()[key]
    if default is dataclasses.MISSING:
        assert cell == NO_DEFAULT
        return
    literal = re.fullmatch(r"`(.+)`", cell)
    if literal is None:  # said in words: "the catalog's", "every TTL the profile sells", "[cluster]'s"
        assert default is None, f"{key}: the README says {cell!r}, the code's default is {default!r}"
        return
    written = tomllib.loads(f"v = {literal.group(1)}")["v"]
    if isinstance(default, float) and math.isinf(default):
        assert written == default
    else:
        assert written == _plain(default) and type(written) in (type(_plain(default)), int), (key, cell, default)


def test_a_file_writing_every_documented_default_runs_the_default_scenario(tmp_path):
    """Each default the README gives, written out, is accepted and is what a file without the key runs."""
    tables: dict[str, list[str]] = {}
    for key, cell in _rows().items():
        m = re.fullmatch(r"`(.+)`", cell)
        # params: a plug-in's own (prefix-affinity's, a DRAM tier's); [disaggregation], present, makes an xPyD fleet
        if m is None or ".params." in key or key.startswith("disaggregation."):
            continue
        table, _, name = key.rpartition(".")
        tables.setdefault(table, []).append(f"{name} = {m.group(1)}")
    text = 'name = "t"\n' + "\n".join(tables.pop(""))
    text += "".join(f"\n[{t}]\n" + "\n".join(lines) for t, lines in tables.items())
    full, bare = tmp_path / "full.toml", tmp_path / "bare.toml"
    full.write_text(text + "\n", encoding="utf-8")
    bare.write_text('name = "t"\n', encoding="utf-8")
    a, b = load_scenario(full), load_scenario(bare)
    assert dataclasses.replace(a, path="") == dataclasses.replace(b, path="")
    assert "queue_timeout_s = inf" in text and "collapse_points = [4096, 16384, 65536, 131072]" in text
