"""The asyncio producer (``rocketq.aio.Producer``): RocketMQ's DefaultMQProducer, pythonic.

::

    async with Producer("pg", namesrv_addr="127.0.0.1:9876") as p:
        result = await p.send(Message("T", b"body", tags="A", keys="k1"))
        futures = [p.send_async(Message("T", b"%d" % i)) for i in range(10_000)]  # pipelined
        await asyncio.gather(*futures)

``send_async`` returns a Future at once (many sends in flight on one connection);
``send`` awaits one. Messages are checked before anything is sent: a bad topic, an empty body
or a body over ``max_message_size`` raises ``InvalidMessage`` at the call.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import uuid
from collections.abc import Callable, Collection, Sequence
from typing import TYPE_CHECKING, Any

from rocketq.client.api import vip_address
from rocketq.client.config import ClientConfig, ServiceState
from rocketq.client.instance import MQClientInstance, MQClientManager
from rocketq.client.message import Message, MessageExt, MessageQueue, SendResult
from rocketq.client.producer.auto_batch import AutoBatcher
from rocketq.client.producer.config import CLIENT_INNER_PRODUCER_GROUP, DEFAULT_PRODUCER_GROUP, ProducerConfig
from rocketq.client.producer.fault import MQFaultStrategy
from rocketq.client.producer.kernel import PreparedSend, SendEncoder
from rocketq.client.producer.recall import recall_message
from rocketq.client.producer.request import (
    CORRELATION_ID,
    REPLY_TO_CLIENT,
    TTL,
    PendingRequest,
    RequestCallback,
)
from rocketq.client.producer.selector import SelectorLike
from rocketq.client.producer.send_call import SendCall, SendTarget
from rocketq.client.producer.validators import check_batch, check_group, check_message
from rocketq.client.route import TopicPublishInfo
from rocketq.errors import (
    GroupAlreadyRegistered,
    InvalidArgument,
    MQClientError,
    NoNameServer,
    ServiceStateError,
)
from rocketq.remoting import Channel

if TYPE_CHECKING:
    from rocketq.client.trace.hooks import SendTraceHook

__all__ = ["Producer", "SendCallback"]

log = logging.getLogger("rocketq.client")

# Called with the SendResult, or with the exception the send ended with.
SendCallback = Callable[[SendResult | BaseException], object]

_RUNNING = ServiceState.RUNNING
FAQ_NO_ROUTE = "https://rocketmq.apache.org/docs/bestPractice/06FAQ"


class Producer:
    """Sends messages to the brokers of a topic; one per producer group per client instance.

    ``Producer(group, namesrv_addr=..., **fields)`` takes any ProducerConfig field
    (``send_msg_timeout``, ``retry_times_when_send_failed``, ``send_latency_fault_enable``, ...),
    or a whole ``config=ProducerConfig(...)``. ``config_base`` copies the ClientConfig fields of
    another config (how an MQClientInstance makes its own CLIENT_INNER_PRODUCER).
    """

    def __init__(
        self,
        group: str | None = None,
        namesrv_addr: str | None = None,
        *,
        config: ProducerConfig | None = None,
        config_base: ClientConfig | None = None,
        **fields: Any,
    ) -> None:
        if config is None:
            if config_base is not None:
                base = {f.name: getattr(config_base, f.name) for f in dataclasses.fields(ClientConfig)}
                fields = {**base, **fields}
            if namesrv_addr is not None:
                fields["namesrv_addr"] = namesrv_addr
            try:
                config = ProducerConfig(producer_group=group or DEFAULT_PRODUCER_GROUP, **fields)
            except TypeError as e:
                raise InvalidArgument(f"bad producer option: {e}") from None
        else:
            changes = dict(fields)
            if group is not None:
                changes["producer_group"] = group
            if namesrv_addr is not None:
                changes["namesrv_addr"] = namesrv_addr
            if changes:
                config = config.replace(**changes)
        self.config: ProducerConfig = config
        self.service_state = ServiceState.CREATE_JUST
        self.topic_publish_info_table: dict[str, TopicPublishInfo] = {}
        self.fault_strategy = MQFaultStrategy(
            config.send_latency_fault_enable, config.latency_max, config.not_available_duration
        )
        self.channels: dict[str, Channel] = {}
        self.vip = config.vip_channel_enabled
        self._group_wire = config.with_namespace(config.producer_group)
        self._encoder = SendEncoder(config)
        self._checked_topics: set[str] = set()
        self._max_size = config.max_message_size
        self._timeout = config.send_msg_timeout / 1000.0
        self._instance: MQClientInstance | None = None
        self.trace: SendTraceHook | None = None  # enable_trace: sees every send (client/trace/)
        # the automatic batching of send_async / send (made at start, when the loop is known)
        self._batch_async: AutoBatcher | None = None
        self._batch_sync: AutoBatcher | None = None
        self.loop: asyncio.AbstractEventLoop = None  # type: ignore[assignment]  # bound at start

    def __repr__(self) -> str:
        return f"Producer({self.config.producer_group!r}, {self.service_state.name})"

    @property
    def group(self) -> str:
        return self.config.producer_group

    @property
    def instance(self) -> MQClientInstance:
        if self._instance is None:
            raise ServiceStateError("The producer service state not OK, CREATE_JUST")
        return self._instance

    def refresh_route_soon(self, topic: str) -> None:
        """A send could not connect to the broker `topic`'s route names: fetch the route now."""
        if self._instance is not None:
            self._instance.refresh_route_soon(topic)

    # -- lifecycle --------------------------------------------------------------------------------

    async def start(self) -> None:
        """Register with the client instance of this client id and start it.

        ``ServiceStateError`` if started before; ``GroupAlreadyRegistered`` if the instance already
        has a producer of this group.
        """
        if self.service_state is not ServiceState.CREATE_JUST:
            raise ServiceStateError(
                f"The producer service state not OK, maybe started once, {self.service_state.name}"
            )
        group = self.config.producer_group
        check_group(group)
        if group == DEFAULT_PRODUCER_GROUP:
            raise InvalidArgument(
                f"producerGroup can not equal {DEFAULT_PRODUCER_GROUP}, please specify another one."
            )
        await self._start_on(MQClientManager.get_or_create(self.config))

    async def _start_on(self, instance: MQClientInstance) -> None:
        self.service_state = ServiceState.START_FAILED
        if not instance.register_producer(self._group_wire, self):
            self.service_state = ServiceState.CREATE_JUST
            raise GroupAlreadyRegistered(
                f"The producer group[{self.config.producer_group}] has been created before, "
                "specify another name please."
            )
        self._instance = instance
        self.loop = instance.loop
        if self.config.auto_batch or self.config.auto_batch_sync:
            batcher = AutoBatcher(self)
            self._batch_async = batcher if self.config.auto_batch else None
            self._batch_sync = batcher if self.config.auto_batch_sync else None
        self.topic_publish_info_table.setdefault(self.config.create_topic_key, TopicPublishInfo())
        try:
            await instance.start()
        except BaseException:
            instance.producer_table.pop(self._group_wire, None)
            raise
        self.service_state = ServiceState.RUNNING
        await instance.send_heartbeat_to_all_brokers()
        if self.config.enable_trace:
            from rocketq.client.trace.attach import start_producer_trace  # the trace imports us

            self.trace = await start_producer_trace(self)
        log.info("the producer [%s] start OK. sendMessageWithVIPChannel=%s", self.group, self.vip)

    async def start_inner(self, instance: MQClientInstance) -> None:
        """Start as the instance's own CLIENT_INNER_PRODUCER (no group checks, no registry)."""
        if self.config.producer_group != CLIENT_INNER_PRODUCER_GROUP:
            raise InvalidArgument("start_inner is for the instance's CLIENT_INNER_PRODUCER only")
        await self._start_on(instance)

    async def shutdown(self) -> None:
        """Unregister from the brokers and release the client instance (idempotent)."""
        if self.service_state is not ServiceState.RUNNING:
            if self.service_state is ServiceState.CREATE_JUST:
                return
            self.service_state = ServiceState.SHUTDOWN_ALREADY
            return
        batcher = self._batch_async or self._batch_sync
        if batcher is not None:  # gathered messages leave, and are answered, before the door closes
            await batcher.drain(self._timeout)
        self.service_state = ServiceState.SHUTDOWN_ALREADY
        if self.trace is not None:
            await self.trace.dispatcher.shutdown()
        instance = self.instance
        await instance.unregister_producer(self._group_wire)
        if self.config.producer_group != CLIENT_INNER_PRODUCER_GROUP:
            await instance.shutdown()
        log.info("the producer [%s] shutdown OK", self.group)

    async def __aenter__(self) -> Producer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.shutdown()

    # -- what the instance calls ------------------------------------------------------------------

    def update_topic_publish_info(self, topic: str, info: TopicPublishInfo) -> None:
        self.topic_publish_info_table[topic] = info

    def publish_topics(self) -> Collection[str]:
        return list(self.topic_publish_info_table)

    # -- sending ----------------------------------------------------------------------------------

    def check(self, msg: Message) -> None:
        """Raise what sending ``msg`` would raise before it reaches the wire."""
        topics = self._checked_topics
        known = type(msg) is Message and msg.topic in topics
        if known:  # the topic passed its checks before: the body is what is left
            body = msg.body
            if type(body) is bytes and 0 < len(body) <= self._max_size and msg.delay_level >= 0:
                return
        check_message(msg, self._max_size, check_topic_name=not known)
        if not known and len(topics) < 10_000:
            topics.add(msg.topic)

    def send_async(
        self,
        msg: Message,
        callback: SendCallback | None = None,
        *,
        timeout: float | None = None,
        selector: SelectorLike | None = None,
        arg: Any = None,
        queue: MessageQueue | None = None,
    ) -> asyncio.Future[SendResult]:
        """Start sending ``msg``; the returned Future gets the SendResult.

        Retries ``retry_times_when_send_async_failed`` times on another broker (none when a
        ``selector`` or ``queue`` fixes the target). ``callback(result_or_exception)`` runs on
        the event loop when the send ends. ``timeout`` is in seconds (default send_msg_timeout).

        With ``auto_batch`` (the default), a message sent while a request to its queue is in
        flight is gathered with others and they go as one batch (docs/performance.md); its
        SendResult is its own all the same.
        """
        if self.service_state is not _RUNNING:
            self._check_state()
        self.check(msg)
        batcher = self._batch_async
        if batcher is not None:
            seconds = self._timeout if timeout is None else timeout
            gathered = batcher.submit(msg, seconds, selector, arg, queue)
            if gathered is not None:
                if callback is not None:
                    gathered.add_done_callback(_callback_adapter(callback))
                return gathered
        prep = self._encoder.single(msg)
        fixed = selector is not None or queue is not None
        times = 1 if fixed else 1 + self.config.retry_times_when_send_async_failed
        fut = self._submit(prep, timeout, times, msg=msg, selector=selector, arg=arg, queue=queue)
        if callback is not None:
            fut.add_done_callback(_callback_adapter(callback))
        return fut

    async def send(
        self,
        msg: Message,
        timeout: float | None = None,
        selector: SelectorLike | None = None,
        arg: Any = None,
        queue: MessageQueue | None = None,
    ) -> SendResult:
        """Send ``msg`` and return the SendResult (the broker stored it).

        ``selector(mqs, msg, arg)`` picks the queue (ordered messages; no retry), or ``queue``
        names it. Otherwise queues rotate, and a failure is retried
        ``retry_times_when_send_failed`` times on another broker within ``timeout`` seconds.
        With ``auto_batch_sync`` it is batched as ``send_async`` is.
        """
        self._check_state()
        self.check(msg)
        batcher = self._batch_sync
        if batcher is not None:
            seconds = self._timeout if timeout is None else timeout
            gathered = batcher.submit(msg, seconds, selector, arg, queue)
            if gathered is not None:
                return await gathered
        prep = self._encoder.single(msg)
        fixed = selector is not None or queue is not None
        times = 1 if fixed else 1 + self.config.retry_times_when_send_failed
        result: SendResult = await self._submit(
            prep, timeout, times, msg=msg, selector=selector, arg=arg, queue=queue
        )
        return result

    async def recall(self, topic: str, recall_handle: str, timeout: float | None = None) -> str:
        """Cancel a pending timer message by its ``SendResult.recall_handle``; returns its id
        (RocketMQ 5 brokers with ``recallMessageEnable``; see docs/timer.md)."""
        self._check_state()
        return await recall_message(self, topic, recall_handle, timeout)

    async def send_oneway(
        self,
        msg: Message,
        selector: SelectorLike | None = None,
        arg: Any = None,
        queue: MessageQueue | None = None,
    ) -> None:
        """Write ``msg`` and return without waiting for the broker (no result, no retry)."""
        self._check_state()
        self.check(msg)
        prep = self._encoder.single(msg)
        await self._submit(prep, None, 1, msg=msg, selector=selector, arg=arg, queue=queue, oneway=True)

    def send_batch_async(
        self,
        msgs: Sequence[Message],
        callback: SendCallback | None = None,
        *,
        timeout: float | None = None,
        queue: MessageQueue | None = None,
    ) -> asyncio.Future[SendResult]:
        """Start sending ``msgs`` (one topic, no delay) as one SEND_BATCH_MESSAGE."""
        self._check_state()
        msgs = list(msgs)
        check_batch(msgs, self.config.max_message_size)
        prep = self._encoder.batch(msgs)
        times = 1 if queue is not None else 1 + self.config.retry_times_when_send_async_failed
        fut = self._submit(prep, timeout, times, queue=queue)
        if callback is not None:
            fut.add_done_callback(_callback_adapter(callback))
        return fut

    async def send_batch(
        self, msgs: Sequence[Message], timeout: float | None = None, queue: MessageQueue | None = None
    ) -> SendResult:
        """Send ``msgs`` in one request; ``SendResult.msg_id`` joins their UNIQ_KEYs with commas."""
        self._check_state()
        msgs = list(msgs)
        check_batch(msgs, self.config.max_message_size)
        prep = self._encoder.batch(msgs)
        times = 1 if queue is not None else 1 + self.config.retry_times_when_send_failed
        result: SendResult = await self._submit(prep, timeout, times, queue=queue)
        return result

    # -- request-reply ----------------------------------------------------------------------------

    async def request(self, msg: Message, timeout: float | None = None) -> MessageExt:
        """Send ``msg`` as a request and return the reply a replier sent for it.

        ``RequestTimeout`` when no reply arrives within ``timeout`` seconds (default
        send_msg_timeout); a failed send raises what the send raised. See docs/request-reply.md.
        """
        self._check_state()
        self.check(msg)
        await self._prepare_request(msg.topic)
        return await self.request_async(msg, timeout=timeout)

    def request_async(
        self, msg: Message, callback: RequestCallback | None = None, *, timeout: float | None = None
    ) -> asyncio.Future[MessageExt]:
        """Start a request; the returned Future gets the reply (``callback(reply_or_exception)``
        runs too, as RocketMQ's ``request(msg, RequestCallback, timeout)``)."""
        self._check_state()
        self.check(msg)
        seconds = self._timeout if timeout is None else timeout
        correlation_id = str(uuid.uuid4())
        msg = msg.with_properties(**{
            CORRELATION_ID: correlation_id,
            REPLY_TO_CLIENT: self.instance.client_id,
            TTL: str(round(seconds * 1000)),
        })
        fut: asyncio.Future[MessageExt] = self.loop.create_future()
        pending = PendingRequest(correlation_id, fut, msg.topic, seconds)
        pending.start()
        if callback is not None:
            fut.add_done_callback(_callback_adapter(callback))
        if self.config.with_namespace(msg.topic) in self.instance.topic_route_table:
            self.send_async(msg, timeout=seconds).add_done_callback(pending.on_sent)
        else:
            task = self.loop.create_task(self._prepare_then_send(msg, pending))
            fut.add_done_callback(lambda _: task.cancel())
        return fut

    async def _prepare_request(self, topic: str) -> None:
        """Before the first request to a topic: its route, and a heartbeat to every broker, so the
        broker a reply reaches knows this client id's connection (prepareSendRequest)."""
        wire = self.config.with_namespace(topic)
        if wire not in self.instance.topic_route_table:
            await self.find_topic_publish_info(wire)
            await self.instance.send_heartbeat_to_all_brokers()

    async def _prepare_then_send(self, msg: Message, pending: PendingRequest) -> None:
        try:
            await self._prepare_request(msg.topic)
            sent = self.send_async(msg, timeout=max(0.001, pending.timeout))
        except Exception as exc:
            if not pending.future.done():
                pending.future.set_exception(exc)
            return
        sent.add_done_callback(pending.on_sent)

    async def fetch_publish_message_queues(self, topic: str) -> list[MessageQueue]:
        """The queues ``topic`` can be written to (from a fresh route)."""
        self._check_state()
        wire = self.config.with_namespace(topic)
        await self.instance.update_topic_route_info_from_name_server(wire)
        info = self.topic_publish_info_table.get(wire)
        if info is None or not info.ok():
            info = await self.find_topic_publish_info(wire)
        if info is None or not info.ok():
            raise self.no_route_error(wire)
        return [MessageQueue(topic, mq.broker_name, mq.queue_id) for mq in info.message_queue_list]

    def _check_state(self) -> None:
        if self.service_state is not ServiceState.RUNNING:
            raise ServiceStateError(f"The producer service state not OK, {self.service_state.name}")

    def _submit(
        self,
        prep: PreparedSend,
        timeout: float | None,
        times: int,
        *,
        msg: Message | None = None,
        selector: SelectorLike | None = None,
        arg: Any = None,
        queue: MessageQueue | None = None,
        oneway: bool = False,
    ) -> asyncio.Future[Any]:
        fut: asyncio.Future[Any] = self.loop.create_future()
        target = None
        if selector is not None or queue is not None or oneway:
            target = SendTarget(msg, selector, arg, queue, oneway)
        if self.trace is not None and not oneway:
            self.trace.watch(prep, msg, fut)
        SendCall(self, prep, fut, self._timeout if timeout is None else timeout, times, target).run()
        return fut

    # -- what SendCall calls ----------------------------------------------------------------------

    async def find_topic_publish_info(self, wire_topic: str) -> TopicPublishInfo | None:
        """The topic's publish info, fetching its route, else the auto-create template's route."""
        instance = self.instance
        info = self.topic_publish_info_table.get(wire_topic)
        if info is None or not info.ok():
            self.topic_publish_info_table.setdefault(wire_topic, TopicPublishInfo())
            await instance.update_topic_route_info_from_name_server(wire_topic)
            info = self.topic_publish_info_table.get(wire_topic)
        if info is not None and (info.have_topic_router_info or info.ok()):
            return info
        await instance.update_topic_route_info_from_name_server(
            wire_topic, self.config.create_topic_key, self.config.default_topic_queue_nums
        )
        return self.topic_publish_info_table.get(wire_topic)

    def no_route_error(self, wire_topic: str) -> MQClientError:
        if not self.instance.api.namesrv_addr_list:
            return NoNameServer("No name server address, please set it (namesrv_addr or env NAMESRV_ADDR)")
        # The user's topic name (without namespace); the cause when no name server answered.
        return self.instance.api.route_error(
            self.config.without_namespace(wire_topic), f"No route info of this topic (see {FAQ_NO_ROUTE})"
        )

    async def connect(self, addr: str, timeout: float) -> Channel:
        channel = await self.instance.remoting_client.get_channel(addr, max(0.001, timeout))
        self.channels[addr] = channel
        return channel

    @staticmethod
    def vip_addr(addr: str) -> str:
        return vip_address(addr)


def _callback_adapter(callback: Callable[[Any], object]) -> Callable[[asyncio.Future[Any]], None]:
    def done(fut: asyncio.Future[Any]) -> None:
        try:
            if fut.cancelled():
                callback(asyncio.CancelledError())
                return
            exc = fut.exception()
            callback(exc if exc is not None else fut.result())
        except Exception:
            log.exception("send callback raised")

    return done
