"""Transactional messages, producer side: RocketMQ's TransactionMQProducer, asyncio flavour.

::

    class Orders:
        async def execute_local_transaction(self, msg, arg):    # or a plain def
            await db.insert(arg)
            return LocalTransactionState.COMMIT_MESSAGE
        def check_local_transaction(self, msg):                   # or async def
            known = db.has(msg.msg_id)
            return LocalTransactionState.COMMIT_MESSAGE if known else LocalTransactionState.UNKNOW

    async with TransactionProducer("pg", namesrv_addr=ns, listener=Orders()) as p:
        r = await p.send_message_in_transaction(Message("T", b"order-1"), arg=order)

``send_message_in_transaction`` sends the message as a half message (properties ``TRAN_MSG=true``,
``PGROUP``, sysFlag TRANSACTION_PREPARED), which consumers cannot see; runs
``execute_local_transaction(msg, arg)``; and ends the transaction with a one-way END_TRANSACTION:
COMMIT_MESSAGE makes the message visible, ROLLBACK_MESSAGE drops it, UNKNOW leaves it to the broker's
check-back. The broker later asks some live producer of the group (CHECK_TRANSACTION_STATE) about
every half message left open for ``transactionTimeOut``; ``check_local_transaction(msg)`` answers,
and the answer is sent back the same way (DefaultMQProducerImpl.checkTransactionState).

Listeners may be sync or async. In this asyncio API an async ``execute_local_transaction`` is
awaited and a sync one is called on the event loop (as Java runs it in the sending thread: keep it
short, or make it async); ``check_local_transaction``, sync, runs on the producer's check thread.
See docs/transactions.md.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import enum
import inspect
import logging
from collections.abc import Awaitable
from typing import Any, Protocol

from rocketq.client.api import decompressed
from rocketq.client.message import Message, MessageExt, SendResult, SendStatus
from rocketq.client.producer.config import ProducerConfig
from rocketq.client.producer.producer import Producer
from rocketq.codec.codes import RequestCode
from rocketq.codec.command import RemotingCommand
from rocketq.codec.headers import CheckTransactionStateRequestHeader, EndTransactionRequestHeader
from rocketq.codec.message import MessageSysFlag, decode_offset_msg_id
from rocketq.codec.properties import MessageConst
from rocketq.errors import InvalidArgument, MQClientError, RocketQError
from rocketq.remoting import Channel

__all__ = [
    "LocalTransactionState",
    "TransactionListener",
    "TransactionProducer",
    "TransactionSendResult",
    "end_transaction_fields",
]

log = logging.getLogger("rocketq.client")

_TRAN_MSG = MessageConst.PROPERTY_TRANSACTION_PREPARED
_PGROUP = MessageConst.PROPERTY_PRODUCER_GROUP
_PREPARED = MessageSysFlag.TRANSACTION_PREPARED_TYPE
_END = int(RequestCode.END_TRANSACTION)


class LocalTransactionState(enum.Enum):
    """What a local transaction ended as (RocketMQ's LocalTransactionState, its spelling kept)."""

    COMMIT_MESSAGE = "COMMIT_MESSAGE"
    ROLLBACK_MESSAGE = "ROLLBACK_MESSAGE"
    UNKNOW = "UNKNOW"
    UNKNOWN = "UNKNOW"  # an alias of UNKNOW, for those who spell it out

    @property
    def commit_or_rollback(self) -> int:
        """The END_TRANSACTION ``commitOrRollback`` value (a MessageSysFlag transaction type)."""
        return _KIND[self]


_KIND = {
    LocalTransactionState.COMMIT_MESSAGE: MessageSysFlag.TRANSACTION_COMMIT_TYPE,
    LocalTransactionState.ROLLBACK_MESSAGE: MessageSysFlag.TRANSACTION_ROLLBACK_TYPE,
    LocalTransactionState.UNKNOW: MessageSysFlag.TRANSACTION_NOT_TYPE,
}
_KIND_TEXT = {state: str(kind) for state, kind in _KIND.items()}


class TransactionListener(Protocol):
    """RocketMQ's TransactionListener; either method may be ``async def``."""

    def execute_local_transaction(self, msg: Message, arg: Any) -> Any:
        """Run the local transaction of a half message just stored; return its state."""

    def check_local_transaction(self, msg: MessageExt) -> Any:
        """The broker asks about a half message still open: return its local transaction's state."""


@dataclasses.dataclass(frozen=True, slots=True)
class TransactionSendResult(SendResult):
    """A SendResult of the half message, and what its local transaction ended as."""

    local_transaction_state: LocalTransactionState = LocalTransactionState.UNKNOW


def _state(value: Any) -> LocalTransactionState:
    if value is None:
        return LocalTransactionState.UNKNOW
    if isinstance(value, LocalTransactionState):
        return value
    try:
        return LocalTransactionState(value)
    except ValueError:
        log.warning("a transaction listener returned %r, not a LocalTransactionState: taken as UNKNOW", value)
        return LocalTransactionState.UNKNOW


def end_transaction_fields(group: str, result: SendResult, state: LocalTransactionState,
                           broker_name: str | None = None) -> dict[str, str]:
    """The END_TRANSACTION extFields ending the half message ``result`` reports
    (DefaultMQProducerImpl.endTransaction; EndTransactionRequestHeader's keys): its half-queue
    offset and commit-log offset, which the broker checks against the stored half message. Written
    out, not built through the header class: one per transaction on the producer's hot path."""
    offset_id = result.offset_msg_id or result.msg_id
    # an IPv4 offset msgId ends in the 16 hex digits of the offset; anything else is decoded in full
    offset = int(offset_id[16:], 16) if len(offset_id) == 32 else decode_offset_msg_id(offset_id)[2]
    ext = {
        "producerGroup": group,
        "tranStateTableOffset": str(result.queue_offset),
        "commitLogOffset": str(offset),
        "commitOrRollback": _KIND_TEXT[state],
        "msgId": result.msg_id,
        "fromTransactionCheck": "false",
    }
    if result.transaction_id is not None:
        ext["transactionId"] = result.transaction_id
    if broker_name is not None:
        ext["bname"] = broker_name
    return ext


class TransactionProducer(Producer):
    """A Producer that can also send transactional messages (TransactionMQProducer).

    ``listener`` implements TransactionListener; ``check_threads`` (default 1, RocketMQ's
    checkThreadPoolMaxSize) is how many sync ``check_local_transaction`` calls run at once. The
    other arguments are the Producer's.
    """

    def __init__(self, group: str | None = None, namesrv_addr: str | None = None, *,
                 listener: TransactionListener | None = None, check_threads: int = 1,
                 config: ProducerConfig | None = None, **fields: Any) -> None:
        super().__init__(group, namesrv_addr, config=config, **fields)
        self.listener = listener
        self._check_threads = max(1, check_threads)
        self._check_executor: concurrent.futures.ThreadPoolExecutor | None = None
        self._check_tasks: set[asyncio.Future[None]] = set()

    def __repr__(self) -> str:
        return f"TransactionProducer({self.config.producer_group!r}, {self.service_state.name})"

    async def start(self) -> None:
        await super().start()
        self._check_executor = concurrent.futures.ThreadPoolExecutor(
            self._check_threads, thread_name_prefix=f"TransactionCheck-{self.group}")

    async def shutdown(self) -> None:
        await super().shutdown()
        tasks, self._check_tasks = list(self._check_tasks), set()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        executor, self._check_executor = self._check_executor, None
        if executor is not None:
            executor.shutdown(wait=False, cancel_futures=True)

    async def __aenter__(self) -> TransactionProducer:
        await self.start()
        return self

    # -- sending ------------------------------------------------------------------------------------

    async def send_message_in_transaction(self, msg: Message, arg: Any = None) -> TransactionSendResult:
        """Send ``msg`` as a half message, run the listener's local transaction and end it.

        A failed send raises (``MQClientError``, the send's error as its cause) and runs nothing;
        an exception of the local transaction is logged, counts as UNKNOW (the broker will ask
        again) and is named in the END_TRANSACTION remark, as Java does.
        """
        listener = self.listener
        if listener is None:
            raise InvalidArgument("TransactionListener is null")
        half, result = await self.send_half(msg)
        state, error = LocalTransactionState.UNKNOW, None
        if result.status is SendStatus.SEND_OK:
            try:
                value = listener.execute_local_transaction(half, arg)
                state = value if type(value) is LocalTransactionState else _state(await _maybe_await(value))
            except Exception as exc:
                log.info("executeLocalTransactionBranch exception", exc_info=True)
                error = exc
            if state is not LocalTransactionState.COMMIT_MESSAGE:
                log.info("executeLocalTransactionBranch return %s", state.name)
        else:
            state = LocalTransactionState.ROLLBACK_MESSAGE  # stored, but not durably enough
        try:
            # on an open connection the END is queued at once, with no future to watch
            addr, request = self._end_request(result, state, error)
            client = self.instance.remoting_client
            if not client.send_oneway_now(addr, request):
                client.invoke_oneway(addr, request, self._timeout).add_done_callback(_log_end_failure)
            if self.trace is not None:
                self._trace_end(half, result.msg_id, state, False, addr)
        except RocketQError as exc:
            log.warning("local transaction execute %s, but end broker transaction failed: %s", state.name,
                        exc)
        return _transaction_result(result, state)

    async def send_half(self, msg: Message) -> tuple[Message, SendResult]:
        """Send ``msg`` as a half message: (the message as the listener gets it, the SendResult).

        A transaction ignores a delay level, as in Java. (Messages are built directly rather
        than through dataclasses.replace, which costs more than the rest of this method.)"""
        self._check_state()
        props = {**msg.properties, _TRAN_MSG: "true", _PGROUP: self._group_wire}
        msg = Message(msg.topic, msg.body, msg.tags, msg.keys, msg.flag, 0, msg.wait_store_msg_ok, props,
                      msg.transaction_id)
        self.check(msg)
        prep = self._encoder.single(msg)
        prep.ext["f"] = str(int(prep.ext["f"]) | _PREPARED)
        try:
            result: SendResult = await self._submit(prep, None, 1 + self.config.retry_times_when_send_failed,
                                                    msg=msg)
        except RocketQError as exc:
            raise MQClientError(f"send message Exception: {exc}") from exc
        if result.transaction_id:
            props = {**props, MessageConst.PROPERTY_TRANSACTION_ID: result.transaction_id}
        half = Message(msg.topic, msg.body, msg.tags, msg.keys, msg.flag, 0, msg.wait_store_msg_ok, props,
                       result.msg_id)
        return half, result

    def end_transaction(self, result: SendResult, state: LocalTransactionState,
                        error: BaseException | None = None,
                        msg: Message | None = None) -> asyncio.Future[None]:
        """The one-way END_TRANSACTION of a half message (written before this returns when the
        broker's connection is open); with ``enable_trace``, its EndTransaction trace (of ``msg``)."""
        addr, request = self._end_request(result, state, error)
        sent = self.instance.remoting_client.invoke_oneway(addr, request, self._timeout)
        if self.trace is not None and msg is not None:
            self._trace_end(msg, result.msg_id, state, False, addr)
        return sent

    def _end_request(self, result: SendResult, state: LocalTransactionState,
                     error: BaseException | None) -> tuple[str, RemotingCommand]:
        """(the broker's address, the END_TRANSACTION request) ending the half message ``result``."""
        broker_name = result.message_queue.broker_name
        instance = self.instance
        addr = instance.find_broker_address_in_publish(broker_name)
        if addr is None:
            raise MQClientError(f"The broker[{broker_name}] not exist")
        # bname is 4.9.8's too, but only a 5.x broker is sent header fields it may not know
        ext = end_transaction_fields(self._group_wire, result, state,
                                     broker_name if instance.api.knows_5x(addr) else None)
        request = RemotingCommand.request(_END, ext, oneway=True)
        if error is not None:
            request.remark = f"executeLocalTransactionBranch exception: {error!r}"
        return addr, request

    def _trace_end(self, msg: Message | MessageExt, msg_id: str, state: LocalTransactionState,
                   from_check: bool, broker_addr: str) -> None:
        """The EndTransaction trace record (doExecuteEndTransactionHook: EndTransactionTraceHookImpl)."""
        assert self.trace is not None
        from rocketq.client.trace.hooks import trace_end_transaction

        as_message = msg if isinstance(msg, Message) else Message(msg.topic, msg.body, msg.tags, msg.keys,
                                                                  properties=msg.properties)
        trace_end_transaction(
            self.trace.dispatcher, producer_group=self.group, msg=as_message, msg_id=msg_id,
            transaction_id=msg.properties.get(MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX),
            state=state.name, from_transaction_check=from_check, broker_addr=broker_addr,
            client_host=self.config.client_ip,
        )

    # -- the broker's check-back ------------------------------------------------------------------

    def check_transaction_state(self, channel: Channel, msg: MessageExt,
                                header: CheckTransactionStateRequestHeader) -> None:
        """CHECK_TRANSACTION_STATE from a broker: ask the listener, answer on ``channel``."""
        if self.listener is None or self.service_state.name != "RUNNING":
            log.warning("CheckTransactionState, pick transactionListener by group[%s] failed", self.group)
            return
        task = asyncio.ensure_future(self._check(channel, msg, header))
        self._check_tasks.add(task)
        task.add_done_callback(self._check_tasks.discard)

    async def _check(self, channel: Channel, msg: MessageExt,
                     header: CheckTransactionStateRequestHeader) -> None:
        msg = decompressed(msg)
        if self.config.namespace:
            msg = dataclasses.replace(msg, topic=self.config.without_namespace(msg.topic))
        state, error = LocalTransactionState.UNKNOW, None
        check = self.listener.check_local_transaction  # type: ignore[union-attr]
        try:
            if inspect.iscoroutinefunction(check):
                state = _state(await check(msg))
            else:
                loop = asyncio.get_running_loop()
                value = await loop.run_in_executor(self._check_executor, check, msg)
                state = _state(await _maybe_await(value))
        except Exception as exc:
            log.error("Broker call checkTransactionState, but checkLocalTransactionState exception",
                      exc_info=True)
            error = exc
        if state is LocalTransactionState.ROLLBACK_MESSAGE:
            log.warning("when broker check, client rollback this transaction, %s", header)
        elif state is LocalTransactionState.UNKNOW:
            log.warning("when broker check, client does not know this transaction state, %s", header)
        uniq = msg.properties.get(MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX) or msg.msg_id
        end = EndTransactionRequestHeader(
            producer_group=self._group_wire,
            tran_state_table_offset=header.tran_state_table_offset,
            commit_log_offset=header.commit_log_offset,
            commit_or_rollback=state.commit_or_rollback,
            msg_id=uniq,
            from_transaction_check=True,
            transaction_id=header.transaction_id,
        )
        request = RemotingCommand.request(_END, end.to_ext(), oneway=True)
        if error is not None:
            request.remark = f"checkLocalTransactionState Exception: {error!r}"
        try:
            channel.invoke_oneway(request)
        except RocketQError as exc:
            log.error("endTransactionOneway exception: %s", exc)
        if self.trace is not None:
            self._trace_end(msg, uniq, state, True, str(channel.remote_address))


def _log_end_failure(fut: asyncio.Future[None]) -> None:
    if not fut.cancelled() and fut.exception() is not None:
        log.warning("end broker transaction failed: %s", fut.exception())


async def _maybe_await(value: Any) -> Any:
    return await value if isinstance(value, Awaitable) else value


def _transaction_result(r: SendResult, state: LocalTransactionState) -> TransactionSendResult:
    return TransactionSendResult(r.status, r.msg_id, r.message_queue, r.queue_offset, r.offset_msg_id,
                                 r.transaction_id, r.region_id, r.trace_on, local_transaction_state=state)
