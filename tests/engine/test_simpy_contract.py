"""What the engine relies on inside SimPy (`pyproject.toml` admits any ``simpy>=4.1``).

`cluster._after` pushes its own entry on the event queue (``env._queue``, numbered by
``env._eid``) where ``env.schedule`` would, `cluster.run_events` runs the queue as ``env.run()``
does (``Environment.step`` written out), and the replica process and the injector read the clock
as ``env._now`` rather than through the `now` property: a SimPy release that changes either fails
here, not silently in a run's order of events.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import simpy

from simulator.engine.cluster import _after, run_events


def test_after_pushes_the_entry_that_schedule_would() -> None:
    mine, theirs = simpy.Environment(initial_time=2.0), simpy.Environment(initial_time=2.0)
    for env in (mine, theirs):
        env.timeout(0.5)  # one entry already queued: the same event number next
    after = _after(mine, 1.25, lambda _: None, 0.75)
    event = simpy.Event(theirs)
    event._ok, event._value = True, None
    theirs.schedule(event, 0.75, 1.25)  # type: ignore[arg-type]  # SimPy compares priorities only
    assert [e[:3] for e in sorted(mine._queue)] == [e[:3] for e in sorted(theirs._queue)]
    assert sorted(mine._queue)[-1] == (3.25, 0.75, 1, after)


def test_after_fires_its_callback_in_schedule_order_with_the_clock() -> None:
    env = simpy.Environment()
    fired: list[tuple[str, float, float]] = []

    def note(name: str) -> Callable[[object], None]:
        return lambda _: fired.append((name, env.now, env._now))

    _after(env, 1.5, note("a"))
    env.timeout(1.5).callbacks.append(note("b"))
    _after(env, 1.5, note("c")).clear()  # cancelled: fires with no callback
    _after(env, 1.5, note("e"))
    _after(env, 0.25, note("d"))
    run_events(env)
    assert fired == [("d", 0.25, 0.25), ("a", 1.5, 1.5), ("b", 1.5, 1.5), ("e", 1.5, 1.5)]
    assert not env._queue


def test_run_events_raises_a_failed_event_as_simpy_does() -> None:
    for run in (run_events, simpy.Environment.run):
        env = simpy.Environment()
        env.event().fail(KeyError("lost"))
        with pytest.raises(KeyError, match="lost") as caught:
            run(env)
        assert isinstance(caught.value.__cause__, KeyError)
        env = simpy.Environment()
        failed = env.event()
        failed.fail(KeyError("lost"))
        failed.defused = True  # a defused failure is not raised
        run(env)
