"""ConsumerInner: what the push and lite-pull consumers share (RocketMQ's MQConsumerInner).

Joining a group (client instance, offset store, pull wrapper, registration), leaving it, the
subscription table the rebalance reads, what the MQClientInstance asks of every consumer
(heartbeat data, offsets to persist, route updates) and the bookkeeping after a pull. Each
consumer keeps what is its own: how queues are pulled (a pull loop fed by the rebalance, or
per-queue tasks feeding ``poll``) and how results are handed out.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Collection, Coroutine
from typing import Any, ClassVar, Self

from rocketq.client.condition_log import ConditionLog
from rocketq.client.config import ClientConfig, ServiceState
from rocketq.client.consumer.pull_api import PullAPIWrapper, tag_filter
from rocketq.client.consumer.stats import ConsumerStatsManager
from rocketq.client.consumer.subscription import check_client_in_broker, split_options
from rocketq.client.consumer.types import DEFAULT_CONSUMER_GROUP, ConsumerConfig
from rocketq.client.instance import MQClientInstance, MQClientManager
from rocketq.client.offset_store import LocalFileOffsetStore, OffsetStore, RemoteBrokerOffsetStore
from rocketq.client.producer.validators import check_group
from rocketq.client.rebalance.impl import RebalanceImpl, retry_topic
from rocketq.codec.bodies import ConsumerData, ConsumeType, MessageModel, MessageQueue, SubscriptionData
from rocketq.errors import GroupAlreadyRegistered, InvalidArgument, RemotingError, ServiceStateError

__all__ = ["ConsumerInner"]

log = logging.getLogger("rocketq.client")


class ConsumerInner:
    """Base of PushConsumer and LitePullConsumer; not used on its own."""

    CONSUME_TYPE: ClassVar[ConsumeType]
    config: ConsumerConfig
    rebalance_impl: RebalanceImpl

    def __init__(
        self,
        config_cls: type[ConsumerConfig],
        consumer_group: str | None,
        namesrv_addr: str | None,
        config: ConsumerConfig | None,
        config_base: ClientConfig | None,
        fields: dict[str, Any],
    ) -> None:
        self.config = split_options(config_cls, consumer_group, namesrv_addr, config, config_base, fields)
        cfg = self.config
        self.consumer_group = cfg.consumer_group
        self._group_wire = cfg.with_namespace(cfg.consumer_group)
        self._retry_topic = retry_topic(self._group_wire)
        self.service_state = ServiceState.CREATE_JUST
        self.stats = ConsumerStatsManager()
        self.offset_store: OffsetStore = None  # type: ignore[assignment]  # bound at start
        self.pull_api: PullAPIWrapper = None  # type: ignore[assignment]  # bound at start
        self._client: MQClientInstance | None = None
        self._tags: dict[str, frozenset[str] | None] = {}  # wire topic -> client-side tag filter
        self._tasks: set[asyncio.Task[Any]] = set()
        self._conditions = ConditionLog(log)  # expected situations, said once at INFO

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.consumer_group!r}, {self.service_state.name})"

    @property
    def client(self) -> MQClientInstance:
        if self._client is None:
            raise ServiceStateError("The consumer service state not OK, CREATE_JUST")
        return self._client

    @property
    def group_wire(self) -> str:
        """The group as brokers know it (with the namespace)."""
        return self._group_wire

    @property
    def retry_topic_wire(self) -> str:
        return self._retry_topic

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.shutdown()

    async def start(self) -> None:
        raise NotImplementedError

    async def shutdown(self) -> None:
        raise NotImplementedError

    def _spawn(self, coro: Coroutine[Any, Any, Any]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # -- subscriptions -----------------------------------------------------------------------------

    def _install(self, sub: SubscriptionData) -> None:
        self.rebalance_impl.subscription_inner[sub.topic] = sub
        self._tags[sub.topic] = tag_filter(sub)

    def _uninstall(self, wire_topic: str) -> None:
        self.rebalance_impl.subscription_inner.pop(wire_topic, None)
        self._tags.pop(wire_topic, None)

    async def _after_subscription_change(self, wire_topic: str) -> None:
        client = self.client
        await client.update_topic_route_info_from_name_server(wire_topic)
        await client.send_heartbeat_to_all_brokers()
        client.rebalance_immediately()

    # -- joining and leaving the group -------------------------------------------------------------

    def _check_group(self) -> None:
        group = self.config.consumer_group
        check_group(group)
        if group == DEFAULT_CONSUMER_GROUP:
            raise InvalidArgument(
                f"consumerGroup can not equal {DEFAULT_CONSUMER_GROUP}, please specify another one."
            )

    async def _bind_client(self) -> MQClientInstance:
        """The client instance, offset store (loaded) and pull wrapper this consumer runs on."""
        cfg = self.config
        client = MQClientManager.get_or_create(cfg)
        self._client = client
        self.rebalance_impl.client = client
        if cfg.message_model is MessageModel.BROADCASTING:
            self.offset_store = LocalFileOffsetStore(client.client_id, self._group_wire, cfg.store_dir)
        else:
            self.offset_store = RemoteBrokerOffsetStore(client, self._group_wire)
        await self.offset_store.load()
        self.pull_api = PullAPIWrapper(client.api, self._group_wire, client)
        return client

    def _register(self, client: MQClientInstance) -> None:
        # do_rebalance answers "balanced?" (bool); the instance's protocol only awaits it.
        if not client.register_consumer(self._group_wire, self):  # type: ignore[arg-type]
            raise GroupAlreadyRegistered(
                f"The consumer group[{self.consumer_group}] has been created before, "
                "specify another name please."
            )

    async def _undo_start(self) -> None:
        """After a failed start: back to CREATE_JUST, out of the client instance if we got in."""
        self.service_state = ServiceState.CREATE_JUST
        client = self._client
        if client is not None and client.consumer_table.get(self._group_wire) is self:  # type: ignore[comparison-overlap]
            await client.unregister_consumer(self._group_wire)
            await client.shutdown()

    async def _join(self) -> None:
        """After start: routes of every subscribed topic, a heartbeat, then a rebalance."""
        client = self.client
        for topic in list(self.rebalance_impl.subscription_inner):
            await client.update_topic_route_info_from_name_server(topic)
        # a broker that cannot filter by SQL92 fails start() here, as Java's checkClientInBroker does
        subscriptions = self.rebalance_impl.subscription_inner.values()
        await check_client_in_broker(client, self._group_wire, subscriptions, on_failure=self.shutdown)
        await client.send_heartbeat_to_all_brokers()

    async def _persist_at_shutdown(self, queues: Collection[MessageQueue]) -> None:
        try:
            await self.offset_store.persist_all(set(queues))
        except Exception as e:
            log.warning("persistConsumerOffset at shutdown failed: %s", e)

    async def _leave(self) -> None:
        """Unregister from the brokers and release the client instance."""
        client = self.client
        await client.unregister_consumer(self._group_wire)
        await client.shutdown()

    # -- what the MQClientInstance drives ----------------------------------------------------------

    def _owned_queues(self) -> Collection[MessageQueue]:
        raise NotImplementedError

    async def persist_consumer_offset(self) -> None:
        if self.service_state is ServiceState.RUNNING:
            await self.offset_store.persist_all(set(self._owned_queues()))

    def consumer_data(self) -> ConsumerData:
        cfg = self.config
        return ConsumerData(
            group_name=self._group_wire,
            consume_type=self.CONSUME_TYPE,
            message_model=cfg.message_model,
            consume_from_where=cfg.consume_from_where,
            subscription_data_set=tuple(self.rebalance_impl.subscription_inner.values()),
            unit_mode=cfg.unit_mode,
        )

    def subscriptions(self) -> Collection[str]:
        return list(self.rebalance_impl.subscription_inner)

    def update_topic_subscribe_info(self, topic: str, queues: list[MessageQueue]) -> None:
        if topic in self.rebalance_impl.subscription_inner:
            self.rebalance_impl.topic_subscribe_info_table[topic] = set(queues)

    # -- pulls -------------------------------------------------------------------------------------

    def _check_reachable(self, topic: str, exc: BaseException) -> None:
        """A pull found no broker at its address: the route may be stale (a controller-mode
        failover moved the master), so fetch it now rather than at the 30 s poll."""
        if isinstance(exc, RemotingError) and self._client is not None:
            self._client.refresh_route_soon(topic)

    def _exception_delay(self) -> float:
        client = self._client
        ms = client.config.pull_time_delay_mills_when_exception if client is not None else 1000
        return ms / 1000.0

    def _count_pull(self, topic: str, begin: float, found: int) -> None:
        """Pull round-trip and messages found, for consumer stats."""
        self.stats.inc_pull_rt(self._group_wire, topic, (time.monotonic() - begin) * 1000.0)
        if found:
            self.stats.inc_pull_tps(self._group_wire, topic, found)
