"""The report's tables are Markdown tables (GitHub renders them), in the one float style."""

import math

import pandas as pd

from simulator.report import _table


def test_tables_are_markdown_with_one_number_style():
    df = pd.DataFrame({"hardware": ["8xH100", "8xB200"], "nodes": [2, 12], "tok/s": [7590.4, 0.2821],
                       "meets SLO": [True, False]})
    lines = _table(df).splitlines()
    assert lines[0] == "| hardware   |   nodes |   tok/s | meets SLO   |"
    assert lines[1] == "|:-----------|--------:|--------:|:------------|"  # numbers right, text left
    assert lines[2] == "| 8xH100     |       2 |   7,590 | True        |"
    assert lines[3] == "| 8xB200     |      12 |   0.282 | False       |"
    assert len(lines) == 4


def test_missing_cells_are_dashes_and_a_pipe_does_not_split_a_row():
    df = pd.DataFrame({"fleet": ["a|b", None], "ttft_p99_s": [math.nan, 999.6],
                       "nodes": pd.array([None, 3], dtype="Int64")})
    lines = _table(df).splitlines()
    assert lines[2] == r"| a\|b    |            – |       – |"
    assert lines[3] == "| –       |        1,000 |       3 |"  # 999.6 rounds to 1,000, not 1e+03
    assert all(line.count("|") - line.count(r"\|") == 4 for line in lines)


def test_the_report_names_the_router_and_its_parameters(tmp_path):
    """The preamble's ``Router:`` (helper-108: three router runs gave reports that read alike but for their
    figures): the name alone, or with the parameters the scenario set."""
    from dataclasses import replace

    from simulator.report import _router_line
    from simulator.scenario import RouterSection, load_scenario

    sc = load_scenario("default")
    assert _router_line(sc) == "least-tokens"
    sc = replace(sc, router=RouterSection(name="prefix-affinity", params={"max_imbalance_tokens": 4096}))
    assert _router_line(sc) == "prefix-affinity (max_imbalance_tokens = 4096)"


def test_the_report_says_a_router_parameter_left_at_its_default():
    """helper-203: prefix-affinity without ``params`` read ``Router: prefix-affinity``, its bound on the load above
    the least loaded replica (65,536 tokens) unsaid, and a scenario that set that same bound read otherwise."""
    from dataclasses import replace

    from simulator.report import _router_line
    from simulator.scenario import RouterSection, load_scenario

    sc = replace(load_scenario("default"), router=RouterSection(name="prefix-affinity"))
    assert _router_line(sc) == "prefix-affinity (max_imbalance_tokens = 65536, the default)"
    sc = replace(sc, router=RouterSection(name="prefix-affinity", params={"max_imbalance_tokens": 65536}))
    assert _router_line(sc) == "prefix-affinity (max_imbalance_tokens = 65536)"
    assert _router_line(replace(sc, router=RouterSection(name="round-robin"))) == "round-robin"


def test_the_reports_collapse_study_draws_a_layout_once_as_it_runs_on_the_model(monkeypatch):
    """helper-189: the default ``report.collapse_layouts`` (native, fp8, mla, cross-layer:0.5) drew native's line
    twice for DeepSeek-V3, whose own attention is MLA (``mla`` keeps its latent: the same bytes, as ``kvsim collapse``
    and ``kvsim compare`` already count it); Llama-3.1-8B's mla is a retrofit and keeps its line."""
    from dataclasses import replace

    import pandas as pd

    from simulator import report
    from simulator.scenario import load_scenario
    from simulator.study import ScenarioRun

    monkeypatch.setattr(report, "simulated_collapse", lambda *a, **k: pd.DataFrame({"context_tokens": [4096]}))
    for model, hardware, drawn in (("DeepSeek-V3", "8xH200", ["native", "fp8", "cross-layer:0.5"]),
                                   ("Llama-3.1-8B", "8xH100", ["native", "fp8", "mla", "cross-layer:0.5"])):
        sc = load_scenario("default")
        sc = replace(sc, model=replace(sc.model, name=model), cluster=replace(sc.cluster, hardware=(hardware,)))
        analytic, _ = report.collapse_study(ScenarioRun(scenario=sc, seed=0, workload=None, results={}))
        assert list(dict.fromkeys(analytic.layout)) == drawn, model
