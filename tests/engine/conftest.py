"""Engine test fixtures: exact block accounting checked after every plan and commit."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from simulator.engine.decode import DECODE
from simulator.engine.replica import Replica


def expected_used(rep: Replica) -> int:
    """Blocks `rep` should count as used: its sequences' private blocks (a decoder's at its tokens now, with
    the window it grew since its base, `overhead_held`), those held for or reserved by KV transfers (a
    disaggregated fleet), and the cache's HBM blocks."""
    total = 0
    for s in rep.running.values():
        total += rep._private(s, s.kv_tokens(rep.S)) + rep.overhead_held(s) - s.ov if s.state == DECODE else s.blocks
    total += sum(s.blocks for s in rep.handing.values())
    total += sum(rep.geometry.blocks(s.kv0, s.ov) for s in (*rep.incoming.values(), *rep.arrived))
    tree = getattr(rep.cache, "tree", None)
    return total + (tree.blocks[0] if tree is not None else 0)


@pytest.fixture
def exact_blocks(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Check after every plan and commit that the used count is exact and within the pool."""
    bad: list[Any] = []

    def check(rep: Replica, where: str) -> None:
        if not 0 <= rep.used <= rep.total_blocks or expected_used(rep) != rep.used:
            bad.append((where, rep.index, rep.used, expected_used(rep)))

    after_plans_and_commits(monkeypatch, check)
    return bad


def after_plans_and_commits(monkeypatch: pytest.MonkeyPatch, check: Callable[[Replica, str], None]) -> None:
    """Call ``check(replica, "plan")`` after every `Replica.plan` and ``check(replica, "commit")`` after every
    `Replica.commit` (the fixtures' watch over the engine's state)."""
    plan, commit = Replica.plan, Replica.commit

    def plan_checked(self: Replica, now: float) -> bool:
        out = plan(self, now)
        check(self, "plan")
        return out

    def commit_checked(self: Replica, n: int, end_s: float) -> None:
        commit(self, n, end_s)
        check(self, "commit")

    monkeypatch.setattr(Replica, "plan", plan_checked)
    monkeypatch.setattr(Replica, "commit", commit_checked)
