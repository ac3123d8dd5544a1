"""The slave's side of the store: raw commit-log bytes from the master in, consume queues and index
out (RocketMQ's slave CommitLog.appendData + its ReputMessageService).

Bytes land at exactly the offset they had on the master, so message ids, queue offsets and
segment names agree on both. A transfer may end inside a record: only whole records are
dispatched, the rest waits for the next transfer. Dispatch reuses recovery's vectorised
re-dispatch (each record carries its own queue offset), so one read of many transfers costs
a few numpy passes, not per-message Python.
"""

from __future__ import annotations

import logging
from array import array
from typing import TYPE_CHECKING

import numpy as np

from rocketq.codec.record import BLANK_MAGIC, MAGIC_V1, MAGIC_V2, MIN_RECORD_LENGTH, SIZE_MAGIC
from rocketq.errors import DiskFull, StoreError
from rocketq.store.mapped_file import OS_PAGE_SIZE, MappedFile
from rocketq.store.recovery import Recovery

if TYPE_CHECKING:
    from rocketq.store.message_store import MessageStore

log = logging.getLogger("rocketq.store.ha")

_RESERVE_AHEAD = 4 << 20


class ReplicaDiverged(StoreError):
    """The master sent bytes for an offset this slave does not end at."""


class ReplicaWriter:
    """Appends replicated commit-log bytes to a slave's store and dispatches them."""

    def __init__(self, store: MessageStore) -> None:
        self.store = store
        self.cl = store.commit_log
        self._recovery = Recovery(store.config, store.commit_log, store.consume_queues, store._create_cq,
                                  store.index, store.checkpoint)
        # recovery left every whole record dispatched: the partial tail (if any) was cut
        self.dispatched = self.cl.max_offset

    @property
    def max_offset(self) -> int:
        """What the slave reports to its master: one past the last byte it holds."""
        return self.cl.max_offset

    def append(self, phys: int, data: memoryview | bytes) -> None:
        """Write `data` (from the master's `phys`) at the end of the local commit log."""
        n = len(data)
        if not n:
            return
        with self.store.put.lock:
            end_here = self.cl.max_offset
            if phys != end_here and self.cl.mfq.last is not None:
                raise ReplicaDiverged(f"master sent offset {phys}, slave ends at {end_here}")
            mf = self._segment_for(phys)
            pos = phys - mf.file_from_offset
            if pos + n > mf.file_size:
                raise ReplicaDiverged(f"transfer at {phys} of {n} bytes crosses a segment end")
            if pos + n > mf.reserved and not mf.reserve(min(mf.file_size, pos + n + _RESERVE_AHEAD)):
                raise DiskFull(mf.path, n)
            mf.buf[pos : pos + n] = data
            mf.wrote_position = pos + n

    def _segment_for(self, phys: int) -> MappedFile:
        mfq = self.cl.mfq
        last = mfq.last
        size = self.cl.file_size
        if last is None:
            if phys % size:
                raise ReplicaDiverged(f"an empty slave can only start at a segment start, not {phys}")
            self.cl.start_offset_hint = phys
            self.dispatched = phys
            mf = mfq.create_file(phys)
        elif last.is_full():
            mf = mfq.create_file(last.file_end_offset)
        else:
            if not last.reserved:  # loaded: what lies below the recovered end has its blocks
                last.reserved = last.wrote_position - last.wrote_position % OS_PAGE_SIZE
            return last
        self.cl.forget_current()
        return mf

    def dispatch(self) -> set[tuple[str, int]]:
        """Build consume-queue entries and index keys of the whole records appended since the
        last call; returns the (topic, queue) pairs that got entries."""
        touched: set[tuple[str, int]] = set()
        with self.store.put.lock:
            walked, end = self._walk(self.dispatched, self.cl.max_offset)
            if not walked:
                return touched
            before = set(self.store.consume_queues)
            self._recovery.redispatch(walked, np.zeros(0, np.int64), touched)
            self.dispatched = end
            min_phy = self.cl.min_offset
            for key in touched - before:  # a slave that started mid-log: no entries below
                self.store.consume_queues[key].correct_min_offset(min_phy)
            ts = self.cl.store_timestamp_at(int(walked[-1][1][-1]) + walked[-1][0].file_from_offset) \
                if len(walked[-1][1]) else 0
            if ts > 0:
                self.cl.last_store_timestamp = ts
                self.store.put.last_dispatch_ts = ts
        return touched

    def _walk(self, start: int, stop: int) -> tuple[list[tuple[MappedFile, np.ndarray]], int]:
        """The whole records in [start, stop): [(segment, positions)], and where they end."""
        out: list[tuple[MappedFile, np.ndarray]] = []
        phys = start
        unpack = SIZE_MAGIC.unpack_from
        while phys < stop:
            mf = self.cl.mfq.find(phys)
            if mf is None:
                break
            buf = mf.buf
            pos = phys - mf.file_from_offset
            limit = min(mf.wrote_position, stop - mf.file_from_offset)
            found = array("q")
            add = found.append
            next_segment = False
            while pos + 8 <= limit:
                size, magic = unpack(buf, pos)
                if magic in (MAGIC_V1, MAGIC_V2):
                    if size < MIN_RECORD_LENGTH:
                        raise ReplicaDiverged(f"bad record size {size} at {mf.file_from_offset + pos}")
                    if pos + size > limit:
                        break  # the rest of this record comes with the next transfer
                    add(pos)
                    pos += size
                    continue
                if magic == BLANK_MAGIC:
                    next_segment = True
                    break
                raise ReplicaDiverged(f"no record at {mf.file_from_offset + pos}")
            if found:
                out.append((mf, np.frombuffer(found, dtype=np.int64).copy()))
            if next_segment:
                phys = mf.file_end_offset
                if mf.wrote_position < mf.file_size:
                    break  # the master's end marker arrived, the padding after it not yet
                continue
            phys = mf.file_from_offset + pos
            break
        return out, phys

    def truncate(self, offset: int) -> None:
        """Cut the local log back to the master's end (this slave went past it)."""
        with self.store.put.lock:
            log.warning("slave commit log ends at %d, past the master's %d: truncating", self.cl.max_offset,
                        offset)
            self._recovery.truncate_to(max(offset, self.cl.min_offset))
            self.cl.forget_current()
            self.dispatched = min(self.dispatched, self.cl.max_offset)
