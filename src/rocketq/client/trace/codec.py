"""RocketMQ's trace records (TraceDataEncoder): values in, text out, and back. No I/O.

A trace message body is a run of records, each ended by ``\\x02``; a record's fields are separated
by ``\\x01``. Field order per type (4.9.8):

    Pub            type ts region group topic msgId tags keys storeHost bodyLen cost msgType
                   offsetMsgId success
    SubBefore      type ts region group requestId msgId retryTimes keys          (one per message)
    SubAfter       type requestId msgId cost success keys contextCode ts group   (one per message)
    EndTransaction type ts region group topic msgId tags keys storeHost msgType transactionId
                   transactionState fromTransactionCheck

Java writes a missing tag or key as the text ``null`` (StringBuilder.append of a null String), and
so do we: a record we write decodes in a Java tool exactly as one the Java client wrote.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Final

__all__ = [
    "CONTENT_SPLITOR",
    "FIELD_SPLITOR",
    "ConsumeReturnType",
    "MessageType",
    "TraceBean",
    "TraceContext",
    "TraceType",
    "decode_traces",
    "encode_pub",
    "encode_trace",
    "trace_keys",
]

CONTENT_SPLITOR: Final = "\x01"
FIELD_SPLITOR: Final = "\x02"
KEY_SEPARATOR: Final = " "


class TraceType(enum.Enum):
    Pub = "Pub"
    SubBefore = "SubBefore"
    SubAfter = "SubAfter"
    EndTransaction = "EndTransaction"


class MessageType(enum.IntEnum):
    """Written as its ordinal."""

    Normal_Msg = 0
    Trans_Msg_Half = 1
    Trans_msg_Commit = 2
    Delay_Msg = 3


class ConsumeReturnType(enum.IntEnum):
    """A SubAfter's contextCode (the ordinal of the ``ConsumeContextType`` hook property)."""

    SUCCESS = 0
    TIME_OUT = 1
    EXCEPTION = 2
    RETURNNULL = 3
    FAILED = 4


@dataclass(frozen=True, slots=True)
class TraceBean:
    """One message in a trace record. ``None`` strings are written as Java writes null: ``null``."""

    topic: str | None = ""
    msg_id: str = ""
    offset_msg_id: str | None = ""
    tags: str | None = ""
    keys: str | None = ""
    store_host: str = ""
    client_host: str = ""
    store_time: int = 0
    retry_times: int = 0
    body_length: int = 0
    msg_type: MessageType = MessageType.Normal_Msg
    transaction_state: str | None = None  # LocalTransactionState's name
    transaction_id: str | None = None
    from_transaction_check: bool = False


@dataclass(frozen=True, slots=True)
class TraceContext:
    trace_type: TraceType
    timestamp: int = 0  # ms
    region_id: str | None = ""
    group_name: str = ""
    cost_time: int = 0  # ms
    success: bool = True
    request_id: str = ""
    context_code: int = 0
    beans: tuple[TraceBean, ...] = field(default_factory=tuple)


def _s(value: object) -> str:
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    return str(value)


def _record(*fields: object) -> str:
    return CONTENT_SPLITOR.join(map(_s, fields)) + FIELD_SPLITOR


def encode_pub(timestamp: int, region_id: str | None, group: str, topic: str | None, msg_id: str,
               tags: str | None, keys: str | None, store_host: str, body_length: int, cost_time: int,
               msg_type: int, offset_msg_id: str | None, success: bool) -> str:
    """A Pub record from plain values: one per traced send, so the send hook writes it without
    building a TraceContext first."""
    return (f"Pub\x01{timestamp}\x01{_s(region_id)}\x01{group}\x01{_s(topic)}\x01{msg_id}\x01{_s(tags)}\x01"
            f"{_s(keys)}\x01{store_host}\x01{body_length}\x01{cost_time}\x01{msg_type}\x01"
            f"{_s(offset_msg_id)}\x01{'true' if success else 'false'}\x02")


def encode_trace(ctx: TraceContext) -> str:
    """The record(s) of one context, as encoderFromContextBean writes them (LOCAL access channel)."""
    t = ctx.trace_type
    if t is TraceType.Pub:
        b = ctx.beans[0]
        return encode_pub(ctx.timestamp, ctx.region_id, ctx.group_name, b.topic, b.msg_id, b.tags, b.keys,
                          b.store_host, b.body_length, ctx.cost_time, int(b.msg_type), b.offset_msg_id,
                          ctx.success)
    if t is TraceType.SubBefore:
        return "".join(_record(t.value, ctx.timestamp, ctx.region_id, ctx.group_name, ctx.request_id,
                               b.msg_id, b.retry_times, b.keys) for b in ctx.beans)
    if t is TraceType.SubAfter:
        return "".join(_record(t.value, ctx.request_id, b.msg_id, ctx.cost_time, ctx.success, b.keys,
                               ctx.context_code, ctx.timestamp, ctx.group_name) for b in ctx.beans)
    b = ctx.beans[0]
    return _record(t.value, ctx.timestamp, ctx.region_id, ctx.group_name, b.topic, b.msg_id, b.tags, b.keys,
                   b.store_host, int(b.msg_type), b.transaction_id, b.transaction_state,
                   b.from_transaction_check)


def trace_keys(ctx: TraceContext) -> list[str]:
    """The keys the trace message carries for this context: each msgId and each of its keys, so the
    broker's index finds the trace by the traced message's id (TraceTransferBean.transKey)."""
    keys: list[str] = []
    for b in ctx.beans:
        keys.append(b.msg_id)
        if b.keys:
            keys.extend(k for k in b.keys.split(KEY_SEPARATOR) if k)
    return keys


def unique_keys(keys: Iterable[str]) -> str:
    """A batch's keys, once each, as the KEYS property (Message.setKeys(Collection))."""
    return KEY_SEPARATOR.join(dict.fromkeys(k for k in keys if k))


def _java_split(text: str, sep: str) -> list[str]:
    """String.split: trailing empty strings are dropped."""
    parts = text.split(sep)
    while parts and parts[-1] == "":
        parts.pop()
    return parts


def _bool(text: str) -> bool:
    return text.lower() == "true"  # Boolean.parseBoolean


def _decode_one(line: list[str]) -> TraceContext | None:
    kind = line[0]
    if kind == "Pub":
        bean = TraceBean(topic=line[4], msg_id=line[5], tags=line[6], keys=line[7], store_host=line[8],
                         body_length=int(line[9]), msg_type=MessageType(int(line[11])))
        success = True
        if len(line) == 13:
            success = _bool(line[12])
        elif len(line) >= 14:
            bean = replace(bean, offset_msg_id=line[12])
            success = _bool(line[13])
            if len(line) >= 15:  # written by old clients
                bean = replace(bean, client_host=line[14])
        return TraceContext(TraceType.Pub, int(line[1]), line[2], line[3], cost_time=int(line[10]),
                            success=success, beans=(bean,))
    if kind == "SubBefore":
        bean = TraceBean(msg_id=line[5], retry_times=int(line[6]), keys=line[7] if len(line) > 7 else "")
        return TraceContext(TraceType.SubBefore, int(line[1]), line[2], line[3], request_id=line[4],
                            beans=(bean,))
    if kind == "SubAfter":
        bean = TraceBean(msg_id=line[2], keys=line[5] if len(line) > 5 else "")
        ctx = TraceContext(TraceType.SubAfter, request_id=line[1], cost_time=int(line[3]),
                           success=_bool(line[4]), beans=(bean,))
        if len(line) >= 7:
            ctx = replace(ctx, context_code=int(line[6]))
        if len(line) >= 9:
            ctx = replace(ctx, timestamp=int(line[7]), group_name=line[8])
        return ctx
    if kind == "EndTransaction":
        bean = TraceBean(topic=line[4], msg_id=line[5], tags=line[6], keys=line[7], store_host=line[8],
                         msg_type=MessageType(int(line[9])), transaction_id=line[10],
                         transaction_state=line[11], from_transaction_check=_bool(line[12]))
        return TraceContext(TraceType.EndTransaction, int(line[1]), line[2], line[3], beans=(bean,))
    return None


def decode_traces(data: str) -> list[TraceContext]:
    """Every record of a trace message body (decoderFromTraceDataString).

    A record of an unknown type is skipped, as Java does; so is a malformed one (Java would fail the
    whole body), since one bad writer should not hide the others' records.
    """
    out: list[TraceContext] = []
    for record in _java_split(data, FIELD_SPLITOR):
        line = _java_split(record, CONTENT_SPLITOR)
        if not line:
            continue
        try:
            ctx = _decode_one(line)
        except (IndexError, ValueError):
            continue
        if ctx is not None:
            out.append(ctx)
    return out
