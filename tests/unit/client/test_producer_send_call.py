"""The send state machine against scripted remoting servers (a name server and two "brokers" whose
answers each test chooses): which answers are retried on the other broker, which are raised, the
timeout budget, heartbeats and the unregister at shutdown."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from tests.harness import wait_until

from rocketq.aio import Producer
from rocketq.client.message import Message, SendStatus
from rocketq.codec.bodies import BrokerData, HeartbeatData, QueueData, TopicRouteData
from rocketq.codec.codes import RequestCode, ResponseCode
from rocketq.codec.command import RemotingCommand
from rocketq.errors import (
    MessageIllegal,
    MQBrokerError,
    NoNameServer,
    RemotingTimeoutError,
    ServiceNotAvailable,
    SystemBusy,
)
from rocketq.remoting import Channel, RemotingServer

pytestmark = pytest.mark.timeout(30)

Script = Callable[[RemotingCommand], Any]


@dataclass
class FakeBroker:
    name: str
    server: RemotingServer
    # what SEND answers: a response code, "hang" or "garbage"
    answer: int | str = ResponseCode.SUCCESS
    sends: list[dict[str, str]] = field(default_factory=list)
    heartbeats: list[HeartbeatData] = field(default_factory=list)
    unregisters: list[dict[str, str]] = field(default_factory=list)

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.server.bound_ports[0]}"

    def handle_send(self, request: RemotingCommand, channel: Channel) -> Any:
        ext = dict(request.ext_fields or {})
        self.sends.append(ext)
        if self.answer == "hang":
            return asyncio.sleep(3600)
        if self.answer == "garbage":
            return request.make_response(0, None, {"unexpected": "1"})
        code = int(self.answer)
        return request.make_response(code, f"scripted {code}", {
            "msgId": "7F00000100002A9F00000000000004D2", "queueId": ext["e"],
            "queueOffset": str(len(self.sends)),
            "MSG_REGION": "R1", "TRACE_ON": "false", "transactionId": "T",
        })

    def handle_heartbeat(self, request: RemotingCommand, channel: Channel) -> RemotingCommand:
        self.heartbeats.append(HeartbeatData.from_json(request.body_bytes()))
        return request.make_response(0)

    def handle_unregister(self, request: RemotingCommand, channel: Channel) -> RemotingCommand:
        self.unregisters.append(dict(request.ext_fields or {}))
        return request.make_response(0)


@dataclass
class FakeCluster:
    namesrv: RemotingServer
    brokers: dict[str, FakeBroker]
    route_queries: list[str] = field(default_factory=list)

    @property
    def namesrv_addr(self) -> str:
        return f"127.0.0.1:{self.namesrv.bound_ports[0]}"

    def route(self, request: RemotingCommand, channel: Channel) -> RemotingCommand:
        topic = (request.ext_fields or {})["topic"]
        self.route_queries.append(topic)
        if topic == "TBW102":
            return request.make_response(ResponseCode.TOPIC_NOT_EXIST, "no TBW102 here")
        data = TopicRouteData(
            queue_datas=tuple(QueueData(name, 2, 2, 6) for name in self.brokers),
            broker_datas=tuple(BrokerData("c", name, {0: b.addr}) for name, b in self.brokers.items()),
        )
        return request.make_response(0, None, None, data.to_json())


@pytest.fixture
async def cluster() -> AsyncIterator[FakeCluster]:
    servers: list[RemotingServer] = []
    brokers: dict[str, FakeBroker] = {}
    for name in ("a", "b"):
        server = RemotingServer("127.0.0.1", [0])
        broker = FakeBroker(name, server)
        server.register_processor(RequestCode.SEND_MESSAGE_V2, broker.handle_send)
        server.register_processor(RequestCode.SEND_BATCH_MESSAGE, broker.handle_send)
        server.register_processor(RequestCode.HEART_BEAT, broker.handle_heartbeat)
        server.register_processor(RequestCode.UNREGISTER_CLIENT, broker.handle_unregister)
        await server.start()
        servers.append(server)
        brokers[name] = broker
    ns = RemotingServer("127.0.0.1", [0])
    fake = FakeCluster(ns, brokers)
    ns.register_processor(RequestCode.GET_ROUTEINFO_BY_TOPIC, fake.route)
    await ns.start()
    servers.append(ns)
    try:
        yield fake
    finally:
        for server in servers:
            await server.stop(grace=0.1)


@pytest.fixture
async def producer(cluster: FakeCluster) -> AsyncIterator[Producer]:
    p = Producer("PG_SCRIPTED", namesrv_addr=cluster.namesrv_addr, send_msg_timeout=2000)
    await p.start()
    try:
        yield p
    finally:
        await p.shutdown()


def brokers_of(cluster: FakeCluster) -> dict[str, int]:
    return {name: len(b.sends) for name, b in cluster.brokers.items()}


@pytest.mark.parametrize("code", [ResponseCode.SYSTEM_BUSY, ResponseCode.SYSTEM_ERROR,
                                  ResponseCode.SERVICE_NOT_AVAILABLE, ResponseCode.TOPIC_NOT_EXIST,
                                  ResponseCode.NO_PERMISSION, ResponseCode.GO_AWAY,
                                  ResponseCode.NO_BUYER_ID, ResponseCode.NOT_IN_CURRENT_UNIT])
async def test_retriable_codes_move_to_the_other_broker(
        cluster: FakeCluster, producer: Producer, code: int) -> None:
    cluster.brokers["a"].answer = code
    for i in range(6):
        r = await producer.send(Message("T", b"%d" % i))
        assert r.message_queue.broker_name == "b"
        assert r.region_id == "R1" and r.trace_on is False
    a_sends = cluster.brokers["a"].sends
    assert a_sends, "round robin never tried broker a"
    # every retry carries the same message: same UNIQ_KEY, other queue
    retried = {s["i"] for s in a_sends}
    assert retried <= {s["i"] for s in cluster.brokers["b"].sends}


async def test_a_broker_refusing_as_slave_makes_the_route_be_read_at_once(
        cluster: FakeCluster, producer: Producer) -> None:
    """A master demoted by electMaster stays up and answers SERVICE_NOT_AVAILABLE: the producer
    reads the route again (the new master is in it) instead of waiting for its 30 s poll."""
    await producer.send(Message("T", b"warm"))  # the route is known
    queries = len(cluster.route_queries)
    for b in cluster.brokers.values():
        b.answer = ResponseCode.SERVICE_NOT_AVAILABLE
    with pytest.raises(ServiceNotAvailable):
        await producer.send(Message("T", b"x"))
    # the refresh runs in the background (at most once a second per topic)
    await wait_until(lambda: len(cluster.route_queries) > queries, timeout=10)
    assert set(cluster.route_queries[queries:]) == {"T"}


async def test_other_codes_are_raised_without_retry(cluster: FakeCluster, producer: Producer) -> None:
    for b in cluster.brokers.values():
        b.answer = ResponseCode.MESSAGE_ILLEGAL
    with pytest.raises(MessageIllegal):
        await producer.send(Message("T", b"x"))
    assert sum(brokers_of(cluster).values()) == 1
    for b in cluster.brokers.values():
        b.answer = 299  # a code nobody maps
    with pytest.raises(MQBrokerError) as e:
        await producer.send(Message("T", b"x"))
    assert e.value.code == 299 and "BROKER" in str(e.value)


async def test_all_attempts_failing_reports_every_broker(cluster: FakeCluster, producer: Producer) -> None:
    for b in cluster.brokers.values():
        b.answer = ResponseCode.SYSTEM_BUSY
    with pytest.raises(SystemBusy) as e:
        await producer.send(Message("T", b"x"))
    assert sum(brokers_of(cluster).values()) == 3  # 1 + retry_times_when_send_failed (2)
    assert any("Send [3] times" in note for note in getattr(e.value, "__notes__", []))
    fut = producer.send_async(Message("T", b"y"))
    with pytest.raises(SystemBusy):
        await fut
    assert sum(brokers_of(cluster).values()) == 6  # retry_times_when_send_async_failed (2) too


async def test_timeout_covers_all_attempts(cluster: FakeCluster, producer: Producer) -> None:
    for b in cluster.brokers.values():
        b.answer = "hang"
    loop = asyncio.get_running_loop()
    start = loop.time()
    with pytest.raises(RemotingTimeoutError):
        await producer.send(Message("T", b"x"), timeout=0.3)
    assert loop.time() - start < 1.5


async def test_garbage_answer_is_retried(cluster: FakeCluster, producer: Producer) -> None:
    cluster.brokers["a"].answer = "garbage"
    results = [await producer.send(Message("T", b"%d" % i)) for i in range(4)]
    assert {r.message_queue.broker_name for r in results} == {"b"}


async def test_not_stored_ok_retries_only_when_asked(cluster: FakeCluster) -> None:
    cluster.brokers["a"].answer = ResponseCode.FLUSH_DISK_TIMEOUT
    cluster.brokers["b"].answer = ResponseCode.FLUSH_DISK_TIMEOUT
    async with Producer("PG_STORE_OK", namesrv_addr=cluster.namesrv_addr) as p:
        r = await p.send(Message("T", b"x"))
        assert r.status is SendStatus.FLUSH_DISK_TIMEOUT and sum(brokers_of(cluster).values()) == 1
    async with Producer("PG_STORE_OK2", namesrv_addr=cluster.namesrv_addr,
                        retry_another_broker_when_not_store_ok=True) as p:
        r = await p.send(Message("T", b"x"))
        assert r.status is SendStatus.FLUSH_DISK_TIMEOUT and sum(brokers_of(cluster).values()) == 4


async def test_heartbeat_and_unregister(cluster: FakeCluster) -> None:
    p = Producer("PG_HB", namesrv_addr=cluster.namesrv_addr)
    await p.start()
    await p.send(Message("T", b"x"))  # learns both brokers from the route
    await p.instance.send_heartbeat_to_all_brokers()
    for b in cluster.brokers.values():
        hb = b.heartbeats[-1]
        assert hb.client_id == p.instance.client_id
        assert [d.group_name for d in hb.producer_data_set] == ["PG_HB"] and hb.consumer_data_set == ()
    client_id = p.instance.client_id
    await p.shutdown()
    for b in cluster.brokers.values():
        assert b.unregisters == [{"clientID": client_id, "producerGroup": "PG_HB"}]


async def test_oneway_and_batch(cluster: FakeCluster, producer: Producer) -> None:
    await producer.send_oneway(Message("T", b"one"))
    r = await producer.send_batch([Message("T", b"1"), Message("T", b"2")])
    assert len(r.msg_id.split(",")) == 2
    # One plain send (m=false) and one batch (m=true); they may land on different brokers, and the
    # one-way send is only known to have arrived once the broker saw it.
    deadline = asyncio.get_running_loop().time() + 5
    while True:
        sends = [s for b in cluster.brokers.values() for s in b.sends]
        if len(sends) >= 2 or asyncio.get_running_loop().time() > deadline:
            break
        await asyncio.sleep(0.01)
    assert sorted(s["m"] for s in sends) == ["false", "true"]


async def test_no_name_server(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NAMESRV_ADDR", raising=False)
    monkeypatch.delenv("ROCKETMQ_NAMESRV_DOMAIN", raising=False)
    async with Producer("PG_NO_NS") as p:
        with pytest.raises(NoNameServer):
            await p.send(Message("T", b"x"))
