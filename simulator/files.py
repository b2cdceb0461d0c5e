"""Reading an input file whole (scenario, catalog, params, profiles, config.json, a small CSV).

Every reader here turns what can go wrong into one `ConfigError` line that names the file:
missing, a folder, unreadable, larger than `simulator.limits.MAX_INPUT_BYTES` (so `/dev/zero`
is refused after 64 MiB instead of read without end), not text (NUL bytes: a binary file, whose
bytes are never echoed), not UTF-8, not valid TOML or JSON, or nested deeper than the parser's
recursion allows. Traces are streamed by `workloads.traces`, not read here.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from simulator.errors import ConfigError
from simulator.limits import MAX_INPUT_BYTES


def shown_path(path: str | Path, limit: int = 120) -> str:
    """`path` as an error names it: cut in the middle past `limit` characters."""
    text = str(path)
    return text if len(text) <= limit else f"{text[:limit // 2]}…{text[-limit // 2:]}"


def in_file(exc: Exception, path: str | Path) -> bool:
    """Whether `exc` is about the content of the existing file `path` (its message begins with it, as
    given or as `Path` spells it: ``./m.json`` is ``m.json``): an error that names its file already, which
    whoever wraps it at the key or option that named the file leaves as it is."""
    return Path(path).is_file() and str(exc).startswith((str(path), str(Path(path))))


@contextmanager
def said_at(where: str, path: str | Path | None = None) -> Iterator[None]:
    """A name or file that does not resolve (an unknown node or model, a missing file), said at the key
    or option `where` that named it: ``cluster.hardware: unknown node '1xH999'; valid: ...``,
    ``--catalog: c.toml: file not found``. An error inside the existing file `path` names that file
    already and is left as it is (`in_file`)."""
    try:
        yield
    except ConfigError as exc:
        if path is not None and in_file(exc, path):
            raise
        raise ConfigError(f"{where}: {exc}") from None


def read_bytes(path: str | Path, missing: str = "file not found") -> bytes:
    """The file's bytes, at most `MAX_INPUT_BYTES`."""
    where = shown_path(path)
    try:
        with Path(path).open("rb") as fh:
            data = fh.read(MAX_INPUT_BYTES + 1)
    except FileNotFoundError:
        raise ConfigError(f"{where}: {missing}") from None
    except IsADirectoryError:
        raise ConfigError(f"{where}: is a folder, not a file") from None
    except (OSError, ValueError) as exc:  # permissions, a NUL in the name, ...
        raise ConfigError(f"{where}: cannot be read ({getattr(exc, 'strerror', None) or exc})") from None
    if len(data) > MAX_INPUT_BYTES:
        raise ConfigError(f"{where}: larger than {MAX_INPUT_BYTES // 2**20} MiB, kvsim's limit for an input file")
    return data


def read_text(path: str | Path, what: str = "the file", missing: str = "file not found") -> str:
    """The file as UTF-8 text (a byte-order mark is skipped); `what` names the expected content."""
    data = read_bytes(path, missing)
    if b"\x00" in data:
        raise ConfigError(f"{shown_path(path)}: not a text file (it holds NUL bytes); {what} must be UTF-8 text")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{shown_path(path)}: not UTF-8 text (byte {exc.start}: {exc.reason}); "
                          f"{what} must be UTF-8") from None


def read_toml(path: str | Path, missing: str = "file not found") -> dict[str, Any]:
    """The parsed file; ``ConfigError("PATH: file not found")``, ``("PATH: not valid TOML (...)")``, ..."""
    return parse_toml(read_text(path, "a TOML file", missing), path)


def parse_toml(text: str, path: str | Path) -> dict[str, Any]:
    """`text`, read from `path`, parsed as TOML; ``ConfigError("PATH: not valid TOML (...)")``."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{shown_path(path)}: not valid TOML ({exc})") from None
    except RecursionError:
        raise ConfigError(f"{shown_path(path)}: not valid TOML (arrays or tables nested too deeply)") from None


def read_json(path: str | Path, missing: str = "file not found") -> Any:
    """The parsed file (any JSON value: the caller checks its shape)."""
    text = read_text(path, "a JSON file", missing)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{shown_path(path)}: not valid JSON ({exc.msg} at line {exc.lineno})") from None
    except RecursionError:
        raise ConfigError(f"{shown_path(path)}: not valid JSON (arrays or objects nested too deeply)") from None
