"""MessageStore: the facade the broker calls (DefaultMessageStore's role).

The core is synchronous and loop-agnostic (`append_message`, `get_message`, ...); `start()`
adds the asyncio services (flush, group commit, index building, clean-up) and the async puts
add the SYNC_FLUSH wait. Call `load()` (recovery) before anything else. The write path is
`PutService` (put.py), which the put methods here hand over to.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable, Iterable, Sequence

from rocketq.codec.message import offset_msg_id_prefix
from rocketq.store import retention
from rocketq.store.checkpoint import StoreCheckpoint, StoreLock, create_abort_file, remove_abort_file
from rocketq.store.commitlog import CommitLog, EncodedBatch
from rocketq.store.config import MessageStoreConfig
from rocketq.store.consume_queue import ConsumeQueue
from rocketq.store.dispatch import ArrivalListener, Dispatcher
from rocketq.store.ha.transfer import GroupTransfer, combined_wait
from rocketq.store.index import IndexService
from rocketq.store.mapped_file import AllocateMappedFileService
from rocketq.store.model import (
    GetMessageResult,
    GetMessageStatus,
    MessageBatchToStore,
    MessageToStore,
    PutMessageResult,
    PutMessageStatus,
    QueryMessageResult,
    SingleEntry,
)
from rocketq.store.put import Placed, PutService, now_ms
from rocketq.store.reader import RecordFilter, offset_by_time, read_queue
from rocketq.store.recovery import Recovery, RecoveryReport
from rocketq.store.services import ServiceTask, build_services

log = logging.getLogger("rocketq.store")


def _total_physical_memory() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 24 << 30  # RocketMQ's fallback when the OS will not say


TOTAL_PHYSICAL_MEMORY = _total_physical_memory()


class MessageStore:
    """The store: commit log, consume queues, index, their files and services (the put path
    is `self.put`, a PutService)."""

    def __init__(
        self,
        config: MessageStoreConfig,
        *,
        store_host: tuple[str, int] = ("127.0.0.1", 10911),
        on_arrival: ArrivalListener | None = None,
        disk_ratio: Callable[[], float] | None = None,
    ) -> None:
        self.config = config
        self.store_host = store_host
        self._allocator = AllocateMappedFileService()
        self.commit_log = CommitLog(config, store_host, self._allocator)
        self.consume_queues: dict[tuple[str, int], ConsumeQueue] = {}
        self.index = IndexService(config) if config.message_index_enable else None
        self.dispatcher = Dispatcher(self.index, on_arrival)
        self.checkpoint = StoreCheckpoint(os.path.join(config.store_path_root_dir, "checkpoint"))
        self.recovery_report: RecoveryReport | None = None
        self._disk_ratio = disk_ratio or (lambda: retention.disk_used_ratio(config.store_path_root_dir))
        self._msg_id_prefix = offset_msg_id_prefix(*store_host)
        self.put = PutService(config, self.commit_log, self.consume_queues, self._create_cq, self.dispatcher,
                              self._msg_id_prefix)
        if self.index is not None:
            self.index.on_no_space = self.put.refuse_for
        self._store_lock: StoreLock | None = None
        self._loaded = False
        self._shutdown = False
        self._services: list[ServiceTask] = []
        self.get_message_times_total = 0
        self.get_message_transferred_total = 0
        self._started_ms = now_ms()
        # SYNC_MASTER: the slaves' acks puts wait for (set by the broker's replication service)
        self.group_transfer: GroupTransfer | None = None

    @property
    def msg_id_prefix(self) -> str:
        """The host part of this store's offset msgIds: append f"{offset:016X}"."""
        return self._msg_id_prefix

    # ---- put (PutService) -----------------------------------------------------------------
    def append_message(self, m: MessageToStore) -> PutMessageResult:
        """Store one message (page cache only; `put_message` adds the SYNC_FLUSH wait)."""
        return self.put.append_message(m)

    def append_many(self, entries: Sequence[SingleEntry], prepared: Sequence[int] | None = None
                    ) -> list[Placed | PutMessageStatus]:
        """Store a run of one-message puts; per entry (offset, size, queue offset) or its refusal.
        ``prepared``: each entry's PREPAREDTRANSACTIONOFFSET (committed transactions), else 0."""
        return self.put.append_many(entries, prepared)

    def append_messages(self, batch: MessageBatchToStore | EncodedBatch) -> PutMessageResult:
        """Store a batch with one append; consecutive queue offsets."""
        return self.put.append_messages(batch)

    async def put_message(self, m: MessageToStore) -> PutMessageResult:
        return await self.put.put_message(m)

    async def put_messages(self, batch: MessageBatchToStore | EncodedBatch) -> PutMessageResult:
        return await self.put.put_messages(batch)

    async def wait_flushed(self, target: int) -> bool:
        """SYNC_FLUSH: wait until the commit log is durable up to `target` (the group commit);
        False after syncFlushTimeout (the data stays stored: FLUSH_DISK_TIMEOUT)."""
        return await self.put.flush_future(target)

    def flush_future(self, target: int) -> asyncio.Future[bool]:
        """`wait_flushed` as a plain future, for callers that answer many puts from one callback."""
        return self.put.flush_future(target)

    def stored_future(self, target: int) -> asyncio.Future[PutMessageStatus]:
        """Every wait a put ending at `target` owes before its answer, as one status: the
        SYNC_FLUSH group commit and the SYNC_MASTER slave ack (PUT_OK, FLUSH_DISK_TIMEOUT,
        FLUSH_SLAVE_TIMEOUT or SLAVE_NOT_AVAILABLE; the message is stored in every case)."""
        flush = self.put.flush_future(target) if self.config.sync_flush else None
        return combined_wait(flush, self.group_transfer, target)

    @property
    def must_wait(self) -> bool:
        """Puts that ask to wait (WAIT=true) are answered through `stored_future`."""
        return self.config.sync_flush or self.group_transfer is not None

    @property
    def disk_full(self) -> bool:
        """Puts are refused until retention sees the disk usable again."""
        return self.put.disk_full

    @disk_full.setter
    def disk_full(self, full: bool) -> None:
        self.put.disk_full = full

    @property
    def put_message_times_total(self) -> int:
        return self.put.times_total

    @property
    def put_message_size_total(self) -> int:
        return self.put.size_total

    @property
    def on_arrival(self) -> ArrivalListener | None:
        return self.dispatcher.on_arrival

    @on_arrival.setter
    def on_arrival(self, listener: ArrivalListener | None) -> None:
        self.dispatcher.on_arrival = listener

    # ---- lifecycle -----------------------------------------------------------------------
    def load(self) -> bool:
        """Map the files and recover (abnormally when the abort file is there). Synchronous."""
        if self._loaded:
            return True
        root = self.config.store_path_root_dir
        self._store_lock = StoreLock(root)
        try:
            abnormal = os.path.exists(os.path.join(root, "abort"))
            self.commit_log.mfq.load()
            self._load_consume_queues()
            if self.index is not None:
                self.index.load()
            self.recovery_report = Recovery(
                self.config, self.commit_log, self.consume_queues, self._create_cq, self.index,
                self.checkpoint,
            ).run(abnormal)
            os.makedirs(self.config.commit_log_dir, exist_ok=True)
            create_abort_file(root)
        except BaseException:
            self._store_lock.release()
            self._store_lock = None
            raise
        self._loaded = True
        self.put.open()
        ratio = self._disk_ratio()
        if ratio > self.config.disk_space_warning_level_ratio / 100:  # as the clean service would decide
            self.put.disk_full = True
            log.error("disk usage %.2f: store opened read-only, puts refused until space returns", ratio)
        return True

    def _load_consume_queues(self) -> None:
        root = self.config.consume_queue_dir
        if not os.path.isdir(root):
            return
        for topic in sorted(os.listdir(root)):
            tdir = os.path.join(root, topic)
            if not os.path.isdir(tdir):
                continue
            for qid in sorted(os.listdir(tdir)):
                if qid.lstrip("-").isdigit() and os.path.isdir(os.path.join(tdir, qid)):
                    cq = self._new_cq(topic, int(qid))
                    cq.load()
                    cq.recover()
                    self.consume_queues[(topic, int(qid))] = cq

    def _new_cq(self, topic: str, queue_id: int) -> ConsumeQueue:
        return ConsumeQueue(topic, queue_id, self.config.consume_queue_dir,
                            self.config.mapped_file_size_consume_queue)

    def _create_cq(self, topic: str, queue_id: int) -> ConsumeQueue:
        cq = self.consume_queues.get((topic, queue_id))
        if cq is None:
            cq = self.consume_queues[(topic, queue_id)] = self._new_cq(topic, queue_id)
        return cq

    async def start(self) -> None:
        """Start the background services (needs a running loop)."""
        if not self._loaded:
            self.load()
        if self._services:
            return
        self.put.start()
        self._services = build_services(self)
        for s in self._services:
            s.start()

    def apply_config(self, config: MessageStoreConfig) -> None:
        """Take a runtime update into use: every reader of a runtime-updatable key reads
        ``self.config`` (or the index's) at each use, and the periodic services are woken so that
        a changed interval counts from now rather than after the old one has run out."""
        changed = {f for f in config.__dataclass_fields__ if getattr(config, f) != getattr(self.config, f)}
        self.config = config
        self.commit_log.config = config
        self.put.config = config
        if self.index is not None:
            self.index.config = config
        if changed:
            for s in self._services:
                s.wakeup()

    async def shutdown(self) -> None:
        """Stop the services, flush everything, write the checkpoint, remove the abort file."""
        for s in self._services:
            await s.stop()
        self._services = []
        await self.put.stop()
        self.close()

    def close(self) -> None:
        """Synchronous shutdown (without services)."""
        if self._shutdown or not self._loaded:
            self._release_lock()
            return
        self._shutdown = True
        self.put.close()
        self.drain_index()
        self.commit_log.flush(0)
        try:
            self.flush_derived(0)
        except OSError as e:  # a full disk: the next start recovers from the older checkpoint
            log.error("flush of consume queues / checkpoint at shutdown failed: %s", e)
        max_offset = self.commit_log.max_offset  # read before the files close: then it is 0
        self._close_files()
        remove_abort_file(self.config.store_path_root_dir)
        self._release_lock()
        log.info("message store shut down, max offset %d", max_offset)

    def release_without_shutdown(self) -> None:
        """Let go of files and lock but flush nothing and leave the abort file: exactly what
        kill -9 leaves behind (fault injection and recovery tests)."""
        self._shutdown = True
        self.put.close()
        if self.index is not None:
            self.index.pending = []
        self._close_files()
        self._release_lock()

    def _close_files(self) -> None:
        self._allocator.shutdown()
        self.commit_log.close()
        for cq in self.consume_queues.values():
            cq.close()
        if self.index is not None:
            self.index.close()

    def _release_lock(self) -> None:
        if self._store_lock is not None:
            self._store_lock.release()
            self._store_lock = None

    def flush_derived(self, least_pages: int = 0) -> None:
        """Flush consume queues and index, then the checkpoint (blocking; worker thread)."""
        logics_ts = self.put.last_dispatch_ts
        for cq in list(self.consume_queues.values()):
            cq.flush(least_pages)
        if self.index is not None:
            self.checkpoint.index_msg_timestamp = max(self.checkpoint.index_msg_timestamp, self.index.flush())
        cp = self.checkpoint
        cp.physic_msg_timestamp = max(cp.physic_msg_timestamp, self.commit_log.flushed_store_timestamp)
        cp.logics_msg_timestamp = max(cp.logics_msg_timestamp, logics_ts)
        cp.flush()

    def drain_index(self) -> int:
        return self.index.drain() if self.index is not None else 0

    # ---- get -----------------------------------------------------------------------------
    def get_message(
        self,
        topic: str,
        queue_id: int,
        offset: int,
        max_msg_nums: int,
        tag_codes: frozenset[int] | None = None,
        max_total_bytes: int | None = None,
        record_filter: RecordFilter | None = None,
    ) -> GetMessageResult:
        """Read up to `max_msg_nums` messages of a queue from `offset` (PULL semantics).

        `record_filter` decides on each stored record that passed `tag_codes` (a SQL92 filter)."""
        self.get_message_times_total += 1
        cq = self.consume_queues.get((topic, queue_id))
        if cq is None:
            return GetMessageResult(GetMessageStatus.NO_MATCHED_LOGIC_QUEUE)
        cfg = self.config
        max_count = max(1, min(max_msg_nums, cfg.max_transfer_count_on_message_in_memory))
        byte_cap = cfg.max_transfer_bytes_on_message_in_memory
        if max_total_bytes is not None:
            byte_cap = min(byte_cap, max_total_bytes)
        r = read_queue(cq, self.commit_log, offset, max_count, byte_cap, tag_codes, record_filter)
        self.get_message_transferred_total += r.message_count
        return r

    # ---- offsets and times ---------------------------------------------------------------
    def get_max_offset_in_queue(self, topic: str, queue_id: int) -> int:
        cq = self.consume_queues.get((topic, queue_id))
        return cq.max_offset if cq is not None else 0

    def get_min_offset_in_queue(self, topic: str, queue_id: int) -> int:
        cq = self.consume_queues.get((topic, queue_id))
        return cq.min_offset if cq is not None else 0

    def get_message_store_timestamp(self, topic: str, queue_id: int, offset: int) -> int:
        cq = self.consume_queues.get((topic, queue_id))
        e = cq.entry(offset) if cq is not None else None
        return self.commit_log.store_timestamp_at(e[0]) if e is not None else -1

    def get_earliest_message_time(self, topic: str, queue_id: int) -> int:
        cq = self.consume_queues.get((topic, queue_id))
        if cq is None:
            return -1
        return self.get_message_store_timestamp(topic, queue_id, cq.min_offset)

    def get_offset_in_queue_by_time(
        self, topic: str, queue_id: int, timestamp: int, upper: bool = False
    ) -> int:
        """LOWER: first offset stored at or after `timestamp` (max offset if none);
        UPPER: last offset stored at or before it (0 if none)."""
        cq = self.consume_queues.get((topic, queue_id))
        return offset_by_time(cq, self.commit_log, timestamp, upper) if cq is not None else 0

    def suggest_pulling_from_slave(self, topic: str, queue_id: int, next_offset: int) -> bool:
        """The last message a pull returned (`next_offset` - 1) lies further behind the commit log's
        end than accessMessageInMemoryMaxRatio of memory: RocketMQ's isSuggestPullingFromSlave."""
        cq = self.consume_queues.get((topic, queue_id))
        e = cq.entry(next_offset - 1) if cq is not None and next_offset > 0 else None
        if e is None:
            return False
        memory = TOTAL_PHYSICAL_MEMORY * self.config.access_message_in_memory_max_ratio / 100
        return self.commit_log.max_offset - e[0] > memory

    # ---- lookups -------------------------------------------------------------------------
    def look_message_by_offset(self, phys_offset: int) -> memoryview | None:
        """The raw record at a commit-log offset (VIEW_MESSAGE_BY_ID, send-back, transactions)."""
        if phys_offset < self.commit_log.min_offset:
            return None
        return self.commit_log.record_at(phys_offset)

    def query_message(
        self, topic: str, key: str, max_num: int, begin_ts: int, end_ts: int
    ) -> QueryMessageResult:
        if self.index is None:
            return QueryMessageResult()
        offsets, last_ts, last_phy = self.index.query(topic, key, max_num, begin_ts, end_ts)
        buffers: list[memoryview] = []
        found: list[int] = []
        for off in offsets:
            v = self.look_message_by_offset(off)
            if v is not None:
                buffers.append(v)
                found.append(off)
        return QueryMessageResult(buffers, found, last_ts, last_phy)

    @property
    def max_phy_offset(self) -> int:
        return self.commit_log.max_offset

    @property
    def min_phy_offset(self) -> int:
        return self.commit_log.min_offset

    def topic_queue_ids(self) -> dict[str, list[int]]:
        out: dict[str, list[int]] = {}
        for topic, qid in self.consume_queues:
            out.setdefault(topic, []).append(qid)
        return {t: sorted(q) for t, q in out.items()}

    # ---- admin ---------------------------------------------------------------------------
    def delete_topics(self, topics: Iterable[str]) -> int:
        """Drop the consume queues of these topics (their records age out of the commit log)."""
        doomed = set(topics)
        n = 0
        with self.put.lock:
            for key in [k for k in self.consume_queues if k[0] in doomed]:
                self.consume_queues.pop(key).destroy()
                n += 1
        for t in doomed:
            try:
                os.rmdir(os.path.join(self.config.consume_queue_dir, t))
            except OSError:
                pass
        if n:
            log.info("deleted %d consume queues of %s", n, sorted(doomed))
        return n

    def clean_expired_files(self, now: int | None = None, disk_ratio: float | None = None,
                            manual: bool = False) -> int:
        """One round of retention; returns how many commit-log files were deleted."""
        now = now_ms() if now is None else now
        ratio = self._disk_ratio() if disk_ratio is None else disk_ratio
        d = retention.decide(self.config, now, ratio, manual)
        if d.disk_full is not None and d.disk_full != self.disk_full:
            self.disk_full = d.disk_full
            (log.error if d.disk_full else log.info)("disk usage %.2f: store %s", ratio,
                                                     "full, puts refused" if d.disk_full else "usable again")
        deleted = 0
        if d.delete:
            with self.put.lock:
                deleted = retention.delete_expired_by_time(
                    self.commit_log.mfq, self.config.file_reserved_time * 3_600_000, now,
                    d.clean_immediately)
        if deleted:
            min_phy = self.commit_log.min_offset
            for cq in list(self.consume_queues.values()):
                cq.delete_expired(min_phy)
            if self.index is not None:
                self.index.delete_expired(min_phy)
        self._retry_deferred()
        return deleted

    def _retry_deferred(self) -> None:
        self.commit_log.mfq.retry_deferred()
        for cq in self.consume_queues.values():
            if cq.mfq.deferred_count:
                cq.mfq.retry_deferred()
        if self.index is not None:
            self.index.retry_deferred()

    def disk_util(self) -> str:
        """Used fraction of the partitions holding the commit log, consume queues and index, as
        RocketMQ's disk-full remark shows them."""
        cfg = self.config
        cl, cq, ix = (retention.disk_used_ratio(p) for p in (cfg.commit_log_dir, cfg.consume_queue_dir,
                                                              cfg.index_dir))
        return f"CL: {cl:5.2f} CQ: {cq:5.2f} INDEX: {ix:5.2f}"

    def runtime_info(self) -> dict[str, str]:
        cl = self.commit_log
        ratio = self._disk_ratio()
        put = self.put
        return {
            "commitLogMinOffset": str(cl.min_offset),
            "commitLogMaxOffset": str(cl.max_offset),
            "commitLogFlushedOffset": str(cl.flushed_offset),
            "commitLogFlushCount": str(cl.flush_count),
            "commitLogDiskRatio": f"{ratio:.4f}",
            "consumeQueueCount": str(len(self.consume_queues)),
            "indexFileCount": str(len(self.index.files)) if self.index is not None else "0",
            "indexPendingKeys": str(self.index.pending_keys) if self.index is not None else "0",
            "putMessageTimesTotal": str(self.put.times_total),
            "putMessageSizeTotal": str(self.put.size_total),
            # Java: bytes per stored message so far (0 before the first put).
            "putMessageAverageSize": str(put.size_total / put.times_total if put.times_total else 0.0),
            "consumeQueueDiskRatio": f"{retention.disk_used_ratio(self.config.consume_queue_dir):.4f}",
            "getMessageTimesTotal": str(self.get_message_times_total),
            "getMessageTransferredMsgCount": str(self.get_message_transferred_total),
            "earliestMessageTimeStamp": str(self._earliest_store_ts()),
            "diskFull": str(self.disk_full).lower(),
            "runtime": f"[ {(now_ms() - self._started_ms) // 1000} seconds ]",
        }

    def _earliest_store_ts(self) -> int:
        first = self.commit_log.mfq.first
        if first is None or first.closed:
            return -1
        return self.commit_log.store_timestamp_at(first.file_from_offset)

    def __enter__(self) -> MessageStore:
        self.load()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

