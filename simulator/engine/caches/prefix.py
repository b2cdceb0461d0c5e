"""Prefix caching (SGLang's RadixAttention) with optional host-DRAM and NVMe tiers (LMCache-style).

A sequence's token chain (its prompt segments, then its output under ``output_segment_id``)
is matched against a `RadixTree` of whole blocks on admission; matched HBM blocks are
referenced (pinned) until the sequence finishes or is preempted. When its prefill completes, the
whole blocks it prefilled are inserted and stay pinned by it (so concurrent requests with the
same prefix share them, as in SGLang); when it finishes or is preempted its output blocks are
inserted too (a partial last block never is). Unreferenced tier leaves are evicted in
``eviction`` order (LRU, LFU or FIFO: see `radix` for what FIFO can mean in a tree) when the
pool needs blocks, cached blocks before anyone is preempted. With ``dram``/``nvme`` an evicted
block moves one tier down (each tier ordered by the same policy, sized from the node spec); a hit
there is reloaded at the tier's bandwidth when that is faster than recomputing it::

    reload_s = blocks · block_bytes / bandwidth      recompute_s = prefill_s(tokens, context)

and the cache picks the cheapest of "reload tiers ≤ t, recompute the rest" over t. Reload time is
paid in the admitting step (so in TTFT); moving blocks down is assumed overlapped with compute.

Under a layout with sliding windows or windowed compression (`CacheContext.window_overhead`), a
sequence that finishes leaves its chain's window, ``overhead(depth)`` blocks, on the leaf its chain
ends at (from the overhead blocks it held itself, ``Seq.ov``), so that the pool never counts a cached
chain below its bytes (`radix`'s docstring says how the tree keeps them).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, ClassVar

from simulator.engine.caches import NO_HIT, Admission, CacheContext, max_hit_tokens, register_strategy
from simulator.engine.caches.radix import (
    EVICT_MIN_BLOCKS,
    EVICTION_POLICIES,
    HBM,
    Key,
    Node,
    Piece,
    RadixTree,
    block_key,
    cut,
    cut_back,
    seek,
)
from simulator.errors import must

if TYPE_CHECKING:
    from simulator.engine.sequence import Seq
    from workloads.request import Request


def request_pieces(request: Request) -> tuple[Piece, ...]:
    """The request's token chain as pieces: prompt segments, then its output segment."""
    out_id = request.output_segment_id if request.output_segment_id >= 0 else ("out", request.id)
    pieces: list[Piece] = []  # a list, then a tuple: cheaper than a generator, and a loop than a comprehension
    for sid, t in request.segments:
        pieces.append((sid, 0, t))
    pieces.append((out_id, 0, request.output_tokens))
    return tuple(pieces)


@functools.cache
def _hbm_hit(tokens: int) -> Admission:
    """The admission of a prefix of `tokens` all found in HBM: one shared tuple per hit length (immutable,
    so shared across replicas and runs; as many as the distinct hit lengths, at most a context's blocks)."""
    return Admission(tokens, 0, 0, tokens, 0, 0, 0)


class _PrefixState:
    """One replica's radix tree, tier capacities and counters."""

    def __init__(self, block_tokens: int, eviction: str, tiers: tuple[str, ...], ctx: CacheContext) -> None:
        self.B = block_tokens
        self.tiers = ("hbm", *tiers)
        self.overhead = ctx.window_overhead  # None: a layout without windows (module docstring)
        self.tree = RadixTree(block_tokens, eviction, len(self.tiers), self.overhead)
        self.counts = self.tree  # `CacheCounts`: the tree keeps `evictable` and `blocks` current
        self.ctx = ctx
        bb = ctx.block_bytes
        caps = {"dram": ctx.dram_bytes, "nvme": ctx.nvme_bytes}
        bws = {"dram": ctx.dram_bytes_per_s, "nvme": ctx.nvme_bytes_per_s}
        self.cap = [0] + [int(caps[t] // bb) if bb > 0 else 0 for t in tiers]
        self.reload_s_per_block = [0.0] + [bb / bws[t] for t in tiers]
        self.counters = {"evicted_blocks": 0, "dropped_blocks": 0, "reloaded_blocks": 0,
                         "bytes_down": 0.0, "bytes_up": 0.0}
        # the blocks each lower tier brought back into HBM, at every admission, a re-admission after a preemption
        # too (``reloaded_blocks`` is their sum; a request's ``hit_{dram,nvme}_tokens`` count its first admission's)
        self.reloaded = [0] * len(self.tiers)
        # the last `probe`'s walk, ``(seq, max_hit_tokens, tree version, (path, last, j, off))``: the scheduler
        # admits right after probing, and `on_admit` walks the same pieces again unless the tree changed
        self._probed: tuple[Seq, int, int, tuple[list[Node], int, int, int]] | None = None
        if eviction == "lru" and not tiers:  # evict by `RadixTree.drop_lru`, called directly: a frame less an
            # eviction (1.4 a request in chat-4k-prefix at 100k); the tree counts what it frees, `stats` adds it
            self.evict = self.tree.drop_lru  # type: ignore[method-assign]
        # LRU and LFU pick the unreferenced tier leaf of least priority, whatever entries the heap
        # holds beside it (priorities are unique there), so offers that can only go stale are skipped;
        # FIFO's heap order breaks ties between a split node's halves by push order: it keeps every offer
        self._lean_offers = eviction != "fifo"
        if self.overhead is not None:  # a windowed layout: its chain ends' windows (module docstring)
            self.on_prefilled = self._windowed_prefilled  # type: ignore[method-assign]
            self.on_finish = self._windowed_finish  # type: ignore[method-assign]

    # ------------------------------------------------------------------ lookups
    @staticmethod
    def _pieces(seq: Seq) -> tuple[Piece, ...]:
        pieces = seq.pieces
        if pieces is None:
            pieces = seq.pieces = request_pieces(seq.request)
        return pieces

    def match(self, request: Request) -> int:
        """Prefix tokens `on_admit` would reuse now: in HBM, or in a lower tier it would reload (never the
        prompt's last token: `max_hit_tokens`, as the scheduler admits)."""
        path, last = self.tree.walk(request_pieces(request), max_hit_tokens(request.prompt_tokens, self.B))
        per_tier = [0] * len(self.tiers)
        for i, node in enumerate(path):
            per_tier[node.tier] += last if i == len(path) - 1 else node.tokens
        return sum(per_tier[:self._reload_tiers(per_tier) + 1])

    def probe(self, seq: Seq, max_hit_tokens: int) -> tuple[int, int]:
        """Walk the tree for `seq`'s prompt (up to `max_hit_tokens`; the walk is kept for its admission)
        and return ``(tokens, unreferenced blocks)`` of the HBM nodes that lead the path: whole nodes
        summed, then the last node's unmatched tail taken off when it is in HBM (tiers never decrease
        along a path, so it is last among them)."""
        tree = self.tree
        pieces = seq.pieces
        if pieces is None:  # (`_pieces` without its call: a sequence's first probe makes them, as a rule)
            pieces = seq.pieces = request_pieces(seq.request)
        walked = tree.walk_at(pieces, max_hit_tokens)
        self._probed = (seq, max_hit_tokens, tree.version, walked)
        path, last, _, _ = walked
        if not path:
            return 0, 0
        tokens = free = 0
        for node in path:
            if node.tier != HBM:
                return tokens, free // self.B
            t = node.tokens
            tokens += t
            if not node.ref:
                free += t
        tail = node.tokens - last  # node: the path's last
        tokens -= tail
        if not node.ref:
            free -= tail  # (a leaf matched whole gives its window up at admission, `_adopt`: not counted here)
        return tokens, free // self.B

    # ------------------------------------------------------------------ admission
    def on_admit(self, seq: Seq, max_hit_tokens: int) -> Admission:
        tree, B = self.tree, self.B
        probed, self._probed = self._probed, None
        pieces = seq.pieces or self._pieces(seq)  # set by `probe`, as a rule
        if probed is not None and probed[0] is seq and probed[1] == max_hit_tokens and probed[2] == tree.version:
            path, last, j, off = probed[3]
        else:
            path, last, j, off = tree.walk_at(pieces, max_hit_tokens)
        seq.cache_node = None
        if not path:
            return NO_HIT
        if last < path[-1].tokens:
            path[-1] = tree.split(path[-1], last)
            j, off = seek(pieces, last, j, off)  # the walk stopped before the node it matched in part
        if len(self.tiers) == 1:  # HBM only: every matched block is a hit
            adopted = self._adopt(path[-1]) if path[-1].extra else 0
            tick, evictable = tree.tick, tree.evictable
            hbm = 0
            for node in path:  # tree.touch each, then tree.pin(path[-1]) (the same nodes), inlined
                tick += 1
                node.stamp = tick
                node.hits += 1
                hbm += node.tokens
                if not node.ref:
                    evictable -= node.tokens // B
                node.ref += 1
            tree.tick, tree.evictable = tick, evictable
            seq.cache_node, seq.cache_tokens, seq.cache_at = path[-1], hbm, (j, off)
            return _hbm_hit(hbm) if not adopted else Admission(hbm, -adopted, 0.0, hbm, 0, 0, 0)
        per_tier = [0] * len(self.tiers)
        for node in path:
            per_tier[node.tier] += node.tokens
        hbm = per_tier[HBM]
        best_t = self._reload_tiers(per_tier)
        hit_node: Node | None = None
        reload_blocks = 0
        by_tier = self.reloaded
        for node in path:
            if node.tier > best_t:
                break
            if node.tier != HBM:
                tier = node.tier
                promoted = self._promote(node)
                by_tier[tier] += promoted
                reload_blocks += promoted
            tree.touch(node)
            hit_node = node
        if hit_node is None:
            return Admission(recomputed_tokens=sum(per_tier[1:]))
        adopted = self._adopt(hit_node) if hit_node.extra else 0
        tree.pin(hit_node)
        seq.cache_node = hit_node
        seq.cache_tokens = hbm + sum(per_tier[1:best_t + 1])  # where hit_node ends (tiers rise along a path)
        seq.cache_at = (j, off) if hit_node is path[-1] else seek(pieces, seq.cache_tokens)
        self.counters["reloaded_blocks"] += reload_blocks
        self.counters["bytes_up"] += reload_blocks * self.ctx.block_bytes
        reloaded = sum(per_tier[1:best_t + 1])
        return Admission(
            hit_tokens=hbm + reloaded, reload_blocks=reload_blocks - adopted,
            reload_s=sum(per_tier[t] // B * self.reload_s_per_block[t] for t in range(1, best_t + 1)),
            hbm_tokens=hbm, dram_tokens=self._reloaded(per_tier, best_t, "dram"),
            nvme_tokens=self._reloaded(per_tier, best_t, "nvme"),
            recomputed_tokens=sum(per_tier[best_t + 1:]))

    def _reload_tiers(self, per_tier: list[int]) -> int:
        """The ``t`` of the cheapest "reload tiers 1..t, recompute the rest" (0: recompute all).

        `per_tier` holds the matched prefix tokens by tier (HBM first).
        """
        B, hbm = self.B, per_tier[HBM]
        best_t, best_s = 0, self._recompute_s(sum(per_tier[1:]), hbm)
        reload_s = 0.0
        for t in range(1, len(self.tiers)):
            reload_s += per_tier[t] // B * self.reload_s_per_block[t]
            s = reload_s + self._recompute_s(sum(per_tier[t + 1:]), hbm + sum(per_tier[1:t + 1]))
            if s < best_s:
                best_t, best_s = t, s
        return best_t

    def _adopt(self, node: Node) -> int:
        """The sequence admitted onto chain end `node` (a leaf with a window, which it pins) takes the window
        over: its own overhead blocks (``Seq.ov ≥ overhead(depth)``) cover it while it runs and it gives the
        chain end one when it finishes (`_windowed_finish`). An unreferenced leaf's window is freed (returned,
        and taken off the admission's `reload_blocks`), so admission counts it as room, as `probe` does; one a
        running sequence holds already stays. Were it pinned instead, evicting that leaf during a planned jump
        would move the room admission sees, which stepping sees and a jump does not (helper-139)."""
        if node.ref:
            return 0
        extra = node.extra
        self.tree.set_extra(node, 0)
        return extra

    def _promote(self, node: Node) -> int:
        """Bring a lower-tier node into HBM (unreferenced); return its tokens' blocks. A chain end's window
        stays behind: the sequence that reloads it or inserts through it carries its own (``Seq.ov``) while it
        runs (its window brought into HBM unchecked by admission overfilled the pool: helper-139)."""
        if node.extra:
            self.tree.set_extra(node, 0)
        self.tree.move(node, HBM)
        return node.tokens // self.B

    def _reloaded(self, per_tier: list[int], best_t: int, name: str) -> int:
        return sum(per_tier[t] for t in range(1, best_t + 1) if self.tiers[t] == name)

    def _recompute_s(self, tokens: int, context: int) -> float:
        if tokens == 0:
            return 0.0
        price = self.ctx.prefill_s
        return price(tokens, context) if price is not None else float("inf")

    # ------------------------------------------------------------------ completion
    def on_prefilled(self, seq: Seq, tokens: int) -> tuple[int, int]:
        n = tokens - tokens % self.B
        if n <= seq.hit_tokens:
            return seq.hit_tokens, 0
        kept = self._insert(seq, n, True, seq.cache_node)  # type: ignore[arg-type]  # (exact_end, start)
        seq.cache_tokens = n  # (`_insert` set cache_node and cache_at)
        return n, kept

    def on_finish(self, seq: Seq, tokens: int, private_blocks: int) -> int:
        tree, B = self.tree, self.B
        start = seq.cache_node
        n = tokens - tokens % B
        if n <= seq.hit_tokens or private_blocks <= 0:
            seq.cache_node = None
            if start is not None:
                tree.unpin(start)  # type: ignore[arg-type]
            return 0
        if self._lean_offers:  # unpinned after the insert, the held node has its new child: no stale offer
            kept = self._insert(seq, n, False, start, True)  # type: ignore[arg-type]  # (exact_end, start, release)
        else:
            if start is not None:
                tree.unpin(start)  # type: ignore[arg-type]
            kept = self._insert(seq, n, exact_end=False, start=start)  # type: ignore[arg-type]
            tree.offer(seq.cache_node)  # type: ignore[arg-type]  # the last node, `_insert`'s
        seq.cache_node = None  # the sequence references nothing now
        return kept

    def _windowed_prefilled(self, seq: Seq, tokens: int) -> tuple[int, int]:
        """`on_prefilled` under a windowed layout: ``kept_blocks`` is what the cache's HBM blocks grew by, net
        of the window of a cached chain end the sequence's prefix grew past (`RadixTree.add_child`; it may be
        negative): the new end's window is the sequence's own (``Seq.ov``) while it runs, the cache's from
        `on_finish`."""
        before = self.tree.blocks[HBM]
        shared, _ = _PrefixState.on_prefilled(self, seq, tokens)  # (the class's: this one stands in for it)
        return shared, self.tree.blocks[HBM] - before

    def _windowed_finish(self, seq: Seq, tokens: int, private_blocks: int) -> int:
        """`on_finish` under a windowed layout: the same insert, then the leaf the sequence's chain ends at
        (where it inserted, or the node it referenced when it inserts nothing) gets its chain's window,
        ``overhead(depth)`` blocks (`BlockGeometry.overhead`), unless it holds it already. Its sequence held at
        least ``overhead(tokens) ≥ overhead(depth)`` of its own (`BlockGeometry.growth`, depth ≤ tokens),
        so the blocks kept stay within `private_blocks`; they are the cache's HBM blocks' growth. A swapped
        sequence recomputed to unblock an idle replica (`BlockPool._unblock_empty_replica`) holds no HBM block:
        its caller passes its hit tokens and the pool's free blocks, and the chain end it referenced takes its
        window from them (helper-148: it kept none, so a later request adopted no window there)."""
        tree, B = self.tree, self.B
        start = seq.cache_node
        n = tokens - tokens % B
        before = tree.blocks[HBM]
        if n <= seq.hit_tokens or private_blocks <= 0:
            seq.cache_node = None
            if start is not None:
                tree.unpin(start)  # type: ignore[arg-type]
                if private_blocks > 0:
                    self._give_window(start, seq.cache_tokens, private_blocks)  # type: ignore[arg-type]
            return tree.blocks[HBM] - before
        if self._lean_offers:
            self._insert(seq, n, False, start, True)  # type: ignore[arg-type]  # (exact_end, start, release)
        else:
            if start is not None:
                tree.unpin(start)  # type: ignore[arg-type]
            self._insert(seq, n, exact_end=False, start=start)  # type: ignore[arg-type]
            tree.offer(seq.cache_node)  # type: ignore[arg-type]  # the last node, `_insert`'s
        end: Node = seq.cache_node  # type: ignore[assignment]
        seq.cache_node = None
        self._give_window(end, tree.depth(end), private_blocks - (tree.blocks[HBM] - before))
        return tree.blocks[HBM] - before

    def _give_window(self, node: Node, depth: int, room: int) -> None:
        """Raise a leaf's window to ``overhead(depth)`` blocks, by at most `room` (none for an inner node:
        the chains through it end below, with windows of their own)."""
        if node.children or node is self.tree.root:
            return
        need = self.overhead(depth) - node.extra  # type: ignore[misc]  # (a windowed state's)
        if need > room:
            need = room
        if need > 0:
            self.tree.set_extra(node, node.extra + need)

    def _insert(self, seq: Seq, n: int, exact_end: bool, start: Node | None = None,
                release: bool = False) -> int:
        """Put the first `n` tokens of `seq` in the tree (HBM); return the blocks new to it. The last node
        and where it ends go to ``seq.cache_node`` and ``seq.cache_at`` (`where`), not into a tuple returned.

        Lower-tier nodes on the path are replaced by the sequence's HBM copy (promoted); with
        `exact_end` the last node ends at `n` tokens exactly (split when it is longer). `start` is
        the node the sequence referenced, ending ``seq.cache_tokens`` in, at ``seq.cache_at`` of its
        pieces, all HBM up to it and pinned (so in the tree, on the sequence's path): the walk resumes
        there, the nodes above it touched in the order a walk from the root and its caller would (`resume`
        finds the same position by matching them again). `where` is, with `exact_end`, the position
        ``(j, off)`` of `n` in the pieces (``seek(pieces, n)``: whole nodes are matched, and the rest
        cut, as `seek` steps).

        The sequence's references move: with `exact_end` it references the path to the last node
        afterwards (``pin(last)``, then ``unpin(start)``), and with `release` it lets go of `start`
        (``unpin(start)`` after the insert). Usually the insert resumes at `start` and its first new
        block misses there, so the new tokens make one node below it: then the path to `start` is
        touched and, with `release`, let go in the same pass (`RadixTree.touch_path`), and a new node
        the sequence keeps is made referenced (`add_child`'s `pin`; FIFO offers it, then pins it).
        """
        tree, B = self.tree, self.B
        pieces = seq.pieces or self._pieces(seq)  # set by `probe` (never empty: the output piece ends it)
        pos = seq.cache_tokens
        if start is not None and pos <= n:
            j, off = seq.cache_at
            # the walk's first step, which usually misses (pos < n ≤ the pieces' tokens: piece j exists)
            key = block_key(pieces, j, off, B) if pos < n else None
            if key is not None and key not in start.children:
                tree.touch_path(start, pos // B, release)
                tokens = n - pos
                if self._lean_offers:  # `_add`, inlined (one call less an insert)
                    rest, j, off, _ = cut(pieces, j, off, tokens)  # (few pieces here, as a rule: not `cut_back`)
                    node = tree.add_child(start, rest, tokens, HBM, exact_end, key)
                else:
                    node, j, off = self._add(start, pieces, j, off, tokens, self._after(seq, n), key, exact_end)
                seq.cache_node, seq.cache_at = node, (j, off)
                return tokens // B
            kept, parent, stop = 0, start, start  # stop: the node the sequence references down to
            tree.touch_path(start, pos // B)
            if key is not None:
                walked = tree.walk_at(pieces, n, (start, pos, j, off))
                kept, parent, pos, j, off = self._take(walked, start, pos, pieces, n, exact_end)
        else:
            kept, parent, pos, j, off = self._take(tree.walk_at(pieces, n), tree.root, 0, pieces, n, exact_end)
            stop = tree.root
        held = parent  # the last node before a new one
        if pos < n:  # the new node's first block: n − pos ≥ B tokens are left
            parent, j, off = self._add(parent, pieces, j, off, n - pos, self._after(seq, n),
                                       block_key(pieces, j, off, B), exact_end)
            kept += (n - pos) // B
        elif not exact_end and self._lean_offers:
            tree.offer(parent)  # touched: its place in the eviction order moved
        if exact_end:  # the sequence references the new path: pin(last), then unpin(start)
            tree.pin_below(held, stop)  # the same references in one pass where the insert resumed at `start`
            if stop is not start and start is not None:
                tree.unpin(start)
        elif release and start is not None:
            tree.unpin(start)
        seq.cache_node, seq.cache_at = parent, (j, off)
        return kept

    def _add(self, parent: Node, pieces: tuple[Piece, ...], j: int, off: int, tokens: int, after: int, key: Key | None,
             keep: bool) -> tuple[Node, int, int]:
        """A new HBM node under `parent` holding the next `tokens` of `pieces` from (`j`, `off`) (`after` of
        theirs follow), its first block's key `key`: ``(node, j, off)`` after it. With `keep` the sequence
        references it (the path above it is the sequence's already): `add_child`'s `pin`, or, where every
        offer is kept (FIFO), offered and then pinned."""
        tree, lean = self.tree, self._lean_offers
        rest, j, off, _ = cut_back(pieces, j, off, tokens, after)
        node = tree.add_child(parent, rest, tokens, HBM, pin=keep and lean, key=key)
        if keep and not lean:
            tree.pin_below(node, parent)
        return node, j, off

    @staticmethod
    def _after(seq: Seq, n: int) -> int:
        """The tokens of `seq`'s pieces after its first `n` (they hold its prompt and output)."""
        r = seq.request
        return r.prompt_tokens + r.output_tokens - n

    def _take(self, walked: tuple[list[Node], int, int, int], parent: Node, pos: int, pieces: tuple[Piece, ...],
              n: int, exact_end: bool) -> tuple[int, Node, int, int, int]:
        """The nodes an insert's walk matched (`walked`, from `parent`, `pos` tokens in), made the
        sequence's path in HBM: ``(blocks promoted, last node, its end, j, off)`` (see `_insert`)."""
        tree = self.tree
        path, last, j, off = walked
        kept = 0
        for i, node in enumerate(path):
            partial = i == len(path) - 1 and last < node.tokens
            if partial and (exact_end or node.tier != HBM or pos + last < n):
                node = tree.split(node, last)
                partial = False
                j, off = seek(pieces, last, j, off)  # the walk stopped before the node it matched in part
            if node.tier != HBM:  # the sequence's private copy takes its place in HBM
                kept += self._promote(node)
            tree.touch(node)
            parent = node
            pos += last if partial else node.tokens
        return kept, parent, pos, j, off

    # ------------------------------------------------------------------ eviction
    def evictable_blocks(self) -> int:
        return self.tree.evictable

    def hbm_blocks(self) -> int:
        return self.tree.blocks[HBM]

    def evict(self, n_blocks: int) -> int:
        """Free blocks as `CacheState.evict` says (a one-tier LRU state has `RadixTree.drop_lru` for it)."""
        tree, B = self.tree, self.B
        freed = 0
        while freed < n_blocks:
            victim = tree.pop_victim(HBM)
            if victim is None:
                break
            b = victim.tokens // B
            want = max(n_blocks - freed, EVICT_MIN_BLOCKS)
            if b > want:  # trim the leaf's tail
                tree.split(victim, (b - want) * B)
            hbm = tree.blocks[HBM]
            self._demote(victim)
            freed += hbm - tree.blocks[HBM]  # its blocks and window, less a window its parent takes (a leaf again)
        self.counters["evicted_blocks"] += freed
        return freed

    def _demote(self, node: Node) -> None:
        """Move an unreferenced tier leaf one tier down, making room there; drop it from the last.

        A leaf larger than the whole tier below (its window included) moves its tail of as many blocks as that
        tier holds, and its head stays here a tier leaf, the next in line (a caller that needs more pops it
        again): the blocks past what stays go down a tier as every other leaf's do. Before, such a leaf was
        dropped whole, however much the tiers below held free: a DRAM tier smaller than a leaf (a small
        ``dram_fraction``) sent nothing to an NVMe tier of terabytes (helper-197)."""
        tree = self.tree
        t = node.tier
        nxt = t + 1
        if nxt < len(self.tiers):
            fits = self.cap[nxt] - node.extra  # the blocks of tokens the whole tier below takes of this leaf
            if 0 < fits < node.tokens // self.B:  # (a split leaves the window on the lower half, the leaf)
                tree.split(node, node.tokens - fits * self.B)
        b = node.tokens // self.B + node.extra  # a leaf's window goes with it
        if nxt < len(self.tiers) and b <= self.cap[nxt]:
            while tree.blocks[nxt] + b > self.cap[nxt]:
                victim = tree.pop_victim(nxt)
                if victim is None:
                    break
                self._demote(victim)
                # a child of `node` dropped from that tier leaves it a chain end, with a window (helper-141: the
                # tier then held a window past its capacity)
                b = node.tokens // self.B + node.extra
            if tree.blocks[nxt] + b <= self.cap[nxt]:
                tree.move(node, nxt)
                self.counters["bytes_down"] += b * self.ctx.block_bytes
                tree.offer(node)
                if node.parent is not None:
                    tree.offer(node.parent)
                return
        freed = tree.detach(node)
        self.counters["dropped_blocks"] += sum(freed)

    def stats(self) -> dict[str, float]:
        out: dict[str, float] = dict(self.counters)
        out["evicted_blocks"] += self.tree.dropped  # `drop_lru`'s (none but a one-tier LRU state's)
        out["dropped_blocks"] += self.tree.dropped
        for i, name in enumerate(self.tiers):
            out[f"{name}_cached_blocks"] = self.tree.blocks[i]
        for i, name in enumerate(self.tiers[1:], 1):
            out[f"{name}_reloaded_blocks"] = self.reloaded[i]
        return out


DRAM_FRACTION = 0.5  # the share of a replica's host DRAM a prefix cache's DRAM tier takes unless told


def dram_share(dram: bool, fraction: float | None) -> float:
    """The share of host DRAM a prefix cache's tier takes: `fraction` (default `DRAM_FRACTION`) with a DRAM tier,
    none without; swap space is the rest (`cluster.build_cluster`)."""
    return (DRAM_FRACTION if fraction is None else fraction) if dram else 0.0


@register_strategy
@dataclass(frozen=True, slots=True, kw_only=True)
class PrefixCache:
    """Radix-tree prefix cache over the KV pool, with optional host-DRAM and NVMe tiers.

    Parameters
    ----------
    eviction : "lru" | "lfu" | "fifo"
        Order in which unreferenced blocks leave a tier: least recently used leaf first, least
        often used leaf first, or first in first (with the blocks below it, which no match can
        reach once it has gone).
    dram, nvme : bool
        Keep blocks evicted from HBM in host DRAM, then NVMe (sizes and bandwidths from the
        node spec, split evenly over the node's replicas).
    dram_fraction : float
        Share of the replica's host DRAM given to the cache tier, with ``dram`` only (default
        `DRAM_FRACTION`); the rest is swap space (`cluster.build_cluster`: the two never share a byte).
    """

    name: ClassVar[str] = "prefix"
    eviction: str = "lru"
    dram: bool = False
    nvme: bool = False
    dram_fraction: float | None = None

    def __post_init__(self) -> None:
        must(self.eviction in EVICTION_POLICIES, "PrefixCache", "eviction", f"one of {', '.join(EVICTION_POLICIES)}",
             self.eviction)
        # a fraction of a tier that is not there changed nothing, without a word (helper-151)
        must(self.dram_fraction is None or self.dram, "PrefixCache", "dram_fraction",
             "given with dram = true (the share of host DRAM its tier takes)", self.dram_fraction)
        must(self.dram_fraction is None or 0 < self.dram_fraction <= 1, "PrefixCache", "dram_fraction", "in (0, 1]",
             self.dram_fraction)

    def bind(self, block_tokens: int, total_blocks: int, context: CacheContext | None = None) -> _PrefixState:
        ctx = context or CacheContext()
        tiers = tuple(t for t, on in (("dram", self.dram), ("nvme", self.nvme)) if on)
        ctx = replace(ctx, dram_bytes=ctx.dram_bytes * dram_share(self.dram, self.dram_fraction))
        return _PrefixState(block_tokens, self.eviction, tiers, ctx)
