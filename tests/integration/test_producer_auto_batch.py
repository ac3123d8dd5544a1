"""Automatic batching against a real ``rocketq up`` (as it is and in its 4.9 mode, as Apache's
broker answers): every caller of many concurrent ``send_async`` gets its own id, queue and offset,
and the messages read back are exactly those; selector sends keep their order."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from tests.harness import Cluster, module_cluster, small_store, unique_name, wait_until
from tests.integration.test_producer import pull_all

from rocketq.admin import AdminClient
from rocketq.aio import Producer
from rocketq.client.message import Message, MessageQueue, SendResult, SendStatus
from rocketq.client.producer import SelectMessageQueueByHash
from rocketq.client.producer.accumulator import Accumulator, Lane
from rocketq.client.producer.kernel import SendEncoder

pytestmark = [pytest.mark.timeout(120)]

cluster = module_cluster("autobatch", *small_store(commit_log=4 * 1024 * 1024, slots=8000, index=32000),
                         also_as_4_9=True)


@pytest.fixture
def batch_sizes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The size of every batch the producers' auto-batching builds (while the test runs)."""
    sizes: list[int] = []
    original = SendEncoder.batch_of

    def batch_of(self: SendEncoder, topic: str, wait: bool, items: list[bytes], ids: list[str]) -> Any:
        sizes.append(len(items))
        return original(self, topic, wait, items, ids)

    monkeypatch.setattr(SendEncoder, "batch_of", batch_of)
    return sizes


async def routed(p: Producer, topic: str, batch_sizes: list[int]) -> list[int]:
    """One plain send (the topic's route), then the batch sizes recorded from here on."""
    await p.send(Message(topic, b"first"))
    batch_sizes.clear()
    return batch_sizes


async def read_back(p: Producer, results: list[SendResult]) -> dict[tuple[MessageQueue, int], Any]:
    """Every message of the results' queues up to the highest offset among them. (Counting the
    results per queue instead could stop one short where the route's first message shares one.)"""
    ends: dict[MessageQueue, int] = {}
    for r in results:
        ends[r.message_queue] = max(ends.get(r.message_queue, 0), r.queue_offset + 1)
    stored = {}
    for mq, end in ends.items():
        addr = p.instance.find_broker_address_in_publish(mq.broker_name)
        assert addr is not None
        for m in await pull_all(p.instance.api, addr, mq, expect=end, timeout=30):
            stored[(mq, m.queue_offset)] = m
    return stored


async def test_concurrent_send_async_each_get_their_own_result(
        cluster: Cluster, batch_sizes: list[int]) -> None:
    topic = unique_name("AB")
    async with Producer(unique_name("PG"), namesrv_addr=cluster.namesrv) as p:
        sizes = await routed(p, topic, batch_sizes)
        n = 3000
        futs = [p.send_async(Message(topic, b"body-%d" % i, tags="T", keys=f"k{i}")) for i in range(n)]
        results = await asyncio.wait_for(asyncio.gather(*futs), 60)
        assert sizes and max(sizes) > 1, "nothing was batched"
        assert all(r.status is SendStatus.SEND_OK for r in results)
        assert len({r.msg_id for r in results}) == n
        assert len({r.offset_msg_id for r in results}) == n
        assert len({(r.message_queue, r.queue_offset) for r in results}) == n
        stored = await read_back(p, results)
        for i, r in enumerate(results):
            m = stored[(r.message_queue, r.queue_offset)]
            assert m.body == b"body-%d" % i and m.keys == f"k{i}" and m.tags == "T"
            assert m.msg_id == r.msg_id and m.offset_msg_id == r.offset_msg_id


async def test_selector_sends_keep_their_order(cluster: Cluster, batch_sizes: list[int]) -> None:
    topic = unique_name("ABO")
    async with Producer(unique_name("PG"), namesrv_addr=cluster.namesrv) as p:
        sizes = await routed(p, topic, batch_sizes)
        n = 2000
        selector = SelectMessageQueueByHash()
        futs = [p.send_async(Message(topic, b"%d" % i), selector=selector, arg=i % 2) for i in range(n)]
        results = await asyncio.wait_for(asyncio.gather(*futs), 60)
        assert sizes and max(sizes) > 1, "nothing was batched"
        for parity in (0, 1):
            mine = results[parity::2]
            assert len({r.message_queue for r in mine}) == 1
            offsets = [r.queue_offset for r in mine]
            assert offsets == sorted(offsets) and len(set(offsets)) == len(offsets)
        stored = await read_back(p, results)
        for parity in (0, 1):
            mq = results[parity].message_queue
            bodies = [stored[k].body for k in sorted(k for k in stored if k[0] == mq)]
            assert [b for b in bodies if b != b"first"] == [b"%d" % i for i in range(parity, n, 2)]


async def test_sync_send_batches_only_when_asked(cluster: Cluster, batch_sizes: list[int]) -> None:
    topic = unique_name("ABS")
    async with Producer(unique_name("PG"), namesrv_addr=cluster.namesrv) as p:
        sizes = await routed(p, topic, batch_sizes)
        await asyncio.gather(*(p.send(Message(topic, b"%d" % i)) for i in range(300)))
        assert sizes == []
    async with Producer(unique_name("PG"), namesrv_addr=cluster.namesrv, auto_batch_sync=True) as p:
        sizes = await routed(p, topic, batch_sizes)
        results = await asyncio.gather(*(p.send(Message(topic, b"%d" % i)) for i in range(300)))
        assert sizes and len({(r.message_queue, r.queue_offset) for r in results}) == 300


async def test_an_idle_producer_sends_at_once(cluster: Cluster, batch_sizes: list[int]) -> None:
    # Held for batch_max_delay_ms (30 s), 20 sends one after another would take ten minutes: the
    # wait_for bound fails them long before. Nothing is gathered, so no batch is built.
    topic = unique_name("ABI")
    async with Producer(unique_name("PG"), namesrv_addr=cluster.namesrv, batch_max_delay_ms=30_000) as p:
        await routed(p, topic, batch_sizes)
        for i in range(20):
            r = await asyncio.wait_for(p.send_async(Message(topic, b"%d" % i)), 20)
            assert r.status is SendStatus.SEND_OK
        assert batch_sizes == []


async def test_batches_of_a_namespaced_producer(cluster: Cluster, batch_sizes: list[int]) -> None:
    topic = unique_name("ABN")
    async with Producer(unique_name("PG"), namesrv_addr=cluster.namesrv, namespace="nsab") as p:
        sizes = await routed(p, topic, batch_sizes)
        results = await asyncio.gather(*(p.send_async(Message(topic, b"n%d" % i)) for i in range(500)))
        assert sizes and max(sizes) > 1, "nothing was batched"
        assert {r.message_queue.topic for r in results} == {topic}  # the user's name, as unbatched
        wire = {r.message_queue: MessageQueue(f"nsab%{topic}", r.message_queue.broker_name,
                                              r.message_queue.queue_id) for r in results}
        stored = await read_back(p, [SendResult(r.status, r.msg_id, wire[r.message_queue], r.queue_offset,
                                                r.offset_msg_id) for r in results])
        for i, r in enumerate(results):
            assert stored[(wire[r.message_queue], r.queue_offset)].body == b"n%d" % i


async def test_every_batched_message_is_traced_with_its_own_result(
        cluster: Cluster, batch_sizes: list[int]) -> None:
    topic = unique_name("ABT")
    async with Producer(unique_name("PG"), namesrv_addr=cluster.namesrv, enable_trace=True) as p:
        sizes = await routed(p, topic, batch_sizes)
        futs = [p.send_async(Message(topic, b"t%d" % i, tags="T")) for i in range(300)]
        results = await asyncio.gather(*futs)
        assert sizes and max(sizes) > 1, "nothing was batched"
    async with AdminClient(cluster.namesrv) as admin:
        for r in (results[1], results[150], results[-1]):  # gathered ones, not the first alone
            async def pub(r: SendResult = r) -> Any:
                views = await admin.query_msg_trace_by_id(r.msg_id)
                return next((v for v in views if v.msg_type == "Pub"), None)

            view = await wait_until(pub, timeout=60, interval=0.3)
            assert (view.topic, view.tags, view.offset_msg_id) == (topic, "T", r.offset_msg_id)


async def test_a_sliding_window_pipelines_batches_and_every_caller_gets_its_own_result(
        cluster: Cluster, batch_sizes: list[int], monkeypatch: pytest.MonkeyPatch) -> None:
    # As the benchmark drives it: each answer starts the next send, so one queue's lane has
    # several batches in flight at once; the results and the stored messages still match one to one.
    most_in_flight = [0]
    original = Accumulator.ready

    def ready(self: Accumulator[Any], lane: Lane[Any]) -> list[list[Any]]:
        out = original(self, lane)
        most_in_flight[0] = max(most_in_flight[0], lane.inflight)
        return out

    monkeypatch.setattr(Accumulator, "ready", ready)
    topic = unique_name("ABP")
    n, window = 4000, 400
    async with Producer(unique_name("PG"), namesrv_addr=cluster.namesrv) as p:
        sizes = await routed(p, topic, batch_sizes)
        results: dict[int, SendResult] = {}
        futs: list[asyncio.Future[SendResult]] = []
        done = asyncio.Event()

        def start(i: int) -> None:
            fut = p.send_async(Message(topic, b"w-%d" % i))
            futs.append(fut)
            fut.add_done_callback(lambda f, i=i: finished(i, f))

        def finished(i: int, fut: asyncio.Future[SendResult]) -> None:
            if fut.exception() is None:
                results[i] = fut.result()
            if len(futs) < n:
                start(len(futs))
            elif all(f.done() for f in futs):
                done.set()

        for i in range(window):
            start(i)
        async with asyncio.timeout(90):
            await done.wait()
        assert [f.exception() for f in futs if f.exception() is not None] == []
        assert sizes and max(sizes) > 1, "nothing was batched"
        assert most_in_flight[0] > 1, "never more than one request in flight to a queue"
        assert len({r.msg_id for r in results.values()}) == n
        assert len({(r.message_queue, r.queue_offset) for r in results.values()}) == n
        stored = await read_back(p, list(results.values()))
        for i, r in results.items():
            m = stored[(r.message_queue, r.queue_offset)]
            assert m.body == b"w-%d" % i and m.msg_id == r.msg_id
