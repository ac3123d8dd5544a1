"""TransactionalMessageBridge: what the transaction service reads from and writes to the store.

The half and op topics, the CID_RMQ_SYS_TRANS offsets that record how far the check service got,
and the records RocketMQ 4.9 writes for a transaction:

* the half message: the producer's message in ``RMQ_SYS_TRANS_HALF_TOPIC`` queue 0, its
  transaction bits cleared (so it is dispatched to the half queue, never to the real topic), with
  ``REAL_TOPIC`` / ``REAL_QID`` appended (TransactionalMessageBridge.parseHalfMessageInner);
* the op record: topic ``RMQ_SYS_TRANS_OP_HALF_TOPIC``, the half's queue id, tag ``d``, body the
  half's queue offset in decimal (addRemoveTagInTransactionOp);
* the renewed half: a copy appended to the half queue before a check, carrying the updated
  ``TRANSACTION_CHECK_TIMES`` (renewHalfMessageInner);
* the committed message: see `TransactionalMessageService.end_transaction`.
"""

from __future__ import annotations

import collections
import logging
from typing import TYPE_CHECKING, NamedTuple

from rocketq.broker.processors.send_wire import P_KEYS, P_TRAN, P_UNIQ, index_keys
from rocketq.broker.topic_manager import PERM_READ, PERM_WRITE
from rocketq.codec.message import MessageExt, MessageSysFlag, decode_messages, tags_code
from rocketq.codec.properties import MessageConst, append_properties, encode_properties, get_property, needle
from rocketq.codec.record import properties_span
from rocketq.codec.topics import (
    RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC,
    RMQ_SYS_TRANS_HALF_TOPIC,
    RMQ_SYS_TRANS_OP_HALF_TOPIC,
)
from rocketq.errors import ProtocolError
from rocketq.store.model import (
    GetMessageResult,
    MessageToStore,
    PutMessageResult,
    PutMessageStatus,
    SingleEntry,
)

if TYPE_CHECKING:
    from rocketq.broker.controller import BrokerController

__all__ = [
    "CID_SYS_RMQ_TRANS",
    "REMOVE_TAG",
    "HalfFields",
    "HalfRecord",
    "TransactionalMessageBridge",
    "half_properties",
    "is_transactional",
]

log = logging.getLogger("rocketq.broker.transaction")

CID_SYS_RMQ_TRANS = "CID_RMQ_SYS_TRANS"  # MixAll.CID_SYS_RMQ_TRANS: the check service's offsets
REMOVE_TAG = "d"  # TransactionalMessageUtil.REMOVETAG
TCMT_QUEUE_NUMS = 1  # queues of TRANS_CHECK_MAX_TIME_TOPIC

_TRAN_MASK = MessageSysFlag.TRANSACTION_MASK
P_PGROUP = needle(MessageConst.PROPERTY_PRODUCER_GROUP)
P_REAL_TOPIC = needle(MessageConst.PROPERTY_REAL_TOPIC)
P_REAL_QID = needle(MessageConst.PROPERTY_REAL_QUEUE_ID)
_RW = PERM_READ | PERM_WRITE
_REMOVE_TAG_CODE = tags_code(REMOVE_TAG)


def is_transactional(props: str) -> bool:
    """Whether a send is a half message: ``TRAN_MSG`` parses as true by Java's
    Boolean.parseBoolean (the broker decides by the property, not by the sysFlag, as 4.9 does)."""
    if "TRAN_MSG" not in props:
        return False
    value = get_property(props, P_TRAN)
    return value is not None and value.lower() == "true"


def half_properties(props: str, topic: str, queue_id: int) -> str:
    """The half message's properties: the producer's, then REAL_TOPIC and REAL_QID."""
    return append_properties(props, (MessageConst.PROPERTY_REAL_TOPIC, topic),
                             (MessageConst.PROPERTY_REAL_QUEUE_ID, str(queue_id)))


def index_keys_of(props: str) -> tuple[str, ...]:
    """UNIQ_KEY and every KEYS word: what the index files get for a record the broker writes."""
    uniq = get_property(props, P_UNIQ)
    keys = get_property(props, P_KEYS)
    if uniq:
        return index_keys(uniq, keys)
    return tuple(k for k in (keys or "").split(" ") if k)


class HalfFields(NamedTuple):
    """The fields of a half message END_TRANSACTION uses, kept from its put (`remember_half`)."""

    body: bytes
    flag: int
    queue_id: int
    queue_offset: int
    commit_log_offset: int
    sys_flag: int
    born_timestamp: int
    born_host: tuple[str, int]
    reconsume_times: int


class HalfRecord(NamedTuple):
    """A half message found by its commit-log offset: the decoded record (its properties dict is
    parsed only if read), or the fields kept from its put, and its properties text exactly as
    stored (a commit re-stores that text verbatim, as RocketMQ does)."""

    msg: MessageExt | HalfFields
    properties: str

    def prop(self, needle_: str) -> str | None:
        """One property by its `needle`, read from the text (no dict built)."""
        return get_property(self.properties, needle_)


FRESH_HALVES = 16_384  # half messages kept from their put for their END_TRANSACTION


class TransactionalMessageBridge:
    def __init__(self, controller: BrokerController) -> None:
        self._ctl = controller
        # commit-log offset -> the half stored there, the latest FRESH_HALVES (see remember_half)
        self._fresh: collections.OrderedDict[int, HalfRecord] = collections.OrderedDict()

    @property
    def _store_host_text(self) -> str:
        host, port = self._ctl.store_host
        return f"{host}:{port}"

    # -- topics -------------------------------------------------------------------------------

    def half_topic_config(self) -> object:
        """The half topic's config, created (1 queue, RW) the first time, as selectTopicConfig."""
        return self._ctl.topic_manager.create_topic_in_send_message_back_method(
            RMQ_SYS_TRANS_HALF_TOPIC, 1, _RW, 0)

    def half_queue_ids(self) -> range:
        cfg = self._ctl.topic_manager.select_topic_config(RMQ_SYS_TRANS_HALF_TOPIC)
        return range(cfg.read_queue_nums if cfg is not None else 0)

    # -- offsets (CID_RMQ_SYS_TRANS) -------------------------------------------------------------

    def fetch_consume_offset(self, topic: str, queue_id: int) -> int:
        offset = self._ctl.offset_manager.query_offset(CID_SYS_RMQ_TRANS, topic, queue_id)
        if offset == -1:
            offset = self._ctl.store.get_min_offset_in_queue(topic, queue_id)
        return offset

    def update_consume_offset(self, topic: str, queue_id: int, offset: int) -> None:
        self._ctl.offset_manager.commit_offset(self._store_host_text, CID_SYS_RMQ_TRANS, topic, queue_id,
                                               offset)

    # -- reads -------------------------------------------------------------------------------------

    def get_messages(self, topic: str, queue_id: int, offset: int, nums: int
                     ) -> tuple[GetMessageResult, list[MessageExt]]:
        """Up to ``nums`` records of a half / op queue from ``offset``, decoded."""
        r = self._ctl.store.get_message(topic, queue_id, offset, nums)
        if not r.found:
            return r, []
        try:
            return r, decode_messages(b"".join(r.buffers))
        except ProtocolError as exc:
            log.warning("undecodable record in %s/%d at %d: %s", topic, queue_id, offset, exc)
            return r, []

    def remember_half(self, entry: SingleEntry, commit_log_offset: int, queue_offset: int) -> None:
        """Keep a half message just stored for its END_TRANSACTION, which usually follows within
        milliseconds: `look_half` then finds it here rather than reading the record back and
        decoding it. A stored record never changes, so the copy is what a read would give; the
        END takes it out, and the oldest go past FRESH_HALVES (those are read back as before)."""
        _topic, queue_id, body, flag, props, _tcode, _keys, sys_flag, born_ts, born_host, reconsume = entry
        if ":" in born_host[0]:
            return  # the store sets the IPv6 flag in the record's sysFlag: read that one back
        fresh = self._fresh
        fresh[commit_log_offset] = HalfRecord(HalfFields(
            body if type(body) is bytes else bytes(body), flag, queue_id, queue_offset, commit_log_offset,
            sys_flag, born_ts, born_host, reconsume), props)
        if len(fresh) > FRESH_HALVES:
            fresh.popitem(last=False)

    def look_half(self, commit_log_offset: int) -> HalfRecord | None:
        """The record at ``commit_log_offset`` (lookMessageByOffset), None if there is none."""
        fresh = self._fresh.pop(commit_log_offset, None)
        if fresh is not None:
            return fresh
        if commit_log_offset < 0:
            return None
        raw = self._ctl.store.look_message_by_offset(commit_log_offset)
        if raw is None:
            return None
        try:
            # the bulk decoder: fixed fields inline, properties left as text until asked for
            (msg,) = decode_messages(raw)
            start, end = properties_span(raw)
            return HalfRecord(msg, bytes(raw[start:end]).decode())
        except (ProtocolError, UnicodeDecodeError, IndexError) as exc:
            log.warning("no readable record at commit-log offset %d: %s", commit_log_offset, exc)
            return None

    # -- writes -------------------------------------------------------------------------------------

    def _put(self, m: MessageToStore) -> PutMessageResult:
        result = self._ctl.store.append_message(m)
        if result.ok:
            self._ctl.stats.on_put(result.msg_num)
        else:
            log.error("put message failed, topic: %s, queueId: %d: %s", m.topic, m.queue_id,
                      result.status.name)
        return result

    def op_entry(self, half_queue_id: int, half_queue_offset: int, now_ms: int) -> SingleEntry:
        """The op record marking a half message as ended (committed or rolled back), as Java's
        ``new Message(opTopic, "d", offset)``: TAGS d, WAIT true, a UNIQ_KEY of the broker's."""
        ctl = self._ctl
        uniq = ctl.uniq_id_generator()
        props = f"WAIT\x01true\x02TAGS\x01{REMOVE_TAG}\x02UNIQ_KEY\x01{uniq}\x02"
        # a plain tuple in SingleEntry's field order: cheaper to build, and the store takes either
        return (RMQ_SYS_TRANS_OP_HALF_TOPIC, half_queue_id, str(half_queue_offset).encode(), 0,  # type: ignore[return-value]
                props, _REMOVE_TAG_CODE, (uniq,), 0, now_ms, ctl.store_host, 0)

    def ensure_op_topic(self) -> None:
        if RMQ_SYS_TRANS_OP_HALF_TOPIC not in self._ctl.topic_manager.table:
            self._ctl.topic_manager.create_topic_in_send_message_back_method(
                RMQ_SYS_TRANS_OP_HALF_TOPIC, 1, _RW, 0)

    def put_many(self, entries: list[SingleEntry], prepared: list[int] | None = None
                 ) -> list[tuple[int, int, int] | PutMessageStatus]:
        """Store a run of records the transaction service writes, in one append."""
        out = self._ctl.store.append_many(entries, prepared)
        stored = sum(type(r) is tuple for r in out)
        self._ctl.stats.on_put(stored)
        if stored != len(out):
            for e, r in zip(entries, out, strict=True):
                if not isinstance(r, tuple):
                    log.error("put message failed, topic: %s, queueId: %d: %s", e[0], e[1], r.name)
        return out

    def put_back_half(self, msg: MessageExt, properties: dict[str, str]) -> PutMessageResult:
        """A copy of a half message at the end of its queue (renewHalfMessageInner), with
        ``properties`` (the check times updated). RocketMQ drops the FLAG here; it is kept."""
        text = encode_properties(properties)
        m = MessageToStore(
            msg.topic, msg.queue_id, msg.body, msg.flag, text, tags_code(properties.get("TAGS")),
            index_keys_of(text), msg.sys_flag, msg.born_timestamp, msg.born_host, msg.reconsume_times,
            wait_store_msg_ok=False,
        )
        return self._put(m)

    def put_discarded(self, msg: MessageExt) -> bool:
        """A half message checked too often goes to TRANS_CHECK_MAX_TIME_TOPIC
        (DefaultTransactionalMessageCheckListener.resolveDiscardMsg)."""
        ctl = self._ctl
        cfg = ctl.topic_manager.create_topic_in_send_message_back_method(
            RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC, TCMT_QUEUE_NUMS, _RW, 0)
        text = encode_properties(msg.properties)
        m = MessageToStore(
            cfg.topic_name, 0, msg.body, msg.flag, text, tags_code(msg.tags), index_keys_of(text),
            msg.sys_flag & ~_TRAN_MASK, msg.born_timestamp, msg.born_host, msg.reconsume_times,
            wait_store_msg_ok=False,
        )
        ok = self._put(m).ok
        if ok:
            log.info("Put checked-too-many-time half message to TRANS_CHECK_MAXTIME_TOPIC OK. "
                     "Restored in queueOffset=%d, commitLogOffset=%d, real topic=%s", msg.queue_offset,
                     msg.commit_log_offset, msg.properties.get(MessageConst.PROPERTY_REAL_TOPIC))
        return ok
