"""The blocking SimpleConsumer (``rocketq.SimpleConsumer``): the asyncio one run on the process's
shared background loop (``rocketq.client._sync``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rocketq.client._sync import run_sync, track, untrack
from rocketq.client.consumer.simple import Duration, MessageView
from rocketq.client.consumer.simple import SimpleConsumer as AsyncSimpleConsumer
from rocketq.client.consumer.subscription import MessageSelector

__all__ = ["SimpleConsumer"]


class SimpleConsumer:
    """The blocking SimpleConsumer; see ``rocketq.aio.SimpleConsumer``."""

    def __init__(
        self, consumer_group: str | None = None, namesrv_addr: str | None = None, **options: Any
    ) -> None:
        self._impl = AsyncSimpleConsumer(consumer_group, namesrv_addr, **options)

    def __repr__(self) -> str:
        return repr(self._impl)

    @property
    def aio(self) -> AsyncSimpleConsumer:
        return self._impl

    @property
    def consumer_group(self) -> str:
        return self._impl.consumer_group

    def subscribe(self, topic: str, expression: str | MessageSelector = "*") -> None:
        self._impl.subscribe(topic, expression)

    def start(self) -> None:
        run_sync(self._impl.start())
        track(self._impl, consumer=True)

    def shutdown(self) -> None:
        untrack(self._impl)
        run_sync(self._impl.shutdown())

    def __enter__(self) -> SimpleConsumer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    def receive(self, max_messages: int = 16, invisible_duration: Duration = 30.0) -> list[MessageView]:
        return run_sync(self._impl.receive(max_messages, invisible_duration))

    def ack(self, message: MessageView) -> None:
        run_sync(self._impl.ack(message))

    def ack_many(self, messages: Sequence[MessageView]) -> None:
        run_sync(self._impl.ack_many(messages))

    def change_invisible_duration(self, message: MessageView, duration: Duration) -> None:
        run_sync(self._impl.change_invisible_duration(message, duration))
