"""Long polling of POP_MESSAGE and NOTIFICATION (RocketMQ's PopLongPollingService).

A pop that finds nothing and carries a pollTime is parked under (topic, group, queueId), queueId -1
for a pop of every queue. An arrival on a queue wakes one waiter of that queue and one of the
topic's "-1" waiters (one message needs one receiver); a waiter whose time is up is re-run once
and answered with whatever it finds (POLLING_TIMEOUT when nothing). Too many waiters on one key
(popPollingSize) or in all (maxPopPollingSize) answer POLLING_FULL at once. Stopping the service
(a demotion to slave, a broker stopping) answers every waiter at once.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable
from typing import Any

log = logging.getLogger("rocketq.broker.pop")

PollKey = tuple[str, str, int]


class PopWaiter:
    __slots__ = ("channel", "deadline", "key", "request", "rerun", "timer")

    def __init__(
        self,
        key: PollKey,
        request: Any,
        channel: Any,
        deadline: float,
        rerun: Callable[[PopWaiter, bool], None],
    ) -> None:
        self.key = key
        self.request = request
        self.channel = channel
        self.deadline = deadline
        self.rerun = rerun  # (waiter, timed_out)
        self.timer: asyncio.TimerHandle | None = None


class PopLongPollingService:
    def __init__(self, polling_size: Callable[[], int], max_polling_size: Callable[[], int]) -> None:
        self._polling_size = polling_size
        self._max_polling_size = max_polling_size
        self._table: dict[PollKey, deque[PopWaiter]] = {}
        self._by_topic: dict[str, set[PollKey]] = {}
        self._count = 0

    @property
    def polling_num(self) -> int:
        return self._count

    def polling_num_of(self, key: PollKey) -> int:
        waiting = self._table.get(key)
        return len(waiting) if waiting else 0

    def park(
        self, key: PollKey, request: Any, channel: Any, poll_ms: int, rerun: Callable[[PopWaiter, bool], None]
    ) -> bool:
        """Park a request for `poll_ms`; False when polling is full (answer POLLING_FULL)."""
        waiting = self._table.get(key)
        if self._count >= self._max_polling_size() or (
            waiting is not None and len(waiting) >= self._polling_size()
        ):
            return False
        loop = asyncio.get_running_loop()
        w = PopWaiter(key, request, channel, loop.time() + poll_ms / 1000.0, rerun)
        if waiting is None:
            waiting = self._table[key] = deque()
            self._by_topic.setdefault(key[0], set()).add(key)
        waiting.append(w)
        self._count += 1
        w.timer = loop.call_at(w.deadline, self._on_timeout, w)
        return True

    def _take(self, w: PopWaiter) -> bool:
        waiting = self._table.get(w.key)
        if waiting is None:
            return False
        try:
            waiting.remove(w)
        except ValueError:
            return False
        self._forget_if_empty(w.key, waiting)
        self._count -= 1
        if w.timer is not None:
            w.timer.cancel()
            w.timer = None
        return True

    def _forget_if_empty(self, key: PollKey, waiting: deque[PopWaiter]) -> None:
        if not waiting:
            del self._table[key]
            keys = self._by_topic.get(key[0])
            if keys is not None:
                keys.discard(key)
                if not keys:
                    del self._by_topic[key[0]]

    def _on_timeout(self, w: PopWaiter) -> None:
        w.timer = None
        if self._take(w):
            self._run(w, True)

    def _run(self, w: PopWaiter, timed_out: bool) -> None:
        if not getattr(w.channel, "is_active", True):
            return
        try:
            w.rerun(w, timed_out)
        except Exception:
            log.exception("pop long polling: re-running a parked request failed")

    def notify(
        self,
        topic: str,
        queue_id: int,
        group: str | None = None,
        any_queue: bool = False,
        everyone: bool = False,
    ) -> None:
        """Messages arrived on (topic, queue_id) (for `group` only when given; on any of its queues
        with `any_queue`): wake one waiter of that queue and one of the whole topic (all of them
        with `everyone`)."""
        keys = self._by_topic.get(topic)
        if not keys:
            return
        for key in list(keys):
            if not any_queue and key[2] != queue_id and key[2] != -1:
                continue
            if group is not None and key[1] != group:
                continue
            waiting = self._table.get(key)
            if not waiting:
                continue
            woken = list(waiting) if everyone else [waiting[0]]
            for w in woken:
                if self._take(w):
                    self._run(w, False)

    def do_channel_close_event(self, channel: Any) -> None:
        for waiting in list(self._table.values()):
            for w in [w for w in waiting if w.channel is channel]:
                self._take(w)

    def shutdown(self) -> None:
        """Answer every parked request now (Java's service wakes each one as it stops): a broker
        demoted to slave must not leave its pollers waiting out their pollTime for nothing. Each
        is re-run as timed out, so it answers with what it finds or the refusal of a stopped pop."""
        parked = [w for waiting in self._table.values() for w in waiting]
        for w in parked:
            if w.timer is not None:
                w.timer.cancel()
                w.timer = None
        self._table.clear()
        self._by_topic.clear()
        self._count = 0
        for w in parked:
            self._run(w, True)
