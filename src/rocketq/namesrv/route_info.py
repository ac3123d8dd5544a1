"""RouteInfoManager: the name server's in-memory route tables (RocketMQ's names and semantics).

Pure state: no sockets, no files, no clock of its own (one is injected), so every rule below is
unit-tested without a server. The controller owns the I/O around it: it closes the channels this
module reports expired and feeds it channel-close events.

Tables, as in RocketMQ:

* ``topicQueueTable``   topic -> brokerName -> QueueData (read/write queue counts, perm, sysflag)
* ``brokerAddrTable``   brokerName -> cluster, {brokerId: addr}
* ``clusterAddrTable``  clusterName -> {brokerName}
* ``brokerLiveTable``   (clusterName, brokerAddr) -> last register time, timeout, DataVersion,
                        channel, haServerAddr
* ``filterServerTable`` (clusterName, brokerAddr) -> filter server addresses
* ``topicQueueMappingInfoTable`` topic -> brokerName -> mapping info (static topics; passed through)

Everything runs on one event loop, so there are no locks; ``epoch`` counts mutations so callers
can cache encoded answers (the route JSON) until the tables change.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from rocketq.codec.bodies import (
    BrokerData,
    ClusterInfo,
    DataVersion,
    QueueData,
    TopicConfig,
    TopicConfigSerializeWrapper,
    TopicList,
    TopicRouteData,
)

log = logging.getLogger(__name__)

MASTER_ID = 0
PERM_READ = 4
PERM_WRITE = 2
TOPIC_SYS_FLAG_UNIT = 0x1
TOPIC_SYS_FLAG_UNIT_SUB = 0x2
DEFAULT_BROKER_CHANNEL_EXPIRED_TIME = 120_000

BrokerAddrInfo = tuple[str, str]
"""(clusterName, brokerAddr): the key of the live and filter-server tables, as in RocketMQ 5."""


def _monotonic_ms() -> int:
    return time.monotonic_ns() // 1_000_000


@dataclass(slots=True)
class BrokerLiveInfo:
    """What the last REGISTER_BROKER (or QUERY_DATA_VERSION) told us about one broker address."""

    last_update_timestamp: int
    heartbeat_timeout_millis: int  # 0: the broker named none, brokerChannelExpiredTime applies
    data_version: DataVersion
    channel: Any
    ha_server_addr: str


@dataclass(slots=True)
class _BrokerEntry:
    cluster: str
    broker_name: str
    broker_addrs: dict[int, str] = field(default_factory=dict)
    zone_name: str | None = None
    enable_acting_master: bool = False

    def snapshot(self) -> BrokerData:
        # Sorted ids: fastjson's MapSortField order, and a stable answer for every client.
        return BrokerData(
            self.cluster,
            self.broker_name,
            dict(sorted(self.broker_addrs.items())),
            self.zone_name,
            self.enable_acting_master,
        )


@dataclass(frozen=True, slots=True)
class RegisterBrokerResult:
    """Filled for a slave whose master is alive: where to replicate from."""

    ha_server_addr: str | None = None
    master_addr: str | None = None


@dataclass(frozen=True, slots=True)
class ExpiredBroker:
    """A broker the scan dropped; the caller closes its channel."""

    cluster_name: str
    broker_addr: str
    channel: Any
    timeout_millis: int


class RouteInfoManager:
    """RocketMQ's RouteInfoManager over plain dicts."""

    def __init__(
        self,
        *,
        broker_channel_expired_time: int = DEFAULT_BROKER_CHANNEL_EXPIRED_TIME,
        clock: Callable[[], int] = _monotonic_ms,
    ) -> None:
        self.broker_channel_expired_time = broker_channel_expired_time
        self._clock = clock
        self._topic_queue: dict[str, dict[str, QueueData]] = {}
        self._brokers: dict[str, _BrokerEntry] = {}
        self._clusters: dict[str, set[str]] = {}
        self._live: dict[BrokerAddrInfo, BrokerLiveInfo] = {}
        self._filter_servers: dict[BrokerAddrInfo, tuple[str, ...]] = {}
        self._topic_queue_mapping: dict[str, dict[str, Any]] = {}
        self.epoch = 0

    # -- registration ------------------------------------------------------------------------------

    def register_broker(
        self,
        cluster_name: str,
        broker_addr: str,
        broker_name: str,
        broker_id: int,
        ha_server_addr: str,
        topic_config_wrapper: TopicConfigSerializeWrapper | None,
        filter_server_list: Sequence[str] | None = None,
        channel: Any = None,
        *,
        timeout_millis: int | None = None,
        enable_acting_master: bool | None = None,
        zone_name: str | None = None,
    ) -> RegisterBrokerResult:
        # Brokers re-register every 30 s, nearly always unchanged: the epoch (and with it every
        # cached route) only moves when a table really changes.
        changed = False
        names = self._clusters.setdefault(cluster_name, set())
        if broker_name not in names:
            names.add(broker_name)
            changed = True

        entry = self._brokers.get(broker_name)
        register_first = entry is None
        if entry is None:
            entry = _BrokerEntry(cluster_name, broker_name)
            self._brokers[broker_name] = entry
            changed = True
        # A broker too old to send enableActingMaster never takes part in acting-master mode.
        old_version_broker = enable_acting_master is None
        if entry.enable_acting_master != bool(enable_acting_master):
            entry.enable_acting_master = bool(enable_acting_master)
            changed = True
        if zone_name is not None and entry.zone_name != zone_name:
            entry.zone_name = zone_name
            changed = True

        addrs = entry.broker_addrs
        # One address holds one id: a slave promoted to master re-registers as id 0 from the
        # same ip:port, and its old <id, addr> row must go.
        for stale_id in [i for i, a in addrs.items() if a == broker_addr and i != broker_id]:
            del addrs[stale_id]
            changed = True

        new_version = (topic_config_wrapper.data_version if topic_config_wrapper else None) or DataVersion(
            0, 0, 0
        )
        old_addr = addrs.get(broker_id)
        if old_addr is not None and old_addr != broker_addr:
            old_live = self._live.get((cluster_name, old_addr))
            if old_live is not None and old_live.data_version.state_version > new_version.state_version:
                log.warning(
                    "Registering Broker conflicts with the existed one, just ignore.: Cluster:%s, "
                    "BrokerName:%s, BrokerId:%s, Old BrokerAddr:%s, Old Version:%s, New BrokerAddr:%s, "
                    "New Version:%s.",
                    cluster_name,
                    broker_name,
                    broker_id,
                    old_addr,
                    old_live.data_version.state_version,
                    broker_addr,
                    new_version.state_version,
                )
                self._live.pop((cluster_name, broker_addr), None)
                if changed:
                    self.epoch += 1
                return RegisterBrokerResult()

        if old_addr != broker_addr:
            addrs[broker_id] = broker_addr
            changed = True
        register_first = register_first or old_addr is None

        is_master = broker_id == MASTER_ID
        is_prime_slave = not old_version_broker and not is_master and broker_id == min(addrs)
        addr_info = (cluster_name, broker_addr)
        if topic_config_wrapper is not None and (is_master or is_prime_slave):
            config_changed = self.is_broker_topic_config_changed(cluster_name, broker_addr, new_version)
            for config in topic_config_wrapper.topic_config_table.values():
                if (
                    register_first
                    or config_changed
                    or self._missing_queue_data(config.topic_name, broker_name)
                ):
                    perm = config.perm
                    if is_prime_slave and entry.enable_acting_master:
                        # The surviving slave with the lowest id acts as master, read-only.
                        perm &= ~PERM_WRITE
                    changed |= self._create_and_update_queue_data(broker_name, config, perm)
            if config_changed or register_first:
                for topic, info in (topic_config_wrapper.topic_queue_mapping_info_map or {}).items():
                    bname = info.get("bname", broker_name) if isinstance(info, dict) else broker_name
                    self._topic_queue_mapping.setdefault(topic, {})[str(bname)] = info
                    changed = True

        prev = self._live.get(addr_info)
        self._live[addr_info] = BrokerLiveInfo(
            self._clock(),
            timeout_millis or 0,
            new_version,
            channel,
            ha_server_addr,
        )
        if prev is None:
            log.info("new broker registered, %s HAService: %s", broker_addr, ha_server_addr)

        if filter_server_list is not None:
            servers = tuple(filter_server_list)
            if self._filter_servers.get(addr_info, ()) != servers:
                changed = True
            if servers:
                self._filter_servers[addr_info] = servers
            else:
                self._filter_servers.pop(addr_info, None)
        if changed:
            self.epoch += 1

        if not is_master:
            master_addr = addrs.get(MASTER_ID)
            if master_addr is not None:
                master_live = self._live.get((cluster_name, master_addr))
                if master_live is not None:
                    return RegisterBrokerResult(master_live.ha_server_addr, master_addr)
        return RegisterBrokerResult()

    def _missing_queue_data(self, topic: str, broker_name: str) -> bool:
        # Re-adds a topic an admin deleted from the name server while the broker still serves it.
        qd_map = self._topic_queue.get(topic)
        return not qd_map or broker_name not in qd_map

    def _create_and_update_queue_data(self, broker_name: str, config: TopicConfig, perm: int) -> bool:
        queue_data = QueueData(
            broker_name, config.read_queue_nums, config.write_queue_nums, perm, config.topic_sys_flag
        )
        qd_map = self._topic_queue.get(config.topic_name)
        if qd_map is None:
            self._topic_queue[config.topic_name] = {broker_name: queue_data}
            log.info("new topic registered, %s %s", config.topic_name, queue_data)
            return True
        old = qd_map.get(broker_name)
        if old == queue_data:
            return False
        if old is None:
            log.info("new topic registered, %s %s", config.topic_name, queue_data)
        else:
            log.info("topic changed, %s OLD: %s NEW: %s", config.topic_name, old, queue_data)
        qd_map[broker_name] = queue_data
        return True

    def is_broker_topic_config_changed(
        self, cluster_name: str, broker_addr: str, data_version: DataVersion | None
    ) -> bool:
        prev = self._live.get((cluster_name, broker_addr))
        return prev is None or prev.data_version != data_version

    def query_broker_topic_config(self, cluster_name: str, broker_addr: str) -> DataVersion | None:
        live = self._live.get((cluster_name, broker_addr))
        return None if live is None else live.data_version

    def update_broker_info_update_timestamp(self, cluster_name: str, broker_addr: str) -> None:
        live = self._live.get((cluster_name, broker_addr))
        if live is not None:
            live.last_update_timestamp = self._clock()

    # -- unregistration, expiry, channel close ------------------------------------------------------

    def knows_broker(self, broker_name: str) -> bool:
        """Whether some address of ``broker_name`` is registered (the ACL's ownership check)."""
        return broker_name in self._brokers

    def unregister_broker(
        self, cluster_name: str, broker_addr: str, broker_name: str, broker_id: int
    ) -> None:
        self.epoch += 1
        addr_info = (cluster_name, broker_addr)
        removed_live = self._live.pop(addr_info, None)
        log.info(
            "unregisterBroker, remove from brokerLiveTable %s, %s",
            "OK" if removed_live is not None else "Failed",
            addr_info,
        )
        self._filter_servers.pop(addr_info, None)

        remove_broker_name = False
        entry = self._brokers.get(broker_name)
        if entry is not None:
            # RocketMQ 5 removes by address, so a stale id from before a role switch goes too.
            for i in [i for i, a in entry.broker_addrs.items() if a == broker_addr]:
                del entry.broker_addrs[i]
                log.info("unregisterBroker, remove addr from brokerAddrTable %s, %s", i, broker_addr)
            if not entry.broker_addrs:
                del self._brokers[broker_name]
                remove_broker_name = True
                log.info("unregisterBroker, remove name from brokerAddrTable OK, %s", broker_name)

        if remove_broker_name:
            names = self._clusters.get(cluster_name)
            if names is not None:
                names.discard(broker_name)
                log.info("unregisterBroker, remove name from clusterAddrTable OK, %s", broker_name)
                if not names:
                    del self._clusters[cluster_name]
                    log.info("unregisterBroker, remove cluster from clusterAddrTable %s", cluster_name)
            self._remove_topic_by_broker_name(broker_name)
        elif entry is not None and entry.enable_acting_master and MASTER_ID not in entry.broker_addrs:
            # The master left and only slaves remain: clients may read but no longer write there.
            for qd_map in self._topic_queue.values():
                qd = qd_map.get(broker_name)
                if qd is not None:
                    qd_map[broker_name] = dataclasses.replace(qd, perm=qd.perm & ~PERM_WRITE)

    def _remove_topic_by_broker_name(self, broker_name: str) -> None:
        for topic in list(self._topic_queue):
            qd_map = self._topic_queue[topic]
            if qd_map.pop(broker_name, None) is not None:
                log.info("removeTopicByBrokerName, remove one broker's topic %s %s", topic, broker_name)
            if not qd_map:
                del self._topic_queue[topic]
                log.info("removeTopicByBrokerName, remove the topic all queue %s", topic)
        for topic in list(self._topic_queue_mapping):
            mapping = self._topic_queue_mapping[topic]
            mapping.pop(broker_name, None)
            if not mapping:
                del self._topic_queue_mapping[topic]

    def _unregister_addr_info(self, addr_info: BrokerAddrInfo) -> bool:
        """Unregister the broker behind (cluster, addr) as an UNREGISTER_BROKER would."""
        cluster_name, broker_addr = addr_info
        for entry in list(self._brokers.values()):
            if entry.cluster != cluster_name:
                continue
            for broker_id, addr in entry.broker_addrs.items():
                if addr == broker_addr:
                    self.unregister_broker(cluster_name, broker_addr, entry.broker_name, broker_id)
                    return True
        self._live.pop(addr_info, None)
        if self._filter_servers.pop(addr_info, None) is not None:
            self.epoch += 1
        return False

    def scan_not_active_broker(self) -> list[ExpiredBroker]:
        """Drop every broker silent for longer than its timeout; returns them so the caller can
        close their channels."""
        now = self._clock()
        # The configured expiry is read now, not when the broker registered: an update of
        # brokerChannelExpiredTime applies to the brokers already registered.
        expired = [
            (addr_info, live, timeout)
            for addr_info, live in self._live.items()
            if live.last_update_timestamp + (timeout := self._timeout_of(live)) < now
        ]
        out = []
        for addr_info, live, timeout in expired:
            del self._live[addr_info]
            log.warning("The broker channel expired, %s %sms", addr_info[1], timeout)
            self._unregister_addr_info(addr_info)
            out.append(ExpiredBroker(addr_info[0], addr_info[1], live.channel, timeout))
        return out

    def _timeout_of(self, live: BrokerLiveInfo) -> int:
        return live.heartbeat_timeout_millis or self.broker_channel_expired_time

    def on_channel_destroy(self, channel: Any) -> list[BrokerAddrInfo]:
        """A connection closed: every broker that registered over it is gone at once."""
        gone = [addr_info for addr_info, live in self._live.items() if live.channel is channel]
        for addr_info in gone:
            log.info("the broker's channel destroyed, %s, clean it's data structure at once", addr_info[1])
            self._unregister_addr_info(addr_info)
        return gone

    # -- topics ------------------------------------------------------------------------------------

    def delete_topic(self, topic: str, cluster_name: str | None = None) -> None:
        """DELETE_TOPIC_IN_NAMESRV: everywhere, or only on the brokers of one cluster."""
        self.epoch += 1
        if not cluster_name:
            if self._topic_queue.pop(topic, None) is not None:
                log.info("deleteTopic, remove the topic all queue %s", topic)
            self._topic_queue_mapping.pop(topic, None)
            return
        qd_map = self._topic_queue.get(topic)
        if qd_map is None:
            return
        for broker_name in self._clusters.get(cluster_name, ()):
            if qd_map.pop(broker_name, None) is not None:
                log.info("deleteTopic, remove one broker's topic %s %s", broker_name, topic)
        if not qd_map:
            del self._topic_queue[topic]
            log.info("deleteTopic, remove the topic all queue %s %s", cluster_name, topic)

    def register_topic(self, topic: str, queue_datas: Iterable[QueueData]) -> list[str]:
        """REGISTER_TOPIC_IN_NAMESRV. All or nothing: returns the unknown broker names, if any,
        and changes nothing then (RocketMQ could leave half a topic behind)."""
        queue_datas = list(queue_datas)
        unknown = [qd.broker_name for qd in queue_datas if qd.broker_name not in self._brokers]
        if unknown or not queue_datas:
            if unknown:
                log.warning("Register topic contains illegal broker, %s, %s", topic, unknown)
            return unknown
        self.epoch += 1
        qd_map = self._topic_queue.setdefault(topic, {})
        for qd in queue_datas:
            qd_map[qd.broker_name] = qd
        log.info("Topic route %s.", qd_map)
        return []

    def operate_write_perm_of_broker(self, broker_name: str, *, wipe: bool) -> int:
        """WIPE_WRITE_PERM_OF_BROKER (drop the write bit) / ADD_WRITE_PERM_OF_BROKER (read+write).
        Returns how many topics were touched."""
        self.epoch += 1
        count = 0
        for qd_map in self._topic_queue.values():
            qd = qd_map.get(broker_name)
            if qd is None:
                continue
            perm = qd.perm & ~PERM_WRITE if wipe else PERM_READ | PERM_WRITE
            qd_map[broker_name] = dataclasses.replace(qd, perm=perm)
            count += 1
        return count

    # -- queries -----------------------------------------------------------------------------------

    def pickup_topic_route_data(self, topic: str) -> TopicRouteData | None:
        """The route of ``topic``, or None when no live broker serves it."""
        qd_map = self._topic_queue.get(topic)
        if not qd_map:
            return None
        broker_datas = []
        filter_table: dict[str, tuple[str, ...]] = {}
        for broker_name in qd_map:
            entry = self._brokers.get(broker_name)
            if entry is None:
                continue
            data = entry.snapshot()
            broker_datas.append(data)
            if self._filter_servers:
                for addr in data.broker_addrs.values():
                    servers = self._filter_servers.get((entry.cluster, addr))
                    if servers:
                        filter_table[addr] = servers
        if not broker_datas:
            return None
        return TopicRouteData(
            queue_datas=tuple(qd_map.values()),
            broker_datas=tuple(broker_datas),
            filter_server_table=filter_table,
            topic_queue_mapping_by_broker=self._topic_queue_mapping.get(topic),
        )

    def get_all_cluster_info(self) -> ClusterInfo:
        return ClusterInfo(
            {name: entry.snapshot() for name, entry in self._brokers.items()},
            {cluster: tuple(sorted(names)) for cluster, names in self._clusters.items()},
        )

    def get_all_topic_list(self) -> TopicList:
        return TopicList(tuple(self._topic_queue))

    def get_topics_by_cluster(self, cluster: str) -> TopicList:
        names = self._clusters.get(cluster, set())
        return TopicList(tuple(t for t, qd_map in self._topic_queue.items() if not names.isdisjoint(qd_map)))

    def get_system_topic_list(self) -> TopicList:
        """Cluster and broker names are topics too (every broker registers them); ``brokerAddr`` is
        some broker's address so tools know where to ask next."""
        topics: list[str] = []
        for cluster, names in self._clusters.items():
            topics.append(cluster)
            topics.extend(sorted(names))
        broker_addr = None
        for entry in self._brokers.values():
            if entry.broker_addrs:
                broker_addr = entry.broker_addrs.get(MASTER_ID) or next(iter(entry.broker_addrs.values()))
                break
        return TopicList(tuple(dict.fromkeys(topics)), broker_addr)

    def get_unit_topics(self) -> TopicList:
        return self._topics_by_flag(lambda f: bool(f & TOPIC_SYS_FLAG_UNIT))

    def get_has_unit_sub_topic_list(self) -> TopicList:
        return self._topics_by_flag(lambda f: bool(f & TOPIC_SYS_FLAG_UNIT_SUB))

    def get_has_unit_sub_un_unit_topic_list(self) -> TopicList:
        return self._topics_by_flag(
            lambda f: not f & TOPIC_SYS_FLAG_UNIT and bool(f & TOPIC_SYS_FLAG_UNIT_SUB)
        )

    def _topics_by_flag(self, pred: Callable[[int], bool]) -> TopicList:
        # RocketMQ looks at the first broker's QueueData only; all of a topic's brokers agree.
        return TopicList(
            tuple(
                t
                for t, qd_map in self._topic_queue.items()
                if qd_map and pred(next(iter(qd_map.values())).topic_sys_flag)
            )
        )

    # -- introspection (tests, admin) ----------------------------------------------------------------

    def live_brokers(self) -> Iterator[tuple[BrokerAddrInfo, BrokerLiveInfo]]:
        return iter(list(self._live.items()))

    def broker_names(self, cluster_name: str) -> frozenset[str]:
        return frozenset(self._clusters.get(cluster_name, ()))

    def queue_data(self, topic: str, broker_name: str) -> QueueData | None:
        return self._topic_queue.get(topic, {}).get(broker_name)
