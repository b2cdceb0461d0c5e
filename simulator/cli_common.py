"""What every kvsim command shares: errors as one line and exit code 2, output helpers."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import click

from simulator.errors import KvsimError


class KvsimClickError(click.ClickException):
    """A user-facing error: one line on stderr, exit status 2, no traceback."""

    exit_code = 2


@contextmanager
def config_errors() -> Iterator[None]:
    """Turn kvsim's own errors (bad input, does-not-fit) into `KvsimClickError`."""
    try:
        yield
    except KvsimError as exc:
        raise KvsimClickError(str(exc)) from None


def echo_json(obj: Any) -> None:
    click.echo(json.dumps(obj, indent=2, sort_keys=False, default=float))
