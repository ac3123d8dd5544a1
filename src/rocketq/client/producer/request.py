"""Request-reply (RocketMQ 4.6+): a producer sends a request and waits for one reply message.

The requester puts CORRELATION_ID (a fresh UUID), REPLY_TO_CLIENT (its client id) and TTL (the
timeout in ms) on the message and sends it as any message. A replier consumes it and sends
``create_reply_message(request, body)``: a message to ``<cluster>_REPLY_TOPIC`` with MSG_TYPE=reply,
which the producer sends with SEND_REPLY_MESSAGE_V2. The broker pushes that to the requester's
connection (PUSH_REPLY_MESSAGE_TO_CLIENT), and ``complete_request`` hands it to the waiting future.

Waiting requests live in one table per process keyed by correlation id (RocketMQ's
RequestFutureHolder); each entry leaves it when its reply arrives, its send fails, or its own
timer fires, so a request without a reply leaves nothing behind.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Final

from rocketq.client.message import Message, MessageExt, SendResult
from rocketq.codec.properties import REPLY_MESSAGE_FLAG, MessageConst, reply_topic
from rocketq.errors import CreateReplyMessageError, RequestTimeout

__all__ = ["REQUEST_FUTURES", "PendingRequest", "RequestCallback", "complete_request", "create_reply_message"]

log = logging.getLogger("rocketq.client")

CORRELATION_ID: Final = MessageConst.PROPERTY_CORRELATION_ID
REPLY_TO_CLIENT: Final = MessageConst.PROPERTY_MESSAGE_REPLY_TO_CLIENT
TTL: Final = MessageConst.PROPERTY_MESSAGE_TTL
MSG_TYPE: Final = MessageConst.PROPERTY_MESSAGE_TYPE
CLUSTER: Final = MessageConst.PROPERTY_CLUSTER

# Called with the reply, or with the exception the request ended with (RocketMQ's RequestCallback
# onSuccess / onException in one).
RequestCallback = Callable[[MessageExt | BaseException], object]


def create_reply_message(request: Message | MessageExt, body: bytes) -> Message:
    """The reply to a request message a consumer received, for ``producer.send``.

    Raises ``CreateReplyMessageError`` when ``request`` carries no CLUSTER property (the broker
    adds it to every stored message, so a consumed request always has it).
    """
    if request is None:
        raise CreateReplyMessageError("create reply message fail, requestMessage cannot be null.")
    props = request.properties
    cluster = props.get(CLUSTER)
    if cluster is None:
        raise CreateReplyMessageError(
            f"create reply message fail, requestMessage error, property[{CLUSTER}] is null.")
    reply = {MSG_TYPE: REPLY_MESSAGE_FLAG}
    for key in (CORRELATION_ID, REPLY_TO_CLIENT, TTL):
        value = props.get(key)
        if value is not None:
            reply[key] = value
    return Message(reply_topic(cluster), body, properties=reply)


class PendingRequest:
    """One request waiting for its reply (RocketMQ's RequestResponseFuture)."""

    __slots__ = ("correlation_id", "future", "send_ok", "timeout", "timer", "topic")

    def __init__(self, correlation_id: str, future: asyncio.Future[MessageExt], topic: str,
                 timeout: float) -> None:
        self.correlation_id = correlation_id
        self.future = future
        self.topic = topic
        self.timeout = timeout
        self.send_ok = False
        self.timer: asyncio.TimerHandle | None = None

    def start(self) -> None:
        """Enter the table and arm the timer; the entry leaves when the future is done."""
        REQUEST_FUTURES[self.correlation_id] = self
        loop = self.future.get_loop()
        self.timer = loop.call_later(self.timeout, self._expire)
        self.future.add_done_callback(self._done)

    def _done(self, _: asyncio.Future[MessageExt]) -> None:
        if REQUEST_FUTURES.get(self.correlation_id) is self:
            del REQUEST_FUTURES[self.correlation_id]
        if self.timer is not None:
            self.timer.cancel()

    def _expire(self) -> None:
        if self.future.done():
            return
        ms = round(self.timeout * 1000)
        if self.send_ok:
            text = f"send request message to <{self.topic}> OK, but wait reply message timeout, {ms} ms."
        else:
            text = f"send request message to <{self.topic}> timeout, no reply within {ms} ms."
        self.future.set_exception(RequestTimeout(text, topic=self.topic))

    def on_sent(self, sent: asyncio.Future[SendResult]) -> None:
        """The request's send ended: a failed send fails the request at once."""
        if sent.cancelled():
            if not self.future.done():
                self.future.cancel()
            return
        exc = sent.exception()
        if exc is None:
            self.send_ok = True
        elif not self.future.done():
            self.future.set_exception(exc)


REQUEST_FUTURES: Final[dict[str, PendingRequest]] = {}


def complete_request(reply: MessageExt) -> bool:
    """Hand a pushed reply to the request waiting for it; False when none waits (late or unknown)."""
    correlation_id = reply.properties.get(CORRELATION_ID)
    pending = REQUEST_FUTURES.pop(correlation_id, None) if correlation_id is not None else None
    if pending is None:
        log.warning("receive reply message, but not matched any request, CorrelationId: %s , "
                    "reply from host: %s:%s", correlation_id, *reply.born_host)
        return False
    fut = pending.future
    loop = fut.get_loop()
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is loop:
        _set_reply(fut, reply)
    else:  # a requester on another loop than the connection the reply came in on
        loop.call_soon_threadsafe(_set_reply, fut, reply)
    return True


def _set_reply(fut: asyncio.Future[MessageExt], reply: MessageExt) -> None:
    if not fut.done():
        fut.set_result(reply)
