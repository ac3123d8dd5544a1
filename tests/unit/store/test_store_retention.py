"""Retention with an injected clock and disk usage; deferred unmapping; topic deletion."""

from __future__ import annotations

import gc
import os
import time
from collections.abc import Callable
from pathlib import Path

from store_testlib import msg

from rocketq.codec.message import decode_messages
from rocketq.store import GetMessageStatus, MessageStore, PutMessageStatus

HOUR = 3_600_000


def fill_segments(store: MessageStore, segments: int) -> None:
    while len(store.commit_log.mfq) < segments:
        assert store.append_message(msg(body=b"x" * 3000, keys="k")).ok


def hour_of(ms: int) -> str:
    return f"{time.localtime(ms / 1000).tm_hour:02d}"


def later(hours: float) -> int:
    return int(time.time() * 1000 + hours * HOUR)


def test_expired_files_go_at_the_delete_hour(make_store: Callable[..., MessageStore], tmp_path: Path) -> None:
    now = later(73)
    store = make_store(delete_when=hour_of(now + HOUR))
    fill_segments(store, 4)
    segments = len(store.commit_log.mfq)
    assert store.clean_expired_files(now=now, disk_ratio=0.10) == 0  # expired, but not the hour
    assert store.clean_expired_files(now=later(1), disk_ratio=0.10) == 0
    deleted = store.clean_expired_files(now=now + HOUR, disk_ratio=0.10)
    assert deleted == segments - 1  # never the current segment
    assert len(store.commit_log.mfq) == 1
    assert store.min_phy_offset == store.commit_log.mfq.files[0].file_from_offset > 0
    on_disk = [int(n) for n in os.listdir(tmp_path / "store" / "commitlog")]
    assert min(on_disk) == store.min_phy_offset  # (plus the pre-allocated next segment)


def test_unexpired_files_stay_unless_disk_is_short(make_store: Callable[..., MessageStore]) -> None:
    now = later(1)
    store = make_store(delete_when=hour_of(now))
    fill_segments(store, 3)
    assert store.clean_expired_files(now=now, disk_ratio=0.80) == 0  # over 75 %: any hour, expired only
    assert store.clean_expired_files(now=later(73), disk_ratio=0.80) == 2
    fill_segments(store, 3)
    assert store.clean_expired_files(now=now, disk_ratio=0.86) >= 1  # over 85 %: even unexpired


def test_disk_full_refuses_puts_until_space_returns(make_store: Callable[..., MessageStore]) -> None:
    store = make_store()
    store.append_message(msg())
    store.clean_expired_files(disk_ratio=0.95)
    assert store.disk_full
    assert store.append_message(msg()).status is PutMessageStatus.SERVICE_NOT_AVAILABLE
    store.clean_expired_files(disk_ratio=0.88)  # between forced-clean and warning: unchanged
    assert store.disk_full
    store.clean_expired_files(disk_ratio=0.50)
    assert not store.disk_full
    assert store.append_message(msg()).ok
    assert store.runtime_info()["diskFull"] == "false"


def test_consume_queue_and_index_follow_the_commit_log(
    make_store: Callable[..., MessageStore], tmp_path: Path
) -> None:
    store = make_store(max_index_num=40)
    fill_segments(store, 12)  # ~230 messages: 3 consume-queue files, several index files
    store.drain_index()
    cq_dir = tmp_path / "store" / "consumequeue" / "TopicA" / "0"
    index_dir = tmp_path / "store" / "index"
    cq_files, index_files = len(os.listdir(cq_dir)), len(os.listdir(index_dir))
    total = store.get_max_offset_in_queue("TopicA", 0)
    store.clean_expired_files(now=later(73), disk_ratio=0.80)
    assert len(store.commit_log.mfq) == 2  # ten deleted per round, the last one always stays
    assert len(os.listdir(cq_dir)) < cq_files
    assert len(os.listdir(index_dir)) < index_files
    min_off = store.get_min_offset_in_queue("TopicA", 0)
    assert 0 < min_off < total
    first = store.consume_queues[("TopicA", 0)].entry(min_off)
    assert first is not None and first[0] >= store.min_phy_offset
    r = store.get_message("TopicA", 0, 0, 32)
    assert r.status is GetMessageStatus.OFFSET_TOO_SMALL and r.next_begin_offset == min_off
    r = store.get_message("TopicA", 0, min_off, 32)
    assert r.status is GetMessageStatus.FOUND and r.queue_offsets[0] == min_off
    assert store.query_message("TopicA", "k", 64, 0, 2**62).phy_offsets  # newer files still answer
    store.close()
    store = make_store(max_index_num=40)  # the corrected minimum survives a restart
    assert store.get_min_offset_in_queue("TopicA", 0) == min_off


def test_unmap_is_deferred_while_a_buffer_is_held(make_store: Callable[..., MessageStore]) -> None:
    store = make_store()
    fill_segments(store, 3)
    held = store.get_message("TopicA", 0, 0, 4)
    assert held.found
    expected = held.body()
    first_name = store.commit_log.mfq.files[0].path
    store.clean_expired_files(now=later(73), disk_ratio=0.80)
    assert not os.path.exists(first_name)  # deleted from disk at once
    assert store.commit_log.mfq.deferred_count == 1  # but still mapped: a pull answer points into it
    assert b"".join(held.buffers) == expected  # and the held buffers still read the old bytes
    assert len(decode_messages(b"".join(held.buffers))) == 4
    del held
    gc.collect()
    store.clean_expired_files(now=later(73), disk_ratio=0.10)
    assert store.commit_log.mfq.deferred_count == 0


def test_close_with_buffers_still_held_does_not_crash(make_store: Callable[..., MessageStore]) -> None:
    store = make_store()
    store.append_message(msg())
    held = store.get_message("TopicA", 0, 0, 4)
    store.close()
    assert held.body()  # the mapping lives as long as the view


def test_delete_topics(make_store: Callable[..., MessageStore], tmp_path: Path) -> None:
    store = make_store()
    for q in range(3):
        store.append_message(msg(topic="Gone", queue_id=q))
    store.append_message(msg(topic="Kept"))
    assert store.delete_topics(["Gone"]) == 3
    assert not (tmp_path / "store" / "consumequeue" / "Gone").exists()
    assert store.get_message("Gone", 0, 0, 1).status is GetMessageStatus.NO_MATCHED_LOGIC_QUEUE
    assert store.topic_queue_ids() == {"Kept": [0]}
    assert store.append_message(msg(topic="Gone")).logical_offset == 0


def test_runtime_info(store: MessageStore) -> None:
    store.append_message(msg())
    info = store.runtime_info()
    assert info["commitLogMaxOffset"] == str(store.max_phy_offset)
    assert info["putMessageTimesTotal"] == "1"
    assert float(info["commitLogDiskRatio"]) >= 0
    assert all(isinstance(v, str) for v in info.values())
