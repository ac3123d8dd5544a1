"""Consumer statistics per (group, topic): pull RT/TPS, consume RT, OK/failed TPS (ConsumerStatsManager).

Counters are bumped once per pulled or consumed *batch* (never per message) and sampled lazily:
an increment that finds the newest sample older than a second records a new one, so there is no
background task and a minute of history costs at most 61 samples per counter.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass

__all__ = ["ConsumeRuntimeStats", "ConsumerStatsManager", "StatsItem"]

_WINDOW = 60.0
_SAMPLE_EVERY = 1.0


class StatsItem:
    """A running (sum, count) with per-second samples for the last minute."""

    __slots__ = ("_samples", "count", "total")

    def __init__(self) -> None:
        self.total = 0
        self.count = 0
        now = time.monotonic()
        self._samples: deque[tuple[float, int, int]] = deque(
            [(now, 0, 0)], maxlen=int(_WINDOW / _SAMPLE_EVERY) + 2
        )

    def add(self, value: int, times: int = 1, now: float | None = None) -> None:
        self.total += value
        self.count += times
        t = time.monotonic() if now is None else now
        if t - self._samples[-1][0] >= _SAMPLE_EVERY:
            self._samples.append((t, self.total, self.count))

    def _baseline(self, now: float) -> tuple[float, int, int]:
        for sample in self._samples:
            if now - sample[0] <= _WINDOW:
                return sample
        return self._samples[-1]

    def tps(self, now: float | None = None) -> float:
        """Sum per second over (up to) the last minute."""
        t = time.monotonic() if now is None else now
        ts, total, _ = self._baseline(t)
        elapsed = t - ts
        return (self.total - total) / elapsed if elapsed > 0 else 0.0

    def avg(self, now: float | None = None) -> float:
        """Average value per event over (up to) the last minute (RT in ms)."""
        t = time.monotonic() if now is None else now
        _, total, count = self._baseline(t)
        n = self.count - count
        return (self.total - total) / n if n > 0 else 0.0


@dataclass(frozen=True, slots=True)
class ConsumeRuntimeStats:
    """RocketMQ's ConsumeStatus body: what `consumerStatus` admin commands show."""

    pull_rt: float
    pull_tps: float
    consume_rt: float
    consume_ok_tps: float
    consume_failed_tps: float
    consume_failed_msgs: int


class ConsumerStatsManager:
    __slots__ = ("_items",)

    def __init__(self) -> None:
        self._items: dict[tuple[str, str, str], StatsItem] = {}

    def _item(self, kind: str, group: str, topic: str) -> StatsItem:
        key = (kind, topic, group)
        item = self._items.get(key)
        if item is None:
            item = self._items[key] = StatsItem()
        return item

    def inc_pull_rt(self, group: str, topic: str, rt_ms: float) -> None:
        self._item("PULL_RT", group, topic).add(int(rt_ms))

    def inc_pull_tps(self, group: str, topic: str, msgs: int) -> None:
        self._item("PULL_TPS", group, topic).add(msgs)

    def inc_consume_rt(self, group: str, topic: str, rt_ms: float, msgs: int = 1) -> None:
        self._item("CONSUME_RT", group, topic).add(int(rt_ms), msgs)

    def inc_consume_ok_tps(self, group: str, topic: str, msgs: int) -> None:
        self._item("CONSUME_OK_TPS", group, topic).add(msgs)

    def inc_consume_failed_tps(self, group: str, topic: str, msgs: int) -> None:
        self._item("CONSUME_FAILED_TPS", group, topic).add(msgs)

    def consume_items(self, group: str, topic: str) -> tuple[StatsItem, StatsItem, StatsItem]:
        """(consume OK TPS, consume failed TPS, consume RT) items, for callers that cache them."""
        return (
            self._item("CONSUME_OK_TPS", group, topic),
            self._item("CONSUME_FAILED_TPS", group, topic),
            self._item("CONSUME_RT", group, topic),
        )

    def consume_status(self, group: str, topic: str) -> ConsumeRuntimeStats:
        failed = self._item("CONSUME_FAILED_TPS", group, topic)
        return ConsumeRuntimeStats(
            pull_rt=self._item("PULL_RT", group, topic).avg(),
            pull_tps=self._item("PULL_TPS", group, topic).tps(),
            consume_rt=self._item("CONSUME_RT", group, topic).avg(),
            consume_ok_tps=self._item("CONSUME_OK_TPS", group, topic).tps(),
            consume_failed_tps=failed.tps(),
            consume_failed_msgs=failed.total,
        )

    def totals(self, group: str, topic: str) -> dict[str, int]:
        """Lifetime counters (messages pulled / consumed OK / failed), handy for tests and benchmarks."""
        return {
            "pulled": self._item("PULL_TPS", group, topic).total,
            "consumed_ok": self._item("CONSUME_OK_TPS", group, topic).total,
            "consumed_failed": self._item("CONSUME_FAILED_TPS", group, topic).total,
        }
