"""The broker's Prometheus endpoint (``metricsPort``): RocketMQ 5's metric names, read at scrape time.

Nothing here runs per message. A custom collector reads what the broker already keeps when
Prometheus asks: BrokerStats' counters, the consume queues' offsets, the committed consumer offsets,
the hold service, the client tables, the store's offsets and files. Per-topic bytes come from the
20-byte consume-queue entries (the size field), summed with numpy over the new entries since the
previous scrape. The two things that cannot be read afterwards, request latencies and flush
latencies, are observed as they happen: the remoting server calls ``requests.observe`` once per
answered request, and the commit log's flush is timed in its worker thread (one call per flush,
not per message).

A scrape reads everything into a plain snapshot on the event loop (the tables live there), then
builds and formats the text in a worker thread: with thousands of queues and groups the label
formatting is most of the work, and the loop must keep serving meanwhile.

Counter semantics (all count from this broker's start):

* ``rocketmq_messages_in_total`` / ``rocketmq_throughput_in_total`` {topic}: messages and stored
  record bytes appended to the topic's consume queues.
* ``rocketmq_messages_out_total`` / ``rocketmq_throughput_out_total`` {topic, consumer_group}: how
  far the group's committed offsets moved forward, i.e. messages consumed and acknowledged. Groups
  known at start count from their offsets then; a group first seen later counts from its queues'
  first retained offset (so a new group reading a topic from the beginning counts every message;
  one that starts at the last offset shows the skipped backlog in the series' first value, which
  Prometheus' rate() treats as the baseline, not as traffic).
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.process_collector import ProcessCollector

from rocketq.broker.offset_manager import TOPIC_GROUP_SEPARATOR
from rocketq.remoting.http import HttpResponder, RequestStats, request_metric_families
from rocketq.store import retention

if TYPE_CHECKING:
    from rocketq.broker.controller import BrokerController

__all__ = ["FLUSH_LATENCY_BUCKETS_MS", "BrokerMetrics", "LatencyHistogram"]

log = logging.getLogger("rocketq.broker.metrics")

FLUSH_LATENCY_BUCKETS_MS: tuple[float, ...] = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 5000)
STORAGE_WALK_TTL = 10.0  # s: a scraper polling every second must not walk the store every second


class LatencyHistogram:
    """A thread-safe millisecond histogram for events far rarer than messages (flushes)."""

    __slots__ = ("_lock", "bounds_ms", "counts", "sum_ms")

    def __init__(self, bounds_ms: tuple[float, ...]) -> None:
        self.bounds_ms = bounds_ms
        self.counts = [0] * (len(bounds_ms) + 1)
        self.sum_ms = 0.0
        self._lock = threading.Lock()

    def observe(self, seconds: float) -> None:
        ms = seconds * 1000.0
        i = 0
        bounds = self.bounds_ms
        while i < len(bounds) and ms > bounds[i]:
            i += 1
        with self._lock:
            self.counts[i] += 1
            self.sum_ms += ms

    def snapshot(self) -> tuple[list[tuple[str, int]], float]:
        """Cumulative (le, count) pairs ending with +Inf, and the sum in ms."""
        with self._lock:
            counts, total = list(self.counts), self.sum_ms
        les = [str(int(b)) if float(b).is_integer() else repr(b) for b in self.bounds_ms] + ["+Inf"]
        out, running = [], 0
        for le, c in zip(les, counts, strict=True):
            running += c
            out.append((le, running))
        return out, total


def _bytes_between(cq: Any, lo: int, hi: int) -> int:
    """Sum of the record sizes of consume-queue entries [lo, hi), one numpy sum per file."""
    total = 0
    i = lo
    while i < hi:
        view = cq.entries(i, hi - i)
        if view is None:  # that file aged out: its sizes are gone, skip to the next file
            i = cq.roll_next_file(i)
            continue
        n = len(view)
        if n == 0:
            break
        total += int(view["size"].sum(dtype=np.int64))
        del view  # a live view pins the mapping
        i += n
    return total


class _Progress:
    """Per-queue counters derived from offsets that only move forward (a move back re-bases)."""

    __slots__ = ("by_queue",)

    def __init__(self) -> None:
        # key -> [offset counted up to, messages, bytes]
        self.by_queue: dict[Any, list[int]] = {}

    def advance(self, key: Any, offset: int, cq: Any, base: int) -> None:
        st = self.by_queue.get(key)
        if st is None:
            st = self.by_queue[key] = [min(base, offset), 0, 0]
        seen = st[0]
        if offset > seen:
            st[1] += offset - seen
            if cq is not None:
                st[2] += _bytes_between(cq, seen, offset)
            st[0] = offset
        elif offset < seen:  # offset reset by an admin, or a queue re-created
            st[0] = offset

    def retain(self, live: set[Any]) -> None:
        for key in [k for k in self.by_queue if k not in live]:
            del self.by_queue[key]


@dataclass(frozen=True, slots=True)
class _Snapshot:
    """Everything a scrape exports, read on the event loop in one go; formatting it (the costly
    part: tens of thousands of label strings) then runs in a worker thread."""

    base: tuple[str, str, str]  # cluster, node_type, node_id
    topic_in: dict[str, tuple[int, int]]
    topic_out: dict[tuple[str, str], tuple[int, int]]
    lag: list[tuple[str, str, int, int, int]]  # topic, group, queue id, messages behind, age ms
    consumers: list[tuple[str, int]]
    producers: list[tuple[str, int]]
    gauges: list[tuple[bool, str, str, float]]  # is counter, name, help, value
    flush: tuple[list[tuple[str, int]], float]
    requests: RequestStats
    store_root: str | None
    pop: dict[tuple[str, str], tuple[int, int]]  # (group, topic) -> (in flight, due for revive)


class BrokerMetrics:
    """Owns the observers, the derived counters and the HTTP endpoint of one broker."""

    def __init__(self, controller: BrokerController) -> None:
        self._ctl = controller
        self.requests = RequestStats()
        self.flush_latency = LatencyHistogram(FLUSH_LATENCY_BUCKETS_MS)
        self._process = ProcessCollector(registry=None)
        self.endpoint: HttpResponder | None = None
        self._in = _Progress()
        self._out = _Progress()
        self._flush_target: Any = None
        self._storage_walk: tuple[float, int] = (0.0, 0)

    @property
    def address(self) -> str | None:
        ep = self.endpoint
        return ep.address if ep is not None and ep.is_serving else None

    def render(self) -> tuple[bytes, str]:
        """The exposition, all on the calling thread (tests, tools)."""
        return self.format(self.snapshot())

    async def render_async(self) -> tuple[bytes, str]:
        """The scrape route: read on the loop, format in a worker thread."""
        snap = self.snapshot()
        return await asyncio.to_thread(self.format, snap)

    async def start(self, host: str, port: int) -> None:
        self.prime()
        self._install_observers()
        self.endpoint = HttpResponder({"/metrics": self.render_async}, host, port)
        await self.endpoint.start()

    async def stop(self) -> None:
        self._remove_observers()
        if self.endpoint is not None:
            await self.endpoint.stop()

    # -- observers ---------------------------------------------------------------------------

    def _install_observers(self) -> None:
        # The remoting server's per-request hook (see docs/operations.md: set_request_observer).
        setter = getattr(self._ctl.server, "set_request_observer", None)
        if setter is not None:
            setter(self.requests.observe)
        store = self._ctl.store
        if store is None:
            return
        commit_log = store.commit_log
        inner = commit_log.flush
        histogram = self.flush_latency

        def timed_flush(least_pages: int = 0) -> int:
            before = commit_log.flushed_offset
            started = time.perf_counter()
            where: int = inner(least_pages)
            if where != before:  # only flushes that wrote something are latencies worth keeping
                histogram.observe(time.perf_counter() - started)
            return where

        # The store has no flush hook yet: time its flush in place (per flush, in its worker thread).
        commit_log.flush = timed_flush  # type: ignore[method-assign]
        self._flush_target = commit_log

    def _remove_observers(self) -> None:
        setter = getattr(self._ctl.server, "set_request_observer", None)
        if setter is not None:
            setter(None)
        target, self._flush_target = self._flush_target, None
        if target is not None:
            try:
                del target.flush
            except AttributeError:
                pass

    # -- derived counters ----------------------------------------------------------------------

    def prime(self) -> None:
        """Count from now: what the queues and groups hold at start is the baseline."""
        store = self._ctl.store
        if store is None:
            return
        for key, cq in list(store.consume_queues.items()):
            self._in.by_queue[key] = [cq.max_offset, 0, 0]
        for tg, queues in self._ctl.offset_manager.offset_table.items():
            topic, _, group = tg.partition(TOPIC_GROUP_SEPARATOR)
            for qid, off in queues.items():
                self._out.by_queue[(topic, group, qid)] = [off, 0, 0]

    def update_progress(self) -> None:
        """Bring the in/out counters up to the current offsets (called at every scrape)."""
        store = self._ctl.store
        if store is None:
            return
        cqs = store.consume_queues
        live_out: set[Any] = set()
        for tg, queues in list(self._ctl.offset_manager.offset_table.items()):
            topic, _, group = tg.partition(TOPIC_GROUP_SEPARATOR)
            for qid, committed in list(queues.items()):
                cq = cqs.get((topic, qid))
                key = (topic, group, qid)
                live_out.add(key)
                self._out.advance(key, committed, cq, cq.min_offset if cq is not None else committed)
        self._out.retain(live_out)
        live_in: set[Any] = set()
        for queue_key, cq in list(cqs.items()):
            live_in.add(queue_key)
            self._in.advance(queue_key, cq.max_offset, cq, cq.min_offset)
        self._in.retain(live_in)

    def snapshot(self) -> _Snapshot:
        """Read what a scrape exports (on the event loop: the tables it reads live there)."""
        ctl = self._ctl
        store = ctl.store
        self.update_progress()
        topic_in: dict[str, tuple[int, int]] = {}
        for (topic, _), (_, n, b) in self._in.by_queue.items():
            m, size = topic_in.get(topic, (0, 0))
            topic_in[topic] = (m + n, size + b)
        topic_out: dict[tuple[str, str], tuple[int, int]] = {}
        for (topic, group, _), (_, n, b) in self._out.by_queue.items():
            m, size = topic_out.get((topic, group), (0, 0))
            topic_out[(topic, group)] = (m + n, size + b)
        lag: list[tuple[str, str, int, int, int]] = []
        if store is not None:
            now_ms = int(time.time() * 1000)
            cqs = store.consume_queues
            for tg, queues in list(ctl.offset_manager.offset_table.items()):
                topic, _, group = tg.partition(TOPIC_GROUP_SEPARATOR)
                for qid, committed in list(queues.items()):
                    cq = cqs.get((topic, qid))
                    done = max(committed, 0)
                    behind = max(0, cq.max_offset - done) if cq is not None else 0
                    age = 0
                    if behind:
                        ts = store.get_message_store_timestamp(topic, qid, done)
                        age = max(0, now_ms - ts) if ts > 0 else 0
                    lag.append((topic, group, qid, behind, age))
        consumers = [(g, len(c.channel_info_table)) for g, c in ctl.consumer_manager.consumer_table.items()]
        producers = [(g, len(c)) for g, c in ctl.producer_manager.group_channel_table.items()]
        pop: dict[tuple[str, str], tuple[int, int]] = {}
        pop_service = getattr(ctl, "pop_service", None)  # None before the store is ready
        if pop_service is not None:
            state = pop_service.checkpoints.pop_state(int(time.time() * 1000))
            for (group, topic, _), (n, due) in state.items():
                m, d = pop.get((group, topic), (0, 0))
                pop[(group, topic)] = (m + n, d + due)
        return _Snapshot(
            base=(ctl.cluster_name, "broker", ctl.broker_name),
            topic_in=topic_in, topic_out=topic_out, lag=lag, consumers=consumers, producers=producers,
            gauges=self._gauges(), flush=self.flush_latency.snapshot(), requests=self.requests.snapshot(),
            store_root=ctl.store_config.store_path_root_dir if store is not None else None, pop=pop,
        )

    def _gauges(self) -> list[tuple[bool, str, str, float]]:
        ctl = self._ctl
        stats = ctl.stats
        out: list[tuple[bool, str, str, float]] = [
            (True, "rocketmq_broker_put_messages", "Messages put (all topics)", stats.put_total),
            (True, "rocketmq_broker_get_messages", "Messages pulled (all topics)", stats.get_total),
            (True, "rocketmq_broker_put_failed", "Sends the store refused", stats.put_failed),
            (False, "rocketmq_broker_put_tps", "Put TPS over the last 10 s", stats.tps(10, 1)),
            (False, "rocketmq_broker_get_tps", "Get TPS over the last 10 s", stats.tps(10, 2)),
            (False, "rocketmq_broker_permission", "brokerPermission (PermName bits)",
             ctl.broker_config.broker_permission),
            (False, "rocketmq_long_polling_held_requests", "Pull requests held by long polling",
             ctl.hold_service.held_count()),
            (False, "rocketmq_remoting_connections", "Open client connections", len(ctl.server.channels)),
            (False, "rocketmq_topics", "Topics configured on this broker", len(ctl.topic_manager.table)),
        ]
        store = ctl.store
        if store is None:
            return out
        replication = ctl.replication
        if replication is not None:  # rocketq's names: RocketMQ 4.x exports no replication metrics
            ha = replication.runtime_info()
            out += [
                (False, "rocketq_replication_lag_bytes",
                 "Commit-log bytes not yet replicated: a master's furthest slave, a slave's own",
                 replication.lag_bytes()),
                (False, "rocketq_replication_slaves", "Slaves connected to this master (0 on a slave)",
                 len(ha["haConnectionInfo"])),
                (False, "rocketq_replication_in_sync_slaves", "Slaves within haSlaveFallbehindMax",
                 ha["inSyncSlaveNums"]),
                (False, "rocketq_replication_transfer_bytes_per_second",
                 "Replication bytes per second (sent by a master, received by a slave)",
                 sum(c["transferredByteInSecond"] for c in ha["haConnectionInfo"])
                 + ha["haClientRuntimeInfo"]["transferredByteInSecond"]),
            ]
        cl = store.commit_log
        earliest = _earliest_store_ts(cl)
        out += [
            (False, "rocketmq_storage_commitlog_size_bytes", "Commit-log bytes held (max - min offset)",
             cl.max_offset - cl.min_offset),
            (False, "rocketmq_storage_commitlog_max_offset", "Commit-log max physical offset", cl.max_offset),
            (False, "rocketmq_storage_flush_behind_bytes", "Commit-log bytes not yet flushed",
             max(0, cl.max_offset - cl.flushed_offset)),
            (False, "rocketmq_storage_disk_full", "1 while the store refuses puts (disk full)",
             int(store.disk_full)),
            (False, "rocketmq_storage_message_reserve_time", "Age in ms of the oldest stored message",
             max(0, int(time.time() * 1000) - earliest) if earliest > 0 else 0),
            (True, "rocketmq_storage_put_bytes", "Record bytes appended (all topics)",
             store.put_message_size_total),
            (True, "rocketmq_storage_flushes", "Commit-log flushes that wrote data", cl.flush_count),
        ]
        if ctl.timer_service is not None:  # timer messages: pending, lag (broker/timer.py)
            out += ctl.timer_service.gauges()
        if ctl.replicas_manager is not None:  # controller mode: role, epoch, SyncStateSet
            out += ctl.replicas_manager.gauges()
        return out

    def format(self, snap: _Snapshot) -> tuple[bytes, str]:
        """The Prometheus text of a snapshot (thread-safe: touches nothing of the broker's)."""
        families = list(_families(snap, self))
        families.extend(self._process.collect())
        return generate_latest(_Families(families)), CONTENT_TYPE_LATEST

    def storage_size(self) -> int:
        """Bytes the store directory takes on disk (allocated blocks: segments are sparse)."""
        now = time.monotonic()
        at, size = self._storage_walk
        if now - at < STORAGE_WALK_TTL and at > 0:
            return size
        size = _disk_usage(self._ctl.store_config.store_path_root_dir)
        self._storage_walk = (now, size)
        return size



class _Families:
    """What generate_latest needs of a registry: collect()."""

    def __init__(self, families: list[Any]) -> None:
        self._families = families

    def collect(self) -> list[Any]:
        return self._families


def _families(snap: _Snapshot, metrics: BrokerMetrics) -> Iterator[Any]:
    base_names = ["cluster", "node_type", "node_id"]
    base = list(snap.base)

    def fam(kind: type, name: str, text: str, labels: tuple[str, ...] = ()) -> Any:
        return kind(name, text, labels=[*base_names, *labels])

    msgs_in = fam(CounterMetricFamily, "rocketmq_messages_in", "Messages stored, by topic", ("topic",))
    bytes_in = fam(CounterMetricFamily, "rocketmq_throughput_in", "Stored record bytes, by topic", ("topic",))
    for topic, (n, b) in sorted(snap.topic_in.items()):
        msgs_in.add_metric([*base, topic], n)
        bytes_in.add_metric([*base, topic], b)
    msgs_out = fam(CounterMetricFamily, "rocketmq_messages_out",
                   "Messages consumed (committed offsets moved forward), by topic and consumer group",
                   ("topic", "consumer_group"))
    bytes_out = fam(CounterMetricFamily, "rocketmq_throughput_out",
                    "Stored record bytes consumed, by topic and consumer group", ("topic", "consumer_group"))
    for (topic, group), (n, b) in sorted(snap.topic_out.items()):
        msgs_out.add_metric([*base, topic, group], n)
        bytes_out.add_metric([*base, topic, group], b)
    yield from (msgs_in, bytes_in, msgs_out, bytes_out)

    lag = fam(GaugeMetricFamily, "rocketmq_consumer_lag_messages",
              "Messages stored but not yet consumed (max offset - committed offset)",
              ("topic", "consumer_group", "queue_id"))
    lag_ms = fam(GaugeMetricFamily, "rocketmq_consumer_lag_latency",
                 "Age in ms of the oldest unconsumed message", ("topic", "consumer_group", "queue_id"))
    for topic, group, qid, behind, age in sorted(snap.lag):
        labels = [*base, topic, group, str(qid)]
        lag.add_metric(labels, behind)
        lag_ms.add_metric(labels, age)
    inflight = fam(GaugeMetricFamily, "rocketq_pop_inflight_messages",
                   "Popped and not yet acked messages, by pop consumer group and topic", ("group", "topic"))
    revive = fam(GaugeMetricFamily, "rocketq_pop_revive_backlog",
                 "Popped messages past their invisible time, waiting for the revive service",
                 ("group", "topic"))
    for (group, topic), (n, due) in sorted(snap.pop.items()):
        inflight.add_metric([*base, group, topic], n)
        revive.add_metric([*base, group, topic], due)
    yield from (inflight, revive)
    consumers = fam(GaugeMetricFamily, "rocketmq_consumer_connections",
                    "Consumer connections, by consumer group", ("consumer_group",))
    for group, n in sorted(snap.consumers):
        consumers.add_metric([*base, group], n)
    producers = fam(GaugeMetricFamily, "rocketmq_producer_connections",
                    "Producer connections, by producer group", ("producer_group",))
    for group, n in sorted(snap.producers):
        producers.add_metric([*base, group], n)
    yield from (lag, lag_ms, consumers, producers)

    gauges = list(snap.gauges)
    if snap.store_root is not None:
        # file-system calls: here, in the worker thread, not on the loop
        gauges += [
            (False, "rocketmq_storage_size_bytes", "Disk space the store directory uses",
             metrics.storage_size()),
            (False, "rocketmq_storage_disk_used_ratio", "Used fraction of the store's partition",
             retention.disk_used_ratio(snap.store_root)),
        ]
    for is_counter, name, text, value in gauges:
        f = fam(CounterMetricFamily if is_counter else GaugeMetricFamily, name, text)
        f.add_metric(base, value)
        yield f
    buckets, total = snap.flush
    flush = fam(HistogramMetricFamily, "rocketmq_storage_flush_latency",
                "Commit-log flush (msync/fdatasync) latency in ms")
    flush.add_metric(base, buckets, sum_value=total)
    yield flush
    yield from request_metric_families(snap.requests, dict(zip(base_names, base, strict=True)))


def _disk_usage(root: str) -> int:
    total = 0
    stack = [root]
    while stack:
        path = stack.pop()
        try:
            with os.scandir(path) as it:
                for entry in it:
                    try:
                        if entry.is_dir(follow_symlinks=False):
                            stack.append(entry.path)
                        elif entry.is_file(follow_symlinks=False):
                            total += entry.stat(follow_symlinks=False).st_blocks * 512
                    except OSError:
                        continue
        except OSError:
            continue
    return total


def _earliest_store_ts(cl: Any) -> int:
    first = cl.mfq.first
    if first is None or first.closed:
        return -1
    return int(cl.store_timestamp_at(first.file_from_offset))
