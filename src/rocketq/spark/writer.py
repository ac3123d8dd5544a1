"""The sink of the "rocketq" format: DataFrame rows -> messages, batch and streaming.

Columns: ``body`` (binary or string, required), ``topic`` (or option topic), ``keys``, ``tags``
(strings), ``properties`` (map<string,string>), ``queue_id`` (an integer naming the queue, with
``broker`` naming its broker when the topic is on several), ``delay_level`` (RocketMQ's delay
level) and ``delivery_time`` (a timer message's delivery time: a timestamp, or epoch milliseconds);
rows with either are sent one by one, as a batch can carry neither; others are ignored. Each task builds
SEND_BATCH_MESSAGE bodies for a whole Arrow batch with Arrow compute and numpy (properties
strings, record headers, UNIQ_KEYs, queue choice), then keeps ``sendWindow`` batches in flight.

Delivery is at-least-once: a task that fails after some batches were stored is retried by Spark
and sends them again. A streaming query stamps every message with the properties
``SPARK_QUERY_ID`` and ``SPARK_BATCH_ID`` (Spark's micro-batch id), so a consumer can recognise a
replayed micro-batch: the same query and batch id arriving twice.
"""

from __future__ import annotations

import logging
import os
import random
import struct
import time
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamArrowWriter, WriterCommitMessage

from rocketq.codec.message import MAX_PROPERTIES_LENGTH
from rocketq.codec.properties import MessageConst
from rocketq.spark._broker import BrokerSession, QueueRef, SendItem
from rocketq.spark.errors import SparkOptionError
from rocketq.spark.options import WriteOptions

log = logging.getLogger("rocketq.spark")

AUTO_CREATE_TOPIC = "TBW102"
MAX_BATCH_BYTES = 3 << 20  # under the broker's 4 MiB maxMessageSize for a whole batch body
_HEX = np.frombuffer(b"0123456789ABCDEF", dtype=np.uint8)
_ACCEPTED = {"body", "topic", "keys", "tags", "properties", "queue_id", "broker", "delay_level",
             "delivery_time"}
_INTEGER_TYPES = ("tinyint", "smallint", "int", "bigint")


@dataclass
class RocketQCommit(WriterCommitMessage):
    """What one task sent (reported to the driver's commit)."""

    messages: int
    batches: int


def check_columns(schema_string: str, opts: WriteOptions) -> None:
    types = dict(part.split(":", 1) for part in _top_level_fields(schema_string) if ":" in part)
    names = set(types) | {part.split(":", 1)[0] for part in _top_level_fields(schema_string)}
    if "queue_id" in names and types.get("queue_id") not in _INTEGER_TYPES:
        raise SparkOptionError("queue_id", f"the queue_id column must be an integer, not "
                                           f"{types.get('queue_id')}")
    if "broker" in names and "queue_id" not in names:
        raise SparkOptionError("broker", "a broker column names the broker of a queue_id column, "
                                         "which is missing")
    if "delay_level" in names and types.get("delay_level") not in _INTEGER_TYPES:
        raise SparkOptionError("delay_level", f"the delay_level column must be an integer, not "
                                              f"{types.get('delay_level')}")
    if "delivery_time" in names and not (types.get("delivery_time", "").startswith("timestamp")
                                         or types.get("delivery_time") == "bigint"):
        raise SparkOptionError("delivery_time", f"the delivery_time column must be a timestamp or epoch "
                                                f"milliseconds (bigint), not {types.get('delivery_time')}")
    if "queue_id" in names and opts.queue_key_column is not None:
        raise SparkOptionError("queueKeyColumn", "give a queue_id column or queueKeyColumn, not both")
    if "body" not in names:
        raise SparkOptionError("body", "the data to write needs a body column (binary or string)")
    if "topic" not in names and opts.topic is None:
        raise SparkOptionError("topic", "set option topic or give the data a topic column")
    if opts.queue_key_column is not None and opts.queue_key_column not in names:
        raise SparkOptionError("queueKeyColumn", f"no column {opts.queue_key_column!r} in the data")


def _top_level_fields(schema_string: str) -> list[str]:
    """Split Spark's simpleString 'struct<a:int,b:map<string,string>>' at top-level commas."""
    inner = schema_string[len("struct<"):-1] if schema_string.startswith("struct<") else schema_string
    out: list[str] = []
    cur: list[str] = []
    depth = 0
    for ch in inner:
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        if ch == "," and depth == 0:
            out.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    if cur:
        out.append("".join(cur))
    return out


# -- vectorised encoding -------------------------------------------------------------------------


class UniqIds:
    """UNIQ_KEYs for a whole batch at once, MessageClientIDSetter's layout (32 hex digits):
    ip + pid + a random int, ms since the start of the month, and a 16-bit counter. The time
    part advances by one for every 65 536 ids of a batch so ids never repeat within a process."""

    def __init__(self) -> None:
        ip = bytes((127, 0, 0, 1))
        prefix = ip + struct.pack(">HI", os.getpid() & 0xFFFF, random.getrandbits(32))
        self.prefix = prefix.hex().upper().encode()
        self.counter = random.getrandbits(16)
        t = time.localtime()
        self.month_start = int(time.mktime((t.tm_year, t.tm_mon, 1, 0, 0, 0, 0, 0, -1)) * 1000)
        self.last_ms = 0

    def take(self, n: int) -> pa.Array:
        now = max(int(time.time() * 1000) - self.month_start, self.last_ms)
        seq = np.arange(self.counter, self.counter + n, dtype=np.int64)
        self.counter = (self.counter + n) & 0xFFFF
        ms = now + (seq >> 16)
        self.last_ms = int(ms[-1]) + 1 if n else now
        tail = np.empty((n, 12), dtype=np.uint8)
        for i in range(8):
            tail[:, i] = _HEX[(ms >> (28 - 4 * i)) & 0xF]
        for i in range(4):
            tail[:, 8 + i] = _HEX[(seq >> (12 - 4 * i)) & 0xF]
        head = np.frombuffer(self.prefix, dtype=np.uint8)
        rows = np.empty((n, 32), dtype=np.uint8)
        rows[:, :20] = head
        rows[:, 20:] = tail
        offsets = np.arange(0, 32 * n + 1, 32, dtype=np.int32)
        return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(rows)])


def _pair(name: str, col: pa.Array) -> pa.Array:
    """'name\\x01value\\x02' per row, '' where the value is null."""
    col = col.cast(pa.string())
    joined = pc.binary_join_element_wise(name + "\x01", col, "\x02", "")
    return pc.fill_null(joined, "")


def _user_props(col: pa.Array | None) -> pa.Array | None:
    if col is None:
        return None
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks()
    if col.offset:
        col = pa.concat_arrays([col])  # flatten a sliced map so its offsets start at zero
    keys = col.keys.cast(pa.string())
    items = pc.fill_null(col.items.cast(pa.string()), "")
    entries = pc.binary_join_element_wise(keys, "\x01", items, "\x02", "")
    lists = pa.ListArray.from_arrays(col.offsets, entries)
    return pc.fill_null(pc.binary_join(lists, ""), "")


def java_hashes(col: pa.Array) -> npt.NDArray[np.int64]:
    """String.hashCode() of each value (over UTF-8 bytes: equal to Java's for ASCII); 0 for null."""
    col = pc.fill_null(col.cast(pa.string()), "")
    n = len(col)
    bufs = col.buffers()
    off = np.frombuffer(bufs[1], dtype=np.int32, count=n + 1 + col.offset)[col.offset:].astype(np.int64)
    data = np.frombuffer(bufs[2], dtype=np.uint8) if bufs[2] is not None else np.zeros(0, np.uint8)
    lens = np.diff(off)
    out = np.zeros(n, dtype=np.int64)
    total = int(off[-1] - off[0])
    if total == 0:
        return out
    maxlen = int(lens.max())
    pow31 = np.ones(maxlen, dtype=np.uint32)
    for i in range(1, maxlen):
        pow31[i] = np.uint32((int(pow31[i - 1]) * 31) & 0xFFFFFFFF)
    seg = data[off[0] : off[-1]].astype(np.uint32)
    row = np.repeat(np.arange(n), lens)
    exp = (off[1:][row] - 1 - np.arange(off[0], off[-1]))
    contrib = seg * pow31[exp]
    nonempty = lens > 0
    if nonempty.any():
        sums = np.add.reduceat(contrib, (off[:-1] - off[0])[nonempty])
        out[nonempty] = sums.astype(np.uint32).view(np.int32)
    return out


def delay_levels(batch: pa.RecordBatch) -> npt.NDArray[np.int64] | None:
    """Each row's delay level from a ``delay_level`` column (0 for null or none), or None without
    the column. RocketMQ's levels start at 1; a negative one fails the write."""
    names = batch.schema.names
    if "delay_level" not in names:
        return None
    column = pc.fill_null(batch.column(names.index("delay_level")), 0)
    levels: npt.NDArray[np.int64] = np.asarray(column.to_numpy(zero_copy_only=False), dtype=np.int64)
    if len(levels) and int(levels.min()) < 0:
        raise SparkOptionError("delay_level", f"a delay level is >= 1 (0 or null: no delay), not "
                                              f"{int(levels.min())}")
    return levels


def delivery_times(batch: pa.RecordBatch) -> npt.NDArray[np.int64] | None:
    """Each row's timer delivery time in epoch ms from a ``delivery_time`` column (0 for null), or
    None without the column. A timestamp column is read in UTC, as Spark stores it."""
    names = batch.schema.names
    if "delivery_time" not in names:
        return None
    column = batch.column(names.index("delivery_time"))
    if pa.types.is_timestamp(column.type):
        column = pc.cast(pc.cast(column, pa.timestamp("ms", column.type.tz), safe=False), pa.int64())
    times: npt.NDArray[np.int64] = np.asarray(pc.fill_null(column, 0).to_numpy(zero_copy_only=False),
                                              dtype=np.int64)
    if len(times) and int(times.min()) < 0:
        raise SparkOptionError("delivery_time", f"a delivery time is after 1970, not {int(times.min())} ms")
    return times


def single_properties(levels: npt.NDArray[np.int64] | None,
                      times: npt.NDArray[np.int64] | None, n: int) -> list[str | None]:
    """Per row, the property text a row sent alone appends (DELAY or TIMER_DELIVER_MS), or None for
    a row that goes in a batch. A row with both fails, as the producer refuses such a message."""
    extra: list[str | None] = [None] * n
    if levels is not None:
        for row in np.flatnonzero(levels).tolist():
            extra[row] = f"{MessageConst.PROPERTY_DELAY_TIME_LEVEL}\x01{int(levels[row])}\x02"
    if times is not None:
        for row in np.flatnonzero(times).tolist():
            if extra[row] is not None:
                raise SparkOptionError("delivery_time", "a row gives both a delay_level and a "
                                                        "delivery_time; choose one")
            extra[row] = f"{MessageConst.PROPERTY_TIMER_DELIVER_MS}\x01{int(times[row])}\x02"
    return extra


def chosen_queues(topic: str, queues: list[QueueRef], queue_ids: pa.Array,
                  brokers: pa.Array | None) -> npt.NDArray[np.int64]:
    """Per row, the index in ``queues`` of the queue its ``queue_id`` (and ``broker``) name, or -1
    for a null queue_id (the sink's usual choice). A queue id is ambiguous on a topic several
    brokers hold, so there the row must name its broker; a queue that is not one of the topic's
    writable queues fails the write, naming the ones there are."""
    index = {(q.broker, q.queue_id): i for i, q in enumerate(queues)}
    held = sorted({q.broker for q in queues})
    ids = queue_ids.to_pylist()
    names = brokers.to_pylist() if brokers is not None else [None] * len(ids)
    out = np.full(len(ids), -1, dtype=np.int64)
    for row, (qid, broker) in enumerate(zip(ids, names, strict=True)):
        if qid is None:
            continue
        if broker is None:
            if len(held) > 1:
                raise SparkOptionError("queue_id", f"topic {topic!r} is on brokers {', '.join(held)}: "
                                                   f"give the row's broker in a broker column")
            broker = held[0]
        i = index.get((broker, qid))
        if i is None:
            ids_there = sorted(q.queue_id for q in queues if q.broker == broker)
            where = f"its writable queues on {broker!r} are {ids_there}" if ids_there else \
                f"the topic is on {', '.join(held)}"
            raise SparkOptionError("queue_id", f"topic {topic!r} has no writable queue {qid} on broker "
                                               f"{broker!r}: {where}")
        out[row] = i
    return out


def _bodies(batch: pa.RecordBatch) -> pa.Array:
    body = batch.column(batch.schema.names.index("body"))
    return pc.fill_null(body.cast(pa.binary()), b"")


def message_properties(batch: pa.RecordBatch, uniq: UniqIds, extra: dict[str, str]) -> pa.Array:
    """Each row's properties text ('name\x01value\x02' ...): keys, tags, a new UNIQ_KEY, the
    user's map and ``extra``, as a binary array."""
    n = batch.num_rows
    names = batch.schema.names

    def col(name: str) -> pa.Array | None:
        return batch.column(names.index(name)) if name in names else None

    parts = [_pair(name, c) for name, c in (("KEYS", col("keys")), ("TAGS", col("tags"))) if c is not None]
    parts.append(pc.binary_join_element_wise("UNIQ_KEY\x01", uniq.take(n), "\x02", ""))
    user = _user_props(col("properties"))
    if user is not None:
        parts.append(user)
    for k, v in extra.items():
        parts.append(pa.array([f"{k}\x01{v}\x02"] * n, pa.string()))
    props = pc.binary_join_element_wise(*parts, "").cast(pa.binary())
    plen = pc.binary_length(props).to_numpy(zero_copy_only=False)
    if n and int(plen.max()) > MAX_PROPERTIES_LENGTH:
        raise SparkOptionError("properties", f"a message's properties exceed {MAX_PROPERTIES_LENGTH} bytes")
    return props


def encode_records(batch: pa.RecordBatch, props: pa.Array) -> pa.Array:
    """One batch-body record (§3.4) per row, as a binary array whose data buffer is the rows'
    records back to back: TOTALSIZE MAGIC BODYCRC FLAG BODYLEN BODY PROPLEN PROPERTIES."""
    n = batch.num_rows
    body = _bodies(batch)
    plen = pc.binary_length(props).to_numpy(zero_copy_only=False).astype(np.int64)
    blen = pc.binary_length(body).to_numpy(zero_copy_only=False).astype(np.int64)
    head = np.zeros((n, 5), dtype=">i4")
    head[:, 0] = 20 + blen + 2 + plen
    head[:, 4] = blen
    fixed20 = np.arange(0, 20 * n + 1, 20, dtype=np.int32)
    fixed2 = np.arange(0, 2 * n + 1, 2, dtype=np.int32)
    heads = pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(fixed20), pa.py_buffer(head.tobytes())])
    plens = pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(fixed2),
                                                   pa.py_buffer(plen.astype(">i2").tobytes())])
    return pc.binary_join_element_wise(heads, body, plens, props, b"")


def _chunks(
    records: pa.Array, rows: npt.NDArray[np.int64], batch_size: int
) -> Iterator[tuple[memoryview, int]]:
    """Batch bodies of at most ``batch_size`` messages / MAX_BATCH_BYTES from the given rows."""
    if len(rows) == 0:
        return
    picked = records.take(pa.array(rows)) if len(rows) != len(records) or rows[0] != 0 else records
    bufs = picked.buffers()
    off = np.frombuffer(bufs[1], dtype=np.int32, count=len(picked) + 1 + picked.offset)[picked.offset:]
    data = memoryview(bufs[2]) if bufs[2] is not None else memoryview(b"")
    i, n = 0, len(picked)
    while i < n:
        j = min(n, i + batch_size)
        # Cut earlier when the bytes would pass the limit (always at least one message).
        limit = int(off[i]) + MAX_BATCH_BYTES
        k = int(np.searchsorted(off[i + 1 : j + 1], limit, side="right"))
        j = i + max(1, k)
        yield data[off[i] : off[j]], j - i
        i = j


class _Sender:
    """Per-task state: connection, topic queues, ids, round-robin cursor."""

    def __init__(self, opts: WriteOptions, extra: dict[str, str]) -> None:
        self.opts = opts
        self.extra = extra
        self.session = BrokerSession(opts.namesrv, timeout=opts.timeout_ms / 1000, security=opts.security)
        self.pipeline = self.session.sender(opts.producer_group, opts.send_window)
        self.queues: dict[str, list[QueueRef]] = {}
        self.uniq = UniqIds()
        self.rr = random.randrange(1 << 16)

    def _queues(self, topic: str) -> list[QueueRef]:
        qs = self.queues.get(topic)
        if qs is None:
            qs = self.session.queues(topic, writable=True)
            if not qs:
                # RocketMQ producers send a new topic through TBW102's route; a broker with
                # autoCreateTopicEnable creates it (4 queues) on the first send.
                qs = [QueueRef(topic, r.broker, r.queue_id, r.addr)
                      for r in self.session.queues(AUTO_CREATE_TOPIC, writable=True) if r.queue_id < 4]
            if not qs:
                raise SparkOptionError("topic", f"topic {topic!r} does not exist and cannot be auto-created")
            self.queues[topic] = qs
        return qs

    def write(self, batch: pa.RecordBatch) -> None:
        if batch.num_rows == 0:
            return
        names = batch.schema.names
        if "topic" in names:
            topics = batch.column(names.index("topic"))
            for t in pc.unique(topics).to_pylist():
                topic = t if t is not None else self.opts.topic
                if topic is None:
                    raise SparkOptionError("topic", "a row has a null topic and option topic is not set")
                mask = pc.is_null(topics) if t is None else pc.fill_null(pc.equal(topics, t), False)
                self._write_topic(topic, batch.filter(mask))
        else:
            assert self.opts.topic is not None
            self._write_topic(self.opts.topic, batch)

    def _write_topic(self, topic: str, batch: pa.RecordBatch) -> None:
        queues = self._queues(topic)
        props = message_properties(batch, self.uniq, self.extra)
        n = batch.num_rows
        requests: list[SendItem] = []
        names = batch.schema.names
        key = self.opts.queue_key_column
        qidx: npt.NDArray[np.int64] | None = None  # per row: an index into queues, -1 for any
        if "queue_id" in names:
            broker = batch.column(names.index("broker")) if "broker" in names else None
            qidx = chosen_queues(topic, queues, batch.column(names.index("queue_id")), broker)
        elif key is not None:
            qidx = np.abs(java_hashes(batch.column(names.index(key)))) % len(queues)
        rows = np.arange(n, dtype=np.int64)
        levels, times = delay_levels(batch), delivery_times(batch)
        if levels is not None or times is not None:
            extra = single_properties(levels, times, n)
            requests += self._singles(queues, batch, props, qidx, extra)
            rows = rows[np.array([e is None for e in extra], dtype=bool)]
        records = encode_records(batch, props)
        if qidx is not None:
            order = rows[np.argsort(qidx[rows], kind="stable")]
            bounds = np.searchsorted(qidx[order], np.arange(-1, len(queues) + 1))
            for q in range(-1, len(queues)):
                queue_rows = order[bounds[q + 1] : bounds[q + 2]]
                for body, count in _chunks(records, queue_rows, self.opts.batch_size):
                    requests.append((queues[q if q >= 0 else self._next_rr(len(queues))], body, count, None))
        else:
            for body, count in _chunks(records, rows, self.opts.batch_size):
                requests.append((queues[self._next_rr(len(queues))], body, count, None))
        self.pipeline.submit(requests)

    def _next_rr(self, size: int) -> int:
        self.rr += 1
        return self.rr % size

    def _singles(self, queues: list[QueueRef], batch: pa.RecordBatch, props: pa.Array,
                 qidx: npt.NDArray[np.int64] | None, extra: list[str | None]) -> list[SendItem]:
        """The delayed and timed rows, one SEND_MESSAGE_V2 each with its DELAY or TIMER_DELIVER_MS."""
        single = [row for row, e in enumerate(extra) if e is not None]
        if not single:
            return []
        picked = pa.array(single, pa.int64())
        bodies = _bodies(batch).take(picked).to_pylist()
        texts = props.take(picked).to_pylist()
        out: list[SendItem] = []
        for row, body, text in zip(single, bodies, texts, strict=True):
            q = int(qidx[row]) if qidx is not None and qidx[row] >= 0 else self._next_rr(len(queues))
            out.append((queues[q], body, 1, text.decode() + str(extra[row])))
        return out

    def finish(self) -> RocketQCommit:
        sent = self.pipeline.flush()
        return RocketQCommit(sent, self.pipeline.requests)

    def close(self) -> None:
        self.pipeline.cancel()
        self.session.close()


def _write_all(
    opts: WriteOptions, iterator: Iterator[pa.RecordBatch], extra: dict[str, str]
) -> RocketQCommit:
    sender = _Sender(opts, extra)
    try:
        for batch in iterator:
            sender.write(batch)
        return sender.finish()
    finally:
        sender.close()


class RocketQBatchWriter(DataSourceArrowWriter):
    def __init__(self, opts: WriteOptions, schema_string: str) -> None:
        check_columns(schema_string, opts)
        self.opts = opts

    def write(self, iterator: Iterator[pa.RecordBatch]) -> RocketQCommit:
        return _write_all(self.opts, iterator, {})

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        total = sum(m.messages for m in messages if isinstance(m, RocketQCommit))
        log.info("rocketq write committed: %d messages", total)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        total = sum(m.messages for m in messages if isinstance(m, RocketQCommit))
        log.warning("rocketq write aborted after %d messages were stored (at-least-once)", total)


def _stream_tags() -> dict[str, str]:
    """The query and micro-batch ids Spark sets as local properties of a streaming task."""
    try:
        from pyspark import TaskContext

        ctx = TaskContext.get()
        if ctx is None:
            return {}
        out = {}
        batch_id = ctx.getLocalProperty("streaming.sql.batchId")
        query_id = ctx.getLocalProperty("sql.streaming.queryId")
        if batch_id is not None:
            out["SPARK_BATCH_ID"] = str(batch_id)
        if query_id is not None:
            out["SPARK_QUERY_ID"] = str(query_id)
        return out
    except Exception:  # not in a Spark task (tests calling write() directly)
        return {}


class RocketQStreamWriter(DataSourceStreamArrowWriter):
    def __init__(self, opts: WriteOptions, schema_string: str) -> None:
        check_columns(schema_string, opts)
        self.opts = opts

    def write(self, iterator: Iterator[pa.RecordBatch]) -> RocketQCommit:
        return _write_all(self.opts, iterator, _stream_tags())

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        total = sum(m.messages for m in messages if isinstance(m, RocketQCommit))
        log.info("rocketq stream write: batch %d committed, %d messages", batchId, total)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        log.warning("rocketq stream write: batch %d aborted (its messages may be stored twice)", batchId)
