"""TransactionalMessageService: ending a transaction, and the check of pending half messages.

`end_transaction` is EndTransactionProcessor's work after the header is decoded: find the half
message by its commit-log offset, check that the request names it (producer group, half queue
offset, commit-log offset), then on commit store the final message in the real topic and on
either outcome write the op record.

`check` is TransactionalMessageServiceImpl.check, one pass over every half queue: read the op
records not yet accounted for (which half offsets are ended), then walk the half messages from
the CID_RMQ_SYS_TRANS offset; each one that is not ended and is older than its immunity time is
appended again (its check count + 1) and handed to ``send_check``; one checked
``transactionCheckMax`` times goes to TRANS_CHECK_MAX_TIME_TOPIC instead. The offsets then move
past what was settled. The pass yields to the event loop every few dozen messages.

Two guards RocketMQ lacks, neither visible on the wire: a transaction (UNIQ_KEY) ended once is not
committed again by a late or repeated END_TRANSACTION (its op record is still written, so checks
stop), and a renewed immunity copy whose original half offset was ended is not checked again.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from rocketq.broker.processors.send_wire import P_TAGS, P_UNIQ
from rocketq.broker.transaction.half import (
    P_PGROUP,
    P_REAL_QID,
    P_REAL_TOPIC,
    REMOVE_TAG,
    HalfFields,
    HalfRecord,
    TransactionalMessageBridge,
    index_keys_of,
)
from rocketq.codec.codes import ResponseCode
from rocketq.codec.message import MessageExt, MessageSysFlag, tags_code
from rocketq.codec.properties import MessageConst
from rocketq.codec.topics import RMQ_SYS_TRANS_HALF_TOPIC, RMQ_SYS_TRANS_OP_HALF_TOPIC
from rocketq.store.model import GetMessageStatus, PutMessageStatus, SingleEntry

if TYPE_CHECKING:
    from rocketq.broker.controller import BrokerController
    from rocketq.codec.headers import EndTransactionRequestHeader

__all__ = ["EndResult", "TransactionalMessageService"]

log = logging.getLogger("rocketq.broker.transaction")

NOT_TYPE = MessageSysFlag.TRANSACTION_NOT_TYPE
COMMIT_TYPE = MessageSysFlag.TRANSACTION_COMMIT_TYPE
ROLLBACK_TYPE = MessageSysFlag.TRANSACTION_ROLLBACK_TYPE
_TRAN_MASK = MessageSysFlag.TRANSACTION_MASK

MAX_PROCESS_TIME_LIMIT = 60.0  # s one queue's pass may take (RocketMQ's MAX_PROCESS_TIME_LIMIT)
OP_PULL_NUMS = 32
HALF_PULL_NUMS = 32
_YIELD_EVERY = 64
_ENDED_MAX = 100_000  # transactions remembered as ended (about 10 MB at most)

_NOTHING_NEW = (GetMessageStatus.NO_MESSAGE_IN_QUEUE, GetMessageStatus.OFFSET_OVERFLOW_ONE,
                GetMessageStatus.NO_MATCHED_LOGIC_QUEUE)
_OP_OFFSET_ILLEGAL = (GetMessageStatus.OFFSET_TOO_SMALL, GetMessageStatus.OFFSET_OVERFLOW_BADLY,
                      GetMessageStatus.NO_MATCHED_MESSAGE)

# (response code, remark); None: nothing to answer (an UNKNOW end, as RocketMQ returns null)
EndResult = tuple[int, str | None] | None

_FAILED: dict[PutMessageStatus, tuple[int, str]] = {
    PutMessageStatus.CREATE_MAPPED_FILE_FAILED: (ResponseCode.SYSTEM_ERROR, "Create mapped file failed."),
    PutMessageStatus.MESSAGE_ILLEGAL: (
        ResponseCode.MESSAGE_ILLEGAL,
        "The message is illegal, maybe msg body or properties length not matched. msg body length limit "
        "{max}B, msg properties length limit 32KB."),
    PutMessageStatus.PROPERTIES_SIZE_EXCEEDED: (
        ResponseCode.MESSAGE_ILLEGAL,
        "The message is illegal, maybe msg body or properties length not matched. msg body length limit "
        "{max}B, msg properties length limit 32KB."),
    PutMessageStatus.SERVICE_NOT_AVAILABLE: (
        ResponseCode.SERVICE_NOT_AVAILABLE, "Service not available now."),
    PutMessageStatus.OS_PAGE_CACHE_BUSY: (
        ResponseCode.SYSTEM_ERROR, "OS page cache busy, please try another machine"),
    PutMessageStatus.UNKNOWN_ERROR: (ResponseCode.SYSTEM_ERROR, "UNKNOWN_ERROR"),
}


_SUCCESS: EndResult = (ResponseCode.SUCCESS, None)

_Half = MessageExt | HalfFields  # a half message read back, or kept from its put


def _final_entry(rec: HalfRecord) -> SingleEntry | str:
    """The committed message (endMessageTransaction), or why there can be none: the half's fields
    in the real topic and queue, its transaction bits set to COMMIT. The properties text is the
    half's, unchanged: RocketMQ clears REAL_TOPIC, REAL_QID and TRAN_MSG from the map only after it
    has rendered the text it stores. (PREPAREDTRANSACTIONOFFSET, the half's offset, goes beside.)"""
    half, props = rec
    real_topic = rec.prop(P_REAL_TOPIC)
    real_qid = _int(rec.prop(P_REAL_QID))
    if not real_topic or real_qid < 0:
        return "the prepared message has no REAL_TOPIC / REAL_QID"
    # a plain tuple in SingleEntry's field order: cheaper to build, and the store takes either
    return (real_topic, real_qid, half.body, half.flag, props,  # type: ignore[return-value]
            tags_code(rec.prop(P_TAGS)), index_keys_of(props), (half.sys_flag & ~_TRAN_MASK) | COMMIT_TYPE,
            half.born_timestamp, half.born_host, half.reconsume_times)


def _int(text: str | None, default: int = -1) -> int:
    try:
        return int(text) if text is not None else default
    except ValueError:
        return default


class TransactionalMessageService:
    def __init__(self, controller: BrokerController,
                 bridge: TransactionalMessageBridge | None = None) -> None:
        self._ctl = controller
        self.bridge = bridge or TransactionalMessageBridge(controller)
        self._ended: collections.OrderedDict[str, int] = collections.OrderedDict()
        self.checks_sent = 0
        self.discarded = 0

    # -- END_TRANSACTION ------------------------------------------------------------------------

    def end_transaction(self, h: EndTransactionRequestHeader) -> EndResult:
        return self.end_many([h])[0]

    def end_many(self, headers: Sequence[EndTransactionRequestHeader]) -> list[EndResult]:
        """A run of END_TRANSACTIONs, stored together: the committed messages in one append,
        then the op record of every half message that ended (a commit whose message could not be
        stored gets none, as in RocketMQ: the producer or a check ends it later)."""
        results: list[EndResult] = [None] * len(headers)
        finals: list[SingleEntry] = []
        prepared: list[int] = []
        committing: list[tuple[int, str, _Half]] = []  # (result index, uniq, half) per final
        ending: list[tuple[int, _Half]] = []  # (result index, half) ended without a final
        for i, h in enumerate(headers):
            kind = h.commit_or_rollback
            if kind == NOT_TYPE:
                continue
            rec = self.bridge.look_half(h.commit_log_offset)
            if rec is None:
                results[i] = ResponseCode.SYSTEM_ERROR, "Find prepared transaction message failed"
                continue
            wrong = self._check_prepare_message(rec, h)
            if wrong is not None:
                results[i] = ResponseCode.SYSTEM_ERROR, wrong
                continue
            half = rec.msg
            uniq = rec.prop(P_UNIQ) or ""
            first = self._remember(uniq, kind)
            if kind == COMMIT_TYPE and first is None:
                entry = _final_entry(rec)
                if isinstance(entry, str):
                    self._ended.pop(uniq, None)
                    results[i] = ResponseCode.SYSTEM_ERROR, entry
                    continue
                finals.append(entry)
                prepared.append(h.commit_log_offset)
                committing.append((i, uniq, half))
                continue
            if first is not None and first != kind:
                log.warning("transaction %s was ended (%d) before; END_TRANSACTION %d only closes its half "
                            "message at offset %d", uniq, first, kind, h.commit_log_offset)
            ending.append((i, half))
        if finals:
            max_size = self._ctl.store_config.max_message_size
            for (i, uniq, half), r in zip(committing, self.bridge.put_many(finals, prepared), strict=True):
                if isinstance(r, PutMessageStatus):
                    self._ended.pop(uniq, None)  # not ended after all: a retry or a check may end it
                    code, remark = _FAILED.get(r, (ResponseCode.SYSTEM_ERROR, "UNKNOWN_ERROR DEFAULT"))
                    results[i] = code, remark.format(max=max_size)
                else:
                    ending.append((i, half))
        if ending:
            self.bridge.ensure_op_topic()
            now = int(time.time() * 1000)
            ops = [self.bridge.op_entry(half.queue_id, half.queue_offset, now) for _, half in ending]
            self.bridge.put_many(ops)  # an op record lost to a full disk only means one more check
            for i, _ in ending:
                results[i] = _SUCCESS
        return results

    def _remember(self, uniq: str, kind: int) -> int | None:
        """Record that ``uniq`` ended as ``kind``; returns how it ended before, if it did."""
        if not uniq:
            return None
        ended = self._ended
        before = ended.get(uniq)
        if before is not None:
            return before
        ended[uniq] = kind
        if len(ended) > _ENDED_MAX:
            ended.popitem(last=False)
        return None

    @staticmethod
    def _check_prepare_message(rec: HalfRecord, h: EndTransactionRequestHeader) -> str | None:
        msg = rec.msg
        if rec.prop(P_PGROUP) != h.producer_group:
            return "The producer group wrong"
        if msg.queue_offset != h.tran_state_table_offset:
            return "The transaction state table offset wrong"
        if msg.commit_log_offset != h.commit_log_offset:
            return "The commit log offset wrong"
        return None

    # -- the check ------------------------------------------------------------------------------

    async def check(self, transaction_timeout: int, check_max: int,
                    send_check: Callable[[MessageExt], None]) -> None:
        """One pass over every half queue (TransactionalMessageServiceImpl.check)."""
        self.bridge.half_topic_config()
        for queue_id in self.bridge.half_queue_ids():
            try:
                await self._check_queue(queue_id, transaction_timeout, check_max, send_check)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("Check error, queue %d", queue_id)

    async def _check_queue(self, queue_id: int, timeout: int, check_max: int,
                           send_check: Callable[[MessageExt], None]) -> None:
        bridge = self.bridge
        start = time.time()
        start_ms = int(start * 1000)
        half_offset = bridge.fetch_consume_offset(RMQ_SYS_TRANS_HALF_TOPIC, queue_id)
        op_offset = bridge.fetch_consume_offset(RMQ_SYS_TRANS_OP_HALF_TOPIC, queue_id)
        if half_offset < 0 or op_offset < 0:
            log.error("MessageQueue: %d illegal offset read: %d, op offset: %d, skip this queue", queue_id,
                      half_offset, op_offset)
            return
        remove_map: dict[int, int] = {}
        done_op: list[int] = []
        ended_before: set[int] = set()  # ended half offsets below half_offset (their copies may follow)
        await self._fill_op_remove_map(queue_id, op_offset, half_offset, remove_map, done_op, ended_before,
                                       start)
        reserved_ms = self._ctl.store_config.file_reserved_time * 3600 * 1000
        new_offset = i = half_offset
        batch: list[MessageExt] = []
        seen = 0
        while time.time() - start <= MAX_PROCESS_TIME_LIMIT:
            if i in remove_map:
                done_op.append(remove_map.pop(i))
                new_offset = i = i + 1
                continue
            while batch and batch[0].queue_offset < i:
                batch.pop(0)
            if not batch or batch[0].queue_offset != i:
                r, batch = bridge.get_messages(RMQ_SYS_TRANS_HALF_TOPIC, queue_id, i, HALF_PULL_NUMS)
                if not batch:
                    if r.status in _NOTHING_NEW or r.next_begin_offset <= i:
                        break
                    log.info("Illegal offset, the miss offset=%d in queue %d, continue at %d", i, queue_id,
                             r.next_begin_offset)
                    new_offset = i = r.next_begin_offset
                    continue
            msg = batch.pop(0)
            seen += 1
            if seen % _YIELD_EVERY == 0:
                await asyncio.sleep(0)
            props = dict(msg.properties)
            now = int(time.time() * 1000)
            if self._need_discard(props, check_max) or now - msg.born_timestamp > reserved_ms:
                self.discarded += 1
                log.error("MsgExt %s has been checked too many times, so discard it by moving it to system "
                          "topic TRANS_CHECK_MAXTIME_TOPIC", msg.msg_id)
                bridge.put_discarded(msg)
                new_offset = i = i + 1
                continue
            if msg.store_timestamp >= start_ms:
                break  # stored during this pass: the next pass sees it
            age = now - msg.born_timestamp
            immunity_text = props.get(MessageConst.PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS)
            prepared_at = _int(props.get(MessageConst.PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET))
            if prepared_at >= 0 and (prepared_at in remove_map or prepared_at in ended_before):
                if prepared_at in remove_map:  # its original half was ended
                    done_op.append(remove_map.pop(prepared_at))
                new_offset = i = i + 1
                continue
            if immunity_text is not None:
                immunity = _int(immunity_text)
                immunity = timeout if immunity == -1 else immunity * 1000
                if age < immunity:
                    # too young to check: appended again (pointing at its first offset) for later
                    if prepared_at < 0:
                        props[MessageConst.PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET] = str(msg.queue_offset)
                    bridge.put_back_half(msg, props)
                    new_offset = i = i + 1
                    continue
            elif 0 <= age < timeout:
                break  # half messages are in born order, more or less: the rest are younger still
            put = bridge.put_back_half(msg, props)
            if not put.ok:
                log.error("PutBackToHalfQueueReturnResult write failed, queueId: %d, msgId: %s", queue_id,
                          msg.msg_id)
                break
            checked = MessageExt(
                topic=props.get(MessageConst.PROPERTY_REAL_TOPIC) or msg.topic,
                body=msg.body, flag=msg.flag, properties=props,
                queue_id=_int(props.get(MessageConst.PROPERTY_REAL_QUEUE_ID), msg.queue_id),
                queue_offset=put.logical_offset, commit_log_offset=put.wrote_offset, sys_flag=msg.sys_flag,
                born_timestamp=msg.born_timestamp, born_host=msg.born_host,
                store_timestamp=msg.store_timestamp, store_host=msg.store_host,
                reconsume_times=msg.reconsume_times,
                prepared_transaction_offset=msg.prepared_transaction_offset, body_crc=msg.body_crc,
            )
            try:
                send_check(checked)
                self.checks_sent += 1
            except Exception:
                log.exception("Send check message error!")
            new_offset = i = i + 1
        if new_offset != half_offset:
            bridge.update_consume_offset(RMQ_SYS_TRANS_HALF_TOPIC, queue_id, new_offset)
        new_op_offset = _calculate_op_offset(done_op, op_offset)
        if new_op_offset != op_offset:
            bridge.update_consume_offset(RMQ_SYS_TRANS_OP_HALF_TOPIC, queue_id, new_op_offset)

    async def _fill_op_remove_map(self, queue_id: int, op_offset: int, half_offset: int,
                                  remove_map: dict[int, int], done_op: list[int], ended_before: set[int],
                                  start: float) -> None:
        """Every op record from ``op_offset`` on: half offsets below ``half_offset`` are settled
        already (their op offsets go to ``done_op``), the others are ended (``remove_map``).

        RocketMQ reads op records 32 at a time until none are left before it checks a half
        message; reading them all first is the same decision, made once."""
        offset = op_offset
        while time.time() - start <= MAX_PROCESS_TIME_LIMIT:
            r, ops = self.bridge.get_messages(RMQ_SYS_TRANS_OP_HALF_TOPIC, queue_id, offset, OP_PULL_NUMS)
            if not ops:
                if r.status in _OP_OFFSET_ILLEGAL:
                    self.bridge.update_consume_offset(RMQ_SYS_TRANS_OP_HALF_TOPIC, queue_id,
                                                      r.next_begin_offset)
                    if r.next_begin_offset > offset:
                        offset = r.next_begin_offset
                        continue
                return
            for op in ops:
                if op.tags != REMOVE_TAG:
                    log.error("Found a illegal tag in op message %s", op.msg_id)
                    continue
                half_at = _int(op.body.decode("utf-8", "replace"))
                if half_at < half_offset:
                    done_op.append(op.queue_offset)
                    ended_before.add(half_at)
                else:
                    remove_map[half_at] = op.queue_offset
            offset = ops[-1].queue_offset + 1
            await asyncio.sleep(0)

    @staticmethod
    def _need_discard(props: dict[str, str], check_max: int) -> bool:
        """Whether the message was checked ``check_max`` times; otherwise count this check in
        ``props`` (needDiscard)."""
        text = props.get(MessageConst.PROPERTY_TRANSACTION_CHECK_TIMES)
        times = 1
        if text is not None:
            times = _int(text)
            if times >= check_max:
                return True
            times += 1
        props[MessageConst.PROPERTY_TRANSACTION_CHECK_TIMES] = str(times)
        return False


def _calculate_op_offset(done: list[int], old: int) -> int:
    """The op queue's new offset: past every op record settled without a gap (calculateOpOffset)."""
    new = old
    for off in sorted(done):
        if off == new:
            new += 1
        elif off > new:
            break
    return new
