"""Route bodies answered by the name server (PROTOCOL.md §2.4): TopicRouteData and its parts,
ClusterInfo, TopicList, KVTable."""

from __future__ import annotations

import dataclasses
from typing import Any

from rocketq.codec.bodies._schema import JsonBody, body

__all__ = ["BrokerData", "ClusterInfo", "KVTable", "QueueData", "TopicList", "TopicRouteData"]

MASTER_ID = 0


@body(order=True)
class QueueData(JsonBody):
    """Per broker name: how many queues a topic has there and with what permission."""

    broker_name: str
    read_queue_nums: int = 0
    write_queue_nums: int = 0
    perm: int = 0
    topic_sys_flag: int = 0


@body
class BrokerData(JsonBody):
    cluster: str
    broker_name: str
    # Java HashMap<Long, String>; written with quoted keys ({"0": "ip:port"}), which every client
    # accepts. id 0 is the master.
    broker_addrs: dict[int, str] = dataclasses.field(default_factory=dict)
    zone_name: str | None = None
    enable_acting_master: bool = False

    @property
    def master_addr(self) -> str | None:
        return self.broker_addrs.get(MASTER_ID)


@body
class TopicRouteData(JsonBody):
    queue_datas: tuple[QueueData, ...] = ()
    broker_datas: tuple[BrokerData, ...] = ()
    filter_server_table: dict[str, tuple[str, ...]] = dataclasses.field(default_factory=dict)
    order_topic_conf: str | None = None
    topic_queue_mapping_by_broker: dict[str, Any] | None = None


@body
class ClusterInfo(JsonBody):
    broker_addr_table: dict[str, BrokerData] = dataclasses.field(default_factory=dict)
    cluster_addr_table: dict[str, tuple[str, ...]] = dataclasses.field(default_factory=dict)


@body
class TopicList(JsonBody):
    topic_list: tuple[str, ...] = ()
    broker_addr: str | None = None


@body
class KVTable(JsonBody):
    table: dict[str, str] = dataclasses.field(default_factory=dict)
