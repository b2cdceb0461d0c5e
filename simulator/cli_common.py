"""What every click command shares: config errors become one-line exits with code 2."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import click

from simulator.errors import ConfigError, DoesNotFitError


class KvsimClickError(click.ClickException):
    """A user error: printed as one line, exit code 2."""

    exit_code = 2


@contextmanager
def config_errors() -> Iterator[None]:
    """Turn `ConfigError` and `DoesNotFitError` raised inside into `KvsimClickError`."""
    try:
        yield
    except (ConfigError, DoesNotFitError) as exc:
        raise KvsimClickError(str(exc)) from exc
