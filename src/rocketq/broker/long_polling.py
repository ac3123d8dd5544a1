"""PullRequestHoldService: long polling for PULL_MESSAGE (RocketMQ broker/longpolling).

A pull that finds nothing and carries the SUSPEND flag is parked here per (topic, queueId) instead of being
answered. The store's arrival callback marks the queue; one drain on the next loop turn re-runs every parked
pull whose offset is now below the queue's max offset and whose tag filter matches an arrived tagsCode, and
answers it at once. A parked pull that sees nothing answers with its re-run result when its own timer fires
(suspendTimeoutMillis, or shortPollingTimeMills with long polling off).

Why a deferred drain rather than re-running inside the callback: the callback runs in the middle of the
producer's put, under the store's put lock. Deferring to the next loop turn lets the put finish (all records
of a batch dispatched, the send response written first) and folds a burst of arrivals on one queue into a
single re-run per waiter; it costs one loop turn of latency.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from rocketq.broker.filter import Subscription

if TYPE_CHECKING:
    from rocketq.broker.controller import BrokerController
    from rocketq.codec.command import RemotingCommand

log = logging.getLogger("rocketq.broker.longpolling")

# Java's hold service re-checks every parked queue against the store this often (long polling on); it is a
# safety net only: arrivals are pushed by the store callback and timeouts have their own timers.
CHECK_INTERVAL_LONG_POLLING = 5.0


class PullRequest:
    """One parked pull: what to re-run, for whom, and until when."""

    __slots__ = ("channel", "deadline", "pull_from_this_offset", "queue_id", "request", "rerun",
                 "subscription", "suspend_timestamp", "timeout_millis", "timer", "topic")

    def __init__(self, request: RemotingCommand, channel: Any, topic: str, queue_id: int,
                 pull_from_this_offset: int, subscription: Subscription | None, timeout_millis: int,
                 rerun: Callable[[PullRequest], None]) -> None:
        self.request = request
        self.channel = channel
        self.topic = topic
        self.queue_id = queue_id
        self.pull_from_this_offset = pull_from_this_offset
        self.subscription = subscription
        self.timeout_millis = timeout_millis
        self.suspend_timestamp = int(time.time() * 1000)
        self.deadline = 0.0
        self.rerun = rerun
        self.timer: asyncio.TimerHandle | None = None

    def is_matched(self, tags_codes: set[int | None] | None) -> bool:
        sub = self.subscription
        if sub is None or sub.codes is None or tags_codes is None:
            return True
        codes = sub.codes
        return any(c is None or c in codes for c in tags_codes)


class PullRequestHoldService:
    """Parked pulls keyed by (topic, queueId)."""

    def __init__(self, controller: BrokerController) -> None:
        self._ctl = controller
        self.pull_request_table: dict[tuple[str, int], list[PullRequest]] = {}
        # Queues with arrivals since the last drain: key -> (newest max offset, tag codes or None for "any").
        self._arrived: dict[tuple[str, int], tuple[int, set[int | None] | None]] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread = 0
        self._drain_scheduled = False
        self._checker: asyncio.Task[None] | None = None
        self._stopped = False

    # -- parking ---------------------------------------------------------------------------

    def suspend_pull_request(self, topic: str, queue_id: int, pull_request: PullRequest) -> None:
        """Park a pull (called on the event loop by the pull processor)."""
        loop = self._loop
        if loop is None:
            loop = self._bind_loop()
        key = (topic, queue_id)
        waiting = self.pull_request_table.get(key)
        if waiting is None:
            self.pull_request_table[key] = [pull_request]
        else:
            waiting.append(pull_request)
        pull_request.deadline = loop.time() + pull_request.timeout_millis / 1000.0
        pull_request.timer = loop.call_at(pull_request.deadline, self._on_timeout, pull_request)

    def _bind_loop(self) -> asyncio.AbstractEventLoop:
        loop = asyncio.get_running_loop()
        self._loop = loop
        self._loop_thread = threading.get_ident()
        if self._checker is None and not self._stopped:
            self._checker = loop.create_task(self._check_loop())
        return loop

    def held_count(self) -> int:
        return sum(len(v) for v in self.pull_request_table.values())

    # -- waking ----------------------------------------------------------------------------

    def notify_message_arriving(self, topic: str, queue_id: int, max_offset: int,
                                tags_code: int | None = None) -> None:
        """The store's arrival callback: `max_offset` is the queue's next offset after the put.

        Cheap when nobody waits on the queue (one dict probe). Safe to call from a store thread.
        """
        key = (topic, queue_id)
        if key not in self.pull_request_table:
            return
        if threading.get_ident() != self._loop_thread:
            loop = self._loop
            if loop is not None and not loop.is_closed():
                loop.call_soon_threadsafe(self.notify_message_arriving, topic, queue_id, max_offset,
                                          tags_code)
            return
        seen = self._arrived.get(key)
        if seen is None:
            self._arrived[key] = (max_offset, {tags_code})
        else:
            codes = seen[1]
            if codes is not None:
                codes.add(tags_code)
            if max_offset > seen[0]:
                self._arrived[key] = (max_offset, codes)
        if not self._drain_scheduled:
            self._drain_scheduled = True
            assert self._loop is not None
            self._loop.call_soon(self._drain)

    def wake_now(self) -> None:
        """Answer the pulls woken by the arrivals so far now, not at the end of this loop turn.

        The send processor calls this once its run of sends is stored: a woken pull's answer
        then leaves before the send responses are written (each write on loopback costs tens of
        microseconds), which is the end-to-end latency of a lightly loaded topic. The arrivals of
        a whole run still wake each queue once.
        """
        if self._drain_scheduled:
            self._drain()

    def _drain(self) -> None:
        self._drain_scheduled = False
        if not self._arrived:  # wake_now() took them already
            return
        arrived, self._arrived = self._arrived, {}
        answered: dict[int, Any] = {}
        for key, (max_offset, codes) in arrived.items():
            self._wake(key, max_offset, codes, answered)
        # One write per consumer connection for all of its woken pulls, without waiting for the
        # loop turn that would write them otherwise.
        for channel in answered.values():
            flush = getattr(channel, "flush", None)
            if flush is not None:
                flush()

    def _wake(self, key: tuple[str, int], max_offset: int, codes: set[int | None] | None,
              answered: dict[int, Any] | None = None) -> None:
        waiting = self.pull_request_table.get(key)
        if not waiting:
            return
        keep: list[PullRequest] = []
        ready: list[PullRequest] = []
        store_max: int | None = None
        for pr in waiting:
            newest = max_offset
            if newest <= pr.pull_from_this_offset:
                if store_max is None:
                    store_max = self._store_max(key)
                newest = store_max
            if newest > pr.pull_from_this_offset and pr.is_matched(codes):
                ready.append(pr)
            else:
                keep.append(pr)
        if not ready:
            return
        if keep:
            self.pull_request_table[key] = keep
        else:
            del self.pull_request_table[key]
        for pr in ready:
            if answered is not None:
                answered[id(pr.channel)] = pr.channel
            self._execute(pr)

    def _store_max(self, key: tuple[str, int]) -> int:
        try:
            return int(self._ctl.store.get_max_offset_in_queue(key[0], key[1]))
        except Exception:
            log.exception("Failed to get max offset in queue %s", key)
            return -1

    def _on_timeout(self, pr: PullRequest) -> None:
        key = (pr.topic, pr.queue_id)
        waiting = self.pull_request_table.get(key)
        if waiting is None:
            return
        try:
            waiting.remove(pr)
        except ValueError:
            return
        if not waiting:
            del self.pull_request_table[key]
        self._execute(pr)

    def _execute(self, pr: PullRequest) -> None:
        timer = pr.timer
        if timer is not None:
            timer.cancel()
            pr.timer = None
        if not getattr(pr.channel, "is_active", True):
            return
        try:
            pr.rerun(pr)
        except Exception:
            log.exception("PullRequestHoldService: failed to execute request when wakeup, "
                          "topic=%s, queueId=%d", pr.topic, pr.queue_id)

    def check_hold_request(self) -> None:
        """Re-check every parked queue against the store (Java's periodic checkHoldRequest)."""
        for key in list(self.pull_request_table):
            max_offset = self._store_max(key)
            if max_offset >= 0:
                self._wake(key, max_offset, None)

    async def _check_loop(self) -> None:
        while not self._stopped:
            interval = CHECK_INTERVAL_LONG_POLLING
            bc = self._ctl.broker_config
            if not bc.long_polling_enable:
                interval = bc.short_polling_time_mills / 1000.0
            await asyncio.sleep(interval)
            try:
                self.check_hold_request()
            except Exception:
                log.exception("PullRequestHoldService: check hold request failed")

    # -- connection and lifecycle ------------------------------------------------------------

    def do_channel_close_event(self, channel: Any) -> int:
        """Drop every pull parked by a closed connection; returns how many."""
        dropped = 0
        for key in list(self.pull_request_table):
            waiting = self.pull_request_table[key]
            keep = [pr for pr in waiting if pr.channel is not channel]
            if len(keep) == len(waiting):
                continue
            for pr in waiting:
                if pr.channel is channel and pr.timer is not None:
                    pr.timer.cancel()
                    pr.timer = None
            dropped += len(waiting) - len(keep)
            if keep:
                self.pull_request_table[key] = keep
            else:
                del self.pull_request_table[key]
        return dropped

    def shutdown(self) -> None:
        """Forget parked pulls (their connections are closing with the server) and stop the checker."""
        self._stopped = True
        for waiting in self.pull_request_table.values():
            for pr in waiting:
                if pr.timer is not None:
                    pr.timer.cancel()
                    pr.timer = None
        self.pull_request_table.clear()
        self._arrived.clear()
        if self._checker is not None:
            self._checker.cancel()
            self._checker = None
