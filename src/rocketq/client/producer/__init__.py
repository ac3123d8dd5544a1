"""Producers: the asyncio ``Producer`` and what it is made of (config, selectors, fault strategy)."""

from rocketq.client.producer.config import ProducerConfig
from rocketq.client.producer.fault import LatencyFaultTolerance, MQFaultStrategy
from rocketq.client.producer.producer import Producer, SendCallback
from rocketq.client.producer.request import RequestCallback, create_reply_message
from rocketq.client.producer.selector import (
    MessageQueueSelector,
    SelectMessageQueueByHash,
    SelectMessageQueueByRandom,
)

__all__ = [
    "LatencyFaultTolerance",
    "MQFaultStrategy",
    "MessageQueueSelector",
    "Producer",
    "ProducerConfig",
    "RequestCallback",
    "SelectMessageQueueByHash",
    "SelectMessageQueueByRandom",
    "SendCallback",
    "create_reply_message",
]
