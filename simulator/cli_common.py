"""Shared CLI plumbing: config errors become one-line click errors with exit code 2."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import click

from simulator.errors import ConfigError


class KvsimClickError(click.ClickException):
    """A user-facing error: one line on stderr, exit code 2."""

    exit_code = 2


@contextmanager
def config_errors() -> Iterator[None]:
    """Turn `ConfigError` raised inside the block into `KvsimClickError`."""
    try:
        yield
    except ConfigError as exc:
        raise KvsimClickError(str(exc)) from exc
