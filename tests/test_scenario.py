"""Scenario files: every shipped one loads; bad ones fail in one line naming file, key, value, rule."""

import dataclasses
from pathlib import Path

import pytest

from simulator.errors import ConfigError
from simulator.scenario import SCENARIO_DIR, load_scenario
from workloads.request import Request
from workloads.traces import write_workload
from workloads.workload import Workload

SHIPPED = sorted(p.stem for p in SCENARIO_DIR.glob("*.toml"))

BASE = """
name = "t"
[model]
name = "Llama-3.1-8B"
[cluster]
hardware = ["8xH100"]
tp = 1
[workload]
duration_s = 30
[workload.spec]
name = "chat-4k"
"""


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "s.toml"
    p.write_text(text)
    return p


def test_the_shipped_set_is_complete():
    assert set(SHIPPED) >= {"default", "chat-4k-h100", "code-repo-128k-b200", "ttl-breakeven",
                            "concurrency-collapse", "capacity-plan", "mla-vs-gqa", "trace-replay"}


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_scenarios_load_and_document_themselves(name):
    sc = load_scenario(name)  # by name, as `kvsim run NAME`
    assert sc.name == name and sc.description
    assert (SCENARIO_DIR / f"{name}.toml").read_text().startswith(f"# {name}:")


def test_defaults_and_resolution(tmp_path):
    sc = load_scenario(write(tmp_path, BASE))
    cfg = sc.engine_config()
    assert cfg.node.key == "8xH100" and cfg.tp == 1 and cfg.model.key == "Llama-3.1-8B"
    assert (sc.slo.ttft_p99_s, sc.slo.tpot_p99_s, sc.seed) == (2.0, 0.1, 0)
    assert (cfg.scheduler.admission, cfg.scheduler.reserve_output_tokens) == ("prompt", 0)  # vLLM's


def test_admission_policy_reaches_the_engine(tmp_path):
    sc = load_scenario(write(tmp_path, BASE.replace("[workload]", '[scheduler]\nadmission = "reserve"\n'
                                                    "reserve_output_tokens = 1024\n[workload]")))
    assert (sc.engine_config().scheduler.admission, sc.engine_config().scheduler.reserve_output_tokens) == \
        ("reserve", 1024)
    assert load_scenario("trtllm-offline-1000-1000").engine_config().scheduler.admission == "reserve"


@pytest.mark.parametrize(("edit", "msg"), [
    (("[cluster]", "[cluster]\nnode = 2"), "s.toml: cluster.node: unknown key; valid: hardware, nodes, tp"),
    (("tp = 1", "tp = 3"), "s.toml: cluster.tp must divide the 8 GPUs of 8xH100 or be a multiple of them (got 3)"),
    (("tp = 1", "tp = 8\npp = 2"),
     "s.toml: cluster.nodes must be a multiple of the 2 8xH100 nodes one TP8 PP2 replica spans (cluster.tp × "
     "cluster.pp; 8 by default) (got 1)"),
    (("tp = 1", "tp = 8\nep = 3"), "s.toml: cluster.ep: must be >= 1 and a divisor of tp=8 (got 3)"),
    (("tp = 1", "tp = 8\nep = 8"),
     "s.toml: cluster.ep: must be 1 for a dense model (expert parallelism needs MoE layers) (got 8)"),
    (("tp = 1", "tp = 8\ndp_attention = 'yes'"), "s.toml: cluster.dp_attention: must be"),
    (("tp = 1", "tp = 'one'"), "s.toml: cluster.tp: must be an integer (got 'one')"),
    (("tp = 1", "tp = 0"), "s.toml: cluster.tp: must be >= 1 (got 0)"),
    (('name = "Llama-3.1-8B"', 'name = "DeepSeek-V3"'),
     "DeepSeek-V3 does not fit TP1 on 8xH100: one GPU holds weights of 672.9 GB (fp8-block), "
     "more than its usable 72.0 GB (0.9 × 80 GB) by 600.9 GB"),
    (('name = "Llama-3.1-8B"', 'name = "Llama-9"'), "unknown model 'Llama-9'"),
    (('hardware = ["8xH100"]', 'hardware = ["8xA100"]'), "unknown node '8xA100'; valid: 8xH100"),
    (("duration_s = 30", "duration_s = -1"), "s.toml: workload.duration_s: must be > 0 (got -1.0)"),
    (('name = "t"', 'name = "t"\nsed = 1'), "s.toml: sed: unknown key; valid: name, description, seed"),
    (("[workload]", "[slo]\nttft_p99_s = 0\n[workload]"), "s.toml: slo.ttft_p99_s: must be > 0 (got 0.0)"),
    (("[workload]", '[billing]\nprofile = "nope"\n[workload]'), "unknown price profile 'nope'; valid: anthropic"),
    (("[workload]", '[billing]\nttls = ["10m"]\n[workload]'), "billing.ttls[0]: must be one of 5m, 1h "
     "(the TTLs anthropic/sonnet-4 sells) (got '10m')"),
    (("[workload]", '[scheduler]\nadmission = "greedy"\n[workload]'),
     "s.toml: scheduler.admission: must be one of prompt, reserve (got 'greedy')"),
    (("[workload]", "[scheduler]\nreserve_output_tokens = 100\n[workload]"),
     "s.toml: scheduler.reserve_output_tokens: must be 0 unless admission = \"reserve\" (got 100)"),
])
def test_bad_scenarios_fail_in_one_line(tmp_path, edit, msg):
    p = write(tmp_path, BASE.replace(*edit))
    with pytest.raises(ConfigError) as err:
        load_scenario(p)
    text = str(err.value)
    assert msg in text and str(p) in text and "\n" not in text


def test_missing_file_lists_shipped(tmp_path):
    with pytest.raises(ConfigError, match=r"scenario file not found.*capacity-plan"):
        load_scenario(tmp_path / "nope.toml")


def test_workload_errors_name_the_file(tmp_path):
    # the generator table is checked when the scenario is read, before anything runs
    with pytest.raises(ConfigError, match=r"s\.toml: workload\.spec\.name: must be one of"):
        load_scenario(write(tmp_path, BASE.replace('name = "chat-4k"', 'name = "chat-9k"')))


def test_context_rule(tmp_path):
    text = BASE.replace('name = "Llama-3.1-8B"', 'name = "Llama-3-70B"').replace("tp = 1", "tp = 8")
    text = text.replace('name = "chat-4k"', 'name = "code-repo-128k"').replace("duration_s = 30", "duration_s = 600")
    sc = load_scenario(write(tmp_path, text))
    with pytest.raises(ConfigError, match="must fit Llama-3-70B's context of 8,192 tokens"):
        sc.check_context(sc.load_workload())


DISAGG = BASE.replace("tp = 1", "tp = 1\nnodes = 3") + """
[disaggregation]
prefill_nodes = 1
decode_nodes = 2
"""


def test_disaggregation_section(tmp_path):
    sc = load_scenario(write(tmp_path, DISAGG.replace("decode_nodes = 2", "decode_nodes = 2\nprefill_tp = 2")))
    (agg_label, agg), (label, split) = sc.fleets("8xH100")
    assert (agg_label, agg.n_nodes, agg.prefill_pool) == ("8xH100", 3, None)
    assert label == "8xH100-1P2D" and split.n_nodes == 2 and split.tp == 1
    assert (split.prefill_pool.n_nodes, split.prefill_pool.tp, split.prefill_pool.node.key) == (1, 2, "8xH100")
    assert sc.prefill_plan.label == "TP2" and split.short_prompt_tokens == 0


@pytest.mark.parametrize(("edit", "msg"), [
    (("prefill_nodes = 1", "prefill_nodes = 0"),
     "s.toml: disaggregation.prefill_nodes: must be in 1..4,096 (kvsim's fleet limit) (got 0)"),
    (("prefill_nodes = 1", "prefill_nodes = 1\nprefill = 2"), "s.toml: disaggregation.prefill: unknown key; valid:"),
    (("decode_nodes = 2", "decode_nodes = 3"),
     "s.toml: cluster.nodes must equal disaggregation.prefill_nodes + decode_nodes = 4 when compare_aggregated is "
     "true (the fleets compared have the same nodes) (got 3)"),
    (("decode_nodes = 2", "decode_nodes = 2\nprefill_tp = 3"),
     "s.toml: disaggregation.prefill_tp × prefill_pp must divide the 8 GPUs of 8xH100 or be a multiple of them "
     "(got 3)"),
    (("decode_nodes = 2", "decode_nodes = 2\nprefill_tp = 8\nprefill_pp = 2"),
     "s.toml: disaggregation.prefill_nodes must be a multiple of the 2 8xH100 nodes one TP8 PP2 replica spans "
     "(disaggregation.prefill_tp × prefill_pp) (got 1)"),
    (("decode_nodes = 2", 'decode_nodes = 2\nprefill_hardware = "8xA100"'), "unknown node '8xA100'"),
    (("decode_nodes = 2", "decode_nodes = 2\nshort_prompt_tokens = -1"),
     "disaggregation.short_prompt_tokens: must be >= 0 (got -1)"),
    (("decode_nodes = 2", "decode_nodes = 2\ncompare_aggregated = 1"),
     "s.toml: disaggregation.compare_aggregated: must be true or false (got 1)"),
])
def test_bad_disaggregation_fails_in_one_line(tmp_path, edit, msg):
    p = write(tmp_path, DISAGG.replace(*edit))
    with pytest.raises(ConfigError) as err:
        load_scenario(p)
    text = str(err.value)
    assert msg in text and str(p) in text and "\n" not in text


def test_a_missing_trace_is_named_before_the_scenario_is_read(tmp_path, monkeypatch):
    """``load_scenario(..., trace=...)`` (``kvsim run --trace``) with no such file named the scenario's
    ``[workload] 'spec'`` and said nothing of the file missing."""
    monkeypatch.chdir(tmp_path)  # a short path: a long one is shown cut in the middle
    with pytest.raises(ConfigError) as exc:
        load_scenario("trace-replay", trace="nope.csv")
    assert str(exc.value) == "load_scenario: 'trace' must be an existing trace file (got 'nope.csv')"


AZURE_ROWS = """TIMESTAMP,ContextTokens,GeneratedTokens
2023-11-16 18:15:46.000000,4808,10
2023-11-16 18:15:50.000000,3180,8
2023-11-16 18:15:51.000000,110,27
2023-11-16 18:15:52.000000,7433,14
2023-11-16 18:16:56.000000,1000,20
"""
GENERATED = """name = "gen"
[model]
name = "Llama-3.1-8B"
[cluster]
hardware = ["1xH100"]
tp = 1
[workload]
duration_s = 60
rate_scale = 5.0
[workload.spec]
name = "chat-4k"
"""


def test_a_trace_replacing_a_generator_replays_at_its_own_rate_and_says_so(tmp_path):
    """helper-109: ``kvsim run gen.toml --trace t.csv`` replayed the trace 5× compressed, under the generator's
    ``rate_scale = 5`` (a multiple of the generator's own rate), without a word. It now drops it and says so; a
    trace scenario's own replay keys carry over to the trace that replaces it, and are said too."""
    (tmp_path / "t.csv").write_text(AZURE_ROWS)
    said: list[str] = []
    sc = load_scenario(write(tmp_path, GENERATED), trace=tmp_path / "t.csv", say=said.append)
    assert (sc.workload.rate_scale, sc.workload.duration_s) == (1.0, 60)
    assert said == ["--trace t.csv replaces s.toml's generated workload and its workload.rate_scale = 5.0 (a "
                    "multiple of the generator's rate) with it: the trace replays at its own rate"]
    w = sc.load_workload()
    assert w.cut_at_s is None  # before a pass
    assert [r.arrival_s for r in w] == [0.0, 4.0, 5.0, 6.0]  # the trace's own gaps; the row at 70 s is past 60
    assert w.cut_at_s == 60
    said.clear()
    one = write(tmp_path, GENERATED.replace("rate_scale = 5.0", "rate_scale = 1"))
    assert load_scenario(one, trace=tmp_path / "t.csv", say=said.append).workload.rate_scale == 1 and said == []
    traced = tmp_path / "traced.toml"
    traced.write_text(GENERATED.replace('[workload.spec]\nname = "chat-4k"\n', "")
                      .replace("duration_s = 60", 'trace = "other.csv"\nstart_s = 4').replace("5.0", "2.0"))
    (tmp_path / "other.csv").write_text(AZURE_ROWS)
    sc = load_scenario(traced, trace=tmp_path / "t.csv", say=said.append)
    assert said == ["--trace t.csv replays under traced.toml's workload keys rate_scale = 2.0, start_s = 4"]
    w = sc.load_workload()
    assert [r.arrival_s for r in w] == [0.0, 0.5, 1.0, 33.0]  # from 4 s on, twice as dense
    assert w.cut_at_s is None  # the whole trace


def test_kvsim_run_says_the_trace_cut_and_the_dropped_rate_scale(tmp_path):
    from tests.test_hostile_inputs import kvsim, outcome

    (tmp_path / "t.csv").write_text(AZURE_ROWS)
    scenario = write(tmp_path, GENERATED + "[report]\ncollapse = false\nbreakeven = false\n")
    r = kvsim("run", scenario, "--trace", tmp_path / "t.csv", "--out", tmp_path / "o")
    assert outcome(r) is None
    lines = r.stderr.splitlines()
    assert lines[0].startswith("note: --trace t.csv replaces s.toml's generated workload and its workload.rate_scale")
    cut = "the trace cut at 60 s of replay (workload.duration_s; its later rows not replayed)"
    assert f"warning: workload: {cut}" in lines
    assert f"Workload: 4 requests, {cut}, over 0.1 min" in (tmp_path / "o" / "summary.md").read_text()
    r = kvsim("capacity", scenario, "--trace", tmp_path / "t.csv")
    assert outcome(r) is None and r.stderr.splitlines().count(f"  workload: {cut}") == 1


@pytest.mark.parametrize("value", ['"fast"', "-3", "true"])
def test_a_generators_bad_rate_scale_is_refused_with_trace_too(tmp_path, value):
    """helper-111: the rate_scale --trace drops was dropped unchecked, so a file refused without --trace ran with
    it (``"fast"`` with a note, ``true`` without one)."""
    (tmp_path / "t.csv").write_text(AZURE_ROWS)
    path = write(tmp_path, GENERATED.replace("rate_scale = 5.0", f"rate_scale = {value}"))
    for trace in (None, tmp_path / "t.csv"):
        with pytest.raises(ConfigError, match=r"s\.toml: workload\.rate_scale: must be"):
            load_scenario(path, trace=trace)


def test_a_scenario_without_cluster_tp_says_what_its_default_does_to_each_node_kind(tmp_path):
    """helper-112: without ``cluster.tp`` a scenario runs TP8 on every kind (one replica over two 4xH100 nodes)
    where the commands without a scenario default to the node's GPUs; it said nothing, and the error for a
    1xH100 fleet of one node named a TP8 nobody wrote. Now `default_tp_notes` says it (of the plan with its pp,
    and of the kinds the command runs: helper-113), and the error names cluster.tp and its default."""
    from dataclasses import replace

    from simulator.cli.run import _with_hardware
    from simulator.scenario import default_tp_notes

    text = GENERATED.replace('hardware = ["1xH100"]\ntp = 1', 'hardware = ["4xH100", "8xH100"]\nnodes = 2')
    sc = load_scenario(write(tmp_path, text))
    assert sc.cluster.tp == 8 and default_tp_notes(sc) == [
        "s.toml: cluster.tp is not set, so 8 on every node kind: on 4xH100 (4 GPUs) a TP8 replica spans 2 nodes; set "
        "cluster.tp to choose"]
    assert default_tp_notes(load_scenario(write(tmp_path, text.replace("nodes = 2", "nodes = 2\ntp = 4")))) == []
    assert default_tp_notes(replace(sc, path="")) == []  # made in Python: no file to read
    piped = load_scenario(write(tmp_path, text.replace('"4xH100", "8xH100"]\nnodes = 2',
                                                       '"8xH100", "1xH100"]\nnodes = 16\npp = 2')))
    assert default_tp_notes(piped) == [
        "s.toml: cluster.tp is not set, so 8 on every node kind: on 8xH100 (8 GPUs) a TP8 PP2 replica spans 2 nodes; "
        "set cluster.tp to choose",
        "s.toml: cluster.tp is not set, so 8 on every node kind: on 1xH100 (1 GPU) a TP8 PP2 replica spans 16 nodes; "
        "set cluster.tp to choose"]
    only8 = load_scenario(write(tmp_path, text.replace('"4xH100", "8xH100"', '"8xH100"')))
    assert default_tp_notes(only8) == [] and len(default_tp_notes(_with_hardware(only8, "4xH100"))) == 1
    with pytest.raises(ConfigError, match=r"cluster\.nodes must be a multiple of the 8 1xH100 nodes one TP8 replica "
                                          r"spans \(cluster\.tp; 8 by default\) \(got 1\)"):
        load_scenario(write(tmp_path, GENERATED.replace("tp = 1\n", "")))


def test_a_scenario_skips_a_traces_malformed_rows_when_asked(tmp_path):
    """helper-115: the README said a replay skips malformed rows "with --skip-bad-rows", which only `kvsim
    workload describe` has; `kvsim run` stopped at the first with no way on. `workload.skip_bad_rows = true`
    skips and counts them (a generator refuses the key), and the stop says how to go on."""
    import json

    from click.testing import CliRunner

    from simulator.cli import main
    from workloads.traces._rows import SKIP_HINT

    (tmp_path / "t.csv").write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n2024-05-10 00:00:00.000,100,10\n"
                                    "2024-05-10 00:00:01.000,abc,10\n2024-05-10 00:00:02.000,100,10\n")
    body = ('name = "t"\n[model]\nname = "Llama-3.1-8B"\n[cluster]\nhardware = ["8xH100"]\ntp = 8\n'
            '[report]\ncollapse = false\nbreakeven = false\n[workload]\n')
    sc = tmp_path / "s.toml"
    sc.write_text(body + 'trace = "t.csv"\n')
    r = CliRunner().invoke(main, ["run", str(sc), "--out", str(tmp_path / "o")])
    assert r.exit_code == 2 and r.output.splitlines()[-1] == (
        f"Error: t.csv:3: 'ContextTokens' must be an integer >= 0 (got 'abc'); {SKIP_HINT}")
    sc.write_text(body + 'trace = "t.csv"\nskip_bad_rows = true\n')
    r = CliRunner().invoke(main, ["run", str(sc), "--out", str(tmp_path / "o"), "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["fleets"]["8xH100"]["requests"] == 2
    assert "warning: workload: 1 trace row skipped (malformed, with skip_bad_rows" in r.stderr
    r = CliRunner().invoke(main, ["workload", "describe", str(sc), "--json"])
    assert r.exit_code == 0 and json.loads(r.stdout)[0]["skipped_rows"] == 1  # describe reads the key too
    sc.write_text(body + 'skip_bad_rows = true\n[workload.spec]\nname = "chat-4k"\n')
    r = CliRunner().invoke(main, ["run", str(sc)])
    assert r.exit_code == 2 and r.output.splitlines()[-1] == (
        f"Error: {sc}: workload.skip_bad_rows: must be false for a generated workload (it skips a trace's "
        "malformed rows) (got True)")


def test_a_scenario_is_named_as_a_command_line_names_it(tmp_path):
    """A note that suggests a command (`planning.noisy_search_note`) named a shipped scenario by its path inside the
    installed package: a shipped one is its name, any other its file."""
    assert load_scenario("disaggregated").argument == "disaggregated"
    own = tmp_path / "mine.toml"
    own.write_text('name = "mine"\n')
    assert load_scenario(own).argument == str(own)


def test_billing_without_ttls_takes_the_ttls_its_profile_sells(tmp_path):
    """helper-147: a `[billing]` table without ``ttls`` took ``["5m", "1h"]`` whatever its profile, as
    `kvsim breakeven` does not (a Gemini report grew a 5m row no one asked for); an empty list is still refused."""
    from simulator.billing import get_profile

    for profile, sold in (("gemini", ("1h",)), ("openai", ("5m",)), ("anthropic", ("5m", "1h"))):
        sc = tmp_path / f"{profile}.toml"
        sc.write_text(f'name = "b"\n[billing]\nprofile = "{profile}"\n')
        scenario = load_scenario(sc)
        assert scenario.billing.chosen_ttls(get_profile(profile).ttl_names) == sold
    sc.write_text('name = "b"\n[billing]\nttls = []\n')
    with pytest.raises(ConfigError, match=r"billing\.ttls: must be a non-empty list of cache TTLs, e\.g\. \[\"5m\", "
                                          r"\"1h\"\] \(or no key: every TTL the profile sells\) \(got \[\]\)"):
        load_scenario(sc)


def test_billing_ttls_refuse_no_cache_before_the_run(tmp_path):
    """helper-178: under a profile whose TTL is settable, ``ttls = ["none"]`` (or ``"0s"``) loaded, and `kvsim run`
    simulated the whole scenario before its report failed in ``compare_ttls`` ("must name each TTL once (got
    'none' twice)"), naming no file or key: no cache is the study's baseline row already."""
    sc = tmp_path / "b.toml"
    for profile, ttl in (("openai", "none"), ("deepseek", "0s"), ("gemini", "0")):
        sc.write_text(f'name = "b"\n[billing]\nprofile = "{profile}"\nttls = ["5m", "{ttl}"]\n')
        with pytest.raises(ConfigError) as err:
            load_scenario(sc)
        assert str(err.value) == (f"{sc}: billing.ttls[1]: must be TTLs > 0 (no cache, 'none', is the study's "
                                  f"baseline already) (got '{ttl}')")
    sc.write_text('name = "b"\n[billing]\nprofile = "openai"\nttls = ["5m", "1h"]\n')
    assert load_scenario(sc).billing.ttls == ("5m", "1h")  # a settable TTL > 0 still loads


def test_a_scenario_says_what_its_charts_are_of():
    """helper-158: the capacity, fleets and run charts named the scenario alone, not the model, its weights, the
    workload or how long it ran (a 60 s run's plan read as the README's 600 s one)."""
    from simulator.scenario import load_scenario

    assert load_scenario("default").subject() == (
        "default: Llama-3.1-70B (bf16 weights), chat-4k + code-repo-128k, 600 s of arrivals")
    assert load_scenario("capacity-plan").subject() == (
        "capacity-plan: Llama-3.1-70B (bf16 weights), chat-4k, 600 s of arrivals at 20× its rate")
    assert load_scenario("trace-replay").subject() == (
        "trace-replay: Llama-3.1-70B (bf16 weights), chat-sample.csv, up to 600 s of its replay")
    # helper-164: offline arrivals are a count at t = 0, not "1 s of arrivals"; a replay from start_s says so
    assert load_scenario("trtllm-offline-1000-1000").subject() == (
        "trtllm-offline-1000-1000: Llama-3.1-8B (fp8 weights), synthetic, 3,000 requests at t = 0")
    sc = load_scenario("trace-replay")
    later = dataclasses.replace(sc, workload=dataclasses.replace(sc.workload, start_s=3600.0, time_scale=4.0))
    assert later.subject().endswith("chat-sample.csv, up to 600 s of replay from the trace's 3,600 s, replayed 4× as "
                                    "fast")
    off = load_scenario("trtllm-offline-1000-1000")  # a rate scale multiplies an offline count (helper-170)
    doubled = dataclasses.replace(off, workload=dataclasses.replace(off.workload, rate_scale=2.0))
    assert doubled.subject().endswith("synthetic, 6,000 requests at t = 0")


def test_a_replay_its_window_did_not_cut_is_said_by_how_far_it_reached(tmp_path, monkeypatch):
    """helper-188: the shipped 600 s chat sample replayed 4× as fast spans 150 s (its last arrival, 598.64 s into
    the trace, at 149.66 s), yet the latency chart said "up to 600 s of its replay": the window's bound, which cut
    nothing. A run's subject says the 150 s; a window that cut the trace keeps its bound (at 100 s of replay)."""
    import simulator.report
    from simulator.scenario import load_scenario
    from simulator.study import run_scenario

    sc = load_scenario("trace-replay")
    fast = dataclasses.replace(sc, workload=dataclasses.replace(sc.workload, time_scale=4.0))
    run = run_scenario(fast)
    assert run.workload.cut_at_s is None and round(run.workload.last_arrival_s, 2) == 149.66
    assert fast.subject().endswith("chat-sample.csv, up to 600 s of its replay, replayed 4× as fast")  # unrun
    assert run.subject() == ("trace-replay: Llama-3.1-70B (bf16 weights), chat-sample.csv, 150 s of its replay, "
                             "replayed 4× as fast")
    titles = []  # the report's latency and time-series charts say it too
    for name in ("latency_figure", "timeseries_figure"):
        real = getattr(simulator.report, name)
        monkeypatch.setattr(simulator.report, name, lambda *a, _real=real, **k: titles.append(a[-1]) or _real(*a, **k))
    simulator.report.write_report(run, tmp_path / "out")
    assert titles == [f"{run.subject()}: latency of the completed requests (seed 0)", run.subject()]
    cut = dataclasses.replace(sc, workload=dataclasses.replace(sc.workload, time_scale=4.0, duration_s=100.0))
    short = run_scenario(cut)
    assert short.workload.cut_at_s == 100.0 and short.workload.last_arrival_s < 100.0
    assert short.subject().endswith("chat-sample.csv, up to 100 s of its replay, replayed 4× as fast")
    # a replay that reached under a second is said in its figures, not rounded to "0 s" (helper-192)
    assert short.scenario.subject(replayed_s=0.3).endswith("chat-sample.csv, 0.3 s of its replay, replayed 4× as fast")
    later = dataclasses.replace(sc, workload=dataclasses.replace(sc.workload, start_s=300.0, time_scale=4.0))
    assert later.subject(replayed_s=74.6).endswith("chat-sample.csv, 74.6 s of replay from the trace's 300 s, "
                                                   "replayed 4× as fast")
    assert load_scenario("default").subject(replayed_s=5.0).endswith("600 s of arrivals")  # a generator's own


def test_the_capacity_chart_of_a_replay_says_how_far_it_reached(tmp_path, monkeypatch):
    """helper-189: after helper-188 the report's latency, time-series and fleet charts said a 4× replay of the 600 s
    chat sample spans 150 s, but its capacity chart still read "up to 600 s of its replay" (the scenario's bound,
    which cut nothing). It is titled by the run's subject too (a trace is the same requests at the plan's seed)."""
    import matplotlib.pyplot as plt
    import pandas as pd

    import simulator.charts
    import simulator.report
    from simulator.study import run_scenario

    sc = load_scenario("trace-replay")
    run = run_scenario(dataclasses.replace(sc, workload=dataclasses.replace(sc.workload, time_scale=4.0)))
    titles = []
    monkeypatch.setattr(simulator.charts, "capacity_figure", lambda plan, title: titles.append(title) or plt.figure())
    plan = pd.DataFrame([{"hardware": "8xH100", "nodes": 1}])  # (the chart is stubbed: its title is the figure)
    simulator.report.write_report(run, tmp_path / "out", plan)
    assert titles == ["trace-replay: Llama-3.1-70B (bf16 weights), chat-sample.csv, 150 s of its replay, replayed 4× "
                      "as fast"] == [run.subject()]
    assert (tmp_path / "out" / "capacity.png").is_file()


def test_the_capacity_commands_chart_of_a_replay_says_how_far_it_reached(tmp_path, monkeypatch):
    """helper-189 left it: `kvsim capacity --out`'s chart of a 4× replay of the 600 s chat sample still read "up to
    600 s of its replay" (the command had no run to ask); the plan's first draw says how far it reached
    (``attrs["reached_s"]``, `Workload.reached_s`: 149.66 s), and the chart is titled by it."""
    import shutil

    import matplotlib.pyplot as plt
    from click.testing import CliRunner

    import simulator.charts
    from simulator.cli import main

    shutil.copy(SCENARIO_DIR / "traces" / "chat-sample.csv", tmp_path)
    text = (SCENARIO_DIR / "trace-replay.toml").read_text().replace("traces/chat-sample.csv", "chat-sample.csv")
    (tmp_path / "tr4.toml").write_text(text.replace("duration_s = 600\n", "duration_s = 600\ntime_scale = 4\n"))
    monkeypatch.chdir(tmp_path)
    titles, reached = [], []

    def figure(plan, title):
        titles.append(title)
        reached.append(plan.attrs["reached_s"])
        return plt.figure()

    monkeypatch.setattr(simulator.charts, "capacity_figure", figure)
    done = CliRunner().invoke(main, ["capacity", "tr4.toml", "--out", "o"])
    assert done.exit_code == 0, done.output
    assert titles == ["trace-replay: Llama-3.1-70B (bf16 weights), chat-sample.csv, 150 s of its replay, replayed 4× "
                      "as fast"]
    assert reached == [pytest.approx(149.66, abs=0.005)]


def test_cluster_nodes_beside_an_xpyd_fleet_alone_is_said_to_size_another(tmp_path):
    """helper-159: cluster.nodes = 3 beside a 1P1D fleet that runs alone (compare_aggregated = false) said nothing,
    while kvsim run ran 2 nodes; it sizes the aggregated fleet compare and the capacity searches run (an earlier
    audit kept it for them: test_bad_input_audit4), so loading says so; nodes left out, or the xPyD fleet's, say
    nothing."""
    said: list[str] = []
    alone = DISAGG.replace("decode_nodes = 2", "decode_nodes = 1\ncompare_aggregated = false")
    assert load_scenario(write(tmp_path, alone), say=said.append).cluster.nodes == 3
    assert said == ["cluster.nodes = 3 sizes the aggregated fleet kvsim compare and the capacity searches run; with "
                    "compare_aggregated = false kvsim run runs the 1P1D fleet alone (2 nodes)"]
    for text in (alone.replace("nodes = 3\n", ""), DISAGG.replace("decode_nodes = 2",
                                                                 "decode_nodes = 2\ncompare_aggregated = false")):
        said.clear()
        load_scenario(write(tmp_path, text), say=said.append)
        assert said == []


def test_a_trace_key_naming_a_folder_says_so(tmp_path):
    """helper-162: workload.trace naming a folder said 'no such file' of a folder that is there."""
    (tmp_path / "dir.csv").mkdir()
    p = tmp_path / "s.toml"
    p.write_text('name = "t"\n[workload]\ntrace = "dir.csv"\n')
    with pytest.raises(ConfigError) as err:
        load_scenario(p).load_workload()
    from simulator.files import shown_path

    assert str(err.value).endswith(f"workload.trace: '{shown_path(tmp_path / 'dir.csv')}' is a folder, not a trace "
                                   "file (a path relative to the scenario's folder)")


def test_prefix_affinity_without_a_prefix_cache_is_said(tmp_path):
    """helper-169: router prefix-affinity beside cache.strategy = "none" ran as least-tokens, byte for byte, without a
    word; loading says so (helper-171: a refusal refused whole sweeps over cache.strategy, three points of four
    valid, so it is a note)."""
    said: list[str] = []
    p = write(tmp_path, BASE + '[cache]\nstrategy = "none"\n[router]\nname = "prefix-affinity"\n')
    load_scenario(p, say=said.append)
    assert said == ['router prefix-affinity beside cache.strategy = "none": no prefix is cached, so it routes as '
                    "least-tokens"]


def test_skip_bad_rows_leaves_out_a_trace_s_requests_over_the_context(tmp_path, monkeypatch):
    """helper-179: a trace with a few requests longer than the model's context (``../shared``'s Mooncake
    synthetic trace has 3 over Llama-3.1-70B's 131,072 tokens in its first 600 s, 10 in all) stopped every run
    with no way past them but editing the trace. The error now says how; with ``skip_bad_rows = true`` they are
    skipped rows, counted, and the kept requests numbered from 0."""
    monkeypatch.chdir(tmp_path)
    lengths = [(1000, 100), (131_000, 73), (131_000, 72), (2000, 50), (200_000, 10)]
    reqs = [Request(id=i, arrival_s=float(i), prompt_tokens=p, output_tokens=o, segments=((i, p),))
            for i, (p, o) in enumerate(lengths)]
    write_workload(Workload.from_requests(reqs), Path("t.jsonl"))
    text = (SCENARIO_DIR / "trace-replay.toml").read_text().replace(
        'trace = "traces/chat-sample.csv"', 'trace = "t.jsonl"')
    Path("s.toml").write_text(text)
    sc = load_scenario("s.toml")
    with pytest.raises(ConfigError) as err:
        sc.check_context(sc.load_workload())
    assert str(err.value) == (
        "s.toml: workload requests must fit Llama-3.1-70B's context of 131,072 tokens ([workload] skip_bad_rows = "
        "true skips them) (got 2 over it, the first request 1 of t.jsonl at 1.000 s: "
        "131,073 prompt + output tokens; the longest 200,010)")
    Path("s.toml").write_text(text.replace("duration_s = 600", "duration_s = 600\nskip_bad_rows = true"))
    sc = load_scenario("s.toml")
    wl = sc.load_workload()
    assert sc.check_context(wl) == 3 and wl.skipped_rows == 2
    assert [(r.id, r.prompt_tokens + r.output_tokens) for r in wl] == [(0, 1100), (1, 131_072), (2, 2050)]


def test_skip_bad_rows_that_leaves_no_request_is_a_one_line_error(tmp_path, monkeypatch):
    """helper-181: a trace whose every request is longer than the model's context, under ``skip_bad_rows = true``,
    loaded (the reader's check for an empty replay ran before `Workload.within`), simulated no request, and
    ``kvsim run``'s report stopped on a traceback (``ValueError: cannot convert float NaN to integer``)."""
    from click.testing import CliRunner

    from simulator.cli import main

    monkeypatch.chdir(tmp_path)
    reqs = [Request(id=i, arrival_s=float(i), prompt_tokens=200_000, output_tokens=5, segments=((i, 200_000),))
            for i in range(3)]
    write_workload(Workload.from_requests(reqs), Path("t.jsonl"))
    text = (SCENARIO_DIR / "trace-replay.toml").read_text().replace(
        'trace = "traces/chat-sample.csv"', 'trace = "t.jsonl"\nskip_bad_rows = true')
    Path("s.toml").write_text(text)
    said = ("s.toml: workload.skip_bad_rows: every request of t.jsonl in the replay window is longer than "
            "Llama-3.1-70B's context of 131,072 tokens, so none is left to replay (3 trace rows skipped); serve a "
            "model with a longer context or replay another window (start_s, duration_s)")
    with pytest.raises(ConfigError) as err:
        load_scenario("s.toml")
    assert str(err.value) == said
    r = CliRunner().invoke(main, ["run", "s.toml", "--out", "o"])
    assert r.exit_code == 2 and r.output.strip().splitlines()[-1] == f"Error: {said}"
    # one request that fits: it is replayed, the others counted
    reqs[1] = Request(id=1, arrival_s=1.0, prompt_tokens=1000, output_tokens=5, segments=((1, 1000),))
    write_workload(Workload.from_requests(reqs), Path("t.jsonl"))
    sc = load_scenario("s.toml")
    wl = sc.load_workload()
    assert [(r.id, r.prompt_tokens) for r in wl] == [(0, 1000)] and wl.skipped_rows == 2
    assert len(sc.load_workload(allow_empty=True).requests()) == 1


SHARED_TRACES = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "traces"


@pytest.mark.skipif(not (SHARED_TRACES / "mooncake-synthetic.jsonl").is_file(),
                    reason=f"shared traces absent ({SHARED_TRACES})")
def test_the_readme_s_mooncake_rows_over_the_context():
    """helper-181: the README called ``../shared``'s Mooncake trace "the shipped Mooncake sample" (kvsim ships no
    Mooncake trace) and said it "holds 3" rows over Llama-3.1-70B's 131,072 tokens: 3 in its first 600 s (what
    trace-replay's window replays), 10 in the whole trace."""
    from workloads.traces import read_trace

    trace = read_trace(SHARED_TRACES / "mooncake-synthetic.jsonl")
    over = [r.arrival_s for r in trace if r.prompt_tokens + r.output_tokens > 131_072]
    assert len(over) == 10 and sum(t < 600 for t in over) == 3
    readme = " ".join((SCENARIO_DIR.parent / "README.md").read_text().split())
    assert ("`../shared`'s Mooncake synthetic trace, not shipped with kvsim, holds 10 over Llama-3.1-70B's 131,072 "
            "tokens, 3 of them in its first 600 s") in readme


def test_a_cache_layout_that_changes_nothing_on_the_model_is_noted(tmp_path):
    """helper-189: ``[cache] layout = "no-sliding"`` on Llama-3.1-8B (no sliding-window layer) ran without a word where
    ``kvsim calc --layout`` and ``kvsim compare`` say it changes nothing; ``kvsim run`` says it too, as does the
    loader's `say`, and so for ``mla`` on DeepSeek-V3 (its own latent). A lever that does change the KV: no note."""
    from simulator.scenario import layout_notes
    from tests.test_hostile_inputs import edit, kvsim, scenario

    says = ("cache.layout = 'fp8+no-sliding': Llama-3.1-8B has no sliding-window layers (all 32 attend to the whole "
            "context), so no-sliding changes nothing: the KV is the same without it")
    p = scenario(tmp_path, edit('layout = "native"', 'layout = "fp8+no-sliding"'))
    told: list[str] = []
    load_scenario(p, say=told.append)
    assert told == [says]
    r = kvsim("run", p, "--out", tmp_path / "o")
    assert r.exit_code == 0 and f"note: {says}" in r.stderr.splitlines()
    ds = load_scenario(scenario(tmp_path, edit('name = "Llama-3.1-8B"', 'name = "DeepSeek-V3"'), name="ds.toml",
                                **{'layout = "native"': 'layout = "mla"', '["8xH100"]': '["8xH200"]',
                                   "tp = 1": "tp = 8"}))
    assert layout_notes(ds) == ["cache.layout = 'mla': DeepSeek-V3's own attention is MLA, so mla changes nothing: "
                                "the KV is the same without it"]
    for layout in ("native", "fp8", "gqa:4"):
        assert layout_notes(load_scenario(scenario(tmp_path, edit('layout = "native"', f'layout = "{layout}"'),
                                                   name=f"{layout[:3]}.toml"))) == []
    # helper-192: the note is of the scenario that runs, its overrides applied (a cache= override said nothing of
    # its layout, and a file's layout replaced by one that changes the KV was still noted)
    fp8 = load_scenario(p, say=None)
    told.clear()
    load_scenario(p, say=told.append, cache=dataclasses.replace(fp8.cache, layout="fp8"))
    assert told == []
    told.clear()
    plain = scenario(tmp_path, edit('layout = "native"', 'layout = "fp8"'), name="plain.toml")
    load_scenario(plain, say=told.append, cache=dataclasses.replace(fp8.cache, layout="fp8+no-sliding"))
    assert told == [says]


def test_the_readme_s_cache_table_is_a_scenario_s(tmp_path):
    """helper-197: the README named ``dram_fraction`` but never how a scenario turns a tier on (``[cache] params``):
    its example table now loads as written, with the parameters it shows."""
    import re

    from tests.test_hostile_inputs import BASE, scenario

    readme = (SCENARIO_DIR.parent / "README.md").read_text()
    (table,) = re.findall(r"```toml\n(\[cache\]\n.*?)```", readme, flags=re.S)
    text = BASE.replace('[cache]\nlayout = "native"\nstrategy = "prefix"\n', table)
    assert text != BASE
    sc = load_scenario(scenario(tmp_path, text))
    assert (sc.cache.layout, sc.cache.strategy) == ("fp8", "prefix")
    assert sc.cache.params == {"eviction": "lru", "dram": True, "nvme": True, "dram_fraction": 0.25}
