"""The `rocketq_cluster` pytest fixture (rocketq.testing, loaded through the pytest11 entry point):
a real name server + broker in the test process, usable from sync and async tests, and
`start_cluster` for other scopes."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import rocketq
from rocketq import ConsumeStatus, Message
from rocketq.aio import Producer as AsyncProducer
from rocketq.testing import RocketQCluster, start_cluster

pytestmark = pytest.mark.timeout(60)


def test_fixture_gives_a_working_cluster(rocketq_cluster: RocketQCluster, tmp_path: Path) -> None:
    c = rocketq_cluster
    assert c.namesrv_addr.startswith("127.0.0.1:") and c.broker_addr.startswith("127.0.0.1:")
    assert c.data_dir.is_relative_to(tmp_path) and (c.data_dir / "store" / "commitlog").is_dir()
    c.create_topic("Orders", queues=3)
    route = c.wait_for_route("Orders")
    assert [(q.write_queue_nums, q.perm) for q in route.queue_datas] == [(3, 6)]

    got: list[Any] = []
    consumer = rocketq.PushConsumer(
        "fixture-cg", namesrv_addr=c.namesrv_addr, consume_from_where="CONSUME_FROM_FIRST_OFFSET"
    )
    with rocketq.Producer("fixture-pg", namesrv_addr=c.namesrv_addr) as producer:
        results = [producer.send(Message("Orders", b"order-%d" % i, keys=f"k{i}")) for i in range(5)]
        assert {r.status.name for r in results} == {"SEND_OK"}
        consumer.subscribe("Orders", "*")

        def listener(msgs: list[Any], ctx: Any) -> ConsumeStatus:
            got.extend(msgs)
            return ConsumeStatus.CONSUME_SUCCESS

        consumer.register_listener(listener)
        consumer.start()
        try:
            deadline = time.monotonic() + 15
            while len(got) < 5 and time.monotonic() < deadline:
                time.sleep(0.02)
        finally:
            consumer.shutdown()
    assert sorted(m.body for m in got) == [b"order-%d" % i for i in range(5)]

    admin = c.admin()
    assert admin is c.admin()  # one client per cluster, closed with it
    stats = admin.examine_topic_stats("Orders")
    assert sum(o.max_offset for o in stats.offset_table.values()) == 5
    assert [m.body for m in admin.query_message("Orders", "k3")] == [b"order-3"]
    queues = admin.fetch_subscribe_queues("Orders")
    read = [m.body for mq in queues for m in admin.read_queue(mq, 0, 10)]  # async iterator -> list
    assert sorted(read) == sorted(m.body for m in got)


def test_run_executes_on_the_servers_loop(rocketq_cluster: RocketQCluster) -> None:
    async def inside() -> tuple[str, int]:
        broker = rocketq_cluster.broker
        return threading.current_thread().name, len(broker.topic_manager.table)

    thread, topics = rocketq_cluster.run(inside())
    assert thread == "rocketq-test-cluster" and topics > 0


async def test_async_tests_can_use_it(rocketq_cluster: RocketQCluster) -> None:
    rocketq_cluster.create_topic("AsyncT", queues=2)
    async with AsyncProducer(
        "fixture-apg", namesrv_addr=rocketq_cluster.namesrv_addr, instance_name="async-test"
    ) as producer:
        result = await producer.send(Message("AsyncT", b"from an async test"))
    assert result.status.name == "SEND_OK" and result.message_queue.topic == "AsyncT"


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RocketQCluster]:
    with start_cluster(
        tmp_path_factory.mktemp("shared"),
        broker_name="broker-s",
        cluster_name="Shared",
        broker_config={"auto_create_topic_enable": False},
    ) as cluster:
        yield cluster


def test_start_cluster_for_other_scopes_and_options(shared: RocketQCluster) -> None:
    assert (shared.broker_name, shared.cluster_name) == ("broker-s", "Shared")
    info = shared.admin().examine_broker_cluster_info()
    assert info.cluster_addr_table == {"Shared": ("broker-s",)}
    # auto-create is off on this broker: an unknown topic has no route
    with (
        rocketq.Producer("fixture-pg2", namesrv_addr=shared.namesrv_addr) as producer,
        pytest.raises(rocketq.MQClientError),
    ):
        producer.send(Message("NeverCreated", b"x"))


def test_stop_shuts_everything_down(tmp_path: Path) -> None:
    before = {t.name for t in threading.enumerate()}
    with start_cluster(tmp_path) as cluster:
        addr = cluster.broker_addr
    assert not cluster.broker.is_ready and not cluster._loop.thread.is_alive()
    assert "rocketq-test-cluster" not in {t.name for t in threading.enumerate()} - before
    with socket.socket() as s:  # the broker's port is free again
        s.settimeout(1.0)
        assert s.connect_ex(("127.0.0.1", int(addr.rsplit(":", 1)[1]))) != 0
