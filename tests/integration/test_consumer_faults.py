"""A push consumer keeps going when its broker misbehaves.

* A real `rocketq up` is stopped while the consumer's long poll is held and started again on the
  same ports and data: the consumer reconnects, re-announces itself and receives what follows.
* A broker that answers pulls with garbage (bad frames, undecodable bodies, missing headers,
  unexpected codes, a closed connection) gets retried with back-off; the pull loop never dies and
  consumes as soon as the answers make sense. That broker is a small RemotingServer registered
  with the real name server of a `rocketq up`: misbehaving on purpose is all it does.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import orjson
import pytest
from tests.harness import (
    SMALL_STORE,
    Cluster,
    free_port,
    module_cluster,
    start_cluster,
    unique_name,
    wait_until,
)
from tests.wire import create_topic, get_route

from rocketq.aio import PushConsumer
from rocketq.client.consumer import ConsumeStatus
from rocketq.client.message import Message
from rocketq.client.producer import Producer
from rocketq.codec.bodies import (
    DataVersion,
    HeartbeatData,
    RegisterBrokerBody,
    TopicConfig,
    TopicConfigSerializeWrapper,
)
from rocketq.codec.codes import RequestCode, ResponseCode
from rocketq.codec.command import RemotingCommand
from rocketq.codec.headers import RegisterBrokerRequestHeader
from rocketq.codec.message import MessageExt, encode_message
from rocketq.remoting import Channel, RemotingClient, RemotingServer

pytestmark = [
    pytest.mark.timeout(60),
]



def consumer_for(namesrv: str, topic: str, listener: Any) -> PushConsumer:
    consumer = PushConsumer(
        unique_name("FG"),
        namesrv_addr=namesrv,
        instance_name=unique_name("f"),
        consume_from_where="CONSUME_FROM_FIRST_OFFSET",
        consume_thread_min=1,
        consume_thread_max=1,
    )
    consumer.subscribe(topic, "*")
    consumer.register_listener(listener)
    return consumer


async def test_broker_restart_while_a_pull_is_held(tmp_path: Path) -> None:
    ports = ("--namesrv-port", str(free_port()), "--broker-port", str(free_port()))
    cluster = start_cluster(tmp_path, *SMALL_STORE, *ports)
    got: list[bytes] = []

    def listener(msgs: list[Any], ctx: Any) -> ConsumeStatus:
        got.extend(m.body for m in msgs)
        return ConsumeStatus.CONSUME_SUCCESS

    topic = unique_name("FT")
    consumer = consumer_for(cluster.namesrv, topic, listener)
    producer = Producer(unique_name("PG"), namesrv_addr=cluster.namesrv, retry_times_when_send_failed=0)
    try:
        async with RemotingClient() as rc:
            assert (await create_topic(rc, cluster.broker, topic, read=1, write=1)).code == 0
            await wait_until(lambda: get_route(rc, cluster.namesrv, topic), timeout=10)
        await producer.start()
        await consumer.start()
        await producer.send(Message(topic, b"before"))
        await wait_until(lambda: got == [b"before"], timeout=10)
        await asyncio.sleep(0.2)  # the next pull is now held by the broker
        assert await asyncio.to_thread(cluster.stop) == 0
        cluster = await asyncio.to_thread(start_cluster, tmp_path, *SMALL_STORE, *ports)
        started = time.monotonic()

        async def sent() -> bool:
            try:
                await producer.send(Message(topic, b"after"))
                return True
            except Exception:
                return False

        await wait_until(sent, timeout=15, interval=0.2)
        await wait_until(lambda: b"after" in got, timeout=15)
        print(f"\nconsuming again {time.monotonic() - started:.2f}s after the broker came back")
        assert got == [b"before", b"after"]  # nothing lost, nothing repeated (offsets were persisted)
    finally:
        await consumer.shutdown()
        await producer.shutdown()
        cluster.stop()


class GarbageBroker:
    """Answers the consumer's bookkeeping requests properly and its pulls badly, then well."""

    BAD_ANSWERS = ("frame", "body", "no-header", "code", "close")

    def __init__(self, topic: str) -> None:
        self.topic = topic
        self.server = RemotingServer("127.0.0.1", [0], idle_timeout=None)
        self.clients: list[str] = []
        self.pull_times: list[float] = []
        self.offsets: list[int] = []
        for code, handler in (
            (RequestCode.HEART_BEAT, self.heartbeat),
            (RequestCode.GET_CONSUMER_LIST_BY_GROUP, self.consumer_list),
            (RequestCode.QUERY_CONSUMER_OFFSET, self.query_offset),
            (RequestCode.UPDATE_CONSUMER_OFFSET, self.ok),
            (RequestCode.UNREGISTER_CLIENT, self.ok),
            (RequestCode.PULL_MESSAGE, self.pull),
        ):
            self.server.register_processor(code, handler)

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.server.bound_ports[0]}"

    def ok(self, request: RemotingCommand, channel: Channel) -> RemotingCommand:
        return request.make_response(ResponseCode.SUCCESS)

    def heartbeat(self, request: RemotingCommand, channel: Channel) -> RemotingCommand:
        client_id = HeartbeatData.from_json(request.body_bytes()).client_id
        if client_id not in self.clients:
            self.clients.append(client_id)
        return request.make_response(ResponseCode.SUCCESS)

    def consumer_list(self, request: RemotingCommand, channel: Channel) -> RemotingCommand:
        body = orjson.dumps({"consumerIdList": self.clients})
        return RemotingCommand.response(ResponseCode.SUCCESS, body=body)

    def query_offset(self, request: RemotingCommand, channel: Channel) -> RemotingCommand:
        return RemotingCommand.response(ResponseCode.SUCCESS, ext_fields={"offset": "0"})

    def pull(self, request: RemotingCommand, channel: Channel) -> RemotingCommand | None:
        assert request.ext_fields is not None
        self.pull_times.append(time.monotonic())
        self.offsets.append(int(request.ext_fields["queueOffset"]))
        n = len(self.pull_times)
        header = {"suggestWhichBrokerId": "0", "nextBeginOffset": "1", "minOffset": "0", "maxOffset": "1"}
        if n <= len(self.BAD_ANSWERS):
            kind = self.BAD_ANSWERS[n - 1]
            if kind == "frame":
                channel._transport.write(b"\x00\x00\x00\x08\x00\x00\x00\x99garbage!")
                return None
            if kind == "body":
                return RemotingCommand.response(ResponseCode.SUCCESS, ext_fields=header, body=b"\x01" * 50)
            if kind == "no-header":
                return RemotingCommand.response(ResponseCode.SUCCESS)
            if kind == "code":
                return RemotingCommand.response(ResponseCode.SYSTEM_ERROR, "broker is having a bad day")
            channel.close()
            return None
        if int(request.ext_fields["queueOffset"]) == 0:
            msg = MessageExt(
                topic=self.topic,
                body=b"finally",
                queue_offset=0,
                commit_log_offset=0,
                properties={"UNIQ_KEY": "ABC"},
                store_host=("127.0.0.1", 1),
            )
            return RemotingCommand.response(ResponseCode.SUCCESS, ext_fields=header, body=encode_message(msg))
        return RemotingCommand.response(ResponseCode.PULL_NOT_FOUND, ext_fields=header)


namesrv_cluster = module_cluster("garbage", *SMALL_STORE)


async def test_garbage_answers_are_retried_with_back_off(namesrv_cluster: Cluster) -> None:
    topic = unique_name("GT")
    broker = GarbageBroker(topic)
    await broker.server.start()
    got: list[Any] = []

    def listener(msgs: list[Any], ctx: Any) -> ConsumeStatus:
        got.extend(msgs)
        return ConsumeStatus.CONSUME_SUCCESS

    consumer = consumer_for(namesrv_cluster.namesrv, topic, listener)
    # The name server forgets a broker whose registering connection closes: keep it open.
    registrar = RemotingClient()
    try:
        wrapper = TopicConfigSerializeWrapper(
            topic_config_table={topic: TopicConfig(topic, read_queue_nums=1, write_queue_nums=1)},
            data_version=DataVersion(),
        )
        header = RegisterBrokerRequestHeader("garbage-broker", broker.addr, "GarbageCluster", broker.addr, 0)
        request = RemotingCommand.request(
            RequestCode.REGISTER_BROKER, header.to_ext(), RegisterBrokerBody(wrapper).to_json()
        )
        assert (await registrar.invoke(namesrv_cluster.namesrv, request, 5)).code == ResponseCode.SUCCESS
        await consumer.start()
        await wait_until(lambda: got, timeout=20)
    finally:
        await consumer.shutdown()
        await broker.server.stop()
        await registrar.close()
    assert [m.body for m in got] == [b"finally"] and got[0].topic == topic
    gaps = [
        b - a
        for a, b in zip(
            broker.pull_times, broker.pull_times[1 : len(GarbageBroker.BAD_ANSWERS) + 1], strict=False
        )
    ]
    assert len(gaps) == len(GarbageBroker.BAD_ANSWERS)
    assert all(gap >= 0.9 for gap in gaps), f"no back-off after a bad answer: {gaps}"
    assert set(broker.offsets[: len(GarbageBroker.BAD_ANSWERS) + 1]) == {0}  # retried the same offset
