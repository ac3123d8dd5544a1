"""Admin statistics bodies keyed by MessageQueue: TopicStatsTable (GET_TOPIC_STATS_INFO) and
ConsumeStats (GET_CONSUME_STATS).

fastjson writes a ``Map<MessageQueue, V>`` with the queue *object* as the key
(``{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"t"}:{...}}}``), which is not JSON;
Java's mqadmin reads exactly that, so these bodies write it, and read it back with a small
scanner instead of a JSON parser.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from typing import Any, Final, Self

import orjson

from rocketq.codec.bodies._schema import JsonBody, body, loads_lenient
from rocketq.codec.bodies.client import MessageQueue
from rocketq.errors import ProtocolError

__all__ = ["ConsumeStats", "OffsetWrapper", "TopicOffset", "TopicStatsTable"]

# {queue object}:{value object}; neither side nests objects, and queue/topic names cannot hold braces.
_ENTRY: Final = re.compile(rb"(\{[^{}]*\})\s*:\s*(\{[^{}]*\})")
_TABLE: Final = re.compile(rb'"offsetTable"\s*:\s*\{')


@body
class TopicOffset(JsonBody):
    min_offset: int = 0
    max_offset: int = 0
    last_update_timestamp: int = 0


@body
class OffsetWrapper(JsonBody):
    broker_offset: int = 0
    consumer_offset: int = 0
    pull_offset: int = 0
    last_timestamp: int = 0


def _write(table: Mapping[MessageQueue, JsonBody], extra: dict[str, float]) -> bytes:
    entries = b",".join(mq.to_json() + b":" + value.to_json() for mq, value in sorted(table.items()))
    members = [b'"offsetTable":{' + entries + b"}"]
    members.extend(orjson.dumps(key) + b":" + orjson.dumps(float(value)) for key, value in extra.items())
    return b"{" + b",".join(sorted(members)) + b"}"


def _read(
    data: bytes | bytearray | memoryview | str, value_cls: type[JsonBody]
) -> tuple[dict[Any, Any], Any]:
    raw = data.encode() if isinstance(data, str) else bytes(data)
    table: dict[Any, Any] = {}
    rest = raw
    start = _TABLE.search(raw)
    if start is not None:
        pos = start.end()
        while True:
            while pos < len(raw) and raw[pos : pos + 1] in b" \t\r\n,":
                pos += 1
            if raw[pos : pos + 1] == b"}":
                pos += 1
                break
            entry = _ENTRY.match(raw, pos)
            if entry is None:
                raise ProtocolError("offsetTable entry is not {queue}:{value}")
            table[MessageQueue.from_json(entry.group(1))] = value_cls.from_json(entry.group(2))
            pos = entry.end()
        rest = raw[: start.start()] + b'"offsetTable":{}' + raw[pos:]
    return table, loads_lenient(rest)


@body
class TopicStatsTable(JsonBody):
    offset_table: dict[MessageQueue, TopicOffset] = dataclasses.field(default_factory=dict)
    topic_put_tps: float = 0.0

    def to_json(self) -> bytes:
        return _write(self.offset_table, {"topicPutTps": self.topic_put_tps})

    @classmethod
    def from_json(cls, data: bytes | bytearray | memoryview | str) -> Self:
        table, obj = _read(data, TopicOffset)
        tps = obj.get("topicPutTps", 0.0) if isinstance(obj, dict) else 0.0
        if not isinstance(tps, int | float) or isinstance(tps, bool):
            raise ProtocolError("topicPutTps is not a number")
        return cls(table, float(tps))


@body
class ConsumeStats(JsonBody):
    offset_table: dict[MessageQueue, OffsetWrapper] = dataclasses.field(default_factory=dict)
    consume_tps: float = 0.0

    def to_json(self) -> bytes:
        return _write(self.offset_table, {"consumeTps": self.consume_tps})

    @classmethod
    def from_json(cls, data: bytes | bytearray | memoryview | str) -> Self:
        table, obj = _read(data, OffsetWrapper)
        tps = obj.get("consumeTps", 0.0) if isinstance(obj, dict) else 0.0
        if not isinstance(tps, int | float) or isinstance(tps, bool):
            raise ProtocolError("consumeTps is not a number")
        return cls(table, float(tps))

    @property
    def total_diff(self) -> int:
        """Java's ``computeTotalDiff()``: broker offset minus consumer offset, summed."""
        return sum(w.broker_offset - w.consumer_offset for w in self.offset_table.values())
