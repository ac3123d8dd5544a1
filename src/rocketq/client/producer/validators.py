"""Checks a producer runs before anything is sent (RocketMQ's Validators); each failure is a
typed exception raised at the call site."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final

from rocketq.client.message import Message
from rocketq.errors import InvalidArgument, InvalidMessage

__all__ = [
    "CHARACTER_MAX_LENGTH",
    "NOT_ALLOWED_SEND_TOPICS",
    "TOPIC_MAX_LENGTH",
    "check_batch",
    "check_group",
    "check_message",
    "check_topic",
]

_VALID: Final = re.compile(r"^[%|a-zA-Z0-9_-]+$")
TOPIC_MAX_LENGTH: Final = 127
CHARACTER_MAX_LENGTH: Final = 255
# System topics a client may never write to (TopicValidator.NOT_ALLOWED_SEND_TOPIC_SET).
NOT_ALLOWED_SEND_TOPICS: Final = frozenset(
    {
        "SCHEDULE_TOPIC_XXXX",
        "RMQ_SYS_TRANS_HALF_TOPIC",
        "RMQ_SYS_TRANS_OP_HALF_TOPIC",
        "TRANS_CHECK_MAX_TIME_TOPIC",
        "SELF_TEST_TOPIC",
        "OFFSET_MOVED_EVENT",
    }
)
RETRY_GROUP_TOPIC_PREFIX: Final = "%RETRY%"


def check_group(group: str | None) -> None:
    if not group or not group.strip():
        raise InvalidArgument("the specified group is blank")
    if len(group) > CHARACTER_MAX_LENGTH:
        raise InvalidArgument(f"the specified group is longer than group max length {CHARACTER_MAX_LENGTH}")
    if not _VALID.match(group):
        raise InvalidArgument(
            f"the specified group[{group}] contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"
        )


def check_topic(topic: str | None) -> None:
    if not topic or not topic.strip():
        raise InvalidMessage("The specified topic is blank.")
    if len(topic) > TOPIC_MAX_LENGTH:
        raise InvalidMessage(f"The specified topic is longer than topic max length {TOPIC_MAX_LENGTH}.")
    if not _VALID.match(topic):
        raise InvalidMessage(
            f"The specified topic[{topic}] contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"
        )
    if topic in NOT_ALLOWED_SEND_TOPICS:
        raise InvalidMessage(f"Sending message to topic[{topic}] is forbidden.")


def check_message(msg: Message, max_message_size: int, *, check_topic_name: bool = True) -> None:
    """Topic, body (present, not empty, not over the limit) and delay level of one message.

    ``check_topic_name=False`` skips the topic name checks (a producer caches topics it checked).
    """
    if not isinstance(msg, Message):
        raise InvalidMessage(f"expected a Message, got {type(msg).__name__}")
    if check_topic_name:
        check_topic(msg.topic)
    body = msg.body
    if body is None:
        raise InvalidMessage("the message body is null")
    if not isinstance(body, bytes | bytearray | memoryview):
        raise InvalidMessage(f"the message body must be bytes, not {type(body).__name__}")
    if len(body) == 0:
        raise InvalidMessage("the message body length is zero")
    if len(body) > max_message_size:
        raise InvalidMessage(f"the message body size over max value, MAX: {max_message_size}")
    if msg.delay_level < 0:
        raise InvalidMessage(f"the delay level {msg.delay_level} is negative")


def check_batch(msgs: Sequence[Message], max_message_size: int) -> None:
    """MessageBatch's rules: one topic, one WAIT flag, no delay, no %RETRY% topic.

    The topic name is checked once; per message only what can differ (cheap on large batches).
    """
    if not msgs:
        raise InvalidMessage("the batch is empty")
    first = msgs[0]
    check_message(first, max_message_size)
    topic, wait = first.topic, first.wait_store_msg_ok
    for msg in msgs:
        if type(msg) is not Message:
            check_message(msg, max_message_size)
        if msg.topic != topic:
            raise InvalidMessage("The topic of the messages in one batch should be the same")
        body = msg.body
        if type(body) is not bytes or not body or len(body) > max_message_size or msg.delay_level < 0:
            check_message(msg, max_message_size, check_topic_name=False)
        if msg.delay_level > 0:
            raise InvalidMessage("TimeDelayLevel is not supported for batching")
        if msg.delivery_timestamp is not None or msg.delay is not None:
            raise InvalidMessage("timer messages (delivery_timestamp / delay) are not supported for batching")
        if msg.wait_store_msg_ok != wait:
            raise InvalidMessage("The waitStoreMsgOK of the messages in one batch should the same")
    if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
        raise InvalidMessage("Retry Group is not supported for batching")
