"""Consumer-group admin of the broker: offset resets and clones, and requests relayed to a consumer.

INVOKE_BROKER_TO_RESET_OFFSET (``mqadmin resetOffsetByTime`` / ``skipAccumulatedMessage``),
CLONE_GROUP_OFFSET (``cloneGroupOffset``), and GET_CONSUMER_RUNNING_INFO / CONSUME_MESSAGE_DIRECTLY /
INVOKE_BROKER_TO_GET_CONSUMER_STATUS (``getConsumerStatus``),
which the broker forwards to one client over that client's own connection and whose answer it
relays (RocketMQ's AdminBrokerProcessor.callConsumer).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import orjson

from rocketq.codec import fastjson
from rocketq.codec.bodies.client import mq_table
from rocketq.codec.codes import RequestCode, ResponseCode
from rocketq.codec.command import RemotingCommand
from rocketq.codec.headers import CommandHeader, GetConsumerRunningInfoRequestHeader, Long, header
from rocketq.codec.message import decode_offset_msg_id
from rocketq.errors import (
    InvalidParameter,
    ProtocolError,
    RemotingTimeoutError,
    ServerError,
    SubscriptionGroupNotExist,
    SystemError_,
    TopicNotExist,
)
from rocketq.remoting.channel import channel_address

if TYPE_CHECKING:
    from rocketq.broker.controller import BrokerController

log = logging.getLogger("rocketq.broker.admin")

# Broker2Client.callClient waits this long for the consumer's answer.
CALL_CLIENT_TIMEOUT = 10.0


@header
class ResetOffsetRequestHeader(CommandHeader):
    """INVOKE_BROKER_TO_RESET_OFFSET (222), and RESET_CONSUMER_CLIENT_OFFSET (220) to clients.

    ``timestamp`` -1 means "the queue's max offset" (skip everything accumulated); ``queue_id``
    with ``offset`` resets one queue to an exact offset.
    """

    group: str
    topic: str
    timestamp: Long
    is_force: bool
    queue_id: int = -1
    offset: Long | None = None


@header
class CloneGroupOffsetRequestHeader(CommandHeader):
    """CLONE_GROUP_OFFSET (314); a blank topic clones every topic the source group committed."""

    src_group: str
    dest_group: str
    topic: str | None = None
    offline: bool = False


@header
class ConsumeMessageDirectlyResultRequestHeader(CommandHeader):
    """CONSUME_MESSAGE_DIRECTLY (309): the message named by ``msg_id`` (an offset msgId)."""

    consumer_group: str
    client_id: str | None = None
    msg_id: str | None = None
    broker_name: str | None = None
    topic: str | None = None
    topic_sys_flag: int | None = None
    group_sys_flag: int | None = None


@header
class GetConsumerStatusRequestHeader(CommandHeader):
    """INVOKE_BROKER_TO_GET_CONSUMER_STATUS (223), and GET_CONSUMER_STATUS_FROM_CLIENT (221) to clients.

    ``client_addr`` (a client id, despite the name) narrows the question to one client.
    """

    topic: str
    group: str
    client_addr: str | None = None


def reset_offset_body(topic: str, broker_name: str, offsets: dict[int, int]) -> bytes:
    """ResetOffsetBody as fastjson writes it: MessageQueue objects as map keys, in queue order."""
    key = fastjson.mq_keys(topic, broker_name)
    return fastjson.dumps_mq_table((key(qid), b"%d" % offset) for qid, offset in sorted(offsets.items()))


class AdminGroupProcessor:
    def __init__(self, controller: BrokerController) -> None:
        self._ctl = controller

    # -- offsets ----------------------------------------------------------------------------------------

    def reset_offset(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        """Move a group's offsets of one topic to a time (or an exact offset), on the broker and in
        every online consumer.

        The broker's own table changes at once (RocketMQ 5's server-side reset), so a group that is
        offline, or whose clients ignore RESET_CONSUMER_CLIENT_OFFSET, starts there; online clients
        also get the one-way RESET_CONSUMER_CLIENT_OFFSET with the new table, as 4.x brokers send.
        Without ``isForce`` a queue only moves backwards (RocketMQ's rollback-only mode).
        """
        h = ResetOffsetRequestHeader.from_ext(request.ext_fields)
        ctl = self._ctl
        log.info(
            "[reset-offset] reset offset started by %s. topic=%s, group=%s, timestamp=%s, isForce=%s",
            channel_address(channel),
            h.topic,
            h.group,
            h.timestamp,
            h.is_force,
        )
        cfg = ctl.topic_manager.select_topic_config(h.topic)
        if cfg is None:
            raise TopicNotExist(
                f"[reset-offset] reset offset failed, no topic in this broker. topic={h.topic}"
            )
        if not ctl.subscription_manager.contains(h.group) and not ctl.offset_manager.query_offsets(
            h.group, h.topic
        ):
            raise SubscriptionGroupNotExist(f"Group {h.group} does not exist")
        store = ctl.store
        queue_ids = [h.queue_id] if h.queue_id >= 0 else list(range(cfg.read_queue_nums))
        offsets: dict[int, int] = {}
        for qid in queue_ids:
            if h.queue_id >= 0 and h.offset is not None and h.offset != -1:
                lo = store.get_min_offset_in_queue(h.topic, qid)
                hi = store.get_max_offset_in_queue(h.topic, qid)
                if not lo <= h.offset <= hi:
                    raise InvalidParameter(f"Target offset {h.offset} not in consume queue range [{lo}-{hi}]")
                target = h.offset
            elif h.timestamp < 0:
                target = store.get_max_offset_in_queue(h.topic, qid)
            else:
                target = store.get_offset_in_queue_by_time(h.topic, qid, h.timestamp)
            target = max(0, target)
            current = ctl.offset_manager.query_offset(h.group, h.topic, qid)
            if not h.is_force and 0 <= current <= target:
                target = current
            offsets[qid] = target
        if not offsets:
            raise SystemError_("No queues to reset.")
        ctl.offset_manager.admin_commit(channel_address(channel), h.group, h.topic, offsets)
        body = reset_offset_body(h.topic, ctl.broker_name, offsets)
        self._notify_reset(h, body)
        log.info(
            "[reset-offset] reset offset success. topic=%s, group=%s, offsets=%s", h.topic, h.group, offsets
        )
        return request.make_response(ResponseCode.SUCCESS, None, None, body)

    def _notify_reset(self, h: ResetOffsetRequestHeader, body: bytes) -> None:
        info = self._ctl.consumer_manager.get_consumer_group_info(h.group)
        if info is None:
            return
        ext = {
            "group": h.group,
            "topic": h.topic,
            "timestamp": str(h.timestamp),
            "isForce": "true" if h.is_force else "false",
        }
        for ch in info.get_all_channel():
            cmd = RemotingCommand.request(
                RequestCode.RESET_CONSUMER_CLIENT_OFFSET, dict(ext), body, oneway=True
            )
            try:
                ch.invoke_oneway(cmd)
            except Exception as exc:
                log.error(
                    "[reset-offset] reset offset exception. topic=%s, group=%s, client=%s: %s",
                    h.topic,
                    h.group,
                    channel_address(ch),
                    exc,
                )

    def clone_group_offset(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        h = CloneGroupOffsetRequestHeader.from_ext(request.ext_fields)
        ctl = self._ctl
        topics = (
            [h.topic]
            if h.topic and h.topic.strip()
            else sorted(ctl.offset_manager.which_topic_by_consumer(h.src_group))
        )
        online = ctl.consumer_manager.get_consumer_group_info(h.src_group)
        for topic in topics:
            if ctl.topic_manager.select_topic_config(topic) is None:
                log.warning("[cloneGroupOffset], topic config not exist, %s", topic)
                continue
            if (
                not h.offline
                and online is not None
                and online.subscription_table
                and online.find_subscription_data(topic) is None
            ):
                log.warning(
                    "AdminBrokerProcessor#cloneGroupOffset: topic does not exist in consumer group's "
                    "subscription, topic=%s, consumer group=%s",
                    topic,
                    h.src_group,
                )
                continue
            ctl.offset_manager.clone_offset(h.src_group, h.dest_group, topic)
        log.info(
            "cloneGroupOffset called by %s: %s -> %s, topics %s",
            channel_address(channel),
            h.src_group,
            h.dest_group,
            topics,
        )
        return request.make_response(ResponseCode.SUCCESS)

    # -- relayed to a consumer --------------------------------------------------------------------------

    async def get_consumer_running_info(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        h = GetConsumerRunningInfoRequestHeader.from_ext(request.ext_fields)
        return await self._call_consumer(
            RequestCode.GET_CONSUMER_RUNNING_INFO, request, h.consumer_group, h.client_id
        )

    async def consume_message_directly(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        h = ConsumeMessageDirectlyResultRequestHeader.from_ext(request.ext_fields)
        ctl = self._ctl
        ext = dict(request.ext_fields or {})
        ext["brokerName"] = ctl.broker_name
        if h.topic:
            cfg = ctl.topic_manager.select_topic_config(h.topic)
            if cfg is not None:
                ext["topicSysFlag"] = str(cfg.topic_sys_flag)
        group_cfg = ctl.subscription_manager.table.get(h.consumer_group)
        if group_cfg is not None:
            ext["groupSysFlag"] = str(group_cfg.group_sys_flag)
        body = b""
        if h.msg_id:
            try:
                _, _, offset = decode_offset_msg_id(h.msg_id)
            except ProtocolError:
                raise InvalidParameter(f"not an offset message id: {h.msg_id}") from None
            record = ctl.store.look_message_by_offset(offset)
            if record is None:
                raise SystemError_(f"can not find message by the offset, {offset}")
            body = bytes(record)
        forwarded = RemotingCommand.request(RequestCode.CONSUME_MESSAGE_DIRECTLY, ext, body)
        return await self._call_consumer(
            RequestCode.CONSUME_MESSAGE_DIRECTLY, forwarded, h.consumer_group, h.client_id
        )

    async def get_consumer_status(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        """Each online client's offsets of the group's queues of a topic, as they hold them
        (GetConsumerStatusBody.consumerTable: client id -> {queue: offset}; RocketMQ's
        Broker2Client.getConsumeStatus). A client that does not answer is left out."""
        h = GetConsumerStatusRequestHeader.from_ext(request.ext_fields)
        info = self._ctl.consumer_manager.get_consumer_group_info(h.group)
        if info is None:
            raise SystemError_(f"No Any Consumer online in the consumer group: [{h.group}]")
        tables: list[bytes] = []
        for ch, client in list(info.channel_info_table.items()):
            if h.client_addr and h.client_addr != client.client_id:
                continue
            ext = {"topic": h.topic, "group": h.group, "clientAddr": client.client_id}
            ask = RemotingCommand.request(RequestCode.GET_CONSUMER_STATUS_FROM_CLIENT, ext)
            try:
                answer = await ch.invoke(ask, CALL_CLIENT_TIMEOUT)
                if answer.code != ResponseCode.SUCCESS or not answer.body_bytes():
                    continue
                obj = fastjson.loads(answer.body_bytes())
                table = mq_table(obj.get("messageQueueTable") or {}, "GetConsumerStatusBody")
            except Exception as exc:
                log.error("getConsumeStatus exception, group=%s, client=%s: %s", h.group, client.client_id,
                          exc)
                continue
            entries = b",".join(
                fastjson.mq_key(mq.topic, mq.broker_name, mq.queue_id) + b":%d" % int(offset)
                for mq, offset in table.items()
            )
            tables.append(orjson.dumps(client.client_id) + b":{" + entries + b"}")
            if h.client_addr:
                break
        body = b'{"consumerTable":{' + b",".join(tables) + b'},"messageQueueTable":{}}'
        return request.make_response(ResponseCode.SUCCESS, None, None, body)

    async def _call_consumer(
        self, code: int, request: RemotingCommand, group: str, client_id: str | None
    ) -> RemotingCommand:
        info = self._ctl.consumer_manager.find_channel(group, client_id or "")
        if info is None:
            raise SystemError_(f"The Consumer <{group}> <{client_id}> not online")
        forwarded = RemotingCommand.request(code, dict(request.ext_fields or {}), request.body_bytes())
        try:
            answer = await info.channel.invoke(forwarded, CALL_CLIENT_TIMEOUT)
        except RemotingTimeoutError as exc:
            raise ServerError(
                f"consumer <{group}> <{client_id}> Timeout: {exc}", code=ResponseCode.CONSUME_MSG_TIMEOUT
            ) from None
        except Exception as exc:
            raise SystemError_(f"invoke consumer <{group}> <{client_id}> Exception: {exc}") from None
        return request.make_response(answer.code, answer.remark, answer.ext_fields, answer.body_bytes())
