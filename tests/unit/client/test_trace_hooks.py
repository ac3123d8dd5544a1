"""The trace hooks and the dispatcher's bound without a broker: what a send, a consumed batch and a
transaction end turn into, and what a full queue does."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from rocketq.client.config import ClientConfig
from rocketq.client.consumer.types import ConsumeMessageContext
from rocketq.client.message import Message, MessageExt, MessageQueue, SendResult, SendStatus
from rocketq.client.producer.kernel import PreparedSend
from rocketq.client.trace import dispatcher as dispatcher_mod
from rocketq.client.trace.codec import MessageType, TraceContext, TraceType, decode_traces, encode_trace
from rocketq.client.trace.dispatcher import AsyncTraceDispatcher
from rocketq.client.trace.hooks import ConsumeMessageTraceHook, SendTraceHook, trace_end_transaction


class Sink:
    trace_topic = "RMQ_SYS_TRACE_TOPIC"

    def __init__(self) -> None:
        self.got: list[TraceContext] = []
        self.keys: list[list[str]] = []

    def append(self, ctx: TraceContext) -> bool:
        self.got.append(ctx)
        return True

    def append_record(self, record: str, keys: list[str]) -> bool:
        [ctx] = decode_traces(record)
        self.got.append(ctx)
        self.keys.append(keys)
        return True


def _result(status: SendStatus = SendStatus.SEND_OK, trace_on: bool = True) -> SendResult:
    return SendResult(status, "UNIQ1", MessageQueue("T", "broker-a", 1), 7, "OFFSET1",
                      region_id="DefaultRegion", trace_on=trace_on)


async def test_a_send_becomes_a_pub_record() -> None:
    sink = Sink()
    hook = SendTraceHook(sink, "ns%PG", {"broker-a": "10.0.0.9:10911"}.get)  # type: ignore[arg-type]
    loop = asyncio.get_running_loop()
    for msg, result in ((Message("T", b"12345", tags="A", keys=["k1", "k2"], delay_level=3), _result()),
                        (Message("T", b"x"), _result(SendStatus.FLUSH_DISK_TIMEOUT)),
                        (Message("T", b"x"), _result(trace_on=False))):
        fut: asyncio.Future[Any] = loop.create_future()
        hook.watch(PreparedSend("T", msg.body, {}, "UNIQ1"), msg, fut)
        fut.set_result(result)
    failed: asyncio.Future[Any] = loop.create_future()
    hook.watch(PreparedSend("T", b"x", {}, "U"), Message("T", b"x"), failed)
    failed.set_exception(RuntimeError("no route"))
    await asyncio.sleep(0)
    assert len(sink.got) == 2  # the broker's TRACE_ON=false and a failed send leave no record
    pub, slow = sink.got
    fields = encode_trace(pub).rstrip("\x02").split("\x01")
    assert fields[0] == "Pub" and fields[2:12] == [
        "DefaultRegion", "PG", "T", "UNIQ1", "A", "k1 k2", "10.0.0.9:10911", "5", fields[10], "3"]
    assert pub.beans[0].msg_type is MessageType.Delay_Msg and pub.beans[0].offset_msg_id == "OFFSET1"
    assert pub.success and not slow.success
    assert encode_trace(slow).split("\x01")[6] == "null"  # no tag: written as Java writes null
    assert sink.keys == [["UNIQ1", "k1", "k2"], ["UNIQ1"]]


def test_consumption_becomes_sub_before_and_after() -> None:
    sink = Sink()
    hook = ConsumeMessageTraceHook(sink, "127.0.0.1")  # type: ignore[arg-type]
    msgs = [MessageExt("ns%T", b"a", properties={"UNIQ_KEY": "U1", "KEYS": "k", "MSG_REGION": "R1"},
                       reconsume_times=2, store_size=99),
            MessageExt("T", b"b", properties={"UNIQ_KEY": "U2", "TRACE_ON": "false"})]
    ctx = ConsumeMessageContext("ns%CG", MessageQueue("ns%T", "b", 0), msgs)
    hook.consume_message_before(ctx)
    ctx.success = False
    ctx.props["ConsumeContextType"] = "EXCEPTION"
    hook.consume_message_after(ctx)
    before, after = sink.got
    assert before.trace_type is TraceType.SubBefore and after.trace_type is TraceType.SubAfter
    assert [b.msg_id for b in before.beans] == ["U1"]  # TRACE_ON=false is skipped
    assert (before.group_name, before.region_id, before.beans[0].topic, before.beans[0].retry_times) == (
        "CG", "R1", "T", 2)
    assert (after.request_id, after.group_name, after.success, after.context_code) == (
        before.request_id, "CG", False, 2)
    [decoded_after] = decode_traces(encode_trace(after))
    assert decoded_after.context_code == 2 and decoded_after.group_name == "CG"


def test_end_transaction_record_for_the_transaction_producer() -> None:
    sink = Sink()
    trace_end_transaction(sink, producer_group="ns%TX", msg=Message("ns%T", b"x", tags="t", keys="k"),  # type: ignore[arg-type]
                          msg_id="U9", transaction_id="TID", state="COMMIT_MESSAGE",
                          from_transaction_check=True, broker_addr="10.0.0.9:10911")
    trace_end_transaction(None, producer_group="TX", msg=Message("T", b"x"), msg_id="U", transaction_id=None,
                          state="UNKNOW", from_transaction_check=False, broker_addr="")
    [ctx] = sink.got
    expected = ["DefaultRegion", "TX", "T", "U9", "t", "k", "10.0.0.9:10911", "2", "TID", "COMMIT_MESSAGE",
                "true\x02"]
    assert encode_trace(ctx).split("\x01")[2:] == expected


def test_a_full_queue_drops_and_says_so_once(caplog: pytest.LogCaptureFixture) -> None:
    d = AsyncTraceDispatcher("G", "PRODUCE", None, ClientConfig())
    ctx = TraceContext(TraceType.Pub, beans=())
    with caplog.at_level(logging.WARNING, logger="rocketq.client.trace"):
        accepted = sum(d.append(ctx) for _ in range(dispatcher_mod.QUEUE_SIZE + 500))
    assert accepted == dispatcher_mod.QUEUE_SIZE and d.discarded == 500
    assert len([r for r in caplog.records if "dropped" in r.getMessage()]) == 1
    assert d.trace_topic == "RMQ_SYS_TRACE_TOPIC"
