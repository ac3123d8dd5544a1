"""Consumer and producer group administration: subscription groups, progress and lag, connections,
running info, offset resets and clones (mqadmin's consumer, connection and offset commands)."""

from __future__ import annotations

import logging
from typing import Any

import orjson

from rocketq.admin._base import AdminBase, jbool
from rocketq.admin.models import ConsumerConnection, ConsumeStatsList, ProducerConnection, QueueProgress
from rocketq.codec.bodies import (
    ConsumeStats,
    MessageQueue,
    OffsetWrapper,
    SubscriptionGroupConfig,
    SubscriptionGroupWrapper,
    TopicList,
)
from rocketq.codec.bodies.client import mq_table
from rocketq.codec.codes import RequestCode, ResponseCode
from rocketq.codec.fastjson import ObjectKey, loads
from rocketq.codec.headers import UpdateConsumerOffsetRequestHeader
from rocketq.errors import (
    MQBrokerError,
    ProtocolError,
    ServerError,
    SubscriptionGroupNotExist,
    TopicNotExist,
)

__all__ = ["RETRY_GROUP_TOPIC_PREFIX", "SYSTEM_GROUPS", "GroupAdmin", "is_user_group", "mq_table"]

log = logging.getLogger("rocketq.admin")

RETRY_GROUP_TOPIC_PREFIX = "%RETRY%"
# Groups every broker has for itself; `consumerProgress` without -g leaves them out, as mqadmin does.
SYSTEM_GROUPS = frozenset(
    {
        "TOOLS_CONSUMER",
        "FILTERSRV_CONSUMER",
        "SELF_TEST_C_GROUP",
        "CID_ONS-HTTP-PROXY",
        "CID_ONSAPI_PULL",
        "CID_ONSAPI_PERMISSION",
        "CID_ONSAPI_OWNER",
        "CID_RMQ_SYS_TRANS",
        "SCHEDULE_CONSUMER",
        "__MONITOR_CONSUMER",
        "CID_SYS_RMQ_TRANS",
        "DEFAULT_CONSUMER",
    }
)


def is_user_group(group: str) -> bool:
    """Not a group the broker or RocketMQ's tools keep for themselves (MixAll.isSysConsumerGroup)."""
    return group not in SYSTEM_GROUPS and not group.startswith("CID_RMQ_SYS_")


class GroupAdmin(AdminBase):
    # -- subscription groups ----------------------------------------------------------------------------

    async def create_and_update_subscription_group_config(
        self, addr: str, config: SubscriptionGroupConfig
    ) -> None:
        await self._call(addr, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, None, config.to_json())

    async def set_message_request_mode(self, addr: str, topic: str, group: str, mode: str,
                                       pop_share_queue_num: int = 0) -> None:
        """SET_MESSAGE_REQUEST_MODE (5.x): consume `topic` by PULL or POP in `group` (setConsumeMode)."""
        body = orjson.dumps({"consumerGroup": group, "mode": mode, "popShareQueueNum": pop_share_queue_num,
                             "topic": topic})
        await self._call(addr, RequestCode.SET_MESSAGE_REQUEST_MODE, None, body)

    async def get_all_message_request_mode(self, addr: str) -> dict[str, dict[str, dict[str, object]]]:
        """GET_ALL_MESSAGE_REQUEST_MODE (5.x): topic -> group -> {mode, popShareQueueNum, ...}."""
        response = await self._call(addr, RequestCode.GET_ALL_MESSAGE_REQUEST_MODE)
        table: dict[str, dict[str, dict[str, object]]] = orjson.loads(
            self._json(response, "GET_ALL_MESSAGE_REQUEST_MODE")).get("messageRequestModeMap") or {}
        return table

    async def examine_subscription_group_config(self, addr: str, group: str) -> SubscriptionGroupConfig:
        """One group's config on ``addr``: GET_SUBSCRIPTIONGROUP_CONFIG from 5.0 on; before, the
        whole table (what 4.x's mqadmin reads), whose answer also tells the version."""
        if self.knows_5x(addr):
            response = await self._call(addr, RequestCode.GET_SUBSCRIPTIONGROUP_CONFIG, {"group": group})
            return SubscriptionGroupConfig.from_json(self._json(response, "GET_SUBSCRIPTIONGROUP_CONFIG"))
        config = (await self.get_all_subscription_group(addr)).get(group)
        if config is None:
            raise SubscriptionGroupNotExist(f"the consumer group[{group}] not exist", broker_addr=addr)
        return config

    async def get_all_subscription_group(self, addr: str) -> dict[str, SubscriptionGroupConfig]:
        response = await self._call(addr, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
        wrapper = SubscriptionGroupWrapper.from_json(self._json(response, "GET_ALL_SUBSCRIPTIONGROUP_CONFIG"))
        return dict(wrapper.subscription_group_table)

    async def get_user_subscription_group(self, addr: str) -> dict[str, SubscriptionGroupConfig]:
        """The broker's subscription groups without the system ones (getUserSubscriptionGroup)."""
        table = await self.get_all_subscription_group(addr)
        return {g: c for g, c in table.items() if is_user_group(g)}

    async def delete_subscription_group(self, addr: str, group: str, remove_offset: bool = False) -> None:
        ext = {"groupName": group, "cleanOffset": jbool(remove_offset)}
        await self._call(addr, RequestCode.DELETE_SUBSCRIPTIONGROUP, ext)

    async def consumer_groups(self) -> list[str]:
        """Every consumer group the cluster knows of: from the retry topics and the brokers' tables."""
        groups = {
            t[len(RETRY_GROUP_TOPIC_PREFIX) :]
            for t in await self._all_topics()
            if t.startswith(RETRY_GROUP_TOPIC_PREFIX)
        }
        for addr in (await self.master_addrs()).values():
            groups.update(await self.get_all_subscription_group(addr))
        return sorted(g for g in groups if is_user_group(g))

    async def _all_topics(self) -> list[str]:
        response = await self._namesrv(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
        return list(TopicList.from_json(response.body_bytes() or b"{}").topic_list)

    async def group_broker_addrs(self, group: str) -> list[str]:
        """Brokers that may hold the group's offsets: its retry topic's route, else every master."""
        try:
            brokers = await self.topic_brokers(RETRY_GROUP_TOPIC_PREFIX + group)
            return [b.master_addr for b in brokers if b.master_addr]
        except TopicNotExist:
            return list((await self.master_addrs()).values())

    # -- progress ---------------------------------------------------------------------------------------

    async def examine_consume_stats(self, group: str, topic: str | None = None) -> ConsumeStats:
        """GET_CONSUME_STATS from every broker of the group, merged: per queue broker/consumer offsets."""
        table: dict[MessageQueue, OffsetWrapper] = {}
        tps = 0.0
        for addr in await self.group_broker_addrs(group):
            ext = {"consumerGroup": group}
            if topic:
                ext["topic"] = topic
            response = await self._call(addr, RequestCode.GET_CONSUME_STATS, ext)
            stats = ConsumeStats.from_json(self._json(response, "GET_CONSUME_STATS"))
            table.update(stats.offset_table)
            tps += stats.consume_tps
        return ConsumeStats(dict(sorted(table.items())), tps)

    async def examine_consumer_progress(self, group: str, topic: str | None = None) -> list[QueueProgress]:
        """``consumerProgress -g``: one row per queue, sorted; ``diff`` is the lag."""
        stats = await self.examine_consume_stats(group, topic)
        return [
            QueueProgress(mq, w.broker_offset, w.consumer_offset, w.last_timestamp)
            for mq, w in stats.offset_table.items()
        ]

    async def fetch_consume_stats_in_broker(self, addr: str, is_order: bool = False) -> ConsumeStatsList:
        """GET_BROKER_CONSUME_STATS: every group's ConsumeStats on one broker (``brokerConsumeStats``)."""
        response = await self._call(addr, RequestCode.GET_BROKER_CONSUME_STATS, {"isOrder": jbool(is_order)})
        obj = loads(self._json(response, "GET_BROKER_CONSUME_STATS"))
        groups: dict[str, tuple[ConsumeStats, ...]] = {}
        for entry in obj.get("consumeStatsList") or ():
            for group, stats in entry.items():
                groups[str(group)] = tuple(ConsumeStats.from_obj(s) for s in stats or ())
        return ConsumeStatsList(str(obj.get("brokerAddr") or addr), groups, int(obj.get("totalDiff") or 0))

    # -- connections and running info -------------------------------------------------------------------

    async def examine_consumer_connection_info(self, group: str) -> ConsumerConnection:
        """GET_CONSUMER_CONNECTION_LIST on the group's brokers, connections merged by client id."""
        found: ConsumerConnection | None = None
        connections = {}
        last: ServerError | None = None
        for addr in await self.group_broker_addrs(group):
            try:
                response = await self._call(
                    addr, RequestCode.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": group}
                )
            except ServerError as exc:
                last = exc
                continue
            cc = ConsumerConnection.from_json(self._json(response, "GET_CONSUMER_CONNECTION_LIST"))
            found = found or cc
            connections.update({c.client_id: c for c in cc.connection_set})
        if found is None:
            raise last or MQBrokerError(
                f"the consumer group[{group}] not online", code=ResponseCode.CONSUMER_NOT_ONLINE
            )
        return ConsumerConnection(
            tuple(sorted(connections.values(), key=lambda c: c.client_id)),
            found.subscription_table,
            found.consume_type,
            found.message_model,
            found.consume_from_where,
        )

    async def examine_producer_connection_info(self, group: str, topic: str) -> ProducerConnection:
        """GET_PRODUCER_CONNECTION_LIST on the topic's brokers, merged by client id."""
        connections = {}
        last: ServerError | None = None
        for broker in await self.topic_brokers(topic):
            assert broker.master_addr is not None
            try:
                response = await self._call(
                    broker.master_addr, RequestCode.GET_PRODUCER_CONNECTION_LIST, {"producerGroup": group}
                )
            except ServerError as exc:
                last = exc
                continue
            pc = ProducerConnection.from_json(self._json(response, "GET_PRODUCER_CONNECTION_LIST"))
            connections.update({c.client_id: c for c in pc.connection_set})
        if not connections:
            raise last or MQBrokerError(f"the producer group[{group}] not exist")
        return ProducerConnection(tuple(sorted(connections.values(), key=lambda c: c.client_id)))

    async def get_consumer_running_info(
        self, group: str, client_id: str, jstack: bool = False
    ) -> dict[str, Any]:
        """GET_CONSUMER_RUNNING_INFO, relayed by the broker the client is connected to."""
        ext = {"consumerGroup": group, "clientId": client_id, "jstackEnable": jbool(jstack)}
        last: ServerError | None = None
        for addr in await self.group_broker_addrs(group):
            try:
                response = await self._call(addr, RequestCode.GET_CONSUMER_RUNNING_INFO, ext)
            except ServerError as exc:
                last = exc
                continue
            info = loads(self._json(response, "GET_CONSUMER_RUNNING_INFO"))
            if not isinstance(info, dict):
                raise ProtocolError("GET_CONSUMER_RUNNING_INFO: expected a ConsumerRunningInfo object")
            plain: dict[str, Any] = _plain(info)
            return plain
        raise last or MQBrokerError(f"The Consumer <{group}> <{client_id}> not online")

    async def get_consume_status(
        self, topic: str, group: str, client_id: str | None = None
    ) -> dict[str, dict[MessageQueue, int]]:
        """``getConsumerStatus``: each online client's offsets of the group's queues of ``topic``,
        as the clients hold them (one client with ``client_id``), from every broker of the topic."""
        ext = {"topic": topic, "group": group}
        if client_id:
            ext["clientAddr"] = client_id
        out: dict[str, dict[MessageQueue, int]] = {}
        for broker in await self.topic_brokers(topic):
            if not broker.master_addr:
                continue
            code = RequestCode.INVOKE_BROKER_TO_GET_CONSUMER_STATUS
            response = await self._call(broker.master_addr, code, ext)
            body = loads(self._json(response, code.name))
            clients = body.get("consumerTable") if isinstance(body, dict) else None
            for cid, table in (clients or {}).items():
                mine = out.setdefault(str(cid), {})
                mine.update({mq: int(v) for mq, v in mq_table(table, "consumerTable").items()})
        return {cid: dict(sorted(t.items())) for cid, t in sorted(out.items())}

    # -- offsets ------------------------------------------------------------------------------------------

    async def reset_offset_by_timestamp(
        self,
        topic: str,
        group: str,
        timestamp: int,
        force: bool = True,
        *,
        queue_id: int | None = None,
        offset: int | None = None,
        broker_addr: str | None = None,
    ) -> dict[MessageQueue, int]:
        """``resetOffsetByTime``: every queue of the topic to the first message stored at ``timestamp``
        (-1: the queue's end, i.e. skip what accumulated). With ``queue_id`` (and ``broker_addr``)
        one queue moves, to ``offset`` when given. Returns the new offset of each queue.

        A broker that answers CONSUMER_NOT_ONLINE (RocketMQ 4.x with the group offline) gets the
        offsets written one queue at a time instead, as mqadmin falls back to.
        """
        ext = {"topic": topic, "group": group, "timestamp": str(timestamp), "isForce": jbool(force)}
        if queue_id is not None:
            ext["queueId"] = str(queue_id)
            if offset is not None:
                ext["offset"] = str(offset)
        addrs = (
            [broker_addr]
            if broker_addr
            else [b.master_addr for b in await self.topic_brokers(topic) if b.master_addr]
        )
        out: dict[MessageQueue, int] = {}
        for addr in addrs:
            response = await self._call(
                addr,
                RequestCode.INVOKE_BROKER_TO_RESET_OFFSET,
                ext,
                ok=(ResponseCode.SUCCESS, ResponseCode.CONSUMER_NOT_ONLINE),
            )
            if response.code == ResponseCode.CONSUMER_NOT_ONLINE:
                out.update(await self._reset_offset_old(addr, topic, group, timestamp, force))
                continue
            body = loads(response.body_bytes() or b"{}")
            table = mq_table(body.get("offsetTable") or {}, "offsetTable")
            out.update({mq: int(v) for mq, v in table.items()})
        return dict(sorted(out.items()))

    async def _reset_offset_old(
        self, addr: str, topic: str, group: str, timestamp: int, force: bool
    ) -> dict[MessageQueue, int]:
        ext = {"consumerGroup": group, "topic": topic}
        response = await self._call(addr, RequestCode.GET_CONSUME_STATS, ext)
        stats = ConsumeStats.from_json(self._json(response, "GET_CONSUME_STATS"))
        out = {}
        for mq, wrapper in stats.offset_table.items():
            if timestamp < 0:
                target = wrapper.broker_offset
            else:
                target = await self.api.search_offset(addr, mq, timestamp, self.timeout)
            if not force and target >= wrapper.consumer_offset:
                target = wrapper.consumer_offset
            header = UpdateConsumerOffsetRequestHeader(group, mq.topic, mq.queue_id, target)
            await self.api.update_consumer_offset(addr, header, self.timeout)
            out[mq] = target
        return out

    async def clone_group_offset(
        self, src_group: str, dest_group: str, topic: str | None = None, offline: bool = False
    ) -> list[str]:
        """``cloneGroupOffset``: copy the source group's offsets (of one topic or all) on each broker."""
        ext = {"srcGroup": src_group, "destGroup": dest_group, "offline": jbool(offline)}
        if topic:
            ext["topic"] = topic
            addrs = [b.master_addr for b in await self.topic_brokers(topic) if b.master_addr]
        else:
            addrs = list((await self.master_addrs()).values())
        for addr in addrs:
            await self._call(addr, RequestCode.CLONE_GROUP_OFFSET, ext)
        return addrs


def _plain(obj: Any) -> Any:
    """fastjson-parsed data with ObjectKey keys turned into their JSON text (for printing)."""
    if isinstance(obj, dict):
        return {(k.raw.decode() if isinstance(k, ObjectKey) else k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_plain(v) for v in obj]
    return obj
