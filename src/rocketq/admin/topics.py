"""Topic administration: create/update, delete, permissions, routes, stats (mqadmin's topic commands)."""

from __future__ import annotations

import logging
from collections.abc import Mapping

from rocketq.admin._base import AdminBase
from rocketq.codec.bodies import (
    TopicConfig,
    TopicConfigSerializeWrapper,
    TopicFilterType,
    TopicList,
    TopicStatsTable,
    loads_lenient,
)
from rocketq.codec.codes import RequestCode
from rocketq.codec.headers import CreateTopicRequestHeader
from rocketq.codec.topics import SYSTEM_TOPIC_PREFIX, SYSTEM_TOPICS
from rocketq.errors import InvalidArgument, TopicNotExist

__all__ = ["ORDER_TOPIC_CONFIG", "SYSTEM_TOPICS", "TopicAdmin", "is_system_topic"]

log = logging.getLogger("rocketq.admin")

# The name-server KV namespace holding "brokerA:4;brokerB:4" for ordered topics.
ORDER_TOPIC_CONFIG = "ORDER_TOPIC_CONFIG"
AUTO_CREATE_TOPIC_KEY = "TBW102"
PERM_VALUES = frozenset({0, 2, 4, 6})


def is_system_topic(topic: str) -> bool:
    # TopicValidator's set, kept once in the client (a broker's cluster and broker names come from
    # the name server).
    return topic in SYSTEM_TOPICS or topic.startswith(SYSTEM_TOPIC_PREFIX)


def attributes_text(attributes: Mapping[str, str] | str | None) -> str | None:
    """RocketMQ's attribute patch text ``+k=v,-k`` from a mapping (or passed through)."""
    if attributes is None or isinstance(attributes, str):
        return attributes or None
    return ",".join(f"+{k}={v}" for k, v in attributes.items()) or None


class TopicAdmin(AdminBase):
    async def fetch_all_topic_list(self) -> list[str]:
        """GET_ALL_TOPIC_LIST_FROM_NAMESERVER: every topic some broker registered."""
        response = await self._namesrv(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
        return sorted(TopicList.from_json(response.body_bytes() or b"{}").topic_list)

    async def fetch_system_topic_list(self) -> list[str]:
        """GET_SYSTEM_TOPIC_LIST_FROM_NS: the brokers' own topics (cluster and broker names, TBW102, ...)."""
        response = await self._namesrv(RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_NS)
        return sorted(TopicList.from_json(response.body_bytes() or b"{}").topic_list)

    async def fetch_topics_by_cluster(self, cluster: str) -> list[str]:
        response = await self._namesrv(RequestCode.GET_TOPICS_BY_CLUSTER, {"cluster": cluster})
        return sorted(TopicList.from_json(response.body_bytes() or b"{}").topic_list)

    async def create_and_update_topic_config(self, addr: str, config: TopicConfig) -> None:
        """UPDATE_AND_CREATE_TOPIC on one broker; the broker re-registers with the name servers."""
        header = CreateTopicRequestHeader(
            topic=config.topic_name,
            default_topic=AUTO_CREATE_TOPIC_KEY,
            read_queue_nums=config.read_queue_nums,
            write_queue_nums=config.write_queue_nums,
            perm=config.perm,
            topic_filter_type=config.topic_filter_type.name,
            topic_sys_flag=config.topic_sys_flag,
            order=config.order,
            attributes=attributes_text(config.attributes),
        )
        await self._call(addr, RequestCode.UPDATE_AND_CREATE_TOPIC, header.to_ext())

    async def create_topic(
        self,
        topic: str,
        *,
        cluster: str | None = None,
        broker_addr: str | None = None,
        read_queue_nums: int = 8,
        write_queue_nums: int = 8,
        perm: int = 6,
        order: bool = False,
        attributes: Mapping[str, str] | str | None = None,
    ) -> list[str]:
        """``updateTopic``: create or update ``topic`` on one broker or every master of a cluster.

        Returns the broker addresses changed. An ordered topic created on a cluster also gets its
        ``ORDER_TOPIC_CONFIG`` entry on the name servers, as mqadmin does.
        """
        if perm not in PERM_VALUES:
            raise InvalidArgument(f"perm must be one of 2 (W), 4 (R), 6 (RW), 0: {perm}")
        addrs = await self.targets(cluster, broker_addr)
        header = CreateTopicRequestHeader(
            topic=topic,
            default_topic=AUTO_CREATE_TOPIC_KEY,
            read_queue_nums=read_queue_nums,
            write_queue_nums=write_queue_nums,
            perm=perm,
            topic_filter_type=TopicFilterType.SINGLE_TAG.name,
            topic_sys_flag=0,
            order=order,
            attributes=attributes_text(attributes),
        ).to_ext()
        for addr in addrs:
            await self._call(addr, RequestCode.UPDATE_AND_CREATE_TOPIC, header)
            log.info("create topic to %s success.", addr)
        if order and cluster:
            masters = await self.master_addrs(cluster)
            conf = ";".join(f"{name}:{write_queue_nums}" for name in sorted(masters))
            await self._each_namesrv(
                RequestCode.PUT_KV_CONFIG, {"namespace": ORDER_TOPIC_CONFIG, "key": topic, "value": conf}
            )
        return addrs

    async def get_all_topic_config(self, addr: str) -> dict[str, TopicConfig]:
        """GET_ALL_TOPIC_CONFIG: the broker's whole topic table."""
        response = await self._call(addr, RequestCode.GET_ALL_TOPIC_CONFIG)
        wrapper = TopicConfigSerializeWrapper.from_json(self._json(response, "GET_ALL_TOPIC_CONFIG"))
        return dict(wrapper.topic_config_table)

    async def get_system_topic_list_from_broker(self, addr: str) -> list[str]:
        """GET_SYSTEM_TOPIC_LIST_FROM_BROKER: the system topics of this broker (its cluster and name too)."""
        response = await self._call(addr, RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_BROKER)
        return sorted(TopicList.from_json(response.body_bytes() or b"{}").topic_list)

    async def get_user_topic_config(self, addr: str, special_topic: bool = False) -> dict[str, TopicConfig]:
        """The broker's topics without system topics (the broker's own list, 305) and, unless
        ``special_topic``, without retry and DLQ topics (DefaultMQAdminExt.getUserTopicConfig)."""
        table = await self.get_all_topic_config(addr)
        system = set(await self.get_system_topic_list_from_broker(addr))
        special = ("%RETRY%", "%DLQ%")
        return {
            name: cfg for name, cfg in table.items()
            if name not in system and not is_system_topic(name)
            and (special_topic or not name.startswith(special)) and 0 <= cfg.perm < 16
        }

    async def examine_topic_config(self, addr: str, topic: str) -> TopicConfig:
        """One topic's config on ``addr``: GET_TOPIC_CONFIG from 5.0 on; before, the whole table
        (GET_ALL_TOPIC_CONFIG, what 4.x's mqadmin reads), whose answer also tells the version."""
        if self.knows_5x(addr):
            response = await self._call(addr, RequestCode.GET_TOPIC_CONFIG, {"topic": topic})
            return TopicConfig.from_json(self._json(response, "GET_TOPIC_CONFIG"))
        response = await self._call(addr, RequestCode.GET_ALL_TOPIC_CONFIG)
        table = TopicConfigSerializeWrapper.from_json(self._json(response, "GET_ALL_TOPIC_CONFIG"))
        config = table.topic_config_table.get(topic)
        if config is None:
            raise TopicNotExist(f"No topic in this broker. topic: {topic}", broker_addr=addr, topic=topic)
        return config

    async def update_topic_perm(
        self, topic: str, perm: int, *, cluster: str | None = None, broker_addr: str | None = None
    ) -> dict[str, tuple[int, int]]:
        """``updateTopicPerm``: the topic's permission on the brokers named; addr -> (old, new)."""
        if perm not in PERM_VALUES:
            raise InvalidArgument(f"perm must be one of 2 (W), 4 (R), 6 (RW), 0: {perm}")
        if broker_addr is None and cluster is None:
            addrs = [b.master_addr for b in await self.topic_brokers(topic) if b.master_addr]
        else:
            addrs = await self.targets(cluster, broker_addr)
        out = {}
        for addr in addrs:
            old = await self.examine_topic_config(addr, topic)
            if old.perm != perm:
                await self.create_and_update_topic_config(
                    addr,
                    TopicConfig(
                        old.topic_name,
                        old.read_queue_nums,
                        old.write_queue_nums,
                        perm,
                        old.topic_filter_type,
                        old.topic_sys_flag,
                        old.order,
                        {},
                    ),
                )
            out[addr] = (old.perm, perm)
        return out

    async def delete_topic(self, topic: str, cluster: str) -> list[str]:
        """``deleteTopic``: from every master of the cluster, then from every name server."""
        addrs = list((await self.master_addrs(cluster)).values())
        for addr in addrs:
            await self._call(addr, RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": topic})
        await self._each_namesrv(
            RequestCode.DELETE_TOPIC_IN_NAMESRV, {"topic": topic, "clusterName": cluster}
        )
        await self._each_namesrv(
            RequestCode.DELETE_KV_CONFIG, {"namespace": ORDER_TOPIC_CONFIG, "key": topic}
        )
        return addrs

    async def examine_topic_stats(self, topic: str) -> TopicStatsTable:
        """GET_TOPIC_STATS_INFO from every broker of the topic, merged: per queue min/max offsets."""
        table = {}
        for broker in await self.topic_brokers(topic):
            assert broker.master_addr is not None
            response = await self._call(
                broker.master_addr, RequestCode.GET_TOPIC_STATS_INFO, {"topic": topic}
            )
            table.update(TopicStatsTable.from_json(self._json(response, "GET_TOPIC_STATS_INFO")).offset_table)
        return TopicStatsTable(dict(sorted(table.items())))

    async def get_topic_cluster_list(self, topic: str) -> list[str]:
        """``topicClusterList``: the clusters whose brokers carry the topic."""
        route = await self.examine_topic_route_info(topic)
        names = {b.broker_name for b in route.broker_datas}
        info = await self.examine_broker_cluster_info()
        return sorted(c for c, brokers in info.cluster_addr_table.items() if names.intersection(brokers))

    async def query_topic_consume_by_who(self, topic: str) -> list[str]:
        """QUERY_TOPIC_CONSUME_BY_WHO on each broker of the topic: the groups consuming it."""
        groups: set[str] = set()
        for broker in await self.topic_brokers(topic):
            assert broker.master_addr is not None
            response = await self._call(
                broker.master_addr, RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, {"topic": topic}
            )
            groups.update(loads_lenient(response.body_bytes() or b"{}").get("groupList") or ())
        return sorted(groups)
