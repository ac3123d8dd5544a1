"""Master/slave replication, the store's part (RocketMQ 4.x HA): what a master sends and waits
for (`transfer.py`), what a slave appends and dispatches (`replica.py`). The sockets are the
broker's (`broker/ha/`); the byte format is `codec/ha.py`. `epoch.py` is RocketMQ 5's epoch file
(controller mode)."""

from rocketq.store.ha.epoch import EpochEntry, EpochFileCache, consistent_point
from rocketq.store.ha.replica import ReplicaDiverged, ReplicaWriter
from rocketq.store.ha.transfer import GroupTransfer, combined_wait, transfer_chunk

__all__ = ["EpochEntry", "EpochFileCache", "GroupTransfer", "ReplicaDiverged", "ReplicaWriter",
           "combined_wait", "consistent_point", "transfer_chunk"]
