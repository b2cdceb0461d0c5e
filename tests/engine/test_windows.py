"""Decode steps over sequences shorter than a sliding or compression window are priced at what they read.

The affine decode model charges a sequence attending ``a`` tokens ``α + β·a`` KV bytes, which is what
it reads once every window is full; a shorter one reads ``β·δ(a)`` less (`StepModel.decode_discount`).
The decode set keeps the deficits' sums per window segment (`simulator.engine.decode`); these tests
hold the sums to a recount after every plan and commit, fast-forward to stepping on random
configurations, and the engine's decode times to a full-attention model's where the windowed layout
reads the same bytes. The KV pool gives each sequence the overhead blocks of its length so far, growing as
it decodes up to its longest's (`simulator.engine.geometry`): held to its bytes after every plan and commit on
random configurations, and to full attention's sequence count inside the window.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from simulator.engine import AffineTimer, EngineConfig, PoolConfig, SchedulerConfig, run
from simulator.engine.cluster import cost_model_timer
from simulator.engine.decode import DECODE
from simulator.engine.geometry import block_geometry
from simulator.engine.replica import Replica
from simulator.kv import parse_layout, sequence_bytes
from simulator.models import get_model
from tests.engine.conftest import after_plans_and_commits, expected_used
from tests.engine.test_differential import _config, _fast_forward_equals_stepping, _requests
from workloads.request import Request

WINDOW_SEEDS = range(300, 316)


def _discount(rng: np.random.Generator) -> tuple[tuple[int, float, float], ...]:
    """A deficit line as a windowed layout's cost model gives one: convex, decreasing, 0 at the top
    breakpoint; one segment (compression, or a sliding window) or two (both), with windows the fuzzed
    workloads' sequences (up to ~3k tokens) cross."""
    top = int(rng.integers(8, 1500))
    e_top = float(rng.choice([1.5, 5.2, 7.0]))
    if rng.random() < 0.5:
        return ((top, e_top * top, e_top),)
    low = int(rng.integers(1, top))
    e_low = e_top + float(rng.choice([0.0, 3.0, 18.6]))
    d_low = e_top * (top - low)  # δ at the lower breakpoint
    return ((low, d_low + e_low * low, e_low), (top, e_top * top, e_top))


def _timer(rng: np.random.Generator) -> AffineTimer:
    """An affine timer with a window discount, its per-sequence cost the affine fit's ``b·δ(0)`` (a
    sequence's bytes at 0 tokens are 0), and a context cost large enough that a token miscounted in a
    deficit shows in the times."""
    discount = _discount(rng)
    b = 1e-6
    return AffineTimer(overhead_s=0.02, per_seq_s=b * discount[0][1], per_context_token_s=b,
                       per_prefill_token_s=3.6e-5, discount=discount)


def _deficit(timer: AffineTimer, attended: int) -> float:
    for hi, c, e in timer.discount:
        if attended < hi:
            return c - e * attended
    return 0.0


@pytest.fixture
def exact_windows(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """After every plan and commit, the decode set's window sums against a recount of its decoders,
    and a planned decode-only step's time against ``a + b·Σ (a_i − δ(a_i))`` recounted."""
    bad: list[Any] = []

    def check(rep: Replica, where: str) -> None:
        if not rep.win_top:
            return
        n, g, k = [0] * len(rep.win_hi), [0] * len(rep.win_hi), [0] * len(rep.win_hi)
        priced = 0.0
        for s in rep.running.values():
            if s.state != DECODE:
                continue
            a = s.kv_tokens(rep.S) + 1
            priced += a - _deficit(rep.timer, a)  # type: ignore[arg-type]
            for i, hi in enumerate(rep.win_hi):
                if a < hi:
                    n[i] += 1
                    g[i] += not s.capped
                    k[i] += a
                    break
        if (n, g, k) != (rep.win_n, rep.win_g, rep.win_k):
            bad.append((where, rep.index, rep.S, (n, g, k), (rep.win_n, rep.win_g, rep.win_k)))
        # a decode-only plan's first step (a swap's seconds, out or in, would be on top)
        if where == "plan" and rep.n_dec and not rep.chunks and not rep.rejoined and not rep.swapped:
            a0, b0 = rep.timer.decode_coefficients(rep.n_dec)
            if rep.g0 != pytest.approx(a0 + b0 * priced, rel=1e-12, abs=1e-15):
                bad.append(("price", rep.index, rep.S, rep.g0, a0 + b0 * priced))

    after_plans_and_commits(monkeypatch, check)  # (a plan that found nothing to do has no decoders: no price)
    return bad


@pytest.mark.parametrize("seed", WINDOW_SEEDS)
def test_window_sums_hold_and_fast_forward_equals_stepping(seed: int, exact_windows: list[Any]) -> None:
    """`test_differential`'s random configurations under a timer with a drawn window discount: the sums
    recounted after every plan and commit of both modes, and both modes' records and KV figures alike."""
    rng = np.random.default_rng(seed)
    config = _config(rng)
    timer = _timer(rng)
    reqs = _requests(rng, int(rng.choice([20, 60, 150])))
    _fast_forward_equals_stepping(config, reqs, timer)
    assert not exact_windows


def test_a_discount_moves_decode_times_by_the_deficit() -> None:
    """One request of 100 prompt tokens and 50 outputs, under a window of 1,000 tokens with deficit
    ``7·(1000 − a)``: its 49 decode steps attend 101..149 tokens, each priced at ``a − δ(a) = 8a − 7000``
    context tokens, so they take ``49·(a0 + b·δ(0)) + b·Σ (8a − 7000)`` seconds, by hand."""
    b, c = 1e-6, 7000.0
    timer = AffineTimer(overhead_s=0.02, per_seq_s=b * c, per_context_token_s=b, per_prefill_token_s=3.6e-5,
                        discount=((1000, c, 7.0),))
    req = Request(id=0, arrival_s=0.0, prompt_tokens=100, output_tokens=50, segments=((0, 100),))
    rec = run(EngineConfig(kv_blocks=100), [req], timer=timer).requests.iloc[0]
    by_hand = 49 * (0.02 + b * c) + b * sum(8 * a - 7000 for a in range(101, 150))
    assert rec.e2e_s - rec.ttft_s == pytest.approx(by_hand, rel=1e-12)
    plain = run(EngineConfig(kv_blocks=100), [req], timer=replace(timer, discount=())).requests.iloc[0]
    assert plain.e2e_s - plain.ttft_s == pytest.approx(49 * (0.02 + b * c) + b * sum(range(101, 150)), rel=1e-12)


def _decode_s(model: str, layout: str, prompt: int, output: int, node: str = "8xH100", tp: int = 1) -> float:
    config = EngineConfig(model=model, node=node, tp=tp, layout=parse_layout(layout))
    req = Request(id=0, arrival_s=0.0, prompt_tokens=prompt, output_tokens=output, segments=((0, prompt),))
    rec = run(config, [req]).requests.iloc[0]
    return float(rec.e2e_s - rec.ttft_s)


@pytest.mark.parametrize(("model", "windowed", "full", "prompt", "tp"), [
    ("Llama-3.1-8B", "compress:8:4096", "native", 1000, 1),  # under the full-resolution window
    ("Gemma-3-27B", "native", "no-sliding", 500, 2),  # under Gemma 3's 1,024-token sliding window
])
def test_a_sequence_inside_its_window_decodes_as_with_full_attention(model: str, windowed: str, full: str,
                                                                     prompt: int, tp: int) -> None:
    """Inside every window a windowed layout holds and reads what full attention does: the same decode
    time (the affine model alone charged Llama-3.1-8B's 1,000 tokens under ``compress:8:4096`` for a
    full window, about 1.9x the KV reads)."""
    assert _decode_s(model, windowed, prompt, 300, tp=tp) == pytest.approx(_decode_s(model, full, prompt, 300, tp=tp),
                                                                            rel=1e-12)


def test_a_sequence_crossing_the_compression_window_reads_its_compressed_bytes() -> None:
    """Llama-3.1-8B under ``compress:8:4096``, 3,990 prompt tokens and 300 outputs: decode step ``j``
    attends ``a = 3991 + j`` tokens and reads the bytes of ``a`` full-resolution tokens up to 4,096, of
    ``4096 + (a − 4096)/8`` beyond. Full attention's step at that many tokens is the same step."""
    node = "8xH100"
    from hardware.catalog import load_catalog

    plain = cost_model_timer(load_catalog().node(node), get_model("Llama-3.1-8B"), 1, parse_layout("native"))
    a0, b0 = plain.decode_coefficients(1)
    by_hand = sum(a0 + b0 * (a if a <= 4096 else 4096 + (a - 4096) / 8) for a in range(3991, 3991 + 299))
    assert _decode_s("Llama-3.1-8B", "compress:8:4096", 3990, 300, node) == pytest.approx(by_hand, rel=1e-9)


@pytest.mark.parametrize(("prompt", "output", "native", "compressed"),
                         [(3000, 50, 140, 140), (1000, 50, 419, 419), (1000, 1000, 419, 419)])
def test_a_windowed_pool_holds_as_many_sequences_as_their_bytes(prompt: int, output: int, native: int,
                                                                compressed: int) -> None:
    """Inside its window ``compress:8:4096`` holds what native attention does, so a 1xH100 replica of
    Llama-3.1-8B (its pool 8× native's blocks, of an eighth the bytes; room for 1,024 sequences, 2,048 with
    long outputs) runs as many sequences at once. Every sequence carried the whole window's 1,793 overhead
    blocks (helper-134): 3,000 + 50 tokens ran 106 at once where native ran 140, 1,000 + 50 ran 113 where
    native ran 419. Then each carried its own longest's from admission: 138 and 402, and 225 of 1,500 at
    1,000 + 1,000 tokens. Now a sequence's window grows as it decodes, 7 blocks of 262 kB a block it opens
    (`BlockGeometry.growth`): its pages' bytes at every length, native's count at once."""
    n = 1500 if output > 50 else 600
    reqs = [Request(id=i, arrival_s=0.0, prompt_tokens=prompt, output_tokens=output, segments=((i + 1, prompt),))
            for i in range(n)]
    sched = SchedulerConfig(max_num_seqs=2048 if output > 50 else 1024, max_num_batched_tokens=65536)
    most_at_once = {}
    for layout in ("native", "compress:8:4096"):
        config = EngineConfig(model="Llama-3.1-8B", node="1xH100", tp=1, layout=parse_layout(layout), scheduler=sched)
        most_at_once[layout] = run(config, reqs).summary["max_concurrency"]
    assert most_at_once == {"native": native, "compress:8:4096": compressed}


@pytest.mark.parametrize(("prompt", "native", "full"), [(30, 999, 1047), (100, 295, 299), (400, 83, 83)])
def test_short_sequences_under_a_sliding_window_fit_about_as_their_bytes_allow(prompt: int, native: int,
                                                                             full: int) -> None:
    """Inside Gemma-3-27B's 1,024-token sliding window its native layout holds the bytes of attending every
    layer in full (``no-sliding``), so a 1xH100 replica runs about as many 1,200 requests of a short prompt and
    20 output tokens at once. Its blocks hold 16 tokens of the 10 global layers, and the 52 sliding ones open
    5.2 blocks a block: a 30-token prompt takes 2 + 11 blocks (its pages, `BlockGeometry.block_overhead`),
    within a block's rounding of no-sliding's 2 of 6.2 times the bytes. When it was held to the growth line
    from admission (2 + 23), native ran 564 at once at 30 tokens and 265 at 100 (helper-143)."""
    reqs = [Request(id=i, arrival_s=0.0, prompt_tokens=prompt, output_tokens=20, segments=((i + 1, prompt),))
            for i in range(1200)]
    sched = SchedulerConfig(max_num_seqs=2048, max_num_batched_tokens=65536)
    most_at_once = {layout: run(EngineConfig(model="Gemma-3-27B", node="1xH100", tp=1, layout=parse_layout(layout),
                                             cache="none", scheduler=sched), reqs).summary["max_concurrency"]
                    for layout in ("native", "no-sliding")}
    assert most_at_once == {"native": native, "no-sliding": full}


def test_a_disaggregated_fleet_grows_a_windowed_sequence_on_its_decode_replica() -> None:
    """A prefill replica hands its decode replica the prompt's window (`BlockGeometry.block_overhead`), which
    grows there as the sequence decodes: 1,500 requests of 1,000 + 1,000 tokens at once on a 1xH100 prefill and
    a 1xH100 decode replica run as many at once under ``compress:8:4096`` as under native attention (1,071;
    483 when each sequence carried its longest's overhead from its prefill replica on)."""
    reqs = [Request(id=i, arrival_s=0.0, prompt_tokens=1000, output_tokens=1000, segments=((i + 1, 1000),))
            for i in range(1500)]
    sched = SchedulerConfig(max_num_seqs=2048, max_num_batched_tokens=65536)
    most_at_once = {layout: run(EngineConfig(model="Llama-3.1-8B", node="1xH100", tp=1, layout=parse_layout(layout),
                                             scheduler=sched, prefill_pool=PoolConfig(node="1xH100", tp=1)),
                                reqs).summary["max_concurrency"]
                    for layout in ("native", "compress:8:4096")}
    assert most_at_once == {"native": 1071, "compress:8:4096": 1071}


def test_a_windowed_sequence_that_fits_a_decode_replica_whole_fits_it_at_every_length() -> None:
    """Gemma-3-27B's sliding layers open 5 or 6 blocks a block. A 352 + 16-token request holds at most 23 + 120
    blocks, so a decode replica of 143 takes it; admitted with its prompt's 115, its first token opens a block
    where the steepest step, 6, would make 121 (144 in all): that block brings the 5 left to 120
    (`BlockGeometry.growth`). When a block could pass a sequence's most, no decode replica held such a request
    and it never ended (a drawn disaggregated configuration lost 8 of 20 requests so)."""
    reqs = [Request(id=0, arrival_s=0.0, prompt_tokens=352, output_tokens=16, segments=((1, 352),))]
    config = EngineConfig(model="Gemma-3-27B", node="8xH100", tp=8, kv_blocks=143, cache="none",
                          scheduler=SchedulerConfig(watermark=0.0), prefill_pool=PoolConfig(node="8xH100", tp=8))
    assert run(config, reqs).requests.outcome.tolist() == ["completed"]


@pytest.mark.parametrize("seed", range(330, 350))
def test_a_windowed_pool_counts_each_sequence_at_least_its_bytes(seed: int, exact_windows: list[Any],
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """`test_differential`'s random configurations under a drawn compression window, so that sequences carry
    overhead blocks of their own (`BlockGeometry.overhead`) through preemption, swap, reserve admission,
    retention and the prefix cache: after every plan and commit, each running sequence's blocks hold at least
    its KV bytes (`sequence_bytes`), the replica's sum of their overheads is theirs, the used count is exact
    (`test_disagg.expected_used`: a drawn fleet may be disaggregated), and fast-forward equals stepping."""
    rng = np.random.default_rng(seed)
    layout = parse_layout(f"compress:{int(rng.choice([2, 4, 8]))}:{int(rng.choice([16, 64, 300, 1000]))}")
    # one replica, a small pool, room for 64 sequences and no queue timeout: some runs preempt (swap, recompute)
    config = replace(_config(rng), layout=layout, kv_blocks=int(rng.choice([300, 800, 2500])), n_nodes=1, tp=8, pp=1,
                     more_pools=())
    if rng.random() < 0.5:
        config = replace(config, retention="full", retention_params={})
    config = replace(config, scheduler=replace(config.scheduler, queue_timeout_s=math.inf, max_num_seqs=64))
    model = get_model(config.model) if isinstance(config.model, str) else config.model
    assert block_geometry(model, layout, config.block_tokens).overhead_blocks > 0  # the sequences carry some
    bad: list[Any] = []

    def check(rep: Replica, where: str) -> None:
        geo = rep.geometry
        if not 0 <= rep.used <= rep.total_blocks or expected_used(rep) != rep.used:
            bad.append((where, "used", rep.used, expected_used(rep), rep.total_blocks))
        if rep.ov_running != sum(rep.overhead_held(s) for s in rep.running.values()):
            bad.append((where, "ov_running", rep.ov_running))
        for s in rep.running.values():
            tokens = s.kv_tokens(rep.S) if s.state == DECODE else s.prefill_kv
            held = rep.overhead_held(s)
            if geo.blocks(tokens, held) * geo.block_bytes < sequence_bytes(model, layout, tokens) - 1e-6:
                bad.append((where, s.request.id, tokens, held))
            if held > s.ovcap and s.state == DECODE:  # past its most only between a commit and its event
                bad.append((where, "ov past its most", s.request.id, held, s.ovcap))

    after_plans_and_commits(monkeypatch, check)
    reqs = _requests(rng, int(rng.choice([20, 60, 150])))
    _fast_forward_equals_stepping(config, reqs, _timer(rng))
    assert not bad and not exact_windows



@pytest.mark.parametrize(("prompt", "output", "most"), [(17, 2000, 209), (1001, 1000, 211)])
def test_a_windowed_reservation_promises_no_window_past_its_last_stored_token(prompt: int, output: int,
                                                                              most: int) -> None:
    """helper-144: admission "reserve" promised a windowed sequence the window of prompt + output tokens, where
    its last token's KV is never stored (it ends the request): at 17 + 2,000 and 1,001 + 1,000 tokens that is
    one block more, 7 blocks of window under ``compress:8:4096``, never taken, and 208 and 209 ran at once where
    native attention ran 209 and 211 on the same bytes (600 requests at once on 1xH100)."""
    reqs = [Request(id=i, arrival_s=0.0, prompt_tokens=prompt, output_tokens=output, segments=((i + 1, prompt),))
            for i in range(600)]
    sched = SchedulerConfig(max_num_seqs=4096, max_num_batched_tokens=65536, admission="reserve")
    most_at_once = {layout: run(EngineConfig(model="Llama-3.1-8B", node="1xH100", tp=1, layout=parse_layout(layout),
                                             cache="none", scheduler=sched), reqs).summary["max_concurrency"]
                    for layout in ("native", "compress:8:4096")}
    assert most_at_once == {"native": most, "compress:8:4096": most}


def test_a_windowed_reservation_promises_the_overhead_of_what_it_reserves() -> None:
    """Admission "reserve" promises each sequence its blocks up to ``reserve_output_tokens`` (2,000 here, past
    its own 50): the window's overhead up to there too, as native attention's blocks. A 1xH100 replica of
    Llama-3.1-8B then holds as many 1,000 + 50-token sequences under ``compress:8:4096`` as under native
    (3,000 tokens each reserved, inside the window: the same bytes). Sized by the output alone, the overhead
    let 326 in where native let 140 (helper-136)."""
    reqs = [Request(id=i, arrival_s=0.0, prompt_tokens=1000, output_tokens=50, segments=((i + 1, 1000),))
            for i in range(600)]
    sched = SchedulerConfig(max_num_seqs=1024, max_num_batched_tokens=65536, admission="reserve",
                            reserve_output_tokens=2000)
    most_at_once = {layout: run(EngineConfig(model="Llama-3.1-8B", node="1xH100", tp=1, layout=parse_layout(layout),
                                             scheduler=sched), reqs).summary["max_concurrency"]
                    for layout in ("native", "compress:8:4096")}
    assert most_at_once == {"native": 140, "compress:8:4096": 140}


def test_a_model_whose_every_layer_slides_evicts_nothing_by_its_window():
    """helper-154: a model whose every layer is windowed (Mistral-7B-v0.1's config: a sliding window, no full
    layer) holds its window alone, and that was counted as retention's evictions: every sequence past the window
    read evicted tokens, and a StreamingLLM whose 4,000-token window dropped nothing was charged its 8 points.
    Here Llama-3.1-8B with every layer sliding over 1,024 tokens, 30 prompts of 1,500-3,000 tokens."""
    from dataclasses import replace as with_fields

    from simulator.engine import EngineConfig, run
    from simulator.models import get_model
    from tests.engine.helpers import poisson_requests

    model = with_fields(get_model("Llama-3.1-8B"), sliding_window=1024, sliding_window_pattern=0)
    reqs = poisson_requests(30, 2.0, (1500, 3000), (20, 100), seed=1)
    for retention, params in (("full", {}), ("streaming-llm", {"window_tokens": 4000})):
        result = run(EngineConfig(model=model, node="1xH100", tp=1, retention=retention, retention_params=params),
                     reqs, seed=0)
        done = result.requests[result.requests.outcome == "completed"]
        assert len(done) == 30 and (done.evicted_tokens == 0).all() and (done.quality_debit_points == 0).all()
        assert result.summary["retention_evicted_tokens"] == 0
