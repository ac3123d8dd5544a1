"""The hook points: what a producer or consumer built with ``enable_trace=True`` calls at start.

Each returns None when tracing is off or its dispatcher could not start (logged, as Java does:
a client whose traces cannot be written still sends and consumes).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from rocketq.client.trace.dispatcher import AsyncTraceDispatcher
from rocketq.client.trace.hooks import ConsumeMessageTraceHook, SendTraceHook

if TYPE_CHECKING:
    from rocketq.client.config import ClientConfig
    from rocketq.client.producer.producer import Producer

__all__ = ["start_consumer_trace", "start_producer_trace"]

log = logging.getLogger("rocketq.client.trace")


async def _dispatcher(group: str, kind: str, config: ClientConfig) -> AsyncTraceDispatcher | None:
    if not config.enable_trace:
        return None
    dispatcher = AsyncTraceDispatcher(group, kind, config.trace_topic, config)
    try:
        await dispatcher.start()
    except Exception as e:
        log.warning("trace dispatcher of %s start failed, tracing off: %r", group, e)
        await dispatcher.shutdown(0)
        return None
    return dispatcher


async def start_producer_trace(producer: Producer) -> SendTraceHook | None:
    dispatcher = await _dispatcher(producer.group, "PRODUCE", producer.config)
    if dispatcher is None:
        return None
    return SendTraceHook(dispatcher, producer.group, producer.instance.find_broker_address_in_publish)


async def start_consumer_trace(group: str, config: ClientConfig) -> ConsumeMessageTraceHook | None:
    """The hook to add to the consumer's consume-message hooks (its dispatcher inside)."""
    dispatcher = await _dispatcher(group, "CONSUME", config)
    if dispatcher is None:
        return None
    return ConsumeMessageTraceHook(dispatcher, config.client_ip)
