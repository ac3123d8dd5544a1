"""SendMessageProcessor: SEND_MESSAGE (V1), SEND_MESSAGE_V2, SEND_BATCH_MESSAGE, CONSUMER_SEND_MSG_BACK.

The hot path: one typed-header decode, dict lookups for the topic, a handful of `str.find`s over
the client's properties string (never decoded into a dict, never re-encoded: the broker appends
UNIQ_KEY / CLUSTER to it), one MessageToStore and one store append. With ASYNC_FLUSH the store
appends synchronously and the response is returned directly, without a Task per request.
"""

from __future__ import annotations

import logging
import random
import struct
import time
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any

import numpy as np

from rocketq.broker.topic_manager import (
    DLQ_GROUP_TOPIC_PREFIX,
    NOT_ALLOWED_SEND_TOPICS,
    PERM_READ,
    PERM_WRITE,
    RETRY_GROUP_TOPIC_PREFIX,
    RMQ_SYS_SCHEDULE_TOPIC,
    check_send_allowed,
    check_topic_name,
)
from rocketq.codec.bodies import TopicFilterType
from rocketq.codec.codes import RequestCode, ResponseCode
from rocketq.codec.headers import ConsumerSendMsgBackRequestHeader, SendMessageRequestHeader
from rocketq.codec.message import MessageSysFlag, decode_message, encode_properties, tags_code
from rocketq.errors import (
    InvalidParameter,
    MessageIllegal,
    NoPermission,
    ProtocolError,
    SubscriptionGroupNotExist,
    SystemError_,
    TopicNotExist,
)
from rocketq.store.model import (
    MessageBatchToStore,
    MessageToStore,
    PutMessageResult,
    PutMessageStatus,
)

if TYPE_CHECKING:
    from rocketq.broker.controller import BrokerController
    from rocketq.codec.command import RemotingCommand

log = logging.getLogger("rocketq.broker.send")

_SEND_MESSAGE = int(RequestCode.SEND_MESSAGE)
_SEND_BATCH = int(RequestCode.SEND_BATCH_MESSAGE)
_from_ext_v1 = SendMessageRequestHeader.from_ext
_from_ext_v2 = SendMessageRequestHeader.from_ext_v2

_TRAN_MASK = MessageSysFlag.TRANSACTION_MASK
_TRAN_PREPARED = MessageSysFlag.TRANSACTION_PREPARED_TYPE
_MULTI_TAGS = MessageSysFlag.MULTI_TAGS_FLAG
_MULTI_TAG_TYPE = TopicFilterType.MULTI_TAG
DLQ_NUMS_PER_GROUP = 1
TOPIC_SYS_FLAG_UNIT = 0x1
TOPIC_SYS_FLAG_UNIT_SUB = 0x2
APPLY_TOPIC_URL = "https://rocketmq.apache.org/docs/bestPractice/06FAQ"
TRANSACTION_NOT_SUPPORTED = "transaction messages are not supported by this broker yet"

# Property keys searched in the raw properties string ("KEY\x01" so a match is a whole key).
_P_UNIQ = "UNIQ_KEY\x01"
_P_TAGS = "TAGS\x01"
_P_KEYS = "KEYS\x01"
_P_DELAY = "DELAY\x01"
_P_WAIT = "WAIT\x01"
_P_TRAN = "TRAN_MSG\x01"
_P_CLUSTER = "CLUSTER\x01"
_TIMER_KEYS = ("TIMER_DELIVER_MS\x01", "TIMER_DELAY_SEC\x01", "TIMER_DELAY_MS\x01")

# Stored statuses answer with the send header fields; the others with a code and remark.
_PUT_OK = PutMessageStatus.PUT_OK
_FLUSH_DISK_TIMEOUT = PutMessageStatus.FLUSH_DISK_TIMEOUT
_FAILED: dict[PutMessageStatus, tuple[int, str]] = {
    PutMessageStatus.CREATE_MAPPED_FILE_FAILED: (
        ResponseCode.SYSTEM_ERROR, "create mapped file failed, server is busy or broken."),
    PutMessageStatus.MESSAGE_ILLEGAL: (
        ResponseCode.MESSAGE_ILLEGAL,
        "the message is illegal, maybe msg body or properties length not matched. "
        "msg body length limit {max}B, msg properties length limit 32KB."),
    PutMessageStatus.PROPERTIES_SIZE_EXCEEDED: (
        ResponseCode.MESSAGE_ILLEGAL,
        "the message is illegal, maybe msg body or properties length not matched. "
        "msg body length limit {max}B, msg properties length limit 32KB."),
    PutMessageStatus.SERVICE_NOT_AVAILABLE: (
        ResponseCode.SERVICE_NOT_AVAILABLE,
        "service not available now. It may be caused by one of the following reasons: the broker's disk "
        "is full, messages are put to the slave, message store has been shut down, etc."),
    PutMessageStatus.OS_PAGE_CACHE_BUSY: (
        ResponseCode.SYSTEM_BUSY, "[PC_SYNCHRONIZED]broker busy, start flow control for a while"),
    PutMessageStatus.UNKNOWN_ERROR: (ResponseCode.SYSTEM_ERROR, "UNKNOWN_ERROR"),
}

_BATCH_HEAD = struct.Struct(">iiiii")  # TOTALSIZE MAGIC BODYCRC FLAG BODYLEN
_BATCH_HEAD_SIZE = _BATCH_HEAD.size
_SHORT = struct.Struct(">h")


def get_property(props: str, key1: str) -> str | None:
    """The value of property `key1` ("NAME\\x01") in a raw properties string, or None.

    A match counts only at the start of a segment, so "XTAGS" never answers for "TAGS"; the
    last occurrence wins, as RocketMQ's decoder (a HashMap fed in order) keeps the last duplicate.
    """
    i = props.rfind(key1)
    while i > 0 and props[i - 1] != "\x02":
        i = props.rfind(key1, 0, i)
    if i < 0:
        return None
    start = i + len(key1)
    end = props.find("\x02", start)
    return props[start:] if end < 0 else props[start:end]


def append_properties(props: str, *pairs: tuple[str, str]) -> str:
    """Append `name=value` entries to a raw properties string without re-encoding it."""
    tail = "".join(f"{k}\x01{v}\x02" for k, v in pairs)
    if not props or props[-1] == "\x02":
        return props + tail
    return props + "\x02" + tail


def _index_keys(uniq: str, keys: str | None) -> tuple[str, ...]:
    if not keys:
        return (uniq,)
    return (uniq, *[k for k in keys.split(" ") if k])


_HEX_DIGITS = np.frombuffer(b"0123456789ABCDEF", dtype=np.uint8)
_NIBBLE_SHIFTS = np.arange(60, -4, -4, dtype=np.uint64)


def joined_msg_ids(result: PutMessageResult) -> str:
    """The batch response's msgId: every record's offset msgId, comma-joined.

    Formatting a hundred ids one f-string at a time costs a quarter of a microsecond each; numpy
    writes the hex digits for the whole batch at once.
    """
    offsets = result.record_offsets
    if len(offsets) < 32:
        return result.msg_ids_text
    prefix = result.msg_id_prefix.encode()
    width = len(prefix) + 17
    out = np.empty((len(offsets), width), dtype=np.uint8)
    out[:, :len(prefix)] = np.frombuffer(prefix, dtype=np.uint8)
    nibbles = (np.asarray(offsets, dtype=np.uint64)[:, None] >> _NIBBLE_SHIFTS) & np.uint64(15)
    out[:, len(prefix):width - 1] = _HEX_DIGITS[nibbles]
    out[:, width - 1] = 0x2C  # ","
    return out.tobytes()[:-1].decode("ascii")


def _twin_of(cls: type) -> type | None:
    """A mutable class with `cls`'s exact slot layout, or None if CPython refuses the retag.

    A frozen dataclass sets each field through object.__setattr__ (about 1.5 us for the 14
    fields of MessageToStore, per message). Filling a twin with plain slot stores and then
    retagging it as `cls` gives the same frozen instance for a third of that.
    """
    twin = type(f"_{cls.__name__}Builder", (), {"__slots__": cls.__dict__.get("__slots__", ())})
    try:
        probe: Any = object.__new__(twin)
        probe.__class__ = cls
    except TypeError:
        return None
    return twin


_MTS_FIELDS = frozenset((
    "topic", "queue_id", "body", "flag", "properties", "tags_code", "keys", "sys_flag", "born_timestamp",
    "born_host", "reconsume_times", "prepared_transaction_offset", "store_timestamp", "wait_store_msg_ok"))
# Only when the twin sets exactly the fields MessageToStore has (a new field falls back safely).
_MTS_TWIN = _twin_of(MessageToStore) if frozenset(MessageToStore.__slots__) == _MTS_FIELDS else None


def _message_to_store(topic: str, queue_id: int, body: Any, flag: int, props: str, tcode: int,
                      keys: tuple[str, ...], sys_flag: int, born_ts: int, born_host: tuple[str, int],
                      reconsume_times: int, wait: bool) -> MessageToStore:
    twin = _MTS_TWIN
    if twin is None:
        return MessageToStore(topic, queue_id, body, flag, props, tcode, keys, sys_flag, born_ts, born_host,
                              reconsume_times, 0, 0, wait)
    m: Any = object.__new__(twin)
    m.topic = topic
    m.queue_id = queue_id
    m.body = body
    m.flag = flag
    m.properties = props
    m.tags_code = tcode
    m.keys = keys
    m.sys_flag = sys_flag
    m.born_timestamp = born_ts
    m.born_host = born_host
    m.reconsume_times = reconsume_times
    m.prepared_transaction_offset = 0
    m.store_timestamp = 0
    m.wait_store_msg_ok = wait
    m.__class__ = MessageToStore
    return m  # type: ignore[no-any-return]


def _parse_born_host(channel: Any) -> tuple[str, int]:
    """(ip, port) of the peer, parsed once per connection and kept on the channel."""
    attrs = channel.attrs
    host = attrs.get("born_host")
    if host is None:
        ip, _, port = str(channel.remote_address).rpartition(":")
        ip = ip.strip("[]") or "127.0.0.1"
        try:
            host = (ip, int(port))
        except ValueError:
            host = (ip, 0)
        attrs["born_host"] = host
    return host  # type: ignore[no-any-return]


class SendMessageProcessor:
    """Handles every producer write (RocketMQ SendMessageProcessor)."""

    def __init__(self, controller: BrokerController) -> None:
        self._ctl = controller
        self._topics = controller.topic_manager.table  # the manager never rebinds its table
        self._rand = random.Random()
        self._tags_codes: dict[str, int] = {}
        self.refresh_config()

    def refresh_config(self) -> None:
        """Cache config-derived values (called again after UPDATE_BROKER_CONFIG)."""
        ctl = self._ctl
        bc = ctl.broker_config
        self._store = ctl.store
        self._stats = ctl.stats
        self._uniq = ctl.uniq_id_generator
        self._cluster = bc.broker_cluster_name
        self._cluster_entry = f"CLUSTER\x01{bc.broker_cluster_name}\x02"
        self._broker_writable = bool(bc.broker_permission & PERM_WRITE)
        self._max_size = ctl.store_config.max_message_size
        self._trace_on = "true" if bc.trace_on else "false"
        self._region = bc.region_id
        # ASYNC_FLUSH (or WAIT=false) acks after the page-cache write: append synchronously and
        # answer without a Task. SYNC_FLUSH awaits the group commit.
        self._sync_flush = ctl.store_config.sync_flush

    # -- entry points ----------------------------------------------------------------------------

    def process(self, request: RemotingCommand, channel: Any) -> RemotingCommand | Awaitable[RemotingCommand]:
        """SEND_MESSAGE (10), SEND_MESSAGE_V2 (310), SEND_BATCH_MESSAGE (320)."""
        code = request.code
        ext = request.ext_fields
        if code == _SEND_MESSAGE:
            h = _from_ext_v1(ext)
            # The C++ client sends its batches as code 10 with batch "1" (its booleans are 0/1).
            batch = h.batch or (ext is not None and ext.get("batch") == "1")
        else:
            h = _from_ext_v2(ext)
            batch = code == _SEND_BATCH or h.batch or (ext is not None and ext.get("m") == "1")
        if batch:
            return self._send_batch(request, channel, h)
        return self._send_single(request, channel, h)

    # -- pre-checks (PROTOCOL.md §2.3) --------------------------------------------------------------

    def _topic_config(self, h: SendMessageRequestHeader, channel: Any) -> Any:
        topic = h.topic
        cfg = self._topics.get(topic)
        if cfg is None:
            cfg = self._create_missing_topic(h, channel)
        elif topic in NOT_ALLOWED_SEND_TOPICS:
            check_send_allowed(topic)
        if not self._broker_writable and cfg.order:
            ip = self._ctl.broker_config.broker_ip1
            raise NoPermission(f"the broker[{ip}] sending message is forbidden")
        if not cfg.perm & PERM_WRITE:
            raise NoPermission(f"the topic[{topic}] sending message is forbidden")
        return cfg

    def _create_missing_topic(self, h: SendMessageRequestHeader, channel: Any) -> Any:
        topic = h.topic
        check_topic_name(topic)
        check_send_allowed(topic)
        is_retry = topic.startswith(RETRY_GROUP_TOPIC_PREFIX)
        sys_flag = 0
        if h.unit_mode:
            sys_flag = TOPIC_SYS_FLAG_UNIT_SUB if is_retry else TOPIC_SYS_FLAG_UNIT
        tm = self._ctl.topic_manager
        log.warning("the topic %s not exist, producer: %s", topic, channel.remote_address)
        cfg = tm.create_topic_in_send_message_method(
            topic, h.default_topic, str(channel.remote_address), h.default_topic_queue_nums, sys_flag)
        if cfg is None and is_retry:
            cfg = tm.create_topic_in_send_message_back_method(topic, 1, PERM_WRITE | PERM_READ, sys_flag)
        if cfg is None:
            raise TopicNotExist(f"topic[{topic}] not exist, apply first please! {APPLY_TOPIC_URL}")
        return cfg

    def _queue_id(self, cfg: Any, queue_id: int, channel: Any) -> int:
        if queue_id < 0:
            nums = cfg.write_queue_nums
            if nums <= 0:
                raise NoPermission(f"the topic[{cfg.topic_name}] has no writable queue")
            return self._rand.randrange(nums)
        if queue_id >= max(cfg.write_queue_nums, cfg.read_queue_nums):
            raise InvalidParameter(
                f"request queueId[{queue_id}] is illegal, {cfg} Producer: {channel.remote_address}")
        return queue_id

    def _retry_or_dlq(self, h: SendMessageRequestHeader, request: RemotingCommand) -> tuple[str, int] | None:
        """For a %RETRY% topic: (DLQ topic, queue) when the message has been retried too often."""
        group = h.topic[len(RETRY_GROUP_TOPIC_PREFIX):]
        sgc = self._ctl.subscription_manager.find_subscription_group_config(group)
        if sgc is None:
            raise SubscriptionGroupNotExist(f"subscription group not exist, {group}")
        max_times = sgc.retry_max_times
        if h.max_reconsume_times is not None:
            max_times = h.max_reconsume_times
        consumer = self._ctl.processors.get("consumer_manage")
        # An orderly group that still holds queue locks cannot consume a retry: straight to the DLQ.
        locked = consumer is not None and consumer.lock_manager.has_live_locks(group)
        if (h.reconsume_times or 0) <= max_times and not locked:
            return None
        dlq = DLQ_GROUP_TOPIC_PREFIX + group
        cfg = self._ctl.topic_manager.create_topic_in_send_message_back_method(
            dlq, DLQ_NUMS_PER_GROUP, PERM_WRITE | PERM_READ, 0)
        if cfg is None:
            raise SystemError_(f"topic[{dlq}] not exist")
        return dlq, self._rand.randrange(DLQ_NUMS_PER_GROUP)

    # -- single message ------------------------------------------------------------------------------

    def _send_single(self, request: RemotingCommand, channel: Any,
                     h: SendMessageRequestHeader) -> RemotingCommand | Awaitable[RemotingCommand]:
        topic = h.topic
        cfg = self._topics.get(topic)
        if cfg is None or topic in NOT_ALLOWED_SEND_TOPICS or not cfg.perm & PERM_WRITE or (
                cfg.order and not self._broker_writable):
            cfg = self._topic_config(h, channel)
        queue_id = h.queue_id
        if queue_id < 0 or queue_id >= cfg.write_queue_nums:
            queue_id = self._queue_id(cfg, queue_id, channel)
        body = request.body
        if len(body) > self._max_size:
            raise MessageIllegal(f"the message body size over max value, MAX: {self._max_size}")
        props = h.properties or ""
        sys_flag = h.sys_flag
        if (sys_flag & _TRAN_MASK) == _TRAN_PREPARED or (
                "TRAN_MSG" in props and (get_property(props, _P_TRAN) or "").lower() == "true"):
            raise NoPermission(TRANSACTION_NOT_SUPPORTED)
        if cfg.topic_filter_type is _MULTI_TAG_TYPE:
            sys_flag |= _MULTI_TAGS
        if topic[0] == "%" and topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            moved = self._retry_or_dlq(h, request)
            if moved is not None:
                topic, queue_id = moved
                props = append_properties(props, ("DELAY", "-1"))
        tags = get_property(props, _P_TAGS)
        keys = get_property(props, _P_KEYS) if "KEYS\x01" in props else None
        uniq = get_property(props, _P_UNIQ)
        # The broker's own entries are appended to the client's string in one concatenation.
        if uniq:
            tail = "" if self._cluster_entry in props else self._cluster_entry
        else:
            uniq = self._uniq()
            tail = f"UNIQ_KEY\x01{uniq}\x02{self._cluster_entry}"
        if tail:
            props = f"{props}{tail}" if not props or props[-1] == "\x02" else f"{props}\x02{tail}"
        tcode = tags_code(tags) if tags else 0
        if "DELAY\x01" in props:
            delay = get_property(props, _P_DELAY)
            if delay is not None and delay != "0" and delay != "-1":
                topic, queue_id, props, tcode = self._delay(topic, queue_id, props, delay)
        if "TIMER_" in props and any(get_property(props, k) for k in _TIMER_KEYS):
            raise MessageIllegal("timer messages (TIMER_DELIVER_MS / TIMER_DELAY_*) are not supported "
                                 "by this broker; use a delay level (DELAY)")
        wait = True
        if self._sync_flush and "WAIT\x01" in props:
            wait = (get_property(props, _P_WAIT) or "true").lower() == "true"
        msg = _message_to_store(
            topic, queue_id, body, h.flag, props, tcode, (uniq,) if not keys else _index_keys(uniq, keys),
            sys_flag, h.born_timestamp, channel.attrs.get("born_host") or _parse_born_host(channel),
            h.reconsume_times or 0, wait)
        if not self._sync_flush or not wait:
            return self._response(request, self._store.append_message(msg), queue_id, uniq)
        return self._await_put(self._store.put_message(msg), request, queue_id, uniq)

    async def _await_put(self, put: Awaitable[PutMessageResult], request: RemotingCommand,
                         queue_id: int, uniq: str) -> RemotingCommand:
        return self._response(request, await put, queue_id, uniq)

    def _response(self, request: RemotingCommand, result: PutMessageResult, queue_id: int,
                  uniq: str | None, msg_id: str | None = None) -> RemotingCommand:
        status = result.status
        if status is _PUT_OK or status is _FLUSH_DISK_TIMEOUT:
            self._stats.put_total += result.msg_num
            ext = {
                "msgId": f"{result.msg_id_prefix}{result.wrote_offset:016X}" if msg_id is None else msg_id,
                "queueId": str(queue_id),
                "queueOffset": str(result.logical_offset),
                "MSG_REGION": self._region,
                "TRACE_ON": self._trace_on,
            }
            if uniq:
                ext["transactionId"] = uniq
            code = 0 if status is _PUT_OK else ResponseCode.FLUSH_DISK_TIMEOUT
            return request.make_response(code, None, ext)
        code, remark = _FAILED.get(status, (ResponseCode.SYSTEM_ERROR, "UNKNOWN_ERROR DEFAULT"))
        self._stats.on_put_failed()
        return request.make_response(code, remark.format(max=self._max_size),
                                     {"MSG_REGION": self._region, "TRACE_ON": self._trace_on})

    def _delay(self, topic: str, queue_id: int, props: str, delay: str) -> tuple[str, int, str, int]:
        """Stage a DELAY=<level> message in SCHEDULE_TOPIC_XXXX (PROTOCOL.md §4.2)."""
        try:
            level = int(delay)
        except ValueError:
            raise MessageIllegal(f"the DELAY property is not a delay level: {delay!r}") from None
        if level <= 0:
            return topic, queue_id, props, tags_code(get_property(props, _P_TAGS))
        schedule = self._ctl.schedule_service
        if schedule is None:
            raise MessageIllegal("delayed messages (DELAY) are not supported by this broker")
        level = min(level, schedule.max_delay_level)
        props = append_properties(props, ("REAL_TOPIC", topic), ("REAL_QID", str(queue_id)))
        deliver_at = int(time.time() * 1000) + schedule.delay_ms(level)
        return RMQ_SYS_SCHEDULE_TOPIC, level - 1, props, deliver_at

    # -- batch -------------------------------------------------------------------------------------------

    def _send_batch(self, request: RemotingCommand, channel: Any,
                    h: SendMessageRequestHeader) -> RemotingCommand | Awaitable[RemotingCommand]:
        cfg = self._topic_config(h, channel)
        queue_id = self._queue_id(cfg, h.queue_id, channel)
        topic = h.topic
        if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            raise MessageIllegal(f"batch request does not support retry group {topic}")
        sys_flag = h.sys_flag
        if sys_flag & _TRAN_MASK:
            raise NoPermission(TRANSACTION_NOT_SUPPORTED)
        if cfg.topic_filter_type is _MULTI_TAG_TYPE:
            sys_flag |= _MULTI_TAGS
        props = h.properties or ""
        delay = get_property(props, _P_DELAY)
        if delay is not None and delay not in ("0", "-1"):
            raise MessageIllegal("batch messages cannot carry a delay level (DELAY)")
        items = self._decode_batch(request.body)
        wait = get_property(props, _P_WAIT)
        batch = MessageBatchToStore(topic, queue_id, items, sys_flag, h.born_timestamp,
                                    _parse_born_host(channel), h.reconsume_times or 0,
                                    wait is None or wait.lower() == "true")
        uniq = get_property(props, _P_UNIQ) or items[0][4][0]
        if not self._sync_flush or not batch.wait_store_msg_ok:
            return self._batch_response(request, self._store.append_messages(batch), queue_id, uniq)
        return self._await_batch(self._store.put_messages(batch), request, queue_id, uniq)

    async def _await_batch(self, put: Awaitable[PutMessageResult], request: RemotingCommand,
                           queue_id: int, uniq: str) -> RemotingCommand:
        return self._batch_response(request, await put, queue_id, uniq)

    def _batch_response(self, request: RemotingCommand, result: PutMessageResult, queue_id: int,
                        uniq: str) -> RemotingCommand:
        ids = joined_msg_ids(result) if result.ok else ""
        return self._response(request, result, queue_id, uniq, ids)

    def _decode_batch(self, body: Any) -> list[tuple[int, bytes, str, int, tuple[str, ...]]]:
        """Split a batch body (PROTOCOL.md §3.4) straight into store entries.

        Inner properties are stored as sent (only a missing UNIQ_KEY is added), as RocketMQ does
        since ISSUE #9416. This loop is the per-message cost of SEND_BATCH_MESSAGE, so the common
        case (UNIQ_KEY and TAGS present once) is looked up inline.
        """
        data = body if type(body) is bytes else bytes(body)
        end = len(data)
        if end == 0:
            raise MessageIllegal("the batch body is empty")
        unpack_head = _BATCH_HEAD.unpack_from
        unpack_short = _SHORT.unpack_from
        max_size = self._max_size
        codes = self._tags_codes
        items: list[tuple[int, bytes, str, int, tuple[str, ...]]] = []
        append = items.append
        pos = 0
        try:
            while pos < end:
                size, _magic, _crc, flag, body_len = unpack_head(data, pos)
                rec_end = pos + size
                b0 = pos + _BATCH_HEAD_SIZE
                b1 = b0 + body_len
                if size < _BATCH_HEAD_SIZE + 2 or rec_end > end or body_len < 0 or b1 + 2 > rec_end:
                    raise MessageIllegal(f"the batch body is corrupt at byte {pos}")
                props_len = unpack_short(data, b1)[0]
                if props_len < 0 or b1 + 2 + props_len != rec_end:
                    raise MessageIllegal(f"the batch body is corrupt at byte {pos}")
                if body_len > max_size:
                    raise MessageIllegal(f"the message body size over max value, MAX: {max_size}")
                props = data[rec_end - props_len:rec_end].decode()
                i = props.find("UNIQ_KEY\x01")
                uniq: str | None
                if i == 0 or (i > 0 and props[i - 1] == "\x02"):
                    j = props.find("\x02", i + 9)
                    uniq = props[i + 9:] if j < 0 else props[i + 9:j]
                else:
                    uniq = get_property(props, _P_UNIQ) if i > 0 else None
                if not uniq:
                    uniq = self._uniq()
                    props = append_properties(props, ("UNIQ_KEY", uniq))
                i = props.find("TAGS\x01")
                tcode: int | None = 0
                if i >= 0:
                    if i == 0 or props[i - 1] == "\x02":
                        j = props.find("\x02", i + 5)
                        tags = props[i + 5:] if j < 0 else props[i + 5:j]
                    else:
                        tags = get_property(props, _P_TAGS) or ""
                    tcode = codes.get(tags)
                    if tcode is None:
                        tcode = tags_code(tags)
                        if len(codes) < 4096:
                            codes[tags] = tcode
                keys = (uniq,) if "KEYS\x01" not in props else _index_keys(uniq, get_property(props, _P_KEYS))
                append((flag, data[b0:b1], props, tcode or 0, keys))
                pos = rec_end
        except (struct.error, UnicodeDecodeError) as exc:
            raise MessageIllegal(f"the batch body is corrupt at byte {pos}: {exc}") from None
        return items

    # -- CONSUMER_SEND_MSG_BACK ----------------------------------------------------------------------

    def consumer_send_msg_back(self, request: RemotingCommand, channel: Any) -> Awaitable[RemotingCommand]:
        """A message the consumer failed to process goes to %RETRY%<group> (delayed) or %DLQ%<group>."""
        h = ConsumerSendMsgBackRequestHeader.from_ext(request.ext_fields)
        return self._send_back(request, channel, h)

    async def _send_back(self, request: RemotingCommand, channel: Any,
                         h: ConsumerSendMsgBackRequestHeader) -> RemotingCommand:
        ctl = self._ctl
        sgc = ctl.subscription_manager.find_subscription_group_config(h.group)
        if sgc is None:
            raise SubscriptionGroupNotExist(f"subscription group not exist, {h.group}")
        if not ctl.broker_config.broker_permission & PERM_WRITE:
            raise NoPermission(f"the broker[{ctl.broker_config.broker_ip1}] sending message is forbidden")
        if sgc.retry_queue_nums <= 0:
            return request.make_response(ResponseCode.SUCCESS)
        if h.offset < 0:
            raise InvalidParameter(f"the commit log offset {h.offset} is negative")
        raw = ctl.store.look_message_by_offset(h.offset)
        if raw is None:
            raise SystemError_(f"look message by offset failed, {h.offset}")
        try:
            msg, _ = decode_message(raw)
        except ProtocolError as exc:
            raise SystemError_(f"look message by offset failed, {h.offset}: {exc}") from None
        props = dict(msg.properties)
        retry_topic = props.get("RETRY_TOPIC") or msg.topic
        props["RETRY_TOPIC"] = retry_topic
        max_times = sgc.retry_max_times
        if h.max_reconsume_times is not None:
            max_times = h.max_reconsume_times
        delay_level = h.delay_level
        if msg.reconsume_times >= max_times or delay_level < 0:
            topic = DLQ_GROUP_TOPIC_PREFIX + h.group
            cfg = ctl.topic_manager.create_topic_in_send_message_back_method(
                topic, DLQ_NUMS_PER_GROUP, PERM_WRITE | PERM_READ, 0)
            queue_id = 0
            delay_level = 0
        else:
            topic = RETRY_GROUP_TOPIC_PREFIX + h.group
            cfg = ctl.topic_manager.create_topic_in_send_message_back_method(
                topic, sgc.retry_queue_nums, PERM_WRITE | PERM_READ, 0)
            queue_id = self._rand.randrange(max(1, cfg.write_queue_nums))
            if delay_level == 0:
                delay_level = 3 + msg.reconsume_times
        if not cfg.perm & PERM_WRITE:
            raise NoPermission(f"the topic[{topic}] sending message is forbidden")
        props.pop("DELAY", None)
        props.pop("REAL_TOPIC", None)
        props.pop("REAL_QID", None)
        props.setdefault("ORIGIN_MESSAGE_ID", msg.msg_id)
        uniq = props.get("UNIQ_KEY") or self._uniq()
        props["UNIQ_KEY"] = uniq
        props["CLUSTER"] = self._cluster
        text = encode_properties(props)
        tcode = tags_code(props.get("TAGS"))
        if delay_level > 0:
            text = text + f"DELAY\x01{delay_level}\x02"
            topic, queue_id, text, tcode = self._delay(topic, queue_id, text, str(delay_level))
        put = MessageToStore(
            topic, queue_id, msg.body, msg.flag, text, tcode, _index_keys(uniq, props.get("KEYS")),
            msg.sys_flag, msg.born_timestamp, msg.born_host, msg.reconsume_times + 1, 0, 0, True,
        )
        result = await ctl.store.put_message(put)
        if result.ok:
            self._stats.on_put(result.msg_num)
            return request.make_response(ResponseCode.SUCCESS)
        return request.make_response(ResponseCode.SYSTEM_ERROR, result.status.name)
