"""ConsumeMessageConcurrentlyService: batches of up to consumeMessageBatchMaxSize messages go to the
listener in parallel (any order, any queue); each answer moves the queue's commit offset.

A failed batch (RECONSUME_LATER, an exception, no answer) goes back to the broker with
CONSUMER_SEND_MSG_BACK so it returns later through %RETRY%<group> (clustering), or is dropped with a
warning (broadcasting). A message the broker would not take back is consumed again locally after
5 s. A batch still in the listener after consumeTimeout minutes is sent back and forgotten.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import inspect
import logging
import time
from collections.abc import Sequence
from types import CoroutineType
from typing import Any

from rocketq.client.consumer.process_queue import ProcessQueue
from rocketq.client.consumer.types import (
    ConsumeConcurrentlyContext,
    ConsumeMessageContext,
    ConsumeStatus,
)
from rocketq.client.consumer.worker_pool import AsyncListenerPool, ThreadListenerPool
from rocketq.codec.bodies import MessageModel, MessageQueue
from rocketq.codec.message import MessageExt

__all__ = ["ConsumeMessageConcurrentlyService", "ConsumeRequest", "is_async_listener", "listener_status"]

log = logging.getLogger("rocketq.client")

RECONSUME_LOCALLY_DELAY = 5.0  # s, for messages the broker refused to take back
CHUNK_WHEN_PENDING = 4  # jobs queued per consume thread before batches of one pull travel together
# A listener that usually (in most recent batches) takes less than this costs less than the
# hand-off that would run it in parallel, so the batches of one pull travel as one job. Slower
# (I/O-bound) listeners keep one job per batch and so their parallelism. "Usually", not "on
# average": a thread descheduled on a busy machine must not flip the choice.
FAST_LISTENER_RT = 100e-6  # s
_FAST_SMOOTHING = 1 / 16
# A multi-batch job whose current batch has been in the listener this long gives its waiting
# batches back for one-by-one dispatch, so one stuck call does not hold up the rest of a pull.
STALLED_LISTENER_RT = 0.01  # s
EXPIRED_SEND_BACK_DELAY_LEVEL = 3
HAND_OVER_POLL = 0.002  # s between looks at the jobs a hand-over waits for
_SUCCESS = ConsumeStatus.CONSUME_SUCCESS
_LATER = ConsumeStatus.RECONSUME_LATER


def is_async_listener(listener: Any) -> bool:
    """A coroutine function (or an object whose __call__ is one) runs on the loop, not in a thread."""
    return inspect.iscoroutinefunction(listener) or inspect.iscoroutinefunction(
        getattr(listener, "__call__", None)  # noqa: B004 - callable objects with an async __call__
    )


def listener_status(value: Any, enum_type: type[Any], default: Any) -> tuple[Any, str]:
    """A listener's answer as ``enum_type`` plus the hook return type; junk becomes ``default``."""
    if isinstance(value, enum_type):
        return value, "SUCCESS" if value.name in ("CONSUME_SUCCESS", "SUCCESS", "COMMIT") else "FAILED"
    if isinstance(value, str) and value in enum_type.__members__:
        return listener_status(enum_type[value], enum_type, default)
    if value is None:
        return default, "RETURNNULL"
    log.warning(
        "consumeMessage returned %r, not a %s; treated as %s", value, enum_type.__name__, default.name
    )
    return default, "FAILED"


class ConsumeRequest:
    __slots__ = (
        "accounted",
        "begin",
        "context",
        "expired",
        "finished",
        "hook_type",
        "message_queue",
        "msgs",
        "pending",
        "process_queue",
        "rt",
        "status",
    )

    def __init__(
        self, msgs: list[MessageExt], process_queue: ProcessQueue, message_queue: MessageQueue
    ) -> None:
        self.msgs = msgs
        self.process_queue = process_queue
        self.message_queue = message_queue
        self.status: ConsumeStatus = _LATER
        self.context: ConsumeConcurrentlyContext | None = None
        self.begin = 0.0
        self.rt = 0.0
        self.expired = False
        self.hook_type = ""
        # A sync listener that returned an awaitable: finished on the loop.
        self.pending: Any = None
        # Set (last) by whoever ran the listener once status and rt are final; the loop may then
        # account this batch ahead of the rest of its job (``accounted``), see flush_results.
        self.finished = False
        self.accounted = False


class _Job:
    """Batches of one queue handed to the listener pool together. The worker takes them one at a
    time from ``waiting``; the loop may take back those not started (see ``_check_stall``)."""

    __slots__ = ("batch_start", "ran", "recheck", "skipped", "timer", "waiting")

    def __init__(self, reqs: list[ConsumeRequest]) -> None:
        self.waiting = collections.deque(reqs)
        self.ran: list[ConsumeRequest] = []
        # Batches never given to the listener because their queue was dropped first.
        self.skipped: list[ConsumeRequest] = []
        self.batch_start = 0.0  # when the batch now in the listener started (0: none yet)
        self.timer: asyncio.TimerHandle | None = None
        self.recheck = STALLED_LISTENER_RT

    def next_batch(self) -> ConsumeRequest | None:
        """The next batch for the listener; None when none is left or the queue was dropped.

        The dropped check sits right before each listener call (as RocketMQ's ConsumeRequest.run
        does): the next owner of the queue delivers these batches, and running them here too
        would only duplicate them. During a hand-over, batches below messages consumed already
        still run (see begin_hand_over).
        """
        try:
            req = self.waiting.popleft()  # atomic: the loop may take the rest back meanwhile
        except IndexError:
            return None
        pq = req.process_queue
        if pq.dropped and not (pq.handing_over and req.msgs[0].queue_offset < pq.hand_over_below):
            self.skipped.append(req)
            self.skipped += self.take_waiting()  # one job is one queue: the rest is dropped too
            return None
        self.ran.append(req)
        self.batch_start = time.monotonic()
        return req

    def take_waiting(self) -> list[ConsumeRequest]:
        taken: list[ConsumeRequest] = []
        waiting = self.waiting
        while True:
            try:
                taken.append(waiting.popleft())
            except IndexError:
                return taken


class ConsumeMessageConcurrentlyService:
    def __init__(self, consumer: Any, listener: Any) -> None:
        self.consumer = consumer
        self.listener = listener
        self.is_async = is_async_listener(listener)
        cfg = consumer.config
        self.batch_size = max(1, cfg.consume_message_batch_max_size)
        self.group = cfg.consumer_group
        self._pool: ThreadListenerPool | AsyncListenerPool | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._timers: set[asyncio.TimerHandle] = set()
        self._stopped = False
        self._stats_items: dict[str, tuple[Any, Any, Any]] = {}
        # Running share of batches whose listener call was fast; starts "slow" until measured.
        self._fast_share = 0.0
        self._loop: asyncio.AbstractEventLoop | None = None

    # -- lifecycle ----------------------------------------------------------------------------------

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        cfg = self.consumer.config
        name = f"ConsumeMessageThread_{self.group}_"
        if self.is_async:
            self._pool = AsyncListenerPool(name, cfg.consume_thread_max)
        else:
            self._pool = ThreadListenerPool(name, cfg.consume_thread_min, cfg.consume_thread_max)
        self._spawn(self._clean_expired_loop(cfg.consume_timeout * 60.0))

    async def shutdown(self, await_termination: float = 0.0) -> None:
        self._stopped = True
        for timer in self._timers:
            timer.cancel()
        self._timers.clear()
        if self._pool is not None:
            await self._pool.shutdown(await_termination)
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    @property
    def pending(self) -> int:
        return self._pool.pending if self._pool is not None else 0

    @property
    def listener_waking(self) -> bool:
        """An async listener is about to run on the loop for what was just submitted."""
        pool = self._pool
        return isinstance(pool, AsyncListenerPool) and pool.waking

    # -- submit -------------------------------------------------------------------------------------

    def submit_consume_request(
        self, msgs: Sequence[MessageExt], pq: ProcessQueue, mq: MessageQueue, dispatch_to_consume: bool = True
    ) -> None:
        if self._stopped or not msgs:
            return
        if type(msgs) is not list:
            msgs = list(msgs)
        size = self.batch_size
        if len(msgs) <= size:
            self._submit([ConsumeRequest(msgs, pq, mq)])
            return
        reqs = [ConsumeRequest(msgs[i : i + size], pq, mq) for i in range(0, len(msgs), size)]
        pool = self._pool
        if self._fast_share > 0.5 or (
            isinstance(pool, ThreadListenerPool) and pool.pending >= CHUNK_WHEN_PENDING * pool.workers
        ):
            # A fast listener, or every thread has plenty queued already: hand these over as one
            # job (the listener is still called once per batch) so the pull costs one hand-off and
            # one commit, not one per batch. Otherwise they go one by one, for parallelism (a
            # listener waiting on I/O) and latency.
            self._submit(reqs)
            return
        for req in reqs:
            self._submit([req])

    def _submit(self, reqs: list[ConsumeRequest], first: bool = False) -> None:
        """One job of one or more batches, all of one queue."""
        pool = self._pool
        if pool is None:
            return
        now = time.monotonic()
        in_flight = reqs[0].process_queue.in_flight
        job = _Job(reqs)
        for req in reqs:
            req.begin = now
            in_flight[req.msgs[0].queue_offset] = req
        if len(reqs) > 1 and self._loop is not None:
            job.timer = self._loop.call_later(STALLED_LISTENER_RT, self._check_stall, job)
        try:
            if isinstance(pool, AsyncListenerPool):
                pool.submit(self._consume_async, job, self._finish_job)
            else:
                pool.submit(self._consume_sync_job, job, self._finish_job, first)
        except RuntimeError:  # shut down meanwhile: the messages are re-delivered to the group
            if job.timer is not None:
                job.timer.cancel()
            for req in reqs:
                in_flight.pop(req.msgs[0].queue_offset, None)

    def _check_stall(self, job: _Job) -> None:
        """A multi-batch job still has batches waiting: if its current batch has been in the
        listener too long, take the waiting ones back and dispatch them one by one."""
        job.timer = None
        if not job.waiting or self._loop is None:
            return
        started = job.batch_start
        if not started:  # still queued behind other jobs: look again, less and less often
            job.recheck = min(job.recheck * 2, 1.0)
        elif time.monotonic() - started > STALLED_LISTENER_RT:
            # Ahead of everything queued: behind later pulls of the queue they would hold its
            # committed offset back while those are consumed (re-delivered after a move).
            for req in job.take_waiting():
                self._submit([req], first=True)
            return
        job.timer = self._loop.call_later(job.recheck, self._check_stall, job)

    def _consume_sync_job(self, job: _Job) -> None:
        """On a consume thread."""
        while (req := job.next_batch()) is not None:
            self._consume_sync(req)

    def _finish_job(self, job: _Job) -> None:
        """The results of one job (batches of one pull, so of one queue): the fully acknowledged
        batches are accounted and committed together; any other takes the one-batch path."""
        if job.timer is not None:
            job.timer.cancel()
        if job.skipped:
            self._forget_skipped(job.skipped)
        reqs = job.ran
        done: list[MessageExt] = []
        ok_msgs = rt_ms = ok_reqs = 0
        fast = 0
        last: ConsumeRequest | None = None
        for req in reqs:
            if req.accounted:
                continue
            ctx = req.context
            n = len(req.msgs)
            if (
                req.pending is not None
                or req.status is not _SUCCESS
                or _discarded(req.process_queue)
                or req.expired
                or (ctx is not None and ctx.ack_index < n - 1)
            ):
                self._finish(req)
                continue
            req.process_queue.in_flight.pop(req.msgs[0].queue_offset, None)
            done += req.msgs
            ok_msgs += n
            ok_reqs += 1
            rt_ms += int(req.rt * 1000.0)
            fast += req.rt < FAST_LISTENER_RT
            last = req
        if last is None:
            return
        self._fast_share += (fast / ok_reqs - self._fast_share) * _FAST_SMOOTHING
        ok_item, _, rt_item = self._items(last.message_queue.topic)
        now = time.monotonic()
        ok_item.add(ok_msgs, ok_reqs, now)
        rt_item.add(rt_ms, ok_reqs, now)
        self._commit(last.process_queue, last.message_queue, done)

    def _forget_skipped(self, reqs: list[ConsumeRequest]) -> None:
        in_flight = reqs[0].process_queue.in_flight
        for req in reqs:
            in_flight.pop(req.msgs[0].queue_offset, None)
        log.info(
            "the message queue not be able to consume, because it's dropped. group=%s %s, batches=%d",
            self.group,
            reqs[0].message_queue,
            len(reqs),
        )

    def begin_hand_over(self, pq: ProcessQueue) -> None:
        """Drop ``pq`` for a rebalance or a shutdown that persists its offset next (hand_over).

        Its batches not started yet are skipped from now on, except those below messages
        consumed or inside the listener already (the rest of a job another thread ran ahead
        of, a batch re-queued by the stall check): left out, they would hold the committed
        offset below everything consumed after them, which the next owner would consume again.
        """
        below = pq.removed_max
        for req in pq.in_flight.values():
            if req.context is not None:  # the listener has it (or had it)
                below = max(below, req.msgs[0].queue_offset)
        pq.hand_over_below = below
        pq.handing_over = True
        pq.dropped = True

    async def hand_over(self, pqs: Sequence[ProcessQueue], timeout: float) -> None:
        """Wait (up to ``timeout`` s) for the started consume jobs of the ``pqs`` (dropped, and
        ``handing_over``) to finish, committing each batch as its listener call returns. Then
        the offsets persisted for the next owners are past everything consumed here, except
        batches still inside a listener at the timeout."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            busy = False
            for pq in pqs:
                self.flush_results(pq)
                below = pq.hand_over_below
                busy = busy or any(
                    not r.finished and (r.context is not None or r.msgs[0].queue_offset < below)
                    for r in pq.in_flight.values()
                )
            if not busy or loop.time() >= deadline:
                return
            await asyncio.sleep(HAND_OVER_POLL)

    def flush_results(self, pq: ProcessQueue) -> None:
        """Account now every batch of ``pq`` whose listener call already returned: whole jobs
        waiting in the thread pool's result queue, and the finished batches of jobs still
        running."""
        pool = self._pool
        if isinstance(pool, ThreadListenerPool):
            pool.drain()
        for req in list(pq.in_flight.values()):
            if req.finished and not req.accounted and req.pending is None:
                req.accounted = True
                pq.in_flight.pop(req.msgs[0].queue_offset, None)
                self.process_consume_result(req)

    def submit_consume_request_later(
        self, msgs: list[MessageExt], pq: ProcessQueue, mq: MessageQueue
    ) -> None:
        loop = asyncio.get_running_loop()
        handle: asyncio.TimerHandle

        def fire() -> None:
            self._timers.discard(handle)
            if not pq.dropped:
                self.submit_consume_request(msgs, pq, mq, True)

        handle = loop.call_later(RECONSUME_LOCALLY_DELAY, fire)
        self._timers.add(handle)

    # -- the listener call ------------------------------------------------------------------------------

    def _hook_context(self, req: ConsumeRequest) -> ConsumeMessageContext | None:
        hooks = self.consumer.hooks
        if not hooks:
            return None
        ctx = ConsumeMessageContext(self.group, req.message_queue, req.msgs)
        for hook in hooks:
            try:
                hook.consume_message_before(ctx)
            except Exception as e:
                log.warning("consumeMessageHook %s before failed: %s", _hook_name(hook), e)
        return ctx

    def _hook_after(self, hook_ctx: ConsumeMessageContext | None, req: ConsumeRequest) -> None:
        if hook_ctx is None:
            return
        hook_ctx.status = req.status.name
        hook_ctx.success = req.status is _SUCCESS
        hook_ctx.props["ConsumeContextType"] = req.hook_type
        for hook in self.consumer.hooks:
            try:
                hook.consume_message_after(hook_ctx)
            except Exception as e:
                log.warning("consumeMessageHook %s after failed: %s", _hook_name(hook), e)

    def _consume_sync(self, req: ConsumeRequest) -> None:
        """On a consume thread."""
        context = ConsumeConcurrentlyContext(req.message_queue)
        req.context = context
        hook_ctx = self._hook_context(req)
        start = time.monotonic()
        try:
            result = self.listener(req.msgs, context)
        except Exception as e:
            self._log_failure(req, e)
            req.status, req.hook_type = _LATER, "EXCEPTION"
        else:
            if result is _SUCCESS:  # the common answer, without the generic checks
                req.status, req.hook_type = _SUCCESS, "SUCCESS"
            elif inspect.isawaitable(result):
                req.pending = result
                return
            else:
                req.status, req.hook_type = listener_status(result, ConsumeStatus, _LATER)
        req.rt = time.monotonic() - start
        if hook_ctx is not None:
            self._hook_after(hook_ctx, req)
        req.finished = True

    async def _consume_async(self, job: _Job) -> None:
        """On the loop: the batches of one job in turn."""
        listener = self.listener
        monotonic = time.monotonic
        # Read once a job: with batch size 1 a pull's job runs the listener 32 times.
        hooked = bool(self.consumer.hooks)
        while (req := job.next_batch()) is not None:
            context = ConsumeConcurrentlyContext(req.message_queue)
            req.context = context
            hook_ctx = self._hook_context(req) if hooked else None
            start = monotonic()
            try:
                result = listener(req.msgs, context)
                # an ``async def`` listener's coroutine without inspect's generic checks
                if result.__class__ is CoroutineType or inspect.isawaitable(result):
                    result = await result
            except asyncio.CancelledError:
                raise
            except Exception as e:
                self._log_failure(req, e)
                req.status, req.hook_type = _LATER, "EXCEPTION"
            else:
                if result is _SUCCESS:
                    req.status, req.hook_type = _SUCCESS, "SUCCESS"
                else:
                    req.status, req.hook_type = listener_status(result, ConsumeStatus, _LATER)
            req.rt = monotonic() - start
            if hook_ctx is not None:
                self._hook_after(hook_ctx, req)
            req.finished = True

    def _log_failure(self, req: ConsumeRequest, e: Exception) -> None:
        log.warning(
            "consumeMessage exception: %r Group: %s Msgs: %d MQ: %s",
            e,
            self.group,
            len(req.msgs),
            req.message_queue,
            exc_info=e,
        )

    # -- results (on the loop) -------------------------------------------------------------------------------

    def _finish(self, req: ConsumeRequest) -> None:
        if req.pending is not None:
            awaitable, req.pending = req.pending, None
            self._spawn(self._finish_awaitable(req, awaitable))
            return
        pq = req.process_queue
        pq.in_flight.pop(req.msgs[0].queue_offset, None)
        if _discarded(pq) or req.expired:
            log.warning(
                "processQueue is dropped without process consume result. messageQueue=%s, msgs=%d",
                req.message_queue,
                len(req.msgs),
            )
            return
        self.process_consume_result(req)

    async def _finish_awaitable(self, req: ConsumeRequest, awaitable: Any) -> None:
        start = time.monotonic()
        try:
            result = await awaitable
        except Exception as e:
            self._log_failure(req, e)
            req.status, req.hook_type = _LATER, "EXCEPTION"
        else:
            req.status, req.hook_type = listener_status(result, ConsumeStatus, _LATER)
        req.rt += time.monotonic() - start
        self._finish(req)

    def process_consume_result(self, req: ConsumeRequest) -> None:
        msgs = req.msgs
        n = len(msgs)
        ctx = req.context
        consumer = self.consumer
        ok_item, failed_item, rt_item = self._items(req.message_queue.topic)
        self._fast_share += ((req.rt < FAST_LISTENER_RT) - self._fast_share) * _FAST_SMOOTHING
        now = time.monotonic()
        if req.status is _SUCCESS:
            ack = n - 1 if ctx is None or ctx.ack_index >= n else ctx.ack_index
            ok_item.add(ack + 1, 1, now)
            if ack + 1 < n:
                failed_item.add(n - ack - 1, 1, now)
        else:
            ack = -1
            failed_item.add(n, 1, now)
        rt_item.add(int(req.rt * 1000.0), 1, now)
        failed = msgs[ack + 1 :]
        if failed:
            if consumer.config.message_model is MessageModel.BROADCASTING:
                for m in failed:
                    log.warning("BROADCASTING, the message consume failed, drop it, %s", m.msg_id)
            else:
                delay = ctx.delay_level_when_next_consume if ctx is not None else 0
                self._spawn(self._send_back_then_commit(req, failed, delay))
                return
        self._commit(req.process_queue, req.message_queue, msgs)

    def _items(self, topic: str) -> tuple[Any, Any, Any]:
        items = self._stats_items.get(topic)
        if items is None:
            items = self._stats_items[topic] = self.consumer.stats.consume_items(self.group, topic)
        return items

    def _commit(self, pq: ProcessQueue, mq: MessageQueue, done: Sequence[MessageExt]) -> None:
        offset = pq.remove_messages(done)
        if offset >= 0 and not _discarded(pq):
            self.consumer.offset_store.update_offset(mq, offset, True)

    async def _send_back_then_commit(
        self, req: ConsumeRequest, failed: Sequence[MessageExt], delay_level: int
    ) -> None:
        mq = req.message_queue
        refused: list[MessageExt] = []
        for msg in failed:
            if not await self.consumer.send_message_back(msg, delay_level, mq.broker_name):
                refused.append(dataclasses.replace(msg, reconsume_times=msg.reconsume_times + 1))
        if refused:
            kept = {m.queue_offset for m in refused}
            self._commit(req.process_queue, mq, [m for m in req.msgs if m.queue_offset not in kept])
            self.submit_consume_request_later(refused, req.process_queue, mq)
        else:
            self._commit(req.process_queue, mq, req.msgs)

    # -- consume timeout ---------------------------------------------------------------------------------

    async def _clean_expired_loop(self, timeout: float) -> None:
        if timeout <= 0:
            return
        while True:
            await asyncio.sleep(timeout)
            try:
                await self.clean_expired_msg(timeout)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("cleanExpiredMsg failed")

    async def clean_expired_msg(self, timeout: float) -> int:
        """Send back batches that have been in the listener longer than ``timeout`` s; returns how many."""
        if self.consumer.config.message_model is not MessageModel.CLUSTERING:
            return 0
        now = time.monotonic()
        expired = 0
        for mq, pq in list(self.consumer.process_queue_table.items()):
            for req in list(pq.in_flight.values()):
                if now - req.begin <= timeout or req.expired:
                    continue
                req.expired = True
                pq.in_flight.pop(req.msgs[0].queue_offset, None)
                expired += 1
                for msg in req.msgs:
                    if not await self.consumer.send_message_back(
                        msg, EXPIRED_SEND_BACK_DELAY_LEVEL, mq.broker_name
                    ):
                        log.error("send expire msg back failed, %s", msg.msg_id)
                self._commit(pq, mq, req.msgs)
        return expired


def _discarded(pq: ProcessQueue) -> bool:
    """Results of this queue's batches no longer count (RocketMQ: "dropped without process
    consume result"): it was dropped and its offset has been handed over already."""
    return pq.dropped and not pq.handing_over


def _hook_name(hook: Any) -> str:
    name = getattr(hook, "hook_name", None)
    return str(name()) if callable(name) else type(hook).__name__
