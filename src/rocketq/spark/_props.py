"""Message properties of a whole batch (``k\\x01v\\x02k\\x01v\\x02...`` per row) -> map column and
single-key lookups, in bulk.

RocketMQ's rule (MessageDecoder.string2messageProperties): a string is cut at every \\x02 (the
last one is optional); a segment counts only when its first \\x01 is neither its first nor its
last character; a later duplicate key replaces an earlier one. That rule is defined in
``codec/properties.py``; this module is its column-at-a-time form (tests/spark/test_decode.py
holds the two to the same answers), and the map column never holds a key twice.

Almost every properties string is well formed — separators alternate \\x01, \\x02 and every
string ends with \\x02 — so the separators are found in one vectorised pass and paired
directly; anything else goes through the general segment search, still without a Python loop.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from rocketq.spark._arrow import slices

U8 = npt.NDArray[np.uint8]
I64 = npt.NDArray[np.int64]
Segments = tuple[I64, I64, I64, I64]  # segment start, first \x01, segment end, row


def _fast_segments(data: U8, offsets: I64) -> Segments | None:
    """Segments of well-formed strings (alternating separators, each string ending with \\x02)."""
    total = int(offsets[-1])
    if total == 0:
        return None
    body = data[:total]
    sep = np.flatnonzero(body <= 2)
    if len(sep) == 0 or len(sep) % 2:
        return None
    ones, twos = sep[0::2], sep[1::2]
    if int(twos[-1]) != total - 1 or not bool((body[ones] == 1).all()) or not bool((body[twos] == 2).all()):
        return None  # a zero byte, a value holding \x01, a missing last \x02, ...
    starts = np.empty_like(twos)
    starts[0] = 0
    starts[1:] = twos[:-1] + 1
    # Every non-empty string must begin a segment; the segments then fall into the strings in
    # order, and a segment's string is found by counting the string starts up to it.
    nonempty = np.flatnonzero(offsets[1:] > offsets[:-1])
    begins = np.zeros(total + 1, dtype=bool)
    begins[offsets[nonempty]] = True
    first = begins[starts]
    if int(np.count_nonzero(first)) != len(nonempty):
        return None
    row = nonempty[np.cumsum(first) - 1]
    return starts, ones, twos, row


def _general_segments(data: U8, offsets: I64) -> Segments:
    """Segments by the rule itself: ends at each \\x02 and at each string's end."""
    n = len(offsets) - 1
    total = int(offsets[-1])
    seps = np.flatnonzero(data[:total] == 2)
    row_len = np.diff(offsets)
    last = np.where(row_len > 0, offsets[1:] - 1, 0)
    tail = (row_len > 0) & (data[last] != 2) if total else np.zeros(n, dtype=bool)
    virtual = offsets[1:][tail]
    # Virtual ends first so that, at one position, the end of a string sorts before a separator
    # opening the next one (the stable sort keeps that order).
    ends_all = np.concatenate((virtual, seps))
    nexts_all = np.concatenate((virtual, seps + 1))
    order = np.argsort(ends_all, kind="stable")
    ends = ends_all[order]
    nexts = nexts_all[order]
    starts = np.concatenate((np.zeros(1, dtype=np.int64), nexts[:-1])) if len(ends) else ends
    ones = np.flatnonzero(data[:total] == 1)
    if len(ones) and len(starts):
        f = np.searchsorted(ones, starts, side="left")
        p1 = ones[np.minimum(f, len(ones) - 1)]
        p1 = np.where(f < len(ones), p1, ends)  # no \x01 at all: fails the rule below
    else:
        p1 = ends.copy()
    row = np.searchsorted(offsets, starts, side="right") - 1
    return starts, p1, ends, row


class Properties:
    """The properties of n rows; ``map_array()`` and ``lookup(name)`` build Arrow columns."""

    __slots__ = ("_ids", "_index", "_keys", "data", "key_start", "n", "row", "row_start", "val_end",
                 "val_start")

    def __init__(self, data: U8, offsets: npt.NDArray[np.int32]) -> None:
        self.data = data
        self.n = len(offsets) - 1
        off = offsets.astype(np.int64)
        self.row_start = off[:-1]
        segs = _fast_segments(data, off) or _general_segments(data, off)
        starts, p1, ends, row = segs
        valid = (p1 > starts) & (p1 < ends - 1)
        if not bool(valid.all()):
            starts, p1, ends, row = starts[valid], p1[valid], ends[valid], row[valid]
        self.key_start = starts
        self.val_start = p1 + 1
        self.val_end = ends
        self.row = row
        keys = slices(data, starts, p1 - starts, pa.string())
        encoded = pc.dictionary_encode(keys)
        ids = np.asarray(encoded.indices, dtype=np.int64)
        names = encoded.dictionary.to_pylist()
        keep = _last_of_each_key(row, ids, len(names))
        if keep is not None:
            self.key_start, self.val_start, self.val_end = starts[keep], self.val_start[keep], ends[keep]
            self.row, ids = row[keep], ids[keep]
            keys = keys.take(pa.array(keep))
        self._keys = keys
        self._ids = ids
        self._index = {name: i for i, name in enumerate(names)}

    def map_array(self) -> pa.Array:
        counts = np.bincount(self.row, minlength=self.n)
        moff = np.zeros(self.n + 1, dtype=np.int32)
        np.cumsum(counts, out=moff[1:])
        items = slices(self.data, self.val_start, self.val_end - self.val_start, pa.string())
        offsets = pa.Array.from_buffers(pa.int32(), self.n + 1, [None, pa.py_buffer(moff)])
        return pa.MapArray.from_arrays(offsets, self._keys, items)

    def lookup(self, name: str) -> pa.Array:
        """The value of property ``name`` per row (null where absent)."""
        k = self._index.get(name)
        starts = self.row_start.copy()
        lens = np.zeros(self.n, dtype=np.int64)
        present = np.zeros(self.n, dtype=bool)
        if k is not None:
            segs = np.flatnonzero(self._ids == k)
            rows = self.row[segs]
            starts[rows] = self.val_start[segs]
            lens[rows] = self.val_end[segs] - self.val_start[segs]
            present[rows] = True
        return slices(self.data, starts, lens, pa.string(), present)


def _popcount(bits: npt.NDArray[np.uint64]) -> I64:
    count = getattr(np, "bitwise_count", None)  # numpy >= 2.0
    if count is not None:
        out: I64 = count(bits).astype(np.int64)
        return out
    fallback: I64 = np.unpackbits(bits.view(np.uint8)).reshape(len(bits), 64).sum(axis=1).astype(np.int64)
    return fallback


def _last_of_each_key(row: I64, ids: I64, distinct: int) -> I64 | None:
    """Indices of the segments to keep when a row repeats a key (its last one wins), else None."""
    if len(row) < 2:
        return None
    if distinct <= 64:
        # A repeated key in a row shows as fewer distinct bits than segments in that row.
        bits = np.left_shift(np.uint64(1), ids.astype(np.uint64))
        first = np.flatnonzero(np.concatenate(([True], row[1:] != row[:-1])))
        union = np.bitwise_or.reduceat(bits, first)
        counts = np.diff(np.append(first, len(row)))
        if bool((_popcount(union) == counts).all()):
            return None
    combined = row * max(distinct, 1) + ids
    _, last_rev = np.unique(combined[::-1], return_index=True)
    if len(last_rev) == len(combined):
        return None
    return np.sort(len(combined) - 1 - last_rev)
