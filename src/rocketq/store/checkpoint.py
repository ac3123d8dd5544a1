"""The `checkpoint`, `abort` and `lock` files under the store root.

checkpoint: longs at 0/8/16/24/32 = physicMsgTimestamp, logicsMsgTimestamp, indexMsgTimestamp,
masterFlushedOffset, confirmPhyOffset in a page-sized file (StoreCheckpoint.java's layout).
abort: exists while a store runs; found at start it means the last run did not shut down.
lock: an exclusive flock so two stores never share one directory.
"""

from __future__ import annotations

import fcntl
import os
import struct

from rocketq.errors import StoreError

_LAYOUT = struct.Struct(">qqqqq")
_FILE_SIZE = 4096


class StoreCheckpoint:
    __slots__ = (
        "confirm_phy_offset",
        "index_msg_timestamp",
        "logics_msg_timestamp",
        "master_flushed_offset",
        "path",
        "physic_msg_timestamp",
    )

    def __init__(self, path: str) -> None:
        self.path = path
        self.physic_msg_timestamp = 0
        self.logics_msg_timestamp = 0
        self.index_msg_timestamp = 0
        self.master_flushed_offset = 0
        self.confirm_phy_offset = 0
        try:
            with open(path, "rb") as f:
                raw = f.read(_LAYOUT.size)
        except FileNotFoundError:
            return
        if len(raw) == _LAYOUT.size:
            (self.physic_msg_timestamp, self.logics_msg_timestamp, self.index_msg_timestamp,
             self.master_flushed_offset, self.confirm_phy_offset) = _LAYOUT.unpack(raw)

    def min_timestamp(self, index_safe: bool = False) -> int:
        """Where abnormal recovery may start: older than everything flushed (3 s of margin)."""
        ts = min(self.physic_msg_timestamp, self.logics_msg_timestamp)
        if index_safe:
            ts = min(ts, self.index_msg_timestamp)
        return max(0, ts - 3000)

    def flush(self) -> None:
        """Write and fsync (blocking: call from a worker thread on a live store)."""
        data = _LAYOUT.pack(self.physic_msg_timestamp, self.logics_msg_timestamp, self.index_msg_timestamp,
                            self.master_flushed_offset, self.confirm_phy_offset)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            if os.fstat(fd).st_size < _FILE_SIZE:
                os.ftruncate(fd, _FILE_SIZE)
            os.pwrite(fd, data, 0)
            os.fdatasync(fd)
        finally:
            os.close(fd)


def abort_file(root: str) -> str:
    return os.path.join(root, "abort")


def create_abort_file(root: str) -> None:
    os.makedirs(root, exist_ok=True)
    with open(abort_file(root), "wb"):
        pass


def remove_abort_file(root: str) -> None:
    try:
        os.unlink(abort_file(root))
    except FileNotFoundError:
        pass


class StoreLock:
    """flock on `<root>/lock`, held for the store's lifetime."""

    def __init__(self, root: str) -> None:
        os.makedirs(root, exist_ok=True)
        self.path = os.path.join(root, "lock")
        self._fd: int | None = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(self._fd)
            self._fd = None
            raise StoreError(f"Lock failed, MQ already started ({self.path})") from None

    def release(self) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None
