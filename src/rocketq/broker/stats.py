"""BrokerStats: the put/get counters behind GET_BROKER_RUNTIME_INFO's putTps / getTransferredTps and
msgPutTotalTodayNow (RocketMQ's BrokerStats and the TPS part of BrokerStatsManager)."""

from __future__ import annotations

import time
from collections import deque


class BrokerStats:
    """Put/get counters and the per-second samples behind putTps / getTransferredTps.

    Processors only add to integers on the hot path; a 1 s sampler keeps ten minutes of totals.
    """

    __slots__ = (
        "_day",
        "get_today_morning",
        "get_total",
        "get_yesterday_morning",
        "put_failed",
        "put_today_morning",
        "put_total",
        "put_yesterday_morning",
        "samples",
    )

    def __init__(self) -> None:
        self.put_total = 0
        self.get_total = 0
        self.put_failed = 0
        self.put_today_morning = self.put_yesterday_morning = 0
        self.get_today_morning = self.get_yesterday_morning = 0
        self._day = time.localtime().tm_yday
        self.samples: deque[tuple[float, int, int]] = deque(maxlen=601)

    def on_put(self, n: int) -> None:
        self.put_total += n

    def on_put_failed(self) -> None:
        self.put_failed += 1

    def on_get(self, n: int) -> None:
        self.get_total += n

    def sample(self, now: float | None = None) -> None:
        now = time.monotonic() if now is None else now
        day = time.localtime().tm_yday
        if day != self._day:
            self._day = day
            self.put_yesterday_morning, self.put_today_morning = self.put_today_morning, self.put_total
            self.get_yesterday_morning, self.get_today_morning = self.get_today_morning, self.get_total
        self.samples.append((now, self.put_total, self.get_total))

    def tps(self, seconds: int, which: int) -> float:
        """Average rate over the last `seconds` of samples (which: 1 = put, 2 = get)."""
        if len(self.samples) < 2:
            return 0.0
        last = self.samples[-1]
        first = self.samples[max(0, len(self.samples) - 1 - seconds)]
        span = last[0] - first[0]
        return (last[which] - first[which]) / span if span > 0 else 0.0

    def tps_text(self, which: int) -> str:
        """RocketMQ's "10s 1min 10min" triple, e.g. "12.50 11.00 3.20"."""
        return " ".join(f"{self.tps(s, which):.2f}" for s in (10, 60, 600))
