"""Producer retries and failover with real processes: one name server, two brokers.

When a broker is killed (SIGKILL) the producer's cached route still names it; every send that
picks one of its queues must fail over to the other broker within the send timeout, with and
without the latency fault strategy. Also: a topic no broker knows, with auto-create off, is a
typed error at the call.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.harness import (
    AS_4_9,
    Server,
    namesrv_and_brokers,
    small_store,
    start_broker_server,
    start_namesrv_server,
    unique_name,
    wait_until,
)
from tests.wire import create_topic, get_route

from rocketq.aio import Producer
from rocketq.client.message import Message, SendStatus
from rocketq.errors import RemotingError, TopicRouteNotFound
from rocketq.remoting import RemotingClient

pytestmark = [pytest.mark.timeout(90)]

SMALL_STORE = small_store(commit_log=1024 * 1024, slots=4000, index=16000)


@pytest.fixture(params=["rocketq", "as-4.9"])
def servers(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[list[Server]]:
    """[name server, broker-a, broker-b]; the brokers as they are, or as strict as a 4.9 broker."""
    mode = AS_4_9 if request.param == "as-4.9" else ()
    with namesrv_and_brokers(tmp_path, ("broker-a", "broker-b"), *SMALL_STORE, *mode) as started:
        yield started


async def create_on_both(servers: list[Server], topic: str) -> None:
    """The topic on both brokers (4 queues each), and the name server's route says so."""
    ns, *brokers = servers
    async with RemotingClient() as client:
        for broker in brokers:
            assert (await create_topic(client, broker.addr, topic)).code == 0

        async def both_listed() -> bool:
            route = await get_route(client, ns.addr, topic)
            return route is not None and len(route.queue_datas) == 2

        await wait_until(both_listed, timeout=10)


@pytest.mark.parametrize("fault_enable", [False, True], ids=["plain", "latency-fault"])
async def test_sends_fail_over_when_a_broker_dies(servers: list[Server], fault_enable: bool) -> None:
    ns, _, broker_b = servers
    topic = unique_name("FailoverT")
    await create_on_both(servers, topic)
    async with Producer(unique_name("PG"), namesrv_addr=ns.addr, send_msg_timeout=5000,
                        send_latency_fault_enable=fault_enable) as p:
        before = [await p.send(Message(topic, b"before-%d" % i)) for i in range(16)]
        assert {r.message_queue.broker_name for r in before} == {"broker-a", "broker-b"}
        broker_b.proc.kill()
        started = time.monotonic()
        after = [await p.send(Message(topic, b"after-%d" % i)) for i in range(24)]
        elapsed = time.monotonic() - started
        assert all(r.status is SendStatus.SEND_OK for r in after)
        assert {r.message_queue.broker_name for r in after} == {"broker-a"}
        assert elapsed < 10, f"failover took {elapsed:.1f} s for 24 sends"
        if fault_enable:
            # Later sends do not even try broker-b: it is isolated after its first failure, or, when
            # the producer refreshed the route after the name server had dropped the dead broker
            # (its channel closed), no queue of it is left to pick, and it never failed at all.
            info = p.topic_publish_info_table[topic]
            if any(q.broker_name == "broker-b" for q in info.message_queue_list):
                assert not p.fault_strategy.tolerance.is_available("broker-b")
        async_results = [p.send_async(Message(topic, b"async-%d" % i)) for i in range(24)]
        for fut in async_results:
            assert (await fut).message_queue.broker_name == "broker-a"
        # a fixed queue is never retried elsewhere: the transport error comes through
        b_queue = next(r.message_queue for r in before if r.message_queue.broker_name == "broker-b")
        with pytest.raises(RemotingError):
            await p.send(Message(topic, b"x"), queue=b_queue)


async def test_unknown_topic_without_auto_create(tmp_path: Path) -> None:
    ns = start_namesrv_server(tmp_path)
    try:
        broker = start_broker_server(
            tmp_path, "broker-a", ns.addr, *SMALL_STORE, "--set", "autoCreateTopicEnable=false"
        )
        try:
            async with Producer(unique_name("PG"), namesrv_addr=ns.addr) as p:
                with pytest.raises(TopicRouteNotFound):
                    await p.send(Message(unique_name("NoSuchTopic"), b"x"))
                fut = p.send_async(Message(unique_name("NoSuchTopic"), b"x"))
                with pytest.raises(TopicRouteNotFound):
                    await fut
        finally:
            broker.proc.stop()
    finally:
        ns.proc.stop()
