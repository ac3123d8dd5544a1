"""The store's background services on the event loop: flushing, group commit, index building,
clean-up. Each one owns one task; blocking syscalls (fdatasync) go to worker threads so the loop
only ever does memory copies.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rocketq.store.message_store import MessageStore

log = logging.getLogger("rocketq.store")


class ServiceTask:
    """A named periodic task (RocketMQ's ServiceThread): run `step` every `interval_ms`."""

    def __init__(
        self, name: str, interval_ms: Callable[[], int], step: Callable[[], Awaitable[None]]
    ) -> None:
        self.name = name
        self._interval_ms = interval_ms
        self._step = step
        self._task: asyncio.Task[None] | None = None
        self._wakeup = asyncio.Event()
        self._stopping = False

    def start(self) -> None:
        self._stopping = False
        self._task = asyncio.get_running_loop().create_task(self._run(), name=self.name)

    def wakeup(self) -> None:
        self._wakeup.set()

    async def _run(self) -> None:
        log.info("%s service started", self.name)
        while True:
            try:
                await asyncio.wait_for(self._wakeup.wait(), self._interval_ms() / 1000)
            except TimeoutError:
                pass
            self._wakeup.clear()
            if self._stopping:
                return
            try:
                await self._step()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("%s service step failed", self.name)

    async def stop(self) -> None:
        """Let a running step finish (a flush in a worker thread cannot be cancelled), then end."""
        if self._task is None:
            return
        self._stopping = True
        self._wakeup.set()
        try:
            await self._task
        except asyncio.CancelledError:
            pass
        self._task = None
        log.info("%s service end", self.name)


class GroupCommitService:
    """SYNC_FLUSH: puts wait on futures; one fdatasync (in a thread) completes every put that
    arrived before it started."""

    def __init__(self, store: MessageStore) -> None:
        self.store = store
        self._requests: list[tuple[int, asyncio.Future[bool]]] = []
        self._wakeup = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    @property
    def running(self) -> bool:
        return self._task is not None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="GroupCommitService")

    def request(self, next_offset: int) -> asyncio.Future[bool]:
        fut: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._requests.append((next_offset, fut))
        self._wakeup.set()
        return fut

    async def _run(self) -> None:
        log.info("GroupCommitService started")
        cl = self.store.commit_log
        while True:
            await self._wakeup.wait()
            self._wakeup.clear()
            requests, self._requests = self._requests, []
            if not requests:
                continue
            try:
                flushed = await asyncio.to_thread(cl.flush, 0)
            except asyncio.CancelledError:
                self._requests = requests + self._requests
                raise
            except Exception:
                log.exception("group commit flush failed")
                flushed = cl.flushed_offset
            for target, fut in requests:
                if fut.done():
                    continue
                if flushed >= target:
                    fut.set_result(True)
                else:  # appended after the flush began: the next round takes it
                    self._requests.append((target, fut))
            if self._requests:
                self._wakeup.set()

    async def stop(self) -> None:
        if self._task is None:
            return
        self._task.cancel()
        try:
            await self._task
        except asyncio.CancelledError:
            pass
        self._task = None
        # whatever still waits is flushed by shutdown itself
        flushed = self.store.commit_log.flush(0)
        for target, fut in self._requests:
            if not fut.done():
                fut.set_result(flushed >= target)
        self._requests = []


def build_services(store: MessageStore) -> list[ServiceTask]:
    cfg = store.config
    cl = store.commit_log
    last_thorough = [time.monotonic()]

    async def flush_commit_log() -> None:
        now = time.monotonic()
        thorough = (now - last_thorough[0]) * 1000 >= cfg.flush_commit_log_thorough_interval
        if thorough:
            last_thorough[0] = now
        least = 0 if thorough else cfg.flush_commit_log_least_pages
        await asyncio.to_thread(cl.flush, least)

    last_cq_thorough = [time.monotonic()]

    async def flush_consume_queues() -> None:
        now = time.monotonic()
        thorough = (now - last_cq_thorough[0]) * 1000 >= cfg.flush_consume_queue_thorough_interval
        if thorough:
            last_cq_thorough[0] = now
        await asyncio.to_thread(store.flush_derived, 0 if thorough else cfg.flush_consume_queue_least_pages)

    async def drain_index() -> None:
        store.drain_index()

    async def clean() -> None:
        store.clean_expired_files()

    services = []
    if not cfg.sync_flush:
        services.append(
            ServiceTask("FlushRealTimeService", lambda: cfg.flush_interval_commit_log, flush_commit_log)
        )
    services.append(ServiceTask("FlushConsumeQueueService", lambda: cfg.flush_interval_consume_queue,
                                flush_consume_queues))
    if store.index is not None:
        services.append(ServiceTask("IndexDrainService", lambda: 10, drain_index))
    services.append(ServiceTask("CleanCommitLogService", lambda: cfg.clean_resource_interval, clean))
    return services
