"""Values the admin API answers with, where the codec has no body class for them.

JSON bodies keep RocketMQ's member names (``@body`` maps snake_case to them), so a value read
from a Java broker and one read from ours are the same thing.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from rocketq.codec.bodies import (
    ConsumeStats,
    JsonBody,
    MessageQueue,
    SubscriptionData,
    body,
)

__all__ = [
    "BrokerStatsData",
    "BrokerStatsItem",
    "ClusterBroker",
    "Connection",
    "ConsumeQueueData",
    "ConsumeStatsList",
    "ConsumerConnection",
    "ProducerConnection",
    "QueryConsumeQueueResult",
    "QueueProgress",
    "SendRT",
    "mq_dict",
]


def mq_dict(mq: MessageQueue) -> dict[str, Any]:
    return {"topic": mq.topic, "brokerName": mq.broker_name, "queueId": mq.queue_id}


@body
class BrokerStatsItem(JsonBody):
    sum: int = 0
    tps: float = 0.0
    avgpt: float = 0.0


@body
class BrokerStatsData(JsonBody):
    """VIEW_BROKER_STATS_DATA: one stats item over the last minute, hour and day."""

    stats_minute: BrokerStatsItem = dataclasses.field(default_factory=BrokerStatsItem)
    stats_hour: BrokerStatsItem = dataclasses.field(default_factory=BrokerStatsItem)
    stats_day: BrokerStatsItem = dataclasses.field(default_factory=BrokerStatsItem)

    def compute_24hour_sum(self) -> int:
        """The day's sum, else the hour's, else the minute's: a broker fills its day (and hour)
        window only when that period first rolls over, so a broker up for less than an hour shows
        its traffic in the minute window alone (mqadmin statsAll's rule)."""
        for item in (self.stats_day, self.stats_hour, self.stats_minute):
            if item.sum:
                return item.sum
        return 0


@body
class Connection(JsonBody):
    client_id: str = ""
    client_addr: str = ""
    language: str = ""
    version: int = 0


@body
class ConsumerConnection(JsonBody):
    """GET_CONSUMER_CONNECTION_LIST: the group's live clients and what they subscribe to."""

    connection_set: tuple[Connection, ...] = ()
    subscription_table: dict[str, SubscriptionData] = dataclasses.field(default_factory=dict)
    consume_type: str | None = None
    message_model: str | None = None
    consume_from_where: str | None = None


@body
class ProducerConnection(JsonBody):
    connection_set: tuple[Connection, ...] = ()


@body
class ConsumeQueueData(JsonBody):
    physic_offset: int = 0
    physic_size: int = 0
    tags_code: int = 0
    extend_data_json: str | None = None
    bit_map: str | None = None
    eval: bool = False
    msg: str | None = None


@body
class QueryConsumeQueueResult(JsonBody):
    """QUERY_CONSUME_QUEUE (QueryConsumeQueueResponseBody)."""

    queue_data: tuple[ConsumeQueueData, ...] = ()
    max_queue_index: int = 0
    min_queue_index: int = 0
    subscription_data: SubscriptionData | None = None
    filter_data: str | None = None


@dataclass(frozen=True, slots=True)
class ConsumeStatsList:
    """GET_BROKER_CONSUME_STATS: per consumer group, its ConsumeStats per topic on one broker."""

    broker_addr: str
    groups: dict[str, tuple[ConsumeStats, ...]]
    total_diff: int = 0


@dataclass(frozen=True, slots=True)
class QueueProgress:
    """One row of ``consumerProgress``: a queue, where the broker is and where the group is."""

    mq: MessageQueue
    broker_offset: int
    consumer_offset: int
    last_timestamp: int = 0

    @property
    def diff(self) -> int:
        return self.broker_offset - self.consumer_offset

    def to_obj(self) -> dict[str, Any]:
        return {
            **mq_dict(self.mq),
            "brokerOffset": self.broker_offset,
            "consumerOffset": self.consumer_offset,
            "diff": self.diff,
            "lastTimestamp": self.last_timestamp,
        }


@dataclass(frozen=True, slots=True)
class ClusterBroker:
    """A broker as ``clusterList`` shows it: where it is, and its runtime KVTable (empty if down)."""

    cluster: str
    broker_name: str
    broker_id: int
    addr: str
    runtime: dict[str, str]
    error: str | None = None

    @property
    def role(self) -> str:
        """rocketq's ``brokerRole`` runtime key (docs/ha.md); a Java broker's role follows from its id."""
        rt = self.runtime
        return rt.get("brokerRole") or ("" if not rt else "MASTER" if self.broker_id == 0 else "SLAVE")

    @property
    def replication_lag_bytes(self) -> int:
        """Bytes the slowest slave is behind this master (0 on a slave or a Java broker)."""
        return int(self.runtime.get("haReplicationLagBytes", 0) or 0)


@dataclass(frozen=True, slots=True)
class SendRT:
    """``checkMsgSendRT`` / ``clusterRT``: send round trips to one broker, in milliseconds."""

    broker_name: str
    sent: int
    failed: int
    rts: tuple[float, ...]

    @property
    def avg(self) -> float:
        return sum(self.rts) / len(self.rts) if self.rts else 0.0

    @property
    def max(self) -> float:
        return max(self.rts, default=0.0)

    def to_obj(self) -> dict[str, Any]:
        return {
            "brokerName": self.broker_name,
            "sent": self.sent,
            "failed": self.failed,
            "avgRT": round(self.avg, 3),
            "maxRT": round(self.max, 3),
        }
