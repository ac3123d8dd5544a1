"""JSON bodies (PROTOCOL.md §2.4) as frozen dataclasses with RocketMQ's member names.

``value.to_json() -> bytes`` writes compact, fastjson-shaped JSON; ``Cls.from_json(data)`` reads
what Java, Go, C++ and Node peers send (enum names or ordinals, numbers as strings, fastjson's
bare integer map keys) and raises ``ProtocolError`` on anything else.
"""

from rocketq.codec.bodies._schema import JavaEnum, JsonBody, Key, body, loads_lenient
from rocketq.codec.bodies.admin import ConsumeStats, OffsetWrapper, TopicOffset, TopicStatsTable
from rocketq.codec.bodies.client import (
    ConsumeFromWhere,
    ConsumerData,
    ConsumerOffsetSerializeWrapper,
    ConsumeType,
    GetConsumerListByGroupResponseBody,
    HeartbeatData,
    LockBatchRequestBody,
    LockBatchResponseBody,
    MessageModel,
    MessageQueue,
    ProducerData,
    SubscriptionData,
    SubscriptionGroupConfig,
    SubscriptionGroupWrapper,
    UnlockBatchRequestBody,
)
from rocketq.codec.bodies.route import (
    BrokerData,
    ClusterInfo,
    KVTable,
    QueueData,
    TopicList,
    TopicRouteData,
)
from rocketq.codec.bodies.topic import (
    DataVersion,
    RegisterBrokerBody,
    TopicConfig,
    TopicConfigSerializeWrapper,
    TopicFilterType,
)

__all__ = [
    "BrokerData",
    "ClusterInfo",
    "ConsumeFromWhere",
    "ConsumeStats",
    "ConsumeType",
    "ConsumerData",
    "ConsumerOffsetSerializeWrapper",
    "DataVersion",
    "GetConsumerListByGroupResponseBody",
    "HeartbeatData",
    "JavaEnum",
    "JsonBody",
    "KVTable",
    "Key",
    "LockBatchRequestBody",
    "LockBatchResponseBody",
    "MessageModel",
    "MessageQueue",
    "OffsetWrapper",
    "ProducerData",
    "QueueData",
    "RegisterBrokerBody",
    "SubscriptionData",
    "SubscriptionGroupConfig",
    "SubscriptionGroupWrapper",
    "TopicConfig",
    "TopicConfigSerializeWrapper",
    "TopicFilterType",
    "TopicList",
    "TopicOffset",
    "TopicRouteData",
    "TopicStatsTable",
    "UnlockBatchRequestBody",
    "body",
    "loads_lenient",
]
