"""The store's background services on the event loop: flushing, group commit, index building,
clean-up. Each one owns one task; blocking syscalls (fdatasync) go to worker threads so the loop
only ever does memory copies.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Protocol

from rocketq.store.commitlog import CommitLog
from rocketq.store.config import MessageStoreConfig
from rocketq.store.index import IndexService

log = logging.getLogger("rocketq.store")


def _resolve(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


class ServiceTask:
    """A named periodic task (RocketMQ's ServiceThread): run `step` every `interval_ms`.

    A step that returns False found nothing to do; with an `idle_interval_ms` the task then waits
    that long instead, so an idle store does not wake its loop every few milliseconds."""

    def __init__(
        self, name: str, interval_ms: Callable[[], int], step: Callable[[], Awaitable[bool | None]],
        idle_interval_ms: Callable[[], int] | None = None,
    ) -> None:
        self.name = name
        self._interval_ms = interval_ms
        self._idle_interval_ms = idle_interval_ms or interval_ms
        self._step = step
        self._task: asyncio.Task[None] | None = None
        self._woken = False
        self._sleeper: asyncio.Future[None] | None = None
        self._stopping = False
        self._failures = 0  # rounds failed in a row
        self._last_error = ""

    def start(self) -> None:
        self._stopping = False
        self._task = asyncio.get_running_loop().create_task(self._run(), name=self.name)

    def wakeup(self) -> None:
        self._woken = True
        sleeper = self._sleeper
        if sleeper is not None and not sleeper.done():
            sleeper.set_result(None)

    async def _sleep(self, seconds: float) -> None:
        """Until the interval ends or wakeup(): a future and one timer, which costs the loop a
        single turn (`wait_for` on an Event costs a task and several turns per round)."""
        if not self._woken:
            loop = asyncio.get_running_loop()
            sleeper = self._sleeper = loop.create_future()
            timer = loop.call_later(seconds, _resolve, sleeper)
            try:
                await sleeper
            finally:
                timer.cancel()
                self._sleeper = None
        self._woken = False

    @property
    def interval_ms(self) -> int:
        """The period the next wait uses (read again before every wait)."""
        return self._interval_ms()

    async def _run(self) -> None:
        log.info("%s service started", self.name)
        busy = True
        while True:
            await self._sleep((self._interval_ms() if busy else self._idle_interval_ms()) / 1000)
            if self._stopping:
                return
            try:
                busy = await self._step() is not False
            except asyncio.CancelledError:
                raise
            except Exception as e:
                self._failed(e)
            else:
                if self._failures:
                    log.info("%s service recovered after %d failed rounds", self.name, self._failures)
                    self._failures = 0
                    self._last_error = ""

    def _failed(self, e: Exception) -> None:
        """Log a failure once while it repeats (a full disk fails every round until space
        returns), with its traceback; a different failure is logged again."""
        self._failures += 1
        text = f"{type(e).__name__}: {e}"
        if text == self._last_error:
            log.debug("%s service step failed again: %s", self.name, text)
            return
        self._last_error = text
        log.error("%s service step failed (logged once while it repeats)", self.name, exc_info=e)

    async def stop(self) -> None:
        """Let a running step finish (a flush in a worker thread cannot be cancelled), then end."""
        if self._task is None:
            return
        self._stopping = True
        self.wakeup()
        try:
            await self._task
        except asyncio.CancelledError:
            pass
        self._task = None
        log.info("%s service end", self.name)


class GroupCommitService:
    """SYNC_FLUSH: puts wait on futures; one fdatasync (in a worker thread) completes every
    waiting put it covers.

    A round starts once the puts queued in the current loop iteration are in (so concurrent
    puts share it), and a second may start while one is still in the disk: puts that arrive
    during a flush would otherwise wait for it to end before their own could begin, which
    nearly doubles their wait. A waiter's syncFlushTimeout is kept here, by one timer for the
    earliest deadline, rather than by a `wait_for` per put: a run of puts answered together
    costs one future and no task."""

    MAX_FLUSHES = 2

    def __init__(self, commit_log: CommitLog) -> None:
        self.commit_log = commit_log  # its config is the store's, replaced by a runtime update
        # (commit-log offset that must be durable, future, deadline on the loop clock)
        self._waiting: list[tuple[int, asyncio.Future[bool], float]] = []
        self._flushing = 0  # flushes in worker threads right now
        self._covered = 0  # the commit log's end when the newest of them started
        self._scheduled = False
        self._running = False
        self._timer: asyncio.TimerHandle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._idle: asyncio.Future[None] | None = None

    @property
    def running(self) -> bool:
        return self._running

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._running = True
        log.info("GroupCommitService started")

    def request(self, next_offset: int) -> asyncio.Future[bool]:
        """A future that turns True once the commit log is durable up to `next_offset`, or False
        at the syncFlushTimeout (the data stays stored; the put answers FLUSH_DISK_TIMEOUT)."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[bool] = loop.create_future()
        deadline = loop.time() + self.commit_log.config.sync_flush_timeout / 1000
        self._waiting.append((next_offset, fut, deadline))
        if self._timer is None or deadline < self._timer.when():
            # earlier than the pending expiry only after syncFlushTimeout was lowered at runtime
            if self._timer is not None:
                self._timer.cancel()
            self._timer = loop.call_at(deadline, self._expire)
        if not self._scheduled:
            self._scheduled = True
            loop.call_soon(self._start_flush)
        return fut

    def _start_flush(self) -> None:
        self._scheduled = False
        if not self._running or not self._waiting or self._flushing >= self.MAX_FLUSHES:
            return  # a flush that ends starts the next round
        cl = self.commit_log
        # Only a flush still in the disk can cover a waiter: once none is, whatever still waits
        # gets a flush of its own (trusting a finished flush's start point here lost wake-ups,
        # leaving puts to hit syncFlushTimeout with their data already durable).
        if self._flushing and max(item[0] for item in self._waiting) <= self._covered:
            return  # the flush in progress covers every waiter
        self._covered = cl.max_offset
        self._flushing += 1
        assert self._loop is not None
        self._loop.run_in_executor(None, cl.flush, 0).add_done_callback(self._flushed)

    def _flushed(self, done: asyncio.Future[int]) -> None:
        self._flushing -= 1
        try:
            flushed = done.result()
        except asyncio.CancelledError:
            flushed = self.commit_log.flushed_offset
        except Exception:
            log.exception("group commit flush failed")
            flushed = self.commit_log.flushed_offset
            self._covered = min(self._covered, flushed)  # nothing new is covered: try again
        keep = []
        for item in self._waiting:
            fut = item[1]
            if fut.done():
                continue
            if flushed >= item[0]:
                fut.set_result(True)
            else:  # appended after the flush began: a later round takes it
                keep.append(item)
        self._waiting = keep
        if keep:
            self._start_flush()
        elif self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if not self._flushing and self._idle is not None and not self._idle.done():
            self._idle.set_result(None)

    def _expire(self) -> None:
        self._timer = None
        assert self._loop is not None
        now = self._loop.time()
        keep = []
        for item in self._waiting:
            fut = item[1]
            if fut.done():
                continue
            if item[2] <= now:
                fut.set_result(False)
            else:
                keep.append(item)
        self._waiting = keep
        if keep:
            self._timer = self._loop.call_at(min(item[2] for item in keep), self._expire)

    async def stop(self) -> None:
        """Let flushes in progress end, flush once more and answer every waiter."""
        if not self._running:
            return
        self._running = False
        if self._flushing:
            assert self._loop is not None
            self._idle = self._loop.create_future()
            await self._idle
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        # whatever still waits is flushed by shutdown itself
        flushed = self.commit_log.flush(0)
        for target, fut, _ in self._waiting:
            if not fut.done():
                fut.set_result(flushed >= target)
        self._waiting = []


class ServicedStore(Protocol):
    """What the periodic services call on the store (MessageStore)."""

    config: MessageStoreConfig
    commit_log: CommitLog
    index: IndexService | None

    def flush_derived(self, least_pages: int = 0) -> None: ...

    def drain_index(self) -> int: ...

    def clean_expired_files(self, now: int | None = None, disk_ratio: float | None = None,
                            manual: bool = False) -> int: ...


def build_services(store: ServicedStore) -> list[ServiceTask]:
    # Every value is read from store.config when used: a runtime update (apply_config) replaces it.
    cl = store.commit_log
    last_thorough = [time.monotonic()]

    async def flush_commit_log() -> bool:
        if cl.flushed_offset >= cl.max_offset:
            return False  # nothing appended since the last flush: no trip to a worker thread
        now = time.monotonic()
        thorough = (now - last_thorough[0]) * 1000 >= store.config.flush_commit_log_thorough_interval
        if thorough:
            last_thorough[0] = now
        least = 0 if thorough else store.config.flush_commit_log_least_pages
        await asyncio.to_thread(cl.flush, least)
        return True

    last_cq_thorough = [0.0]  # the first round is complete: what recovery rebuilt goes to disk
    # (log end, log flushed offset) when the last complete derived flush began. The flushed
    # offset is part of it because the checkpoint takes the commit log's flushed state: a round
    # that ran before the log's own flush caught up is not the last one needed.
    derived_clean_at = [(-1, -1)]

    async def flush_consume_queues() -> bool:
        state = (cl.max_offset, cl.flushed_offset)
        if state == derived_clean_at[0]:
            return False  # nothing appended or flushed since everything derived was flushed
        now = time.monotonic()
        thorough = (now - last_cq_thorough[0]) * 1000 >= store.config.flush_consume_queue_thorough_interval
        if thorough:
            last_cq_thorough[0] = now
        least = 0 if thorough else store.config.flush_consume_queue_least_pages
        await asyncio.to_thread(store.flush_derived, least)
        if thorough:
            derived_clean_at[0] = state
        return True

    async def drain_index() -> bool:
        return store.drain_index() > 0

    async def clean() -> None:
        store.clean_expired_files()

    services = []
    if not store.config.sync_flush:  # SYNC_FLUSH: the GroupCommitService flushes instead
        services.append(ServiceTask("FlushRealTimeService", lambda: store.config.flush_interval_commit_log,
                                    flush_commit_log))
    services.append(ServiceTask("FlushConsumeQueueService", lambda: store.config.flush_interval_consume_queue,
                                flush_consume_queues))
    if store.index is not None:
        # every 10 ms under load; idle, once a second (a query drains what is pending first)
        services.append(ServiceTask("IndexDrainService", lambda: 10, drain_index, lambda: 1000))
    services.append(ServiceTask("CleanCommitLogService", lambda: store.config.clean_resource_interval, clean))
    return services
