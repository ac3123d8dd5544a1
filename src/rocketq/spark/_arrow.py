"""Arrow arrays built straight from byte buffers, without a Python step per value.

The decoder knows where every value lies in a buffer (a pull answer or a mapped commit-log
segment) as (position, length) arrays. ``slices`` turns them into a compact binary/string array
with one Arrow ``take``: the buffer is presented as a binary array whose elements alternate
between the wanted values and the bytes between them (valid as soon as the values are in
increasing position order, which records of one queue always are), and the even elements are
taken — a memcpy per value inside Arrow, several times cheaper than numpy byte indexing or a
binary_view cast.
"""

from __future__ import annotations

from typing import Final

import numpy as np
import numpy.typing as npt
import pyarrow as pa

U8 = npt.NDArray[np.uint8]
I64 = npt.NDArray[np.int64]
Bools = npt.NDArray[np.bool_]

_EMPTY_U8: Final = np.zeros(0, dtype=np.uint8)
_I32_LIMIT: Final = (1 << 31) - 1
_TS_TYPE: Final = pa.timestamp("us", tz="UTC")


def as_u8(data: bytes | bytearray | memoryview) -> U8:
    return np.frombuffer(data, dtype=np.uint8)


def fixed(buf: U8, pos: I64, k: int) -> npt.NDArray[np.void]:
    """The k bytes at each position, as one ``V{k}`` item per row.

    Indexing a view that has an item at every byte offset copies whole items (a memcpy each);
    the (n, k) sliding-window equivalent walks byte by byte and costs about twice as much.
    Callers keep ``pos + k <= len(buf)``.
    """
    if len(buf) < k:
        padded = np.zeros(k, dtype=np.uint8)
        padded[: len(buf)] = buf
        buf = padded
    win: npt.NDArray[np.void] = np.ndarray(shape=(len(buf) - k + 1,), dtype=f"V{k}", buffer=buf, strides=(1,))
    return win[pos]


def be_int(buf: U8, pos: I64, dtype: str) -> I64:
    """Big-endian integers of ``dtype`` (e.g. '>i4') at each position, as native int64."""
    k = np.dtype(dtype).itemsize
    safe = np.clip(pos, 0, max(len(buf) - k, 0))
    return fixed(buf, safe, k).view(dtype).astype(np.int64)


def _validity(valid: Bools | None) -> pa.Buffer | None:
    if valid is None or bool(valid.all()):
        return None
    return pa.py_buffer(np.packbits(valid, bitorder="little"))


def slices(buf: U8, pos: I64, lens: I64, out_type: pa.DataType, valid: Bools | None = None) -> pa.Array:
    """``buf[pos[i] : pos[i] + lens[i]]`` per row as a compact array of ``out_type`` (binary or
    string; rows where ``valid`` is False are null). Text that is not UTF-8 becomes U+FFFD."""
    n = len(pos)
    if n == 0:
        return pa.array([], out_type)
    ends = pos + lens
    if int(pos.min()) < 0 or int(ends.max()) > len(buf) or int(lens.min()) < 0:
        raise ValueError("slices outside the buffer")  # Arrow would read out of bounds
    if n > 1 and not bool((pos[1:] >= ends[:-1]).all()):
        # Out of order or overlapping (never for records of one queue): sort, then undo the sort.
        order = np.argsort(pos, kind="stable")
        inverse = np.empty(n, dtype=np.int64)
        inverse[order] = np.arange(n, dtype=np.int64)
        spos, slens = pos[order], lens[order]
        if n > 1 and not bool((spos[1:] >= spos[:-1] + slens[:-1]).all()):
            return _copy_slices(buf, pos, lens, out_type, valid)
        return slices(buf, spos, slens, out_type, None if valid is None else valid[order]).take(
            pa.array(inverse))
    large = int(ends.max()) > _I32_LIMIT
    off = np.empty(2 * n, dtype=np.int64 if large else np.int32)
    off[0::2] = pos
    off[1::2] = ends
    alternating = pa.Array.from_buffers(pa.large_binary() if large else pa.binary(), 2 * n - 1,
                                        [None, pa.py_buffer(off), pa.py_buffer(buf)])
    taken = alternating.take(pa.array(np.arange(0, 2 * n, 2, dtype=np.int64)))
    if large:
        taken = taken.cast(pa.binary())
    bufs = taken.buffers()
    binary = pa.Array.from_buffers(pa.binary(), n, [_validity(valid), bufs[1], bufs[2]])
    if pa.types.is_string(out_type):
        return utf8(binary)
    return binary


def _copy_slices(buf: U8, pos: I64, lens: I64, out_type: pa.DataType, valid: Bools | None) -> pa.Array:
    """The slow, always-correct form of ``slices`` for overlapping slices."""
    raw = buf.tobytes()
    values = [raw[p : p + k] for p, k in zip(pos.tolist(), lens.tolist(), strict=True)]
    binary = pa.array(values, pa.binary())
    if valid is not None and not bool(valid.all()):
        bufs = binary.buffers()
        binary = pa.Array.from_buffers(pa.binary(), len(values), [_validity(valid), bufs[1], bufs[2]])
    return utf8(binary) if pa.types.is_string(out_type) else binary


def utf8(binary: pa.Array) -> pa.Array:
    """A binary array as strings; values that are not UTF-8 become U+FFFD text."""
    try:
        return binary.cast(pa.string())
    except pa.ArrowInvalid:
        pass
    return pa.array([None if b is None else b.decode("utf-8", "replace") for b in binary.to_pylist()],
                    pa.string())


def binary_from(data: U8, offsets: npt.NDArray[np.int32]) -> pa.Array:
    n = len(offsets) - 1
    return pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(offsets), pa.py_buffer(data)])


def buffers_of(binary: pa.Array) -> tuple[U8, npt.NDArray[np.int32]]:
    """(data, offsets from 0) of a binary/string array with int32 offsets."""
    n = len(binary)
    bufs = binary.buffers()
    offsets = np.frombuffer(bufs[1], dtype=np.int32, count=n + 1 + binary.offset)[binary.offset :]
    data = np.frombuffer(bufs[2], dtype=np.uint8) if bufs[2] is not None else _EMPTY_U8
    if n and offsets[0] != 0:
        data = data[int(offsets[0]) :]
        offsets = offsets - offsets[0]
    return data, offsets


def constant(value: str, n: int) -> pa.Array:
    """``value`` repeated n times as a string array."""
    raw = value.encode()
    if not raw:
        return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(np.zeros(n + 1, np.int32)),
                                                      pa.py_buffer(b"")])
    data = np.tile(np.frombuffer(raw, dtype=np.uint8), n)
    offsets = np.arange(0, len(raw) * (n + 1), len(raw), dtype=np.int64)
    if offsets[-1] > _I32_LIMIT:
        return pa.array([value] * n, pa.string())
    return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets.astype(np.int32)),
                                                  pa.py_buffer(data)])


def timestamps(ms: I64) -> pa.Array:
    """Milliseconds since the epoch as Spark's timestamp (microseconds, UTC)."""
    us = np.ascontiguousarray(ms, dtype=np.int64) * 1000
    return pa.Array.from_buffers(_TS_TYPE, len(us), [None, pa.py_buffer(us)])


def ints(values: I64, arrow_type: pa.DataType) -> pa.Array:
    np_type = np.int32 if arrow_type == pa.int32() else np.int64
    arr = np.ascontiguousarray(values, dtype=np_type)
    return pa.Array.from_buffers(arrow_type, len(arr), [None, pa.py_buffer(arr)])
