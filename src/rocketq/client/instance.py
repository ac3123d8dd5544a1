"""MQClientInstance: what every producer and consumer of one client id shares (one per client id
per event loop, get-or-create through ``MQClientManager``).

It owns the connections (one RemotingClient), the RPC layer, the route and broker-address tables
and the scheduled tasks: name-server address lookup (when none is configured), route refresh,
heartbeat + offline-broker clean-up, consumer offset persistence, and the rebalance service
(started with the first consumer). Brokers reach it over the same connections: a
NOTIFY_CONSUMER_IDS_CHANGED wakes the rebalance at once.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import os
import random
import threading
import time
import zlib
from collections.abc import Awaitable, Callable, Collection, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from rocketq.client import nsaddr
from rocketq.client.api import MQClientAPI
from rocketq.client.condition_log import ConditionLog
from rocketq.client.config import DEFAULT_INSTANCE_NAME, ClientConfig, ServiceState
from rocketq.client.remoting_processor import ClientRemotingProcessor
from rocketq.client.route import (
    RouteRefresher,
    TopicPublishInfo,
    clip_default_route,
    publish_info_from_route,
    subscribe_queues_from_route,
)
from rocketq.client.security import configure_transport
from rocketq.codec.bodies import ConsumerData, HeartbeatData, MessageQueue, ProducerData, TopicRouteData
from rocketq.errors import MQClientError, ServerError, ServiceStateError, TopicNotExist
from rocketq.remoting import RemotingClient

if TYPE_CHECKING:
    from rocketq.client.producer.producer import Producer

__all__ = ["ConsumerImpl", "MQClientInstance", "MQClientManager", "ProducerImpl"]

log = logging.getLogger("rocketq.client")

MASTER_ID = 0
FETCH_NAMESRV_INTERVAL = 120.0  # s, as RocketMQ's fetchNameServerAddr task
CLIENT_INNER_PRODUCER_GROUP = "CLIENT_INNER_PRODUCER"
# What a broker answers GET_CONSUMER_LIST_BY_GROUP for a group it has no heartbeat of.
NO_CONSUMER_REMARK = "no consumer for this group"


class ProducerImpl(Protocol):
    """What the instance needs of a producer."""

    def update_topic_publish_info(self, topic: str, info: TopicPublishInfo) -> None: ...

    def publish_topics(self) -> Collection[str]: ...


class ConsumerImpl(Protocol):
    """What the instance needs of a consumer (push or lite pull)."""

    async def do_rebalance(self) -> None: ...

    async def persist_consumer_offset(self) -> None: ...

    def consumer_data(self) -> ConsumerData: ...

    def subscriptions(self) -> Collection[str]: ...

    def update_topic_subscribe_info(self, topic: str, queues: list[MessageQueue]) -> None: ...


def _route_key(route: TopicRouteData) -> tuple[Any, ...]:
    # Name servers do not promise an order: compare routes sorted, as topicRouteDataIsChange does.
    return (
        tuple(sorted(route.queue_datas)),
        tuple(sorted((bd.broker_name, tuple(sorted(bd.broker_addrs.items()))) for bd in route.broker_datas)),
        route.order_topic_conf,
    )


class MQClientInstance:
    def __init__(self, config: ClientConfig, client_id: str) -> None:
        self.config = config.client_config()
        self.client_id = client_id
        self.loop = asyncio.get_running_loop()
        self.remoting_client = RemotingClient(
            connect_timeout=self.config.connect_timeout_millis / 1000.0,
            idle_timeout=float(self.config.client_channel_max_idle_time_seconds) or None,
        )
        configure_transport(self.remoting_client, self.config)
        self.api = MQClientAPI(self.remoting_client, self.config)
        self.producer_table: dict[str, ProducerImpl] = {}
        self.consumer_table: dict[str, ConsumerImpl] = {}
        # broker name -> {broker id: address}
        self.broker_addr_table: dict[str, dict[int, str]] = {}
        # broker name -> {address: version the broker answered the heartbeat with}
        self.broker_version_table: dict[str, dict[str, int]] = {}
        self.topic_route_table: dict[str, TopicRouteData] = {}
        self.service_state = ServiceState.CREATE_JUST
        self.boot_timestamp = int(time.time() * 1000)
        self._tasks: list[asyncio.Task[None]] = []
        self._start_lock = asyncio.Lock()
        self._heartbeat_lock = asyncio.Lock()
        self._reset_lock = asyncio.Lock()  # one admin reset at a time (RocketMQ: synchronized)
        self._route_fetches: dict[tuple[str, str | None], asyncio.Future[bool]] = {}
        self._route_refresher = RouteRefresher(self.update_topic_route_info_from_name_server)
        self._rebalance_service: Any = None
        self._inner_producer: Producer | None = None
        self._conditions = ConditionLog(log)

    def __repr__(self) -> str:
        return f"MQClientInstance({self.client_id}, {self.service_state.name})"

    # -- lifecycle --------------------------------------------------------------------------------

    async def start(self) -> None:
        """Start once (later calls return at once); START_FAILED instances refuse to start again."""
        async with self._start_lock:
            state = self.service_state
            if state is ServiceState.RUNNING:
                return
            if state is not ServiceState.CREATE_JUST:
                raise ServiceStateError(f"The Factory object[{self.client_id}] has been created before, "
                                        f"and failed, state {state.name}")
            self.service_state = ServiceState.START_FAILED
            addr = await nsaddr.find_namesrv_addr(self.config)
            if addr:
                self.api.update_name_server_address_list(addr)
            else:
                log.warning(
                    "no name server address configured; looking it up every %.0f s", FETCH_NAMESRV_INTERVAL
                )
            ClientRemotingProcessor(self).register(self.remoting_client)
            self._start_scheduled_tasks(fetch_namesrv=not self.config.namesrv_addr)
            if self.consumer_table:
                self._start_rebalance_service()
            self.service_state = ServiceState.RUNNING
            log.info("the client factory [%s] start OK", self.client_id)

    def in_use(self) -> bool:
        return bool(self.consumer_table) or any(g != CLIENT_INNER_PRODUCER_GROUP for g in self.producer_table)

    async def shutdown(self) -> None:
        """Stop, unless a producer or consumer still uses this instance."""
        if self.in_use() or self.service_state is not ServiceState.RUNNING:
            if self.service_state is ServiceState.CREATE_JUST and not self.in_use():
                MQClientManager.remove(self)
            return
        self.service_state = ServiceState.SHUTDOWN_ALREADY
        if self._inner_producer is not None:
            inner, self._inner_producer = self._inner_producer, None
            await inner.shutdown()
        tasks, self._tasks = self._tasks, []
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if self._rebalance_service is not None:
            service, self._rebalance_service = self._rebalance_service, None
            result = service.shutdown()
            if inspect.isawaitable(result):
                await result
        await self.remoting_client.close()
        MQClientManager.remove(self)
        log.info("the client factory [%s] shutdown OK", self.client_id)

    # -- registration -------------------------------------------------------------------------------

    def register_producer(self, group: str, producer: ProducerImpl) -> bool:
        """False if the group already has a producer in this instance."""
        if group in self.producer_table:
            log.warning("the producer group[%s] exist already.", group)
            return False
        self.producer_table[group] = producer
        return True

    async def unregister_producer(self, group: str) -> None:
        if self.producer_table.pop(group, None) is not None:
            await self._unregister_client(producer_group=group)

    def register_consumer(self, group: str, consumer: ConsumerImpl) -> bool:
        """False if the group already has a consumer in this instance."""
        if group in self.consumer_table:
            log.warning("the consumer group[%s] exist already.", group)
            return False
        self.consumer_table[group] = consumer
        if self.service_state is ServiceState.RUNNING:
            self._start_rebalance_service()
        return True

    async def unregister_consumer(self, group: str) -> None:
        if self.consumer_table.pop(group, None) is not None:
            await self._unregister_client(consumer_group=group)

    async def _unregister_client(
        self, producer_group: str | None = None, consumer_group: str | None = None
    ) -> None:
        addrs = [a for by_id in self.broker_addr_table.values() for a in by_id.values()]
        results = await asyncio.gather(
            *(self.api.unregister_client(a, self.client_id, producer_group, consumer_group) for a in addrs),
            return_exceptions=True,
        )
        for addr, result in zip(addrs, results, strict=True):
            if isinstance(result, BaseException):
                log.warning("unregister client[Producer: %s Consumer: %s] from broker[%s] exception: %s",
                            producer_group, consumer_group, addr, result)
            else:
                log.info("unregister client[Producer: %s Consumer: %s] from broker[%s] success",
                         producer_group, consumer_group, addr)

    async def default_producer(self) -> Producer:
        """The instance's own producer (CLIENT_INNER_PRODUCER), used to re-send messages to
        %RETRY% topics when CONSUMER_SEND_MSG_BACK fails; started on first use."""
        if self._inner_producer is None:
            from rocketq.client.producer.producer import Producer  # the producer module imports this one

            producer = Producer(CLIENT_INNER_PRODUCER_GROUP, config_base=self.config)
            self._inner_producer = producer
            await producer.start_inner(self)
        return self._inner_producer

    # -- routes -----------------------------------------------------------------------------------

    async def update_topic_route_info_from_name_server(
        self, topic: str, default_topic: str | None = None, default_topic_queue_nums: int = 4
    ) -> bool:
        """Fetch ``topic``'s route (or, with ``default_topic``, the template's route cut to
        ``default_topic_queue_nums`` queues) and hand it to every producer and consumer.

        False when the name server has no such route or cannot be reached (logged). Concurrent
        calls for one topic share one request.
        """
        key = (topic, default_topic)
        pending = self._route_fetches.get(key)
        if pending is not None:
            return await asyncio.shield(pending)
        fut: asyncio.Future[bool] = self.loop.create_future()
        self._route_fetches[key] = fut
        try:
            ok = await self._update_route(topic, default_topic, default_topic_queue_nums)
            fut.set_result(ok)
            return ok
        except BaseException as e:
            fut.set_exception(e)
            fut.exception()  # nobody else may be waiting; keep asyncio quiet
            raise
        finally:
            del self._route_fetches[key]

    async def _update_route(self, topic: str, default_topic: str | None, queue_nums: int) -> bool:
        try:
            if default_topic is not None:
                route = await self.api.get_topic_route_info_from_name_server(default_topic)
                route = clip_default_route(route, queue_nums)
            else:
                route = await self.api.get_topic_route_info_from_name_server(topic)
        except TopicNotExist:
            log.debug("get Topic [%s] RouteInfoFromNameServer is not exist value", default_topic or topic)
            return False
        except MQClientError as e:
            log.warning("updateTopicRouteInfoFromNameServer %s failed: %s", topic, e)
            return False
        except Exception as e:  # transport trouble: the next refresh tries again
            if e is self.api.namesrv_failure:  # already said, once per outage, by the API
                log.debug("updateTopicRouteInfoFromNameServer %s exception: %s", topic, e)
            else:
                log.warning("updateTopicRouteInfoFromNameServer %s exception: %s", topic, e)
            return False
        if self.apply_route(topic, route) and self.consumer_table:
            # A broker this client never heartbeated to (a topic created after our consumers
            # subscribed) does not know our consumers yet: it would answer the rebalance's
            # consumer-list query with "no consumer for this group" until the next 30 s heartbeat.
            await self.send_heartbeat_to_all_brokers()
        return True

    def apply_route(self, topic: str, route: TopicRouteData) -> bool:
        """Record ``route`` for ``topic`` and pass the derived queues to producers and consumers;
        True when it names a broker address this client did not know."""
        old = self.topic_route_table.get(topic)
        if old is None or _route_key(old) != _route_key(route):
            log.info("the topic[%s] route info changed, old[%s], new[%s]", topic, old, route)
        known = {a for addrs in self.broker_addr_table.values() for a in addrs.values()}
        new_broker = False
        for bd in route.broker_datas:
            new_broker = new_broker or not known.issuperset(bd.broker_addrs.values())
            self.broker_addr_table[bd.broker_name] = dict(bd.broker_addrs)
        publish = publish_info_from_route(topic, route)
        for producer in self.producer_table.values():
            producer.update_topic_publish_info(topic, publish)
        if self.consumer_table:
            queues = subscribe_queues_from_route(topic, route)
            for consumer in self.consumer_table.values():
                if topic in consumer.subscriptions():
                    consumer.update_topic_subscribe_info(topic, list(queues))
        self.topic_route_table[topic] = route
        return new_broker

    def refresh_route_soon(self, topic: str) -> None:
        """A broker of `topic`'s route could not be reached: fetch the route now (rate-limited)."""
        self._route_refresher.request(topic)

    async def update_topic_route_info_from_name_server_all(self) -> None:
        topics: set[str] = set()
        for consumer in self.consumer_table.values():
            topics.update(consumer.subscriptions())
        for producer in self.producer_table.values():
            topics.update(producer.publish_topics())
        if topics:
            await asyncio.gather(*(self.update_topic_route_info_from_name_server(t) for t in sorted(topics)))

    def get_subscribe_queues(self, topic: str) -> list[MessageQueue]:
        """The readable queues of ``topic`` from the cached route (sorted; [] if unknown)."""
        route = self.topic_route_table.get(topic)
        return subscribe_queues_from_route(topic, route) if route is not None else []

    async def fetch_subscribe_message_queues(self, topic: str) -> list[MessageQueue]:
        """Refresh ``topic``'s route, then its readable queues; TopicRouteNotFound if it has none."""
        await self.update_topic_route_info_from_name_server(topic)
        queues = self.get_subscribe_queues(topic)
        if not queues:
            raise self.api.route_error(topic, "Can not find Message Queue for this topic")
        return queues

    # -- brokers ----------------------------------------------------------------------------------

    def find_broker_address_in_publish(self, broker_name: str) -> str | None:
        addrs = self.broker_addr_table.get(broker_name)
        return addrs.get(MASTER_ID) if addrs else None

    def find_broker_address_in_subscribe(
        self, broker_name: str, broker_id: int = MASTER_ID, only_this_broker: bool = False
    ) -> str | None:
        """The address of broker ``broker_id`` of ``broker_name``; any of its addresses if that
        one is unknown (unless ``only_this_broker``)."""
        addrs = self.broker_addr_table.get(broker_name)
        if not addrs:
            return None
        addr = addrs.get(broker_id)
        if addr is None and not only_this_broker:
            addr = next(iter(addrs.values()), None)
        return addr

    def find_broker_addr_by_topic(self, topic: str) -> str | None:
        """Some broker that serves ``topic`` (its master when known), picked at random."""
        route = self.topic_route_table.get(topic)
        if route is None or not route.broker_datas:
            return None
        bd = random.choice(route.broker_datas)
        addrs = bd.broker_addrs
        return addrs.get(MASTER_ID) or next(iter(addrs.values()), None)

    async def find_consumer_id_list(self, topic: str, group: str) -> list[str] | None:
        """Client ids of ``group``'s live consumers; None (not []) when no broker could be asked,
        so a caller can tell "nobody there" from "could not find out"."""
        addr = self.find_broker_addr_by_topic(topic)
        if addr is None:
            await self.update_topic_route_info_from_name_server(topic)
            addr = self.find_broker_addr_by_topic(topic)
        if addr is None:
            return None
        try:
            ids = await self.api.get_consumer_id_list_by_group(addr, group)
        except ServerError as e:
            # The broker answers "no consumer for this group" until our first heartbeat lands.
            self._conditions.report(
                ("consumer ids", group), (addr, e.code),
                "getConsumerIdListByGroup %s from %s: %s (expected until the group's heartbeat arrives)",
                group, addr, e.remark,
            )
            if NO_CONSUMER_REMARK not in str(e.remark) or group not in self.consumer_table:
                return None
            # It restarted, expired us, or learnt of us just now: a heartbeat now rather than
            # at the next 30 s tick, and ask again.
            await self.send_heartbeat_to_all_brokers()
            try:
                ids = await self.api.get_consumer_id_list_by_group(addr, group)
            except Exception:
                return None
        except Exception as e:
            log.warning("getConsumerIdListByGroup exception, %s %s: %s", addr, group, e)
            return None
        self._conditions.clear(("consumer ids", group))
        return ids

    def clean_offline_broker(self) -> None:
        """Forget broker addresses that no known route mentions any more."""
        live = {
            addr for route in self.topic_route_table.values() for bd in route.broker_datas
            for addr in bd.broker_addrs.values()
        }
        for name in list(self.broker_addr_table):
            addrs = self.broker_addr_table[name]
            kept = {bid: a for bid, a in addrs.items() if a in live}
            if len(kept) != len(addrs):
                gone = set(addrs.values()) - set(kept.values())
                log.info("the broker[%s] addrs %s offline, remove it", name, gone)
            if kept:
                self.broker_addr_table[name] = kept
            else:
                del self.broker_addr_table[name]
                self.broker_version_table.pop(name, None)

    # -- heartbeats -------------------------------------------------------------------------------

    def heartbeat_data(self) -> HeartbeatData:
        return HeartbeatData(
            client_id=self.client_id,
            producer_data_set=tuple(ProducerData(g) for g in self.producer_table),
            consumer_data_set=tuple(c.consumer_data() for c in self.consumer_table.values()),
        )

    async def send_heartbeat_to_all_brokers(self) -> None:
        """HEART_BEAT to every master (and, with consumers, every slave too). Failures are logged."""
        async with self._heartbeat_lock:
            data = self.heartbeat_data()
            if not data.producer_data_set and not data.consumer_data_set:
                return
            targets = [
                (name, bid, addr)
                for name, addrs in self.broker_addr_table.items()
                for bid, addr in addrs.items()
                if data.consumer_data_set or bid == MASTER_ID
            ]
            if not targets:
                return
            results = await asyncio.gather(
                *(self.api.send_heartbeat(addr, data) for _, _, addr in targets), return_exceptions=True
            )
            for (name, _, addr), result in zip(targets, results, strict=True):
                if isinstance(result, BaseException):
                    log.warning("send heart beat to broker[%s %s] failed: %s", name, addr, result)
                else:
                    self.broker_version_table.setdefault(name, {})[addr] = result

    # -- consumers --------------------------------------------------------------------------------

    def rebalance_immediately(self) -> None:
        """Wake the rebalance service now instead of at its next 20 s tick."""
        if self._rebalance_service is not None:
            self._rebalance_service.wakeup()

    async def do_rebalance(self) -> None:
        """One rebalance of every consumer (what the rebalance service runs)."""
        for group, consumer in list(self.consumer_table.items()):
            try:
                await consumer.do_rebalance()
            except Exception:
                log.exception("doRebalance of group %s failed", group)

    async def persist_all_consumer_offset(self) -> None:
        for group, consumer in list(self.consumer_table.items()):
            try:
                await consumer.persist_consumer_offset()
            except Exception:
                log.exception("persistConsumerOffset of group %s failed", group)

    # -- what brokers ask on an admin's behalf -------------------------------------------------------

    async def reset_offset(self, topic: str, group: str, offsets: Mapping[MessageQueue, int]) -> None:
        """RESET_CONSUMER_CLIENT_OFFSET: a push consumer of ``group`` restarts ``topic`` at ``offsets``."""
        consumer = self.consumer_table.get(group)
        reset = getattr(consumer, "reset_offset", None)
        if reset is None:
            log.info("[reset-offset] consumer does not exist. group=%s", group)
            return
        async with self._reset_lock:
            await reset(topic, offsets)

    def get_consumer_status(self, topic: str, group: str) -> dict[MessageQueue, int]:
        """GET_CONSUMER_STATUS_FROM_CLIENT: this client's offsets of ``group``'s queues of ``topic``."""
        store = getattr(self.consumer_table.get(group), "offset_store", None)
        return store.clone_offset_table(topic) if store is not None else {}

    def _start_rebalance_service(self) -> None:
        if self._rebalance_service is not None:
            return
        # Imported on first use: an instance with only producers never needs consumer code.
        from rocketq.client.rebalance.service import RebalanceService

        self._rebalance_service = RebalanceService(self)
        self._rebalance_service.start()

    # -- scheduled tasks --------------------------------------------------------------------------

    def _start_scheduled_tasks(self, fetch_namesrv: bool) -> None:
        cfg = self.config
        if fetch_namesrv:
            self._schedule("fetchNameServerAddr", 10.0, lambda: FETCH_NAMESRV_INTERVAL, self._fetch_namesrv)
        self._schedule(
            "updateTopicRouteInfoFromNameServer", 0.01, lambda: cfg.poll_name_server_interval / 1000.0,
            self.update_topic_route_info_from_name_server_all,
        )
        self._schedule(
            "sendHeartbeatToAllBroker", 1.0, lambda: cfg.heartbeat_broker_interval / 1000.0,
            self._heartbeat_tick,
        )
        self._schedule(
            "persistAllConsumerOffset", 10.0, lambda: cfg.persist_consumer_offset_interval / 1000.0,
            self.persist_all_consumer_offset,
        )

    def _schedule(
        self,
        name: str,
        first_delay: float,
        interval: Callable[[], float],
        action: Callable[[], Awaitable[None]],
    ) -> None:
        async def run() -> None:
            await asyncio.sleep(first_delay)
            while True:
                try:
                    await action()
                except asyncio.CancelledError:
                    raise
                except Exception:
                    log.exception("ScheduledTask %s exception", name)
                await asyncio.sleep(interval())

        self._tasks.append(self.loop.create_task(run(), name=f"rocketq-{name}-{self.client_id}"))

    async def _fetch_namesrv(self) -> None:
        addr = await nsaddr.fetch_from_configured_server(self.config)
        if addr:
            self.api.update_name_server_address_list(addr)

    async def _heartbeat_tick(self) -> None:
        self.clean_offline_broker()
        await self.send_heartbeat_to_all_brokers()


class MQClientManager:
    """The per-process registry of instances (RocketMQ's MQClientManager): get-or-create by id.

    An instance lives on one event loop. A client with the default instance name that starts on
    another loop (the sync facade's background loop next to an asyncio application, one loop per
    test) gets an id of its own for that loop; a client with an explicit ``instance_name`` whose
    id is already in use on another running loop is refused, since two instances under one id
    would confuse the brokers' view of the consumer group.
    """

    _lock = threading.Lock()
    _table: dict[str, MQClientInstance] = {}
    _loop_names: dict[int, tuple[asyncio.AbstractEventLoop, str]] = {}

    @classmethod
    def get_or_create(cls, config: ClientConfig) -> MQClientInstance:
        loop = asyncio.get_running_loop()
        with cls._lock:
            client_id = config.client_id()
            inst = cls._usable(cls._table.get(client_id))
            if inst is not None and inst.loop is not loop:
                if config.instance_name != DEFAULT_INSTANCE_NAME:
                    raise MQClientError(
                        f"the client id {client_id} is in use on another event loop; "
                        "give this client its own instance_name"
                    )
                config = config.replace(instance_name=cls._loop_instance_name(loop))
                client_id = config.client_id()
                inst = cls._usable(cls._table.get(client_id))
            if inst is not None and inst.config.transport_key() != config.transport_key():
                # Other credentials or TLS settings: an instance (and client id) of its own.
                config = config.replace(instance_name=f"{config.resolved_instance_name()}#"
                                        f"{zlib.crc32(repr(config.transport_key()).encode()):08x}")
                client_id = config.client_id()
                inst = cls._usable(cls._table.get(client_id))
            if inst is None:
                inst = MQClientInstance(config, client_id)
                cls._table[client_id] = inst
                log.info("Created new MQClientInstance for clientId:[%s]", client_id)
            return inst

    @staticmethod
    def _usable(inst: MQClientInstance | None) -> MQClientInstance | None:
        if inst is None or inst.loop.is_closed() or inst.service_state is ServiceState.SHUTDOWN_ALREADY:
            return None
        return inst

    @classmethod
    def _loop_instance_name(cls, loop: asyncio.AbstractEventLoop) -> str:
        for key, (known, _) in list(cls._loop_names.items()):
            if known.is_closed():
                del cls._loop_names[key]
        entry = cls._loop_names.get(id(loop))
        if entry is None or entry[0] is not loop:
            entry = (loop, f"{os.getpid()}#{time.monotonic_ns()}")
            cls._loop_names[id(loop)] = entry
        return entry[1]

    @classmethod
    def remove(cls, inst: MQClientInstance) -> None:
        with cls._lock:
            if cls._table.get(inst.client_id) is inst:
                del cls._table[inst.client_id]

    @classmethod
    def instances(cls) -> list[MQClientInstance]:
        with cls._lock:
            return list(cls._table.values())
