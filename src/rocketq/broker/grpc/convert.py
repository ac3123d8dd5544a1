"""Between apache.rocketmq.v2 messages and the broker's remoting requests / stored messages.

The gRPC service reuses the broker's processors: a SendMessage entry becomes the
SEND_MESSAGE_V2 request a remoting producer would send, a popped MessageExt becomes a
v2 Message. Only the translation lives here.
"""

from __future__ import annotations

import time
import zlib
from typing import Any

from rocketq.codec.codes import RequestCode, ResponseCode
from rocketq.codec.command import RemotingCommand
from rocketq.codec.message import MessageExt, java_string_hash
from rocketq.codec.properties import MessageConst, encode_properties

C = MessageConst
# Properties carried by typed v2 fields, not echoed among a received message's user properties.
SYSTEM_KEYS = frozenset({
    C.PROPERTY_TAGS, C.PROPERTY_KEYS, C.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX, C.PROPERTY_SHARDING_KEY,
    C.PROPERTY_TIMER_DELIVER_MS, C.PROPERTY_TRANSACTION_PREPARED, C.PROPERTY_PRODUCER_GROUP,
    C.PROPERTY_POP_CK, "CLUSTER", "WAIT", "MSG_REGION", "TRACE_ON", "REAL_TOPIC", "REAL_QID",
    "RETRY_TOPIC", "ORIGIN_MESSAGE_ID", "DELAY", "__BORNHOST", "CONSUME_START_TIME",
    "TRAN_PREPARED_QUEUE_OFFSET", "TRANSACTION_CHECK_TIMES", "INNER_NUM", "POP_CK_OFFSET",
    C.PROPERTY_TRANSACTION_ID, "MIN_OFFSET", "MAX_OFFSET", "1ST_POP_TIME",
})

# Our response codes as apache.rocketmq.v2.Code names.
_CODES = {
    ResponseCode.SUCCESS: "OK",
    ResponseCode.FLUSH_DISK_TIMEOUT: "MASTER_PERSISTENCE_TIMEOUT",
    ResponseCode.FLUSH_SLAVE_TIMEOUT: "SLAVE_PERSISTENCE_TIMEOUT",
    ResponseCode.SLAVE_NOT_AVAILABLE: "HA_NOT_AVAILABLE",
    ResponseCode.MESSAGE_ILLEGAL: "BAD_REQUEST",
    ResponseCode.SYSTEM_BUSY: "TOO_MANY_REQUESTS",
    ResponseCode.NO_PERMISSION: "FORBIDDEN",
    ResponseCode.TOPIC_NOT_EXIST: "TOPIC_NOT_FOUND",
    ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST: "CONSUMER_GROUP_NOT_FOUND",
    ResponseCode.SUBSCRIPTION_NOT_EXIST: "CONSUMER_GROUP_NOT_FOUND",
    ResponseCode.SUBSCRIPTION_PARSE_FAILED: "ILLEGAL_FILTER_EXPRESSION",
    ResponseCode.INVALID_PARAMETER: "BAD_REQUEST",
    ResponseCode.SERVICE_NOT_AVAILABLE: "INTERNAL_SERVER_ERROR",
    ResponseCode.REQUEST_CODE_NOT_SUPPORTED: "NOT_IMPLEMENTED",
    ResponseCode.VERSION_NOT_SUPPORTED: "VERSION_UNSUPPORTED",
    ResponseCode.POLLING_FULL: "TOO_MANY_REQUESTS",
    ResponseCode.NO_MESSAGE: "MESSAGE_NOT_FOUND",
    ResponseCode.POLLING_TIMEOUT: "MESSAGE_NOT_FOUND",
}
_VALUES = frozenset(int(c) for c in ResponseCode)


def code_name(response_code: int) -> str:
    """The v2 Code name for one of our response codes (INTERNAL_ERROR for the rest)."""
    return _CODES.get(ResponseCode(response_code), "INTERNAL_ERROR") if response_code in _VALUES \
        else "INTERNAL_ERROR"


def namespaced(resource: Any) -> str:
    """A Resource's name in the broker: RocketMQ's `namespace%name` when it has a namespace."""
    ns = resource.resource_namespace
    return f"{ns}%{resource.name}" if ns else resource.name


def fifo_queue(group: str, queues: int) -> int:
    """The queue of a FIFO message group: by the group's hash, as Apache's proxy selects it."""
    return java_string_hash(group) % queues if queues > 0 else 0


def millis(ts: Any) -> int:
    return int(ts.seconds) * 1000 + int(ts.nanos) // 1_000_000


def send_request(msg: Any, topic: str, queue_id: int, producer_group: str) -> RemotingCommand:
    """The SEND_MESSAGE_V2 request a remoting producer would send for one v2 Message."""
    sp = msg.system_properties
    props: dict[str, str | None] = dict(msg.user_properties)
    if sp.HasField("tag"):
        props[C.PROPERTY_TAGS] = sp.tag
    if sp.keys:
        props[C.PROPERTY_KEYS] = " ".join(sp.keys)
    if sp.message_id:
        props[C.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX] = sp.message_id
    if sp.HasField("message_group"):
        props[C.PROPERTY_SHARDING_KEY] = sp.message_group
    if sp.HasField("delivery_timestamp"):
        props[C.PROPERTY_TIMER_DELIVER_MS] = str(millis(sp.delivery_timestamp))
    if sp.message_type == 4:  # TRANSACTION
        props[C.PROPERTY_TRANSACTION_PREPARED] = "true"
        props[C.PROPERTY_PRODUCER_GROUP] = producer_group
    if sp.HasField("trace_context"):
        props["TRACE_CONTEXT"] = sp.trace_context
    born = millis(sp.born_timestamp) if sp.HasField("born_timestamp") else int(time.time() * 1000)
    ext = {
        "a": producer_group, "b": topic, "c": "TBW102", "d": "4", "e": str(queue_id),
        "f": "4" if sp.message_type == 4 else "0", "g": str(born), "h": "0",
        "i": encode_properties(props), "j": "0", "k": "false",
    }
    return RemotingCommand(int(RequestCode.SEND_MESSAGE_V2), ext_fields=ext, body=bytes(msg.body))


def _timestamp(ms: int) -> dict[str, int]:
    # a dict, not Timestamp.FromMilliseconds: that is Python code in protobuf, run per message
    return {"seconds": ms // 1000, "nanos": ms % 1000 * 1_000_000}


def v2_fields(d: Any, m: MessageExt, topic: str, namespace: str, receipt_handle: str | None = None,
              invisible_ms: int | None = None, digest: bool = False) -> dict[str, Any]:
    """A stored (or popped) message as the fields of a v2 Message: a response is built around them
    in one constructor call (a Message built first would be copied into the response)."""
    props = m.properties
    sp: dict[str, Any] = {
        "message_id": props.get(C.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX) or m.offset_msg_id,
        "body_encoding": d.IDENTITY, "queue_id": m.queue_id, "queue_offset": m.queue_offset,
        "born_host": m.born_host[0] if isinstance(m.born_host, tuple) else str(m.born_host),
        "store_host": m.store_host[0] if isinstance(m.store_host, tuple) else str(m.store_host),
        "delivery_attempt": m.reconsume_times + 1,
        "born_timestamp": _timestamp(m.born_timestamp),
        "store_timestamp": _timestamp(m.store_timestamp),
    }
    tag = props.get(C.PROPERTY_TAGS)
    if tag:
        sp["tag"] = tag
    keys = props.get(C.PROPERTY_KEYS)
    if keys:
        sp["keys"] = keys.split(" ")
    group = props.get(C.PROPERTY_SHARDING_KEY)
    deliver = props.get(C.PROPERTY_TIMER_DELIVER_MS)
    if group:
        sp["message_group"] = group
        sp["message_type"] = d.FIFO
    elif deliver:
        sp["message_type"] = d.DELAY
        sp["delivery_timestamp"] = _timestamp(int(deliver))
    elif props.get(C.PROPERTY_TRANSACTION_PREPARED) == "true":
        sp["message_type"] = d.TRANSACTION
    else:
        sp["message_type"] = d.NORMAL
    if receipt_handle is not None:
        sp["receipt_handle"] = receipt_handle
    if invisible_ms is not None:
        sp["invisible_duration"] = {"seconds": invisible_ms // 1000, "nanos": invisible_ms % 1000 * 1_000_000}
    body = bytes(m.body)
    if digest:
        sp["body_digest"] = {"type": d.CRC32, "checksum": format(zlib.crc32(body) & 0xFFFFFFFF, "08X")}
    return {"topic": {"resource_namespace": namespace, "name": topic},
            "user_properties": {k: v for k, v in props.items() if k not in SYSTEM_KEYS},
            "system_properties": sp, "body": body}


def to_v2(d: Any, m: MessageExt, topic: str, namespace: str, receipt_handle: str | None = None,
          invisible_ms: int | None = None) -> Any:
    """A stored (or popped) message as a v2 Message."""
    return d.Message(**v2_fields(d, m, topic, namespace, receipt_handle, invisible_ms))
