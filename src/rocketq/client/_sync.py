"""The sync facade's engine: one background event-loop thread per process (uvloop when installed),
shared by every sync producer and consumer.

``run_sync(coro)`` runs a coroutine there and blocks the calling thread for its result: one
``run_coroutine_threadsafe`` per call. Calling it from the loop thread itself would wait for
ever (the loop cannot run the coroutine while it waits), so that raises instead. The thread is a
daemon started on first use and restarted after ``os.fork``; at interpreter exit the loop is
stopped.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import os
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from rocketq.remoting.loop import new_event_loop

__all__ = ["background_loop", "call_soon", "in_loop_thread", "run_sync", "submit"]

_T = TypeVar("_T")

_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None
_thread: threading.Thread | None = None
_pid = 0


def _run(loop: asyncio.AbstractEventLoop, ready: threading.Event) -> None:
    asyncio.set_event_loop(loop)
    loop.call_soon(ready.set)
    try:
        loop.run_forever()
    finally:
        try:
            tasks = [t for t in asyncio.all_tasks(loop) if not t.done()]
            for task in tasks:
                task.cancel()
            if tasks:
                loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
        finally:
            loop.close()


def background_loop() -> asyncio.AbstractEventLoop:
    """The shared loop, started on first use (again in a forked child)."""
    global _loop, _thread, _pid
    loop = _loop
    if loop is not None and _pid == os.getpid() and not loop.is_closed():
        return loop
    with _lock:
        if _loop is None or _pid != os.getpid() or _loop.is_closed():
            loop = new_event_loop()
            ready = threading.Event()
            thread = threading.Thread(
                target=_run, args=(loop, ready), name="rocketq-client-loop", daemon=True
            )
            thread.start()
            ready.wait()
            _loop, _thread, _pid = loop, thread, os.getpid()
        return _loop


def in_loop_thread() -> bool:
    return _thread is not None and threading.current_thread() is _thread


def submit(coro: Coroutine[Any, Any, _T]) -> concurrent.futures.Future[_T]:
    """Schedule ``coro`` on the shared loop; a concurrent Future gets its outcome."""
    return asyncio.run_coroutine_threadsafe(coro, background_loop())


def run_sync(coro: Coroutine[Any, Any, _T], timeout: float | None = None) -> _T:
    """Run ``coro`` on the shared loop and wait (``TimeoutError`` after ``timeout`` seconds)."""
    if in_loop_thread():
        coro.close()
        raise RuntimeError(
            "a sync rocketq call was made on rocketq's own event-loop thread (from a send callback "
            "or an async listener?); use the rocketq.aio API there"
        )
    fut = submit(coro)
    try:
        return fut.result(timeout)
    except concurrent.futures.TimeoutError:
        fut.cancel()
        raise TimeoutError(f"rocketq call did not finish within {timeout} s") from None


def call_soon(fn: Callable[..., object], *args: Any) -> None:
    """Run ``fn(*args)`` on the shared loop thread (returns at once)."""
    background_loop().call_soon_threadsafe(fn, *args)


@atexit.register
def _stop_at_exit() -> None:
    loop, thread = _loop, _thread
    if loop is None or thread is None or _pid != os.getpid() or loop.is_closed():
        return
    try:
        loop.call_soon_threadsafe(loop.stop)
    except RuntimeError:  # closed meanwhile
        return
    thread.join(timeout=2.0)
