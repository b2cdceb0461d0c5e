"""Writes the notebooks in this folder from the cell sources below (run it after editing).

Keeping the sources here keeps the .ipynb files free of outputs and reviewable as code; the test
suite checks that each .ipynb is what this file writes, executes every notebook and asserts that
each one draws at least one chart (tests/test_notebooks.py).

Each notebook is a tutorial for one user job: markdown that explains, a cell of inputs that a
user edits, and cells whose ``assert`` lines check the figures the text quotes for the shipped
settings (worked by hand where a formula gives them). They call the same library API as the
``kvsim`` command (``from simulator import ...``), and keep their simulations short: each runs in
well under 30 s on 2 cores.

    python notebooks/make_notebooks.py          # write the notebooks
    python notebooks/make_notebooks.py --check  # exit 1 if a notebook differs from its source
"""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import nbformat
from nbformat import NotebookNode
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

HERE = Path(__file__).parent


def md(text: str) -> tuple[str, str]:
    return "md", textwrap.dedent(text).strip()


def code(text: str) -> tuple[str, str]:
    return "code", textwrap.dedent(text).strip()


CAPACITY_PLANNING = [
    md("""
        # Capacity planning: how many nodes, at what price, and which KV lever matters most

        **The job.** You serve a mix of traffic under latency SLOs (p99 time to first token, p99 time per
        output token). You want the smallest fleet of each GPU kind that meets them, its price per million
        output tokens, and which KV-cache lever (prefix reuse, KV precision, another attention layout) would
        change that answer most.

        **How to use it.** Edit the cell under *Your inputs* and run all cells. Every number is computed; the
        `assert` lines check what the text says about the shipped settings, so if an assert fails after you
        changed the inputs, the text no longer describes your case: read the tables instead.

        1. the traffic; 2. the analytic bound (memory only, instant); 3. the fleet, by simulation;
        4. the levers; 5. each traffic class at the chosen size.
    """),
    md("""
        ## Your inputs

        `SCENARIO` is a shipped scenario (`default`: chat and coding agents on Llama-3.1-70B; `capacity-plan`:
        chat only, tighter SLOs) or the path of your own TOML file (README, *Scenarios*). `DURATION_S` is how
        many seconds of traffic each simulation replays. 60 keeps this notebook fast, but for the shipped mixes
        the first minute is a warm-up, not the scenario's load: chat sessions are still arriving and their later
        turns have not come yet, and few agent tasks have begun. For `default` that minute carries 1,251
        requests (20.9 a second, 13 of them agent tasks) where the scenario's own 600 s carry 22,390 (37.3 a
        second, 270 agent tasks); the cell prints both. A fleet sized on the warm-up is too small: rerun with
        `DURATION_S = 600` (a few minutes on 2 cores) before you buy anything. The end of section 4 says what
        changes for `default`.

        The text quotes the shipped inputs (`SHIPPED`, and `default` at 600 s); the `assert` lines check those
        figures only for them, so with your own inputs read the tables instead.
    """),
    code("""
        import dataclasses

        from simulator import load_scenario

        SCENARIO = "default"  # a shipped name, or the path of your TOML file
        HARDWARE = ["8xH100", "8xB200"]  # node kinds to size (`kvsim hardware` lists them)
        DURATION_S = 60.0  # seconds of traffic per simulation: 60 is a warm-up (above), 600 sizes a fleet
        # the inputs the text describes, and its figures are checked for
        SHIPPED = (SCENARIO, HARDWARE, DURATION_S) == ("default", ["8xH100", "8xB200"], 60.0)
        SHIPPED_600 = (SCENARIO, HARDWARE, DURATION_S) == ("default", ["8xH100", "8xB200"], 600.0)

        scenario = load_scenario(SCENARIO)
        # the scenario's own duration, to set the window against
        full_s, whole = scenario.workload.duration_s, scenario.load_workload().to_frame()
        scenario = dataclasses.replace(scenario, workload=dataclasses.replace(scenario.workload, duration_s=DURATION_S))
        workload = scenario.load_workload()
        summary = workload.summary()
        print(scenario.description)
        print(f"SLOs: p99 TTFT <= {scenario.slo.ttft_p99_s:g} s, p99 TPOT <= {scenario.slo.tpot_p99_s * 1e3:g} ms")
        frame = workload.to_frame()
        for span_s, rows in [(DURATION_S, frame), (full_s, whole)]:  # rate: as summary's rate_per_s
            print(f"{span_s:g} s of traffic: {len(rows):,} requests, "
                  f"{len(rows) / (rows.arrival_s.max() - rows.arrival_s.min()):.1f} a second;",
                  ", ".join(f"{n:,} {c}" for c, n in rows.source.value_counts().sort_index().items()))
        if SHIPPED:  # the text above: the first minute is a warm-up
            assert (len(frame), len(whole)) == (1251, 22390) and (frame.source == "code-repo-128k").sum() == 13
            assert (whole.source == "code-repo-128k").sum() == 270
        summary.to_frame()
    """),
    md("""
        ## 1. The traffic

        `prefix_hit_share` is the share of prompt tokens that an earlier request already sent (a system
        prompt, a conversation's history, the repository an agent re-reads): what a provider's prompt cache can
        skip. A simulated run can hit more (an engine's prefix cache also keeps the answers it generated, which a
        conversation's next turn sends back) or less (a finite cache evicts, and a replica caches only what was
        routed to it): the run's `prefix_hit_ratio_tokens`.
        The prompt quantiles say how much KV one request holds; a p99 far above the median (agents' 32k-112k
        contexts beside 1k chat turns) means a few requests hold most of the memory.

        ## 2. The analytic bound: what memory alone allows

        Each GPU keeps for KV what its HBM leaves after the weights,
        `kv_budget = hbm × memory_utilization − weights`, and a sequence of `n` tokens holds
        `n × bytes_per_token` (in 16-token blocks), so at most `floor(kv_budget / sequence_bytes(n))`
        sequences of that length fit. This takes no simulation, and the fleet can only need more.
    """),
    code("""
        import pandas as pd

        from simulator import bytes_per_token, kv_budget, load_catalog, max_streams, parse_layout

        model, layout, catalog = scenario.model_spec(), parse_layout(scenario.cache.layout), load_catalog()
        context = workload.to_frame().eval("prompt_tokens + output_tokens")  # what a request holds at its end
        p50, p99 = int(context.quantile(0.5)), int(context.quantile(0.99))
        if (model.key, layout.label) == ("Llama-3.1-70B", "native"):
            # by hand: K and V × 80 layers × 8 KV heads × 128 values × 2 bytes (bf16)
            assert bytes_per_token(model, layout) == 2 * 80 * 8 * 128 * 2 == 327_680
        print(f"{model.key}, layout {layout.label}: {bytes_per_token(model, layout) / 1e3:,.0f} kB of KV per token")
        rows = []
        for hw in HARDWARE:
            budget = kv_budget(catalog.node(hw), model, plan=scenario.plan)
            rows.append({"hardware": hw, "KV budget per node (GB)": budget.kv_bytes / budget.nodes / 1e9,
                         f"streams at the p50 context ({p50:,} tokens)": max_streams(budget, model, layout, p50),
                         f"streams at the p99 context ({p99:,} tokens)": max_streams(budget, model, layout, p99)})
        pd.DataFrame(rows)
    """),
    md("""
        ## 3. The fleet, by simulation

        `plan_capacity` replays the same requests on `n` nodes of each kind: it starts at the analytic memory
        floor, doubles `n` until the SLOs hold (p99 TTFT, p99 TPOT, nothing timed out), then bisects. It says
        what **binds** at the answer: *memory* (the fleet one node smaller ran its KV pool nearly full, or
        preempted) or *compute* (memory to spare, steps too slow), and the **headroom**: how much more load
        (× the scenario's rate) the fleet takes before an SLO breaks. The price is the fleet's $/hour over
        the output tokens it served.
    """),
    code("""
        from simulator import plan_capacity
        from simulator.charts import capacity_figure

        plan = plan_capacity(scenario, hardware=HARDWARE)
        assert (plan.nodes >= plan.memory_floor_nodes).all()  # a simulation never beats the memory bound
        if SHIPPED_600:  # the end of section 4: 4 8×H100 nodes at $3.41/Mtok, one 8×B200 at $1.71
            by_hw = plan.set_index("hardware")
            assert by_hw.nodes.to_dict() == {"8xH100": 4, "8xB200": 1} and by_hw.binding["8xH100"] == "compute"
            assert by_hw.usd_per_million_output_tokens.round(2).to_dict() == {"8xH100": 3.41, "8xB200": 1.71}
        fig = capacity_figure(plan, scenario.subject())
        plan[["hardware", "nodes", "memory_floor_nodes", "binding", "usd_per_hour", "usd_per_million_output_tokens",
              "ttft_p99_s", "tpot_p99_s", "kv_utilization", "headroom_scale"]]
    """),
    md("""
        ## 4. Which KV lever changes the answer most

        - **prefix cache** (cache strategy `prefix`): repeated prompt tokens are neither recomputed (prefill
          compute, TTFT) nor held twice. Costs HBM for the cached prefixes, evicted under pressure.
        - **KV precision** (`fp8`, `int4`): fewer bytes held, and fewer bytes read by every decode step (TPOT at
          long context). Costs a small quality debit.
        - **cross-layer sharing** (`cross-layer:0.5`): half the layers keep KV, so half the bytes held. Needs
          retraining; a larger debit.
        - **MLA retrofit** (`mla`): one 576-value latent per layer instead of K and V per head. Needs
          retraining; every tensor-parallel GPU holds the whole latent, and absorbed attention costs more
          FLOPs per token.

        Each lever is applied alone to the scenario as configured, and the smallest fleet of the first node
        kind is found by simulating 1, 2, 3, … nodes on the same requests. The quality debit is the accuracy
        cost the layout lever is stated to have (`simulator/data/levers.toml`, each with its source).
    """),
    code("""
        from simulator import run
        from simulator.levers import layout_debit_points
        from simulator.planning import meets_slo

        HW = HARDWARE[0]
        base_layout, base_strategy = scenario.cache.layout, scenario.cache.strategy
        prefix_toggle = ("prefix cache off", "none") if base_strategy == "prefix" else ("prefix cache on", "prefix")
        LEVERS = {  # name -> (layout, cache strategy); add your own (`kvsim calc --help` lists the layouts)
            "as configured": (base_layout, base_strategy),
            prefix_toggle[0]: (base_layout, prefix_toggle[1]),
            "fp8 KV": (f"{base_layout}+fp8", base_strategy),
            "cross-layer 0.5": (f"{base_layout}+cross-layer:0.5", base_strategy),
            "MLA retrofit": (f"{base_layout}+mla", base_strategy),
        }


        def smallest_fleet(variant, max_nodes=16):
            \"\"\"The fewest nodes of HW on which `variant` meets its SLOs, and that run's Result.\"\"\"
            for nodes in range(1, max_nodes + 1):
                result = run(variant.engine_config(HW, n_nodes=nodes), workload, variant.seed)
                if meets_slo(result, variant.slo.ttft_p99_s, variant.slo.tpot_p99_s):
                    return nodes, result
            raise RuntimeError(f"no fleet of up to {max_nodes} {HW} nodes meets the SLOs")


        rows = []
        for name, (layout_text, strategy) in LEVERS.items():
            cache = dataclasses.replace(scenario.cache, layout=layout_text, strategy=strategy)
            nodes, result = smallest_fleet(dataclasses.replace(scenario, cache=cache))
            s = result.summary
            rows.append({"lever": name, "nodes": nodes, "$/Mtok out": s["usd_per_million_output_tokens"],
                         "TTFT p99 (s)": s["ttft_p99_s"], "TPOT p99 (ms)": s["tpot_p99_s"] * 1e3,
                         "KV util": s["kv_utilization"], "prefix hit ratio (run)": s["prefix_hit_ratio_tokens"],
                         "quality debit (points)": layout_debit_points(result.config.layout)})
        levers = pd.DataFrame(rows).set_index("lever")
        levers
    """),
    code("""
        import matplotlib.pyplot as plt
        from matplotlib.patches import Patch
        from matplotlib.ticker import MaxNLocator

        base = levers.loc["as configured"]
        change = levers.drop(index="as configured")
        # the lever that moves the node count most (ties: the one that moves $/Mtok most)
        most = max(change.index, key=lambda k: (abs(change.nodes[k] - base.nodes),
                                                abs(change["$/Mtok out"][k] - base["$/Mtok out"])))
        nodes = lambda n: f"{n} node{'s' if n != 1 else ''}"  # noqa: E731
        print(f"On {HW}, '{most}' changes the answer most: {int(base.nodes)} -> {nodes(levers.nodes[most])}, "
              f"${base['$/Mtok out']:.2f} -> ${levers['$/Mtok out'][most]:.2f} per million output tokens")
        # the lever that saves the most (fewest nodes, then the lowest $/Mtok), and what it costs in quality; on
        # as many nodes, a $/Mtok within 5% of another's is no saving to buy a larger quality debit for: of those,
        # the smallest debit
        fewest = change[change.nodes == change.nodes.min()]
        saves = min((k for k in fewest.index if fewest["$/Mtok out"][k] <= 1.05 * fewest["$/Mtok out"].min()),
                    key=lambda k: (fewest["quality debit (points)"][k], fewest["$/Mtok out"][k]))
        if change.nodes[saves] < base.nodes or (change.nodes[saves] == base.nodes
                                                and change["$/Mtok out"][saves] < 0.95 * base["$/Mtok out"]):
            debit = levers["quality debit (points)"][saves]
            print(f"The one that saves the most: '{saves}': {int(base.nodes)} -> {nodes(levers.nodes[saves])}, "
                  f"${levers['$/Mtok out'][saves]:.2f} per million output tokens, at a stated quality debit of "
                  f"{debit:g} point{'' if debit == 1 else 's'}")
        else:
            print("No lever alone saves a node, or 5% of the cost, here")
        if SHIPPED:  # what the text below says
            assert most == "prefix cache off" and levers.nodes[most] >= 2 * base.nodes
            assert saves == "fp8 KV" and levers.nodes[saves] < base.nodes
            assert levers.nodes["fp8 KV"] < base.nodes <= levers.nodes["cross-layer 0.5"]  # compute binds, not memory
            # "one instead of two here, with its p99 TPOT close to the limit"
            assert (base.nodes, levers.nodes["fp8 KV"]) == (2, 1)
            assert levers["TPOT p99 (ms)"]["fp8 KV"] > 0.9 * scenario.slo.tpot_p99_s * 1e3
            assert (levers["KV util"] < 0.8).all()
            assert levers["KV util"]["MLA retrofit"] > base["KV util"]  # the whole latent on every TP GPU
        if SHIPPED_600:  # the text below, at the scenario's own 600 s
            assert levers.nodes.to_dict() == {"as configured": 4, "prefix cache off": 12, "fp8 KV": 2,
                                              "cross-layer 0.5": 2, "MLA retrofit": 6}
            hit = levers["prefix hit ratio (run)"].round(2)
            assert (hit["fp8 KV"], hit["cross-layer 0.5"], hit["as configured"], hit["MLA retrofit"]) == (
                0.85, 0.84, 0.74, 0.66)
            assert round(base["KV util"], 2) == 0.77
            assert saves == "fp8 KV"  # as cheap as cross-layer sharing (within 0.1%), at a tenth of its debit

        fig, ax = plt.subplots(figsize=(9, 3.6), layout="constrained")
        colours = ["0.45" if k == "as configured" else ("C3" if k == most else "C0") for k in levers.index]
        bars = ax.barh(levers.index, levers.nodes, color=colours)
        labels = [f"{nodes(n)}, ${c:.2f}/Mtok" for n, c in zip(levers.nodes, levers["$/Mtok out"], strict=True)]
        ax.bar_label(bars, labels, padding=4)
        ax.invert_yaxis()
        ax.set_xlim(0, levers.nodes.max() * 1.6)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # whole nodes
        ax.legend(handles=[Patch(color="0.45", label="as configured"),
                           Patch(color="C3", label="the lever that changes the answer most"),
                           Patch(color="C0", label="another lever")], loc="lower right", fontsize=8)
        _ = ax.set(xlabel=f"{HW} nodes that meet the SLOs",
                   title=f"{scenario.name}, {DURATION_S:g} s of traffic: each KV lever alone, {HW}")
    """),
    md("""
        **Reading it (shipped `default`, the 60 s warm-up).** Turning the prefix cache off changes the answer
        most (the red bar), and fp8 KV saves the most. The prefix cache is the lever that matters: most of this
        mix's prompt tokens repeat (system prompts, chat histories, repositories that agents re-read), so
        without reuse every agent turn prefills its whole context again and the fleet at least doubles. The
        layout levers change the KV each GPU holds, which by itself moves the node count only where memory
        binds, and in the warm-up the pool is far from full (`KV util` well below 80%): cross-layer sharing
        keeps the configured node count. KV precision also halves the bytes each decode step reads, which
        shortens the steps, and that is what lets fp8 KV meet the SLOs on one node instead of two here, with
        its p99 TPOT close to the limit. The MLA retrofit holds *more* KV per GPU, not less (`KV util` above
        the configured one): under tensor parallelism every GPU of the group holds the whole latent, where
        grouped-query attention splits its KV heads among them (the concurrency-collapse notebook, section 3).

        **At the scenario's own 600 s** (`DURATION_S = 600`; the cells then check these figures) the chat
        sessions have ramped up and the agents' repositories fill the prefix cache, and the answer is another:
        4 8×H100 nodes, not 2 ($3.41 per million output tokens, `KV util` 0.77), against one 8×B200 node at
        $1.71, half the price a token. Compute still binds (the plan's `binding`), but how much prefill the
        fleet must compute depends on how much the KV pool keeps cached: fp8 KV and cross-layer sharing, which
        halve the KV, keep more prefixes (a run hit ratio of 0.85 and 0.84 against 0.74) and halve the fleet to
        2 nodes, at the same price a token: fp8 KV is the one to buy, at a tenth of cross-layer sharing's
        quality debit and no retraining. The MLA retrofit, holding more, caches
        less (0.66) and needs 6 nodes; without the prefix cache it takes 12. Change `SCENARIO` to
        `capacity-plan` (short chat turns) and the layouts barely matter at all.

        ## 5. Each traffic class at the chosen size

        The SLOs are fleet-wide p99s: a mix can meet them while one class fares much worse. The per-request
        frame (`Result.requests`) has a `source` column naming the generator or trace of each request, so
        the split needs no join.
    """),
    code("""
        from simulator import run_scenario
        from simulator.charts import latency_figure
        from simulator.charts.run import SPARSE_CDF_POINTS

        nodes = int(plan.set_index("hardware").nodes[HW])
        sized = dataclasses.replace(scenario, cluster=dataclasses.replace(scenario.cluster, nodes=nodes))
        requests = run_scenario(sized, hardware=[HW]).results[HW].requests
        done = requests[requests.outcome == "completed"]
        by_class = done.groupby("source").agg(
            requests=("request_id", "size"), prompt_tokens_p50=("prompt_tokens", "median"),
            ttft_p99_s=("ttft_s", lambda s: s.quantile(0.99)),
            tpot_p99_ms=("tpot_mean_s", lambda s: 1e3 * s.quantile(0.99)))
        if SHIPPED or SHIPPED_600:  # agents' long prompts take longer to the first token than chat turns
            assert set(by_class.index) == {"chat-4k", "code-repo-128k"}
            assert by_class.ttft_p99_s["code-repo-128k"] > by_class.ttft_p99_s["chat-4k"]
        # each class's count in its legend: a class of a few requests (drawn as points) is not a distribution
        classes = {f"{name} ({len(rows):,} request{'s' * (len(rows) != 1)})": rows
                   for name, rows in done.groupby("source")}
        fig = latency_figure(classes, scenario.slo.ttft_p99_s, scenario.slo.tpot_p99_s,
                             f"{scenario.name} on {nodes} {HW} node{'s' * (nodes != 1)}: each traffic class's latency "
                             f"({len(done):,} completed requests; a class of under {SPARSE_CDF_POINTS} as points)")
        by_class
    """),
]

TTL_BREAKEVEN = [
    md("""
        # Prompt-cache TTL break-even, for the customer and for the provider

        **The job.** A provider offers prompt caching: a 5-minute cache writes a prefix at 1.25× the input
        price and reads it at 0.1×, the TTL refreshed on every hit; a 1-hour cache writes at 2×. Given how
        often your prefixes come back, which pays for you as the **customer**, and what does it cost the
        **provider**, who holds that KV in HBM, DRAM or SSD meanwhile?

        1. the closed form for Poisson reuse; 2. your workload replayed and billed request by request;
        3. the bill per traffic class; 4. the provider's side.
    """),
    md("""
        ## Your inputs

        A price profile and tier (`kvsim breakeven --help` lists them), the TTLs to compare (TTLs the profile
        sells: `profile.ttl_names`), and a scenario: its workload is what gets billed, its fleet what holds the KV
        for the provider's side. The text quotes the shipped settings (`SHIPPED`); the `assert` lines check those
        figures only for them, so with your own inputs read the tables instead.
    """),
    code("""
        import dataclasses

        from simulator import get_profile, load_scenario

        PROFILE, TIER = "anthropic", "sonnet-4"
        TTLS = ["5m", "1h"]
        SCENARIO = "ttl-breakeven"  # a chat + coding-agent mix on 4 × 8×H100
        DURATION_S = 1800.0  # seconds of traffic to bill: a 1-hour TTL needs long replays to show
        # the settings the text describes, and its figures are checked for
        SHIPPED = (PROFILE, TIER, TTLS, SCENARIO, DURATION_S) == (
            "anthropic", "sonnet-4", ["5m", "1h"], "ttl-breakeven", 1800.0)

        profile = get_profile(PROFILE, TIER)
        scenario = load_scenario(SCENARIO)
        scenario = dataclasses.replace(scenario, workload=dataclasses.replace(scenario.workload, duration_s=DURATION_S))
        writes = ", ".join(f"{n} × {w:g}" for n, w in zip(profile.ttl_names, profile.write_multipliers, strict=True))
        print(f"{profile.key}: input ${profile.input_usd_per_mtok:g}/Mtok, "
              f"output ${profile.output_usd_per_mtok:g}/Mtok, read × {profile.read_multiplier:g}, writes {writes}")
    """),
    md("""
        ## 1. The closed form: Poisson reuse

        Say a prefix comes back as a Poisson process of rate λ. Under a sliding TTL `T` a request hits when
        the previous use was less than `T` ago, with probability `P = 1 − exp(−λT)`, and then costs the read
        multiplier `r`; otherwise it writes at `w`. Caching pays when `P·r + (1 − P)·w < 1`, that is when
        `P > p* = (w − 1) / (w − r)`, or `λ > −ln(1 − p*) / T`. For the 5-minute cache, `p* = 0.25 / 1.15`:
        one reuse every 20 minutes pays; the 1-hour cache needs `p* = 1 / 1.9`, one every 80 minutes, and is
        the cheaper of the two for any reuse faster than their crossover (the diamond): there it still hits
        where the 5-minute entry has expired.
    """),
    code("""
        import math

        import numpy as np

        from simulator import breakeven_reuse_rate
        from simulator.billing import parse_ttl
        from simulator.billing.charts import plot_cost_vs_rate
        from simulator.billing.numeric import cost_curves, crossovers, ttl_rows

        ttls_s = [parse_ttl(t) for t in TTLS]
        rows = ttl_rows(profile, ttls_s)
        if (profile.read_multiplier, profile.write_multiplier(300)) == (0.1, 1.25):  # worked by hand
            p_star = 0.25 / 1.15
            assert math.isclose(breakeven_reuse_rate(300, 0.1, 1.25), -math.log(1 - p_star) / 300)
            assert round(1 / (breakeven_reuse_rate(300, 0.1, 1.25) * 60)) == 20  # one reuse every 20 min
        ax = plot_cost_vs_rate(cost_curves(profile, ttls_s, np.logspace(-3, 1, 200)), rows, crossovers(profile, ttls_s),
                               title=f"{profile.key}: expected prefix cost per request under Poisson reuse")
        rows
    """),
    md("""
        ## 2. Your workload, replayed and billed

        Real reuse is not Poisson: an agent re-sends its repository seconds apart during a task, then goes
        quiet for many minutes; a chat user re-sends the conversation every turn, a think-time apart.
        `compare_ttls` replays the requests in arrival order and bills each one as the provider would: a read
        of the longest live cached prefix, a write of the rest up to its last cache breakpoint, plain input
        after that (`kvsim breakeven --workload` does the same). The share of reuse gaps shorter than a TTL
        (`share_gaps_below_ttl`) is the share of reuses it catches; it is not what pays, since every new prefix
        is written once whatever the TTL. A TTL's cached input costs less than plain input when the share of
        cached tokens that were read (`share_cached_tokens_read`) is above its `p*` (`breakeven_p_hit`);
        `share_requests_with_read` counts requests that read anything, a different measure.

        The Poisson curve above models one long-lived prefix. A workload also writes every new prefix once,
        whatever the TTL, and at 2× under the 1-hour cache: when nearly all reuse comes back within
        5 minutes (as in the shipped mix), both caches hit about as often and the 5-minute one is cheaper.
    """),
    code("""
        import matplotlib.pyplot as plt

        from simulator import compare_ttls
        from simulator.billing.charts import plot_gap_cdf, plot_savings_vs_ttl

        workload = scenario.load_workload()
        comparison = compare_ttls(workload, profile, ["none", *TTLS])
        bills = comparison.summary.set_index("ttl")
        print("cheapest for the customer:", comparison.best_ttl)
        if SHIPPED:  # the text below
            assert comparison.best_ttl == "5m" and bills.total_usd["1h"] < bills.total_usd["none"]
            assert bills.share_gaps_below_ttl["5m"] > 0.9
            assert bills.share_requests_with_read["1h"] - bills.share_requests_with_read["5m"] < 0.01

        fig, (left, right) = plt.subplots(1, 2, figsize=(15, 5), layout="constrained")
        plot_savings_vs_ttl(comparison.summary, ax=left)
        gaps_s = comparison.results["none"].frame.reuse_gap_s.dropna().to_numpy()
        plot_gap_cdf(gaps_s, rows, ax=right)
        bills[["share_requests_with_read", "read_tokens", "write_tokens", "plain_tokens", "total_usd",
               "savings_pct_of_input", "savings_pct_of_bill", "share_gaps_below_ttl", "share_cached_tokens_read",
               "breakeven_p_hit"]]
    """),
    md("""
        ## 3. The bill per traffic class

        A mix bills as the sum of its classes, and a TTL can pay for one class and not the other. Every
        request carries the name of the generator or trace that produced it (`Request.source`), so each
        class can be replayed alone. The classes share no prefixes, so their bills add up to the mix's.
    """),
    code("""
        import pandas as pd

        requests = workload.requests()
        classes = sorted({r.source for r in requests})
        per_class = pd.concat([compare_ttls([r for r in requests if r.source == c], profile, ["none", *TTLS])
                               .summary.assign(source=c) for c in classes])
        total = per_class.groupby("ttl").total_usd.sum()
        assert all(math.isclose(total[t], bills.total_usd[t]) for t in bills.index)  # the classes add up
        savings = per_class.pivot(index="source", columns="ttl", values="savings_pct_of_input")[TTLS]
        if SHIPPED:  # agents re-read 32k-112k repositories seconds apart: they save most
            assert savings.loc["code-repo-128k", "5m"] > 2 * savings.loc["chat-4k", "5m"]
        savings.round(1)
    """),
    md("""
        **Reading it.** The table is each class's saving as a share of its input bill without a cache
        (`savings_pct_of_input`; `savings_pct_of_bill` would divide by the whole bill, output included).
        The agents save most: their repository prefixes come back seconds apart within a
        task. Chat turns come back a think-time apart, well inside 5 minutes, so the 1-hour cache's 2× write
        buys chat little it did not already have.

        ## 4. The provider's side

        The customer's saving is the provider's lost revenue. What the provider gets back is the prefill
        compute the hits skip (GPU time it can sell again); what it pays is the KV a TTL keeps resident,
        per byte-second: in HBM it displaces concurrent streams (priced at what a stream earns per second, as
        if the pool were full: an upper bound), in host DRAM or on SSD it is capacity rent. A stream earns its
        decode speed, but at most the fleet's output ceiling (each request's prefill of what the prefix cache did
        not serve it, and its share of decode steps at `max_num_seqs`) spread over the streams the pool holds:
        holding the whole pool forgoes at most what the fleet could produce.
        `provider_costs_for` derives those prices from the deployment: KV bytes per token from the model and
        layout, each request's prefill saving from the cost model, a stream's revenue from the simulated
        decode speed (capped so) at the profile's output price, and the GPU's $/hour. (The report of `kvsim run`
        does the same through `simulator.report.deployment_costs`, which the next cell calls.)
    """),
    code("""
        from simulator import run_scenario
        from simulator.billing.charts import plot_provider_costs
        from simulator.billing.provider import best_ttls, provider_table
        from simulator.report import deployment_costs

        hw, result = next(iter(run_scenario(scenario).results.items()))
        # this fleet's prices, as the report of `kvsim run` takes them (its KV pool as simulated included)
        costs = deployment_costs(result, profile)
        provider = provider_table(comparison, costs).set_index("ttl")
        print(f"on {hw}:", best_ttls(comparison, provider.reset_index()))
        cached = provider.drop(index="none")
        given_away = -cached.revenue_delta_usd / cached.prefill_saved_usd
        print("discount given away / prefill saved:", given_away.round(1).to_dict())
        if SHIPPED:  # the text below
            # prefill saved outweighs DRAM rent many times over; holding the same bytes in HBM costs far more
            assert (cached.prefill_saved_usd > 10 * cached.holding_dram_usd).all()
            assert (cached.holding_hbm_usd > cached.prefill_saved_usd).all()
            assert (given_away > 2).all()
            peak = cached.kv_peak_over_pool  # the share of the KV pool each TTL's cache fills at its peak
            assert peak["5m"] < peak["1h"] and 0.5 < peak["1h"] < 1

        # dots labelled with their values: a bar on a log axis measures from an arbitrary floor
        plot_provider_costs(cached, title=f"Provider, {hw}: what a TTL saves and what holding its KV costs")
        provider.round(4)
    """),
    md("""
        **Reading it.** Holding cached prefixes in host DRAM or on SSD costs the provider a small fraction of
        the prefill it saves, so a tiered cache pays physically; holding the same bytes in HBM for a whole
        TTL would displace paying streams worth far more. The margin columns add the revenue the discount
        gives away, and for the shipped mix that discount is several times the prefill the provider saves: on
        these figures a prompt-cache discount is a price cut that wins traffic, not a saving passed on. The
        provider gains only where the freed prefill compute serves more paying requests.

        The pool columns set the KV a TTL keeps against the fleet's KV pool as simulated (`kv_pool_gb`: its
        blocks × bytes a block, what the report of `kvsim run` gives): at its peak the 1-hour cache fills more
        than half of it (`kv_peak_over_pool`), the 5-minute one less, so both fit in HBM, at the price the
        HBM column puts on it. The `none` row caches nothing, so it spans no time and its
        `kv_gb_hours_over_pool` is NaN.
    """),
]

CONCURRENCY_COLLAPSE = [
    md("""
        # Concurrency collapse: how many streams fit as context grows

        **The job.** For a model, a KV layout and a GPU, how many concurrent streams fit on one node as
        the context grows from 1k to 1M tokens: analytically, and under real scheduling?

        Per GPU, `kv_budget = hbm × memory_utilization − weights`; a sequence of `n` tokens holds
        `kv(n)` bytes on each GPU (its share of the KV heads, or the whole MLA latent), so

            streams(n) = pools × floor(kv_budget / kv(n))

        falls as `1/n`: each doubling of the context halves the concurrency.

        1. the table and chart; 2. what each lever buys; 3. the parallelism plan for an MLA model;
        4. simulated: what paged allocation and the scheduler achieve, and what still meets the SLOs.

        ## 1. The table and chart

        `MODEL` is any model of `kvsim models`; a node kind whose GPUs cannot hold its weights gets no rows, and
        the cell says so. Sections 2 and 4 look at the first kind of `HARDWARE` that holds it (`HW`). The figures
        the text quotes are Llama-3.1-70B's: with another model the cells check them only where the text says
        they hold for any model.
    """),
    code("""
        from simulator import collapse_table, get_model, load_catalog

        MODEL = "Llama-3.1-70B"
        HARDWARE = ["8xH100", "8xH200", "8xB200"]
        LAYOUTS = ["native", "fp8", "cross-layer:0.5", "mla", "compress:8:4096", "mla+fp8"]

        model, catalog = get_model(MODEL), load_catalog()
        table = collapse_table(catalog, model, hardware=HARDWARE, layouts=LAYOUTS)
        for note in table.attrs.get("left_out", []):  # weights that do not fit: no rows for that kind
            print("left out:", note)
        HW = table.hardware.iloc[0]  # the first kind of HARDWARE that holds the model
        table.head()
    """),
    md("""
        Worked by hand for Llama-3.1-70B in bf16 on 8×H100 (TP8): 141 GB of weights leave each GPU
        `80 GB × 0.9 − 17.6 GB ≈ 54.4 GB`; a token's KV is `2 × 80 layers × 8 heads × 128 × 2 B = 327,680 B`,
        of which each of the 8 GPUs holds one KV head, 40,960 B. A 4k sequence then holds 168 MB per GPU:
        324 streams fit; at 128k, 10.
    """),
    code("""
        native = table[table.layout == "native"].set_index(["hardware", "context_tokens"])
        if MODEL == "Llama-3.1-70B":
            row = native.loc[("8xH100", 4096)]
            per_gpu_bytes = 2 * 80 * 8 * 128 * 2 // 8 * 4096
            assert row.max_streams == int(row.kv_budget_bytes_per_gpu // per_gpu_bytes) == 324
            assert native.max_streams["8xH100", 131072] == 10
        native.max_streams.unstack(0).loc[[4096, 32768, 131072, 1048576]]
    """),
    code("""
        from simulator.charts import collapse_figure

        fig = collapse_figure(table, model, model.max_context_tokens)
    """),
    md("""
        ## 2. What each lever buys

        `footprint` gives the bytes of a stream and each lever's factor against an MHA, bf16, all-layers
        baseline; the factors multiply to the total. A lever that halves what each GPU holds doubles the streams
        at every context (fp8, cross-layer sharing of an even number of layers), plus one where rounding down to
        whole streams had left room for half a stream or more unused (26 → 53 at 128k on 8×B200). An MLA latent
        does the reverse under TP8: it is a single KV "head", whole on every GPU (92 kB a token on each, against
        GQA's 41 kB), so `mla` holds fewer streams than native although its bytes in all are 0.28 of them
        (section 3 shows the plan that fixes it).
    """),
    code("""
        from simulator import footprint, parse_layout

        for text in LAYOUTS:
            fp = footprint(model, parse_layout(text), 131072)
            print(f"{text:18} {fp.sequence_bytes / 1e9:7.2f} GB per 128k stream",
                  {k: round(v, 3) for k, v in fp.factors.items() if v != 1})
        at_128k = table[(table.hardware == HW) & (table.context_tokens == 131072)].set_index("layout").max_streams
        by = table.pivot_table(index=["hardware", "context_tokens"], columns="layout", values="max_streams")
        per_gpu = table.groupby("layout").bytes_per_token_per_gpu.first()
        for lever in ["fp8", "cross-layer:0.5"]:  # twice the streams, or twice plus one: floor(2x) - 2 floor(x)
            if 2 * per_gpu[lever] == per_gpu["native"]:  # where it halves what each GPU holds (any model)
                assert (by[lever] - 2 * by["native"]).isin([0, 1]).all()
        if MODEL == "Llama-3.1-70B":  # the text above, by hand
            assert at_128k["fp8"] == 2 * at_128k["native"] and at_128k["mla"] < at_128k["native"]
            assert (by.native["8xB200", 131072], by.fp8["8xB200", 131072]) == (26, 53)
            assert per_gpu["mla"] == 80 * 576 * 2 == 92_160 and per_gpu["native"] == 2 * 80 * 8 * 128 * 2 // 8 == 40_960
            in_all = table.groupby("layout").bytes_per_token.first()
            assert round(in_all["mla"] / in_all["native"], 2) == 0.28
        at_128k
    """),
    md("""
        ## 3. The parallelism plan: TP or DP attention for an MLA model

        DeepSeek-V3's MLA latent (512 + 64 values per layer) is a single KV "head": under tensor parallelism
        all 8 GPUs hold the whole latent of every sequence, so 8 GPUs hold no more sequences than one.
        Under DP attention each GPU runs attention for its own sequences and holds only their latents:
        8 independent pools. Its attention weights are then whole on every GPU, so each GPU's budget
        shrinks, but each pool serves an eighth of the streams.
    """),
    code("""
        from simulator import ParallelPlan

        deepseek = get_model("DeepSeek-V3")
        PLANS = [ParallelPlan(tp=8), ParallelPlan(tp=8, dp_attention=True, ep=8)]
        plans = collapse_table(catalog, deepseek, hardware=["8xH200"], layouts=["native", "fp8"], plans=PLANS)
        for r in plans.itertuples():  # pools × floor(budget per GPU / latent bytes of one sequence)
            pools = 8 if r.plan.startswith("DP") else 1
            assert r.max_streams == pools * int(r.kv_budget_bytes_per_gpu // r.stream_bytes)
        at = plans[plans.context_tokens.isin([4096, 32768, 131072])]
        pivot = at.pivot_table(index=["layout", "context_tokens"], columns="plan", values="max_streams")
        assert (pivot["DP8-attention EP8"] > 5 * pivot["TP8"]).all()
        fig = collapse_figure(plans, deepseek, deepseek.max_context_tokens)
        pivot
    """),
    md("""
        ## 4. Simulated: what the scheduler achieves

        `simulated_collapse` runs one node twice per context `n`:

        * **flooded**: requests arrive far faster than they are served and nothing caps the batch, so
          memory decides how many run at once (`peak_streams`; at short context a small model's streams can
          wait on the prefill token budget first). A sequence holds between `n − output` and
          `n` tokens while it decodes, so the peak may pass the analytic bound by up to `1 / (1 − 1/8)`.
        * **at capacity**: Poisson arrivals offered at 80% of the request rate the node sustains,
          `capacity_rps = m / (m · prefill_s + o · step_s)`: each request takes its prompt's prefill and
          its share of `o` decode steps of `m` streams (`m`: the analytic streams, at most `max_num_seqs`).
          `mean_streams` is the concurrency it holds and `goodput_fraction` the share of requests that
          meet both SLOs.

        Memory sized for `m` streams is not a node that serves `m` streams: at short context prefill takes
        most of the node's time, so at 80% of what it sustains far fewer than `m` streams decode at once
        (`mean_streams`). At long context one prompt's prefill alone (`prefill_s`) can pass the TTFT SLO,
        and then no rate meets it.
    """),
    code("""
        import dataclasses

        from simulator import load_scenario
        from simulator.study import simulated_collapse

        CONTEXTS = [4096, 16384, 65536]  # on HW, the first kind of HARDWARE that holds the model
        scenario = load_scenario("concurrency-collapse")
        scenario = dataclasses.replace(scenario, model=dataclasses.replace(scenario.model, name=MODEL))
        simulated = simulated_collapse(scenario.engine_config(HW), CONTEXTS, requests_per_point=100)
        bound = simulated.analytic_streams / (1 - 1 / 8)
        assert (simulated.peak_streams <= bound + 1).all()  # any model
        if MODEL == "Llama-3.1-70B":  # the text above
            assert (simulated.analytic_streams <= simulated.peak_streams).all()
            # at 4k prefill takes most of the node's time (its rate × prefill_s), and far fewer streams than
            # memory and max_num_seqs allow decode at once
            short = simulated.iloc[0]
            assert short.offered_rps * short.prefill_s > 0.5
            assert short.mean_streams < 0.5 * min(short.analytic_streams, scenario.scheduler.max_num_seqs)
        fig = collapse_figure(table[(table.hardware == HW) & (table.layout == "native")], model,
                              model.max_context_tokens, simulated, (scenario.slo.ttft_p99_s, scenario.slo.tpot_p99_s))
        simulated
    """),
]

BRING_YOUR_OWN_TRACE = [
    md("""
        # Bring your own trace: from a request log to a simulated report

        **The job.** You have a log of real requests (arrival times, prompt and output lengths, ideally which
        prompt prefixes they share) and want to see how a fleet would serve it: latency against the SLOs,
        KV use, cost, and the prompt-cache bill; the same report `kvsim run` writes.

        kvsim reads Azure LLM inference CSV (`TIMESTAMP, ContextTokens, GeneratedTokens`), Mooncake JSONL
        (`timestamp` in ms, `input_length`, `output_length`, `hash_ids`: one id per 512-token prompt block),
        BurstGPT CSV, and its own CSV/JSONL (what `kvsim workload generate` writes: each request's prefix
        segments and cache breakpoints), detected from the file. This notebook replays the 10-minute chat
        sample shipped with kvsim; put your file's path in `TRACE`.

        1. look at the trace; 2. what it shares; 3. replay it faster; 4. simulate it and write the report;
        5. a format of your own.
    """),
    md("""
        ## 1. Look at the trace
    """),
    code("""
        from importlib.resources import files
        from pathlib import Path

        TRACE = Path(str(files("scenarios") / "traces" / "chat-sample.csv"))  # your file here

        with TRACE.open() as f:
            head = [next(f) for _ in range(3)]
        print(f"{TRACE.name}: {TRACE.stat().st_size:,} bytes\\n" + "".join(head))
    """),
    md("""
        ## 2. What it shares

        `prefix_hit_share` is the share of prompt tokens an earlier request already sent: what a provider's
        prompt cache can skip (a run can hit more, as an engine's prefix cache also keeps generated answers that
        a next turn sends back, or less, as a finite cache evicts); `reuse_gap_s` how long after the previous use they
        come back, which decides whether a TTL keeps them. Azure and BurstGPT logs carry no prefix ids, so
        for them both are unknown (NaN, with `summary().prefix_note` saying why), not zero.
    """),
    code("""
        import matplotlib.pyplot as plt
        import numpy as np

        from simulator import load_workload

        workload = load_workload(TRACE)
        frame = workload.to_frame()
        fig, (left, right) = plt.subplots(1, 2, figsize=(12, 3.8), layout="constrained")
        last = frame.arrival_s.max()  # 10 s bins, the last one ending at the last arrival; an empty bin reads 0
        edges = np.append(np.arange(0.0, last, 10.0), max(last, 1e-9))
        if len(edges) > 2 and edges[-1] - edges[-2] < 5.0:  # a sliver of a last bin joins the one before
            edges = np.delete(edges, -2)
        counts, _ = np.histogram(frame.arrival_s, bins=edges)
        left.stairs(counts / np.diff(edges), edges)
        left.set(title="arrivals per second (10 s bins)", xlabel="time into the trace (s)",
                 ylabel="requests per second")
        frame.prompt_tokens.plot.hist(bins=40, ax=right, title="prompt tokens per request (40 bins)", logy=True)
        right.set(xlabel="prompt tokens per request", ylabel="requests (log scale)")
        fig.suptitle(f"{TRACE.name}: {len(frame):,} requests arriving over {last:,.0f} s")
        workload.summary().to_frame()
    """),
    md("""
        ## 3. Replay it faster

        `time_scale = 4` replays the same requests four times as fast (arrival times divided by 4): four times
        the load, without inventing requests. `start_s` and `duration_s` cut a window out of a long trace.
    """),
    code("""
        import math

        SPEEDUP = 4.0
        fast = load_workload(TRACE, time_scale=SPEEDUP)
        first, last = workload.requests()[0], workload.requests()[-1]
        assert len(fast.requests()) == len(workload.requests())
        assert math.isclose(fast.requests()[-1].arrival_s - fast.requests()[0].arrival_s,
                            (last.arrival_s - first.arrival_s) / SPEEDUP)
        print(f"{workload.summary().rate_per_s:.2f} -> {fast.summary().rate_per_s:.2f} requests/s")
    """),
    md("""
        ## 4. Simulate it and write the report

        The shipped `trace-replay` scenario names the fleet (one 8×H100 node, Llama-3.1-70B, TP8), the SLOs
        and the price profile; point its workload at your trace. `run_scenario` simulates it on each of the
        scenario's node kinds, and `write_report` writes the folder that `kvsim run trace-replay --trace PATH`
        writes: `summary.md`, per-request and time-series CSVs, the charts.

        The scenario replays a window of `duration_s` = 600 seconds of replay time (`WINDOW_S` below): the
        sample at 4× ends near 150 s, inside it, but a trace that runs longer at your speed-up (an hour-long
        log at 4× runs 900 s) is cut there, its later requests not simulated. The cell says how many it
        replayed; `WINDOW_S = math.inf` replays the whole trace.
    """),
    code("""
        import dataclasses

        from simulator import load_scenario, run_scenario
        from simulator.charts import latency_figure

        scenario = load_scenario("trace-replay")
        WINDOW_S = scenario.workload.duration_s  # seconds of replay to simulate (600); math.inf: the whole trace
        replay = dataclasses.replace(scenario.workload, trace=str(TRACE), time_scale=SPEEDUP, duration_s=WINDOW_S)
        scenario = dataclasses.replace(scenario, workload=replay)
        run = run_scenario(scenario)
        hw, result = next(iter(run.results.items()))
        # every logged request that arrives inside the window replayed (all of them unless the window cut the trace)
        in_window = sum(r.arrival_s < WINDOW_S for r in fast.requests())
        assert result.summary["requests"] == in_window
        print(f"replayed {in_window:,} of the trace's {len(fast.requests()):,} requests"
              + (f": the window cut it at {WINDOW_S:g} s of replay" if run.workload.cut_at_s is not None else ""))
        title = f"{run.subject()}, on {hw}: latency of the {result.summary['completed']:,} completed requests"
        assert title.count("as fast") == 1  # the subject says the speed-up (helper-167: it was said twice)
        # how far the replay reached (the sample's 600 s at 4×: 150 s), the window's bound only where it cut the trace
        assert ("up to" in title) == (run.workload.cut_at_s is not None)  # (helper-188: "up to 600 s" for 150 s)
        fig = latency_figure({hw: result.requests}, scenario.slo.ttft_p99_s, scenario.slo.tpot_p99_s, title)
        run.headline().T
    """),
    code("""
        import tempfile

        from simulator.report import write_report

        scratch = tempfile.TemporaryDirectory()  # removed when the kernel ends
        out = write_report(run, Path(scratch.name) / "my-trace-report")
        assert (out / "summary.md").is_file() and (out / hw / "requests.csv").is_file()
        print("\\n".join(sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())))
        print((out / "summary.md").read_text().split("## Headline")[0])
    """),
    md("""
        ## 5. A format of your own

        If your log is in none of these formats, write it as Mooncake JSONL: one JSON object per request,
        `hash_ids` one id per 512-token block of its prompt (two requests share a prefix exactly as far as
        their leading ids agree). Here three requests, the second sharing two blocks with the first:
    """),
    code("""
        import json

        path = Path(scratch.name) / "my_trace.jsonl"
        rows = [
            {"timestamp": 0, "input_length": 1500, "output_length": 50, "hash_ids": [1, 2, 3]},
            {"timestamp": 2000, "input_length": 1100, "output_length": 80, "hash_ids": [1, 2, 4]},
            {"timestamp": 5000, "input_length": 600, "output_length": 20, "hash_ids": [7, 8]},
        ]
        path.write_text("\\n".join(json.dumps(r) for r in rows))
        mine = load_workload(path)
        s = mine.summary()
        # 1,024 of the second request's 1,100 tokens repeat (blocks 1, 2), of 3,200 prompt tokens in all
        assert s.n_requests == 3 and math.isclose(s.prefix_hit_share, 1024 / 3200)
        assert [r.arrival_s for r in load_workload(path, time_scale=2.0)] == [0.0, 1.0, 2.5]
        mine.to_frame()
    """),
]

NOTEBOOKS: dict[str, list[tuple[str, str]]] = {
    "capacity_planning.ipynb": CAPACITY_PLANNING,
    "ttl_breakeven.ipynb": TTL_BREAKEVEN,
    "concurrency_collapse.ipynb": CONCURRENCY_COLLAPSE,
    "bring_your_own_trace.ipynb": BRING_YOUR_OWN_TRACE,
}


def build(name: str) -> NotebookNode:
    """The notebook `name` as this file defines it (no outputs)."""
    nb = new_notebook(cells=[new_markdown_cell(src) if kind == "md" else new_code_cell(src)
                             for kind, src in NOTEBOOKS[name]])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    return nb


def sources(nb: NotebookNode) -> list[tuple[str, str]]:
    """``(cell_type, source)`` of each cell: what `--check` compares (ids and outputs aside)."""
    return [(c.cell_type, c.source) for c in nb.cells]


def keep_ids(nb: NotebookNode, path: Path) -> NotebookNode:
    """`nb` with the cell ids of the notebook at `path`, cell by cell, where both have the same kinds of
    cell in the same order (nbformat draws fresh random ids, so a rewrite would change every id, and the
    diff of a regenerated notebook should show only the sources that changed)."""
    if path.is_file():
        old = nbformat.read(path, as_version=4).cells
        if [c.cell_type for c in old] == [c.cell_type for c in nb.cells]:
            for cell, before in zip(nb.cells, old, strict=True):
                cell.id = before.id
    return nb


def main(argv: list[str]) -> int:
    stale = []
    for name in NOTEBOOKS:
        nb = build(name)
        if "--check" in argv:
            path = HERE / name
            if not path.is_file() or sources(nbformat.read(path, as_version=4)) != sources(nb):
                stale.append(name)
        else:
            nbformat.write(keep_ids(nb, HERE / name), HERE / name)
    if stale:
        print(f"out of date (run python {Path(__file__).name}): {', '.join(stale)}", file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
