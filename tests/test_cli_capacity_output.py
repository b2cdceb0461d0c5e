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


def test_a_headroom_never_seen_to_fail_is_shown_as_a_lower_bound(tmp_path):
    p = scenario(tmp_path, SHORT)  # one 8xH100 node meets the SLOs at every load the headroom search tries
    r = kvsim("capacity", p, "--out", tmp_path / "o")
    assert outcome(r) is None
    header, row = r.stdout.splitlines()[:2]
    assert "headroom_scale" in header and "headroom_capped" not in header and "≥ 7.5" in row
    # 30 s of chat-4k: too few requests for a p99 that stands (helper-131), said beside the table
    assert "note: the workload has 7 requests: a p99 over them lies between its 2 slowest" in r.stderr
    doc = json.loads(kvsim("capacity", p, "--json").stdout)[0]
    assert doc["headroom_capped"] is True and 7.4 < doc["headroom_scale"] < 7.6
    csv = (tmp_path / "o" / "capacity.csv").read_text().splitlines()
    assert csv[0].endswith("headroom_scale,headroom_capped,simulations,slo_ttft_p99_s,slo_tpot_p99_s,seed,seeds")
    assert csv[1].endswith(",True,6,2.0,0.1,0,1")  # and what the plan was searched for (helper-131)
    assert "capacity plan for SLOs TTFT p99 ≤ 2 s, TPOT p99 ≤ 100 ms (seed 0)" in r.stderr


def test_a_headroom_seen_to_fail_is_shown_as_found(tmp_path):
    p = scenario(tmp_path, SHORT.replace("duration_s = 30\n", "duration_s = 30\nrate_scale = 20.0\n"))
    doc = json.loads(kvsim("capacity", p, "--json").stdout)[0]
    assert doc["headroom_capped"] is False and 1 < doc["headroom_scale"] < 7.5
    r = kvsim("capacity", p)
    assert outcome(r) is None and "≥" not in r.stdout and "a p99 over them" not in r.stderr  # 20x: enough requests
