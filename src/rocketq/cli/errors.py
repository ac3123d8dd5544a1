"""Errors the command line ends with (still part of the one tree under RocketQError)."""

from __future__ import annotations

from rocketq.errors import RocketQError


class CliError(RocketQError):
    """A failure the CLI reports as one line on stderr, exiting with ``exit_code``."""

    exit_code: int = 1

    def __init__(self, message: str, *, exit_code: int | None = None) -> None:
        super().__init__(message)
        if exit_code is not None:
            self.exit_code = exit_code


class UsageError(CliError):
    """A bad command line: nothing was started."""

    exit_code = 2
