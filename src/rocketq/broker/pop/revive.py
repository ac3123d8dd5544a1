"""ReviveService: messages popped and not acked in time go back (RocketMQ's PopReviveService).

Wakes at the earliest revive time of a live checkpoint (at most every reviveInterval), re-puts each
un-acked message of a due checkpoint to the pop retry topic ``%RETRY%group_topic`` with
reconsumeTimes + 1 (to ``%DLQ%group`` once reconsumeTimes reached the group's retryMaxTimes), and
only then forgets the checkpoint. Its progress is the consumer offset of ``CID_RMQ_SYS_REVIVE_GROUP``
on each revive queue: the revive offset of the queue's oldest live checkpoint, so a restart replays
every checkpoint and ack from there (`replay`) and nothing popped is lost; a message revived just
before a crash may be revived twice (at least once, as RocketMQ).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING

from rocketq.codec.message import MessageExt, decode_messages, tags_code
from rocketq.codec.pop import ACK_TAG, BATCH_ACK_TAG, CK_TAG, REVIVE_GROUP, AckMsg, PopCheckPoint
from rocketq.codec.properties import MessageConst, encode_properties

if TYPE_CHECKING:
    from rocketq.broker.controller import BrokerController
    from rocketq.broker.pop.service import PopService

log = logging.getLogger("rocketq.broker.pop")

DLQ_GROUP_TOPIC_PREFIX = "%DLQ%"
RETRY_LATER_MS = 1000  # a revive that could not be written is tried again this much later
_REPLAY_BATCH = 256


class ReviveService:
    def __init__(self, controller: BrokerController, pop: PopService) -> None:
        self._ctl = controller
        self._pop = pop
        self._task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        self._interval = controller.broker_config.revive_interval / 1000.0
        self.revived = 0
        self.dead = 0

    # -- recovery ----------------------------------------------------------------------------------

    def replay(self) -> int:
        """Rebuild the live checkpoints from each revive queue's committed offset; returns how many
        records were read. A checkpoint's queue offset also lifts the group's offset past it, which a
        crash may have left behind (offsets are persisted every few seconds)."""
        ctl = self._ctl
        table = self._pop.checkpoints
        topic = self._pop.revive_topic
        om = ctl.offset_manager
        read = 0
        for qid in range(self._pop.revive_queue_num):
            offset = max(
                om.query_offset(REVIVE_GROUP, topic, qid), ctl.store.get_min_offset_in_queue(topic, qid)
            )
            table.seen(qid, offset - 1)
            while True:
                got = ctl.store.get_message(topic, qid, offset, _REPLAY_BATCH)
                if not got.message_count:
                    break
                for m in decode_messages(b"".join(got.buffers)):
                    self._replay_one(qid, m)
                    read += 1
                offset = got.next_begin_offset
        if read:
            log.info("pop revive log replayed: %d records, %d live checkpoints", read, len(table))
        return read

    def _replay_one(self, qid: int, m: MessageExt) -> None:
        table = self._pop.checkpoints
        tag = m.tags
        try:
            if tag == CK_TAG:
                ck = PopCheckPoint.decode(m.body)
                table.add(ck, qid, m.queue_offset)
                end = ck.ack_offset_by_index(ck.num - 1) + 1 if ck.num else ck.start_offset
                om = self._ctl.offset_manager
                if om.query_offset(ck.cid, ck.topic, ck.queue_id) < end:
                    om.commit_offset("replay", ck.cid, ck.topic, ck.queue_id, end)
            elif tag in (ACK_TAG, BATCH_ACK_TAG):
                table.ack(AckMsg.decode(m.body))
        except (ValueError, KeyError, TypeError):
            log.warning("skipping an unreadable revive record at %d of queue %d", m.queue_offset, qid)
        table.seen(qid, m.queue_offset)

    # -- the loop ------------------------------------------------------------------------------------

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())

    def wakeup(self) -> None:
        self._wake.set()

    async def shutdown(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self.commit_offsets()

    async def _run(self) -> None:
        from rocketq.broker.pop.service import now_ms

        while True:
            interval = self._interval
            nxt = self._pop.checkpoints.next_due_time()
            if nxt is not None:
                interval = min(interval, max(0.0, (nxt - now_ms()) / 1000.0))
            self._wake.clear()
            with contextlib.suppress(asyncio.TimeoutError):
                async with asyncio.timeout(interval):
                    await self._wake.wait()
            try:
                await self.revive_due(now_ms())
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("pop revive failed")

    async def revive_due(self, now: int) -> int:
        """Revive every checkpoint due at `now`; returns how many messages went back."""
        table = self._pop.checkpoints
        due = table.pop_due(now)
        n = 0
        target = 0
        for ck in due:
            end = self._revive(ck)
            if end < 0:
                table.defer(ck, now + RETRY_LATER_MS)
                continue
            target = max(target, end)
            table.remove(ck)
            n += len(ck.unacked_offsets()) if end else 0
        if target and self._ctl.store_config.sync_flush:
            await self._ctl.store.flush_future(target)
        self.commit_offsets()
        return n

    def commit_offsets(self) -> None:
        table = self._pop.checkpoints
        om = self._ctl.offset_manager
        topic = self._pop.revive_topic
        for qid in list(table.revive_qids()):
            om.commit_offset("revive", REVIVE_GROUP, topic, qid, table.revive_offset(qid))

    def _revive(self, ck: PopCheckPoint) -> int:
        """Re-put the un-acked messages of `ck`: the commit-log end written (0 when nothing was
        needed), -1 when a put failed (the checkpoint is kept)."""
        ctl = self._ctl
        end = 0
        for offset in ck.unacked_offsets():
            got = ctl.store.get_message(ck.topic, ck.queue_id, offset, 1)
            if not got.message_count:
                log.warning("revive: %s@%d offset %d is gone, not revived", ck.topic, ck.queue_id, offset)
                continue
            msg = decode_messages(b"".join(got.buffers))[0]
            if msg.queue_offset != offset:
                continue  # filtered away since: not ours
            written = self._put_back(ck, msg)
            if written < 0:
                return -1
            end = max(end, written)
        return end

    def _put_back(self, ck: PopCheckPoint, msg: MessageExt) -> int:
        from rocketq.broker.pop.service import RETRY_QUEUE_NUM
        from rocketq.broker.topic_manager import PERM_READ, PERM_WRITE
        from rocketq.store.model import MessageToStore

        ctl = self._ctl
        sgc = ctl.subscription_manager.find_subscription_group_config(ck.cid)
        max_times = sgc.retry_max_times if sgc is not None else 16
        props = dict(msg.properties)
        props.pop(MessageConst.PROPERTY_POP_CK, None)
        if msg.reconsume_times == 0 or MessageConst.PROPERTY_FIRST_POP_TIME not in props:
            props[MessageConst.PROPERTY_FIRST_POP_TIME] = str(ck.pop_time)
        if msg.reconsume_times >= max_times:
            topic = DLQ_GROUP_TOPIC_PREFIX + ck.cid
            props.setdefault(MessageConst.PROPERTY_DLQ_ORIGIN_TOPIC, ck.topic)
            props.setdefault(MessageConst.PROPERTY_DLQ_ORIGIN_MESSAGE_ID, msg.msg_id)
            self.dead += 1
        elif ck.topic.startswith("%RETRY%"):
            topic = ck.topic
        else:
            topic = self._pop.retry_topic(ck.topic, ck.cid)
        if not topic.startswith(DLQ_GROUP_TOPIC_PREFIX):
            self._pop.note_retry_topic(topic, ck.topic, ck.cid)  # its arrival wakes the group's pollers
        ctl.topic_manager.create_topic_in_send_message_back_method(
            topic, RETRY_QUEUE_NUM, PERM_READ | PERM_WRITE
        )
        r = ctl.store.append_message(
            MessageToStore(
                topic,
                0,
                msg.body,
                msg.flag,
                encode_properties(props),
                tags_code(props.get(MessageConst.PROPERTY_TAGS)),
                (),
                msg.sys_flag,
                msg.born_timestamp,
                ctl.store_host,
                msg.reconsume_times + 1,
            )
        )
        if not r.ok:
            log.error(
                "revive of %s@%d offset %d to %s failed: %s",
                ck.topic,
                ck.queue_id,
                msg.queue_offset,
                topic,
                r.status.name,
            )
            return -1
        self.revived += 1
        return r.wrote_offset + r.wrote_bytes
