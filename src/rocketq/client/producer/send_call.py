"""One send, from queue selection to SendResult, across retries (DefaultMQProducerImpl.sendDefaultImpl).

Driven by callbacks rather than a coroutine: when the route and the connection are known (every
send after the first), an attempt is a synchronous queue pick, one frame written and one done-
callback on the response future; no Task per message, so thousands of sends can be in flight on
one connection. Only the slow steps (fetching a route, connecting) run as small coroutines, and
their completion re-enters the state machine.

Retries: a failed attempt whose error is ``retriable`` (a transport failure, or a broker answer
whose code Java's producer retries on: see ``rocketq.errors``) moves to a queue of another broker,
within the send timeout, which covers all attempts together.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Final

from rocketq.client.api import process_send_response
from rocketq.client.config import ServiceState
from rocketq.client.message import Message, MessageQueue, SendResult, SendStatus
from rocketq.client.producer.kernel import PreparedSend
from rocketq.client.producer.selector import SelectorLike, select_queue
from rocketq.client.route import TopicPublishInfo
from rocketq.codec.codes import ResponseCode
from rocketq.codec.command import RemotingCommand
from rocketq.errors import (
    BrokerNotFound,
    InvalidArgument,
    ProtocolError,
    RemotingError,
    RemotingTimeoutError,
    RocketQError,
    ServerError,
    ServiceStateError,
)
from rocketq.remoting import Channel

if TYPE_CHECKING:
    from rocketq.client.producer.producer import Producer

__all__ = ["SendCall", "SendTarget", "fixed_queue"]

log = logging.getLogger("rocketq.client")

_RUNNING: Final = ServiceState.RUNNING
_SEND_OK: Final = SendStatus.SEND_OK
_SERVICE_NOT_AVAILABLE: Final = int(ResponseCode.SERVICE_NOT_AVAILABLE)
_request = RemotingCommand.request


class SendTarget:
    """How the queue of a send is chosen when it is not plain rotation (selector, fixed queue) and
    whether no answer is wanted (one-way). Absent for the common send."""

    __slots__ = ("arg", "msg", "oneway", "queue", "selector")

    def __init__(
        self,
        msg: Message | None = None,
        selector: SelectorLike | None = None,
        arg: Any = None,
        queue: MessageQueue | None = None,
        oneway: bool = False,
    ) -> None:
        self.msg = msg
        self.selector = selector
        self.arg = arg
        self.queue = queue
        self.oneway = oneway


def fixed_queue(
    p: Producer, info: TopicPublishInfo, topic: str, wire_topic: str, target: SendTarget
) -> MessageQueue:
    """The queue a send's ``queue`` names or its ``selector`` picks (with the wire topic)."""
    if target.queue is not None:
        mq = target.queue
        wire = p.config.with_namespace(mq.topic)
        if wire != wire_topic:
            raise InvalidArgument(f"message's topic not equal mq's topic: {topic} != {mq.topic}")
        return mq if wire == mq.topic else MessageQueue(wire, mq.broker_name, mq.queue_id)
    assert target.selector is not None and target.msg is not None
    mqs = info.message_queue_list
    if not p.config.namespace:
        return select_queue(target.selector, mqs, target.msg, target.arg)
    user_mqs = [MessageQueue(topic, q.broker_name, q.queue_id) for q in mqs]
    picked = select_queue(target.selector, user_mqs, target.msg, target.arg)
    return MessageQueue(wire_topic, picked.broker_name, picked.queue_id)


class _Retries:
    """What only a send that did not succeed at once needs (made on the first slow step)."""

    __slots__ = ("addr_tried", "brokers_sent", "last_broker", "last_exc", "last_result", "route_tried")

    def __init__(self) -> None:
        self.route_tried = False
        self.addr_tried = False
        self.last_broker: str | None = None
        self.last_exc: BaseException | None = None
        self.last_result: SendResult | None = None
        self.brokers_sent: list[str] = []


class SendCall:
    """State of one send; ``run()`` starts it, ``fut`` gets the SendResult (None when one-way)."""

    __slots__ = ("addr", "deadline", "flush", "fut", "issued_at", "mq", "prep", "producer", "retries",
                 "target", "timeout", "times", "times_total")

    def __init__(
        self,
        producer: Producer,
        prep: PreparedSend,
        fut: asyncio.Future[Any],
        timeout: float,
        times_total: int,
        target: SendTarget | None = None,
    ) -> None:
        self.producer = producer
        self.prep = prep
        self.fut = fut
        self.timeout = timeout
        self.issued_at = now = producer.loop.time()
        self.deadline = now + timeout
        self.times_total = times_total
        self.times = 0
        self.target = target
        self.mq: MessageQueue | None = None
        self.addr = ""
        self.retries: _Retries | None = None
        # Write the request at once instead of at the end of the loop turn (which lets the sends
        # of one turn share a write): the automatic batcher's lone send, whose queue is idle.
        self.flush = False

    def _slow(self) -> _Retries:
        retries = self.retries
        if retries is None:
            retries = self.retries = _Retries()
        return retries

    # -- driving ----------------------------------------------------------------------------------

    def run(self) -> None:
        if self.fut.done():  # the caller gave up (cancelled)
            return
        try:
            self._step()
        except Exception as e:
            self._fail(e)

    def _step(self) -> None:
        p = self.producer
        now = p.loop.time()
        if now >= self.deadline:
            raise self._timeout_error()
        if p.service_state is not _RUNNING:
            raise ServiceStateError(f"The producer service state not OK, {p.service_state.name}")
        mq = self.mq
        wire_topic = self.prep.ext["b"]
        if mq is None:
            info = p.topic_publish_info_table.get(wire_topic)
            if info is None or not info.ok():
                retries = self._slow()
                if retries.route_tried:
                    raise p.no_route_error(wire_topic)
                retries.route_tried = True
                self._later(p.find_topic_publish_info(wire_topic), None)
                return
            if self.target is None and self.retries is None:
                mq = p.fault_strategy.select_one_message_queue(info, None)
            else:
                mq = self._select(info)
            self.mq = mq
        instance = p._instance
        assert instance is not None  # RUNNING
        addr = instance.find_broker_address_in_publish(mq.broker_name)
        if addr is None:
            retries = self._slow()
            if not retries.addr_tried:
                retries.addr_tried = True
                self._later(instance.update_topic_route_info_from_name_server(wire_topic), None)
                return
            self._attempt_failed(BrokerNotFound(f"The broker[{mq.broker_name}] not exist"), False)
            return
        if p.vip:
            addr = p.vip_addr(addr)
        self.addr = addr
        channel = p.channels.get(addr)
        if channel is None or not channel.is_active:
            self._later(p.connect(addr, self.deadline - now), self._connect_failed)
            return
        self._issue(channel, mq, now)

    def _later(self, aw: Awaitable[Any], on_error: Callable[[BaseException], None] | None) -> None:
        """Run a slow step as a Task, then re-enter ``run()`` (or ``on_error``)."""

        def done(task: asyncio.Future[Any]) -> None:
            if task.cancelled():
                self._fail(asyncio.CancelledError())
                return
            exc = task.exception()
            if exc is None:
                self.run()
            elif on_error is not None:
                on_error(exc)
            else:
                self._fail(exc)

        asyncio.ensure_future(aw).add_done_callback(done)

    def _select(self, info: TopicPublishInfo) -> MessageQueue:
        p = self.producer
        target = self.target
        last_broker = self.retries.last_broker if self.retries is not None else None
        if target is None:
            return p.fault_strategy.select_one_message_queue(info, last_broker)
        if target.queue is not None or target.selector is not None:
            return fixed_queue(p, info, self.prep.topic, self.prep.ext["b"], target)
        return p.fault_strategy.select_one_message_queue(info, last_broker)

    def _issue(self, channel: Channel, mq: MessageQueue, now: float) -> None:
        prep = self.prep
        self.issued_at = now
        request = _request(prep.code, prep.ext_for(mq.queue_id, mq.broker_name), prep.body)
        oneway = self.target is not None and self.target.oneway
        try:
            if oneway:
                channel.invoke_oneway(request)
            else:
                _, response = channel.start_request(request, self.deadline - now)
                if self.flush:
                    channel.flush()
        except RemotingError as e:
            self._attempt_failed(e, True)
            return
        if oneway:
            self.mq = None
            self.fut.set_result(None)
            return
        response.add_done_callback(self._on_response)

    # -- outcomes ---------------------------------------------------------------------------------

    def _on_response(self, response: asyncio.Future[RemotingCommand]) -> None:
        fut = self.fut
        if fut.done():
            return
        mq = self.mq
        if response.cancelled() or mq is None:
            self._fail(asyncio.CancelledError())
            return
        exc = response.exception()
        if exc is not None:
            if isinstance(exc, RemotingError | ProtocolError):
                self._attempt_failed(exc, True)
            else:
                self._fail(exc)
            return
        p = self.producer
        prep = self.prep
        try:
            result = process_send_response(response.result(), mq.broker_name, prep.topic, prep.msg_id,
                                           self.addr, mq)
        except ServerError as e:
            if e.code == _SERVICE_NOT_AVAILABLE:
                # a broker demoted to slave (controller mode's electMaster) still answers, refusing
                # sends: its group's new master is in the route, fetch it now, not at the 30 s poll
                p.refresh_route_soon(prep.topic)
            if e.retriable:
                self._attempt_failed(e, True)
            else:
                self._report_latency(mq, False)
                self._fail(e)
            return
        except ProtocolError as e:  # a broker that answers garbage: try another
            self._attempt_failed(e, True)
            return
        if p.fault_strategy.enabled:
            self._report_latency(mq, False)
        self.mq = None
        if result.status is not _SEND_OK and p.config.retry_another_broker_when_not_store_ok:
            self._slow().last_result = result
            self._next_attempt(mq.broker_name)
            return
        fut.set_result(result)

    def _report_latency(self, mq: MessageQueue, isolation: bool) -> None:
        latency_ms = (self.producer.loop.time() - self.issued_at) * 1000.0
        self.producer.fault_strategy.update_fault_item(mq.broker_name, latency_ms, isolation)

    def _connect_failed(self, exc: BaseException) -> None:
        # A broker that refuses connections may have been replaced (a controller-mode failover
        # promotes a slave to brokerId 0): look the route up now, not at the next 30 s poll.
        self.producer.refresh_route_soon(self.prep.topic)
        self._attempt_failed(exc, True)

    def _attempt_failed(self, exc: BaseException, isolation: bool) -> None:
        mq = self.mq
        self.mq = None
        self._slow().last_exc = exc
        broker = mq.broker_name if mq is not None else None
        if mq is not None:
            self._report_latency(mq, isolation)
        if not isinstance(exc, RocketQError) or not exc.retriable:
            self._fail(exc)
            return
        log.warning("send to broker[%s] of topic %s failed (attempt %d of %d): %s",
                    broker, self.prep.topic, self.times + 1, self.times_total, exc)
        self._next_attempt(broker)

    def _next_attempt(self, broker: str | None) -> None:
        retries = self._slow()
        self.times += 1
        if broker is not None:
            retries.last_broker = broker
            retries.brokers_sent.append(broker)
        if self.times < self.times_total:
            self.run()
            return
        if retries.last_result is not None:
            self.fut.set_result(retries.last_result)
            return
        assert retries.last_exc is not None
        self._fail(retries.last_exc)

    def _timeout_error(self) -> RemotingTimeoutError:
        err = RemotingTimeoutError("sendDefaultImpl call timeout")
        err.__cause__ = self.retries.last_exc if self.retries is not None else None
        return err

    def _fail(self, exc: BaseException) -> None:
        if self.fut.done():
            return
        retries = self.retries
        if self.times > 1 and isinstance(exc, Exception) and retries is not None and retries.brokers_sent:
            started = self.deadline - self.timeout
            cost = round((self.producer.loop.time() - started) * 1000)
            exc.add_note(
                f"Send [{self.times}] times, still failed, cost [{cost}]ms, "
                f"Topic: {self.prep.topic}, BrokersSent: {retries.brokers_sent}"
            )
        self.fut.set_exception(exc)
