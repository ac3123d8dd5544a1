"""The recall handle of a timer message (RocketMQ 5.3.2's RecallMessageHandle.HandleV1).

``base64url("v1 <topic> <brokerName> <timestampStr> <messageId>")`` with padding, where the
timestamp is the message's TIMER_OUT_MS + 1 (the slot start, plus one so that a recall filed at
that time lands in the same slot) and the id is its UNIQ_KEY. The broker puts it in the send
answer's ``recallHandle`` field; RECALL_MESSAGE (370) brings it back.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass

from rocketq.errors import InvalidParameter

__all__ = ["RecallHandle"]

_VERSION_1 = "v1"


@dataclass(frozen=True, slots=True)
class RecallHandle:
    topic: str
    broker_name: str
    timestamp_str: str
    message_id: str
    version: str = _VERSION_1

    def encode(self) -> str:
        raw = " ".join((_VERSION_1, self.topic, self.broker_name, self.timestamp_str, self.message_id))
        return base64.urlsafe_b64encode(raw.encode()).decode()

    @property
    def timestamp(self) -> int:
        """The timestamp as a number; -1 when it is not one (Java's NumberUtils.toLong)."""
        try:
            return int(self.timestamp_str)
        except ValueError:
            return -1

    @classmethod
    def decode(cls, handle: str | None) -> RecallHandle:
        """The handle's fields; InvalidParameter("recall handle is invalid") otherwise."""
        if not handle:
            raise InvalidParameter("recall handle is invalid")
        try:
            # Java's URL decoder also takes it without its padding
            raw = base64.urlsafe_b64decode(handle + "=" * (-len(handle) % 4)).decode()
        except (binascii.Error, ValueError, UnicodeError):
            raise InvalidParameter("recall handle is invalid") from None
        items = raw.split(" ")
        if items[0] != _VERSION_1 or len(items) < 5:
            raise InvalidParameter("recall handle is invalid")
        return cls(items[1], items[2], items[3], items[4])
