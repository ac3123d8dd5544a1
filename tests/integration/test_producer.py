"""The producer against a real ``rocketq up`` process: what it sends is what the broker stores.

Every message is read back with the client's own pull path (``PullAPIWrapper``), so these
tests cover send, route lookup (incl. the TBW102 auto-create fallback), pull decoding, tags,
keys, UNIQ_KEY ids, ordering by selector, batches, compression, one-way, delay levels, the sync
facade, and the errors raised before anything is sent.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time

import pytest
from tests.harness import Cluster, module_cluster, small_store, unique_name

import rocketq
from rocketq.aio import Producer
from rocketq.client.api import PULL_SYS_FLAG_SUBSCRIPTION, MQClientAPI
from rocketq.client.consumer.pull_api import PullAPIWrapper, one_off_subscription
from rocketq.client.message import Message, MessageExt, MessageQueue, PullStatus, SendStatus
from rocketq.client.producer import SelectMessageQueueByHash
from rocketq.codec.message import MessageSysFlag
from rocketq.errors import (
    GroupAlreadyRegistered,
    InvalidArgument,
    InvalidMessage,
    ServiceStateError,
)

pytestmark = [pytest.mark.timeout(60)]

SMALL_STORE = small_store(commit_log=1024 * 1024, slots=4000, index=16000)


cluster = module_cluster("producer", *SMALL_STORE, also_as_4_9=True)


async def pull_all(api: MQClientAPI, addr: str, mq: MessageQueue, *, expect: int, tags: str = "*",
                   timeout: float = 5.0) -> list[MessageExt]:
    """Pull ``mq`` from offset 0 until ``expect`` messages arrived (or fail after ``timeout``)."""
    out: list[MessageExt] = []
    offset = 0
    deadline = time.monotonic() + timeout
    pull_api = PullAPIWrapper(api, "CID_PRODUCER_TEST")
    sub = one_off_subscription(mq.topic, tags)
    while len(out) < expect:
        result = await pull_api.pull(mq, sub, offset, 64, PULL_SYS_FLAG_SUBSCRIPTION, 5.0, addr=addr)
        out.extend(result.messages)
        offset = result.next_begin_offset
        if result.status is not PullStatus.FOUND:
            assert time.monotonic() < deadline, f"only {len(out)} of {expect} messages in {mq}"
            await asyncio.sleep(0.05)
    return out


async def test_send_round_trip_tags_keys_and_ids(cluster: Cluster) -> None:
    topic = unique_name("PT")
    async with Producer(unique_name("PG"), namesrv_addr=cluster.namesrv) as p:
        r = await p.send(Message(topic, b"hello", tags="A", keys=["k1", "k2"], properties={"color": "red"}))
        assert r.status is SendStatus.SEND_OK
        assert r.message_queue.topic == topic and r.message_queue.broker_name
        assert len(r.msg_id) == 32 and r.offset_msg_id and r.offset_msg_id != r.msg_id
        assert r.transaction_id == r.msg_id  # the broker echoes the UNIQ_KEY
        addr = p.instance.find_broker_address_in_publish(r.message_queue.broker_name)
        assert addr is not None
        [msg] = await pull_all(p.instance.api, addr, r.message_queue, expect=1)
        assert msg.body == b"hello"
        assert msg.tags == "A" and msg.keys == "k1 k2" and msg.properties["color"] == "red"
        assert msg.uniq_key == msg.msg_id == r.msg_id and msg.offset_msg_id == r.offset_msg_id
        assert msg.queue_offset == r.queue_offset == 0
        assert msg.properties["MIN_OFFSET"] == "0" and msg.properties["MAX_OFFSET"] == "1"
        # the client-side tag filter drops what the subscription does not name
        assert await pull_all(p.instance.api, addr, r.message_queue, expect=0, tags="B") == []


async def test_sends_rotate_over_queues_and_keep_offsets(cluster: Cluster) -> None:
    topic = unique_name("PT")
    async with Producer(unique_name("PG"), namesrv_addr=cluster.namesrv) as p:
        results = [await p.send(Message(topic, b"%d" % i)) for i in range(12)]
        queues = {r.message_queue for r in results}
        assert len(queues) == 4  # the TBW102 fallback gives min(4, 8) queues per broker
        per_queue: dict[MessageQueue, list[int]] = {}
        for r in results:
            per_queue.setdefault(r.message_queue, []).append(r.queue_offset)
        assert all(offsets == list(range(len(offsets))) for offsets in per_queue.values())
        queues_now = await p.fetch_publish_message_queues(topic)
        assert set(queues_now) == queues


async def test_ordered_sends_land_in_the_selected_queue(cluster: Cluster) -> None:
    topic = unique_name("PT")
    async with Producer(unique_name("PG"), namesrv_addr=cluster.namesrv) as p:
        await p.send(Message(topic, b"warm-up"))
        mqs = await p.fetch_publish_message_queues(topic)
        selector = SelectMessageQueueByHash()
        expected: dict[MessageQueue, list[bytes]] = {}
        for i in range(40):
            order_id = f"order-{i % 5}"
            body = f"{order_id}:{i}".encode()
            r = await p.send(Message(topic, body), selector=selector, arg=order_id)
            want = selector.select(mqs, Message(topic, body), order_id)
            assert r.message_queue == want
            expected.setdefault(want, []).append(body)
        # a plain callable is a selector too, and queue= names the queue outright
        r = await p.send(Message(topic, b"q1"), selector=lambda mqs, msg, arg: mqs[arg], arg=1)
        assert r.message_queue == mqs[1]
        r = await p.send(Message(topic, b"q2"), queue=mqs[2])
        assert r.message_queue == mqs[2]
        api = p.instance.api
        for mq, bodies in expected.items():
            addr = p.instance.find_broker_address_in_publish(mq.broker_name)
            assert addr is not None
            stored = await api.get_max_offset(addr, mq)
            got = [m.body for m in await pull_all(api, addr, mq, expect=stored)]
            assert [b for b in got if b.startswith(b"order-")] == bodies  # per-queue order kept
        with pytest.raises(InvalidArgument):
            await p.send(Message(topic, b"x"), selector=lambda mqs, msg, arg: "not a queue")


async def test_async_callback_and_oneway(cluster: Cluster) -> None:
    topic = unique_name("PT")
    async with Producer(unique_name("PG"), namesrv_addr=cluster.namesrv) as p:
        seen: list[object] = []
        futs = [p.send_async(Message(topic, b"a%d" % i), callback=seen.append) for i in range(200)]
        results = await asyncio.gather(*futs)
        assert all(r.status is SendStatus.SEND_OK for r in results)
        assert len({r.msg_id for r in results}) == 200
        assert len(seen) == 200 and set(seen) == set(results)
        for i in range(20):
            await p.send_oneway(Message(topic, b"o%d" % i, tags="ONEWAY"))
        api = p.instance.api
        mqs = await p.fetch_publish_message_queues(topic)
        total = 0
        for mq in mqs:
            addr = p.instance.find_broker_address_in_publish(mq.broker_name)
            assert addr is not None
            max_offset = await api.get_max_offset(addr, mq)
            total += max_offset
        deadline = time.monotonic() + 5
        while total < 220 and time.monotonic() < deadline:  # one-way sends are not acknowledged
            await asyncio.sleep(0.05)
            total = 0
            for mq in mqs:
                addr = p.instance.find_broker_address_in_publish(mq.broker_name)
                total += await api.get_max_offset(addr, mq)  # type: ignore[arg-type]
        assert total == 220


async def test_batch_keeps_one_uniq_key_per_message(cluster: Cluster) -> None:
    topic = unique_name("PT")
    async with Producer(unique_name("PG"), namesrv_addr=cluster.namesrv) as p:
        msgs = [Message(topic, b"b%d" % i, tags=f"T{i % 2}", keys=f"key{i}") for i in range(50)]
        r = await p.send_batch(msgs)
        ids = r.msg_id.split(",")
        assert len(ids) == 50 and len(set(ids)) == 50
        assert len(r.offset_msg_id.split(",")) == 50  # type: ignore[union-attr]
        addr = p.instance.find_broker_address_in_publish(r.message_queue.broker_name)
        got = await pull_all(p.instance.api, addr, r.message_queue, expect=50)  # type: ignore[arg-type]
        assert [m.body for m in got] == [m.body for m in msgs]
        assert [m.uniq_key for m in got] == ids
        assert [m.queue_offset for m in got] == list(range(r.queue_offset, r.queue_offset + 50))
        assert [m.keys for m in got] == [f"key{i}" for i in range(50)]
        with pytest.raises(InvalidMessage):
            await p.send_batch([Message(topic, b"x"), Message(topic + "2", b"y")])
        with pytest.raises(InvalidMessage):
            await p.send_batch([Message(topic, b"x", delay_level=2)])
        with pytest.raises(InvalidMessage):
            await p.send_batch([])


async def test_compressed_body_round_trip(cluster: Cluster) -> None:
    topic = unique_name("PT")
    body = (b"0123456789abcdef" * 1024)[:10_000]  # over compress_msg_body_over_howmuch (4 KiB)
    async with Producer(unique_name("PG"), namesrv_addr=cluster.namesrv) as p:
        r = await p.send(Message(topic, body))
        addr = p.instance.find_broker_address_in_publish(r.message_queue.broker_name)
        [msg] = await pull_all(p.instance.api, addr, r.message_queue, expect=1)  # type: ignore[arg-type]
        assert msg.body == body
        assert msg.sys_flag & MessageSysFlag.COMPRESSED_FLAG
        assert msg.store_size < len(body) // 2  # it was stored compressed
        small = await p.send(Message(topic, b"y" * 4096))  # at the limit: not compressed
        [plain] = [m for m in await pull_all(p.instance.api, addr, small.message_queue, expect=1 + (  # type: ignore[arg-type]
            small.message_queue == r.message_queue)) if m.uniq_key == small.msg_id]
        assert not plain.sys_flag & MessageSysFlag.COMPRESSED_FLAG


async def test_delay_level_defers_delivery(cluster: Cluster) -> None:
    topic = unique_name("PT")
    async with Producer(unique_name("PG"), namesrv_addr=cluster.namesrv) as p:
        r = await p.send(Message(topic, b"later", delay_level=1))  # level 1 = 1 s
        sent = time.monotonic()
        addr = p.instance.find_broker_address_in_publish(r.message_queue.broker_name)
        assert addr is not None
        api = p.instance.api
        mqs = [MessageQueue(topic, r.message_queue.broker_name, q) for q in range(4)]
        # Not in the topic yet; once due, in the queue the producer picked (REAL_QID).
        assert sum([await api.get_max_offset(addr, mq) for mq in mqs]) == 0
        while sum([await api.get_max_offset(addr, mq) for mq in mqs]) == 0:
            assert time.monotonic() - sent < 10, "the delayed message never arrived"
            await asyncio.sleep(0.05)
        assert time.monotonic() - sent > 0.5
        [mq] = [mq for mq in mqs if await api.get_max_offset(addr, mq)]
        [msg] = await pull_all(api, addr, mq, expect=1)
        assert msg.body == b"later" and msg.uniq_key == r.msg_id


async def test_errors_are_raised_before_sending(cluster: Cluster) -> None:
    topic = unique_name("PT")
    async with Producer(unique_name("PG"), namesrv_addr=cluster.namesrv) as p:
        for bad in (
            Message(topic, b"x" * (4 * 1024 * 1024 + 1)),
            Message(topic, b""),
            Message("bad topic!", b"x"),
            Message("T" * 128, b"x"),
            Message("SCHEDULE_TOPIC_XXXX", b"x"),
        ):
            with pytest.raises(InvalidMessage):
                await p.send(bad)
            with pytest.raises(InvalidMessage):
                p.send_async(bad)  # raised at the call, not through the future
        # nothing reached the name server or a broker for the topic
        assert topic not in p.instance.topic_route_table
        r = await p.send(Message(topic, b"x" * (4 * 1024 * 1024)))  # exactly the limit is fine
        assert r.status is SendStatus.SEND_OK


async def test_lifecycle_errors(cluster: Cluster) -> None:
    group = unique_name("PG")
    p = Producer(group, namesrv_addr=cluster.namesrv)
    with pytest.raises(ServiceStateError):
        await p.send(Message("T", b"x"))  # not started
    await p.start()
    try:
        with pytest.raises(ServiceStateError):
            await p.start()
        twin = Producer(group, namesrv_addr=cluster.namesrv)
        with pytest.raises(GroupAlreadyRegistered):
            await twin.start()
        with pytest.raises(InvalidArgument):
            await Producer("DEFAULT_PRODUCER", namesrv_addr=cluster.namesrv).start()
        with pytest.raises(InvalidArgument):
            await Producer("bad group!", namesrv_addr=cluster.namesrv).start()
        other = Producer(unique_name("PG"), namesrv_addr=cluster.namesrv)
        await other.start()
        assert other.instance is p.instance  # one MQClientInstance per client id
        await other.shutdown()
        assert p.instance.service_state.name == "RUNNING"  # still used by p
    finally:
        await p.shutdown()
    assert p.instance.service_state.name == "SHUTDOWN_ALREADY"
    with pytest.raises(ServiceStateError):
        await p.send(Message("T", b"x"))
    await p.shutdown()  # idempotent


def test_sync_facade(cluster: Cluster) -> None:
    topic = unique_name("PT")
    with rocketq.Producer(unique_name("PG"), namesrv_addr=cluster.namesrv) as p:
        r = p.send(rocketq.Message(topic, b"sync", tags="A"))
        assert r.status is rocketq.SendStatus.SEND_OK
        got: list[object] = []
        called = threading.Event()

        def callback(result: object) -> None:
            got.append(result)
            try:  # a blocking call on the client's own loop thread would deadlock: refused
                p.send(rocketq.Message(topic, b"nested"))
            except RuntimeError as e:
                got.append(e)
            called.set()

        fut = p.send_async(rocketq.Message(topic, b"async"), callback)
        assert isinstance(fut, concurrent.futures.Future)
        result = fut.result(5)
        assert called.wait(5)
        assert got[0] == result and isinstance(got[1], RuntimeError)
        p.send_oneway(rocketq.Message(topic, b"oneway"))
        batch = p.send_batch([rocketq.Message(topic, b"b1"), rocketq.Message(topic, b"b2")])
        assert len(batch.msg_id.split(",")) == 2
        with pytest.raises(InvalidMessage):
            p.send(rocketq.Message(topic, b""))
        with pytest.raises(InvalidMessage):
            p.send_async(rocketq.Message(topic, b""))
        assert len(p.fetch_publish_message_queues(topic)) == 4
