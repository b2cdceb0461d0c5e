"""kvsim: a discrete-event cluster simulator for the economics of LLM KV-cache memory.

This package init is deliberately empty of imports: `hardware` and `workloads` (the
lowest layers) import the leaf modules `simulator.units` and `simulator.errors`, and must
not pull the engine in with them.
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("kvsim")
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0+unknown"

__all__ = ["__version__"]
