"""The cluster side of prefill/decode disaggregation: the hand-off queue, the links, the transfers.

A prefill replica's commit may hold sequences whose prefill completed (`simulator.engine.handoff`);
they join a FIFO **hand-off queue**. `dispatch` places its head on the decode replica with the
fewest outstanding tokens among those that can reserve its blocks now (`Replica.can_hold`; ties
at random with the run's generator); when none can, the queue waits, and is tried again after
every commit of a decode replica (a commit is where a decode replica frees blocks: completions;
and after a plan of one that preempted: completions and preemptions are what free a decode
replica's blocks; within a step or jump they only grow, so no other moment can make room; the
moments are the same whether the engine steps or jumps). The chosen replica
reserves the blocks, and the KV moves on its ingress `Link` (processor sharing among the transfers
into it; ``bytes`` from `simulator.capacity.kv_transfer`: what one decode GPU's NIC carries).

When a transfer ends the prefill replica frees the blocks (waking it if idle: it may admit its
queue) and the decode replica receives the sequence, to join its batch at its next plan. A
reservation or an arrival changes what the decode replica's next steps would do, so a jump or
chunked-prefill run in flight there is interrupted, as an arrival interrupts a jump
(`simulator.engine.cluster`): it commits the steps finished plus the one in progress and plans
again, exactly where stepping would have planned with the new state.

Invariants (tests/engine/test_disagg.py): every transfer that starts ends; a sequence joins a
decode batch only after its transfer ended; the prefill replica frees a handed-off sequence's
blocks only at its transfer's end; fast-forward equals stepping.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from simulator.capacity import KVBudget, kv_link_bytes, kv_transfer
from simulator.engine.handoff import DECODE_ONLY
from simulator.engine.link import Link
from simulator.engine.replica import Replica
from simulator.engine.routers import pick_min
from simulator.engine.sequence import Seq

if TYPE_CHECKING:
    from hardware.catalog import NodeSpec
    from simulator.engine.config import EngineConfig

TransferBytes = Callable[[Replica, Replica, int], float]
"""``(prefill replica, decode replica, kv tokens) -> bytes`` on one decode GPU's NIC."""


def nudge(rep: Replica, interrupt: bool) -> None:
    """Wake `rep` if idle; with `interrupt`, also cut short its jump or chunked run in flight."""
    if rep.idle:
        rep.idle = False
        rep.wake()
    elif interrupt and (rep.interruptible or rep.run_interruptible):
        rep.interruptible = rep.run_interruptible = False
        rep.proc.interrupt()


class Transfers:
    """The hand-off queue and the KV transfers of a disaggregated fleet (module docstring)."""

    def __init__(self, env: Any, decode: list[Replica], links: list[tuple[float, float]],
                 transfer_bytes: TransferBytes, rng: np.random.Generator, changed: list[int] | None) -> None:
        """`links`: ``(bytes_per_s, latency_s)`` of each decode replica's ingress link; `changed`
        gets a decode replica's index among `decode` when its outstanding tokens change (None: the decode
        group's router keeps no such list, `cluster._Group`)."""
        self.decode = decode
        self.transfer_bytes = transfer_bytes
        self.rng = rng
        self.changed = changed
        # told of each sequence a prefill replica hands off: its first token is out, so a router that counts
        # what it dispatched stops counting it on that replica (`cluster.simulate` sets it for such a router)
        self.handed: Callable[[Seq], None] | None = None
        self.queue: deque[tuple[Replica, Seq]] = deque()
        self.moving: dict[int, tuple[Replica, Replica, Seq]] = {}
        for rep, (rate, latency) in zip(decode, links, strict=True):
            rep.link = Link(env, rate, latency, self._arrive, name=f"replica {rep.index}")

    @property
    def links(self) -> list[Link]:
        return [rep.link for rep in self.decode]

    def after_commit(self, rep: Replica, now: float) -> None:
        """Queue what a prefill replica's commit handed off; after a decode replica's, retry the queue."""
        if rep.handoffs:
            if self.handed is not None:
                for seq in rep.handoffs:
                    self.handed(seq)
            self.queue.extend((rep, seq) for seq in rep.handoffs)
            rep.handoffs.clear()
            self.dispatch(now, rep.index)
        elif self.queue and rep.role == DECODE_ONLY:
            self.dispatch(now, rep.index)

    def after_plan(self, rep: Replica, now: float, planned: bool) -> None:
        """A decode replica's plan preempted (freed blocks): retry the queue. A reservation on `rep`
        itself cuts its plan to the one step stepping would run before seeing it."""
        rep.n_preempt_seen = rep.n_preempt
        if not self.queue or rep.role != DECODE_ONLY:
            return
        rep.in_flight = planned  # the planned step's growth is spoken for (`pending_blocks`)
        n = len(rep.incoming)
        self.dispatch(now, rep.index)
        rep.in_flight = False
        if planned and len(rep.incoming) > n:
            rep.run_steps = []
            rep.d, rep.k = 0.0, 1

    def dispatch(self, now: float, at: int) -> None:
        """Start the transfers of the queue's head while a decode replica can hold it; called as replica `at`
        (its index) commits or plans at `now`. A decode replica's step ending at `now` has been committed then
        in stepping if the replica comes before `at` in index order (`cluster.REPLICA_PRIORITY_STEP`), and not
        if after: its outstanding tokens are read so (`outstanding_after`, `outstanding_at`)."""
        queue = self.queue
        while queue:
            src, seq = queue[0]
            fits = [x for x in self.decode if x.can_hold(seq, now)]
            if not fits:
                return
            dst = fits[pick_min([x.outstanding_after(now) if x.index < at else x.outstanding_at(now) for x in fits],
                                self.rng)] if len(fits) > 1 else fits[0]
            queue.popleft()
            dst.reserve(seq, now)
            if self.changed is not None:
                self.changed.append(dst.local)
            nbytes = self.transfer_bytes(src, dst, seq.kv0)
            seq.transfer_start_s, seq.transfer_bytes = now, nbytes
            self.moving[seq.key] = (src, dst, seq)
            dst.link.start(seq.key, nbytes)
            nudge(dst, interrupt=True)

    def _arrive(self, key: object, now: float) -> None:
        src, dst, seq = self.moving.pop(key)  # type: ignore[call-overload]
        seq.transfer_end_s = now
        src.release_handed(seq, now)
        dst.receive(seq)
        nudge(src, interrupt=False)
        nudge(dst, interrupt=True)


def build_transfers(env: Any, config: EngineConfig, reps: list[Replica], pool_of: list[int],
                    budgets: list[KVBudget], node_of: list[NodeSpec], changed: list[int] | None,
                    rng: np.random.Generator) -> Transfers:
    """The hand-off queue and one ingress link per decode replica: a decode GPU's NIC (shared by the
    ``pp`` schedulers in flight on a replica's GPUs: each gets ``1/pp`` of it), the latency the larger
    of the two nodes'; bytes a transfer carries from `simulator.capacity.kv_transfer` (its nodes checked
    by the probe of each link here, then `kv_link_bytes` a transfer, memoised)."""
    model = config.model_spec()
    pp = [pool.pp for pool in config.pools]
    decode = [r for r in reps if r.role == DECODE_ONLY]
    p_pool = len(config.pools)  # the prefill pool, last
    memo: dict[tuple[int, int, int], float] = {}

    def transfer(src: Replica, dst: Replica, tokens: int) -> float:
        key = (pool_of[src.index], pool_of[dst.index], tokens)
        nbytes = memo.get(key)
        if nbytes is None:
            a, b = key[0], key[1]
            nbytes = memo[key] = kv_link_bytes(model, config.layout, tokens, budgets[a], budgets[b], node_of[a],
                                               node_of[b], config.block_tokens)
        return nbytes

    links = []
    for r in decode:
        probe = kv_transfer(model, config.layout, 1, budgets[p_pool], budgets[pool_of[r.index]], node_of[p_pool],
                            node_of[pool_of[r.index]])
        links.append((probe.link_bytes_per_s / pp[pool_of[r.index]], probe.latency_s))
    return Transfers(env, decode, links, transfer, rng, changed)
