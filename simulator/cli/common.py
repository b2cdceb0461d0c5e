"""What every kvsim command shares: errors as one line and exit code 2, ``--out`` folders, output helpers."""

from __future__ import annotations

import functools
import os
import re
import signal
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

import click

from simulator import jsonout
from simulator.errors import MAX_MESSAGE_CHARS, ConfigError, KvsimError, RuleError, is_code_name, shown
from simulator.files import said_at, shown_path

if TYPE_CHECKING:
    from simulator.kv import KVLayout
    from simulator.models import ModelSpec

P = ParamSpec("P")
R = TypeVar("R")


def one_line(message: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    """`message` on one line (whitespace runs become one space), cut to `limit` characters: after the
    last whole item of a list (``valid: a, b, …``) where the cut falls in one, not in the middle of a name.
    A closing ``(got …)``, the value given, is kept whole when it takes at most half the line: what comes
    before it is cut instead (a long path and a long list of what is allowed would otherwise push it out).
    It is the first ``" (got "`` in the line's last half, so one inside a value shown through
    `simulator.errors.shown` (~110 characters at most) is never taken for it. A value quoted whole, longer
    than half the line and holding ``" (got "`` itself, is the exception: the line then shows the
    value's start, an ellipsis and the value's end from its own ``(got`` on (its middle cut).

    >>> one_line("valid: alpha, beta, gamma", 21)
    'valid: alpha, beta, …'
    >>> one_line("name must be one of ['alpha', 'beta', 'gamma'] (got 'x')", 44)
    "name must be one of ['alpha', … (got 'x')"
    """
    text = re.sub(r"\s+", " ", message).strip()
    if len(text) <= limit:
        return text
    got = text.find(" (got ", len(text) - limit // 2)
    if got > 0 and text.endswith(")"):
        tail = text[got:]
        return _cut(text[:got], limit - len(tail)) + tail
    return _cut(text, limit)


def _cut(text: str, limit: int) -> str:
    """`text` cut to `limit` characters (an ellipsis last), after a list's last whole item (`one_line`)."""
    if len(text) <= limit:
        return text
    head = text[:limit - 1]
    comma = head.rfind(", ")
    return head[:comma + 2] + "…" if comma > limit // 2 else text[:limit - 1] + "…"


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
    except RuleError as exc:  # a rule broken by an option's value: said at the option, not the function's name
        raise KvsimClickError(_at_option(exc)) from None
    except KvsimError as exc:
        raise KvsimClickError(str(exc)) from None
    except BrokenPipeError:  # the reader went away (`kvsim models | head -1`): no error of ours; click's
        raise                # main silences stdout and exits 1 with nothing printed
    except OSError as exc:  # an --out folder that cannot be written, a file that cannot be read
        where = shown_path(exc.filename) if exc.filename else ""  # cut in the middle: the reason stays
        raise KvsimClickError(f"{where}: {exc.strerror or exc}".lstrip(": ")) from None
    except MemoryError:
        raise KvsimClickError("out of memory: make the study smaller (fewer nodes, requests or seconds; see the "
                              "README's Limits)") from None


at_option = said_at  # a value of an option that does not resolve, said at its flag (``--hardware: ...``)


def comma_items(text: str, option: str, what: str, example: str) -> list[str]:
    """`text`'s comma-separated items, each stripped: ``--hardware`` names node kinds (`what`: ``node kind``). An
    empty item (``a,``, ``,a``, ``a,,b``) is refused, naming `option` and an `example` of the list (helper-159:
    ``--hardware``, ``--layout``, ``--plan``, ``--strategy`` and ``--rate`` left it out while ``--ttl`` and
    ``--grid`` refused it); so is a list of none."""
    items = [x.strip() for x in text.split(",")]
    if not any(items):
        raise ConfigError(f"{option}: must name at least one {what}, comma-separated, e.g. {example} "
                          f"(got {shown(text)})")
    if not all(items):
        raise ConfigError(f"{option}: must be a comma list of {what}s with no empty item, e.g. {example} "
                          f"(got {shown(text)})")
    return items


def model_layout(model: ModelSpec, text: str) -> KVLayout:
    """``--layout``'s `text` parsed and suited to `model` (`simulator.kv.check_layout`), its error said at
    ``--layout`` (calc, fit, collapse, cost); a ``no-sliding`` or an attention lever that changes nothing on
    `model` is noted (`simulator.placement.idle_levers`: ``mla`` on DeepSeek-V3, ``gqa:8`` on Llama-3.1-8B), as
    ``kvsim compare`` runs them as ``native``."""
    from simulator.kv import check_layout, parse_layout
    from simulator.placement import idle_levers

    with at_option("--layout"):
        layout = check_layout(model, parse_layout(text))
    for idle in idle_levers(model, layout):
        note(f"--layout {layout.label}: {idle}")
    return layout


def _at_option(exc: RuleError) -> str:
    """`exc`'s message at the running command's option (or argument) that gave the value it rejects:
    ``--prefix-tokens: must be >= 1 token (got -5)``, not ``breakeven: 'prefix_tokens' must be ...``. The
    option is the one named by the rule's key (its parameter's name or its flag) that was given on the
    command line with that very value (one of its values); none: the message as it is (the value came from
    a file or a default, and its message says where)."""
    ctx = click.get_current_context(silent=True)
    if ctx is None:
        return str(exc)
    flag = "--" + exc.key.replace("_", "-")
    for p in ctx.command.params:
        if exc.key != p.name and flag not in p.opts:
            continue
        if ctx.get_parameter_source(p.name or "") is not click.core.ParameterSource.COMMANDLINE:
            continue
        given = ctx.params.get(p.name or "")
        values = (*given,) if isinstance(given, tuple | list) else (given, *str(given).split(","))  # (a comma list)
        if any(v == exc.value and type(v) is type(exc.value) for v in values):
            label = p.opts[0] if isinstance(p, click.Option) else p.human_readable_name
            keep = not is_code_name(exc.owner) and exc.owner != label  # a description a user can read
            return exc.at(f"{label}: {exc.owner}" if keep else label)
    return str(exc)


@contextmanager
def naming(where: str) -> Iterator[None]:
    """A file-system error inside (a name too long, a folder that is a file, no permission) as a
    `ConfigError` that begins with `where` (the option and its path, e.g. ``--out aaa…aaa``) and keeps the reason."""
    try:
        yield
    except OSError as exc:
        raise ConfigError(f"{where}: {exc.strerror or exc}") from None


def handle_errors(fn: Callable[P, R]) -> Callable[P, R]:
    """Decorator form of `config_errors` for a whole click command."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        with config_errors():
            return fn(*args, **kwargs)

    return wrapper


def note(line: str) -> None:
    """``note: LINE`` on stderr: how kvsim read an input, where that changes what runs (not an error)."""
    click.echo(f"note: {line}", err=True)


def warn(line: str) -> None:
    """``warning: LINE`` on stderr: what a result leaves out or cannot tell (a trace's skipped rows, a run too
    short to be steady); the command goes on."""
    click.echo(f"warning: {line}", err=True)


def echo_json(obj: Any) -> None:
    click.echo(jsonout.dumps(obj, indent=2, sort_keys=False, default=float))  # NaN as null


def records(df: Any) -> list[dict[str, Any]]:
    """A table's rows as JSON-ready dicts: its (snake_case) columns as keys, numbers as numbers,
    a missing value (NaN, pandas' NA) as null; the one `--json` form of every command that prints a table."""
    import pandas as pd

    return [{k: (None if (isinstance(v, float) and v != v) or v is pd.NA else v) for k, v in row.items()}
            for row in df.astype(object).to_dict(orient="records")]


# --- --out folders --------------------------------------------------------------------------------
MANIFEST = ".kvsim-files"
# what each command writes, by name: removed from a folder that has no manifest (an older kvsim's)
OUTPUTS = {
    "run": frozenset({"summary.md", "headline.csv", "scenario.json", "latency.png", "timeseries.png", "collapse.csv",
                      "collapse.png", "collapse_simulated.csv", "breakeven.csv", "breakeven.png",
                      "breakeven_provider.csv",
                      "breakeven_provider_inputs.csv", "capacity.csv", "capacity.png", "fleets.csv", "fleets.png"}),
    "capacity": frozenset({"capacity.csv", "capacity.png", "max_rate.csv", "offline.csv"}),
    "compare": frozenset({"compare.csv", "compare.png"}),
    "collapse": frozenset({"collapse.csv", "collapse.png"}),
    "breakeven": frozenset({"breakeven.csv", "crossovers.csv", "costs.csv", "gaps.csv", "workload.csv",
                            "breakeven.png", "savings.png", "gaps.png"}),
}


def _result_folder(entry: Path) -> bool:
    """A per-hardware folder of `kvsim run` (`Result.write`: ``summary.json`` and ``requests.*``)."""
    return entry.is_dir() and (entry / "summary.json").is_file() and any(entry.glob("requests.*"))


def _files(root: Path, names: Iterable[str]) -> set[str]:
    """The files at or under the entries `names` of `root` (what a command writes there: its `OUTPUTS`, a run's
    per-fleet folders), not the rest of the folder (helper-159: ``--out /`` walked the whole disk after the
    simulation and stopped at ``/proc/1/cwd: Permission denied``; ``--out ~`` walked the home folder)."""
    found: set[str] = set()
    for name in names:
        entry = root / name
        if entry.is_symlink():  # never followed (`refuse_links`)
            continue
        if entry.is_file():
            found.add(name)
        elif entry.is_dir():
            found.update(str(p.relative_to(root)) for p in entry.rglob("*") if p.is_file() and not p.is_symlink())
    return found


class OutPath(click.Path):
    """``--out``'s type: a path, never the empty string (which `Path` reads as the working folder)."""

    def __init__(self, what: str = "folder", **kwargs: Any) -> None:
        super().__init__(path_type=Path, **kwargs)
        self.what = what

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, str) and not value.strip():
            name = param.opts[0] if param is not None and param.opts else "--out"
            raise KvsimClickError(f"{name}: must name a {self.what} (got {value!r})")
        return super().convert(value, param, ctx)


class Stopped(BaseException):
    """SIGINT or SIGTERM arrived (a BaseException, like KeyboardInterrupt: no handler of errors takes it)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


@contextmanager
def stop_on_signals() -> Iterator[None]:
    """While inside, the first SIGINT or SIGTERM raises `Stopped`; later ones are ignored so that the
    clean-up it started runs to its end. Outside the main thread, signals are left alone."""
    raised: list[int] = []

    def handler(signum: int, frame: FrameType | None) -> None:
        if not raised:
            raised.append(signum)
            raise Stopped(signum)

    try:
        previous = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    except ValueError:  # not the main thread
        previous = {}
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


@contextmanager
def stopped_cleanly(command: str, folder: OutputFolder | None) -> Iterator[None]:
    """Run the body under `stop_on_signals`; on SIGINT/SIGTERM remove what the command had written to
    `folder` (`OutputFolder.discard`: no partial output is left to pass for a whole one), say in one
    line what is left, and exit 128 + the signal's number (130, 143), as ``kvsim sweep`` does."""
    try:
        with stop_on_signals():
            yield
    except (Stopped, KeyboardInterrupt) as exc:
        signum = exc.signum if isinstance(exc, Stopped) else signal.SIGINT
        with stop_on_signals():  # a second Ctrl-C must not cut the clean-up short
            left = folder.discard() if folder is not None else "nothing written"
        click.echo(f"{command} stopped by {signal.Signals(signum).name}: {left}", err=True)
        raise click.exceptions.Exit(128 + signum) from None


def on_command_line(name: str) -> bool:
    """Whether the running command's option `name` (its parameter's name) was given on the command line,
    not left at its default: an option that would change nothing is refused even at its default value."""
    return click.get_current_context().get_parameter_source(name) is click.core.ParameterSource.COMMANDLINE


def check_out_file(out: Path, where: str, inputs: Iterable[tuple[str, Path]], force: bool,
                   kind: str = "a file") -> None:
    """An ``--out`` file a command will write, checked before any work, in one line at `where`: its folder
    exists, is a folder and can be written; it is no folder itself (give `kind`), none of `inputs` and new
    unless `force` (`refuse_overwrite`). Call it inside ``naming(where)`` (a name too long, a folder
    without access: said with --out)."""
    folder = out.parent
    if not folder.is_dir():
        if folder.exists():
            raise ConfigError(f"{where}: {shown_path(folder)} is not a folder; give another file")
        raise ConfigError(f"{where}: its folder {shown_path(folder)} does not exist; create it or give another file")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise ConfigError(f"{where}: its folder {shown_path(folder)} is not writable; give another file")
    if out.is_dir():
        raise ConfigError(f"{where}: is a folder; give {kind}")
    refuse_overwrite(out, where, inputs, force)


def refuse_overwrite(out: Path, where: str, inputs: Iterable[tuple[str, Path]], force: bool) -> None:
    """Refuse an ``--out`` file that is one of the command's `inputs` (``(how to name it, path)``;
    compared with ``samefile``, so links count), even with `force`, and one that exists without `force`."""
    for given, path in inputs:
        if out.exists() and path.exists() and out.samefile(path):
            raise ConfigError(f"{where}: is {given}; give another file")
    if out.exists() and not force:
        raise ConfigError(f"{where}: exists; pass --force to overwrite it")


def refuse_links(root: Path, names: Iterable[str], where: str) -> None:
    """Refuse, at `where`, a name under `root` (or a path inside a real folder so named) that is a
    symbolic link: kvsim never writes through one."""
    for name in sorted(set(names)):
        for rel in _links(root, name):
            raise ConfigError(f"{where}: {rel} is a symbolic link (to {shown_path(os.readlink(root / rel))}); kvsim "
                              "does not write through links: remove it or choose another folder")


def _links(root: Path, name: str) -> Iterator[str]:
    """`name` under `root` and, for a real folder, every path inside it, that is a symbolic link."""
    top = root / name
    if top.is_symlink():
        yield name
    elif top.is_dir():
        for d, dirs, files in os.walk(top):  # os.walk follows no link
            for entry in dirs + files:
                if (Path(d) / entry).is_symlink():
                    yield str((Path(d) / entry).relative_to(root))


class OutputFolder:
    """An ``--out`` folder: checked before anything runs, cleared right before the command writes,
    listed after it wrote.

    The policy (README, "Limits"):

    - `prepare` (before computing): a path that is a file, a folder that cannot be written, or a name
      the command will write that is a link or another command's output (below) is refused; nothing is removed.
    - `clear` (once the inputs are checked and the results computed, right before the first write):
      the command removes the files *it* wrote there last time, listed per command in ``.kvsim-files``,
      so that no table, chart or per-hardware folder of an earlier run is left beside the new ones. In
      a folder without that list (one an older kvsim wrote) it removes the files it would write, by name
      (``kvsim run``: and its per-hardware result folders). Every other file is kept: inputs, notes,
      another command's outputs. A name the command writes that another command listed as its own is
      refused (naming both), so no command overwrites, or later deletes, another's output.
    - kvsim never writes through a symbolic link: a name the command writes (or a path inside a
      folder it writes) that is a link is refused, so nothing outside the folder can be written.
      The ``--out`` folder itself may be a link.
    - `discard` (SIGINT/SIGTERM while writing): what the command wrote is removed again.
    """

    def __init__(self, path: Path, command: str, option: str = "--out") -> None:
        self.path, self.command, self.option = path, command, option
        self._before: set[str] | None = None
        self._names: set[str] = set()  # the entries the command writes (`clear`)
        self._others: list[tuple[str, str]] = []

    def _manifest(self) -> list[tuple[str, str]]:
        rows = [line.split("\t", 1) for line in
                (self.path / MANIFEST).read_text(encoding="utf-8", errors="replace").splitlines()]
        return [(r[0], r[1]) for r in rows if len(r) == 2]

    def _stale(self) -> list[str]:
        p = self.path
        if (p / MANIFEST).is_file():
            listed = self._manifest()
            self._others = [(cmd, rel) for cmd, rel in listed if cmd != self.command and (p / rel).is_file()]
            return [rel for cmd, rel in listed if cmd == self.command]
        names = OUTPUTS.get(self.command, frozenset())
        stale = [e.name for e in p.iterdir() if e.is_file() and e.name in names]
        if self.command == "run":
            stale += [str(f.relative_to(p)) for e in p.iterdir() if _result_folder(e) for f in e.rglob("*")
                      if f.is_file()]
        return stale

    def _where(self) -> str:
        return f"{self.option} {shown_path(self.path)}"

    def prepare(self, writes: Iterable[str] | None = None) -> Path:
        """Refuse a path that is a file, a folder that cannot be written, or one where a name in `writes`
        (default: the command's `OUTPUTS`) is a symbolic link or another command's output; make the
        folder. Nothing is removed."""
        self._checked(writes)
        return self.path

    def _checked(self, writes: Iterable[str] | None) -> list[str]:
        """`prepare`'s checks; this command's earlier files (`_stale`), for `clear`."""
        p = self.path
        with naming(self._where()):
            if p.exists() and not p.is_dir():
                raise ConfigError(f"{self._where()}: exists and is not a folder")
            p.mkdir(parents=True, exist_ok=True)
        if not os.access(p, os.W_OK | os.X_OK):
            raise ConfigError(f"{self._where()}: folder is not writable")
        return self._refuse(set(OUTPUTS.get(self.command, frozenset()) if writes is None else writes))

    def _refuse(self, names: set[str]) -> list[str]:
        """This command's earlier files (`_stale`), once no name in `names` is refused."""
        stale = self._stale()
        for cmd, rel in self._others:
            if Path(rel).parts[0] in names:
                raise ConfigError(f"{self._where()}: {rel} is kvsim {cmd}'s output there and kvsim {self.command} "
                                  "would overwrite it; choose another folder (or remove it first)")
        refuse_links(self.path, {*names, MANIFEST}, self._where())
        return stale

    def clear(self, writes: Iterable[str] | None = None) -> Path:
        """Right before the first write: refuse a name in `writes` (default: the command's `OUTPUTS`)
        that another command listed or that is a symbolic link, then remove this command's earlier files."""
        stale = self._checked(writes)  # the folder's checks again: it may have changed while the command computed
        self._names = set(OUTPUTS.get(self.command, frozenset()) if writes is None else writes)
        p = self.path
        root = p.resolve()
        for rel in stale:
            f = (p / rel).resolve()
            if f.is_file() and root in f.parents:  # never outside the folder
                f.unlink()
                _remove_empty(f.parent, root)
        self._before = _files(p, self._names)
        return p

    def _written(self) -> list[str]:
        return sorted(_files(self.path, self._names) - (self._before or set()))

    def finish(self) -> None:
        """List what the command wrote (every file that was not there before it ran)."""
        lines = [f"{cmd}\t{rel}" for cmd, rel in self._others] + [f"{self.command}\t{rel}" for rel in self._written()]
        (self.path / MANIFEST).write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")

    def discard(self) -> str:
        """Remove what the command wrote since `clear` (none of its output is left) and say what is left."""
        if self._before is None:
            return f"nothing written; {shown_path(self.path)} is as it was"
        root = self.path.resolve()
        for rel in self._written():
            f = self.path / rel
            if not f.is_symlink():
                f.unlink(missing_ok=True)
                _remove_empty(f.parent.resolve(), root)
        lines = [f"{cmd}\t{rel}\n" for cmd, rel in self._others]  # this command's: none left
        if lines:
            (self.path / MANIFEST).write_text("".join(lines), encoding="utf-8")
        else:  # no command's output is left: no list (an empty one would be a file no command wrote)
            (self.path / MANIFEST).unlink(missing_ok=True)
        return (f"its partial output was removed from {shown_path(self.path)} (its earlier output there had "
                "already been removed; other files are kept)")


def _remove_empty(d: Path, root: Path) -> None:
    """Remove `d` and its parents up to (not including) `root` while they are empty."""
    for folder in (d, *d.parents):
        if folder == root or root not in folder.parents or any(folder.iterdir()):
            break
        folder.rmdir()


def resolve_listing(group: click.Group, ctx: click.Context, args: list[str],
                    names: list[str]) -> tuple[str | None, click.Command | None, list[str]]:
    """`group`'s command for `args`, an unknown name refused with the valid `names` (click's own error names none
    of them); shell completion (``resilient_parsing``) is left to click."""
    if args and not ctx.resilient_parsing and not args[0].startswith("-") and args[0] not in names:
        raise click.UsageError(f"unknown command {shown(args[0])}; valid: {', '.join(names)}")
    return click.Group.resolve_command(group, ctx, args)


class ListingGroup(click.Group):
    """A command group whose unknown command lists the valid ones (`resolve_listing`)."""

    def resolve_command(self, ctx: click.Context, args: list[str]) -> tuple[str | None, click.Command | None,
                                                                         list[str]]:
        return resolve_listing(self, ctx, args, self.list_commands(ctx))
