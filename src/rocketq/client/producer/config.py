"""ProducerConfig: DefaultMQProducer's knobs, RocketMQ names and defaults (PROTOCOL.md §4.4)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from rocketq.client.config import ClientConfig
from rocketq.client.producer.accumulator import (
    BATCH_MAX_BYTES,
    BATCH_MAX_DELAY_MS,
    TOTAL_BATCH_MAX_BYTES,
    check_limits,
)
from rocketq.client.producer.fault import DEFAULT_LATENCY_MAX, DEFAULT_NOT_AVAILABLE_DURATION

__all__ = [
    "AUTO_CREATE_TOPIC_KEY_TOPIC",
    "CLIENT_INNER_PRODUCER_GROUP",
    "DEFAULT_PRODUCER_GROUP",
    "ProducerConfig",
]

DEFAULT_PRODUCER_GROUP: Final = "DEFAULT_PRODUCER"
CLIENT_INNER_PRODUCER_GROUP: Final = "CLIENT_INNER_PRODUCER"
AUTO_CREATE_TOPIC_KEY_TOPIC: Final = "TBW102"


@dataclass(frozen=True, slots=True)
class ProducerConfig(ClientConfig):
    producer_group: str = DEFAULT_PRODUCER_GROUP
    # The auto-create template topic: its route is used for topics that have none yet.
    create_topic_key: str = AUTO_CREATE_TOPIC_KEY_TOPIC
    default_topic_queue_nums: int = 4
    send_msg_timeout: int = 3_000  # ms, for all attempts of one send together
    compress_msg_body_over_howmuch: int = 4 * 1024
    compress_level: int = 5  # zlib
    retry_times_when_send_failed: int = 2
    retry_times_when_send_async_failed: int = 2
    retry_another_broker_when_not_store_ok: bool = False
    max_message_size: int = 4 * 1024 * 1024
    send_latency_fault_enable: bool = False
    latency_max: tuple[int, ...] = DEFAULT_LATENCY_MAX
    not_available_duration: tuple[int, ...] = DEFAULT_NOT_AVAILABLE_DURATION
    # Automatic batching (RocketMQ 5's autoBatch and its accumulator; client/producer/accumulator.py):
    # single messages to one queue that arrive while a request to it is in flight go out together
    # as one SEND_BATCH_MESSAGE. ``auto_batch`` covers send_async (on: pipelined sends are what it
    # helps); ``auto_batch_sync`` also covers the awaited ``send`` (off, as Java's default).
    auto_batch: bool = True
    auto_batch_sync: bool = False
    batch_max_delay_ms: int = BATCH_MAX_DELAY_MS  # Java's batchMaxDelayMs
    batch_max_bytes: int = BATCH_MAX_BYTES  # batchMaxBytes
    total_batch_max_bytes: int = TOTAL_BATCH_MAX_BYTES  # totalBatchMaxBytes

    def __post_init__(self) -> None:
        check_limits(self.batch_max_delay_ms, self.batch_max_bytes, self.total_batch_max_bytes)
