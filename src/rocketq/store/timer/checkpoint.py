"""TimerCheckpoint: the timer's progress in one mapped page (``config/timercheck``).

Bytes 0..56 are RocketMQ's (TimerCheckpoint.java): lastReadTimeMs, lastTimerLogFlushPos,
lastTimerQueueOffset, masterTimerQueueOffset and the data version (stateVersion, timestamp,
counter), big-endian longs; GET_TIMER_CHECK_POINT answers them (``encode``). rocketq keeps more
after them, for exactly-once delivery across a kill -9:

* ``slot_done``: how many records of the slot at lastReadTimeMs are already delivered (a slot
  is delivered in chunks, in the order its records were written);
* ``intent_phy`` / ``intent_count``: set just before a chunk is appended to the commit log and
  cleared with ``slot_done`` just after. Found set at start, it means the process died in
  between: the records after ``intent_phy`` in the commit log are the part of the chunk that
  made it, and ``slot_done`` moves on by their number.
* ``precision_ms`` the wheel was built with (its slots mean nothing under another).

Every field is written through the mapping, so a kill -9 loses none; ``flush`` (msync) is for
power loss.
"""

from __future__ import annotations

import mmap
import os
import struct
import time

from rocketq.codec.timer import CheckpointValues

__all__ = ["CheckpointValues", "TimerCheckpoint"]

_PAGE = 4096
_JAVA = struct.Struct(">qqqqqqq")  # CheckpointValues' layout
_EXT_OFF = 64
_EXT = struct.Struct(">qqqqq")
_EXT_MAGIC = 0x524F434B45545154  # "ROCKETQT": the extension below was written


class TimerCheckpoint:
    """The mapped page; attribute writes go straight to the mapping (see the module doc)."""

    def __init__(self, path: str) -> None:
        self.path = path
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            self.existed = os.fstat(fd).st_size >= _JAVA.size
            if os.fstat(fd).st_size < _PAGE:
                os.ftruncate(fd, _PAGE)
            self._mm = mmap.mmap(fd, _PAGE)
        finally:
            os.close(fd)
        (self.last_read_time_ms, self.last_timer_log_flush_pos, self.last_timer_queue_offset,
         self.master_timer_queue_offset, self.state_version, self.timestamp,
         self.counter) = _JAVA.unpack_from(self._mm)
        magic, slot_done, intent_phy, intent_count, precision = _EXT.unpack_from(self._mm, _EXT_OFF)
        if magic == _EXT_MAGIC:
            self.slot_done, self.intent_phy, self.intent_count, self.precision_ms = (
                slot_done, intent_phy, intent_count, precision)
        else:
            self.slot_done, self.intent_phy, self.intent_count, self.precision_ms = 0, -1, 0, 0

    def values(self) -> CheckpointValues:
        return CheckpointValues(self.last_read_time_ms, self.last_timer_log_flush_pos,
                                self.last_timer_queue_offset, self.master_timer_queue_offset,
                                self.state_version, self.timestamp, self.counter)

    def save_read(self, read_time_ms: int, slot_done: int) -> None:
        """Delivery progress: the slot being read and how much of it is done; clears an intent."""
        self.last_read_time_ms = read_time_ms
        self.slot_done = slot_done
        self.intent_phy = -1
        self.intent_count = 0
        self._write()

    def save_intent(self, phy: int, count: int) -> None:
        self.intent_phy = phy
        self.intent_count = count
        self._write_ext()

    def save_enqueue(self, queue_offset: int, log_pos: int) -> None:
        """Enqueue progress: the next timer-topic queue offset and the log position after it."""
        self.last_timer_queue_offset = queue_offset
        self.last_timer_log_flush_pos = log_pos
        self.counter += 1
        self.timestamp = int(time.time() * 1000)
        self._write()

    def set_precision(self, precision_ms: int) -> None:
        self.precision_ms = precision_ms
        self._write_ext()

    def _write(self) -> None:
        _JAVA.pack_into(self._mm, 0, self.last_read_time_ms, self.last_timer_log_flush_pos,
                        self.last_timer_queue_offset, self.master_timer_queue_offset, self.state_version,
                        self.timestamp, self.counter)
        self._write_ext()

    def _write_ext(self) -> None:
        _EXT.pack_into(self._mm, _EXT_OFF, _EXT_MAGIC, self.slot_done, self.intent_phy, self.intent_count,
                       self.precision_ms)

    def flush(self) -> None:
        self._mm.flush()

    def close(self) -> None:
        self._mm.close()
