"""Headers of RocketMQ 5's pop family (POP_MESSAGE 200050 .. BATCH_ACK_MESSAGE 200151).

Field names are the Java fields of ``remoting/protocol/header/Pop*``, ``AckMessageRequestHeader``,
``ChangeInvisibleTime*``, ``PeekMessageRequestHeader``, ``Notification*`` and ``PollingInfo*``
(rocketmq-all-5.3.1); a field without a default is ``@CFNotNull`` there.
"""

from __future__ import annotations

from rocketq.codec.headers._compiler import CommandHeader, Long, header

__all__ = [
    "AckMessageRequestHeader",
    "ChangeInvisibleTimeRequestHeader",
    "ChangeInvisibleTimeResponseHeader",
    "NotificationRequestHeader",
    "NotificationResponseHeader",
    "PeekMessageRequestHeader",
    "PollingInfoRequestHeader",
    "PollingInfoResponseHeader",
    "PopMessageRequestHeader",
    "PopMessageResponseHeader",
]


@header
class PopMessageRequestHeader(CommandHeader):
    """queueId -1 pops from every readable queue; invisibleTime and pollTime are milliseconds."""

    consumer_group: str
    topic: str
    queue_id: int
    max_msg_nums: int
    invisible_time: Long
    poll_time: Long
    born_time: Long
    init_mode: int
    exp_type: str | None = None
    exp: str | None = None
    order: bool = False
    attempt_id: str | None = None


@header
class PopMessageResponseHeader(CommandHeader):
    pop_time: Long
    invisible_time: Long
    revive_qid: int
    rest_num: Long
    start_offset_info: str | None = None
    msg_offset_info: str | None = None
    order_count_info: str | None = None


@header
class AckMessageRequestHeader(CommandHeader):
    consumer_group: str
    topic: str
    queue_id: int
    extra_info: str
    offset: Long


@header
class ChangeInvisibleTimeRequestHeader(CommandHeader):
    consumer_group: str
    topic: str
    queue_id: int
    extra_info: str
    offset: Long
    invisible_time: Long


@header
class ChangeInvisibleTimeResponseHeader(CommandHeader):
    pop_time: Long
    invisible_time: Long
    revive_qid: int


@header
class PeekMessageRequestHeader(CommandHeader):
    topic: str
    queue_id: int
    max_msg_nums: int
    consumer_group: str


@header
class NotificationRequestHeader(CommandHeader):
    consumer_group: str
    topic: str
    queue_id: int
    poll_time: Long
    born_time: Long
    order: bool = False
    attempt_id: str | None = None


@header
class NotificationResponseHeader(CommandHeader):
    has_msg: bool = False


@header
class PollingInfoRequestHeader(CommandHeader):
    consumer_group: str
    topic: str
    queue_id: int


@header
class PollingInfoResponseHeader(CommandHeader):
    polling_num: int
