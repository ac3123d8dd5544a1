"""The values users exchange with the client: Message, SendResult, PullResult and friends.

``MessageExt`` (a stored message) and ``MessageQueue`` are the codec's own classes, re-exported
here so that users import every message type from one place.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import NamedTuple

from rocketq.codec.bodies import MessageQueue
from rocketq.codec.message import MessageConst, MessageExt
from rocketq.errors import InvalidMessage

__all__ = [
    "Message",
    "MessageConst",
    "MessageExt",
    "MessageQueue",
    "PullResult",
    "PullResultExt",
    "PullStatus",
    "SendResult",
    "SendStatus",
]

@dataclass(frozen=True, slots=True)
class Message:
    """A message to send.

    ``keys`` may be one string (space-separated keys, as RocketMQ stores them) or a sequence of
    keys. ``delay_level`` 1..18 delays delivery by RocketMQ's levels (1s 5s 10s 30s 1m ... 2h).
    A timer message (RocketMQ 5 brokers, docs/timer.md) is delivered at ``delivery_timestamp`` (ms
    since the epoch: the TIMER_DELIVER_MS property) or after ``delay`` (a ``timedelta`` or seconds:
    TIMER_DELAY_MS), to the broker's precision; its SendResult carries a ``recall_handle``.
    ``properties`` are user properties; the names RocketMQ reserves (TAGS, KEYS, ...) are set
    through the dedicated fields. A message is a value: ``dataclasses.replace`` makes a variant.
    """

    topic: str
    body: bytes
    tags: str | None = None
    keys: str | Sequence[str] | None = None
    flag: int = 0
    delay_level: int = 0
    wait_store_msg_ok: bool = True
    properties: Mapping[str, str] = dataclasses.field(default_factory=dict, hash=False)
    # Set by the transaction / request-reply machinery and by consumers re-sending to %RETRY%.
    transaction_id: str | None = None
    delivery_timestamp: int | None = None
    delay: timedelta | float | None = None

    def __post_init__(self) -> None:
        if self.delivery_timestamp is not None or self.delay is not None:
            # Folded into the properties, where the send path already carries user properties.
            object.__setattr__(self, "properties", timer_properties(self))

    @property
    def keys_text(self) -> str | None:
        keys = self.keys
        if keys is None or isinstance(keys, str):
            return keys or None
        return " ".join(keys) or None

    def get_property(self, name: str) -> str | None:
        return self.properties.get(name)

    def with_properties(self, **props: str) -> Message:
        return dataclasses.replace(self, properties={**self.properties, **props})


def timer_properties(msg: Message) -> dict[str, str]:
    """``msg.properties`` with TIMER_DELIVER_MS or TIMER_DELAY_MS, as 5.x's Message.setDeliverTimeMs
    / setDelayTimeMs put them."""
    if msg.delivery_timestamp is not None and msg.delay is not None:
        raise InvalidMessage("set delivery_timestamp or delay, not both")
    if msg.delay_level > 0:
        raise InvalidMessage("a timer message (delivery_timestamp / delay) cannot also have a delay_level")
    props = {k: v for k, v in msg.properties.items()
             if k not in (MessageConst.PROPERTY_TIMER_DELIVER_MS, MessageConst.PROPERTY_TIMER_DELAY_MS)}
    if msg.delivery_timestamp is not None:
        if msg.delivery_timestamp < 0:
            raise InvalidMessage(f"delivery_timestamp {msg.delivery_timestamp} is negative")
        props[MessageConst.PROPERTY_TIMER_DELIVER_MS] = str(int(msg.delivery_timestamp))
    else:
        delay = msg.delay
        seconds = delay.total_seconds() if isinstance(delay, timedelta) else float(delay or 0)
        if seconds < 0:
            raise InvalidMessage(f"the delay {delay} is negative")
        props[MessageConst.PROPERTY_TIMER_DELAY_MS] = str(round(seconds * 1000))
    return props


class SendStatus(enum.Enum):
    """Every one of these means the broker stored the message (PROTOCOL.md §2.2)."""

    SEND_OK = "SEND_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"


@dataclass(frozen=True, slots=True)
class SendResult:
    """What a successful send returns.

    ``msg_id`` is the client's UNIQ_KEY (comma-joined for a batch): the id users look messages up
    by. ``offset_msg_id`` is the broker's store-host + commit-log-offset id.
    """

    status: SendStatus
    msg_id: str
    message_queue: MessageQueue
    queue_offset: int
    offset_msg_id: str | None = None
    transaction_id: str | None = None
    region_id: str | None = None
    trace_on: bool = True
    # A timer message's handle for Producer.recall (RocketMQ 5.3's SendResult.recallHandle).
    recall_handle: str | None = None

    @property
    def send_status(self) -> SendStatus:  # RocketMQ's getter name
        return self.status


class PullStatus(enum.Enum):
    FOUND = "FOUND"
    NO_NEW_MSG = "NO_NEW_MSG"
    NO_MATCHED_MSG = "NO_MATCHED_MSG"
    OFFSET_ILLEGAL = "OFFSET_ILLEGAL"


@dataclass(frozen=True, slots=True)
class PullResult:
    """One pull answer: the messages found (already filtered by tag) and where to go next."""

    status: PullStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    messages: list[MessageExt] = dataclasses.field(default_factory=list, hash=False)
    suggest_which_broker_id: int = 0

    @property
    def pull_status(self) -> PullStatus:
        return self.status

    @property
    def msg_found_list(self) -> list[MessageExt]:
        return self.messages


class PullResultExt(NamedTuple):
    """A pull answer before its records are decoded (RocketMQ's PullResultExt): what the broker
    said in the header, and the raw stored records. ``PullAPIWrapper.process_pull_result`` turns
    it into a ``PullResult``; bulk readers (Spark) read ``message_binary`` themselves. A
    NamedTuple: one is made per pull, and it costs a tuple."""

    status: PullStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    suggest_which_broker_id: int
    message_binary: bytes | bytearray | memoryview = b""
