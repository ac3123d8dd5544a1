"""Restart and crash recovery: torn tails, lost consume queues and index, exact queue counters."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

from store_testlib import bodies, msg

from rocketq.store import MessageBatchToStore, MessageStore

SEG = 64 * 1024


def fill(store: MessageStore, n: int, queues: int = 1, size: int = 100) -> None:
    for i in range(n):
        assert store.append_message(msg(queue_id=i % queues, body=f"{i:06d}".encode() * (size // 6),
                                        keys=f"key{i}")).ok


def expected(n: int, queues: int = 1, queue_id: int = 0, size: int = 100) -> list[bytes]:
    return [f"{i:06d}".encode() * (size // 6) for i in range(n) if i % queues == queue_id]


def test_restart_after_clean_shutdown(make_store: Callable[..., MessageStore], tmp_path: Path) -> None:
    s = make_store()
    fill(s, 50, queues=3)
    max_phy = s.max_phy_offset
    s.close()
    assert not (tmp_path / "store" / "abort").exists()
    s = make_store()
    rep = s.recovery_report
    assert rep is not None and not rep.abnormal and rep.valid_end == max_phy and not rep.torn_tail
    assert rep.rebuilt_cq_entries == 0
    assert s.max_phy_offset == max_phy
    for q in range(3):
        assert bodies(s, queue_id=q) == expected(50, 3, q)
    assert s.get_max_offset_in_queue("TopicA", 1) == 17
    r = s.append_message(msg(queue_id=1))
    assert r.wrote_offset == max_phy and r.logical_offset == 17
    assert len(s.query_message("TopicA", "key7", 32, 0, 2**62).phy_offsets) == 1


def test_crash_keeps_everything_written(make_store: Callable[..., MessageStore], tmp_path: Path) -> None:
    s = make_store()
    fill(s, 200, queues=2)  # spans several commit-log segments
    max_phy = s.max_phy_offset
    s.release_without_shutdown()
    assert (tmp_path / "store" / "abort").exists()
    s = make_store()
    rep = s.recovery_report
    assert rep is not None and rep.abnormal and rep.valid_end == max_phy
    assert rep.rebuilt_cq_entries == 0  # nothing dispatched twice
    assert bodies(s, queue_id=0) == expected(200, 2, 0)
    assert s.get_max_offset_in_queue("TopicA", 1) == 100
    assert len(s.query_message("TopicA", "key199", 32, 0, 2**62).phy_offsets) == 1


def _segment(tmp_path: Path, offset: int) -> Path:
    return tmp_path / "store" / "commitlog" / f"{offset - offset % SEG:020d}"


def test_torn_last_record_is_cut_and_zeroed(make_store: Callable[..., MessageStore], tmp_path: Path) -> None:
    s = make_store()
    fill(s, 10)
    last = s.append_message(msg(body=b"L" * 500, keys="lastkey"))
    s.release_without_shutdown()
    seg = _segment(tmp_path, last.wrote_offset)
    with open(seg, "r+b") as f:  # half the last record made it, followed by junk
        f.seek(last.wrote_offset % SEG + 200)
        f.write(os.urandom(100))
        f.seek(last.wrote_offset % SEG + last.wrote_bytes + 50)
        f.write(os.urandom(3000))
    s = make_store()
    rep = s.recovery_report
    assert rep is not None and rep.torn_tail and rep.valid_end == last.wrote_offset
    assert s.max_phy_offset == last.wrote_offset
    assert s.get_max_offset_in_queue("TopicA", 0) == 10
    assert bodies(s) == expected(10)
    assert s.query_message("TopicA", "lastkey", 32, 0, 2**62).phy_offsets == []
    with open(seg, "rb") as f:
        f.seek(last.wrote_offset % SEG)
        assert f.read(last.wrote_bytes + 4000) == bytes(last.wrote_bytes + 4000)
    r = s.append_message(msg(body=b"again"))
    assert (r.wrote_offset, r.logical_offset) == (last.wrote_offset, 10)
    s.close()
    s = make_store()
    assert bodies(s)[-1] == b"again" and s.get_max_offset_in_queue("TopicA", 0) == 11


def test_stale_records_behind_the_cut_are_never_resurrected(
    make_store: Callable[..., MessageStore], tmp_path: Path
) -> None:
    s = make_store()
    results = [s.append_message(msg(body=bytes([i]) * 300)) for i in range(20)]
    s.release_without_shutdown()
    bad = results[5]
    seg = _segment(tmp_path, bad.wrote_offset)
    with open(seg, "r+b") as f:  # a torn page in the middle: records 6.. are intact but unreachable
        f.seek(bad.wrote_offset % SEG + 120)
        f.write(b"\x00" * 64)
    s = make_store()
    assert s.get_max_offset_in_queue("TopicA", 0) == 5
    s.append_message(msg(body=b"n" * 100))  # shorter than the records it overwrites
    s.release_without_shutdown()
    s = make_store()
    assert [b[:1] for b in bodies(s)] == [bytes([i]) for i in range(5)] + [b"n"]


def test_consume_queue_entries_beyond_the_log_are_dropped(
    make_store: Callable[..., MessageStore], tmp_path: Path
) -> None:
    s = make_store()
    fill(s, 30)
    cut = s.consume_queues[("TopicA", 0)].entry(20)
    assert cut is not None
    s.release_without_shutdown()
    with open(_segment(tmp_path, cut[0]), "r+b") as f:  # the log lost its tail, the queue did not
        f.seek(cut[0] % SEG)
        f.write(b"\x00" * (SEG - cut[0] % SEG))
    s = make_store()
    assert s.get_max_offset_in_queue("TopicA", 0) == 20
    assert bodies(s) == expected(20)
    assert s.append_message(msg()).logical_offset == 20


def test_lost_consume_queues_are_rebuilt(make_store: Callable[..., MessageStore], tmp_path: Path) -> None:
    s = make_store()
    fill(s, 350, queues=3)  # ~117 entries a queue: two 100-entry files each
    s.release_without_shutdown()
    cq = tmp_path / "store" / "consumequeue" / "TopicA"
    shutil.rmtree(cq / "0")  # a whole queue gone
    last_of_1 = sorted(os.listdir(cq / "1"))[-1]
    os.unlink(cq / "1" / last_of_1)  # the newest file of another
    first_of_2 = cq / "2" / sorted(os.listdir(cq / "2"))[0]
    os.truncate(first_of_2, 700)  # a file cut short
    s = make_store()
    rep = s.recovery_report
    assert rep is not None and rep.rebuilt_cq_entries > 0
    for q in range(3):
        assert bodies(s, queue_id=q) == expected(350, 3, q)
    assert [s.get_max_offset_in_queue("TopicA", q) for q in range(3)] == [117, 117, 116]
    assert s.append_message(msg(queue_id=0)).logical_offset == 117


def test_missing_middle_consume_queue_file_is_rebuilt(
    make_store: Callable[..., MessageStore], tmp_path: Path
) -> None:
    s = make_store()
    fill(s, 250)
    s.close()  # even after a clean shutdown a hole in a queue is repaired
    os.unlink(tmp_path / "store" / "consumequeue" / "TopicA" / "0" / f"{100 * 20:020d}")
    s = make_store()
    assert bodies(s) == expected(250)


def test_lost_index_is_rebuilt(make_store: Callable[..., MessageStore], tmp_path: Path) -> None:
    s = make_store()
    fill(s, 40)
    s.drain_index()
    s.release_without_shutdown()
    shutil.rmtree(tmp_path / "store" / "index")
    s = make_store()
    rep = s.recovery_report
    assert rep is not None and rep.reindexed_keys == 80  # UNIQ_KEY + KEYS of each message
    assert len(s.query_message("TopicA", "key33", 32, 0, 2**62).phy_offsets) == 1


def test_pending_index_keys_lost_in_a_crash_are_rebuilt_once(
    make_store: Callable[..., MessageStore]
) -> None:
    s = make_store()
    fill(s, 10)
    s.drain_index()
    for i in range(5):  # queued, never drained
        s.append_message(msg(keys=f"late{i}"))
    s.release_without_shutdown()
    s = make_store()
    rep = s.recovery_report
    assert rep is not None and rep.reindexed_keys == 10  # the 5 lost messages, UNIQ_KEY + KEYS each
    assert len(s.query_message("TopicA", "key3", 32, 0, 2**62).phy_offsets) == 1  # not indexed twice
    assert len(s.query_message("TopicA", "late3", 32, 0, 2**62).phy_offsets) == 1


def test_batches_survive_a_crash(make_store: Callable[..., MessageStore]) -> None:
    s = make_store()
    for b in range(20):
        items = [(0, f"{b}-{i}".encode(), f"UNIQ_KEY\x01{b}-{i}\x02", 0, (f"{b}-{i}",)) for i in range(25)]
        assert s.append_messages(MessageBatchToStore("TopicB", b % 2, items)).ok
    s.release_without_shutdown()
    s = make_store()
    got = bodies(s, "TopicB", 1)
    assert got == [f"{b}-{i}".encode() for b in range(1, 20, 2) for i in range(25)]


def test_end_marker_without_next_segment(make_store: Callable[..., MessageStore], tmp_path: Path) -> None:
    s = make_store()
    r = s.append_message(msg(body=b"x" * (SEG - 2000)))
    r2 = s.append_message(msg(body=b"y" * 3000))  # closes segment 0 with the end marker
    assert r2.wrote_offset == SEG
    s.release_without_shutdown()
    for name in os.listdir(tmp_path / "store" / "commitlog"):
        if name != f"{0:020d}":
            os.unlink(tmp_path / "store" / "commitlog" / name)  # the crash came before segment 1 hit disk
    s = make_store()
    assert s.max_phy_offset == SEG
    assert s.get_max_offset_in_queue("TopicA", 0) == 1
    r3 = s.append_message(msg(body=b"z"))
    assert (r3.wrote_offset, r3.logical_offset) == (SEG, 1)
    assert bodies(s)[0][:1] == b"x" and bodies(s)[1] == b"z" and r.ok


def test_index_pointing_past_a_cut_log_is_rebuilt_from_its_start(
    make_store: Callable[..., MessageStore], tmp_path: Path
) -> None:
    s = make_store()
    first = s.append_message(msg(body=b"a" * 3000, keys="early"))
    while len(s.commit_log.mfq) < 4:  # several segments
        s.append_message(msg(body=b"b" * 3000))
    last = s.append_message(msg(body=b"c" * 100, keys="late"))
    s.drain_index()
    s.release_without_shutdown()
    # the checkpoint says everything but the newest segment was flushed: recovery checks only it
    from rocketq.store.checkpoint import StoreCheckpoint

    cp = StoreCheckpoint(str(tmp_path / "store" / "checkpoint"))
    cp.physic_msg_timestamp = cp.logics_msg_timestamp = last.store_timestamp + 60_000
    cp.flush()
    with open(_segment(tmp_path, last.wrote_offset), "r+b") as f:  # ...and its last record is torn
        f.seek(last.wrote_offset % SEG + 100)
        f.write(b"\xff" * 8)
    s = make_store()
    rep = s.recovery_report
    assert rep is not None and rep.walk_start > 0 and rep.valid_end == last.wrote_offset
    assert s.query_message("TopicA", "late", 32, 0, 2**62).phy_offsets == []
    assert s.query_message("TopicA", "early", 32, 0, 2**62).phy_offsets == [first.wrote_offset]
