"""Retention: which commit-log files may go, and the disk-full switch (CleanCommitLogService).

Expired segments (older than `file_reserved_time` hours, by last write) are deleted at the
`delete_when` hour, or at any hour once disk use passes `disk_max_used_space_ratio`; past
`disk_space_clean_forcibly_ratio` even unexpired ones go; at `disk_space_warning_level_ratio`
the store refuses puts until usage drops. The current (last) segment is never deleted.
Consume-queue and index files wholly below the new minimum offset follow.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass

from rocketq.store.config import MessageStoreConfig
from rocketq.store.mapped_file import MappedFileQueue

log = logging.getLogger("rocketq.store")

DELETE_FILES_BATCH_MAX = 10


def disk_used_ratio(path: str) -> float:
    """Used fraction of the partition holding `path` (-1 when unknown)."""
    try:
        st = os.statvfs(path)
    except OSError:
        return -1.0
    if st.f_blocks == 0:
        return -1.0
    return (st.f_blocks - st.f_bfree) / st.f_blocks


def is_time_to_delete(delete_when: str, now_ms: int) -> bool:
    hour = time.localtime(now_ms / 1000).tm_hour
    for word in delete_when.split(";"):
        word = word.strip()
        if word.isdigit() and int(word) == hour:
            return True
    return False


@dataclass(frozen=True, slots=True)
class CleanDecision:
    delete: bool
    clean_immediately: bool
    disk_full: bool | None  # None: leave the flag as it is


def decide(config: MessageStoreConfig, now_ms: int, ratio: float, manual: bool = False) -> CleanDecision:
    clean_immediately = False
    disk_full: bool | None
    if ratio > config.disk_space_warning_level_ratio / 100:
        disk_full = True
        clean_immediately = True
    elif ratio > config.disk_space_clean_forcibly_ratio / 100:
        disk_full = None
        clean_immediately = True
    else:
        disk_full = False
    space_full = ratio < 0 or ratio > config.disk_max_used_space_ratio / 100
    delete = manual or space_full or is_time_to_delete(config.delete_when, now_ms)
    return CleanDecision(delete, clean_immediately and config.clean_file_forcibly_enable, disk_full)


def delete_expired_by_time(
    mfq: MappedFileQueue, expired_ms: int, now_ms: int, clean_immediately: bool
) -> int:
    """Delete leading segments (never the last) whose last write is older than `expired_ms`."""
    count = 0
    for mf in list(mfq)[:-1]:
        if not clean_immediately and now_ms < mf.last_modified_ms + expired_ms:
            break
        mfq.delete_first_files(1)
        count += 1
        if count >= DELETE_FILES_BATCH_MAX:
            break
    if count:
        log.info("deleted %d expired commit log files, min offset now %d", count, mfq.min_offset())
    return count
