"""Reading a TOML data or scenario file, with kvsim's one-line errors (see `simulator.files`)."""

from __future__ import annotations

from simulator.files import parse_toml, read_toml

__all__ = ["parse_toml", "read_toml"]
