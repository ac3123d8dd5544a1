"""Headers of the timer-message requests RocketMQ 5 added (RECALL_MESSAGE, 5.3.2)."""

from __future__ import annotations

from rocketq.codec.headers._compiler import CommandHeader, header

__all__ = ["RecallMessageRequestHeader", "RecallMessageResponseHeader"]


@header
class RecallMessageRequestHeader(CommandHeader):
    topic: str
    recall_handle: str
    producer_group: str | None = None


@header
class RecallMessageResponseHeader(CommandHeader):
    msg_id: str
