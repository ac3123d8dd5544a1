"""PullMessageService: keeps one pull loop running per owned queue.

Java queues PullRequests to a single thread that re-queues each one after its callback; on asyncio
the same thing is one long-lived task per queue that pulls, hands the messages over and pulls
again. ``pull_once(request)`` (the consumer's pullMessage) does one round and says when to go
again: 0 = at once, a number of seconds = later (flow control, back-off), None = stop (the queue
was dropped). Whatever goes wrong inside a round, the loop survives it and backs off.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from rocketq.client.consumer.process_queue import ProcessQueue
from rocketq.codec.bodies import MessageQueue

__all__ = ["PullMessageService", "PullRequest"]

log = logging.getLogger("rocketq.client")

# After an unexpected error in a pull round (a bug guard; expected failures choose their own delay).
UNEXPECTED_ERROR_DELAY = 1.0


class PullRequest:
    """One queue's pull state: where to pull next and the cache it fills. Loop-confined, mutable."""

    __slots__ = ("consumer_group", "message_queue", "next_offset", "previously_locked", "process_queue")

    def __init__(
        self, consumer_group: str, message_queue: MessageQueue, process_queue: ProcessQueue, next_offset: int
    ) -> None:
        self.consumer_group = consumer_group
        self.message_queue = message_queue
        self.process_queue = process_queue
        self.next_offset = next_offset
        # Orderly: the first pull after the broker lock was taken re-reads the committed offset.
        self.previously_locked = False

    def __repr__(self) -> str:
        return (
            f"PullRequest [consumerGroup={self.consumer_group}, messageQueue={self.message_queue}, "
            f"nextOffset={self.next_offset}]"
        )


class PullMessageService:
    def __init__(self, pull_once: Callable[[PullRequest], Awaitable[float | None]], name: str = "") -> None:
        self._pull_once = pull_once
        self._name = name
        self._tasks: dict[PullRequest, asyncio.Task[None]] = {}
        self._stopped = False

    def execute_pull_request_immediately(self, request: PullRequest) -> None:
        self.execute_pull_request_later(request, 0.0)

    def execute_pull_request_later(self, request: PullRequest, delay: float) -> None:
        if self._stopped:
            # A pull answered after stop() asks for its next round: expected at every ordinary
            # shutdown. Java says it at WARN into its own client log file; here it would reach the
            # application's stderr each time, so DEBUG.
            log.debug("PullMessageServiceScheduledThread has shutdown, drop %s", request)
            return
        task = self._tasks.get(request)
        if task is not None and not task.done():
            return  # already looping
        self._tasks[request] = asyncio.get_running_loop().create_task(
            self._run(request, delay),
            name=f"PullMessageService-{self._name}-{request.message_queue.queue_id}",
        )

    @property
    def active(self) -> int:
        return sum(1 for t in self._tasks.values() if not t.done())

    async def _run(self, request: PullRequest, delay: float | None) -> None:
        pull_once = self._pull_once
        try:
            while delay is not None and not self._stopped:
                if delay > 0:
                    await asyncio.sleep(delay)
                try:
                    delay = await pull_once(request)
                except asyncio.CancelledError:
                    raise
                except Exception:
                    log.exception("pull round of %s failed", request)
                    delay = UNEXPECTED_ERROR_DELAY
        finally:
            if self._tasks.get(request) is asyncio.current_task():
                del self._tasks[request]

    async def shutdown(self) -> None:
        self._stopped = True
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._tasks.clear()
