"""What every kvsim command shares: errors as one line and exit code 2, output helpers."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, ParamSpec, TypeVar

import click

from simulator.errors import KvsimError

P = ParamSpec("P")
R = TypeVar("R")


class KvsimClickError(click.ClickException):
    """A user-facing error: one line on stderr, exit status 2 (click's usage-error code), no traceback."""

    exit_code = 2


@contextmanager
def config_errors() -> Iterator[None]:
    """Turn kvsim's own errors (bad input, does-not-fit) and file-system errors into `KvsimClickError`."""
    try:
        yield
    except KvsimError as exc:
        raise KvsimClickError(str(exc)) from None
    except OSError as exc:  # an --out folder that cannot be written, a file that cannot be read
        raise KvsimClickError(f"{exc.filename or ''}: {exc.strerror or exc}".lstrip(": ")) from None


def handle_errors(fn: Callable[P, R]) -> Callable[P, R]:
    """Decorator form of `config_errors` for a whole click command."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        with config_errors():
            return fn(*args, **kwargs)

    return wrapper


def echo_json(obj: Any) -> None:
    click.echo(json.dumps(obj, indent=2, sort_keys=False, default=float))
