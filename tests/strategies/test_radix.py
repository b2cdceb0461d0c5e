"""The radix tree and prefix cache on hand-made cases: split, match, insert, pins, eviction order."""

from __future__ import annotations

import pytest

from simulator.engine.caches import make_strategy
from simulator.engine.caches.radix import HBM, RadixTree
from simulator.engine.sequence import Seq
from workloads.request import Request

B = 4


def req(i: int, segments: tuple[tuple[int, int], ...], out: int = 1, out_id: int = -1) -> Request:
    return Request(id=i, arrival_s=0.0, prompt_tokens=sum(t for _, t in segments), output_tokens=out,
                   segments=segments, output_segment_id=out_id)


def run_one(state, r: Request, key: int = 0) -> tuple[Seq, int]:  # type: ignore[no-untyped-def]
    """Admit `r`, then finish it with its whole prompt cached; return (seq, hit)."""
    seq = Seq(r, key, 0, float("inf"))
    adm = state.on_admit(seq, (r.prompt_tokens - 1) // B * B)
    seq.hit_tokens = adm.hit_tokens
    return seq, adm.hit_tokens


def finish(state, seq: Seq, tokens: int) -> int:  # type: ignore[no-untyped-def]
    private = -(-tokens // B) - seq.hit_tokens // B
    kept = state.on_finish(seq, tokens, private)
    assert 0 <= kept <= private
    return kept


def test_insert_match_split_and_partial_last_block() -> None:
    st = make_strategy("prefix").bind(B, 1000)
    a = req(0, ((1, 10), (2, 6)))  # 16 tokens: blocks [1:0-4] [1:4-8] [1:8-10 2:0-2] [2:2-6]
    seq, hit = run_one(st, a)
    assert hit == 0
    assert finish(st, seq, 15) == 3  # 15 tokens: the partial 4th block is not cached
    assert st.tree.blocks[HBM] == 3 and st.evictable_blocks() == 3
    (node,) = st.tree.root.children.values()
    assert node.pieces == ((1, 0, 10), (2, 0, 2)) and node.tokens == 12
    # same first segment, different second: the 3rd block (straddling) differs -> split after 8
    b = req(1, ((1, 10), (3, 9)))
    assert st.match(b) == 8
    seq_b, hit = run_one(st, b, 1)
    assert hit == 8
    (top,) = st.tree.root.children.values()
    assert top.tokens == 8 and top.ref == 1 and len(top.children) == 1  # split, pinned
    assert st.evictable_blocks() == 1  # the unreferenced tail block
    assert finish(st, seq_b, 19) == 2  # blocks 3-4 of b (tokens 8..16)
    assert len(top.children) == 2 and top.ref == 0
    # a shorter prompt never hits its own last token's block
    c = req(2, ((1, 8),))
    assert st.match(c) == 4  # what admission takes (`max_hit_tokens`), not the 8 cached
    assert run_one(st, c, 2)[1] == 4


def test_segment_ids_are_compared_with_offsets() -> None:
    st = make_strategy("prefix").bind(B, 1000)
    seq, _ = run_one(st, req(0, ((7, 12),)))
    finish(st, seq, 12)
    assert st.match(req(1, ((7, 8), (9, 8)))) == 8  # (7, 0..8) is a prefix of (7, 0..12)
    assert st.match(req(2, ((9, 12),))) == 0


def test_output_segment_is_inserted_and_reused() -> None:
    st = make_strategy("prefix").bind(B, 1000)
    seq, _ = run_one(st, req(0, ((1, 8),), out=9, out_id=50))
    assert finish(st, seq, 8 + 8) == 4  # prompt + 8 output tokens
    nxt = req(1, ((1, 8), (50, 9), (60, 5)))  # the next turn's history holds the output
    assert st.match(nxt) == 16


def test_pinned_blocks_are_never_evicted() -> None:
    st = make_strategy("prefix").bind(B, 1000)
    seq, _ = run_one(st, req(0, ((1, 16),)))
    finish(st, seq, 16)
    pinned, hit = run_one(st, req(1, ((1, 16), (2, 4))), 1)
    assert hit == 16 and st.evictable_blocks() == 0
    assert st.evict(10) == 0
    assert st.tree.blocks[HBM] == 4
    finish(st, pinned, 20)
    assert st.evictable_blocks() == 5 and st.evict(2) == 5  # whole leaves up to EVICT_MIN_BLOCKS
    assert st.tree.blocks[HBM] == 0


def test_partial_eviction_trims_a_long_leaf() -> None:
    st = make_strategy("prefix").bind(B, 1000)
    seq, _ = run_one(st, req(0, ((1, 40 * B),)))
    finish(st, seq, 40 * B)
    assert st.evict(2) == 16  # at least EVICT_MIN_BLOCKS, taken from the leaf's tail
    assert st.tree.blocks[HBM] == 24
    assert st.match(req(1, ((1, 40 * B), (2, 4)))) == 24 * B


@pytest.mark.parametrize("policy, survivor", [("lru", 1), ("lfu", 0), ("fifo", 1)])
def test_eviction_order(policy: str, survivor: int) -> None:
    """Three one-block prompts; 0 is used twice early, 1 is inserted last-but-one... see below.

    Insert 0, 2, 1 (in that order); hit 0 twice, then 1 once. Evicting two blocks leaves: LRU the
    most recent (1), LFU the most used (0), FIFO the last inserted (1).
    """
    st = make_strategy("prefix", eviction=policy).bind(B, 1000)
    for i in (0, 2, 1):
        seq, _ = run_one(st, req(i, ((i, 4),), out=2))
        finish(st, seq, 4)
    for i in (0, 0, 1):
        seq, hit = run_one(st, req(10 + i, ((i, 4), (99, 4))), 10 + i)
        assert hit == 4
        finish(st, seq, 4)
    assert st.evict(2) == 2
    left = [i for i in range(3) if st.match(req(20, ((i, 4), (98, 4)))) == 4]
    assert left == [survivor]


def test_dram_tier_takes_evicted_blocks_and_reloads_them() -> None:
    from simulator.engine.caches import CacheContext

    ctx = CacheContext(block_bytes=100.0, dram_bytes=2000.0, dram_bytes_per_s=1e4,
                       prefill_s=lambda tokens, context: 1.0 * tokens)  # recompute: 1 s/token
    st = make_strategy("prefix", dram=True, dram_fraction=1.0).bind(B, 1000, ctx)
    seq, _ = run_one(st, req(0, ((1, 16),)))
    finish(st, seq, 16)
    assert st.evict(4) == 4
    assert st.tree.blocks == [0, 4] and st.stats()["bytes_down"] == 400
    seq, hit = run_one(st, req(1, ((1, 16), (2, 4))), 1)
    adm_tiers = (seq.hit_tokens, st.tree.blocks)
    assert hit == 16 and adm_tiers[1] == [4, 0]
    assert st.stats()["bytes_up"] == 400


def test_tree_split_keeps_pieces_and_keys() -> None:
    t = RadixTree(B)
    n = t.add_child(t.root, ((1, 0, 6), (2, 0, 6)), 12, HBM)
    top = t.split(n, 8)
    assert top.pieces == ((1, 0, 6), (2, 0, 2)) and n.pieces == ((2, 2, 6),)
    assert t.root.children[top.key] is top and top.children[n.key] is n
    assert t.blocks == [3] and t.evictable == 3


def test_fifo_evicts_the_first_block_in_with_what_grew_below_it() -> None:
    """Issue 16: ``fifo`` gave exactly ``lru``'s results. Three one-block nodes, B = 4 tokens:

    insert [1] (node A), then [2] (C), then a request [1][3] hits A and grows [3] (D) below it.
    LRU evicts the least recently used leaves: C (last used when made), then D, keeping A. FIFO
    evicts the first block in, A, which goes after D (no match reaches D without A): it keeps C.
    Three follow-ups [1][5], [2][6], [1][3][7] then hit 4 + 0 + 4 = 8 tokens under LRU and
    0 + 4 + 0 = 4 under FIFO (FIFO by leaf creation evicted C and D like LRU: 8).
    """
    hits = {}
    for policy in ("lru", "fifo"):
        st = make_strategy("prefix", eviction=policy).bind(B, 1000)
        for i, segs in enumerate((((1, 4),), ((2, 4),), ((1, 4), (3, 4)))):
            seq, _ = run_one(st, req(i, segs), i)
            finish(st, seq, sum(t for _, t in segs))
        assert st.tree.blocks[HBM] == st.evictable_blocks() == 3
        assert st.evict(1) == 1 and st.evict(1) == 1
        follow = (((1, 4), (5, 4)), ((2, 4), (6, 4)), ((1, 4), (3, 4), (7, 4)))
        hits[policy] = [st.match(req(10 + i, segs)) for i, segs in enumerate(follow)]
    assert hits == {"lru": [4, 0, 4], "fifo": [0, 4, 0]}


def test_fifo_spares_a_pinned_prefix_and_evicts_the_oldest_free_block() -> None:
    """A running request pins A, the oldest block: FIFO passes over it to the oldest unreferenced
    one, C, then takes D (below A, younger than C); A stays while it is referenced."""
    st = make_strategy("prefix", eviction="fifo").bind(B, 1000)
    for i, segs in enumerate((((1, 4),), ((2, 4),), ((1, 4), (3, 4)))):
        seq, _ = run_one(st, req(i, segs), i)
        finish(st, seq, sum(t for _, t in segs))
    running, hit = run_one(st, req(5, ((1, 4), (8, 4))), 5)  # pins A only
    assert hit == 4 and st.evictable_blocks() == 2
    assert st.evict(1) == 1
    assert [st.match(req(10, segs)) for segs in (((2, 4), (6, 4)), ((1, 4), (3, 4), (7, 4)))] == [0, 8]
    assert st.evict(5) == 1 and st.evictable_blocks() == 0  # D; A stays, pinned
    finish(st, running, 8)


def test_fifo_counts_a_reload_from_dram_as_an_insertion() -> None:
    """A is inserted, moved to DRAM, then C is inserted and A reloaded by a hit (growing D below it).

    In HBM, A entered after C, so FIFO evicts C first (by creation order it would take D, then A).
    """
    from simulator.engine.caches import CacheContext

    ctx = CacheContext(block_bytes=100.0, dram_bytes=2000.0, dram_bytes_per_s=1e4,
                       prefill_s=lambda tokens, context: 1.0 * tokens)  # recompute 1 s/token: reload wins
    st = make_strategy("prefix", eviction="fifo", dram=True, dram_fraction=1.0).bind(B, 1000, ctx)
    seq, _ = run_one(st, req(0, ((1, 4),)))
    finish(st, seq, 4)
    assert st.evict(1) == 1 and st.tree.blocks == [0, 1]
    seq, _ = run_one(st, req(1, ((2, 4),)), 1)
    finish(st, seq, 4)
    seq, hit = run_one(st, req(2, ((1, 4), (3, 4))), 2)
    assert hit == 4 and st.tree.blocks == [2, 0]  # A reloaded
    finish(st, seq, 8)
    assert st.evict(1) == 1 and st.tree.blocks == [2, 1]
    probe = Seq(req(3, ((1, 4), (3, 4), (7, 4))), 3, 0, float("inf"))
    assert st.probe(probe, 8) == (8, 2)  # A and D still in HBM, unreferenced
    c = Seq(req(4, ((2, 4), (6, 4))), 4, 0, float("inf"))
    assert st.probe(c, 4) == (0, 0) and st.match(c.request) == 4  # C went down to DRAM (and would be reloaded)


def _tree_shape(node) -> tuple:  # type: ignore[no-untyped-def]
    """Everything the eviction order and later matches can see of a subtree, children in key order."""
    return (node.pieces, node.tokens, node.tier, node.ref, node.stamp, node.hits,
            tuple(_tree_shape(node.children[k]) for k in sorted(node.children, key=repr)))


@pytest.mark.parametrize("eviction, tiers", [("lru", {}), ("lfu", {}), ("lru", {"dram": True}),
                                             ("lfu", {"dram": True, "nvme": True})])
def test_fast_paths_evict_and_insert_as_the_general_ones(eviction: str, tiers: dict) -> None:
    """Eviction in one loop (`RadixTree.drop_lru`) and the offers skipped because they could only go
    stale leave the same trees, hits and freed blocks as the general path that offers everything and
    evicts by `pop_victim`, `split` and `detach`: chat-like sessions (shared system prompts, turns that
    carry the history and the previous answer) with eviction under a tight budget. LRU's queue of new
    nodes' entries (`RadixTree.fresh`) gives the order of one heap holding them all (a third state)."""
    import numpy as np

    from simulator.engine.caches import CacheContext

    ctx = CacheContext(block_bytes=100.0, dram_bytes=3000.0, nvme_bytes=6000.0, dram_bytes_per_s=1e4,
                       nvme_bytes_per_s=1e3, prefill_s=lambda tokens, context: 0.01 * tokens)
    fraction = {"dram_fraction": 1.0} if tiers.get("dram") else {}  # (a DRAM tier's share: with one only)
    states = [make_strategy("prefix", eviction=eviction, **fraction, **tiers).bind(B, 1000, ctx) for _ in range(3)]
    states[1]._lean_offers = False  # the reference: every offer, and the general eviction (not `drop_lru`,
    vars(states[1]).pop("evict", None)  # which a one-tier LRU state binds as its `evict`)
    states[2].tree._fresh = False  # the fast paths with every entry on the heap
    rng = np.random.default_rng(7)
    history: dict[int, tuple[tuple[int, int], ...]] = {}
    running: list[list[Seq]] = [[], [], []]
    for i in range(600):
        session = int(rng.integers(12))
        prev = history.get(session, ((100 + session % 3, int(rng.integers(5, 40))),))
        segments = (*prev, (1000 + i, int(rng.integers(1, 30))))
        r = req(i, segments, out=int(rng.integers(2, 25)), out_id=5000 + i)
        history[session] = (*segments, (5000 + i, r.output_tokens))
        keep, ask = int(rng.integers(1, 6)), int(rng.integers(1, 12))
        seen = []
        for st, live in zip(states, running, strict=True):
            seq = Seq(r, i, 0, float("inf"))
            max_hit = (r.prompt_tokens - 1) // B * B
            probe = st.probe(seq, max_hit)
            seq.hit_tokens = st.on_admit(seq, max_hit).hit_tokens
            shared = st.on_prefilled(seq, r.prompt_tokens)
            seq.hit_tokens = shared[0]
            live.append(seq)
            done = []
            while len(live) > keep:
                s = live.pop(0)
                tokens = s.request.prompt_tokens + s.request.output_tokens - 1
                done.append(st.on_finish(s, tokens, -(-tokens // B) - s.hit_tokens // B))
            freed = st.evict(ask) if st.tree.blocks[HBM] > 120 else 0
            seen.append((probe, seq.hit_tokens, shared, done, freed, st.tree.blocks, st.evictable_blocks()))
        assert seen[0] == seen[1] == seen[2], i
    assert _tree_shape(states[0].tree.root) == _tree_shape(states[1].tree.root) == _tree_shape(states[2].tree.root)
    assert states[0].stats() == states[1].stats() == states[2].stats() and states[0].stats()["evicted_blocks"] > 0


def test_a_leaf_larger_than_the_dram_tier_moves_down_in_tier_sized_tails() -> None:
    """helper-197: a 10-block leaf, a DRAM tier of 3 blocks and an NVMe tier of 100. The leaf was dropped whole
    (it fits no 3-block tier), NVMe kept nothing and the next request hit nothing. Now its tail of 3 blocks goes
    to DRAM, then the next 3 (pushing the first to NVMe), the next 3, and its first block last: DRAM holds that
    block, NVMe the 9 below it; 10 blocks went HBM -> DRAM and 9 DRAM -> NVMe (19 moved down), none dropped, and
    the whole prompt is reloaded (4 tokens from DRAM, 36 from NVMe, 10 blocks at 1,000 blocks/s: 0.01 s)."""
    from simulator.engine.caches import CacheContext

    ctx = CacheContext(block_bytes=1.0, dram_bytes=3.0, dram_bytes_per_s=1e3, nvme_bytes=100.0,
                       nvme_bytes_per_s=1e3, prefill_s=lambda tokens, context: 1.0 * tokens)  # reload wins
    st = make_strategy("prefix", dram=True, nvme=True, dram_fraction=1.0).bind(B, 1000, ctx)
    seq, _ = run_one(st, req(0, ((1, 40),)))
    assert finish(st, seq, 40) == 10
    assert st.evict(10) == 10
    assert st.tree.blocks == [0, 1, 9]
    stats = st.stats()
    assert (stats["dropped_blocks"], stats["bytes_down"]) == (0, 19.0)
    nxt = req(1, ((1, 40), (2, 4)))
    assert st.match(nxt) == 40
    seq = Seq(nxt, 1, 0, float("inf"))
    adm = st.on_admit(seq, 40)
    assert (adm.hit_tokens, adm.dram_tokens, adm.nvme_tokens, adm.reload_blocks) == (40, 4, 36, 10)
    assert adm.reload_s == pytest.approx(0.01)
    assert st.tree.blocks == [10, 0, 0]
