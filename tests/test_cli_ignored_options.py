"""Options that apply only with another option, or that repeat one, are refused when they would
change nothing (a later audit: each was accepted and silently ignored). One ``Error:`` line naming
the option, its value and what it needs; exit 2 (the contract of `tests.test_hostile_inputs`)."""

from __future__ import annotations

import pytest

from tests.test_hostile_inputs import error, kvsim, outcome, scenario


# --- capacity: the options of --max-rate / --offline ----------------------------------------------
@pytest.mark.parametrize(("args", "says"), [
    (["--warmup-fraction", "0.2"], "--warmup-fraction 0.2: applies only with --max-rate or --offline"),
    (["--rel-tol", "0.1"], "--rel-tol 0.1: applies only with --max-rate, not to the fleet search"),
    (["--offline", "--rel-tol", "0.1"], "--rel-tol 0.1: applies only with --max-rate, not to --offline"),
    (["--warmup-fraction", "0.1"], "--warmup-fraction 0.1: applies only with"),  # the default, given: refused
])
def test_capacity_refuses_mode_options_without_their_mode(tmp_path, args, says):
    r = kvsim("capacity", scenario(tmp_path), *args)
    assert r.exit_code == 2 and says in error(r, args[-2])
    assert "capacity search" not in r.stderr  # refused before anything ran


def test_capacity_runs_both_modes_when_both_are_given(tmp_path):
    """``--max-rate --offline`` runs the search, then the offline runs (helper-124 read the first as the whole,
    and 840c2fb refused the pair; helper-126 showed both had always run): both answers come back."""
    import json

    r = kvsim("capacity", scenario(tmp_path), "--max-rate", "--offline", "--seeds", "1", "--rel-tol", "0.5", "--json")
    assert outcome(r) is None
    doc = json.loads(r.stdout)
    assert doc["max_rate"] and doc["offline"]


def test_capacity_mode_options_still_work_with_their_mode(tmp_path):
    r = kvsim("capacity", scenario(tmp_path), "--offline", "--seeds", "1", "--warmup-fraction", "0.2", "--json")
    assert outcome(r) is None and '"offline"' in r.stdout


# --- breakeven: the options of the --workload replay ----------------------------------------------
@pytest.mark.parametrize(("args", "says"), [
    (["--duration-s", "100"], "--duration-s 100 applies only with --workload"),
    (["--duration", "100"], "--duration-s 100 applies only with --workload"),  # the older spelling
    (["--seed", "5"], "--seed 5 applies only with --workload"),
    (["--seed", "0"], "--seed 0 applies only with --workload"),  # the default value, given
    (["--write-latency-s", "5"], "--write-latency-s 5 applies only with --workload"),
])
@pytest.mark.parametrize("mode", [["--rate", "1"], ["--gaps", "expon:scale=60"], []])
def test_breakeven_refuses_replay_options_without_workload(tmp_path, mode, args, says):
    r = kvsim("breakeven", *mode, *args, "--out", tmp_path / "o")
    assert r.exit_code == 2 and says in error(r, "--workload")
    assert "drop it or add --workload" in r.stderr and not (tmp_path / "o").exists()


def test_breakeven_replay_options_still_apply_with_workload():
    r = kvsim("breakeven", "--workload", "chat-4k", "--duration-s", "30", "--seed", "3", "--write-latency-s", "1")
    assert outcome(r) is None and "best TTL for the customer" in r.stdout


# --- collapse: --plan and --tp --------------------------------------------------------------------
def test_collapse_refuses_tp_beside_plan(tmp_path):
    r = kvsim("collapse", "--plan", "tp8", "--tp", "4", "--hardware", "8xH100", "--out", tmp_path / "o")
    line = error(r, "--tp 4")
    assert "--tp 4 and --plan 'tp8' both name the plan; give one of them" in line
    assert not (tmp_path / "o").exists()


def test_collapse_tp_alone_draws_that_plan(tmp_path):
    r = kvsim("collapse", "--tp", "4", "--hardware", "8xH100", "--layout", "native", "--out", tmp_path / "o")
    assert outcome(r) is None and " TP4 " in r.stdout


# --- an option and its older spelling, both given -------------------------------------------------
@pytest.mark.parametrize(("args", "says"), [
    (["workload", "describe", "chat-4k", "--duration", "60", "--duration-s", "30"],
     "--duration-s: given twice with different values, as --duration-s '30' and --duration '60' "
     "(--duration: its older spelling); give it once"),
    (["collapse", "--plan", "tp8", "--plans", "tp4", "--hardware", "8xH100"],
     "--plan: given twice with different values, as --plan 'tp8' and --plans 'tp4'"),
    (["fit", "--hardware", "8xH100", "--weight-dtype", "fp8", "--dtype", "bf16"],
     "--weight-dtype: given twice with different values"),
])
def test_two_spellings_with_different_values_are_refused(tmp_path, args, says):
    r = kvsim(*args, *(["--out", tmp_path / "o"] if args[0] == "collapse" else []))
    assert r.exit_code == 2 and says in error(r, says.split(":")[0])
    assert not (tmp_path / "o").exists()


def test_two_spellings_with_one_value_or_one_spelling_twice_are_taken():
    same = kvsim("workload", "describe", "chat-4k", "--duration", "20", "--duration-s", "20.0", "--json")
    one = kvsim("workload", "describe", "chat-4k", "--duration-s", "20", "--json")
    assert outcome(same) is None and same.stdout == one.stdout
    last = kvsim("workload", "describe", "chat-4k", "--duration-s", "60", "--duration-s", "20", "--json")
    assert outcome(last) is None and last.stdout == one.stdout  # one spelling twice: the last, as click does


# --- sweep: --plot draws into --out ---------------------------------------------------------------
def test_sweep_refuses_plot_without_out(tmp_path):
    r = kvsim("sweep", scenario(tmp_path), "--grid", "cluster.nodes=1", "--plot", "ttft_p99_s")
    line = error(r, "--plot ttft_p99_s")
    assert "--plot ttft_p99_s: needs --out DIR" in line and "sweeping" not in r.stderr


# --- calibrate: the options of each source ---------------------------------------------------------
@pytest.mark.parametrize(("args", "says"), [
    (["--gpu", "H100"], "kvsim calibrate FILE: --gpu H100 applies only with --from-aiconfigurator"),
    (["--framework", "vllm"], "kvsim calibrate FILE: --framework vllm applies only with --from-aiconfigurator"),
    (["--framework", "mixed"], "--framework mixed applies only with --from-aiconfigurator"),  # the default, given
])
def test_calibrate_refuses_aiconfigurator_options_with_a_file(tmp_path, args, says):
    from simulator.cost.calibrate import PUBLISHED_FILE

    r = kvsim("calibrate", PUBLISHED_FILE, *args, "--out", tmp_path / "p.toml")
    assert r.exit_code == 2 and says in error(r, args[0])
    assert "MAPE" not in r.stdout and not (tmp_path / "p.toml").exists()  # refused before the fit


def test_calibrate_refuses_free_with_aiconfigurator():
    r = kvsim("calibrate", "--from-aiconfigurator", "--free", "step_overhead_s")
    line = error(r, "--free")
    assert "--free step_overhead_s applies only to FILE" in line


# --- helper-150: options and values said at the option that gave them -------------------------------
def test_workload_describe_and_generate_refuse_a_seed_for_a_trace(tmp_path):
    """A trace replays as recorded: `--seed` on one changed nothing and was taken without a word (`--format` on a
    generator is refused); at its default value too, when given."""
    from simulator.scenario import SCENARIO_DIR

    trace = SCENARIO_DIR / "traces" / "chat-sample.csv"
    for args in (("describe", trace, "--seed", "5"), ("generate", trace, "--out", tmp_path / "o.csv", "--seed", "0")):
        r = kvsim("workload", *args)
        assert error(r, "--seed") == (f"Error: --seed {args[-1]}: applies to a generated workload, not to the trace "
                                      f"file {trace}, which replays as recorded (drop it)")
    assert outcome(kvsim("workload", "describe", "chat-4k", "--seed", "5", "--duration-s", "10")) is None


def test_trace_refuses_a_toml_workload_spec(tmp_path):
    """`--trace` replays a trace: a generator's TOML was generated and simulated without a note."""
    spec = tmp_path / "mix.toml"
    spec.write_text('[workload]\nname = "chat-4k"\n')
    r = kvsim("run", "trace-replay", "--trace", spec)
    assert "--trace: must be a trace file (CSV or JSONL" in error(r, "--trace") and "(got " in r.stderr


@pytest.mark.parametrize("command", [
    ("calc", "--model", "Llama-3-70B", "--context", "100", "--layout", "gqa:3"),
    ("fit", "--model", "Llama-3-70B", "--hardware", "8xH100", "--context", "100", "--layout", "gqa:3"),
    ("collapse", "--model", "Llama-3-70B", "--hardware", "8xH100", "--layout", "native,gqa:3"),
    ("cost", "--model", "Llama-3-70B", "--hardware", "8xH100", "--batch", "1", "--context", "100", "--layout",
     "gqa:3"),
])
def test_a_layout_the_model_cannot_take_is_said_at_layout(command):
    """`kvsim calc --layout gqa:3` said "layout 'gqa:3': ..." at no option; fit and collapse named a plan's rule
    (tp against 3 KV heads) first."""
    assert error(kvsim(*command), "--layout") == ("Error: --layout: layout 'gqa:3': 'kv_heads' must be a divisor of "
                                                  "Llama-3-70B's n_heads=64 (got 3)")


def test_a_strategy_set_the_model_cannot_take_is_said_at_its_set():
    r = kvsim("compare", "chat-4k-h100", "--strategy", "native,gqa:3", "--duration-s", "5")
    assert error(r, "--strategy") == ("Error: --strategy gqa:3: layout 'gqa:3': 'kv_heads' must be a divisor of "
                                      "Llama-3.1-70B's n_heads=64 (got 3)")
