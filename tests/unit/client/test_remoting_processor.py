"""Requests a broker sends a client on an admin's behalf, answered by ClientRemotingProcessor
without a network: reset offsets (220), consumer status (221), consume directly (309)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson
import pytest

from rocketq import ConsumeOrderlyStatus, ConsumeStatus
from rocketq.aio import PushConsumer
from rocketq.broker.processors.admin_group import reset_offset_body
from rocketq.client.remoting_processor import ClientRemotingProcessor
from rocketq.codec import fastjson
from rocketq.codec.bodies import MessageQueue
from rocketq.codec.bodies.client import mq_table
from rocketq.codec.codes import RequestCode, ResponseCode
from rocketq.codec.command import RemotingCommand
from rocketq.codec.message import MessageExt, encode_message


class _Channel:
    remote_address = "127.0.0.1:10911"


class _Store:
    def __init__(self, table: dict[MessageQueue, int]) -> None:
        self.table = table

    def clone_offset_table(self, topic: str | None = None) -> dict[MessageQueue, int]:
        return {mq: o for mq, o in self.table.items() if topic is None or mq.topic == topic}


class _Instance:
    def __init__(self, consumers: dict[str, Any]) -> None:
        self.consumer_table = consumers
        self.resets: list[tuple[str, str, dict[MessageQueue, int]]] = []

    async def reset_offset(self, topic: str, group: str, offsets: Mapping[MessageQueue, int]) -> None:
        self.resets.append((topic, group, dict(offsets)))

    def get_consumer_status(self, topic: str, group: str) -> dict[MessageQueue, int]:
        consumer = self.consumer_table.get(group)
        return consumer.offset_store.clone_offset_table(topic) if consumer is not None else {}


def _processor(**consumers: Any) -> tuple[ClientRemotingProcessor, _Instance]:
    inst = _Instance(dict(consumers))
    return ClientRemotingProcessor(inst), inst  # type: ignore[arg-type]


async def test_reset_offset_reads_the_brokers_reset_offset_body() -> None:
    proc, inst = _processor()
    body = reset_offset_body("T", "broker-a", {0: 3, 1: 7})
    ext = {"topic": "T", "group": "G", "timestamp": "0", "isForce": "true"}
    request = RemotingCommand.request(RequestCode.RESET_CONSUMER_CLIENT_OFFSET, ext, body, oneway=True)
    assert await proc.reset_offset(request, _Channel()) is None  # type: ignore[arg-type]
    offsets = {MessageQueue("T", "broker-a", 0): 3, MessageQueue("T", "broker-a", 1): 7}
    assert inst.resets == [("T", "G", offsets)]


def test_consumer_status_is_the_offset_table_of_the_topic() -> None:
    table = {MessageQueue("T", "b", 1): 5, MessageQueue("T", "b", 0): 2, MessageQueue("U", "b", 0): 9}
    consumer = type("C", (), {"offset_store": _Store(table)})()
    proc, _ = _processor(G=consumer)

    def ask(group: str) -> Any:
        ext = {"topic": "T", "group": group}
        request = RemotingCommand.request(RequestCode.GET_CONSUMER_STATUS_FROM_CLIENT, ext)
        response = proc.get_consume_status(request, _Channel())  # type: ignore[arg-type]
        assert response.code == ResponseCode.SUCCESS
        return fastjson.loads(response.body_bytes())

    body = ask("G")
    assert mq_table(body["messageQueueTable"], "t") == {
        MessageQueue("T", "b", 0): 2,
        MessageQueue("T", "b", 1): 5,
    }
    assert body["consumerTable"] == {}
    assert ask("X")["messageQueueTable"] == {}


def _direct(group: str, msg: MessageExt) -> RemotingCommand:
    ext = {"consumerGroup": group, "clientId": "c", "msgId": "x", "brokerName": "broker-a"}
    return RemotingCommand.request(RequestCode.CONSUME_MESSAGE_DIRECTLY, ext, encode_message(msg))


def _boom(msgs: list[MessageExt], ctx: Any) -> ConsumeStatus:
    raise RuntimeError("listener broke")


async def _later(msgs: list[MessageExt], ctx: Any) -> ConsumeStatus:
    return ConsumeStatus.RECONSUME_LATER


@pytest.mark.parametrize(
    ("listener", "orderly", "expected"),
    [
        (lambda msgs, ctx: ConsumeStatus.CONSUME_SUCCESS, False, "CR_SUCCESS"),
        (_later, False, "CR_LATER"),
        (lambda msgs, ctx: None, False, "CR_RETURN_NULL"),
        (_boom, False, "CR_THROW_EXCEPTION"),
        (lambda msgs, ctx: ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT, True, "CR_LATER"),
        (lambda msgs, ctx: ConsumeOrderlyStatus.COMMIT, True, "CR_COMMIT"),
    ],
)
async def test_consume_message_directly_answers_what_the_listener_did(
    listener: Any, orderly: bool, expected: str
) -> None:
    seen: list[tuple[str, bytes, str]] = []

    def watch(msgs: list[MessageExt], ctx: Any) -> Any:
        seen.extend((m.topic, m.body, ctx.message_queue.broker_name) for m in msgs)
        return listener(msgs, ctx)

    consumer = PushConsumer("G", namesrv_addr="127.0.0.1:9876")
    consumer.register_listener(_later if listener is _later else watch, orderly=orderly)
    proc, _ = _processor(G=consumer)
    msg = MessageExt("T", b"direct", queue_id=1, store_host=("127.0.0.1", 10911), born_host=("127.0.0.1", 1))
    response = await proc.consume_message_directly(_direct("G", msg), _Channel())  # type: ignore[arg-type]
    assert response.code == ResponseCode.SUCCESS
    result = orjson.loads(response.body_bytes())
    assert (result["consumeResult"], result["order"], result["autoCommit"]) == (expected, orderly, True)
    if expected == "CR_THROW_EXCEPTION":
        assert "listener broke" in result["remark"]
    if listener is not _later:
        assert seen == [("T", b"direct", "broker-a")]


async def test_consume_message_directly_for_an_unknown_group() -> None:
    proc, _ = _processor()
    response = await proc.consume_message_directly(_direct("G", MessageExt("T", b"x")), _Channel())  # type: ignore[arg-type]
    assert response.code == ResponseCode.SYSTEM_ERROR and "<G> not exist" in (response.remark or "")
