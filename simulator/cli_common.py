"""What every kvsim command shares: turning library errors into one-line exits (code 2)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import ParamSpec, TypeVar

import click

from simulator.errors import KvsimError

P = ParamSpec("P")
R = TypeVar("R")


class KvsimClickError(click.ClickException):
    """A one-line user error; exits with code 2 (click's usage-error code)."""

    exit_code = 2


def handle_errors(fn: Callable[P, R]) -> Callable[P, R]:
    """Decorator for click commands: `KvsimError` (hence `ConfigError`) -> `KvsimClickError`."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except KvsimError as e:
            raise KvsimClickError(str(e)) from None

    return wrapper
