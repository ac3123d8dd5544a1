"""The consume services on top of ProcessQueue, without a broker: a stand-in consumer records what
they commit and send back, so ack indexes, send-back failures, hooks, timeouts and orderly
suspend/commit rules can be checked exactly."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest

from rocketq.client.consumer.consume_concurrently import ConsumeMessageConcurrentlyService, is_async_listener
from rocketq.client.consumer.consume_orderly import ConsumeMessageOrderlyService
from rocketq.client.consumer.process_queue import ProcessQueue
from rocketq.client.consumer.stats import ConsumerStatsManager
from rocketq.client.consumer.types import (
    ConsumeConcurrentlyContext,
    ConsumeMessageContext,
    ConsumeOrderlyContext,
    ConsumeOrderlyStatus,
    ConsumeStatus,
    PushConsumerConfig,
)
from rocketq.client.offset_store import OffsetStore
from rocketq.codec.bodies import MessageModel, MessageQueue
from rocketq.codec.message import MessageExt

pytestmark = pytest.mark.timeout(20)

MQ = MessageQueue("T", "b", 0)


class Offsets(OffsetStore):
    async def _read_from_store(self, mq: MessageQueue) -> int:
        return -1

    async def persist_all(self, mqs: Any) -> None:
        return None

    async def persist(self, mq: MessageQueue) -> None:
        return None


class Hook:
    def __init__(self) -> None:
        self.seen: list[tuple[str, int, str]] = []

    def hook_name(self) -> str:
        return "recorder"

    def consume_message_before(self, context: ConsumeMessageContext) -> None:
        self.seen.append(("before", len(context.msg_list), context.status))

    def consume_message_after(self, context: ConsumeMessageContext) -> None:
        self.seen.append(("after", len(context.msg_list), context.props["ConsumeContextType"]))


class StandIn:
    """The attributes and calls the consume services use of a PushConsumer."""

    def __init__(self, model: MessageModel = MessageModel.CLUSTERING, **config: Any) -> None:
        self.config = PushConsumerConfig(
            consumer_group="G", message_model=model, consume_thread_min=2, consume_thread_max=2, **config
        )
        self.hooks: list[Any] = []
        self.stats = ConsumerStatsManager()
        self.offset_store = Offsets("G")
        self.process_queue_table: dict[MessageQueue, ProcessQueue] = {}
        self.sent_back: list[tuple[int, int]] = []  # (queue offset, delay level)
        self.dead: list[int] = []
        self.refuse_send_back: set[int] = set()
        self.rebalance_impl = self

    async def send_message_back(self, msg: MessageExt, delay_level: int, broker_name: str | None) -> bool:
        if msg.queue_offset in self.refuse_send_back:
            return False
        self.sent_back.append((msg.queue_offset, delay_level))
        return True

    async def send_message_back_to_dlq(
        self, msg: MessageExt, max_times: int, broker_name: str | None
    ) -> bool:
        self.dead.append(msg.queue_offset)
        return True

    async def lock(self, mq: MessageQueue) -> bool:
        return True

    async def lock_all(self) -> None:
        return None


def msgs(start: int, n: int, reconsume: int = 0) -> list[MessageExt]:
    return [
        MessageExt(topic="T", body=b"%d" % o, queue_offset=o, reconsume_times=reconsume)
        for o in range(start, start + n)
    ]


async def until(predicate: Any, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.005)


def test_listener_kind_detection() -> None:
    async def coro(m: Any, c: Any) -> ConsumeStatus:
        return ConsumeStatus.CONSUME_SUCCESS

    class AsyncCallable:
        async def __call__(self, m: Any, c: Any) -> ConsumeStatus:
            return ConsumeStatus.CONSUME_SUCCESS

    assert is_async_listener(coro) and is_async_listener(AsyncCallable())
    assert not is_async_listener(lambda m, c: ConsumeStatus.CONSUME_SUCCESS)


@pytest.mark.parametrize("use_async", [False, True])
async def test_batches_acks_and_send_back(use_async: bool) -> None:
    consumer = StandIn(consume_message_batch_max_size=3)
    consumer.refuse_send_back = {4}
    calls: list[tuple[list[int], str]] = []

    def decide(batch: list[MessageExt], ctx: ConsumeConcurrentlyContext) -> ConsumeStatus:
        calls.append(([m.queue_offset for m in batch], threading.current_thread().name))
        if batch[0].queue_offset == 3 and batch[0].reconsume_times == 0:
            ctx.ack_index = 0  # 3 ok; 4 and 5 go back
            ctx.delay_level_when_next_consume = 2
        return ConsumeStatus.CONSUME_SUCCESS

    async def async_decide(batch: list[MessageExt], ctx: ConsumeConcurrentlyContext) -> ConsumeStatus:
        return decide(batch, ctx)

    hook = Hook()
    consumer.hooks.append(hook)
    service = ConsumeMessageConcurrentlyService(consumer, async_decide if use_async else decide)
    service.start()
    pq = ProcessQueue()
    consumer.process_queue_table[MQ] = pq
    try:
        batch = msgs(0, 7)
        pq.put_messages(batch)
        service.submit_consume_request(batch, pq, MQ, True)
        await until(lambda: consumer.offset_store.read_offset_in_memory(MQ) == 4)
        # 5 went back to the broker with the listener's delay level; 4 was refused, so it stays
        # cached (holding the commit offset) and is consumed again locally 5 s later.
        assert consumer.sent_back == [(5, 2)]
        assert sorted(o for c, _ in calls for o in c) == list(range(7))
        assert all(len(c) <= 3 for c, _ in calls)
        if not use_async:
            assert all(name.startswith("ConsumeMessageThread_G_") for _, name in calls)
        assert ("after", 3, "SUCCESS") in hook.seen and ("before", 1, "") in hook.seen
        totals = consumer.stats.totals("G", "T")
        assert totals["consumed_ok"] == 5 and totals["consumed_failed"] == 2
        assert pq.in_flight == {}
    finally:
        await service.shutdown()


async def test_exceptions_and_junk_answers_mean_later() -> None:
    consumer = StandIn()
    answers = iter([RuntimeError("boom"), None, "CONSUME_SUCCESS", 42])

    def listener(batch: list[MessageExt], ctx: Any) -> Any:
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return answer

    service = ConsumeMessageConcurrentlyService(consumer, listener)
    service.start()
    pq = ProcessQueue()
    try:
        batch = msgs(0, 4)
        pq.put_messages(batch)
        service.submit_consume_request(batch, pq, MQ)
        await until(lambda: len(consumer.sent_back) == 3)
        assert sorted(o for o, _ in consumer.sent_back) == [0, 1, 3]  # the string name counted as success
        await until(lambda: consumer.offset_store.read_offset_in_memory(MQ) == 4)
    finally:
        await service.shutdown()


async def test_broadcasting_drops_failures_and_dropped_queues_ignore_results() -> None:
    consumer = StandIn(MessageModel.BROADCASTING)
    release = threading.Event()

    def listener(batch: list[MessageExt], ctx: Any) -> ConsumeStatus:
        if batch[0].queue_offset == 9:
            release.wait(5)
        return ConsumeStatus.RECONSUME_LATER

    service = ConsumeMessageConcurrentlyService(consumer, listener)
    service.start()
    pq = ProcessQueue()
    try:
        pq.put_messages(msgs(0, 2))
        service.submit_consume_request(msgs(0, 2), pq, MQ)
        await until(lambda: consumer.offset_store.read_offset_in_memory(MQ) == 2)
        assert consumer.sent_back == []  # no retry topic in broadcasting
        other = ProcessQueue()
        other.put_messages(msgs(9, 1))
        service.submit_consume_request(msgs(9, 1), other, MessageQueue("T", "b", 1))
        other.dropped = True
        release.set()
        await asyncio.sleep(0.1)
        assert consumer.offset_store.read_offset_in_memory(MessageQueue("T", "b", 1)) == -1
    finally:
        await service.shutdown()


async def test_consume_timeout_sends_the_stuck_batch_back() -> None:
    consumer = StandIn()
    release = threading.Event()

    def listener(batch: list[MessageExt], ctx: Any) -> ConsumeStatus:
        release.wait(5)
        return ConsumeStatus.RECONSUME_LATER

    service = ConsumeMessageConcurrentlyService(consumer, listener)
    service.start()
    pq = ProcessQueue()
    consumer.process_queue_table[MQ] = pq
    try:
        pq.put_messages(msgs(0, 1))
        service.submit_consume_request(msgs(0, 1), pq, MQ)
        await asyncio.sleep(0.05)
        assert await service.clean_expired_msg(10.0) == 0
        assert await service.clean_expired_msg(0.01) == 1
        assert consumer.sent_back == [(0, 3)] and consumer.offset_store.read_offset_in_memory(MQ) == 1
        release.set()
        await asyncio.sleep(0.1)
        assert consumer.sent_back == [(0, 3)]  # the late answer of an expired batch is ignored
    finally:
        await service.shutdown()


async def test_backlog_travels_in_chunks_but_listener_still_sees_single_batches() -> None:
    consumer = StandIn(consume_message_batch_max_size=1)
    gate = threading.Event()
    sizes: list[int] = []

    def listener(batch: list[MessageExt], ctx: Any) -> ConsumeStatus:
        gate.wait(5)
        sizes.append(len(batch))
        return ConsumeStatus.CONSUME_SUCCESS

    service = ConsumeMessageConcurrentlyService(consumer, listener)
    service.start()
    pq = ProcessQueue()
    try:
        for start in range(0, 96, 32):
            batch = msgs(start, 32)
            pq.put_messages(batch)
            service.submit_consume_request(batch, pq, MQ)
        gate.set()
        await until(lambda: consumer.offset_store.read_offset_in_memory(MQ) == 96)
        assert sizes == [1] * 96
    finally:
        await service.shutdown()


class Orderly:
    def __init__(
        self, answers: list[Any], model: MessageModel = MessageModel.BROADCASTING, **config: Any
    ) -> None:
        self.consumer = StandIn(model, **config)
        self.answers = answers
        self.seen: list[tuple[int, int]] = []
        self.concurrent = 0
        self.max_concurrent = 0

    def listener(self, batch: list[MessageExt], ctx: ConsumeOrderlyContext) -> Any:
        self.concurrent += 1
        self.max_concurrent = max(self.max_concurrent, self.concurrent)
        time.sleep(0.002)
        self.seen += [(m.queue_offset, m.reconsume_times) for m in batch]
        self.concurrent -= 1
        answer = self.answers.pop(0) if self.answers else ConsumeOrderlyStatus.SUCCESS
        if isinstance(answer, tuple):
            answer, ctx.suspend_current_queue_time_millis = answer
        if isinstance(answer, Exception):
            raise answer
        return answer


async def test_orderly_keeps_queue_order_and_retries_in_place() -> None:
    o = Orderly(
        [(ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT, 20), RuntimeError("once more")],
        consume_message_batch_max_size=2,
    )
    service = ConsumeMessageOrderlyService(o.consumer, o.listener)
    service.start()
    pq = ProcessQueue()
    try:
        for start in (0, 4):
            batch = msgs(start, 4)
            dispatch = pq.put_messages(batch)
            service.submit_consume_request(batch, pq, MQ, dispatch)
        await until(lambda: o.consumer.offset_store.read_offset_in_memory(MQ) == 8)
        assert [off for off, _ in o.seen] == [0, 1, 0, 1, 0, 1, 2, 3, 4, 5, 6, 7]
        assert [r for off, r in o.seen if off == 0] == [0, 1, 2]  # reconsume times grow on every retry
        assert o.max_concurrent == 1
    finally:
        await service.shutdown()


async def test_orderly_dead_letters_past_max_reconsume_times_and_manual_commit() -> None:
    o = Orderly(
        [ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT] * 3,
        max_reconsume_times=1,
        suspend_current_queue_time_millis=10,
    )
    service = ConsumeMessageOrderlyService(o.consumer, o.listener)
    service.start()
    pq = ProcessQueue()
    try:
        batch = msgs(0, 2)
        service.submit_consume_request(batch, pq, MQ, pq.put_messages(batch))
        await until(lambda: o.consumer.offset_store.read_offset_in_memory(MQ) == 2)
        assert o.consumer.dead == [0]  # tried twice, then the DLQ; the queue moved on
        assert [off for off, _ in o.seen] == [0, 0, 1, 1]  # the third answer suspended 1 once
    finally:
        await service.shutdown()

    class Manual(Orderly):
        def listener(self, batch: list[MessageExt], ctx: ConsumeOrderlyContext) -> Any:
            ctx.auto_commit = False
            return super().listener(batch, ctx)

    m = Manual(
        [
            ConsumeOrderlyStatus.SUCCESS,
            (ConsumeOrderlyStatus.ROLLBACK, 10),
            ConsumeOrderlyStatus.SUCCESS,
            ConsumeOrderlyStatus.COMMIT,
        ]
    )
    service = ConsumeMessageOrderlyService(m.consumer, m.listener)
    service.start()
    pq = ProcessQueue()
    try:
        batch = msgs(0, 3)
        service.submit_consume_request(batch, pq, MQ, pq.put_messages(batch))
        await until(lambda: len(m.seen) >= 5)
        # Without auto-commit: SUCCESS commits nothing, ROLLBACK puts everything since the last
        # commit back (0 and 1), COMMIT commits everything taken so far.
        assert [off for off, _ in m.seen] == [0, 1, 0, 1, 2]
        assert m.consumer.offset_store.read_offset_in_memory(MQ) == 2
    finally:
        await service.shutdown()


async def test_orderly_clustering_needs_the_broker_lock() -> None:
    o = Orderly([], MessageModel.CLUSTERING)
    service = ConsumeMessageOrderlyService(o.consumer, o.listener)
    service.start()
    pq = ProcessQueue()
    try:
        batch = msgs(0, 2)
        service.submit_consume_request(batch, pq, MQ, pq.put_messages(batch))
        await asyncio.sleep(0.05)
        assert o.seen == []  # not locked: nothing consumed
        pq.locked = True
        pq.last_lock_timestamp = time.monotonic()
        await until(lambda: o.consumer.offset_store.read_offset_in_memory(MQ) == 2, timeout=10)
    finally:
        await service.shutdown()


class _Producer:
    def __init__(self) -> None:
        self.sent: list[Any] = []

    async def send(self, msg: Any) -> None:
        self.sent.append(msg)


class _BackClient:
    def __init__(self, broker_refuses: bool) -> None:
        self.broker_refuses = broker_refuses
        self.calls: list[tuple[str, int, int | None]] = []
        self.producer = _Producer()
        self.api = self

    def find_broker_address_in_publish(self, broker_name: str) -> str | None:
        return "10.0.0.1:10911" if broker_name == "b" else None

    async def consumer_send_message_back(
        self,
        addr: str,
        broker_name: str,
        msg: MessageExt,
        group: str,
        delay_level: int,
        timeout: float,
        max_times: int | None,
    ) -> None:
        self.calls.append((addr, delay_level, max_times))
        if self.broker_refuses:
            raise RuntimeError("CODE: 1 DESC: no")

    async def default_producer(self) -> _Producer:
        return self.producer


class _BackConsumer:
    consumer_group = "G"
    group_wire = "G"
    retry_topic_wire = "%RETRY%G"

    def __init__(self, client: _BackClient, max_reconsume_times: int = -1) -> None:
        self.client = client
        self.config = PushConsumerConfig(consumer_group="G", max_reconsume_times=max_reconsume_times)


async def test_send_back_goes_to_the_broker_first_then_falls_back_to_a_retry_copy() -> None:
    from rocketq.client.consumer.send_back import MessageBackSender

    failed = MessageExt(
        topic="T",
        body=b"payload",
        flag=7,
        reconsume_times=2,
        store_host=("10.0.0.9", 10911),
        properties={
            "TAGS": "A",
            "KEYS": "k1",
            "UNIQ_KEY": "U1",
            "MIN_OFFSET": "0",
            "MAX_OFFSET": "9",
            "x": "y",
        },
    )
    ok = _BackClient(broker_refuses=False)
    assert await MessageBackSender(_BackConsumer(ok)).send_back(failed, 0, "b") is True
    assert ok.calls == [("10.0.0.1:10911", 0, 16)] and ok.producer.sent == []

    refused = _BackClient(broker_refuses=True)
    sender = MessageBackSender(_BackConsumer(refused, max_reconsume_times=5))
    assert await sender.send_back(failed, 0, "unknown-broker") is True
    assert refused.calls == [("10.0.0.9:10911", 0, 5)]  # no route: the store host inside the message
    [copy] = refused.producer.sent
    assert (copy.topic, copy.body, copy.tags, copy.keys, copy.flag) == ("%RETRY%G", b"payload", "A", "k1", 7)
    assert copy.delay_level == 3 + 2
    assert copy.properties == {
        "UNIQ_KEY": "U1",
        "x": "y",
        "ORIGIN_MESSAGE_ID": "U1",
        "RETRY_TOPIC": "T",
        "RECONSUME_TIME": "3",
        "MAX_RECONSUME_TIMES": "5",
    }
    # Orderly's dead letter: delay level -1 to the broker; the fallback marks it as past its limit.
    assert await sender.send_to_dlq(failed, 5, "b") is True
    assert refused.calls[-1] == ("10.0.0.1:10911", -1, 5)
    dead = refused.producer.sent[-1]
    assert dead.delay_level == 0
    assert (dead.properties["RECONSUME_TIME"], dead.properties["MAX_RECONSUME_TIMES"]) == ("2", "2")
