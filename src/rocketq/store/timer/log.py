"""TimerLog: the append-only file of timer records, RocketMQ's 52-byte unit (TimerLog.java).

A record: size (int, 52), prevPos (long: the slot's lastPos before this record), magic (int:
DEFAULT, ROLL, DELETE bits), currWriteTime (long), delayedTime (int: the slot time minus
currWriteTime), offsetPy (long) and sizePy (int) of the message in the commit log, the hash of
its real topic (int) and a reserved long, where rocketq writes the message's offset in the timer
topic's queue (Java writes 0): after a crash the tail of the log tells which queue entries are
already in the wheel, so none is enqueued twice. Segments have a fixed size and are named by
their 20-digit start offset; a record never straddles two (the rest of a segment is a blank
unit: size, 0, BLANK_MAGIC_CODE).

Records are written with ``pwrite`` and read with ``pread``, not mapped: the log holds one
record per pending timer and would otherwise count in the broker's resident memory.
"""

from __future__ import annotations

import contextlib
import os
import struct
from dataclasses import dataclass

from rocketq.errors import StoreError

__all__ = [
    "BLANK_MAGIC_CODE",
    "MAGIC_DEFAULT",
    "MAGIC_DELETE",
    "MAGIC_ROLL",
    "UNIT_SIZE",
    "TimerLog",
    "TimerRecord",
    "java_string_hash",
]

UNIT_SIZE = 52
MIN_BLANK_LEN = 4 + 8 + 4
# Java's `0xBBCCDDEE ^ 1880681586 + 8`: + binds first; the int is signed
BLANK_MAGIC_CODE = (0xBBCCDDEE ^ (1880681586 + 8)) - (1 << 32)
MAGIC_DEFAULT = 1
MAGIC_ROLL = 1 << 1
MAGIC_DELETE = 1 << 2
_UNIT = struct.Struct(">iqiqiqiiq")
_BLANK = struct.Struct(">iqi")


def java_string_hash(text: str) -> int:
    """``String.hashCode()`` over the UTF-16 code units (the real topic's hash in a record)."""
    units = text.encode("utf-16-be")
    h = 0
    for i in range(0, len(units), 2):
        h = (31 * h + (units[i] << 8 | units[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


@dataclass(frozen=True, slots=True)
class TimerRecord:
    """One unit of the log (Java's TimerRequest as stored)."""

    prev_pos: int
    magic: int
    curr_write_time: int
    delayed_time: int  # relative to curr_write_time, as stored
    offset_py: int
    size_py: int
    topic_hash: int = 0
    queue_offset: int = 0  # the reserved long: offset in the timer topic's queue

    @property
    def time_ms(self) -> int:
        """The slot time this record was filed under."""
        return self.curr_write_time + self.delayed_time

    @property
    def is_roll(self) -> bool:
        return bool(self.magic & MAGIC_ROLL)

    @property
    def is_delete(self) -> bool:
        return bool(self.magic & MAGIC_DELETE)

    def encode(self) -> bytes:
        return _UNIT.pack(UNIT_SIZE, self.prev_pos, self.magic, self.curr_write_time, self.delayed_time,
                          self.offset_py, self.size_py, self.topic_hash, self.queue_offset)

    @classmethod
    def decode(cls, data: bytes | memoryview, pos: int = 0) -> TimerRecord | None:
        """The record at ``pos`` of ``data``; None for anything but a whole, sane unit."""
        if len(data) - pos < UNIT_SIZE:
            return None
        size, prev, magic, cwt, delayed, off, sz, th, qoff = _UNIT.unpack_from(data, pos)
        if size != UNIT_SIZE or not magic & (MAGIC_DEFAULT | MAGIC_DELETE) or sz <= 0 or off < 0:
            return None
        return cls(prev, magic, cwt, delayed, off, sz, th, qoff)


class TimerLog:
    """Segments under ``directory``; ``write_pos`` is where the next record goes."""

    def __init__(self, directory: str, file_size: int) -> None:
        if file_size < UNIT_SIZE + MIN_BLANK_LEN:
            raise StoreError(f"mappedFileSizeTimerLog {file_size} is too small")
        self.directory = directory
        self.file_size = file_size
        os.makedirs(directory, exist_ok=True)
        self._fds: dict[int, int] = {}
        self.segments: list[int] = []
        for name in sorted(os.listdir(directory)):
            if len(name) == 20 and name.isdigit():
                self.segments.append(int(name))
        self.write_pos = self.segments[0] if self.segments else 0

    def _fd(self, start: int) -> int:
        fd = self._fds.get(start)
        if fd is None:
            path = os.path.join(self.directory, f"{start:020d}")
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
            if os.fstat(fd).st_size < self.file_size:
                os.ftruncate(fd, self.file_size)
            self._fds[start] = fd
            if start not in self.segments:
                self.segments.append(start)
                self.segments.sort()
        return fd

    @property
    def min_pos(self) -> int:
        return self.segments[0] if self.segments else 0

    def position_for_next(self) -> int:
        """Where a record appended now lands (after a blank that closes a full segment)."""
        within = self.write_pos % self.file_size
        if self.file_size - within < UNIT_SIZE + MIN_BLANK_LEN:
            return self.write_pos - within + self.file_size
        return self.write_pos

    def append(self, data: bytes) -> int:
        """Append records (a multiple of UNIT_SIZE) that ``position_for_next`` placed; returns the
        position of the first. The caller computed each record's position the same way."""
        pos = self.position_for_next()
        if pos != self.write_pos:  # close the full segment with a blank unit
            start = self.write_pos - self.write_pos % self.file_size
            within = self.write_pos - start
            os.pwrite(self._fd(start), _BLANK.pack(self.file_size - within, 0, BLANK_MAGIC_CODE), within)
            self.write_pos = pos
        start = pos - pos % self.file_size
        if pos - start + len(data) > self.file_size:
            raise StoreError("timer log records must not straddle a segment")
        os.pwrite(self._fd(start), data, pos - start)
        self.write_pos = pos + len(data)
        return pos

    def read(self, pos: int) -> TimerRecord | None:
        start = pos - pos % self.file_size
        if start not in self._fds and start not in self.segments:
            return None
        data = os.pread(self._fd(start), UNIT_SIZE, pos - start)
        return TimerRecord.decode(data)

    def scan(self, pos: int) -> list[tuple[int, TimerRecord]]:
        """Every whole record from ``pos`` to the end of what was written (recovery), skipping
        the blank that ends a segment; ``write_pos`` is left after the last."""
        out: list[tuple[int, TimerRecord]] = []
        pos = max(pos, self.min_pos)
        while True:
            start = pos - pos % self.file_size
            if start not in self.segments:
                break
            fd = self._fd(start)
            data = os.pread(fd, self.file_size - (pos - start), pos - start)
            at = 0
            blank = False
            while at + MIN_BLANK_LEN <= len(data):
                size, _, magic = _BLANK.unpack_from(data, at)
                if magic == BLANK_MAGIC_CODE and size == self.file_size - (pos - start) - at:
                    blank = True
                    break
                rec = TimerRecord.decode(data, at)
                if rec is None:
                    break
                out.append((pos + at, rec))
                at += UNIT_SIZE
            self.write_pos = pos + at
            if not blank:
                break
            pos = start + self.file_size
            self.write_pos = pos
        return out

    def delete_before(self, pos: int) -> int:
        """Remove whole segments that end at or before ``pos`` (never the one being written)."""
        removed = 0
        while len(self.segments) > 1 and self.segments[0] + self.file_size <= min(pos, self.write_pos):
            start = self.segments.pop(0)
            fd = self._fds.pop(start, None)
            if fd is not None:
                os.close(fd)
            os.unlink(os.path.join(self.directory, f"{start:020d}"))
            removed += 1
        return removed

    def flush(self) -> None:
        """fdatasync every segment (from a worker thread: a segment removed meanwhile is skipped)."""
        for fd in list(self._fds.values()):
            with contextlib.suppress(OSError):
                os.fdatasync(fd)

    def close(self) -> None:
        for fd in self._fds.values():
            os.close(fd)
        self._fds.clear()
