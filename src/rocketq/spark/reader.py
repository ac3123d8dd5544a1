"""Batch and streaming readers of the "rocketq" format.

The driver plans offsets (``planning``); each Spark partition is one queue and offset range,
read on an executor with its own connection (or straight from the store files with
``path``) and returned as Arrow RecordBatches built in bulk (``_decode``).

Streaming offsets are ``{"topic": {"broker": {"queueId": next offset}}}``; Spark checkpoints them,
so a restarted query resumes exactly after the last committed micro-batch.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from rocketq.spark._broker import BrokerSession, QueueRef
from rocketq.spark._decode import as_u8, locate, record_start_array, to_record_batch
from rocketq.spark.errors import DataLossError
from rocketq.spark.options import ReadOptions, offsets_to_json
from rocketq.spark.planning import QueueRange, Source, discover, pack, plan_batch, rate_limit, split
from rocketq.spark.schema import RowSchema
from rocketq.spark.store_reader import StoreDirectory

log = logging.getLogger("rocketq.spark")

Key = tuple[str, str, int]


class RocketQPartition(InputPartition):
    """One or more queue ranges read by one Spark task; picklable (it travels to an executor).

    Small ranges are packed together (``planning.pack``): a micro-batch of a few thousand
    messages per queue is one task, not one task per queue.
    """

    def __init__(self, ranges: tuple[tuple[str, str, str, int, int, int], ...]) -> None:
        super().__init__(ranges)
        self.ranges = ranges

    @classmethod
    def of(cls, group: Sequence[QueueRange]) -> RocketQPartition:
        return cls(tuple((r.ref.topic, r.ref.broker, r.ref.addr, r.ref.queue_id, r.start, r.end)
                         for r in group))

    def queue_ranges(self) -> list[QueueRange]:
        return [QueueRange(QueueRef(t, b, q, a), lo, hi) for t, b, a, q, lo, hi in self.ranges]


def open_source(opts: ReadOptions) -> Source:
    if opts.path is not None:
        return StoreDirectory(opts.path, opts.broker_name)
    return BrokerSession(opts.namesrv or "", timeout=opts.timeout_ms / 1000, group=opts.group,
                         security=opts.security)


def close_source(source: Source) -> None:
    if isinstance(source, BrokerSession):
        source.close()


def _loss_handler(opts: ReadOptions) -> Any:
    def on_loss(ref: QueueRef, lo: int, hi: int) -> None:
        text = f"{ref.topic}/{ref.broker}/{ref.queue_id}: offsets [{lo}, {hi}) are no longer available"
        if opts.fail_on_data_loss:
            raise DataLossError(f"{text}; set failOnDataLoss=false to skip them")
        log.warning("%s, skipping them", text)

    return on_loss


def read_partition(opts: ReadOptions, schema: RowSchema, part: RocketQPartition) -> Iterator[pa.RecordBatch]:
    """The rows of one partition, as RecordBatches of a few ten thousand rows."""
    on_loss = _loss_handler(opts)
    if opts.path is not None:
        store = StoreDirectory(opts.path, opts.broker_name)
        for r in part.queue_ranges():
            yield from store.read(r.ref, r.start, r.end, schema, tags=opts.tags, on_loss=on_loss)
        return
    session = BrokerSession(opts.namesrv or "", timeout=opts.timeout_ms / 1000, group=opts.group,
                         security=opts.security)
    try:
        for r in part.queue_ranges():
            yield from _read_range(session, opts, schema, r, on_loss)
    finally:
        session.close()


def _read_range(session: BrokerSession, opts: ReadOptions, schema: RowSchema, r: QueueRange,
                on_loss: Any) -> Iterator[pa.RecordBatch]:
    ref = r.ref
    last = r.start - 1
    for chunk in session.pull_range(ref, r.start, r.end, subscription=opts.sub_expression,
                                    window=opts.pull_window, batch=opts.pull_batch_size, on_loss=on_loss):
        if not chunk.bodies:
            continue
        buf = chunk.bodies[0] if len(chunk.bodies) == 1 else b"".join(chunk.bodies)
        u8 = as_u8(buf)
        lay = locate(u8, record_start_array(u8))
        if lay.n == 0:
            continue
        offsets = lay.queue_offset
        # Rows outside the range (a filtered pull scans past the end) or repeated after a gap
        # re-request are dropped here, so each offset is produced once, in order.
        prev = np.maximum.accumulate(np.concatenate(([last], offsets[:-1])))
        keep = (offsets >= r.start) & (offsets < r.end) & (offsets > prev)
        last = max(last, int(offsets.max()))
        if not bool(keep.all()):
            lay = lay.take(np.flatnonzero(keep))
        batch = to_record_batch(lay, schema, broker=ref.broker, topic=ref.topic, tags_filter=opts.tags)
        if batch.num_rows:
            yield batch


class RocketQBatchReader(DataSourceReader):
    def __init__(self, opts: ReadOptions, schema: RowSchema) -> None:
        self.opts = opts
        self.schema = schema

    def partitions(self) -> list[RocketQPartition]:
        source = open_source(self.opts)
        try:
            ranges = plan_batch(source, self.opts)
        finally:
            close_source(source)
        groups = pack(ranges) if self.opts.min_partitions is None else [[r] for r in ranges]
        log.info("rocketq batch read: %d queue ranges in %d partitions, %d messages", len(ranges),
                 len(groups), sum(r.size for r in ranges))
        return [RocketQPartition.of(g) for g in groups]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, RocketQPartition)
        yield from read_partition(self.opts, self.schema, partition)


def _flatten(doc: dict[str, Any]) -> dict[Key, int]:
    out: dict[Key, int] = {}
    for topic, brokers in doc.items():
        for broker, queues in brokers.items():
            for qid, off in queues.items():
                out[(topic, broker, int(qid))] = int(off)
    return out


class RocketQStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batch reader: offsets per (topic, broker, queue), read limits, availableNow."""

    def __init__(self, opts: ReadOptions, schema: RowSchema) -> None:
        self.opts = opts
        self.schema = schema
        self._source: Source | None = None
        self._addrs: dict[Key, str] = {}
        self._target: dict[Key, int] | None = None  # availableNow: never read past this
        self._committed: dict[Key, int] = {}  # consumerGroup offsets already on the brokers
        self._last_trigger: float | None = None  # monotonic time of the last batch admitted

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_source"] = None
        return state

    def _src(self) -> Source:
        if self._source is None:
            self._source = open_source(self.opts)
        return self._source

    def _queues(self) -> list[QueueRef]:
        refs = discover(self._src(), self.opts, strict=False)
        for r in refs:
            self._addrs[r.key] = r.addr
        return refs

    def _latest(self) -> dict[Key, int]:
        refs = self._queues()
        return {r.key: v for r, v in self._src().max_offsets(refs).items()}

    def initialOffset(self) -> dict[str, Any]:  # noqa: N802 - PySpark API name
        from rocketq.spark.planning import start_offsets

        source = self._src()
        refs = discover(source, self.opts)
        for r in refs:
            self._addrs[r.key] = r.addr
        lows = source.min_offsets(refs)
        highs = source.max_offsets(refs)
        starts = start_offsets(source, self.opts, refs, lows, highs)
        return offsets_to_json({r.key: v for r, v in starts.items()})

    def getDefaultReadLimit(self) -> ReadLimit:  # noqa: N802 - PySpark API name
        if self.opts.max_offsets_per_trigger is not None:
            return ReadMaxRows(self.opts.max_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:  # noqa: N802 - PySpark API name
        self._target = self._latest()

    def _first_offsets(self, keys: list[Key]) -> dict[Key, int]:
        """Where queues that are not in the previous offsets begin (their min offset), as Kafka's
        source reads partitions added while a query runs from their earliest offset."""
        if not keys:
            return {}
        if any(k not in self._addrs for k in keys):
            self._queues()
        refs = [QueueRef(k[0], k[1], k[2], self._addrs.get(k, "")) for k in keys]
        return {r.key: v for r, v in self._src().min_offsets(refs).items()}

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:  # noqa: N802 - PySpark API name
        starts = _flatten(start)
        self._commit_group(starts)
        latest = self._latest() if self._target is None else dict(self._target)
        starts.update(self._first_offsets([k for k in latest if k not in starts]))
        for k, v in starts.items():
            latest[k] = max(latest.get(k, v), v)
        if self._delay_batch(starts, latest):
            return offsets_to_json(starts)  # end == start: Spark runs no batch on this trigger
        if isinstance(limit, ReadMaxRows):
            latest = rate_limit(starts, latest, int(limit.max_rows))
        return offsets_to_json(latest)

    def _delay_batch(self, starts: dict[Key, int], latest: dict[Key, int]) -> bool:
        """minOffsetsPerTrigger with Kafka's rule: hold the trigger back while fewer new messages
        are available, unless maxTriggerDelay has passed since the last batch admitted (the first
        trigger is always admitted). availableNow reads to its target without waiting."""
        least = self.opts.min_offsets_per_trigger
        if least is None or self._target is not None:
            return False
        now = time.monotonic()
        waited = None if self._last_trigger is None else (now - self._last_trigger) * 1000
        if waited is not None and waited < self.opts.max_trigger_delay_ms:
            available = sum(max(0, latest[k] - starts.get(k, latest[k])) for k in latest)
            if available < least:
                return True
        self._last_trigger = now
        return False

    def reportLatestOffset(self) -> dict[str, Any] | None:  # noqa: N802 - PySpark API name
        try:
            return offsets_to_json(self._latest())
        except Exception:
            return None

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[RocketQPartition]:
        starts = _flatten(start)
        ends = _flatten(end)
        if not self._addrs:
            self._queues()
        added = self._first_offsets([k for k in ends if k not in starts])
        for k, first in added.items():
            if first > 0:  # messages of a queue that appeared mid-stream were deleted before we saw it
                _loss_handler(self.opts)(QueueRef(*k), 0, first)
        starts.update(added)
        ranges = []
        for k, hi in sorted(ends.items()):
            lo = starts[k]
            if hi > lo:
                ranges.append(QueueRange(QueueRef(k[0], k[1], k[2], self._addrs.get(k, "")), lo, hi))
        ranges = split(ranges, self.opts.max_records_per_partition, None)
        return [RocketQPartition.of(g) for g in pack(ranges)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, RocketQPartition)
        yield from read_partition(self.opts, self.schema, partition)

    def commit(self, end: dict[str, Any]) -> None:
        self._commit_group(_flatten(end))

    def _commit_group(self, offsets: dict[Key, int]) -> None:
        """consumerGroup: store the end of the last finished micro-batch on the brokers.

        Spark calls ``commit`` for a batch only when it plans the next one, and calls
        ``latestOffset(start)`` only once the batch ending at ``start`` has finished; committing
        from both keeps the group current when the query goes idle or an availableNow run ends.
        """
        group = self.opts.consumer_group
        if group is None or self.opts.path is not None:
            return
        changed = {k: v for k, v in offsets.items() if self._committed.get(k) != v}
        refs = {QueueRef(k[0], k[1], k[2], self._addrs.get(k, "")): v for k, v in changed.items()}
        refs = {r: v for r, v in refs.items() if r.addr}
        if not refs:
            return
        source = self._src()
        assert isinstance(source, BrokerSession)
        try:
            source.commit_offsets(group, refs)
        except Exception as e:  # the checkpoint is the source of truth; the group offset is a courtesy
            log.warning("commit offsets of group %s failed: %s", group, e)
            return
        self._committed.update({r.key: v for r, v in refs.items()})

    def stop(self) -> None:
        if self._source is not None:
            close_source(self._source)
            self._source = None
