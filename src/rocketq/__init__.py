"""rocketq: Apache RocketMQ rebuilt in Python.

The blocking client API, with RocketMQ's names (the asyncio twin is ``rocketq.aio``)::

    from rocketq import Producer, PushConsumer, Message, ConsumeStatus
    p = Producer("pg", namesrv_addr="127.0.0.1:9876"); p.start()
    r = p.send(Message("T", b"body", tags="A", keys="k1"))

Names are loaded on first use, so importing the package (as the servers do) costs nothing.
"""

from __future__ import annotations

from typing import Any

from rocketq._exports import COMMON, lazy_getattr

__version__ = "0.1.0"

_EXPORTS: dict[str, str] = {
    **COMMON,
    "Producer": "rocketq.client.producer.sync",
    "PushConsumer": "rocketq.client.consumer.sync",
    "SimpleConsumer": "rocketq.client.consumer.simple_sync",
    "LitePullConsumer": "rocketq.client.consumer.sync",
    "TransactionProducer": "rocketq.client.producer.transaction_sync",
}

__all__ = ["__version__", *sorted(_EXPORTS)]


def __getattr__(name: str) -> Any:
    return lazy_getattr(globals(), _EXPORTS, name)


def __dir__() -> list[str]:
    # The public names only: not the module plumbing (_EXPORTS, lazy_getattr, typing imports).
    return list(__all__)
