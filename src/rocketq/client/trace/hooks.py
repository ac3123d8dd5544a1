"""What turns a send, a consumption or a transaction end into a trace context (Java's
SendMessageTraceHookImpl, ConsumeMessageTraceHookImpl, EndTransactionTraceHookImpl).

Names are recorded as users know them: every topic and group goes through ``strip_namespace``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from rocketq.client.message import Message, MessageQueue, SendResult, SendStatus
from rocketq.client.namespace import strip_namespace
from rocketq.client.producer.kernel import UniqKeys
from rocketq.client.trace.codec import (
    ConsumeReturnType,
    MessageType,
    TraceBean,
    TraceContext,
    TraceType,
    encode_pub,
)
from rocketq.client.trace.dispatcher import AsyncTraceDispatcher
from rocketq.codec.message import MessageExt
from rocketq.codec.properties import MessageConst

if TYPE_CHECKING:
    from rocketq.client.consumer.types import ConsumeMessageContext
    from rocketq.client.producer.kernel import PreparedSend

__all__ = ["ConsumeMessageTraceHook", "SendTraceHook", "trace_end_transaction"]

DEFAULT_TRACE_REGION_ID = "DefaultRegion"


def _now_ms() -> int:
    return int(time.time() * 1000)


def _keys(keys: str | Sequence[str] | None) -> str | None:
    if keys is None or isinstance(keys, str):
        return keys
    return " ".join(keys)


def message_type(msg: Message | None) -> MessageType:
    """sendKernelImpl's choice: a half message, a delayed one, or a normal one."""
    if msg is None:
        return MessageType.Normal_Msg
    props = msg.properties
    if props.get(MessageConst.PROPERTY_TRANSACTION_PREPARED) == "true":
        return MessageType.Trans_Msg_Half
    if msg.delay_level > 0 or props.get(MessageConst.PROPERTY_DELAY_TIME_LEVEL):
        return MessageType.Delay_Msg
    return MessageType.Normal_Msg


class SendTraceHook:
    """Watches a producer's sends; a send that got a SendResult becomes a Pub record."""

    def __init__(self, dispatcher: AsyncTraceDispatcher, group: str, broker_addr: Any) -> None:
        self.dispatcher = dispatcher
        self.group = strip_namespace(group)
        # broker name -> address the send went to (the producer's client instance knows it)
        self._broker_addr = broker_addr

    def watch(self, prep: PreparedSend, msg: Message | None, fut: asyncio.Future[Any]) -> None:
        if prep.topic.startswith(self.dispatcher.trace_topic):
            return  # never trace the traces
        started = _now_ms()
        fut.add_done_callback(lambda f: self._sent(prep, msg, started, f))

    def _sent(self, prep: PreparedSend, msg: Message | None, started: int, fut: asyncio.Future[Any]) -> None:
        if fut.cancelled() or fut.exception() is not None:
            return
        result = fut.result()
        if not isinstance(result, SendResult) or result.region_id is None or not result.trace_on:
            return
        keys = _keys(msg.keys) if msg is not None and msg.keys else None
        msg_id = result.msg_id
        record = encode_pub(
            started, result.region_id, self.group, strip_namespace(prep.topic), msg_id,
            msg.tags if msg is not None and msg.tags else None, keys,
            self._broker_addr(result.message_queue.broker_name) or "", len(prep.body), _now_ms() - started,
            message_type(msg), result.offset_msg_id, result.status is SendStatus.SEND_OK,
        )
        self.dispatcher.append_record(record, [msg_id, *keys.split(" ")] if keys else [msg_id])


class ConsumeMessageTraceHook:
    """A consume hook (``ConsumeMessageHook``): SubBefore when a batch reaches the listener,
    SubAfter when it answered. Registered on the consumer by ``enable_trace=True``."""

    def __init__(self, dispatcher: AsyncTraceDispatcher, client_ip: str) -> None:
        self.dispatcher = dispatcher
        self._ids = UniqKeys(client_ip)

    def hook_name(self) -> str:
        return "ConsumeMessageTraceHook"

    def consume_message_before(self, context: ConsumeMessageContext) -> None:
        if not context.msg_list:
            return
        beans = []
        region = None
        for msg in context.msg_list:
            props = msg.properties
            if props.get(MessageConst.PROPERTY_TRACE_SWITCH) == "false":
                continue
            region = props.get(MessageConst.PROPERTY_MSG_REGION)
            beans.append(TraceBean(
                topic=strip_namespace(msg.topic), msg_id=msg.msg_id, tags=msg.tags, keys=msg.keys,
                store_time=msg.store_timestamp, body_length=msg.store_size, retry_times=msg.reconsume_times,
            ))
        if not beans:
            return
        ctx = TraceContext(TraceType.SubBefore, _now_ms(), region, strip_namespace(context.consumer_group),
                           request_id=self._ids.next_id(), beans=tuple(beans))
        context.mq_trace_context = ctx
        self.dispatcher.append(ctx)

    def consume_message_after(self, context: ConsumeMessageContext) -> None:
        before = context.mq_trace_context
        if not context.msg_list or not isinstance(before, TraceContext) or not before.beans:
            return
        now = _now_ms()
        code = context.props.get("ConsumeContextType", "")
        self.dispatcher.append(TraceContext(
            TraceType.SubAfter, now, before.region_id, before.group_name,
            cost_time=(now - before.timestamp) // len(context.msg_list), success=context.success,
            request_id=before.request_id,
            context_code=ConsumeReturnType[code].value if code in ConsumeReturnType.__members__ else 0,
            beans=before.beans,
        ))

    def polled(self, group: str, mq: MessageQueue, msgs: Sequence[MessageExt]) -> None:
        """A lite-pull consumer handed ``msgs`` out: consumed as far as anyone can tell
        (DefaultLitePullConsumerImpl runs the hooks the same way, success right away)."""
        from rocketq.client.consumer.types import ConsumeMessageContext

        if not msgs:
            return
        context = ConsumeMessageContext(group, mq, msgs)
        self.consume_message_before(context)
        context.success = True
        context.props["ConsumeContextType"] = "SUCCESS"
        self.consume_message_after(context)


def trace_end_transaction(
    dispatcher: AsyncTraceDispatcher | None,
    *,
    producer_group: str,
    msg: Message,
    msg_id: str,
    transaction_id: str | None,
    state: str,
    from_transaction_check: bool,
    broker_addr: str,
    client_host: str = "",
) -> None:
    """Record an END_TRANSACTION (EndTransactionTraceHookImpl): call it right after the producer
    sent END_TRANSACTION, with ``state`` the LocalTransactionState's name (COMMIT_MESSAGE,
    ROLLBACK_MESSAGE, UNKNOW). No-op without a dispatcher (tracing off)."""
    if dispatcher is None or msg.topic.startswith(dispatcher.trace_topic):
        return
    region = msg.properties.get(MessageConst.PROPERTY_MSG_REGION) or DEFAULT_TRACE_REGION_ID
    bean = TraceBean(
        topic=strip_namespace(msg.topic), msg_id=msg_id, tags=msg.tags or None,
        keys=_keys(msg.keys) or None, store_host=broker_addr, client_host=client_host,
        msg_type=MessageType.Trans_msg_Commit, transaction_id=transaction_id, transaction_state=state,
        from_transaction_check=from_transaction_check,
    )
    dispatcher.append(TraceContext(TraceType.EndTransaction, _now_ms(), region,
                                   strip_namespace(producer_group), beans=(bean,)))
