"""The engine's timeouts: a callback list put in SimPy's event queue where ``env.timeout`` would put its
event, run by `simulator.engine.cluster.run_events` (not SimPy's ``env.run()``). The replicas' processes, the
injector's waits and the KV links' transfers (`simulator.engine.link`) all wait so; a module of its own so
that both `cluster` and `link` (which `cluster` imports) take the one `after`.
"""

from __future__ import annotations

from collections.abc import Callable
from heapq import heappush
from typing import Any

import simpy
from simpy.events import NORMAL

Timeout = list[Callable[[Any], None]]
"""An engine timeout (`after`): the callbacks of a timeout, as a list in SimPy's queue in place of an event."""


def after(env: simpy.Environment, delay: float, callback: Callable[[Any], None], priority: float = NORMAL) -> Timeout:
    """A timeout of `delay` with its one callback: the queue entry ``env.timeout(delay)`` with the callback
    appended would make (the same time, priority and event number, so the same order of events), its
    event the list of its callbacks (`Timeout`), which `cluster.run_events` calls. A SimPy event made, called and
    freed is ~2.5 k instructions more than the list (an `Event` subclass with this one callback was; the
    engine makes one or more for every request). Cancelled by emptying the list (it then fires with no
    callback, as a SimPy event whose callback was removed).
    With ``priority=URGENT`` and no delay it goes before every normal event of this time, as SimPy's own
    process start (`simpy.events.Initialize`) does; an integer 0 then keeps the clock an integer until the
    first timeout, as `Initialize` does (the records' times print so). A priority may be any number
    (SimPy only compares them): a replica's lies between NORMAL and NORMAL + 1 (`cluster.REPLICA_PRIORITY_STEP`).
    The hot callers write its push out (a call is ~800 instructions)."""
    if delay < 0:
        raise ValueError(f"negative delay {delay}")
    timeout = [callback]
    # `env.schedule(event, priority, delay)` written out: its queue entry, without the call
    heappush(env._queue, (env._now + delay, priority, next(env._eid), timeout))  # type: ignore[misc]
    return timeout
