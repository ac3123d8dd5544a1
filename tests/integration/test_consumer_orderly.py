"""Orderly push consumers against a real `rocketq up`: per-queue order, also while queues move
between members (broker locks, the hand-over waits for the batch in the listener)."""

from __future__ import annotations

import asyncio
import collections
import threading
import time
from typing import Any

import pytest
from tests.harness import SMALL_STORE, Cluster, module_cluster, unique_name, wait_until
from tests.wire import create_routed_topic

from rocketq.aio import PushConsumer
from rocketq.client.consumer import ConsumeOrderlyContext, ConsumeOrderlyStatus
from rocketq.client.message import Message
from rocketq.client.producer import Producer

pytestmark = [
    pytest.mark.timeout(60),
]

QUEUES = 8


cluster = module_cluster("orderly", *SMALL_STORE, also_as_4_9=True)


async def make_topic(cluster: Cluster) -> str:
    topic = unique_name("OT")
    await create_routed_topic(cluster.namesrv, cluster.broker, topic, QUEUES, order=True)
    return topic


class OrderedLog:
    """Everything every member consumed, in real-time order (one process, one lock)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.entries: list[tuple[str, int, int]] = []  # (member, queue id, sequence)
        self.active: dict[int, int] = collections.Counter()
        self.overlap = False

    def listener(self, member: str, pause: float = 0.0) -> Any:
        def consume(msgs: list[Any], ctx: ConsumeOrderlyContext) -> ConsumeOrderlyStatus:
            qid = ctx.message_queue.queue_id
            with self.lock:
                self.active[qid] += 1
                self.overlap |= self.active[qid] > 1
            if pause:
                time.sleep(pause)
            with self.lock:
                self.entries.extend((member, m.queue_id, int(m.body)) for m in msgs)
                self.active[qid] -= 1
            return ConsumeOrderlyStatus.SUCCESS

        return consume


def orderly_consumer(cluster: Cluster, group: str, topic: str, name: str, listener: Any) -> PushConsumer:
    consumer = PushConsumer(
        group,
        namesrv_addr=cluster.namesrv,
        instance_name=name,
        consume_from_where="CONSUME_FROM_FIRST_OFFSET",
        consume_thread_min=4,
        consume_thread_max=4,
    )
    consumer.subscribe(topic, "*")
    consumer.register_listener(listener, orderly=True)
    return consumer


async def send_sequences(producer: Producer, topic: str, start: int, count: int) -> None:
    queues = await producer.fetch_publish_message_queues(topic)
    for seq in range(start, start + count):
        await asyncio.gather(*(producer.send(Message(topic, str(seq).encode()), queue=mq) for mq in queues))


async def test_per_queue_order_through_rebalances(cluster: Cluster) -> None:
    topic, group = await make_topic(cluster), unique_name("OG")
    log = OrderedLog()
    producer = Producer(unique_name("PG"), namesrv_addr=cluster.namesrv)
    await producer.start()
    a = orderly_consumer(cluster, group, topic, "oa", log.listener("a", pause=0.001))
    b = orderly_consumer(cluster, group, topic, "ob", log.listener("b", pause=0.001))
    c = orderly_consumer(cluster, group, topic, "oc", log.listener("c", pause=0.001))
    try:
        await a.start()
        await send_sequences(producer, topic, 0, 30)
        await wait_until(lambda: len(log.entries) >= 40, timeout=10)
        await b.start()  # queues move from a to b while a is mid-stream
        await send_sequences(producer, topic, 30, 30)
        await c.start()
        await send_sequences(producer, topic, 60, 20)
        await a.shutdown()  # and a's queues move again
        await send_sequences(producer, topic, 80, 20)
        await wait_until(lambda: len({(q, s) for _, q, s in log.entries}) >= QUEUES * 100, timeout=30)
        await asyncio.sleep(0.3)
    finally:
        for consumer in (a, b, c):
            await consumer.shutdown()
        await producer.shutdown()
    per_queue: dict[int, list[int]] = collections.defaultdict(list)
    for _, qid, seq in log.entries:
        per_queue[qid].append(seq)
    assert sorted(per_queue) == list(range(QUEUES))
    for qid, seqs in per_queue.items():
        assert seqs == list(range(100)), f"queue {qid} consumed out of order or twice: {seqs}"
    assert not log.overlap, "two batches of one queue were in listeners at once"
    members = {(member, qid) for member, qid, _ in log.entries}
    assert len({m for m, _ in members}) == 3  # every member really took part


async def test_suspend_retries_the_same_batch_in_place(cluster: Cluster) -> None:
    topic, group = await make_topic(cluster), unique_name("OG")
    attempts: collections.Counter[int] = collections.Counter()
    seen: list[tuple[int, int]] = []

    async def listener(msgs: list[Any], ctx: ConsumeOrderlyContext) -> ConsumeOrderlyStatus:
        seq = int(msgs[0].body)
        attempts[seq] += 1
        if seq == 3 and attempts[seq] < 3:
            ctx.suspend_current_queue_time_millis = 50
            return ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT
        seen.append((msgs[0].queue_id, seq))
        return ConsumeOrderlyStatus.SUCCESS

    producer = Producer(unique_name("PG"), namesrv_addr=cluster.namesrv)
    await producer.start()
    consumer = orderly_consumer(cluster, group, topic, "os", listener)
    try:
        mq = (await producer.fetch_publish_message_queues(topic))[0]
        for seq in range(6):
            await producer.send(Message(topic, str(seq).encode()), queue=mq)
        await consumer.start()
        await wait_until(lambda: len(seen) >= 6, timeout=10)
    finally:
        await consumer.shutdown()
        await producer.shutdown()
    assert [s for _, s in seen] == [0, 1, 2, 3, 4, 5]
    assert attempts[3] == 3 and attempts[4] == 1
