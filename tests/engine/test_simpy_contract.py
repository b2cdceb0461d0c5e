"""What the engine relies on inside SimPy (`pyproject.toml` admits any ``simpy>=4.1``).

`cluster._After` pushes its own entry on the event queue (``env._queue``, numbered by
``env._eid``) where ``env.schedule`` would, and the replica process and the injector read the clock
as ``env._now`` rather than through the `now` property: a SimPy release that changes either fails
here, not silently in a run's order of events.
"""

from __future__ import annotations

import simpy

from simulator.engine.cluster import _After


def test_after_pushes_the_entry_that_schedule_would() -> None:
    mine, theirs = simpy.Environment(initial_time=2.0), simpy.Environment(initial_time=2.0)
    for env in (mine, theirs):
        env.timeout(0.5)  # one entry already queued: the same event number next
    after = _After(mine, 1.25, lambda _: None, 0.75)
    event = simpy.Event(theirs)
    event._ok, event._value = True, None
    theirs.schedule(event, 0.75, 1.25)  # type: ignore[arg-type]  # SimPy compares priorities only
    assert [e[:3] for e in sorted(mine._queue)] == [e[:3] for e in sorted(theirs._queue)]
    assert sorted(mine._queue)[-1] == (3.25, 0.75, 1, after)


def test_after_fires_its_callback_in_schedule_order_with_the_clock() -> None:
    env = simpy.Environment()
    fired: list[tuple[str, float, float]] = []

    def note(name: str) -> object:
        return lambda _: fired.append((name, env.now, env._now))

    _After(env, 1.5, note("a"))
    env.timeout(1.5).callbacks.append(note("b"))  # type: ignore[union-attr]
    _After(env, 1.5, note("c"))
    _After(env, 0.25, note("d"))
    env.run()
    assert fired == [("d", 0.25, 0.25), ("a", 1.5, 1.5), ("b", 1.5, 1.5), ("c", 1.5, 1.5)]
