"""Suite-wide hooks.

A test that hangs on a loaded machine is stopped by pytest-timeout inside ``select()``, which says
nothing about which await never finished. A few seconds before the timeout fires, this prints the
stack of every task of the running event loops, so a rare hang in CI leaves its cause in the log.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import io
import sys
import threading
from collections.abc import Iterator

import pytest

# How long before pytest-timeout's own deadline the task stacks are printed.
DUMP_AHEAD = 3.0


def _running_loops() -> list[asyncio.AbstractEventLoop]:
    return [o for o in gc.get_objects() if isinstance(o, asyncio.AbstractEventLoop) and o.is_running()]


def _dump_tasks(nodeid: str) -> None:
    out = io.StringIO()
    print(f"\n==== {nodeid}: about to time out; asyncio tasks still pending ====", file=out)
    for loop in _running_loops():
        # all_tasks from another thread may race the loop; this is a diagnostic, so retry or skip
        with contextlib.suppress(RuntimeError):
            for task in asyncio.all_tasks(loop):
                task.print_stack(limit=12, file=out)
    sys.stderr.write(out.getvalue())
    sys.stderr.flush()


def _timeout_of(item: pytest.Item) -> float:
    marker = item.get_closest_marker("timeout")
    if marker is not None and marker.args:
        return float(marker.args[0])
    return float(item.config.getini("timeout") or 0)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    timeout = _timeout_of(item)
    timer = None
    if timeout > DUMP_AHEAD * 2:
        timer = threading.Timer(timeout - DUMP_AHEAD, _dump_tasks, args=(item.nodeid,))
        timer.daemon = True
        timer.start()
    try:
        yield
    finally:
        if timer is not None:
            timer.cancel()
