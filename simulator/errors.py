"""The one error family users see. Messages are one line, attrs-style:
``<where>: 'key' must be <rule> (got <value>)``. The CLI turns them into exit code 2.

A message quotes the value it rejects through `shown`, cut to `SHOWN_CHARS` characters: a
100 kB string in a scenario file is named, not echoed. The CLI prints a message on one line and cuts
it at `MAX_MESSAGE_CHARS` characters, so a message that could grow past that (one that lists names)
says something shorter instead.
"""

import numbers
import operator
import re
from collections.abc import Sequence

SHOWN_CHARS = 80
MAX_MESSAGE_CHARS = 290  # "Error: " + this stays under 300 characters


class KvsimError(Exception):
    """Base of every error kvsim raises on purpose."""


class ConfigError(KvsimError, ValueError):
    """Bad input: a spec, a scenario, a data file or a command-line value."""


class DoesNotFitError(KvsimError):
    """A model or a request that cannot fit the memory it is given."""


def shown(value: object, limit: int = SHOWN_CHARS) -> str:
    """``repr(value)``, cut to `limit` characters with its full length after the cut. A plain tuple is shown
    as the list a user wrote (a TOML array or a comma list is read into a tuple): ``[]``, not ``()``.

    >>> shown("x" * 100_000, 12)
    "'xxxxxxxxxx… (100,002 characters)"
    >>> shown(()), shown(("8xH100",)), shown({"mean": 500, "cv": -1})
    ('[]', "['8xH100']", '{mean = 500, cv = -1}')
    """
    text = repr(list(value)) if type(value) is tuple else _inline_table(value) if type(value) is dict else repr(value)
    return text if len(text) <= limit else f"{text[:limit - 1]}… ({len(text):,} characters)"


_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


def _inline_table(table: dict[object, object]) -> str:
    """A table as a TOML file writes it inline, ``{mean = 500, cv = -1}``, not Python's ``{'mean': 500, ...}``:
    true/false, lists and tables within, a key quoted unless bare (``{"x.y" = 1}``).

    >>> _inline_table({"mean": 500, "fixed": True, "clip": [{"a": 1}], "x.y": "s"})
    '{mean = 500, fixed = true, clip = [{a = 1}], "x.y" = "s"}'
    """
    def value(v: object) -> str:
        if type(v) is dict:
            return _inline_table(v)
        if type(v) in (list, tuple):
            return "[" + ", ".join(value(x) for x in v) + "]"  # type: ignore[attr-defined]
        if type(v) is bool:
            return "true" if v else "false"
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"' if type(v) is str else repr(v)

    def key(k: object) -> str:
        return str(k) if _BARE_KEY.fullmatch(str(k)) else value(str(k))

    return "{" + ", ".join(f"{key(k)} = {value(v)}" for k, v in table.items()) + "}"


class RuleError(ConfigError):
    """A value that breaks its rule (`must`), with the parts of its message kept apart: `owner` (the
    spec's own name for the object, ``SchedulerConfig``, which the user never wrote), `key`, `rule` and
    `value`. Whoever built the object from a user's table re-raises it at that table's key (`placed`)."""

    def __init__(self, owner: str, key: str, rule: str, value: object) -> None:
        super().__init__(f"{owner}: {key!r} must be {rule} (got {shown(value)})")
        self.owner, self.key, self.rule, self.value = owner, key, rule, value

    def at(self, where: str, *, got: object = None) -> str:
        """The rule said at `where`, the key or option the user wrote: ``<where>: must be <rule> (got ...)``,
        quoting `got` when given (the value as the user wrote it: ``420s``, not the ``7m`` it parsed to)."""
        return f"{where}: must be {self.rule} (got {shown(self.value if got is None else got)})"

    def quoted(self, key: str | None = None) -> str:
        """The rule without its owner, at `key` (default its own): ``'<key>' must be <rule> (got ...)``."""
        return f"{key or self.key!r} must be {self.rule} (got {shown(self.value)})"


def must(cond: bool, where: str, key: str, rule: str, value: object) -> None:
    """Raise `RuleError` (a `ConfigError`) with an attrs-style message unless `cond` holds.

    >>> must(3 > 0, "GPUSpec(H100)", "hbm_bytes", "> 0", 3)
    """
    if not cond:
        raise RuleError(where, key, rule, value)


FILE_SUFFIXES = (".toml", ".json", ".jsonl", ".csv")


def at_key(where: str, key: str) -> str:
    """Where `key` of the table at `where` is, as an error says it: a file's own key after a colon, a nested one
    after a dot, so every message about a file reads ``<file>: <key path>: ...``.

    >>> at_key("s.toml", "cluster"), at_key("s.toml: cluster", "tp"), at_key("--workload", "rate_per_s")
    ('s.toml: cluster', 's.toml: cluster.tp', '--workload.rate_per_s')
    """
    return f"{where}: {key}" if _names_a_file(where) else f"{where}.{key}"


class FileName(str):
    """A file's name as a `where` (`at_key` names its keys after a colon), for a file without a suffix that
    says so (a scenario saved as ``myscen``, whose keys read as a table's: ``myscen.cluster.nodes``). A
    string made from it (``f"{where}: cluster"``) is a plain `str` again: only the file itself is one."""

    __slots__ = ()


def _names_a_file(where: str) -> bool:
    """Whether `where` is a file's name: it ends in a file suffix or is a `FileName` (not the file system's
    say: a table ``cluster`` is no file because one of that name lies in the working folder)."""
    return isinstance(where, FileName) or where.endswith(FILE_SUFFIXES)


def placed(exc: ConfigError, where: str) -> ConfigError:
    """`exc`, raised while building an object from the table at `where` (``x.toml: scheduler``), said at
    that table's key: a `RuleError` of field ``key`` as ``<where>.<key>: must be <rule> (got ...)``,
    without the spec's own name for the object; any other error as ``<where>: <message>``.

    >>> str(placed(RuleError("SchedulerConfig", "max_num_seqs", ">= 1", 0), "x.toml: scheduler"))
    'x.toml: scheduler.max_num_seqs: must be >= 1 (got 0)'
    """
    return ConfigError(exc.at(at_key(where, exc.key)) if isinstance(exc, RuleError) else f"{where}: {exc}")


def is_code_name(owner: str) -> bool:
    """Whether a rule's owner is a name from the code (``SchedulerConfig``, ``PriceProfile(anthropic/x)``,
    ``breakeven``, ``load_workload``) rather than a description a user can read (``plan TP24 for
    Llama-3.1-8B``, ``Llama-3.1-8B (gqa:3)``): said at an option, the first is dropped, the second kept."""
    return re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*(\(.*\))?", owner) is not None


def is_whole(value: object, minimum: int = 0) -> bool:
    """Whether `value` is an integer (``numbers.Integral``, a bool not) >= `minimum`: a count, a seed,
    an index.

    >>> is_whole(3), is_whole(True), is_whole(2.0), is_whole(0, minimum=1)
    (True, False, False, False)
    """
    return isinstance(value, numbers.Integral) and not isinstance(value, bool) and int(value) >= minimum


def must_whole(spec: object, where: str, field: str, minimum: int, rule: str) -> None:
    """`spec`'s `field` is an integer >= `minimum` (`is_whole`: a numpy integer is one, a float, bool or str not),
    else `RuleError` naming it with `rule`; held as a Python ``int`` (set on a frozen dataclass too: its labels,
    hashes and TOML read alike whatever integer type it was given)."""
    value = getattr(spec, field)
    must(is_whole(value, minimum), where, field, rule, value)
    object.__setattr__(spec, field, operator.index(value))


def is_number(value: object) -> bool:
    """Whether `value` is a real number (``numbers.Real``, a bool not; NaN and infinity are numbers, a rule
    says whether it takes them): a quantity given where a string ``"0.9"`` fails in a comparison.

    >>> is_number(0.9), is_number(2), is_number(True), is_number("0.9")
    (True, True, False, False)
    """
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def must_differ(names: Sequence[str], resolved: Sequence[str], where: str, what: str) -> None:
    """Raise `ConfigError` when two of `names` resolve to the same thing: ``resolved[i]`` is what
    ``names[i]`` names once aliases and spellings are resolved (``H100`` -> ``8xH100``, ``native+fp8``
    -> ``fp8``). A list that names one thing twice would be studied twice under one label.

    >>> must_differ(["8xH100", "B200"], ["8xH100", "8xB200"], "--hardware", "node kind")
    """
    first: dict[str, str] = {}
    for name, key in zip(names, resolved, strict=True):
        if key in first:
            again = (f"{shown(name)} twice" if name == first[key] else
                     f"{shown(first[key])} and {shown(name)}, both {key}")
            raise ConfigError(f"{where}: must name each {what} once (got {again})")
        first[key] = name
