"""LitePullConsumer against a real `rocketq up`: assign / poll / seek / commit, and subscribe mode
(the group shares the queues) with auto-commit across a restart."""

from __future__ import annotations

import asyncio
import collections
from typing import Any

import pytest
from tests.harness import SMALL_STORE, Cluster, module_cluster, unique_name, wait_until
from tests.wire import create_topic, get_route

from rocketq.aio import LitePullConsumer
from rocketq.client.message import Message
from rocketq.client.producer import Producer
from rocketq.codec.bodies import MessageQueue
from rocketq.errors import InvalidArgument, MQClientError, PullFailed, ServiceStateError
from rocketq.remoting import RemotingClient

pytestmark = [
    pytest.mark.timeout(60),
]



cluster = module_cluster("lite", *SMALL_STORE, also_as_4_9=True)


async def make_topic(cluster: Cluster, queues: int) -> str:
    topic = unique_name("LT")
    async with RemotingClient() as rc:
        assert (await create_topic(rc, cluster.broker, topic, read=queues, write=queues)).code == 0
        await wait_until(lambda: get_route(rc, cluster.namesrv, topic), timeout=10)
    return topic


async def fill(
    cluster: Cluster, topic: str, per_queue: int, queue_ids: list[int] | None = None
) -> list[MessageQueue]:
    producer = Producer(unique_name("PG"), namesrv_addr=cluster.namesrv)
    await producer.start()
    try:
        mqs = await producer.fetch_publish_message_queues(topic)
        targets = [mq for mq in mqs if queue_ids is None or mq.queue_id in queue_ids]
        for i in range(per_queue):
            await asyncio.gather(
                *(producer.send(Message(topic, f"{mq.queue_id}:{i}".encode()), queue=mq) for mq in targets)
            )
    finally:
        await producer.shutdown()
    return sorted(mqs)


async def poll_until(consumer: LitePullConsumer, n: int, timeout: float = 10.0) -> list[Any]:
    got: list[Any] = []
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while len(got) < n and loop.time() < deadline:
        got += await consumer.poll(timeout=0.2)
    return got


async def test_assign_poll_seek_commit(cluster: Cluster) -> None:
    topic, group = await make_topic(cluster, 2), unique_name("LG")
    mqs = await fill(cluster, topic, 20, [0])
    mq0 = mqs[0]
    consumer = LitePullConsumer(
        group,
        namesrv_addr=cluster.namesrv,
        auto_commit=False,
        pull_batch_size=8,
        consume_from_where="CONSUME_FROM_FIRST_OFFSET",
        instance_name=unique_name("i"),
    )
    with pytest.raises(ServiceStateError):
        await consumer.poll(0.01)
    consumer.assign([mq0])
    with pytest.raises(InvalidArgument):
        consumer.subscribe(topic, "*")
    await consumer.start()
    try:
        assert consumer.assignment() == {mq0}
        msgs = await poll_until(consumer, 20)
        assert [m.queue_offset for m in msgs] == list(range(20))
        assert max(len(b) for b in [msgs[:8]]) <= 8
        assert await consumer.poll(timeout=0.1) == []
        assert await consumer.committed(mq0) in (-1, 0)  # nothing committed yet (auto_commit off)
        await consumer.commit_sync()
        assert await consumer.committed(mq0) == 20

        await consumer.seek(mq0, 5)
        again = await poll_until(consumer, 15)
        assert [m.queue_offset for m in again] == list(range(5, 20))
        await consumer.seek_to_begin(mq0)
        assert (await poll_until(consumer, 1))[0].queue_offset == 0
        await consumer.seek_to_end(mq0)
        assert await consumer.poll(timeout=0.3) == []
        await fill(cluster, topic, 1, [0])
        late = await poll_until(consumer, 1)
        assert [m.body for m in late] == [b"0:0"] and late[0].queue_offset == 20
        with pytest.raises(InvalidArgument):
            await consumer.seek(mq0, 999)
        with pytest.raises(InvalidArgument):
            await consumer.seek(mqs[1], 0)  # not assigned
        assert await consumer.offset_for_timestamp(mq0, 0) == 0
        await consumer.commit_sync({mq0: 7})
        assert await consumer.committed(mq0) == 7
    finally:
        await consumer.shutdown()


async def test_a_queue_that_keeps_failing_surfaces_in_poll(cluster: Cluster) -> None:
    topic = await make_topic(cluster, 1)
    (good,) = await fill(cluster, topic, 3)
    bad = MessageQueue(topic, "NoSuchBroker", 0)  # every pull fails: no address for this broker
    consumer = LitePullConsumer(
        unique_name("LG"), namesrv_addr=cluster.namesrv, auto_commit=False,
        consume_from_where="CONSUME_FROM_FIRST_OFFSET", instance_name=unique_name("i"),
        pull_time_delay_mills_when_exception=100,
    )
    consumer.assign([good, bad])
    await consumer.start()
    try:
        got: list[Any] = []
        failure: PullFailed | None = None
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 20
        while failure is None and loop.time() < deadline:
            try:
                got += await consumer.poll(timeout=0.2)
            except PullFailed as e:
                failure = e
        assert failure is not None, "poll() never reported the failing queue"
        assert failure.message_queue == bad and failure.failures >= 3 and failure.retriable
        assert isinstance(failure.__cause__, MQClientError)  # no offset: the broker is unknown
        got += await poll_until(consumer, 3 - len(got))  # the healthy queue is still served
        assert sorted(m.queue_offset for m in got) == [0, 1, 2]
    finally:
        await consumer.shutdown()


async def test_committed_offset_survives_a_restart(cluster: Cluster) -> None:
    topic, group = await make_topic(cluster, 1), unique_name("LG")
    [mq] = await fill(cluster, topic, 12)
    first = LitePullConsumer(
        group,
        namesrv_addr=cluster.namesrv,
        auto_commit=False,
        pull_batch_size=4,
        consume_from_where="CONSUME_FROM_FIRST_OFFSET",
        instance_name=unique_name("i"),
    )
    first.assign([mq])
    await first.start()
    try:
        got = await first.poll(timeout=5)
        assert [m.queue_offset for m in got] == [0, 1, 2, 3]
        await first.commit([mq])
    finally:
        await first.shutdown()
    second = LitePullConsumer(
        group, namesrv_addr=cluster.namesrv, pull_batch_size=4, instance_name=unique_name("i")
    )
    second.assign([mq])
    await second.start()
    try:
        rest = await poll_until(second, 8)
        assert [m.queue_offset for m in rest] == list(range(4, 12))
    finally:
        await second.shutdown()


async def test_subscribe_shares_queues_and_auto_commits(cluster: Cluster) -> None:
    topic, group = await make_topic(cluster, 4), unique_name("LG")
    await fill(cluster, topic, 10)
    seen: collections.Counter[bytes] = collections.Counter()

    def member() -> LitePullConsumer:
        c = LitePullConsumer(
            group,
            namesrv_addr=cluster.namesrv,
            auto_commit_interval_millis=200,
            consume_from_where="CONSUME_FROM_FIRST_OFFSET",
            instance_name=unique_name("i"),
        )
        c.subscribe(topic, "*")
        return c

    a, b = member(), member()
    with pytest.raises(InvalidArgument):
        a.assign([MessageQueue(topic, "x", 0)])
    await a.start()
    await b.start()
    try:
        await wait_until(lambda: len(a.assignment()) == 2 and len(b.assignment()) == 2, timeout=10)
        assert not a.assignment() & b.assignment()
        while sum(seen.values()) < 40:
            for c in (a, b):
                for m in await c.poll(timeout=0.1):
                    seen[m.body] += 1
        await asyncio.sleep(0.3)
        for c in (a, b):
            await c.poll(timeout=0.01)  # lets auto-commit run
    finally:
        await a.shutdown()
        await b.shutdown()
    assert len(seen) == 40 and set(seen.values()) == {1}
    # Everything was committed: a new member finds nothing old.
    c = member()
    await c.start()
    try:
        await fill(cluster, topic, 1, [0])
        fresh = await poll_until(c, 1, timeout=10)
        assert [m.body for m in fresh] == [b"0:0"]
        assert await c.poll(timeout=0.3) == []
    finally:
        await c.shutdown()
