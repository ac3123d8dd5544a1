"""RECALL_MESSAGE (370), GET_TIMER_CHECK_POINT (60), GET_TIMER_METRICS (61).

A recall, as RocketMQ 5.3.2's RecallMessageProcessor: the handle names the topic, the broker, the
message's slot time + 1 and its UNIQ_KEY. The broker stores a small message for that topic with
TIMER_DELIVER_MS = that time and TIMER_DEL_UNIQKEY = "<topic>+<uniq>"; it goes through the timer
transform like any timer message, so it lands in the same slot as the message it cancels, and
when the slot is delivered the named message is dropped. Recalling is off unless
``recallMessageEnable`` (Java's default).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from rocketq.broker.timer import transform_timer_message
from rocketq.broker.topic_manager import PERM_WRITE
from rocketq.codec.codes import ResponseCode
from rocketq.codec.headers.timer import RecallMessageRequestHeader
from rocketq.codec.message import encode_properties, tags_code
from rocketq.codec.properties import MessageConst
from rocketq.codec.recall import RecallHandle
from rocketq.errors import InvalidParameter, RocketQError
from rocketq.store.model import MessageToStore, PutMessageStatus
from rocketq.store.timer import delete_key

if TYPE_CHECKING:
    from rocketq.broker.controller import BrokerController
    from rocketq.codec.command import RemotingCommand

__all__ = ["TimerProcessor"]

RECALL_MESSAGE_TAG = "_RECALL_TAG_"
_P = MessageConst
_STORED = frozenset({PutMessageStatus.PUT_OK, PutMessageStatus.FLUSH_DISK_TIMEOUT})


class TimerProcessor:
    def __init__(self, controller: BrokerController) -> None:
        self._ctl = controller

    async def recall_message(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        ctl = self._ctl
        bc = ctl.broker_config
        region = {"MSG_REGION": bc.region_id}
        h = RecallMessageRequestHeader.from_ext(request.ext_fields)

        def refuse(code: int, remark: str) -> RemotingCommand:
            return request.make_response(code, remark, dict(region))

        if not bc.recall_message_enable:
            return refuse(ResponseCode.NO_PERMISSION, "recall failed, operation is forbidden")
        if not bc.broker_permission & PERM_WRITE and not bc.allow_recall_when_broker_not_writeable:
            return refuse(ResponseCode.SERVICE_NOT_AVAILABLE, "recall failed, broker service not available")
        if ctl.topic_manager.table.get(h.topic) is None:
            return refuse(ResponseCode.TOPIC_NOT_EXIST, f"recall failed, the topic[{h.topic}] not exist")
        try:
            handle = RecallHandle.decode(h.recall_handle)
        except InvalidParameter as e:
            return refuse(ResponseCode.ILLEGAL_OPERATION, e.remark or str(e))
        if handle.topic != h.topic:
            return refuse(ResponseCode.ILLEGAL_OPERATION, "recall failed, topic not match")
        if handle.broker_name != bc.broker_name:
            return refuse(ResponseCode.ILLEGAL_OPERATION, "recall failed, broker service not available")
        now = int(time.time() * 1000)
        left = handle.timestamp - now
        if left <= 0 or left >= ctl.store_config.timer_max_delay_sec * 1000:
            return refuse(ResponseCode.ILLEGAL_OPERATION, "recall failed, timestamp invalid")
        props = {
            _P.PROPERTY_TAGS: RECALL_MESSAGE_TAG,
            _P.PROPERTY_TIMER_DEL_UNIQKEY: delete_key(handle.topic, handle.message_id),
            _P.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX: handle.message_id,
            _P.PROPERTY_TIMER_DELIVER_MS: handle.timestamp_str,
            "BORN_TIMESTAMP": str(now),
            "TRACE_CONTEXT": "",
        }
        if h.producer_group:
            props[_P.PROPERTY_PRODUCER_GROUP] = h.producer_group
        try:
            topic, queue_id, text = transform_timer_message(handle.topic, 0, encode_properties(props),
                                                            ctl.store_config, now)
        except RocketQError:
            return refuse(ResponseCode.SYSTEM_ERROR, "recall failed, execute error")
        result = await ctl.store.put_message(MessageToStore(
            topic, queue_id, b"0", 0, text, tags_code(RECALL_MESSAGE_TAG), (handle.message_id,), 0, now,
            _born_host(channel)))
        if result.status not in _STORED:
            return refuse(ResponseCode.SYSTEM_ERROR, "recall failed, execute error")
        return request.make_response(ResponseCode.SUCCESS, None, {"msgId": handle.message_id, **region})

    def get_timer_check_point(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        timer = self._ctl.timer_service
        if timer is None:
            return request.make_response(ResponseCode.SYSTEM_ERROR, "The checkpoint is null")
        body = timer.store.checkpoint.values().encode()
        return request.make_response(ResponseCode.SUCCESS, None, None, body)

    def get_timer_metrics(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        timer = self._ctl.timer_service
        if timer is None:
            return request.make_response(ResponseCode.SYSTEM_ERROR, "The timer message store is null")
        return request.make_response(ResponseCode.SUCCESS, None, None, timer.store.metrics.encode())


def _born_host(channel: Any) -> tuple[str, int]:
    ip, _, port = str(getattr(channel, "remote_address", "")).rpartition(":")
    try:
        return (ip.strip("[]") or "127.0.0.1", int(port))
    except ValueError:
        return ("127.0.0.1", 0)
