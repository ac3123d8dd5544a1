"""ConsumeQueue: the per-(topic, queueId) index of 20-byte entries into the commit log.

Entry = commit-log offset (long) + record size (int) + tagsCode (long), big-endian, entry N at
byte N * 20 of the queue, files named by their first byte offset (RocketMQ's layout, so the
files are interchangeable with a Java broker's). Reads go through numpy views of the mapping.
"""

from __future__ import annotations

import logging
import mmap
import os
import struct
from collections.abc import Sequence
from functools import lru_cache
from itertools import chain
from typing import Final

import numpy as np
import numpy.typing as npt

from rocketq.errors import DiskFull
from rocketq.store.mapped_file import OS_PAGE_SIZE, AllocateMappedFileService, MappedFile, MappedFileQueue

log = logging.getLogger("rocketq.store")

CQ_STORE_UNIT_SIZE: Final = 20
CQ_RESERVE_WINDOW: Final = 64 * 1024  # bytes of blocks reserved per step (3,276 entries)
_RECOVER_STEP: Final = 4096  # entries recovery checks at a time (20 pages)
CQ_DTYPE: Final = np.dtype([("phys", ">i8"), ("size", ">i4"), ("tags", ">i8")])
_ENTRY = struct.Struct(">qiq")

CQEntries = npt.NDArray[np.void]
I64Array = npt.NDArray[np.int64]


# The file a queue writes to is mapped MADV_RANDOM. A write that faults on a page that is not
# in the page cache (a new file, or a page the kernel reclaimed) would otherwise start the
# fault read-around: read_ahead_kb around the page, up to the whole 6 MB file zero-filled
# into the page cache for a 20-byte entry. With thousands of queues that is most of a send's
# cost and fills memory with zeros, which evicts other queues' pages, whose next entry then
# faults again. Files the writer has left go back to normal advice: a reader draining a cold
# backlog wants the read-around.
_WRITING: Final = getattr(mmap, "MADV_RANDOM", None)
_READING: Final = getattr(mmap, "MADV_NORMAL", None)


def _advise(mf: MappedFile, advice: int | None) -> None:
    if advice is not None:
        try:
            mf.mm.madvise(advice)
        except (OSError, ValueError):  # advice only: a closed or odd mapping does without
            pass


@lru_cache(maxsize=256)
def _entries_struct(n: int) -> struct.Struct:
    """One struct for n consecutive entries (batches repeat their sizes)."""
    return struct.Struct(">" + "qiq" * n)


class ConsumeQueue:
    """One logical queue. `max_offset` is the next index to write (= entries ever written)."""

    def __init__(
        self,
        topic: str,
        queue_id: int,
        root_dir: str,
        file_size: int,
        allocator: AllocateMappedFileService | None = None,
    ) -> None:
        self.topic = topic
        self.queue_id = queue_id
        self.file_size = file_size
        self.per_file = file_size // CQ_STORE_UNIT_SIZE
        self.mfq = MappedFileQueue(os.path.join(root_dir, topic, str(queue_id)), file_size, allocator)
        self.max_offset = 0
        self.min_offset = 0
        self.max_physic_offset = 0  # end of the last dispatched record in the commit log
        self._cur: MappedFile | None = None
        self._cur_start = 0  # first entry index of _cur
        self._cur_end = 0
        self.reserved_end = 0  # entries below this index have disk blocks (see reserve_to)

    def __repr__(self) -> str:
        return f"ConsumeQueue({self.topic!r}, {self.queue_id}, [{self.min_offset}, {self.max_offset}))"

    # ---- load / recover ------------------------------------------------------------------
    def load(self) -> None:
        self.mfq.load()

    def view(self, mf: MappedFile, start: int = 0, count: int | None = None) -> CQEntries:
        """Entries of one file as a structured array over the mapping (drop it soon: a live
        view keeps the file from being unmapped)."""
        if count is None:
            count = self.per_file - start
        return np.frombuffer(mf.buf, dtype=CQ_DTYPE, count=count, offset=start * CQ_STORE_UNIT_SIZE)

    def recover(self) -> None:
        """Find the end of the valid entries (RocketMQ: the first entry with size <= 0 ends the
        queue), drop what lies beyond and set min / max."""
        files = list(self.mfq)
        if not files:
            self.min_offset = self.max_offset = 0
            return
        # the last file is the one appends continue in (see _WRITING): reading its few entries
        # must not fault the rest of it in
        _advise(files[-1], _WRITING)
        end = files[-1].file_end_offset // CQ_STORE_UNIT_SIZE
        for mf in files[max(0, len(files) - 3) :]:
            bad = self._first_bad(mf)
            if bad is not None:
                end = mf.file_from_offset // CQ_STORE_UNIT_SIZE + bad
                break
        self._set_end(end)
        self.min_offset = files[0].file_from_offset // CQ_STORE_UNIT_SIZE

    def _first_bad(self, mf: MappedFile) -> int | None:
        """Index within `mf` of its first entry that ends a queue (None: every one is valid),
        looking a step at a time: a queue's last file is mostly never written, and a scan to
        its end would fault 6 MB in per queue at start-up."""
        for start in range(0, self.per_file, _RECOVER_STEP):
            v = self.view(mf, start, min(_RECOVER_STEP, self.per_file - start))
            bad = np.flatnonzero((v["size"] <= 0) | (v["phys"] < 0))
            del v
            if len(bad):
                return start + int(bad[0])
        return None

    def _set_end(self, end: int) -> None:
        """Make `end` the new max offset: later files go, the tail of the last is cleared."""
        byte_end = end * CQ_STORE_UNIT_SIZE
        self.mfq.truncate_dirty(byte_end)
        for mf in self.mfq:
            if mf.file_from_offset <= byte_end < mf.file_end_offset:
                mf.zero(byte_end - mf.file_from_offset, mf.file_size)
        self.max_offset = end
        self._cur = None
        self.reserved_end = 0
        self.max_physic_offset = 0
        last = self.entry(end - 1) if end > 0 else None
        if last is not None:
            self.max_physic_offset = last[0] + last[1]

    def truncate_dirty(self, phys_end: int) -> None:
        """Drop the entries that point at or beyond `phys_end` (a commit log cut by recovery)."""
        if self.max_physic_offset <= phys_end:
            return
        new_end = self.max_offset
        for mf in reversed(list(self.mfq)):
            start = mf.file_from_offset // CQ_STORE_UNIT_SIZE
            n = min(self.per_file, self.max_offset - start)
            if n <= 0:
                continue
            v = self.view(mf, 0, n)
            ends = v["phys"].astype(np.int64) + v["size"].astype(np.int64)
            del v
            good = np.flatnonzero(ends <= phys_end)
            if len(good) == n:
                break
            new_end = start + (int(good[-1]) + 1 if len(good) else 0)
            if len(good):
                break
        log.info("%s: truncate consume queue to %d (commit log ends at %d)", self, new_end, phys_end)
        self._set_end(new_end)

    # ---- write ---------------------------------------------------------------------------
    def reserve_to(self, end: int) -> None:
        """Disk blocks for every entry below `end`, creating files as needed, before a put
        appends the records they index: an entry that could not be written after its record
        was would be a record stored but refused. Raises DiskFull."""
        idx = max(self.max_offset, self.reserved_end)
        while idx < end:
            mf = self.mfq.file_for_offset(idx * CQ_STORE_UNIT_SIZE, create=True)
            assert mf is not None
            first = mf.file_from_offset // CQ_STORE_UNIT_SIZE
            upto = min(end, first + self.per_file)
            need = (upto - first) * CQ_STORE_UNIT_SIZE
            if not mf.reserve(need + CQ_RESERVE_WINDOW) and not mf.reserve(need):
                raise DiskFull(mf.path, need - mf.reserved)
            self.reserved_end = first + mf.reserved // CQ_STORE_UNIT_SIZE
            idx = upto

    def _file_for(self, index: int) -> MappedFile:
        mf = self.mfq.file_for_offset(index * CQ_STORE_UNIT_SIZE, create=True)
        assert mf is not None
        old, self._cur = self._cur, mf
        if old is not mf:
            _advise(mf, _WRITING)
            if old is not None and not old.closed:
                _advise(old, _READING)
        self._cur_start = mf.file_from_offset // CQ_STORE_UNIT_SIZE
        self._cur_end = self._cur_start + self.per_file
        return mf

    def append(self, phys: int, size: int, tags_code: int) -> int:
        """Write the entry at max_offset; returns its index."""
        idx = self.max_offset
        mf = self._cur
        if mf is None or not self._cur_start <= idx < self._cur_end:
            mf = self._file_for(idx)
        pos = (idx - self._cur_start) * CQ_STORE_UNIT_SIZE
        _ENTRY.pack_into(mf.buf, pos, phys, size, tags_code)
        mf.wrote_position = pos + CQ_STORE_UNIT_SIZE
        self.max_offset = idx + 1
        self.max_physic_offset = phys + size
        return idx

    def append_many(self, phys: Sequence[int], sizes: Sequence[int], tags: Sequence[int]) -> int:
        """Write consecutive entries from max_offset (one copy per file touched); returns the
        first index."""
        n = len(phys)
        first = self.max_offset
        flat = chain.from_iterable(zip(phys, sizes, tags, strict=True))
        self._write_block(first, _entries_struct(n).pack(*flat))
        self.max_offset = first + n
        self.max_physic_offset = phys[-1] + sizes[-1]
        return first

    def _write_block(self, index: int, data: bytes) -> None:
        done, total = 0, len(data)
        while done < total:
            idx = index + done // CQ_STORE_UNIT_SIZE
            mf = self._cur
            if mf is None or not self._cur_start <= idx < self._cur_end:
                mf = self._file_for(idx)
            pos = (idx - self._cur_start) * CQ_STORE_UNIT_SIZE
            n = min(total - done, mf.file_size - pos)
            mf.buf[pos : pos + n] = data[done : done + n] if done or n < total else data
            if pos + n > mf.wrote_position:
                mf.wrote_position = pos + n
            done += n

    def put_block(self, index: int, phys: I64Array, sizes: I64Array, tags: I64Array) -> None:
        """Write consecutive entries from any index (recovery re-dispatch); extends
        max_offset when they reach past it."""
        self.reserve_to(index + len(phys))
        arr = np.empty(len(phys), dtype=CQ_DTYPE)
        arr["phys"] = phys
        arr["size"] = sizes
        arr["tags"] = tags
        self._write_block(index, arr.tobytes())
        end = index + len(phys)
        if end >= self.max_offset:
            self.max_offset = end
            self.max_physic_offset = int(phys[-1]) + int(sizes[-1])

    # ---- read ----------------------------------------------------------------------------
    def entries(self, index: int, max_count: int) -> CQEntries | None:
        """Up to `max_count` entries from `index` within one file (None: that file is gone)."""
        mf = self.mfq.find(index * CQ_STORE_UNIT_SIZE)
        if mf is None or mf.closed:
            return None
        start = index - mf.file_from_offset // CQ_STORE_UNIT_SIZE
        n = min(max_count, self.per_file - start, self.max_offset - index)
        return self.view(mf, start, max(0, n))

    def entry(self, index: int) -> tuple[int, int, int] | None:
        if not 0 <= index < self.max_offset:
            return None
        mf = self.mfq.find(index * CQ_STORE_UNIT_SIZE)
        if mf is None or mf.closed:
            return None
        phys, size, tags = _ENTRY.unpack_from(mf.buf, index * CQ_STORE_UNIT_SIZE - mf.file_from_offset)
        return int(phys), int(size), int(tags)

    def roll_next_file(self, index: int) -> int:
        return index - index % self.per_file + self.per_file

    def phys_offsets(self, lo_phys: int, hi_phys: int) -> npt.NDArray[np.int64]:
        """Commit-log offsets of the entries pointing into [lo_phys, hi_phys) (recovery)."""
        out: list[npt.NDArray[np.int64]] = []
        for mf in self.mfq:
            start = mf.file_from_offset // CQ_STORE_UNIT_SIZE
            n = min(self.per_file, self.max_offset - start)
            if n <= 0:
                continue
            v = self.view(mf, 0, n)
            p = v["phys"].astype(np.int64)
            s = v["size"]
            del v
            keep = (p >= lo_phys) & (p < hi_phys) & (s > 0)
            if keep.any():
                out.append(p[keep])
        return np.concatenate(out) if out else np.zeros(0, dtype=np.int64)

    # ---- retention -----------------------------------------------------------------------
    def correct_min_offset(self, min_phy: int) -> None:
        """min_offset := first entry whose record is still in the commit log."""
        for mf in self.mfq:
            start = mf.file_from_offset // CQ_STORE_UNIT_SIZE
            n = min(self.per_file, self.max_offset - start)
            if n <= 0:
                break
            v = self.view(mf, 0, n)
            ok = np.flatnonzero(v["phys"].astype(np.int64) >= min_phy)
            del v
            if len(ok):
                self.min_offset = max(self.min_offset, start + int(ok[0]))
                return
        self.min_offset = self.max_offset

    def delete_expired(self, min_phy: int) -> int:
        """Delete files (never the last) whose every record is gone from the commit log."""
        deleted = 0
        files = list(self.mfq)
        for mf in files[:-1]:
            start = mf.file_from_offset // CQ_STORE_UNIT_SIZE
            last = self.entry(min(start + self.per_file, self.max_offset) - 1)
            if last is None or last[0] >= min_phy:
                break
            if mf is self._cur:
                self._cur = None
            self.mfq.delete_file(mf)
            deleted += 1
        if deleted:
            first = self.mfq.first
            if first is not None:
                self.min_offset = max(self.min_offset, first.file_from_offset // CQ_STORE_UNIT_SIZE)
        self.correct_min_offset(min_phy)
        return deleted

    def flush(self, least_pages: int = 0) -> int:
        """fdatasync what was written since the last flush (any thread); the flushed byte offset.

        The flush service asks every queue every second: with thousands of queues, the common
        answers (nothing new; less than `least_pages` new in the file being written, the ones
        before it flushed) come from the file being written alone, without walking the files.
        Every write goes through `_cur`, so a clean `_cur` means nothing is dirty."""
        cur = self._cur
        if cur is not None:
            dirty = cur.wrote_position - cur.flushed_position
            if dirty <= 0 or (dirty < least_pages * OS_PAGE_SIZE
                              and cur.file_from_offset <= self.mfq.flushed_where):
                return self.mfq.flushed_where
        return self.mfq.flush(least_pages)

    def close(self) -> None:
        self._cur = None
        self.reserved_end = 0
        self.mfq.close()

    def destroy(self) -> None:
        self._cur = None
        self.reserved_end = 0
        self.mfq.destroy()
