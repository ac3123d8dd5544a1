"""MessageStoreConfig: RocketMQ's names and defaults; MappedFile odds and ends."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from rocketq.config import Setting, load_configs
from rocketq.errors import ConfigError
from rocketq.store import MessageStoreConfig
from rocketq.store.mapped_file import MappedFile, MappedFileQueue


def test_rocketmq_defaults() -> None:
    c = MessageStoreConfig()
    assert c.mapped_file_size_commit_log == 1024**3
    assert c.mapped_file_size_consume_queue == 300_000 * 20
    assert c.flush_disk_type == "ASYNC_FLUSH"
    assert (c.flush_interval_commit_log, c.flush_commit_log_least_pages) == (500, 4)
    assert (c.flush_commit_log_thorough_interval, c.sync_flush_timeout) == (10_000, 5000)
    assert c.max_message_size == 4 * 1024 * 1024
    assert (c.file_reserved_time, c.delete_when) == (72, "04")
    assert c.disk_max_used_space_ratio == 75
    assert (c.disk_space_clean_forcibly_ratio, c.disk_space_warning_level_ratio) == (85, 90)
    assert c.check_crc_on_recover and c.message_index_enable
    assert (c.max_hash_slot_num, c.max_index_num) == (5_000_000, 20_000_000)
    assert c.max_transfer_count_on_message_in_memory == 32
    assert c.max_transfer_bytes_on_message_in_memory == 262144
    assert c.delay_levels_ms()[:5] == [1000, 5000, 10_000, 30_000, 60_000]
    assert c.delay_levels_ms()[-1] == 7_200_000
    assert c.commit_log_dir.endswith(os.path.join("store", "commitlog"))


def _load(props: dict[str, str]) -> MessageStoreConfig:
    settings = [Setting(k, v, "test") for k, v in props.items()]
    return load_configs([MessageStoreConfig], environ={}, settings=settings)[MessageStoreConfig]


def test_the_loader_takes_rocketmq_keys() -> None:
    c = _load({"storePathRootDir": "/data/x", "mappedFileSizeCommitLog": "65536",
               "flushDiskType": "SYNC_FLUSH", "checkCRCOnRecover": "false", "max_index_num": "100"})
    assert c.store_path_root_dir == "/data/x" and c.mapped_file_size_commit_log == 65536
    assert c.sync_flush and not c.check_crc_on_recover and c.max_index_num == 100
    assert c.consume_queue_dir == os.path.join("/data/x", "consumequeue")


@pytest.mark.parametrize(
    "props",
    [{"noSuchKey": "1"}, {"flushDiskType": "SOMETIMES"}, {"mappedFileSizeConsumeQueue": "1001"},
     {"maxIndexNum": "many"}, {"messageDelayLevel": "1s 2x"}],
)
def test_bad_config_is_an_error(props: dict[str, str]) -> None:
    with pytest.raises(ConfigError):
        _load(props)


def test_mapped_file_positions_and_zero(tmp_path: Path) -> None:
    mf = MappedFile(str(tmp_path / f"{4096:020d}"), 8192)
    assert mf.file_from_offset == 4096 and mf.file_end_offset == 12288
    assert mf.append(b"abc") == 0 and mf.append(b"de") == 3
    assert bytes(mf.buf[:5]) == b"abcde" and mf.remaining == 8187
    mf.write_at(6000, b"junk")
    mf.zero(3, 8192)
    assert bytes(mf.buf[:8]) == b"abc\x00\x00\x00\x00\x00" and bytes(mf.buf[6000:6004]) == bytes(4)
    assert mf.flush() == 5 and mf.flushed_position == 5
    assert mf.close() and mf.closed


def test_mapped_file_queue_lookup_and_roll(tmp_path: Path) -> None:
    q = MappedFileQueue(str(tmp_path / "q"), 4096)
    a = q.last_for_write()
    a.wrote_position = 4096
    b = q.last_for_write()
    assert (a.file_from_offset, b.file_from_offset) == (0, 4096)
    assert q.find(5000) is b and q.find(0) is a and q.find(9000) is None
    assert sorted(os.listdir(tmp_path / "q")) == [f"{0:020d}", f"{4096:020d}"]
    q.truncate_dirty(100)
    assert len(q) == 1 and q.max_offset() == 100
    q.close()


def test_existing_file_larger_than_the_segment_size_is_refused(tmp_path: Path) -> None:
    from rocketq.errors import StoreError

    path = tmp_path / f"{0:020d}"
    path.write_bytes(bytes(10_000))
    with pytest.raises(StoreError):
        MappedFile(str(path), 4096)
