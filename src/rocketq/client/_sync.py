"""The sync facade's engine: one background event-loop thread per process (uvloop when installed),
shared by every sync producer and consumer.

``run_sync(coro)`` runs a coroutine there and blocks the calling thread for its result: one
``run_coroutine_threadsafe`` per call. Calling it from the loop thread itself would wait for
ever (the loop cannot run the coroutine while it waits), so that raises instead. The thread is a
daemon started on first use and restarted after ``os.fork``.

A script must end when its main thread does (an exception, ``sys.exit``, the last line), started
clients or not: no rocketq thread keeps the interpreter alive. Clients started through the sync
facades (``track``) and not shut down are shut down at interpreter exit, before threads are
joined, within ``EXIT_SHUTDOWN_TIMEOUT`` seconds: consumers first (offsets persisted, group
left), then producers. Then the loop is stopped.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import concurrent.futures.thread  # registers its exit hook now, so ours runs before it (LIFO)
import logging
import os
import threading
from collections.abc import Callable, Coroutine
from typing import Any, Protocol, TypeVar

from rocketq.remoting.loop import new_event_loop

__all__ = [
    "EXIT_SHUTDOWN_TIMEOUT",
    "background_loop",
    "call_soon",
    "in_loop_thread",
    "run_sync",
    "submit",
    "track",
    "untrack",
]

log = logging.getLogger("rocketq.client")

_T = TypeVar("_T")

EXIT_SHUTDOWN_TIMEOUT = 10.0  # s for every client still running at interpreter exit, together

_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None
_thread: threading.Thread | None = None
_pid = 0


class _Client(Protocol):
    async def shutdown(self) -> None: ...


# Clients started through a sync facade and not shut down yet, in start order (id -> client).
_running: dict[int, tuple[_Client, bool]] = {}
_exit_hook_pid = 0


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


def track(client: _Client, *, consumer: bool) -> None:
    """``client`` was started on the shared loop: shut it down at interpreter exit unless
    ``untrack``-ed (its own shutdown) before."""
    global _exit_hook_pid
    with _lock:
        _running[id(client)] = (client, consumer)
        if _exit_hook_pid != os.getpid():
            _exit_hook_pid = os.getpid()
            # Run while the interpreter is whole: before non-daemon threads are joined and before
            # concurrent.futures refuses new work (persisting a local offset file uses a thread).
            threading._register_atexit(_shutdown_clients_at_exit)  # type: ignore[attr-defined]


def untrack(client: _Client) -> None:
    with _lock:
        _running.pop(id(client), None)


def _shutdown_clients_at_exit() -> None:
    loop = _loop
    with _lock:
        clients = list(_running.values())
        _running.clear()
    if not clients or loop is None or _pid != os.getpid() or loop.is_closed():
        return
    log.info("interpreter exit: shutting down %d rocketq client(s) still running", len(clients))

    async def shutdown_all() -> None:
        # Consumers first: their shutdown may still send messages back through a producer.
        for wanted in (True, False):
            group = [c for c, is_consumer in clients if is_consumer is wanted]
            results = await asyncio.gather(*(c.shutdown() for c in group), return_exceptions=True)
            for client, result in zip(group, results, strict=True):
                if isinstance(result, BaseException):
                    log.warning("shutdown of %r at interpreter exit failed: %r", client, result)

    try:
        asyncio.run_coroutine_threadsafe(shutdown_all(), loop).result(EXIT_SHUTDOWN_TIMEOUT)
    except concurrent.futures.TimeoutError:
        log.warning("rocketq clients not shut down within %.0f s of interpreter exit", EXIT_SHUTDOWN_TIMEOUT)
    except Exception as e:  # the loop went away meanwhile: nothing left to do
        log.warning("rocketq clients could not be shut down at interpreter exit: %r", e)


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
