"""Client-facing bodies: heartbeats, message queues, orderly locks, consumer lists, subscription
groups and consumer offsets (PROTOCOL.md §2.2, §2.4)."""

from __future__ import annotations

import dataclasses
from typing import Annotated, Any

import orjson

from rocketq.codec import fastjson
from rocketq.codec.bodies._schema import JavaEnum, JsonBody, Key, body
from rocketq.codec.bodies.topic import DataVersion
from rocketq.errors import ProtocolError

__all__ = [
    "ConsumeFromWhere",
    "ConsumeType",
    "ConsumerData",
    "ConsumerOffsetSerializeWrapper",
    "GetConsumerListByGroupResponseBody",
    "HeartbeatData",
    "LockBatchRequestBody",
    "LockBatchResponseBody",
    "MessageModel",
    "MessageQueue",
    "ProducerData",
    "SubscriptionData",
    "SubscriptionGroupConfig",
    "SubscriptionGroupWrapper",
    "UnlockBatchRequestBody",
    "mq_table",
]

SUB_ALL = "*"


# Ordinals are Java's declaration order: the C++ client sends them instead of names.
class ConsumeType(JavaEnum):
    CONSUME_ACTIVELY = 0  # pull
    CONSUME_PASSIVELY = 1  # push
    CONSUME_POP = 2


class MessageModel(JavaEnum):
    BROADCASTING = 0
    CLUSTERING = 1


class ConsumeFromWhere(JavaEnum):
    CONSUME_FROM_LAST_OFFSET = 0
    CONSUME_FROM_LAST_OFFSET_AND_FROM_MIN_WHEN_BOOT_FIRST = 1
    CONSUME_FROM_MIN_OFFSET = 2
    CONSUME_FROM_MAX_OFFSET = 3
    CONSUME_FROM_FIRST_OFFSET = 4
    CONSUME_FROM_TIMESTAMP = 5


@body(order=True)
class MessageQueue(JsonBody):
    """Sorts by (topic, brokerName, queueId), the order rebalancing relies on."""

    topic: str
    broker_name: str
    queue_id: int

    def __str__(self) -> str:
        # Java's toString: the consistent-hash allocation strategy hashes exactly this text.
        return f"MessageQueue [topic={self.topic}, brokerName={self.broker_name}, queueId={self.queue_id}]"


def mq_table(obj: Any, what: str) -> dict[MessageQueue, Any]:
    """A fastjson ``Map<MessageQueue, V>`` as `fastjson.loads` reads it -> {MessageQueue: V}."""
    if not isinstance(obj, dict):
        raise ProtocolError(f"{what}: expected an object")
    out = {}
    for key, value in obj.items():
        raw = key.value if isinstance(key, fastjson.ObjectKey) else fastjson.loads(key)
        out[MessageQueue.from_obj(raw, what)] = value
    return out


@body
class ProducerData(JsonBody):
    group_name: str


@body
class SubscriptionData(JsonBody):
    topic: str
    sub_string: str = SUB_ALL
    class_filter_mode: bool = False
    tags_set: tuple[str, ...] = ()
    code_set: tuple[int, ...] = ()
    sub_version: int = 0
    expression_type: str = "TAG"


@body
class ConsumerData(JsonBody):
    group_name: str
    consume_type: ConsumeType = ConsumeType.CONSUME_PASSIVELY
    message_model: MessageModel = MessageModel.CLUSTERING
    consume_from_where: ConsumeFromWhere = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET
    subscription_data_set: tuple[SubscriptionData, ...] = ()
    unit_mode: bool = False


@body
class HeartbeatData(JsonBody):
    client_id: Annotated[str, Key("clientID")]
    producer_data_set: tuple[ProducerData, ...] = ()
    consumer_data_set: tuple[ConsumerData, ...] = ()
    heartbeat_fingerprint: int = 0
    without_sub: bool = False


@body
class GetConsumerListByGroupResponseBody(JsonBody):
    consumer_id_list: tuple[str, ...] = ()


@body
class LockBatchRequestBody(JsonBody):
    consumer_group: str | None = None
    client_id: str | None = None
    only_this_broker: bool = False
    mq_set: tuple[MessageQueue, ...] = ()


@body
class UnlockBatchRequestBody(JsonBody):
    consumer_group: str | None = None
    client_id: str | None = None
    only_this_broker: bool = False
    mq_set: tuple[MessageQueue, ...] = ()


@body
class LockBatchResponseBody(JsonBody):
    lock_ok_mq_set: Annotated[tuple[MessageQueue, ...], Key("lockOKMQSet")] = ()


def _default_retry_policy() -> dict[str, Any]:
    return {"type": "CUSTOMIZED"}


@body
class SubscriptionGroupConfig(JsonBody):
    group_name: str
    consume_enable: bool = True
    consume_from_min_enable: bool = True
    consume_broadcast_enable: bool = True
    consume_message_orderly: bool = False
    retry_queue_nums: int = 1
    retry_max_times: int = 16
    # Kept as JSON values: only admin tools read them and they pass through unchanged.
    group_retry_policy: Any = dataclasses.field(default_factory=_default_retry_policy)
    broker_id: int = 0
    which_broker_when_consume_slowly: int = 1
    notify_consumer_ids_changed_enable: bool = True
    group_sys_flag: int = 0
    consume_timeout_minute: int = 15
    subscription_data_set: Any = None
    attributes: dict[str, str] = dataclasses.field(default_factory=dict)


@body
class SubscriptionGroupWrapper(JsonBody):
    """``config/subscriptionGroup.json``."""

    subscription_group_table: dict[str, SubscriptionGroupConfig] = dataclasses.field(default_factory=dict)
    forbidden_table: dict[str, dict[str, int]] = dataclasses.field(default_factory=dict)
    data_version: DataVersion = dataclasses.field(default_factory=DataVersion)


@body
class ConsumerOffsetSerializeWrapper(JsonBody):
    """``config/consumerOffset.json``: ``"<topic>@<group>"`` -> {queueId: offset}.

    Java writes the queue ids as bare numbers; ``from_json`` reads that form too.
    """

    offset_table: dict[str, dict[int, int]] = dataclasses.field(default_factory=dict)
    data_version: DataVersion | None = None

    def to_json(self) -> bytes:
        # What the generic plan writes, but orjson quotes the int queue ids itself: a broker's
        # table has an entry per queue of every group, and copying each inner map costs 6x.
        doc: dict[str, Any] = {} if self.data_version is None else {"dataVersion": self.data_version.to_obj()}
        doc["offsetTable"] = self.offset_table
        return orjson.dumps(doc, option=orjson.OPT_NON_STR_KEYS)
