"""The radix tree's piece arithmetic: `cut`, `trim`, `seek`, `block_key` (and their usual cases), and resumed walks."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.engine.caches.radix import RadixTree, block_key, cut, cut_back, seek, trim

Pieces = tuple[tuple[int, int, int], ...]


def cut_reference(pieces: Pieces, j: int, off: int, n: int) -> tuple[Pieces, int, int, int]:
    """`cut` as a token-by-piece loop: what its usual cases must equal."""
    out = []
    want = n
    while n > 0 and j < len(pieces):
        sid, _, b = pieces[j]
        take = min(n, b - off)
        out.append((sid, off, off + take))
        n -= take
        off += take
        if off == b:
            j += 1
            off = pieces[j][1] if j < len(pieces) else 0
    return tuple(out), j, off, want - n


pieces_st = st.lists(st.tuples(st.integers(0, 3), st.integers(0, 40), st.integers(0, 600)), max_size=8).map(
    lambda xs: tuple((sid, a, a + length) for sid, a, length in xs))


@settings(max_examples=400)
@given(pieces_st, st.integers(0, 9), st.integers(0, 700), st.integers(0, 2500))
def test_cut_equals_the_reference_loop(pieces: Pieces, j: int, into: int, n: int) -> None:
    j = min(j, len(pieces))
    off = pieces[j][1] + min(into, pieces[j][2] - pieces[j][1]) if j < len(pieces) else 0
    assert cut(pieces, j, off, n) == cut_reference(pieces, j, off, n)


@settings(max_examples=300)
@given(pieces_st.filter(lambda p: sum(b - a for _, a, b in p) > 0), st.integers(0, 3000))
def test_trim_from_the_end_keeps_what_cut_keeps_from_the_start(pieces: Pieces, tokens: int) -> None:
    total = sum(b - a for _, a, b in pieces)
    tokens = min(tokens, total - 1)
    assert trim(pieces, tokens) == cut(pieces, 0, pieces[0][1], total - tokens)[0]


@settings(max_examples=200)
@given(pieces_st.filter(bool), st.integers(0, 3000))
def test_seek_lands_where_cut_leaves_off(pieces: Pieces, tokens: int) -> None:
    total = sum(b - a for _, a, b in pieces)
    tokens = min(tokens, total)
    _, j, off, _ = cut(pieces, 0, pieces[0][1], tokens)
    assert seek(pieces, tokens) == (j, off)


@settings(max_examples=300)
@given(pieces_st.filter(bool), st.integers(0, 9), st.integers(0, 700), st.integers(0, 3000),
       st.sampled_from([1, 4, 16]))
def test_seek_from_a_position_and_block_keys_agree_with_cut(pieces: Pieces, j: int, into: int, tokens: int,
                                                             block: int) -> None:
    j = min(j, len(pieces) - 1)
    off = pieces[j][1] + min(into, pieces[j][2] - pieces[j][1])
    _, j_end, off_end, _ = cut(pieces, j, off, tokens)
    assert seek(pieces, tokens, j, off) == (j_end, off_end)
    key, _, _, got = cut(pieces, j, off, block)
    assert block_key(pieces, j, off, block) == (sum(key, ()) if got == block else None)  # flattened


def _chain(*segments: tuple[int, int]) -> Pieces:
    return tuple((sid, 0, t) for sid, t in segments)


def test_a_walk_resumed_below_a_node_is_the_rest_of_the_walk_from_the_root() -> None:
    """`resume` matches the nodes above (no key lookups); a wrong node or position gives None."""
    tree = RadixTree(16)
    shared = _chain((1, 100), (2, 37), (3, 250))
    node = tree.add_child(tree.root, (*shared[:1], (2, 0, 28)), 128, 0)  # 100 + 28 tokens, 8 blocks
    below = tree.add_child(node, ((2, 28, 37), (3, 0, 247)), 256, 0)
    tree.add_child(below, ((3, 247, 250), (9, 0, 13)), 16, 0)
    request = (*shared, (9, 0, 40))
    path, last = tree.walk(request, 10_000)
    assert path[:2] == [node, below] and len(path) == 3
    stamp = node.stamp
    at = tree.resume(node, request, 128)
    assert at is not None and at[:2] == (node, 128) and node.stamp > stamp  # touched
    assert tree.walk(request, 10_000, at) == (path[1:], last)
    assert tree.walk(request, 300, at) == ([below], 288 - 128)
    assert tree.resume(node, request, 100) is None and tree.resume(below, _chain((5, 400)), 384) is None


def test_touch_path_stamps_the_path_as_resume_does() -> None:
    """`touch_path` (the prefix cache's resume from a held node) leaves the hits `resume` leaves, and stamps
    in the order `resume` leaves them among all the tree's (its clock moves on by the blocks, not the nodes)."""
    trees = [RadixTree(16), RadixTree(16)]
    shared = _chain((1, 100), (2, 37), (3, 250))
    request = (*shared, (9, 0, 40))
    ends = []
    for tree in trees:
        node = tree.add_child(tree.root, (*shared[:1], (2, 0, 28)), 128, 0)
        below = tree.add_child(node, ((2, 28, 37), (3, 0, 247)), 256, 0)
        tree.add_child(below, ((3, 247, 250), (9, 0, 13)), 16, 0)
        tree.add_child(tree.root, ((5, 0, 32),), 32, 0)
        tree.touch(node)
        ends.append(below)
    assert trees[0].resume(ends[0], request, 384) is not None
    trees[1].touch_path(ends[1], 384 // 16)
    for tree in trees:
        tree.add_child(tree.root, ((6, 0, 16),), 16, 0)  # a later access: its stamp follows the path's
    assert _ranked(trees[0]) == _ranked(trees[1])


def _ranked(tree: RadixTree) -> list[tuple[int, int, int, int]]:
    """`_nodes`, each stamp replaced by its rank among the tree's (unique: no two nodes share one here)."""
    nodes = _nodes(tree)
    order = sorted(stamp for _, stamp, _, _ in nodes)
    assert len(set(order)) == len(order)
    return [(tokens, order.index(stamp), hits, ref) for tokens, stamp, hits, ref in nodes]


def _nodes(tree: RadixTree) -> list[tuple[int, int, int, int]]:
    """Every node's tokens, stamp, hits and references, depth first in key order."""
    out, stack = [], [tree.root]
    while stack:
        node = stack.pop()
        out.append((node.tokens, node.stamp, node.hits, node.ref))
        stack.extend(node.children[k] for k in sorted(node.children, key=repr))
    return out


def _queued(tree: RadixTree) -> list[tuple[object, int]]:
    """The eviction entries of every tier: priority and tokens."""
    return sorted((prio, node.tokens) for lists in (tree.heaps, tree.fresh) for q in lists for prio, _, node in q)


def test_a_path_touched_and_let_go_in_one_pass_is_as_unpin_leaves_it() -> None:
    """``touch_path(node, blocks, release=True)``, then a new HBM child of `node`, leave the nodes (stamps,
    hits, references), evictable blocks and eviction entries that `touch_path`, the child and
    `unpin` leave (the prefix cache's finished sequence). A child made with ``pin=True`` has the
    references `pin_below` would give it and no entry (the prefix cache's prefilled sequence).
    LRU and LFU, one tier and more."""
    shared = _chain((1, 100), (2, 37), (3, 250))
    for eviction, tiers in (("lru", 1), ("lfu", 1), ("lru", 2), ("lfu", 3)):
        trees = [RadixTree(16, eviction, tiers) for _ in range(2)]
        for one_pass, tree in enumerate(trees):
            node = tree.add_child(tree.root, (*shared[:1], (2, 0, 28)), 128, 0)
            tree.add_child(tree.root, ((5, 0, 32),), 32, 0)
            below = tree.add_child(node, ((2, 28, 37), (3, 0, 247)), 256, 0)
            for _ in range(2):  # two sequences hold it: one lets go
                tree.pin(below)
            if one_pass:
                tree.touch_path(below, 384 // 16, release=True)
                tree.add_child(below, ((3, 247, 250), (9, 0, 13)), 16, 0)
            else:
                tree.touch_path(below, 384 // 16)
                tree.add_child(below, ((3, 247, 250), (9, 0, 13)), 16, 0)
                tree.unpin(below)
            tree.touch_path(below, 384 // 16, release=one_pass == 1)
            tree.add_child(below, ((3, 247, 250), (7, 0, 45)), 48, 0)
            if not one_pass:
                tree.unpin(below)
        assert _nodes(trees[0]) == _nodes(trees[1]) and trees[0].evictable == trees[1].evictable == 8 + 2 + 16 + 1 + 3
        assert _queued(trees[0]) == _queued(trees[1]), (eviction, tiers)
        entries = len(_queued(trees[0]))
        evictable = trees[0].evictable
        held = trees[0].add_child(below, ((3, 247, 250), (8, 0, 29)), 32, 0, pin=True)
        assert held.ref == 1 and trees[0].evictable == evictable and len(_queued(trees[0])) == entries


def walk_reference(tree: RadixTree, pieces: Pieces, limit: int) -> tuple[list[object], int, int, int]:
    """`walk_at` as one key lookup (`block_key`) and one `_common` a node: what its inlined cases must equal."""
    B = tree.B
    limit -= limit % B
    node, pos, j = tree.root, 0, 0
    off = pieces[0][1] if pieces else 0
    path: list[object] = []
    last = 0
    while pos < limit and j < len(pieces) and node.children:
        key = block_key(pieces, j, off, B)
        child = node.children.get(key) if key is not None else None
        if child is None:
            break
        m, j_end, off_end = tree._common(child.pieces, pieces, j, off)
        m = min(m - m % B, limit - pos)
        path.append(child)
        last = m
        pos += m
        if m < child.tokens:
            break
        j, off = j_end, off_end
        node = child
    return path, last, j, off


chains_st = st.lists(st.lists(st.tuples(st.integers(0, 4), st.sampled_from([3, 5, 8, 16, 21])), min_size=1, max_size=9),
                     min_size=1, max_size=8)


@settings(max_examples=300)
@given(chains_st, chains_st, st.sampled_from([1, 4, 8]), st.integers(0, 200))
def test_walks_equal_the_reference_walk(stored: list[list[tuple[int, int]]], asked: list[list[tuple[int, int]]],
                                        block: int, limit: int) -> None:
    """`walk_at` (its usual key cases and `_common` inlined) matches as `block_key` and `_common` node by node
    do, on trees of nodes of many pieces grown as the prefix cache grows them (walk, split a partial match, add
    the rest's whole blocks)."""
    tree = RadixTree(block)
    for chain in stored:
        pieces = _chain(*chain)
        total = sum(t for _, t in chain)
        path, last, j, off = tree.walk_at(pieces, total)
        parent, pos = tree.root, 0
        if path:
            parent = path[-1] if last == path[-1].tokens else tree.split(path[-1], last)
            pos = sum(node.tokens for node in path[:-1]) + last
            j, off = seek(pieces, pos)
        rest = total - pos - (total - pos) % block
        if rest > 0:
            tree.add_child(parent, cut(pieces, j, off, rest)[0], rest, 0)
    for chain in asked + stored:
        pieces = _chain(*chain)
        assert tree.walk_at(pieces, limit) == walk_reference(tree, pieces, limit)
        assert tree.walk_at(pieces, 10_000) == walk_reference(tree, pieces, 10_000)


@settings(max_examples=500)
@given(pieces_st, st.integers(0, 9), st.integers(0, 700), st.integers(0, 2500))
def test_cut_found_from_the_end_equals_cut(pieces: Pieces, j: int, into: int, n: int) -> None:
    """`cut_back`, told the tokens after the cut's end, cuts `n` > 0 tokens as `cut` (zero-length pieces
    included)."""
    j = min(j, len(pieces) - 1)
    if j < 0:
        return
    off = pieces[j][1] + min(into, pieces[j][2] - pieces[j][1])
    left = pieces[j][2] - off + sum(b - a for _, a, b in pieces[j + 1:])  # tokens from (j, off) on
    n = min(n, left)
    if n <= 0:
        return
    assert cut_back(pieces, j, off, n, left - n) == cut(pieces, j, off, n)
