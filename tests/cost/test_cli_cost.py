import json

import pytest
from click.testing import CliRunner

from simulator.cli.cost import calibrate, cost
from simulator.cost.calibrate import PUBLISHED_FILE
from simulator.cost.params import load_params_file


def test_cost_text_and_json():
    r = CliRunner().invoke(
        cost, ["--hardware", "H100", "--model", "Llama-3.1-8B", "--batch", "8", "--context", "4096"]
    )
    assert r.exit_code == 0, r.output
    assert "decode step" in r.output and "KV reads" in r.output
    r = CliRunner().invoke(
        cost,
        [
            "--hardware",
            "h200",
            "--model",
            "Llama-3.1-70B",
            "--tp",
            "4",
            "--batch",
            "32",
            "--context",
            "8000",
            "--prompt",
            "2000",
            "--layout",
            "fp8",
            "--weight-dtype",
            "fp8",
            "--json",
        ],
    )
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    assert out["decode_bound"] in ("memory", "compute", "communication", "overhead")
    assert out["decode_share_comm"] > 0
    shares = sum(
        out[k]
        for k in ("decode_share_weights", "decode_share_kv", "decode_share_comm", "decode_share_overhead")
    )
    assert abs(shares - 1) < 1e-9


def test_cost_config_error_exits_2():
    r = CliRunner().invoke(
        cost, ["--hardware", "H999", "--model", "Llama-3.1-8B", "--batch", "1", "--context", "1"]
    )
    assert r.exit_code == 2 and "unknown node 'H999'; valid: 8xH100" in r.output
    r = CliRunner().invoke(
        cost,
        ["--hardware", "H100", "--model", "Llama-3.1-8B", "--weight-dtype", "int3", "--batch", "1", "--context", "1"],
    )
    assert r.exit_code == 2 and "'int3' is not one of 'bf16', 'fp8', 'fp8-block', 'fp4', 'mxfp4', 'w4a16'" in r.output
    # --context 0 prices a prefill of --prompt tokens, which defaults to it (helper-138: the message read as
    # Python, "'prompt' must be >= 1")
    r = CliRunner().invoke(cost, ["--model", "Llama-3.1-8B", "--batch", "1", "--context", "0"])
    assert r.exit_code == 2 and r.output.strip() == (
        "Error: --prompt: must be >= 1; it defaults to --context, 0 here: give --prompt (got 0)")


def test_calibrate_published_writes_params(tmp_path):
    out = tmp_path / "p.toml"
    r = CliRunner().invoke(calibrate, [str(PUBLISHED_FILE), "--free", "step_overhead_s", "--out", str(out)])
    assert r.exit_code == 0, r.output
    assert "held-out MAPE" in r.output
    ps = load_params_file(out)
    assert ps["H100"].provenance["e2e_free"] == ["step_overhead_s"]


def test_calibrate_needs_a_source():
    r = CliRunner().invoke(calibrate, [])
    assert r.exit_code == 2 and "either FILE or --from-aiconfigurator" in r.output


def test_cost_refuses_weights_that_do_not_fit():
    # Llama-3.1-70B in bf16 on one H100: 141.1 GB of weights against 0.9 · 80 = 72 GB usable
    r = CliRunner().invoke(cost, ["--hardware", "H100", "--model", "Llama-3.1-70B", "--tp", "1", "--batch", "1",
                                  "--context", "1"])
    assert r.exit_code == 2 and "does not fit TP1 on 8xH100" in r.output and "by 69.1 GB" in r.output
    r = CliRunner().invoke(cost, ["--hardware", "H100", "--model", "Llama-3.1-70B", "--tp", "3", "--batch", "1",
                                  "--context", "1"])
    assert r.exit_code == 2
    assert "Error: --tp: plan TP3 for Llama-3.1-70B: must be a divisor of the 64 query heads (got 3)" in r.output


def test_cost_says_why_a_low_mfu_step_reads_compute_bound():
    """Llama-3.1-8B's 8 KV heads over TP8 give a batch-1 decode one attention block a layer on a GPU, far
    fewer than H100's 132 SMs: its attention is bound by the compute of the SM it occupies (the model's
    `sat(n)`), so the step reads compute-bound at 0.2% MFU, and the output says why. An MLA decode of
    DeepSeek-V3 on 8xH200 (128 heads / 8 GPUs = 16 a GPU: one 64-head tile a sequence) at batch 1 reads memory-bound:
    no note."""
    args = ["--hardware", "8xH100", "--model", "Llama-3.1-8B", "--context", "131072"]
    r = CliRunner().invoke(cost, [*args, "--batch", "1", "--json"])
    out = json.loads(r.output)
    assert out["decode_attention_blocks_per_gpu"] == 1  # batch 1 x 8 KV heads / 8 GPUs
    assert out["decode_bound"] == "compute" and out["decode_mfu"] < 0.01
    r = CliRunner().invoke(cost, [*args, "--batch", "1"])
    assert r.exit_code == 0, r.output
    assert ("the decode attention kernel runs 1 thread block a layer on a GPU (1 a sequence) for H100's 132 SMs"
            in r.output)
    r = CliRunner().invoke(cost, [*args, "--batch", "2", "--json"])
    assert json.loads(r.output)["decode_attention_blocks_per_gpu"] == 2
    mla = ["--hardware", "8xH200", "--model", "DeepSeek-V3", "--context", "32768", "--batch", "3"]
    r = CliRunner().invoke(cost, [*mla, "--json"])
    out = json.loads(r.output)
    assert out["decode_attention_blocks_per_gpu"] == 3 and out["decode_bound"] == "memory"
    assert "thread block" not in CliRunner().invoke(cost, mla).output


def test_cost_says_what_mfu_is_against_and_flags_fp8_and_fp4_kv_pricing():
    """helper-121: fp8 MFU (against the fp8 peak) read 51% beside bf16's 73% with no word of the peak; fp8
    weights priced slower than bf16 at TP8 on H200 with no word of the fitted fixed latency that does it; fp4 KV
    on H100 ran with no note."""
    base = ["--model", "Llama-3.1-70B", "--batch", "8", "--context", "2048"]
    r = CliRunner().invoke(cost, ["--hardware", "8xH200", *base, "--weight-dtype", "fp8"])
    assert "MFU: the step's FLOPs a GPU over its time, against H200's dense fp8 peak (1,978.9 TFLOP/s)" in r.output
    assert "note: fp8 GEMMs are priced with their input's cast to fp8 and a fixed 9.3 µs a kernel" in r.output
    r = CliRunner().invoke(cost, ["--hardware", "8xH200", *base])
    assert "dense bf16 peak (989.4 TFLOP/s)" in r.output and "fp8 GEMMs" not in r.output
    r = CliRunner().invoke(cost, ["--hardware", "8xB200", *base, "--weight-dtype", "fp4"])  # helper-123
    assert "note: fp4 GEMMs are priced with their input's cast to fp4 and a fixed 4.5 µs a kernel" in r.output
    r = CliRunner().invoke(cost, ["--hardware", "8xB200", "--model", "gpt-oss-120b", "--batch", "64", "--context",
                                  "2048"])
    assert "dense fp4 peak (9,000.0 TFLOP/s), the precision its GEMMs run in (its attention projections' run in " \
           "bf16)" in r.output
    r = CliRunner().invoke(cost, ["--hardware", "8xH100", *base, "--layout", "fp4"])
    assert "note: fp4 KV on H100, which has no fp4 tensor cores" in r.output
    assert "fp4 KV" not in CliRunner().invoke(cost, ["--hardware", "8xB200", *base, "--layout", "fp4"]).output


def test_cost_prices_a_context_shorter_than_a_window_at_what_it_reads(tmp_path):
    """helper-120: a 32k sequence under ``compress:8:200000`` read 234.74 GB/GPU of KV (more than the GPU's HBM):
    the affine decode model charged a sequence shorter than a window as if it filled it. It is priced at what it
    holds (`StepModel.priced_context`). By hand: 32 x 32,768 x 40,960 B a GPU (one of 8 KV heads) = 42.95 GB."""
    args = ["--model", "Llama-3.1-70B", "--hardware", "8xH100", "--batch", "32", "--context", "32768"]
    r = CliRunner().invoke(cost, [*args, "--layout", "compress:8:200000"])
    assert "KV reads 54.4%: 42.95 GB/GPU" in r.output and "note: the decode step reads" not in r.output
    # Gemma-3-27B's 1,024-token sliding layers at a 512-token context: 8 x 512 x 507,904 B = 2.08 GB
    r = CliRunner().invoke(cost, ["--model", "Gemma-3-27B", "--hardware", "1xH100", "--batch", "8", "--context",
                                  "512"])
    assert "KV reads 3.0%: 2.08 GB/GPU" in r.output and "note: the decode step reads" not in r.output
    # a model whose every layer is windowed (Mistral-7B-v0.1's config: a 4,096-token window on all 32 layers) has
    # no full-context slope to take a deficit off: at 1,024 tokens it is charged the window, and says so.
    # By hand: 8 sequences x 4,096 (1,024) tokens x 32 layers x 2 x 128 x 2 B (one KV head a GPU) = 0.54 (0.13) GB
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps({"hidden_size": 4096, "intermediate_size": 14336, "max_position_embeddings": 32768,
                               "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
                               "torch_dtype": "bfloat16", "vocab_size": 128256, "sliding_window": 4096}))
    r = CliRunner().invoke(cost, ["--model", str(cfg), "--hardware", "8xH100", "--batch", "8", "--context", "1024"])
    assert "note: the decode step reads 0.54 GB/GPU of KV where its sequences hold 0.13 GB: every layer of " in r.output


def test_cost_says_every_layer_is_windowed_only_where_it_is():
    """helper-129: the note's gate was the bytes alone, and a compression whose ratio does not divide the fit's
    reference length rounds the affine line an entry above the bytes held: Llama-3.1-8B (no window) under
    ``compress:6:128`` read "every layer of Llama-3.1-8B is windowed"."""
    for context in ("100", "129", "5000"):
        r = CliRunner().invoke(cost, ["--model", "Llama-3.1-8B", "--hardware", "1xH100", "--batch", "8", "--context",
                                      context, "--layout", "compress:6:128"])
        assert r.exit_code == 0 and "note: the decode step reads" not in r.output, r.output


def test_cost_refuses_a_params_file_with_an_infinite_latency(tmp_path):
    """helper-183: ``step_overhead_s = inf`` passed the check of ">= 0": `kvsim cost --params` printed a prefill of
    "inf ms", "0 tok/s" and an overhead share of "nan%", exit 0."""
    from simulator.cost.params import PARAMS_FILE

    text = PARAMS_FILE.read_text()
    assert "\nstep_overhead_s = 9.357577024880769e-15\n" in text  # the [default] table's
    f = tmp_path / "p.toml"
    f.write_text(text.replace("\nstep_overhead_s = 9.357577024880769e-15\n", "\nstep_overhead_s = inf\n", 1))
    r = CliRunner().invoke(cost, ["--hardware", "1xH100", "--model", "Llama-3.1-8B", "--batch", "1",
                                  "--context", "1024", "--params", str(f)])
    assert r.exit_code == 2, r.output
    assert "p.toml: default.step_overhead_s: must be in [0, 1] s (got inf)" in r.output
    # helper-185: a finite one too large to price (1e308 s) printed "inf ms" and "0 tok/s" the same way
    f.write_text(text.replace("\nstep_overhead_s = 9.357577024880769e-15\n", "\nstep_overhead_s = 1e308\n", 1))
    r = CliRunner().invoke(cost, ["--hardware", "1xH100", "--model", "Llama-3.1-8B", "--batch", "1",
                                  "--context", "1024", "--params", str(f)])
    assert r.exit_code == 2 and "p.toml: default.step_overhead_s: must be in [0, 1] s (got 1e+308)" in r.output
    ok = CliRunner().invoke(cost, ["--hardware", "1xH100", "--model", "Llama-3.1-8B", "--batch", "1",
                                   "--context", "1024", "--params", str(PARAMS_FILE)])
    assert "decode step, batch 1 at 1024 tokens: 6.213 ms, 161 tok/s" in ok.output


def test_cost_mfu_of_a_pipeline_is_a_gpus_share_of_the_step():
    """helper-183: under PP the step's FLOPs are the whole pipeline's on `tp` GPUs (every stage in turn), and the
    MFU divided them by one GPU's peak: Llama-3.1-70B TP4 PP2 on 8xH100 printed a 4,096-token prefill at MFU 60.1%
    (TP8: 49.3%) and a decode step of 32 at 5.9% beside its 1,569 tok/s, where each GPU computes its stage's half.
    Hand-worked (tests/cost: the same FLOPs over the same times): TP8 0.0448606 (no pp: unchanged); TP4 PP2 the
    whole model's 0.0593706 over 2 stages for the prefill of one prompt alone in the pipeline. The decode's is the
    engine's 2 batches in flight, one a stage (helper-187: its 3,138 tok/s), each GPU busy with one: 0.0593706."""
    def run(*plan: str) -> dict:
        r = CliRunner().invoke(cost, ["--hardware", "8xH100", "--model", "Llama-3.1-70B", "--batch", "32",
                                      "--context", "4096", *plan, "--json"])
        assert r.exit_code == 0, r.output
        return json.loads(r.output)

    tp8, pp2 = run("--tp", "8"), run("--tp", "4", "--pp", "2")
    assert tp8["decode_mfu"] == pytest.approx(0.0448606, rel=1e-5)
    assert tp8["prefill_mfu"] == pytest.approx(0.492857, rel=1e-5)
    assert pp2["decode_step_s"] == pytest.approx(0.0203926, rel=1e-5)  # the step itself is unchanged
    assert pp2["decode_mfu"] == pytest.approx(0.0593706, rel=1e-5)
    assert pp2["prefill_mfu"] == pytest.approx(0.601233 / 2, rel=1e-5)


def test_cost_decode_throughput_of_a_pipeline_counts_its_batches_in_flight():
    """helper-187: under PP `cost` printed the tok/s of one batch passing the stages, where the engine keeps pp
    batches in flight, one a stage (a scheduler each): Llama-3.1-70B TP4 PP2 on 8xH100, batch 32 at 4,096 tokens,
    printed 1,569 tok/s. Hand-worked: 2 batches x 32 tokens a step of 0.0203926 s = 3,138.4 tok/s; TP8 (one batch)
    keeps 32 / its step. The 2 x 32 sequences in flight must fit: at 32,768 tokens a stage GPU holds 1.342 GB a
    sequence beside 17.6 GB of weights, so 2 x 20 fit and 2 x 30 (80.5 GB of KV) do not."""
    def run(*args: str) -> tuple[dict, str]:
        base = ["--hardware", "8xH100", "--model", "Llama-3.1-70B", *args]
        r = CliRunner().invoke(cost, [*base, "--json"])
        assert r.exit_code == 0, r.output
        return json.loads(r.output), CliRunner().invoke(cost, base).output

    (pp2, text), (tp8, _) = run("--tp", "4", "--pp", "2", "--batch", "32", "--context", "4096"), \
        run("--tp", "8", "--batch", "32", "--context", "4096")
    assert pp2["decode_step_s"] == pytest.approx(0.0203926, rel=1e-5)
    assert pp2["decode_batches_in_flight"] == 2 and tp8["decode_batches_in_flight"] == 1
    assert pp2["decode_tokens_per_s"] == pytest.approx(2 * 32 / 0.0203926, rel=1e-5) == pytest.approx(3138.4, rel=1e-4)
    assert tp8["decode_tokens_per_s"] == 32 / tp8["decode_step_s"]
    assert "20.393 ms, 3,138 tok/s (2 such batches in flight, one a stage: 64 sequences; memory-bound" in text
    assert "the engine keeps 2 batches in flight, one a stage, so the decode tok/s and MFU are theirs" in text
    fits, _ = run("--tp", "4", "--pp", "2", "--batch", "20", "--context", "32768")
    assert fits["decode_tokens_per_s"] == pytest.approx(2 * 20 / fits["decode_step_s"])
    r = CliRunner().invoke(cost, ["--hardware", "8xH100", "--model", "Llama-3.1-70B", "--tp", "4", "--pp", "2",
                                  "--batch", "30", "--context", "32768"])
    assert r.exit_code == 2
    assert ("kvsim cost --batch 30 --context 32768 --pp 2 (2 batches in flight): Llama-3.1-70B does "
            "not fit TP4 PP2 on 8xH100 at batch 60 × 32,768 tokens: stage 2 of 2, one GPU holds weights of 17.6 GB "
            "and KV of 80.5 GB") in " ".join(r.output.split())


def test_cost_decode_throughput_of_a_pipeline_is_the_engines():
    """The engine on the same replica (Llama-3.1-70B TP4 PP2, one 8xH100): 16 requests of 256 + 257 tokens at once
    go 8 to each of its 2 schedulers, prefill in one step and decode together; its 16 tokens a TPOT (16.309 ms)
    are `cost`'s tok/s for batch 8 at their mean context, 256 + 128 tokens (a decode step is affine in context),
    to 1e-5 (981.06 tok/s; one batch's, as `cost` printed it, is half)."""
    from simulator.engine import EngineConfig, run
    from workloads.request import Request

    reqs = [Request(id=i, arrival_s=0.0, prompt_tokens=256, output_tokens=257, segments=((i, 256),))
            for i in range(16)]
    df = run(EngineConfig(model="Llama-3.1-70B", node="8xH100", tp=4, pp=2), reqs, seed=1).requests
    assert sorted(df.replica.value_counts().tolist()) == [8, 8] and df.ttft_s.nunique() == 1
    engine = 16 / df.tpot_mean_s.mean()
    r = CliRunner().invoke(cost, ["--hardware", "8xH100", "--model", "Llama-3.1-70B", "--tp", "4", "--pp", "2",
                                  "--batch", "8", "--context", "384", "--json"])
    out = json.loads(r.output)
    assert out["decode_tokens_per_s"] == pytest.approx(engine, rel=1e-5) == pytest.approx(981.06, rel=1e-5)


def test_cost_prefill_under_dp_attention_says_it_is_one_prompt_a_rank_helper_191():
    """helper-191: under --dp-attention the step model prices a rank's step with the ranks equally loaded (the MLPs
    and experts on every rank's tokens), so the prefill priced is one prompt on each of the 8 ranks, but `cost`
    printed "prefill 4096 tokens: 980.35 ms" as one prompt's: Llama-3.1-70B on 8xH100, against TP8's 149.38 ms.
    Its MFU, 60.1%, is the whole model's FLOPs for 4,096 tokens on one GPU (2 · 70.55e9 · 4,096 = 5.78e14, plus
    attention's), over 0.980 s at 989.4 TFLOP/s: 8 prompts' MLP FLOPs split 8 ways."""
    def run(*plan: str) -> tuple[dict, str]:
        base = ["--hardware", "8xH100", "--model", "Llama-3.1-70B", "--batch", "8", "--context", "4096", *plan]
        r = CliRunner().invoke(cost, [*base, "--json"])
        assert r.exit_code == 0, r.output
        return json.loads(r.output), CliRunner().invoke(cost, base).output

    (dp, dp_text), (tp, tp_text) = run("--dp-attention"), run()
    assert dp["prefill_s"] == pytest.approx(0.980354, rel=1e-5) and tp["prefill_s"] == pytest.approx(0.149377, rel=1e-5)
    assert dp["prefill_mfu"] * 989.4e12 * dp["prefill_s"] == pytest.approx(5.83e14, rel=1e-2)
    assert dp["prefill_prompts_in_step"] == 8 and tp["prefill_prompts_in_step"] == 1
    assert ("prefill 4096 tokens a DP rank (8 prompts in all, the ranks in step: their MLPs and experts take every "
            "rank's tokens): 980.35 ms") in dp_text
    assert "  prefill 4096 tokens: 149.38 ms" in tp_text


def test_cost_refusals_under_pp_keep_how_many_sequences_fit_helper_192():
    """helper-192: the refusal named every option given and a 47-character --pp clause, so a --prompt beside --pp 2
    made a 320-character line, and the cut at `MAX_MESSAGE_CHARS` took its end: "more than its usable 72.0 GB (0.9
    of its HBM) by 750.9 GB; 40 sequences fit". Llama-3.1-70B TP4 PP2 on 8xH100: 2 x 300 sequences of 32,768 tokens
    need 805.3 GB of KV on stage 2's GPU, beside 17.6 GB of weights; DeepSeek-V3 DP8-attention PP2, 2 x 64 of 8,192,
    37.4 GB beside 47.4 GB. Each line names the options of the check that failed."""
    from simulator.errors import MAX_MESSAGE_CHARS

    def line(*args: str) -> str:
        r = CliRunner().invoke(cost, ["--hardware", "8xH100", *args])
        assert r.exit_code == 2, r.output
        text = " ".join(r.output.split()).removeprefix("Error: ")
        assert len(text) <= MAX_MESSAGE_CHARS and not text.endswith("…"), text
        return text

    llama = line("--model", "Llama-3.1-70B", "--tp", "4", "--pp", "2", "--batch", "300", "--context", "32768",
                 "--prompt", "100000")
    assert llama.startswith("kvsim cost --batch 300 --context 32768 --pp 2 (2 batches in flight): Llama-3.1-70B does "
                            "not fit TP4 PP2 on 8xH100 at batch 600 × 32,768 tokens")
    assert llama.endswith("by 750.9 GB; 40 sequences fit")
    deepseek = line("--model", "DeepSeek-V3", "--dp-attention", "--pp", "2", "--batch", "64", "--context", "8192")
    assert deepseek.endswith("by 12.8 GB; 83 sequences fit")
    # a prompt that does not fit is said at --prompt alone
    prompt = line("--model", "Llama-3.1-70B", "--tp", "4", "--pp", "2", "--batch", "1", "--context", "1024",
                  "--prompt", "2000000")
    assert prompt.startswith("kvsim cost --prompt 2000000: Llama-3.1-70B does not fit TP4 PP2 on 8xH100 at batch 1 × "
                             "2,000,000 tokens")
