"""Admin statistics bodies keyed by MessageQueue: TopicStatsTable (GET_TOPIC_STATS_INFO) and
ConsumeStats (GET_CONSUME_STATS).

fastjson writes a ``Map<MessageQueue, V>`` with the queue *object* as the key
(``{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"t"}:{...}}}``), which is not JSON;
Java's mqadmin reads exactly that, so these bodies write it, and read it with `codec.fastjson`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, Self

import orjson

from rocketq.codec import fastjson
from rocketq.codec.bodies._schema import JsonBody, body
from rocketq.codec.bodies.client import MessageQueue, mq_table
from rocketq.errors import ProtocolError

__all__ = ["ConsumeStats", "OffsetWrapper", "TopicOffset", "TopicStatsTable"]


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


def _read(obj: Any, where: str, value_cls: type[JsonBody], number: str) -> tuple[dict[Any, Any], float]:
    """(offsetTable, the one number member) of a parsed stats body."""
    if not isinstance(obj, dict):
        raise ProtocolError(f"{where}: expected an object, got {type(obj).__name__}")
    raw = mq_table(obj.get("offsetTable") or {}, f"{where}.offsetTable")
    table = {mq: value_cls.from_obj(v, f"{where}.offsetTable") for mq, v in raw.items()}
    tps = obj.get(number, 0.0)
    if not isinstance(tps, int | float) or isinstance(tps, bool):
        raise ProtocolError(f"{where}: {number} is not a number")
    return table, float(tps)


@body
class TopicStatsTable(JsonBody):
    offset_table: dict[MessageQueue, TopicOffset] = dataclasses.field(default_factory=dict)
    topic_put_tps: float = 0.0

    def to_json(self) -> bytes:
        return _write(self.offset_table, {"topicPutTps": self.topic_put_tps})

    @classmethod
    def from_obj(cls, obj: Any, where: str | None = None) -> Self:
        return cls(*_read(obj, where or cls.__name__, TopicOffset, "topicPutTps"))

    @classmethod
    def from_json(cls, data: bytes | bytearray | memoryview | str) -> Self:
        return cls.from_obj(fastjson.loads(data))


@body
class ConsumeStats(JsonBody):
    offset_table: dict[MessageQueue, OffsetWrapper] = dataclasses.field(default_factory=dict)
    consume_tps: float = 0.0

    def to_json(self) -> bytes:
        return _write(self.offset_table, {"consumeTps": self.consume_tps})

    @classmethod
    def from_obj(cls, obj: Any, where: str | None = None) -> Self:
        return cls(*_read(obj, where or cls.__name__, OffsetWrapper, "consumeTps"))

    @classmethod
    def from_json(cls, data: bytes | bytearray | memoryview | str) -> Self:
        return cls.from_obj(fastjson.loads(data))

    @property
    def total_diff(self) -> int:
        """Java's ``computeTotalDiff()``: broker offset minus consumer offset, summed."""
        return sum(w.broker_offset - w.consumer_offset for w in self.offset_table.values())
