"""The least-dispatched router: at every arrival it picks a replica with the fewest tokens it dispatched
there and has not had back (a prompt until its first token, an output until the request leaves), which
the test works out again from the run's records alone."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from simulator.cli import main
from simulator.engine import AffineTimer, EngineConfig, PoolConfig, SchedulerConfig, run
from simulator.engine.routers import basic, make_router
from tests.engine.helpers import poisson_requests
from tests.engine.test_differential import LEAST_DISPATCHED_SEEDS, _config, _requests
from tests.test_hostile_inputs import BASE
from workloads.request import Request

TIMER = AffineTimer(overhead_s=0.02, per_seq_s=1e-5, per_context_token_s=1.2e-8, per_prefill_token_s=3.6e-5)
FLEET = EngineConfig(n_nodes=1, tp=2, kv_blocks=300, cache="none", router="least-dispatched",
                     scheduler=SchedulerConfig(max_num_seqs=16, max_num_batched_tokens=512, queue_timeout_s=2.0))


class Seen:
    """The bound policies of a run and, in order, each choice: (policy, request id, index chosen)."""

    def __init__(self) -> None:
        self.policies: list[basic._LeastDispatched] = []
        self.choices: list[tuple[int, int, int]] = []


@pytest.fixture
def seen(monkeypatch: pytest.MonkeyPatch) -> Seen:
    out = Seen()
    bind, choose = basic.LeastDispatched.bind, basic._LeastDispatched.choose

    def bound(self: basic.LeastDispatched, rng: np.random.Generator) -> basic._LeastDispatched:
        policy = bind(self, rng)
        out.policies.append(policy)
        return policy

    def chosen(self: basic._LeastDispatched, request: Request, replicas: Any, now: float) -> int:
        i = choose(self, request, replicas, now)
        out.choices.append((out.policies.index(self), request.id, i))
        return i

    monkeypatch.setattr(basic.LeastDispatched, "bind", bound)
    monkeypatch.setattr(basic._LeastDispatched, "choose", chosen)
    return out


def leave_s(records: pd.DataFrame) -> pd.Series:
    """When each request left the replica its router chose: a hand-off from a prefill replica at its
    first token, any other request at its end (completed, rejected or timed out)."""
    handed = records.decode_replica != records.replica
    return records.end_s.where(~handed, records.arrival_s + records.ttft_s)


def first_token_s(records: pd.DataFrame) -> pd.Series:
    """When each request's first token came out; a request that left before it (rejected, timed out in
    the queue), when it left."""
    return (records.arrival_s + records.ttft_s).fillna(records.end_s)


def check_least(records: pd.DataFrame, seen: Seen, groups: list[list[int]]) -> int:
    """Assert that every choice was a replica whose load was the group's least: over the requests routed to
    it earlier, from `records`, the prompt tokens of those whose first token had not come out by this
    arrival and the output tokens of those that had not left. Return how many choices had one replica
    strictly least (the others all carry more)."""
    rec = records.set_index("request_id")
    left = leave_s(records).set_axis(records.request_id)
    first = first_token_s(records).set_axis(records.request_id)
    # a token counts for a later arrival while it is not back by then. The engine runs an arrival before a
    # replica's commit of the same instant, and a rejection at enqueue inside its own arrival's routing:
    # so a first token or a departure at exactly another request's arrival time would need that order spelt
    # out here. With Poisson arrivals none falls on one (checked), and the rule below is then exact (the times
    # rebuilt as arrival + ttft may differ from the engine's by an ulp: no arrival falls that close either)
    own = (records.outcome.eq("rejected") & records.end_s.eq(records.arrival_s)).to_numpy()
    arrivals = set(records.arrival_s)
    assert not left[~own].isin(arrivals).any() and not first[~own].isin(arrivals).any()
    routed: list[list[tuple[int, int]]] = [[] for _ in groups]  # per group: (request id, local index)
    strict = 0
    for g, rid, i in seen.choices:
        now = rec.arrival_s[rid]
        assert groups[g][i] == rec.replica[rid]  # the record says where it went
        load = [0] * len(groups[g])
        for other, j in routed[g]:
            if first[other] > now:
                load[j] += int(rec.prompt_tokens[other])
            if left[other] > now:
                load[j] += int(rec.output_tokens[other])
        assert load[i] == min(load), (rid, i, load)
        strict += load.count(min(load)) == 1
        routed[g].append((rid, i))
    return strict


def test_each_arrival_goes_to_the_least_dispatched_replica(seen: Seen) -> None:
    """4 replicas at a load that queues (Poisson 8/s, prompts 50-600, outputs 100-500), with 3 requests
    that can never fit (rejected at once) and a 2 s queue timeout: the records give every request's
    replica and the time it left, and from them each choice was a least loaded replica. Most choices are
    not ties (one replica strictly least), so the check is not met by any replica at all."""
    reqs = poisson_requests(300, 8.0, (50, 600), (100, 500), seed=4)
    reqs += poisson_requests(3, 1.0, 9000, 10, seed=5, start_s=5.0)  # more blocks than a replica holds
    reqs = sorted(reqs, key=lambda r: r.arrival_s)
    reqs = [replace(r, id=i) for i, r in enumerate(reqs)]
    result = run(FLEET, reqs, seed=3, timer=TIMER)
    records = result.requests
    outcomes = records.outcome.value_counts()
    assert outcomes["rejected"] == 3 and outcomes["timed_out"] > 0 and outcomes["completed"] > 200
    assert len(seen.choices) == len(reqs) and len(seen.policies) == 1
    strict = check_least(records, seen, [[0, 1, 2, 3]])
    assert strict > 0.8 * len(reqs)
    assert records.replica.nunique() == 4
    assert seen.policies[0]._values == [0, 0, 0, 0]  # every request left: the counts are back to 0
    assert seen.policies[0]._order == [0, 1, 2, 3]


def test_a_prefill_replica_counts_a_request_until_its_hand_off(seen: Seen) -> None:
    """A disaggregated fleet: prompts over 200 tokens go to 2 prefill replicas, the rest to 2 decode
    replicas, each pool with its own least-dispatched count. A long prompt leaves its prefill replica's
    count at its first token (its hand-off), not at its end on a decode replica: the records' first-token
    times, and the ends of the others, account for every choice of both pools."""
    config = EngineConfig(kv_blocks=0, router="least-dispatched", short_prompt_tokens=200, tp=4,
                          prefill_pool=PoolConfig(node="8xH100", n_nodes=1, tp=4))
    reqs = poisson_requests(250, 20.0, (20, 3000), (1, 400), seed=6)
    result = run(config, reqs, seed=1, timer=TIMER)
    records = result.requests
    assert (records.outcome == "completed").all()
    handed = records.decode_replica != records.replica
    assert handed.sum() > 100 and (records.prompt_tokens <= 200).sum() > 10
    prefill = sorted(records.replica[records.prompt_tokens > 200].unique())
    decode = sorted(records.replica[records.prompt_tokens <= 200].unique())
    assert len(prefill) == 2 and len(decode) == 2 and not set(prefill) & set(decode)
    # each pool's policy is the first to choose for a request of its kind
    first = {records.set_index("request_id").prompt_tokens[rid] > 200: g for g, rid, _ in reversed(seen.choices)}
    groups: list[list[int]] = [[], []]
    groups[first[True]], groups[first[False]] = prefill, decode
    strict = check_least(records, seen, groups)
    assert strict > 0.5 * len(reqs)
    assert all(p._values == [0, 0] for p in seen.policies)


def test_ties_are_drawn_at_random_and_counts_follow_ends() -> None:
    """The policy alone: three idle replicas tie at 0 and the generator draws among them; a request adds
    its prompt + output tokens to the replica chosen, `first_token` takes the prompt's off and `departed`
    the rest."""
    policy = basic.LeastDispatched().bind(np.random.default_rng(0))
    reps: list[Any] = [object()] * 3
    big, small = (Request(id=i, arrival_s=0.0, prompt_tokens=p, output_tokens=o, segments=((i, p),))
                  for i, p, o in ((0, 900, 100), (1, 50, 50)))
    first = policy.choose(big, reps, 0.0)
    assert policy._values[first] == 1000 and sum(policy._values) == 1000
    second = policy.choose(small, reps, 0.0)
    assert second != first and policy._values[second] == 100
    third = policy.choose(small, reps, 0.0)
    assert {first, second, third} == {0, 1, 2}  # the last idle one
    assert policy.choose(small, reps, 0.0) in (second, third)  # 100 each against 1000
    policy.first_token(first, big)  # its prompt is answered: 100 output tokens left
    assert policy._values[first] == 100
    policy.departed(first, big, True)
    assert policy._values[first] == 0 and policy.choose(small, reps, 0.0) == first
    policy.departed(first, small, False)  # left before its first token (rejected): prompt and output go
    assert policy._values[first] == 0
    # ties among idle replicas go to a drawn one, not the lowest index: over seeds, each is picked
    picks = {make_router("least-dispatched").bind(np.random.default_rng(s)).choose(small, reps, 0.0)
             for s in range(30)}
    assert picks == {0, 1, 2}


def scenario(router: str) -> str:
    """The hostile-input tests' small scenario on 4 replicas (tp 2 on one 8×H100), a minute of chat-4k at 20×
    its rate, routed by `router`."""
    text = BASE.replace('name = "least-tokens"', f'name = "{router}"').replace("tp = 1", "tp = 2")
    return text.replace("duration_s = 5", "duration_s = 60\nrate_scale = 20")


def test_a_scenario_file_names_it(tmp_path: Path) -> None:
    """``[router] name = "least-dispatched"`` in a scenario file: `kvsim run` (held and streamed) routes
    by it, over all 4 replicas, to other choices than least-tokens' on the same workload."""
    out: dict[str, pd.DataFrame] = {}
    for router in ("least-dispatched", "least-tokens"):
        path = tmp_path / f"{router}.toml"
        path.write_text(scenario(router))
        for stream in ((), ("--stream",)):
            folder = tmp_path / f"{router}{len(stream)}"
            r = CliRunner().invoke(main, ["run", str(path), "--out", str(folder), "--json", *stream])
            assert r.exit_code == 0, r.output
            requests = pd.read_csv(folder / "8xH100" / "requests.csv").sort_values("request_id")
            assert len(requests) > 700 and requests.replica.nunique() == 4
            out[f"{router}{len(stream)}"] = requests.reset_index(drop=True)
    assert out["least-dispatched0"].replica.equals(out["least-dispatched1"].replica)
    moved = (out["least-dispatched0"].replica != out["least-tokens0"].replica).mean()
    assert moved > 0.3


@pytest.mark.parametrize("seed", LEAST_DISPATCHED_SEEDS)
def test_every_routed_request_is_answered_at_most_once_and_departs_once(seed: int, monkeypatch) -> None:
    """Random configurations (the differential test's, 3 of the 8 disaggregated; preemption, timeouts,
    reservation, retention): `first_token` comes at most once for a request and before its `departed`,
    `departed` exactly once with `answered` telling whether `first_token` came, no count goes negative,
    and every count is back to 0 at the end."""
    rng = np.random.default_rng(seed)
    config = replace(_config(rng), router="least-dispatched")
    reqs = _requests(rng, int(rng.choice([20, 60, 150, 400])))
    first, departed = basic._LeastDispatched.first_token, basic._LeastDispatched.departed
    answered: dict[int, int] = {}
    gone: dict[int, int] = {}
    policies: list[basic._LeastDispatched] = []

    def on_first(self: basic._LeastDispatched, i: int, request: Request) -> None:
        assert request.id not in answered and request.id not in gone
        answered[request.id] = i
        first(self, i, request)
        assert min(self._values) >= 0

    def on_departed(self: basic._LeastDispatched, i: int, request: Request, was_answered: bool) -> None:
        assert request.id not in gone and was_answered == (request.id in answered)
        assert answered.get(request.id, i) == i
        gone[request.id] = i
        departed(self, i, request, was_answered)
        assert min(self._values) >= 0
        if self not in policies:
            policies.append(self)

    monkeypatch.setattr(basic._LeastDispatched, "first_token", on_first)
    monkeypatch.setattr(basic._LeastDispatched, "departed", on_departed)
    result = run(config, reqs, 1, timer=TIMER)
    assert len(gone) == len(reqs) == len(result.requests)
    assert set(answered) == set(result.requests.request_id[result.requests.ttft_s.notna()])
    assert policies and all(set(p._values) == {0} for p in policies)


class _Told:
    """Round-robin, told of first tokens or of departures only (the hooks are independent: `RoutePolicy`):
    each call noted as (request id, replica index, answered)."""

    def __init__(self, rng: np.random.Generator, hook: str) -> None:
        self.inner = basic._RoundRobin(rng)
        self.calls: list[tuple[int, int, bool]] = []
        setattr(self, hook, getattr(self, f"_{hook}"))

    def choose(self, request: Request, replicas: Any, now: float) -> int:
        return self.inner.choose(request, replicas, now)

    def _first_token(self, i: int, request: Request) -> None:
        self.calls.append((request.id, i, True))

    def _departed(self, i: int, request: Request, answered: bool) -> None:
        self.calls.append((request.id, i, answered))


@pytest.mark.parametrize("hook", ["first_token", "departed"])
@pytest.mark.parametrize("split", [False, True])
def test_a_policy_offering_one_hook_is_told_by_it(hook: str, split: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """A policy that offers only `first_token` is told of every first token, once, with the index it chose
    (its pool's, in a disaggregated fleet); one that offers only `departed`, of every request leaving the
    replica it chose, once, `answered` telling whether its first token came out. Runs that reject,
    time out and hand off."""
    policies: list[_Told] = []

    def bind(self: basic.RoundRobin, rng: np.random.Generator) -> _Told:
        policies.append(_Told(rng, hook))
        return policies[-1]

    monkeypatch.setattr(basic.RoundRobin, "bind", bind)
    reqs = poisson_requests(300, 8.0, (50, 600), (100, 500), seed=4)
    reqs += poisson_requests(2, 1.0, 9000, 10, seed=5, start_s=5.0)  # more blocks than a replica holds
    reqs = [replace(r, id=i) for i, r in enumerate(sorted(reqs, key=lambda r: r.arrival_s))]
    config = replace(FLEET, router="round-robin")
    if split:
        config = replace(config, kv_blocks=0, short_prompt_tokens=200,
                         prefill_pool=PoolConfig(node="8xH100", n_nodes=1, tp=4))
    records = run(config, reqs, seed=3, timer=TIMER).requests.set_index("request_id")
    answered = records.ttft_s.notna()
    if not split:
        assert (records.outcome == "rejected").sum() == 2 and (records.outcome == "timed_out").sum() > 0
    else:
        assert (records.decode_replica != records.replica).sum() > 50
    calls = [c for p in policies for c in p.calls]
    ids = [rid for rid, _, _ in calls]
    assert len(ids) == len(set(ids))  # once each
    if hook == "first_token":
        assert sorted(ids) == sorted(records.index[answered])
    else:
        assert sorted(ids) == sorted(records.index)
        assert all(flag == answered[rid] for rid, _, flag in calls)
    # the index is the policy's own: the chosen replica's place in its pool (the sorted replicas it routes to)
    for p in policies:
        replicas = sorted(records.replica[[rid for rid, _, _ in p.calls]].unique()) if p.calls else []
        assert all(replicas[i] == records.replica[rid] for rid, i, _ in p.calls)
