"""Fixed-size memory-mapped segment files and the ordered queue of them.

A segment is named by the 20-digit logical offset of its first byte, exactly as RocketMQ names
commit-log and consume-queue files. Appends are memory copies into the mapping; durability
comes from `fdatasync` on the file (which on Linux also writes back pages dirtied through a
shared mapping) and runs in worker threads because, unlike `mmap.flush`, it releases the GIL.

A segment whose memory is still exported (a memoryview handed to a pull answer, a numpy view)
cannot be unmapped: closing it is deferred and retried later, never an error.
"""

from __future__ import annotations

import bisect
import errno
import logging
import mmap
import os
import threading
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor

from rocketq.errors import CreateMappedFileFailed, DiskFull, StoreError

log = logging.getLogger("rocketq.store")

OS_PAGE_SIZE = 4096


def offset_to_file_name(offset: int) -> str:
    return f"{offset:020d}"


_unsupported_logged: set[int] = set()
_SOFT_MARGIN = 1 << 20  # free space a soft reservation keeps in hand
FREE_SPACE_MARGIN = 2 << 20  # free space below which a reservation counts as failed
_ZEROS = bytes(1 << 20)


def _allocate(fd: int, path: str, offset: int, length: int, fresh_from: int) -> bool:
    """Give [offset, offset + length) of `fd` disk blocks; False when the disk is full.

    Blocks are fallocated, except from `fresh_from` on (where a zero-filled file is known to
    hold nothing), where zeros are written. fallocate leaves "unwritten" extents that ext4
    splits at the first write fault of a page, and a split can need a block of its own: for
    sequential writers the splits merge away, but writes all over a file (the index's slot
    table) would grow its extent tree page by page. Either way the disk counts as full while
    FREE_SPACE_MARGIN is left, which is what keeps a write fault from finding no block at
    all (a SIGBUS). Where fallocate is not supported the free space is checked instead: at
    least the bytes asked for plus a margin."""
    end = offset + length
    try:
        if offset < fresh_from:
            os.posix_fallocate(fd, offset, min(end, fresh_from) - offset)
        pos = max(offset, fresh_from)
        while pos < end:
            pos += os.pwrite(fd, _ZEROS[: min(len(_ZEROS), end - pos)], pos)
    except OSError as e:
        if e.errno == errno.ENOSPC:
            return False
        if e.errno not in (errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS):
            raise
        st = os.fstatvfs(fd)
        if st.f_fsid not in _unsupported_logged:
            _unsupported_logged.add(st.f_fsid)
            log.warning("%s: the filesystem cannot reserve blocks (%s); free space is checked instead",
                        path, e.strerror)
        return st.f_bavail * st.f_frsize >= length + _SOFT_MARGIN
    # Blocks in hand are not quite enough: a write fault may still need a block of the
    # filesystem's own (an extent split, the journal) and faults with SIGBUS when even that
    # is gone. Call the disk full while some space is left.
    st = os.fstatvfs(fd)
    return st.f_bavail * st.f_frsize >= FREE_SPACE_MARGIN


class MappedFile:
    """One segment: an mmap of a fixed-size file plus its wrote / flushed positions."""

    __slots__ = (
        "_closed",
        "_destroy_requested",
        "_fd",
        "_flushing",
        "_lock",
        "_mm",
        "_reserve_lock",
        "buf",
        "file_from_offset",
        "file_size",
        "flushed_position",
        "fresh_from",
        "last_modified_ms",
        "no_space",
        "path",
        "reserved",
        "wrote_position",
    )

    def __init__(self, path: str, file_size: int, *, preallocate: int = 0, zero_fill: bool = False) -> None:
        """Map `path` (created sparse at `file_size` when missing or short); `preallocate`
        reserves that many bytes from the start right away (see `reserve`); `zero_fill`
        reserves by writing zeros rather than with fallocate (for files written at random)."""
        self.path = path
        self.file_size = file_size
        self.file_from_offset = int(os.path.basename(path))
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            actual = os.fstat(fd).st_size
            # reserve writes zeros from here on (see _allocate): all of a new zero-filled file;
            # an owner that knows where a loaded file's data ends may lower it
            self.fresh_from = 0 if zero_fill and actual == 0 else file_size
            if actual > file_size:
                raise StoreError(f"{path}: size {actual} exceeds the configured segment size {file_size}")
            if actual < file_size:
                if actual:
                    log.warning("%s is %d bytes, extending it to %d", path, actual, file_size)
                os.ftruncate(fd, file_size)
            self._mm = mmap.mmap(fd, file_size)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        self.buf = memoryview(self._mm)
        self.wrote_position = 0
        self.flushed_position = 0
        self.reserved = 0  # bytes from the start with disk blocks reserved (posix_fallocate)
        self.no_space = False  # the last reservation found no space
        self.last_modified_ms = int(os.stat(path).st_mtime * 1000)
        self._lock = threading.Lock()
        self._reserve_lock = threading.Lock()
        self._flushing = 0  # threads using the fd right now (close waits for them)
        self._closed = False
        self._destroy_requested = False
        if preallocate:
            self.reserve(min(file_size, preallocate))

    def __repr__(self) -> str:
        return f"MappedFile({self.path!r}, wrote={self.wrote_position}, flushed={self.flushed_position})"

    # ---- state ---------------------------------------------------------------------------
    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def file_end_offset(self) -> int:
        return self.file_from_offset + self.file_size

    @property
    def remaining(self) -> int:
        return self.file_size - self.wrote_position

    def is_full(self) -> bool:
        return self.wrote_position >= self.file_size

    def dirty_bytes(self) -> int:
        return self.wrote_position - self.flushed_position

    # ---- data ----------------------------------------------------------------------------
    def append(self, data: bytes | bytearray | memoryview) -> int:
        """Copy `data` at the wrote position; returns the position it was written at."""
        pos = self.wrote_position
        end = pos + len(data)
        self.buf[pos:end] = data
        self.wrote_position = end
        return pos

    def write_at(self, pos: int, data: bytes | bytearray | memoryview) -> None:
        self.buf[pos : pos + len(data)] = data

    def zero(self, start: int, end: int, zero_run_limit: int = 64 << 20) -> None:
        """Clear [start, end) where it holds data (recovery of a torn tail).

        Holes found with SEEK_DATA are skipped; the scan stops after `zero_run_limit` bytes in
        a row that are already zero, since whatever a crashed writer left lies close behind
        the valid end (this keeps a 1 GiB segment from being read end to end). Pages that
        are already zero are not dirtied.
        """
        chunk = 1 << 20
        zeros = bytes(chunk)
        pos, run = start, 0
        while pos < end and run < zero_run_limit:
            try:
                data_at = os.lseek(self._fd, pos, os.SEEK_DATA)
                hole_at = os.lseek(self._fd, data_at, os.SEEK_HOLE)
            except OSError as e:
                if e.errno == errno.ENXIO:  # only holes up to the end of the file
                    break
                data_at, hole_at = pos, end  # SEEK_DATA unsupported: look at every byte
            if data_at >= end:
                break
            run += data_at - pos
            pos = data_at
            stop = min(hole_at, end)
            while pos < stop and run < zero_run_limit:
                n = min(chunk, stop - pos)
                if self.buf[pos : pos + n].tobytes() != zeros[:n]:
                    self.buf[pos : pos + n] = zeros[:n]
                    run = 0
                else:
                    run += n
                pos += n
            pos = max(pos, stop)

    def reserve(self, end: int) -> bool:
        """Reserve disk blocks up to `end` (any thread); True when [0, end) is reserved.

        A page of a sparse file costs a filesystem allocation on its first write fault, and on
        a full disk that fault is a SIGBUS: writers never write a mapping past `reserved`.
        Only a window ahead of the writer is reserved, so disk use follows the data. Calls
        are serialised per file, so a reservation in progress never overlaps what a writer
        is writing (posix_fallocate may be emulated with writes on filesystems without
        fallocate). Whole pages: a write fault needs blocks for the whole page it touches
        (a filesystem with 1 KiB blocks has four per page)."""
        end = min(-(-end // OS_PAGE_SIZE) * OS_PAGE_SIZE, self.file_size)
        if end <= self.reserved:
            return True
        with self._reserve_lock:
            with self._lock:
                if self._closed or self._destroy_requested:
                    return False
                start = self.reserved
                if end <= start:
                    return True
                self._flushing += 1
            try:
                ok = _allocate(self._fd, self.path, start, end - start, self.fresh_from)
                if ok:
                    self.reserved = end
                self.no_space = not ok
            finally:
                with self._lock:
                    self._flushing -= 1
                    pending = self._destroy_requested
            if pending:
                self.close()
            return ok

    # ---- durability ----------------------------------------------------------------------
    def flush(self) -> int:
        """fdatasync when there is unflushed data; safe from any thread. Returns flushed pos."""
        with self._lock:
            if self._closed:
                return self.flushed_position
            target = self.wrote_position
            if target <= self.flushed_position:
                return self.flushed_position
            self._flushing += 1
        try:
            os.fdatasync(self._fd)
        finally:
            with self._lock:
                self._flushing -= 1
                if target > self.flushed_position:
                    self.flushed_position = target
                pending = self._destroy_requested
        if pending:
            self.close()
        return target

    def sync(self) -> None:
        """Unconditional fdatasync (after recovery rewrote bytes behind the positions)."""
        with self._lock:
            if self._closed:
                return
            self._flushing += 1
        try:
            os.fdatasync(self._fd)
        finally:
            with self._lock:
                self._flushing -= 1

    # ---- lifecycle -----------------------------------------------------------------------
    def close(self) -> bool:
        """Unmap and close; False (retry later) while a flush runs or memory is exported."""
        with self._lock:
            if self._closed:
                return True
            self._destroy_requested = True
            if self._flushing:
                return False
            try:
                self.buf.release()
                self._mm.close()
            except BufferError:
                return False
            os.close(self._fd)
            self._closed = True
            return True

    def destroy(self) -> bool:
        """Delete the file now (the mapping survives the unlink) and close when possible."""
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass
        return self.close()

    @property
    def mm(self) -> mmap.mmap:
        """The mapping itself (its find / rfind search without copying)."""
        return self._mm


class AllocateMappedFileService:
    """Creates the next segment in a worker thread so a roll-over does not block the caller."""

    def __init__(self) -> None:
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="AllocateMappedFileService")
        self._pending: dict[str, Future[MappedFile]] = {}
        self._lock = threading.Lock()

    def prefetch(self, path: str, file_size: int, preallocate: int) -> None:
        with self._lock:
            if path in self._pending or os.path.exists(path):
                return
            self._pending[path] = self._executor.submit(MappedFile, path, file_size, preallocate=preallocate)

    def take(self, path: str, file_size: int, preallocate: int) -> MappedFile:
        with self._lock:
            fut = self._pending.pop(path, None)
        if fut is not None:
            try:
                return fut.result()
            except Exception as e:  # fall through to a direct attempt, which reports the error
                log.warning("pre-allocation of %s failed: %s", path, e)
        return MappedFile(path, file_size, preallocate=preallocate)

    def reserve_ahead(self, mf: MappedFile, end: int) -> Future[bool] | None:
        """Reserve blocks of `mf` up to `end` in the worker thread (None: shut down)."""
        try:
            return self._executor.submit(mf.reserve, end)
        except RuntimeError:
            return None

    def shutdown(self) -> None:
        with self._lock:
            pending, self._pending = self._pending, {}
        for fut in pending.values():
            try:
                fut.result().close()
            except Exception:
                pass
        self._executor.shutdown(wait=True)


class MappedFileQueue:
    """The ordered segments of one directory (the commit log, or one consume queue)."""

    def __init__(
        self,
        store_path: str,
        mapped_file_size: int,
        allocator: AllocateMappedFileService | None = None,
        *,
        preallocate: int = 0,
    ) -> None:
        self.store_path = store_path
        self.mapped_file_size = mapped_file_size
        self.allocator = allocator
        self.preallocate = preallocate
        self.files: list[MappedFile] = []
        self._starts: list[int] = []
        self._doomed: list[MappedFile] = []
        self.flushed_where = 0
        self._flush_lock = threading.Lock()

    # ---- loading -------------------------------------------------------------------------
    def load(self) -> None:
        if not os.path.isdir(self.store_path):
            return
        names = sorted(n for n in os.listdir(self.store_path) if len(n) == 20 and n.isdigit())
        for name in names:
            mf = MappedFile(os.path.join(self.store_path, name), self.mapped_file_size)
            mf.wrote_position = mf.flushed_position = mf.file_size
            self.files.append(mf)
        self._reindex()

    def _reindex(self) -> None:
        self._starts = [f.file_from_offset for f in self.files]

    # ---- lookup --------------------------------------------------------------------------
    def __iter__(self) -> Iterator[MappedFile]:
        return iter(list(self.files))

    def __len__(self) -> int:
        return len(self.files)

    @property
    def first(self) -> MappedFile | None:
        return self.files[0] if self.files else None

    @property
    def last(self) -> MappedFile | None:
        return self.files[-1] if self.files else None

    def min_offset(self) -> int:
        return self.files[0].file_from_offset if self.files else 0

    def max_offset(self) -> int:
        """One past the last byte written."""
        if not self.files:
            return 0
        last = self.files[-1]
        return last.file_from_offset + last.wrote_position

    def find(self, offset: int) -> MappedFile | None:
        """The segment holding `offset`, or None."""
        i = bisect.bisect_right(self._starts, offset) - 1
        if i < 0:
            return None
        mf = self.files[i]
        return mf if offset < mf.file_from_offset + mf.file_size else None

    # ---- growth --------------------------------------------------------------------------
    def _path(self, offset: int) -> str:
        return os.path.join(self.store_path, offset_to_file_name(offset))

    def create_file(self, from_offset: int) -> MappedFile:
        """Map the segment starting at `from_offset` (inserted in order). Raises DiskFull (no
        room for the directory or file) or CreateMappedFileFailed."""
        path = self._path(from_offset)
        try:
            os.makedirs(self.store_path, exist_ok=True)
            if self.allocator is not None:  # its owner prefetches when the writer nears an end
                mf = self.allocator.take(path, self.mapped_file_size, self.preallocate)
            else:
                mf = MappedFile(path, self.mapped_file_size, preallocate=self.preallocate)
        except OSError as e:
            if e.errno == errno.ENOSPC:
                raise DiskFull(path, self.mapped_file_size) from e
            raise CreateMappedFileFailed(path, e.strerror or str(e)) from e
        i = bisect.bisect_left(self._starts, from_offset)
        self.files.insert(i, mf)
        self._starts.insert(i, from_offset)
        return mf

    def last_for_write(self, start_offset: int = 0) -> MappedFile:
        """The segment appends go to: the last one, or a new one once it is full."""
        last = self.files[-1] if self.files else None
        if last is not None and not last.is_full():
            return last
        if last is None:
            start = start_offset - start_offset % self.mapped_file_size
        else:
            start = last.file_from_offset + self.mapped_file_size
        return self.create_file(start)

    def file_for_offset(self, offset: int, *, create: bool) -> MappedFile | None:
        """The segment for byte `offset`, creating it (and only it) when asked."""
        mf = self.find(offset)
        if mf is None and create:
            mf = self.create_file(offset - offset % self.mapped_file_size)
        return mf

    # ---- shrinking -----------------------------------------------------------------------
    def _forget(self, mf: MappedFile) -> None:
        self.files.remove(mf)
        self._reindex()
        if not mf.destroy():
            self._doomed.append(mf)

    def truncate_dirty(self, offset: int) -> None:
        """Drop everything at or beyond `offset` (recovery)."""
        for mf in list(self.files):
            if mf.file_from_offset + mf.file_size <= offset:
                continue
            if offset >= mf.file_from_offset:
                pos = offset - mf.file_from_offset
                mf.wrote_position = mf.flushed_position = pos
            else:
                log.info("recover: delete dirty file %s", mf.path)
                self._forget(mf)

    def delete_first_files(self, count: int) -> list[MappedFile]:
        victims = self.files[:count]
        for mf in victims:
            log.info("delete file %s", mf.path)
            self._forget(mf)
        return victims

    def delete_file(self, mf: MappedFile) -> None:
        if mf in self.files:
            self._forget(mf)

    def retry_deferred(self) -> int:
        """Close segments whose unmap had to wait; returns how many are still waiting."""
        self._doomed = [mf for mf in self._doomed if not mf.close()]
        return len(self._doomed)

    @property
    def deferred_count(self) -> int:
        return len(self._doomed)

    # ---- durability ----------------------------------------------------------------------
    def flush(self, least_pages: int = 0) -> int:
        """fdatasync dirty segments (any thread); returns the new flushed offset."""
        files = list(self.files)
        if not files:
            return self.flushed_where
        last = files[-1]
        dirty = sum(mf.dirty_bytes() for mf in files if mf.file_end_offset > self.flushed_where)
        if least_pages > 0 and dirty < least_pages * OS_PAGE_SIZE:
            return self.flushed_where
        where = self.flushed_where
        for mf in files:
            if mf.file_end_offset <= self.flushed_where and mf is not last:
                continue
            if mf.dirty_bytes() > 0:
                mf.flush()
            where = mf.file_from_offset + mf.flushed_position
        with self._flush_lock:  # flushes may overlap (group commit): never move backwards
            self.flushed_where = max(self.flushed_where, where)
            return self.flushed_where

    def close(self) -> None:
        for mf in self.files:
            if not mf.close():
                self._doomed.append(mf)
        self.files = []
        self._starts = []

    def destroy(self) -> None:
        for mf in list(self.files):
            self._forget(mf)
        try:
            os.rmdir(self.store_path)
        except OSError:
            pass

