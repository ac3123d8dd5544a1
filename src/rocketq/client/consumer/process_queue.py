"""ProcessQueue: the client-side cache of one message queue's pulled, not yet consumed messages.

The pull loop puts batches in, the consume service takes them out, and the offset the group may
commit is always "the smallest offset still cached" (or one past the largest ever cached when the
cache is empty): a slow message holds the committed offset back, so a crash re-delivers it
rather than losing it.

Loop-confined: every method runs on the client's event loop (worker threads only run listeners),
so there are no locks. Messages arrive in increasing queue-offset order, so a plain dict keyed by
offset stays sorted by insertion; only the orderly rollback path re-inserts older offsets and pays
for a rebuild then.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Iterable, Sequence
from itertools import repeat
from operator import attrgetter
from typing import Any

from rocketq.codec.message import MessageExt

__all__ = [
    "PULL_MAX_IDLE_TIME",
    "REBALANCE_LOCK_INTERVAL",
    "REBALANCE_LOCK_MAX_LIVE_TIME",
    "ProcessQueue",
    "ProcessQueueInfo",
]

# A queue whose lock is older than this is not trusted for orderly consumption (the broker keeps
# locks 60 s; the client re-locks every 20 s).
REBALANCE_LOCK_MAX_LIVE_TIME = 30.0
REBALANCE_LOCK_INTERVAL = 20.0
# A push queue not pulled for this long is considered broken and is rebuilt by the next rebalance.
PULL_MAX_IDLE_TIME = 120.0

_OFFSET = attrgetter("queue_offset")
_BODY = attrgetter("body")


@dataclasses.dataclass(frozen=True, slots=True)
class ProcessQueueInfo:
    """A snapshot for GET_CONSUMER_RUNNING_INFO / diagnostics (RocketMQ ProcessQueueInfo)."""

    commit_offset: int
    cached_msg_min_offset: int
    cached_msg_max_offset: int
    cached_msg_count: int
    cached_msg_size_in_mib: int
    transaction_msg_min_offset: int
    transaction_msg_max_offset: int
    transaction_msg_count: int
    locked: bool
    try_unlock_times: int
    last_lock_timestamp: int
    droped: bool  # sic: RocketMQ's field name
    last_pull_timestamp: int
    last_consume_timestamp: int


class ProcessQueue:
    __slots__ = (
        "_consuming_orderly",
        "_msgs",
        "_space_waiter",
        "consume_lock",
        "consuming",
        "dropped",
        "hand_over_below",
        "handing_over",
        "in_flight",
        "last_consume_timestamp",
        "last_lock_timestamp",
        "last_pull_timestamp",
        "locked",
        "msg_acc_cnt",
        "msg_count",
        "msg_size",
        "queue_offset_max",
        "removed_max",
        "try_unlock_times",
    )

    def __init__(self) -> None:
        self._msgs: dict[int, MessageExt] = {}
        # Orderly consumption: taken out of _msgs, not yet committed.
        self._consuming_orderly: dict[int, MessageExt] = {}
        self._space_waiter: asyncio.Future[None] | None = None
        self.msg_count = 0
        self.msg_size = 0
        self.queue_offset_max = 0
        # Messages on the broker behind the newest cached one (lag).
        self.msg_acc_cnt = 0
        self.dropped = False
        # Dropped by a rebalance (or a shutdown) that has not persisted the offset yet: batches of
        # consume jobs already started still run and commit, so the offset handed to the next
        # owner is past them.
        self.handing_over = False
        # During a hand-over, batches below this offset still run: they fill the gaps under
        # messages consumed already (see ConsumeMessageConcurrentlyService.begin_hand_over).
        self.hand_over_below = -1
        # Largest offset the consumer finished with (concurrent), for hand_over_below.
        self.removed_max = -1
        self.locked = False
        self.consuming = False
        self.try_unlock_times = 0
        now = time.monotonic()
        self.last_pull_timestamp = now
        self.last_consume_timestamp = now
        self.last_lock_timestamp = now
        # Orderly: held while a batch of this queue is inside the listener, so a rebalance can wait
        # for it before handing the queue to another consumer.
        self.consume_lock = asyncio.Lock()
        # First offset of each batch in a listener -> its ConsumeRequest (for the consume timeout).
        self.in_flight: dict[int, Any] = {}

    # -- state ----------------------------------------------------------------------------------

    def is_lock_expired(self, now: float | None = None) -> bool:
        return (
            (time.monotonic() if now is None else now) - self.last_lock_timestamp
        ) > REBALANCE_LOCK_MAX_LIVE_TIME

    def is_pull_expired(self, now: float | None = None) -> bool:
        return ((time.monotonic() if now is None else now) - self.last_pull_timestamp) > PULL_MAX_IDLE_TIME

    @property
    def cached_msg_size_in_mib(self) -> int:
        return self.msg_size >> 20

    def has_temp_message(self) -> bool:
        return bool(self._msgs)

    def contains_message(self, msg: MessageExt) -> bool:
        return msg.queue_offset in self._msgs

    def min_offset(self) -> int:
        """Smallest cached offset, or -1 when the cache is empty."""
        for off in self._msgs:
            return off
        return -1

    def max_offset(self) -> int:
        """Largest cached offset, or -1 when the cache is empty."""
        if not self._msgs:
            return -1
        return next(reversed(self._msgs))

    def max_span(self) -> int:
        """Offset distance between the oldest and newest cached message (concurrent flow control)."""
        if not self._msgs:
            return 0
        return next(reversed(self._msgs)) - next(iter(self._msgs))

    # -- put / remove (concurrent) -----------------------------------------------------------------

    def put_messages(self, msgs: Sequence[MessageExt], max_offset: int | None = None) -> bool:
        """Cache a pulled batch; True when an orderly consumer must start consuming this queue.

        ``max_offset`` is the broker's queue max offset from the pull response (for the lag).
        """
        if not msgs:
            return False
        table = self._msgs
        first = msgs[0].queue_offset
        size = 0
        if (not table or first > next(reversed(table))) and first > self._taken_max():
            # The common case: a pull continues where the last one ended (C-level loops only).
            table.update(zip(map(_OFFSET, msgs), msgs, strict=True))
            size = sum(map(len, map(_BODY, msgs)))
            added = len(msgs)
            self.queue_offset_max = msgs[-1].queue_offset
        else:
            added = 0
            for m in msgs:
                off = m.queue_offset
                if off not in table and off not in self._consuming_orderly:
                    table[off] = m
                    size += len(m.body)
                    added += 1
                    self.queue_offset_max = off
            self._resort()
        self.msg_count += added
        self.msg_size += size
        if max_offset is not None:
            acc = max_offset - msgs[-1].queue_offset
            if acc > 0:
                self.msg_acc_cnt = acc
        if table and not self.consuming:
            self.consuming = True
            return True
        return False

    def _taken_max(self) -> int:
        taken = self._consuming_orderly
        return next(reversed(taken)) if taken else -1

    def _resort(self) -> None:
        self._msgs = dict(sorted(self._msgs.items()))

    def remove_messages(self, msgs: Iterable[MessageExt]) -> int:
        """Forget consumed messages; the offset to commit (-1 if nothing was ever cached)."""
        table = self._msgs
        self.last_consume_timestamp = time.monotonic()
        if not table:
            return -1
        gone = list(filter(None, map(table.pop, map(_OFFSET, msgs), repeat(None))))
        removed = len(gone)
        if removed:
            size = sum(map(len, map(_BODY, gone)))
            self.msg_count -= removed
            self.msg_size -= size
            last = gone[-1].queue_offset  # batches are in offset order
            if last > self.removed_max:
                self.removed_max = last
            self._notify_space()
        if table:
            return next(iter(table))
        return self.queue_offset_max + 1

    # -- flow control wake-up --------------------------------------------------------------------------

    def wait_for_space(self, timeout: float) -> asyncio.Future[None]:
        """A future done when messages leave the cache (or never: the caller bounds the wait)."""
        fut = self._space_waiter
        if fut is None or fut.done():
            fut = asyncio.get_running_loop().create_future()
            self._space_waiter = fut
        return fut

    def _notify_space(self) -> None:
        fut = self._space_waiter
        if fut is not None:
            self._space_waiter = None
            if not fut.done():
                fut.set_result(None)

    # -- orderly -----------------------------------------------------------------------------------------

    def take_messages(self, batch_size: int) -> list[MessageExt]:
        """Move up to ``batch_size`` of the oldest messages into the consuming set.

        An empty result also clears ``consuming``: the next pull that caches something restarts the
        orderly consumer of this queue.
        """
        now = time.monotonic()
        self.last_consume_timestamp = now
        table = self._msgs
        out: list[MessageExt] = []
        if table:
            for off in list(_take_keys(table, batch_size)):
                m = table.pop(off)
                self._consuming_orderly[off] = m
                out.append(m)
        if not out:
            self.consuming = False
        return out

    def commit(self) -> int:
        """Orderly: the taken messages are done; returns the offset to commit (-1 if none)."""
        taken = self._consuming_orderly
        if not taken:
            return -1
        last = next(reversed(taken))
        self.msg_count -= len(taken)
        self.msg_size -= sum(len(m.body) for m in taken.values())
        self._consuming_orderly = {}
        self._notify_space()
        return last + 1

    def rollback(self) -> None:
        """Orderly without auto-commit: put every taken message back, in order."""
        if self._consuming_orderly:
            self._msgs = dict(sorted({**self._msgs, **self._consuming_orderly}.items()))
            self._consuming_orderly = {}

    def make_message_to_consume_again(self, msgs: Iterable[MessageExt]) -> None:
        """Orderly: these taken messages are retried (the caller bumped their reconsume times)."""
        for m in msgs:
            self._consuming_orderly.pop(m.queue_offset, None)
            self._msgs[m.queue_offset] = m
        self._resort()

    def clear(self) -> None:
        self._msgs.clear()
        self._consuming_orderly.clear()
        self.msg_count = 0
        self.msg_size = 0
        self.queue_offset_max = 0
        self.in_flight.clear()
        self._notify_space()

    def messages(self) -> list[MessageExt]:
        """The cached (not yet taken) messages, oldest first."""
        return list(self._msgs.values())

    def info(self, commit_offset: int) -> ProcessQueueInfo:
        def wall(mono: float) -> int:
            return int((time.time() - (time.monotonic() - mono)) * 1000)

        return ProcessQueueInfo(
            commit_offset=commit_offset,
            cached_msg_min_offset=self.min_offset() if self._msgs else 0,
            cached_msg_max_offset=self.max_offset() if self._msgs else 0,
            cached_msg_count=len(self._msgs),
            cached_msg_size_in_mib=self.cached_msg_size_in_mib,
            transaction_msg_min_offset=next(iter(self._consuming_orderly), 0),
            transaction_msg_max_offset=next(reversed(self._consuming_orderly), 0)
            if self._consuming_orderly
            else 0,
            transaction_msg_count=len(self._consuming_orderly),
            locked=self.locked,
            try_unlock_times=self.try_unlock_times,
            last_lock_timestamp=wall(self.last_lock_timestamp),
            droped=self.dropped,
            last_pull_timestamp=wall(self.last_pull_timestamp),
            last_consume_timestamp=wall(self.last_consume_timestamp),
        )

    def __repr__(self) -> str:
        return (
            f"ProcessQueue(count={self.msg_count}, size={self.msg_size}, max={self.queue_offset_max}, "
            f"dropped={self.dropped}, locked={self.locked}, consuming={self.consuming})"
        )


def _take_keys(table: dict[int, MessageExt], n: int) -> Iterable[int]:
    it = iter(table)
    for _ in range(n):
        try:
            yield next(it)
        except StopIteration:
            return
