"""Latency fault tolerance (RocketMQ's MQFaultStrategy + LatencyFaultToleranceImpl).

After every send the producer reports how long the broker took. A slow answer, or a failure
(counted as 30 s), makes the broker "not available" for a while, taken from two parallel tables:
latency >= latency_max[i] -> not available for not_available_duration[i] ms. Queue selection
skips brokers that are not available, and falls back to the least bad one when all are.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from rocketq.client.route import TopicPublishInfo
from rocketq.codec.bodies import MessageQueue

__all__ = [
    "DEFAULT_LATENCY_MAX",
    "DEFAULT_NOT_AVAILABLE_DURATION",
    "FaultItem",
    "LatencyFaultTolerance",
    "MQFaultStrategy",
]

DEFAULT_LATENCY_MAX: tuple[int, ...] = (50, 100, 550, 1000, 2000, 3000, 15000)
DEFAULT_NOT_AVAILABLE_DURATION: tuple[int, ...] = (0, 0, 30000, 60000, 120000, 180000, 600000)
ISOLATION_LATENCY = 30_000  # what a failed send counts as


def _now_ms() -> float:
    return time.monotonic() * 1000.0


@dataclass(slots=True)
class FaultItem:
    """One broker's last reported latency and when it may be used again (monotonic ms)."""

    name: str
    current_latency: float
    start_timestamp: float

    def is_available(self, now: float) -> bool:
        return now >= self.start_timestamp

    def sort_key(self, now: float) -> tuple[bool, float, float]:
        # available first, then lower latency, then the one that becomes available sooner
        return (not self.is_available(now), self.current_latency, self.start_timestamp)


class LatencyFaultTolerance:
    def __init__(self, clock: Callable[[], float] = _now_ms) -> None:
        self._items: dict[str, FaultItem] = {}
        self._clock = clock

    def update_fault_item(self, name: str, current_latency: float, not_available_duration: float) -> None:
        now = self._clock()
        item = self._items.get(name)
        if item is None:
            self._items[name] = FaultItem(name, current_latency, now + not_available_duration)
        else:
            item.current_latency = current_latency
            item.start_timestamp = now + not_available_duration

    def is_available(self, name: str) -> bool:
        item = self._items.get(name)
        return item is None or item.is_available(self._clock())

    def remove(self, name: str) -> None:
        self._items.pop(name, None)

    def pick_one_at_least(self) -> str | None:
        """A broker from the better half of all known ones (random among them), or None."""
        if not self._items:
            return None
        now = self._clock()
        ranked = sorted(self._items.values(), key=lambda it: it.sort_key(now))
        half = max(1, len(ranked) // 2)
        return random.choice(ranked[:half]).name

    def __len__(self) -> int:
        return len(self._items)


class MQFaultStrategy:
    """Queue selection with (``enabled``) or without broker fault avoidance."""

    def __init__(
        self,
        enabled: bool = False,
        latency_max: Sequence[int] = DEFAULT_LATENCY_MAX,
        not_available_duration: Sequence[int] = DEFAULT_NOT_AVAILABLE_DURATION,
        clock: Callable[[], float] = _now_ms,
    ) -> None:
        if len(latency_max) != len(not_available_duration):
            raise ValueError("latency_max and not_available_duration need the same length")
        self.enabled = enabled
        self.latency_max = tuple(latency_max)
        self.not_available_duration = tuple(not_available_duration)
        self.tolerance = LatencyFaultTolerance(clock)

    def select_one_message_queue(self, info: TopicPublishInfo, last_broker_name: str | None) -> MessageQueue:
        if not self.enabled:
            return info.select_one_message_queue(last_broker_name)
        mqs = info.message_queue_list
        n = len(mqs)
        available = self.tolerance.is_available
        fallback: MessageQueue | None = None
        for _ in range(n):
            mq = mqs[info.next_index() % n]
            if available(mq.broker_name):
                if mq.broker_name != last_broker_name:
                    return mq
                if fallback is None:
                    fallback = mq
        if fallback is not None:
            return fallback
        # Every broker is in its penalty time: take the least bad one rather than none.
        not_best = self.tolerance.pick_one_at_least()
        if not_best is not None:
            nums = info.queue_nums_of_broker(not_best)
            if nums > 0:
                return MessageQueue(mqs[0].topic, not_best, info.next_index() % nums)
            self.tolerance.remove(not_best)
        return info.select_one_message_queue(last_broker_name)

    def update_fault_item(self, broker_name: str, current_latency: float, isolation: bool) -> None:
        if not self.enabled:
            return
        latency = ISOLATION_LATENCY if isolation else current_latency
        self.tolerance.update_fault_item(broker_name, current_latency, self.not_available_for(latency))

    def not_available_for(self, latency: float) -> int:
        """ms a broker is avoided after answering in ``latency`` ms."""
        for i in range(len(self.latency_max) - 1, -1, -1):
            if latency >= self.latency_max[i]:
                return self.not_available_duration[i]
        return 0
