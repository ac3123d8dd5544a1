"""TimerMessageStore: files timer messages into the wheel and delivers them when they are due.

A timer message reaches the store on ``rmq_sys_wheel_timer`` queue 0 with TIMER_OUT_MS (its
slot time), REAL_TOPIC and REAL_QID (the broker's send path put them there). Two steps, both
synchronous and driven by the broker's timer service (``broker/timer.py``):

* ``enqueue``: each new entry of that queue becomes one timer-log record, linked into the
  wheel slot of its time. A time beyond the roll window is filed at the window's end with the
  ROLL bit and goes round again; a time whose slot was already read is filed in the slot being
  read, so it goes out with it. A recall (TIMER_DEL_UNIQKEY) is a record with the DELETE bit in
  the slot of the message it cancels.
* ``dequeue``: while the slot at the read time is over (its end has passed), its records are
  delivered in the order they were written, in chunks: a normal one is stored again on its real
  topic and queue (REAL_TOPIC / REAL_QID removed, TIMER_ENQUEUE_MS / TIMER_DEQUEUE_MS added, as
  Java's ``convert``), a rolled one back on the timer topic, and one whose key a DELETE record of
  the slot names is dropped. The read time then moves to the next slot.

Exactly once across a kill -9 (see ``checkpoint.py``): the log's records carry their timer-queue
offset, so ``recover`` finds the entries already filed; a chunk's commit-log append is bracketed
by an intent in the checkpoint, so ``recover`` counts how much of an interrupted chunk was stored.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from rocketq.codec.message import MessageExt, decode_message, encode_properties, tags_code
from rocketq.codec.properties import MessageConst
from rocketq.errors import ProtocolError, StoreError
from rocketq.store.config import MessageStoreConfig
from rocketq.store.message_store import MessageStore
from rocketq.store.model import PutMessageStatus, SingleEntry
from rocketq.store.timer.checkpoint import TimerCheckpoint
from rocketq.store.timer.log import (
    MAGIC_DEFAULT,
    MAGIC_DELETE,
    MAGIC_ROLL,
    TimerLog,
    TimerRecord,
    java_string_hash,
)
from rocketq.store.timer.metrics import TimerMetrics
from rocketq.store.timer.wheel import TimerWheel

__all__ = ["TIMER_TOPIC", "TIMER_WHEEL_TTL_DAY", "TimerMessageStore", "TimerProgress", "delete_key"]

log = logging.getLogger("rocketq.store.timer")

TIMER_TOPIC = "rmq_sys_wheel_timer"
TIMER_WHEEL_TTL_DAY = 7
DAY_SECS = 24 * 3600
TIMER_BLANK_SLOTS = 60
_P = MessageConst
# A put refused for what the message is (not for the broker's state) is never retried (Java's
# PUT_NO_RETRY): it would be refused again.
_NO_RETRY = frozenset({PutMessageStatus.MESSAGE_ILLEGAL, PutMessageStatus.PROPERTIES_SIZE_EXCEEDED})


def delete_key(real_topic: str, uniq_key: str) -> str:
    """TimerMessageStore.buildDeleteKey: what a recall's TIMER_DEL_UNIQKEY holds."""
    return f"{real_topic}+{uniq_key}"


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass(frozen=True, slots=True)
class TimerProgress:
    """Where the timer stands (metrics, admin)."""

    read_time_ms: int  # the slot being delivered
    enqueue_offset: int  # next timer-topic queue offset to file
    timer_queue_max_offset: int
    pending: int  # timers filed and not yet delivered (Java's getAllNum)
    precision_ms: int

    @property
    def enqueue_lag(self) -> int:
        return max(0, self.timer_queue_max_offset - self.enqueue_offset)

    def dequeue_lag_ms(self, now_ms: int) -> int:
        """How far delivery is behind the clock (0 while it keeps up: a slot is due at its end)."""
        return max(0, now_ms - self.read_time_ms - self.precision_ms)


class TimerMessageStore:
    def __init__(self, store: MessageStore, config: MessageStoreConfig, root_dir: str | None = None) -> None:
        root = root_dir or config.store_path_root_dir
        self.store = store
        self.precision_ms = config.timer_precision_ms
        self.slots_total = TIMER_WHEEL_TTL_DAY * DAY_SECS
        roll = config.timer_roll_window_slot
        self.roll_window_slots = roll if 2 <= roll <= self.slots_total - TIMER_BLANK_SLOTS else (
            self.slots_total - TIMER_BLANK_SLOTS)
        self.wheel = TimerWheel(f"{root}/timerwheel", self.slots_total, self.precision_ms)
        self.log = TimerLog(f"{root}/timerlog", config.mapped_file_size_timer_log)
        self.checkpoint = TimerCheckpoint(f"{root}/config/timercheck")
        self.metrics = TimerMetrics(f"{root}/config/timermetrics")
        self.read_time_ms = 0
        self.slot_done = 0
        self.enqueue_offset = 0
        self.pending = 0
        self.delivered = 0
        self.dropped = 0
        self._slot_cache: tuple[int, int, np.ndarray] | None = None  # (time, lastPos, positions)
        self._deletes: set[str] = set()
        # Occupied slots by wheel index: finding the next slot with work costs one scan of a
        # bool array, not a walk through empty slots.
        self._occupied = np.zeros(self.slots_total * 2, dtype=np.bool_)
        self._files_lock = threading.Lock()
        self._closed = False

    # -- lifecycle -----------------------------------------------------------------------------

    def load(self, now_ms: int | None = None) -> None:
        """Open the files and settle what a crash left half done (synchronous; after the
        message store has recovered, since it reads the commit log)."""
        now = _now_ms() if now_ms is None else now_ms
        cp = self.checkpoint
        if cp.precision_ms and cp.precision_ms != self.precision_ms:
            raise StoreError(f"the timer wheel was built with timerPrecisionMs={cp.precision_ms}, not "
                             f"{self.precision_ms}: keep the old value (or remove timerwheel, timerlog and "
                             "config/timercheck of an empty timer)")
        cp.set_precision(self.precision_ms)
        self.metrics.load()
        self.enqueue_offset = cp.last_timer_queue_offset
        # Records written after the last enqueue checkpoint: link any the wheel missed and
        # resume after the last queue offset they cover.
        for pos, rec in self.log.scan(cp.last_timer_log_flush_pos):
            self._link(pos, rec, force=False)
            self.enqueue_offset = max(self.enqueue_offset, rec.queue_offset + 1)
        if self.log.write_pos == 0 and self.log.segments:
            self.log.write_pos = self.log.min_pos
        cq_min = self.store.get_min_offset_in_queue(TIMER_TOPIC, 0)
        self.enqueue_offset = max(self.enqueue_offset, cq_min)
        if cp.existed and cp.last_read_time_ms > 0:
            self.read_time_ms = cp.last_read_time_ms
            self.slot_done = cp.slot_done
            if cp.intent_phy >= 0:
                stored = self._count_records_from(cp.intent_phy)
                log.warning("timer: the last delivery chunk was interrupted; %d of %d are stored",
                            stored, cp.intent_count)
                self.slot_done += min(stored, cp.intent_count)
        else:
            self.read_time_ms = self._floor(now)
            self.slot_done = 0
        cp.save_read(self.read_time_ms, self.slot_done)
        cp.save_enqueue(self.enqueue_offset, self.log.write_pos)
        self._rebuild_occupied()
        self.pending = max(0, self.wheel.pending_from(self.read_time_ms) - self.slot_done)
        self.wheel.release_pages()
        log.info("timer store loaded: read time %d, enqueue offset %d, %d pending", self.read_time_ms,
                 self.enqueue_offset, self.pending)

    def _rebuild_occupied(self) -> None:
        slots = self.wheel._slots
        n = self.slots_total * 2
        start = self.read_time_ms // self.precision_ms
        ticks = start + (np.arange(n, dtype=np.int64) - start % n) % n
        self._occupied[:] = (slots["tick"] == ticks) & (slots["last"] >= 0)

    def _count_records_from(self, phy: int) -> int:
        cl = self.store.commit_log
        end = cl.max_offset
        count = 0
        while phy < end:
            rec = cl.record_at(phy)
            if rec is None:  # the blank that ends a commit-log file
                phy = phy - phy % cl.file_size + cl.file_size
                continue
            count += 1
            phy += len(rec)
        return count

    def flush(self) -> None:
        """Durable against power loss too (blocking: a worker thread on a live broker)."""
        with self._files_lock:
            if self._closed:
                return
            self.log.flush()
            self.wheel.flush()
            self.checkpoint.flush()

    def close(self) -> None:
        with self._files_lock:  # a flush still running in a worker thread finishes first
            if self._closed:
                return
            self._closed = True
            self.metrics.persist()
            self.checkpoint.flush()
            self.wheel.close()
            self.log.close()
            self.checkpoint.close()

    # -- arithmetic ----------------------------------------------------------------------------

    def _floor(self, time_ms: int) -> int:
        return time_ms // self.precision_ms * self.precision_ms

    def is_due(self, now_ms: int) -> bool:
        """Whether the slot at the read time is over (Java: currReadTimeMs < currWriteTimeMs)."""
        return self.read_time_ms < self._floor(now_ms)

    def next_due_ms(self, now_ms: int) -> int | None:
        """When the next slot with something in it is over (None: nothing is filed)."""
        n = self.slots_total * 2
        start = self.read_time_ms // self.precision_ms % n
        ahead = np.flatnonzero(self._occupied[start:])
        if ahead.size:
            offset = int(ahead[0])
        else:
            behind = np.flatnonzero(self._occupied[:start])
            if not behind.size:
                return None
            offset = n - start + int(behind[0])
        return self.read_time_ms + (offset + 1) * self.precision_ms

    # -- enqueue -------------------------------------------------------------------------------

    def enqueue(self, max_count: int = 256, now_ms: int | None = None) -> int:
        """File up to ``max_count`` new entries of the timer topic; returns how many."""
        cq = self.store.consume_queues.get((TIMER_TOPIC, 0))
        if cq is None or self.enqueue_offset >= cq.max_offset:
            return 0
        if self.enqueue_offset < cq.min_offset:
            log.warning("timer: queue offset %d is below the queue's minimum %d",
                        self.enqueue_offset, cq.min_offset)
            self.enqueue_offset = cq.min_offset
        now = _now_ms() if now_ms is None else now_ms
        write_time = self._floor(now)
        done = 0
        offset = self.enqueue_offset
        end = min(cq.max_offset, offset + max_count)
        while offset < end:
            entry = cq.entry(offset)
            msg = self._read(entry[0]) if entry is not None else None
            if msg is not None:
                self._file(msg, entry[0], entry[1], offset, write_time)  # type: ignore[index]
            else:
                log.warning("timer: the entry %d of %s cannot be read; skipped", offset, TIMER_TOPIC)
            offset += 1
            done += 1
        self.enqueue_offset = offset
        self.checkpoint.save_enqueue(offset, self.log.write_pos)
        return done

    def _read(self, phy: int) -> MessageExt | None:
        raw = self.store.look_message_by_offset(phy)
        if raw is None:
            return None
        try:
            return decode_message(raw)[0]
        except ProtocolError:
            return None

    def _file(self, msg: MessageExt, phy: int, size: int, queue_offset: int, write_time: int) -> None:
        props = msg.properties
        try:
            delayed = int(props.get(_P.PROPERTY_TIMER_OUT_MS) or "")
        except ValueError:
            log.warning("timer: message %s has no TIMER_OUT_MS; delivered now", msg.msg_id)
            delayed = write_time
        magic = MAGIC_DEFAULT
        if delayed - write_time >= self.roll_window_slots * self.precision_ms:
            magic |= MAGIC_ROLL
            if delayed - write_time - self.roll_window_slots * self.precision_ms < (
                    self.roll_window_slots // 3 * self.precision_ms):
                delayed = write_time + self.roll_window_slots // 2 * self.precision_ms
            else:
                delayed = write_time + self.roll_window_slots * self.precision_ms
        is_delete = _P.PROPERTY_TIMER_DEL_UNIQKEY in props
        if is_delete:
            magic |= MAGIC_DELETE
        slot_time = max(self._floor(delayed), self.read_time_ms)  # a slot already read: the one being read
        real_topic = props.get(_P.PROPERTY_REAL_TOPIC) or ""
        slot = self.wheel.get_slot(slot_time)
        pos = self.log.position_for_next()
        rec = TimerRecord(slot.last_pos, magic, write_time, slot_time - write_time, phy, size,
                          java_string_hash(real_topic), queue_offset)
        self.log.append(rec.encode())
        self._link(pos, rec, force=True)
        if _P.PROPERTY_TIMER_ROLL_TIMES not in props:  # counted once, when it first comes in
            self.metrics.add(real_topic, -1 if is_delete else 1)

    def _link(self, pos: int, rec: TimerRecord, *, force: bool) -> None:
        """Make ``rec`` (at ``pos``) the last of its slot; recovery (``force=False``) leaves a
        slot that already reaches it alone."""
        time_ms = rec.time_ms
        slot = self.wheel.get_slot(time_ms)
        if not force and not slot.empty and slot.last_pos >= pos:
            return
        first = pos if slot.empty or slot.first_pos < 0 else slot.first_pos
        num = (0 if slot.empty else slot.num) + (-1 if rec.is_delete else 1)
        self.wheel.put_slot(time_ms, first, pos, num, 0 if slot.empty else slot.magic)
        self._occupied[time_ms // self.precision_ms % (self.slots_total * 2)] = True
        if not rec.is_delete and time_ms >= self.read_time_ms:
            self.pending += 1

    # -- dequeue -------------------------------------------------------------------------------

    def dequeue(self, max_count: int = 256, now_ms: int | None = None) -> int:
        """Deliver up to ``max_count`` records of due slots; returns how many were handled
        (0: nothing is due). Stops early, to be called again, when a put must be retried."""
        now = _now_ms() if now_ms is None else now_ms
        handled = 0
        skipped = 0
        while handled < max_count and self.is_due(now):
            positions = self._slot_positions(self.read_time_ms)
            if self.slot_done >= len(positions):
                self._next_slot()
                skipped += 1
                if skipped >= 4096:  # a long stretch of empty slots: give the loop a turn
                    break
                continue
            chunk = positions[self.slot_done:self.slot_done + max_count - handled]
            ok = self._deliver_chunk(chunk)
            handled += ok
            if ok < len(chunk):
                break
        return handled

    def follow_read_time(self, time_ms: int) -> None:
        """Move the read time forward to ``time_ms`` without delivering (a slave following its
        master's progress, Java's syncLastReadTimeMs); the slots passed count as delivered."""
        target = self._floor(time_ms)
        if target <= self.read_time_ms:
            return
        self.read_time_ms = target
        self.slot_done = 0
        self._slot_cache = None
        self._deletes = set()
        self._rebuild_occupied()
        self.pending = max(0, self.wheel.pending_from(self.read_time_ms))
        self.checkpoint.save_read(self.read_time_ms, 0)

    def _next_slot(self) -> None:
        self._occupied[self.read_time_ms // self.precision_ms % (self.slots_total * 2)] = False
        self.read_time_ms += self.precision_ms
        self.slot_done = 0
        self._slot_cache = None
        self._deletes = set()
        self.checkpoint.save_read(self.read_time_ms, 0)

    def _slot_positions(self, time_ms: int) -> np.ndarray:
        """The slot's record positions in the order they were written (and its delete keys)."""
        slot = self.wheel.get_slot(time_ms)
        cached = self._slot_cache
        if cached is not None and cached[0] == time_ms and cached[1] == slot.last_pos:
            return cached[2]
        found: list[int] = []
        deletes: set[str] = set()
        pos = slot.last_pos
        stop = slot.first_pos
        while pos >= 0:
            rec = self.log.read(pos)
            if rec is None or rec.time_ms != time_ms:
                log.error("timer: the record at %d of slot %d is unreadable; the slot ends there",
                          pos, time_ms)
                break
            found.append(pos)
            if rec.is_delete and not rec.is_roll:
                msg = self._read(rec.offset_py)
                key = msg.properties.get(_P.PROPERTY_TIMER_DEL_UNIQKEY) if msg is not None else None
                if key:
                    deletes.add(key)
            if pos == stop:
                break
            pos = rec.prev_pos
        positions = np.array(found[::-1], dtype=np.int64)
        self._slot_cache = (time_ms, slot.last_pos, positions)
        self._deletes = deletes
        return positions

    def _deliver_chunk(self, chunk: np.ndarray) -> int:
        """Store a chunk's messages; returns how many records are done (all, unless a put must
        be retried)."""
        entries: list[SingleEntry] = []
        owner: list[int] = []  # entry i was made from record owner[i] of the chunk
        kinds: list[tuple[str, str]] = []  # per record: (what became of it, real topic)
        now = _now_ms()
        for k, pos in enumerate(chunk.tolist()):
            rec = self.log.read(pos)
            msg = self._read(rec.offset_py) if rec is not None else None
            if rec is None or msg is None:
                log.warning("timer: the record at %d (or its message) is unreadable; skipped", pos)
                kinds.append(("lost", ""))
                continue
            entry, topic = self._convert(msg, rec, now)
            if entry is not None:
                entries.append(entry)
                owner.append(k)
            kind = ("roll" if rec.is_roll else "delete" if rec.is_delete
                    else "delivered" if entry else "dropped")
            kinds.append((kind, topic))
        cp = self.checkpoint
        stored = len(chunk)
        if entries:
            cp.save_intent(self.store.commit_log.max_offset, len(entries))
            results = self.store.append_many(entries)
            for i, r in enumerate(results):
                if type(r) is not tuple and r not in _NO_RETRY:
                    stored = owner[i]
                    log.warning("timer: a delivery was refused (%s); retried later", r)
                    break
        self.slot_done += stored
        cp.save_read(self.read_time_ms, self.slot_done)
        for kind, topic in kinds[:stored]:
            if kind == "delete":
                continue
            self.pending -= 1
            if kind == "delivered":
                self.delivered += 1
                self.metrics.add(topic, -1)
            elif kind == "dropped":
                self.dropped += 1
        return stored

    def _convert(self, msg: MessageExt, rec: TimerRecord, now: int) -> tuple[SingleEntry | None, str]:
        """What to store for a record: its message on the real topic, the timer topic again
        (rolled), or nothing (a recall, or a message a recall of this slot names)."""
        props = dict(msg.properties)
        real_topic = props.get(_P.PROPERTY_REAL_TOPIC) or ""
        uniq = props.get(_P.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX) or ""
        if rec.is_roll:
            props[_P.PROPERTY_TIMER_ROLL_TIMES] = str(int(props.get(_P.PROPERTY_TIMER_ROLL_TIMES) or 0) + 1)
            topic, queue_id = msg.topic, msg.queue_id
        elif rec.is_delete or delete_key(real_topic, uniq) in self._deletes:
            return None, real_topic
        else:
            try:
                queue_id = int(props.pop(_P.PROPERTY_REAL_QUEUE_ID, "0"))
            except ValueError:
                queue_id = 0
            topic = props.pop(_P.PROPERTY_REAL_TOPIC, "") or msg.topic
        props[_P.PROPERTY_TIMER_ENQUEUE_MS] = str(rec.curr_write_time)
        props[_P.PROPERTY_TIMER_DEQUEUE_MS] = str(now)
        keys = props.get(_P.PROPERTY_KEYS)
        index_keys = tuple(k for k in (uniq, *(keys.split(" ") if keys else ())) if k)
        entry = SingleEntry(topic, queue_id, msg.body, msg.flag, encode_properties(props),
                            tags_code(props.get(_P.PROPERTY_TAGS)), index_keys, msg.sys_flag,
                            msg.born_timestamp, msg.born_host, msg.reconsume_times)
        return entry, real_topic

    # -- views ---------------------------------------------------------------------------------

    def progress(self) -> TimerProgress:
        return TimerProgress(self.read_time_ms, self.enqueue_offset,
                             self.store.get_max_offset_in_queue(TIMER_TOPIC, 0), max(0, self.pending),
                             self.precision_ms)

    def due_behind(self, now_ms: int) -> int:
        """Timers in slots that are over but not delivered yet (Java's getDequeueBehindMessages)."""
        n = self.slots_total * 2
        start = self.read_time_ms // self.precision_ms
        stop = self._floor(now_ms) // self.precision_ms
        if stop <= start:
            return 0
        ticks = np.arange(start, min(stop, start + n), dtype=np.int64)
        slots = self.wheel._slots[ticks % n]
        behind = int(slots["num"][slots["tick"] == ticks].astype(np.int64).sum())
        return max(0, behind - self.slot_done)

    def enqueue_behind_ms(self, now_ms: int) -> int:
        """Age of the oldest timer-topic entry not filed yet (Java's getEnqueueBehindMillis)."""
        if self.enqueue_offset >= self.store.get_max_offset_in_queue(TIMER_TOPIC, 0):
            return 0
        stored = self.store.get_message_store_timestamp(TIMER_TOPIC, 0, self.enqueue_offset)
        return max(0, now_ms - stored) if stored > 0 else 0

    def records_of_slot(self, time_ms: int) -> Iterator[TimerRecord]:
        """The records filed under ``time_ms``'s slot, oldest first (tests, tools)."""
        for pos in self._slot_positions(self._floor(time_ms)).tolist():
            rec = self.log.read(pos)
            if rec is not None:
                yield rec

    def clean_log(self) -> int:
        """Delete timer-log segments no pending slot points into any more. It reads the whole
        wheel, so the wheel's pages are released again afterwards."""
        first = self.wheel.min_first_pos_from(self.read_time_ms)
        self.wheel.release_pages()
        limit = self.log.write_pos if first < 0 else first
        return self.log.delete_before(limit - limit % self.log.file_size)

