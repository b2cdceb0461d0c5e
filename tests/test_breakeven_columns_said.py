"""Every share and dollar column of summary.md's TTL break-even table is defined under it.

helper-193: ``share_gaps_below_ttl`` (read 1 beside a ``share_requests_with_read`` of 0.028, which it is no
share of) and ``storage_usd`` had no word in the report: a planner could not tell what they count."""

from __future__ import annotations

import re

import pandas as pd

from tests.test_study import run_report

TINY = """
name = "tiny"
[model]
name = "Llama-3.1-8B"
[cluster]
hardware = ["1xH100"]
tp = 1
[workload]
duration_s = 30
[workload.spec]
name = "chat-4k"
[report]
collapse = false
breakeven = true
"""


def test_each_share_and_usd_column_of_the_breakeven_table_is_defined(tmp_path):
    _, out = run_report(tmp_path, "tiny.toml", TINY)
    md = (out / "summary.md").read_text()
    table = pd.read_csv(out / "breakeven.csv")
    section = md.split("## Prompt-cache TTL break-even")[1].split("![breakeven]")[0]
    prose = "\n".join(line for line in section.splitlines() if not line.startswith("|"))
    defined = set(re.findall(r"`([a-z_]+)`", prose))
    wanted = {c for c in table.columns if c.startswith("share_") or c in ("storage_usd", "savings_usd")}
    assert "share_gaps_below_ttl" in wanted and "storage_usd" in wanted
    assert wanted <= defined, sorted(wanted - defined)
    assert ("`share_gaps_below_ttl` the share of reuses (requests whose longest cacheable prefix was sent before) "
            "that came within the TTL of its previous use") in prose
