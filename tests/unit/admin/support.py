"""Helpers for the admin tests: run ``rocketq admin ...`` in-process and read its output."""

from __future__ import annotations

import contextlib
import json
import logging
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from tests.harness import SMALL_STORE

from rocketq.cli.main import main
from rocketq.errors import RocketQError

__all__ = ["SMALL_STORE", "AdminRun", "eventually"]


@contextlib.contextmanager
def _cli_logging_restored() -> Iterator[None]:
    """main() configures the "rocketq" logger for a command line; put it back for the next test."""
    logger = logging.getLogger("rocketq")
    saved = (logger.level, logger.propagate, list(logger.handlers))
    try:
        yield
    finally:
        logger.setLevel(saved[0])
        logger.propagate = saved[1]
        logger.handlers[:] = saved[2]


class AdminRun:
    """``rocketq admin <command> ... -n <namesrv>`` run by ``main()`` with stdout/stderr captured."""

    def __init__(self, capsys: pytest.CaptureFixture[str], namesrv: str) -> None:
        self.capsys = capsys
        self.namesrv = namesrv

    def raw(self, *args: str) -> tuple[int, str, str]:
        self.capsys.readouterr()
        with _cli_logging_restored():
            code = main(["admin", *args, "-n", self.namesrv])
        out, err = self.capsys.readouterr()
        return code, out, err

    def json(self, *args: str) -> Any:
        """The command's --json output; fails the test (with stderr) when it does not exit 0."""
        code, out, err = self.raw(*args, "--json")
        assert code == 0, f"rocketq admin {' '.join(args)} exited {code}: {err}"
        return json.loads(out)

    def fails(self, *args: str, code: int = 1) -> str:
        """The one error line of a command expected to fail with ``code``."""
        got, out, err = self.raw(*args)
        assert got == code, f"expected exit {code}, got {got}: {out}{err}"
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("rocketq: error: "), err
        assert "Traceback" not in err
        return lines[0]


def eventually(check: Callable[[], Any], timeout: float = 10.0, interval: float = 0.05) -> Any:
    """Poll ``check`` until it returns a truthy value without raising (an assertion or a rocketq error,
    such as the route a broker has not registered yet)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            result = check()
            if result:
                return result
        except (AssertionError, RocketQError):
            if time.monotonic() >= deadline:
                raise
        if time.monotonic() >= deadline:
            raise AssertionError(f"condition not met within {timeout} s: {check}")
        time.sleep(interval)
