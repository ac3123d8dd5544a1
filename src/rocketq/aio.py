"""The asyncio client API: the same names as ``rocketq``, with coroutines.

::

    from rocketq.aio import Producer, PushConsumer, Message, ConsumeStatus

    async with Producer("pg", namesrv_addr="127.0.0.1:9876") as p:
        r = await p.send(Message("T", b"body", tags="A"))
        await asyncio.gather(*(p.send_async(Message("T", b"%d" % i)) for i in range(1000)))
"""

from __future__ import annotations

from typing import Any

from rocketq._exports import COMMON, lazy_getattr

_EXPORTS: dict[str, str] = {
    **COMMON,
    "Producer": "rocketq.client.producer.producer",
    "PushConsumer": "rocketq.client.consumer.push",
    "SimpleConsumer": "rocketq.client.consumer.simple",
    "LitePullConsumer": "rocketq.client.consumer.lite_pull",
    "TransactionProducer": "rocketq.client.producer.transaction",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    return lazy_getattr(globals(), _EXPORTS, name)


def __dir__() -> list[str]:
    # The public names only: not the module plumbing (_EXPORTS, lazy_getattr, typing imports).
    return list(__all__)
