"""The live checkpoints of pop: what was popped and not yet acked or revived (no I/O).

Every checkpoint and ack is first written to the revive topic (the durable record); this table is
the in-memory view of it, built by the writes as they happen and by a replay of the revive log
after a restart. It answers three questions: which acked offsets complete a checkpoint, which
checkpoints are due for revive (popTime + invisibleTime passed), and from where a revive queue
must be replayed after a crash (the revive offset of its oldest live checkpoint).
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Iterable

from rocketq.codec.pop import AckMsg, PopCheckPoint

CkKey = tuple[str, int, int, str, int]  # topic, queueId, startOffset, group, popTime


def ck_key(ck: PopCheckPoint) -> CkKey:
    return (ck.topic, ck.queue_id, ck.start_offset, ck.cid, ck.pop_time)


def ack_key(ack: AckMsg) -> CkKey:
    return (ack.topic, ack.queue_id, ack.start_offset, ack.consumer_group, ack.pop_time)


class CheckpointTable:
    """Live checkpoints by key, by revive queue (in revive-log order) and by revive time."""

    def __init__(self) -> None:
        self._live: dict[CkKey, tuple[PopCheckPoint, int]] = {}  # key -> (ck, reviveQid)
        self._by_queue: dict[int, dict[int, CkKey]] = {}  # reviveQid -> {reviveOffset: key}
        self._due: list[tuple[int, int, CkKey]] = []  # (reviveTime, seq, key), stale entries skipped
        self._seq = itertools.count()
        # reviveQid -> the revive offset after the last record this table has seen
        self.read_offsets: dict[int, int] = {}

    def __len__(self) -> int:
        return len(self._live)

    def add(self, ck: PopCheckPoint, revive_qid: int, revive_offset: int) -> None:
        ck.revive_offset = revive_offset
        key = ck_key(ck)
        self._live[key] = (ck, revive_qid)
        self._by_queue.setdefault(revive_qid, {})[revive_offset] = key
        heapq.heappush(self._due, (ck.revive_time, next(self._seq), key))
        self.seen(revive_qid, revive_offset)

    def seen(self, revive_qid: int, revive_offset: int) -> None:
        if revive_offset + 1 > self.read_offsets.get(revive_qid, 0):
            self.read_offsets[revive_qid] = revive_offset + 1

    def ack(self, ack: AckMsg) -> bool:
        """Mark the offsets of `ack` in their checkpoint; True when that completed it (removed)."""
        entry = self._live.get(ack_key(ack))
        if entry is None:
            return False
        ck = entry[0]
        for offset in ack.offsets:
            i = ck.index_of_ack(offset)
            if i >= 0:
                ck.bit_map |= 1 << i
        if ck.all_acked:
            self.remove(ck)
            return True
        return False

    def get(self, key: CkKey) -> PopCheckPoint | None:
        entry = self._live.get(key)
        return entry[0] if entry is not None else None

    def remove(self, ck: PopCheckPoint) -> None:
        entry = self._live.pop(ck_key(ck), None)
        if entry is not None:
            self._by_queue.get(entry[1], {}).pop(ck.revive_offset, None)

    def next_due_time(self) -> int | None:
        """The earliest revive time of a live checkpoint (stale heap entries dropped on the way)."""
        due = self._due
        while due and due[0][2] not in self._live:
            heapq.heappop(due)
        return due[0][0] if due else None

    def pop_due(self, now_ms: int) -> list[PopCheckPoint]:
        """The checkpoints whose revive time has come, oldest first (they stay live until removed)."""
        out: list[PopCheckPoint] = []
        due = self._due
        while due and due[0][0] <= now_ms:
            _, _, key = heapq.heappop(due)
            entry = self._live.get(key)
            if entry is not None and entry[0].revive_time <= now_ms:
                out.append(entry[0])
        return out

    def defer(self, ck: PopCheckPoint, until_ms: int) -> None:
        """Look at `ck` again at `until_ms` (a revive that could not be written now)."""
        heapq.heappush(self._due, (until_ms, next(self._seq), ck_key(ck)))

    def revive_offset(self, revive_qid: int) -> int:
        """Where a replay of this revive queue must start: its oldest live checkpoint, else the end."""
        queue = self._by_queue.get(revive_qid)
        if queue:
            # checkpoints enter in revive-log order (appends, then a replay in order): the first is the oldest
            return next(iter(queue))
        return self.read_offsets.get(revive_qid, 0)

    def revive_qids(self) -> Iterable[int]:
        return self.read_offsets.keys()

    def oldest_unacked(self, topic: str, group: str, queue_id: int) -> int | None:
        """The lowest popped and not yet acked offset of a queue (None when nothing is out); a scan
        of the live checkpoints, for admin queries."""
        lowest: int | None = None
        for (t, q, _, g, _), (ck, _) in self._live.items():
            if t == topic and q == queue_id and g == group:
                out = ck.unacked_offsets()
                if out and (lowest is None or out[0] < lowest):
                    lowest = out[0]
        return lowest

    def pop_state(self, now_ms: int, group: str | None = None) -> dict[tuple[str, str, int], tuple[int, int]]:
        """(group, topic, queueId) -> (messages popped and not acked, those of them already due for
        revive): one scan of the live checkpoints, for admin queries and metrics scrapes."""
        out: dict[tuple[str, str, int], tuple[int, int]] = {}
        for (topic, qid, _, g, _), (ck, _) in self._live.items():
            if group is not None and g != group:
                continue
            n = len(ck.unacked_offsets())
            if n:
                inflight, due = out.get((g, topic, qid), (0, 0))
                out[(g, topic, qid)] = (inflight + n, due + (n if ck.revive_time <= now_ms else 0))
        return out
