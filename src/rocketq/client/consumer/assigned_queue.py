"""The lite pull consumer's per-queue state (RocketMQ's AssignedMessageQueue / MessageQueueState)."""

from __future__ import annotations

import asyncio

from rocketq.client.consumer.process_queue import ProcessQueue
from rocketq.codec.bodies import MessageQueue
from rocketq.codec.message import MessageExt

__all__ = ["AssignedQueue", "PolledBatch", "settle"]


class AssignedQueue:
    """One assigned queue: its cache, where the next pull reads, what poll() has handed out.

    Offsets are -1 until known. Loop-confined and mutable on purpose (it is the pull loop's state).
    """

    __slots__ = (
        "consume_offset",
        "failures",
        "generation",
        "message_queue",
        "paused",
        "process_queue",
        "pull_offset",
        "seek_offset",
        "task",
    )

    def __init__(self, mq: MessageQueue, pq: ProcessQueue, pull_offset: int = -1) -> None:
        self.message_queue = mq
        self.process_queue = pq
        self.pull_offset = pull_offset
        self.consume_offset = -1
        self.seek_offset = -1
        self.paused = False
        # Bumped by every seek: a pull answer from before the seek is thrown away.
        self.generation = 0
        self.task: asyncio.Task[None] | None = None
        self.failures = 0  # pulls failed in a row


class PolledBatch:
    """One pull's messages waiting for poll(), tagged with the queue's seek generation."""

    __slots__ = ("generation", "msgs", "state")

    def __init__(self, msgs: list[MessageExt], state: AssignedQueue) -> None:
        self.msgs = msgs
        self.state = state
        self.generation = state.generation


def settle(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)
