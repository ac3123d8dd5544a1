"""RebalanceLockManager: which client of a consumer group owns which queue for orderly consumption.

LOCK_BATCH_MQ / UNLOCK_BATCH_MQ change it; the send path asks it whether a group still holds locks
(an orderly group's send-back then goes to the DLQ). The controller owns the one instance and hands
it to both processors.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger("rocketq.broker.client")


def _now_ms() -> int:
    return int(time.time() * 1000)


# RocketMQ's rocketmq.broker.rebalance.lockMaxLiveTime: an orderly consumer re-locks every 20 s, so a lock
# not renewed for 60 s belongs to a consumer that is gone.
REBALANCE_LOCK_MAX_LIVE_TIME = 60_000


@dataclass(slots=True)
class LockEntry:
    client_id: str
    last_update_timestamp: int = field(default_factory=_now_ms)

    def is_expired(self, now: int) -> bool:
        return now - self.last_update_timestamp > REBALANCE_LOCK_MAX_LIVE_TIME


class RebalanceLockManager:
    """Which client of a group owns which queue for orderly consumption (LOCK_BATCH_MQ / UNLOCK_BATCH_MQ).

    Queues are keyed by any hashable value (the broker uses MessageQueue bodies); a lock is renewed by
    locking again and lapses after REBALANCE_LOCK_MAX_LIVE_TIME.
    """

    def __init__(self) -> None:
        self.mq_lock_table: dict[str, dict[Any, LockEntry]] = {}

    def try_lock_batch(self, group: str, mqs: Iterable[Any], client_id: str,
                       now_ms: int | None = None) -> list[Any]:
        """Lock what is free, expired or already ours; returns the queues this client now holds."""
        now = _now_ms() if now_ms is None else now_ms
        table = self.mq_lock_table.setdefault(group, {})
        locked = []
        for mq in mqs:
            entry = table.get(mq)
            if entry is None:
                table[mq] = LockEntry(client_id, now)
                log.info("RebalanceLockManager#tryLockBatch: lock a message which has not been locked yet, "
                         "group=%s, clientId=%s, mq=%s", group, client_id, mq)
            elif entry.client_id == client_id:
                entry.last_update_timestamp = now
            elif entry.is_expired(now):
                log.warning("RebalanceLockManager#tryLockBatch: try to lock a expired message queue, "
                            "group=%s, mq=%s, old client id=%s, new client id=%s",
                            group, mq, entry.client_id, client_id)
                entry.client_id = client_id
                entry.last_update_timestamp = now
            else:
                log.warning("RebalanceLockManager#tryLockBatch: message queue has been locked by other "
                            "client, group=%s, mq=%s, locked client id=%s, current client id=%s",
                            group, mq, entry.client_id, client_id)
                continue
            locked.append(mq)
        return locked

    def unlock_batch(self, group: str, mqs: Iterable[Any], client_id: str) -> None:
        table = self.mq_lock_table.get(group)
        if table is None:
            log.warning("RebalanceLockManager#unlockBatch: group not exist, group=%s, clientId=%s",
                        group, client_id)
            return
        for mq in mqs:
            entry = table.get(mq)
            if entry is not None and entry.client_id == client_id:
                del table[mq]
                log.info("RebalanceLockManager#unlockBatch: unlock mq, group=%s, clientId=%s, mq=%s",
                         group, client_id, mq)
        if not table:
            del self.mq_lock_table[group]

    def is_locked(self, group: str, mq: Any, client_id: str, now_ms: int | None = None) -> bool:
        entry = self.mq_lock_table.get(group, {}).get(mq)
        now = _now_ms() if now_ms is None else now_ms
        return entry is not None and entry.client_id == client_id and not entry.is_expired(now)

    def has_live_locks(self, group: str, now_ms: int | None = None) -> bool:
        """True while some queue of the group is held by an orderly consumer (send-back goes to the DLQ)."""
        now = _now_ms() if now_ms is None else now_ms
        return any(not e.is_expired(now) for e in self.mq_lock_table.get(group, {}).values())
