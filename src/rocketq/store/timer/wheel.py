"""TimerWheel: one 32-byte Slot per precision tick, in a file mapped into memory.

The layout is RocketMQ's (TimerWheel.java / Slot.java): ``2 * slots_total`` slots, slot i at byte
``32 * i``, each ``timeMs / precisionMs`` (long), ``firstPos`` (long), ``lastPos`` (long), ``num``
(int), ``magic`` (int), big-endian. A slot is the head of a backward-linked list of timer-log
records (each record holds the previous ``lastPos`` of its slot), so the wheel's size depends on
the time span it covers, never on how many timers are pending. A slot whose stored tick is not
the tick asked for belongs to another turn of the wheel and reads as empty.

The wheel is written through the mapping: after a kill -9 the page cache still holds every
update, and the timer log (whose records carry what the wheel would say) settles the rest
(see ``TimerMessageStore.recover``).
"""

from __future__ import annotations

import mmap
import os
import struct
from dataclasses import dataclass

import numpy as np

from rocketq.errors import StoreError

__all__ = ["BLANK", "SLOT_SIZE", "Slot", "TimerWheel", "slot_index", "slot_tick", "wheel_length"]

SLOT_SIZE = 32
BLANK = -1
_SLOT = struct.Struct(">qqqii")
_DTYPE = np.dtype([("tick", ">i8"), ("first", ">i8"), ("last", ">i8"), ("num", ">i4"), ("magic", ">i4")])


@dataclass(frozen=True, slots=True)
class Slot:
    """One slot: ``time_ms`` is the slot's start (-1 for an empty slot)."""

    time_ms: int
    first_pos: int = BLANK
    last_pos: int = BLANK
    num: int = 0
    magic: int = 0

    @property
    def empty(self) -> bool:
        return self.time_ms < 0


EMPTY = Slot(-1)


def slot_tick(time_ms: int, precision_ms: int) -> int:
    """The tick (time divided by the precision, rounded down) that ``time_ms`` falls in."""
    return time_ms // precision_ms


def slot_index(time_ms: int, precision_ms: int, slots_total: int) -> int:
    """Where ``time_ms``'s slot sits in a wheel of ``2 * slots_total`` slots."""
    return time_ms // precision_ms % (slots_total * 2)


def wheel_length(slots_total: int) -> int:
    return slots_total * 2 * SLOT_SIZE


class TimerWheel:
    """The mapped wheel file. Not thread-safe: one owner (the timer service) reads and writes it."""

    def __init__(self, path: str, slots_total: int, precision_ms: int) -> None:
        if slots_total <= 0 or precision_ms <= 0:
            raise StoreError("the timer wheel needs a positive slot count and precision")
        self.path = path
        self.slots_total = slots_total
        self.precision_ms = precision_ms
        self._n = slots_total * 2
        length = wheel_length(slots_total)
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            size = os.fstat(fd).st_size
            if size not in (0, length):
                raise StoreError(f"timer wheel {path}: length {size} != expected {length}")
            if size == 0:
                os.ftruncate(fd, length)  # sparse: untouched slots cost no disk and no memory
            self._mm = mmap.mmap(fd, length)
        finally:
            os.close(fd)
        self._slots = np.frombuffer(self._mm, dtype=_DTYPE)

    def _index(self, time_ms: int) -> int:
        return time_ms // self.precision_ms % self._n

    def get_slot(self, time_ms: int) -> Slot:
        """The slot of ``time_ms`` on this turn of the wheel (EMPTY when it holds another turn)."""
        tick = time_ms // self.precision_ms
        stored, first, last, num, magic = _SLOT.unpack_from(self._mm, tick % self._n * SLOT_SIZE)
        if stored != tick:
            return EMPTY
        return Slot(tick * self.precision_ms, first, last, num, magic)

    def put_slot(self, time_ms: int, first_pos: int, last_pos: int, num: int, magic: int = 0) -> None:
        tick = time_ms // self.precision_ms
        _SLOT.pack_into(self._mm, tick % self._n * SLOT_SIZE, tick, first_pos, last_pos, num, magic)

    def pending_from(self, time_ms: int) -> int:
        """How many timers the slots from ``time_ms`` on (one whole turn) hold (Java's getAllNum)."""
        start = time_ms // self.precision_ms
        ticks = start + (np.arange(self._n, dtype=np.int64) - start % self._n) % self._n
        live = self._slots["tick"] == ticks
        return int(self._slots["num"][live].astype(np.int64).sum())

    def min_first_pos_from(self, time_ms: int) -> int:
        """The lowest timer-log position a slot from ``time_ms`` on still points at (-1: none)."""
        start = time_ms // self.precision_ms
        ticks = start + (np.arange(self._n, dtype=np.int64) - start % self._n) % self._n
        live = (self._slots["tick"] == ticks) & (self._slots["first"] >= 0)
        firsts = self._slots["first"][live]
        return int(firsts.min()) if firsts.size else -1

    def release_pages(self) -> None:
        """Drop the mapping's resident pages after a whole-wheel scan (the data stays in the
        file's page cache): only the slots in use count in the broker's memory afterwards."""
        if hasattr(mmap, "MADV_DONTNEED"):
            self._mm.madvise(mmap.MADV_DONTNEED)

    def flush(self) -> None:
        self._mm.flush()

    def close(self) -> None:
        del self._slots
        self._mm.close()
