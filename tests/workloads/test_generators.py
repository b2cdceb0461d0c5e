"""Generators: determinism, sharing structure, statistics against configuration, registry."""

import itertools
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pytest

from simulator.errors import ConfigError
from workloads.arrivals import Poisson
from workloads.distributions import LogNormal
from workloads.generators import GENERATORS, generator_from_dict, register_generator
from workloads.generators.chat import Chat4k
from workloads.generators.code_repo import CodeRepo128k
from workloads.generators.mixture import Mixture
from workloads.request import Request


def gen(g: object, seed: int, duration_s: float) -> list[Request]:
    return g.generate(np.random.default_rng(seed), duration_s)  # type: ignore[attr-defined,no-any-return]


def test_chat_same_seed_same_stream_other_seed_differs() -> None:
    a, b, c = gen(Chat4k(), 7, 300), gen(Chat4k(), 7, 300), gen(Chat4k(), 8, 300)
    assert a == b
    assert a != c
    assert [r.id for r in a] == list(range(len(a)))
    assert all(x.arrival_s <= y.arrival_s for x, y in itertools.pairwise(a))


def test_chat_sessions_share_system_prompt_and_grow_history() -> None:
    reqs = gen(Chat4k(n_system_prompts=3), 1, 1200)
    by_session: dict[int, list[Request]] = {}
    for r in reqs:
        by_session.setdefault(r.session_id, []).append(r)
    firsts = {r.segments[0] for r in reqs}
    assert len(firsts) == 3  # every request starts with one of the 3 system prompts
    multi = [turns for turns in by_session.values() if len(turns) >= 2]
    assert len(multi) > 50
    for turns in multi:
        assert [r.turn for r in turns] == list(range(len(turns)))
        for prev, nxt in itertools.pairwise(turns):
            n = len(prev.segments)
            # turn k+1 = turn k's chain + (its output) + one new user message
            assert nxt.segments[:n] == prev.segments
            assert nxt.segments[n] == (prev.output_segment_id, prev.output_tokens)
            assert len(nxt.segments) == n + 2
    # user messages of different sessions never share ids
    users = [r.segments[-1][0] for r in reqs]
    assert len(set(users)) == len(users)
    assert all(r.prompt_tokens <= 4096 for r in reqs)
    assert all(r.cache_breakpoints == (1, len(r.segments)) for r in reqs)


def test_chat_statistics_match_configuration() -> None:
    g = Chat4k(
        sessions=Poisson(rate_per_s=2.0),
        output_tokens=LogNormal(mean=200, cv=1.0),
        user_tokens=LogNormal(mean=50, cv=1.0),
        mean_turns=1.0,
        max_prompt_tokens=100_000,
    )
    reqs = gen(g, 3, 5000)
    # one turn per session: request count ~ Poisson(2 * 5000) = 10,000 +- 100
    assert abs(len(reqs) - 10_000) < 500
    out = np.array([r.output_tokens for r in reqs])
    assert out.mean() == pytest.approx(200, rel=0.05)
    user = np.array([r.segments[-1][1] for r in reqs])
    assert user.mean() == pytest.approx(50, rel=0.05)


def test_chat_think_times_and_turns() -> None:
    g = Chat4k(sessions=Poisson(rate_per_s=1.0), mean_turns=4.0, max_prompt_tokens=10**6,
               think_time_s=LogNormal(mean=30, cv=1.0))  # fmt: skip
    reqs = gen(g, 4, 20_000)
    by_session: dict[int, list[float]] = {}
    for r in reqs:
        by_session.setdefault(r.session_id, []).append(r.arrival_s)
    gaps = np.concatenate([np.diff(v) for v in by_session.values()])
    assert gaps.mean() == pytest.approx(30, rel=0.05)
    assert len(reqs) / len(by_session) == pytest.approx(4.0, rel=0.05)


def test_code_repo_shares_repository_prefix_and_bursts() -> None:
    g = CodeRepo128k(n_teams=4, commit_rate_per_s=0.0)
    reqs = gen(g, 5, 3600)
    assert reqs == gen(g, 5, 3600)
    repos = {r.segments[0] for r in reqs}
    assert len(repos) == 4  # one context per repository, shared by all its requests
    assert all(32_768 <= tokens <= 114_688 for _, tokens in repos)
    by_task: dict[int, list[Request]] = {}
    for r in reqs:
        by_task.setdefault(r.session_id, []).append(r)
    task_ids = {turns[0].segments[1][0] for turns in by_task.values()}
    assert len(task_ids) == len(by_task)  # different tasks on one repo diverge after the repo
    gaps = []
    for turns in by_task.values():
        for prev, nxt in itertools.pairwise(turns):
            n = len(prev.segments)
            assert nxt.segments[:n] == prev.segments
            assert nxt.segments[n] == (prev.output_segment_id, prev.output_tokens)
            gaps.append(nxt.arrival_s - prev.arrival_s)
    g_arr = np.array(gaps)
    assert np.median(g_arr) < 15  # tool calls seconds apart
    assert np.mean(g_arr >= 30) > 0.03  # and idle gaps of minutes between bursts
    # after the repository, the task and the prompt's end; turn 0 ends at the task (helper-147: it read (1, 2, 2))
    assert all(r.cache_breakpoints == ((1, 2) if r.turn == 0 else (1, 2, len(r.segments))) for r in reqs)
    assert any(r.turn == 0 for r in reqs) and all(len(r.segments) == 2 for r in reqs if r.turn == 0)


def test_code_repo_commits_change_the_context_id() -> None:
    g = CodeRepo128k(n_teams=1, commit_rate_per_s=1 / 300, tasks=Poisson(rate_per_s=0.05))
    reqs = gen(g, 6, 3600)
    contexts = {r.segments[0][0] for r in reqs}
    assert len(contexts) > 3  # ~12 commits in an hour
    assert len({r.segments[0][1] for r in reqs}) == 1  # same repository length


def test_code_repo_turn_zero_keeps_the_prompt_cap() -> None:
    # helper-179: turn 0 (repository + task) was sent whatever its length: 126,000 + a 2,311-token task made a
    # 128,311-token prompt past the 126,976 cap. A task fits when its description is at most 126,976 - 126,000 =
    # 976 tokens: 46 of this seed's 64 tasks (turn 0 of each, 59 requests in all, was 64 and 77 before)
    g = CodeRepo128k(repo_min_tokens=126_000, repo_max_tokens=126_000,
                     task_tokens=LogNormal(mean=1000, cv=1.0, low=1, high=8000))
    reqs = gen(g, 0, 3600)
    assert len(reqs) == 59 and max(r.prompt_tokens for r in reqs) == 126_953 <= g.max_prompt_tokens
    first = [r for r in reqs if r.turn == 0]
    assert len(first) == len({r.session_id for r in reqs}) == 46
    assert max(r.segments[1][1] for r in first) == 953 <= 976


def test_mixture_merges_components() -> None:
    m = generator_from_dict({"name": "mixture", "components": [
        {"name": "chat-4k", "weight": 0.5}, {"name": "code-repo-128k", "n_teams": 2}]})  # fmt: skip
    assert isinstance(m, Mixture)
    reqs = gen(m, 9, 600)
    assert reqs == gen(m, 9, 600)
    sources = {r.source for r in reqs}
    assert sources == {"chat-4k", "code-repo-128k"}
    assert [r.id for r in reqs] == list(range(len(reqs)))
    chat_sessions = {r.session_id for r in reqs if r.source == "chat-4k"}
    code_sessions = {r.session_id for r in reqs if r.source == "code-repo-128k"}
    assert not chat_sessions & code_sessions
    # weight 0.5 halves chat's session rate: ~0.25/s * 600 s = 150 sessions
    assert abs(len(chat_sessions) - 150) < 5 * np.sqrt(150)


def test_registry_rejects_duplicates_and_lists_valid_names() -> None:
    with pytest.raises(ConfigError, match="already registered"):
        register_generator(Chat4k)
    names = r"workload.name: must be one of chat-4k, code-repo-128k, .*mixture.* \(got 'nope'\)"
    with pytest.raises(ConfigError, match=names):
        generator_from_dict({"name": "nope"})
    with pytest.raises(ConfigError, match=r"workload.max_tokens: unknown key \(valid: .*max_prompt_tokens"):
        generator_from_dict({"name": "chat-4k", "max_tokens": 5})
    with pytest.raises(ConfigError, match=r"workload.mean_turns: must be >= 1 \(got 0\)"):
        generator_from_dict({"name": "chat-4k", "mean_turns": 0})


def test_user_defined_generator_in_a_mixture() -> None:
    @register_generator
    @dataclass(frozen=True, slots=True, kw_only=True)
    class Fixed:
        name: ClassVar[str] = "test-fixed"
        default_duration_s: ClassVar[float] = 10.0
        every_s: float = 1.0

        def scaled(self, factor: float) -> "Fixed":
            return Fixed(every_s=self.every_s / factor)

        def generate(self, rng: np.random.Generator, duration_s: float) -> list[Request]:
            return [
                Request(id=i, arrival_s=t, prompt_tokens=10, output_tokens=1, segments=((5, 10),))
                for i, t in enumerate(np.arange(0.0, duration_s, self.every_s))
            ]

    try:
        m = generator_from_dict({"name": "mixture", "components": [{"name": "test-fixed", "weight": 2.0}]})
        reqs = gen(m, 0, 10)
        assert [r.arrival_s for r in reqs] == [0.5 * i for i in range(20)]
    finally:
        del GENERATORS["test-fixed"]
