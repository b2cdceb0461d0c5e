"""code-repo-128k: agent sessions over shared repository contexts of 32k-128k tokens.

Each team works on its own repositories. A repository's context (32k-128k tokens, drawn
once per repository) is one segment shared by every request on that repository; a commit
gives it a new id (commits arrive as a Poisson process per repository). An agent task
pins the repository version current at its start and runs in *bursts*: tool-call turns a
few seconds apart, then an idle gap of minutes, then the next burst. Each turn's prompt::

    [repo@version] + [task] + (output_k, tool_result_k)...   (history grows by leading ids)

A task stops at the first turn whose prompt would exceed ``max_prompt_tokens`` (a task whose
repository and description alone exceed it sends nothing).
Cache breakpoints: after the repository, after the task, and at the end: ``(1, 2, n)`` (turn 0: ``(1, 2)``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import ClassVar

import numpy as np
from scipy import stats

from simulator.errors import must
from simulator.limits import MAX_SHARED_PREFIXES
from workloads.arrivals import ArrivalProcess, Poisson
from workloads.distributions import LARGEST_TOKENS, LogNormal, geometric_counts
from workloads.generators import finalize, register_generator
from workloads.request import Request
from workloads.segments import SegmentIds

# defaults (frozen, shared safely); see the class docstring for sources
_TASK_TOKENS = LogNormal(mean=400, cv=1.0, low=1, high=8000)
_TOOL_GAP_S = LogNormal(mean=5, cv=1.0, low=0.5, high=120)
_IDLE_GAP_S = LogNormal(mean=300, cv=1.0, low=30, high=3600)
_TOOL_RESULT_TOKENS = LogNormal(mean=1500, cv=1.5, low=1, high=20_000)
_OUTPUT_TOKENS = LogNormal(mean=250, cv=1.0, low=1, high=4096)


@register_generator
@dataclass(frozen=True, slots=True, kw_only=True)
class CodeRepo128k:
    """Parameters of the coding-agent workload; defaults and where they come from.

    Parameters
    ----------
    tasks
        Arrival process of agent tasks over all teams. Default Poisson at 0.02/s (one task
        every 50 s; an assumption, scale with ``rate_scale``).
    n_teams, repos_per_team
        Each task picks a team uniformly, then one of its repositories. Default 8 × 1.
    repo_min_tokens, repo_max_tokens
        Repository context, uniform in this range (``scipy.stats.uniform``), drawn once per
        repository: default 32,768-114,688 (32k-112k), so that repository + task + history
        spans the 32k-128k "code-repo context" of the product brief within a 128k window.
    commit_rate_per_s
        Per-repository rate of context changes. Default 1/1800 (a commit every 30 min,
        an assumption). A new version keeps the length and gets a new segment id.
    task_tokens
        The task description. Default mean 400, CV 1 (an assumption).
    mean_bursts, mean_calls_per_burst
        Geometric counts. Default 3 bursts of 8 tool calls (an assumption in line with
        SWE-agent style trajectories of a few dozen steps).
    tool_gap_s, idle_gap_s
        Gap between calls in a burst (default mean 5 s, CV 1, at least 0.5 s) and between
        bursts (default mean 300 s, CV 1, within [30 s, 1 h]); assumptions.
    tool_result_tokens, output_tokens
        Tool result appended per turn (default mean 1,500, CV 1.5, at most 20,000) and the
        model's tool call or answer (default mean 250, CV 1, at most 4,096); assumptions.
    max_prompt_tokens
        Prompt cap: a task stops (the agent starts a fresh one) before its prompt passes it.
        Default 126,976 = 131,072 (Llama-3.1's 128k window) - 4,096 for the answer.
    """

    name: ClassVar[str] = "code-repo-128k"
    default_duration_s: ClassVar[float] = 3600.0

    tasks: ArrivalProcess = field(default_factory=lambda: Poisson(rate_per_s=0.02))
    n_teams: int = 8
    repos_per_team: int = 1
    repo_min_tokens: int = 32_768
    repo_max_tokens: int = 114_688
    commit_rate_per_s: float = 1 / 1800
    task_tokens: LogNormal = _TASK_TOKENS
    mean_bursts: float = 3.0
    mean_calls_per_burst: float = 8.0
    tool_gap_s: LogNormal = _TOOL_GAP_S
    idle_gap_s: LogNormal = _IDLE_GAP_S
    tool_result_tokens: LogNormal = _TOOL_RESULT_TOKENS
    output_tokens: LogNormal = _OUTPUT_TOKENS
    max_prompt_tokens: int = 126_976

    def __post_init__(self) -> None:
        where = "CodeRepo128k"
        must(self.n_teams >= 1, where, "n_teams", ">= 1", self.n_teams)
        must(self.repos_per_team >= 1, where, "repos_per_team", ">= 1", self.repos_per_team)
        must(self.n_teams * self.repos_per_team <= MAX_SHARED_PREFIXES, where, "n_teams × repos_per_team",
             f"at most {MAX_SHARED_PREFIXES:,} repositories (kvsim's limit)", self.n_teams * self.repos_per_team)
        must(self.repo_min_tokens >= 1, where, "repo_min_tokens", ">= 1", self.repo_min_tokens)
        must(self.repo_max_tokens <= LARGEST_TOKENS, where, "repo_max_tokens", f"<= {LARGEST_TOKENS:,}",
             self.repo_max_tokens)
        must(
            self.repo_max_tokens >= self.repo_min_tokens, where, "repo_max_tokens",
            f">= repo_min_tokens={self.repo_min_tokens}", self.repo_max_tokens,
        )
        must(self.commit_rate_per_s >= 0, where, "commit_rate_per_s", ">= 0", self.commit_rate_per_s)
        must(self.mean_bursts >= 1, where, "mean_bursts", ">= 1", self.mean_bursts)
        must(self.mean_calls_per_burst >= 1, where, "mean_calls_per_burst", ">= 1", self.mean_calls_per_burst)
        rates = (self.commit_rate_per_s, self.mean_bursts, self.mean_calls_per_burst)
        must(all(math.isfinite(x) for x in rates), where, "commit_rate_per_s, mean_bursts and mean_calls_per_burst",
             "finite", rates)
        must(
            self.max_prompt_tokens > self.repo_max_tokens, where, "max_prompt_tokens",
            f"> repo_max_tokens={self.repo_max_tokens}", self.max_prompt_tokens,
        )
        for tokens in (self.task_tokens, self.tool_result_tokens, self.output_tokens):
            tokens.check_tokens()

    def expected_requests(self, duration_s: float) -> float:
        """Tool calls drawn (tasks × bursts × calls per burst), plus the commits drawn per repository."""
        calls = self.tasks.expected_count(duration_s) * self.mean_bursts * self.mean_calls_per_burst
        return calls + self.n_teams * self.repos_per_team * self.commit_rate_per_s * duration_s

    def scaled(self, factor: float) -> CodeRepo128k:
        """Task arrival rate times `factor` (commit rates unchanged)."""
        return replace(self, tasks=self.tasks.scaled(factor))

    def _repo_versions(self, rng: np.random.Generator, n_repos: int, duration_s: float) -> list[np.ndarray]:
        """Commit times per repository; version at ``t`` = commits at or before ``t``."""
        if self.commit_rate_per_s == 0:
            return [np.empty(0) for _ in range(n_repos)]
        commits = Poisson(rate_per_s=self.commit_rate_per_s)
        return [commits.times(rng, duration_s) for _ in range(n_repos)]

    def generate(self, rng: np.random.Generator, duration_s: float) -> list[Request]:
        """All turns arriving in ``[0, duration_s)``, arrival-ordered."""
        ids = SegmentIds(rng)
        n_repos = self.n_teams * self.repos_per_team
        width = self.repo_max_tokens - self.repo_min_tokens
        repo_tokens = np.rint(
            stats.uniform(loc=self.repo_min_tokens, scale=width).rvs(size=n_repos, random_state=rng)
        ).astype(np.int64)
        commit_times = self._repo_versions(rng, n_repos, duration_s)
        repo_ids: dict[tuple[int, int], int] = {}
        starts = self.tasks.times(rng, duration_s)
        n_tasks = starts.size
        repo_of = rng.integers(0, n_repos, size=n_tasks)  # team uniform, then repo: uniform overall
        tasks = self.task_tokens.sample_tokens(rng, n_tasks)
        bursts = geometric_counts(rng, self.mean_bursts, n_tasks)
        n_bursts = int(bursts.sum())
        calls = geometric_counts(rng, self.mean_calls_per_burst, n_bursts)
        n_calls = int(calls.sum())
        results = self.tool_result_tokens.sample_tokens(rng, n_calls)
        outputs = self.output_tokens.sample_tokens(rng, n_calls)
        tool_gaps = self.tool_gap_s.sample(rng, n_calls)
        idle_gaps = self.idle_gap_s.sample(rng, n_bursts)
        call_start = np.concatenate(([0], np.cumsum(calls)))  # first call index of each burst
        out: list[Request] = []
        b_at = 0
        for s in range(n_tasks):
            t = float(starts[s])
            repo = int(repo_of[s])
            version = int(np.searchsorted(commit_times[repo], t, side="right"))
            if (repo, version) not in repo_ids:
                repo_ids[(repo, version)] = ids.new("repo")
            segments: tuple[tuple[int, int], ...] = (
                (repo_ids[(repo, version)], int(repo_tokens[repo])),
                (ids.new("task"), int(tasks[s])),
            )
            used = int(repo_tokens[repo]) + int(tasks[s])
            turn, stopped = 0, False
            for b in range(int(bursts[s])):
                if b > 0:
                    t += float(idle_gaps[b_at + b])
                c_at = int(call_start[b_at + b])
                for c in range(int(calls[b_at + b])):
                    if c > 0:
                        t += float(tool_gaps[c_at + c])
                    if turn > 0:  # the previous call's result arrives with this prompt
                        result = int(results[c_at + c])
                        if t >= duration_s or used + result > self.max_prompt_tokens:
                            stopped = True
                            break
                        segments = (*segments, (ids.new("tool"), result))
                        used += result
                    if t >= duration_s or used > self.max_prompt_tokens:  # (turn 0: repository + task alone)
                        stopped = True
                        break
                    answer, out_id = int(outputs[c_at + c]), ids.new("output")
                    out.append(
                        Request(
                            id=0, arrival_s=t, prompt_tokens=used, output_tokens=answer,
                            segments=segments, session_id=s, turn=turn, output_segment_id=out_id,
                            # (turn 0 ends at the task: its two breakpoints are one, helper-147)
                            cache_breakpoints=(1, 2, len(segments)) if len(segments) > 2 else (1, 2),
                            source=self.name,
                        )
                    )
                    segments = (*segments, (out_id, answer))
                    used += answer
                    turn += 1
                if stopped:
                    break
            b_at += int(bursts[s])
        return finalize(out)
