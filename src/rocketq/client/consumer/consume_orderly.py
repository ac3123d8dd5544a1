"""ConsumeMessageOrderlyService: each queue's messages go to the listener one batch at a time, in
queue order, and only while this consumer holds the queue's broker lock (clustering).

One consumer task per queue with cached messages, guarded by a per-queue lock that outlives the
ProcessQueue, so a queue dropped and re-added by a rebalance never has two batches in the listener.
While a batch is in the listener its ProcessQueue's ``consume_lock`` is held: a rebalance that takes
the queue away waits for it, persists the committed offset and only then releases the broker lock,
so the next owner starts exactly after the last committed batch.

SUSPEND_CURRENT_QUEUE_A_MOMENT (or an exception) puts the batch back and retries the queue after
suspendCurrentQueueTimeMillis (1 s); past maxReconsumeTimes a message goes to the DLQ instead.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import logging
import time
from collections.abc import Sequence
from typing import Any

from rocketq.client.consumer.consume_concurrently import is_async_listener, listener_status
from rocketq.client.consumer.process_queue import REBALANCE_LOCK_INTERVAL, ProcessQueue
from rocketq.client.consumer.types import ConsumeMessageContext, ConsumeOrderlyContext, ConsumeOrderlyStatus
from rocketq.client.consumer.worker_pool import ThreadListenerPool
from rocketq.codec.bodies import MessageModel, MessageQueue
from rocketq.codec.message import MessageExt

__all__ = ["ConsumeMessageOrderlyService"]

log = logging.getLogger("rocketq.client")

MAX_TIME_CONSUME_CONTINUOUSLY = 60.0  # s before a busy queue yields to the others
SHUTDOWN_BATCH_WAIT = 1.0  # s a shutdown waits for batches in listeners (as a rebalance does)
_SUCCESS = ConsumeOrderlyStatus.SUCCESS
_COMMIT = ConsumeOrderlyStatus.COMMIT
_ROLLBACK = ConsumeOrderlyStatus.ROLLBACK
_SUSPEND = ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT


class ConsumeMessageOrderlyService:
    def __init__(self, consumer: Any, listener: Any) -> None:
        self.consumer = consumer
        self.listener = listener
        self.is_async = is_async_listener(listener)
        cfg = consumer.config
        self.batch_size = max(1, cfg.consume_message_batch_max_size)
        self.group = cfg.consumer_group
        self.clustering = cfg.message_model is MessageModel.CLUSTERING
        self._pool: ThreadListenerPool | None = None
        self._mq_locks: dict[MessageQueue, asyncio.Lock] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._stopped = False
        self.in_listener = 0

    # -- lifecycle ----------------------------------------------------------------------------------

    def start(self) -> None:
        cfg = self.consumer.config
        if not self.is_async:
            self._pool = ThreadListenerPool(
                f"ConsumeMessageThread_{self.group}_", cfg.consume_thread_min, cfg.consume_thread_max
            )
        if self.clustering:
            self._spawn(self._lock_mq_periodically())

    async def shutdown(self, await_termination: float = 0.0) -> None:
        """No new batches; the ones in listeners finish and commit (waiting at least
        SHUTDOWN_BATCH_WAIT s) so the next owner of each queue starts right after them."""
        self._stopped = True
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(await_termination, SHUTDOWN_BATCH_WAIT)
        while self.in_listener and loop.time() < deadline:
            await asyncio.sleep(0.005)
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if self._pool is not None:
            await self._pool.shutdown(0.0)

    def _spawn(self, coro: Any) -> asyncio.Task[Any]:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _lock_mq_periodically(self) -> None:
        await asyncio.sleep(1.0)
        while True:
            try:
                await self.consumer.rebalance_impl.lock_all()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("lockAll failed")
            await asyncio.sleep(REBALANCE_LOCK_INTERVAL)

    @property
    def pending(self) -> int:
        return self.in_listener

    def begin_hand_over(self, pq: ProcessQueue) -> None:
        pq.dropped = True

    async def hand_over(self, pqs: Sequence[ProcessQueue], timeout: float) -> None:
        """Nothing to wait for here: a batch commits right after its listener call, under the
        queue's consume lock, which a rebalance takes before it persists and hands the queue on
        (and a shutdown waits for ``in_listener``)."""

    # -- submit -----------------------------------------------------------------------------------------

    def submit_consume_request(
        self, msgs: Sequence[MessageExt], pq: ProcessQueue, mq: MessageQueue, dispatch_to_consume: bool
    ) -> None:
        if dispatch_to_consume and not self._stopped:
            self._spawn(self._consume_queue(pq, mq))

    def submit_consume_request_later(self, pq: ProcessQueue, mq: MessageQueue, suspend_ms: int) -> None:
        if suspend_ms == -1:
            suspend_ms = self.consumer.config.suspend_current_queue_time_millis
        delay = min(max(suspend_ms, 10), 30_000) / 1000.0
        self._spawn(self._consume_queue(pq, mq, delay))

    def try_lock_later_and_reconsume(self, mq: MessageQueue, pq: ProcessQueue, delay: float) -> None:
        self._spawn(self._lock_then_consume(mq, pq, delay))

    async def _lock_then_consume(self, mq: MessageQueue, pq: ProcessQueue, delay: float) -> None:
        await asyncio.sleep(delay)
        if pq.dropped or self._stopped:
            return
        if await self.consumer.rebalance_impl.lock(mq):
            self.submit_consume_request_later(pq, mq, 10)
        else:
            self.submit_consume_request_later(pq, mq, 3000)

    # -- one queue ----------------------------------------------------------------------------------

    def _may_consume(self, pq: ProcessQueue) -> bool:
        return not self.clustering or (pq.locked and not pq.is_lock_expired())

    async def _consume_queue(self, pq: ProcessQueue, mq: MessageQueue, delay: float = 0.0) -> None:
        if delay:
            await asyncio.sleep(delay)
        if pq.dropped or self._stopped:
            return
        lock = self._mq_locks.get(mq)
        if lock is None:
            lock = self._mq_locks[mq] = asyncio.Lock()
        async with lock:
            if not self._may_consume(pq):
                if not pq.dropped:
                    self.try_lock_later_and_reconsume(mq, pq, 0.1)
                return
            begin = time.monotonic()
            while not self._stopped:
                if pq.dropped:
                    log.warning("the message queue not be able to consume, because it's dropped. %s", mq)
                    return
                if self.clustering and (not pq.locked or pq.is_lock_expired()):
                    log.warning("the message queue not locked or lock expired, so consume later, %s", mq)
                    self.try_lock_later_and_reconsume(mq, pq, 0.01)
                    return
                if time.monotonic() - begin > MAX_TIME_CONSUME_CONTINUOUSLY:
                    self.submit_consume_request_later(pq, mq, 10)
                    return
                msgs = pq.take_messages(self.batch_size)
                if not msgs:
                    return  # take_messages cleared `consuming`: the next pull restarts us
                context = ConsumeOrderlyContext(mq)
                async with pq.consume_lock:
                    if pq.dropped:
                        log.warning(
                            "consumeMessage, the message queue not be able to consume, "
                            "because it's dropped. %s",
                            mq,
                        )
                        return
                    self.in_listener += 1
                    try:
                        start = time.monotonic()
                        status = await self._call_listener(msgs, context, mq)
                        rt = time.monotonic() - start
                        self.consumer.stats.inc_consume_rt(self.group, mq.topic, rt * 1000.0)
                        go_on = await self.process_consume_result(msgs, status, context, pq, mq)
                    finally:
                        self.in_listener -= 1
                    if not go_on:
                        return

    async def _call_listener(
        self, msgs: list[MessageExt], context: ConsumeOrderlyContext, mq: MessageQueue
    ) -> ConsumeOrderlyStatus:
        hooks = self.consumer.hooks
        hook_ctx = ConsumeMessageContext(self.group, mq, msgs) if hooks else None
        for hook in hooks:
            try:
                hook.consume_message_before(hook_ctx)
            except Exception as e:
                log.warning("consumeMessageHook before failed: %s", e)
        hook_type = "SUCCESS"
        try:
            if self._pool is not None:
                result = await self._pool.run(lambda a: self.listener(*a), (msgs, context))
            else:
                result = self.listener(msgs, context)
            if inspect.isawaitable(result):
                result = await result
        except asyncio.CancelledError:
            raise
        except Exception as e:
            log.warning(
                "consumeMessage exception: %r Group: %s Msgs: %d MQ: %s",
                e,
                self.group,
                len(msgs),
                mq,
                exc_info=e,
            )
            status, hook_type = _SUSPEND, "EXCEPTION"
        else:
            status, hook_type = listener_status(result, ConsumeOrderlyStatus, _SUSPEND)
        if hook_ctx is not None:
            hook_ctx.status = status.name
            hook_ctx.success = status in (_SUCCESS, _COMMIT)
            hook_ctx.props["ConsumeContextType"] = hook_type
            for hook in hooks:
                try:
                    hook.consume_message_after(hook_ctx)
                except Exception as e:
                    log.warning("consumeMessageHook after failed: %s", e)
        return status

    async def process_consume_result(
        self,
        msgs: list[MessageExt],
        status: ConsumeOrderlyStatus,
        context: ConsumeOrderlyContext,
        pq: ProcessQueue,
        mq: MessageQueue,
    ) -> bool:
        """Commit or retry the batch; True to go on with the queue's next batch."""
        stats = self.consumer.stats
        commit_offset = -1
        go_on = True
        if context.auto_commit:
            if status is _COMMIT or status is _ROLLBACK:
                log.warning(
                    "the message queue consume result is illegal, we think you want to ack these message %s",
                    mq,
                )
            if status in (_SUCCESS, _COMMIT, _ROLLBACK):
                commit_offset = pq.commit()
                stats.inc_consume_ok_tps(self.group, mq.topic, len(msgs))
            else:
                stats.inc_consume_failed_tps(self.group, mq.topic, len(msgs))
                if await self._retry_or_dead_letter(msgs, pq, mq):
                    self.submit_consume_request_later(pq, mq, context.suspend_current_queue_time_millis)
                    go_on = False
                else:
                    commit_offset = pq.commit()
        else:
            if status is _SUCCESS:
                stats.inc_consume_ok_tps(self.group, mq.topic, len(msgs))
            elif status is _COMMIT:
                commit_offset = pq.commit()
            elif status is _ROLLBACK:
                pq.rollback()
                self.submit_consume_request_later(pq, mq, context.suspend_current_queue_time_millis)
                go_on = False
            else:
                stats.inc_consume_failed_tps(self.group, mq.topic, len(msgs))
                if await self._retry_or_dead_letter(msgs, pq, mq):
                    self.submit_consume_request_later(pq, mq, context.suspend_current_queue_time_millis)
                    go_on = False
        if commit_offset >= 0:
            # Committed even when the queue was dropped meanwhile: whoever dropped it waits for this
            # batch (consume_lock) before persisting, so the next owner starts right after it.
            self.consumer.offset_store.update_offset(mq, commit_offset, False)
        return go_on

    def _max_reconsume_times(self) -> int:
        configured = int(self.consumer.config.max_reconsume_times)
        return configured if configured != -1 else 2**31 - 1  # -1: retry forever, in order

    async def _retry_or_dead_letter(self, msgs: list[MessageExt], pq: ProcessQueue, mq: MessageQueue) -> bool:
        """Put the batch back (reconsume times + 1), except messages past the limit, which go to the
        DLQ when the broker takes them. True when something is to be consumed again."""
        limit = self._max_reconsume_times()
        again: list[MessageExt] = []
        for msg in msgs:
            if msg.reconsume_times >= limit and await self.consumer.send_message_back_to_dlq(
                msg, limit, mq.broker_name
            ):
                continue  # stays "taken": committed with the next successful batch
            again.append(dataclasses.replace(msg, reconsume_times=msg.reconsume_times + 1))
        if again:
            pq.make_message_to_consume_again(again)
            return True
        return False
