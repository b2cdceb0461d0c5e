"""A prefix cache under a windowed layout counts a window for each chain it keeps.

Blocks hold ``block_tokens · m`` bytes (`simulator.engine.geometry`), so a cached chain of ``d`` tokens
needs ``overhead(d)`` blocks beside its ``ceil(d / B)``; the chain end (a leaf of the radix tree) carries
them (`Node.extra`) once no running sequence references it (one that does carries them in ``Seq.ov``).
The cache's HBM bytes are then at most what its blocks count:

    m · Σ_{HBM nodes} tokens + Σ_{unreferenced HBM leaves} (sequence_bytes(d) − m · d)  ≤  blocks[HBM] · block_bytes
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from simulator.engine import EngineConfig, run
from simulator.engine.caches.radix import HBM, Node, RadixTree
from simulator.engine.geometry import BlockGeometry
from simulator.engine.replica import Replica
from simulator.kv import KVLayout, parse_layout, sequence_bytes
from simulator.models import ModelSpec, get_model
from tests.engine.conftest import after_plans_and_commits, expected_used
from tests.engine.test_differential import _config, _fast_forward_equals_stepping, _requests
from tests.engine.test_windows import _timer
from workloads.request import Request

BYTES_SLACK = 1e-6  # bytes: float sums of per-layer bytes


def _leaves(tree: RadixTree) -> list[tuple[Node, int]]:
    """``(leaf, depth)`` of every leaf of `tree` (chain ends: nodes without children)."""
    out: list[tuple[Node, int]] = []
    stack = [(tree.root, 0)]
    while stack:
        node, depth = stack.pop()
        if not node.children and node is not tree.root:
            out.append((node, depth))
        stack.extend((c, depth + c.tokens) for c in node.children.values())
    return out


def _hbm_bytes(tree: RadixTree, model: ModelSpec, layout: KVLayout, geo: BlockGeometry) -> float:
    """The left side of the module docstring's bound: the cache's HBM nodes at ``m`` a token, and the
    windows of the unreferenced HBM chains it keeps."""
    m = geo.bytes_per_token
    total, stack = 0.0, list(tree.root.children.values())
    while stack:
        node = stack.pop()
        stack.extend(node.children.values())
        if node.tier == HBM:
            total += m * node.tokens
    for leaf, depth in _leaves(tree):
        if leaf.tier == HBM and not leaf.ref:
            total += sequence_bytes(model, layout, depth) - m * depth
    return total


def test_a_windowed_prefix_cache_keeps_no_more_chains_than_the_pool_holds(monkeypatch: pytest.MonkeyPatch) -> None:
    """The measured case: Gemma-3-27B native (sliding window 1,024 on 52 of 62 layers) on one H100, 3,000
    distinct 1,000-token prompts a second apart. The cache kept 12,795 blocks = 203 prefixes whose KV is
    103 GB in a 17 GB pool; now, after every commit, the bytes of the chains it keeps (each
    ``sequence_bytes(depth)``, the prompts share nothing) are within its blocks and the running sequences'
    overheads, the used count is exact and within the pool, and each unreferenced chain is counted within
    two blocks of its bytes (an upper bound that is close)."""
    model, layout = get_model("Gemma-3-27B"), parse_layout("native")
    config = EngineConfig(model="Gemma-3-27B", node="1xH100", tp=1, layout=layout, cache="prefix")
    reqs = [Request(id=i, arrival_s=i * 1.0, prompt_tokens=1000, output_tokens=2, segments=((i + 1, 1000),))
            for i in range(3000)]
    bad: list[Any] = []
    most_chains, pool_bytes = [0], [0.0]

    def check(rep: Replica, where: str) -> None:
        tree, geo = rep.cache.tree, rep.geometry  # type: ignore[attr-defined]
        pool_bytes[0] = rep.total_blocks * geo.block_bytes
        if not 0 <= rep.used <= rep.total_blocks or expected_used(rep) != rep.used:
            bad.append((where, "used", rep.used, expected_used(rep), rep.total_blocks))
        leaves = _leaves(tree)
        most_chains[0] = max(most_chains[0], len(leaves))
        held = sum(sequence_bytes(model, layout, d) for _, d in leaves)
        if held > (tree.blocks[HBM] + rep.ov_running) * geo.block_bytes + BYTES_SLACK:
            bad.append((where, "held", held, tree.blocks[HBM], rep.ov_running))
        for leaf, d in leaves:
            if leaf.ref:
                continue
            counted = (leaf.tokens // geo.block_tokens + leaf.extra) * geo.block_bytes
            if not 0 <= counted - sequence_bytes(model, layout, d) < 2 * geo.block_bytes:
                bad.append((where, "chain", d, leaf.tokens, leaf.extra))

    after_plans_and_commits(monkeypatch, check)
    result = run(config, reqs)
    assert result.summary["completed"] == len(reqs)
    assert not bad, bad[:5]
    assert 0 < most_chains[0] * sequence_bytes(model, layout, 992) <= pool_bytes[0]  # 207 chains before: 34 now


@pytest.mark.parametrize("seed", range(400, 416))
def test_a_windowed_prefix_cache_counts_its_chains_windows(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """`test_differential`'s random configurations with the prefix cache (any eviction order and tiers)
    under a drawn compression window: after every plan and commit the used count is exact and within the
    pool, the cache's HBM bytes are within its HBM blocks (module docstring), every unreferenced leaf
    carries its chain's window (``extra ≥ overhead(depth)``; none other carries one), and fast-forward
    equals stepping."""
    rng = np.random.default_rng(seed)
    layout = parse_layout(f"compress:{int(rng.choice([2, 4, 8]))}:{int(rng.choice([16, 64, 300, 1000]))}")
    config = _config(rng)
    params = dict(config.cache_params) if config.cache == "prefix" else {"eviction": "lru"}
    config = replace(config, layout=layout, cache="prefix", cache_params=params,
                     kv_blocks=int(rng.choice([300, 800, 2500])), n_nodes=1, tp=8, pp=1, more_pools=())
    config = replace(config, scheduler=replace(config.scheduler, queue_timeout_s=math.inf, max_num_seqs=64))
    model = get_model(str(config.model))
    bad: list[Any] = []
    windows = [0]  # checks that found a leaf carrying a window

    def check(rep: Replica, where: str) -> None:
        tree, geo = rep.cache.tree, rep.geometry  # type: ignore[attr-defined]
        if not 0 <= rep.used <= rep.total_blocks or expected_used(rep) != rep.used:
            bad.append((where, "used", rep.used, expected_used(rep), rep.total_blocks))
        if _hbm_bytes(tree, model, layout, geo) > tree.blocks[HBM] * geo.block_bytes + BYTES_SLACK:
            bad.append((where, "bytes", _hbm_bytes(tree, model, layout, geo), tree.blocks[HBM]))
        windows[0] += any(leaf.extra for leaf, _ in _leaves(tree))
        for leaf, d in _leaves(tree):
            if not leaf.ref and leaf.extra < geo.overhead(d):
                bad.append((where, "leaf", d, leaf.extra, geo.overhead(d)))
        stack = list(tree.root.children.values())
        while stack:
            node = stack.pop()
            stack.extend(node.children.values())
            if node.children and node.extra:
                bad.append((where, "inner", node.tokens, node.extra))

    after_plans_and_commits(monkeypatch, check)
    reqs = _requests(rng, int(rng.choice([20, 60, 150])))
    _fast_forward_equals_stepping(config, reqs, _timer(rng))
    assert not bad, bad[:5]
    assert windows[0] > 0


def test_an_evicted_leafs_trim_and_its_parent_carry_their_chains_windows() -> None:
    """`RadixTree.drop_lru` on a windowed tree: a trimmed leaf keeps the window of its shorter chain, a
    parent left a leaf takes its own chain's, and the blocks returned are the net freed."""
    B = 16
    tree = RadixTree(B, overhead=lambda tokens: tokens // 100)  # one window block a 100 tokens

    top = tree.add_child(tree.root, ((1, 0, 320),), 320, HBM)  # 20 blocks
    leaf = tree.add_child(top, ((2, 0, 320),), 320, HBM)  # 20 blocks, a chain of 640 tokens
    tree.set_extra(leaf, 6)
    assert (tree.blocks[HBM], tree.evictable) == (46, 46)
    freed = tree.drop_lru(4, min_blocks=4)  # trims 4 blocks: 576 tokens, window 5
    assert (freed, leaf.tokens, leaf.extra, tree.blocks[HBM]) == (5, 256, 5, 41)
    # the leaf goes (16 + 5 blocks) and top takes a window of 3 (net 18); then 12 of top's 20 blocks, its
    # window 3 -> 1 for its 128 tokens left (net 14): 32 freed, 8 + 1 blocks left
    freed = tree.drop_lru(30, min_blocks=4)
    assert (freed, leaf.parent, top.tokens, top.extra) == (32, None, 128, 1)
    assert tree.blocks[HBM] == tree.evictable == 9


@pytest.mark.parametrize("seed", [10, 30, 35, 38, 103, 124, 166, 190])
def test_a_windowed_chain_reloaded_or_hit_keeps_the_pool_and_the_modes_alike(seed: int,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """helper-139, on configurations drawn with a window or compression and the prefix cache over DRAM (maybe
    NVMe) in small pools: a chain end reloaded into HBM brought its window beside the sequence's own, which
    admission had not counted (used 63 of 60 blocks); and a hit leaf's window, pinned, was counted as taken
    in the probe, so evicting that leaf during a planned jump opened room that stepping saw and the jump did
    not (queue_s 6.2 s apart). A reloaded chain end now leaves its window behind and a sequence admitted onto
    a whole chain end takes its window over (`_PrefixState._adopt`): after every plan and commit the used
    count is exact and within the pool, and fast-forward equals stepping."""
    rng = np.random.default_rng(seed)
    layout = parse_layout(str(rng.choice(["compress:2:16", "compress:4:64", "compress:8:300", "compress:3:17+int4",
                                          "fp8"])))
    model = str(rng.choice(["Llama-3.1-8B", "Gemma-3-27B"]))  # fp8 on Gemma-3-27B: its sliding window alone
    config = replace(_config(rng), model=model, layout=layout, cache="prefix",
                     cache_params={"eviction": str(rng.choice(["lru", "lfu", "fifo"])), "dram": True,
                                   "nvme": bool(rng.random() < 0.5)},
                     kv_blocks=int(rng.choice([60, 150, 300, 800])), n_nodes=1, tp=8, pp=1, more_pools=())
    config = replace(config, scheduler=replace(config.scheduler, queue_timeout_s=math.inf, max_num_seqs=64))
    bad: list[Any] = []

    def check(rep: Replica, where: str) -> None:
        if not 0 <= rep.used <= rep.total_blocks or expected_used(rep) != rep.used:
            bad.append((where, rep.used, expected_used(rep), rep.total_blocks))

    after_plans_and_commits(monkeypatch, check)
    reqs = _requests(rng, int(rng.choice([20, 60, 150])))
    _fast_forward_equals_stepping(config, reqs, _timer(rng))
    assert not bad, bad[:5]


def test_a_chain_end_moved_down_a_tier_fits_it_with_the_window_it_gains_there() -> None:
    """helper-141: moving a node to DRAM dropped its DRAM child to make room, which left the node a chain end
    with a window of its own (3 blocks here) that the room made did not count: DRAM held 23 blocks of 20."""
    from simulator.engine.caches import CacheContext
    from simulator.engine.caches.prefix import _PrefixState

    state = _PrefixState(16, "lru", ("dram",), CacheContext(block_bytes=1.0, dram_bytes=20.0,
                                                           window_overhead=lambda tokens: tokens // 100))
    tree = state.tree
    top = tree.add_child(tree.root, ((1, 0, 320),), 320, HBM)  # 20 blocks
    leaf = tree.add_child(top, ((2, 0, 160),), 160, HBM)  # 10 blocks, a chain of 480 tokens
    tree.set_extra(leaf, 4)
    state.evict(14)  # the leaf and its window go to DRAM: 14 of its 20 blocks
    assert (tree.blocks[HBM], tree.blocks[1]) == (20, 14)
    state.evict(20)  # top's 20 + its window 3 cannot fit beside the leaf: the leaf is dropped, then top dropped too
    assert tree.blocks == [0, 0]


def test_a_swapped_sequence_recomputed_to_unblock_a_replica_leaves_its_chain_end_its_window(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """helper-148: two requests swapped out, neither able to come back beside the other's pinned prompt, so the
    replica drops request 0's host copy and recomputes it (`BlockPool._unblock_empty_replica`); that unpinned its
    320-token chain end with no window (`on_finish` with no private blocks), and request 0 came back onto a
    trimmed 64-token end whose window no one held (`resume_hit_tokens` 64). Now the chain end takes its window
    from the free blocks; every unreferenced leaf carries its chain's window at every plan and commit, the used
    count exact."""
    from simulator.engine import SchedulerConfig
    from simulator.engine.pool import BlockPool

    layout = parse_layout("compress:4:64")
    config = EngineConfig(model="Llama-3.1-8B", node="1xH100", tp=1, layout=layout, cache="prefix", kv_blocks=100,
                          block_tokens=16,
                          scheduler=SchedulerConfig(preemption="swap", watermark=0.1, max_num_seqs=8))
    reqs = [Request(id=0, arrival_s=0.0, prompt_tokens=320, output_tokens=600, segments=((1, 320),)),
            Request(id=1, arrival_s=0.001, prompt_tokens=480, output_tokens=600, segments=((2, 480),))]
    bad: list[Any] = []
    unblocks: list[tuple[int, int]] = []

    def check(rep: Replica, where: str) -> None:
        tree, geo = rep.cache.tree, rep.geometry  # type: ignore[attr-defined]
        if not 0 <= rep.used <= rep.total_blocks or expected_used(rep) != rep.used:
            bad.append((where, "used", rep.used, expected_used(rep)))
        bad.extend((where, d, leaf.extra, geo.overhead(d)) for leaf, d in _leaves(tree)
                   if not leaf.ref and leaf.extra < geo.overhead(d))

    unblock = BlockPool._unblock_empty_replica

    def unblock_seen(self: Any, now: float) -> None:
        unblock(self, now)
        ends = [(d, leaf.extra) for leaf, d in _leaves(self.cache.tree) if not leaf.ref]
        unblocks.extend(ends)

    after_plans_and_commits(monkeypatch, check)
    monkeypatch.setattr(BlockPool, "_unblock_empty_replica", unblock_seen)
    result = run(config, reqs)
    assert unblocks == [(320, 15)]  # the chain end of request 0's prompt, with overhead(320) = 15 blocks
    assert not bad, bad[:5]
    s = result.summary
    assert s["completed"] == 2 and s["resume_hit_tokens"] == 0
    assert s["kv_utilization"] == pytest.approx(0.87496, abs=1e-5)  # 0.87644 while the window went uncounted
