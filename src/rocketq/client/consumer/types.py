"""Consumer vocabulary: statuses, listener contexts, hooks and the consumer configs.

Names and defaults are RocketMQ's (DefaultMQPushConsumer / DefaultLitePullConsumer, PROTOCOL.md
§4.4) so a RocketMQ user finds the knob they know under its snake_case name.
"""

from __future__ import annotations

import enum
import sys
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeAlias, runtime_checkable

from rocketq.client.config import ClientConfig, ServiceState
from rocketq.codec.bodies import ConsumeFromWhere, MessageModel, MessageQueue
from rocketq.codec.message import MessageExt

__all__ = [
    "DEFAULT_CONSUMER_GROUP",
    "DEFAULT_CONSUME_FROM_TIMESTAMP_WINDOW_MS",
    "ConcurrentlyListener",
    "ConsumeConcurrentlyContext",
    "ConsumeFromWhere",
    "ConsumeMessageContext",
    "ConsumeMessageHook",
    "ConsumeOrderlyContext",
    "ConsumeOrderlyStatus",
    "ConsumeStatus",
    "ConsumerConfig",
    "ExpressionType",
    "LitePullConsumerConfig",
    "MessageModel",
    "OrderlyListener",
    "PushConsumerConfig",
    "ServiceState",
]

DEFAULT_CONSUMER_GROUP = "DEFAULT_CONSUMER"
# CONSUME_FROM_TIMESTAMP without an explicit time starts half an hour back (Java's default).
DEFAULT_CONSUME_FROM_TIMESTAMP_WINDOW_MS = 30 * 60 * 1000


class ConsumeStatus(enum.Enum):
    """What a concurrent listener answers (ConsumeConcurrentlyStatus)."""

    CONSUME_SUCCESS = "CONSUME_SUCCESS"
    RECONSUME_LATER = "RECONSUME_LATER"


class ConsumeOrderlyStatus(enum.Enum):
    """What an orderly listener answers; ROLLBACK and COMMIT only matter without auto-commit."""

    SUCCESS = "SUCCESS"
    ROLLBACK = "ROLLBACK"
    COMMIT = "COMMIT"
    SUSPEND_CURRENT_QUEUE_A_MOMENT = "SUSPEND_CURRENT_QUEUE_A_MOMENT"


class MessageRequestMode(enum.Enum):
    """How a push consumer reads its topics (RocketMQ 5's MessageRequestMode): PULL owns queues
    (rebalance), POP shares them (push_pop.py, docs/pop.md)."""

    PULL = "PULL"
    POP = "POP"


ConsumeMode = MessageRequestMode


class ExpressionType(enum.Enum):
    TAG = "TAG"
    SQL92 = "SQL92"


# Contexts are not values: the listener writes its answer into them (ack index, delay level),
# exactly like Java's, so they are plain mutable dataclasses.
@dataclass(slots=True)
class ConsumeConcurrentlyContext:
    message_queue: MessageQueue
    # 0: the broker picks the next level (3 + reconsumeTimes); -1: straight to the DLQ.
    delay_level_when_next_consume: int = 0
    # Messages up to and including this index succeeded; the rest go back (RECONSUME_LATER semantics).
    ack_index: int = sys.maxsize


@dataclass(slots=True)
class ConsumeOrderlyContext:
    message_queue: MessageQueue
    auto_commit: bool = True
    # -1: the consumer's suspend_current_queue_time_millis.
    suspend_current_queue_time_millis: int = -1


@dataclass(slots=True)
class ConsumeMessageContext:
    """What before/after consume hooks see (RocketMQ ConsumeMessageContext)."""

    consumer_group: str
    message_queue: MessageQueue
    msg_list: Sequence[MessageExt]
    success: bool = False
    status: str = ""
    props: dict[str, str] = field(default_factory=dict)
    namespace: str | None = None
    # What a hook keeps from before to after (the trace hook's SubBefore context).
    mq_trace_context: Any = None


@runtime_checkable
class ConsumeMessageHook(Protocol):
    def hook_name(self) -> str: ...

    def consume_message_before(self, context: ConsumeMessageContext) -> None: ...

    def consume_message_after(self, context: ConsumeMessageContext) -> None: ...


# Plain callables, sync (run in the consume thread pool) or async (run on the event loop).
ConcurrentlyListener: TypeAlias = Callable[
    [list[MessageExt], ConsumeConcurrentlyContext], ConsumeStatus | Awaitable[ConsumeStatus]
]
OrderlyListener: TypeAlias = Callable[
    [list[MessageExt], ConsumeOrderlyContext], ConsumeOrderlyStatus | Awaitable[ConsumeOrderlyStatus]
]


@dataclass(frozen=True, slots=True)
class ConsumerConfig(ClientConfig):
    """What push and lite-pull consumers share (on top of the ClientConfig of their instance)."""

    consumer_group: str = DEFAULT_CONSUMER_GROUP
    message_model: MessageModel = MessageModel.CLUSTERING
    consume_from_where: ConsumeFromWhere = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET
    # ms epoch for CONSUME_FROM_TIMESTAMP; None means half an hour before start.
    consume_timestamp: int | None = None
    # An AllocateMessageQueueStrategy, or a strategy name ("AVG", "AVG_BY_CIRCLE", ...).
    allocate_message_queue_strategy: Any = "AVG"
    pull_threshold_for_queue: int = 1000
    pull_threshold_size_for_queue: int = 100  # MiB
    # Where broadcasting consumers keep their offsets (~/.rocketmq_offsets like Java).
    store_dir: str | None = None
    # Aliases of pull_threshold_* for the whole topic; -1 = off (split across its queues).
    pull_threshold_for_topic: int = -1
    pull_threshold_size_for_topic: int = -1


@dataclass(frozen=True, slots=True)
class PushConsumerConfig(ConsumerConfig):
    consume_thread_min: int = 20
    consume_thread_max: int = 20
    consume_concurrently_max_span: int = 2000
    pull_interval: int = 0  # ms between pulls of one queue
    consume_message_batch_max_size: int = 1
    pull_batch_size: int = 32
    pull_batch_size_in_bytes: int = 256 * 1024
    post_subscription_when_pull: bool = False
    # -1: 16 for concurrent listeners, unlimited for orderly ones.
    max_reconsume_times: int = -1
    suspend_current_queue_time_millis: int = 1000
    consume_timeout: int = 15  # minutes
    await_termination_millis_when_shutdown: int = 0
    # Long-poll hold asked of the broker and the client-side timeout of such a pull.
    broker_suspend_max_time_millis: int = 15_000
    consumer_timeout_millis_when_suspend: int = 30_000
    # POP: consume by pop instead of pull + rebalance (RocketMQ 5; docs/pop.md)
    consume_mode: MessageRequestMode = MessageRequestMode.PULL


@dataclass(frozen=True, slots=True)
class LitePullConsumerConfig(ConsumerConfig):
    pull_batch_size: int = 10
    pull_thread_nums: int = 20
    auto_commit: bool = True
    auto_commit_interval_millis: int = 5_000
    poll_timeout_millis: int = 5_000
    pull_threshold_for_all: int = 10_000
    consume_max_span: int = 2_000
    broker_suspend_max_time_millis: int = 20_000
    consumer_timeout_millis_when_suspend: int = 30_000
    consumer_pull_timeout_millis: int = 10_000
    topic_metadata_check_interval_millis: int = 30_000
