"""A key in the wrong table says which table takes it, and every unknown key says its value (helper-201: ``seed``
written after ``[workload]``, where TOML puts it, read "workload.seed: unknown key; valid: spec, trace, ...", which
named neither the value nor where seed goes)."""

from __future__ import annotations

import pytest

from simulator.errors import ConfigError
from simulator.scenario import load_scenario


@pytest.mark.parametrize(("body", "line"), [
    ('name = "t"\n[workload]\nduration_s = 20\nseed = 3\n',
     "workload.seed: not a [workload] key; seed is a top-level key (write it before the first [table]) (got 3)"),
    ('name = "t"\nnodes = 3\n', "nodes: not a top-level key; nodes is a [cluster] key (got 3)"),
    ('name = "t"\n[workload]\nmax_num_seqs = 64\n',
     "workload.max_num_seqs: not a [workload] key; max_num_seqs is a [scheduler] key (got 64)"),
    ('name = "t"\n[slo]\nprofile = "openai"\n',
     "slo.profile: not a [slo] key; profile is a [billing] key (got 'openai')"),
    ('name = "t"\n[cluster]\nprefill_tp = 4\n',
     "cluster.prefill_tp: not a [cluster] key; prefill_tp is a [disaggregation] key (got 4)"),
    ('name = "t"\n[cluster]\nname = "x"\n', "cluster.name: not a [cluster] key; name is a top-level key (write it "
     "before the first [table]) or a [model] or [router] key (got 'x')"),
    ('name = "t"\n[workload]\nname = "chat-4k"\n',
     "workload.name: not a [workload] key; a generator's name and parameters go in [workload.spec] (got 'chat-4k')"),
    # misspelt: the table's keys, and now the value
    ('name = "t"\n[cluster]\nnode = 2\n', "cluster.node: unknown key; valid: hardware, nodes, tp, pp, dp_attention, "
     "ep, memory_utilization, block_tokens, catalog, usd_per_gpu_hour (got 2)"),
    ('name = "t"\n[scheduler]\nmax_num_seq = 64\n', "scheduler.max_num_seq: unknown key; valid: max_num_seqs, "),
    # a plug-in's parameter: its value too
    ('name = "t"\n[cache]\nparams = {evction = "lru"}\n', "cache.params: unknown parameter 'evction'; valid: "
     "eviction, dram, nvme, dram_fraction (got evction = 'lru')"),
    ('name = "t"\n[router]\nparams = {max_imbalance_tokens = 0}\n', "router.params: unknown parameter "
     "'max_imbalance_tokens'; router 'least-tokens' takes no parameters (got max_imbalance_tokens = 0)"),
])
def test_a_key_in_the_wrong_table_names_the_table_that_takes_it(tmp_path, body, line):
    p = tmp_path / "s.toml"
    p.write_text(body, encoding="utf-8")
    with pytest.raises(ConfigError) as err:
        load_scenario(p)
    assert str(err.value).startswith(f"{p}: {line}") and "\n" not in str(err.value)



@pytest.mark.parametrize(("spec", "line"), [
    ('name = "chat-4k"\nrat = 3', "workload.spec.rat: unknown key (valid: max_prompt_tokens, "),
    ('name = "mixture"\nfoo = 1\ncomponents = [{name = "chat-4k"}]',
     "workload.spec.foo: unknown key (valid: name, components) (got 1)"),
    ('name = "synthetic"\nbogus = "x"', "workload.spec.bogus: unknown key (valid: arrivals, "),
    ('name = "synthetic"\narrivals = {kind = "poisson", rate_per_s = 1, x = 2}',
     "workload.spec.arrivals.x: unknown key (valid: rate_per_s) (got 2)"),
])
def test_an_unknown_key_of_a_generator_says_its_value(tmp_path, spec, line):
    p = tmp_path / "s.toml"
    p.write_text(f'name = "t"\n[workload.spec]\n{spec}\n', encoding="utf-8")
    with pytest.raises(ConfigError) as err:
        load_scenario(p)
    text = str(err.value)
    assert text.startswith(f"{p}: {line}") and "\n" not in text
    assert text.endswith(("(got 3)", "(got 1)", "(got 'x')", "(got 2)"))
