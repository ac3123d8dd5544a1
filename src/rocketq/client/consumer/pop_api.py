"""The client side of pop (RocketMQ 5's MQClientAPIImpl.popMessageAsync / processPopResponse,
ackMessageAsync, batchAckMessageAsync, changeInvisibleTimeAsync): one coroutine per RPC and the
decoding of a pop answer into messages that carry their receipt handle (property ``POP_CK``)."""

from __future__ import annotations

import enum
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from rocketq.codec.codes import RequestCode, ResponseCode
from rocketq.codec.command import RemotingCommand
from rocketq.codec.headers import (
    AckMessageRequestHeader,
    ChangeInvisibleTimeRequestHeader,
    PopMessageRequestHeader,
)
from rocketq.codec.message import MessageExt, decode_messages
from rocketq.codec.pop import (
    batch_acks,
    build_extra_info,
    encode_batch_ack_body,
    parse_extra_info,
    receipt_handles,
)
from rocketq.codec.properties import MessageConst
from rocketq.errors import for_code
from rocketq.remoting import RemotingClient

__all__ = [
    "PopResult",
    "PopStatus",
    "ack_message",
    "batch_ack_messages",
    "change_invisible_time",
    "pop_message",
]

POP_CK = MessageConst.PROPERTY_POP_CK


class PopStatus(enum.Enum):
    FOUND = "FOUND"
    NO_NEW_MSG = "NO_NEW_MSG"
    POLLING_FULL = "POLLING_FULL"
    POLLING_NOT_FOUND = "POLLING_NOT_FOUND"


@dataclass(slots=True)
class PopResult:
    status: PopStatus
    messages: list[MessageExt] = field(default_factory=list)
    pop_time: int = 0
    invisible_time: int = 0
    rest_num: int = 0
    handles: list[str] = field(default_factory=list)  # the receipt handle (POP_CK) of each message


async def pop_message(
    client: RemotingClient, addr: str, broker_name: str, header: PopMessageRequestHeader, timeout: float
) -> PopResult:
    """POP_MESSAGE; ``timeout`` must cover the header's pollTime plus the round trip."""
    request = RemotingCommand.request(RequestCode.POP_MESSAGE, header.to_ext())
    response = await client.invoke(addr, request, timeout)
    return process_pop_response(response, broker_name, header.topic, addr)


def process_pop_response(
    response: RemotingCommand, broker_name: str, topic: str, addr: str = ""
) -> PopResult:
    code = response.code
    ext = response.ext_fields or {}
    if code == ResponseCode.POLLING_FULL:
        return PopResult(PopStatus.POLLING_FULL, rest_num=int(ext.get("restNum", 0) or 0))
    if code in (ResponseCode.POLLING_TIMEOUT, ResponseCode.PULL_NOT_FOUND):
        return PopResult(PopStatus.POLLING_NOT_FOUND, rest_num=int(ext.get("restNum", 0) or 0))
    if code != ResponseCode.SUCCESS:
        raise for_code(code, response.remark, broker_addr=addr, topic=topic)
    pop_time = int(ext["popTime"])
    invisible = int(ext["invisibleTime"])
    revive_qid = int(ext["reviveQid"])
    body = response.body
    msgs = decode_messages(body if isinstance(body, bytes | bytearray | memoryview) else b"".join(body))
    handles = receipt_handles(msgs, ext, pop_time, invisible, revive_qid, broker_name, topic)
    return PopResult(PopStatus.FOUND, msgs, pop_time, invisible, int(ext.get("restNum", 0) or 0), handles)


def pop_header(
    group: str,
    topic: str,
    max_nums: int,
    invisible_ms: int,
    poll_ms: int,
    *,
    queue_id: int = -1,
    exp_type: str | None = None,
    exp: str | None = None,
    order: bool = False,
    init_mode: int = 0,
    attempt_id: str | None = None,
) -> PopMessageRequestHeader:
    return PopMessageRequestHeader(
        group,
        topic,
        queue_id,
        max_nums,
        invisible_ms,
        poll_ms,
        int(time.time() * 1000),
        init_mode,
        exp_type,
        exp,
        order,
        attempt_id,
    )


async def ack_message(
    client: RemotingClient, addr: str, group: str, topic: str, handle: str, timeout: float
) -> None:
    """ACK_MESSAGE of one handle; `topic` is the topic the message was popped for."""
    info = parse_extra_info(handle)
    real = info.real_topic(topic, group)
    header = AckMessageRequestHeader(
        group,
        real,
        info.queue_id,
        handle,
        info.queue_offset if info.queue_offset is not None else info.ck_offset,
    )
    response = await client.invoke(
        addr, RemotingCommand.request(RequestCode.ACK_MESSAGE, header.to_ext()), timeout
    )
    if response.code != ResponseCode.SUCCESS:
        raise for_code(response.code, response.remark, broker_addr=addr, topic=real)


async def batch_ack_messages(
    client: RemotingClient,
    addr: str,
    broker_name: str,
    group: str,
    topic: str,
    handles: Sequence[str],
    timeout: float,
) -> None:
    """BATCH_ACK_MESSAGE of handles from one broker: one entry per checkpoint."""
    acks = batch_acks(group, topic, handles)
    request = RemotingCommand.request(
        RequestCode.BATCH_ACK_MESSAGE, None, encode_batch_ack_body(broker_name, acks)
    )
    response = await client.invoke(addr, request, timeout)
    if response.code != ResponseCode.SUCCESS:
        raise for_code(response.code, response.remark, broker_addr=addr, topic=topic)


async def change_invisible_time(
    client: RemotingClient, addr: str, group: str, topic: str, handle: str, invisible_ms: int, timeout: float
) -> str:
    """CHANGE_MESSAGE_INVISIBLETIME: the message's new handle."""
    info = parse_extra_info(handle)
    real = info.real_topic(topic, group)
    offset = info.queue_offset if info.queue_offset is not None else info.ck_offset
    header = ChangeInvisibleTimeRequestHeader(group, real, info.queue_id, handle, offset, invisible_ms)
    request = RemotingCommand.request(RequestCode.CHANGE_MESSAGE_INVISIBLETIME, header.to_ext())
    response = await client.invoke(addr, request, timeout)
    if response.code != ResponseCode.SUCCESS:
        raise for_code(response.code, response.remark, broker_addr=addr, topic=real)
    ext = response.ext_fields or {}
    return build_extra_info(
        offset,
        int(ext["popTime"]),
        int(ext["invisibleTime"]),
        int(ext["reviveQid"]),
        real,
        info.broker_name,
        info.queue_id,
        offset,
    )
