"""Consumers: push (``push.PushConsumer``), lite pull (``lite_pull.LitePullConsumer``), their sync
facades (``sync``), and the vocabulary they share (statuses, contexts, configs, allocate strategies).

The consumer classes themselves are imported from their modules (``rocketq`` and ``rocketq.aio``
re-export them); this package namespace only carries the light-weight values.
"""

from rocketq.client.consumer.subscription import MessageSelector
from rocketq.client.consumer.types import (
    ConsumeConcurrentlyContext,
    ConsumeFromWhere,
    ConsumeMessageContext,
    ConsumeMessageHook,
    ConsumeMode,
    ConsumeOrderlyContext,
    ConsumeOrderlyStatus,
    ConsumerConfig,
    ConsumeStatus,
    ExpressionType,
    LitePullConsumerConfig,
    MessageModel,
    MessageRequestMode,
    PushConsumerConfig,
)
from rocketq.client.offset_store import (
    LocalFileOffsetStore,
    OffsetStore,
    ReadOffsetType,
    RemoteBrokerOffsetStore,
)
from rocketq.client.rebalance.allocate import (
    AllocateMachineRoomNearby,
    AllocateMessageQueueAveragely,
    AllocateMessageQueueAveragelyByCircle,
    AllocateMessageQueueByConfig,
    AllocateMessageQueueByMachineRoom,
    AllocateMessageQueueConsistentHash,
    AllocateMessageQueueStrategy,
)

__all__ = [
    "AllocateMachineRoomNearby",
    "AllocateMessageQueueAveragely",
    "AllocateMessageQueueAveragelyByCircle",
    "AllocateMessageQueueByConfig",
    "AllocateMessageQueueByMachineRoom",
    "AllocateMessageQueueConsistentHash",
    "AllocateMessageQueueStrategy",
    "ConsumeConcurrentlyContext",
    "ConsumeFromWhere",
    "ConsumeMessageContext",
    "ConsumeMessageHook",
    "ConsumeMode",
    "ConsumeOrderlyContext",
    "ConsumeOrderlyStatus",
    "ConsumeStatus",
    "ConsumerConfig",
    "ExpressionType",
    "LitePullConsumerConfig",
    "LocalFileOffsetStore",
    "MessageModel",
    "MessageRequestMode",
    "MessageSelector",
    "OffsetStore",
    "PushConsumerConfig",
    "ReadOffsetType",
    "RemoteBrokerOffsetStore",
]
