"""Commit-log records -> Arrow columns, in bulk.

A Spark task turns tens of thousands of stored records into one RecordBatch at a time, so no
step here runs Python once per message: record boundaries come from a vectorised search for
the magic code, the fixed-size head of every record is copied with one gather and read through
a structured dtype, variable-length parts (body, topic, properties) become Arrow arrays with one
``take`` each (``_arrow.slices``) and properties are split in bulk (``_props``). Python loops
remain only for rare records: IPv6 hosts, compressed bodies, text that is not UTF-8.

The record layout is PROTOCOL.md §3.1 (V1/V2 magic, IPv4/IPv6 hosts chosen by the sysflag).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Final

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from rocketq.codec.message import MessageConst
from rocketq.codec.record import (
    BODY_AT_V4,
    BORN_HOST_AT,
    MAGIC_V1,
    MAGIC_V2,
    MIN_RECORD_LENGTH,
    MessageSysFlag,
    body_at,
    numpy_fields,
    store_timestamp_at,
)
from rocketq.spark._arrow import (
    as_u8,
    be_int,
    buffers_of,
    constant,
    fixed,
    ints,
    slices,
    timestamps,
)
from rocketq.spark._props import Properties
from rocketq.spark.schema import CORRUPT_BODY, RowSchema

U8 = npt.NDArray[np.uint8]
I64 = npt.NDArray[np.int64]

__all__ = ["Layout", "as_u8", "locate", "record_starts", "to_record_batch"]

_HEX: Final = np.frombuffer(b"".join(f"{i:02X}".encode() for i in range(256)), dtype=np.uint8).reshape(256, 2)
_SIZE: Final = struct.Struct(">i")
_FIXED_MIN: Final = MIN_RECORD_LENGTH
_V6_BORN: Final = MessageSysFlag.BORNHOST_V6_FLAG
_V6_STORE: Final = MessageSysFlag.STOREHOSTADDRESS_V6_FLAG
_M1: Final = MAGIC_V1 & 0xFFFFFFFF
_M2: Final = MAGIC_V2 & 0xFFFFFFFF

# The 88 bytes an all-IPv4 record has before its body (each host one u8: ip << 32 | port).
_HEAD_V4: Final = np.dtype(numpy_fields())
_HEAD_LEN: Final = BORN_HOST_AT  # 48: what every record shares
_V4_LEN: Final = BODY_AT_V4


def _ip_port(host: npt.NDArray[np.uint64]) -> tuple[I64, I64]:
    """IPv4 host values (ip << 32 | port) -> (ip, signed port) columns."""
    ip = (host >> np.uint64(32)).astype(np.int64)
    port = (host & np.uint64(0xFFFFFFFF)).astype(np.uint32).view(np.int32).astype(np.int64)
    return ip, port


def record_starts(buf: bytes | bytearray | memoryview | U8, base: int = 0) -> list[int]:
    """Start of every record in a buffer of back-to-back records (a pull answer body)."""
    u8 = buf if isinstance(buf, np.ndarray) else as_u8(buf)
    found = _chain_by_magic(u8)
    if found is not None:
        starts: list[int] = (found + base).tolist()
        return starts
    return _chain_by_loop(u8.data if isinstance(buf, np.ndarray) else buf, base)


def record_start_array(u8: U8) -> I64:
    """``record_starts`` as an int64 array."""
    found = _chain_by_magic(u8)
    if found is not None:
        return found
    return np.array(_chain_by_loop(u8.data, 0), dtype=np.int64)


def _chain_by_magic(u8: U8) -> I64 | None:
    """Records found where the magic code sits 4 bytes after a start, accepted only when every
    candidate's size leads exactly to the next one (a body that happens to contain the magic
    breaks the chain, and the caller walks the sizes instead)."""
    blen = len(u8)
    if blen < _FIXED_MIN:
        return None
    cand = np.flatnonzero(u8[4 : blen - 3] == 0xDA)
    if len(cand) == 0:
        return None
    words = np.ndarray(shape=(blen - 3,), dtype=">u4", buffer=u8, strides=(1,))
    magic = words[cand + 4]
    cand = cand[(magic == _M1) | (magic == _M2)]
    if len(cand) == 0 or cand[0] != 0:
        return None
    nxt = cand + words[cand].astype(np.int64)
    if not bool((nxt[:-1] == cand[1:]).all()):
        return None
    if int(nxt[-1]) > blen:
        cand = cand[:-1]  # a torn last record: what the loop would leave out too
    starts: I64 = cand.astype(np.int64)
    return starts


def _chain_by_loop(buf: bytes | bytearray | memoryview, base: int) -> list[int]:
    out: list[int] = []
    pos, end = 0, len(buf)
    unpack = _SIZE.unpack_from
    append = out.append
    while pos + 4 <= end:
        (size,) = unpack(buf, pos)
        if size < _FIXED_MIN or pos + size > end:
            break
        append(base + pos)
        pos += size
    return out


class Layout:
    """Fields of the first ``n`` records (int64 arrays, one entry per record) and where their
    variable parts lie in ``buf``.

    ``locate`` keeps the longest prefix of structurally valid records: a running broker's files
    end in records still being written, and a reader stops at the first that does not check out.
    """

    __slots__ = (
        "body_len", "body_pos", "born_ip", "born_port", "born_timestamp", "buf", "n", "phys_offset",
        "props_len", "props_pos", "queue_id", "queue_offset", "reconsume_times", "starts", "store_ip",
        "store_port", "store_timestamp", "sys_flag", "topic_len", "topic_pos",
    )

    buf: U8
    n: int
    starts: I64
    sys_flag: I64
    queue_id: I64
    queue_offset: I64
    phys_offset: I64
    born_timestamp: I64
    store_timestamp: I64
    reconsume_times: I64
    born_ip: I64  # IPv4 as an integer; -1 for an IPv6 host (formatted from buf on demand)
    born_port: I64
    store_ip: I64
    store_port: I64
    body_pos: I64
    body_len: I64
    topic_pos: I64
    topic_len: I64
    props_pos: I64
    props_len: I64

    def take(self, keep: I64) -> Layout:
        """The records at the given indices (in order)."""
        out = Layout()
        out.buf = self.buf
        out.n = len(keep)
        for name in Layout.__slots__:
            if name not in ("buf", "n"):
                setattr(out, name, getattr(self, name)[keep])
        return out


def locate(buf: U8, starts: I64 | Sequence[int], sizes: I64 | None = None) -> Layout:
    """Find the fields of the records at ``starts`` (``sizes``: what the consume queue says)."""
    blen = len(buf)
    pos = np.asarray(starts, dtype=np.int64)
    ok = (pos >= 0) & (pos + _FIXED_MIN <= blen)
    safe = np.where(ok, pos, 0) if blen >= _FIXED_MIN else pos[:0]
    ok = ok[: len(safe)]
    # One gather of the 88 bytes an all-IPv4 record has before its body; re-read if not.
    raw = fixed(buf, safe, _V4_LEN)
    head = raw.view(_HEAD_V4)
    size = head["size"].astype(np.int64)
    magic = head["magic"]
    sys_flag = head["sys_flag"].astype(np.int64)
    ok &= (magic == MAGIC_V1) | (magic == MAGIC_V2)
    ok &= (size >= _FIXED_MIN) & (safe + size <= blen)
    if sizes is not None:
        ok &= size == np.asarray(sizes, dtype=np.int64)[: len(safe)]
    end = safe + np.where(ok, size, _FIXED_MIN)

    lay = Layout()
    lay.buf = buf
    v6 = (sys_flag & (_V6_BORN | _V6_STORE)) != 0
    if not bool(v6.any()):
        lay.born_ip, lay.born_port = _ip_port(head["born_host"])
        lay.store_timestamp = head["store_timestamp"].astype(np.int64)
        lay.store_ip, lay.store_port = _ip_port(head["store_host"])
        lay.reconsume_times = head["reconsume_times"].astype(np.int64)
        body_len = head["body_len"].astype(np.int64)
        body_pos = safe + _V4_LEN
    else:
        born_len = np.where(sys_flag & _V6_BORN, 20, 8)
        store_len = np.where(sys_flag & _V6_STORE, 20, 8)
        born_at = safe + _HEAD_LEN
        store_ts_at = safe + store_timestamp_at(sys_flag)
        store_at = store_ts_at + 8
        body_pos = safe + body_at(sys_flag)
        lay.born_ip = np.where(born_len == 8, be_int(buf, born_at, ">u4"), -1)
        lay.born_port = be_int(buf, born_at + born_len - 4, ">i4")
        lay.store_timestamp = be_int(buf, store_ts_at, ">i8")
        lay.store_ip = np.where(store_len == 8, be_int(buf, store_at, ">u4"), -1)
        lay.store_port = be_int(buf, store_at + store_len - 4, ">i4")
        # RECONSUMETIMES i4, PREPAREDTRANSACTIONOFFSET i8 and BODYLENGTH i4 end the fixed part
        lay.reconsume_times = be_int(buf, body_pos - 16, ">i4")
        body_len = be_int(buf, body_pos - 4, ">i4")
    ok &= (body_len >= 0) & (body_pos + body_len <= end)
    topic_len_pos = np.minimum(body_pos + np.where(ok, body_len, 0), max(blen - 2, 0))
    two = fixed(buf, topic_len_pos, 2).view(">u2").astype(np.int64)
    v2 = magic == MAGIC_V2
    topic_len = np.where(v2, two, two >> 8)  # V1: one length byte
    topic_pos = topic_len_pos + np.where(v2, 2, 1)
    props_len_pos = np.minimum(topic_pos + np.where(ok, topic_len, 0), max(blen - 2, 0))
    props_len = fixed(buf, props_len_pos, 2).view(">i2").astype(np.int64)
    props_pos = props_len_pos + 2
    ok &= (props_len >= 0) & (props_pos + props_len == end)
    bad = np.flatnonzero(~ok)
    n = int(bad[0]) if len(bad) else len(safe)
    lay.n = n
    lay.starts = safe[:n]
    lay.sys_flag = sys_flag[:n]
    lay.queue_id = head["queue_id"][:n].astype(np.int64)
    lay.queue_offset = head["queue_offset"][:n].astype(np.int64)
    lay.phys_offset = head["phys_offset"][:n].astype(np.int64)
    lay.born_timestamp = head["born_timestamp"][:n].astype(np.int64)
    for name in ("born_ip", "born_port", "store_timestamp", "store_ip", "store_port", "reconsume_times"):
        setattr(lay, name, getattr(lay, name)[:n])
    lay.body_pos = body_pos[:n]
    lay.body_len = body_len[:n]
    lay.topic_pos = topic_pos[:n]
    lay.topic_len = topic_len[:n]
    lay.props_pos = props_pos[:n]
    lay.props_len = props_len[:n]
    return lay


# -- columns -------------------------------------------------------------------------------------


def _ip4(v: int) -> str:
    return f"{v >> 24 & 255}.{v >> 16 & 255}.{v >> 8 & 255}.{v & 255}"


def _hosts(lay: Layout, ip: I64, port: I64, v6_flag: int) -> pa.Array:
    """``ip:port`` per record; distinct hosts are few, so each is formatted once."""
    if bool((ip < 0).any()):
        return pa.array(_host_texts(lay, v6_flag), pa.string())
    key = (ip << 32) | (port & 0xFFFFFFFF)
    if lay.n and bool((key == key[0]).all()):
        k = int(key[0])
        return constant(f"{_ip4(k >> 32)}:{k & 0xFFFFFFFF}", lay.n)
    uniq, inverse = np.unique(key, return_inverse=True)
    labels = pa.array([f"{_ip4(int(k) >> 32)}:{int(k) & 0xFFFFFFFF}" for k in uniq.tolist()], pa.string())
    return labels.take(pa.array(inverse.reshape(-1).astype(np.int32)))


def _host_texts(lay: Layout, v6_flag: int) -> list[str]:
    """Hosts formatted one by one (records with an IPv6 host: rare)."""
    from rocketq.codec.message import _decode_ip

    raw = lay.buf
    out: list[str] = []
    born = v6_flag == _V6_BORN
    for p, flag in zip(lay.starts.tolist(), lay.sys_flag.tolist(), strict=True):
        at = p + _HEAD_LEN
        if not born:
            at += (20 if flag & _V6_BORN else 8) + 8
        iplen = 16 if flag & v6_flag else 4
        ip = _decode_ip(raw[at : at + iplen].tobytes())
        (port,) = _SIZE.unpack_from(raw[at + iplen : at + iplen + 4].tobytes())
        out.append(f"[{ip}]:{port}" if iplen == 16 else f"{ip}:{port}")
    return out


def _offset_msg_ids(lay: Layout) -> pa.Array:
    """Store host + commit-log offset as 32 uppercase hex digits (the offset msgId)."""
    n = lay.n
    if bool((lay.store_ip < 0).any()):
        from rocketq.codec.message import offset_msg_id

        out = []
        for h, off in zip(_host_texts(lay, _V6_STORE), lay.phys_offset.tolist(), strict=True):
            ip, _, port = h.rpartition(":")
            out.append(offset_msg_id(ip.strip("[]"), int(port), off))
        return pa.array(out, pa.string())
    raw = np.empty((n, 16), dtype=np.uint8)
    raw[:, 0:4] = lay.store_ip.astype(">u4").view(np.uint8).reshape(n, 4)
    raw[:, 4:8] = lay.store_port.astype(">i4").view(np.uint8).reshape(n, 4)
    raw[:, 8:16] = lay.phys_offset.astype(">i8").view(np.uint8).reshape(n, 8)
    text = np.ascontiguousarray(_HEX[raw].reshape(n, 32))
    offsets = np.arange(0, 32 * n + 1, 32, dtype=np.int32)
    return pa.StringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(text))


def _bodies(lay: Layout) -> pa.Array:
    body = slices(lay.buf, lay.body_pos, lay.body_len, pa.binary())
    compressed = np.flatnonzero(lay.sys_flag & MessageSysFlag.COMPRESSED_FLAG)
    if not len(compressed):
        return body
    from rocketq.codec.message import decompress_body

    parts = body.to_pylist()
    flags = lay.sys_flag.tolist()
    for i in compressed.tolist():
        try:
            parts[i] = decompress_body(parts[i], flags[i])
        except Exception:
            pass  # keep the stored bytes: a body we cannot inflate is still the user's data
    return pa.array(parts, pa.binary())


def _body_strings(body: pa.Array) -> tuple[pa.Array, pa.Array]:
    """(body as UTF-8 string, raw bytes of the rows that are not UTF-8 else null)."""
    n = len(body)
    try:
        return body.cast(pa.string()), pa.nulls(n, pa.binary())
    except pa.ArrowInvalid:
        pass
    texts: list[str | None] = []
    corrupt: list[bytes | None] = []
    for v in body.to_pylist():
        try:
            texts.append(v.decode("utf-8"))
            corrupt.append(None)
        except UnicodeDecodeError:
            texts.append(None)
            corrupt.append(v)
    return pa.array(texts, pa.string()), pa.array(corrupt, pa.binary())


class _Columns:
    """The columns of one located batch, each built on first use."""

    def __init__(self, lay: Layout, broker: str, topic: str | None) -> None:
        self.lay = lay
        self.broker = broker
        self.topic = topic
        self._props: Properties | None = None
        self._body: pa.Array | None = None
        self._text: tuple[pa.Array, pa.Array] | None = None
        self._tags: pa.Array | None = None

    def props(self) -> Properties:
        if self._props is None:
            lay = self.lay
            data, offsets = buffers_of(slices(lay.buf, lay.props_pos, lay.props_len, pa.binary()))
            self._props = Properties(data, offsets)
        return self._props

    def tags(self) -> pa.Array:
        if self._tags is None:
            self._tags = self.props().lookup(MessageConst.PROPERTY_TAGS)
        return self._tags

    def body(self) -> pa.Array:
        if self._body is None:
            self._body = _bodies(self.lay)
        return self._body

    def body_text(self) -> tuple[pa.Array, pa.Array]:
        if self._text is None:
            self._text = _body_strings(self.body())
        return self._text

    def build(self, name: str, as_string: bool, body_as_string: bool) -> pa.Array:
        lay, n = self.lay, self.lay.n
        if name == "topic":
            if self.topic is not None:
                return constant(self.topic, n)
            return slices(lay.buf, lay.topic_pos, lay.topic_len, pa.string())
        if name == "broker":
            return constant(self.broker, n)
        if name == "queue_id":
            return ints(lay.queue_id, pa.int32())
        if name == "queue_offset":
            return ints(lay.queue_offset, pa.int64())
        if name == "msg_id":
            uniq = self.props().lookup(MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
            return uniq if uniq.null_count == 0 else pc.coalesce(uniq, _offset_msg_ids(lay))
        if name == "keys":
            return self.props().lookup(MessageConst.PROPERTY_KEYS)
        if name == "tags":
            return self.tags()
        if name == "body":
            return self.body_text()[0] if as_string else self.body()
        if name == CORRUPT_BODY:
            return self.body_text()[1] if body_as_string else pa.nulls(n, pa.binary())
        if name == "properties":
            return self.props().map_array()
        if name == "born_timestamp":
            return timestamps(lay.born_timestamp)
        if name == "store_timestamp":
            return timestamps(lay.store_timestamp)
        if name == "born_host":
            return _hosts(lay, lay.born_ip, lay.born_port, _V6_BORN)
        if name == "reconsume_times":
            return ints(lay.reconsume_times, pa.int32())
        raise AssertionError(name)  # pragma: no cover - RowSchema admits only the names above


def to_record_batch(
    lay: Layout,
    schema: RowSchema,
    *,
    broker: str,
    topic: str | None = None,
    tags_filter: Sequence[str] | None = None,
) -> pa.RecordBatch:
    """The requested columns of the located records, as one RecordBatch.

    ``topic`` is the topic every record is known to belong to (one consume queue); without it the
    topic is read from each record. ``tags_filter`` keeps only rows whose TAGS is one of these
    (the client-side re-check of a tag subscription after the tagsCode filter).
    """
    if tags_filter is not None and lay.n:
        tags = _Columns(lay, broker, topic).tags()
        mask = pc.fill_null(pc.is_in(tags, value_set=pa.array(list(tags_filter), pa.string())), False)
        keep = np.flatnonzero(np.asarray(mask, dtype=bool))
        if len(keep) != lay.n:
            lay = lay.take(keep)
    cols = _Columns(lay, broker, topic)
    body_as_string = schema.body_as_string
    arrays: list[pa.Array] = []
    for c in schema.columns:
        arr = cols.build(c.name, c.spark_type == "string", body_as_string)
        if arr.type != c.arrow_type:
            arr = arr.cast(c.arrow_type)
        arrays.append(arr)
    return pa.RecordBatch.from_arrays(arrays, schema=schema.arrow_schema())

