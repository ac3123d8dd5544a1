"""The producer's automatic batching on the event loop (RocketMQ 5's autoBatch): the driver of
``accumulator.py``'s lanes.

``AutoBatcher.submit`` takes one single-message send. When the message's queue has no request in
flight it goes out at once as a plain SEND_MESSAGE_V2 (what the producer sends without batching);
otherwise it is encoded as a batch item and gathered, and the gathered items leave as one
SEND_BATCH_MESSAGE when their lane's request ends (or a bound of the accumulator is reached, or
``batch_max_delay_ms`` passes); a lane of unordered messages has up to ``PIPELINE`` requests in
flight, and what it gathered in one turn of the event loop leaves at the end of that turn while it
has room. Each caller's future gets its own SendResult (its UNIQ_KEY, the
queue, the batch's first offset plus its index, its own offset msg id) or the batch's error.

A batch carries no UNIQ_KEY of its own (``SendEncoder.batch_of``), so Apache brokers give every
message its own id. Messages a batch cannot carry as Java's ``canBatch`` says (delayed, timed,
%RETRY%, transactional, replies) and bodies the producer would compress go the plain way.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from functools import partial
from typing import TYPE_CHECKING, Any, Final

from rocketq.client.api import _send_result
from rocketq.client.message import Message, MessageQueue, SendResult
from rocketq.client.producer.accumulator import PIPELINE, Accumulator, Lane
from rocketq.client.producer.kernel import PreparedSend
from rocketq.client.producer.selector import SelectorLike
from rocketq.client.producer.send_call import SendCall, SendTarget, fixed_queue
from rocketq.client.route import TopicPublishInfo

if TYPE_CHECKING:
    from rocketq.client.producer.producer import Producer

__all__ = ["AutoBatcher"]

# Properties of messages that go the plain way: Java's canBatch (producer group of a transaction,
# delay and timer times) plus the prepared flag, and request-reply's replies, which have their own
# request code. A request may be batched: brokers put CLUSTER (which the replier needs) on every
# message of a batch as on a single send.
_NOT_BATCHED: Final = frozenset({
    "PGROUP", "TRAN_MSG", "DELAY", "TIMER_DELAY_MS", "TIMER_DELAY_SEC", "TIMER_DELIVER_MS",
    "__STARTDELIVERTIME", "MSG_TYPE",
})
_RETRY_PREFIX: Final = "%RETRY%"

# One gathered send: the encoded batch item, its UNIQ_KEY, the caller's future, its deadline.
_Item = tuple[bytes, str, "asyncio.Future[SendResult]", float]


class AutoBatcher:
    """The automatic batching of one producer (made at the producer's start)."""

    __slots__ = ("_acc", "_compress_over", "_delay", "_encoder", "_loop", "_producer", "_sticky",
                 "_sticky_nowait", "_times")

    def __init__(self, producer: Producer) -> None:
        config = producer.config
        self._producer = producer
        self._loop = producer.loop
        self._encoder = producer._encoder
        self._acc: Accumulator[_Item] = Accumulator(
            config.batch_max_bytes, config.total_batch_max_bytes, config.max_message_size)
        self._delay = config.batch_max_delay_ms / 1000.0
        self._compress_over = config.compress_msg_body_over_howmuch
        # the lane each topic's unordered messages go to (one table per waitStoreMsgOK)
        self._sticky: dict[str, Lane[_Item]] = {}
        self._sticky_nowait: dict[str, Lane[_Item]] = {}
        self._times = 1 + max(config.retry_times_when_send_async_failed, config.retry_times_when_send_failed)

    @property
    def held_bytes(self) -> int:
        """Bytes gathered and not yet sent (bounded by total_batch_max_bytes)."""
        return self._acc.held

    def submit(
        self,
        msg: Message,
        timeout: float,
        selector: SelectorLike | None,
        arg: Any,
        queue: MessageQueue | None,
    ) -> asyncio.Future[SendResult] | None:
        """Send ``msg`` through its queue's lane; None when it must go the plain way (a message a
        batch cannot carry, or a topic whose route is not known yet)."""
        props = msg.properties
        if msg.delay_level > 0 or len(msg.body) > self._compress_over or (
                props and not _NOT_BATCHED.isdisjoint(props)):
            return None
        acc = self._acc
        topic = msg.topic
        wait = msg.wait_store_msg_ok
        fixed = selector is not None or queue is not None
        if not fixed:
            # Sticky, as Kafka's partitioner: an unordered message joins the lane the previous one
            # went to while that lane is busy, and the queues rotate per batch rather than per
            # message, so gathered batches are as large as the traffic allows. A busy lane's
            # topic passed the checks below already: the common send skips them.
            sticky = self._sticky if wait else self._sticky_nowait
            lane = sticky.get(topic)
            if lane is None or not lane.inflight:
                info = self._route(topic)
                if info is None:
                    return None
                mq = self._producer.fault_strategy.select_one_message_queue(info, None)
                lane = sticky[topic] = acc.lane((mq, wait, False, topic), PIPELINE)
            else:
                mq = lane.key[0]  # type: ignore[index]
        else:
            info = self._route(topic)
            if info is None:
                return None
            p = self._producer
            wire_topic = p.config.with_namespace(topic)
            mq = fixed_queue(p, info, topic, wire_topic, SendTarget(msg, selector, arg, queue))
            lane = acc.lane((mq, wait, True, topic))
        loop = self._loop
        if not lane.inflight:  # nothing outstanding to this queue: go at once, alone
            prep = self._encoder.single(msg)
            fut: asyncio.Future[SendResult] = loop.create_future()
            acc.start(lane)
            trace = self._producer.trace
            if trace is not None:
                trace.watch(prep, msg, fut)
            call = SendCall(self._producer, prep, fut, timeout, 1 if fixed else self._times)
            call.mq = mq
            call.flush = True
            call.run()
            fut.add_done_callback(partial(self._single_done, lane))
            return fut
        data, uniq = self._encoder.batch_item(msg)
        fut = loop.create_future()
        trace = self._producer.trace
        if trace is not None:  # one trace record per message, with its own result (as unbatched)
            trace.watch(PreparedSend(topic, msg.body, {}, uniq), msg, fut)
        batch = acc.offer(lane, (data, uniq, fut, loop.time() + timeout), len(msg.body), len(data))
        if batch is not None:
            if not fixed:  # full: the next message rotates to another queue
                (self._sticky if wait else self._sticky_nowait).pop(topic, None)
            self._send(lane, batch)
        elif len(lane.items) == 1:
            if lane.inflight < lane.limit:
                # the turn's other sends are gathered with this one: they leave together after it
                loop.call_soon(self._ready, lane)
            else:
                loop.call_later(self._delay, self._expire, lane, lane.generation)
        return fut

    async def drain(self, timeout: float) -> None:
        """Send every gathered message now and wait (at most ``timeout`` s) until every request
        of every lane is answered: what the producer does before it shuts down."""
        acc = self._acc
        for lane in list(acc.lanes.values()):
            if lane.items:
                self._send(lane, acc.cut(lane))
        deadline = self._loop.time() + timeout
        while acc.lanes and self._loop.time() < deadline:
            await asyncio.sleep(0.005)

    def _route(self, topic: str) -> TopicPublishInfo | None:
        """The publish info of a topic batches may go to (None: the plain way: a %RETRY% topic,
        or one whose route is not known yet)."""
        if topic.startswith(_RETRY_PREFIX):
            return None
        p = self._producer
        info = p.topic_publish_info_table.get(p.config.with_namespace(topic))
        return info if info is not None and info.ok() else None

    # -- lanes ------------------------------------------------------------------------------------

    def _single_done(self, lane: Lane[_Item], _: asyncio.Future[SendResult]) -> None:
        batch = self._acc.done(lane)
        if batch is not None:
            self._send(lane, batch)

    def _ready(self, lane: Lane[_Item]) -> None:
        for batch in self._acc.ready(lane):
            self._send(lane, batch)
        if lane.items:  # the lane filled up meanwhile: its answers or the delay send these
            self._loop.call_later(self._delay, self._expire, lane, lane.generation)

    def _expire(self, lane: Lane[_Item], generation: int) -> None:
        batch = self._acc.expire(lane, generation)
        if batch is not None:
            self._send(lane, batch)

    def _send(self, lane: Lane[_Item], items: list[_Item]) -> None:
        while True:
            live = [item for item in items if not item[2].done()]  # callers may have cancelled
            if live:
                break
            next_items = self._acc.done(lane)
            if next_items is None:
                return
            items = next_items
        mq: MessageQueue
        wait: bool
        fixed: bool
        topic: str
        mq, wait, fixed, topic = lane.key  # type: ignore[misc]
        fut: asyncio.Future[SendResult] = self._loop.create_future()
        data, ids, futs, deadlines = zip(*live, strict=True)  # the items' columns, in one C pass
        try:
            prep = self._encoder.batch_of(topic, wait, data, ids)
        except Exception as exc:
            fut.set_exception(exc)
        else:
            call = SendCall(self._producer, prep, fut, max(deadlines) - self._loop.time(),
                            1 if fixed else self._times)
            call.mq = mq
            call.run()
        fut.add_done_callback(partial(self._batch_done, lane, futs, ids))

    def _batch_done(self, lane: Lane[_Item], futs: Sequence[asyncio.Future[SendResult]], ids: Sequence[str],
                    fut: asyncio.Future[SendResult]) -> None:
        self._single_done(lane, fut)  # the next batch of this lane leaves before these are answered
        if fut.cancelled():
            exc: BaseException | None = asyncio.CancelledError()
        else:
            exc = fut.exception()
        if exc is not None:
            for f in futs:
                if not f.done():
                    f.set_exception(exc)
            return
        for f, result in zip(futs, split_result(fut.result(), ids), strict=True):
            if not f.done():
                f.set_result(result)


def split_result(result: SendResult, ids: Sequence[str]) -> list[SendResult]:
    """One SendResult per message of a batch: its own UNIQ_KEY and offset msg id, the batch's
    first queue offset plus its index (as Java's ProduceAccumulator.splitSendResults).

    A broker that answers one offset msg id for the whole batch (a batch consume queue) gives
    every message the batch's offset and id, as Java does.
    """
    offset_ids = result.offset_msg_id.split(",") if result.offset_msg_id else []
    per_message = len(offset_ids) == len(ids)
    base = result.queue_offset
    status, mq, txn, region, trace = (result.status, result.message_queue, result.transaction_id,
                                      result.region_id, result.trace_on)
    return [
        _send_result(status, uniq, mq, base + i if per_message else base,
                     offset_ids[i] if per_message else result.offset_msg_id, txn, region, trace)
        for i, uniq in enumerate(ids)
    ]
