"""The values users exchange with the client: Message, SendResult, PullResult and friends.

``MessageExt`` (a stored message) and ``MessageQueue`` are the codec's own classes, re-exported
here so that users import every message type from one place.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from rocketq.codec.bodies import MessageQueue
from rocketq.codec.message import MessageConst, MessageExt

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
