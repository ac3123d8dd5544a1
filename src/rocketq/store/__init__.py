"""The durable store: commit log, consume queues, index (files only, never the network)."""

from rocketq.store.config import ASYNC_FLUSH, SYNC_FLUSH, MessageStoreConfig
from rocketq.store.message_store import MessageStore
from rocketq.store.model import (
    BatchEntry,
    GetMessageResult,
    GetMessageStatus,
    MessageBatchToStore,
    MessageToStore,
    PutMessageResult,
    PutMessageStatus,
    QueryMessageResult,
    SingleEntry,
)

__all__ = [
    "ASYNC_FLUSH",
    "SYNC_FLUSH",
    "BatchEntry",
    "GetMessageResult",
    "GetMessageStatus",
    "MessageBatchToStore",
    "MessageStore",
    "MessageStoreConfig",
    "MessageToStore",
    "PutMessageResult",
    "PutMessageStatus",
    "QueryMessageResult",
    "SingleEntry",
]
