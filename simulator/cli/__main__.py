"""``python -m simulator.cli``: the ``kvsim`` command."""

from simulator.cli import main

main(prog_name="kvsim")
