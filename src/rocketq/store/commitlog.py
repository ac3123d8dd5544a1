"""The commit log: every message of the broker appended to one sequence of segment files.

Records are encoded straight from the broker's values with precompiled structs, a whole batch
joined into one buffer and copied into the mapping in one write. A record never spans segments:
when it does not fit (with 8 bytes to spare) the segment is closed with the end marker
`[int remaining][BLANK_MAGIC]` and the record goes to the start of the next one.
"""

from __future__ import annotations

import logging
import os
import struct
import threading
from collections.abc import Iterable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from itertools import accumulate, chain, repeat
from operator import add, and_
from typing import Final

from rocketq.codec.crc import crc32
from rocketq.codec.message import encode_host
from rocketq.codec.record import (
    BLANK_MAGIC,
    MAGIC_V1,
    MAGIC_V2,
    MAX_TOPIC_LENGTH_V1,
    MIN_RECORD_LENGTH,
    SIZE_MAGIC,
    SYS_FLAG_AT,
    MessageSysFlag,
    store_timestamp_at,
)
from rocketq.codec.record import batch_head_struct as _batch_struct
from rocketq.codec.record import host_bits_struct as _mid_struct
from rocketq.codec.record import record_struct as _single_struct
from rocketq.errors import DiskFull, MessageTooLarge
from rocketq.store.config import MessageStoreConfig
from rocketq.store.mapped_file import (
    OS_PAGE_SIZE,
    AllocateMappedFileService,
    MappedFile,
    MappedFileQueue,
    offset_to_file_name,
)
from rocketq.store.model import MessageToStore, SingleEntry

log = logging.getLogger("rocketq.store")

END_FILE_MIN_BLANK_LENGTH: Final = 8
RESERVE_WINDOW: Final = 32 << 20  # disk blocks reserved ahead of the append position (at most)
MIN_RESERVE_WINDOW: Final = 1 << 20
_BLANK = SIZE_MAGIC  # the end marker: [int remaining][BLANK_MAGIC]
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_BORN_V6 = MessageSysFlag.BORNHOST_V6_FLAG
_STORE_V6 = MessageSysFlag.STOREHOSTADDRESS_V6_FLAG
_CRC = crc32
_HOST_BITS_CLEAR = ~(_BORN_V6 | _STORE_V6)


@dataclass(frozen=True, slots=True)
class EncodedBatch:
    """A batch as columns the commit log writes straight away. `prop_tails` are each message's
    PROPERTIESLENGTH (2 bytes) + PROPERTIES exactly as stored: a SEND_BATCH_MESSAGE body holds
    them in that form, so the broker slices them out instead of decoding and re-encoding."""

    topic: str
    queue_id: int
    flags: Sequence[int]
    bodies: Sequence[bytes | memoryview]
    prop_tails: Sequence[bytes | memoryview]
    tags_codes: Sequence[int]
    keys: Sequence[tuple[str, ...]]
    sys_flag: int = 0
    born_timestamp: int = 0
    born_host: tuple[str, int] = ("127.0.0.1", 0)
    reconsume_times: int = 0
    wait_store_msg_ok: bool = True


class CommitLog:
    """Append, read by physical offset, flush. Recovery lives in `recovery.py`."""

    def __init__(
        self,
        config: MessageStoreConfig,
        store_host: tuple[str, int],
        allocator: AllocateMappedFileService | None = None,
    ) -> None:
        self.config = config
        self.file_size = config.mapped_file_size_commit_log
        self.mfq = MappedFileQueue(config.commit_log_dir, self.file_size, allocator,
                                   preallocate=min(RESERVE_WINDOW, self.file_size))
        self.store_host_bytes = encode_host(*store_host)
        self._store_v6 = len(self.store_host_bytes) == 20
        self._topic_parts: dict[str, tuple[bytes, int]] = {}
        self.last_store_timestamp = 0  # of the newest record appended
        self.flushed_store_timestamp = 0  # of the newest record known to be on disk
        self.flush_count = 0
        self._flush_lock = threading.Lock()
        self.start_offset_hint = 0  # where the first segment starts when none exists (recovery)
        self._cur: MappedFile | None = None  # the segment appends go to (cached for the hot path)
        self._born_cache: dict[tuple[str, int], tuple[bytes, int, struct.Struct]] = {}
        self._reserving: Future[bool] | None = None  # the window reservation in the worker thread
        self._low = RESERVE_WINDOW // 4  # ask for the next window when less than this is left

    # ---- offsets -------------------------------------------------------------------------
    @property
    def min_offset(self) -> int:
        return self.mfq.min_offset()

    @property
    def max_offset(self) -> int:
        return self.mfq.max_offset()

    @property
    def flushed_offset(self) -> int:
        return self.mfq.flushed_where

    def topic_part(self, topic: str) -> tuple[bytes, int]:
        """(length prefix + topic bytes, magic) of a topic; cached, topics repeat."""
        tp = self._topic_parts.get(topic)
        if tp is None:
            raw = topic.encode()
            if len(raw) > MAX_TOPIC_LENGTH_V1:
                tp = (struct.pack(">h", len(raw)) + raw, MAGIC_V2)
            else:
                tp = (bytes((len(raw),)) + raw, MAGIC_V1)
            if len(self._topic_parts) > 100_000:
                self._topic_parts.clear()
            self._topic_parts[topic] = tp
        return tp

    # ---- append --------------------------------------------------------------------------
    def _segment_for(self, size: int) -> MappedFile:
        """The segment a record of `size` bytes goes to, closing the current one if needed."""
        if size + END_FILE_MIN_BLANK_LENGTH > self.file_size:
            raise MessageTooLarge(size, self.file_size - END_FILE_MIN_BLANK_LENGTH)
        last = self.mfq.last
        if last is None or last.is_full():
            self._window()  # how much the new segment reserves at once
        mf = self.mfq.last_for_write(self.start_offset_hint)
        if not mf.reserved:  # loaded: what lies below the recovered end was written, so has blocks
            mf.reserved = mf.wrote_position - mf.wrote_position % OS_PAGE_SIZE
        if size + END_FILE_MIN_BLANK_LENGTH > mf.remaining:
            blank = mf.remaining
            end = mf.wrote_position + _BLANK.size
            if end > mf.reserved and not mf.reserve(end):
                raise DiskFull(mf.path, _BLANK.size)
            mf.write_at(mf.wrote_position, _BLANK.pack(blank, BLANK_MAGIC))
            mf.wrote_position = mf.file_size
            self._window()
            mf = self.mfq.last_for_write()
        return mf

    def _born(self, host: tuple[str, int]) -> tuple[bytes, int, struct.Struct]:
        """(encoded host, host sysflag bits, record struct) per born host; hosts repeat."""
        hit = self._born_cache.get(host)
        if hit is None:
            raw = encode_host(*host)
            bits = (_BORN_V6 if len(raw) == 20 else 0) | (_STORE_V6 if self._store_v6 else 0)
            if len(self._born_cache) > 10_000:
                self._born_cache.clear()
            hit = self._born_cache[host] = (raw, bits, _single_struct(len(raw), len(self.store_host_bytes)))
        return hit

    def append_one(
        self, m: MessageToStore, props: bytes, queue_offset: int, store_ts: int
    ) -> tuple[int, int]:
        """Append one record; returns (physical offset, size). The hot path of every send:
        one struct pack, one join, one copy into the mapping."""
        tp, magic = self._topic_parts.get(m.topic) or self.topic_part(m.topic)
        born, bits, st = self._born(m.born_host)
        body = m.body
        size = st.size + len(body) + len(tp) + 2 + len(props)
        mf = self._cur
        if mf is None or size + END_FILE_MIN_BLANK_LENGTH > mf.file_size - mf.wrote_position:
            mf = self._cur = self._segment_for(size)
        pos = mf.wrote_position
        if pos + size + self._low > mf.reserved:
            self._reserve_ahead(mf, pos, size)
        phys = mf.file_from_offset + pos
        data = b"".join((
            st.pack(
                size, magic, _CRC(body) & 0x7FFFFFFF, m.queue_id, m.flag, queue_offset, phys,
                (m.sys_flag & _HOST_BITS_CLEAR) | bits, m.born_timestamp, born, store_ts,
                self.store_host_bytes, m.reconsume_times, m.prepared_transaction_offset, len(body),
            ),
            body,
            tp,
            _I16_PACK(len(props)),
            props,
        ))
        mf.buf[pos : pos + size] = data
        mf.wrote_position = pos + size
        self.last_store_timestamp = mf.last_modified_ms = store_ts
        return phys, size

    def append_run(
        self,
        entries: Sequence[SingleEntry],
        props: Sequence[bytes],
        queue_offsets: Sequence[int],
        store_ts: int,
        prepared: Sequence[int] | None = None,
    ) -> list[tuple[int, int, int]]:
        """Append records for a prefix of `entries` (each a message of its own, as `append_one`
        stores it) that fits the current segment, in one copy; returns (offset, size, queue
        offset) of each.

        Returns fewer than asked (possibly none) where the next record needs a new segment or
        space the disk may not have: the caller stores that one with `append_one`, which
        handles both, and continues with the rest. `prepared` gives each record's
        PREPAREDTRANSACTIONOFFSET (a committed transaction's half offset), 0 without it."""
        mf = self._cur
        if mf is None:
            return []
        start = pos = mf.wrote_position
        limit = mf.file_size - END_FILE_MIN_BLANK_LENGTH
        base = mf.file_from_offset
        topic_parts = self._topic_parts
        born_cache = self._born_cache
        store_host = self.store_host_bytes
        parts: list[bytes | memoryview] = []
        add = parts.extend
        placed: list[tuple[int, int, int]] = []
        place = placed.append
        for e, pb, qoff, prep in zip(entries, props, queue_offsets, prepared or repeat(0, len(entries)),
                                     strict=True):
            topic, queue_id, body, flag, _, _, _, sys_flag, born_ts, born_host, reconsume = e
            tp, magic = topic_parts.get(topic) or self.topic_part(topic)
            born, bits, st = born_cache.get(born_host) or self._born(born_host)
            size = st.size + len(body) + len(tp) + 2 + len(pb)
            if pos + size > limit:
                break
            add((st.pack(size, magic, _CRC(body) & 0x7FFFFFFF, queue_id, flag, qoff, base + pos,
                         (sys_flag & _HOST_BITS_CLEAR) | bits, born_ts, born, store_ts, store_host,
                         reconsume, prep, len(body)),
                 body, tp, _I16_PACK(len(pb)), pb))
            place((base + pos, size, qoff))
            pos += size
        if pos == start:
            return placed
        if pos + self._low > mf.reserved:
            try:
                self._reserve_ahead(mf, start, pos - start)
            except DiskFull:
                return []  # record by record, so the one that does not fit is the one refused
        mf.buf[start:pos] = b"".join(parts)
        mf.wrote_position = pos
        self.last_store_timestamp = mf.last_modified_ms = store_ts
        return placed

    def append_batch(self, b: EncodedBatch, queue_offset: int, store_ts: int
                     ) -> tuple[int, list[int], list[int]]:
        """Append every message of `b` in one write; returns (bytes written, offsets, sizes).

        Queue offsets are consecutive from `queue_offset`, except for prepared / rollback
        transaction records which carry 0 (they are not dispatched). The per-message work is
        all C-level iteration (map / zip / accumulate), the bytes are joined once."""
        tp, magic = self.topic_part(b.topic)
        born = encode_host(*b.born_host)
        sys_flag = b.sys_flag & ~(_BORN_V6 | _STORE_V6)
        if len(born) == 20:
            sys_flag |= _BORN_V6
        if self._store_v6:
            sys_flag |= _STORE_V6
        mid = _mid_struct(len(born), len(self.store_host_bytes)).pack(
            sys_flag, b.born_timestamp, born, store_ts, self.store_host_bytes, b.reconsume_times, 0
        )
        head = _batch_struct(len(mid))
        bodies, tails = b.bodies, b.prop_tails
        n = len(bodies)
        blens = list(map(len, bodies))
        sizes = list(map((head.size + len(tp)).__add__, map(add, blens, map(len, tails))))
        total = sum(sizes)
        mf = self._cur = self._segment_for(total)
        if mf.wrote_position + total + self._low > mf.reserved:
            self._reserve_ahead(mf, mf.wrote_position, total)
        phys = mf.file_from_offset + mf.wrote_position
        offsets = list(accumulate(sizes[:-1], initial=phys))
        dispatch = MessageSysFlag.transaction_value(sys_flag) not in (
            MessageSysFlag.TRANSACTION_PREPARED_TYPE,
            MessageSysFlag.TRANSACTION_ROLLBACK_TYPE,
        )
        qoffs: Iterable[int] = range(queue_offset, queue_offset + n) if dispatch else repeat(0, n)
        crcs = map(and_, map(_CRC, bodies), repeat(0x7FFFFFFF))
        heads = map(head.pack, sizes, repeat(magic), crcs, repeat(b.queue_id), b.flags, qoffs, offsets,
                    repeat(mid), blens)
        mf.append(b"".join(chain.from_iterable(zip(heads, bodies, repeat(tp), tails))))
        self.last_store_timestamp = mf.last_modified_ms = store_ts
        return total, offsets, sizes

    # ---- read ----------------------------------------------------------------------------
    def read(self, phys: int, size: int) -> memoryview | None:
        """`size` bytes at `phys` as a zero-copy view, None if not (or no longer) there."""
        mf = self.mfq.find(phys)
        if mf is None or mf.closed:
            return None
        pos = phys - mf.file_from_offset
        if pos < 0 or pos + size > mf.wrote_position:
            return None
        return mf.buf[pos : pos + size]

    def record_at(self, phys: int) -> memoryview | None:
        """The whole record starting at `phys`, or None if there is none there."""
        mf = self.mfq.find(phys)
        if mf is None or mf.closed:
            return None
        pos = phys - mf.file_from_offset
        if pos + 8 > mf.wrote_position:
            return None
        size, magic = SIZE_MAGIC.unpack_from(mf.buf, pos)
        if magic not in (MAGIC_V1, MAGIC_V2) or size < MIN_RECORD_LENGTH or pos + size > mf.wrote_position:
            return None
        return mf.buf[pos : pos + size]

    def store_timestamp_at(self, phys: int) -> int:
        """STORETIMESTAMP of the record at `phys`, -1 when unreadable."""
        mf = self.mfq.find(phys)
        if mf is None or mf.closed:
            return -1
        pos = phys - mf.file_from_offset
        if pos + SYS_FLAG_AT + 4 > mf.wrote_position:
            return -1
        (sys_flag,) = _I32.unpack_from(mf.buf, pos + SYS_FLAG_AT)
        at = pos + store_timestamp_at(sys_flag)
        if at + 8 > mf.wrote_position:
            return -1
        return int(_I64.unpack_from(mf.buf, at)[0])

    # ---- durability ----------------------------------------------------------------------
    def flush(self, least_pages: int = 0) -> int:
        """Make appended bytes durable (worker thread); returns the flushed offset."""
        ts = self.last_store_timestamp
        target = self.mfq.max_offset()
        before = self.mfq.flushed_where
        where = self.mfq.flush(least_pages)
        with self._flush_lock:  # flushes may overlap (group commit)
            if where != before:
                self.flush_count += 1
            if where >= target:
                self.flushed_store_timestamp = max(self.flushed_store_timestamp, ts)
        return where

    def _reserve_ahead(self, mf: MappedFile, pos: int, size: int) -> None:
        """Make sure [pos, pos + size) of `mf` has disk blocks before it is written, and keep a
        window reserved ahead of the writer in the worker thread. Raises DiskFull (nothing
        written) when the blocks this write needs cannot be had."""
        end = pos + size
        if end > mf.reserved and not mf.reserve(end):  # the window did not arrive (or no space)
            raise DiskFull(mf.path, size)
        pending = self._reserving
        if pending is not None and not pending.done():
            return  # one window at a time; a failed one is asked for again by a later write
        target = min(mf.file_size, end + self._window())
        if target <= mf.reserved:
            return
        allocator = self.mfq.allocator
        if allocator is None:
            mf.reserve(target)
            return
        self._reserving = allocator.reserve_ahead(mf, target)
        if target == mf.file_size:
            self.prefetch_next()  # the writer nears this segment's end: prepare the next one

    def _window(self) -> int:
        """How far ahead to reserve: RESERVE_WINDOW, but never more than an eighth of the free
        space, so on a small disk the reservations do not fill it by themselves (a new
        segment gets the same, see MappedFileQueue.preallocate)."""
        try:
            st = os.statvfs(self.mfq.store_path)
        except OSError:
            return RESERVE_WINDOW
        window = min(RESERVE_WINDOW, max(MIN_RESERVE_WINDOW, st.f_bavail * st.f_frsize // 8))
        self._low = window // 4
        self.mfq.preallocate = min(window, self.file_size)
        return window

    def prefetch_next(self) -> None:
        """Have the segment the next roll-over needs created in the background (after load)."""
        allocator = self.mfq.allocator
        if allocator is None:
            return
        last = self.mfq.last
        start = last.file_end_offset if last is not None else self.start_offset_hint - (
            self.start_offset_hint % self.file_size)
        allocator.prefetch(os.path.join(self.mfq.store_path, offset_to_file_name(start)), self.file_size,
                           self.mfq.preallocate)

    def forget_current(self) -> None:
        """Drop the cached append segment (after recovery or retention changed the files)."""
        self._cur = None

    def close(self) -> None:
        self._cur = None
        self.mfq.close()


_I16_PACK = struct.Struct(">h").pack
