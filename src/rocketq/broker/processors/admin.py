"""AdminBrokerProcessor: topic admin, offsets by queue/time, runtime info and broker config.

What `mqadmin` (updateTopic, deleteTopic, topicStatus, clusterList, getBrokerConfig,
updateBrokerConfig, ...) and clients (GET_MAX_OFFSET, SEARCH_OFFSET_BY_TIMESTAMP, ...) send.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from rocketq.broker.topic_manager import check_topic_name
from rocketq.codec import fastjson
from rocketq.codec.bodies import KVTable, SubscriptionGroupConfig, TopicConfig, TopicFilterType, TopicList
from rocketq.codec.bodies.admin import (
    consume_stats_json,
    consume_stats_list_json,
    offset_wrapper_json,
    topic_offset_json,
    topic_stats_table_json,
)
from rocketq.codec.codes import LanguageCode, ResponseCode
from rocketq.codec.headers import (
    BoundaryType,
    CommandHeader,
    CreateTopicRequestHeader,
    DeleteSubscriptionGroupRequestHeader,
    DeleteTopicRequestHeader,
    GetConsumerConnectionListRequestHeader,
    GetConsumeStatsRequestHeader,
    GetEarliestMsgStoretimeRequestHeader,
    GetMaxOffsetRequestHeader,
    GetMinOffsetRequestHeader,
    GetProducerConnectionListRequestHeader,
    GetSubscriptionGroupConfigRequestHeader,
    GetTopicConfigRequestHeader,
    GetTopicStatsInfoRequestHeader,
    SearchOffsetRequestHeader,
    header,
)
from rocketq.codec.topics import DLQ_GROUP_TOPIC_PREFIX, RETRY_GROUP_TOPIC_PREFIX
from rocketq.config import dump_properties, parse_properties
from rocketq.configfile import write_atomically
from rocketq.errors import (
    ConfigError,
    InvalidParameter,
    NoPermission,
    ProtocolError,
    ServerError,
    SubscriptionGroupNotExist,
    SystemError_,
    TopicNotExist,
)

if TYPE_CHECKING:
    from rocketq.broker.controller import BrokerController
    from rocketq.broker.filter import Subscription
    from rocketq.codec.command import RemotingCommand

log = logging.getLogger("rocketq.broker.admin")
BROKER_PROPERTIES = "broker.properties"  # BrokerPathConfigHelper's file name, under the store's config/

MAX_QUEUE_NUMS = 1024

# BrokerStatsManager names VIEW_BROKER_STATS_DATA answers (what `mqadmin statsAll` asks for).
TOPIC_PUT_NUMS = "TOPIC_PUT_NUMS"
GROUP_GET_NUMS = "GROUP_GET_NUMS"
BROKER_PUT_NUMS = "BROKER_PUT_NUMS"
BROKER_GET_NUMS = "BROKER_GET_NUMS"
# Light message queues (RocketMQ 5's MixAll.LMQ_PREFIX): never cleaned as unused topics.
LMQ_PREFIX = "%LMQ%"
# StatsItem's three windows: minute, hour, day (seconds).
STATS_WINDOWS = (("statsMinute", 60), ("statsHour", 3600), ("statsDay", 86400))


@header
class GetConsumeStatsInBrokerHeader(CommandHeader):
    """GET_BROKER_CONSUME_STATS (317); the Java field is the boolean ``isOrder``."""

    is_order: bool = False


@header
class ViewBrokerStatsDataRequestHeader(CommandHeader):
    """VIEW_BROKER_STATS_DATA (315): a BrokerStatsManager item by name and key."""

    stats_name: str
    stats_key: str


def parse_attributes(text: str | None, current: dict[str, str]) -> dict[str, str]:
    """RocketMQ's attribute patch `+k=v,+k2=v2,-k3` applied to the current attributes."""
    out = dict(current)
    if not text:
        return out
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        if part[0] == "+" and "=" in part:
            key, _, value = part[1:].partition("=")
            if not key:
                raise InvalidParameter(f"bad topic attribute {part!r}")
            out[key] = value
        elif part[0] == "-" and len(part) > 1:
            out.pop(part[1:], None)
        else:
            raise InvalidParameter(f"bad topic attribute {part!r}: expected +key=value or -key")
    return out


def _language_name(language: object) -> str:
    if isinstance(language, int):
        try:
            return LanguageCode(language).name
        except ValueError:
            return "OTHER"
    return str(language)


def _connection(info: Any) -> dict[str, object]:
    """RocketMQ's Connection body member for one client channel."""
    return {"clientAddr": info.address, "clientId": info.client_id,
            "language": _language_name(info.language), "version": info.version}


def subscription_json(topic: str, sub: Subscription) -> dict[str, object]:
    """SubscriptionData as RocketMQ's admin bodies carry it."""
    return {"classFilterMode": sub.class_filter_mode, "codeSet": sorted(sub.codes or ()),
            "expressionType": sub.expression_type, "subString": sub.sub_string,
            "subVersion": sub.sub_version, "tagsSet": list(sub.tags), "topic": topic}


def topic_stats_json(topic: str, broker_name: str, rows: list[tuple[int, int, int, int]]) -> bytes:
    """TopicStatsTable of one topic (fastjson's MessageQueue-keyed map, as Java admin tools read it);
    rows are (queueId, minOffset, maxOffset, lastUpdateTimestamp)."""
    key = fastjson.mq_keys(topic, broker_name)
    return topic_stats_table_json((key(qid), topic_offset_json(min_off, max_off, last))
                                  for qid, min_off, max_off, last in rows)


class AdminBrokerProcessor:
    def __init__(self, controller: BrokerController) -> None:
        self._ctl = controller

    # -- topics ------------------------------------------------------------------------------------

    async def update_and_create_topic(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        h = CreateTopicRequestHeader.from_ext(request.ext_fields)
        topic = check_topic_name(h.topic)
        tm = self._ctl.topic_manager
        if tm.is_system_topic(topic):
            raise InvalidParameter(f"The topic[{topic}] is conflict with system topic.")
        for name, value in (("readQueueNums", h.read_queue_nums), ("writeQueueNums", h.write_queue_nums)):
            if not 0 < value <= MAX_QUEUE_NUMS:
                raise InvalidParameter(f"{name} must be between 1 and {MAX_QUEUE_NUMS}: {value}")
        if not 0 <= h.perm <= 15:
            raise InvalidParameter(f"perm must be a PermName bit set: {h.perm}")
        try:
            filter_type = TopicFilterType.parse(h.topic_filter_type)
        except ProtocolError:
            raise InvalidParameter(f"unknown topicFilterType {h.topic_filter_type!r}") from None
        old = tm.select_topic_config(topic)
        attributes = parse_attributes(h.attributes, old.attributes if old is not None else {})
        cfg = TopicConfig(topic, h.read_queue_nums, h.write_queue_nums, h.perm, filter_type,
                          h.topic_sys_flag or 0, h.order, attributes)
        if old == cfg:
            log.info("Broker receive request to update or create topic=%s, but no change", topic)
        else:
            log.info("updateAndCreateTopic called by %s: %s", channel.remote_address, cfg)
            tm.update_topic_config(cfg)
        await tm.persisted()
        return request.make_response(ResponseCode.SUCCESS)

    async def delete_topic(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        h = DeleteTopicRequestHeader.from_ext(request.ext_fields)
        # As Java does: a name no topic could have is refused before it reaches the store, where
        # it names a directory.
        topic = check_topic_name(h.topic.strip())
        ctl = self._ctl
        if ctl.topic_manager.is_system_topic(topic) and not topic.startswith(
                (RETRY_GROUP_TOPIC_PREFIX, DLQ_GROUP_TOPIC_PREFIX)):
            raise InvalidParameter(f"The topic[{topic}] is conflict with system topic.")
        log.info("deleteTopic called by %s: %s", channel.remote_address, topic)
        ctl.topic_manager.delete_topic_config(topic)
        ctl.offset_manager.clean_offset_by_topic(topic)
        ctl.store.delete_topics({topic})
        await ctl.topic_manager.persisted()
        return request.make_response(ResponseCode.SUCCESS)

    def get_all_topic_config(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        return request.make_response(ResponseCode.SUCCESS, None, None, self._ctl.topic_manager.encode())

    def get_topic_config(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        h = GetTopicConfigRequestHeader.from_ext(request.ext_fields)
        cfg = self._ctl.topic_manager.select_topic_config(h.topic)
        if cfg is None:
            raise TopicNotExist(f"No topic in this broker. topic: {h.topic}")
        return request.make_response(ResponseCode.SUCCESS, None, None, cfg.to_json())

    def get_topic_stats_info(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        h = GetTopicStatsInfoRequestHeader.from_ext(request.ext_fields)
        ctl = self._ctl
        cfg = ctl.topic_manager.select_topic_config(h.topic)
        if cfg is None:
            raise TopicNotExist(f"topic[{h.topic}] not exist")
        store = ctl.store
        rows = []
        for qid in range(cfg.write_queue_nums):
            min_off = max(0, store.get_min_offset_in_queue(h.topic, qid))
            max_off = max(0, store.get_max_offset_in_queue(h.topic, qid))
            last = store.get_message_store_timestamp(h.topic, qid, max_off - 1) if max_off > 0 else 0
            rows.append((qid, min_off, max_off, max(0, last)))
        body = topic_stats_json(h.topic, ctl.broker_config.broker_name, rows)
        return request.make_response(ResponseCode.SUCCESS, None, None, body)

    # -- offsets ---------------------------------------------------------------------------------------

    def get_max_offset(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        h = GetMaxOffsetRequestHeader.from_ext(request.ext_fields)
        offset = self._ctl.store.get_max_offset_in_queue(h.topic, h.queue_id)
        return request.make_response(ResponseCode.SUCCESS, None, {"offset": str(offset)})

    def get_min_offset(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        h = GetMinOffsetRequestHeader.from_ext(request.ext_fields)
        offset = self._ctl.store.get_min_offset_in_queue(h.topic, h.queue_id)
        return request.make_response(ResponseCode.SUCCESS, None, {"offset": str(offset)})

    def search_offset_by_timestamp(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        h = SearchOffsetRequestHeader.from_ext(request.ext_fields)
        offset = self._ctl.store.get_offset_in_queue_by_time(
            h.topic, h.queue_id, h.timestamp, h.boundary_type is BoundaryType.UPPER)
        return request.make_response(ResponseCode.SUCCESS, None, {"offset": str(offset)})

    def get_earliest_msg_storetime(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        h = GetEarliestMsgStoretimeRequestHeader.from_ext(request.ext_fields)
        ts = self._ctl.store.get_earliest_message_time(h.topic, h.queue_id)
        return request.make_response(ResponseCode.SUCCESS, None, {"timestamp": str(ts)})

    # -- consumer groups ---------------------------------------------------------------------------------

    async def update_and_create_subscription_group(self, request: RemotingCommand,
                                                   channel: Any) -> RemotingCommand:
        try:
            cfg = SubscriptionGroupConfig.from_json(request.body_bytes())
        except ProtocolError as exc:
            raise InvalidParameter(f"bad SubscriptionGroupConfig body: {exc}") from None
        if not cfg.group_name or len(cfg.group_name) > 120:
            raise InvalidParameter(f"bad subscription group name {cfg.group_name!r}")
        log.info("AdminBrokerProcessor#updateAndCreateSubscriptionGroup called by %s: %s",
                 channel.remote_address, cfg)
        self._ctl.subscription_manager.update_subscription_group_config(cfg)
        await self._ctl.subscription_manager.persisted()
        return request.make_response(ResponseCode.SUCCESS)

    def get_all_subscription_group_config(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        body = self._ctl.subscription_manager.encode()
        return request.make_response(ResponseCode.SUCCESS, None, None, body)

    def get_subscription_group_config(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        h = GetSubscriptionGroupConfigRequestHeader.from_ext(request.ext_fields)
        cfg = self._ctl.subscription_manager.table.get(h.group)
        if cfg is None:
            raise SubscriptionGroupNotExist(f"subscription group [{h.group}] not exist")
        return request.make_response(ResponseCode.SUCCESS, None, None, cfg.to_json())

    async def delete_subscription_group(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        h = DeleteSubscriptionGroupRequestHeader.from_ext(request.ext_fields)
        ctl = self._ctl
        log.info("AdminBrokerProcessor#deleteSubscriptionGroup, caller=%s, group=%s", channel.remote_address,
                 h.group_name)
        ctl.subscription_manager.delete_subscription_group_config(h.group_name)
        if h.clean_offset:
            ctl.offset_manager.remove_offset(h.group_name)
        await ctl.subscription_manager.persisted()
        return request.make_response(ResponseCode.SUCCESS)

    def get_all_consumer_offset(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        return request.make_response(ResponseCode.SUCCESS, None, None, self._ctl.offset_manager.encode())

    def query_topic_consume_by_who(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        h = GetTopicStatsInfoRequestHeader.from_ext(request.ext_fields)
        ctl = self._ctl
        groups = set(ctl.consumer_manager.query_topic_consume_by_who(h.topic))
        groups |= ctl.offset_manager.which_group_by_topic(h.topic)
        body = orjson.dumps({"groupList": sorted(groups)})
        return request.make_response(ResponseCode.SUCCESS, None, None, body)

    def get_consume_stats(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        """ConsumeStats: per queue the broker's max offset, the group's committed offset and its time."""
        h = GetConsumeStatsRequestHeader.from_ext(request.ext_fields)
        group = h.consumer_group
        topics = [h.topic] if h.topic else sorted(self._ctl.offset_manager.which_topic_by_consumer(group))
        body = self._consume_stats_json(group, topics, order_only=False)[0]
        return request.make_response(ResponseCode.SUCCESS, None, None, body)

    def _consume_stats_json(self, group: str, topics: list[str], order_only: bool) -> tuple[bytes, int, int]:
        """One ConsumeStats body (fastjson's MessageQueue-keyed map), its total diff and queue count."""
        ctl = self._ctl
        online = ctl.consumer_manager.get_consumer_group_info(group)
        store = ctl.store
        pop = getattr(ctl, "pop_service", None)  # None before the store is ready
        entries = []
        total_diff = 0
        backlog = pop.checkpoints.pop_state(int(time.time() * 1000), group) if pop is not None else {}
        for topic in topics:
            cfg = ctl.topic_manager.select_topic_config(topic)
            if cfg is None or (order_only and not cfg.order):
                continue
            if online is not None and online.subscription_table and not online.find_subscription_data(topic):
                continue  # the group is online and does not subscribe this topic
            key = fastjson.mq_keys(topic, ctl.broker_name)
            for qid in range(cfg.read_queue_nums):
                broker_offset = max(0, store.get_max_offset_in_queue(topic, qid))
                consumer_offset = max(0, ctl.offset_manager.query_offset(group, topic, qid))
                last = 0
                if consumer_offset > 0:
                    last = max(0, store.get_message_store_timestamp(topic, qid, consumer_offset - 1))
                pulled = consumer_offset
                if pop is not None:  # a pop group: the offset is how far it popped
                    consumer_offset = pop.acked_offset(group, topic, qid, pulled)
                total_diff += broker_offset - consumer_offset
                value = offset_wrapper_json(broker_offset, consumer_offset, pulled, last,
                                            backlog.get((group, topic, qid), (0, 0))[1])
                entries.append((key(qid), value))
        return consume_stats_json(entries), total_diff, len(entries)

    def get_broker_consume_stats(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        """GET_BROKER_CONSUME_STATS: ConsumeStatsList, every group's ConsumeStats per topic it committed.

        ``mqadmin brokerConsumeStats`` reads it; like the other offset tables it is fastjson's
        MessageQueue-keyed form inside an ordinary JSON list.
        """
        h = GetConsumeStatsInBrokerHeader.from_ext(request.ext_fields)
        ctl = self._ctl
        groups: list[tuple[str, list[bytes]]] = []
        total_diff = 0
        for group in sorted(ctl.subscription_manager.table):
            topics = sorted(ctl.offset_manager.which_topic_by_consumer(group))
            stats = []
            for topic in topics:
                body, diff, queues = self._consume_stats_json(group, [topic], h.is_order)
                if not queues:
                    continue
                stats.append(body)
                total_diff += diff
            groups.append((group, stats))
        body = consume_stats_list_json(ctl.address, groups, total_diff)
        return request.make_response(ResponseCode.SUCCESS, None, None, body)

    def get_consumer_connection_list(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        h = GetConsumerConnectionListRequestHeader.from_ext(request.ext_fields)
        info = self._ctl.consumer_manager.get_consumer_group_info(h.consumer_group)
        if info is None or not info.channel_info_table:
            raise ServerError(f"the consumer group[{h.consumer_group}] not online",
                              code=ResponseCode.CONSUMER_NOT_ONLINE)
        subscriptions = {t: subscription_json(t, sub) for t, sub in info.subscription_table.items()}
        body = orjson.dumps({
            "connectionSet": [_connection(c) for c in info.channel_info_table.values()],
            "consumeFromWhere": info.consume_from_where, "consumeType": info.consume_type,
            "messageModel": info.message_model, "subscriptionTable": subscriptions,
        })
        return request.make_response(ResponseCode.SUCCESS, None, None, body)

    def get_producer_connection_list(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        h = GetProducerConnectionListRequestHeader.from_ext(request.ext_fields)
        channels = self._ctl.producer_manager.group_channel_table.get(h.producer_group)
        if not channels:
            raise SystemError_(f"the producer group[{h.producer_group}] not exist")
        body = orjson.dumps({"connectionSet": [_connection(c) for c in channels.values()]})
        return request.make_response(ResponseCode.SUCCESS, None, None, body)

    # -- store maintenance and statistics -------------------------------------------------------------

    def clean_expired_consume_queue(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        """CLEAN_EXPIRED_CONSUMEQUEUE: drop consume-queue files (and whole queues) that only point
        below the commit log's first offset, as DefaultMessageStore.cleanExpiredConsumerQueue."""
        ctl = self._ctl
        store = ctl.store
        min_phy = store.min_phy_offset
        log.info("AdminBrokerProcessor#cleanExpiredConsumeQueue: start, caller=%s", channel.remote_address)
        files = 0
        alive: dict[str, bool] = {}
        for (topic, _), cq in list(store.consume_queues.items()):
            if ctl.topic_manager.is_system_topic(topic) and not topic.startswith(
                    (RETRY_GROUP_TOPIC_PREFIX, DLQ_GROUP_TOPIC_PREFIX)):
                continue
            files += cq.delete_expired(min_phy)
            last = cq.entry(cq.max_offset - 1) if cq.max_offset > 0 else None
            expired = last is not None and last[0] < min_phy
            alive[topic] = alive.get(topic, False) or not expired
        dead = sorted(t for t, live in alive.items() if not live)
        queues = store.delete_topics(dead) if dead else 0
        log.info("AdminBrokerProcessor#cleanExpiredConsumeQueue: end, %d files, %d queues of %s removed",
                 files, queues, dead)
        return request.make_response(ResponseCode.SUCCESS)

    def get_system_topic_list(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        """GET_SYSTEM_TOPIC_LIST_FROM_BROKER: the system topic names (TopicValidator's set, with the
        cluster and broker names this broker adds to it)."""
        body = TopicList(tuple(sorted(self._ctl.topic_manager.system_topics))).to_json()
        return request.make_response(ResponseCode.SUCCESS, None, None, body)

    def clean_unused_topic(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        """CLEAN_UNUSED_TOPIC: drop the consume queues of topics the topic table no longer has
        (DefaultMessageStore.cleanUnusedTopic); system topics and light queues are kept."""
        ctl = self._ctl
        log.warning("invoke cleanUnusedTopic start, caller=%s", channel.remote_address)
        retain = set(ctl.topic_manager.table)
        unused = sorted(t for t in ctl.store.topic_queue_ids()
                        if t not in retain and not ctl.topic_manager.is_system_topic(t)
                        and not t.startswith(LMQ_PREFIX))
        queues = ctl.store.delete_topics(unused) if unused else 0
        log.warning("invoke cleanUnusedTopic end: %d queues of %s removed", queues, unused)
        return request.make_response(ResponseCode.SUCCESS)

    def delete_expired_commit_log(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        """DELETE_EXPIRED_COMMITLOG: a manual retention round (executeDeleteFilesManually): commit-log
        files older than fileReservedTime go now, whatever deleteWhen says."""
        log.warning("invoke deleteExpiredCommitLog start, caller=%s", channel.remote_address)
        deleted = self._ctl.store.clean_expired_files(manual=True)
        log.warning("invoke deleteExpiredCommitLog end: %d files deleted", deleted)
        return request.make_response(ResponseCode.SUCCESS)

    def get_all_producer_info(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        """GET_ALL_PRODUCER_INFO: ProducerTableInfo, every producer group's live connections."""
        data = {group: [{"clientId": c.client_id, "remoteIP": c.address,
                         "language": _language_name(c.language), "version": c.version,
                         "lastUpdateTimestamp": c.last_update_timestamp} for c in channels.values()]
                for group, channels in self._ctl.producer_manager.group_channel_table.items() if channels}
        return request.make_response(ResponseCode.SUCCESS, None, None, orjson.dumps({"data": data}))

    def view_broker_stats_data(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        """VIEW_BROKER_STATS_DATA: BrokerStatsData (sum / tps / avgpt per minute, hour and day).

        Counts come from the store itself: a topic's puts in a window are the consume-queue entries
        stored since the window began, and a group's gets are those of them below its committed
        offset (exact for a group that keeps up, a lower bound for one catching up) and at or
        above where an admin last set its offsets (a cloned or reset group got nothing by pulling
        below that). Nothing is counted on the hot paths for it.
        """
        h = ViewBrokerStatsDataRequestHeader.from_ext(request.ext_fields)
        now = int(time.time() * 1000)
        ctl = self._ctl
        name, key = h.stats_name, h.stats_key
        if name == TOPIC_PUT_NUMS:
            counts = self._window_counts([(key, None)], now)
        elif name == GROUP_GET_NUMS and "@" in key:
            topic, _, group = key.partition("@")
            counts = self._window_counts([(topic, group)], now)
        elif name in (BROKER_PUT_NUMS, BROKER_GET_NUMS) and key == ctl.cluster_name:
            tm = ctl.topic_manager
            pairs: list[tuple[str, str | None]]
            if name == BROKER_PUT_NUMS:
                pairs = [(t, None) for t in sorted(tm.table) if not tm.is_system_topic(t)]
            else:
                pairs = [(k.partition("@")[0], k.partition("@")[2]) for k in ctl.offset_manager.offset_table]
            counts = self._window_counts(pairs, now)
        else:
            counts = None
        if counts is None:
            raise SystemError_(f"The stats <{name}> <{key}> not exist")
        body = {label: {"avgpt": 0.0, "sum": n, "tps": round(n / seconds, 2)}
                for (label, seconds), n in zip(STATS_WINDOWS, counts, strict=True)}
        return request.make_response(ResponseCode.SUCCESS, None, None, orjson.dumps(body))

    def _window_counts(self, pairs: list[tuple[str, str | None]], now: int) -> list[int] | None:
        """Messages stored in each window (group given: those below the group's offsets)."""
        ctl = self._ctl
        store = ctl.store
        totals = [0] * len(STATS_WINDOWS)
        known = False
        for topic, group in pairs:
            cfg = ctl.topic_manager.select_topic_config(topic)
            if cfg is None:
                continue
            known = True
            for qid in range(max(cfg.read_queue_nums, cfg.write_queue_nums)):
                end = store.get_max_offset_in_queue(topic, qid)
                floor = 0
                if group is not None:
                    end = min(end, ctl.offset_manager.query_offset(group, topic, qid))
                    floor = ctl.offset_manager.consumed_since(group, topic, qid)
                if end <= floor:
                    continue
                for i, (_, seconds) in enumerate(STATS_WINDOWS):
                    start = store.get_offset_in_queue_by_time(topic, qid, now - seconds * 1000)
                    totals[i] += max(0, end - max(start, floor))
        return totals if known else None

    # -- runtime info and config ------------------------------------------------------------------------

    def get_broker_runtime_info(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        table = self._ctl.runtime_info()
        return request.make_response(ResponseCode.SUCCESS, None, None, KVTable(table).to_json())

    def get_broker_config(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        ctl = self._ctl
        return request.make_response(ResponseCode.SUCCESS, None,
                                     {"version": ctl.config_data_version.to_json().decode()},
                                     broker_config_text(ctl).encode())

    def update_broker_config(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        raw = request.body_bytes()
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise InvalidParameter("the config body is not UTF-8") from None
        try:
            settings = parse_properties(text, "UPDATE_BROKER_CONFIG")
        except ConfigError as exc:
            raise InvalidParameter(str(exc)) from None
        updates = {s.key: str(s.value) for s in settings}
        if not updates:
            return request.make_response(ResponseCode.SUCCESS)
        log.info("updateBrokerConfig called by %s: %s", channel.remote_address, sorted(updates))
        self._ctl.update_configs(updates)
        persist_broker_config(self._ctl)
        return request.make_response(ResponseCode.SUCCESS)


def broker_config_text(ctl: BrokerController) -> str:
    """Configuration.getAllConfigsFormatString: every key with RocketMQ's name; a broker started
    with port 0 reports the port the system picked."""
    live = {"listenPort": str(ctl.listen_port), "haListenPort": str(ha_listen_port(ctl))}
    lines = [line for line in dump_properties(ctl.configs).splitlines()
             if line.partition("=")[0] not in live and not line.startswith("initAuthenticationUser=")]
    lines += [f"{key}={value}" for key, value in live.items()]
    return "".join(line + "\n" for line in lines)


def ha_listen_port(ctl: BrokerController) -> int:
    """The bound HA port of a master; a slave (or a broker not started yet) reports what it would bind."""
    replication = ctl.replication
    if replication is not None and replication.service is not None:
        return replication.service.port
    configured = ctl.store_config.ha_listen_port
    return configured if configured is not None else ctl.listen_port + 1


def persist_broker_config(ctl: BrokerController) -> None:
    """After an accepted update, as Java's Configuration.persist: the whole configuration to
    ``<storePathRootDir>/config/broker.properties`` (a record of what runs; rocketq reads its
    config from ``-c`` and the other sources at start, so ``-c`` on this file keeps the updates
    across a restart). Written synchronously, so two updates never race on the file."""
    path = Path(ctl.store_config.store_path_root_dir).expanduser() / "config" / BROKER_PROPERTIES
    try:
        write_atomically(path, broker_config_text(ctl).encode())
    except OSError as exc:  # the update holds in memory; only its record failed
        log.error("persist broker config to %s failed: %s", path, exc)


def refuse_update(exc: ConfigError) -> NoPermission:
    """A key that is not updatable over the wire (CVE-2023-33246) is a permission error."""
    return NoPermission(f"Can not update config: {exc}")
