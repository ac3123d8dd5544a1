"""TimerMetrics: pending timers per real topic (``config/timermetrics``, TimerMetrics.java's JSON).

The counts are advisory, as in RocketMQ: persisted now and then, so a kill -9 may leave them a
little off; the wheel's slot counts (``TimerProgress.pending``) are the exact figure. The body of
GET_TIMER_METRICS is ``encode()``: ``{"dataVersion": {...}, "timingCount": {topic: {"count": n,
"timeStamp": ms}}}``.
"""

from __future__ import annotations

import json
import logging
import os
import time

__all__ = ["TimerMetrics"]

log = logging.getLogger("rocketq.store.timer")


class TimerMetrics:
    def __init__(self, path: str) -> None:
        self.path = path
        self.counts: dict[str, int] = {}
        self.stamps: dict[str, int] = {}
        self.state_version = 0
        self.counter = 0
        self._dirty = False

    def add(self, topic: str, delta: int) -> None:
        if not topic:
            return
        self.counts[topic] = self.counts.get(topic, 0) + delta
        self.stamps[topic] = time.time_ns() // 1_000_000
        self._dirty = True

    def count(self, topic: str) -> int:
        return self.counts.get(topic, 0)

    def encode(self) -> bytes:
        timing = {t: {"count": max(0, n), "timeStamp": self.stamps.get(t, 0)}
                  for t, n in sorted(self.counts.items())}
        version = {"counter": self.counter, "stateVersion": self.state_version,
                   "timestamp": time.time_ns() // 1_000_000}
        return json.dumps({"dataVersion": version, "timingCount": timing}, separators=(",", ":")).encode()

    def load(self) -> None:
        for candidate in (self.path, self.path + ".bak"):
            try:
                with open(candidate, "rb") as f:
                    doc = json.loads(f.read())
                timing = doc.get("timingCount") or {}
                self.counts = {str(t): int(m.get("count", 0)) for t, m in timing.items()}
                self.stamps = {str(t): int(m.get("timeStamp", 0)) for t, m in timing.items()}
                self.counter = int((doc.get("dataVersion") or {}).get("counter", 0))
                return
            except FileNotFoundError:
                continue
            except (ValueError, AttributeError, TypeError) as exc:
                log.warning("timer metrics %s unreadable: %s", candidate, exc)

    def persist(self) -> None:
        """Write when something changed: temp file, previous kept as .bak, rename."""
        if not self._dirty:
            return
        self._dirty = False
        self.counter += 1
        data = self.encode()
        os.makedirs(os.path.dirname(self.path) or ".", exist_ok=True)
        tmp = self.path + ".tmp"
        with open(tmp, "wb") as f:
            f.write(data)
        if os.path.exists(self.path):
            os.replace(self.path, self.path + ".bak")
        os.replace(tmp, self.path)
