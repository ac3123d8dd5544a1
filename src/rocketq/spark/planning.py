"""Offset planning on the driver: which queues, which offset ranges, how many Spark partitions.

Pure functions over offsets (dicts keyed by (topic, broker, queueId)); the only I/O is through
the ``Source`` passed in (a ``BrokerSession`` or a ``StoreDirectory``), which answers the same
four questions: queues of a topic, min / max offsets and the offsets for a timestamp.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from rocketq.admin.topics import is_system_topic
from rocketq.spark._broker import QueueRef
from rocketq.spark.errors import DataLossError, SparkOptionError
from rocketq.spark.options import EARLIEST, LATEST, OffsetSpec, ReadOptions

log = logging.getLogger("rocketq.spark")

Key = tuple[str, str, int]


class Source(Protocol):
    def all_topics(self) -> list[str]: ...
    def queues(self, topic: str, *, writable: bool = False) -> list[QueueRef]: ...
    def min_offsets(self, refs: Sequence[QueueRef]) -> dict[QueueRef, int]: ...
    def max_offsets(self, refs: Sequence[QueueRef]) -> dict[QueueRef, int]: ...
    def offsets_for_time(self, refs: Sequence[QueueRef], timestamp_ms: int) -> dict[QueueRef, int]: ...


@dataclass(frozen=True, slots=True)
class QueueRange:
    """Offsets [start, end) of one queue: what one Spark partition reads."""

    ref: QueueRef
    start: int
    end: int

    @property
    def size(self) -> int:
        return max(0, self.end - self.start)


def discover(source: Source, opts: ReadOptions, *, strict: bool = True) -> list[QueueRef]:
    """Every readable queue of the topics the options name; an unknown topic is an error."""
    if opts.topic_pattern is not None:
        rx = re.compile(opts.topic_pattern)
        # The broker's own topics (rmq_sys_wheel_timer holds timer messages until their time,
        # SCHEDULE_TOPIC_XXXX delayed ones) are not data: a pattern skips them, a name reads them.
        topics = [t for t in source.all_topics() if rx.fullmatch(t) and not is_system_topic(t)]
    else:
        topics = list(opts.topics or ())
    refs: list[QueueRef] = []
    for topic in topics:
        found = source.queues(topic)
        if not found and strict and opts.topic_pattern is None:
            where = f"path {opts.path}" if opts.path else f"name server {opts.namesrv}"
            raise SparkOptionError("topic", f"topic {topic!r} does not exist ({where})")
        refs.extend(found)
    if not refs and strict and opts.topic_pattern is not None:
        raise SparkOptionError("topicPattern", f"no topic matches {opts.topic_pattern!r}")
    return sorted(refs)


def resolve(
    spec: OffsetSpec,
    refs: Sequence[QueueRef],
    lows: Mapping[QueueRef, int],
    highs: Mapping[QueueRef, int],
) -> dict[QueueRef, int]:
    out = {}
    for r in refs:
        v = spec.get(r.key)
        out[r] = lows[r] if v == EARLIEST else highs[r] if v == LATEST else v
    return out


def check_queues(option: str, refs: Sequence[QueueRef], per_queue: Sequence[tuple[Key, int]] | None) -> None:
    """Every queue a timestamps JSON names must be one the query reads."""
    known = {r.key for r in refs}
    for (t, b, q), _ in per_queue or ():
        if (t, b, q) not in known:
            names = ", ".join("/".join(map(str, k)) for k in sorted(known))
            raise SparkOptionError(option, f"queue {t}/{b}/{q} is not a readable queue of the topics read "
                                           f"(known: {names})")


def by_timestamp(source: Source, option: str, refs: Sequence[QueueRef], every: int | None,
                 per_queue: Sequence[tuple[Key, int]] | None) -> dict[QueueRef, int]:
    """Offsets of the first message stored at or after the time, for the queues a time names:
    all of them with ``every`` (startingTimestamp / endingTimestamp), else those in ``per_queue``."""
    if every is not None:
        return source.offsets_for_time(refs, every)
    if not per_queue:
        return {}
    check_queues(option, refs, per_queue)
    by_key = {r.key: r for r in refs}
    groups: dict[int, list[QueueRef]] = {}
    for key, ts in per_queue:
        groups.setdefault(ts, []).append(by_key[key])
    out: dict[QueueRef, int] = {}
    for ts, group in groups.items():
        out.update(source.offsets_for_time(group, ts))
    return out


def start_offsets(source: Source, opts: ReadOptions, refs: Sequence[QueueRef],
                  lows: Mapping[QueueRef, int], highs: Mapping[QueueRef, int]) -> dict[QueueRef, int]:
    # Kafka's precedence: startingTimestamp, then startingOffsetsByTimestamp, then startingOffsets.
    timed = by_timestamp(source, "startingOffsetsByTimestamp", refs, opts.starting_timestamp,
                         opts.starting_by_timestamp)
    for r, off in timed.items():
        # offset_at_or_after answers the queue's end when nothing is stored at or after the time
        if off >= highs[r] and not opts.no_match_latest:
            option = ("startingTimestamp" if opts.starting_timestamp is not None
                      else "startingOffsetsByTimestamp")
            raise SparkOptionError(option, f"no message of {r.topic}/{r.broker}/{r.queue_id} is stored at or "
                                           "after the time; set startingOffsetsByTimestampStrategy=latest to "
                                           "start such queues at their end")
    if opts.starting_timestamp is not None:
        return timed
    starts = {**resolve(opts.starting, refs, lows, highs), **timed}
    for r, off in starts.items():
        if off < lows[r]:
            lost = f"{r.topic}/{r.broker}/{r.queue_id}: offsets [{off}, {lows[r]}) are gone"
            if opts.fail_on_data_loss:
                raise DataLossError(f"{lost}; set failOnDataLoss=false to skip them")
            log.warning("%s, skipping them", lost)
            starts[r] = lows[r]
        elif off > highs[r]:
            raise SparkOptionError("startingOffsets", f"offset {off} of {r.topic}/{r.broker}/{r.queue_id} "
                                                      f"is past its max offset {highs[r]}")
    return starts


def end_offsets(source: Source, opts: ReadOptions, refs: Sequence[QueueRef],
                lows: Mapping[QueueRef, int], highs: Mapping[QueueRef, int]) -> dict[QueueRef, int]:
    timed = by_timestamp(source, "endingOffsetsByTimestamp", refs, opts.ending_timestamp,
                         opts.ending_by_timestamp)
    if opts.ending_timestamp is not None:
        return timed
    ends = {**resolve(opts.ending, refs, lows, highs), **timed}
    for r, off in ends.items():
        if off > highs[r]:
            raise SparkOptionError("endingOffsets", f"offset {off} of {r.topic}/{r.broker}/{r.queue_id} "
                                                    f"is past its max offset {highs[r]}")
    return ends


def plan_batch(source: Source, opts: ReadOptions) -> list[QueueRange]:
    refs = discover(source, opts)
    lows = source.min_offsets(refs)
    highs = source.max_offsets(refs)
    starts = start_offsets(source, opts, refs, lows, highs)
    ends = end_offsets(source, opts, refs, lows, highs)
    ranges = [QueueRange(r, starts[r], ends[r]) for r in refs if ends[r] > starts[r]]
    return split(ranges, opts.max_records_per_partition, opts.min_partitions)


def split(ranges: Sequence[QueueRange], max_records: int, min_partitions: int | None) -> list[QueueRange]:
    """Cut ranges over ``max_records``; then, like Kafka's source, cut the big ranges further so
    that there are at least ``min_partitions`` pieces, each range in proportion to its size."""
    out: list[QueueRange] = []
    for r in ranges:
        out.extend(_cut(r, -(-r.size // max_records)))
    if min_partitions is not None and 0 < len(out) < min_partitions:
        total = sum(r.size for r in out)
        pieces: list[QueueRange] = []
        for r in out:
            parts = max(1, round(r.size * min_partitions / total)) if total else 1
            pieces.extend(_cut(r, min(parts, max(1, r.size))))
        out = pieces
    return out


def _cut(r: QueueRange, parts: int) -> list[QueueRange]:
    if parts <= 1:
        return [r]
    step, extra = divmod(r.size, parts)
    out = []
    lo = r.start
    for i in range(parts):
        hi = lo + step + (1 if i < extra else 0)
        if hi > lo:
            out.append(QueueRange(r.ref, lo, hi))
        lo = hi
    return out


PACK_ROWS = 100_000


def pack(ranges: Sequence[QueueRange], target: int = PACK_ROWS) -> list[list[QueueRange]]:
    """Group consecutive small ranges into tasks of up to ``target`` messages (a range that is
    larger stays alone): a Spark task costs tens of milliseconds however little it reads, so a
    micro-batch of a few thousand messages per queue is better read by one task."""
    groups: list[list[QueueRange]] = []
    rows = 0
    for r in ranges:
        if groups and rows + r.size <= target:
            groups[-1].append(r)
            rows += r.size
        else:
            groups.append([r])
            rows = r.size
    return groups


def rate_limit(starts: Mapping[Key, int], latest: Mapping[Key, int], max_rows: int) -> dict[Key, int]:
    """End offsets that read at most ``max_rows`` in total, shared in proportion to each queue's
    backlog (Kafka's maxOffsetsPerTrigger rule); every queue with a backlog moves if it can."""
    backlog = {k: max(0, latest[k] - starts.get(k, latest[k])) for k in latest}
    total = sum(backlog.values())
    if total <= max_rows:
        return dict(latest)
    out = {}
    given = 0
    for k in sorted(latest):
        start = starts.get(k, latest[k])
        share = backlog[k] * max_rows // total
        out[k] = start + share
        given += share
    # Rounding leaves up to len(queues) rows: hand them to the largest remaining backlogs.
    for k in sorted(latest, key=lambda k: latest[k] - out[k], reverse=True):
        if given >= max_rows:
            break
        if out[k] < latest[k]:
            out[k] += 1
            given += 1
    return out
