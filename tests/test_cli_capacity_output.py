"""What ``kvsim capacity`` prints beside its tables (a later audit): a figure the JSON qualifies is
qualified in the text too."""

from __future__ import annotations

import json

from tests.test_hostile_inputs import kvsim, outcome, scenario

SHORT = """\
name = "short"
seed = 0
[model]
name = "Llama-3.1-70B"
[cluster]
hardware = ["8xH100"]
nodes = 1
tp = 8
[workload]
duration_s = 30
[workload.spec]
name = "chat-4k"
[slo]
ttft_p99_s = 2.0
tpot_p99_s = 0.1
"""


def test_offline_without_a_steady_window_warns_in_text_as_in_json(tmp_path):
    p = scenario(tmp_path, SHORT)
    doc = json.loads(kvsim("capacity", p, "--offline", "--seeds", "1", "--json").stdout)
    warning = doc["offline"][0]["steady_state_warning"]
    assert warning.startswith("no steady window")
    r = kvsim("capacity", p, "--offline", "--seeds", "1")
    assert outcome(r) is None
    assert f"warning: 8xH100 seed 0: {warning}" in r.stderr.splitlines()
    assert "warning" not in r.stdout  # the table stays on stdout, the warning beside it on stderr
