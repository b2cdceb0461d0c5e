"""Bad input about models, their shapes and what fits (audit u2: F7, F8, F10, F12, F13, F17, F18).

The contract of tests/test_hostile_inputs.py: exit 2 and one ``Error: ...`` line that names the
file or option, the key, the value and what is allowed; never a traceback, never a silent default.
"""

from __future__ import annotations

from pathlib import Path

from tests.test_hostile_inputs import error, kvsim, outcome

CAL_HEADER = "gpu,model,tp,phase,batch,new_tokens,context,measured_s,tokens_per_s,source\n"
CAL_ROW = "H100,Llama-3.1-8B,1,decode,1,1,1024,0.006,,x\n"


# --- F7: calibrate --out ---------------------------------------------------------------------------
def _measurements(tmp: Path) -> Path:
    f = tmp / "cal.csv"
    f.write_text(CAL_HEADER + CAL_ROW)
    return f


def test_calibrate_refuses_an_existing_out_without_force(tmp_path):
    cal, notes = _measurements(tmp_path), tmp_path / "notes.txt"
    notes.write_text("my notes\n")
    line = error(kvsim("calibrate", cal, "--out", notes), str(notes))
    assert "--out" in line and "exists" in line and "--force" in line
    assert notes.read_text() == "my notes\n"
    assert outcome(kvsim("calibrate", cal, "--out", notes, "--force")) is None
    assert "[gpu.H100]" in notes.read_text()


def test_calibrate_never_overwrites_its_measurements(tmp_path):
    cal = _measurements(tmp_path)
    for extra in ((), ("--force",)):
        line = error(kvsim("calibrate", cal, "--out", cal, *extra), str(cal))
        assert "--out" in line and "FILE" in line and "measurements" in line
        assert cal.read_text() == CAL_HEADER + CAL_ROW


def test_calibrate_writes_a_new_out_and_refits_params_in_place_with_force(tmp_path):
    cal = _measurements(tmp_path)
    out = tmp_path / "p.toml"
    assert outcome(kvsim("calibrate", cal, "--out", out)) is None and out.is_file()
    # make calibrate's shape: --out is the --params it starts from
    assert outcome(kvsim("calibrate", cal, "--params", out, "--out", out, "--force")) is None


# --- F8: cost prices only a step that can run ------------------------------------------------------
COST = ("cost", "--hardware", "1xH100", "--model", "Llama-3.1-8B")


def test_cost_refuses_a_batch_whose_kv_does_not_fit_and_says_by_how_much():
    # 64 × 131,072 tokens × 128 KiB = 1099.5 GB of KV beside 16.1 GB of weights, on 0.9 × 80 GB
    line = error(kvsim(*COST, "--batch", 64, "--context", 131072), "--batch")
    assert "--context 131072" in line and "does not fit TP1 on 1xH100" in line
    assert "KV of 1099.5 GB" in line and "usable 72.0 GB" in line and "by 1043.6 GB" in line
    assert "3 sequences fit" in line
    # fit's own count: 3 streams of 131,072 tokens fit, so cost prices 3 and refuses 4
    assert outcome(kvsim(*COST, "--batch", 3, "--context", 131072)) is None
    assert "by 12.8 GB" in error(kvsim(*COST, "--batch", 4, "--context", 131072), "--batch")


def test_cost_refuses_a_prompt_whose_kv_does_not_fit():
    # Llama-3.1-8B on one H100: 16.06 GB of weights leave 55.9 GB, short of a 500,000-token prompt's
    # 500,000 · 131,072 B = 65.5 GB by 9.6 GB
    line = error(kvsim("cost", "--hardware", "1xH100", "--model", "Llama-3.1-8B",
                       "--batch", 1, "--context", 10, "--prompt", 500_000), "--prompt 500000")
    assert "weights of 16.1 GB and KV of 65.5 GB" in line and "by 9.6 GB" in line
    # fp8 Llama-3.1-70B does not fit one H100 at all: 68.45 B parameters at 1 B and the embeddings and
    # LM head (2.10 B) at 2 B, 72.65 GB, against 72.0 GB usable
    line = error(kvsim("cost", "--hardware", "1xH100", "--model", "Llama-3.1-70B", "--weight-dtype", "fp8",
                       "--batch", 1, "--context", 10, "--prompt", 1000), "Llama-3.1-70B")
    assert "weights of 72.7 GB (fp8), more than its usable 72.0 GB (0.9 × 80 GB) by 0.7 GB" in line


def test_cost_says_when_a_context_is_past_the_models_window():
    """Priced, as `fit` answers it (the memory and the step do not depend on the window), and said to
    be beyond the model's max context; an absurd one is refused by the memory it would take."""
    for args, n in ((("--context", 131073), 131073), (("--context", 10, "--prompt", 200_000), 200_000)):
        r = kvsim(*COST, "--batch", 1, *args)
        assert outcome(r) is None
        assert f"note: {n:,} tokens is beyond Llama-3.1-8B's max context of 131,072" in r.output
    assert outcome(kvsim(*COST, "--batch", 1, "--context", 131072)) is None
    assert "beyond" not in kvsim(*COST, "--batch", 1, "--context", 131072).output
    line = error(kvsim(*COST, "--batch", 1, "--context", 99999999999999999999999), "--batch")
    assert "does not fit TP1 on 1xH100" in line


# --- F10: HF config.json types and shapes ----------------------------------------------------------
LLAMA_8B_SHAPE = {"num_hidden_layers": 32, "hidden_size": 4096, "num_attention_heads": 32,
                  "num_key_value_heads": 8, "vocab_size": 128256, "intermediate_size": 14336,
                  "max_position_embeddings": 131072}
MOE_SHAPE = {"num_hidden_layers": 4, "hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 8,
             "vocab_size": 1000, "intermediate_size": 100, "num_local_experts": 8, "num_experts_per_tok": 2,
             "max_position_embeddings": 4096}


def _config(tmp: Path, **fields: object) -> Path:
    import json

    f = tmp / "config.json"
    f.write_text(json.dumps(fields))
    return f


def test_a_string_boolean_is_refused_not_read_as_true(tmp_path):
    for key in ("tie_word_embeddings", "use_sliding_window"):
        f = _config(tmp_path, **LLAMA_8B_SHAPE, **{key: "false"})
        line = error(kvsim("fit", "--model-config", f, "--hardware", "1xH100", "--context", 1000), str(f))
        assert f"'{key}' must be true or false (got 'false')" in line
    f = _config(tmp_path, **LLAMA_8B_SHAPE, tie_word_embeddings=False)
    r = kvsim("fit", "--model-config", f, "--hardware", "1xH100", "--context", 1000)
    assert outcome(r) is None and "weights 16.06 GB" in r.output


def test_impossible_shapes_are_refused_naming_the_key(tmp_path):
    cases = [
        ({**MOE_SHAPE, "first_k_dense_replace": 10}, "'first_k_dense_replace' must be at most num_hidden_layers=4 "
                                                     "(got 10)"),
        ({**MOE_SHAPE, "first_k_dense_replace": 10, "n_shared_experts": 1}, "'first_k_dense_replace'"),
        ({**MOE_SHAPE, "mlp_only_layers": [0, 7]}, "'mlp_only_layers' must list distinct layer indices in [0, 4)"),
        ({**MOE_SHAPE, "num_experts_per_tok": 9}, "'num_experts_per_tok' must be at most the 8 routed experts"),
        ({**LLAMA_8B_SHAPE, "vocab_size": 0}, "'vocab_size' must be a positive integer (got 0)"),
        ({**LLAMA_8B_SHAPE, "intermediate_size": 0}, "'intermediate_size' must be a positive integer (got 0)"),
    ]
    for fields, says in cases:
        f = _config(tmp_path, **fields)
        assert says in error(kvsim("calc", "--model-config", f, "--context", 9), str(f))


# --- F12: an empty lever is an error, not native ---------------------------------------------------
def test_an_empty_layout_lever_is_refused():
    for text in ("", " ", "+", "native+", "+fp8", "fp8++int4"):
        line = error(kvsim("calc", "--context", 100, "--model", "Llama-3.1-8B", "--layout", text), "layout")
        assert f"layout {text!r}: has an empty lever" in line and "gqa:N" in line, line


def test_an_empty_strategy_lever_is_refused():
    for text in ("prefix+", "+fp8", "h2o:0.5++prefix"):
        r = kvsim("compare", "--model", "Llama-3.1-8B", "--tp", 1, "--workload", "chat-4k", "--duration-s", 5,
                  "--strategy", text)
        line = error(r, text)
        assert f"strategy set {text!r}: has an empty lever" in line and "retention (streaming-llm" in line


# --- F18: a scenario's layout errors name cache.layout and the layout ------------------------------
def test_scenario_layout_errors_name_the_key_and_the_layout(tmp_path):
    from tests.test_hostile_inputs import edit, scenario

    cases = [("gqa:3", "cache.layout: layout 'gqa:3': 'kv_heads' must be a divisor of Llama-3.1-8B's n_heads=32 "
                       "(got 3)"),
             ("fp9", "cache.layout: layout 'fp9': unknown lever 'fp9'"),
             ("fp8+int4", "cache.layout: layout 'fp8+int4': 'int4' conflicts with 'fp8'"),
             # helper-197: the same lever twice read "'fp8' conflicts with 'fp8'"
             ("fp8+fp8", "cache.layout: layout 'fp8+fp8': 'fp8' is given twice (each lever once)"),
             ("mla+mla", "cache.layout: layout 'mla+mla': 'mla' is given twice (each lever once)"),
             ("+", "cache.layout: layout '+': has an empty lever"),
             ("", "cache.layout: layout '': has an empty lever")]
    for layout, says in cases:
        p = scenario(tmp_path, edit('layout = "native"', f"layout = {layout!r}".replace("'", '"')))
        assert says in error(kvsim("run", p, "--out", tmp_path / "o"), str(p))
        assert not (tmp_path / "o").exists()


# --- F13: calc --tp meets fit's plan rules ---------------------------------------------------------
def test_calc_tp_refuses_the_plans_fit_refuses():
    for tp in (24, 1000):
        says = f"Error: --tp: plan TP{tp} for Llama-3.1-8B: must be a divisor of the 32 query heads (got {tp})"
        assert says == error(kvsim("calc", "--tp", tp, "--context", 100, "--model", "Llama-3.1-8B"), "--tp")
        assert says == error(kvsim("fit", "--tp", tp, "--context", 100, "--model", "Llama-3.1-8B"), "--tp")
    r = kvsim("calc", "--tp", 16, "--context", 100, "--model", "Llama-3.1-8B")
    assert outcome(r) is None and "one GPU of TP16 holds 0.125 of it" in r.output


# --- F17: catalog errors name the file, the entry and the key --------------------------------------
GPU_Z1 = """\
[gpu.Z1]
name = "X"
hbm_bytes = 80e9
hbm_bytes_per_s = 3.35e12
sm_count = 132
bf16_flops = 989.4e12
fp8_flops = 1978.9e12
fp4_flops = 0.0
nvlink_bytes_per_s = 450e9
nvswitch_reduce = true
pcie_bytes_per_s = 64e9
usd_per_gpu_hour = 2.99
source = "me"
"""
MODEL_M = """\
[model.M]
n_layers = 32
d_model = 4096
n_heads = 32
n_kv_heads = 8
head_dim = 128
attention = "gqa"
total_params = 8.03e9
active_params = 8.03e9
weight_dtype = "bf16"
max_context_tokens = 131072
vocab_size = 128256
source = "me"
"""


def test_gpu_and_node_catalog_errors_name_the_file_entry_and_key(tmp_path):
    from tests.test_hostile_inputs import edit, scenario

    node = "[node.4xZ1]\ngpu = \"Z1\"\ngpus = 4\nhost_dram_bytes = 1e12\nnvme_bytes = 1e12\nnvme_bytes_per_s = 1e9\n" \
           "nic_bytes_per_s = 50e9\nnic_latency_s = 5e-6\nnvlink_domain_gpus = 4\nsource = \"me\"\n"
    cases = [(("hbm_bytes = 80e9", "hbm_bytes = -1"), "gpu.Z1.hbm_bytes: must be a finite number > 0 (got -1)"),
             (("sm_count = 132", "sm_count = 132.5"), "gpu.Z1.sm_count: must be an integer (got 132.5)"),
             (("usd_per_gpu_hour = 2.99", "usd_per_gpu_hour = nan"),
              "gpu.Z1.usd_per_gpu_hour: must be a number (got nan)"),
             (("gpus = 4", "gpus = 0"), "node.4xZ1.gpus: must be >= 1 (got 0)"),
             (("nvlink_domain_gpus = 4", "nvlink_domain_gpus = 3"), "node.4xZ1.nvlink_domain_gpus: must be")]
    for (old, new), says in cases:
        cat = tmp_path / "cat.toml"
        text = GPU_Z1 + node
        assert old in text
        cat.write_text(text.replace(old, new))
        line = error(kvsim("hardware", "--catalog", cat), str(cat))
        assert f"{cat}: {says}" in line and "Spec(" not in line, line
    cat.write_text(GPU_Z1.replace("hbm_bytes = 80e9", "hbm_bytes = -1"))
    p = scenario(tmp_path, edit('hardware = ["8xH100"]', 'hardware = ["8xH100"]\ncatalog = "cat.toml"'))
    line = error(kvsim("run", p, "--out", tmp_path / "o"), str(p))
    assert "cat.toml: gpu.Z1.hbm_bytes: must be a finite number > 0 (got -1)" in line


def test_model_catalog_errors_name_the_file_entry_and_key(tmp_path):
    cat = tmp_path / "models.toml"
    for old, new, says in [('weight_dtype = "bf16"', 'weight_dtype = "int3"',
                            "model.M.weight_dtype: must be one of bf16, fp16, fp8, fp4, mxfp4, w4a16 (got 'int3')"),
                           ("active_params = 8.03e9", "active_params = 9e9",
                            "model.M.active_params: must be in (0, total_params=8.03e+09] (got 9000000000.0)")]:
        cat.write_text(MODEL_M.replace(old, new))
        line = error(kvsim("models", "--catalog", cat), str(cat))
        assert f"{cat}: {says}" in line and "ModelSpec(" not in line, line


def test_a_config_json_whose_shapes_break_a_model_rule_names_the_file(tmp_path):
    f = _config(tmp_path, **{**LLAMA_8B_SHAPE, "num_key_value_heads": 5}, _name_or_path="org/m")
    line = error(kvsim("calc", "--model-config", f, "--context", 9), str(f))
    assert f"{f}: 'num_key_value_heads' must be a divisor of num_attention_heads=32 (got 5)" in line
    assert "ModelSpec(" not in line


# --- a plan string with an empty part ---------------------------------------------------------------
def test_a_plan_with_an_empty_part_is_refused_not_read_as_the_rest(tmp_path):
    import pytest

    from simulator.errors import ConfigError
    from simulator.placement import parse_plan

    for text in ("tp8+", "+tp8", "tp8++pp2"):
        with pytest.raises(ConfigError, match=r"'' is not one of tpN, dpN"):
            parse_plan(text)
    assert parse_plan("tp8 + pp2").label == "TP8 PP2" and parse_plan("dp8+ep8").label == "DP8-attention EP8"
    line = error(kvsim("collapse", "--hardware", "8xH100", "--plan", "tp8+", "--out", tmp_path / "o"), "tp8+")
    assert "'' is not one of tpN" in line and not (tmp_path / "o").exists()  # a bad input leaves no folder


def test_calibrate_lists_the_phases_as_words(tmp_path):
    """helper-124: an unknown phase listed the phases as a Python tuple, ('prefill', 'decode', ...)."""
    f = tmp_path / "cal.csv"
    f.write_text(CAL_HEADER + CAL_ROW.replace(",decode,", ",decod,"))
    line = error(kvsim("calibrate", f, "--out", tmp_path / "p.toml"), str(f))
    assert ("'phase' must be one of prefill, decode, attention_prefill, attention_decode, throughput (got 'decod')"
            in line)
