"""EpochFileCache (RocketMQ 5's epochFileCheckpoint) and the consistent point of two logs."""

from __future__ import annotations

import zlib
from pathlib import Path

import pytest

from rocketq.store.ha import EpochEntry, EpochFileCache, consistent_point


def test_file_is_javas_checkpoint_format_and_round_trips(tmp_path: Path) -> None:
    cache = EpochFileCache(tmp_path)
    assert cache.append(1, 0) and cache.append(3, 4096)
    assert not cache.append(2, 8192)  # not newer than the last epoch
    text = (tmp_path / "epochFileCheckpoint").read_text()
    lines = "1-0\n3-4096\n"
    assert text == f"2\n{zlib.crc32(lines.encode()) & 0x7FFFFFFF}\n{lines}"
    again = EpochFileCache(tmp_path)
    again.load()
    assert again.entries == [EpochEntry(1, 0), EpochEntry(3, 4096)] and again.last_epoch == 3
    assert [e.end_offset for e in again.with_ends(5000)] == [4096, 5000]


def test_a_damaged_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "epochFileCheckpoint").write_text("1\n12345\n1-0\n")
    with pytest.raises(ValueError, match="checksum"):
        EpochFileCache(tmp_path).load()


def test_truncate_suffix_by_offset(tmp_path: Path) -> None:
    cache = EpochFileCache(tmp_path)
    cache.append(1, 0)
    cache.append(2, 100)
    cache.truncate_suffix_by_offset(100)
    assert cache.entries == [EpochEntry(1, 0)]


def test_consistent_point_cuts_an_old_masters_unreplicated_tail() -> None:
    # the old master wrote epoch 1 up to 900; the slave had 700 of it when it was promoted (epoch 2)
    old_master = [EpochEntry(1, 0)]
    new_master = [EpochEntry(1, 0), EpochEntry(2, 700)]
    assert consistent_point(old_master, 900, new_master, 1500) == 700
    # a follower that is simply behind keeps everything
    assert consistent_point([EpochEntry(1, 0)], 300, new_master, 1500) == 300
    # the old master was elected again (epoch 2) but its epoch 2 is not the new master's (epoch 3)
    assert consistent_point([EpochEntry(1, 0), EpochEntry(2, 900)], 950,
                            [EpochEntry(1, 0), EpochEntry(3, 700)], 1200) == 700
    # nothing shared
    assert consistent_point([EpochEntry(5, 0)], 10, new_master, 1500) == -1
