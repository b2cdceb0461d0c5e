"""A radix tree over token blocks (SGLang's RadixAttention), with tiers and eviction order.

A prompt is a chain of segments; its tokens are *pieces* ``(segment_id, start, end)`` (tokens
``start..end`` of segment ``segment_id``). A node holds a run of whole blocks of
``block_tokens`` tokens as a tuple of pieces, so matching costs O(nodes on the path · pieces
per node), not O(blocks). A node's children are keyed by their *first block's key*: the pieces
of its first ``block_tokens`` tokens, flattened into one tuple (``(sid, start, end)`` for a block
within one segment, ``(sid, start, end, sid2, start2, end2)`` for one that straddles two, and so
on: pieces are triples, so the flat form is as distinct as the pieces; a lookup then builds one
tuple and hashes no nested one), so two branches that diverge inside a block are distinct
children. A partial last block is never stored: pages are blocks.

Tiers: ``HBM = 0``, ``DRAM = 1``, ``NVME = 2``. Along any root-to-leaf path the tier never
decreases (a node leaves HBM only once no child is in HBM, and so on down). A node in tier
``t`` is a *tier leaf* when no child is in tier ``t``; only unreferenced tier leaves are
evicted (moved one tier down, or dropped from the last tier with their subtree).

Eviction order per tier is a lazy heap of ``(priority, tie, node)``; stale entries are skipped on
pop. LRU (``priority = last access``) and LFU (``(hits, last access)``) keep the unreferenced tier
leaves there and evict the first. A node gets an entry whenever it becomes an unreferenced tier leaf
(created, unpinned, its last child in the tier gone) and a fresh one when a pop finds it touched
since; last-access stamps are unique among tier leaves (a split's halves share one, but one is the
other's ancestor), so the victim is the candidate of least priority whatever stale entries the heap
holds beside it: callers may skip an offer that could only go stale (`drop_lru`, and the prefix
cache's lean offers, rely on it). LRU queues a new node's entry on a list of its own, ``fresh``, not
on the heap: a new node's stamp is the clock's newest, so that list is in order as it grows, and the
tier's first entry is the lesser of its head and the heap's. Entries come off in the order one heap
would give, and the heap keeps only older stamps (nodes unpinned, parents left leaves, refreshed
entries): ~3 entries in chat-4k-prefix instead of ~2,000, so taking one off sifts through none. FIFO
is the order in which blocks entered the tier (``born``: the node was created, reloaded into HBM or
moved down, whichever came last); its heap keeps *every* unreferenced node of the tier, and the
oldest goes first. That node is seldom a tier leaf, since a prefix is older than what grew below it,
and the invariant above forbids emptying it while its descendants stay (a match walks from the root:
they could never be hit again). So FIFO evicts the oldest node's subtree in the tier leaf by leaf,
the oldest child's branch first, and then the node: the oldest block leaves as early as the
invariant allows, and a younger one leaves before it only if it hangs below it. None of them is
referenced: a reference pins the whole path to the root. (Ordering only tier leaves by their own
creation gives LRU's order: a request that reaches a leaf grows new leaves below it, so a leaf is
rarely accessed once created, and a parent, touched before each child was made, follows its last
child out of either heap.) Clocks are logical (one tick per access, a touched path's blocks per
`touch_path`; one per tier entry), so no simulated time is needed.

Windows: under a layout with sliding windows or windowed compression (``overhead``, the block geometry's
`BlockGeometry.overhead`) a chain of ``d`` tokens needs ``overhead(d)`` blocks beside its tokens'
(blocks hold the full-context layers' bytes). A leaf carries them as ``extra`` (`set_extra`), counted in
``blocks`` of its tier and in ``evictable`` while unreferenced in HBM; no inner node carries any (a
chain through it ends below, with a window of its own), so of a referenced path only its end may: `pin`,
`unpin`, `pin_below` and `touch_path` look at that one alone. A leaf's window goes with it when it moves
down a tier or goes (the prefix cache drops it when a reload brings the leaf back into HBM, or a
sequence is admitted onto it: that sequence's own window covers it); a leaf that gets a child gives its
window up (`add_child`: the new end's is its sequence's until the cache sets it); an unreferenced parent
left a leaf takes its own chain's (`detach`, `drop_lru`); a trimmed leaf keeps its shorter chain's
(`drop_lru`); a split leaves it on the lower half, the leaf. Without windows every ``extra`` is 0 and
nothing of this runs but those checks.
"""

from __future__ import annotations

import heapq
import itertools
from collections import deque
from collections.abc import Callable
from typing import Any

HBM, DRAM, NVME = 0, 1, 2
EVICTION_POLICIES = ("lru", "lfu", "fifo")
EVICT_MIN_BLOCKS = 16  # evict at least this much of a leaf at once: decode growth asks for 1 block a step
Piece = tuple[Any, int, int]
Key = tuple[Any, ...]  # a block's pieces, flattened: (sid, start, end, sid2, start2, end2, ...)


class Node:
    """A run of whole blocks on one radix path."""

    # born: when the node entered its tier (FIFO order); stamp: last access (LRU); hits: accesses (LFU);
    # extra: window overhead blocks a leaf holds beside its tokens' (`RadixTree` docstring; 0 elsewhere)
    __slots__ = ("born", "children", "extra", "hits", "key", "parent", "pieces", "ref", "stamp", "tier", "tokens")

    def __init__(self, parent: Node | None, key: Key, pieces: tuple[Piece, ...], tokens: int,
                 tier: int, stamp: int, born: int) -> None:
        self.parent = parent
        self.key = key
        self.pieces = pieces
        self.tokens = tokens
        self.children: dict[Key, Node] = {}
        self.ref = 0
        self.tier = tier
        self.stamp = stamp
        self.born = born
        self.hits = 0
        self.extra = 0

    def __repr__(self) -> str:
        return f"Node(tokens={self.tokens}, tier={self.tier}, ref={self.ref}, pieces={self.pieces})"


def cut(pieces: tuple[Piece, ...], j: int, off: int, n: int) -> tuple[tuple[Piece, ...], int, int, int]:
    """Up to `n` tokens of `pieces` from piece `j` at segment offset `off`: ``(pieces, j, off, taken)``:
    the rest of piece j, then whole pieces (as they are), then part of one."""
    count = len(pieces)
    if n <= 0 or j >= count:
        return (), j, off, 0
    sid, _, b = pieces[j]
    end = off + n
    if end < b:  # the usual case: the tokens lie within piece j
        return ((sid, off, end),), j, end, n
    head = (sid, off, b)
    j += 1
    left = end - b  # the tokens past piece j
    k = j
    while left and k < count:
        sid, a, b = pieces[k]
        if b - a > left:  # part of piece k
            if k == j:  # its start, the other usual case: no whole piece between, none to unpack (a list built)
                return (head, (sid, a, a + left)), k, a + left, n
            return (head, *pieces[j:k], (sid, a, a + left)), k, a + left, n
        left -= b - a
        k += 1
    return (head, *pieces[j:k]), k, (pieces[k][1] if k < count else 0), n - left


def cut_back(pieces: tuple[Piece, ...], j: int, off: int, n: int,
             after: int) -> tuple[tuple[Piece, ...], int, int, int]:
    """``cut(pieces, j, off, n)`` (`n` > 0) where `after` ≥ 0 tokens of `pieces` follow the cut's end: the
    pieces it ends in found from the end, not by stepping from piece j (an insert's cut ends near its
    sequence's end, and a trace of hashed blocks holds tens of segments: ~500 instructions a piece stepped
    over).

    From the end, ``S_k`` (the tokens from piece k on) grows; `cut` stops at the first k after j whose
    start is the cut's end (``S_k = after``) or that holds it (``S_{k+1} < after``): k moves down while
    piece k − 1 is such a one too (the k that are form one run up to the end, zero-length pieces
    included), and the cut takes ``S_k − after`` tokens of piece k."""
    sid, _, b = pieces[j]
    if off + n < b:  # within piece j (`cut`'s usual case)
        return ((sid, off, off + n),), j, off + n, n
    k = len(pieces)
    s = 0  # S_k
    while k > j + 1:
        _, a2, b2 = pieces[k - 1]
        if s < after or s + b2 - a2 == after:
            k -= 1
            s += b2 - a2
        else:
            break
    left = s - after  # ≥ 0: piece k − 1 is not such a one (or is piece j, which ends before the cut's end)
    if not left:
        return ((sid, off, b), *pieces[j + 1:k]), k, (pieces[k][1] if k < len(pieces) else 0), n
    sid2, a, _ = pieces[k]
    return ((sid, off, b), *pieces[j + 1:k], (sid2, a, a + left)), k, a + left, n


def trim(pieces: tuple[Piece, ...], tokens: int) -> tuple[Piece, ...]:
    """`pieces` less their last `tokens` (fewer than they hold): ``cut(pieces, 0, start, total - tokens)[0]``,
    found from the end (an eviction trims a leaf's tail, usually within its last piece)."""
    k = len(pieces) - 1
    sid, a, b = pieces[k]
    while b - a <= tokens:  # whole pieces go (and an empty one left at the end, as `cut` leaves none)
        tokens -= b - a
        k -= 1
        sid, a, b = pieces[k]
    if tokens:
        return pieces[:k] + ((sid, a, b - tokens),)  # noqa: RUF005  (concatenation: no unpacking)
    return pieces[:k + 1]


def seek(pieces: tuple[Piece, ...], tokens: int, j: int = 0, off: int | None = None) -> tuple[int, int]:
    """``(j, off)`` where ``cut(pieces, j, off, tokens)`` leaves off, without building the cut (from
    the start of `pieces` by default)."""
    count = len(pieces)
    if off is None:
        off = pieces[j][1] if j < count else 0
    while tokens > 0 and j < count:
        b = pieces[j][2]
        take = min(tokens, b - off)
        tokens -= take
        off += take
        if off == b:
            j += 1
            off = pieces[j][1] if j < count else 0
    return j, off


def block_key(pieces: tuple[Piece, ...], j: int, off: int, block_tokens: int) -> Key | None:
    """The key of the block that starts at piece `j`, offset `off`: its pieces (``cut``'s), flattened
    into one tuple, or None when fewer than `block_tokens` tokens are left. A block within one
    piece, or straddling two, is built directly (the usual cases); `cut` builds the others."""
    sid, _, end = pieces[j]
    if end - off >= block_tokens:
        return sid, off, off + block_tokens
    if j + 1 < len(pieces):
        sid2, a2, b2 = pieces[j + 1]
        rest = block_tokens - (end - off)
        if b2 - a2 >= rest:
            return sid, off, end, sid2, a2, a2 + rest
    key, _, _, got = cut(pieces, j, off, block_tokens)
    return tuple(itertools.chain.from_iterable(key)) if got == block_tokens else None


class RadixTree:
    """Block-granular prefix tree; counts blocks per tier and unreferenced HBM blocks."""

    def __init__(self, block_tokens: int, eviction: str = "lru", n_tiers: int = 1,
                 overhead: Callable[[int], int] | None = None) -> None:
        self.B = block_tokens
        self.overhead = overhead  # a chain's window overhead blocks by its tokens (None: a layout without windows)
        self.eviction = eviction
        self.root = Node(None, (), (), 0, HBM, 0, 0)
        self.root.ref = 1  # never evicted
        self.tick = 0  # the logical clock of accesses (LRU stamps): a tick a touch or a new node (`touch_path`: more)
        self.entries = itertools.count(1)  # tier entries, for FIFO (a clock of its own: LRU stamps are unchanged)
        self.tie = itertools.count()
        self.blocks = [0] * n_tiers  # blocks held per tier
        self.evictable = 0  # HBM blocks with ref == 0
        self.heaps: list[list[tuple[Any, int, Node]]] = [[] for _ in range(n_tiers)]
        # LRU: `add_child` queues a new node's entry (its stamp the clock's newest) on `fresh`, in order
        self.fresh: list[deque[tuple[Any, int, Node]]] = [deque() for _ in range(n_tiers)]
        self._fresh = eviction == "lru"
        self.version = 0  # bumped by every change of shape (split, add, remove): a walk is valid while it holds
        self._leaf_tier = n_tiers - 1
        self.dropped = 0  # blocks `drop_lru` freed

    # ------------------------------------------------------------------ walking
    def walk(self, pieces: tuple[Piece, ...], limit: int,
             start: tuple[Node, int, int, int] | None = None) -> tuple[list[Node], int]:
        """Nodes matched from the root (whole nodes, then possibly one partial); tokens in the last.

        Matching stops at `limit` tokens (rounded down to blocks) and at the first block whose
        key differs. Returns ``(path, tokens_in_last)``; the last node may be matched partially.
        From `start` instead, ``(node, tokens, j, off)`` as `resume` gives them, the path below it.
        """
        path, last, _, _ = self.walk_at(pieces, limit, start)
        return path, last

    def walk_at(self, pieces: tuple[Piece, ...], limit: int,
                start: tuple[Node, int, int, int] | None = None) -> tuple[list[Node], int, int, int]:
        """`walk`, and where in `pieces` its whole nodes end: ``(path, tokens_in_last, j, off)``, the
        position after the last node when it matched whole, else before it."""
        B = self.B
        limit -= limit % B
        if start is None:
            node, pos, j = self.root, 0, 0
            off = pieces[0][1] if pieces else 0
        else:
            node, pos, j, off = start
        path: list[Node] = []
        last = 0
        n = len(pieces)
        while pos < limit and j < n and node.children:
            sid, _, end = pieces[j]
            if end - off >= B:  # the usual cases of `block_key`: the block lies within one segment, or two
                child = node.children.get((sid, off, off + B))
            elif j + 1 < n and (nxt := pieces[j + 1])[2] - nxt[1] >= B - (end - off):
                child = node.children.get((sid, off, end, nxt[0], nxt[1], nxt[1] + B - (end - off)))
            else:
                key = block_key(pieces, j, off, B)
                child = node.children.get(key) if key is not None else None
            if child is None:
                break
            m, j_end, off_end = 0, j, off  # `_common(child.pieces, pieces, j, off)`, inlined
            for nsid, na, nb in child.pieces:
                if j_end >= n:
                    break
                sid, _, end = pieces[j_end]
                if nsid != sid or na != off_end:
                    break
                step = nb - na if nb - na < end - off_end else end - off_end
                m += step
                off_end += step
                if off_end == end:
                    j_end += 1
                    off_end = pieces[j_end][1] if j_end < n else 0
                if step < nb - na:
                    break
            m -= m % B
            if m > limit - pos:
                m = limit - pos
            path.append(child)
            last = m
            pos += m
            if m < child.tokens:
                break
            j, off = j_end, off_end
            node = child
        return path, last, j, off

    @staticmethod
    def _common(node_pieces: tuple[Piece, ...], pieces: tuple[Piece, ...], j: int, off: int) -> tuple[int, int, int]:
        """Tokens `node_pieces` share with `pieces` from (`j`, `off`); and the position after them."""
        m = 0
        n = len(pieces)
        for nsid, na, nb in node_pieces:
            if j >= n:
                break
            sid, _, b = pieces[j]
            if nsid != sid or na != off:
                break
            step = min(nb - na, b - off)
            m += step
            off += step
            if off == b:
                j += 1
                off = pieces[j][1] if j < n else 0
            if step < nb - na:
                break
        return m, j, off

    # ------------------------------------------------------------------ structure
    def split(self, node: Node, tokens: int) -> Node:
        """Split `node` after `tokens` (a block multiple inside it); return the new upper node."""
        parent = node.parent
        assert parent is not None and 0 < tokens < node.tokens and tokens % self.B == 0
        self.version += 1
        head, j, off, _ = cut(node.pieces, 0, node.pieces[0][1], tokens)
        tail = ((node.pieces[j][0], off, node.pieces[j][2]), *node.pieces[j + 1:])
        top = Node(parent, node.key, head, tokens, node.tier, node.stamp, node.born)
        top.ref, top.hits = node.ref, node.hits
        parent.children[node.key] = top
        node.parent = top
        node.pieces = tail
        node.tokens -= tokens
        node.key = block_key(tail, 0, tail[0][1], self.B)  # type: ignore[assignment]  # a whole block
        top.children[node.key] = node
        self.offer(top)  # a FIFO candidate; not a tier leaf (its tail is below it), so LRU/LFU skip it
        return top

    def add_child(self, parent: Node, pieces: tuple[Piece, ...], tokens: int, tier: int, pin: bool = False,
                  key: Key | None = None) -> Node:
        """A new node under `parent` (`tokens` a block multiple > 0): unreferenced and offered for
        eviction, or with `pin` referenced by the caller, who references the path above it already
        (so as ``pin_below(node, parent)`` leaves it), and not offered (`unpin` offers it when it is
        let go). `key` is its first block's key where the caller has it (a walk that missed looked
        it up)."""
        B = self.B
        self.version += 1
        if key is None:
            key = block_key(pieces, 0, pieces[0][1], B)
        assert key is not None  # `tokens` hold a whole block
        self.tick = stamp = self.tick + 1
        node = Node(parent, key, pieces, tokens, tier, stamp, next(self.entries))
        parent.children[key] = node
        if parent.extra:  # no longer a chain end: its window is the new leaf's business (the caller sets it)
            self.set_extra(parent, 0)
        b = tokens // B
        self.blocks[tier] += b
        if pin:
            node.ref = 1
        else:  # unreferenced: evictable, and offered (`offer`, whose checks a new node passes: a tier leaf)
            if tier == HBM:
                self.evictable += b
            if self._fresh:  # LRU: its priority (`_priority`) is its stamp, without the call
                self.fresh[tier].append((stamp, next(self.tie), node))
            else:
                heapq.heappush(self.heaps[tier], (self._priority(node), next(self.tie), node))
        return node

    def remove(self, node: Node) -> list[int]:
        """Drop `node` and its subtree (none referenced); return blocks freed per tier."""
        self.version += 1
        freed = [0] * len(self.blocks)
        stack = [node]
        while stack:
            n = stack.pop()
            stack.extend(n.children.values())
            b = n.tokens // self.B + n.extra
            freed[n.tier] += b
            self.blocks[n.tier] -= b
            if n.tier == HBM and n.ref == 0:
                self.evictable -= b
            n.parent = None
        return freed

    def move(self, node: Node, tier: int) -> None:
        """Move an unreferenced `node`'s blocks (its window's too) to `tier` (counts follow); it enters that
        tier now."""
        b = node.tokens // self.B + node.extra
        self.blocks[node.tier] -= b
        self.blocks[tier] += b
        self.evictable += b * ((tier == HBM) - (node.tier == HBM))
        node.tier = tier
        node.born = next(self.entries)
        if self.eviction == "fifo":
            self.offer(node)  # LRU/LFU candidates are tier leaves; the caller offers those

    def detach(self, node: Node) -> list[int]:
        """Unlink `node` from its parent and drop its subtree; offer the parent for eviction."""
        parent = node.parent
        assert parent is not None
        del parent.children[node.key]
        freed = self.remove(node)
        self._end_again(parent)
        self.offer(parent)
        return freed

    def _end_again(self, node: Node) -> int:
        """`node` lost a child: left an unreferenced leaf under a windowed layout, it is a chain end again
        and its own chain's window counts (a referenced one's is its sequences' until they finish). Returns
        the blocks that adds to its tier."""
        if self.overhead is None or node.children or node.ref or node is self.root or node.extra:
            return 0
        extra = self.overhead(self.depth(node))
        self.set_extra(node, extra)
        return extra

    def depth(self, node: Node) -> int:
        """Tokens from the root to the end of `node` (a node in the tree)."""
        tokens = 0
        n: Node | None = node
        while n is not None:
            tokens += n.tokens
            n = n.parent
        return tokens

    def set_extra(self, node: Node, extra: int) -> None:
        """Make `node`'s window overhead `extra` blocks, counted in its tier (and as evictable in HBM while
        unreferenced)."""
        d = extra - node.extra
        node.extra = extra
        self.blocks[node.tier] += d
        if node.tier == HBM and not node.ref:
            self.evictable += d

    # ------------------------------------------------------------------ access and pins
    def touch(self, node: Node) -> None:
        self.tick += 1
        node.stamp = self.tick
        node.hits += 1

    def touch_path(self, node: Node, blocks: int, release: bool = False) -> None:
        """Touch the nodes from the root's child down to `node` (a node in the tree: its parents lead to
        the root), in that order (as a walk to it and its caller would): their stamps ascend to `node`'s.

        `blocks` is where `node` ends, in blocks: no fewer than the nodes on its path (each holds one at
        least). The clock moves on by that many ticks, `node` takes the last and each node above it the
        one before its child's: the stamps a walk to `node` gives, shifted up by the ticks left over above
        the root's child, so in the same order among all stamps (after the last access's, before the
        next's), without counting the path first (a second loop up it: ~330 instructions a touch in
        chat-4k-prefix). Stamps are only compared, so a clock with gaps orders accesses as one without.

        With `release`, drop one reference from each in the same pass, as `unpin` counts them but
        without its offers: for a path in HBM to which the caller adds an HBM child of `node` at once.
        Then no node of the path is a tier leaf, and `unpin` after the child would offer none of them.
        """
        root = self.root
        stamp = self.tick + blocks
        self.tick = stamp
        if release and node.extra and node.ref == 1:  # a leaf's window (only the path's end may be one)
            self.evictable += node.extra
        n = node
        while n is not root:
            n.stamp = stamp
            n.hits += 1
            stamp -= 1
            if release:
                n.ref -= 1
                if not n.ref:
                    self.evictable += n.tokens // self.B
            n = n.parent  # type: ignore[assignment]

    def resume(self, node: Node, pieces: tuple[Piece, ...], tokens: int) -> tuple[Node, int, int, int] | None:
        """Where a walk of `pieces` from the root stands after `node` (a node on their path ending
        `tokens` in): ``(node, tokens, j, off)`` for `walk`, having touched the nodes from the root's
        child down to `node` in that order, as a walk then its caller would. None (nothing touched)
        when `node` is not where the caller thinks. The nodes are matched as the walk matches them
        (`_common`, which `walk_at` has inlined), so the position is the walk's, but no child is looked up
        by key."""
        chain: list[Node] = []
        n: Node | None = node
        while n is not None and n is not self.root:
            chain.append(n)
            n = n.parent
        if n is None:
            return None
        chain.reverse()
        pos, j = 0, 0
        off = pieces[0][1] if pieces else 0
        for n in chain:
            m, j, off = self._common(n.pieces, pieces, j, off)
            if m != n.tokens:
                return None
            pos += m
        if pos != tokens:
            return None
        for n in chain:
            self.touch(n)
        return node, pos, j, off

    def pin(self, node: Node) -> None:
        """Reference the path from `node` up to the root (one running sequence uses it)."""
        if node.extra and not node.ref:  # a leaf's window (only the path's end may be one)
            self.evictable -= node.extra
        n: Node | None = node
        while n is not None and n is not self.root:
            if n.ref == 0:
                self.evictable -= n.tokens // self.B
            n.ref += 1
            n = n.parent

    def pin_below(self, node: Node, stop: Node) -> None:
        """`pin` the path from `node` up to `stop`, an ancestor, excluded (as ``pin(node)`` then
        ``unpin(stop)`` would leave the references, `stop` and above being referenced already)."""
        if node.extra and not node.ref:  # a leaf's window (only the path's end may be one)
            self.evictable -= node.extra
        n: Node | None = node
        while n is not stop and n is not None:
            if n.ref == 0:
                self.evictable -= n.tokens // self.B
            n.ref += 1
            n = n.parent

    def unpin(self, node: Node) -> None:
        """Drop one reference from the path from `node` up to the root; offer the nodes let go.

        A node of the last tier with children is no tier leaf, so LRU and LFU pass it by without a call.
        """
        fifo, leaf_tier = self.eviction == "fifo", self._leaf_tier
        if node.extra and node.ref == 1:  # a leaf's window (only the path's end may be one)
            self.evictable += node.extra
        n: Node | None = node
        while n is not None and n is not self.root:
            n.ref -= 1
            if n.ref == 0:
                self.evictable += n.tokens // self.B
                if fifo or not n.children or n.tier != leaf_tier:
                    self.offer(n)
            n = n.parent

    # ------------------------------------------------------------------ eviction order
    def _priority(self, node: Node) -> Any:
        if self.eviction == "lru":
            return node.stamp
        if self.eviction == "lfu":
            return (node.hits, node.stamp)
        return node.born

    def is_tier_leaf(self, node: Node) -> bool:
        t = node.tier
        if t == self._leaf_tier or not node.children:
            return not node.children
        return all(c.tier != t for c in node.children.values())

    def offer(self, node: Node) -> None:
        """Push `node` as an eviction candidate of its tier (validated again on pop).

        LRU and LFU take unreferenced tier leaves; FIFO any unreferenced node.
        """
        if node is self.root or node.parent is None or node.ref:
            return
        if self.eviction == "fifo" or self.is_tier_leaf(node):
            heapq.heappush(self.heaps[node.tier], (self._priority(node), next(self.tie), node))

    def pop_victim(self, tier: int) -> Node | None:
        """The unreferenced tier leaf of `tier` first in eviction order, or None."""
        if self.eviction == "fifo":
            return self._fifo_victim(tier)
        heap, fresh = self.heaps[tier], self.fresh[tier]
        while heap or fresh:
            prio, _, node = self._pop_first(heap, fresh)
            if node.parent is None or node.tier != tier or node.ref or not self.is_tier_leaf(node):
                continue
            if prio != self._priority(node):
                self.offer(node)
                continue
            return node
        return None

    @staticmethod
    def _pop_first(heap: list[tuple[Any, int, Node]], fresh: deque[tuple[Any, int, Node]]) -> tuple[Any, int, Node]:
        """Take the first entry of a tier's order (`heap` and `fresh` not both empty): `fresh` is in
        order, so its head or the heap's, whichever is less."""
        if fresh and (not heap or fresh[0] < heap[0]):
            return fresh.popleft()
        return heapq.heappop(heap)

    def drop_lru(self, n_blocks: int, min_blocks: int = EVICT_MIN_BLOCKS) -> int:
        """Evict from a one-tier LRU tree (nothing below HBM): `pop_victim`, a trim and `detach`
        in one loop, the same victims in the same order; return the blocks freed.

        Victims are dropped until `n_blocks` are free; a victim longer than ``max(left, min_blocks)``
        blocks loses only that many from its tail, and keeps its place, key and stamp (`split` then
        `detach` would leave a new node with the same ones). A one-tier tree's tier leaves are its
        leaves, and LRU stamps are unique among them, so the order of the heap's stale entries
        (those of a trimmed node included) never changes which leaf goes next; nor do the heap's
        tie-breaks, which order only entries of equal stamps. So a trimmed victim keeps its entry
        (it is still first), and a stale entry's refresh or a parent left a leaf goes on the heap.

        Under a windowed layout a victim frees its window too (``extra``; a trimmed one keeps
        ``overhead(depth)`` of its shorter chain), and an unreferenced parent left a leaf takes the window
        of its own chain (`set_extra`, ``added`` here): the freed count returned is net of it.
        """
        B = self.B
        heap, fresh = self.heaps[HBM], self.fresh[HBM]
        freed = added = 0
        while freed - added < n_blocks and (heap or fresh):
            new = (not heap or fresh[0] < heap[0]) if fresh else False  # `_pop_first`'s choice, inlined
            stamp, _, node = fresh[0] if new else heap[0]
            parent = node.parent
            if parent is None or node.ref or node.children:
                fresh.popleft() if new else heapq.heappop(heap)
                continue
            if stamp != node.stamp:
                fresh.popleft() if new else heapq.heappop(heap)
                heapq.heappush(heap, (node.stamp, next(self.tie), node))
                continue
            b = node.tokens // B
            want = n_blocks - freed + added
            if want < min_blocks:
                want = min_blocks
            if b > want:  # trim the leaf's tail; the head stays (as `split` then `detach` would leave it)
                node.pieces = trim(node.pieces, want * B)
                node.tokens -= want * B
                if node.extra:  # its window shrinks to its shorter chain's (never grows: `overhead` rises)
                    x = self.overhead(self.depth(node))  # type: ignore[misc]  # set where extras are
                    want += node.extra - x
                    node.extra = x
                b = want
            else:
                fresh.popleft() if new else heapq.heappop(heap)
                del parent.children[node.key]
                node.parent = None
                b += node.extra
                if parent is not self.root and not parent.ref and not parent.children:
                    added += self._end_again(parent)  # (in HBM: a parent's tier is at most its child's)
                    heapq.heappush(heap, (parent.stamp, next(self.tie), parent))
            freed += b
        if freed:
            self.version += 1
            self.blocks[HBM] -= freed
            self.evictable -= freed
            self.dropped += freed
        return freed - added

    def _fifo_victim(self, tier: int) -> Node | None:
        """The tier leaf that goes first for FIFO: the oldest unreferenced node of `tier`, or the
        leaf at the end of its oldest branch in `tier` (its subtree leaves before it)."""
        heap = self.heaps[tier]
        while heap:
            born, _, node = heap[0]
            if node.parent is None or node.tier != tier or node.ref or born != node.born:
                heapq.heappop(heap)  # gone, moved, referenced (offered again when unpinned) or stale
                continue
            while True:
                below = [c for c in node.children.values() if c.tier == tier]
                if not below:
                    return node  # its heap entry goes stale when the caller moves or drops it
                node = min(below, key=_born)
        return None


def _born(node: Node) -> int:
    return node.born
