"""Blocking facades of the consumers (``rocketq.PushConsumer``, ``rocketq.LitePullConsumer``).

Each wraps the asyncio consumer and runs it on the process's shared background loop
(``rocketq.client._sync``). Sync listeners run on the consume threads, async listeners on that
loop; a listener may call the sync producer API (it is not on the loop thread).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

from rocketq.client._sync import run_sync, track, untrack
from rocketq.client.config import ServiceState
from rocketq.client.consumer.lite_pull import LitePullConsumer as AsyncLitePullConsumer
from rocketq.client.consumer.push import PushConsumer as AsyncPushConsumer
from rocketq.client.consumer.stats import ConsumeRuntimeStats
from rocketq.client.consumer.subscription import MessageSelector
from rocketq.client.consumer.types import ConsumeMessageHook, LitePullConsumerConfig, PushConsumerConfig
from rocketq.codec.bodies import MessageQueue
from rocketq.codec.message import MessageExt

__all__ = ["LitePullConsumer", "PushConsumer"]

_T = TypeVar("_T")


async def _call(fn: Callable[..., _T], *args: Any) -> _T:
    return fn(*args)


def _on_loop(fn: Callable[..., _T], *args: Any) -> _T:
    """Run a (non-async) method of an async consumer on the loop that owns it."""
    return run_sync(_call(fn, *args))


class PushConsumer:
    """``PushConsumer(group, namesrv_addr=..., **fields)``; see ``rocketq.aio.PushConsumer``."""

    def __init__(
        self, consumer_group: str | None = None, namesrv_addr: str | None = None, **fields: Any
    ) -> None:
        self._impl = AsyncPushConsumer(consumer_group, namesrv_addr, **fields)

    def __repr__(self) -> str:
        return repr(self._impl)

    @property
    def aio(self) -> AsyncPushConsumer:
        """The asyncio consumer underneath (lives on the background loop)."""
        return self._impl

    @property
    def config(self) -> PushConsumerConfig:
        return self._impl.config

    @property
    def consumer_group(self) -> str:
        return self._impl.consumer_group

    @property
    def service_state(self) -> ServiceState:
        return self._impl.service_state

    def _call(self, fn: Callable[..., _T], *args: Any) -> _T:
        if self._impl.service_state is ServiceState.RUNNING:
            return _on_loop(fn, *args)
        return fn(*args)

    def subscribe(self, topic: str, sub_expression: str | MessageSelector | None = "*") -> None:
        self._call(self._impl.subscribe, topic, sub_expression)

    def unsubscribe(self, topic: str) -> None:
        self._call(self._impl.unsubscribe, topic)

    def register_listener(self, listener: Any, *, orderly: bool = False) -> None:
        self._impl.register_listener(listener, orderly=orderly)

    def register_consume_message_hook(self, hook: ConsumeMessageHook) -> None:
        self._impl.register_consume_message_hook(hook)

    def start(self) -> None:
        run_sync(self._impl.start())
        track(self._impl, consumer=True)

    def shutdown(self) -> None:
        untrack(self._impl)
        run_sync(self._impl.shutdown())

    def suspend(self) -> None:
        self._call(self._impl.suspend)

    def resume(self) -> None:
        self._call(self._impl.resume)

    def fetch_subscribe_message_queues(self, topic: str) -> list[MessageQueue]:
        return run_sync(self._impl.fetch_subscribe_message_queues(topic))

    def consume_status(self, topic: str) -> ConsumeRuntimeStats:
        return self._impl.consume_status(topic)

    def __enter__(self) -> PushConsumer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()


class LitePullConsumer:
    """``LitePullConsumer(group, namesrv_addr=..., **fields)``; see ``rocketq.aio.LitePullConsumer``."""

    def __init__(
        self, consumer_group: str | None = None, namesrv_addr: str | None = None, **fields: Any
    ) -> None:
        self._impl = AsyncLitePullConsumer(consumer_group, namesrv_addr, **fields)

    def __repr__(self) -> str:
        return repr(self._impl)

    @property
    def aio(self) -> AsyncLitePullConsumer:
        return self._impl

    @property
    def config(self) -> LitePullConsumerConfig:
        return self._impl.config

    @property
    def service_state(self) -> ServiceState:
        return self._impl.service_state

    @property
    def auto_commit(self) -> bool:
        return self._impl.auto_commit

    @auto_commit.setter
    def auto_commit(self, value: bool) -> None:
        self._impl.auto_commit = value

    def _call(self, fn: Callable[..., _T], *args: Any) -> _T:
        if self._impl.service_state is ServiceState.RUNNING:
            return _on_loop(fn, *args)
        return fn(*args)

    def subscribe(self, topic: str, sub_expression: str | MessageSelector | None = "*") -> None:
        self._call(self._impl.subscribe, topic, sub_expression)

    def unsubscribe(self, topic: str) -> None:
        self._call(self._impl.unsubscribe, topic)

    def assign(self, message_queues: Iterable[MessageQueue]) -> None:
        self._call(self._impl.assign, list(message_queues))

    def assignment(self) -> set[MessageQueue]:
        return self._call(self._impl.assignment)

    def pause(self, message_queues: Iterable[MessageQueue]) -> None:
        self._call(self._impl.pause, list(message_queues))

    def resume(self, message_queues: Iterable[MessageQueue]) -> None:
        self._call(self._impl.resume, list(message_queues))

    def start(self) -> None:
        run_sync(self._impl.start())
        track(self._impl, consumer=True)

    def shutdown(self) -> None:
        untrack(self._impl)
        run_sync(self._impl.shutdown())

    def poll(self, timeout: float | None = None) -> list[MessageExt]:
        return run_sync(self._impl.poll(timeout))

    def seek(self, mq: MessageQueue, offset: int) -> None:
        run_sync(self._impl.seek(mq, offset))

    def seek_to_begin(self, mq: MessageQueue) -> None:
        run_sync(self._impl.seek_to_begin(mq))

    def seek_to_end(self, mq: MessageQueue) -> None:
        run_sync(self._impl.seek_to_end(mq))

    def offset_for_timestamp(self, mq: MessageQueue, timestamp: int) -> int:
        return run_sync(self._impl.offset_for_timestamp(mq, timestamp))

    def commit_sync(self, offsets: Mapping[MessageQueue, int] | None = None, persist: bool = True) -> None:
        run_sync(self._impl.commit_sync(offsets, persist))

    def commit(self, message_queues: Iterable[MessageQueue], persist: bool = True) -> None:
        run_sync(self._impl.commit(list(message_queues), persist))

    def committed(self, mq: MessageQueue) -> int:
        return run_sync(self._impl.committed(mq))

    def fetch_message_queues(self, topic: str) -> list[MessageQueue]:
        return run_sync(self._impl.fetch_message_queues(topic))

    def __enter__(self) -> LitePullConsumer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()
