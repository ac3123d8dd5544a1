"""rocketq.admin: RocketMQ's admin operations (``mqadmin``'s MQAdminExt) as a Python API.

``AdminClient`` is asyncio; ``SyncAdminClient`` blocks. ``rocketq admin <command>`` is built on
them.
"""

from rocketq.admin.client import AdminClient
from rocketq.admin.models import (
    BrokerStatsData,
    BrokerStatsItem,
    ClusterBroker,
    Connection,
    ConsumeQueueData,
    ConsumerConnection,
    ConsumeStatsList,
    ProducerConnection,
    QueryConsumeQueueResult,
    QueueProgress,
    SendRT,
)
from rocketq.admin.sync import SyncAdminClient

__all__ = [
    "AdminClient",
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
    "SyncAdminClient",
]
