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
}


def main() -> None:
    for name, cells in NOTEBOOKS.items():
        nb = new_notebook(cells=[new_markdown_cell(src) if kind == "md" else new_code_cell(src)
                                 for kind, src in cells])
        nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
        nbformat.write(nb, HERE / name)


if __name__ == "__main__":
    main()
