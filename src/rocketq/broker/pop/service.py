"""PopService: RocketMQ 5's pop consumption as plain methods (the remoting processors and a later
gRPC front end both call these).

A pop reads a queue from the group's offset, writes a checkpoint (``ck``) of what it handed out to
the revive topic, moves the group offset past it and answers; an ack writes an ``ack`` / ``bAck``
record there too. The revive topic is the durable truth (a store topic like any other, so it
survives kill -9 as the messages do); `CheckpointTable` is its in-memory view, and `ReviveService`
re-puts what was not acked in time to the pop retry topic ``%RETRY%group_topic``.
Orderly pops write no checkpoint: the queue stays blocked and the offset stays put until the batch
is acked (`OrderInfoTable`).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import random
import time
from dataclasses import dataclass, field, replace
from functools import partial
from typing import TYPE_CHECKING, Any

from rocketq.broker.pop.checkpoints import CheckpointTable
from rocketq.broker.pop.order import OrderInfoTable
from rocketq.broker.pop.polling import PopLongPollingService
from rocketq.codec.message import decode_messages, encode_message, tags_code
from rocketq.codec.pop import (
    POP_ORDER_REVIVE_QUEUE,
    AckMsg,
    BatchAck,
    ExtraInfo,
    PopCheckPoint,
    build_extra_info,
    build_msg_offset_info,
    build_order_count_info,
    build_pop_retry_topic,
    build_start_offset_info,
    parse_normal_topic,
    real_topic,
    revive_topic,
)
from rocketq.codec.properties import MessageConst, encode_properties
from rocketq.store.model import GetMessageStatus, MessageToStore

if TYPE_CHECKING:
    from rocketq.broker.controller import BrokerController
    from rocketq.broker.filter import Subscription
    from rocketq.store.model import GetMessageResult

log = logging.getLogger("rocketq.broker.pop")

INIT_MODE_MIN = 0  # ConsumeInitMode.MIN; MAX (1) starts a new group at the end of the queue
RETRY_QUEUE_NUM = 1  # PopAckConstants.retryQueueNum
_RESET_STATUSES = frozenset(
    {
        GetMessageStatus.OFFSET_TOO_SMALL,
        GetMessageStatus.OFFSET_OVERFLOW_BADLY,
        GetMessageStatus.OFFSET_FOUND_NULL,
    }
)
_SKIPPED_STATUSES = frozenset(
    {
        GetMessageStatus.NO_MATCHED_MESSAGE,
        GetMessageStatus.OFFSET_FOUND_NULL,
        GetMessageStatus.MESSAGE_WAS_REMOVING,
    }
)


def now_ms() -> int:
    return int(time.time() * 1000)


@dataclass(slots=True)
class PopResult:
    """What one pop handed out; `buffers` concatenated are the response body."""

    pop_time: int
    invisible_time: int
    revive_qid: int
    order: bool
    rest_num: int = 0
    count: int = 0
    buffers: list[Any] = field(default_factory=list)
    start_offset_info: list[str] = field(default_factory=list)
    msg_offset_info: list[str] = field(default_factory=list)
    order_count_info: list[str] = field(default_factory=list)
    flush_target: int = 0  # end of the checkpoints written in the commit log (SYNC_FLUSH waits for it)

    def ext_fields(self) -> dict[str, str]:
        ext = {
            "popTime": str(self.pop_time),
            "invisibleTime": str(self.invisible_time),
            "reviveQid": str(self.revive_qid),
            "restNum": str(self.rest_num),
            "startOffsetInfo": ";".join(self.start_offset_info),
            "msgOffsetInfo": ";".join(self.msg_offset_info),
        }
        if self.order:
            ext["orderCountInfo"] = ";".join(self.order_count_info)
        return ext


@dataclass(frozen=True, slots=True)
class PopRequest:
    group: str
    topic: str
    queue_id: int
    max_nums: int
    invisible_time: int
    init_mode: int = INIT_MODE_MIN
    subscription: Subscription | None = None
    record_filter: Any = None
    order: bool = False
    attempt_id: str | None = None
    client_host: str = ""


class PopService:
    """Pop, peek, ack, change-invisible and notification of one broker."""

    def __init__(self, controller: BrokerController) -> None:
        from rocketq.broker.pop.assignment import QueryAssignmentProcessor
        from rocketq.broker.pop.request_mode import MessageRequestModeManager
        from rocketq.broker.pop.revive import ReviveService

        self._ctl = controller
        self.checkpoints = CheckpointTable()
        self.order = OrderInfoTable()
        # read at each park: the config object is replaced by runtime updates
        self.polling = PopLongPollingService(lambda: controller.broker_config.pop_polling_size,
                                             lambda: controller.broker_config.max_pop_polling_size)
        start = controller.broker_config  # the restart-required pop keys, read once
        self._retry_v2 = start.enable_retry_topic_v2
        self._retry_probability = start.pop_from_retry_probability
        self._ck_number = itertools.count()
        self._rand = random.Random()
        # pop retry topic -> (topic, group): an arrival there wakes that group's pollers of the topic
        self._retry_topics: dict[str, tuple[str, str]] = {}
        self.revive = ReviveService(controller, self)
        self.request_mode = MessageRequestModeManager(controller)
        self.assignment = QueryAssignmentProcessor(controller, self.request_mode)
        self._loop: asyncio.AbstractEventLoop | None = None
        self.serving = False  # started: this broker is the master writing checkpoints and reviving

    # -- identity and lifecycle --------------------------------------------------------------------

    @property
    def revive_topic(self) -> str:
        return revive_topic(self._ctl.cluster_name)

    @property
    def revive_queue_num(self) -> int:
        return self._ctl.broker_config.revive_queue_num

    def retry_topic(self, topic: str, group: str) -> str:
        return build_pop_retry_topic(topic, group, self._retry_v2)

    def note_retry_topic(self, retry_topic: str, topic: str, group: str) -> None:
        """`retry_topic` retries `topic` for `group`: an arrival there wakes the group's pollers."""
        if retry_topic.startswith("%RETRY%"):
            self._retry_topics[retry_topic] = (parse_normal_topic(topic, group), group)

    async def start(self) -> None:
        """Serve pop and revive (at start on a master; at each promotion in controller mode, so
        the checkpoint view is rebuilt from the revive topic the slave replicated)."""
        if self.serving:
            return
        self._loop = asyncio.get_running_loop()
        self.checkpoints = CheckpointTable()
        self.order = OrderInfoTable()
        from rocketq.broker.topic_manager import PERM_READ, PERM_WRITE, new_topic_config

        n = self.revive_queue_num
        self._ctl.topic_manager.create_topic_if_absent(
            new_topic_config(self.revive_topic, n, n, PERM_READ | PERM_WRITE)
        )
        self.request_mode.load()
        self.revive.replay()
        self.revive.start()
        self.serving = True

    async def shutdown(self) -> None:
        """Stop serving (a broker stopping, or demoted to slave: it may start again)."""
        self.serving = False
        self.polling.shutdown()
        await self.revive.shutdown()
        await self.request_mode.flush()

    # -- arrivals ----------------------------------------------------------------------------------

    def notify_message_arriving(self, topic: str, queue_id: int) -> None:
        """The store's arrival callback: wake a poller of the queue (or of the group, on its retry
        topic). It runs inside the producer's put, under the store's put lock: the woken pop (which
        reads and writes the store) runs on the next loop turn."""
        if not self.polling.polling_num:
            return
        retry = self._retry_topics.get(topic)
        loop = self._loop
        if loop is None:
            return
        if retry is not None:
            loop.call_soon_threadsafe(partial(self.polling.notify, retry[0], -1, retry[1], any_queue=True))
        else:
            loop.call_soon_threadsafe(self.polling.notify, topic, queue_id)

    def wake(self, topic: str, queue_id: int, group: str | None = None) -> None:
        """Wake one poller of (topic, queue) on the next loop turn (never inside the caller's work)."""
        if self.polling.polling_num and self._loop is not None:
            self._loop.call_soon(partial(self.polling.notify, topic, queue_id, group))

    # -- pop ---------------------------------------------------------------------------------------

    def pop(self, req: PopRequest) -> PopResult:
        """Pop up to `req.max_nums` messages of `req.topic` (every queue when queueId is -1, and the
        group's retry topic with popFromRetryProbability, or to fill the batch)."""
        ctl = self._ctl
        bc = ctl.broker_config
        revive_qid = (
            POP_ORDER_REVIVE_QUEUE if req.order else next(self._ck_number) % max(1, bc.revive_queue_num)
        )
        result = PopResult(now_ms(), req.invisible_time, revive_qid, req.order)
        random_q = self._rand.randrange(100)
        retry_topic = self.retry_topic(req.topic, req.group)
        need_retry = random_q < self._retry_probability and not req.order
        if need_retry:
            self._pop_topic(req, retry_topic, True, result, random_q)
        if req.queue_id < 0:
            self._pop_topic(req, req.topic, False, result, random_q)
        else:
            self._pop_queue(req, req.topic, req.queue_id, False, result)
        if not need_retry and not req.order and result.count < req.max_nums:
            self._pop_topic(req, retry_topic, True, result, random_q)
        return result

    def _pop_topic(
        self, req: PopRequest, topic: str, is_retry: bool, result: PopResult, random_q: int
    ) -> None:
        cfg = self._ctl.topic_manager.select_topic_config(topic)
        if cfg is None:
            return
        if is_retry:
            self.note_retry_topic(topic, req.topic, req.group)
        n = cfg.read_queue_nums
        for i in range(n):
            self._pop_queue(req, topic, (random_q + i) % n, is_retry, result)

    def pop_offset(self, group: str, topic: str, queue_id: int, init_mode: int) -> int:
        """The group's offset in the queue; a group new to it starts per initMode (and commits it)."""
        ctl = self._ctl
        offset = ctl.offset_manager.query_offset(group, topic, queue_id)
        if offset >= 0:
            return offset
        store = ctl.store
        if init_mode == INIT_MODE_MIN or topic.startswith("%RETRY%"):
            offset = store.get_min_offset_in_queue(topic, queue_id)
        elif store.get_min_offset_in_queue(topic, queue_id) <= 0:
            offset = 0  # initPopOffsetByCheckMsgInMem: the queue's first message is still mapped
        else:
            offset = max(0, store.get_max_offset_in_queue(topic, queue_id) - 1)
        ctl.offset_manager.commit_offset("getPopOffset", group, topic, queue_id, offset)
        return offset

    def _pop_queue(
        self, req: PopRequest, topic: str, queue_id: int, is_retry: bool, result: PopResult
    ) -> None:
        ctl = self._ctl
        store = ctl.store
        group = req.group
        offset = self.pop_offset(group, topic, queue_id, req.init_mode)
        if req.order and self.order.check_block(req.attempt_id, (topic, group, queue_id), now_ms()):
            return
        remaining = req.max_nums - result.count
        if remaining <= 0:
            result.rest_num += store.get_max_offset_in_queue(topic, queue_id) - offset
            return
        codes = None
        if req.subscription is not None and not is_retry:
            codes = req.subscription.codes
        record_filter = None if is_retry else req.record_filter
        got = store.get_message(topic, queue_id, offset, remaining, codes, None, record_filter)
        if got.status in _RESET_STATUSES:
            log.warning(
                "Pop initial offset, because store is no correct, %s@%s@%d, %d->%d",
                topic,
                group,
                queue_id,
                offset,
                got.next_begin_offset,
            )
            offset = got.next_begin_offset
            ctl.offset_manager.commit_offset(req.client_host, group, topic, queue_id, offset)
            got = store.get_message(topic, queue_id, offset, remaining, codes, None, record_filter)
        if got.message_count:
            self._hand_out(req, topic, queue_id, is_retry, offset, got, result)
        elif got.status in _SKIPPED_STATUSES and got.next_begin_offset > offset and not req.order:
            # everything read was filtered out: nobody needs to ack it
            ctl.offset_manager.commit_offset(req.client_host, group, topic, queue_id, got.next_begin_offset)
        result.rest_num += max(0, got.max_offset - got.next_begin_offset)

    def _hand_out(
        self,
        req: PopRequest,
        topic: str,
        queue_id: int,
        is_retry: bool,
        offset: int,
        got: GetMessageResult,
        result: PopResult,
    ) -> None:
        ctl = self._ctl
        offsets = [int(o) for o in got.queue_offsets]
        key = (topic, req.group, queue_id)
        if req.order:
            counts = self.order.update(key, req.attempt_id, result.pop_time, req.invisible_time, offsets)
            for o in offsets:
                build_order_count_info(result.order_count_info, topic, queue_id, counts[o], o)
            build_order_count_info(result.order_count_info, topic, queue_id, min(counts.values()))
            ctl.offset_manager.commit_offset(req.client_host, req.group, topic, queue_id, offset)
        else:
            ck = PopCheckPoint(
                offset,
                result.pop_time,
                req.invisible_time,
                len(offsets),
                queue_id,
                topic,
                req.group,
                ctl.broker_name,
                [o - offset for o in offsets],
            )
            target = self.append_checkpoint(ck, result.revive_qid)
            if target < 0:
                return  # the checkpoint could not be written: hand nothing out, the offset stays
            result.flush_target = max(result.flush_target, target)
            ctl.offset_manager.commit_offset(
                req.client_host, req.group, topic, queue_id, got.next_begin_offset
            )
        build_start_offset_info(result.start_offset_info, topic, queue_id, offset)
        build_msg_offset_info(result.msg_offset_info, topic, queue_id, offsets)
        result.count += len(offsets)
        if is_retry:
            result.buffers.extend(self._as_original_topic(req, topic, offset, got, result))
        else:
            result.buffers.extend(got.buffers)
        on_get = getattr(ctl.stats, "on_get", None)
        if on_get is not None:
            on_get(len(offsets))

    def _as_original_topic(
        self, req: PopRequest, retry_topic: str, start: int, got: GetMessageResult, result: PopResult
    ) -> list[bytes]:
        """Retry messages go out under the topic the client asked for, their handle already set."""
        out = []
        broker = self._ctl.broker_name
        for m in decode_messages(b"".join(got.buffers)):
            props = dict(m.properties)
            props.setdefault(
                MessageConst.PROPERTY_POP_CK,
                build_extra_info(
                    start,
                    result.pop_time,
                    req.invisible_time,
                    result.revive_qid,
                    retry_topic,
                    broker,
                    m.queue_id,
                    m.queue_offset,
                ),
            )
            out.append(encode_message(replace(m, topic=req.topic, properties=props, store_size=0)))
        return out

    # -- peek ----------------------------------------------------------------------------------------

    def peek(self, group: str, topic: str, queue_id: int, max_nums: int) -> tuple[list[Any], int]:
        """Messages from the group's offsets without moving them: (buffers, count)."""
        store = self._ctl.store
        cfg = self._ctl.topic_manager.select_topic_config(topic)
        n = cfg.read_queue_nums if cfg is not None else 0
        queues = [queue_id] if queue_id >= 0 else [(self._rand.randrange(100) + i) % n for i in range(n)]
        buffers: list[Any] = []
        count = 0
        for q in queues:
            if count >= max_nums:
                break
            offset = self._ctl.offset_manager.query_offset(group, topic, q)
            got = store.get_message(topic, q, max(0, offset), max_nums - count)
            buffers.extend(got.buffers)
            count += got.message_count
        return buffers, count

    def has_message(
        self, group: str, topic: str, queue_id: int, order: bool = False, attempt_id: str | None = None
    ) -> bool:
        """NOTIFICATION: would a pop of (group, topic, queueId) find something now?"""
        store = self._ctl.store
        cfg = self._ctl.topic_manager.select_topic_config(topic)
        if cfg is None:
            return False
        queues = [queue_id] if queue_id >= 0 else range(cfg.read_queue_nums)
        now = now_ms()
        for q in queues:
            if order and self.order.check_block(attempt_id, (topic, group, q), now):
                continue
            offset = self._ctl.offset_manager.query_offset(group, topic, q)
            if store.get_max_offset_in_queue(topic, q) > max(0, offset):
                return True
        retry = self.retry_topic(topic, group)
        if not order and self._ctl.topic_manager.select_topic_config(retry) is not None:
            self.note_retry_topic(retry, topic, group)
            offset = self._ctl.offset_manager.query_offset(group, retry, 0)
            return store.get_max_offset_in_queue(retry, 0) > max(0, offset)
        return False

    def acked_offset(self, group: str, topic: str, queue_id: int, popped_to: int) -> int:
        """Where the group's acks of a queue reach: below its oldest message still out, else
        `popped_to` (its offset). consumerProgress shows the difference as in flight."""
        oldest = self.checkpoints.oldest_unacked(topic, group, queue_id)
        return popped_to if oldest is None else min(oldest, popped_to)

    # -- the revive log ------------------------------------------------------------------------------

    def _append_revive(self, revive_qid: int, body: bytes, tag: str, uniq: str) -> tuple[int, int]:
        """Write one record to a revive queue: (its queue offset, commit-log end), (-1, -1) on failure."""
        ctl = self._ctl
        props = encode_properties(
            {MessageConst.PROPERTY_TAGS: tag, MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX: uniq}
        )
        r = ctl.store.append_message(
            MessageToStore(
                self.revive_topic, revive_qid, body, 0, props, tags_code(tag), (), 0, now_ms(), ctl.store_host
            )
        )
        if not r.ok:
            log.error("put %s to the revive queue %d failed: %s", tag, revive_qid, r.status.name)
            return -1, -1
        return r.logical_offset, r.wrote_offset + r.wrote_bytes

    def append_checkpoint(self, ck: PopCheckPoint, revive_qid: int) -> int:
        """Write `ck` and make it live; the commit-log end to flush, -1 when it was not written."""
        revive_offset, end = self._append_revive(revive_qid, ck.encode(), "ck", ck.unique_id())
        if revive_offset < 0:
            return -1
        self.checkpoints.add(ck, revive_qid, revive_offset)
        return end

    def append_ack(self, ack: AckMsg, revive_qid: int) -> int:
        """Write `ack`, then mark it; the commit-log end to flush, -1 when it was not written."""
        revive_offset, end = self._append_revive(revive_qid, ack.encode(), ack.tag, ack.unique_id())
        if revive_offset < 0:
            return -1
        self.checkpoints.ack(ack)
        self.checkpoints.seen(revive_qid, revive_offset)
        return end

    # -- ack and change invisible time ---------------------------------------------------------------

    def ack(self, group: str, topic: str, queue_id: int, info: ExtraInfo, offset: int) -> int:
        """ACK_MESSAGE: `topic` is the topic the message was popped from. The flush target, or 0."""
        if info.is_order:
            self.ack_orderly(group, topic, queue_id, offset, info.pop_time)
            return 0
        return self.append_ack(
            AckMsg(offset, info.ck_offset, group, topic, queue_id, info.pop_time, info.broker_name),
            info.revive_qid,
        )

    def batch_ack(self, broker_name: str, acks: list[BatchAck]) -> int:
        """BATCH_ACK_MESSAGE: each entry acks offsets of one checkpoint. The flush target, or 0."""
        store = self._ctl.store
        target = 0
        for b in acks:
            topic = real_topic(b.topic, b.consumer_group, b.retry)
            lo = store.get_min_offset_in_queue(topic, b.queue_id)
            hi = store.get_max_offset_in_queue(topic, b.queue_id)
            offsets = tuple(o for o in b.offsets if lo <= o <= hi)
            if not offsets:
                continue
            if b.revive_queue_id == POP_ORDER_REVIVE_QUEUE:
                for o in offsets:
                    self.ack_orderly(b.consumer_group, topic, b.queue_id, o, b.pop_time)
                continue
            ack = AckMsg(
                -1, b.start_offset, b.consumer_group, topic, b.queue_id, b.pop_time, broker_name, offsets
            )
            target = max(target, self.append_ack(ack, b.revive_queue_id))
        return target

    def ack_orderly(self, group: str, topic: str, queue_id: int, offset: int, pop_time: int) -> None:
        om = self._ctl.offset_manager
        if offset < om.query_offset(group, topic, queue_id):
            return
        next_offset = self.order.commit_and_next((topic, group, queue_id), offset, pop_time)
        if next_offset >= 0:
            om.commit_offset("ackOrderly", group, topic, queue_id, next_offset)
            self.order.clear((topic, group, queue_id))
            self.wake(topic, queue_id, group)

    def change_invisible_time(
        self, group: str, topic: str, queue_id: int, info: ExtraInfo, offset: int, invisible_time: int
    ) -> tuple[int, int, int, int]:
        """A new checkpoint for the one message, then an ack of its old one (Java's order: never a
        moment without a checkpoint). (popTime, invisibleTime, reviveQid, flush target); the flush
        target is -1 when the new checkpoint could not be written."""
        if info.is_order:
            next_visible = now_ms() + invisible_time
            self.order.update_next_visible_time((topic, group, queue_id), offset, info.pop_time, next_visible)
            return info.pop_time, next_visible - info.pop_time, info.revive_qid, 0
        now = now_ms()
        ck = PopCheckPoint(offset, now, invisible_time, 1, queue_id, topic, group, info.broker_name, [0])
        target = self.append_checkpoint(ck, info.revive_qid)
        if target < 0:
            return now, invisible_time, info.revive_qid, -1
        old = AckMsg(offset, info.ck_offset, group, topic, queue_id, info.pop_time, info.broker_name)
        return now, invisible_time, info.revive_qid, max(target, self.append_ack(old, info.revive_qid))
