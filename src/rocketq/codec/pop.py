"""Pop's wire and disk texts, sans I/O (RocketMQ 5's ExtraInfoUtil, KeyBuilder, PopCheckPoint,
AckMsg, BatchAckMsg and the BATCH_ACK_MESSAGE body).

* The receipt handle (property ``POP_CK``, the ``extraInfo`` of ACK / CHANGE_INVISIBLETIME) is
  ``"ckOffset popTime invisibleTime reviveQid retry brokerName queueId [queueOffset]"``, with
  ``retry`` 0 for the topic itself, 1 for ``%RETRY%group_topic`` and 2 for ``%RETRY%group+topic``.
* The pop response says where each queue's checkpoint starts and which offsets it holds:
  ``startOffsetInfo`` = ``"retry queueId startOffset;..."``, ``msgOffsetInfo`` =
  ``"retry queueId o1,o2,...;..."``, ``orderCountInfo`` = ``"retry queueId count;..."`` (or
  ``"retry qo<queueId>%<offset> count"`` per message).
* Checkpoints (tag ``ck``) and acks (``ack``, ``bAck``) are JSON bodies in the revive topic
  ``rmq_sys_REVIVE_LOG_<cluster>``, with fastjson's short field names.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import orjson

from rocketq.codec.properties import MessageConst

if TYPE_CHECKING:
    from rocketq.codec.message import MessageExt

__all__ = [
    "ACK_TAG",
    "BATCH_ACK_TAG",
    "CK_TAG",
    "POP_ORDER_REVIVE_QUEUE",
    "REVIVE_GROUP",
    "AckMsg",
    "BatchAck",
    "ExtraInfo",
    "PopCheckPoint",
    "build_extra_info",
    "build_msg_offset_info",
    "build_order_count_info",
    "build_pop_retry_topic",
    "build_start_offset_info",
    "decode_batch_ack_body",
    "encode_batch_ack_body",
    "is_pop_retry_topic_v2",
    "parse_extra_info",
    "parse_msg_offset_info",
    "parse_normal_topic",
    "parse_offset_info",
    "retry_flag",
    "revive_topic",
]

RETRY_GROUP_TOPIC_PREFIX = "%RETRY%"
POP_ORDER_REVIVE_QUEUE = 999  # KeyBuilder: the reviveQid of an orderly pop (no checkpoint is written)
REVIVE_GROUP = "CID_RMQ_SYS_REVIVE_GROUP"
CK_TAG = "ck"
ACK_TAG = "ack"
BATCH_ACK_TAG = "bAck"
SPLIT = "@"

NORMAL = "0"
RETRY_V1 = "1"
RETRY_V2 = "2"


def revive_topic(cluster: str) -> str:
    """PopAckConstants.buildClusterReviveTopic."""
    return "rmq_sys_REVIVE_LOG_" + cluster


def build_pop_retry_topic(topic: str, group: str, v2: bool = False) -> str:
    """KeyBuilder.buildPopRetryTopic: ``%RETRY%group_topic`` (``+`` with enableRetryTopicV2)."""
    return f"{RETRY_GROUP_TOPIC_PREFIX}{group}{'+' if v2 else '_'}{topic}"


def is_pop_retry_topic_v2(topic: str) -> bool:
    return topic.startswith(RETRY_GROUP_TOPIC_PREFIX) and "+" in topic


def parse_normal_topic(topic: str, group: str) -> str:
    """KeyBuilder.parseNormalTopic(topic, cid): the topic a pop retry topic of `group` retries."""
    if not topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
        return topic
    v2 = f"{RETRY_GROUP_TOPIC_PREFIX}{group}+"
    if topic.startswith(v2):
        return topic[len(v2) :]
    return topic[len(RETRY_GROUP_TOPIC_PREFIX) + len(group) + 1 :]


def retry_flag(topic: str) -> str:
    """ExtraInfoUtil.getRetry: "0" normal, "1" retry V1 (any %RETRY% topic), "2" retry V2."""
    if is_pop_retry_topic_v2(topic):
        return RETRY_V2
    if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
        return RETRY_V1
    return NORMAL


def real_topic(topic: str, group: str, flag: str) -> str:
    """ExtraInfoUtil.getRealTopic: the topic a handle's message was popped from."""
    if flag == RETRY_V1:
        return build_pop_retry_topic(topic, group, False)
    if flag == RETRY_V2:
        return build_pop_retry_topic(topic, group, True)
    if flag == NORMAL:
        return topic
    raise ValueError(f"bad retry flag {flag!r} in extraInfo")


# -- the receipt handle ---------------------------------------------------------------------------


def build_extra_info(
    ck_offset: int,
    pop_time: int,
    invisible_time: int,
    revive_qid: int,
    topic: str,
    broker_name: str,
    queue_id: int,
    queue_offset: int | None = None,
) -> str:
    """ExtraInfoUtil.buildExtraInfo (`topic` is the topic the message was popped from)."""
    text = (
        f"{ck_offset} {pop_time} {invisible_time} {revive_qid} {retry_flag(topic)} {broker_name} {queue_id}"
    )
    return text if queue_offset is None else f"{text} {queue_offset}"


@dataclass(frozen=True, slots=True)
class ExtraInfo:
    """A parsed receipt handle."""

    ck_offset: int
    pop_time: int
    invisible_time: int
    revive_qid: int
    retry: str
    broker_name: str
    queue_id: int
    queue_offset: int | None

    @property
    def revive_time(self) -> int:
        return self.pop_time + self.invisible_time

    @property
    def is_order(self) -> bool:
        return self.revive_qid == POP_ORDER_REVIVE_QUEUE

    def real_topic(self, topic: str, group: str) -> str:
        return real_topic(topic, group, self.retry)


def parse_extra_info(text: str) -> ExtraInfo:
    """ValueError unless `text` has at least the seven fields of a handle."""
    parts = text.split(" ")
    if len(parts) < 7:
        raise ValueError(f"extraInfo has {len(parts)} fields, 7 or 8 expected: {text!r}")
    return ExtraInfo(
        int(parts[0]),
        int(parts[1]),
        int(parts[2]),
        int(parts[3]),
        parts[4],
        parts[5],
        int(parts[6]),
        int(parts[7]) if len(parts) > 7 else None,
    )


# -- the pop response's offset texts --------------------------------------------------------------


def build_start_offset_info(parts: list[str], topic: str, queue_id: int, start_offset: int) -> None:
    parts.append(f"{retry_flag(topic)} {queue_id} {start_offset}")


def build_msg_offset_info(parts: list[str], topic: str, queue_id: int, offsets: Iterable[int]) -> None:
    parts.append(f"{retry_flag(topic)} {queue_id} {','.join(map(str, offsets))}")


def build_order_count_info(
    parts: list[str], topic: str, queue_id: int, count: int, queue_offset: int | None = None
) -> None:
    """Per queue, or per message (``qo<queueId>%<offset>``) when `queue_offset` is given."""
    key = str(queue_id) if queue_offset is None else f"qo{queue_id}%{queue_offset}"
    parts.append(f"{retry_flag(topic)} {key} {count}")


def _offset_info_entries(text: str | None, what: str) -> list[tuple[str, str]]:
    """``"retry queueId value;..."`` as (``"retry@queueId"``, value) pairs."""
    out = []
    for one in text.split(";") if text else ():
        f = one.split(" ")
        if len(f) != 3:
            raise ValueError(f"bad {what} {text!r}")
        out.append((f"{f[0]}@{f[1]}", f[2]))
    return out


def parse_offset_info(text: str | None) -> dict[str, int]:
    """parseStartOffsetInfo / parseOrderCountInfo: ``"retry@queueId"`` -> number."""
    return {key: int(value) for key, value in _offset_info_entries(text, "offset info")}


def parse_msg_offset_info(text: str | None) -> dict[str, list[int]]:
    """parseMsgOffsetInfo: ``"retry@queueId"`` -> the queue offsets of the popped messages."""
    return {
        key: [int(x) for x in value.split(",")] for key, value in _offset_info_entries(text, "msgOffsetInfo")
    }


# -- revive log bodies ----------------------------------------------------------------------------


@dataclass(slots=True)
class PopCheckPoint:
    """One pop of one queue: which offsets went out (start + diffs), until when they are invisible.

    ``bit_map`` holds the acked indexes; ``revive_offset`` is where the checkpoint sits in its revive
    queue (filled in by the reader, not written by Java's pop)."""

    start_offset: int
    pop_time: int
    invisible_time: int
    num: int
    queue_id: int
    topic: str
    cid: str
    broker_name: str
    queue_offset_diff: list[int] = field(default_factory=list)
    bit_map: int = 0
    revive_offset: int = 0
    re_put_times: str | None = None

    @property
    def revive_time(self) -> int:
        return self.pop_time + self.invisible_time

    def index_of_ack(self, ack_offset: int) -> int:
        """PopCheckPoint.indexOfAck: the bit of `ack_offset`, -1 when it is not in this checkpoint."""
        d = ack_offset - self.start_offset
        if d < 0:
            return -1
        if not self.queue_offset_diff:
            return d if d < self.num else -1
        try:
            return self.queue_offset_diff.index(d)
        except ValueError:
            return -1

    def ack_offset_by_index(self, index: int) -> int:
        if not self.queue_offset_diff:
            return self.start_offset + index
        return self.start_offset + self.queue_offset_diff[index]

    def unacked_offsets(self) -> list[int]:
        bm = self.bit_map
        return [self.ack_offset_by_index(i) for i in range(self.num) if not bm >> i & 1]

    @property
    def all_acked(self) -> bool:
        return self.bit_map == (1 << self.num) - 1

    def unique_id(self) -> str:
        """genCkUniqueId: the checkpoint message's UNIQ_KEY."""
        return SPLIT.join(
            (
                self.topic,
                str(self.queue_id),
                str(self.start_offset),
                self.cid,
                str(self.pop_time),
                self.broker_name,
                CK_TAG,
            )
        )

    def encode(self) -> bytes:
        # fastjson writes fields sorted by name, and the getter reviveTime too
        d: dict[str, Any] = {"bm": self.bit_map, "bn": self.broker_name, "c": self.cid}
        if self.queue_offset_diff:
            d["d"] = self.queue_offset_diff
        d.update(
            {
                "it": self.invisible_time,
                "n": self.num,
                "pt": self.pop_time,
                "q": self.queue_id,
                "reviveTime": self.revive_time,
                "ro": self.revive_offset,
            }
        )
        if self.re_put_times is not None:
            d["rp"] = self.re_put_times
        d.update({"so": self.start_offset, "t": self.topic})
        return orjson.dumps(d)

    @classmethod
    def decode(cls, body: bytes | memoryview) -> PopCheckPoint:
        d = orjson.loads(bytes(body))
        return cls(
            int(d["so"]),
            int(d["pt"]),
            int(d["it"]),
            int(d.get("n", 0)),
            int(d["q"]),
            d["t"],
            d["c"],
            d.get("bn") or "",
            [int(x) for x in d.get("d") or ()],
            int(d.get("bm", 0)),
            int(d.get("ro", 0)),
            d.get("rp"),
        )


@dataclass(frozen=True, slots=True)
class AckMsg:
    """One ack (tag ``ack``) or several of one checkpoint (tag ``bAck``, ``ack_offsets`` set)."""

    ack_offset: int
    start_offset: int
    consumer_group: str
    topic: str
    queue_id: int
    pop_time: int
    broker_name: str
    ack_offsets: tuple[int, ...] = ()

    @property
    def tag(self) -> str:
        return BATCH_ACK_TAG if self.ack_offsets else ACK_TAG

    @property
    def offsets(self) -> Sequence[int]:
        return self.ack_offsets or (self.ack_offset,)

    def unique_id(self) -> str:
        """genAckUniqueId / genBatchAckUniqueId."""
        if self.ack_offsets:
            listed = "[" + ", ".join(map(str, self.ack_offsets)) + "]"
            return SPLIT.join(
                (
                    self.topic,
                    str(self.queue_id),
                    listed,
                    self.consumer_group,
                    str(self.pop_time),
                    BATCH_ACK_TAG,
                )
            )
        return SPLIT.join(
            (
                self.topic,
                str(self.queue_id),
                str(self.ack_offset),
                self.consumer_group,
                str(self.pop_time),
                self.broker_name,
                ACK_TAG,
            )
        )

    def encode(self) -> bytes:
        d: dict[str, Any] = {"ao": self.ack_offset}
        if self.ack_offsets:
            d["aol"] = list(self.ack_offsets)
        d.update(
            {
                "bn": self.broker_name,
                "c": self.consumer_group,
                "pt": self.pop_time,
                "q": self.queue_id,
                "so": self.start_offset,
                "t": self.topic,
            }
        )
        return orjson.dumps(d)

    @classmethod
    def decode(cls, body: bytes | memoryview) -> AckMsg:
        d = orjson.loads(bytes(body))
        return cls(
            int(d.get("ao", 0)),
            int(d["so"]),
            d["c"],
            d["t"],
            int(d["q"]),
            int(d["pt"]),
            d.get("bn") or "",
            tuple(int(x) for x in d.get("aol") or ()),
        )


# -- BATCH_ACK_MESSAGE body -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BatchAck:
    """One checkpoint's acks in a BatchAckMessageRequestBody; ``offsets`` are absolute queue offsets
    (on the wire: a java.util.BitSet of offset - startOffset, as base64 of its little-endian bytes)."""

    consumer_group: str
    topic: str
    retry: str
    start_offset: int
    queue_id: int
    revive_queue_id: int
    pop_time: int
    invisible_time: int
    offsets: tuple[int, ...]


def _bitset_bytes(bits: Iterable[int]) -> bytes:
    n = 0
    for b in bits:
        n |= 1 << b
    return n.to_bytes((n.bit_length() + 7) // 8, "little")


def encode_batch_ack_body(broker_name: str, acks: Sequence[BatchAck]) -> bytes:
    return orjson.dumps(
        {
            "acks": [
                {
                    "b": base64.b64encode(_bitset_bytes(o - a.start_offset for o in a.offsets)).decode(),
                    "c": a.consumer_group,
                    "it": a.invisible_time,
                    "pt": a.pop_time,
                    "q": a.queue_id,
                    "r": a.retry,
                    "rq": a.revive_queue_id,
                    "so": a.start_offset,
                    "t": a.topic,
                }
                for a in acks
            ],
            "brokerName": broker_name,
        }
    )


def decode_batch_ack_body(
    body: bytes | bytearray | memoryview | Sequence[bytes | bytearray | memoryview],
) -> tuple[str, list[BatchAck]]:
    """(brokerName, acks); ValueError on a malformed body."""
    try:
        raw_body = body if isinstance(body, bytes | bytearray | memoryview) else b"".join(body)
        d = orjson.loads(bytes(raw_body))
        out = []
        for a in d.get("acks") or ():
            start = int(a.get("so", a.get("startOffset", 0)))
            raw = a.get("b", a.get("bitSet"))
            bits = base64.b64decode(raw) if isinstance(raw, str) else bytes(raw or b"")
            n = int.from_bytes(bits, "little")
            offsets = tuple(start + i for i in range(n.bit_length()) if n >> i & 1)
            out.append(
                BatchAck(
                    a.get("c", a.get("consumerGroup")),
                    a.get("t", a.get("topic")),
                    str(a.get("r", a.get("retry", NORMAL))),
                    start,
                    int(a.get("q", a.get("queueId", 0))),
                    int(a.get("rq", a.get("reviveQueueId", 0))),
                    int(a.get("pt", a.get("popTime", 0))),
                    int(a.get("it", a.get("invisibleTime", 0))),
                    offsets,
                )
            )
        return str(d.get("brokerName") or ""), out
    except (orjson.JSONDecodeError, TypeError, KeyError, AttributeError, ValueError) as exc:
        raise ValueError(f"bad BatchAckMessageRequestBody: {exc}") from None


# -- the receipt handles of a pop answer ----------------------------------------------------------


def receipt_handles(
    msgs: list[MessageExt],
    ext: dict[str, str],
    pop_time: int,
    invisible: int,
    revive_qid: int,
    broker_name: str,
    topic: str,
) -> list[str]:
    """The handle of each message of a POP_MESSAGE answer (processPopResponse), from the answer's
    extFields: what the SDK's SimpleConsumer and the broker's gRPC ReceiveMessage both hand out."""
    starts = parse_offset_info(ext.get("startOffsetInfo"))
    counts = parse_offset_info(ext.get("orderCountInfo"))
    if not counts and all(key.startswith("0@") for key in starts):
        return _normal_handles(msgs, starts, pop_time, invisible, revive_qid, broker_name)
    return _handles(msgs, starts, counts, pop_time, invisible, revive_qid, broker_name, topic)


def _normal_handles(
    msgs: list[MessageExt],
    starts: dict[str, int],
    pop_time: int,
    invisible: int,
    revive_qid: int,
    broker_name: str,
) -> list[str]:
    """The common answer (messages of the topic itself, none retried): one handle prefix per queue,
    and the properties left undecoded."""
    prefixes: dict[int, str] = {}
    handles = []
    for m in msgs:
        qid = m.queue_id
        prefix = prefixes.get(qid)
        if prefix is None:
            start = starts.get(f"0@{qid}", m.queue_offset)
            prefix = prefixes[qid] = f"{start} {pop_time} {invisible} {revive_qid} 0 {broker_name} {qid} "
        handles.append(prefix + str(m.queue_offset))
    return handles


def _handles(
    msgs: list[MessageExt],
    starts: dict[str, int],
    counts: dict[str, int],
    pop_time: int,
    invisible: int,
    revive_qid: int,
    broker_name: str,
    topic: str,
) -> list[str]:
    """processPopResponse in full: retried messages come with their handle (POP_CK), the others get
    one built from their queue's start offset; orderly pops carry the times each was popped."""
    handles = []
    for m in msgs:
        props = m.properties
        handle = props.get(MessageConst.PROPERTY_POP_CK)
        if handle is None:
            flag = retry_flag(m.topic)
            key = f"{flag}@{m.queue_id}"
            start = starts.get(key, m.queue_offset)  # a broker without startOffsetInfo: its own checkpoint
            handle = props[MessageConst.PROPERTY_POP_CK] = build_extra_info(
                start, pop_time, invisible, revive_qid, m.topic, broker_name, m.queue_id, m.queue_offset
            )
            count = counts.get(f"{flag}@qo{m.queue_id}%{m.queue_offset}", counts.get(key))
            if count:
                object.__setattr__(m, "reconsume_times", count)
        props.setdefault(MessageConst.PROPERTY_FIRST_POP_TIME, str(pop_time))
        if m.topic != topic:
            object.__setattr__(m, "topic", topic)
        handles.append(handle)
    return handles


def batch_acks(group: str, topic: str, handles: Iterable[str]) -> list[BatchAck]:
    """The BATCH_ACK_MESSAGE entries acking `handles` (of messages popped for `topic`): one per
    checkpoint. ValueError for a handle that is not one."""
    by_ck: dict[str, list[int]] = {}  # a handle without its queue offset names its checkpoint
    for handle in handles:
        if handle.count(" ") == 7:
            ck, _, offset = handle.rpartition(" ")
        else:  # an old 7-field handle: the message is its checkpoint's start
            ck, offset = handle, handle.split(" ", 1)[0]
        by_ck.setdefault(ck, []).append(int(offset))
    acks = []
    for ck, offs in by_ck.items():
        i = parse_extra_info(ck)
        acks.append(BatchAck(group, topic, i.retry, i.ck_offset, i.queue_id, i.revive_qid, i.pop_time,
                             i.invisible_time, tuple(offs)))
    return acks
