"""ClientRemotingProcessor: requests a broker sends to a client over the client's own connection.

NOTIFY_CONSUMER_IDS_CHANGED (a consumer joined or left a group: rebalance now), what a broker
sends on an admin's behalf: RESET_CONSUMER_CLIENT_OFFSET (``mqadmin resetOffsetByTime``),
GET_CONSUMER_STATUS_FROM_CLIENT (``getConsumerStatus``), GET_CONSUMER_RUNNING_INFO
(``consumerStatus``) and CONSUME_MESSAGE_DIRECTLY (``queryMsgById -g -d``), and
PUSH_REPLY_MESSAGE_TO_CLIENT (the reply to a ``Producer.request``), CHECK_TRANSACTION_STATE (a
broker asks a ``TransactionProducer`` about an open transaction). Other broker -> client codes are
answered REQUEST_CODE_NOT_SUPPORTED by the transport.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

import orjson

from rocketq.client.producer.request import complete_request
from rocketq.codec import fastjson
from rocketq.codec.bodies import ConsumerData, MessageQueue
from rocketq.codec.bodies.client import mq_table
from rocketq.codec.codes import RequestCode, ResponseCode
from rocketq.codec.command import RemotingCommand
from rocketq.codec.headers import CheckTransactionStateRequestHeader
from rocketq.codec.message import MessageExt, MessageSysFlag, decode_message, decompress_body
from rocketq.codec.properties import MessageConst, decode_properties
from rocketq.errors import ProtocolError
from rocketq.remoting import Channel, RemotingClient

if TYPE_CHECKING:
    from rocketq.client.instance import MQClientInstance

__all__ = ["ClientRemotingProcessor"]

log = logging.getLogger("rocketq.client")


def _mq_order(item: tuple[MessageQueue, int]) -> tuple[str, str, int]:
    mq = item[0]
    return mq.topic, mq.broker_name, mq.queue_id


class ClientRemotingProcessor:
    def __init__(self, instance: MQClientInstance) -> None:
        self.instance = instance

    def register(self, client: RemotingClient) -> None:
        client.register_processor(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, self.notify_consumer_ids_changed)
        client.register_processor(RequestCode.GET_CONSUMER_RUNNING_INFO, self.get_consumer_running_info)
        client.register_processor(RequestCode.RESET_CONSUMER_CLIENT_OFFSET, self.reset_offset)
        client.register_processor(RequestCode.GET_CONSUMER_STATUS_FROM_CLIENT, self.get_consume_status)
        client.register_processor(RequestCode.CONSUME_MESSAGE_DIRECTLY, self.consume_message_directly)
        # request-reply: a replier's answer, pushed by the broker
        client.register_processor(RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT, self.receive_reply_message)
        # transactions: the broker asks about a half message still open
        client.register_processor(RequestCode.CHECK_TRANSACTION_STATE, self.check_transaction_state)

    def notify_consumer_ids_changed(self, request: RemotingCommand, channel: Channel) -> None:
        log.info("receive broker's notification[%s], the consumer group: %s changed, rebalance immediately",
                 channel.remote_address, request.ext("consumerGroup"))
        self.instance.rebalance_immediately()

    async def reset_offset(self, request: RemotingCommand, channel: Channel) -> None:
        """One-way: the broker's new offsets of a group's topic (a ResetOffsetBody)."""
        topic = request.ext("topic") or ""
        group = request.ext("group") or ""
        log.info(
            "invoke reset offset operation from broker. brokerAddr=%s, topic=%s, group=%s, timestamp=%s",
            channel.remote_address, topic, group, request.ext("timestamp"),
        )
        offsets: dict[MessageQueue, int] = {}
        body = request.body_bytes()
        if body:
            try:
                obj = fastjson.loads(body)
                raw = obj.get("offsetTable", {}) if isinstance(obj, dict) else {}
                offsets = {mq: int(v) for mq, v in mq_table(raw, "ResetOffsetBody").items()}
            except (ProtocolError, TypeError, ValueError) as e:
                log.warning("[reset-offset] bad ResetOffsetBody from %s: %s", channel.remote_address, e)
                return
        await self.instance.reset_offset(topic, group, offsets)

    def get_consume_status(self, request: RemotingCommand, channel: Channel) -> RemotingCommand:
        """GetConsumerStatusBody: this client's offsets of the group's queues of a topic."""
        table = self.instance.get_consumer_status(request.ext("topic") or "", request.ext("group") or "")
        entries = [(fastjson.mq_key(mq.topic, mq.broker_name, mq.queue_id), b"%d" % off)
                   for mq, off in sorted(table.items(), key=_mq_order)]
        body = fastjson.dumps_mq_table(entries, {"consumerTable": b"{}"}, "messageQueueTable")
        return request.make_response(ResponseCode.SUCCESS, None, None, body)

    async def consume_message_directly(self, request: RemotingCommand, channel: Channel) -> RemotingCommand:
        group = request.ext("consumerGroup") or ""
        consumer = self.instance.consumer_table.get(group)
        consume = getattr(consumer, "consume_message_directly", None)
        if consume is None:
            return request.make_response(
                ResponseCode.SYSTEM_ERROR, f"The Consumer Group <{group}> not exist in this consumer"
            )
        msg, _ = decode_message(request.body_bytes())
        body = await consume(msg, request.ext("brokerName"))
        return request.make_response(ResponseCode.SUCCESS, None, None, body)

    def get_consumer_running_info(self, request: RemotingCommand, channel: Channel) -> RemotingCommand:
        """ConsumerRunningInfo JSON: the consumer's own, when it provides ``consumer_running_info()``,
        else its config and subscriptions (what the heartbeat carries)."""
        group = request.ext("consumerGroup") or ""
        consumer = self.instance.consumer_table.get(group)
        if consumer is None:
            return request.make_response(
                ResponseCode.SYSTEM_ERROR, f"The Consumer Group <{group}> not exist in this consumer"
            )
        running_info = getattr(consumer, "consumer_running_info", None)
        if running_info is not None:
            body = running_info()
        else:
            body = self._basic_running_info(consumer.consumer_data())
        return request.make_response(ResponseCode.SUCCESS, None, None, body)

    def receive_reply_message(self, request: RemotingCommand, channel: Channel) -> RemotingCommand:
        """PUSH_REPLY_MESSAGE_TO_CLIENT: the reply goes to the request waiting for its
        CORRELATION_ID (a reply nobody waits for any more is logged and still acknowledged)."""
        try:
            complete_request(_reply_message(request, int(time.time() * 1000)))
        except Exception as exc:
            log.warning("unknown err when receiveReplyMsg: %s", exc)
            return request.make_response(ResponseCode.SYSTEM_ERROR, "process reply message fail")
        return request.make_response(ResponseCode.SUCCESS)

    def check_transaction_state(self, request: RemotingCommand, channel: Channel) -> None:
        """One-way: hand the half message to the producer of its group (PGROUP), which asks its
        listener and answers with END_TRANSACTION (ClientRemotingProcessor.checkTransactionState)."""
        try:
            header = CheckTransactionStateRequestHeader.from_ext(request.ext_fields)
            msg, _ = decode_message(request.body_bytes())
        except ProtocolError as exc:
            log.warning("checkTransactionState, decode message failed: %s", exc)
            return
        group = msg.properties.get(MessageConst.PROPERTY_PRODUCER_GROUP)
        if group is None:
            log.warning("checkTransactionState, pick producer group failed")
            return
        producer = self.instance.producer_table.get(group)
        check = getattr(producer, "check_transaction_state", None)
        if check is None:
            log.debug("checkTransactionState, pick producer by group[%s] failed", group)
            return
        check(channel, msg, header)

    def _basic_running_info(self, data: ConsumerData) -> bytes:
        instance = self.instance
        props = {
            "PROP_CLIENT_VERSION": "rocketq",
            "PROP_CONSUME_TYPE": data.consume_type.name,
            "PROP_CONSUMER_START_TIMESTAMP": str(instance.boot_timestamp),
            "PROP_NAMESERVER_ADDR": ";".join(instance.api.namesrv_addr_list),
            "messageModel": data.message_model.name,
            "consumeFromWhere": data.consume_from_where.name,
        }
        return orjson.dumps({
            "properties": props,
            "subscriptionSet": [s.to_obj() for s in data.subscription_data_set],
            "mqTable": {},
            "mqPopTable": {},
            "statusTable": {},
            "userConsumerInfo": {},
        })


def _address(text: str | None) -> tuple[str, int]:
    ip, _, port = (text or "").rpartition(":")
    return (ip, int(port)) if port.isdigit() else ("127.0.0.1", 0)


def _reply_message(request: RemotingCommand, received_ms: int) -> MessageExt:
    """The reply as a MessageExt, from the ReplyMessageRequestHeader fields and the body."""
    ext = request.ext_fields or {}
    sys_flag = int(ext.get("sysFlag") or 0)
    body = decompress_body(request.body_bytes(), sys_flag)
    props = decode_properties(ext.get("properties") or "")
    props[MessageConst.PROPERTY_REPLY_MESSAGE_ARRIVE_TIME] = str(received_ms)
    return MessageExt(
        topic=ext.get("topic") or "",
        body=body,
        flag=int(ext.get("flag") or 0),
        properties=props,
        queue_id=int(ext.get("queueId") or 0),
        sys_flag=sys_flag & ~MessageSysFlag.COMPRESSED_FLAG,
        born_timestamp=int(ext.get("bornTimestamp") or 0),
        born_host=_address(ext.get("bornHost")),
        store_timestamp=int(ext.get("storeTimestamp") or 0),
        store_host=_address(ext.get("storeHost")),
        reconsume_times=int(ext.get("reconsumeTimes") or 0),
    )
