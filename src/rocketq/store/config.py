"""MessageStoreConfig: the store's knobs, RocketMQ's names (snake_case) and RocketMQ's defaults.

Only the keys the store honours are here; `from_properties` maps RocketMQ's camelCase keys and
rejects unknown ones (config is data: a typo is an error, not silence).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from rocketq.errors import ConfigError

ASYNC_FLUSH = "ASYNC_FLUSH"
SYNC_FLUSH = "SYNC_FLUSH"

_UNIT_MS = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


@dataclass(slots=True)
class MessageStoreConfig:
    store_path_root_dir: str = os.path.join(os.path.expanduser("~"), "store")
    # None: <store_path_root_dir>/commitlog
    store_path_commit_log: str | None = None
    mapped_file_size_commit_log: int = 1024 * 1024 * 1024
    mapped_file_size_consume_queue: int = 300_000 * 20
    flush_disk_type: str = ASYNC_FLUSH
    flush_interval_commit_log: int = 500
    flush_commit_log_least_pages: int = 4
    flush_commit_log_thorough_interval: int = 10_000
    flush_interval_consume_queue: int = 1000
    flush_consume_queue_least_pages: int = 2
    flush_consume_queue_thorough_interval: int = 60_000
    sync_flush_timeout: int = 5000
    max_message_size: int = 4 * 1024 * 1024
    file_reserved_time: int = 72
    delete_when: str = "04"
    disk_max_used_space_ratio: int = 75
    disk_space_clean_forcibly_ratio: int = 85
    disk_space_warning_level_ratio: int = 90
    clean_file_forcibly_enable: bool = True
    clean_resource_interval: int = 10_000
    check_crc_on_recover: bool = True
    max_hash_slot_num: int = 5_000_000
    max_index_num: int = 20_000_000
    max_msgs_num_batch: int = 64
    message_index_enable: bool = True
    max_transfer_count_on_message_in_memory: int = 32
    max_transfer_bytes_on_message_in_memory: int = 256 * 1024
    message_delay_level: str = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"

    def __post_init__(self) -> None:
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

    @classmethod
    def from_properties(cls, props: Mapping[str, Any]) -> MessageStoreConfig:
        """Build from RocketMQ-style keys (`mappedFileSizeCommitLog`) or snake_case ones."""
        known = {f.name: f for f in fields(cls)}
        kwargs: dict[str, Any] = {}
        for key, value in props.items():
            name = _snake(key)
            if name not in known:
                raise ConfigError(f"unknown message store config key {key!r}")
            default = known[name].default
            kwargs[name] = _coerce(key, value, default)
        return cls(**kwargs)


def _snake(key: str) -> str:
    if key == "checkCRCOnRecover":
        return "check_crc_on_recover"
    return re.sub(r"(?<!^)(?=[A-Z])", "_", key).lower()


def _coerce(key: str, value: Any, default: Any) -> Any:
    if not isinstance(value, str) or isinstance(default, str) or default is None:
        return value
    try:
        if isinstance(default, bool):
            return value.strip().lower() == "true"
        if isinstance(default, int):
            return int(value.strip())
    except ValueError:
        raise ConfigError(f"bad value {value!r} for {key}") from None
    return value
