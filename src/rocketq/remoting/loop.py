"""One event loop per process, uvloop when it is installed (DESIGN.md principle 4)."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["new_event_loop", "run", "uvloop_available"]

_T = TypeVar("_T")

# Set to 1 to force the stock asyncio loop (debugging, comparing figures).
_DISABLE_ENV = "ROCKETQ_NO_UVLOOP"


def uvloop_available() -> bool:
    if os.environ.get(_DISABLE_ENV, "") not in ("", "0"):
        return False
    try:
        import uvloop  # noqa: F401
    except ImportError:
        return False
    return True


def new_event_loop() -> asyncio.AbstractEventLoop:
    if uvloop_available():
        import uvloop

        return uvloop.new_event_loop()
    return asyncio.new_event_loop()


def run(main: Coroutine[Any, Any, _T], *, debug: bool | None = None) -> _T:
    """``asyncio.run`` on a loop from ``new_event_loop()``."""
    with asyncio.Runner(loop_factory=new_event_loop, debug=debug) as runner:
        return runner.run(main)
