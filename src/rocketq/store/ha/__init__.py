"""Master/slave replication, the store's part (RocketMQ 4.x HA): what a master sends and waits
for (`transfer.py`), what a slave appends and dispatches (`replica.py`). The sockets are the
broker's (`broker/ha/`); the byte format is `codec/ha.py`."""

from rocketq.store.ha.replica import ReplicaDiverged, ReplicaWriter
from rocketq.store.ha.transfer import GroupTransfer, combined_wait, transfer_chunk

__all__ = ["GroupTransfer", "ReplicaDiverged", "ReplicaWriter", "combined_wait", "transfer_chunk"]
