"""Timer messages in the store: the wheel, the timer log, the checkpoint and the service logic
that files and delivers them (RocketMQ 5's store/timer). Files only; the broker drives it."""

from rocketq.store.timer.checkpoint import CheckpointValues, TimerCheckpoint
from rocketq.store.timer.log import TimerLog, TimerRecord
from rocketq.store.timer.metrics import TimerMetrics
from rocketq.store.timer.timer_store import TIMER_TOPIC, TimerMessageStore, TimerProgress, delete_key
from rocketq.store.timer.wheel import Slot, TimerWheel

__all__ = [
    "TIMER_TOPIC",
    "CheckpointValues",
    "Slot",
    "TimerCheckpoint",
    "TimerLog",
    "TimerMessageStore",
    "TimerMetrics",
    "TimerProgress",
    "TimerRecord",
    "TimerWheel",
    "delete_key",
]
