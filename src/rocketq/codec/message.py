"""Stored messages as values: commit-log records <-> MessageExt, batch bodies and message ids.

Sans-I/O: bytes in, values out. The record layout is RocketMQ's (PROTOCOL.md §3.1-3.5), defined
once in `record.py`; the properties text in `properties.py`. What the store writes is exactly
what PULL/QUERY/VIEW answers carry and what every client decodes. Anything malformed raises
`rocketq.errors.ProtocolError` and nothing else.
"""

from __future__ import annotations

import ipaddress
import itertools
import os
import random
import struct
import time
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Final

from rocketq.codec.crc import crc32
from rocketq.codec.properties import (
    MAX_PROPERTIES_LENGTH,
    NAME_VALUE_SEPARATOR,
    PROPERTY_SEPARATOR,
    MessageConst,
    decode_properties,
    encode_properties,
)
from rocketq.codec.record import (
    BATCH_ITEM_FIXED,
    BATCH_ITEM_HEAD,
    BLANK_MAGIC,
    BODY_AT_V4,
    FIXED_V4,
    HEAD,
    HOST_LEN_V4,
    HOST_LEN_V6,
    MAGIC_V1,
    MAGIC_V2,
    MAX_TOPIC_LENGTH_V1,
    MIN_RECORD_LENGTH,
    MessageSysFlag,
    record_length,
    record_struct,
)
from rocketq.errors import ProtocolError

# The layout and properties names are defined in record.py / properties.py; they stay importable
# from here, where callers found them first.
__all__ = [
    "BLANK_MAGIC",
    "MAGIC_V1",
    "MAGIC_V2",
    "MAX_PROPERTIES_LENGTH",
    "MAX_TOPIC_LENGTH_V1",
    "NAME_VALUE_SEPARATOR",
    "PROPERTY_SEPARATOR",
    "BatchItem",
    "MessageConst",
    "MessageExt",
    "MessageSysFlag",
    "UniqIdGenerator",
    "body_crc",
    "decode_batch_body",
    "decode_message",
    "decode_messages",
    "decode_offset_msg_id",
    "decode_properties",
    "decode_uniq_id",
    "decompress_body",
    "encode_batch_body",
    "encode_host",
    "encode_message",
    "encode_properties",
    "is_ipv6",
    "java_string_hash",
    "offset_msg_id",
    "offset_msg_id_prefix",
    "record_length",
    "tags_code",
]

# --------------------------------------------------------------------------------------------
# hashes, CRC


def java_string_hash(s: str) -> int:
    """Java `String.hashCode()`: signed 32-bit, h = 31h + c over UTF-16 code units."""
    if s.isascii():
        units: Iterable[int] = s.encode("ascii")
    else:
        raw = s.encode("utf-16-be")
        units = struct.unpack(f">{len(raw) // 2}H", raw)
    h = 0
    for c in units:
        h = (31 * h + c) & 0xFFFFFFFF
    return h - 0x100000000 if h & 0x80000000 else h


@lru_cache(maxsize=8192)
def tags_code(tags: str | None) -> int:
    """The consume-queue tagsCode of a TAGS value (0 without tags); tags repeat, hence the cache."""
    if not tags:
        return 0
    return java_string_hash(tags)


def body_crc(body: bytes | bytearray | memoryview) -> int:
    return crc32(body) & 0x7FFFFFFF


def decompress_body(body: bytes, sys_flag: int) -> bytes:
    """The body as the producer sent it (only ZLIB, the Java default, is in the stdlib)."""
    if not sys_flag & MessageSysFlag.COMPRESSED_FLAG:
        return body
    kind = sys_flag & MessageSysFlag.COMPRESSION_TYPE_MASK
    if kind not in (0, MessageSysFlag.COMPRESSION_ZLIB):
        raise ProtocolError(f"unsupported compression type 0x{kind:x}")
    try:
        return zlib.decompress(body)
    except zlib.error as e:
        raise ProtocolError(f"corrupt compressed body: {e}") from None


# --------------------------------------------------------------------------------------------
# hosts


@lru_cache(maxsize=1024)
def encode_host(ip: str, port: int) -> bytes:
    """IP bytes (4 or 16) + port int, as the record stores BORNHOST / STOREHOST."""
    try:
        addr = ipaddress.ip_address(ip)
    except ValueError:
        raise ProtocolError(f"bad IP address {ip!r}") from None
    return addr.packed + struct.pack(">i", port)


def is_ipv6(ip: str) -> bool:
    return ":" in ip


def _decode_ip(raw: bytes | memoryview) -> str:
    if len(raw) == 4:
        return f"{raw[0]}.{raw[1]}.{raw[2]}.{raw[3]}"
    return str(ipaddress.IPv6Address(bytes(raw)))


# --------------------------------------------------------------------------------------------
# message ids


def offset_msg_id(ip: str, port: int, offset: int) -> str:
    """Store host + commit-log offset, uppercase hex (32 chars IPv4, 56 IPv6)."""
    return (encode_host(ip, port) + struct.pack(">q", offset)).hex().upper()


def offset_msg_id_prefix(ip: str, port: int) -> str:
    """The host part of every offset msgId of one store; append `f"{offset:016X}"`."""
    return encode_host(ip, port).hex().upper()


def _id_bytes(msg_id: str, what: str) -> bytes:
    """Both id kinds are 16 bytes with an IPv4 host, 28 with an IPv6 one, as upper-case hex."""
    if len(msg_id) not in (32, 56):
        raise ProtocolError(f"bad {what} length {len(msg_id)}: expected 32 or 56 hex digits")
    try:
        return bytes.fromhex(msg_id)
    except ValueError:
        raise ProtocolError(f"{what} is not hex: {msg_id!r}") from None


def decode_offset_msg_id(msg_id: str) -> tuple[str, int, int]:
    """(ip, port, commit-log offset) from an offset msgId."""
    raw = _id_bytes(msg_id, "offset msgId")
    ip_len = len(raw) - 12
    port, offset = struct.unpack_from(">iq", raw, ip_len)
    return _decode_ip(raw[:ip_len]), port, offset


def decode_uniq_id(msg_id: str, now_ms: int | None = None) -> tuple[str, int, int]:
    """(ip, pid, nearly the creation time in ms) from a client unique id (MessageClientIDSetter).

    The id only holds ms since the start of a month: the month is the current one, or the one
    before when that would put the time in the future (local time, as Java)."""
    raw = _id_bytes(msg_id, "unique message id")
    ip_len = 16 if len(raw) == 28 else 4
    (pid,) = struct.unpack_from(">H", raw, ip_len)
    (span,) = struct.unpack_from(">I", raw, ip_len + 6)
    now = int(time.time() * 1000) if now_ms is None else now_ms
    t = time.localtime(now / 1000)
    start = int(time.mktime((t.tm_year, t.tm_mon, 1, 0, 0, 0, 0, 0, -1)) * 1000)
    if start + span >= now:
        year, month = (t.tm_year - 1, 12) if t.tm_mon == 1 else (t.tm_year, t.tm_mon - 1)
        start = int(time.mktime((year, month, 1, 0, 0, 0, 0, 0, -1)) * 1000)
    return _decode_ip(raw[:ip_len]), pid, start + span


class UniqIdGenerator:
    """Client-side unique message ids (the UNIQ_KEY property), MessageClientIDSetter's layout.

    ip (4/16 bytes) + pid (short) + a per-process random int, then ms since the start of the
    current month (local time) as an int and a short counter: 32 hex chars for IPv4.
    """

    __slots__ = ("_clock", "_counter", "_next_start", "_prefix", "_start")

    def __init__(
        self,
        ip: str = "127.0.0.1",
        pid: int | None = None,
        prefix_int: int | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        ip_raw = encode_host(ip, 0)[:-4]
        pid_v = (os.getpid() if pid is None else pid) & 0xFFFF
        rnd = random.getrandbits(32) if prefix_int is None else prefix_int & 0xFFFFFFFF
        self._prefix = (ip_raw + struct.pack(">HI", pid_v, rnd)).hex().upper()
        self._clock = clock
        self._counter = itertools.count(random.getrandbits(16))
        self._start = 0
        self._next_start = 0

    def _month_bounds(self, now_ms: int) -> None:
        t = time.localtime(now_ms / 1000)
        start = time.mktime((t.tm_year, t.tm_mon, 1, 0, 0, 0, 0, 0, -1))
        year, month = (t.tm_year + 1, 1) if t.tm_mon == 12 else (t.tm_year, t.tm_mon + 1)
        nxt = time.mktime((year, month, 1, 0, 0, 0, 0, 0, -1))
        self._start, self._next_start = int(start * 1000), int(nxt * 1000)

    def next_id(self) -> str:
        now = int(self._clock() * 1000)
        if now >= self._next_start or now < self._start - 1_000_000:
            self._month_bounds(now)
        diff = now - self._start
        if -1_000_000 < diff < 0:  # a small step back of the clock (NTP): clamp like Java
            diff = 0
        return f"{self._prefix}{diff & 0xFFFFFFFF:08X}{next(self._counter) & 0xFFFF:04X}"

    __call__ = next_id


# --------------------------------------------------------------------------------------------
# stored records


@dataclass(frozen=True, slots=True)
class MessageExt:
    """One stored message with every field of its commit-log record."""

    topic: str
    body: bytes
    flag: int = 0
    properties: dict[str, str] = field(default_factory=dict)
    queue_id: int = 0
    queue_offset: int = 0
    commit_log_offset: int = 0
    sys_flag: int = 0
    born_timestamp: int = 0
    born_host: tuple[str, int] = ("127.0.0.1", 0)
    store_timestamp: int = 0
    store_host: tuple[str, int] = ("127.0.0.1", 0)
    reconsume_times: int = 0
    prepared_transaction_offset: int = 0
    body_crc: int = 0
    store_size: int = 0

    @property
    def tags(self) -> str | None:
        return self.properties.get(MessageConst.PROPERTY_TAGS)

    @property
    def keys(self) -> str | None:
        return self.properties.get(MessageConst.PROPERTY_KEYS)

    @property
    def uniq_key(self) -> str | None:
        return self.properties.get(MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)

    @property
    def msg_id(self) -> str:
        """The producer's UNIQ_KEY, else the offset msgId: Java's ``MessageClientExt.getMsgId()``,
        the id producers log and consumers deduplicate by."""
        return self.properties.get(MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX) or self.offset_msg_id

    @property
    def offset_msg_id(self) -> str:
        """The broker's id of the stored record (store host + commit-log offset)."""
        return offset_msg_id(self.store_host[0], self.store_host[1], self.commit_log_offset)


class _LazyProperties:
    """``MessageExt.properties``: a pull decodes thousands of messages whose properties nobody
    reads (a listener that only wants the body), so the decoder leaves the properties *text* in the
    slot and the dict is parsed, and kept, on first read. Everything else sees a plain dict field:
    the dataclass ``__init__``, ``__eq__``, ``__repr__``, ``replace`` and pickling all go through here.
    """

    __slots__ = ("_get", "_set")

    def __init__(self, slot: Any) -> None:
        self._get: Callable[[MessageExt], dict[str, str] | str] = slot.__get__
        self._set: Callable[[MessageExt, dict[str, str] | str], None] = slot.__set__

    def __get__(self, obj: MessageExt | None, owner: type | None = None) -> Any:
        if obj is None:
            return self
        value = self._get(obj)
        if value.__class__ is str:
            # Two threads may race here; both parse the same text, the last dict stays.
            value = decode_properties(value)
            self._set(obj, value)
        return value

    def __set__(self, obj: MessageExt, value: dict[str, str] | str) -> None:
        self._set(obj, value)


setattr(MessageExt, "properties", _LazyProperties(MessageExt.__dict__["properties"]))  # noqa: B010


class _MessageExtSlots:
    """MessageExt's slot layout without the frozen ``__setattr__``: the pull decoder fills one of
    these with plain attribute stores, then turns it into a MessageExt by ``__class__`` assignment
    (CPython allows it between classes of identical slots). The frozen dataclass ``__init__`` costs
    a call of ``object.__setattr__`` per field, which was the single largest cost of decoding."""

    __slots__ = MessageExt.__slots__


# SIZE MAGIC CRC QUEUEID FLAG QUEUEOFFSET PHYSOFFSET SYSFLAG BORNTIMESTAMP
_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")
_I64 = struct.Struct(">q")


def decode_message(buf: bytes | bytearray | memoryview, pos: int = 0) -> tuple[MessageExt, int]:
    """Decode the record at `pos`; returns the message and the position after it."""
    mv = memoryview(buf)
    end_of_buf = len(mv)
    try:
        (size, magic, crc, queue_id, flag, queue_offset, phys, sys_flag, born_ts) = HEAD.unpack_from(
            mv, pos
        )
        if magic not in (MAGIC_V1, MAGIC_V2):
            raise ProtocolError(f"bad message magic 0x{magic & 0xFFFFFFFF:08X} at {pos}")
        if size < MIN_RECORD_LENGTH or pos + size > end_of_buf:
            raise ProtocolError(f"bad message size {size} at {pos}")
        p = pos + HEAD.size
        hl = HOST_LEN_V6 if sys_flag & MessageSysFlag.BORNHOST_V6_FLAG else HOST_LEN_V4
        born_ip = _decode_ip(mv[p : p + hl - 4])
        (born_port,) = _I32.unpack_from(mv, p + hl - 4)
        p += hl
        (store_ts,) = _I64.unpack_from(mv, p)
        p += 8
        hl = HOST_LEN_V6 if sys_flag & MessageSysFlag.STOREHOSTADDRESS_V6_FLAG else HOST_LEN_V4
        store_ip = _decode_ip(mv[p : p + hl - 4])
        (store_port,) = _I32.unpack_from(mv, p + hl - 4)
        p += hl
        reconsume, prepared, body_len = struct.unpack_from(">iqi", mv, p)
        p += 16
        if body_len < 0 or p + body_len > pos + size:
            raise ProtocolError(f"bad body length {body_len} at {pos}")
        body = bytes(mv[p : p + body_len])
        p += body_len
        if magic == MAGIC_V1:
            topic_len = mv[p]
            p += 1
        else:
            (topic_len,) = _I16.unpack_from(mv, p)
            p += 2
        if topic_len < 0 or p + topic_len > pos + size:
            raise ProtocolError(f"bad topic length {topic_len} at {pos}")
        topic = str(mv[p : p + topic_len], "utf-8")
        p += topic_len
        (props_len,) = _I16.unpack_from(mv, p)
        p += 2
        if props_len < 0 or p + props_len != pos + size:
            raise ProtocolError(f"record length {size} does not match its fields at {pos}")
        props = decode_properties(str(mv[p : p + props_len], "utf-8")) if props_len else {}
        p += props_len
    except (struct.error, UnicodeDecodeError, IndexError) as e:
        raise ProtocolError(f"truncated or corrupt message at {pos}: {e}") from None
    if magic == MAGIC_V1 and topic_len > MAX_TOPIC_LENGTH_V1:
        raise ProtocolError(f"V1 topic length {topic_len} at {pos}")
    msg = MessageExt(
        topic=topic,
        body=body,
        flag=flag,
        properties=props,
        queue_id=queue_id,
        queue_offset=queue_offset,
        commit_log_offset=phys,
        sys_flag=sys_flag,
        born_timestamp=born_ts,
        born_host=(born_ip, born_port),
        store_timestamp=store_ts,
        store_host=(store_ip, store_port),
        reconsume_times=reconsume,
        prepared_transaction_offset=prepared,
        body_crc=crc,
        store_size=size,
    )
    return msg, p


_HOST_V6_FLAGS: Final = MessageSysFlag.BORNHOST_V6_FLAG | MessageSysFlag.STOREHOSTADDRESS_V6_FLAG
_HOSTS: dict[int, tuple[str, int]] = {}
_HOSTS_MAX = 4096


def _host_v4(raw: int) -> tuple[str, int]:
    ip, port = raw >> 32, raw & 0xFFFFFFFF
    host = (f"{ip >> 24}.{(ip >> 16) & 255}.{(ip >> 8) & 255}.{ip & 255}", port - ((port & 0x80000000) << 1))
    if len(_HOSTS) >= _HOSTS_MAX:
        _HOSTS.clear()
    _HOSTS[raw] = host
    return host


class _Irregular(Exception):
    """A record the inline decoder leaves to `decode_message` (never escapes this module)."""


def decode_messages(buf: bytes | bytearray | memoryview, extra_properties: str = "") -> list[MessageExt]:
    """Every record of a buffer of back-to-back records (a pull or query answer body).

    ``extra_properties`` (an encoded properties string, see `encode_properties`) is appended to
    every record's properties; later duplicates win, so its keys override stored ones. The client
    stamps MIN_OFFSET / MAX_OFFSET this way without building a dict per message.

    The common record (V1, IPv4 hosts) is decoded inline; anything else, including every record
    that fails a check, goes through `decode_message`, which raises the precise ProtocolError.
    """
    if extra_properties and extra_properties[0] != PROPERTY_SEPARATOR:
        # a stored text may lack its trailing separator: never let the two run together
        extra_properties = PROPERTY_SEPARATOR + extra_properties
    data = buf if buf.__class__ is bytes else bytes(buf)
    end = len(data)
    out: list[MessageExt] = []
    append = out.append
    unpack = FIXED_V4.unpack_from
    fixed_len = BODY_AT_V4  # a local: read once per record
    hosts = _HOSTS
    new = object.__new__
    slots_cls, msg_cls = _MessageExtSlots, MessageExt
    extra_dict: dict[str, str] | None = None
    # Records of one pull share topic and hosts: compare raw values before any lookup.
    last_topic_raw, last_topic = b"", ""
    last_born = last_store = -1
    born = store = ("", 0)
    pos = 0
    while pos < end:
        try:
            (size, magic, crc, queue_id, flag, queue_offset, phys, sys_flag, born_ts, born_raw, store_ts,
             store_raw, reconsume, prepared, body_len) = unpack(data, pos)  # fmt: skip
            rec_end = pos + size
            p = pos + fixed_len
            body_end = p + body_len
            if (
                magic != MAGIC_V1
                or sys_flag & _HOST_V6_FLAGS
                or size < MIN_RECORD_LENGTH
                or rec_end > end
                or body_len < 0
            ):
                raise _Irregular
            topic_len = data[body_end]
            q = body_end + 1
            if topic_len != len(last_topic_raw) or not data.startswith(last_topic_raw, q):
                if topic_len > MAX_TOPIC_LENGTH_V1:
                    raise _Irregular
                raw = data[q : q + topic_len]
                last_topic = raw.decode()
                last_topic_raw = raw
            q += topic_len + 2
            # The properties length must close the record exactly (which also keeps body and
            # topic inside it) and be a non-negative short.
            if ((data[q - 2] << 8) | data[q - 1]) != rec_end - q or data[q - 2] & 0x80:
                raise _Irregular
            props = data[q:rec_end].decode()
        except (_Irregular, struct.error, IndexError, UnicodeDecodeError):
            if extra_dict is None:
                extra_dict = decode_properties(extra_properties)
            msg, pos = decode_message(data, pos)
            msg.properties.update(extra_dict)
            append(msg)
            continue
        if born_raw != last_born:
            born = hosts.get(born_raw) or _host_v4(born_raw)
            last_born = born_raw
        if store_raw != last_store:
            store = hosts.get(store_raw) or _host_v4(store_raw)
            last_store = store_raw
        m: Any = new(slots_cls)
        m.topic = last_topic
        m.body = data[p:body_end]
        m.flag = flag
        m.properties = props + extra_properties
        m.queue_id = queue_id
        m.queue_offset = queue_offset
        m.commit_log_offset = phys
        m.sys_flag = sys_flag
        m.born_timestamp = born_ts
        m.born_host = born
        m.store_timestamp = store_ts
        m.store_host = store
        m.reconsume_times = reconsume
        m.prepared_transaction_offset = prepared
        m.body_crc = crc
        m.store_size = size
        m.__class__ = msg_cls
        append(m)
        pos = rec_end
    return out


def encode_message(msg: MessageExt) -> bytes:
    """The §3.1 record of a message; V2 magic only when the topic is longer than 127 bytes.

    The host flags of `sys_flag` follow the host addresses; a zero `body_crc` is computed.
    """
    topic = msg.topic.encode()
    props = encode_properties(msg.properties).encode()
    if len(props) > MAX_PROPERTIES_LENGTH:
        raise ProtocolError(f"properties too long: {len(props)}")
    if len(topic) > 32767:
        raise ProtocolError(f"topic too long: {len(topic)}")
    sys_flag = msg.sys_flag & ~(MessageSysFlag.BORNHOST_V6_FLAG | MessageSysFlag.STOREHOSTADDRESS_V6_FLAG)
    born = encode_host(*msg.born_host)
    store = encode_host(*msg.store_host)
    if len(born) == HOST_LEN_V6:
        sys_flag |= MessageSysFlag.BORNHOST_V6_FLAG
    if len(store) == HOST_LEN_V6:
        sys_flag |= MessageSysFlag.STOREHOSTADDRESS_V6_FLAG
    v2 = len(topic) > MAX_TOPIC_LENGTH_V1
    topic_part = (_I16.pack(len(topic)) if v2 else bytes((len(topic),))) + topic
    crc = msg.body_crc or body_crc(msg.body)
    head = record_struct(len(born), len(store))
    size = head.size + len(msg.body) + len(topic_part) + 2 + len(props)
    return b"".join(
        (
            head.pack(
                size,
                MAGIC_V2 if v2 else MAGIC_V1,
                crc,
                msg.queue_id,
                msg.flag,
                msg.queue_offset,
                msg.commit_log_offset,
                sys_flag,
                msg.born_timestamp,
                born,
                msg.store_timestamp,
                store,
                msg.reconsume_times,
                msg.prepared_transaction_offset,
                len(msg.body),
            ),
            msg.body,
            topic_part,
            _I16.pack(len(props)),
            props,
        )
    )


# --------------------------------------------------------------------------------------------
# batch bodies (SEND_BATCH_MESSAGE)


@dataclass(frozen=True, slots=True)
class BatchItem:
    """One message of a batch body: user flag, body and the properties string."""

    flag: int
    body: bytes
    properties: str


def encode_batch_body(items: Iterable[BatchItem]) -> bytes:
    parts: list[bytes] = []
    for it in items:
        props = it.properties.encode()
        size = BATCH_ITEM_FIXED + len(it.body) + len(props)
        head = BATCH_ITEM_HEAD.pack(size, 0, 0, it.flag, len(it.body))
        parts += (head, it.body, _I16.pack(len(props)), props)
    return b"".join(parts)


def decode_batch_body(body: bytes | bytearray | memoryview) -> list[BatchItem]:
    """Split a batch body into its messages; any inconsistent size raises ProtocolError."""
    mv = memoryview(body)
    out: list[BatchItem] = []
    pos, end = 0, len(mv)
    unpack_head, unpack_short = BATCH_ITEM_HEAD.unpack_from, _I16.unpack_from
    try:
        while pos < end:
            size, _magic, _crc, flag, body_len = unpack_head(mv, pos)
            rec_end = pos + size
            b0 = pos + BATCH_ITEM_HEAD.size
            if size < BATCH_ITEM_FIXED or rec_end > end or body_len < 0 or b0 + body_len + 2 > rec_end:
                raise ProtocolError(f"corrupt batch body at {pos}")
            (props_len,) = unpack_short(mv, b0 + body_len)
            if props_len < 0 or b0 + body_len + 2 + props_len != rec_end:
                raise ProtocolError(f"corrupt batch body at {pos}")
            props = str(mv[rec_end - props_len : rec_end], "utf-8")
            out.append(BatchItem(flag, bytes(mv[b0 : b0 + body_len]), props))
            pos = rec_end
    except (struct.error, UnicodeDecodeError) as e:
        raise ProtocolError(f"truncated batch body at {pos}: {e}") from None
    return out
