"""IndexFile / IndexService: find messages by key or unique key (PROTOCOL.md §3.8).

File = 40-byte header, `max_hash_slot_num` int slots, `max_index_num` 20-byte entries; a slot
holds the number of the newest entry of its hash chain, entries link to the previous one, and
numbering starts at 1 (entry 0 is never used). keyHash = |javaHash("topic#key")|.

Index building is the costliest per-message work of a put, so puts only queue keys and the
service builds them in batches: Java hashes of all keys at once with numpy, and chain links
for a whole batch from one stable sort by slot.
"""

from __future__ import annotations

import errno
import logging
import os
import struct
import time
from collections.abc import Callable, Sequence
from typing import Final

import numpy as np
import numpy.typing as npt

from rocketq.errors import DiskFull
from rocketq.store.config import MessageStoreConfig
from rocketq.store.mapped_file import MappedFile

log = logging.getLogger("rocketq.store")

INDEX_HEADER_SIZE: Final = 40
HASH_SLOT_SIZE: Final = 4
INDEX_ENTRY_SIZE: Final = 20
INDEX_ENTRY_DTYPE: Final = np.dtype([("hash", ">i4"), ("phys", ">i8"), ("tdiff", ">i4"), ("prev", ">i4")])
_HEADER = struct.Struct(">qqqqii")
INDEX_RESERVE_WINDOW: Final = 1 << 20  # bytes of entry blocks reserved per step (52,428 keys)
_INT_MAX = 0x7FFFFFFF

I64 = npt.NDArray[np.int64]

_pow31 = np.ones(1, dtype=np.uint32)


def _powers(n: int) -> npt.NDArray[np.uint32]:
    """31**i mod 2**32 for i < n (uint32 arithmetic wraps exactly like Java's int)."""
    global _pow31
    if len(_pow31) < n:
        size = max(n, 2 * len(_pow31), 256)
        p = np.empty(size, dtype=np.uint32)
        p[0] = 1
        for i in range(1, size):  # runs a handful of times per process
            p[i] = (int(p[i - 1]) * 31) & 0xFFFFFFFF
        _pow31 = p
    return _pow31


def java_hashes(strings: Sequence[str]) -> npt.NDArray[np.int32]:
    """Java String.hashCode of many strings at once."""
    n = len(strings)
    if n == 0:
        return np.zeros(0, dtype=np.int32)
    joined = "".join(strings)
    if joined.isascii():
        codes = np.frombuffer(joined.encode("ascii"), dtype=np.uint8).astype(np.uint32)
        lens = np.fromiter(map(len, strings), dtype=np.int64, count=n)
    else:
        codes = np.frombuffer(joined.encode("utf-16-be"), dtype=">u2").astype(np.uint32)
        lens = np.fromiter((len(s.encode("utf-16-le")) // 2 for s in strings), dtype=np.int64, count=n)
    width = int(lens[0])
    if width and len(codes) == width * n and not (lens - width).any():
        # Every key as long as the first (topic#UNIQ_KEY, the usual case): one matrix product
        # with the powers of 31, in uint32 so it wraps exactly as Java's int does.
        rows = codes.reshape(n, width)
        return (rows @ _powers(width)[width - 1 :: -1]).astype(np.uint32).view(np.int32)
    ends = np.cumsum(lens)
    total = int(ends[-1])
    out = np.zeros(n, dtype=np.uint32)
    if total:
        pw = _powers(int(lens.max()))
        exp = np.repeat(ends - 1, lens) - np.arange(total)
        terms = codes * pw[exp]
        nonempty = lens > 0
        starts = (ends - lens)[nonempty]
        out[nonempty] = np.add.reduceat(terms, starts, dtype=np.uint32)
    return out.view(np.int32)


def key_hashes(keys: Sequence[str]) -> npt.NDArray[np.int64]:
    """RocketMQ's indexKeyHashMethod: |hash|, and 0 for Integer.MIN_VALUE."""
    h = java_hashes(keys).astype(np.int64)
    h = np.abs(h)
    h[h > _INT_MAX] = 0
    return h


def build_key(topic: str, key: str) -> str:
    return f"{topic}#{key}"


class IndexFile:
    """One index file, read and written through numpy views of its mapping."""

    def __init__(self, path: str, slot_num: int, index_num: int) -> None:
        self.slot_num = slot_num
        self.index_num = index_num
        self.path = path
        size = INDEX_HEADER_SIZE + slot_num * HASH_SLOT_SIZE + index_num * INDEX_ENTRY_SIZE
        self.mf = MappedFile(path, size, zero_fill=True)  # slots are written all over the table
        self._entries_at = INDEX_HEADER_SIZE + slot_num * HASH_SLOT_SIZE
        header: tuple[int, int, int, int, int, int] = _HEADER.unpack_from(self.mf.buf, 0)
        (self.begin_timestamp, self.end_timestamp, self.begin_phy_offset, self.end_phy_offset,
         self.hash_slot_count, self.index_count) = header
        if self.index_count <= 0:
            self.index_count = 1
        self.mf.wrote_position = self.mf.flushed_position = self._dirty_mark()
        if self.mf.fresh_from:  # loaded: slots hold data all over, entries up to the count
            data_end = self._entries_at + self.index_count * INDEX_ENTRY_SIZE
            self.mf.fresh_from = min(self.mf.file_size, data_end)
        self._slots: npt.NDArray[np.int32] | None = np.ndarray(
            (slot_num,), dtype=">i4", buffer=self.mf.buf, offset=INDEX_HEADER_SIZE
        )
        self._entries: npt.NDArray[np.void] | None = np.ndarray(
            (index_num,), dtype=INDEX_ENTRY_DTYPE, buffer=self.mf.buf,
            offset=INDEX_HEADER_SIZE + slot_num * HASH_SLOT_SIZE,
        )

    def __repr__(self) -> str:
        return f"IndexFile({os.path.basename(self.path)}, count={self.index_count})"

    def _dirty_mark(self) -> int:
        # index writes are scattered; the entry count stands in for "how much was written"
        return min(self.mf.file_size, INDEX_HEADER_SIZE + self.index_count * INDEX_ENTRY_SIZE)

    @property
    def is_write_full(self) -> bool:
        return self.index_count >= self.index_num

    def reserve_entries(self, count: int) -> None:
        """Disk blocks for the header, the whole slot table (slots are written all over it)
        and entries up to number `count` (exclusive), or DiskFull: a write to a sparse page
        the disk cannot back would kill the process."""
        end = self._entries_at + count * INDEX_ENTRY_SIZE
        mf = self.mf
        if end > mf.reserved and not mf.reserve(end + INDEX_RESERVE_WINDOW) and not mf.reserve(end):
            raise DiskFull(self.path, end - mf.reserved)

    def _write_header(self) -> None:
        _HEADER.pack_into(self.mf.buf, 0, self.begin_timestamp, self.end_timestamp, self.begin_phy_offset,
                          self.end_phy_offset, self.hash_slot_count, self.index_count)

    def put_batch(
        self, key_hash: npt.NDArray[np.int64], phys: npt.NDArray[np.int64], ts: npt.NDArray[np.int64]
    ) -> int:
        """Insert as many keys as fit; returns how many went in."""
        slots_v, entries_v = self._slots, self._entries
        assert slots_v is not None and entries_v is not None
        m = min(len(key_hash), self.index_num - self.index_count)
        if m <= 0:
            return 0
        key_hash, phys, ts = key_hash[:m], phys[:m], ts[:m]
        count = self.index_count
        self.reserve_entries(count + m)
        if count <= 1:
            self.begin_phy_offset = int(phys[0])
            self.begin_timestamp = int(ts[0])
        if self.begin_timestamp <= 0:
            tdiff = np.zeros(m, dtype=np.int64)
        else:
            tdiff = np.clip((ts - self.begin_timestamp) // 1000, 0, _INT_MAX)
        slot = key_hash % self.slot_num
        numbers = np.arange(count, count + m, dtype=np.int64)
        order = np.argsort(slot, kind="stable")
        s_sorted = slot[order]
        n_sorted = numbers[order]
        first = np.ones(m, dtype=bool)
        first[1:] = s_sorted[1:] != s_sorted[:-1]
        old = slots_v[s_sorted].astype(np.int64)
        old[(old <= 0) | (old > count)] = 0
        prev_sorted = np.empty(m, dtype=np.int64)
        prev_sorted[first] = old[first]
        later = np.flatnonzero(~first)
        prev_sorted[later] = n_sorted[later - 1]
        prev = np.empty(m, dtype=np.int64)
        prev[order] = prev_sorted
        block = np.empty(m, dtype=INDEX_ENTRY_DTYPE)
        block["hash"] = key_hash
        block["phys"] = phys
        block["tdiff"] = tdiff
        block["prev"] = prev
        entries_v[count : count + m] = block
        last = np.ones(m, dtype=bool)
        last[:-1] = s_sorted[:-1] != s_sorted[1:]
        slots_v[s_sorted[last]] = n_sorted[last]
        self.hash_slot_count += int(np.count_nonzero(first & (old == 0)))
        self.index_count = count + m
        self.end_phy_offset = int(phys[-1])
        self.end_timestamp = int(ts[-1])
        self._write_header()
        self.mf.wrote_position = self._dirty_mark()
        return m

    def is_time_matched(self, begin: int, end: int) -> bool:
        return (
            (begin < self.begin_timestamp and end > self.end_timestamp)
            or self.begin_timestamp <= begin <= self.end_timestamp
            or self.begin_timestamp <= end <= self.end_timestamp
        )

    def select_phy_offsets(self, key_hash: int, max_num: int, begin: int, end: int, out: list[int]) -> None:
        slots_v, entries_v = self._slots, self._entries
        if slots_v is None or entries_v is None:
            return
        slot_value = int(slots_v[key_hash % self.slot_num])
        count = self.index_count
        if slot_value <= 0 or slot_value > count or count <= 1:
            return
        nxt = slot_value
        while len(out) < max_num:
            h, phy, tdiff, prev = entries_v[nxt].item()
            if tdiff < 0:
                break
            time_read = self.begin_timestamp + tdiff * 1000
            if h == key_hash and begin <= time_read <= end:
                out.append(int(phy))
            if prev <= 0 or prev > count or prev == nxt or time_read < begin:
                break
            nxt = prev

    def flush(self) -> None:
        self.mf.flush()

    def close(self) -> bool:
        self._slots = self._entries = None
        return self.mf.close()

    def destroy(self) -> bool:
        self._slots = self._entries = None
        return self.mf.destroy()


class IndexService:
    """The index files of a store plus the queue of keys waiting to be indexed."""

    def __init__(self, config: MessageStoreConfig) -> None:
        self.config = config
        self.dir = config.index_dir
        self.files: list[IndexFile] = []
        # (topic, keys, phys, store_ts) of one message, (topic, [keys...], [phys...], ts) of a
        # batch or a one-topic run, ([topic...], [keys...], [phys...], ts) of a mixed run
        self.pending: list[tuple[str | Sequence[str], Sequence[object], object, int]] = []
        self.pending_keys = 0
        self._doomed: list[IndexFile] = []
        # Keys (hash, commit-log offset, store timestamp) that found no disk space: written
        # before anything newer once space returns, never dropped.
        self._stalled: tuple[I64, I64, I64] | None = None
        self.on_no_space: Callable[[DiskFull], None] | None = None  # the store stops taking puts

    # ---- lifecycle -----------------------------------------------------------------------
    def load(self) -> None:
        if not os.path.isdir(self.dir):
            return
        for name in sorted(os.listdir(self.dir)):
            if name.isdigit() and len(name) == 17:
                self.files.append(
                    IndexFile(os.path.join(self.dir, name), self.config.max_hash_slot_num,
                              self.config.max_index_num)
                )

    @property
    def last_indexed_phy(self) -> int:
        """Commit-log offset of the newest record in the index (-1: nothing indexed)."""
        for f in reversed(self.files):
            if f.index_count > 1:
                return f.end_phy_offset
        return -1

    def _new_file(self) -> IndexFile:
        os.makedirs(self.dir, exist_ok=True)
        now = time.time()
        while True:
            stamp = time.strftime("%Y%m%d%H%M%S", time.localtime(now)) + f"{int(now * 1000) % 1000:03d}"
            path = os.path.join(self.dir, stamp)
            if not os.path.exists(path) and (not self.files or stamp > os.path.basename(self.files[-1].path)):
                break
            now += 0.001
        try:
            f = IndexFile(path, self.config.max_hash_slot_num, self.config.max_index_num)
        except OSError as e:
            if e.errno == errno.ENOSPC:
                raise DiskFull(path, 0) from e
            raise
        self.files.append(f)
        log.info("create index file %s", path)
        return f

    def _writable(self) -> IndexFile:
        if self.files and not self.files[-1].is_write_full:
            return self.files[-1]
        return self._new_file()  # the full one is flushed by the next flush round, off the loop

    # ---- building ------------------------------------------------------------------------
    def add(self, topic: str, keys: Sequence[str], phys: int, store_ts: int) -> None:
        if keys:
            self.pending.append((topic, keys, phys, store_ts))
            self.pending_keys += len(keys)

    def add_batch(self, topic: str, keys: Sequence[tuple[str, ...]], phys: list[int], store_ts: int) -> None:
        self.pending.append((topic, keys, phys, store_ts))
        self.pending_keys += len(keys)

    def add_mixed(self, topics: Sequence[str], keys: Sequence[tuple[str, ...]], phys: list[int],
                  store_ts: int) -> None:
        """`add_batch` for a run of many topics (`topics[i]` is the topic of `keys[i]`): the
        same keys in the same order as one `add` per message, in one pending entry."""
        self.pending.append((topics, keys, phys, store_ts))
        self.pending_keys += len(keys)

    def drain(self) -> int:
        """Index every queued key; returns how many keys went in."""
        if not self.pending:
            if self._stalled is None:
                return 0
            return self._put_hashed(*self._stalled)
        pending, self.pending = self.pending, []
        self.pending_keys = 0
        strings: list[str] = []
        phys_parts: list[npt.NDArray[np.int64]] = []
        ts_parts: list[npt.NDArray[np.int64]] = []
        phys_l: list[int] = []  # one-message puts, converted to arrays in runs
        ts_l: list[int] = []

        def cut_run() -> None:
            if phys_l:
                phys_parts.append(np.asarray(phys_l, dtype=np.int64))
                ts_parts.append(np.asarray(ts_l, dtype=np.int64))
                phys_l.clear()
                ts_l.clear()

        for topic, keys, phys, ts in pending:
            if isinstance(phys, int):
                prefix = topic + "#"  # type: ignore[operator]
                strings += [prefix + k for k in keys]  # type: ignore[operator]
                n = len(keys)
                phys_l += [phys] * n
                ts_l += [ts] * n
            else:
                cut_run()
                counts = list(map(len, keys))  # type: ignore[arg-type]
                if isinstance(topic, str):
                    prefix = topic + "#"
                    strings += [prefix + k for ks in keys for k in ks]  # type: ignore[attr-defined]
                else:
                    strings += [t + "#" + k for t, ks in zip(topic, keys, strict=True)
                                for k in ks]  # type: ignore[attr-defined]
                p = np.asarray(phys, dtype=np.int64)
                phys_parts.append(p if sum(counts) == len(p) and max(counts) == 1 else np.repeat(p, counts))
                ts_parts.append(np.full(sum(counts), ts, dtype=np.int64))
        cut_run()
        return self.put_keys(strings, np.concatenate(phys_parts), np.concatenate(ts_parts))

    @property
    def stalled_keys(self) -> int:
        return len(self._stalled[0]) if self._stalled is not None else 0

    def put_keys(
        self, strings: Sequence[str], phys: Sequence[int] | npt.NDArray[np.int64],
        ts: Sequence[int] | npt.NDArray[np.int64],
    ) -> int:
        if not strings:
            return 0
        kh = key_hashes(strings)
        ph = np.asarray(phys, dtype=np.int64)
        tv = np.asarray(ts, dtype=np.int64)
        return self._put_hashed(kh, ph, tv)

    def _put_hashed(self, kh: I64, ph: I64, tv: I64) -> int:
        """Insert keys (after any that stalled before them); on a full disk the rest stall."""
        stalled = self._stalled
        if stalled is not None:
            self._stalled = None
            if stalled[0] is not kh:
                kh, ph, tv = (np.concatenate((a, b)) for a, b in zip(stalled, (kh, ph, tv), strict=True))
        done = 0
        try:
            while done < len(kh):
                done += self._writable().put_batch(kh[done:], ph[done:], tv[done:])
        except DiskFull as e:
            self._stalled = (kh[done:], ph[done:], tv[done:])
            if stalled is None:
                log.error("index: %s; %d keys wait for space", e, len(kh) - done)
            if self.on_no_space is not None:
                self.on_no_space(e)
            return done
        if stalled is not None:
            log.info("index: space again, %d waiting keys indexed", len(stalled[0]))
        return done

    # ---- query ---------------------------------------------------------------------------
    def query(self, topic: str, key: str, max_num: int, begin: int, end: int) -> tuple[list[int], int, int]:
        """(commit-log offsets newest first, last update timestamp, last update phy offset)."""
        self.drain()
        max_num = min(max_num, self.config.max_msgs_num_batch)
        out: list[int] = []
        last_ts = last_phy = 0
        if not self.files:
            return out, last_ts, last_phy
        last_ts, last_phy = self.files[-1].end_timestamp, self.files[-1].end_phy_offset
        kh = int(key_hashes([build_key(topic, key)])[0])
        for f in reversed(self.files):
            if f.is_time_matched(begin, end):
                f.select_phy_offsets(kh, max_num, begin, end, out)
            if f.begin_timestamp < begin or len(out) >= max_num:
                break
        return out, last_ts, last_phy

    # ---- retention / recovery ------------------------------------------------------------
    def delete_expired(self, min_phy: int) -> int:
        """Delete files (never the last) whose newest record left the commit log."""
        victims = [f for f in self.files[:-1] if f.end_phy_offset < min_phy]
        for f in victims:
            self._drop(f)
        return len(victims)

    def truncate_from(self, phys_end: int) -> None:
        """Delete the files that reference records at or beyond `phys_end` (a cut commit log)."""
        for f in [f for f in self.files if f.index_count > 1 and f.end_phy_offset >= phys_end]:
            log.warning("recover: index file %s points past the commit log end %d, rebuilding it",
                        f.path, phys_end)
            self._drop(f)

    def _drop(self, f: IndexFile) -> None:
        self.files.remove(f)
        if not f.destroy():
            self._doomed.append(f)

    def retry_deferred(self) -> None:
        self._doomed = [f for f in self._doomed if not f.close()]

    def flush(self) -> int:
        """Flush dirty files (worker thread); returns the end timestamp now durable."""
        files = list(self.files)
        for f in files:
            f.flush()
        return files[-1].end_timestamp if files else 0

    def close(self) -> None:
        for f in self.files:
            if not f.close():
                self._doomed.append(f)
        self.files = []
