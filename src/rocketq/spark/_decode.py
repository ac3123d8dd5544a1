"""Commit-log records -> Arrow columns, in bulk.

A Spark task turns tens of thousands of stored records into one RecordBatch at a time, so no
step here runs Python once per message: every field is gathered with numpy fancy indexing from
the record start offsets, variable-length parts (body, topic, properties) are compacted with one
``np.repeat`` index per batch, and the properties strings (``k\\x01v\\x02...``) are split into a
map column by locating the separators with ``flatnonzero`` and building the Arrow map from the
resulting offsets. Python loops remain only for the rare records with IPv6 hosts and for rows
whose text is not valid UTF-8.

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
from numpy.lib.stride_tricks import sliding_window_view

from rocketq.codec.message import MAGIC_V1, MAGIC_V2, MessageConst, MessageSysFlag
from rocketq.spark.schema import CORRUPT_BODY, RowSchema

U8 = npt.NDArray[np.uint8]
I64 = npt.NDArray[np.int64]

_AR: Final = {k: np.arange(k, dtype=np.int64) for k in (1, 2, 4, 8, 12, 16)}
_HEX: Final = np.frombuffer(b"".join(f"{i:02X}".encode() for i in range(256)), dtype=np.uint8).reshape(256, 2)
_SIZE: Final = struct.Struct(">i")
_FIXED_MIN: Final = 91  # smallest record: IPv4 hosts, empty body, topic and properties
_V6_BORN: Final = MessageSysFlag.BORNHOST_V6_FLAG
_V6_STORE: Final = MessageSysFlag.STOREHOSTADDRESS_V6_FLAG
_EMPTY_U8: Final = np.zeros(0, dtype=np.uint8)


def as_u8(data: bytes | bytearray | memoryview) -> U8:
    return np.frombuffer(data, dtype=np.uint8)


def rows(buf: U8, pos: I64, k: int) -> U8:
    """The k bytes at each position as an (n, k) array: one index per row through a sliding
    window view (a per-byte index would cost ten times more)."""
    n = len(pos)
    if n == 0:
        return np.zeros((0, k), dtype=np.uint8)
    if len(buf) < k:
        padded = np.zeros(k, dtype=np.uint8)
        padded[: len(buf)] = buf
        buf = padded
    if int(pos.max()) + k > len(buf):
        # Only a field of a corrupt record (rejected by its length checks) can lie past the end:
        # read something harmless for it rather than copy the buffer.
        pos = np.minimum(pos, len(buf) - k)
    return sliding_window_view(buf, k)[pos]


def _be(buf: U8, pos: I64, dtype: str) -> I64:
    """Big-endian integers of width len(dtype) at each position, as native int64."""
    return rows(buf, pos, np.dtype(dtype).itemsize).view(dtype).reshape(-1).astype(np.int64)


def gather(buf: U8, starts: I64, lengths: I64) -> tuple[U8, npt.NDArray[np.int32]]:
    """Concatenate buf[starts[i]:starts[i]+lengths[i]] for all i; returns (data, int32 offsets).

    Arrow does the copying: a binary_view array over ``buf`` cast to plain binary is one memcpy
    per value, several times cheaper than a numpy index of every byte. The data keeps 16 zero
    bytes of padding past its end so that fixed-width reads near the end need no clipping.
    """
    n = len(starts)
    if n == 0:
        return _EMPTY_U8, np.zeros(1, dtype=np.int32)
    arr = views(buf, starts, lengths, pa.binary())
    bufs = arr.buffers()
    off = np.frombuffer(bufs[1], dtype=np.int32, count=n + 1)
    total = int(off[-1])
    data = np.zeros(total + 16, dtype=np.uint8)
    if total:
        data[:total] = np.frombuffer(bufs[2], dtype=np.uint8, count=total)
    return data[:total], off


def views(
    buf: U8, pos: I64, lens: I64, out_type: pa.DataType, valid: npt.NDArray[np.bool_] | None = None
) -> pa.Array:
    """buf[pos[i]:pos[i]+lens[i]] per row as a binary/string array of ``out_type``.

    Built as Arrow views (16 bytes per row: length + inline bytes, or length + prefix + buffer
    offset) straight into ``buf`` and cast once. Strings that are not UTF-8 become U+FFFD text.
    """
    n = len(pos)
    if n == 0:
        return pa.array([], out_type)
    if len(buf) >= 1 << 31:
        raise ValueError("views need a buffer under 2 GiB")
    base = buf.base if isinstance(buf.base, np.ndarray) and len(buf) < len(buf.base) else buf
    v = np.zeros((n, 16), dtype=np.uint8)
    v32 = v.view(np.int32)
    v32[:, 0] = lens
    short = lens <= 12
    if short.all():
        s_rows: slice | I64 = slice(None)
        s_pos, s_len = pos, lens
    else:
        l_rows = np.flatnonzero(~short)
        s_rows = np.flatnonzero(short)
        s_pos, s_len = pos[s_rows], lens[s_rows]
        lp = pos[l_rows]
        v32[l_rows, 1] = rows(base, lp, 4).view(np.int32).reshape(-1)
        v32[l_rows, 3] = lp
    if len(s_pos):
        raw = _short_bytes(base, s_pos)
        raw *= _AR[12][None, :] < s_len[:, None]  # inline bytes past the length must be zero
        v[s_rows, 4:16] = raw
    validity = None if valid is None or valid.all() else pa.py_buffer(np.packbits(valid, bitorder="little"))
    view_type = pa.string_view() if pa.types.is_string(out_type) else pa.binary_view()
    arr = pa.Array.from_buffers(view_type, n, [validity, pa.py_buffer(v), pa.py_buffer(buf)])
    try:
        return arr.cast(out_type)
    except pa.ArrowInvalid:
        if not pa.types.is_string(out_type):
            raise
    as_bin = pa.Array.from_buffers(pa.binary_view(), n, [validity, pa.py_buffer(v), pa.py_buffer(buf)])
    return pa.array(
        [None if b is None else b.decode("utf-8", "replace") for b in as_bin.to_pylist()], pa.string()
    )


def _short_bytes(buf: U8, pos: I64) -> U8:
    """12 bytes from each position, zero past the end of ``buf`` (inline view bytes)."""
    blen = len(buf)
    over = pos + 12 > blen
    if not over.any():
        return rows(buf, pos, 12)
    t0 = max(0, blen - 12)
    tail = np.zeros(24, dtype=np.uint8)
    tail[: blen - t0] = buf[t0:blen]
    out = np.empty((len(pos), 12), dtype=np.uint8)
    out[over] = sliding_window_view(tail, 12)[np.clip(pos[over] - t0, 0, 12)]
    if not over.all():
        out[~over] = rows(buf, pos[~over], 12)
    return out


def record_starts(buf: bytes | bytearray | memoryview, base: int = 0) -> list[int]:
    """Start of every record in a buffer of back-to-back records (a pull answer body).

    The one loop per record left on the read path: each start depends on the previous size.
    """
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
    """Where every field of each record sits in ``buf`` (all int64 arrays, one entry per record).

    ``locate`` keeps the longest prefix of structurally valid records: a running broker's files
    end in records still being written, and a reader stops at the first that does not check out.
    """

    __slots__ = (
        "body_len", "body_pos", "born_host_pos", "buf", "head", "n", "props_len", "props_pos",
        "store_host_pos", "store_ts_pos", "sys_flag", "topic_len", "topic_pos",
    )

    buf: U8
    n: int
    head: U8  # (n, 48): SIZE .. BORNTIMESTAMP of every record
    sys_flag: I64
    born_host_pos: I64
    store_ts_pos: I64
    store_host_pos: I64
    body_pos: I64
    body_len: I64
    topic_pos: I64
    topic_len: I64
    props_pos: I64
    props_len: I64

    def col(self, lo: int, dtype: str) -> I64:
        """A fixed-position field of the head, e.g. col(12, '>i4') = QUEUEID."""
        k = np.dtype(dtype).itemsize
        return np.ascontiguousarray(self.head[:, lo : lo + k]).view(dtype).reshape(-1).astype(np.int64)

    @property
    def queue_id(self) -> I64:
        return self.col(12, ">i4")

    @property
    def queue_offset(self) -> I64:
        return self.col(20, ">i8")

    @property
    def phys_offset(self) -> I64:
        return self.col(28, ">i8")

    @property
    def born_timestamp(self) -> I64:
        return self.col(40, ">i8")

    @property
    def size(self) -> I64:
        return self.col(0, ">i4")


def locate(buf: U8, starts: I64, sizes: I64 | None = None) -> Layout:
    """Find the fields of the records at ``starts`` (``sizes``: what the consume queue says)."""
    lay = Layout()
    lay.buf = buf
    blen = len(buf)
    starts = np.asarray(starts, dtype=np.int64)
    ok = (starts >= 0) & (starts + _FIXED_MIN <= blen)
    safe = np.where(ok, starts, 0)
    if blen < _FIXED_MIN:
        safe = safe[:0]
        ok = ok[:0]
    head = rows(buf, safe, 48)
    size = np.ascontiguousarray(head[:, 0:4]).view(">i4").reshape(-1).astype(np.int64)
    magic = np.ascontiguousarray(head[:, 4:8]).view(">i4").reshape(-1).astype(np.int64)
    sys_flag = np.ascontiguousarray(head[:, 36:40]).view(">i4").reshape(-1).astype(np.int64)
    ok &= (magic == MAGIC_V1) | (magic == MAGIC_V2)
    ok &= (size >= _FIXED_MIN) & (safe + size <= blen)
    if sizes is not None:
        ok &= size == sizes
    end = safe + np.where(ok, size, _FIXED_MIN)

    def clip(pos: I64) -> I64:
        return np.clip(pos, 0, max(blen - 1, 0))

    born_len = np.where(sys_flag & _V6_BORN, 20, 8)
    store_len = np.where(sys_flag & _V6_STORE, 20, 8)
    born_host_pos = safe + 48
    store_ts_pos = born_host_pos + born_len
    store_host_pos = store_ts_pos + 8
    body_len_pos = store_host_pos + store_len + 12
    body_len = _be(buf, clip(body_len_pos), ">i4")
    body_pos = body_len_pos + 4
    ok &= (body_len >= 0) & (body_pos + body_len <= end)
    topic_len_pos = clip(body_pos + np.where(ok, body_len, 0))
    v2 = magic == MAGIC_V2
    topic_len = np.where(v2, _be(buf, topic_len_pos, ">i2"), buf[topic_len_pos].astype(np.int64))
    topic_pos = topic_len_pos + np.where(v2, 2, 1)
    props_len_pos = clip(topic_pos + np.where(ok & (topic_len >= 0), topic_len, 0))
    props_len = _be(buf, props_len_pos, ">i2")
    props_pos = props_len_pos + 2
    ok &= (topic_len >= 0) & (props_len >= 0) & (props_pos + props_len == end)
    bad = np.flatnonzero(~ok)
    n = int(bad[0]) if len(bad) else len(starts)
    lay.n = n
    lay.head = head[:n]
    lay.sys_flag = sys_flag[:n]
    lay.born_host_pos = born_host_pos[:n]
    lay.store_ts_pos = store_ts_pos[:n]
    lay.store_host_pos = store_host_pos[:n]
    lay.body_pos = body_pos[:n]
    lay.body_len = body_len[:n]
    lay.topic_pos = topic_pos[:n]
    lay.topic_len = topic_len[:n]
    lay.props_pos = props_pos[:n]
    lay.props_len = props_len[:n]
    return lay


# -- properties ----------------------------------------------------------------------------------


class Properties:
    """The properties strings of a batch split into (row, key, value) segments, RocketMQ's rule:
    segments end at \\x02 or at the end of the string, and a segment counts only when its first
    \\x01 is neither its first nor its last character."""

    __slots__ = ("data", "key_len", "key_start", "n", "offsets", "row", "val_end", "val_start")

    def __init__(self, lay: Layout) -> None:
        data, offsets = gather(lay.buf, lay.props_pos, lay.props_len)
        self.n = lay.n
        self.data = data
        self.offsets = offsets
        r = offsets.astype(np.int64)
        total = int(r[-1])
        seps = np.flatnonzero(data == 2)
        row_len = np.diff(r)
        last = np.where(row_len > 0, r[1:] - 1, 0)
        tail = (row_len > 0) & (data[last] != 2) if total else np.zeros(self.n, dtype=bool)
        virtual = r[1:][tail]
        # Virtual ends first so that, at one position, the end of a row sorts before a
        # separator opening the next row (stable sort keeps that order).
        ends_all = np.concatenate((virtual, seps))
        nexts_all = np.concatenate((virtual, seps + 1))
        order = np.argsort(ends_all, kind="stable")
        ends = ends_all[order]
        nexts = nexts_all[order]
        starts = np.concatenate((np.zeros(1, dtype=np.int64), nexts[:-1])) if len(ends) else ends
        ones = np.flatnonzero(data == 1)
        if len(ones) and len(starts):
            f = np.searchsorted(ones, starts, side="left")
            has = f < len(ones)
            p1 = ones[np.minimum(f, len(ones) - 1)]
            valid = has & (p1 > starts) & (p1 < ends - 1)
        else:
            valid = np.zeros(len(starts), dtype=bool)
            p1 = starts
        starts, p1, ends = starts[valid], p1[valid], ends[valid]
        self.row = np.searchsorted(r, starts, side="right") - 1
        self.key_start = starts
        self.key_len = p1 - starts
        self.val_start = p1 + 1
        self.val_end = ends

    def map_array(self) -> pa.Array:
        counts = np.bincount(self.row, minlength=self.n)
        moff = np.zeros(self.n + 1, dtype=np.int32)
        np.cumsum(counts, out=moff[1:])
        keys = views(self.data, self.key_start, self.key_len, pa.string())
        items = views(self.data, self.val_start, self.val_end - self.val_start, pa.string())
        return pa.MapArray.from_arrays(pa.array(moff, pa.int32()), keys, items)

    def lookup(self, name: str) -> pa.Array:
        """The value of property ``name`` per row (null where absent; a later duplicate wins)."""
        key = np.frombuffer(name.encode(), dtype=np.uint8)
        cand = np.flatnonzero(self.key_len == len(key))
        if len(cand):
            k = rows(self.data, self.key_start[cand], len(key))
            cand = cand[(k == key).all(axis=1)]
        vs = np.zeros(self.n, dtype=np.int64)
        vl = np.zeros(self.n, dtype=np.int64)
        present = np.zeros(self.n, dtype=bool)
        hit = self.row[cand]
        vs[hit] = self.val_start[cand]
        vl[hit] = self.val_end[cand] - self.val_start[cand]
        present[hit] = True
        return views(self.data, vs, vl, pa.string(), present)


# -- columns -------------------------------------------------------------------------------------


def _ip4(v: int) -> str:
    return f"{v >> 24 & 255}.{v >> 16 & 255}.{v >> 8 & 255}.{v & 255}"


def _hosts(lay: Layout, pos: I64, v6_flag: int) -> pa.Array:
    """``ip:port`` per record; distinct hosts are few, so each is formatted once."""
    v6 = (lay.sys_flag & v6_flag) != 0
    if v6.any():
        from rocketq.codec.message import _decode_ip  # rare path: reuse the codec's formatter

        out: list[str] = []
        raw = lay.buf
        for i, p in enumerate(pos.tolist()):
            iplen = 16 if v6[i] else 4
            ip = _decode_ip(raw[p : p + iplen].tobytes())
            (port,) = _SIZE.unpack_from(raw[p + iplen : p + iplen + 4].tobytes())
            out.append(f"[{ip}]:{port}" if iplen == 16 else f"{ip}:{port}")
        return pa.array(out, pa.string())
    ip = _be(lay.buf, pos, ">u4")
    port = _be(lay.buf, pos + 4, ">i4")
    key = (ip << 32) | (port & 0xFFFFFFFF)
    uniq, inverse = np.unique(key, return_inverse=True)
    labels = pa.array([f"{_ip4(int(k) >> 32)}:{int(k) & 0xFFFFFFFF}" for k in uniq.tolist()], pa.string())
    return labels.take(pa.array(inverse.reshape(-1).astype(np.int32)))


def _offset_msg_ids(lay: Layout) -> pa.Array:
    """Store host + commit-log offset as 32 uppercase hex digits (the offset msgId)."""
    n = lay.n
    if (lay.sys_flag & _V6_STORE).any():
        from rocketq.codec.message import offset_msg_id

        hosts = _hosts(lay, lay.store_host_pos, _V6_STORE).to_pylist()
        phys = lay.phys_offset.tolist()
        out = []
        for h, off in zip(hosts, phys, strict=True):
            ip, _, port = h.rpartition(":")
            out.append(offset_msg_id(ip.strip("[]"), int(port), off))
        return pa.array(out, pa.string())
    raw = np.empty((n, 16), dtype=np.uint8)
    raw[:, :8] = rows(lay.buf, lay.store_host_pos, 8)
    raw[:, 8:] = lay.head[:, 28:36]
    text = _HEX[raw].reshape(n, 32)
    offsets = np.arange(0, 32 * n + 1, 32, dtype=np.int32)
    return pa.StringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(np.ascontiguousarray(text)))


def _timestamps(ms: I64) -> pa.Array:
    us = ms * 1000
    return pa.Array.from_buffers(pa.timestamp("us", tz="UTC"), len(us), [None, pa.py_buffer(us)])


def _bodies(lay: Layout) -> tuple[U8, npt.NDArray[np.int32]]:
    data, off = gather(lay.buf, lay.body_pos, lay.body_len)
    compressed = np.flatnonzero(lay.sys_flag & MessageSysFlag.COMPRESSED_FLAG)
    if not len(compressed):
        return data, off
    from rocketq.codec.message import decompress_body

    raw = data.tobytes()
    o = off.tolist()
    flags = lay.sys_flag.tolist()
    parts = [raw[o[i] : o[i + 1]] for i in range(lay.n)]
    for i in compressed.tolist():
        try:
            parts[i] = decompress_body(parts[i], flags[i])
        except Exception:
            pass  # keep the stored bytes: a body we cannot inflate is still the user's data
    lens = np.fromiter((len(p) for p in parts), dtype=np.int64, count=lay.n)
    new_off = np.zeros(lay.n + 1, dtype=np.int64)
    np.cumsum(lens, out=new_off[1:])
    return np.frombuffer(b"".join(parts), dtype=np.uint8), new_off.astype(np.int32)


def _body_strings(data: U8, off: npt.NDArray[np.int32]) -> tuple[pa.Array, pa.Array]:
    """(body as UTF-8 string, raw bytes of the rows that are not UTF-8 else null)."""
    n = len(off) - 1
    binary = pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(off), pa.py_buffer(data)])
    try:
        text = binary.cast(pa.string())
        return text, pa.nulls(n, pa.binary())
    except pa.ArrowInvalid:
        pass
    values = binary.to_pylist()
    texts: list[str | None] = []
    corrupt: list[bytes | None] = []
    for v in values:
        try:
            texts.append(v.decode("utf-8"))
            corrupt.append(None)
        except UnicodeDecodeError:
            texts.append(None)
            corrupt.append(v)
    return pa.array(texts, pa.string()), pa.array(corrupt, pa.binary())


def _constant(value: str, n: int) -> pa.Array:
    raw = value.encode()
    data = np.tile(np.frombuffer(raw, dtype=np.uint8), n) if raw else _EMPTY_U8
    offsets = np.arange(0, len(raw) * n + 1, max(len(raw), 1), dtype=np.int32)[: n + 1]
    if not raw:
        offsets = np.zeros(n + 1, dtype=np.int32)
    return pa.StringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(data))


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
    n = lay.n
    props: Properties | None = None
    tags: pa.Array | None = None

    def properties() -> Properties:
        nonlocal props
        if props is None:
            props = Properties(lay)
        return props

    def tags_col() -> pa.Array:
        nonlocal tags
        if tags is None:
            tags = properties().lookup(MessageConst.PROPERTY_TAGS)
        return tags

    body_cache: tuple[U8, npt.NDArray[np.int32]] | None = None
    text_cache: tuple[pa.Array, pa.Array] | None = None

    def body_raw() -> tuple[U8, npt.NDArray[np.int32]]:
        nonlocal body_cache
        if body_cache is None:
            body_cache = _bodies(lay)
        return body_cache

    def body_text() -> tuple[pa.Array, pa.Array]:
        nonlocal text_cache
        if text_cache is None:
            text_cache = _body_strings(*body_raw())
        return text_cache

    arrays: list[pa.Array] = []
    for c in schema.columns:
        name = c.name
        arr: pa.Array
        if name == "topic":
            if topic is not None:
                arr = _constant(topic, n)
            else:
                arr = views(lay.buf, lay.topic_pos, lay.topic_len, pa.string())
        elif name == "broker":
            arr = _constant(broker, n)
        elif name == "queue_id":
            arr = pa.array(lay.queue_id.astype(np.int32), pa.int32())
        elif name == "queue_offset":
            arr = pa.array(lay.queue_offset, pa.int64())
        elif name == "msg_id":
            uniq = properties().lookup(MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
            arr = uniq if uniq.null_count == 0 else pc.coalesce(uniq, _offset_msg_ids(lay))
        elif name == "keys":
            arr = properties().lookup(MessageConst.PROPERTY_KEYS)
        elif name == "tags":
            arr = tags_col()
        elif name == "body":
            if c.spark_type == "string":
                arr = body_text()[0]
            else:
                data, off = body_raw()
                arr = pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(off), pa.py_buffer(data)])
        elif name == CORRUPT_BODY:
            arr = body_text()[1] if schema.body_as_string else pa.nulls(n, pa.binary())
        elif name == "properties":
            arr = properties().map_array()
        elif name == "born_timestamp":
            arr = _timestamps(lay.born_timestamp)
        elif name == "store_timestamp":
            arr = _timestamps(_be(lay.buf, lay.store_ts_pos, ">i8"))
        elif name == "born_host":
            arr = _hosts(lay, lay.born_host_pos, _V6_BORN)
        elif name == "reconsume_times":
            arr = pa.array(_be(lay.buf, lay.store_host_pos + np.where(
                lay.sys_flag & _V6_STORE, 20, 8), ">i4").astype(np.int32), pa.int32())
        else:  # pragma: no cover - RowSchema admits only the names above
            raise AssertionError(name)
        if arr.type != c.arrow_type:
            arr = arr.cast(c.arrow_type)
        arrays.append(arr)
    batch = pa.RecordBatch.from_arrays(arrays, schema=schema.arrow_schema())
    if tags_filter is not None:
        mask = pc.is_in(tags_col(), value_set=pa.array(list(tags_filter), pa.string()))
        batch = batch.filter(pc.fill_null(mask, False))
    return batch
