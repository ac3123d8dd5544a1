"""A cluster of real processes: one ``rocketq namesrv`` and two ``rocketq broker -n ...`` (distinct
brokerName, same brokerClusterName) serving one topic created on both.

The route lists both brokers, each broker stores and serves what is sent to it, and when one broker
is killed the name server drops it as soon as its registration channel closes (RocketMQ's
onChannelDestroy, long before the 120 s expiry) while the other broker keeps serving.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.harness import (
    Server,
    namesrv_and_brokers,
    small_store,
    wait_until,
)
from tests.wire import (
    create_topic,
    decode_pull,
    get_route,
    invoke,
    pull,
    send_message,
)

from rocketq.codec.bodies import ClusterInfo, TopicRouteData
from rocketq.codec.codes import RequestCode, ResponseCode
from rocketq.remoting import RemotingClient

pytestmark = pytest.mark.timeout(90)

CLUSTER = "TwoBrokerCluster"
TOPIC = "TwoBrokerT"
QUEUES = 3
SMALL_STORE = small_store(commit_log=1024 * 1024, slots=4000, index=16000)


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[list[Server]]:
    """[name server, broker-a, broker-b] of one cluster."""
    cluster = ("--set", f"brokerClusterName={CLUSTER}", *SMALL_STORE)
    with namesrv_and_brokers(tmp_path, ("broker-a", "broker-b"), *cluster) as started:
        yield started


def _brokers_in(route: TopicRouteData | None) -> dict[str, str]:
    if route is None:
        return {}
    return {b.broker_name: b.broker_addrs.get(0, "") for b in route.broker_datas}


async def test_two_brokers_serve_one_topic_and_failover(servers: list[Server]) -> None:
    ns, a, b = servers
    async with RemotingClient() as client:
        for broker in (a, b):
            r = await create_topic(client, broker.addr, TOPIC, read=QUEUES, write=QUEUES)
            assert r.code == ResponseCode.SUCCESS, r.remark

        # The route: both brokers, each with the topic's queues, and the cluster table names both.
        async def both_routed() -> TopicRouteData | None:
            route = await get_route(client, ns.addr, TOPIC)
            return route if _brokers_in(route) == {"broker-a": a.addr, "broker-b": b.addr} else None

        route = await wait_until(both_routed, timeout=10)
        assert {(q.broker_name, q.read_queue_nums, q.write_queue_nums) for q in route.queue_datas} == {
            ("broker-a", QUEUES, QUEUES), ("broker-b", QUEUES, QUEUES)}
        assert {bd.cluster for bd in route.broker_datas} == {CLUSTER}
        info_resp = await invoke(client, ns.addr, RequestCode.GET_BROKER_CLUSTER_INFO)
        info = ClusterInfo.from_json(info_resp.body_bytes())
        assert sorted(info.cluster_addr_table[CLUSTER]) == ["broker-a", "broker-b"]

        # Sends to each broker land there, and only there.
        for broker in (a, b):
            for q in range(QUEUES):
                r = await send_message(client, broker.addr, TOPIC, f"{broker.name}-q{q}".encode(), queue_id=q)
                assert r.code == ResponseCode.SUCCESS, r.remark
                assert r.ext("queueOffset") == "0"
        for broker in (a, b):
            for q in range(QUEUES):
                msgs = decode_pull(await pull(client, broker.addr, "TwoBrokerGroup", TOPIC, q, 0))
                assert [m.body for m in msgs] == [f"{broker.name}-q{q}".encode()]
                assert f"{msgs[0].store_host[0]}:{msgs[0].store_host[1]}" == broker.addr

        # kill -9 broker-a: the name server sees its channel close and drops it from the route.
        await asyncio.to_thread(a.proc.kill)

        async def only_b() -> bool:
            return _brokers_in(await get_route(client, ns.addr, TOPIC)) == {"broker-b": b.addr}

        await wait_until(only_b, timeout=10)
        route = await get_route(client, ns.addr, TOPIC)
        assert route is not None and [q.broker_name for q in route.queue_datas] == ["broker-b"]

        # broker-b keeps serving: new sends and everything it had.
        r = await send_message(client, b.addr, TOPIC, b"after-failover", queue_id=0)
        assert r.code == ResponseCode.SUCCESS and r.ext("queueOffset") == "1", r.remark
        msgs = decode_pull(await pull(client, b.addr, "TwoBrokerGroup", TOPIC, 0, 0))
        assert [m.body for m in msgs] == [b"broker-b-q0", b"after-failover"]
    assert b.proc.alive() and ns.proc.alive(), b.proc.describe()
