"""SimpleConsumer: RocketMQ 5's pop consumer (no queue ownership, no rebalance).

    async with SimpleConsumer("G", namesrv_addr="127.0.0.1:9876", subscription={"T": "*"},
                              await_duration=10) as consumer:
        for msg in await consumer.receive(32, invisible_duration=30):
            handle(msg)
            await consumer.ack(msg)

Any number of consumers of a group share a topic's queues: ``receive`` pops from one broker of a
subscribed topic (every queue of it, long-polling up to ``await_duration``), each message it returns
is invisible to the group for ``invisible_duration`` and comes back (``delivery_attempt`` + 1)
unless acked. ``change_invisible_duration`` gives a message more (or less) time.
``rocketq.SimpleConsumer`` is the blocking twin (``simple_sync.py``).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Awaitable, Collection, Mapping, Sequence
from datetime import timedelta
from typing import Any, Self, TypeVar

from rocketq.client.config import ClientConfig, ServiceState
from rocketq.client.consumer.pop_api import (
    PopStatus,
    ack_message,
    batch_ack_messages,
    change_invisible_time,
    pop_header,
    pop_message,
)
from rocketq.client.consumer.subscription import MessageSelector, build_subscription, split_options
from rocketq.client.consumer.types import DEFAULT_CONSUMER_GROUP, ConsumerConfig
from rocketq.client.instance import MQClientInstance, MQClientManager
from rocketq.client.producer.validators import check_group
from rocketq.codec.bodies import ConsumerData, ConsumeType, MessageModel, MessageQueue, SubscriptionData
from rocketq.codec.message import MessageExt
from rocketq.codec.pop import parse_extra_info
from rocketq.errors import (
    GroupAlreadyRegistered,
    InvalidArgument,
    RemotingError,
    ServiceStateError,
    TopicRouteNotFound,
)

__all__ = ["MessageView", "SimpleConsumer"]

log = logging.getLogger("rocketq.client")

Duration = float | int | timedelta
T = TypeVar("T")
MAX_RECEIVE = 32  # the broker's limit per pop


def seconds(d: Duration) -> float:
    """A duration given as seconds (float) or a timedelta."""
    return d.total_seconds() if isinstance(d, timedelta) else float(d)


class MessageView:
    """A received message (RocketMQ 5's MessageView): read-only, plus the receipt handle the consumer
    acks it with (``change_invisible_duration`` replaces the handle)."""

    __slots__ = ("_addr", "_broker_name", "_handle", "_msg", "_topic")

    def __init__(self, msg: MessageExt, topic: str, broker_name: str, addr: str, handle: str) -> None:
        self._msg = msg
        self._topic = topic
        self._broker_name = broker_name
        self._addr = addr
        self._handle = handle

    def __repr__(self) -> str:
        return (
            f"MessageView(topic={self._topic!r}, message_id={self.message_id!r}, "
            f"attempt={self.delivery_attempt})"
        )

    @property
    def message_id(self) -> str:
        return self._msg.msg_id

    @property
    def topic(self) -> str:
        return self._topic

    @property
    def body(self) -> bytes:
        return self._msg.body

    @property
    def properties(self) -> Mapping[str, str]:
        return self._msg.properties

    @property
    def tag(self) -> str | None:
        return self._msg.tags

    @property
    def keys(self) -> list[str]:
        return [k for k in (self._msg.keys or "").split(" ") if k]

    @property
    def born_timestamp(self) -> int:
        return self._msg.born_timestamp

    @property
    def born_host(self) -> str:
        return self._msg.born_host[0]

    @property
    def delivery_attempt(self) -> int:
        """1 the first time a message is received, 2 after it came back once, ..."""
        return self._msg.reconsume_times + 1

    @property
    def queue_id(self) -> int:
        return parse_extra_info(self._handle).queue_id  # a retried message's own queue is its retry topic's

    @property
    def queue_offset(self) -> int:
        return self._msg.queue_offset

    @property
    def broker_name(self) -> str:
        return self._broker_name

    @property
    def receipt_handle(self) -> str:
        return self._handle

    @property
    def message(self) -> MessageExt:
        """The stored message underneath (every field of the record)."""
        return self._msg


class SimpleConsumer:
    """``SimpleConsumer(group, namesrv_addr=..., subscription={"T": "*"}, await_duration=30, **fields)``
    takes any ClientConfig field too (``instance_name``, ``namespace``, ...)."""

    CONSUME_TYPE = ConsumeType.CONSUME_POP

    def __init__(
        self,
        consumer_group: str | None = None,
        namesrv_addr: str | None = None,
        *,
        subscription: Mapping[str, str | MessageSelector] | None = None,
        await_duration: Duration = 30.0,
        config_base: ClientConfig | None = None,
        **fields: Any,
    ) -> None:
        self.config = split_options(ConsumerConfig, consumer_group, namesrv_addr, None, config_base, fields)
        self.consumer_group = self.config.consumer_group
        self._group_wire = self.config.with_namespace(self.consumer_group)
        self.await_duration = seconds(await_duration)
        if self.await_duration < 0:
            raise InvalidArgument("await_duration must be >= 0")
        self._subscriptions: dict[str, SubscriptionData] = {}
        self.service_state = ServiceState.CREATE_JUST
        for topic, expression in (subscription or {}).items():
            self.subscribe(topic, expression)
        self._client: MQClientInstance | None = None
        self._queues: dict[str, set[MessageQueue]] = {}
        self._turn = itertools.count()

    def __repr__(self) -> str:
        return f"SimpleConsumer({self.consumer_group!r}, {self.service_state.name})"

    @property
    def client(self) -> MQClientInstance:
        if self._client is None:
            raise ServiceStateError("The consumer service state not OK, CREATE_JUST")
        return self._client

    # -- subscriptions -----------------------------------------------------------------------------

    def subscribe(self, topic: str, expression: str | MessageSelector = "*") -> None:
        wire = self.config.with_namespace(topic)
        self._subscriptions[wire] = build_subscription(wire, expression)  # its route: at the next receive

    def unsubscribe(self, topic: str) -> None:
        self._subscriptions.pop(self.config.with_namespace(topic), None)

    def subscription(self) -> dict[str, str]:
        return {sub.topic: sub.sub_string for sub in self._subscriptions.values()}

    # -- lifecycle ---------------------------------------------------------------------------------

    async def start(self) -> None:
        if self.service_state is not ServiceState.CREATE_JUST:
            raise ServiceStateError(f"The SimpleConsumer service state is {self.service_state.name}")
        check_group(self.consumer_group)
        if self.consumer_group == DEFAULT_CONSUMER_GROUP:
            raise InvalidArgument(f"consumerGroup can not equal {DEFAULT_CONSUMER_GROUP}")
        self.service_state = ServiceState.START_FAILED
        client = MQClientManager.get_or_create(self.config)
        self._client = client
        if not client.register_consumer(self._group_wire, self):
            self._client = None
            raise GroupAlreadyRegistered(
                f"The consumer group[{self.consumer_group}] has been created before, "
                "specify another name please."
            )
        try:
            await client.start()
            for topic in self._subscriptions:
                await client.update_topic_route_info_from_name_server(topic)
            await client.send_heartbeat_to_all_brokers()
        except BaseException:
            await client.unregister_consumer(self._group_wire)
            await client.shutdown()
            self._client = None
            self.service_state = ServiceState.CREATE_JUST
            raise
        self.service_state = ServiceState.RUNNING

    async def shutdown(self) -> None:
        if self.service_state is not ServiceState.RUNNING:
            return
        self.service_state = ServiceState.SHUTDOWN_ALREADY
        client = self.client
        await client.unregister_consumer(self._group_wire)
        await client.shutdown()

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.shutdown()

    # -- what the MQClientInstance asks of every consumer ------------------------------------------

    async def do_rebalance(self) -> None:
        """Nothing to balance: every consumer pops from every queue."""

    async def persist_consumer_offset(self) -> None:
        """The broker keeps the group's pop offsets."""

    def consumer_data(self) -> ConsumerData:
        return ConsumerData(
            group_name=self._group_wire,
            consume_type=ConsumeType.CONSUME_POP,
            message_model=MessageModel.CLUSTERING,
            consume_from_where=self.config.consume_from_where,
            subscription_data_set=tuple(self._subscriptions.values()),
            unit_mode=False,
        )

    def subscriptions(self) -> Collection[str]:
        return list(self._subscriptions)

    def update_topic_subscribe_info(self, topic: str, queues: list[MessageQueue]) -> None:
        if topic in self._subscriptions:
            self._queues[topic] = set(queues)

    # -- receive, ack, change invisible duration ---------------------------------------------------

    def _targets(self) -> list[tuple[str, str, str]]:
        """(topic, broker name, address) of every broker serving a subscribed topic."""
        out = []
        client = self.client
        for topic in self._subscriptions:
            queues = self._queues.get(topic) or set(client.get_subscribe_queues(topic))
            for name in sorted({mq.broker_name for mq in queues}):
                addr = client.find_broker_address_in_subscribe(name)
                if addr is not None:
                    out.append((topic, name, addr))
        return out

    def _running(self) -> MQClientInstance:
        if self.service_state is not ServiceState.RUNNING:
            raise ServiceStateError(f"The SimpleConsumer service state is {self.service_state.name}")
        return self.client

    async def _watched(self, topic: str, call: Awaitable[T]) -> T:
        """`call` to a broker of `topic`; when it cannot reach the broker, the route may be stale (a
        controller-mode failover moved the master), so fetch it now rather than at the 30 s poll
        (as ConsumerInner._check_reachable does for pulls)."""
        try:
            return await call
        except RemotingError:
            self.client.refresh_route_soon(topic)
            raise

    async def receive(self, max_messages: int = 16, invisible_duration: Duration = 30.0) -> list[MessageView]:
        """Up to ``max_messages`` (1..32) messages of one broker; [] when none came within
        ``await_duration``."""
        client = self._running()
        if not 1 <= max_messages <= MAX_RECEIVE:
            raise InvalidArgument(f"max_messages must be between 1 and {MAX_RECEIVE}")
        invisible_ms = int(seconds(invisible_duration) * 1000)
        if invisible_ms < 1000:
            raise InvalidArgument("invisible_duration must be at least 1 second")
        for topic in self._subscriptions:
            if not self._queues.get(topic) and not client.get_subscribe_queues(topic):
                await client.update_topic_route_info_from_name_server(topic)  # subscribed since start
        targets = self._targets()
        if not targets:
            raise TopicRouteNotFound(f"no broker serves {sorted(self._subscriptions)}")
        turn = next(self._turn)
        topic, broker_name, addr = targets[turn % len(targets)]
        sub = self._subscriptions[topic]
        poll_ms = int(self.await_duration * 1000)
        exp = None if sub.sub_string in ("*", "") and sub.expression_type == "TAG" else sub.sub_string
        header = pop_header(
            self._group_wire,
            topic,
            max_messages,
            invisible_ms,
            poll_ms,
            exp_type=sub.expression_type if exp else None,
            exp=exp,
        )
        timeout = self.await_duration + client.config.mq_client_api_timeout / 1000.0
        result = await self._watched(
            topic, pop_message(client.remoting_client, addr, broker_name, header, timeout)
        )
        if result.status is not PopStatus.FOUND:
            return []
        shown = self.config.without_namespace(topic)
        return [
            MessageView(m, shown, broker_name, addr, h)
            for m, h in zip(result.messages, result.handles, strict=True)
        ]

    def _timeout(self) -> float:
        return self.client.config.mq_client_api_timeout / 1000.0

    async def ack(self, message: MessageView) -> None:
        """Done with `message`: it will not come back."""
        self._running()
        topic = self.config.with_namespace(message.topic)
        await self._watched(topic, ack_message(
            self.client.remoting_client, message._addr, self._group_wire, topic, message._handle,
            self._timeout(),
        ))

    async def ack_many(self, messages: Sequence[MessageView]) -> None:
        """Ack several messages with one BATCH_ACK_MESSAGE per broker."""
        self._running()
        by_broker: dict[tuple[str, str, str], list[str]] = {}
        for m in messages:
            key = (m._addr, m.broker_name, self.config.with_namespace(m.topic))
            by_broker.setdefault(key, []).append(m._handle)
        await asyncio.gather(
            *(
                self._watched(topic, batch_ack_messages(
                    self.client.remoting_client, addr, name, self._group_wire, topic, handles,
                    self._timeout(),
                ))
                for (addr, name, topic), handles in by_broker.items()
            )
        )

    async def change_invisible_duration(self, message: MessageView, duration: Duration) -> None:
        """`message` stays invisible for `duration` from now (its receipt handle changes)."""
        self._running()
        topic = self.config.with_namespace(message.topic)
        message._handle = await self._watched(topic, change_invisible_time(
            self.client.remoting_client, message._addr, self._group_wire, topic, message._handle,
            int(seconds(duration) * 1000), self._timeout(),
        ))
