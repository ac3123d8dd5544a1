"""How the concurrent consume service hands batches to the listener pools: the batches of one
pull travel as one job for a fast listener and one by one for a slow one, an async pool fans out
only when listeners actually wait, and a job's results are committed in one go. A dropped queue's
batches stop before the listener; a hand-over commits what was consumed before it."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest

from rocketq.client.consumer.consume_concurrently import ConsumeMessageConcurrentlyService, ConsumeRequest
from rocketq.client.consumer.process_queue import ProcessQueue
from rocketq.client.consumer.stats import ConsumerStatsManager
from rocketq.client.consumer.types import ConsumeStatus, PushConsumerConfig
from rocketq.client.offset_store import OffsetStore
from rocketq.codec.bodies import MessageModel, MessageQueue
from rocketq.codec.message import MessageExt

pytestmark = pytest.mark.timeout(20)

MQ = MessageQueue("T", "b", 0)
OK = ConsumeStatus.CONSUME_SUCCESS


class Offsets(OffsetStore):
    async def _read_from_store(self, mq: MessageQueue) -> int:
        return -1

    async def persist_all(self, mqs: Any) -> None:
        return None

    async def persist(self, mq: MessageQueue) -> None:
        return None


class StandIn:
    """What the consume service uses of a PushConsumer."""

    def __init__(self, threads: int = 4, **config: Any) -> None:
        self.config = PushConsumerConfig(
            consumer_group="G",
            message_model=MessageModel.CLUSTERING,
            consume_thread_min=threads,
            consume_thread_max=threads,
            consume_message_batch_max_size=1,
            **config,
        )
        self.hooks: list[Any] = []
        self.stats = ConsumerStatsManager()
        self.offset_store = Offsets("G")
        self.process_queue_table: dict[MessageQueue, ProcessQueue] = {}
        self.sent_back: list[int] = []

    async def send_message_back(self, msg: MessageExt, delay_level: int, broker_name: str | None) -> bool:
        self.sent_back.append(msg.queue_offset)
        return True


def msgs(start: int, n: int) -> list[MessageExt]:
    return [MessageExt(topic="T", body=b"x", queue_offset=o) for o in range(start, start + n)]


async def until(predicate: Any, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.002)


async def pull(service: ConsumeMessageConcurrentlyService, pq: ProcessQueue, start: int, n: int = 8) -> None:
    batch = msgs(start, n)
    pq.put_messages(batch)
    service.submit_consume_request(batch, pq, MQ)


def committed(consumer: StandIn) -> int:
    return consumer.offset_store.read_offset_in_memory(MQ)


class Gated:
    """A listener (sync or async) that records offsets and holds the batch at ``offset`` until
    ``open()``."""

    def __init__(self, offset: int) -> None:
        self.offset = offset
        self.seen: list[int] = []
        self.thread_gate = threading.Event()
        self.loop_gate = asyncio.Event()

    def listener(self, batch: list[MessageExt], ctx: Any) -> ConsumeStatus:
        if batch[0].queue_offset == self.offset:
            self.thread_gate.wait(10)
        self.seen.append(batch[0].queue_offset)
        return OK

    async def async_listener(self, batch: list[MessageExt], ctx: Any) -> ConsumeStatus:
        if batch[0].queue_offset == self.offset:
            await self.loop_gate.wait()
        self.seen.append(batch[0].queue_offset)
        return OK

    def open(self) -> None:
        self.thread_gate.set()
        self.loop_gate.set()


async def warmed_up(
    consumer: StandIn, listener: Any
) -> tuple[ConsumeMessageConcurrentlyService, ProcessQueue]:
    """A started service that has seen 40 pulls of 8: it treats the listener as fast now, so a
    pull travels as one job."""
    service = ConsumeMessageConcurrentlyService(consumer, listener)
    service.start()
    pq = ProcessQueue()
    for p in range(40):
        await pull(service, pq, p * 8)
        await until(lambda p=p: committed(consumer) == (p + 1) * 8)
    return service, pq


async def test_a_fast_sync_listener_gets_a_pull_as_one_job() -> None:
    consumer = StandIn()
    threads: dict[int, set[int]] = {}  # pull number -> threads its batches ran on

    def listener(batch: list[MessageExt], ctx: Any) -> ConsumeStatus:
        threads.setdefault(batch[0].queue_offset // 8, set()).add(threading.get_ident())
        return OK

    service = ConsumeMessageConcurrentlyService(consumer, listener)
    service.start()
    pq = ProcessQueue()
    try:
        for p in range(40):  # the first pulls teach the service how fast the listener is
            await pull(service, pq, p * 8)
            await until(lambda p=p: committed(consumer) == (p + 1) * 8)
        assert all(len(threads[p]) == 1 for p in range(30, 40))
        totals = consumer.stats.totals("G", "T")
        assert totals["consumed_ok"] == 320 and totals["consumed_failed"] == 0
        assert pq.msg_count == 0 and pq.msg_size == 0
    finally:
        await service.shutdown()


async def test_a_slow_sync_listener_keeps_its_parallelism() -> None:
    consumer = StandIn()
    running = 0
    peak = 0
    lock = threading.Lock()

    def listener(batch: list[MessageExt], ctx: Any) -> ConsumeStatus:
        nonlocal running, peak
        with lock:
            running += 1
            peak = max(peak, running)
        time.sleep(0.005)  # waiting on I/O
        with lock:
            running -= 1
        return OK

    service = ConsumeMessageConcurrentlyService(consumer, listener)
    service.start()
    pq = ProcessQueue()
    try:
        for p in range(6):
            await pull(service, pq, p * 8)
            await until(lambda p=p: committed(consumer) == (p + 1) * 8)
        assert peak > 1
    finally:
        await service.shutdown()


@pytest.mark.parametrize("waits", [False, True])
async def test_async_listeners_fan_out_only_when_they_wait(waits: bool) -> None:
    consumer = StandIn(threads=8)
    running = 0
    peak = 0

    async def listener(batch: list[MessageExt], ctx: Any) -> ConsumeStatus:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        if waits:
            await asyncio.sleep(0.005)
        running -= 1
        return OK

    service = ConsumeMessageConcurrentlyService(consumer, listener)
    service.start()
    pq = ProcessQueue()
    try:
        for p in range(5):
            await pull(service, pq, p * 8)
            await until(lambda p=p: committed(consumer) == (p + 1) * 8)
        assert peak > 1 if waits else peak == 1
        assert consumer.stats.totals("G", "T")["consumed_ok"] == 40
    finally:
        await service.shutdown()


@pytest.mark.parametrize("use_async", [False, True])
async def test_one_failed_batch_in_a_job_goes_back_alone(use_async: bool) -> None:
    consumer = StandIn()
    fail = {333}

    def answer(batch: list[MessageExt]) -> ConsumeStatus:
        return ConsumeStatus.RECONSUME_LATER if batch[0].queue_offset in fail else OK

    async def async_listener(batch: list[MessageExt], ctx: Any) -> ConsumeStatus:
        return answer(batch)

    def sync_listener(batch: list[MessageExt], ctx: Any) -> ConsumeStatus:
        return answer(batch)

    service = ConsumeMessageConcurrentlyService(consumer, async_listener if use_async else sync_listener)
    service.start()
    pq = ProcessQueue()
    try:
        for p in range(40):
            await pull(service, pq, p * 8)
            await until(lambda p=p: committed(consumer) == (p + 1) * 8)
        assert service._fast_share > 0.5  # jobs carry whole pulls by now
        await pull(service, pq, 328)
        await until(lambda: committed(consumer) == 336)
        assert consumer.sent_back == [333]
        totals = consumer.stats.totals("G", "T")
        assert totals["consumed_ok"] == 327 and totals["consumed_failed"] == 1
        assert pq.msg_count == 0
    finally:
        await service.shutdown()


@pytest.mark.parametrize("use_async", [False, True])
async def test_a_stuck_batch_does_not_hold_up_the_rest_of_its_pull(use_async: bool) -> None:
    consumer = StandIn()
    gated = Gated(320)
    service, pq = await warmed_up(consumer, gated.async_listener if use_async else gated.listener)
    seen = gated.seen
    try:
        assert service._fast_share > 0.5  # a pull travels as one job now
        await pull(service, pq, 320)
        # the seven batches behind the stuck one are taken back from its job and run elsewhere
        await until(lambda: set(range(321, 328)) <= set(seen), timeout=3)
        assert 320 not in seen
        assert committed(consumer) == 320  # the stuck message still holds the offset back
        gated.open()
        await until(lambda: committed(consumer) == 328)
        assert sorted(seen[-8:]) == list(range(320, 328))
        assert consumer.stats.totals("G", "T")["consumed_ok"] == 328
    finally:
        gated.open()
        await service.shutdown()


@pytest.mark.parametrize("use_async", [False, True])
async def test_batches_of_a_dropped_queue_never_reach_the_listener(
    use_async: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No stall check: the batches behind the held one must wait for the drop, not run elsewhere.
    monkeypatch.setattr("rocketq.client.consumer.consume_concurrently.STALLED_LISTENER_RT", 60.0)
    consumer = StandIn()
    gated = Gated(320)
    service, pq = await warmed_up(consumer, gated.async_listener if use_async else gated.listener)
    seen = gated.seen
    try:
        await pull(service, pq, 320)  # one job of 8 batches; the first one stays in the listener
        await until(lambda: bool(pq.in_flight) and next(iter(pq.in_flight.values())).context is not None)
        pq.dropped = True  # a rebalance moved the queue away (no hand-over)
        gated.open()
        await until(lambda: not pq.in_flight)
        await asyncio.sleep(0.05)
        assert [o for o in seen if o >= 320] == [320]  # only the batch already in the listener
        assert committed(consumer) == 320  # whose result is dropped, as in RocketMQ
    finally:
        gated.open()
        await service.shutdown()


async def test_a_hand_over_commits_what_was_consumed_and_the_gaps_below_it() -> None:
    """Two threads run two pulls of one queue; the queue is handed over while both are mid-way:
    the batches under the furthest one consumed still run, the rest is skipped, and the
    committed offset ends right after the last consumed message."""
    consumer = StandIn(threads=2)
    seen: list[int] = []
    lock = threading.Lock()
    gate = threading.Event()

    def listener(batch: list[MessageExt], ctx: Any) -> ConsumeStatus:
        offset = batch[0].queue_offset
        if offset in (3, 12):  # both jobs stop here until the hand-over began
            gate.wait(10)
        with lock:
            seen.append(offset)
        return OK

    service = ConsumeMessageConcurrentlyService(consumer, listener)
    service.start()
    pq = ProcessQueue()
    try:
        batch = msgs(0, 16)
        pq.put_messages(batch)
        # Two jobs of eight batches each, as a backlog makes them.
        service._submit([_request(m, pq) for m in batch[:8]])
        service._submit([_request(m, pq) for m in batch[8:]])
        await until(lambda: {3, 12} <= {o for o, r in pq.in_flight.items() if r.context is not None})
        service.begin_hand_over(pq)
        assert pq.dropped and pq.handing_over and pq.hand_over_below == 12
        gate.set()
        await service.hand_over([pq], 5.0)
        with lock:
            done = sorted(seen)
        assert done == list(range(13))  # 4..11 filled the gap under 12; 13..15 were skipped
        assert committed(consumer) == 13
    finally:
        gate.set()
        await service.shutdown()


def _request(msg: MessageExt, pq: ProcessQueue) -> ConsumeRequest:
    return ConsumeRequest([msg], pq, MQ)
