"""argparse ``type=`` converters shared by every ``rocketq`` command: a bad value is a one-line
usage error naming the value, never a traceback."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TypeVar

N = TypeVar("N", int, float)


def _parsed(text: str, kind: Callable[[str], N], what: str) -> N:
    try:
        return kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not {what}") from None


def positive(text: str) -> int:
    n = _parsed(text, int, "a number")
    if n <= 0:
        raise argparse.ArgumentTypeError(f"{n} must be > 0")
    return n


def non_negative(text: str) -> int:
    n = _parsed(text, int, "a number")
    if n < 0:
        raise argparse.ArgumentTypeError(f"{n} must be >= 0")
    return n


def seconds(text: str) -> float:
    n = _parsed(text, float, "a number of seconds")
    if n < 0:
        raise argparse.ArgumentTypeError(f"{n} must be >= 0")
    return n


def port(text: str) -> int:
    n = _parsed(text, int, "a port number")
    if not 0 <= n <= 65535:
        raise argparse.ArgumentTypeError(f"{n} is not a port number (0-65535; 0 picks a free one)")
    return n


def grpc_port(text: str) -> int:
    """A port, or -1 for a listener that is off (grpcPort)."""
    return -1 if text.strip() == "-1" else port(text)
