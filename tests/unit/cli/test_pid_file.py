"""The broker's PID lock file (cli/serve.py PidFile) on a disk with no block left for the PID."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from rocketq.cli.serve import PidFile


def test_a_full_disk_still_takes_the_lock(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The PID is written into an emptied file; on a full disk that write fails, and the broker
    must still start (read-only) rather than exit with `unexpected OSError: [Errno 28]`."""

    def full(fd: int, data: bytes, offset: int) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "pwrite", full)
    lock = PidFile(tmp_path / "broker.pid")
    lock.acquire()
    try:
        other = PidFile(tmp_path / "broker.pid")
        with pytest.raises(Exception, match="in use by another broker"):
            other.acquire()
    finally:
        lock.release()
