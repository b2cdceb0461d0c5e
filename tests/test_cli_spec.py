"""CLI smoke tests: each analytic command, real figures, and one-line errors with exit code 2."""

import json

import pandas as pd
import pytest
from click.testing import CliRunner

from simulator.cli import main


def run(*args):
    return CliRunner().invoke(main, list(args))


def test_calc_json_figures():
    r = run("calc", "--model", "Llama-3.1-8B", "--context", "131072", "--batch", "8", "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    assert out["bytes_per_token"] == 131_072
    assert round(out["batch_bytes"] / 1e9, 1) == 137.4
    assert out["factors"]["attention"] == 0.25


def test_calc_text_mentions_levers():
    r = run("calc", "--context", "4096", "--kv-dtype", "fp8")
    assert r.exit_code == 0
    assert "163,840 B" in r.output and "kv-dtype" in r.output and "× 0.5000" in r.output


def test_fit_ranks_levers_for_target_that_does_not_fit():
    r = run("fit", "--hardware", "8xH100", "--model", "Llama-3-70B", "--context", "131072", "--batch", "32",
            "--json")
    out = json.loads(r.output)
    assert out["max_streams"] == 10 and not out["fits"]
    debits = [f["debit_points"] for f in out["fixes"]]
    assert debits == sorted(debits) and out["fixes"][0]["levers"] == ["int4"]
    assert all(f["max_streams"] >= 32 for f in out["fixes"])


def test_fit_text_for_a_target_that_fits():
    r = run("fit", "--hardware", "8xB200", "--context", "4096", "--batch", "100")
    assert r.exit_code == 0 and "fits." in r.output and "860" in r.output


def test_fit_says_when_the_context_is_past_the_models_window():
    """The memory arithmetic holds at any context (the README asks Llama-3-70B, an 8k model, about 128k:
    its 128k variant's question), but fit says when the model as released cannot serve it."""
    r = run("fit", "--model", "Llama-3.1-8B", "--context", "200000")
    assert r.exit_code == 0
    assert "(beyond the model's max context of 131,072)" in r.output
    assert "tokens fits in memory, beyond the model's max context." in r.output
    within = run("fit", "--model", "Llama-3.1-8B", "--context", "131072")
    assert "beyond" not in within.output.split("longest context")[0] and "tokens fits." in within.output
    assert json.loads(run("fit", "--model", "Llama-3.1-8B", "--context", "200000", "--json").output)[
        "beyond_max_context"]
    assert not json.loads(run("fit", "--model", "Llama-3.1-8B", "--context", "131072", "--json").output)[
        "beyond_max_context"]


def test_calc_says_when_the_context_is_past_the_models_window():
    """calc's arithmetic holds at any context, but it says, as fit does, when the model as released
    cannot serve it: Llama-3-70B's window is 8,192 tokens (its config.json), Llama-3.1-8B's 131,072."""
    past = run("calc", "--model", "Llama-3-70B", "--context", "131072")
    assert past.exit_code == 0
    assert past.output.splitlines()[0] == ("Llama-3-70B, layout native, 131,072 tokens × batch 1  "
                                           "(beyond the model's max context of 8,192)")
    assert "327,680 B" in past.output  # 2 · 80 · 8 · 128 · 2 B: the figure itself is unchanged
    within = run("calc", "--model", "Llama-3.1-8B", "--context", "131072")
    assert within.output.splitlines()[0] == "Llama-3.1-8B, layout native, 131,072 tokens × batch 1"


def test_model_too_big_is_one_line_exit_2():
    r = run("fit", "--model", "DeepSeek-V3", "--context", "1000")
    assert r.exit_code == 2
    assert r.output.strip().count("\n") == 0 and "by 12.9 GB (103.3 GB over the stage's 8 GPUs)" in r.output


def test_unknown_names_list_valid_ones():
    r = run("fit", "--hardware", "8xA100", "--context", "1000")
    assert r.exit_code == 2 and "valid: 8xH100" in r.output
    r = run("calc", "--context", "1000", "--layout", "zip")
    assert r.exit_code == 2 and "unknown lever 'zip'" in r.output
    r = run("calc", "--context", "-5")
    assert r.exit_code == 2


def test_collapse_writes_csv_and_png(tmp_path):
    r = run("collapse", "--hardware", "8xH100,8xB200", "--out", str(tmp_path))
    assert r.exit_code == 0, r.output
    df = pd.read_csv(tmp_path / "collapse.csv")
    native = df[(df.layout == "native")].set_index(["hardware", "context_tokens"])["max_streams"]
    assert native["8xH100", 4096] == 324 and native["8xH100", 131072] == 10
    assert native["8xB200", 131072] == 26
    assert (tmp_path / "collapse.png").stat().st_size > 50_000
    assert set(df.layout) == {"native", "fp8", "cross-layer:0.5", "mla", "compress:8:4096", "mla+fp8"}
    # helper-114: the table's columns past the model's max context (Llama-3-70B: 8,192) were not marked
    r = run("collapse", "--hardware", "8xH100", "--model", "Llama-3-70B", "--out", str(tmp_path / "a"))
    df = pd.read_csv(tmp_path / "a" / "collapse.csv")
    assert df.beyond_max_context.tolist() == (df.context_tokens > 8192).tolist() and df.beyond_max_context.any()
    assert r.output.splitlines()[1].split() == ["4k", "32k*", "128k*", "1M*"]
    assert ("* beyond Llama-3-70B's max context of 8,192 tokens: memory alone (the model cannot read that far; "
            "collapse.csv: beyond_max_context)") in r.output
    r = run("collapse", "--hardware", "8xH100", "--model", "Llama-3.1-8B", "--out", str(tmp_path / "b"))
    assert r.output.splitlines()[1].split() == ["4k", "32k", "128k", "1M*"] and "* beyond Llama-3.1-8B's" in r.output


def test_catalog_tables():
    r = run("models")
    assert r.exit_code == 0 and "DeepSeek-V3" in r.output and "70272" in r.output
    r = run("hardware")
    assert r.exit_code == 0 and "MI355X" in r.output and "8xB200" in r.output


def test_fit_counts_the_base_layouts_own_debit_and_each_gpus_copy():
    """helper-120: on ``--layout mla`` fit ranked int4 + cross-layer + compress at 4.1 points and called the plans
    that hold the target "no quality debit", leaving out the MLA retrofit's own 1.5 points (and its training);
    and its "GB/stream (all GPUs)" column showed one GPU's copy of an MLA latent that every TP rank holds whole."""
    out = json.loads(run("fit", "--hardware", "8xH100", "--model", "Llama-3-70B", "--context", "8192", "--batch",
                         "700", "--layout", "mla", "--json").output)
    first = out["fixes"][0]
    assert first["levers"] == ["int4", "cross-layer", "compress"]
    assert first["debit_points"] == 5.6 and first["retrain"]  # 1.5 (mla) + 0.6 + 1.0 + 2.5
    assert len(first["sources"]) == 4 and first["sources"][0].startswith("MHA2MLA")
    text = run("fit", "--hardware", "8xH100", "--model", "Llama-3-70B", "--context", "8192", "--batch", "700",
               "--layout", "mla").output
    assert "no lever (no debit beyond layout mla's own 1.5 points, which needs training): DP8-attention PP2" in text
    assert "each debit includes layout mla's own 1.5 points" in text
    # DeepSeek-V3 int4 + cross-layer at 32k: 31 of 61 layers x 576 values x 0.625 B (int4 and its scales) = 11,160 B
    # a token, x 32,768 = 0.366 GB a sequence, whole on each of the 8 GPUs: 2.93 GB in all
    out = json.loads(run("fit", "--hardware", "8xH200", "--model", "DeepSeek-V3", "--context", "32768", "--batch",
                         "100", "--json").output)
    first = out["fixes"][0]
    assert first["levers"] == ["int4", "cross-layer"] and first["max_streams"] == 114
    assert first["sequence_bytes"] == 11_160 * 32_768 and first["held_bytes"] == 8 * 11_160 * 32_768
    # GQA under TP8 (8 KV heads, one a GPU): the copies sum to the sequence
    out = json.loads(run("fit", "--hardware", "8xH100", "--model", "Llama-3-70B", "--context", "131072", "--batch",
                         "32", "--json").output)
    assert out["fixes"][0]["held_bytes"] == out["fixes"][0]["sequence_bytes"]


def test_a_compression_window_longer_than_the_context_is_said_to_save_nothing():
    """helper-120: ``compress:8:8192`` at 4k (and ``compress:8:200000`` at 128k) printed a factor of 1 and a
    layout still called compress, without a word; ``compress:1`` printed "layout native"."""
    r = run("calc", "--model", "Llama-3-70B", "--context", "4096", "--layout", "compress:8:8192")
    assert ("note: compress:8:8192 keeps the most recent 8,192 tokens whole: at 4,096 tokens it compresses nothing"
            in r.output)
    assert "note:" not in run("calc", "--model", "Llama-3-70B", "--context", "8193", "--layout",
                              "compress:8:8192").output
    r = run("fit", "--model", "Llama-3.1-70B", "--context", "131072", "--layout", "compress:8:200000")
    assert "note: compress:8:200000 keeps the most recent 200,000 tokens whole" in r.output
    r = run("calc", "--context", "100", "--layout", "compress:1")
    assert r.exit_code == 2 and ("--layout: layout 'compress:1': compress:w:r's ratio w must be an integer >= 2 "
                                 "(got '1')") in r.output
    assert json.loads(run("calc", "--model", "Llama-3.1-8B", "--context", "200000", "--json").output)[
        "beyond_max_context"]
    assert not json.loads(run("calc", "--model", "Llama-3.1-8B", "--context", "1000", "--json").output)[
        "beyond_max_context"]


def test_collapse_draws_the_kinds_that_fit_and_says_which_it_left_out(tmp_path):
    """helper-120: ``--hardware 8xH100,8xH200 --model DeepSeek-V3`` failed whole on 8xH100 (its fp8 weights,
    84.9 GB a GPU under TP8, over 0.9 x 80 GB); the plans table of fit shows such a plan, so collapse draws the
    rest and names what it left out. All left out is still the error."""
    r = CliRunner().invoke(main, ["collapse", "--hardware", "8xH100,8xH200", "--model", "DeepSeek-V3", "--out",
                                  str(tmp_path / "a")])
    assert r.exit_code == 0, r.output
    assert "note: left out: DeepSeek-V3 does not fit TP8 on 8xH100: one GPU holds weights of 84.9 GB" in r.stderr
    df = pd.read_csv(tmp_path / "a" / "collapse.csv")
    assert set(df.hardware) == {"8xH200"} and set(df.plan) == {"TP8", "DP8-attention EP8"}
    # 0.9 x 141 - 84.91 = 41.99 GB a GPU, the latent whole on each: 18 streams of 32k (fit's figure)
    assert df[(df.plan == "TP8") & (df.layout == "native") & (df.context_tokens == 32768)].max_streams.item() == 18
    r = run("collapse", "--hardware", "8xH100", "--model", "DeepSeek-V3", "--out", str(tmp_path / "b"))
    assert r.exit_code == 2 and "DeepSeek-V3 does not fit TP8 on 8xH100" in r.output


def test_mla_on_a_model_whose_own_attention_is_mla_costs_nothing():
    """helper-123: DeepSeek-V3's ``--layout mla`` is its own latent, yet fit charged it the MHA2MLA retrofit's
    1.5 points and training (6.0 where native read 4.5, the same bytes), and the engine's compare rows did too."""
    from simulator.kv import parse_layout
    from simulator.levers import layout_debit_points
    from simulator.models import get_model

    ds, llama = get_model("DeepSeek-V3"), get_model("Llama-3-70B")
    assert layout_debit_points(parse_layout("mla+fp8"), ds) == 0.1
    assert layout_debit_points(parse_layout("mla+fp8"), llama) == 1.6
    args = ["fit", "--model", "DeepSeek-V3", "--hardware", "8xH200", "--context", "131072", "--batch", "200", "--json"]
    native = json.loads(run(*args).output)["fixes"][0]
    mla = json.loads(run(*args, "--layout", "mla").stdout)["fixes"][0]  # (its note on stderr)
    assert native["debit_points"] == mla["debit_points"] == 4.5 and native["max_streams"] == mla["max_streams"]
    assert "layout mla's own" not in run(*args[:-1], "--layout", "mla").stdout  # (no retrofit debit of its own)


@pytest.mark.parametrize(("args", "says"), [
    (["fit", "--context", "1000", "--tp", "3"], "Error: --tp 3: node 8xH100: 'tp × pp' must be a divisor"),
    (["collapse", "--plan", "tp3"], "Error: --plan: node 8xH100: 'tp × pp' must be a divisor"),
    (["collapse", "--tp", "3"], "Error: --tp 3: node 8xH100: 'tp × pp' must be a divisor"),
    (["collapse", "--plan", "tp8,dp8+ep9"], "Error: --plan: plan 'dp8+ep9': epN:"),
    (["calc", "--context", "1000", "--model-config", "nonexist.json"], "Error: --model-config: nonexist.json: file "
                                                                       "not found"),
])
def test_plan_and_model_config_errors_name_their_option(tmp_path, monkeypatch, args, says):
    """helper-124: these named the node or the file but not the option that set them."""
    monkeypatch.chdir(tmp_path)
    r = run(*args, *(["--out", "c"] if args[0] == "collapse" else []))
    assert r.exit_code == 2 and says in r.output


def test_fit_says_why_a_plan_whose_weights_fit_has_no_streams(tmp_path):
    """helper-126: on a catalog node with no NIC, fit listed TP16 and TP8 PP2 at 0 streams with a positive KV
    budget and no word why (the plan's reason, `PlanCapacity.why`, was dropped from the text)."""
    cat = tmp_path / "c.toml"
    cat.write_text('[node.8xH100n]\ngpu = "H100"\ngpus = 8\nhost_dram_bytes = 2e12\nnvme_bytes = 3e13\n'
                   'nvme_bytes_per_s = 25e9\nsource = "test"\n')
    r = run("fit", "--catalog", str(cat), "--hardware", "8xH100n", "--model", "Llama-3-70B", "--context", "131072",
            "--batch", "8")
    assert r.exit_code == 0, r.output
    assert ("    TP16: no streams: node 8xH100n: a replica of 16 GPUs spans 2 nodes over the network, but the catalog "
            "gives no 'nic_bytes_per_s' for it") in r.output
    assert "TP2: no streams" not in r.output  # its weights fit, its KV holds no 128k stream: the table says so


def test_an_unknown_lever_beside_a_kv_dtype_is_unknown_not_a_conflict():
    """helper-143: ``--layout fp8+bogus`` said "'bogus' conflicts with 'fp8' (one dtype lever at most)" (an unknown
    name read as a dtype), and a retention policy named as a lever got the same; both now say the lever is
    unknown, the policy where it goes, at the option."""
    r = run("fit", "--context", "100", "--layout", "fp8+bogus")
    assert r.exit_code == 2
    assert r.output.startswith("Error: --layout: layout 'fp8+bogus': unknown lever 'bogus'; valid:")
    r = run("calc", "--context", "100", "--layout", "int4+snapkv")
    assert r.exit_code == 2 and r.output.startswith(
        "Error: --layout: layout 'int4+snapkv': unknown lever 'snapkv' (a retention policy: kvsim compare --strategy "
        "takes it, as 'int4+snapkv'); valid:")
    r = run("calc", "--context", "100", "--layout", "fp8+int4")  # a real conflict stays one
    assert r.exit_code == 2 and "'int4' conflicts with 'fp8' (one dtype lever at most)" in r.output


def test_a_lever_at_an_unsourced_parameter_or_with_no_stated_debit_is_said_so():
    """helper-180: ``cross-layer:0.1`` (10× fewer layers with KV) was charged cross-layer's 1 point, stated by its
    source for ``cross-layer:0.5`` (2×), with no word, where a retention policy at another budget gets a note; and
    ``mqa`` or ``gqa:2`` (fewer KV heads than trained) read as a 0-point lever in fit and compare, where kvsim run's
    report says levers.toml states no debit for them. ``kvsim fit --layout fp8`` named no debit at all where the
    target fit. Each is now said: fit prints the layout's stated debit and the caveats, in --json too."""
    from simulator.kv import parse_layout
    from simulator.levers import debit_caveats, unpriced_parts, unsourced_levers
    from simulator.models import get_model

    llama, ds = get_model("Llama-3-70B"), get_model("DeepSeek-V3")
    assert [(lv.name, part) for lv, part in unsourced_levers(parse_layout("cross-layer:0.1+fp8+compress:32:0"),
                                                             llama)] == [("cross-layer", "cross-layer:0.1"),
                                                                         ("compress", "compress:32:0")]
    # the sourced settings (the window r of compress:w:r is kvsim's, not the source's), and DeepSeek-V3's own latent
    for text in ("cross-layer", "cross-layer:0.5", "mla", "compress:8:1024", "fp8", "int4"):
        assert unsourced_levers(parse_layout(text), llama) == []
    assert unsourced_levers(parse_layout("mla"), ds) == [] and unpriced_parts(parse_layout("mha"), ds) == []
    assert unpriced_parts(parse_layout("gqa:2+fp8"), llama) == ["gqa:2"]
    assert unpriced_parts(parse_layout("gqa:8"), llama) == []  # Llama-3-70B's own 8 heads
    assert unpriced_parts(parse_layout("gqa:8"), ds) == ["gqa:8"]  # 8 heads where DeepSeek-V3 has 128
    assert debit_caveats(parse_layout("mla:64"), llama) == [
        "mla's 1.5-point debit is what its source states for mla (latent rank 512), not measured at mla:64: a guide, "
        "not a figure"]
    assert debit_caveats(parse_layout("mqa"), llama) == [
        "mqa keeps fewer KV heads (1) than Llama-3-70B was trained with (8): simulator/data/levers.toml states no "
        "debit for it, and the debit shown leaves it out"]

    args = ["fit", "--model", "Llama-3-70B", "--context", "131072", "--batch", "8"]
    out = run(*args, "--layout", "cross-layer:0.1+fp8").output.splitlines()
    assert out[1:3] == [
        "  layout cross-layer:0.1+fp8: a stated quality debit of 1.1 points and retraining "
        "(simulator/data/levers.toml)",
        "  note: cross-layer's 1-point debit is what its source states for cross-layer:0.5 (fraction of layers with "
        "their own KV 0.5), not measured at cross-layer:0.1: a guide, not a figure"]
    assert run(*args, "--layout", "fp8").output.splitlines()[1] == (
        "  layout fp8: a stated quality debit of 0.1 points (simulator/data/levers.toml)")
    assert not run(*args).output.splitlines()[1].startswith("  layout")  # native: no lever, no line
    doc = json.loads(run(*args, "--layout", "gqa:2", "--json").output)
    assert doc["layout_debit_points"] == 0 and doc["debit_caveats"] == [
        "gqa:2 keeps fewer KV heads (2) than Llama-3-70B was trained with (8): simulator/data/levers.toml states no "
        "debit for it, and the debit shown leaves it out"]


def test_fit_says_fp4_kv_is_a_blackwell_lever_where_it_offers_it_on_hopper():
    """helper-180: fit listed fp4 KV as a no-training lever for Llama-3-70B on 8×H100 (36 streams of 128k, 1 point)
    with no word that its source, NVIDIA's NVFP4 KV cache, is a Blackwell feature (``kvsim cost`` said so). The
    note follows the fixes where one is fp4 on a GPU without fp4 tensor cores, and the header under ``--layout
    fp4``; on B200 there is none."""
    says = ("  note: fp4 KV on H100, which has no fp4 tensor cores: kvsim counts its streams, but the fp4 lever's "
            "source (NVIDIA's NVFP4 KV cache) is a Blackwell feature")
    out = run("fit", "--hardware", "8xH100", "--model", "Llama-3-70B", "--context", "131072", "--batch", "32").output
    lines = out.splitlines()
    fp4_row = next(line for line in lines if line.split()[:1] == ["fp4"])
    assert fp4_row.split()[1:] == ["1.0", "no", "12.08", "36"]  # ⌊54.36 / (92,160 · 131,072 / 8)⌋ = 36
    assert lines[-2] == says and lines.count(says) == 1
    out = run("fit", "--hardware", "1xH100", "--model", "Llama-3.1-8B", "--context", "8192", "--layout", "fp4").output
    assert out.splitlines()[2] == says
    out = run("fit", "--hardware", "8xB200", "--model", "Llama-3-70B", "--context", "131072", "--batch", "90").output
    assert "fp4 1.0 no 12.08 95" in " ".join(out.split()) and "Blackwell" not in out  # ⌊144.36 / 1.51⌋ = 95


def test_fit_json_carries_the_fp4_note_its_text_prints():
    """helper-186: ``kvsim fit --json`` offered fp4 KV on 8×H100 (36 streams of 128k, a 1-point lever) with no word
    that its source is a Blackwell feature, where the text output notes it. ``fp4_kv_note`` is that note where the
    layout or a fix keeps fp4 KV on a GPU without fp4 tensor cores, else empty."""
    says = ("fp4 KV on H100, which has no fp4 tensor cores: kvsim counts its streams, but the fp4 lever's source "
            "(NVIDIA's NVFP4 KV cache) is a Blackwell feature")
    fit70 = ["fit", "--model", "Llama-3-70B", "--context", "131072", "--json"]
    doc = json.loads(run(*fit70, "--hardware", "8xH100", "--batch", "32").output)
    assert next(f["max_streams"] for f in doc["fixes"] if f["levers"] == ["fp4"]) == 36
    assert doc["fp4_kv_note"] == says
    doc = json.loads(run("fit", "--hardware", "1xH100", "--model", "Llama-3.1-8B", "--context", "8192", "--layout",
                         "fp4", "--json").output)
    assert (doc["fits"], doc["fp4_kv_note"]) == (True, says)  # the layout's own fp4, no fix needed
    doc = json.loads(run(*fit70, "--hardware", "8xB200", "--batch", "90").output)
    assert next(f["max_streams"] for f in doc["fixes"] if f["levers"] == ["fp4"]) == 95 and doc["fp4_kv_note"] == ""
    doc = json.loads(run(*fit70, "--hardware", "8xH100", "--batch", "1").output)  # fits: no fix, no fp4
    assert (doc["fixes"], doc["fp4_kv_note"]) == ([], "")


def test_the_fp4_lever_cites_its_source_by_its_title():
    """helper-180: levers.toml cited "NVIDIA blog 'Optimizing inference with NVFP4 KV cache' (2025): under 1% accuracy
    loss on long-context suites"; the post is titled otherwise (2025-12-08) and states <1% across code-generation,
    knowledge and long-context benchmarks, on Blackwell. fit's --json carries the source with the fix."""
    from simulator.levers import levers

    fp4 = levers()["fp4"]
    assert (fp4.debit_points, fp4.retrain) == (1.0, False)
    title = "'Optimizing Inference for Long Context and Large Batch Sizes with NVFP4 KV Cache' (2025-12-08)"
    assert title in fp4.source
    doc = json.loads(run("fit", "--hardware", "8xB200", "--model", "Llama-3-70B", "--context", "131072", "--batch",
                         "90", "--json").output)
    fix = next(f for f in doc["fixes"] if f["levers"] == ["fp4"])
    assert (fix["max_streams"], fix["sources"]) == (95, [fp4.source])


def test_no_sliding_on_a_model_without_windows_is_noted_as_changing_nothing():
    """helper-186: ``--layout no-sliding`` on Llama-3.1-8B (no sliding-window layer) was taken without a word, and
    ``kvsim compare --strategy native,no-sliding`` ran one set twice under two labels. It is the model as it ships,
    as ``mla`` is on DeepSeek-V3: calc, fit, collapse and cost say it changes nothing, compare refuses the pair as
    one set and notes it in a set of its own; on Gemma-3-27B (52 of 62 layers sliding at 1,024) it is a lever."""
    from simulator.kv import idle_sliding, parse_layout
    from simulator.models import get_model

    says = ("Llama-3.1-8B has no sliding-window layers (all 32 attend to the whole context), so no-sliding changes "
            "nothing: the KV is the same without it")
    llama, gemma = get_model("Llama-3.1-8B"), get_model("Gemma-3-27B")
    assert idle_sliding(llama, parse_layout("fp8+no-sliding")) == says
    assert idle_sliding(llama, parse_layout("fp8")) == "" and idle_sliding(gemma, parse_layout("no-sliding")) == ""
    r = run("calc", "--model", "Llama-3.1-8B", "--layout", "no-sliding", "--context", "8192")
    assert r.stderr.splitlines() == [f"note: --layout no-sliding: {says}"]
    assert "bytes per token               131,072 B" in r.stdout  # 32 layers · 8 heads · 256 · 2 B, native's
    doc = json.loads(run("fit", "--hardware", "1xH100", "--model", "Llama-3.1-8B", "--layout", "no-sliding+fp8",
                         "--context", "8192", "--json").stdout)
    assert doc["layout"] == "fp8+no-sliding" and f"note: --layout fp8+no-sliding: {says}" in run(
        "fit", "--hardware", "1xH100", "--model", "Llama-3.1-8B", "--layout", "no-sliding+fp8", "--context",
        "8192").stderr
    gem = run("calc", "--model", "Gemma-3-27B", "--layout", "no-sliding", "--context", "8192")
    assert "no-sliding changes nothing" not in gem.stderr
    assert "bytes per token               507,904 B" in gem.stdout  # 62 layers · 16 KV heads · 256 · 2 B, every layer
    args = ["compare", "--model", "Llama-3.1-8B", "--hardware", "1xH100", "--workload", "chat-4k", "--duration-s", "5"]
    r = run(*args, "--strategy", "native,no-sliding")
    assert r.exit_code == 2 and "--strategy: must name each strategy set once (got 'native' and 'no-sliding', both " \
                                "layout native, reuse none, retention full)" in r.output
    r = run(*args, "--strategy", "fp8,no-sliding+prefix")
    assert r.exit_code == 0 and f"note: no-sliding+prefix: {says}" in r.stderr.splitlines()


def test_an_attention_lever_that_is_the_models_own_is_noted_and_collapse_draws_it_once(tmp_path):
    """helper-189: ``--layout mla`` on DeepSeek-V3 (its own latent) and ``gqa:8`` on Llama-3.1-8B (its own 8 KV heads)
    were taken by calc and fit without a word, where compare runs them as native; and ``kvsim collapse --layout
    native,no-sliding`` on Llama-3.1-8B noted the no-sliding yet drew two identical lines (``native,mla`` on
    DeepSeek-V3 the same). Each is noted, and collapse refuses such a pair as one layout, as compare does."""
    from simulator.kv import parse_layout
    from simulator.models import get_model
    from simulator.placement import as_run, idle_attention

    ds, llama = get_model("DeepSeek-V3"), get_model("Llama-3.1-8B")
    own_mla = "DeepSeek-V3's own attention is MLA, so mla changes nothing: the KV is the same without it"
    own_gqa = "Llama-3.1-8B has 8 KV heads of its own, so gqa:8 changes nothing: the KV is the same without it"
    assert idle_attention(ds, parse_layout("mla+fp8")) == own_mla
    assert idle_attention(llama, parse_layout("gqa:8+fp8")) == own_gqa
    for model, text in ((llama, "mla"), (llama, "gqa:4"), (llama, "mha"), (llama, "native"), (ds, "gqa:128")):
        assert idle_attention(model, parse_layout(text)) == ""  # a lever there: other bytes
    assert as_run(ds, parse_layout("mla+fp8")).label == as_run(llama, parse_layout("gqa:8+fp8")).label == "fp8"
    r = run("calc", "--model", "DeepSeek-V3", "--layout", "mla", "--context", "8192")
    assert r.stderr.splitlines() == [f"note: --layout mla: {own_mla}"]
    assert "bytes per token                70,272 B" in r.stdout  # 61 layers · (512 + 64) · 2 B: native's latent
    args = ["fit", "--hardware", "1xH100", "--model", "Llama-3.1-8B", "--context", "8192"]
    r = run(*args, "--layout", "gqa:8")
    assert r.stderr.splitlines() == [f"note: --layout gqa:8: {own_gqa}"]
    assert json.loads(run(*args, "--layout", "gqa:8", "--json").stdout)["max_streams"] == \
        json.loads(run(*args, "--json").stdout)["max_streams"] == 52  # native's streams
    assert run(*args, "--layout", "gqa:4").stderr == ""
    for model, layouts, says in (
            ("Llama-3.1-8B", "native,no-sliding", "got 'native' and 'no-sliding', both native"),
            ("DeepSeek-V3", "native,mla", "got 'native' and 'mla', both native"),
            ("DeepSeek-V3", "fp8,mla+fp8", "got 'fp8' and 'mla+fp8', both fp8")):
        r = run("collapse", "--hardware", "8xH200", "--model", model, "--layout", layouts, "--out", tmp_path / "c")
        assert r.exit_code == 2 and r.stderr.splitlines()[-1] == f"Error: --layout: must name each KV layout once " \
                                                                    f"({says})"
        assert not (tmp_path / "c").exists()
    r = run("collapse", "--hardware", "8xH200", "--model", "DeepSeek-V3", "--layout", "mla,fp8", "--out",
            tmp_path / "d")
    assert r.exit_code == 0 and f"note: --layout mla: {own_mla}" in r.stderr.splitlines()
    df = pd.read_csv(tmp_path / "d" / "collapse.csv")
    assert list(df["layout"].unique()) == ["mla", "fp8"]
    args = ["compare", "--model", "Llama-3.1-8B", "--hardware", "1xH100", "--workload", "chat-4k", "--duration-s", "5"]
    r = run(*args, "--strategy", "fp8,gqa:8+prefix", "--out", tmp_path / "e")
    assert r.exit_code == 0 and f"note: gqa:8+prefix: {own_gqa}" in r.stderr.splitlines()
    assert f"note: fp8: {own_gqa}" not in r.stderr


@pytest.mark.parametrize("kinds", ["4xH100,8xH100", "8xH100,4xH100"])
def test_collapse_draws_each_kind_under_its_own_nodes_default_plan_helper_191(tmp_path, kinds):
    """helper-191: with no --plan or --tp, every kind was drawn under the first kind's default plans: `4xH100,8xH100`
    drew 8xH100 under TP4 (218 streams of 4k) and `8xH100,4xH100` drew 4xH100 under TP8 over 2 nodes (162 a node).
    "TP over the node", each its own: Llama-3-70B (141.1 GB) on 8xH100 TP8: 72 − 17.64 = 54.36 GB a GPU over
    4,096 · 327,680 / 8 = 0.168 GB, 324; on 4xH100 TP4: 72 − 35.27 = 36.73 over 0.336 GB, 109."""
    r = run("collapse", "--model", "Llama-3-70B", "--hardware", kinds, "--layout", "native", "--out", str(tmp_path),
            "--json")
    assert r.exit_code == 0, r.output
    df = pd.read_csv(tmp_path / "collapse.csv")
    at4k = df[df.context_tokens == 4096].set_index("hardware")
    assert at4k.loc["8xH100", "plan"] == "TP8" and at4k.loc["8xH100", "max_streams"] == 324
    assert at4k.loc["4xH100", "plan"] == "TP4" and at4k.loc["4xH100", "max_streams"] == 109
    assert list(dict.fromkeys(df.hardware)) == kinds.split(",") and (df.nodes == 1).all()


def test_collapse_default_plans_leave_out_per_kind_helper_191(tmp_path):
    """DeepSeek-V3 (fp8, 672.9 GB) fits neither TP4 nor DP4-attention EP4 of 4xH100 (168.9 and 178.2 GB a GPU over
    72): both are left out, each said, and 8xH200 keeps its TP8 (18 at 32k) and DP8-attention EP8 (104); with no
    kind left, the one-line refusal counts them."""
    r = run("collapse", "--model", "DeepSeek-V3", "--hardware", "4xH100,8xH200", "--layout", "native",
            "--out", str(tmp_path / "a"))
    assert r.exit_code == 0, r.output
    assert "left out: DeepSeek-V3 does not fit TP4 on 4xH100" in r.output
    assert "left out: DeepSeek-V3 does not fit DP4-attention EP4 on 4xH100" in r.output
    df = pd.read_csv(tmp_path / "a" / "collapse.csv")
    at32k = df[df.context_tokens == 32768].set_index("plan")
    assert set(df.hardware) == {"8xH200"} and at32k.loc["TP8", "max_streams"] == 18
    assert at32k.loc["DP8-attention EP8", "max_streams"] == 104
    r = run("collapse", "--model", "DeepSeek-V3", "--hardware", "4xH100,1xH100", "--layout", "native",
            "--out", str(tmp_path / "b"))
    assert r.exit_code == 2
    assert r.output.startswith("Error: no node kind or plan fits: DeepSeek-V3 does not fit TP4 on 4xH100")
    assert r.output.rstrip().endswith("(and 2 more kinds or plans that do not fit)")


def test_collapse_table_node_defaults_is_the_commands_default_and_refused_beside_a_plan():
    """`collapse_table(node_defaults=True)` draws each kind under its own node's `default_plans`, what `kvsim collapse`
    draws without --plan or --tp: Llama-3-70B on 4xH100 under TP4 (109 streams of 4k), on 8xH100 under TP8 (324);
    DeepSeek-V3 on 8xH200 under TP8 and DP8-attention EP8. Beside `tp` or `plans` it would choose against them."""
    from hardware.catalog import load_catalog
    from simulator.collapse import collapse_table
    from simulator.errors import ConfigError
    from simulator.models import get_model
    from simulator.placement import ParallelPlan

    cat = load_catalog()
    df = collapse_table(cat, get_model("Llama-3-70B"), ["4xH100", "8xH100"], ["native"], contexts=[4096],
                        node_defaults=True)
    assert list(zip(df.hardware, df.plan, df.max_streams, strict=True)) == [("4xH100", "TP4", 109),
                                                                            ("8xH100", "TP8", 324)]
    ds = collapse_table(cat, get_model("DeepSeek-V3"), ["8xH200"], ["native"], contexts=[32768], node_defaults=True)
    assert list(ds.plan) == ["TP8", "DP8-attention EP8"] and list(ds.max_streams) == [18, 104]
    for given in ({"tp": 8}, {"plans": [ParallelPlan(tp=8)]}):
        with pytest.raises(ConfigError, match="'node_defaults' must be False beside plans or tp"):
            collapse_table(cat, get_model("Llama-3-70B"), ["8xH100"], ["native"], node_defaults=True, **given)
