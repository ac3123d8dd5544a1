"""RebalanceImpl: decide which queues this consumer owns and keep the process-queue table in step.

Per subscribed topic: clustering asks a broker for the group's consumer ids, sorts them and the
topic's queues and runs the allocate strategy (every member computes the same split); broadcasting
takes every queue. Queues no longer owned are dropped after their offset is persisted (orderly
ones after the batch in the listener finished and before the broker lock is released), new ones get
a process queue and a start offset (CONSUME_FROM_* rules) and are handed to the pull side.

``RebalancePushImpl`` and ``RebalanceLitePullImpl`` differ only in what they do with a queue that
comes or goes. Everything runs on the client's event loop; one rebalance at a time.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Collection, Iterable
from typing import Any

from rocketq.client.condition_log import ConditionLog
from rocketq.client.consumer.process_queue import ProcessQueue
from rocketq.client.consumer.types import DEFAULT_CONSUME_FROM_TIMESTAMP_WINDOW_MS
from rocketq.client.offset_store import ReadOffsetType
from rocketq.client.rebalance.allocate import AllocateMessageQueueStrategy
from rocketq.codec.bodies import (
    ConsumeFromWhere,
    ConsumeType,
    LockBatchRequestBody,
    MessageModel,
    MessageQueue,
    SubscriptionData,
    UnlockBatchRequestBody,
)
from rocketq.errors import BrokerNotFound

__all__ = [
    "RETRY_GROUP_TOPIC_PREFIX",
    "RebalanceImpl",
    "RebalanceLitePullImpl",
    "RebalancePushImpl",
    "broker_addr_for_admin",
    "retry_topic",
]

log = logging.getLogger("rocketq.client")

RETRY_GROUP_TOPIC_PREFIX = "%RETRY%"
LOCK_TIMEOUT = 1.0  # s, LOCK_BATCH_MQ round trip
# How long a rebalance waits for an orderly batch still in the listener before giving up this round.
CONSUME_LOCK_WAIT = 1.0
# Rounds a missing %RETRY% route makes the rebalance come back after min_interval instead of 20 s.
MAX_RETRY_ROUTE_MISSES = 10
# How long a concurrent push consumer waits before pulling a queue it was just given. Its previous
# owner learns of the move from the same broker notification and needs a moment to drop the queue
# and persist its offset; the stored offset is read again after the wait, so the new owner starts
# where the old one stopped instead of re-delivering what it consumed meanwhile. The wait also
# covers a member that briefly took every queue from a consumer list read while others joined.
SETTLE_DELAY = 0.3  # s
# How long a concurrent push consumer dropping a queue waits for the consume jobs of that queue
# already started (well inside SETTLE_DELAY, so the next owner reads the offset stored after it).
HAND_OVER_WAIT = 0.2  # s


def retry_topic(group: str) -> str:
    return RETRY_GROUP_TOPIC_PREFIX + group


async def broker_addr_for_admin(client: Any, mq: MessageQueue) -> str:
    """The master of ``mq``'s broker, refreshing the route once when it is unknown."""
    addr = client.find_broker_address_in_publish(mq.broker_name)
    if addr is None:
        await client.update_topic_route_info_from_name_server(mq.topic)
        addr = client.find_broker_address_in_publish(mq.broker_name)
    if addr is None:
        raise BrokerNotFound(f"The broker[{mq.broker_name}] not exist")
    return str(addr)


class RebalanceImpl:
    consume_type = ConsumeType.CONSUME_PASSIVELY

    def __init__(
        self,
        consumer: Any,
        consumer_group: str,
        message_model: MessageModel,
        strategy: AllocateMessageQueueStrategy,
        client: Any = None,
    ) -> None:
        # The push or lite-pull consumer: offset_store, config (consume_from_where, consume_timestamp).
        self.consumer = consumer
        self.consumer_group = consumer_group
        self.message_model = message_model
        self.allocate_message_queue_strategy = strategy
        self.client = client
        self.process_queue_table: dict[MessageQueue, ProcessQueue] = {}
        self.topic_subscribe_info_table: dict[str, set[MessageQueue]] = {}
        self.subscription_inner: dict[str, SubscriptionData] = {}
        self._lock = asyncio.Lock()
        # A topic not created yet, a group the brokers do not know yet: said once, at INFO.
        self._conditions = ConditionLog(log)
        self._route_fetched: dict[str, float] = {}
        self._retry_route_misses: dict[str, int] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    # -- the round --------------------------------------------------------------------------------

    async def do_rebalance(self, is_order: bool) -> bool:
        """One rebalance of every subscribed topic; False when a queue could not be taken yet."""
        async with self._lock:
            balanced = True
            for topic in list(self.subscription_inner):
                try:
                    if not await self._rebalance_by_topic(topic, is_order):
                        balanced = False
                except Exception as e:
                    if not topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
                        log.warning(
                            "rebalanceByTopic %s of group %s exception: %s", topic, self.consumer_group, e
                        )
                    balanced = False
            await self._truncate_message_queue_not_my_topic()
            return balanced

    async def _rebalance_by_topic(self, topic: str, is_order: bool) -> bool:
        mq_set = self.topic_subscribe_info_table.get(topic) or await self._route_missing(topic)
        if not mq_set:
            if not topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
                self._conditions.report(
                    ("no route", topic), True,
                    "doRebalance, %s, but the topic[%s] not exist (yet); consuming starts once it is created",
                    self.consumer_group, topic,
                )
                return True
            # The broker creates %RETRY%<group> on our first heartbeat and registers it a moment
            # later: look again soon instead of at the next 30 s route refresh.
            misses = self._retry_route_misses.get(topic, 0) + 1
            self._retry_route_misses[topic] = misses
            return misses > MAX_RETRY_ROUTE_MISSES
        self._conditions.clear(("no route", topic))
        if self.message_model is MessageModel.BROADCASTING:
            # No broker locks in broadcasting: every consumer owns every queue anyway.
            changed, all_taken = await self.update_process_queue_table_in_rebalance(topic, mq_set, False)
            if changed:
                log.info("messageQueueChanged %s %s %s", self.consumer_group, topic, sorted(mq_set))
                self.message_queue_changed(topic, mq_set, mq_set)
            return all_taken
        cid_all = await self.client.find_consumer_id_list(topic, self.consumer_group)
        if not cid_all:
            # Until our first heartbeat reaches the broker it knows no consumer of the group.
            self._conditions.report(
                ("no consumer ids", topic), True,
                "doRebalance, %s %s, get consumer id list failed (the broker does not list this group yet)",
                self.consumer_group, topic,
            )
            return False
        self._conditions.clear(("no consumer ids", topic))
        mq_all = sorted(mq_set)
        cids = sorted(cid_all)
        try:
            allocated = self.allocate_message_queue_strategy.allocate(
                self.consumer_group, self.client.client_id, mq_all, cids
            )
        except Exception as e:
            log.error(
                "allocate message queue exception. strategy name: %r, ex: %s",
                self.allocate_message_queue_strategy,
                e,
            )
            return False
        mine = set(allocated)
        changed, all_taken = await self.update_process_queue_table_in_rebalance(topic, mine, is_order)
        if changed:
            log.info(
                "client rebalanced result changed. allocateMessageQueueStrategyName=%r, group=%s, topic=%s, "
                "clientId=%s, mqAllSize=%d, cidAllSize=%d, rebalanceResultSize=%d, rebalanceResultSet=%s",
                self.allocate_message_queue_strategy,
                self.consumer_group,
                topic,
                self.client.client_id,
                len(mq_all),
                len(cids),
                len(mine),
                sorted(mine),
            )
            self.message_queue_changed(topic, mq_set, mine)
        return all_taken

    async def _route_missing(self, topic: str) -> set[MessageQueue] | None:
        """A subscribed topic without queues: fetch its route now (at most once a second)."""
        now = time.monotonic()
        if now - self._route_fetched.get(topic, 0.0) < 1.0:
            return None
        self._route_fetched[topic] = now
        await self.client.update_topic_route_info_from_name_server(topic)
        return self.topic_subscribe_info_table.get(topic)

    async def update_process_queue_table_in_rebalance(
        self, topic: str, mq_set: Collection[MessageQueue], is_order: bool
    ) -> tuple[bool, bool]:
        """Drop queues not in ``mq_set``, add the new ones; (changed, every queue taken)."""
        changed = False
        table = self.process_queue_table
        for mq, pq in list(table.items()):
            if mq.topic != topic:
                continue
            if mq not in mq_set:
                self.mark_dropped(pq)
                if await self.remove_unnecessary_message_queue(mq, pq):
                    if table.get(mq) is pq:
                        del table[mq]
                    changed = True
                    log.info("doRebalance, %s, remove unnecessary mq, %s", self.consumer_group, mq)
            elif self.consume_type is ConsumeType.CONSUME_PASSIVELY and pq.is_pull_expired():
                self.mark_dropped(pq)
                if await self.remove_unnecessary_message_queue(mq, pq):
                    if table.get(mq) is pq:
                        del table[mq]
                    changed = True
                    log.error(
                        "[BUG]doRebalance, %s, remove unnecessary mq, %s, because pull is pause, "
                        "so try to fixed it",
                        self.consumer_group,
                        mq,
                    )
        all_taken = True
        new_requests: list[tuple[MessageQueue, ProcessQueue, int]] = []
        for mq in sorted(mq_set):
            old = table.get(mq)
            if old is not None and not old.dropped:
                continue
            if old is not None:
                # A drop that could not finish last round (a batch was still in the listener).
                if not await self.remove_unnecessary_message_queue(mq, old):
                    all_taken = False
                    continue
                if table.get(mq) is old:
                    del table[mq]
            if is_order and not await self.lock(mq):
                log.warning(
                    "doRebalance, %s, add a new mq failed, %s, because lock failed", self.consumer_group, mq
                )
                all_taken = False
                continue
            self.remove_dirty_offset(mq)
            pq = ProcessQueue()
            if is_order:
                pq.locked = True
                pq.last_lock_timestamp = time.monotonic()
            next_offset = await self.compute_pull_from_where(mq)
            if next_offset < 0:
                log.warning("doRebalance, %s, add new mq failed, %s", self.consumer_group, mq)
                all_taken = False
                continue
            if mq in table:
                log.info("doRebalance, %s, mq already exists, %s", self.consumer_group, mq)
                continue
            log.info("doRebalance, %s, add a new mq, %s, nextOffset %d", self.consumer_group, mq, next_offset)
            table[mq] = pq
            new_requests.append((mq, pq, next_offset))
            changed = True
        if new_requests:
            self.dispatch_pull_request(new_requests)
        return changed, all_taken

    async def _truncate_message_queue_not_my_topic(self) -> None:
        for mq, pq in list(self.process_queue_table.items()):
            if mq.topic not in self.subscription_inner:
                pq.dropped = True  # no offset to hand over: nobody of the group reads it now
                if self.process_queue_table.get(mq) is pq:
                    del self.process_queue_table[mq]
                log.info(
                    "doRebalance, %s, truncateMessageQueueNotMyTopic remove unnecessary mq, %s",
                    self.consumer_group,
                    mq,
                )

    async def remove_process_queue(self, mq: MessageQueue) -> None:
        pq = self.process_queue_table.pop(mq, None)
        if pq is not None:
            self.mark_dropped(pq)
            await self.remove_unnecessary_message_queue(mq, pq)
            log.info(
                "Fix Offset, %s, remove unnecessary mq, %s Dropped: %s", self.consumer_group, mq, pq.dropped
            )

    def destroy(self) -> None:
        for task in self._tasks:
            task.cancel()
        for pq in self.process_queue_table.values():
            pq.dropped = True
        self.process_queue_table.clear()

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # -- variant hooks ------------------------------------------------------------------------------

    def message_queue_changed(
        self, topic: str, mq_all: Collection[MessageQueue], mq_divided: Collection[MessageQueue]
    ) -> None:
        """The set of owned queues of ``topic`` changed."""

    def mark_dropped(self, pq: ProcessQueue) -> None:
        """Stop consuming ``pq`` (its batches not yet in a listener are skipped from now on)."""
        pq.dropped = True

    async def remove_unnecessary_message_queue(self, mq: MessageQueue, pq: ProcessQueue) -> bool:
        store = self.consumer.offset_store
        await store.persist(mq)
        store.remove_offset(mq)
        return True

    def remove_dirty_offset(self, mq: MessageQueue) -> None:
        self.consumer.offset_store.remove_offset(mq)

    def dispatch_pull_request(self, requests: list[tuple[MessageQueue, ProcessQueue, int]]) -> None:
        """Start pulling the new queues (push); lite pull reacts in message_queue_changed."""

    async def settled_offsets(
        self, requests: list[tuple[MessageQueue, ProcessQueue, int]]
    ) -> list[tuple[MessageQueue, ProcessQueue, int]]:
        """After SETTLE_DELAY: the requests whose queue is still ours, each starting at the offset
        stored now when there is one (the previous owner persisted it meanwhile)."""
        live = [(mq, pq, offset) for mq, pq, offset in requests if self.process_queue_table.get(mq) is pq]
        if not live:
            return []
        store = self.consumer.offset_store
        stored = await asyncio.gather(
            *(store.read_offset(mq, ReadOffsetType.READ_FROM_STORE) for mq, _, _ in live),
            return_exceptions=True,
        )
        ready = []
        for (mq, pq, offset), now_stored in zip(live, stored, strict=True):
            if pq.dropped:
                continue
            # Only a stored offset replaces the one chosen at the add: recomputing a
            # CONSUME_FROM_LAST_OFFSET start now would skip what arrived during the wait.
            if isinstance(now_stored, int) and now_stored >= 0 and now_stored != offset:
                log.info(
                    "doRebalance, %s, %s moved on while settling: nextOffset %d -> %d",
                    self.consumer_group,
                    mq,
                    offset,
                    now_stored,
                )
                offset = now_stored
            ready.append((mq, pq, offset))
        return ready

    # -- where a new queue starts -----------------------------------------------------------------------

    async def compute_pull_from_where(self, mq: MessageQueue) -> int:
        """The offset a newly owned queue starts at; -1 when it cannot be decided now."""
        try:
            return await self._compute_pull_from_where(mq)
        except Exception as e:
            log.warning("computePullFromWhere %s exception: %s", mq, e)
            return -1

    async def _compute_pull_from_where(self, mq: MessageQueue) -> int:
        cfg = self.consumer.config
        where = cfg.consume_from_where
        last = await self.consumer.offset_store.read_offset(mq, ReadOffsetType.READ_FROM_STORE)
        if last >= 0:
            return int(last)
        if last != -1:
            return -1  # the store could not be read: try again next round rather than guess
        is_retry = mq.topic.startswith(RETRY_GROUP_TOPIC_PREFIX)
        if where is ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET:
            return 0
        if where is ConsumeFromWhere.CONSUME_FROM_TIMESTAMP:
            addr = await broker_addr_for_admin(self.client, mq)
            if is_retry:
                return int(await self.client.api.get_max_offset(addr, mq))
            ts = cfg.consume_timestamp
            if ts is None:
                ts = int(time.time() * 1000) - DEFAULT_CONSUME_FROM_TIMESTAMP_WINDOW_MS
            return int(await self.client.api.search_offset(addr, mq, ts))
        # CONSUME_FROM_LAST_OFFSET and the deprecated variants: the end, except retry topics.
        if is_retry:
            return 0
        addr = await broker_addr_for_admin(self.client, mq)
        return int(await self.client.api.get_max_offset(addr, mq))

    # -- orderly locks ------------------------------------------------------------------------------------

    def _lock_addr(self, broker_name: str) -> str | None:
        addr = self.client.find_broker_address_in_subscribe(broker_name, 0, True)
        return None if addr is None else str(addr)

    async def lock(self, mq: MessageQueue) -> bool:
        addr = self._lock_addr(mq.broker_name)
        if addr is None:
            return False
        body = LockBatchRequestBody(self.consumer_group, self.client.client_id, False, (mq,))
        try:
            locked = await self.client.api.lock_batch_mq(addr, body, LOCK_TIMEOUT)
        except Exception as e:
            log.error("lockBatchMQ exception, %s: %s", mq, e)
            return False
        now = time.monotonic()
        for m in locked:
            pq = self.process_queue_table.get(m)
            if pq is not None:
                pq.locked = True
                pq.last_lock_timestamp = now
        ok = mq in locked
        log.info("message queue lock %s, %s %s", "OK" if ok else "Failed", self.consumer_group, mq)
        return ok

    async def lock_all(self) -> None:
        """Renew the broker locks of every owned queue (every 20 s for orderly consumers)."""
        by_broker: dict[str, list[MessageQueue]] = {}
        for mq in self.process_queue_table:
            by_broker.setdefault(mq.broker_name, []).append(mq)
        for broker_name, mqs in by_broker.items():
            addr = self._lock_addr(broker_name)
            if addr is None:
                continue
            body = LockBatchRequestBody(self.consumer_group, self.client.client_id, False, tuple(mqs))
            try:
                locked = await self.client.api.lock_batch_mq(addr, body, LOCK_TIMEOUT)
            except Exception as e:
                log.error("lockBatchMQ exception, %s: %s", broker_name, e)
                continue
            now = time.monotonic()
            for mq in mqs:
                pq = self.process_queue_table.get(mq)
                if pq is None:
                    continue
                if mq in locked:
                    if not pq.locked:
                        log.info("the message queue locked OK, Group: %s %s", self.consumer_group, mq)
                    pq.locked = True
                    pq.last_lock_timestamp = now
                else:
                    pq.locked = False
                    log.warning("the message queue locked Failed, Group: %s %s", self.consumer_group, mq)

    async def unlock(self, mq: MessageQueue, oneway: bool) -> None:
        addr = self._lock_addr(mq.broker_name)
        if addr is None:
            return
        body = UnlockBatchRequestBody(self.consumer_group, self.client.client_id, False, (mq,))
        try:
            await self.client.api.unlock_batch_mq(addr, body, LOCK_TIMEOUT, oneway=oneway)
            log.warning(
                "unlock messageQueue. group:%s, clientId:%s, mq:%s",
                self.consumer_group,
                self.client.client_id,
                mq,
            )
        except Exception as e:
            log.error("unlockBatchMQ exception, %s: %s", mq, e)

    async def unlock_all(self, oneway: bool, mqs: Iterable[MessageQueue] | None = None) -> None:
        by_broker: dict[str, list[MessageQueue]] = {}
        for mq in self.process_queue_table if mqs is None else mqs:
            by_broker.setdefault(mq.broker_name, []).append(mq)
        for broker_name, group in by_broker.items():
            addr = self._lock_addr(broker_name)
            if addr is None:
                continue
            body = UnlockBatchRequestBody(self.consumer_group, self.client.client_id, False, tuple(group))
            try:
                await self.client.api.unlock_batch_mq(addr, body, LOCK_TIMEOUT, oneway=oneway)
            except Exception as e:
                log.error("unlockBatchMQ exception, %s: %s", broker_name, e)
            for mq in group:
                pq = self.process_queue_table.get(mq)
                if pq is not None:
                    pq.locked = False


class RebalancePushImpl(RebalanceImpl):
    consume_type = ConsumeType.CONSUME_PASSIVELY
    settle_delay = SETTLE_DELAY

    def mark_dropped(self, pq: ProcessQueue) -> None:
        if pq.dropped:
            return
        # Until remove_unnecessary_message_queue persisted the offset (concurrent consumers).
        self.consumer.begin_hand_over(pq)

    async def remove_unnecessary_message_queue(self, mq: MessageQueue, pq: ProcessQueue) -> bool:
        consumer = self.consumer
        if not consumer.consume_orderly:
            # What the listener consumed before the move (and the started jobs finishing now)
            # is committed before the offset is persisted, so the next owner, which reads it
            # after SETTLE_DELAY, starts past it. RocketMQ drops those results instead and
            # re-delivers them.
            try:
                if pq.handing_over:
                    await consumer.hand_over([pq], HAND_OVER_WAIT)
                return await super().remove_unnecessary_message_queue(mq, pq)
            finally:
                pq.handing_over = False
        if self.message_model is not MessageModel.CLUSTERING:
            return await super().remove_unnecessary_message_queue(mq, pq)
        # Orderly: the batch in the listener must finish (and commit) before the offset is persisted
        # and the broker lock released, or the next owner could consume this queue concurrently.
        try:
            async with asyncio.timeout(CONSUME_LOCK_WAIT):
                await pq.consume_lock.acquire()
        except TimeoutError:
            pq.try_unlock_times += 1
            log.warning(
                "[WRONG]mq is consuming, so can not unlock it, %s. maybe hanged for a while, %d",
                mq,
                pq.try_unlock_times,
            )
            return False
        try:
            store = consumer.offset_store
            await store.persist(mq)
            store.remove_offset(mq)
            await self.unlock(mq, oneway=False)
            pq.locked = False
        finally:
            pq.consume_lock.release()
        return True

    def message_queue_changed(
        self, topic: str, mq_all: Collection[MessageQueue], mq_divided: Collection[MessageQueue]
    ) -> None:
        self.consumer.on_message_queue_changed(topic, mq_all, mq_divided)

    def dispatch_pull_request(self, requests: list[tuple[MessageQueue, ProcessQueue, int]]) -> None:
        if (
            self.consumer.consume_orderly
            or self.message_model is MessageModel.BROADCASTING
            or self.settle_delay <= 0
        ):
            # Orderly queues change hands under the broker lock and re-read their offset at the
            # first pull; in broadcasting nobody else consumes for this consumer.
            self.consumer.dispatch_pull_requests(requests)
            return
        self._spawn(self._settle_then_pull(requests))

    async def _settle_then_pull(self, requests: list[tuple[MessageQueue, ProcessQueue, int]]) -> None:
        await asyncio.sleep(self.settle_delay)
        ready = await self.settled_offsets(requests)
        if ready:
            self.consumer.dispatch_pull_requests(ready)


class RebalanceLitePullImpl(RebalanceImpl):
    consume_type = ConsumeType.CONSUME_ACTIVELY
    settle_delay = SETTLE_DELAY

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Queues added by this round whose pulling waits for SETTLE_DELAY (as for push).
        self._settling: set[MessageQueue] = set()

    async def remove_unnecessary_message_queue(self, mq: MessageQueue, pq: ProcessQueue) -> bool:
        # What poll() already handed out counts as consumed: store it before the queue moves on.
        self.consumer.before_queue_removed(mq)
        return await super().remove_unnecessary_message_queue(mq, pq)

    def dispatch_pull_request(self, requests: list[tuple[MessageQueue, ProcessQueue, int]]) -> None:
        if self.message_model is MessageModel.BROADCASTING or self.settle_delay <= 0:
            self.consumer.remember_start_offsets(requests)
            return
        self._settling.update(mq for mq, _, _ in requests)
        self._spawn(self._settle_then_assign(requests))

    async def _settle_then_assign(self, requests: list[tuple[MessageQueue, ProcessQueue, int]]) -> None:
        try:
            await asyncio.sleep(self.settle_delay)
            ready = await self.settled_offsets(requests)
        finally:
            self._settling.difference_update(mq for mq, _, _ in requests)
        self.consumer.remember_start_offsets(ready)
        for topic in {mq.topic for mq, _, _ in ready}:
            mq_all = self.topic_subscribe_info_table.get(topic, set())
            self.message_queue_changed(topic, mq_all, self._owned(topic))

    def _owned(self, topic: str) -> set[MessageQueue]:
        return {mq for mq, pq in self.process_queue_table.items() if mq.topic == topic and not pq.dropped}

    def message_queue_changed(
        self, topic: str, mq_all: Collection[MessageQueue], mq_divided: Collection[MessageQueue]
    ) -> None:
        # Queues given up are let go now; those still settling join when their wait is over.
        self.consumer.on_message_queue_changed(
            topic, mq_all, [mq for mq in mq_divided if mq not in self._settling]
        )
