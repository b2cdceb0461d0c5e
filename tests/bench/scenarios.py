"""The workloads issue 15 sets its goals on, built the same way by `make bench` and by profiling.

- ``vidur``: Vidur's own shape (arxiv-summarization): 10,000 requests, Poisson 2 QPS, long prompts
  (lognormal, mean ~8k tokens) and outputs (mean ~300), Llama-3.1-8B on one H100 (the catalog has no
  Llama-2-7B: same shape class, GQA), chunked prefill of 512 tokens a step.
- ``chat-4k`` / ``chat-4k-prefix``: the shipped chat-4k generator (multi-turn sessions, shared system
  prompts) on 4 × 8×H100 serving Llama-3-70B at tp 8, at about 70 % of the load the cluster sustains,
  without and with the prefix cache.
- ``mooncake``: the Mooncake synthetic trace (block hashes: equal leading ids share a prefix) from
  ``../shared/data/traces/`` on 4 × 8×H100 serving Llama-3.1-70B at tp 8, with the prefix cache;
  absent on a fresh clone (the bench then skips it).

Every builder returns ``(config, requests, n, timer)``: `requests` is a one-shot iterator.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from hardware.catalog import load_catalog
from simulator.engine import EngineConfig, SchedulerConfig
from simulator.engine.cluster import cost_model_timer
from simulator.engine.timer import StepTimer
from simulator.kv import KVLayout
from simulator.models import get_model
from workloads.request import Request

REPO = Path(__file__).resolve().parents[2]
TRACES = REPO.parent / "shared" / "data" / "traces"
MOONCAKE = TRACES / "mooncake-synthetic.jsonl"

Built = tuple[EngineConfig, Iterator[Request], int, StepTimer | None]


def vidur_requests(n: int = 10_000, rate_per_s: float = 2.0, seed: int = 0) -> Iterator[Request]:
    """Poisson arrivals; prompts lognormal (mean 8k, σ 0.6, in [256, 32k]), outputs lognormal
    (mean 300, σ 0.7, in [8, 2048]): arxiv-summarization's shape (long documents, short summaries)."""
    rng = np.random.default_rng(seed)
    gaps = rng.exponential(1 / rate_per_s, n)
    sp, so = 0.6, 0.7
    prompts = np.clip(rng.lognormal(np.log(8000) - sp * sp / 2, sp, n), 256, 32768).astype(int)
    outputs = np.clip(rng.lognormal(np.log(300) - so * so / 2, so, n), 8, 2048).astype(int)
    t = 0.0
    for i in range(n):
        t += float(gaps[i])
        p = int(prompts[i])
        yield Request(id=i, arrival_s=t, prompt_tokens=p, output_tokens=int(outputs[i]), segments=((i, p),))


def vidur(n: int = 10_000) -> Built:
    """Llama-3.1-8B on one H100 (a one-GPU node cut from 8×H100), chunk 512."""
    node = dataclasses.replace(load_catalog().node("8xH100"), key="1xH100", gpus=1, nvlink_domain_gpus=0,
                               host_dram_bytes=2.0e12 / 8, nvme_bytes=30.72e12 / 8)
    config = EngineConfig(model="Llama-3.1-8B", node=node, n_nodes=1, tp=1, cache="none",
                          scheduler=SchedulerConfig(max_num_batched_tokens=512), sample_interval_s=1.0)
    return config, vidur_requests(n), n, None


# the engine's default is the prefix cache: the plain figures name "none"
CHAT_CONFIG = EngineConfig(model="Llama-3-70B", node="8xH100", n_nodes=4, tp=8, cache="none", sample_interval_s=1.0)


def chat_timer() -> StepTimer:
    return cost_model_timer(load_catalog().node("8xH100"), get_model("Llama-3-70B"), 8, KVLayout())


def per_replica_rate(timer: StepTimer, mean_prompt: int, mean_output: int, batch: int = 256) -> float:
    """Requests/s one replica sustains: prefill time + its share of full-batch decode steps."""
    a_s, b_s = timer.decode_coefficients(batch)
    step = a_s + b_s * batch * (mean_prompt + mean_output / 2)
    per_request_s = timer.step_s([(mean_prompt, 0)], 0, 0) + mean_output / batch * step
    return 1 / per_request_s


def chat4k(n: int = 100_000, prefix: bool = False) -> Built:
    """The chat-4k generator at 70 % of what 4 replicas sustain, ~`n` requests."""
    from workloads import load_workload

    timer = chat_timer()
    replicas = 4
    base = load_workload("chat-4k", seed=0, duration_s=3600)
    base_rate = len(base.requests()) / 3600
    mean_prompt = float(np.mean([r.prompt_tokens for r in base]))
    mean_output = float(np.mean([r.output_tokens for r in base]))
    target = 0.7 * replicas * per_replica_rate(timer, int(mean_prompt), int(mean_output))
    wl = load_workload("chat-4k", seed=0, duration_s=n / target, rate_scale=target / base_rate)
    reqs = wl.requests()
    config = dataclasses.replace(CHAT_CONFIG, cache="prefix") if prefix else CHAT_CONFIG
    return config, iter(reqs), len(reqs), timer


def mooncake(path: Path = MOONCAKE) -> Built:
    """The Mooncake trace (block hashes), Llama-3.1-70B on 4 × 8×H100 tp 8, prefix cache."""
    from workloads.traces.mooncake import read_mooncake

    config = EngineConfig(model="Llama-3.1-70B", node="8xH100", n_nodes=4, tp=8, cache="prefix",
                          sample_interval_s=1.0)
    reqs = read_mooncake(path).requests()  # parsed up front, as the generated workloads are
    return config, iter(reqs), len(reqs), None


def poisson_chat(n: int, rate_per_s: float, mean_prompt: int, mean_output: int, seed: int = 0) -> Iterator[Request]:
    """Streamed Poisson requests; prompt ~ uniform(0.5, 1.5)·mean, output geometric with that mean (≤ 8k context)."""
    rng = np.random.default_rng(seed)
    gaps = rng.exponential(1 / rate_per_s, n)
    prompts = rng.integers(mean_prompt // 2, mean_prompt * 3 // 2 + 1, n)
    outputs = np.minimum(rng.geometric(1 / mean_output, n), 8192 - prompts - 1)
    t = 0.0
    for i in range(n):
        t += float(gaps[i])
        p = int(prompts[i])
        yield Request(id=i, arrival_s=t, prompt_tokens=p, output_tokens=max(1, int(outputs[i])), segments=((i, p),))


def scale(replicas: int, n: int = 20_000, load: float = 0.7) -> Built:
    """Chat 2k/250 at `load` of what `replicas` replicas of Llama-3.1-8B (one H100 each) sustain."""
    base = load_catalog().node("8xH100")
    per_node = min(replicas, base.gpus)
    node = dataclasses.replace(base, key=f"{per_node}xH100", gpus=per_node)
    if replicas % per_node:
        raise ValueError(f"replicas must be a multiple of {per_node} (got {replicas})")
    timer = cost_model_timer(node, get_model("Llama-3.1-8B"), 1, KVLayout())
    rate = load * replicas * per_replica_rate(timer, 2000, 250)
    config = EngineConfig(model="Llama-3.1-8B", node=node, n_nodes=replicas // per_node, tp=1, cache="none",
                          sample_interval_s=1.0)
    return config, poisson_chat(n, rate, 2000, 250), n, timer


# ----------------------------------------------------------------------------- a day of traffic
DAY_S = 86_400.0
# Azure LLM inference traces (2023, `../shared/data/traces/README.md`): conversation prompts mean 1,155
# p50 1,020, answers mean 211 p50 129; code prompts mean 2,048 p50 1,469, answers mean 28 p50 13.
# Lognormal with that mean and median: sigma^2 = 2 ln(mean / median).
AZURE_LENGTHS = {"conv": ((1155, 1020), (211, 129)), "code": ((2048, 1469), (28, 13))}


def _lognormal(rng: np.random.Generator, mean: float, median: float, n: int, high: int) -> np.ndarray:
    sigma = float(np.sqrt(2 * np.log(mean / median)))
    return np.clip(rng.lognormal(np.log(median), sigma, n), 1, high).astype(np.int64)


def azure_day(requests_per_day: float = 4_000_000, seed: int = 0, hours: float = 24.0) -> Iterator[Request]:
    """A synthetic Azure-like day, streamed an hour at a time: diurnal Poisson arrivals
    (`workloads.arrivals.Diurnal`: mean ``requests_per_day / 86,400`` per second, 3:1 peak to trough,
    peak at 14:00), half conversation and half code requests with the Azure 2023 length laws."""
    from workloads.arrivals import Diurnal

    rng = np.random.default_rng(seed)
    rate = requests_per_day / DAY_S
    next_id = 0
    for h in range(int(np.ceil(hours))):
        span = min(3600.0, hours * 3600.0 - h * 3600.0)
        times = Diurnal(rate_per_s=rate, start_s=h * 3600.0).times(rng, span) + h * 3600.0
        n = len(times)
        code = rng.random(n) < 0.5
        prompts = np.where(code, _lognormal(rng, *AZURE_LENGTHS["code"][0], n, 16_000),
                           _lognormal(rng, *AZURE_LENGTHS["conv"][0], n, 16_000))
        outputs = np.where(code, _lognormal(rng, *AZURE_LENGTHS["code"][1], n, 4_000),
                           _lognormal(rng, *AZURE_LENGTHS["conv"][1], n, 4_000))
        for t, p, o in zip(times.tolist(), prompts.tolist(), outputs.tolist(), strict=True):
            yield Request(id=next_id, arrival_s=t, prompt_tokens=p, output_tokens=o, segments=((next_id, p),))
            next_id += 1


DAY_CONFIG = EngineConfig(model="Llama-3.1-70B", node="8xH100", n_nodes=8, tp=8, cache="none", sample_interval_s=1.0)


def day(requests_per_day: float = 4_000_000, hours: float = 24.0) -> Built:
    """Llama-3.1-70B on 8 × 8×H100 (tp 8, 8 replicas) serving `azure_day`: ~65 % busy at the peak."""
    n = int(requests_per_day * hours / 24)  # about; the stream is generated as it is replayed
    return DAY_CONFIG, azure_day(requests_per_day, hours=hours), n, None


SCENARIOS: dict[str, Callable[..., Built]] = {
    "vidur": vidur,
    "chat-4k": lambda n=100_000: chat4k(n, prefix=False),
    "chat-4k-prefix": lambda n=100_000: chat4k(n, prefix=True),
    "mooncake": lambda n=None: mooncake(),
    **{f"scale-{r}": functools.partial(scale, r) for r in (1, 4, 16, 64, 256)},
    "day-1h": lambda n=None: day(hours=1.0),
}


def build(name: str, n: int | None = None) -> Built:
    """The scenario `name` (with about `n` requests where it is generated)."""
    fn = SCENARIOS[name]
    args: dict[str, Any] = {} if n is None else {"n": n}
    return fn(**args)
