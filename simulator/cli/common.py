"""What every kvsim command shares: errors as one line and exit code 2, ``--out`` folders, output helpers."""

from __future__ import annotations

import functools
import json
import os
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

import click

from simulator.errors import MAX_MESSAGE_CHARS, ConfigError, KvsimError

P = ParamSpec("P")
R = TypeVar("R")


def one_line(message: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    """`message` on one line (whitespace runs become one space), cut to `limit` characters."""
    text = re.sub(r"\s+", " ", message).strip()
    return text if len(text) <= limit else text[:limit - 1] + "…"


class KvsimClickError(click.ClickException):
    """A user-facing error: one line on stderr (`one_line`), exit status 2 (click's usage-error code),
    no traceback."""

    exit_code = 2

    def __init__(self, message: str) -> None:
        super().__init__(one_line(message))


@contextmanager
def config_errors() -> Iterator[None]:
    """Turn kvsim's own errors (bad input, does-not-fit), file-system errors and running out of
    memory into `KvsimClickError`; a broken pipe on output passes through untouched."""
    try:
        yield
    except KvsimError as exc:
        raise KvsimClickError(str(exc)) from None
    except BrokenPipeError:  # the reader went away (`kvsim models | head -1`): no error of ours; click's
        raise                # main silences stdout and exits 1 with nothing printed
    except OSError as exc:  # an --out folder that cannot be written, a file that cannot be read
        raise KvsimClickError(f"{exc.filename or ''}: {exc.strerror or exc}".lstrip(": ")) from None
    except MemoryError:
        raise KvsimClickError("out of memory: make the study smaller (fewer nodes, requests or seconds; see the "
                              "README's Limits)") from None


def handle_errors(fn: Callable[P, R]) -> Callable[P, R]:
    """Decorator form of `config_errors` for a whole click command."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        with config_errors():
            return fn(*args, **kwargs)

    return wrapper


def echo_json(obj: Any) -> None:
    click.echo(json.dumps(obj, indent=2, sort_keys=False, default=float))


def records(df: Any) -> list[dict[str, Any]]:
    """A table's rows as JSON-ready dicts: its (snake_case) columns as keys, numbers as numbers,
    a missing value (NaN) as null; the one `--json` form of every command that prints a table."""
    return [{k: (None if isinstance(v, float) and v != v else v) for k, v in row.items()}
            for row in df.astype(object).to_dict(orient="records")]


# --- --out folders --------------------------------------------------------------------------------
MANIFEST = ".kvsim-files"
# what each command writes, by name: removed from a folder that has no manifest (an older kvsim's)
OUTPUTS = {
    "run": frozenset({"summary.md", "headline.csv", "scenario.json", "latency.png", "timeseries.png", "collapse.csv",
                      "collapse.png", "collapse_simulated.csv", "breakeven.csv", "breakeven.png",
                      "breakeven_provider.csv", "capacity.csv", "capacity.png"}),
    "capacity": frozenset({"capacity.csv", "capacity.png", "max_rate.csv", "offline.csv"}),
    "compare": frozenset({"compare.csv", "compare.png"}),
    "collapse": frozenset({"collapse.csv", "collapse.png"}),
    "breakeven": frozenset({"breakeven.csv", "crossovers.csv", "costs.csv", "gaps.csv", "workload.csv",
                            "breakeven.png", "savings.png", "gaps.png"}),
}


def _result_folder(entry: Path) -> bool:
    """A per-hardware folder of `kvsim run` (`Result.write`: ``summary.json`` and ``requests.*``)."""
    return entry.is_dir() and (entry / "summary.json").is_file() and any(entry.glob("requests.*"))


def _files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and p.name != MANIFEST}


class OutputFolder:
    """An ``--out`` folder, made ready before anything runs and listed after the command wrote it.

    The policy (README, "Limits"): before writing, a command removes from the folder the files *it*
    wrote there last time, listed per command in ``.kvsim-files``, so that no table, chart or
    per-hardware folder of an earlier run is left beside the new ones. In a folder without that
    list (one an older kvsim wrote) it removes the files it would write, by name (``kvsim run``:
    and its per-hardware result folders). Every other file is kept: inputs, notes, another
    command's outputs. A path that is a file, or a folder that cannot be written, is refused
    before the command computes anything.
    """

    def __init__(self, path: Path, command: str, option: str = "--out") -> None:
        self.path, self.command, self.option = path, command, option
        self._before: set[str] = set()
        self._others: list[tuple[str, str]] = []

    def _manifest(self) -> list[tuple[str, str]]:
        rows = [line.split("\t", 1) for line in
                (self.path / MANIFEST).read_text(encoding="utf-8", errors="replace").splitlines()]
        return [(r[0], r[1]) for r in rows if len(r) == 2]

    def _stale(self) -> list[str]:
        p = self.path
        if (p / MANIFEST).is_file():
            listed = self._manifest()
            self._others = [(cmd, rel) for cmd, rel in listed if cmd != self.command]
            return [rel for cmd, rel in listed if cmd == self.command]
        names = OUTPUTS.get(self.command, frozenset())
        stale = [e.name for e in p.iterdir() if e.is_file() and e.name in names]
        if self.command == "run":
            stale += [str(f.relative_to(p)) for e in p.iterdir() if _result_folder(e) for f in e.rglob("*")
                      if f.is_file()]
        return stale

    def prepare(self) -> Path:
        p = self.path
        if p.exists() and not p.is_dir():
            raise ConfigError(f"{self.option} {p}: exists and is not a folder")
        p.mkdir(parents=True, exist_ok=True)
        if not os.access(p, os.W_OK | os.X_OK):
            raise ConfigError(f"{self.option} {p}: folder is not writable")
        root = p.resolve()
        for rel in self._stale():
            f = (p / rel).resolve()
            if f.is_file() and root in f.parents:  # never outside the folder
                f.unlink()
                for d in f.parents:  # folders the removal emptied
                    if d == root or any(d.iterdir()):
                        break
                    d.rmdir()
        self._others = [(cmd, rel) for cmd, rel in self._others if (p / rel).is_file()]
        self._before = _files(p)
        return p

    def finish(self) -> None:
        """List what the command wrote (every file that was not there before it ran)."""
        written = sorted(_files(self.path) - self._before)
        lines = [f"{cmd}\t{rel}" for cmd, rel in self._others] + [f"{self.command}\t{rel}" for rel in written]
        (self.path / MANIFEST).write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
