"""One contract over every registered cache strategy and retention policy; layout geometry."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.engine import EngineConfig, SchedulerConfig, run
from simulator.engine.caches import CacheContext, make_strategy, strategy_names
from simulator.engine.cluster import simulate
from simulator.engine.geometry import block_geometry
from simulator.engine.retention import make_retention, retention_names
from simulator.engine.sequence import Seq
from simulator.kv import parse_layout, sequence_bytes
from simulator.models import get_model
from tests.engine.test_invariants import TIMER, assert_same_records
from workloads.request import Request

B = 16
CTX = CacheContext(block_bytes=1e6, dram_bytes=1e8, dram_bytes_per_s=1e9, nvme_bytes=1e9, nvme_bytes_per_s=1e9,
                   prefill_s=lambda tokens, context: 1e-4 * tokens)
PARAMS: dict[str, list[dict[str, object]]] = {"prefix": [{}, {"eviction": "lfu", "dram": True, "nvme": True},
                                                          {"eviction": "fifo", "dram": True, "nvme": True}]}


def shared_requests(n: int, seed: int) -> list[Request]:
    """Requests over 5 shared 2-segment prefixes, each with its own tail and output id."""
    rng = np.random.default_rng(seed)
    t = np.cumsum(rng.exponential(0.1, n))
    out = []
    for i in range(n):
        doc = int(rng.integers(0, 5))
        tail = int(rng.integers(1, 300))
        segs = ((doc, 40 + 16 * doc), (100 + doc, 37), (1000 + i, tail))
        out.append(Request(id=i, arrival_s=float(t[i]), prompt_tokens=sum(s for _, s in segs),
                           output_tokens=int(rng.integers(1, 300)), segments=segs, output_segment_id=10_000 + i))
    return out


CASES = [(name, p) for name in strategy_names() for p in PARAMS.get(name, [{}])]


@pytest.mark.parametrize("name, params", CASES, ids=[f"{n}-{i}" for i, (n, _) in enumerate(CASES)])
def test_cache_strategy_contract(name: str, params: dict[str, Any]) -> None:
    """Hook-level: block-aligned hits within the cap, kept ≤ private (at prefill and at finish),
    min(asked, evictable) ≤ evicted ≤ evictable."""
    state = make_strategy(name, **params).bind(B, 1000, CTX)
    reqs = shared_requests(30, 0)
    for i, r in enumerate(reqs):
        seq = Seq(r, i, 0, float("inf"))
        assert 0 <= state.match(r) <= r.prompt_tokens + r.output_tokens
        cap = (r.prompt_tokens - 1) // B * B
        hbm, unref = state.probe(seq, cap)
        assert 0 <= hbm <= cap and hbm % B == 0 and 0 <= unref <= hbm // B
        adm = state.on_admit(seq, cap)
        assert 0 <= adm.hit_tokens <= cap and adm.hit_tokens % B == 0 and adm.hit_tokens >= hbm
        assert adm.hit_tokens == adm.hbm_tokens + adm.dram_tokens + adm.nvme_tokens
        seq.hit_tokens = adm.hit_tokens
        if i % 2:  # the prefill completes: the cache may take its whole blocks over
            shared, kept = state.on_prefilled(seq, r.prompt_tokens)
            assert shared % B == 0 and adm.hit_tokens <= shared <= r.prompt_tokens
            assert 0 <= kept <= (shared - adm.hit_tokens) // B
            seq.hit_tokens = shared
        tokens = r.prompt_tokens + r.output_tokens - 1
        private = -(-tokens // B) - seq.hit_tokens // B
        kept = state.on_finish(seq, tokens, private)
        assert 0 <= kept <= private
        ev = state.evictable_blocks()
        assert ev >= 0
        if i % 5 == 4:
            freed = state.evict(7)
            assert min(7, ev) <= freed <= ev
    ev = state.evictable_blocks()
    assert state.evict(ev + 5) == ev and state.evictable_blocks() == 0


@pytest.mark.parametrize("name", strategy_names())
@pytest.mark.parametrize("retention", retention_names())
def test_every_strategy_in_the_engine(name: str, retention: str) -> None:
    """Engine-level: pool bounds hold, every block comes back, fast-forward = stepping."""
    config = EngineConfig(kv_blocks=250, cache=name, retention=retention,
                          scheduler=SchedulerConfig(max_num_seqs=12, max_num_batched_tokens=512))
    reqs = shared_requests(60, 1)
    fast, _, _ = simulate(config, reqs, 0, timer=TIMER)
    slow, _, _ = simulate(replace(config, fast_forward=False), reqs, 0, timer=TIMER)
    for rep in fast.replicas:
        assert rep.used == rep.cache.evictable_blocks()  # only unreferenced cache blocks are left
        assert rep.cache.evict(10**9) == rep.used
    cols = list(type(fast.records[0])._fields)  # type: ignore[attr-defined]
    a = pd.DataFrame(sorted(fast.records), columns=cols)
    b = pd.DataFrame(sorted(slow.records), columns=cols)
    assert_same_records(a, b)
    assert sorted(a.request_id) == list(range(60))


@settings(max_examples=15, deadline=None)
@given(blocks=st.integers(60, 500), seed=st.integers(0, 1000), preemption=st.sampled_from(["recompute", "swap"]),
       eviction=st.sampled_from(["lru", "lfu", "fifo"]))
def test_property_prefix_cache_equivalence(blocks: int, seed: int, preemption: str, eviction: str) -> None:
    config = EngineConfig(kv_blocks=blocks, cache="prefix", cache_params={"eviction": eviction},
                          scheduler=SchedulerConfig(max_num_seqs=8, max_num_batched_tokens=300,
                                                    preemption=preemption))
    reqs = [r for r in shared_requests(30, seed) if r.prompt_tokens + r.output_tokens < blocks * 16 * 0.9]
    fast = run(config, reqs, seed=seed, timer=TIMER)
    slow = run(replace(config, fast_forward=False), reqs, seed=seed, timer=TIMER)
    assert_same_records(fast.requests, slow.requests)


@pytest.mark.parametrize("model, layout", [("Gemma-3-27B", "native"), ("Gemma-3-27B", "compress:4:256+fp8"),
                                           ("Llama-3.1-8B", "compress:8:4096"), ("Llama-3.1-8B", "mla+fp8")])
def test_geometry_never_undercounts_sequence_bytes(model: str, layout: str) -> None:
    """A sequence whose longest is T tokens holds at least its bytes paged in 16-token pages a layer at every
    t ≤ T, and at T exactly those inside its windows, at most w − 1 blocks more past them (a compressed page
    of 16 entries comes every 16·w tokens): every T up to past the windows, and some beyond."""
    spec, lay = get_model(model), parse_layout(layout)
    geo = block_geometry(spec, lay, B)
    for longest in [*range(0, 4200), 4500, 5000, 20000, 131072]:
        ov = geo.overhead(longest)
        paged = math.ceil(sequence_bytes(spec, lay, longest, B) / geo.block_bytes - 1e-9)
        past = longest > lay.compress_recent_tokens  # a compressed page past the window: up to w − 1 blocks more
        assert paged <= geo.blocks(longest, ov) <= paged + (lay.compress_ratio - 1 if past else 0)
        for n in {0, 1, 15, 16, 17, 255, 256, 257, 1000, 1023, 1024, 1025, 4095, 4096, longest // 2, longest}:
            if n <= longest:
                assert geo.blocks(n, ov) * geo.block_bytes >= sequence_bytes(spec, lay, n, B) - 1e-6
    assert geo.overhead(10**6) == geo.overhead_blocks
    assert geo.blocks(10**6, geo.overhead_blocks) * geo.block_bytes <= (sequence_bytes(spec, lay, 10**6) * 1.001
                                                                         + geo.block_bytes * 2)


def test_windowed_overhead_follows_the_sequence_length() -> None:
    """compress:8:4096 on Llama-3.1-8B (131,072 B a token at full resolution, 16,384 compressed; 16-token
    blocks of 262,144 B): a sequence of at most 1,050 tokens holds 66 pages of 16 full-resolution tokens,
    66·16·131,072 B = 528 blocks, so 528 − ceil(1,050/16) = 462 overhead blocks; at 4,096 tokens 256 pages
    (2,048 blocks, 1,792 overhead); one more token opens a page of 16 compressed entries (2 MB, 8 blocks)
    where its own share is one block: 1,799. One token takes a page (8 blocks): 7 overhead."""
    geo = block_geometry(get_model("Llama-3.1-8B"), parse_layout("compress:8:4096"), B)
    assert geo.block_bytes == 16 * 131_072 / 8
    assert geo.overhead(1050) == 462 and geo.blocks(1050, 462) == 528
    assert geo.overhead(4096) == 1792 and geo.overhead(4097) == geo.overhead_blocks == 1799
    assert geo.overhead(0) == 0 and geo.overhead(1) == 7


@pytest.mark.parametrize(("model", "layout", "pieces", "most_over"), [
    ("Llama-3.1-8B", "compress:8:4096", ((257, 1799, 7, 7),), 0),  # 7 blocks of window a block: exact
    ("Gemma-3-27B", "native", ((64, 333, 5, 6),), 10),  # 5.2 a block: 6, then 5 along the line from c = 13
    ("Gemma-3-27B", "compress:8:4096", ((64, 3136, 49, 49), (257, 4487, 7, 7)), 25),  # its sliding window, then 7
    ("Llama-3.1-8B", "compress:4:1000", ((63, 189, 3, 3), (65, 191, 1, 2)), 2),  # r = 1,000 ends inside block 63
])
def test_a_windows_growth_holds_its_pages_as_it_grows(model: str, layout: str,
                                                      pieces: tuple[tuple[int, int, int, int], ...],
                                                      most_over: int) -> None:
    """A windowed sequence admitted at t0 tokens holds `block_overhead` (its block's overhead, at most
    overhead(T) of its longest T), then as `growth` steps it each block it opens brings a piece's steepest
    step while it is below the growth line and the line's rate on it, the block where it would pass
    overhead(T) only what is left: at every length at least ``overhead(t)`` (so never under its bytes),
    never above overhead(T) (a sequence whose whole length fits a pool fits it at every length: the line
    passed it for a block once, and a disaggregated fleet lost a request so), at most `most_over` above
    ``overhead(t)``, and exact at admission (`test_windows`: a short Gemma-3-27B prompt)."""
    spec, lay = get_model(model), parse_layout(layout)
    geo = block_geometry(spec, lay, B)
    assert geo.grow_pieces == pieces and geo.grow_rate == max(steepest for *_, steepest in pieces)
    over = 0
    for t0 in [1, 7, 16, 17, 30, 100, 352, 500, 1000, 1023, 1024, 1025, 1033, 3000, 4095, 4096, 4097]:
        for longest in [t0 + extra for extra in (0, 1, 15, 16, 17, 50, 200, 1000, 3000, 6000)]:
            most = geo.overhead(longest)
            held, t = geo.block_overhead(t0, most), t0
            assert held == min(most, geo.overhead(-(-t0 // B) * B))
            while t < longest:
                rate, stop = geo.growth(t, held, most) if held < most else (0, longest)
                assert stop > t
                while t < min(stop, longest):
                    t += 1
                    held += rate if t % B == 1 else 0  # a token opening a block brings `rate` blocks of window
                    assert geo.overhead(t) <= held <= most
                    over = max(over, held - geo.overhead(t))
    assert over == most_over


def test_linear_layouts_are_exact_and_flow_into_the_pool() -> None:
    spec = get_model("Llama-3-70B")
    for text in ("native", "fp8", "mla", "cross-layer:0.5"):
        geo = block_geometry(spec, parse_layout(text), B)
        assert geo.overhead_blocks == 0 and geo.overhead(10**6) == 0 and geo.blocks(100, 0) == 7
    sizes = {text: simulate(EngineConfig(layout=parse_layout(text)), [], 0)[0].replicas[0].total_blocks
             for text in ("native", "fp8", "cross-layer:0.5")}
    assert sizes["fp8"] == pytest.approx(2 * sizes["native"], rel=1e-3)
    assert sizes["cross-layer:0.5"] == pytest.approx(2 * sizes["native"], rel=1e-3)


def test_timer_factory_gets_the_layout_when_it_asks() -> None:
    seen: list[object] = []

    def old_style(node: object, model: object, tp: int) -> object:
        return TIMER

    def new_style(node: object, model: object, tp: int, *, layout: object) -> object:
        seen.append(layout)
        return TIMER

    reqs = shared_requests(3, 0)
    run(EngineConfig(), reqs, timer=old_style)  # type: ignore[arg-type]
    run(EngineConfig(layout=parse_layout("fp8")), reqs, timer=new_style)  # type: ignore[arg-type]
    assert seen == [parse_layout("fp8")]


def test_unknown_names_list_the_valid_ones() -> None:
    with pytest.raises(Exception, match=r"name: must be one of none, prefix \(got"):
        make_strategy("lru")
    with pytest.raises(Exception, match="eviction"):
        make_strategy("prefix", eviction="random")
    with pytest.raises(Exception, match="streaming-llm"):
        make_retention("window")


def test_compression_of_every_token_carries_its_first_page() -> None:
    """helper-139: ``compress:w:0`` (no full-resolution window: every token compressed) read as linear, so a
    sequence of 1 token took one block of 16 compressed tokens' bytes (65,536 B under compress:32:0) where its
    page of 16 entries holds 16 full tokens' (2,097,152 B): now w − 1 overhead blocks at its first token."""
    spec = get_model("Llama-3.1-8B")
    for w in (8, 32):
        lay = parse_layout(f"compress:{w}:0")
        geo = block_geometry(spec, lay, B)
        assert geo.overhead(1) == geo.overhead_blocks == w - 1
        assert geo.blocks(1, geo.overhead(1)) * geo.block_bytes == sequence_bytes(spec, lay, 1, B) == 16 * 131_072
