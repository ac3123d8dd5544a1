"""SQL92 property filters end to end: a real `rocketq up` started with enablePropertyFilter=true, a
producer sending messages with properties, and push and lite-pull consumers subscribed with
MessageSelector.by_sql that must receive exactly the matching messages; then a broker left at the
default (false), which refuses SQL92 consumers the way RocketMQ does."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import orjson
import pytest
from tests.harness import SMALL_STORE, Cluster, module_cluster, start_cluster, unique_name
from tests.wire import create_routed_topic, decode_pull, pull, wait_until

from rocketq.aio import LitePullConsumer, MessageSelector, PushConsumer
from rocketq.client.consumer import ConsumeStatus
from rocketq.client.message import Message
from rocketq.client.producer import Producer
from rocketq.codec.codes import RequestCode, ResponseCode
from rocketq.codec.command import RemotingCommand
from rocketq.errors import FilterExpressionError, MQClientError
from rocketq.remoting import RemotingClient

pytestmark = [pytest.mark.timeout(90)]

NOT_SUPPORTED = "The broker does not support consumer to filter message by SQL92"
EXPRESSION = "region = 'eu' AND amount > 100"

cluster = module_cluster("sql92", *SMALL_STORE, "--set", "enablePropertyFilter=true",
                         also_as_4_9=True)


def _orders() -> list[tuple[str, dict[str, str]]]:
    """(body, properties): every third message lacks `amount`, so NULL semantics are exercised too."""
    out = []
    for i in range(60):
        props = {"region": ("eu", "us", "apac")[i % 3 if i % 7 else 0]}
        if i % 5:
            props["amount"] = str(i * 7)
        out.append((f"order-{i}", props))
    return out


def _matching() -> set[str]:
    return {body for body, p in _orders()
            if p["region"] == "eu" and "amount" in p and int(p["amount"]) > 100}


async def make_topic(c: Cluster, queues: int = 4) -> str:
    topic = unique_name("SqlT")
    await create_routed_topic(c.namesrv, c.broker, topic, queues)
    return topic


async def send_orders(c: Cluster, topic: str) -> None:
    producer = Producer(unique_name("SqlP"), namesrv_addr=c.namesrv)
    await producer.start()
    try:
        for body, props in _orders():
            await producer.send(Message(topic, body.encode(), tags="Order", properties=props))
    finally:
        await producer.shutdown()


async def test_push_consumer_gets_exactly_the_matching_messages(cluster: Cluster) -> None:
    topic = await make_topic(cluster)
    await send_orders(cluster, topic)
    got: list[str] = []

    def listener(msgs: list[Any], ctx: Any) -> ConsumeStatus:
        got.extend(m.body.decode() for m in msgs)
        return ConsumeStatus.CONSUME_SUCCESS

    consumer = PushConsumer(unique_name("SqlG"), namesrv_addr=cluster.namesrv,
                            instance_name=unique_name("i"), consume_from_where="CONSUME_FROM_FIRST_OFFSET")
    consumer.subscribe(topic, MessageSelector.by_sql(EXPRESSION))
    consumer.register_listener(listener)
    await consumer.start()
    try:
        expected = _matching()
        assert 5 <= len(expected) < 30
        await wait_until(lambda: len(got) >= len(expected), timeout=30)
        await asyncio.sleep(1.0)  # a message that should not come would come by now
        assert sorted(got) == sorted(expected)
    finally:
        await consumer.shutdown()


async def test_lite_pull_consumer_gets_exactly_the_matching_messages(cluster: Cluster) -> None:
    topic = await make_topic(cluster)
    await send_orders(cluster, topic)
    consumer = LitePullConsumer(unique_name("SqlL"), namesrv_addr=cluster.namesrv,
                                instance_name=unique_name("i"),
                                consume_from_where="CONSUME_FROM_FIRST_OFFSET")
    consumer.subscribe(topic, MessageSelector.by_sql("amount IS NULL AND region <> 'eu'"))
    await consumer.start()
    try:
        expected = sorted(b for b, p in _orders() if "amount" not in p and p["region"] != "eu")
        got: list[str] = []
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 30
        while len(got) < len(expected) and loop.time() < deadline:
            got += [m.body.decode() for m in await consumer.poll(timeout=0.5)]
        got += [m.body.decode() for m in await consumer.poll(timeout=1.0)]
        assert sorted(got) == expected
    finally:
        await consumer.shutdown()


async def test_tags_are_a_property(cluster: Cluster) -> None:
    topic = await make_topic(cluster, queues=1)
    producer = Producer(unique_name("SqlP"), namesrv_addr=cluster.namesrv)
    await producer.start()
    try:
        for tag in ("A", "B", "C"):
            await producer.send(Message(topic, tag.encode(), tags=tag))
    finally:
        await producer.shutdown()
    async with RemotingClient() as rc:
        r = await pull(rc, cluster.broker, unique_name("SqlG"), topic, 0, 0,
                       subscription="TAGS IN ('A', 'C')", expression_type="SQL92")
        assert r.code == ResponseCode.SUCCESS, r.remark
        assert [m.body for m in decode_pull(r)] == [b"A", b"C"]


async def test_malformed_expression_fails_at_subscribe(cluster: Cluster) -> None:
    consumer = PushConsumer(unique_name("SqlG"), namesrv_addr=cluster.namesrv)
    with pytest.raises(FilterExpressionError) as info:
        consumer.subscribe("AnyTopic", MessageSelector.by_sql("region = 'eu' AND amount >"))
    assert info.value.position == len("region = 'eu' AND amount >")


async def test_broker_with_property_filter_off_refuses_as_java_does(tmp_path: Path) -> None:
    off = start_cluster(tmp_path, *SMALL_STORE)
    try:
        topic = await make_topic(off)
        body = orjson.dumps({"clientId": "c", "group": "G", "subscriptionData": {
            "topic": topic, "subString": EXPRESSION, "expressionType": "SQL92", "classFilterMode": False,
            "tagsSet": [], "codeSet": [], "subVersion": 1}})
        async with RemotingClient() as rc:
            check = RemotingCommand.request(RequestCode.CHECK_CLIENT_CONFIG, None, body)
            r = await rc.invoke(off.broker, check, 5)
            assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, NOT_SUPPORTED)
            r = await pull(rc, off.broker, "G", topic, 0, 0, subscription=EXPRESSION,
                           expression_type="SQL92")
            assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, NOT_SUPPORTED)
        # the consumer fails at start() with the broker's answer (MQClientInstance.checkClientInBroker)
        for cls in (PushConsumer, LitePullConsumer):
            consumer = cls(unique_name("SqlG"), namesrv_addr=off.namesrv, instance_name=unique_name("i"))
            consumer.subscribe(topic, MessageSelector.by_sql(EXPRESSION))
            if cls is PushConsumer:
                consumer.register_listener(lambda msgs, ctx: ConsumeStatus.CONSUME_SUCCESS)
            with pytest.raises(MQClientError) as info:
                await consumer.start()
            assert info.value.code == ResponseCode.SYSTEM_ERROR and NOT_SUPPORTED in str(info.value)
            await consumer.shutdown()  # already down: a no-op
    finally:
        off.stop()
