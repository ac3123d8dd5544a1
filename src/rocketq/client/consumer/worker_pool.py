"""Where listeners run: sync listeners on consume threads, async listeners on the event loop.

``ThreadListenerPool`` is the consume thread pool (consumeThreadMin..Max threads, RocketMQ's
ConsumeMessageThread_*). Jobs go in through a C-level queue and results come back to the loop in
bulk: a worker only wakes the loop when the result queue was empty, so a backlog of small batches
costs one loop wake-up per burst, not one per batch.

``AsyncListenerPool`` runs coroutine listeners on the loop with a fixed number of long-lived worker
tasks (the same concurrency bound as the thread pool), so there is no Task per batch.

Both take a job as ``(work, arg, done)``: ``work(arg)`` runs the listener (in a thread, or awaited on
the loop), then ``done(arg)`` runs on the loop.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import queue
import threading
from collections.abc import Awaitable, Callable
from typing import Any

__all__ = ["AsyncListenerPool", "ThreadListenerPool"]

log = logging.getLogger("rocketq.client")

Work = Callable[[Any], Any]
AsyncWork = Callable[[Any], Awaitable[Any]]
Done = Callable[[Any], None]

_STOP = object()
_WAKE = object()


class ThreadListenerPool:
    def __init__(self, name: str, min_threads: int, max_threads: int) -> None:
        self._loop = asyncio.get_running_loop()
        self._name = name
        self._min = max(1, min_threads)
        self._max = max(self._min, max_threads)
        self._jobs: queue.SimpleQueue[Any] = queue.SimpleQueue()
        # Jobs that go before everything queued (submit(first=True)); _WAKE in _jobs wakes an
        # idle worker for them.
        self._first: collections.deque[Any] = collections.deque()
        self._results: collections.deque[tuple[Done, Any]] = collections.deque()
        self._drain_scheduled = False
        self._workers = 0
        self._grow_lock = threading.Lock()
        self.pending = 0  # jobs submitted and not yet done (loop-side count)
        self._closed = False
        for _ in range(self._min):
            self._spawn()

    def _spawn(self) -> None:
        with self._grow_lock:
            if self._workers >= self._max:
                return
            self._workers += 1
            number = self._workers
        # Daemon threads: a consume thread waiting for work must never keep the interpreter
        # alive (a ThreadPoolExecutor's threads are joined at exit; these loops never return
        # by themselves). Clients are shut down at exit by rocketq.client._sync instead.
        threading.Thread(target=self._worker, name=f"{self._name}{number}", daemon=True).start()

    @property
    def workers(self) -> int:
        return self._workers

    def submit(self, work: Work, arg: Any, done: Done, first: bool = False) -> None:
        """Queue a job; ``first`` puts it ahead of every job queued (batches a consumer must
        not leave behind later offsets of their queue)."""
        if self._closed:
            raise RuntimeError("listener pool is shut down")
        self.pending += 1
        if first:
            self._first.append((work, arg, done))
            self._jobs.put(_WAKE)
        else:
            self._jobs.put((work, arg, done))
        # RocketMQ's pool grows toward consumeThreadMax only when work is waiting.
        if self._workers < self._max and self._jobs.qsize() > 1:
            self._spawn()

    def run(self, work: Work, arg: Any) -> asyncio.Future[Any]:
        """``work(arg)`` on a consume thread; a loop future of its result (for orderly consumption)."""
        fut: asyncio.Future[Any] = self._loop.create_future()

        def call(box: list[Any]) -> None:
            try:
                box.append((True, work(arg)))
            except BaseException as e:  # handed back to the awaiting coroutine
                box.append((False, e))

        def done(box: list[Any]) -> None:
            if fut.done() or not box:
                return
            ok, value = box[0]
            if ok:
                fut.set_result(value)
            else:
                fut.set_exception(value)

        self.submit(call, [], done)
        return fut

    def _worker(self) -> None:
        get = self._jobs.get
        results = self._results
        loop = self._loop
        first = self._first
        while True:
            try:
                job = first.popleft()
            except IndexError:
                job = get()
                if job is _WAKE:
                    continue  # its job may have been taken by a busy worker already
            if job is _STOP:
                return
            work, arg, done = job
            try:
                work(arg)
            except BaseException:  # work() handles listener errors itself; this is a bug guard
                log.exception("consume worker job failed")
            results.append((done, arg))
            if not self._drain_scheduled:
                self._drain_scheduled = True
                try:
                    loop.call_soon_threadsafe(self.drain)
                except RuntimeError:  # the loop is closed: nobody is waiting for results any more
                    return

    def drain(self) -> None:
        """Hand every finished job's result to its ``done`` (on the loop)."""
        # Reset before popping: a result appended after the last pop schedules a new drain.
        self._drain_scheduled = False
        results = self._results
        while results:
            done, arg = results.popleft()
            self.pending -= 1
            try:
                done(arg)
            except Exception:
                log.exception("consume result processing failed")

    async def shutdown(self, wait: float = 0.0) -> None:
        """Stop taking jobs; wait up to ``wait`` seconds for those in flight (their results still
        reach ``done``), then let the threads go."""
        self._closed = True
        # Queued jobs nobody started are abandoned (their messages are re-delivered to the group).
        try:
            while True:
                if self._jobs.get_nowait() is not _WAKE:
                    self.pending -= 1
        except queue.Empty:
            pass
        self.pending -= len(self._first)
        self._first.clear()
        if wait > 0:
            deadline = self._loop.time() + wait
            while self.pending > 0 and self._loop.time() < deadline:
                await asyncio.sleep(0.01)
        for _ in range(self._workers):
            self._jobs.put(_STOP)
        self.drain()


class AsyncListenerPool:
    def __init__(self, name: str, concurrency: int) -> None:
        self._loop = asyncio.get_running_loop()
        self._queue: collections.deque[tuple[AsyncWork, Any, Done]] = collections.deque()
        self._idle: collections.deque[asyncio.Future[None]] = collections.deque()
        # A worker was woken and has not run yet: it will take the next job, so don't wake another.
        self._waking = False
        self._closed = False
        self.pending = 0
        self._tasks = [
            self._loop.create_task(self._worker(), name=f"{name}{i}") for i in range(max(1, concurrency))
        ]

    def submit(self, work: AsyncWork, arg: Any, done: Done) -> None:
        if self._closed:
            raise RuntimeError("listener pool is shut down")
        self.pending += 1
        self._queue.append((work, arg, done))
        if not self._waking:
            self._wake_one()

    def _wake_one(self) -> None:
        # One wake-up at a time, chained: a worker that takes a job while more are queued wakes the
        # next one. A listener that never suspends so drains a burst in one worker (no wasted
        # wake-ups); one that awaits I/O still fans the burst out over the workers.
        idle = self._idle
        while idle:
            waiter = idle.popleft()
            if not waiter.done():
                waiter.set_result(None)
                self._waking = True
                return

    def run(self, work: AsyncWork, arg: Any) -> Awaitable[Any]:
        return work(arg)

    @property
    def waking(self) -> bool:
        """An idle worker was woken for a job and has not run yet."""
        return self._waking

    async def _worker(self) -> None:
        jobs = self._queue
        while True:
            while jobs:
                work, arg, done = jobs.popleft()
                if jobs and not self._waking:
                    self._wake_one()
                try:
                    await work(arg)
                except asyncio.CancelledError:
                    raise
                except BaseException:
                    log.exception("consume worker job failed")
                self.pending -= 1
                try:
                    done(arg)
                except Exception:
                    log.exception("consume result processing failed")
            waiter = self._loop.create_future()
            self._idle.append(waiter)
            try:
                await waiter
            finally:
                self._waking = False

    async def shutdown(self, wait: float = 0.0) -> None:
        self._closed = True
        self.pending -= len(self._queue)
        self._queue.clear()
        if wait > 0:
            deadline = self._loop.time() + wait
            while self.pending and self._loop.time() < deadline:
                await asyncio.sleep(0.01)
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
