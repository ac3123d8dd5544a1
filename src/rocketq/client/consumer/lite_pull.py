"""LitePullConsumer (asyncio): RocketMQ's DefaultLitePullConsumer.

    consumer = LitePullConsumer("cg", namesrv_addr="127.0.0.1:9876")
    consumer.subscribe("T", "*")          # the group shares the queues (rebalanced), or:
    consumer.assign([mq1, mq2])           # this consumer reads exactly these queues
    await consumer.start()
    msgs = await consumer.poll(timeout=1.0)
    await consumer.commit_sync()           # or auto_commit=True (default): every 5 s

Background pull loops (one task per assigned queue) long-poll the brokers and fill a cache of
pulled batches; ``poll`` hands out one batch at a time. What ``poll`` returned counts as consumed
and is what ``commit`` stores. ``seek`` moves a queue's read position; the next pull starts there.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import enum
import logging
import time
from collections.abc import Collection, Iterable, Mapping
from typing import Any

from rocketq.client.api import PULL_SYS_FLAG_LITE_PULL, PULL_SYS_FLAG_SUBSCRIPTION, PULL_SYS_FLAG_SUSPEND
from rocketq.client.config import ClientConfig, ServiceState
from rocketq.client.consumer.assigned_queue import AssignedQueue, PolledBatch, settle
from rocketq.client.consumer.inner import ConsumerInner
from rocketq.client.consumer.process_queue import ProcessQueue
from rocketq.client.consumer.subscription import (
    MessageSelector,
    build_subscription,
    check_subscribe_topic,
    reset_retry_topic,
)
from rocketq.client.consumer.types import LitePullConsumerConfig
from rocketq.client.message import PullStatus
from rocketq.client.offset_store import ReadOffsetType
from rocketq.client.rebalance.allocate import allocate_strategy
from rocketq.client.rebalance.impl import RebalanceLitePullImpl, broker_addr_for_admin
from rocketq.client.trace.attach import start_consumer_trace
from rocketq.client.trace.hooks import ConsumeMessageTraceHook
from rocketq.codec.bodies import ConsumeType, MessageModel, MessageQueue, SubscriptionData
from rocketq.codec.message import MessageExt
from rocketq.errors import InvalidArgument, MQClientError, PullFailed, ServiceStateError

__all__ = ["LitePullConsumer", "SubscriptionType"]

log = logging.getLogger("rocketq.client")

FLOW_CONTROL_DELAY = 0.05
PAUSE_DELAY = 1.0
# Pulls of one queue failing in a row (one per pull_time_delay_mills_when_exception) before poll()
# raises: a broker restart or a route change costs one or two, a broker that cannot serve us all.
PULL_FAILURES_TO_RAISE = 3
_PULL_FLAGS = PULL_SYS_FLAG_SUSPEND | PULL_SYS_FLAG_SUBSCRIPTION | PULL_SYS_FLAG_LITE_PULL


class SubscriptionType(enum.Enum):
    NONE = "NONE"
    SUBSCRIBE = "SUBSCRIBE"
    ASSIGN = "ASSIGN"


class LitePullConsumer(ConsumerInner):
    """``LitePullConsumer(group, namesrv_addr=..., **fields)`` takes any LitePullConsumerConfig or
    ClientConfig field (``auto_commit``, ``pull_batch_size``, ``message_model``, ...)."""

    CONSUME_TYPE = ConsumeType.CONSUME_ACTIVELY
    config: LitePullConsumerConfig

    def __init__(
        self,
        consumer_group: str | None = None,
        namesrv_addr: str | None = None,
        *,
        config: LitePullConsumerConfig | None = None,
        config_base: ClientConfig | None = None,
        **fields: Any,
    ) -> None:
        super().__init__(LitePullConsumerConfig, consumer_group, namesrv_addr, config, config_base, fields)
        cfg = self.config
        self.subscription_type = SubscriptionType.NONE
        self.auto_commit = cfg.auto_commit
        self.rebalance_impl = RebalanceLitePullImpl(
            self, self._group_wire, cfg.message_model, allocate_strategy(cfg.allocate_message_queue_strategy)
        )
        self._assigned: dict[MessageQueue, AssignedQueue] = {}
        self._pull_failure: PullFailed | None = None  # for the next poll() to raise
        self._assign_request: list[MessageQueue] = []
        self._start_offsets: dict[MessageQueue, int] = {}  # decided by the rebalance
        self._cache: collections.deque[PolledBatch] = collections.deque()
        self._waiter: asyncio.Future[None] | None = None
        self._next_auto_commit = 0.0
        self._auto_commit_task: asyncio.Task[None] | None = None
        self._trace_hook: ConsumeMessageTraceHook | None = None

    # -- what to read ------------------------------------------------------------------------------

    def subscribe(self, topic: str, sub_expression: str | MessageSelector | None = "*") -> None:
        """Share ``topic``'s queues with the group (rebalanced like a push consumer); a tag
        expression or a ``MessageSelector`` says which messages (see ``PushConsumer.subscribe``)."""
        if self.subscription_type is SubscriptionType.ASSIGN:
            raise InvalidArgument("Subscribe and assign are mutually exclusive.")
        check_subscribe_topic(topic)
        wire = self.config.with_namespace(topic)
        self._install(build_subscription(wire, sub_expression))
        self.subscription_type = SubscriptionType.SUBSCRIBE
        if self.service_state is ServiceState.RUNNING:
            self._spawn(self._after_subscription_change(wire))

    def unsubscribe(self, topic: str) -> None:
        wire = self.config.with_namespace(topic)
        self._uninstall(wire)
        for mq in [mq for mq in self._assigned if mq.topic == wire]:
            self._remove_queue(mq)

    def assign(self, message_queues: Iterable[MessageQueue]) -> None:
        """Read exactly these queues (no rebalancing); replaces any earlier assignment."""
        if self.subscription_type is SubscriptionType.SUBSCRIBE:
            raise InvalidArgument("Subscribe and assign are mutually exclusive.")
        mqs = list(message_queues)
        if not mqs:
            raise InvalidArgument("Message queues can not be null or empty.")
        self.subscription_type = SubscriptionType.ASSIGN
        wire = [MessageQueue(self.config.with_namespace(mq.topic), mq.broker_name, mq.queue_id) for mq in mqs]
        for mq in wire:
            if mq.topic not in self.rebalance_impl.subscription_inner:
                self._install(build_subscription(mq.topic, "*"))
        self._assign_request = wire
        if self.service_state is ServiceState.RUNNING:
            self._update_assigned(None, wire)

    def assignment(self) -> set[MessageQueue]:
        return {self._user_mq(mq) for mq in self._assigned}

    async def fetch_message_queues(self, topic: str) -> list[MessageQueue]:
        """The readable queues of ``topic`` (from a fresh route)."""
        queues = await self.client.fetch_subscribe_message_queues(self.config.with_namespace(topic))
        return [self._user_mq(mq) for mq in queues]

    # The API speaks of the user's topics; queues are kept under their wire names.
    def _wire_mq(self, mq: MessageQueue) -> MessageQueue:
        if not self.config.namespace:
            return mq
        return MessageQueue(self.config.with_namespace(mq.topic), mq.broker_name, mq.queue_id)

    def _user_mq(self, mq: MessageQueue) -> MessageQueue:
        if not self.config.namespace:
            return mq
        return MessageQueue(self.config.without_namespace(mq.topic), mq.broker_name, mq.queue_id)

    def pause(self, message_queues: Iterable[MessageQueue]) -> None:
        for mq in message_queues:
            state = self._assigned.get(self._wire_mq(mq))
            if state is not None:
                state.paused = True

    def resume(self, message_queues: Iterable[MessageQueue]) -> None:
        for mq in message_queues:
            state = self._assigned.get(self._wire_mq(mq))
            if state is not None:
                state.paused = False

    # -- lifecycle ---------------------------------------------------------------------------------

    async def start(self) -> None:
        if self.service_state is not ServiceState.CREATE_JUST:
            raise ServiceStateError(
                f"The LitePullConsumer service state not OK, maybe started once, {self.service_state.name}"
            )
        cfg = self.config
        self._check_group()
        if not 1 <= cfg.pull_batch_size <= 1024:
            raise InvalidArgument("pullBatchSize Out of range [1, 1024]")
        self.service_state = ServiceState.START_FAILED
        try:
            client = await self._bind_client()
            self._register(client)
            await client.start()
        except BaseException:
            await self._undo_start()
            raise
        self.service_state = ServiceState.RUNNING
        self._next_auto_commit = time.monotonic() + cfg.auto_commit_interval_millis / 1000.0
        self._auto_commit_task = asyncio.get_running_loop().create_task(self._auto_commit_loop())
        log.info("the consumer [%s] start OK", self.consumer_group)
        if cfg.enable_trace:
            self._trace_hook = await start_consumer_trace(self.consumer_group, cfg)
        if self.subscription_type is SubscriptionType.ASSIGN:
            self._update_assigned(None, self._assign_request)
        await self._join()
        if self.subscription_type is SubscriptionType.SUBSCRIBE:
            client.rebalance_immediately()

    async def shutdown(self) -> None:
        if self.service_state is not ServiceState.RUNNING:
            if self.service_state is ServiceState.CREATE_JUST:
                self.service_state = ServiceState.SHUTDOWN_ALREADY
            return
        self.service_state = ServiceState.SHUTDOWN_ALREADY
        if self._auto_commit_task is not None:
            self._auto_commit_task.cancel()
        tasks = [s.task for s in self._assigned.values() if s.task is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if self.auto_commit:
            self._commit_consumed()
        await self._persist_at_shutdown(self._assigned)
        if self._trace_hook is not None:
            await self._trace_hook.dispatcher.shutdown()
        await self._leave()
        for state in self._assigned.values():
            state.process_queue.dropped = True
        self._assigned.clear()
        self._cache.clear()
        self._wake()
        log.info("the consumer [%s] shutdown OK", self.consumer_group)

    # -- what the MQClientInstance drives ----------------------------------------------------------

    async def do_rebalance(self) -> bool:
        if (
            self.subscription_type is not SubscriptionType.SUBSCRIBE
            or self.service_state is not ServiceState.RUNNING
        ):
            return True
        return await self.rebalance_impl.do_rebalance(False)

    def _owned_queues(self) -> Collection[MessageQueue]:
        return self._assigned

    # rebalance callbacks (subscribe mode)
    def remember_start_offsets(self, requests: list[tuple[MessageQueue, ProcessQueue, int]]) -> None:
        for mq, _, offset in requests:
            self._start_offsets[mq] = offset

    def before_queue_removed(self, mq: MessageQueue) -> None:
        state = self._assigned.get(mq)
        if self.auto_commit and state is not None and state.consume_offset >= 0:
            self.offset_store.update_offset(mq, state.consume_offset, False)

    def on_message_queue_changed(
        self, topic: str, mq_all: Collection[MessageQueue], mq_divided: Collection[MessageQueue]
    ) -> None:
        self._update_assigned(topic, list(mq_divided))

    # -- assigned queues and their pull loops ------------------------------------------------------

    def _update_assigned(self, topic: str | None, mqs: list[MessageQueue]) -> None:
        wanted = set(mqs)
        for mq in list(self._assigned):
            if (topic is None or mq.topic == topic) and mq not in wanted:
                self._remove_queue(mq)
        for mq in mqs:
            if mq in self._assigned:
                continue
            pq = self.rebalance_impl.process_queue_table.get(mq) or ProcessQueue()
            state = AssignedQueue(mq, pq, self._start_offsets.pop(mq, -1))
            self._assigned[mq] = state
            self._start_pull(state)

    def _remove_queue(self, mq: MessageQueue) -> None:
        state = self._assigned.pop(mq, None)
        if state is None:
            return
        state.process_queue.dropped = True
        if state.task is not None:
            state.task.cancel()
        self._cache = collections.deque(b for b in self._cache if b.state is not state)

    def _start_pull(self, state: AssignedQueue) -> None:
        state.task = asyncio.get_running_loop().create_task(
            self._pull_loop(state), name=f"PullTaskImpl-{self._group_wire}-{state.message_queue.queue_id}"
        )

    async def _pull_loop(self, state: AssignedQueue) -> None:
        while self.service_state is ServiceState.RUNNING and self._assigned.get(state.message_queue) is state:
            try:
                delay = await self._pull_once(state)
            except asyncio.CancelledError:
                raise
            except Exception as e:
                delay = self._exception_delay()
                self._check_reachable(state.message_queue.topic, e)
                self._pull_failed(state, e)
            else:
                if state.failures:
                    log.info("Pull task of %s recovered after %d failures", state.message_queue,
                             state.failures)
                    state.failures = 0
            if delay:
                await asyncio.sleep(delay)

    def _pull_failed(self, state: AssignedQueue, exc: Exception) -> None:
        """Count a failed pull; from the ``PULL_FAILURES_TO_RAISE``-th in a row on, ``poll()``
        raises it (a pull path that keeps failing is the caller's business, not an empty poll)
        and the log repeats it at DEBUG only."""
        state.failures += 1
        n = state.failures
        mq = state.message_queue
        log.log(logging.WARNING if n == 1 else logging.DEBUG, "Pull task of %s exception (%d in a row): %r",
                mq, n, exc)
        if n >= PULL_FAILURES_TO_RAISE:
            err = PullFailed(f"pulling {mq} failed {n} times in a row, last: {exc}",
                             code=getattr(exc, "code", None), broker_addr=getattr(exc, "broker_addr", None),
                             topic=mq.topic)
            err.message_queue, err.failures, err.__cause__ = mq, n, exc
            self._pull_failure = err
            self._wake()

    async def _pull_once(self, state: AssignedQueue) -> float:
        cfg = self.config
        pq = state.process_queue
        if state.paused:
            return PAUSE_DELAY
        if pq.dropped:
            return PAUSE_DELAY
        if (
            len(self._cache) * cfg.pull_batch_size > cfg.pull_threshold_for_all
            or pq.msg_count > cfg.pull_threshold_for_queue
            or pq.cached_msg_size_in_mib > cfg.pull_threshold_size_for_queue
            or pq.max_span() > cfg.consume_max_span
        ):
            return FLOW_CONTROL_DELAY
        mq = state.message_queue
        offset = await self._next_pull_offset(state)
        if offset < 0:  # a failed pull as much as one the broker refused: it counts as one
            raise MQClientError(f"the offset to pull {mq} from could not be read", topic=mq.topic)
        generation = state.generation
        sub = self.rebalance_impl.subscription_inner.get(mq.topic)
        if sub is None:
            sub = build_subscription(mq.topic, "*")
        pull_api = self.pull_api
        begin = time.monotonic()
        addr, raw = await pull_api.pull_kernel(
            mq,
            sub,
            offset,
            cfg.pull_batch_size,
            _PULL_FLAGS,
            cfg.consumer_timeout_millis_when_suspend / 1000.0,
            suspend_timeout_millis=cfg.broker_suspend_max_time_millis,
        )
        result = pull_api.process_pull_result(mq, raw, addr, self._tags.get(mq.topic))
        if state.generation != generation or pq.dropped:
            return 0.0  # a seek (or a drop) happened meanwhile: this answer is stale
        if result.status is PullStatus.FOUND and result.messages:
            msgs = result.messages
            self._count_pull(mq.topic, begin, len(msgs))
            pq.put_messages(msgs, result.max_offset)
            self._cache.append(PolledBatch(msgs, state))
            self._wake()
        elif result.status is PullStatus.OFFSET_ILLEGAL:
            log.warning("The pull request offset illegal, %s, %s", mq, result)
        state.pull_offset = result.next_begin_offset
        return 0.0

    async def _next_pull_offset(self, state: AssignedQueue) -> int:
        if state.seek_offset >= 0:
            offset = state.seek_offset
            state.consume_offset = offset
            state.seek_offset = -1
            state.pull_offset = offset
            return offset
        if state.pull_offset >= 0:
            if state.consume_offset < 0:
                state.consume_offset = state.pull_offset
            return state.pull_offset
        offset = await self.rebalance_impl.compute_pull_from_where(state.message_queue)
        if offset >= 0:
            state.pull_offset = offset
            if state.consume_offset < 0:
                state.consume_offset = offset
        return offset

    # -- poll --------------------------------------------------------------------------------------

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None:
            self._waiter = None
            if not waiter.done():
                waiter.set_result(None)

    async def poll(self, timeout: float | None = None) -> list[MessageExt]:
        """The next pulled batch (one queue, up to pull_batch_size messages), waiting up to
        ``timeout`` seconds (default poll_timeout_millis); [] when nothing arrived in time.

        Raises ``PullFailed`` once a queue's pulls have failed ``PULL_FAILURES_TO_RAISE`` times in
        a row (and again after each further failure): pulled batches are still handed out first,
        and the pulls go on, so polling again recovers once the cause is gone."""
        if self.service_state is not ServiceState.RUNNING:
            raise ServiceStateError("The consumer not running, please start it first.")
        if self.auto_commit:
            self._maybe_auto_commit()
        wait = self.config.poll_timeout_millis / 1000.0 if timeout is None else timeout
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait
        while True:
            cache = self._cache
            while cache:
                batch = cache.popleft()
                state = batch.state
                if state.process_queue.dropped or batch.generation != state.generation:
                    continue
                offset = state.process_queue.remove_messages(batch.msgs)
                if offset >= 0:
                    state.consume_offset = offset
                msgs = batch.msgs
                if state.message_queue.topic == self._retry_topic:
                    msgs = reset_retry_topic(msgs, self._retry_topic)
                if self.config.namespace:
                    strip = self.config.without_namespace
                    msgs = [dataclasses.replace(m, topic=strip(m.topic)) for m in msgs]
                if self._trace_hook is not None:
                    self._trace_hook.polled(self.consumer_group, state.message_queue, msgs)
                return msgs
            failure = self._pull_failure
            if failure is not None:
                self._pull_failure = None
                raise failure
            remaining = deadline - loop.time()
            if remaining <= 0 or self.service_state is not ServiceState.RUNNING:
                return []
            waiter = self._waiter
            if waiter is None or waiter.done():
                waiter = self._waiter = loop.create_future()
            handle = loop.call_later(remaining, settle, waiter)
            try:
                await waiter
            finally:
                handle.cancel()

    # -- positions ---------------------------------------------------------------------------------

    def _state(self, mq: MessageQueue) -> AssignedQueue:
        state = self._assigned.get(self._wire_mq(mq))
        if state is None:
            raise InvalidArgument(f"The message queue is not in assigned list, may be rebalancing, {mq}")
        return state

    async def seek(self, mq: MessageQueue, offset: int) -> None:
        """Read ``mq`` from ``offset`` next; InvalidArgument outside [min offset, max offset]."""
        state = self._state(mq)
        lo, hi = await self.min_offset(mq), await self.max_offset(mq)
        if offset < lo or offset > hi:
            raise InvalidArgument(
                f"Seek offset illegal, seek offset = {offset}, min offset = {lo}, max offset = {hi}"
            )
        state.generation += 1
        state.seek_offset = offset
        state.process_queue.clear()
        self._cache = collections.deque(b for b in self._cache if b.state is not state)
        if state.task is not None:
            state.task.cancel()  # a long poll at the old position would only hold us up
        self._start_pull(state)

    async def seek_to_begin(self, mq: MessageQueue) -> None:
        await self.seek(mq, await self.min_offset(mq))

    async def seek_to_end(self, mq: MessageQueue) -> None:
        await self.seek(mq, await self.max_offset(mq))

    async def min_offset(self, mq: MessageQueue) -> int:
        mq = self._wire_mq(mq)
        return await self.client.api.get_min_offset(await broker_addr_for_admin(self.client, mq), mq)

    async def max_offset(self, mq: MessageQueue) -> int:
        mq = self._wire_mq(mq)
        return await self.client.api.get_max_offset(await broker_addr_for_admin(self.client, mq), mq)

    async def offset_for_timestamp(self, mq: MessageQueue, timestamp: int) -> int:
        """The offset of the first message of ``mq`` stored at or after ``timestamp`` ms."""
        mq = self._wire_mq(mq)
        return await self.pull_api.offset_at_or_after(
            mq, await broker_addr_for_admin(self.client, mq), timestamp, self.client.api.default_timeout
        )

    # -- commits -----------------------------------------------------------------------------------

    def _commit_consumed(self) -> dict[MessageQueue, int]:
        done = {}
        for mq, state in self._assigned.items():
            if state.consume_offset >= 0 and not state.process_queue.dropped:
                self.offset_store.update_offset(mq, state.consume_offset, False)
                done[mq] = state.consume_offset
        return done

    def _maybe_auto_commit(self) -> None:
        now = time.monotonic()
        if now >= self._next_auto_commit:
            self._next_auto_commit = now + self.config.auto_commit_interval_millis / 1000.0
            self._commit_consumed()
            if self.config.message_model is MessageModel.BROADCASTING:
                self._spawn(self.offset_store.persist_all(set(self._assigned)))

    async def _auto_commit_loop(self) -> None:
        interval = self.config.auto_commit_interval_millis / 1000.0
        while True:
            await asyncio.sleep(interval)
            if self.auto_commit:
                try:
                    self._maybe_auto_commit()
                except Exception:
                    log.exception("auto commit failed")

    async def commit_sync(
        self, offsets: Mapping[MessageQueue, int] | None = None, persist: bool = True
    ) -> None:
        """Store what poll() handed out so far (or the given offsets), and persist it now."""
        if offsets is None:
            done = self._commit_consumed()
        else:
            done = {}
            for mq, offset in offsets.items():
                mq = self._wire_mq(mq)
                if mq not in self._assigned:
                    log.warning("commit offset of %s, but it is not assigned", mq)
                    continue
                self.offset_store.update_offset(mq, offset, False)
                done[mq] = offset
        if persist and done:
            await self.offset_store.persist_all(set(self._assigned))

    async def commit(self, message_queues: Iterable[MessageQueue], persist: bool = True) -> None:
        """Commit only these queues' consumed offsets."""
        offsets = {}
        for mq in message_queues:
            mq = self._wire_mq(mq)
            state = self._assigned.get(mq)
            if state is not None and state.consume_offset >= 0:
                offsets[mq] = state.consume_offset
        await self.commit_sync(offsets, persist)

    async def committed(self, mq: MessageQueue) -> int:
        """The stored offset of ``mq`` (-1 if none)."""
        return await self.offset_store.read_offset(self._wire_mq(mq), ReadOffsetType.READ_FROM_STORE)

    def subscription_data(self, topic: str) -> SubscriptionData | None:
        return self.rebalance_impl.subscription_inner.get(self.config.with_namespace(topic))
