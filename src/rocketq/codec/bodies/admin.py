"""Admin statistics bodies keyed by MessageQueue: TopicStatsTable (GET_TOPIC_STATS_INFO) and
ConsumeStats (GET_CONSUME_STATS).

fastjson writes a ``Map<MessageQueue, V>`` with the queue *object* as the key
(``{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"t"}:{...}}}``), which is not JSON;
Java's mqadmin reads exactly that, so these bodies write it with `codec.fastjson`'s writer and read
it with its reader. The broker writes the same bodies from its own rows through the functions here.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from operator import itemgetter
from typing import Any, Final, Self

import orjson

from rocketq.codec import fastjson
from rocketq.codec.bodies._schema import JsonBody, body
from rocketq.codec.bodies.client import MessageQueue, mq_table
from rocketq.errors import ProtocolError

__all__ = [
    "ConsumeStats",
    "OffsetWrapper",
    "TopicOffset",
    "TopicStatsTable",
    "consume_stats_json",
    "consume_stats_list_json",
    "offset_wrapper_json",
    "topic_offset_json",
    "topic_stats_table_json",
]


@body
class TopicOffset(JsonBody):
    min_offset: int = 0
    max_offset: int = 0
    last_update_timestamp: int = 0

    def to_json(self) -> bytes:
        return topic_offset_json(self.min_offset, self.max_offset, self.last_update_timestamp)


@body
class OffsetWrapper(JsonBody):
    broker_offset: int = 0
    consumer_offset: int = 0
    pull_offset: int = 0
    last_timestamp: int = 0
    # rocketq's member (Java's fastjson ignores it, a Java broker leaves it out): popped messages of a
    # pop group whose invisible time has passed and that wait for the revive service
    revive_backlog: int = 0

    def to_json(self) -> bytes:
        return offset_wrapper_json(
            self.broker_offset, self.consumer_offset, self.pull_offset, self.last_timestamp,
            self.revive_backlog,
        )


# The two value bodies as one %-format each (members in name order, as the generic plan writes them,
# which a test checks): the broker writes one per queue, so it skips building a dataclass for each.
_TOPIC_OFFSET: Final = b'{"lastUpdateTimestamp":%d,"maxOffset":%d,"minOffset":%d}'
_OFFSET_WRAPPER: Final = (
    b'{"brokerOffset":%d,"consumerOffset":%d,"lastTimestamp":%d,"pullOffset":%d,"reviveBacklog":%d}'
)


def topic_offset_json(min_offset: int, max_offset: int, last_update_timestamp: int) -> bytes:
    """A TopicOffset's JSON, without building one."""
    return _TOPIC_OFFSET % (last_update_timestamp, max_offset, min_offset)


def offset_wrapper_json(
    broker_offset: int, consumer_offset: int, pull_offset: int, last_timestamp: int, revive_backlog: int = 0
) -> bytes:
    """An OffsetWrapper's JSON, without building one."""
    return _OFFSET_WRAPPER % (broker_offset, consumer_offset, last_timestamp, pull_offset, revive_backlog)


def topic_stats_table_json(
    entries: Iterable[tuple[bytes, bytes]], topic_put_tps: float | None = None
) -> bytes:
    """TopicStatsTable from (``fastjson.mq_keys`` key, TopicOffset JSON) pairs, in the order given.

    Without ``topic_put_tps`` the member is left out, as Java 4.x brokers write the body.
    """
    if topic_put_tps is None:
        return fastjson.dumps_mq_table(entries)
    return fastjson.dumps_mq_table(entries, {"topicPutTps": orjson.dumps(float(topic_put_tps))})


def consume_stats_json(entries: Iterable[tuple[bytes, bytes]], consume_tps: float = 0.0) -> bytes:
    """ConsumeStats from (``fastjson.mq_keys`` key, OffsetWrapper JSON) pairs, in the order given."""
    return fastjson.dumps_mq_table(entries, {"consumeTps": orjson.dumps(float(consume_tps))})


def consume_stats_list_json(
    broker_addr: str, groups: Iterable[tuple[str, list[bytes]]], total_diff: int
) -> bytes:
    """ConsumeStatsList (GET_BROKER_CONSUME_STATS): per group, its ConsumeStats bodies (from
    :func:`consume_stats_json`) inside ordinary JSON, one ``{group: [...]}`` object per group."""
    listed = b",".join(
        [b"{" + orjson.dumps(group) + b":[" + b",".join(stats) + b"]}" for group, stats in groups]
    )
    return (b'{"brokerAddr":' + orjson.dumps(broker_addr) + b',"consumeStatsList":[' + listed
            + b'],"totalDiff":%d,"totalInflightDiff":0}' % total_diff)


def _entries(table: Mapping[MessageQueue, JsonBody]) -> list[tuple[bytes, bytes]]:
    return [(fastjson.mq_key(mq.topic, mq.broker_name, mq.queue_id), value.to_json())
            for mq, value in sorted(table.items(), key=itemgetter(0))]


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
        return topic_stats_table_json(_entries(self.offset_table), self.topic_put_tps)

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
        return consume_stats_json(_entries(self.offset_table), self.consume_tps)

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
