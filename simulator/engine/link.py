"""A network link shared by concurrent transfers: processor sharing, one event per change.

A link moves ``bytes_per_s``; the ``n`` transfers in flight each move ``bytes_per_s / n`` (fair
sharing, as concurrent RDMA flows into one NIC do to first order). A transfer of ``S`` bytes
that starts alone at ``t0`` ends at ``t0 + S / bytes_per_s + latency_s``; the latency (one
message's, `hardware/nodes.toml` ``nic_latency_s``) is added once, after its bytes drained.

The link keeps, per transfer, the bytes left at the time of the last change (a start or an end):
between changes every transfer drains at the same rate, so the next to finish is the one with the
fewest bytes left, at ``now + n · left_min / bytes_per_s``. Each change re-arms one timeout for that
instant; a timeout armed before a later change is stale and does nothing when it fires. The timeouts are
the engine's (`timeouts.after`: run by `cluster.run_events`, not SimPy's ``env.run()``).
Cost: O(transfers in flight) per change, no event per byte or per step.

Invariants (tested): every transfer that starts ends, once; bytes are conserved (a transfer ends
exactly when its bytes have drained at its share of the rate); with one transfer at a time the end
is ``start + S / rate + latency``.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

from simulator.engine.timeouts import after
from simulator.errors import must


class Link:
    """Fair sharing of `bytes_per_s` among transfers; `on_done(key, now)` when one ends."""

    def __init__(self, env: Any, bytes_per_s: float, latency_s: float, on_done: Callable[[Hashable, float], None],
                 name: str = "link") -> None:
        must(bytes_per_s > 0, f"Link({name})", "bytes_per_s", "> 0", bytes_per_s)
        must(latency_s >= 0, f"Link({name})", "latency_s", ">= 0", latency_s)
        self.env, self.rate, self.latency_s, self.on_done, self.name = env, bytes_per_s, latency_s, on_done, name
        self.left: dict[Hashable, float] = {}  # bytes still to move, as of `self.t`
        self.t = 0.0
        self.armed = 0  # generation of the timeout that is current
        self.busy_s = 0.0  # seconds with at least one transfer in flight
        self.bytes_moved = 0.0
        self.started = 0
        self.ended = 0

    @property
    def in_flight(self) -> int:
        return len(self.left)

    def start(self, key: Hashable, nbytes: float) -> None:
        """Begin moving `nbytes` for `key` now."""
        must(key not in self.left, f"Link({self.name})", "key", "not already in flight", key)
        must(nbytes >= 0, f"Link({self.name})", "nbytes", ">= 0", nbytes)
        self._advance(self.env.now)
        self.left[key] = float(nbytes)
        self.started += 1
        self.bytes_moved += nbytes
        self._arm()

    def busy_until(self, now: float) -> float:
        """Seconds up to `now` with a transfer in flight."""
        return self.busy_s + (now - self.t if self.left else 0.0)

    def utilization(self, since_s: float, now: float) -> float:
        """Share of ``[since_s, now]`` with a transfer in flight (busy time is accrued at changes)."""
        busy = self.busy_s + (now - self.t if self.left else 0.0)
        span = now - since_s
        return min(1.0, busy / span) if span > 0 else 0.0

    def _advance(self, now: float) -> None:
        """Drain every transfer by its share of the bytes moved since the last change."""
        dt = now - self.t
        if dt > 0 and self.left:
            moved = dt * self.rate / len(self.left)
            for k in self.left:
                self.left[k] -= moved
            self.busy_s += dt
        self.t = now

    def _arm(self) -> None:
        self.armed += 1
        if not self.left:
            return
        gen = self.armed
        dt = max(0.0, min(self.left.values())) * len(self.left) / self.rate
        after(self.env, dt, lambda _: self._fire(gen))

    def _ender(self, key: Hashable) -> Callable[[Any], None]:
        """The callback that ends `key`'s transfer when its latency is over."""
        return lambda _: self.on_done(key, self.env.now)

    def _fire(self, gen: int) -> None:
        if gen != self.armed:
            return  # a later start or end re-armed the link
        now = self.env.now
        self._advance(now)
        # float rounding: whatever is within a byte's worth of the smallest is done with it
        least = min(self.left.values())
        done = [k for k, v in self.left.items() if v <= least + 1e-9 * max(1.0, abs(least))]
        for k in done:
            del self.left[k]
        self._arm()
        for k in done:
            self.ended += 1
            if self.latency_s:
                after(self.env, self.latency_s, self._ender(k))
            else:
                self.on_done(k, now)
