"""The blocking transactional producer (``rocketq.TransactionProducer``).

::

    p = TransactionProducer("pg", namesrv_addr="127.0.0.1:9876", listener=Orders()); p.start()
    r = p.send_message_in_transaction(Message("T", b"order-1"), arg=order)
    r.local_transaction_state    # LocalTransactionState.COMMIT_MESSAGE

As in Java, ``execute_local_transaction`` runs in the thread that called
``send_message_in_transaction`` (an ``async def`` one runs on the background loop);
``check_local_transaction`` runs on the producer's check thread. Everything else is
``rocketq.Producer``'s.
"""

from __future__ import annotations

import inspect
import logging
from typing import Any

from rocketq.client import _sync
from rocketq.client.message import Message, SendStatus
from rocketq.client.producer.config import ProducerConfig
from rocketq.client.producer.sync import Producer
from rocketq.client.producer.transaction import (
    LocalTransactionState,
    TransactionListener,
    TransactionSendResult,
    _state,
    _transaction_result,
)
from rocketq.client.producer.transaction import TransactionProducer as AsyncTransactionProducer
from rocketq.errors import InvalidArgument, RocketQError

__all__ = ["TransactionProducer"]

log = logging.getLogger("rocketq.client")


class TransactionProducer(Producer):
    """Blocking twin of ``rocketq.aio.TransactionProducer``."""

    _impl: AsyncTransactionProducer

    def __init__(self, group: str | None = None, namesrv_addr: str | None = None, *,
                 listener: TransactionListener | None = None, check_threads: int = 1,
                 config: ProducerConfig | None = None, **fields: Any) -> None:
        self._impl = AsyncTransactionProducer(group, namesrv_addr, listener=listener,
                                              check_threads=check_threads, config=config, **fields)

    def __repr__(self) -> str:
        return f"TransactionProducer({self.group!r}, {self.service_state.name}, sync)"

    @property
    def aio(self) -> AsyncTransactionProducer:
        return self._impl

    @property
    def listener(self) -> TransactionListener | None:
        return self._impl.listener

    @listener.setter
    def listener(self, listener: TransactionListener | None) -> None:
        self._impl.listener = listener

    def __enter__(self) -> TransactionProducer:
        self.start()
        return self

    def send_message_in_transaction(self, msg: Message, arg: Any = None) -> TransactionSendResult:
        """Send ``msg`` as a half message, run the local transaction here, end it; see the
        asyncio method for the rules."""
        impl = self._impl
        listener = impl.listener
        if listener is None:
            raise InvalidArgument("TransactionListener is null")
        half, result = _sync.run_sync(impl.send_half(msg), self._wait(None))
        state, error = LocalTransactionState.UNKNOW, None
        if result.status is SendStatus.SEND_OK:
            try:
                value = listener.execute_local_transaction(half, arg)
                if inspect.isawaitable(value):
                    value = _sync.run_sync(_awaited(value), None)
                state = _state(value)
            except Exception as exc:
                log.info("executeLocalTransactionBranch exception", exc_info=True)
                error = exc
        else:
            state = LocalTransactionState.ROLLBACK_MESSAGE
        try:
            _sync.run_sync(_end(impl, result, state, error, half), self._wait(None))
        except RocketQError as exc:
            log.warning("local transaction execute %s, but end broker transaction failed: %s", state.name,
                        exc)
        return _transaction_result(result, state)


async def _awaited(value: Any) -> Any:
    return await value


async def _end(impl: AsyncTransactionProducer, result: Any, state: LocalTransactionState,
               error: BaseException | None, half: Message) -> None:
    await impl.end_transaction(result, state, error, half)
