"""MQClientInstance: the per-process registry, route tables, scheduled tasks, name-server lookup
and broker -> client requests, against scripted remoting servers."""

from __future__ import annotations

import asyncio
import http.server
import threading
from collections.abc import AsyncIterator, Iterator
from typing import Any

import orjson
import pytest

from rocketq.client import nsaddr
from rocketq.client.config import ClientConfig, ServiceState
from rocketq.client.instance import MQClientInstance, MQClientManager
from rocketq.codec.bodies import (
    BrokerData,
    ConsumerData,
    HeartbeatData,
    MessageQueue,
    QueueData,
    SubscriptionData,
    TopicRouteData,
)
from rocketq.codec.codes import RequestCode
from rocketq.codec.command import RemotingCommand
from rocketq.errors import MQClientError, TopicRouteNotFound
from rocketq.remoting import Channel, RemotingServer
from rocketq.remoting.loop import new_event_loop

pytestmark = pytest.mark.timeout(30)


class DummyConsumer:
    """Just enough of a consumer for the instance to drive it."""

    def __init__(self, group: str, topics: set[str]) -> None:
        self.group = group
        self.topics = topics
        self.rebalances = 0
        self.persists = 0
        self.subscribe_info: dict[str, list[MessageQueue]] = {}

    async def do_rebalance(self) -> bool:
        self.rebalances += 1
        return True

    async def persist_consumer_offset(self) -> None:
        self.persists += 1

    def consumer_data(self) -> ConsumerData:
        return ConsumerData(self.group, subscription_data_set=tuple(SubscriptionData(t) for t in self.topics))

    def subscriptions(self) -> set[str]:
        return self.topics

    def update_topic_subscribe_info(self, topic: str, queues: list[MessageQueue]) -> None:
        self.subscribe_info[topic] = queues


class Cluster:
    """A scripted name server plus a broker that records heartbeats and can notify clients."""

    def __init__(self) -> None:
        self.namesrv = RemotingServer("127.0.0.1", [0])
        self.broker = RemotingServer("127.0.0.1", [0])
        self.route_queries = 0
        self.heartbeats: list[HeartbeatData] = []
        self.channels: list[Channel] = []
        self.namesrv.register_processor(RequestCode.GET_ROUTEINFO_BY_TOPIC, self._route)
        self.broker.register_processor(RequestCode.HEART_BEAT, self._heartbeat)
        self.broker.register_processor(RequestCode.UNREGISTER_CLIENT, lambda r, c: r.make_response(0))

    @property
    def namesrv_addr(self) -> str:
        return f"127.0.0.1:{self.namesrv.bound_ports[0]}"

    @property
    def broker_addr(self) -> str:
        return f"127.0.0.1:{self.broker.bound_ports[0]}"

    def route_data(self) -> TopicRouteData:
        return TopicRouteData(queue_datas=(QueueData("b", 4, 4, 6),),
                              broker_datas=(BrokerData("c", "b", {0: self.broker_addr}),))

    async def _route(self, request: RemotingCommand, channel: Channel) -> RemotingCommand:
        self.route_queries += 1
        await asyncio.sleep(0.05)  # long enough for concurrent lookups to overlap
        return request.make_response(0, None, None, self.route_data().to_json())

    def _heartbeat(self, request: RemotingCommand, channel: Channel) -> RemotingCommand:
        self.heartbeats.append(HeartbeatData.from_json(request.body_bytes()))
        if channel not in self.channels:
            self.channels.append(channel)
        return request.make_response(0)


@pytest.fixture
async def cluster() -> AsyncIterator[Cluster]:
    c = Cluster()
    await c.namesrv.start()
    await c.broker.start()
    try:
        yield c
    finally:
        await c.broker.stop(grace=0.1)
        await c.namesrv.stop(grace=0.1)


@pytest.fixture
async def instance(cluster: Cluster) -> AsyncIterator[MQClientInstance]:
    cfg = ClientConfig(namesrv_addr=cluster.namesrv_addr, instance_name="core-test", client_ip="127.0.0.1",
                       poll_name_server_interval=100, heartbeat_broker_interval=100,
                       persist_consumer_offset_interval=100)
    inst = MQClientManager.get_or_create(cfg)
    await inst.start()
    try:
        yield inst
    finally:
        inst.consumer_table.clear()
        inst.producer_table.clear()
        await inst.shutdown()


async def test_registry_get_or_create() -> None:
    cfg = ClientConfig(namesrv_addr="127.0.0.1:1", instance_name="reg-a", client_ip="127.0.0.1")
    a = MQClientManager.get_or_create(cfg)
    assert MQClientManager.get_or_create(cfg) is a
    assert a.client_id == "127.0.0.1@reg-a"
    b = MQClientManager.get_or_create(cfg.replace(instance_name="reg-b"))
    assert b is not a
    for inst in (a, b):
        await inst.start()
        await inst.start()  # idempotent
        assert inst.service_state is ServiceState.RUNNING
        await inst.shutdown()
        assert inst.service_state is ServiceState.SHUTDOWN_ALREADY
    assert a not in MQClientManager.instances()
    assert MQClientManager.get_or_create(cfg) is not a  # a shut-down instance is replaced


def _in_other_loop(cfg: ClientConfig, ready: threading.Event, done: threading.Event, out: list[Any]) -> None:
    async def main() -> None:
        inst = MQClientManager.get_or_create(cfg)
        out.append(inst)
        ready.set()
        while not done.is_set():
            await asyncio.sleep(0.01)

    loop = new_event_loop()
    try:
        loop.run_until_complete(main())
    finally:
        loop.close()


async def test_registry_across_event_loops() -> None:
    ready, done, out = threading.Event(), threading.Event(), []
    default = ClientConfig(namesrv_addr="127.0.0.1:1", client_ip="127.0.0.1")
    named = default.replace(instance_name="loop-bound")
    thread = threading.Thread(target=_in_other_loop, args=(named, ready, done, out))
    thread.start()
    try:
        assert ready.wait(5)
        with pytest.raises(MQClientError):  # an explicit name in use on a running loop elsewhere
            MQClientManager.get_or_create(named)
        mine = MQClientManager.get_or_create(default)
        ready2, out2 = threading.Event(), []
        t2 = threading.Thread(target=_in_other_loop, args=(default, ready2, done, out2))
        t2.start()
        assert ready2.wait(5)
        assert out2[0].client_id != mine.client_id  # the default name gets an id per loop
        assert out2[0].client_id.startswith("127.0.0.1@")
    finally:
        done.set()
        thread.join(5)
    t2.join(5)
    # the other loop is closed now: its instance no longer blocks the name
    assert MQClientManager.get_or_create(named) is not out[0]
    MQClientManager.remove(MQClientManager.get_or_create(named))
    MQClientManager.remove(mine)


async def test_routes_feed_producers_consumers_and_broker_table(
        cluster: Cluster, instance: MQClientInstance) -> None:
    consumer = DummyConsumer("CG", {"T"})
    assert instance.register_consumer("CG", consumer)
    assert not instance.register_consumer("CG", DummyConsumer("CG", set()))
    lookups = [instance.update_topic_route_info_from_name_server("T") for _ in range(5)]
    results = await asyncio.gather(*lookups)
    assert all(results) and cluster.route_queries <= 2  # concurrent lookups share a request
    assert instance.broker_addr_table == {"b": {0: cluster.broker_addr}}
    queues = [MessageQueue("T", "b", i) for i in range(4)]
    assert consumer.subscribe_info["T"] == queues
    assert instance.get_subscribe_queues("T") == queues and instance.get_subscribe_queues("U") == []
    assert await instance.fetch_subscribe_message_queues("T") == queues
    assert instance.find_broker_address_in_publish("b") == cluster.broker_addr
    # any address of the broker when id 1 is unknown, unless only that one will do
    assert instance.find_broker_address_in_subscribe("b", 1) == cluster.broker_addr
    assert instance.find_broker_address_in_subscribe("b", 1, only_this_broker=True) is None
    assert instance.find_broker_address_in_subscribe("zz") is None
    assert instance.find_broker_addr_by_topic("T") == cluster.broker_addr
    # a broker no route mentions any more is forgotten
    instance.broker_addr_table["gone"] = {0: "127.0.0.1:1"}
    instance.clean_offline_broker()
    assert "gone" not in instance.broker_addr_table and "b" in instance.broker_addr_table


async def test_scheduled_tasks_heartbeat_refresh_and_persist(
        cluster: Cluster, instance: MQClientInstance) -> None:
    consumer = DummyConsumer("CG2", {"T2"})
    instance.register_consumer("CG2", consumer)
    for _ in range(200):  # refresh (100 ms) -> broker known -> heartbeat (100 ms)
        if cluster.heartbeats and consumer.subscribe_info:
            break
        await asyncio.sleep(0.02)
    hb = cluster.heartbeats[-1]
    assert hb.client_id == instance.client_id
    assert [c.group_name for c in hb.consumer_data_set] == ["CG2"]
    assert consumer.subscribe_info["T2"]
    # the rebalance service started with the first consumer; a starting consumer wakes it
    instance.rebalance_immediately()
    for _ in range(100):
        if consumer.rebalances:
            break
        await asyncio.sleep(0.01)
    assert consumer.rebalances >= 1
    await instance.do_rebalance()
    await instance.persist_all_consumer_offset()
    assert consumer.rebalances >= 2 and consumer.persists >= 1


async def test_notify_consumer_ids_changed_rebalances_at_once(
        cluster: Cluster, instance: MQClientInstance) -> None:
    consumer = DummyConsumer("CG3", {"T3"})
    instance.register_consumer("CG3", consumer)
    await instance.update_topic_route_info_from_name_server("T3")
    await instance.send_heartbeat_to_all_brokers()
    [channel] = cluster.channels
    await asyncio.sleep(0.05)
    before = consumer.rebalances
    channel.invoke_oneway(RemotingCommand.request(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED,
                                                  {"consumerGroup": "CG3"}))
    for _ in range(100):
        if consumer.rebalances > before:
            break
        await asyncio.sleep(0.01)
    assert consumer.rebalances > before
    # GET_CONSUMER_RUNNING_INFO goes to the consumer's instance over the same connection
    resp = await channel.invoke(RemotingCommand.request(RequestCode.GET_CONSUMER_RUNNING_INFO,
                                                        {"consumerGroup": "CG3", "clientId": "x",
                                                         "jstackEnable": "false"}), 2.0)
    info = orjson.loads(resp.body_bytes())
    assert resp.code == 0 and info["subscriptionSet"][0]["topic"] == "T3"
    resp = await channel.invoke(RemotingCommand.request(RequestCode.GET_CONSUMER_RUNNING_INFO,
                                                        {"consumerGroup": "nope"}), 2.0)
    assert resp.code == 1


async def test_no_route_is_reported(instance: MQClientInstance, cluster: Cluster) -> None:
    async def no_route(request: RemotingCommand, channel: Channel) -> RemotingCommand:
        return request.make_response(17, "No topic route info in name server for the topic")

    cluster.namesrv.register_processor(RequestCode.GET_ROUTEINFO_BY_TOPIC, no_route)
    assert not await instance.update_topic_route_info_from_name_server("Missing")
    with pytest.raises(TopicRouteNotFound):
        await instance.fetch_subscribe_message_queues("Missing")
    assert await instance.find_consumer_id_list("Missing", "G") is None


# -- name server address lookup ------------------------------------------------------------------------


@pytest.fixture
def address_server() -> Iterator[tuple[str, list[str]]]:
    """An HTTP address server on 127.0.0.1 answering what the test puts in the list."""
    answers: list[str] = ["127.0.0.1:9999"]
    paths: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            paths.append(self.path)
            body = answers[0].encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}", paths
    finally:
        server.shutdown()
        server.server_close()


async def test_namesrv_lookup_order(monkeypatch: pytest.MonkeyPatch,
                                    address_server: tuple[str, list[str]]) -> None:
    domain, paths = address_server
    monkeypatch.delenv(nsaddr.ENV_NAMESRV_ADDR, raising=False)
    monkeypatch.delenv(nsaddr.ENV_NAMESRV_DOMAIN, raising=False)
    assert await nsaddr.find_namesrv_addr(ClientConfig()) is None
    assert await nsaddr.find_namesrv_addr(ClientConfig(namesrv_addr="a:1")) == "a:1"
    monkeypatch.setenv(nsaddr.ENV_NAMESRV_DOMAIN, domain)
    assert await nsaddr.find_namesrv_addr(ClientConfig()) == "127.0.0.1:9999"
    assert paths == ["/rocketmq/nsaddr"]
    monkeypatch.setenv(nsaddr.ENV_NAMESRV_ADDR, "env:1;env:2")
    assert await nsaddr.find_namesrv_addr(ClientConfig()) == "env:1;env:2"
    assert await nsaddr.find_namesrv_addr(ClientConfig(namesrv_domain="127.0.0.1:1")) == "env:1;env:2"
    monkeypatch.delenv(nsaddr.ENV_NAMESRV_ADDR)
    assert await nsaddr.find_namesrv_addr(ClientConfig(namesrv_domain="127.0.0.1:1"), timeout=1) is None
    unit = await nsaddr.find_namesrv_addr(ClientConfig(namesrv_domain=domain, unit_name="u1"))
    assert unit == "127.0.0.1:9999" and paths[-1] == "/rocketmq/nsaddr-u1?nofix=1"
    assert nsaddr.address_server_url("jmenv.tbsite.net") == "http://jmenv.tbsite.net:8080/rocketmq/nsaddr"
    assert nsaddr.address_server_url("http://x/y") == "http://x/y"


async def test_instance_uses_the_address_server(monkeypatch: pytest.MonkeyPatch, cluster: Cluster,
                                                address_server: tuple[str, list[str]]) -> None:
    domain, _ = address_server
    monkeypatch.delenv(nsaddr.ENV_NAMESRV_ADDR, raising=False)
    monkeypatch.setenv(nsaddr.ENV_NAMESRV_DOMAIN, domain)
    inst = MQClientManager.get_or_create(ClientConfig(instance_name="via-http", client_ip="127.0.0.1"))
    await inst.start()
    try:
        assert inst.api.namesrv_addr_list == ["127.0.0.1:9999"]
    finally:
        await inst.shutdown()
