"""The blocking API (`from rocketq import ...`) end to end against a real `rocketq up`: the issue's
example, an orderly sync listener, an async listener under the sync facade, and lite pull."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from tests.harness import SMALL_STORE, Cluster, eventually, module_cluster, unique_name

import rocketq
from rocketq import ConsumeOrderlyStatus, ConsumeStatus, Message

pytestmark = [
    pytest.mark.timeout(60),
]



cluster = module_cluster("sync", *SMALL_STORE, also_as_4_9=True, slow_as_4_9=True)


def test_the_issue_example(cluster: Cluster) -> None:
    topic = unique_name("ST")
    p = rocketq.Producer(unique_name("pg"), namesrv_addr=cluster.namesrv)
    p.start()
    got: list[Any] = []
    threads: set[str] = set()
    c = rocketq.PushConsumer(
        unique_name("cg"), namesrv_addr=cluster.namesrv, consume_from_where="CONSUME_FROM_FIRST_OFFSET"
    )
    try:
        r = p.send(Message(topic, b"body", tags="A", keys="k1"))
        p.send(Message(topic, b"other", tags="C"))
        p.send(Message(topic, b"body-b", tags="B"))
        assert r.status.name == "SEND_OK" and r.queue_offset >= 0 and r.msg_id
        c.subscribe(topic, "A || B")

        def listener(msgs: list[Any], ctx: Any) -> ConsumeStatus:
            threads.add(threading.current_thread().name)
            got.extend(msgs)
            return ConsumeStatus.CONSUME_SUCCESS

        c.register_listener(listener)
        c.start()
        eventually(lambda: len(got) >= 2)
        time.sleep(0.3)
        assert sorted(m.body for m in got) == [b"body", b"body-b"]  # tag C filtered out
        msg = next(m for m in got if m.body == b"body")
        assert msg.uniq_key == r.msg_id and msg.tags == "A" and msg.keys == "k1" and msg.topic == topic
        assert all(name.startswith("ConsumeMessageThread_") for name in threads)
    finally:
        c.shutdown()
        p.shutdown()


def test_orderly_sync_and_async_listener_under_the_sync_facade(cluster: Cluster) -> None:
    topic = unique_name("ST")
    p = rocketq.Producer(unique_name("pg"), namesrv_addr=cluster.namesrv)
    p.start()
    ordered: list[int] = []
    seen_async: list[bytes] = []

    def orderly(msgs: list[Any], ctx: Any) -> ConsumeOrderlyStatus:
        ordered.extend(int(m.body) for m in msgs)
        return ConsumeOrderlyStatus.SUCCESS

    async def concurrently(msgs: list[Any], ctx: Any) -> ConsumeStatus:
        seen_async.extend(m.body for m in msgs)
        return ConsumeStatus.CONSUME_SUCCESS

    a = rocketq.PushConsumer(
        unique_name("cg"),
        namesrv_addr=cluster.namesrv,
        instance_name=unique_name("a"),
        consume_from_where="CONSUME_FROM_FIRST_OFFSET",
    )
    b = rocketq.PushConsumer(
        unique_name("cg"),
        namesrv_addr=cluster.namesrv,
        instance_name=unique_name("b"),
        consume_from_where="CONSUME_FROM_FIRST_OFFSET",
    )
    try:
        first = p.send(Message(topic, b"0"))  # auto-creates the topic
        mq = first.message_queue
        for i in range(1, 30):
            p.send(Message(topic, str(i).encode()), queue=mq)
        a.subscribe(topic, "*")
        a.register_listener(orderly, orderly=True)
        b.subscribe(topic, "*")
        b.register_listener(concurrently)
        with a, b:
            eventually(lambda: len(ordered) >= 30 and len(seen_async) >= 30)
        assert ordered == list(range(30))
        assert sorted(seen_async, key=int) == [str(i).encode() for i in range(30)]
    finally:
        p.shutdown()


def test_lite_pull_sync(cluster: Cluster) -> None:
    topic = unique_name("ST")
    p = rocketq.Producer(unique_name("pg"), namesrv_addr=cluster.namesrv)
    p.start()
    try:
        mq = p.send(Message(topic, b"m0")).message_queue
        for i in range(1, 10):
            p.send(Message(topic, f"m{i}".encode()), queue=mq)
        with rocketq.LitePullConsumer(
            unique_name("lg"),
            namesrv_addr=cluster.namesrv,
            auto_commit=False,
            consume_from_where="CONSUME_FROM_FIRST_OFFSET",
        ) as c:
            c.assign([mq])
            got: list[Any] = []
            deadline = time.monotonic() + 10
            while len(got) < 10 and time.monotonic() < deadline:
                got += c.poll(timeout=0.2)
            assert [m.body for m in got] == [f"m{i}".encode() for i in range(10)]
            c.seek(mq, 8)
            assert [m.body for m in c.poll(timeout=5)] == [b"m8", b"m9"]
            c.commit_sync()
            assert c.committed(mq) == 10
            assert c.assignment() == {mq}
    finally:
        p.shutdown()
