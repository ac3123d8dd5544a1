"""MessageStoreConfig: the store's knobs, RocketMQ's names (snake_case) and RocketMQ's defaults.

Only the keys the store honours are here. ``rocketq.config.load_configs`` fills it from properties,
TOML, the environment and flags (a typo is an error, not silence).
"""

from __future__ import annotations

import itertools
import os
import re
from dataclasses import dataclass

from rocketq.config.fields import restart_required, runtime_updatable
from rocketq.errors import ConfigError

ASYNC_FLUSH = "ASYNC_FLUSH"
SYNC_FLUSH = "SYNC_FLUSH"

_LAYOUT = "it decides the size of files already on disk"
_HA = "the replication service reads it when it starts"
_UNIT_MS = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


@dataclass(frozen=True, slots=True)
class MessageStoreConfig:
    """RocketMQ ``MessageStoreConfig``. A runtime-updatable key is read from ``MessageStore.config``
    at each use; ``MessageStore.apply_config`` swaps in the updated object and wakes the services."""

    store_path_root_dir: str = restart_required(os.path.join(os.path.expanduser("~"), "store"))
    # None: <store_path_root_dir>/commitlog
    store_path_commit_log: str | None = restart_required(None)
    mapped_file_size_commit_log: int = restart_required(1024 * 1024 * 1024, why=_LAYOUT)
    mapped_file_size_consume_queue: int = restart_required(300_000 * 20, why=_LAYOUT)
    flush_disk_type: str = restart_required(
        ASYNC_FLUSH, why="the flush service, group commit or periodic flush, is chosen at start")
    flush_interval_commit_log: int = runtime_updatable(500)
    flush_commit_log_least_pages: int = runtime_updatable(4)
    flush_commit_log_thorough_interval: int = runtime_updatable(10_000)
    flush_interval_consume_queue: int = runtime_updatable(1000)
    flush_consume_queue_least_pages: int = runtime_updatable(2)
    flush_consume_queue_thorough_interval: int = runtime_updatable(60_000)
    sync_flush_timeout: int = runtime_updatable(5000)
    max_message_size: int = runtime_updatable(4 * 1024 * 1024)
    file_reserved_time: int = runtime_updatable(72)
    delete_when: str = runtime_updatable("04")
    disk_max_used_space_ratio: int = runtime_updatable(75)
    disk_space_clean_forcibly_ratio: int = runtime_updatable(85)
    disk_space_warning_level_ratio: int = runtime_updatable(90)
    clean_file_forcibly_enable: bool = runtime_updatable(True)
    clean_resource_interval: int = runtime_updatable(10_000)
    check_crc_on_recover: bool = restart_required(True, why="recovery runs at start")
    max_hash_slot_num: int = restart_required(5_000_000, why=_LAYOUT)
    max_index_num: int = restart_required(20_000_000, why=_LAYOUT)
    max_msgs_num_batch: int = runtime_updatable(64)
    message_index_enable: bool = restart_required(True, why="the index service is built at start")
    max_transfer_count_on_message_in_memory: int = runtime_updatable(32)
    max_transfer_bytes_on_message_in_memory: int = runtime_updatable(256 * 1024)
    message_delay_level: str = restart_required(
        "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h",
        why="the delay levels are fixed at start")
    # -- timer messages (RocketMQ 5: TIMER_DELIVER_MS / TIMER_DELAY_SEC / TIMER_DELAY_MS) --
    timer_wheel_enable: bool = restart_required(True, why="the timer service is built at start")
    # Java's setter snaps to 100 / 200 / 500 / 1000 (see __post_init__); the wheel's slots mean
    # nothing under another precision, so a store keeps the one it was built with.
    timer_precision_ms: int = restart_required(1000, why=_LAYOUT)
    timer_max_delay_sec: int = runtime_updatable(3600 * 24 * 3)
    timer_roll_window_slot: int = restart_required(3600 * 24 * 2, why="the wheel is laid out at start")
    mapped_file_size_timer_log: int = restart_required(100 * 1024 * 1024, why=_LAYOUT)
    timer_flush_interval_ms: int = restart_required(1000, why="the timer's flush task is started with it")

    # Replication (RocketMQ 4.x HA, docs/ha.md). haListenPort unset: the broker's listenPort + 1.
    ha_listen_port: int | None = restart_required(None, why=_HA)
    ha_send_heartbeat_interval: int = restart_required(5000, why=_HA)
    ha_housekeeping_interval: int = restart_required(20_000, why=_HA)
    ha_transfer_batch_size: int = restart_required(32 * 1024, why=_HA)
    # A slave's master HA address; unset, it is the one the name server answers the registration with.
    ha_master_address: str | None = restart_required(None, why=_HA)
    ha_slave_fallbehind_max: int = restart_required(256 * 1024 * 1024, why=_HA)
    slave_timeout: int = restart_required(3000, why=_HA)
    access_message_in_memory_max_ratio: int = runtime_updatable(40)

    def __post_init__(self) -> None:
        snapped = snap_timer_precision(self.timer_precision_ms)
        if snapped != self.timer_precision_ms:
            object.__setattr__(self, "timer_precision_ms", snapped)
        self.validate()

    def validate(self) -> None:
        if self.flush_disk_type not in (ASYNC_FLUSH, SYNC_FLUSH):
            raise ConfigError(
                f"flushDiskType must be ASYNC_FLUSH or SYNC_FLUSH, not {self.flush_disk_type!r}"
            )
        if self.mapped_file_size_consume_queue <= 0 or self.mapped_file_size_consume_queue % 20:
            raise ConfigError("mappedFileSizeConsumeQueue must be a positive multiple of 20")
        if self.mapped_file_size_commit_log < 4096:
            raise ConfigError("mappedFileSizeCommitLog is too small")
        if self.max_hash_slot_num <= 0 or self.max_index_num <= 1:
            raise ConfigError("maxHashSlotNum / maxIndexNum must be positive")
        self.delay_levels_ms()
        if self.ha_transfer_batch_size <= 0:
            raise ConfigError("haTransferBatchSize must be > 0")

    # ---- derived paths -------------------------------------------------------------------
    @property
    def commit_log_dir(self) -> str:
        return self.store_path_commit_log or os.path.join(self.store_path_root_dir, "commitlog")

    @property
    def consume_queue_dir(self) -> str:
        return os.path.join(self.store_path_root_dir, "consumequeue")

    @property
    def index_dir(self) -> str:
        return os.path.join(self.store_path_root_dir, "index")

    @property
    def sync_flush(self) -> bool:
        return self.flush_disk_type == SYNC_FLUSH

    def delay_levels_ms(self) -> list[int]:
        """messageDelayLevel parsed: element i is the delay of level i + 1 in ms."""
        out = []
        for word in self.message_delay_level.split():
            m = re.fullmatch(r"(\d+)([smhd])", word)
            if not m:
                raise ConfigError(f"bad messageDelayLevel entry {word!r}")
            out.append(int(m.group(1)) * _UNIT_MS[m.group(2)])
        return out


def snap_timer_precision(ms: int) -> int:
    """MessageStoreConfig.setTimerPrecisionMs: the largest of 100/200/500/1000 not above ``ms``
    (100 below it)."""
    candidates = (100, 200, 500, 1000)
    for lower, upper in itertools.pairwise(candidates):
        if ms < upper:
            return lower
    return candidates[-1]
