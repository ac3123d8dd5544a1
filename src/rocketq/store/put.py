"""The write path of the store (`PutService`): one-message puts, runs of them, batches, and the
SYNC_FLUSH wait.

Every refusal the store raises is a member of the error tree (`rocketq.errors.StoreError`) and
becomes a PutMessageStatus in one place, `PutService._refused`; the broker maps statuses to
response codes (`broker/processors/send.py`)."""

from __future__ import annotations

import asyncio
import logging
import struct
import threading
import time
from collections.abc import Callable, Sequence
from functools import partial

from rocketq.codec.message import MAX_PROPERTIES_LENGTH
from rocketq.errors import CreateMappedFileFailed, DiskFull, StoreClosed, StoreError, StoreIsSlave
from rocketq.store.commitlog import CommitLog, EncodedBatch
from rocketq.store.config import MessageStoreConfig
from rocketq.store.consume_queue import ConsumeQueue
from rocketq.store.dispatch import Dispatcher, is_dispatched
from rocketq.store.model import (
    ENTRY_BODY,
    ENTRY_PROPERTIES,
    ENTRY_TOPIC,
    MessageBatchToStore,
    MessageToStore,
    PutMessageResult,
    PutMessageStatus,
    SingleEntry,
    put_result,
)
from rocketq.store.services import GroupCommitService

log = logging.getLogger("rocketq.store")

MAX_TOPIC_LENGTH = 255
_INDEX_DRAIN_THRESHOLD = 50_000  # keys queued before a put drains inline (no loop running)
_NOT_DISPATCHED = (0x4, 0xC)  # prepared / rollback transaction records
_I16 = struct.Struct(">h")

# A stored entry of `append_many`: (commit-log offset, record size, queue offset).
Placed = tuple[int, int, int]


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def _log_flush_timeout(target: int, fut: asyncio.Future[bool]) -> None:
    if not fut.cancelled() and not fut.result():
        log.warning("do groupcommit, wait for flush failed, topic offset %d", target)


def _encode_batch(batch: MessageBatchToStore) -> EncodedBatch | PutMessageStatus:
    """A batch of entries as the columns the commit log writes (or the status refusing it)."""
    if not batch.items:
        return PutMessageStatus.MESSAGE_ILLEGAL
    flags, bodies, pstrs, tags, keys = zip(*batch.items, strict=True)
    try:
        props = list(map(str.encode, pstrs))
    except UnicodeEncodeError:
        return PutMessageStatus.MESSAGE_ILLEGAL
    if max(map(len, props)) > MAX_PROPERTIES_LENGTH:
        return PutMessageStatus.PROPERTIES_SIZE_EXCEEDED
    tails = [_I16.pack(len(p)) + p for p in props]
    return EncodedBatch(batch.topic, batch.queue_id, flags, bodies, tails, tags, keys, batch.sys_flag,
                        batch.born_timestamp, batch.born_host, batch.reconsume_times, batch.wait_store_msg_ok)


class PutService:
    """Puts into the commit log and what follows them (consume queues, index, wake-ups).

    It owns the put lock (retention and topic deletion take it too), the writable state (open,
    disk full), the put counters and the group commit of SYNC_FLUSH. The files it writes
    belong to the store and are handed in: the commit log, the consume-queue table with the
    store's `create_cq`, and the dispatcher (which holds the index)."""

    def __init__(
        self,
        config: MessageStoreConfig,
        commit_log: CommitLog,
        consume_queues: dict[tuple[str, int], ConsumeQueue],
        create_cq: Callable[[str, int], ConsumeQueue],
        dispatcher: Dispatcher,
        msg_id_prefix: str,
    ) -> None:
        self.config = config
        self.commit_log = commit_log
        self.consume_queues = consume_queues
        self.create_cq = create_cq
        self.dispatcher = dispatcher
        self.msg_id_prefix = msg_id_prefix
        self.lock = threading.Lock()
        self.times_total = 0  # messages stored
        self.size_total = 0  # bytes stored
        self.last_dispatch_ts = 0  # store timestamp of the newest record dispatched
        self._open = False
        self._disk_full = False
        self._slave = False  # a slave's commit log is written by replication only
        self._writable = False  # open, not full, not a slave: the one flag the hot path reads
        self._group_commit: GroupCommitService | None = None

    # ---- state ---------------------------------------------------------------------------
    def open(self) -> None:
        self._open = True
        self._writable = not self._disk_full and not self._slave

    def close(self) -> None:
        self._open = False
        self._writable = False

    @property
    def disk_full(self) -> bool:
        return self._disk_full

    @disk_full.setter
    def disk_full(self, full: bool) -> None:
        self._disk_full = full
        self._writable = self._open and not full and not self._slave

    @property
    def slave(self) -> bool:
        return self._slave

    @slave.setter
    def slave(self, slave: bool) -> None:
        """As RocketMQ's store in SLAVE role: every put is refused (SERVICE_NOT_AVAILABLE)."""
        self._slave = slave
        self._writable = self._open and not self._disk_full and not slave

    def _closed_error(self) -> StoreError:
        if not self._open:
            return StoreClosed(self.config.store_path_root_dir)
        if self._slave:
            return StoreIsSlave(self.config.store_path_root_dir)
        return DiskFull(self.config.store_path_root_dir, 0)

    def _refused(self, err: StoreError) -> PutMessageStatus:
        """The status a put refused by `err` answers with: the one mapping of the store's errors
        (each names its RocketMQ PutMessageStatus). A full disk also stops further puts until
        retention sees space again."""
        if isinstance(err, DiskFull):
            if not self._disk_full:
                log.error("%s: store marked full, puts refused until space returns", err)
            self.disk_full = True
        elif isinstance(err, CreateMappedFileFailed):
            log.error("%s", err)
        return PutMessageStatus[err.put_status]

    def refuse_for(self, err: StoreError) -> None:
        """A write after the put (the index builder) met `err`: refuse puts as a put would."""
        self._refused(err)

    def _refuse(self, topic: str) -> PutMessageStatus | None:
        if not self._writable:
            return self._refused(self._closed_error())
        if topic in self.commit_log._topic_parts:  # only accepted topics are ever cached
            return None
        try:
            raw = topic.encode()
        except UnicodeEncodeError:
            return PutMessageStatus.MESSAGE_ILLEGAL
        if not raw or len(raw) > MAX_TOPIC_LENGTH:
            return PutMessageStatus.MESSAGE_ILLEGAL
        return None

    # ---- one message ---------------------------------------------------------------------
    def append_message(self, m: MessageToStore) -> PutMessageResult:
        """Store one message (page cache only; see `put_message` for the SYNC_FLUSH wait)."""
        if not self._writable or m.topic not in self.commit_log._topic_parts:
            refused = self._refuse(m.topic)
            if refused is not None:
                return PutMessageResult(refused)
        try:
            props = m.properties.encode()
        except UnicodeEncodeError:
            return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL)
        if len(props) > MAX_PROPERTIES_LENGTH:
            return PutMessageResult(PutMessageStatus.PROPERTIES_SIZE_EXCEEDED)
        if len(m.body) > self.config.max_message_size:
            return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL)
        store_ts = m.store_timestamp or time.time_ns() // 1_000_000
        sys_flag = m.sys_flag
        dispatched = sys_flag & 0xC not in _NOT_DISPATCHED
        key = (m.topic, m.queue_id)
        with self.lock:
            cq = self.consume_queues.get(key) or self.create_cq(m.topic, m.queue_id)
            qoff = cq.max_offset if dispatched else 0
            try:
                if dispatched and qoff >= cq.reserved_end:
                    cq.reserve_to(qoff + 1)
                phys, size = self.commit_log.append_one(m, props, qoff, store_ts)
            except StoreError as e:
                return PutMessageResult(self._refused(e))
            # dispatch inline: this is the per-send path (see dispatch.py for the batch one)
            dispatcher = self.dispatcher
            if dispatched:
                cq.append(phys, size, m.tags_code)
                if dispatcher.on_arrival is not None:
                    dispatcher.notify(cq.topic, cq.queue_id, cq.max_offset, m.tags_code)
            index = dispatcher.index
            if index is not None and m.keys and sys_flag & 0xC != 0xC:
                index.pending.append((m.topic, m.keys, phys, store_ts))
                index.pending_keys += len(m.keys)
                if index.pending_keys > _INDEX_DRAIN_THRESHOLD:
                    index.drain()
            self.last_dispatch_ts = store_ts
        self.times_total += 1
        self.size_total += size
        return put_result(PutMessageStatus.PUT_OK, phys, size, qoff, 1, store_ts, (phys,), self.msg_id_prefix)

    # ---- runs of one-message puts --------------------------------------------------------
    def append_many(self, entries: Sequence[SingleEntry], prepared: Sequence[int] | None = None
                    ) -> list[Placed | PutMessageStatus]:
        """Store several one-message puts, in order, exactly as `append_message` would store
        each (page cache only); per entry, (commit-log offset, record size, queue offset) or
        the status that refused it.

        A pipelining producer delivers dozens of sends in one read: they share one lock, one
        clock reading and one copy into the mapping (`CommitLog.append_run`), and wake
        long polls once per queue and tag."""
        n = len(entries)
        if not self._writable:
            return [self._refused(self._closed_error())] * n
        out: list[Placed | PutMessageStatus] = [PutMessageStatus.PUT_OK] * n
        todo, props = self._checked(entries, out)
        if not todo:
            return out
        store_ts = now_ms()
        cl = self.commit_log
        stored = 0
        size_total = 0
        with self.lock:
            k = 0
            while k < len(todo):
                if not self._writable:  # as append_message would answer each of the rest
                    status = self._refused(self._closed_error())
                    for i in todo[k:]:
                        out[i] = status
                    break
                whole = k == 0 and len(todo) == n
                run = entries if whole else [entries[i] for i in todo[k:]]
                run_prepared = prepared if whole or prepared is None else [prepared[i] for i in todo[k:]]
                try:
                    queues, qoffs = self._queues_of(run)
                except StoreError as e:  # no room for their consume-queue entries: store none
                    status = self._refused(e)
                    for i in todo[k:]:
                        out[i] = status
                    break
                placed = cl.append_run(run, props if whole else props[k:], qoffs, store_ts, run_prepared)
                done = len(placed)
                if done:
                    if whole and done == n:
                        out = placed  # type: ignore[assignment]  # every entry stored, in order
                    else:
                        for j, triple in enumerate(placed):
                            out[todo[k + j]] = triple
                    size_total += placed[-1][0] + placed[-1][1] - placed[0][0]
                    self.dispatcher.dispatch_run(run, queues, placed, store_ts)
                    stored += done
                    k += done
                if k < len(todo):  # the next one starts a segment (or finds no space): alone
                    i = todo[k]
                    r = self._append_alone(entries[i], props[k], store_ts, prepared[i] if prepared else 0)
                    out[i] = r
                    if not isinstance(r, PutMessageStatus):
                        size_total += r[1]
                        stored += 1
                    k += 1
            if stored:
                self.last_dispatch_ts = store_ts
        self.times_total += stored
        self.size_total += size_total
        index = self.dispatcher.index
        if index is not None and index.pending_keys > _INDEX_DRAIN_THRESHOLD:
            index.drain()
        return out

    def _checked(self, entries: Sequence[SingleEntry], out: list[Placed | PutMessageStatus]
                 ) -> tuple[list[int], list[bytes]]:
        """(indexes of the entries `append_message` would store, their encoded properties); the
        status of each refused one goes to `out`."""
        topics = self.commit_log._topic_parts
        max_body = self.config.max_message_size
        try:
            props = list(map(str.encode, map(ENTRY_PROPERTIES, entries)))
        except UnicodeEncodeError:
            pass
        else:  # the usual run: every entry fine, checked with C-level loops
            if (max(map(len, props)) <= MAX_PROPERTIES_LENGTH
                    and max(map(len, map(ENTRY_BODY, entries))) <= max_body
                    and all(map(topics.__contains__, map(ENTRY_TOPIC, entries)))):
                return list(range(len(entries))), props
        todo: list[int] = []
        props = []
        for i, (topic, _, body, _, properties, _, _, _, _, _, _) in enumerate(entries):
            if topic not in topics:
                refused = self._refuse(topic)
                if refused is not None:
                    out[i] = refused
                    continue
            try:
                pb = properties.encode()
            except UnicodeEncodeError:
                out[i] = PutMessageStatus.MESSAGE_ILLEGAL
                continue
            if len(pb) > MAX_PROPERTIES_LENGTH:
                out[i] = PutMessageStatus.PROPERTIES_SIZE_EXCEEDED
            elif len(body) > max_body:
                out[i] = PutMessageStatus.MESSAGE_ILLEGAL
            else:
                todo.append(i)
                props.append(pb)
        return todo, props

    def _queues_of(self, run: Sequence[SingleEntry]) -> tuple[list[ConsumeQueue], list[int]]:
        """The consume queue of each entry and the queue offset it gets (0 for records that
        are not dispatched), with disk blocks reserved for those entries (or StoreError)."""
        cqs = self.consume_queues
        nxt: dict[ConsumeQueue, int] = {}
        queues: list[ConsumeQueue] = []
        qoffs: list[int] = []
        for topic, queue_id, _, _, _, _, _, sys_flag, _, _, _ in run:
            cq = cqs.get((topic, queue_id)) or self.create_cq(topic, queue_id)
            queues.append(cq)
            if sys_flag & 0xC in _NOT_DISPATCHED:
                qoffs.append(0)
                continue
            q = nxt.get(cq)
            if q is None:
                q = cq.max_offset
            qoffs.append(q)
            nxt[cq] = q + 1
        for cq, end in nxt.items():
            if end > cq.reserved_end:
                cq.reserve_to(end)
        return queues, qoffs

    def _append_alone(self, e: SingleEntry, props: bytes, store_ts: int,
                      prepared: int = 0) -> Placed | PutMessageStatus:
        """One entry of `append_many` through `CommitLog.append_one` (segment roll-over, no space)."""
        topic, queue_id, body, flag, properties, tcode, keys, sys_flag, born_ts, born_host, reconsume = e
        m = MessageToStore(topic, queue_id, body, flag, properties, tcode, keys, sys_flag,
                           born_ts, born_host, reconsume, prepared, store_ts, True)
        cq = self.consume_queues.get((topic, queue_id)) or self.create_cq(topic, queue_id)
        dispatched = is_dispatched(sys_flag)
        qoff = cq.max_offset if dispatched else 0
        try:
            if dispatched and qoff >= cq.reserved_end:
                cq.reserve_to(qoff + 1)
            phys, size = self.commit_log.append_one(m, props, qoff, store_ts)
        except StoreError as err:
            return self._refused(err)
        self.dispatcher.dispatch_run([e], [cq], [(phys, size, qoff)], store_ts)
        return phys, size, qoff

    # ---- batches -------------------------------------------------------------------------
    def append_messages(self, batch: MessageBatchToStore | EncodedBatch) -> PutMessageResult:
        """Store a batch with one append; consecutive queue offsets."""
        refused = self._refuse(batch.topic)
        if refused is not None:
            return PutMessageResult(refused)
        if isinstance(batch, MessageBatchToStore):
            encoded = _encode_batch(batch)
            if isinstance(encoded, PutMessageStatus):
                return PutMessageResult(encoded)
            batch = encoded
        n = len(batch.bodies)
        if not n:
            return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL)
        if max(map(len, batch.prop_tails)) > MAX_PROPERTIES_LENGTH + 2:
            return PutMessageResult(PutMessageStatus.PROPERTIES_SIZE_EXCEEDED)
        if max(map(len, batch.bodies)) > self.config.max_message_size:
            return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL)
        store_ts = now_ms()
        dispatched = is_dispatched(batch.sys_flag)
        with self.lock:
            cq = self.consume_queues.get((batch.topic, batch.queue_id)) or self.create_cq(
                batch.topic, batch.queue_id
            )
            qoff = cq.max_offset if dispatched else 0
            try:
                if dispatched and qoff + n > cq.reserved_end:
                    cq.reserve_to(qoff + n)
                total, offsets, sizes = self.commit_log.append_batch(batch, qoff, store_ts)
            except StoreError as e:
                return PutMessageResult(self._refused(e))
            self.dispatcher.dispatch_batch(cq, offsets, sizes, batch.tags_codes, batch.keys, batch.sys_flag,
                                           store_ts)
            self.last_dispatch_ts = store_ts
        self.times_total += n
        self.size_total += total
        index = self.dispatcher.index
        if index is not None and index.pending_keys > _INDEX_DRAIN_THRESHOLD:
            index.drain()
        return put_result(PutMessageStatus.PUT_OK, offsets[0], total, qoff, n, store_ts, offsets,
                          self.msg_id_prefix)

    # ---- SYNC_FLUSH ----------------------------------------------------------------------
    def start(self) -> None:
        """Start the group commit (SYNC_FLUSH; needs a running loop)."""
        if self.config.sync_flush and self._group_commit is None:
            self._group_commit = GroupCommitService(self.commit_log)
            self._group_commit.start()

    async def stop(self) -> None:
        if self._group_commit is not None:
            await self._group_commit.stop()
            self._group_commit = None

    async def put_message(self, m: MessageToStore) -> PutMessageResult:
        r = self.append_message(m)
        if r.status is PutMessageStatus.PUT_OK and self.config.sync_flush and m.wait_store_msg_ok:
            return await self._wait_flush(r)
        return r

    async def put_messages(self, batch: MessageBatchToStore | EncodedBatch) -> PutMessageResult:
        r = self.append_messages(batch)
        if r.status is PutMessageStatus.PUT_OK and self.config.sync_flush and batch.wait_store_msg_ok:
            return await self._wait_flush(r)
        return r

    async def _wait_flush(self, r: PutMessageResult) -> PutMessageResult:
        if await self.flush_future(r.wrote_offset + r.wrote_bytes):
            return r
        return PutMessageResult(PutMessageStatus.FLUSH_DISK_TIMEOUT, r.wrote_offset, r.wrote_bytes,
                                r.logical_offset, r.msg_num, r.store_timestamp, r.record_offsets,
                                r.msg_id_prefix)

    def flush_future(self, target: int) -> asyncio.Future[bool]:
        """A future that turns True once the commit log is durable up to `target` (the group
        commit), False after syncFlushTimeout (the data stays stored: FLUSH_DISK_TIMEOUT)."""
        gc = self._group_commit
        if gc is None:  # no services: flush right here
            self.commit_log.flush(0)
            done: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
            done.set_result(True)
            return done
        fut = gc.request(target)
        fut.add_done_callback(partial(_log_flush_timeout, target))
        return fut
