"""The write path of the MessageStore: one-message puts, runs of them, batches, and the
SYNC_FLUSH wait. A mixin of MessageStore (`message_store.py` holds the files, services and
reads), split off by responsibility; every attribute it uses is the store's own."""

from __future__ import annotations

import asyncio
import logging
import struct
import threading
import time
from collections.abc import Sequence
from functools import partial

from rocketq.codec.message import MAX_PROPERTIES_LENGTH
from rocketq.store.commitlog import AppendError, CommitLog, EncodedBatch, NoSpaceError, SingleEntry
from rocketq.store.config import MessageStoreConfig
from rocketq.store.consume_queue import ConsumeQueue
from rocketq.store.dispatch import Dispatcher, is_dispatched
from rocketq.store.index import IndexService
from rocketq.store.model import (
    MessageBatchToStore,
    MessageToStore,
    PutMessageResult,
    PutMessageStatus,
    put_result,
)
from rocketq.store.services import GroupCommitService

log = logging.getLogger("rocketq.store")

MAX_TOPIC_LENGTH = 255
_INDEX_DRAIN_THRESHOLD = 50_000  # keys queued before a put drains inline (no loop running)
_NOT_DISPATCHED = (0x4, 0xC)  # prepared / rollback transaction records
_I16 = struct.Struct(">h")


def _now_ms() -> int:
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


class PutPath:
    """Puts into the commit log and what follows them (consume queues, index, wake-ups)."""

    config: MessageStoreConfig
    commit_log: CommitLog
    consume_queues: dict[tuple[str, int], ConsumeQueue]
    index: IndexService | None
    dispatcher: Dispatcher
    put_message_times_total: int
    put_message_size_total: int
    _put_lock: threading.Lock
    _msg_id_prefix: str
    _group_commit: GroupCommitService | None
    _last_dispatch_ts: int
    _shutdown: bool
    _loaded: bool
    _disk_full: bool

    @property
    def _refusing(self) -> bool:
        return self._shutdown or not self._loaded or self._disk_full

    @property
    def disk_full(self) -> bool:
        return self._disk_full

    @disk_full.setter
    def disk_full(self, full: bool) -> None:
        self._disk_full = full

    def _create_cq(self, topic: str, queue_id: int) -> ConsumeQueue:
        raise NotImplementedError  # the store's

    def _refuse(self, topic: str) -> PutMessageStatus | None:
        if self._shutdown or not self._loaded:
            return PutMessageStatus.SERVICE_NOT_AVAILABLE
        if self.disk_full:
            return PutMessageStatus.SERVICE_NOT_AVAILABLE
        if topic in self.commit_log._topic_parts:  # only accepted topics are ever cached
            return None
        try:
            raw = topic.encode()
        except UnicodeEncodeError:
            return PutMessageStatus.MESSAGE_ILLEGAL
        if not raw or len(raw) > MAX_TOPIC_LENGTH:
            return PutMessageStatus.MESSAGE_ILLEGAL
        return None

    def append_message(self, m: MessageToStore) -> PutMessageResult:
        """Store one message (page cache only; see `put_message` for the SYNC_FLUSH wait)."""
        if self._refusing or m.topic not in self.commit_log._topic_parts:
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
        with self._put_lock:
            cq = self.consume_queues.get(key) or self._create_cq(m.topic, m.queue_id)
            qoff = cq.max_offset if dispatched else 0
            try:
                phys, size = self.commit_log.append_one(m, props, qoff, store_ts)
            except NoSpaceError as e:
                log.error("%s: store marked full", e)
                self.disk_full = True
                return PutMessageResult(PutMessageStatus.SERVICE_NOT_AVAILABLE)
            except AppendError:
                return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL)
            except OSError as e:
                log.error("create mapped file failed: %s", e)
                return PutMessageResult(PutMessageStatus.CREATE_MAPPED_FILE_FAILED)
            # dispatch inline: this is the per-send path (see dispatch.py for the batch one)
            if dispatched:
                cq.append(phys, size, m.tags_code)
                if self.dispatcher.on_arrival is not None:
                    self.dispatcher.notify(cq.topic, cq.queue_id, cq.max_offset, m.tags_code)
            index = self.index
            if index is not None and m.keys and sys_flag & 0xC != 0xC:
                index.pending.append((m.topic, m.keys, phys, store_ts))
                index.pending_keys += len(m.keys)
                if index.pending_keys > _INDEX_DRAIN_THRESHOLD:
                    index.drain()
            self._last_dispatch_ts = store_ts
        self.put_message_times_total += 1
        self.put_message_size_total += size
        return put_result(PutMessageStatus.PUT_OK, phys, size, qoff, 1, store_ts, (phys,),
                          self._msg_id_prefix)

    def append_many(self, entries: Sequence[SingleEntry]) -> list[tuple[int, int, int] | PutMessageStatus]:
        """Store several one-message puts, in order, exactly as `append_message` would store
        each (page cache only); per entry, (commit-log offset, record size, queue offset) or
        the status that refused it.

        A pipelining producer delivers dozens of sends in one read: they share one lock, one
        clock reading and one copy into the mapping (`CommitLog.append_run`), and wake
        long polls once per queue and tag."""
        n = len(entries)
        if self._refusing:
            return [PutMessageStatus.SERVICE_NOT_AVAILABLE] * n
        out: list[tuple[int, int, int] | PutMessageStatus] = [PutMessageStatus.PUT_OK] * n
        todo, props = self._checked(entries, out)
        if not todo:
            return out
        store_ts = _now_ms()
        cl = self.commit_log
        index = self.index
        stored = 0
        size_total = 0
        with self._put_lock:
            k = 0
            while k < len(todo):
                if self._disk_full:  # as append_message would answer each of the rest
                    for i in todo[k:]:
                        out[i] = PutMessageStatus.SERVICE_NOT_AVAILABLE
                    break
                whole = k == 0 and len(todo) == n
                run = entries if whole else [entries[i] for i in todo[k:]]
                queues, qoffs = self._queues_of(run)
                placed = cl.append_run(run, props if whole else props[k:], qoffs, store_ts)
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
                    r = self._append_locked(entries[i], props[k], store_ts)
                    out[i] = r
                    if not isinstance(r, PutMessageStatus):
                        size_total += r[1]
                        stored += 1
                    k += 1
            if stored:
                self._last_dispatch_ts = store_ts
        self.put_message_times_total += stored
        self.put_message_size_total += size_total
        if index is not None and index.pending_keys > _INDEX_DRAIN_THRESHOLD:
            index.drain()
        return out

    def _checked(self, entries: Sequence[SingleEntry], out: list[tuple[int, int, int] | PutMessageStatus]
                 ) -> tuple[list[int], list[bytes]]:
        """(indexes of the entries `append_message` would store, their encoded properties); the
        status of each refused one goes to `out`."""
        topics = self.commit_log._topic_parts
        max_body = self.config.max_message_size
        try:
            props = [e[4].encode() for e in entries]
        except UnicodeEncodeError:
            pass
        else:  # the usual run: every entry fine, checked with C-level loops
            if (max(map(len, props)) <= MAX_PROPERTIES_LENGTH
                    and max([len(e[2]) for e in entries]) <= max_body
                    and all([e[0] in topics for e in entries])):
                return list(range(len(entries))), props
        todo: list[int] = []
        props = []
        for i, e in enumerate(entries):
            if e[0] not in topics:
                refused = self._refuse(e[0])
                if refused is not None:
                    out[i] = refused
                    continue
            try:
                pb = e[4].encode()
            except UnicodeEncodeError:
                out[i] = PutMessageStatus.MESSAGE_ILLEGAL
                continue
            if len(pb) > MAX_PROPERTIES_LENGTH:
                out[i] = PutMessageStatus.PROPERTIES_SIZE_EXCEEDED
            elif len(e[2]) > max_body:
                out[i] = PutMessageStatus.MESSAGE_ILLEGAL
            else:
                todo.append(i)
                props.append(pb)
        return todo, props

    def _queues_of(self, run: Sequence[SingleEntry]) -> tuple[list[ConsumeQueue], list[int]]:
        """The consume queue of each entry and the queue offset it gets (0 for records that
        are not dispatched)."""
        cqs = self.consume_queues
        nxt: dict[ConsumeQueue, int] = {}
        queues: list[ConsumeQueue] = []
        qoffs: list[int] = []
        for e in run:
            cq = cqs.get((e[0], e[1])) or self._create_cq(e[0], e[1])
            queues.append(cq)
            if e[7] & 0xC in _NOT_DISPATCHED:
                qoffs.append(0)
                continue
            q = nxt.get(cq)
            if q is None:
                q = cq.max_offset
            qoffs.append(q)
            nxt[cq] = q + 1
        return queues, qoffs

    def _append_locked(self, e: SingleEntry, props: bytes, store_ts: int
                       ) -> tuple[int, int, int] | PutMessageStatus:
        """One entry of `append_many` through `CommitLog.append_one` (segment roll-over, no space)."""
        topic, queue_id, body, flag, pstr, tcode, keys, sys_flag, born_ts, born_host, reconsume = e
        m = MessageToStore(topic, queue_id, body, flag, pstr, tcode, keys, sys_flag, born_ts, born_host,
                           reconsume, 0, store_ts, True)
        cq = self.consume_queues.get((topic, queue_id)) or self._create_cq(topic, queue_id)
        dispatched = sys_flag & 0xC not in _NOT_DISPATCHED
        qoff = cq.max_offset if dispatched else 0
        try:
            phys, size = self.commit_log.append_one(m, props, qoff, store_ts)
        except NoSpaceError as err:
            log.error("%s: store marked full", err)
            self.disk_full = True
            return PutMessageStatus.SERVICE_NOT_AVAILABLE
        except AppendError:
            return PutMessageStatus.MESSAGE_ILLEGAL
        except OSError as err:
            log.error("create mapped file failed: %s", err)
            return PutMessageStatus.CREATE_MAPPED_FILE_FAILED
        self.dispatcher.dispatch_run([e], [cq], [(phys, size, qoff)], store_ts)
        return phys, size, qoff

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
        store_ts = _now_ms()
        dispatched = is_dispatched(batch.sys_flag)
        with self._put_lock:
            cq = self.consume_queues.get((batch.topic, batch.queue_id)) or self._create_cq(
                batch.topic, batch.queue_id
            )
            qoff = cq.max_offset if dispatched else 0
            try:
                total, offsets, sizes = self.commit_log.append_batch(batch, qoff, store_ts)
            except NoSpaceError as e:
                log.error("%s: store marked full", e)
                self.disk_full = True
                return PutMessageResult(PutMessageStatus.SERVICE_NOT_AVAILABLE)
            except AppendError:
                return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL)
            except OSError as e:
                log.error("create mapped file failed: %s", e)
                return PutMessageResult(PutMessageStatus.CREATE_MAPPED_FILE_FAILED)
            self.dispatcher.dispatch_batch(cq, offsets, sizes, batch.tags_codes, batch.keys, batch.sys_flag,
                                           store_ts)
            self._last_dispatch_ts = store_ts
        self.put_message_times_total += n
        self.put_message_size_total += total
        if self.index is not None and self.index.pending_keys > _INDEX_DRAIN_THRESHOLD:
            self.index.drain()
        return put_result(PutMessageStatus.PUT_OK, offsets[0], total, qoff, n, store_ts, offsets,
                          self._msg_id_prefix)

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
        if await self.wait_flushed(r.wrote_offset + r.wrote_bytes):
            return r
        return PutMessageResult(PutMessageStatus.FLUSH_DISK_TIMEOUT, r.wrote_offset, r.wrote_bytes,
                                r.logical_offset, r.msg_num, r.store_timestamp, r.record_offsets,
                                r.msg_id_prefix)

    async def wait_flushed(self, target: int) -> bool:
        """SYNC_FLUSH: wait until the commit log is durable up to `target` (the group commit);
        False after syncFlushTimeout (the data stays stored: FLUSH_DISK_TIMEOUT)."""
        return await self.flush_future(target)

    def flush_future(self, target: int) -> asyncio.Future[bool]:
        """`wait_flushed` as a plain future, for callers that answer many puts from one
        callback instead of a task per put."""
        gc = self._group_commit
        if gc is None:  # no services: flush right here
            self.commit_log.flush(0)
            done: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
            done.set_result(True)
            return done
        fut = gc.request(target)
        fut.add_done_callback(partial(_log_flush_timeout, target))
        return fut
