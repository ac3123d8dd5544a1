"""What the client says while it waits for things that are expected to come (a topic not created
yet, a group the broker does not know yet): once, at INFO, and no WARNING; and what a producer
says when no name server can be reached."""

from __future__ import annotations

import asyncio
import logging
import socket

import pytest
from tests.harness import SMALL_STORE, Cluster, module_cluster, unique_name, wait_until

from rocketq.aio import LitePullConsumer, Producer, PushConsumer
from rocketq.client.consumer import ConsumeStatus
from rocketq.client.message import Message
from rocketq.errors import RemotingConnectError, TopicRouteNotFound

pytestmark = [pytest.mark.timeout(90)]

cluster = module_cluster("client_logs", *SMALL_STORE, also_as_4_9=True, slow_as_4_9=True)


def client_records(caplog: pytest.LogCaptureFixture, level: int) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "rocketq.client" and r.levelno == level]


def said_at_info(caplog: pytest.LogCaptureFixture, text: str) -> list[str]:
    return [m for m in map(logging.LogRecord.getMessage, client_records(caplog, logging.INFO)) if text in m]


async def test_a_topic_not_created_yet_is_said_once_at_info(
    cluster: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    topic = unique_name("NotYet")
    got: list[bytes] = []

    def listener(msgs: list[object], ctx: object) -> ConsumeStatus:
        got.extend(m.body for m in msgs)  # type: ignore[attr-defined]
        return ConsumeStatus.CONSUME_SUCCESS

    push = PushConsumer(unique_name("G"), namesrv_addr=cluster.namesrv, instance_name=unique_name("push"))
    push.subscribe(topic, "*")
    push.register_listener(listener)
    lite = LitePullConsumer(unique_name("GL"), namesrv_addr=cluster.namesrv,
                            instance_name=unique_name("lite"))
    lite.subscribe(topic, "*")
    with caplog.at_level(logging.INFO, logger="rocketq.client"):
        await push.start()
        await lite.start()
        try:
            for _ in range(5):  # five rebalance rounds each meet the missing topic
                await push.do_rebalance()
                await lite.do_rebalance()
            said = said_at_info(caplog, f"topic[{topic}] not exist")
            assert len(said) == 2, said  # once per consumer
            assert client_records(caplog, logging.WARNING) == []
            async with Producer(unique_name("PG"), namesrv_addr=cluster.namesrv,
                                instance_name=unique_name("prod")) as producer:
                await producer.send(Message(topic, b"now it exists"))

            async def consumed() -> bool:
                # The client learns the broker from the new route; its group reaches that broker
                # with the next heartbeat (every 30 s): send it now rather than wait.
                await push.client.send_heartbeat_to_all_brokers()
                await push.do_rebalance()
                return b"now it exists" in got

            assert await wait_until(consumed, timeout=30, interval=0.5)
        finally:
            await lite.shutdown()
            await push.shutdown()
    assert [r.getMessage() for r in client_records(caplog, logging.WARNING)] == []


async def test_a_group_the_broker_does_not_know_is_said_once_at_info(
    cluster: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    topic = unique_name("Known")
    async with Producer(unique_name("PG"), namesrv_addr=cluster.namesrv,
                        instance_name=unique_name("prod")) as producer:
        await producer.send(Message(topic, b"x"))
        with caplog.at_level(logging.INFO, logger="rocketq.client"):
            for _ in range(4):
                assert await producer.instance.find_consumer_id_list(topic, "NoSuchGroup") is None
    assert len(said_at_info(caplog, "getConsumerIdListByGroup NoSuchGroup")) == 1
    assert client_records(caplog, logging.WARNING) == []


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_a_producer_without_a_reachable_name_server_says_so(caplog: pytest.LogCaptureFixture) -> None:
    addr = f"127.0.0.1:{closed_port()}"
    producer = Producer(unique_name("PG"), namesrv_addr=addr, instance_name=unique_name("closed"),
                        send_msg_timeout=5000)
    await producer.start()
    try:
        with caplog.at_level(logging.INFO, logger="rocketq.client"):
            for _ in range(2):
                with pytest.raises(TopicRouteNotFound) as e:
                    await producer.send(Message("AnyTopic", b"x"))
                assert e.value.remark == f"no name server reachable at {addr} (connection refused)"
                assert e.value.topic == "AnyTopic"
                assert isinstance(e.value.__cause__, RemotingConnectError)
    finally:
        await producer.shutdown()
    # The user must act on it: a WARNING, but one per outage, not one per request.
    warned = [r.getMessage() for r in client_records(caplog, logging.WARNING)]
    assert len(warned) == 1 and addr in warned[0] and "connection refused" in warned[0], warned


async def test_the_name_server_coming_back_is_said_and_routes_work(cluster: Cluster) -> None:
    producer = Producer(unique_name("PG"), namesrv_addr=cluster.namesrv, instance_name=unique_name("back"))
    await producer.start()
    try:
        api = producer.instance.api
        good = api.namesrv_addr_list
        api.update_name_server_address_list(f"127.0.0.1:{closed_port()}")
        with pytest.raises(TopicRouteNotFound):
            await producer.send(Message(unique_name("T"), b"x"))
        assert api.namesrv_failure is not None
        api.update_name_server_address_list(good)
        r = await producer.send(Message(unique_name("T"), b"x"))
        assert r.queue_offset == 0 and api.namesrv_failure is None
    finally:
        await asyncio.wait_for(producer.shutdown(), 10)
