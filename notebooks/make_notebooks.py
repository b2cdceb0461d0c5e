"""Writes the notebooks in this folder from the cell sources below (run it after editing).

Keeping the sources here keeps the .ipynb files free of outputs and reviewable as code;
the test suite executes every notebook (tests/test_notebooks.py).
"""

from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

HERE = Path(__file__).parent

NOTEBOOKS: dict[str, list[tuple[str, str]]] = {
    "concurrency_collapse.ipynb": [
        ("md", "# Concurrency collapse\n\nHow many concurrent streams fit on a node as context grows "
               "from 1k to 1M tokens, per KV layout and GPU. The analytic answer is "
               "`replicas · floor(kv_budget / paged_sequence_bytes(n))`."),
        ("code", "from hardware.catalog import load_catalog\n"
                 "from simulator.models import get_model\n"
                 "from simulator.collapse import collapse_table\n"
                 "from simulator.charts import collapse_figure\n"
                 "model = get_model('Llama-3-70B')\n"
                 "df = collapse_table(load_catalog(), model, hardware=['8xH100', '8xB200'])\n"
                 "df.head()"),
        ("code", "native = df[df.layout == 'native'].set_index(['hardware', 'context_tokens']).max_streams\n"
                 "assert native['8xH100', 4096] == 324 and native['8xH100', 131072] == 10\n"
                 "native.unstack(0).loc[[4096, 32768, 131072, 1048576]]"),
        ("code", "fig = collapse_figure(df, model.key, model.max_context_tokens)"),
        ("md", "Each lever's factor on the bytes of one 128k stream:"),
        ("code", "from simulator.kv import footprint, parse_layout\n"
                 "for text in ['native', 'fp8', 'mla', 'cross-layer:0.5', 'compress:8:4096', 'mla+fp8']:\n"
                 "    fp = footprint(model, parse_layout(text), 131072)\n"
                 "    print(f'{text:18} {fp.sequence_bytes / 1e9:7.2f} GB', "
                 "{k: round(v, 3) for k, v in fp.factors.items() if v != 1})"),
    ],
    "bring_your_own_trace.ipynb": [
        ("md", "# Bring your own trace\n\nkvsim reads Azure LLM inference traces, Mooncake JSONL (with "
               "`hash_ids` prefix blocks), BurstGPT CSV and its own CSV/JSONL format. Here we write a "
               "small Mooncake-format file (use your own path instead), read it, window and speed it "
               "up, and summarise what it shares."),
        ("code", "import json, tempfile, pathlib\n"
                 "from workloads import load_workload\n"
                 "path = pathlib.Path(tempfile.mkdtemp()) / 'my_trace.jsonl'\n"
                 "rows = [\n"
                 "    {'timestamp': 0, 'input_length': 1500, 'output_length': 50, 'hash_ids': [1, 2, 3]},\n"
                 "    {'timestamp': 2000, 'input_length': 1100, 'output_length': 80, 'hash_ids': [1, 2, 4]},\n"
                 "    {'timestamp': 5000, 'input_length': 600, 'output_length': 20, 'hash_ids': [7, 8]},\n"
                 "]\n"
                 "path.write_text('\\n'.join(json.dumps(r) for r in rows))\n"
                 "wl = load_workload(path)\n"
                 "wl.to_frame()"),
        ("code", "s = wl.summary()\n"
                 "# 1,024 of the second request's 1,100 tokens repeat (blocks 1, 2); of 3,200 prompt tokens\n"
                 "assert s.n_requests == 3 and abs(s.prefix_hit_share - 1024 / 3200) < 1e-9\n"
                 "s.to_frame()"),
        ("code", "fast = load_workload(path, time_scale=2.0)  # replay twice as fast\n"
                 "assert [r.arrival_s for r in fast] == [0.0, 1.0, 2.5]\n"
                 "[r.arrival_s for r in fast]"),
    ],
    "capacity_planning.ipynb": [
        ("md", "# Capacity planning\n\nHow many nodes of which GPU does this traffic need at these SLOs, at "
               "what price, and what binds? We take the shipped `capacity-plan` scenario, shorten it so the "
               "notebook runs in well under a minute, and search node counts by simulation from the analytic "
               "memory floor."),
        ("code", "import dataclasses\n"
                 "from simulator.scenario import load_scenario\n"
                 "from simulator.planning import plan_capacity\n"
                 "from simulator.charts import capacity_figure\n"
                 "sc = load_scenario('capacity-plan')\n"
                 "sc = dataclasses.replace(sc, workload=dataclasses.replace(sc.workload, duration_s=180.0))\n"
                 "sc.workload, sc.slo"),
        ("code", "plan = plan_capacity(sc, hardware=['8xH100', '8xB200'])\n"
                 "assert (plan.nodes >= plan.memory_floor_nodes).all()\n"
                 "plan"),
        ("code", "fig = capacity_figure(plan, sc.name)"),
        ("md", "The same scenario, run at the planned size of the first kind, gives the request-level records:"),
        ("code", "from simulator.study import run_scenario\n"
                 "h100 = int(plan.set_index('hardware').nodes['8xH100'])\n"
                 "sized = dataclasses.replace(sc, cluster=dataclasses.replace(sc.cluster, hardware=('8xH100',), "
                 "nodes=h100))\n"
                 "run = run_scenario(sized)\n"
                 "head = run.headline()\n"
                 "assert head['meets SLO'][0] == 'yes'\n"
                 "head"),
    ],
    "ttl_breakeven.ipynb": [
        ("md", "# Prompt-cache TTL break-even\n\nA 5-minute cache writes at 1.25× and reads at 0.1× the input "
               "price; a 1-hour cache writes at 2×. For reuse arriving as a Poisson process of rate λ a request "
               "hits when the previous use was within the TTL, P = 1 − exp(−λT), and caching pays when "
               "P·0.1 + (1 − P)·w < 1."),
        ("code", "import numpy as np\n"
                 "from simulator.billing import breakeven_hit_probability, breakeven_reuse_rate, get_profile\n"
                 "p = get_profile('anthropic')\n"
                 "p5 = breakeven_hit_probability(p.read_multiplier, p.write_multiplier(300))\n"
                 "assert abs(p5 - 0.25 / 1.15) < 1e-12\n"
                 "for ttl in (300, 3600):\n"
                 "    rate = breakeven_reuse_rate(ttl, p.read_multiplier, p.write_multiplier(ttl))\n"
                 "    print(f'TTL {ttl:>4} s pays above {rate * 60:.4f} reuses/min (one every {1 / rate / 60:.0f} min)')"),
        ("md", "Now a real reuse pattern: coding agents re-send a repository context in bursts seconds apart, "
               "then go idle for minutes. Replaying the workload bills each request as read, write or plain input:"),
        ("code", "from workloads import load_workload\n"
                 "from simulator.billing import compare_ttls\n"
                 "wl = load_workload('code-repo-128k', seed=1, duration_s=3600)\n"
                 "cmp = compare_ttls(wl, p, ['none', '5m', '1h'])\n"
                 "s = cmp.summary.set_index('ttl')\n"
                 "assert s.total_usd['5m'] < s.total_usd['none']\n"
                 "print('best TTL for the customer:', cmp.best_ttl)\n"
                 "cmp.summary[['ttl', 'hit_rate', 'read_tokens', 'write_tokens', 'total_usd', 'savings_pct']]"),
        ("code", "from simulator.billing.charts import plot_gap_cdf\n"
                 "from simulator.billing.numeric import ttl_rows\n"
                 "gaps = cmp.results['none'].frame.reuse_gap_s.dropna().to_numpy()\n"
                 "ax = plot_gap_cdf(gaps, ttl_rows(p, [300.0, 3600.0]), title='Reuse gaps of code-repo agents')"),
    ],
}


def main() -> None:
    for name, cells in NOTEBOOKS.items():
        nb = new_notebook(cells=[new_markdown_cell(src) if kind == "md" else new_code_cell(src)
                                 for kind, src in cells])
        nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
        nbformat.write(nb, HERE / name)


if __name__ == "__main__":
    main()
