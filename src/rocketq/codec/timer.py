"""Bodies of the timer admin requests: GET_TIMER_CHECK_POINT's 56 bytes (TimerCheckpoint.encode)."""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

__all__ = ["CheckpointValues"]

_JAVA = struct.Struct(">qqqqqqq")


@dataclass(frozen=True, slots=True)
class CheckpointValues:
    """RocketMQ's 56 bytes as values (what GET_TIMER_CHECK_POINT carries)."""

    last_read_time_ms: int = 0
    last_timer_log_flush_pos: int = 0
    last_timer_queue_offset: int = 0
    master_timer_queue_offset: int = 0
    state_version: int = 0
    timestamp: int = 0
    counter: int = 0

    def encode(self) -> bytes:
        return _JAVA.pack(self.last_read_time_ms, self.last_timer_log_flush_pos, self.last_timer_queue_offset,
                          self.master_timer_queue_offset, self.state_version, self.timestamp, self.counter)

    @classmethod
    def decode(cls, data: bytes) -> CheckpointValues:
        if len(data) >= _JAVA.size:
            return cls(*_JAVA.unpack_from(data))
        # Older brokers answer the first four longs only.
        longs = struct.unpack_from(">" + "q" * (len(data) // 8), data)
        return cls(*longs[:4])

    def to_dict(self) -> dict[str, Any]:
        """RocketMQ's field names (what the admin prints)."""
        return {"lastReadTimeMs": self.last_read_time_ms,
                "lastTimerLogFlushPos": self.last_timer_log_flush_pos,
                "lastTimerQueueOffset": self.last_timer_queue_offset,
                "masterTimerQueueOffset": self.master_timer_queue_offset,
                "dataVersion": {"stateVersion": self.state_version, "timestamp": self.timestamp,
                                "counter": self.counter}}
