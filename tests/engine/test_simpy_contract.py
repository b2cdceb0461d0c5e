"""What the engine relies on inside SimPy (`pyproject.toml` admits any ``simpy>=4.1``).

`timeouts.after` pushes its own entry on the event queue (``env._queue``, numbered by
``env._eid``) where ``env.schedule`` would, `cluster.run_events` runs the queue as ``env.run()``
does (``Environment.step`` written out), and the replica process and the injector read the clock
as ``env._now`` rather than through the `now` property: a SimPy release that changes either fails
here, not silently in a run's order of events.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import simpy
from hypothesis import given, settings
from hypothesis import strategies as st
from simpy.events import NORMAL, URGENT

from simulator.engine import timeouts
from simulator.engine.cluster import run_events


def test_after_pushes_the_entry_that_schedule_would() -> None:
    mine, theirs = simpy.Environment(initial_time=2.0), simpy.Environment(initial_time=2.0)
    for env in (mine, theirs):
        env.timeout(0.5)  # one entry already queued: the same event number next
    after = timeouts.after(mine, 1.25, lambda _: None, 0.75)
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

    timeouts.after(env, 1.5, note("a"))
    env.timeout(1.5).callbacks.append(note("b"))
    timeouts.after(env, 1.5, note("c")).clear()  # cancelled: fires with no callback
    timeouts.after(env, 1.5, note("e"))
    timeouts.after(env, 0.25, note("d"))
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


@settings(max_examples=150, deadline=None)
@given(st.lists(st.sampled_from([0.0, 0.5, 1.0, 1.5]), max_size=8),
       st.lists(st.tuples(st.sampled_from([0.0, 0.5, 1.0]), st.sampled_from([URGENT, NORMAL, NORMAL + 2.0 ** -24])),
                max_size=5),
       st.lists(st.tuples(st.sampled_from([0.0, 0.5]), st.sampled_from([URGENT, NORMAL, NORMAL + 2.0 ** -24])),
                max_size=3))
def test_arrivals_beside_the_queue_go_where_simpy_pops_their_timeouts(
        times: list[float], before: list[tuple[float, float]], on_route: list[tuple[float, float]]) -> None:
    # the injector's next arrival waits beside the queue (`run_events`), not in it: requests (some at one time,
    # some at a timeout's time), timeouts queued before the injector and timeouts each route queues (the
    # priorities of an urgent start, an arrival or a wake-up, a replica's step) fire in the order SimPy's own
    # run gives them beside a process that waits a timeout for each later arrival (the injector's entries were)
    from types import SimpleNamespace

    from simulator.engine.cluster import _Injector

    requests = [SimpleNamespace(id=i, arrival_s=t) for i, t in enumerate(sorted(times))]

    def fire(simpy_run: bool) -> list[tuple[str, float]]:
        env = simpy.Environment()
        fired: list[tuple[str, float]] = []

        def later(delay: float, priority: float, name: str) -> None:  # an engine timeout, or SimPy's event
            def note(_: object) -> None:
                fired.append((name, env._now))

            if not simpy_run:
                timeouts.after(env, delay, note, priority)
                return
            event = simpy.Event(env)
            event._ok, event._value = True, None
            event.callbacks.append(note)
            env.schedule(event, priority, delay)  # type: ignore[arg-type]  # SimPy compares priorities only

        for j, (delay, priority) in enumerate(before):
            later(delay, priority, f"t{j}")

        def route(req: SimpleNamespace) -> None:
            fired.append((f"r{req.id}", env._now))
            for j, (delay, priority) in enumerate(on_route):
                later(delay, priority, f"r{req.id}t{j}")

        if not simpy_run:
            run_events(env, _Injector(env, requests, route))  # type: ignore[arg-type]
            assert not env._queue
            return fired

        def inject():  # type: ignore[no-untyped-def]
            for req in requests:
                if req.arrival_s > env.now:
                    yield env.timeout(req.arrival_s - env.now)
                route(req)

        env.process(inject())
        env.run()
        return fired

    mine = fire(False)
    assert mine == fire(True)
    assert [name for name, _ in mine if "t" not in name] == [f"r{i}" for i in range(len(times))]
