"""Orderly pop's queue locks (RocketMQ's ConsumerOrderInfoManager, no I/O).

An orderly pop hands a queue's next messages to one receiver and blocks the queue for everyone
until all of them are acked or their invisible time ends; the group offset moves only when the
whole batch is acked, so an expired batch is popped again (its messages counted in orderCountInfo).
Kept in memory: after a restart the offset still stands at the unacked batch, which is popped again.
"""

from __future__ import annotations

from dataclasses import dataclass, field

OrderKey = tuple[str, str, int]  # topic, group, queueId


@dataclass(slots=True)
class OrderInfo:
    pop_time: int
    invisible_time: int
    offsets: list[int]
    attempt_id: str | None
    acked: set[int] = field(default_factory=set)
    # queue offset -> how many times it was popped before this pop (the reconsume count)
    counts: dict[int, int] = field(default_factory=dict)

    @property
    def next_visible_time(self) -> int:
        return self.pop_time + self.invisible_time

    @property
    def done(self) -> bool:
        return len(self.acked) >= len(self.offsets)


class OrderInfoTable:
    def __init__(self) -> None:
        self._table: dict[OrderKey, OrderInfo] = {}

    def check_block(self, attempt_id: str | None, key: OrderKey, now_ms: int) -> bool:
        """True while the queue's last batch is un-acked and still invisible (the same attempt
        re-popping, a client retrying a lost answer, is let through)."""
        info = self._table.get(key)
        if info is None or info.done:
            return False
        if attempt_id and attempt_id == info.attempt_id:
            return False
        return now_ms < info.next_visible_time

    def update(
        self, key: OrderKey, attempt_id: str | None, pop_time: int, invisible_time: int, offsets: list[int]
    ) -> dict[int, int]:
        """Record a pop of `offsets`; returns offset -> times popped before (for orderCountInfo)."""
        old = self._table.get(key)
        counts: dict[int, int] = {}
        for o in offsets:
            before = old.counts.get(o, 0) + (1 if o in old.offsets else 0) if old is not None else 0
            counts[o] = before
        self._table[key] = OrderInfo(pop_time, invisible_time, list(offsets), attempt_id, set(), counts)
        return counts

    def commit_and_next(self, key: OrderKey, offset: int, pop_time: int) -> int:
        """Ack `offset` of the batch popped at `pop_time`: the offset to commit once the whole batch
        is acked, -1 while some remain, -2 when the ack is for another (older) pop."""
        info = self._table.get(key)
        if info is None or info.pop_time != pop_time or offset not in info.offsets:
            return -2
        info.acked.add(offset)
        if not info.done:
            return -1
        return max(info.offsets) + 1

    def update_next_visible_time(self, key: OrderKey, offset: int, pop_time: int, next_visible: int) -> bool:
        info = self._table.get(key)
        if info is None or info.pop_time != pop_time or offset not in info.offsets:
            return False
        info.invisible_time = next_visible - info.pop_time
        return True

    def clear(self, key: OrderKey) -> None:
        self._table.pop(key, None)
