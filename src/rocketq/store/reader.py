"""Reading a consume queue: PULL semantics over the 20-byte entries (numpy), zero-copy buffers
from the commit log, and the binary search by store time."""

from __future__ import annotations

import struct
from bisect import bisect_right
from collections.abc import Callable, Sequence
from functools import lru_cache
from itertools import accumulate
from operator import add

import numpy as np

from rocketq.store.commitlog import CommitLog
from rocketq.store.consume_queue import ConsumeQueue
from rocketq.store.model import GetMessageResult, GetMessageStatus

_GS = GetMessageStatus
# record_filter(buf, offsets, limit): positions in `offsets` of the records in `buf` that pass, in order,
# at most `limit` (MessageFilter.isMatchedByCommitLog over a batch).
RecordFilter = Callable[[memoryview, Sequence[int], int], Sequence[int]]
MIN_SCAN = 800  # RocketMQ scans max(16000 bytes, maxMsgNums entries) of a queue per read
_FILTER_CHUNK = 16  # the fewest candidates a record filter is given at a time (a pull's max count if more)


def read_queue(
    cq: ConsumeQueue,
    cl: CommitLog,
    offset: int,
    max_count: int,
    byte_cap: int,
    tag_codes: frozenset[int] | None,
    record_filter: RecordFilter | None = None,
) -> GetMessageResult:
    """Up to `max_count` messages (and `byte_cap` bytes, at least one message) from `offset`.

    Statuses and next offsets follow PROTOCOL.md §2.2. Adjacent records are returned as one
    memoryview of the mapped segment, so a pull answer is a few slices, never a copy.
    `record_filter` (MessageFilter.isMatchedByCommitLog) sees the records that passed the tag codes,
    in queue order, until `max_count` of them matched.
    """
    min_off, max_off = cq.min_offset, cq.max_offset
    if max_off == 0:
        return GetMessageResult(_GS.NO_MESSAGE_IN_QUEUE, 0, min_off, max_off)
    if offset < min_off:
        return GetMessageResult(_GS.OFFSET_TOO_SMALL, min_off, min_off, max_off)
    if offset == max_off:
        return GetMessageResult(_GS.OFFSET_OVERFLOW_ONE, offset, min_off, max_off)
    if offset > max_off:
        return GetMessageResult(_GS.OFFSET_OVERFLOW_BADLY, max_off, min_off, max_off)
    # The scan beyond max_count is for filters and removed records, which a read skips; an
    # unfiltered read of live records is filled by its first max_count entries, so it reads only
    # those, and scans on as RocketMQ does only when one of them is dead.
    scan = max(MIN_SCAN, max_count)
    want_tags = tag_codes is not None
    if tag_codes is None and record_filter is None:
        plain = _read_plain(cq, cl, offset, max_count, byte_cap, min_off, max_off)
        if plain is not None:
            return plain
        phys, sizes, tags, alive = _scan(cq, cl, offset, max_count, want_tags)
        if len(phys) and not alive.all() and max_count < scan:
            phys, sizes, tags, alive = _scan(cq, cl, offset, scan, want_tags)
    else:
        phys, sizes, tags, alive = _scan(cq, cl, offset, scan, want_tags)
    if not len(phys):
        return GetMessageResult(_GS.OFFSET_FOUND_NULL, cq.roll_next_file(offset), min_off, max_off)
    sel = alive
    if tags is not None and tag_codes is not None:
        sel = alive & np.isin(tags, np.fromiter(tag_codes, dtype=np.int64, count=len(tag_codes)))
    idx = np.flatnonzero(sel)
    full = False
    if record_filter is not None and len(idx):
        idx, full = _filter_records(cl, phys, sizes, idx, max_count, record_filter)
    if len(idx) >= max_count:
        idx = idx[:max_count]
        full = True
    if len(idx):
        fit = int(np.searchsorted(np.cumsum(sizes[idx]), byte_cap, side="right"))
        if fit < len(idx):
            idx = idx[: max(fit, 1)]
            full = True
    # a full batch resumes right after its last message; otherwise after everything scanned
    scanned = int(idx[-1]) + 1 if full else len(phys)
    if not len(idx):
        status = _GS.MESSAGE_WAS_REMOVING if not alive[-1] else _GS.NO_MATCHED_MESSAGE
        return GetMessageResult(status, offset + scanned, min_off, max_off)
    p = phys[idx]
    e = p + sizes[idx]
    breaks = (np.flatnonzero(p[1:] != e[:-1]) + 1).tolist()
    p_l = p.tolist()
    e_l = e.tolist()
    buffers: list[memoryview] = []
    total = 0
    for a, b in zip([0, *breaks], [*breaks, len(p)], strict=True):
        v = cl.read(p_l[a], e_l[b - 1] - p_l[a])
        if v is None:  # its segment went away between the checks and the read
            continue
        buffers.append(v)
        total += len(v)
    if not buffers:
        return GetMessageResult(_GS.MESSAGE_WAS_REMOVING, offset + scanned, min_off, max_off)
    return GetMessageResult(_GS.FOUND, offset + scanned, min_off, max_off, buffers, len(idx), total,
                            idx + offset)


@lru_cache(maxsize=64)
def _entries(n: int) -> struct.Struct:
    """n consecutive 20-byte consume-queue entries (phys, size, tags)."""
    return struct.Struct(">" + "qiq" * n)


def _read_plain(cq: ConsumeQueue, cl: CommitLog, offset: int, max_count: int, byte_cap: int,
                min_off: int, max_off: int) -> GetMessageResult | None:
    """The common pull, unfiltered, of live records: read with plain ints, as a pull of a few
    dozen entries spends more in numpy's per-call overhead than in the work itself. None when
    the general path must decide (a dead or removed entry, a file gone, a segment unreadable)."""
    ents = cq.entries(offset, max_count)
    if ents is None:
        return None
    n = len(ents)
    if not n:
        return None
    flat = _entries(n).unpack_from(ents.data)
    del ents  # the view pins the consume-queue mapping
    phys = flat[0::3]
    sizes = flat[1::3]
    ends = list(map(add, phys, sizes))
    if min(phys) < cl.min_offset or min(sizes) <= 0 or max(ends) > cl.max_offset:
        return None
    k = n
    if n > 1 and sum(sizes) > byte_cap:
        k = max(bisect_right(list(accumulate(sizes)), byte_cap), 1)
    buffers: list[memoryview] = []
    total = 0
    start, end = phys[0], ends[0]
    for i in range(1, k):
        p = phys[i]
        if p != end:  # a gap: records of other queues lie between
            v = cl.read(start, end - start)
            if v is None:
                return None
            buffers.append(v)
            total += len(v)
            start = p
        end = ends[i]
    v = cl.read(start, end - start)
    if v is None:
        return None
    buffers.append(v)
    total += len(v)
    return GetMessageResult(_GS.FOUND, offset + k, min_off, max_off, buffers, k, total,
                            np.arange(offset, offset + k, dtype=np.int64))


def _scan(cq: ConsumeQueue, cl: CommitLog, offset: int, count: int,
          want_tags: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, np.ndarray]:
    """Up to `count` entries from `offset`: physical offsets, sizes, tag codes (if wanted) and
    which of them still point into the commit log."""
    ents = cq.entries(offset, count)
    if ents is None or len(ents) == 0:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, None, np.zeros(0, dtype=bool)
    phys = ents["phys"].astype(np.int64)
    sizes = ents["size"].astype(np.int64)
    tags = ents["tags"].astype(np.int64) if want_tags else None
    del ents  # the view pins the consume-queue mapping
    alive = (phys >= cl.min_offset) & (sizes > 0) & (phys + sizes <= cl.max_offset)
    return phys, sizes, tags, alive


def _filter_records(cl: CommitLog, phys: np.ndarray, sizes: np.ndarray, idx: np.ndarray, max_count: int,
                    record_filter: RecordFilter) -> tuple[np.ndarray, bool]:
    """The candidates whose record passes the filter, stopping at `max_count` matches (then full).

    Candidates go to the filter a chunk at a time (a pull usually fills from its first chunk), and
    a chunk usually sits in one commit-log segment: one zero-copy view of its whole stretch then
    serves every record of the chunk, addressed by offset."""
    kept: list[int] = []
    step = max(max_count, _FILTER_CHUNK)
    for c0 in range(0, len(idx), step):
        ci = idx[c0:c0 + step]
        lo, hi = int(ci[0]), int(ci[-1]) + 1
        if hi - lo == len(ci):  # consecutive candidates (no tag codes): views, not gathers
            pc, sc = phys[lo:hi], sizes[lo:hi]
        else:
            pc, sc = phys[ci], sizes[ci]
        p_l = pc.tolist()
        e_l = (pc + sc).tolist()
        base = p_l[0]
        span = cl.read(base, max(e_l) - base)
        chunk = ci.tolist()
        if span is not None:
            hits = record_filter(span, [p - base for p in p_l], max_count - len(kept))
            if len(hits) == len(chunk):  # every candidate passed: the common case of a broad filter
                if not kept and len(ci) >= max_count:
                    return ci[:max_count], True
                kept.extend(chunk)
            else:
                kept.extend(chunk[j] for j in hits)
        else:  # the stretch crosses segments: one record at a time
            for i, p, e in zip(chunk, p_l, e_l, strict=True):
                one = cl.read(p, e - p)
                if one is not None and record_filter(one, (0,), 1):
                    kept.append(i)
                    if len(kept) >= max_count:
                        break
        if len(kept) >= max_count:
            return np.asarray(kept[:max_count], dtype=np.int64), True
    return np.asarray(kept, dtype=np.int64), False


def offset_by_time(cq: ConsumeQueue, cl: CommitLog, timestamp: int, upper: bool) -> int:
    """SEARCH_OFFSET_BY_TIMESTAMP: binary search over the store times of the queue's records."""
    lo, hi = cq.min_offset, cq.max_offset
    if lo >= hi:
        return 0 if upper else hi

    def ts_at(i: int) -> int:
        e = cq.entry(i)
        return cl.store_timestamp_at(e[0]) if e is not None else -1

    a, b = lo, hi
    if upper:  # last index stored at or before
        while a < b:
            mid = (a + b) // 2
            if ts_at(mid) <= timestamp:
                a = mid + 1
            else:
                b = mid
        return a - 1 if a > lo else 0
    while a < b:  # first index stored at or after
        mid = (a + b) // 2
        if ts_at(mid) < timestamp:
            a = mid + 1
        else:
            b = mid
    return a
