"""Resource limits: the largest study kvsim accepts, checked before anything runs (a leaf module).

A scenario, a command-line value or an input file beyond a limit is a one-line `ConfigError`
naming the limit, instead of hours of simulation or memory grown until the machine swaps. The
README lists them ("Limits"); why each is where it is:

- `MAX_NODES` nodes in one fleet (``cluster.nodes``, ``compare --nodes``): 32,768 GPUs of
  8-GPU nodes, more than one model is served on anywhere. ``least-kv`` and ``prefix-affinity`` ask every
  replica at every arrival (``least-tokens`` up to 32 replicas, then a few), so a run costs up to
  requests × replicas: `kvsim run` of 1,006 chat requests on 8,192 replicas (1,024 8xH100 nodes at TP 1), the
  whole command, took 7.3 CPU s under least-kv, 3.3 under least-tokens and 2.8 under round-robin (2026-12-05).
- `MAX_CAPACITY_NODES`: where the capacity search (doubling, then bisection) gives up.
- `MAX_HORIZON_S` seconds of arrivals (``workload.duration_s``; a trace's replayed times): a
  year. Float seconds still resolve 4 ns there, far below any step time.
- `MAX_REQUESTS` requests in one workload: a generator's expected draws are checked before it
  draws (Poisson arrivals ``rate · duration``, times the turns or tool calls each brings), a
  trace's rows as they are replayed. A request costs about 1 kB held in memory (the workload
  and its record) and the engine simulates 10,000-29,000 a CPU second on `make bench`'s workloads (the
  README's bench): 2 GB and 1-3 minutes at the limit.
- `MAX_STREAMED_REQUESTS` requests in a trace replayed by a run that streams its records to its
  report folder (``kvsim run --stream``): such a run holds no record while it simulates; its summary
  reads back ~110 bytes a request a fleet, 134 in a disaggregated one
  (`simulator.engine.records.read_records`), and works on a few arrays
  of the requests' length. `make bench`'s day from the command line (``tests.bench.day --cli``, 4M
  requests) took 4.7 CPU minutes and 893 MiB (a fresh clone of afe4237): extrapolated, some 12 minutes and 2.2 GiB
  at the limit, for one fleet (a summarised fleet's report frames wait on disk while the next fleets run:
  `simulator.study.run_scenario`; two node kinds took 8.6 CPU minutes and 999 MiB). A generator's draws stay under
  `MAX_REQUESTS`: it holds them, as the report's capacity and break-even studies hold the workload.
- `MAX_SUMMARY_CHAINS` distinct prefix chains after which the workload summary follows no new request
  (`workloads.summary`: its prefix-hit share and reuse gaps, in ``kvsim workload describe`` and every report). A
  chain takes ~150 bytes (the Mooncake trace's hashed blocks: 43,924 chains for its 3,993 requests, 6.7 MB), up to
  ~200 with large block ids, so the limit holds 150-200 MB; a day of such a trace has tens of millions (400,000
  rows of that trace, its hash ids made new every 3,993 rows: `workload describe` peaked at 1,083 MB without the
  limit, 387 MB with it). Past it, the figures are those of the requests before it, and the summary says how many
  (the lengths and rate still cover every request).
- `MAX_SHARED_PREFIXES` prefixes a generator draws up front (``n_system_prompts``,
  ``n_teams × repos_per_team``).
- `MAX_REUSE_PER_MIN` reuses of one prefix a minute (``kvsim breakeven --rate``): 16.7 million a second, beyond
  any one prompt's traffic; its chart's rate axis runs to 10× the largest rate, which past ~1e307 is no float.
- `MAX_INPUT_BYTES` per input file read whole (scenario, catalog, params, profiles,
  ``config.json``, calibration CSV, ``--gaps``): `/dev/zero` as a catalog is an error after
  64 MiB, not a read without end. Traces stream, bounded by `MAX_REQUESTS` instead.
"""

from __future__ import annotations

import math

from simulator.errors import ConfigError, RuleError
from simulator.units import MIB

MAX_NODES = 4096
MAX_CAPACITY_NODES = 256
MAX_HORIZON_S = 366 * 86_400.0
MAX_REQUESTS = 2_000_000
MAX_STREAMED_REQUESTS = 10_000_000
MAX_SUMMARY_CHAINS = 1_000_000
MAX_SHARED_PREFIXES = 100_000
MAX_REUSE_PER_MIN = 1e9
MAX_INPUT_BYTES = 64 * MIB


def check_horizon(duration_s: float, where: str, key: str = "duration_s") -> None:
    """`duration_s` > 0 and at most `MAX_HORIZON_S`."""
    if not duration_s > 0:
        raise RuleError(where, key, "> 0", duration_s)
    if duration_s == math.inf:
        raise RuleError(where, key, "finite and > 0", duration_s)
    if not duration_s <= MAX_HORIZON_S:
        raise RuleError(where, key, f"at most {MAX_HORIZON_S:,.0f} s (366 days, kvsim's horizon limit)", duration_s)


def check_expected_requests(expected: float, where: str) -> None:
    """A generator's expected draws within `MAX_REQUESTS` (NaN or inf: over)."""
    if not expected <= MAX_REQUESTS:
        raise ConfigError(f"{where}: expects {expected:,.4g} requests, over kvsim's limit of {MAX_REQUESTS:,} "
                          "per workload; lower the rate (rate_scale) or the duration (duration_s)")
