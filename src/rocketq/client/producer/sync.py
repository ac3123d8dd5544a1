"""The blocking producer (``rocketq.Producer``): the asyncio producer driven on the shared
background loop (``rocketq.client._sync``), with the same names and arguments.

::

    p = Producer("pg", namesrv_addr="127.0.0.1:9876"); p.start()
    r = p.send(Message("T", b"body", tags="A"))
    fut = p.send_async(Message("T", b"x"), callback=print)   # concurrent.futures.Future
    reply = p.request(Message("T", b"ping"), timeout=3)       # request-reply (a MessageExt)
    p.shutdown()

Callbacks run on the background loop thread: keep them short and never call a blocking rocketq
method from one (use the Future instead).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

from rocketq.client import _sync
from rocketq.client.config import ServiceState
from rocketq.client.message import Message, MessageExt, MessageQueue, SendResult
from rocketq.client.producer.config import ProducerConfig
from rocketq.client.producer.producer import Producer as AsyncProducer
from rocketq.client.producer.producer import SendCallback
from rocketq.client.producer.request import RequestCallback
from rocketq.client.producer.selector import SelectorLike
from rocketq.client.producer.validators import check_batch

__all__ = ["Producer"]

# Extra wait of a blocking call beyond the send timeout: the send itself enforces the timeout.
_MARGIN = 5.0


class Producer:
    """Blocking twin of ``rocketq.aio.Producer``; see its methods for the semantics."""

    def __init__(
        self,
        group: str | None = None,
        namesrv_addr: str | None = None,
        *,
        config: ProducerConfig | None = None,
        **fields: Any,
    ) -> None:
        self._impl = AsyncProducer(group, namesrv_addr, config=config, **fields)

    def __repr__(self) -> str:
        return f"Producer({self.group!r}, {self.service_state.name}, sync)"

    @property
    def aio(self) -> AsyncProducer:
        """The asyncio producer underneath (lives on the background loop)."""
        return self._impl

    @property
    def config(self) -> ProducerConfig:
        return self._impl.config

    @property
    def group(self) -> str:
        return self._impl.group

    @property
    def service_state(self) -> ServiceState:
        return self._impl.service_state

    def _wait(self, timeout: float | None) -> float:
        return (self._impl.config.send_msg_timeout / 1000.0 if timeout is None else timeout) + _MARGIN

    def start(self) -> None:
        _sync.run_sync(self._impl.start())
        _sync.track(self._impl, consumer=False)

    def shutdown(self) -> None:
        _sync.untrack(self._impl)
        _sync.run_sync(self._impl.shutdown())

    def __enter__(self) -> Producer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    def send(
        self,
        msg: Message,
        timeout: float | None = None,
        selector: SelectorLike | None = None,
        arg: Any = None,
        queue: MessageQueue | None = None,
    ) -> SendResult:
        self._impl.check(msg)
        return _sync.run_sync(self._impl.send(msg, timeout, selector, arg, queue), self._wait(timeout))

    def send_async(
        self,
        msg: Message,
        callback: SendCallback | None = None,
        *,
        timeout: float | None = None,
        selector: SelectorLike | None = None,
        arg: Any = None,
        queue: MessageQueue | None = None,
    ) -> concurrent.futures.Future[SendResult]:
        """Start a send; returns a concurrent Future (``callback(result_or_exc)`` runs too)."""
        self._impl.check(msg)
        result: concurrent.futures.Future[SendResult] = concurrent.futures.Future()
        _sync.call_soon(self._start_async, msg, callback, result, timeout, selector, arg, queue)
        return result

    def _start_async(
        self,
        msg: Message,
        callback: SendCallback | None,
        result: concurrent.futures.Future[SendResult],
        timeout: float | None,
        selector: SelectorLike | None,
        arg: Any,
        queue: MessageQueue | None,
    ) -> None:
        _chain(result, callback, partial(
            self._impl.send_async, msg, callback, timeout=timeout, selector=selector, arg=arg, queue=queue))

    def send_oneway(
        self,
        msg: Message,
        selector: SelectorLike | None = None,
        arg: Any = None,
        queue: MessageQueue | None = None,
    ) -> None:
        self._impl.check(msg)
        _sync.run_sync(self._impl.send_oneway(msg, selector, arg, queue), self._wait(None))

    def send_batch(
        self, msgs: Sequence[Message], timeout: float | None = None, queue: MessageQueue | None = None
    ) -> SendResult:
        msgs = list(msgs)
        check_batch(msgs, self._impl.config.max_message_size)
        return _sync.run_sync(self._impl.send_batch(msgs, timeout, queue), self._wait(timeout))

    def recall(self, topic: str, recall_handle: str, timeout: float | None = None) -> str:
        """Cancel a pending timer message by its recall handle; returns its message id."""
        return _sync.run_sync(self._impl.recall(topic, recall_handle, timeout), self._wait(timeout))

    def request(self, msg: Message, timeout: float | None = None) -> MessageExt:
        """Send ``msg`` as a request and return its reply (``RequestTimeout`` after ``timeout`` s)."""
        self._impl.check(msg)
        return _sync.run_sync(self._impl.request(msg, timeout), self._wait(timeout))

    def request_async(
        self, msg: Message, callback: RequestCallback | None = None, *, timeout: float | None = None
    ) -> concurrent.futures.Future[MessageExt]:
        """Start a request; returns a concurrent Future of the reply (``callback(reply_or_exc)``
        runs too, on the background loop)."""
        self._impl.check(msg)
        result: concurrent.futures.Future[MessageExt] = concurrent.futures.Future()
        _sync.call_soon(self._start_request, msg, callback, result, timeout)
        return result

    def _start_request(self, msg: Message, callback: RequestCallback | None,
                       result: concurrent.futures.Future[MessageExt], timeout: float | None) -> None:
        _chain(result, callback, partial(self._impl.request_async, msg, callback, timeout=timeout))

    def fetch_publish_message_queues(self, topic: str) -> list[MessageQueue]:
        return _sync.run_sync(self._impl.fetch_publish_message_queues(topic), self._wait(None))


def _chain(result: concurrent.futures.Future[Any], callback: Callable[[Any], object] | None,
           start: Callable[[], asyncio.Future[Any]]) -> None:
    """On the loop thread: ``start()`` the producer's call and copy its outcome into ``result``
    (no Task per message, just the producer's own Future chained)."""
    if not result.set_running_or_notify_cancel():
        return
    try:
        fut = start()
    except BaseException as e:
        result.set_exception(e)
        if callback is not None:
            callback(e)
        return
    fut.add_done_callback(partial(_transfer, result))


def _transfer(result: concurrent.futures.Future[Any], done: Any) -> None:
    """Copy the outcome of a loop Future into the caller's concurrent Future."""
    if done.cancelled():
        result.cancel()
    elif done.exception() is not None:
        result.set_exception(done.exception())
    else:
        result.set_result(done.result())
