"""RebalanceImpl and RebalanceService without a broker: a small in-memory client instance stands in
for MQClientInstance (routes, group membership, offsets, locks), so every rule can be driven exactly."""

from __future__ import annotations

import asyncio
from collections.abc import Collection
from pathlib import Path
from typing import Any

import pytest

from rocketq.client.consumer.process_queue import ProcessQueue
from rocketq.client.consumer.types import PushConsumerConfig
from rocketq.client.offset_store import OffsetStore
from rocketq.client.rebalance.allocate import AllocateMessageQueueAveragely
from rocketq.client.rebalance.impl import RebalanceLitePullImpl, RebalancePushImpl
from rocketq.client.rebalance.service import RebalanceService
from rocketq.codec.bodies import (
    ConsumeFromWhere,
    LockBatchRequestBody,
    MessageModel,
    MessageQueue,
    SubscriptionData,
    UnlockBatchRequestBody,
)
from rocketq.errors import RemotingTimeoutError

pytestmark = pytest.mark.timeout(20)

T = "TopicR"
RETRY = "%RETRY%G"


def mqs(topic: str = T, n: int = 4) -> list[MessageQueue]:
    return [MessageQueue(topic, "b", i) for i in range(n)]


class MemoryOffsetStore(OffsetStore):
    """Offsets "on the broker" in a dict; `broken` makes store reads fail (-2)."""

    def __init__(self, broker: dict[MessageQueue, int]) -> None:
        super().__init__("G")
        self.broker = broker
        self.broken = False
        self.persisted: list[tuple[MessageQueue, int]] = []

    async def _read_from_store(self, mq: MessageQueue) -> int:
        if self.broken:
            return -2
        return self.broker.get(mq, -1)

    async def persist_all(self, mqs: Collection[MessageQueue]) -> None:  # type: ignore[override]
        for mq in mqs:
            await self.persist(mq)

    async def persist(self, mq: MessageQueue) -> None:
        if mq in self.offset_table:
            self.broker[mq] = self.offset_table[mq]
            self.persisted.append((mq, self.offset_table[mq]))


class FakeApi:
    def __init__(self, client: FakeClient) -> None:
        self.client = client
        self.max_offsets: dict[MessageQueue, int] = {}
        self.searches: list[tuple[MessageQueue, int]] = []

    async def get_max_offset(self, addr: str, mq: MessageQueue, timeout: float | None = None) -> int:
        return self.max_offsets.get(mq, 100)

    async def search_offset(self, addr: str, mq: MessageQueue, ts: int, timeout: float | None = None) -> int:
        self.searches.append((mq, ts))
        return 42

    async def lock_batch_mq(
        self, addr: str, body: LockBatchRequestBody, timeout: float | None = None
    ) -> set[MessageQueue]:
        locks = self.client.locks
        got = set()
        for mq in body.mq_set:
            if locks.get(mq, body.client_id) == body.client_id:
                locks[mq] = body.client_id
                got.add(mq)
        return got

    async def unlock_batch_mq(
        self, addr: str, body: UnlockBatchRequestBody, timeout: float | None = None, oneway: bool = False
    ) -> None:
        for mq in body.mq_set:
            if self.client.locks.get(mq) == body.client_id:
                del self.client.locks[mq]


class FakeClient:
    """Shared "cluster" state: group members and broker locks; one FakeClient per consumer id."""

    def __init__(
        self, client_id: str, members: list[str], locks: dict[MessageQueue, str] | None = None
    ) -> None:
        self.client_id = client_id
        self.members = members
        self.locks = {} if locks is None else locks
        self.api = FakeApi(self)
        self.route_updates: list[str] = []
        self.consumer_table: dict[str, Any] = {}

    async def find_consumer_id_list(self, topic: str, group: str) -> list[str] | None:
        return list(self.members)

    def find_broker_address_in_publish(self, broker_name: str) -> str | None:
        return "127.0.0.1:1"

    def find_broker_address_in_subscribe(
        self, broker_name: str, broker_id: int = 0, only_this_broker: bool = False
    ) -> str | None:
        return "127.0.0.1:1"

    async def update_topic_route_info_from_name_server(self, topic: str) -> bool:
        self.route_updates.append(topic)
        return True


class FakeConsumer:
    """What RebalancePushImpl calls back into."""

    def __init__(
        self,
        store: OffsetStore,
        where: ConsumeFromWhere = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
        orderly: bool = False,
        timestamp: int | None = None,
    ) -> None:
        self.offset_store = store
        self.config = PushConsumerConfig(
            consumer_group="G", consume_from_where=where, consume_timestamp=timestamp
        )
        self.consume_orderly = orderly
        self.dispatched: list[tuple[MessageQueue, int]] = []
        self.changes: list[tuple[str, set[MessageQueue]]] = []
        # (queues, all dropped and handing over) of each hand-over the rebalance asked for.
        self.hand_overs: list[tuple[int, bool]] = []

    def dispatch_pull_requests(self, requests: list[tuple[MessageQueue, ProcessQueue, int]]) -> None:
        self.dispatched += [(mq, off) for mq, _, off in requests]

    def begin_hand_over(self, pq: ProcessQueue) -> None:
        pq.handing_over = not self.consume_orderly
        pq.dropped = True

    async def hand_over(self, pqs: list[ProcessQueue], timeout: float) -> None:
        self.hand_overs.append((len(pqs), all(pq.handing_over and pq.dropped for pq in pqs)))

    def on_message_queue_changed(
        self, topic: str, mq_all: Collection[MessageQueue], mq_divided: Collection[MessageQueue]
    ) -> None:
        self.changes.append((topic, set(mq_divided)))


def push_impl(
    client: FakeClient,
    consumer: FakeConsumer,
    model: MessageModel = MessageModel.CLUSTERING,
    topics: dict[str, list[MessageQueue]] | None = None,
) -> RebalancePushImpl:
    impl = RebalancePushImpl(consumer, "G", model, AllocateMessageQueueAveragely(), client)
    impl.settle_delay = 0.0  # dispatch at once: these tests look at the table right after a round
    for topic, queues in (topics or {T: mqs()}).items():
        impl.subscription_inner[topic] = SubscriptionData(topic)
        impl.topic_subscribe_info_table[topic] = set(queues)
    return impl


async def test_clustering_takes_its_share_and_starts_pulling_at_the_stored_offsets() -> None:
    broker = {mqs()[0]: 7}
    consumer = FakeConsumer(MemoryOffsetStore(broker))
    client = FakeClient("c0", ["c1", "c0"])  # unsorted on purpose
    impl = push_impl(client, consumer)
    assert await impl.do_rebalance(False) is True
    assert sorted(impl.process_queue_table) == mqs()[:2]
    # Queue 0 has a stored offset; queue 1 has none: CONSUME_FROM_LAST_OFFSET -> the max offset.
    assert sorted(consumer.dispatched) == [(mqs()[0], 7), (mqs()[1], 100)]
    assert consumer.changes == [(T, set(mqs()[:2]))]
    # Nothing changed: no new requests, no change callback.
    assert await impl.do_rebalance(False) is True
    assert len(consumer.dispatched) == 2 and len(consumer.changes) == 1


async def test_a_member_joining_makes_queues_move_after_their_offsets_are_persisted() -> None:
    broker: dict[MessageQueue, int] = {}
    store = MemoryOffsetStore(broker)
    consumer = FakeConsumer(store, ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
    client = FakeClient("c0", ["c0"])
    impl = push_impl(client, consumer)
    await impl.do_rebalance(False)
    assert len(impl.process_queue_table) == 4
    dropped = {mq: impl.process_queue_table[mq] for mq in mqs()[2:]}
    for mq in mqs():
        store.update_offset(mq, 10 + mq.queue_id, False)
    client.members.append("c1")
    await impl.do_rebalance(False)
    assert sorted(impl.process_queue_table) == mqs()[:2]
    assert all(pq.dropped for pq in dropped.values())
    assert broker == {mqs()[2]: 12, mqs()[3]: 13}  # persisted on the way out...
    assert store.read_offset_in_memory(mqs()[2]) == -1  # ...and forgotten locally


async def test_consumer_unknown_to_the_broker_takes_nothing_and_no_members_is_not_balanced() -> None:
    consumer = FakeConsumer(MemoryOffsetStore({}))
    impl = push_impl(FakeClient("stranger", ["c0", "c1"]), consumer)
    assert await impl.do_rebalance(False) is True
    assert impl.process_queue_table == {}
    impl = push_impl(FakeClient("c0", []), consumer)
    assert await impl.do_rebalance(False) is False


async def test_broadcasting_takes_every_queue_without_locks() -> None:
    consumer = FakeConsumer(MemoryOffsetStore({}), ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET, orderly=True)
    client = FakeClient("c0", ["c0", "c1", "c2"], locks={mqs()[0]: "someone-else"})
    impl = push_impl(client, consumer, MessageModel.BROADCASTING)
    assert await impl.do_rebalance(True) is True
    assert sorted(impl.process_queue_table) == mqs()
    assert sorted(off for _, off in consumer.dispatched) == [0, 0, 0, 0]


@pytest.mark.parametrize(
    ("where", "topic", "stored", "expected"),
    [
        (ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET, T, None, 100),
        (ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET, RETRY, None, 0),  # retry topics start at 0
        (ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET, T, None, 0),
        (ConsumeFromWhere.CONSUME_FROM_TIMESTAMP, T, None, 42),
        (ConsumeFromWhere.CONSUME_FROM_TIMESTAMP, RETRY, None, 100),
        (ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET, T, 5, 5),  # a stored offset always wins
        (ConsumeFromWhere.CONSUME_FROM_TIMESTAMP, T, 0, 0),
    ],
)
async def test_compute_pull_from_where(
    where: ConsumeFromWhere, topic: str, stored: int | None, expected: int
) -> None:
    mq = MessageQueue(topic, "b", 0)
    consumer = FakeConsumer(MemoryOffsetStore({} if stored is None else {mq: stored}), where, timestamp=1234)
    client = FakeClient("c0", ["c0"])
    impl = push_impl(client, consumer, topics={topic: [mq]})
    assert await impl.compute_pull_from_where(mq) == expected
    if where is ConsumeFromWhere.CONSUME_FROM_TIMESTAMP and topic == T and stored is None:
        assert client.api.searches == [(mq, 1234)]


async def test_unreadable_store_postpones_the_queue() -> None:
    store = MemoryOffsetStore({})
    store.broken = True
    consumer = FakeConsumer(store)
    impl = push_impl(FakeClient("c0", ["c0"]), consumer)
    assert await impl.do_rebalance(False) is False
    assert impl.process_queue_table == {} and consumer.dispatched == []


async def test_orderly_takes_only_queues_it_can_lock_and_hands_over_after_the_batch() -> None:
    locks: dict[MessageQueue, str] = {mqs()[1]: "c9"}
    store = MemoryOffsetStore({})
    consumer = FakeConsumer(store, ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET, orderly=True)
    client = FakeClient("c0", ["c0"], locks)
    impl = push_impl(client, consumer)
    assert await impl.do_rebalance(True) is False  # queue 1 is still locked by its old owner
    assert sorted(impl.process_queue_table) == [mqs()[0], mqs()[2], mqs()[3]]
    assert all(impl.process_queue_table[mq].locked for mq in impl.process_queue_table)
    del locks[mqs()[1]]
    assert await impl.do_rebalance(True) is True
    assert locks == {mq: "c0" for mq in mqs()}

    # Hand-over: queue 3 leaves while one of its batches is in the listener.
    pq3 = impl.process_queue_table[mqs()[3]]
    await pq3.consume_lock.acquire()
    client.members[:] = ["c0", "c1"]
    store.update_offset(mqs()[3], 5, False)
    assert await impl.do_rebalance(True) is True
    assert mqs()[3] in impl.process_queue_table and pq3.dropped  # waited 1 s, then gave up this round
    assert locks[mqs()[3]] == "c0" and pq3.try_unlock_times == 1
    store.update_offset(mqs()[3], 6, False)  # the batch committed
    pq3.consume_lock.release()
    await impl.do_rebalance(True)
    assert mqs()[3] not in impl.process_queue_table
    assert mqs()[3] not in locks and store.broker[mqs()[3]] == 6  # persisted, then unlocked


async def test_lock_all_renews_and_marks_lost_locks() -> None:
    locks: dict[MessageQueue, str] = {}
    consumer = FakeConsumer(MemoryOffsetStore({}), ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET, orderly=True)
    impl = push_impl(FakeClient("c0", ["c0"], locks), consumer)
    await impl.do_rebalance(True)
    pq0 = impl.process_queue_table[mqs()[0]]
    pq0.last_lock_timestamp -= 100
    locks[mqs()[0]] = "thief"
    await impl.lock_all()
    assert pq0.locked is False
    assert impl.process_queue_table[mqs()[1]].locked is True
    await impl.unlock_all(oneway=True)
    assert locks == {mqs()[0]: "thief"}


async def test_unsubscribed_topics_are_truncated_and_pull_expired_queues_rebuilt() -> None:
    consumer = FakeConsumer(MemoryOffsetStore({}), ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
    impl = push_impl(FakeClient("c0", ["c0"]), consumer, topics={T: mqs(n=1), "Other": mqs("Other", 1)})
    await impl.do_rebalance(False)
    assert len(impl.process_queue_table) == 2
    old = impl.process_queue_table[mqs(n=1)[0]]
    old.last_pull_timestamp -= 1000  # stuck for longer than 120 s
    del impl.subscription_inner["Other"]
    await impl.do_rebalance(False)
    assert list(impl.process_queue_table) == mqs(n=1)
    new = impl.process_queue_table[mqs(n=1)[0]]
    assert new is not old and old.dropped and not new.dropped


async def test_lite_variant_reports_changes_and_commits_before_removal(tmp_path: Path) -> None:
    class Lite(FakeConsumer):
        removed: list[MessageQueue] = []
        starts: list[tuple[MessageQueue, int]] = []

        def before_queue_removed(self, mq: MessageQueue) -> None:
            self.removed.append(mq)

        def remember_start_offsets(self, requests: list[tuple[MessageQueue, ProcessQueue, int]]) -> None:
            self.starts += [(mq, off) for mq, _, off in requests]

    consumer = Lite(MemoryOffsetStore({}), ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
    client = FakeClient("c0", ["c0"])
    impl = RebalanceLitePullImpl(
        consumer, "G", MessageModel.CLUSTERING, AllocateMessageQueueAveragely(), client
    )
    impl.settle_delay = 0.0
    impl.subscription_inner[T] = SubscriptionData(T)
    impl.topic_subscribe_info_table[T] = set(mqs(n=2))
    await impl.do_rebalance(False)
    assert sorted(consumer.starts) == [(mqs()[0], 0), (mqs()[1], 0)]
    client.members.append("c1")
    await impl.do_rebalance(False)
    assert consumer.removed == [mqs()[1]] and consumer.changes[-1] == (T, {mqs()[0]})


class CountingConsumer:
    def __init__(self, answers: list[Any]) -> None:
        self.answers = answers
        self.calls = 0

    async def do_rebalance(self) -> bool:
        self.calls += 1
        answer = self.answers.pop(0) if self.answers else True
        if isinstance(answer, Exception):
            raise answer
        return bool(answer)


async def test_rebalance_service_wakes_up_and_retries_unbalanced_groups_sooner() -> None:
    client = FakeClient("c0", ["c0"])
    flaky = CountingConsumer([False, RemotingTimeoutError("boom"), True])
    client.consumer_table = {"G": flaky}
    service = RebalanceService(client, wait_interval=30.0, min_interval=0.05)
    service.start()
    try:
        await asyncio.sleep(0.05)
        assert flaky.calls == 0  # waits for a wake-up (the consumer's start) or the interval
        service.wakeup()
        for _ in range(100):
            if flaky.calls >= 3:
                break
            await asyncio.sleep(0.02)
        assert flaky.calls == 3  # False and the exception both asked for a quick retry
        await asyncio.sleep(0.15)
        assert flaky.calls == 3  # balanced now: back to the long interval
        service.wakeup()
        await asyncio.sleep(0.05)
        assert flaky.calls == 4
    finally:
        await service.shutdown()


async def test_a_queue_taken_over_waits_and_starts_at_the_offset_its_previous_owner_stored() -> None:
    broker = {mqs()[0]: 5, mqs()[1]: 9}
    store = MemoryOffsetStore(broker)
    consumer = FakeConsumer(store, ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
    impl = push_impl(FakeClient("c0", ["c0", "c1"]), consumer)
    impl.settle_delay = 0.05
    await impl.do_rebalance(False)
    assert sorted(impl.process_queue_table) == mqs()[:2] and consumer.dispatched == []
    broker[mqs()[0]] = 40  # the previous owner persisted on its way out meanwhile
    impl.process_queue_table[mqs()[1]].dropped = True  # and this one moved on again
    await asyncio.sleep(0.2)
    assert consumer.dispatched == [(mqs()[0], 40)]


async def test_a_dropped_concurrent_queue_is_handed_over_before_its_offset_is_persisted() -> None:
    store = MemoryOffsetStore({})
    consumer = FakeConsumer(store, ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
    client = FakeClient("c0", ["c0"])
    impl = push_impl(client, consumer)
    await impl.do_rebalance(False)
    gone = impl.process_queue_table[mqs()[3]]
    client.members.append("c1")
    await impl.do_rebalance(False)
    assert consumer.hand_overs == [(1, True), (1, True)]  # queues 2 and 3, one by one
    assert gone.dropped and not gone.handing_over  # over once the offset was persisted
