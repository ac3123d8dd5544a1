"""ScheduleMessageService: delivers delayed messages (delay levels) when they are due.

A send with DELAY=<level> is stored in SCHEDULE_TOPIC_XXXX, queue level-1, with REAL_TOPIC /
REAL_QID naming its destination (see SendMessageProcessor). Each level's queue is FIFO with one
fixed delay, so only its head can become due: rather than polling every level every 100 ms as
RocketMQ does, the service sleeps until the earliest head is due, and a put on the schedule
topic wakes it (`wakeup`), so an idle broker does not spin. It wakes on RocketMQ's 100 ms grid,
so messages that fall due close together are delivered together, as Java's timer delivers
them (a consumer pulls them as one batch). It re-stores due messages on the
real topic/queue (new physical offset and offset msgId, same UNIQ_KEY, never re-scheduled) and
keeps per-level progress in `config/delayOffset.json`, so a restart resumes where it stopped
(at-least-once: progress is persisted every 10 s and at shutdown).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

import orjson

from rocketq.codec.bodies import loads_lenient
from rocketq.codec.message import MessageExt, decode_messages, encode_properties, tags_code
from rocketq.codec.topics import RMQ_SYS_SCHEDULE_TOPIC
from rocketq.configfile import ConfigFileWriter, read_candidates, remove_stale_temps
from rocketq.errors import ProtocolError
from rocketq.store.model import GetMessageStatus, MessageToStore

if TYPE_CHECKING:
    from rocketq.broker.controller import BrokerController

log = logging.getLogger("rocketq.broker.schedule")

FIRST_DELAY = 1.0
RETRY_INTERVAL = 0.1  # a level whose head cannot be read yet is looked at again this soon
TICK_MS = 100  # RocketMQ's DELAY_FOR_A_WHILE: due messages are delivered on this grid
DELAY_FOR_A_PERIOD = 10.0  # back-off after a failed re-store
PERSIST_INTERVAL = 10.0  # flushDelayOffsetInterval
BATCH = 32


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class ScheduleMessageService:
    def __init__(self, controller: BrokerController) -> None:
        self._ctl = controller
        self.levels_ms: list[int] = controller.store_config.delay_levels_ms()
        self.offset_table: dict[int, int] = {}
        self._next_check: dict[int, int] = {}  # level -> ms before which its head is not due
        self._task: asyncio.Task[None] | None = None
        self._dirty = False
        self._writer = ConfigFileWriter(self.path, self.encode)
        self._wake = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread = 0
        self.delivered = 0

    @property
    def max_delay_level(self) -> int:
        return len(self.levels_ms)

    def delay_ms(self, level: int) -> int:
        """The delay of `level` (1-based), clamped into the configured levels."""
        level = max(1, min(level, len(self.levels_ms)))
        return self.levels_ms[level - 1]

    # -- persistence -------------------------------------------------------------------------

    @property
    def path(self) -> Path:
        return Path(self._ctl.store_config.store_path_root_dir).expanduser() / "config" / "delayOffset.json"

    def encode(self) -> bytes:
        return orjson.dumps({"offsetTable": {str(k): v for k, v in sorted(self.offset_table.items())}})

    def load(self) -> None:
        remove_stale_temps(self.path)
        for candidate, data in read_candidates(self.path):
            try:
                doc = loads_lenient(data)
                table = doc.get("offsetTable") or {}
                self.offset_table = {int(k): int(v) for k, v in table.items()}
            except (ProtocolError, AttributeError, TypeError, ValueError) as exc:
                log.warning("load %s failed: %s", candidate, exc)
                continue
            log.info("load delay offset OK, %s: %s", candidate, self.offset_table)
            return

    def persist(self) -> None:
        """Write the progress now, synchronously (no loop running: tools and tests)."""
        self._dirty = False
        self._writer.write_now()

    # -- lifecycle ---------------------------------------------------------------------------

    async def start(self) -> None:
        if self._task is None:
            self._loop = asyncio.get_running_loop()
            self._loop_thread = threading.get_ident()
            self._task = self._loop.create_task(self._run())

    async def shutdown(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        self._dirty = False
        await self._writer.write()

    def wakeup(self) -> None:
        """A message was put on the schedule topic: look at the levels again (any thread)."""
        if threading.get_ident() == self._loop_thread:
            self._wake.set()
        elif self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._wake.set)

    async def _run(self) -> None:
        await asyncio.sleep(FIRST_DELAY)
        last_persist = time.monotonic()
        while True:
            self._wake.clear()
            failed = False
            for level in range(1, self.max_delay_level + 1):
                try:
                    await self.deliver_due(level)
                except asyncio.CancelledError:
                    raise
                except Exception:
                    log.exception("ScheduleMessageService, level %d failed; retry in %.0fs", level,
                                  DELAY_FOR_A_PERIOD)
                    failed = True
            pause = DELAY_FOR_A_PERIOD if failed else self.next_due_in()
            if self._dirty:
                persist_in = last_persist + PERSIST_INTERVAL - time.monotonic()
                if persist_in <= 0:
                    last_persist = time.monotonic()
                    self._dirty = False
                    self._writer.request()  # snapshots when it starts: nothing is lost
                else:
                    pause = persist_in if pause is None else min(pause, persist_in)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(pause):
                    await self._wake.wait()

    def next_due_in(self, now: int | None = None) -> float | None:
        """Seconds until the earliest level head is due; None when no level holds a message."""
        now = _now_ms() if now is None else now
        store = self._ctl.store
        earliest: int | None = None
        for level in range(1, self.max_delay_level + 1):
            offset = self.offset_table.get(level, 0)
            if store.get_max_offset_in_queue(RMQ_SYS_SCHEDULE_TOPIC, level - 1) <= offset:
                continue
            due = self._next_check.get(level, 0)
            earliest = due if earliest is None else min(earliest, due)
        if earliest is None:
            return None
        if earliest <= now:
            # pending but not due-dated (its head could not be read): look again soon, not at once
            return RETRY_INTERVAL
        return (-(-earliest // TICK_MS) * TICK_MS - now) / 1000

    # -- delivery ------------------------------------------------------------------------------

    async def deliver_due(self, level: int, now: int | None = None) -> int:
        """Re-store every due message of `level`; returns how many were delivered."""
        now = _now_ms() if now is None else now
        if self._next_check.get(level, 0) > now:
            return 0
        store = self._ctl.store
        queue_id = level - 1
        offset = self.offset_table.get(level, 0)
        if store.get_max_offset_in_queue(RMQ_SYS_SCHEDULE_TOPIC, queue_id) <= offset:
            return 0
        delay = self.delay_ms(level)
        delivered = 0
        while True:
            result = store.get_message(RMQ_SYS_SCHEDULE_TOPIC, queue_id, offset, BATCH)
            if result.status is not GetMessageStatus.FOUND:
                if result.next_begin_offset > offset:
                    # Expired files (or a hole): continue from where the queue now starts.
                    offset = result.next_begin_offset
                    self._set_offset(level, offset)
                    continue
                return delivered
            messages = decode_messages(b"".join(result.buffers))
            for msg in messages:
                due = msg.store_timestamp + delay
                if due > now:
                    self._next_check[level] = due
                    return delivered
                if not await self._deliver(msg):
                    self._next_check[level] = now + int(DELAY_FOR_A_PERIOD * 1000)
                    return delivered
                offset += 1
                delivered += 1
                self._set_offset(level, offset)
            if len(messages) < BATCH:
                return delivered

    def _set_offset(self, level: int, offset: int) -> None:
        self.offset_table[level] = offset
        self._dirty = True

    async def _deliver(self, msg: MessageExt) -> bool:
        props = msg.properties
        real_topic = props.get("REAL_TOPIC")
        real_qid = props.get("REAL_QID")
        if not real_topic or real_qid is None or not real_qid.lstrip("-").isdigit():
            log.error("scheduled message %s has no REAL_TOPIC/REAL_QID, discarded", msg.offset_msg_id)
            return True
        uniq = props.get("UNIQ_KEY") or ""
        keys = props.get("KEYS")
        index_keys = (uniq, *[k for k in keys.split(" ") if k]) if keys else (uniq,)
        # RocketMQ's observable quirk: the delivered copy still carries DELAY / REAL_TOPIC / REAL_QID.
        put = MessageToStore(
            real_topic, int(real_qid), msg.body, msg.flag, encode_properties(props),
            tags_code(props.get("TAGS")), tuple(k for k in index_keys if k), msg.sys_flag,
            msg.born_timestamp, msg.born_host, msg.reconsume_times, msg.prepared_transaction_offset,
            0, True,
        )
        result = await self._ctl.store.put_message(put)
        if not result.ok:
            log.error("ScheduleMessageService, a message time up, but reput it failed, "
                      "topic: %s msgId %s: %s", real_topic, msg.offset_msg_id, result.status.name)
            return False
        self._ctl.stats.on_put(1)
        self.delivered += 1
        return True
