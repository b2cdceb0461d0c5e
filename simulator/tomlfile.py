"""Reading a TOML data or scenario file, with kvsim's one-line errors (a leaf module)."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from simulator.errors import ConfigError


def read_toml(path: str | Path, missing: str = "file not found") -> dict[str, Any]:
    """The parsed file; ``ConfigError("PATH: file not found")`` or ``("PATH: not valid TOML (...)")``."""
    try:
        with Path(path).open("rb") as fh:
            return tomllib.load(fh)
    except FileNotFoundError:
        raise ConfigError(f"{path}: {missing}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML ({exc})") from None
