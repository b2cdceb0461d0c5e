"""Prefix-hit share and reuse gaps, hand-worked."""

import math

import pytest

from simulator.errors import ConfigError
from workloads.request import Request
from workloads.summary import Quantiles, summarize


def req(i: int, t: float, segs: tuple[tuple[int, int], ...]) -> Request:
    return Request(id=i, arrival_s=t, prompt_tokens=sum(n for _, n in segs), output_tokens=1, segments=segs)


def test_prefix_hit_share_and_gaps_hand_worked() -> None:
    rs = [
        req(0, 0.0, ((1, 100), (2, 50))),  # all new
        req(1, 10.0, ((1, 100), (3, 50))),  # chain (1) seen: 100 hit; gap 10
        req(2, 25.0, ((1, 100), (2, 50), (4, 10))),  # (1),(1,2) seen: 150 hit; gaps 15, 25
        req(3, 30.0, ((2, 50), (1, 100))),  # chain (2) never led: 0 hit
    ]
    s = summarize(rs, name="t")
    # hit tokens 0 + 100 + 150 + 0 = 250 of 150 + 150 + 160 + 150 = 610
    assert s.prefix_hit_share == pytest.approx(250 / 610)
    assert s.n_reuses == 3
    assert s.reuse_gap_s.mean == pytest.approx((10 + 15 + 25) / 3)
    assert s.reuse_gap_s.p50 == pytest.approx(15.0)
    assert s.n_requests == 4 and s.duration_s == 30.0 and s.rate_per_s == pytest.approx(4 / 30)
    assert s.prompt_tokens.mean == pytest.approx(610 / 4)


def test_empty_and_frame() -> None:
    s = summarize([])
    assert s.n_requests == 0 and math.isnan(s.prefix_hit_share) and math.isnan(s.reuse_gap_s.p99)
    q = Quantiles.of(__import__("numpy").arange(1, 101, dtype=float))
    assert (q.mean, q.p50) == (50.5, 50.5)
    frame = summarize([req(0, 0.0, ((1, 5),))]).to_frame()
    assert frame.set_index("metric").loc["prompt_tokens.p99", "value"] == 5.0
    assert summarize([req(0, 0.0, ((1, 5),))]).to_dict()["prompt_tokens"]["mean"] == 5.0


def test_prefix_figures_stop_at_the_chain_limit() -> None:
    """With at most 4 chains followed: request 0 makes chains (1) and (1,2), request 1 makes (1,3),
    request 2 reuses (1) and (1,2) and makes (1,2,4): 4 chains, so request 3 is left out. The prefix
    figures are the first three requests' (hit 0 + 100 + 150 = 250 of 150 + 150 + 160 = 460 prompt
    tokens; gaps 10, 15, 25), the note says so, and lengths and rate still count all four."""
    rs = [
        req(0, 0.0, ((1, 100), (2, 50))),
        req(1, 10.0, ((1, 100), (3, 50))),
        req(2, 25.0, ((1, 100), (2, 50), (4, 10))),
        req(3, 30.0, ((1, 100), (2, 50))),  # would hit 150 and add gaps 5 and 5
    ]
    s = summarize(rs, name="t", max_chains=4)
    assert s.prefix_hit_share == pytest.approx(250 / 460)
    assert s.n_reuses == 3 and s.reuse_gap_s.mean == pytest.approx(50 / 3)
    assert s.prefix_note == "over the first 3 of 4 requests: the summary stops at 4 distinct prefix chains"
    assert s.n_requests == 4 and s.prompt_tokens.mean == pytest.approx(610 / 4) and s.rate_per_s == 4 / 30
    # one chain more and every request is followed: the figures of the whole workload, no note
    whole = summarize(rs, name="t", max_chains=5)
    assert whole.prefix_note == "" and whole.n_reuses == 5
    assert whole.prefix_hit_share == pytest.approx(400 / 610)
    # no prefix ids at all: unknown, whatever the limit
    unknown = summarize(rs, prefix_note="no prefix ids", max_chains=1)
    assert unknown.n_reuses is None and math.isnan(unknown.prefix_hit_share) and unknown.prefix_note == "no prefix ids"


def test_describe_and_report_say_what_the_prefix_figures_cover(tmp_path, monkeypatch) -> None:
    """A Mooncake trace of 40 requests, each a shared 2-block prefix and 2 blocks of its own (2 new chains a
    request after the first's 4), with the summary's limit at 20 chains: `kvsim workload describe` and
    `kvsim run`'s report give the prefix figures of the first 9 requests (4 + 8 × 2 = 20 chains) and say so."""
    import json

    from click.testing import CliRunner

    import workloads.summary
    from simulator.cli import main
    from tests.test_hostile_inputs import BASE

    monkeypatch.setattr(workloads.summary, "MAX_SUMMARY_CHAINS", 20)
    trace = tmp_path / "t.jsonl"
    trace.write_text("".join(json.dumps({"timestamp": 500 * i, "input_length": 2048, "output_length": 4,
                                         "hash_ids": [1, 2, 100 + 2 * i, 101 + 2 * i]}) + "\n" for i in range(40)))
    note = "over the first 9 of 40 requests: the summary stops at 20 distinct prefix chains"
    r = CliRunner().invoke(main, ["workload", "describe", str(trace)])
    assert r.exit_code == 0, r.output
    assert f"note: {note}" in r.output
    # 8 of the first 9 requests hit the shared 2 blocks (1,024 of their 2,048 tokens: 512-token blocks)
    share = r.output.split("prefix_hit_share")[1].split()[0]
    assert float(share) == pytest.approx(8 * 1024 / (9 * 2048))
    scenario = tmp_path / "s.toml"
    scenario.write_text(BASE.replace('[workload.spec]\nname = "chat-4k"\n', "").replace(
        "duration_s = 5", f'trace = "{trace}"'))
    r = CliRunner().invoke(main, ["run", str(scenario), "--out", str(tmp_path / "rep")])
    assert r.exit_code == 0, r.output
    md = (tmp_path / "rep" / "summary.md").read_text()
    assert f"44.4% of prompt tokens repeat an earlier prefix ({note})." in md


@pytest.mark.parametrize(("requests", "message"), [
    (None, "summarize: 'requests' must be an iterable of Request, e.g. a Workload or a list (got None)"),
    ("chat-4k", "summarize: 'requests' must be an iterable of Request, e.g. a Workload or a list (got 'chat-4k')"),
    ([req(0, 0.0, ((1, 5),)), 7], "summarize: 'requests' must be Requests, e.g. load_workload('chat-4k') (got 7)"),
])
def test_requests_that_are_not_requests_are_a_one_line_error(requests, message) -> None:
    """helper-188: None failed as "TypeError: 'NoneType' object is not iterable", a 7 as an AttributeError."""
    with pytest.raises(ConfigError) as exc:
        summarize(requests)
    assert str(exc.value) == message
