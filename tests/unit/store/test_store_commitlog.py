"""Appends: record layout on disk, segment roll-over, batches, bad input."""

from __future__ import annotations

import os
import struct
from collections.abc import Callable
from pathlib import Path

from store_testlib import msg

from rocketq.codec.message import (
    BLANK_MAGIC,
    MAGIC_V1,
    MAGIC_V2,
    MessageSysFlag,
    decode_message,
    decode_messages,
    offset_msg_id,
)
from rocketq.store import MessageBatchToStore, MessageStore, MessageToStore, PutMessageStatus

SEG = 64 * 1024


def test_append_then_read_round_trip(store: MessageStore) -> None:
    r = store.append_message(msg(body=b"payload-1", tags="TagA", keys="k1 k2"))
    assert r.status is PutMessageStatus.PUT_OK
    assert (r.wrote_offset, r.logical_offset, r.msg_num) == (0, 0, 1)
    raw = store.look_message_by_offset(0)
    assert raw is not None and len(raw) == r.wrote_bytes
    m, _ = decode_message(raw)
    assert m.topic == "TopicA" and m.body == b"payload-1" and m.tags == "TagA" and m.keys == "k1 k2"
    assert m.commit_log_offset == 0 and m.queue_offset == 0
    assert m.store_host == ("127.0.0.1", 10911) and m.born_host == ("10.0.0.9", 5555)
    assert m.store_timestamp == r.store_timestamp
    assert r.msg_id == offset_msg_id("127.0.0.1", 10911, 0) == m.offset_msg_id
    r2 = store.append_message(msg(body=b"payload-2"))
    assert r2.wrote_offset == r.wrote_bytes and r2.logical_offset == 1
    assert store.max_phy_offset == r.wrote_bytes + r2.wrote_bytes


def test_file_layout_on_disk(store: MessageStore, tmp_path: Path) -> None:
    store.append_message(msg(topic="T1", queue_id=3))
    assert os.listdir(tmp_path / "store" / "commitlog")[0] == "0" * 20
    assert os.listdir(tmp_path / "store" / "consumequeue" / "T1" / "3") == ["0" * 20]
    assert os.path.getsize(tmp_path / "store" / "commitlog" / ("0" * 20)) == SEG
    assert (tmp_path / "store" / "abort").exists() and (tmp_path / "store" / "lock").exists()


def test_queue_offsets_are_per_queue(store: MessageStore) -> None:
    offsets = [store.append_message(msg(queue_id=i % 3)).logical_offset for i in range(9)]
    assert offsets == [0, 0, 0, 1, 1, 1, 2, 2, 2]
    assert store.get_max_offset_in_queue("TopicA", 2) == 3
    assert store.topic_queue_ids() == {"TopicA": [0, 1, 2]}


def test_roll_over_writes_end_marker_and_never_splits_a_record(store: MessageStore, tmp_path: Path) -> None:
    body = b"x" * 3000
    results = [store.append_message(msg(body=body)) for _ in range(60)]
    assert all(r.ok for r in results)
    files = sorted(os.listdir(tmp_path / "store" / "commitlog"))
    assert files[:3] == [f"{i * SEG:020d}" for i in range(3)]
    for r in results:
        assert r.wrote_offset // SEG == (r.wrote_offset + r.wrote_bytes - 1) // SEG
    # the first segment ends with [remaining][BLANK_MAGIC] right after its last record
    in_first = [r for r in results if r.wrote_offset < SEG]
    end = in_first[-1].wrote_offset + in_first[-1].wrote_bytes
    with open(tmp_path / "store" / "commitlog" / files[0], "rb") as f:
        f.seek(end)
        remaining, magic = struct.unpack(">ii", f.read(8))
    assert magic == BLANK_MAGIC and remaining == SEG - end
    first_in_second = next(r for r in results if r.wrote_offset >= SEG)
    assert first_in_second.wrote_offset == SEG
    m, _ = decode_message(store.look_message_by_offset(SEG))  # type: ignore[arg-type]
    assert m.commit_log_offset == SEG


def test_batch_is_one_append_with_consecutive_queue_offsets(store: MessageStore) -> None:
    store.append_message(msg(queue_id=1))
    items = [(i, f"b{i}".encode(), f"UNIQ_KEY\x01U{i}\x02", 0, (f"U{i}",)) for i in range(10)]
    r = store.append_messages(MessageBatchToStore("TopicA", 1, items, born_timestamp=5, born_host=("::1", 9)))
    assert r.status is PutMessageStatus.PUT_OK
    assert (r.logical_offset, r.msg_num) == (1, 10)
    assert len(r.msg_ids) == 10 and r.msg_ids_text == ",".join(r.msg_ids)
    raw = store.commit_log.read(r.wrote_offset, r.wrote_bytes)
    assert raw is not None
    msgs = decode_messages(raw)
    assert [m.queue_offset for m in msgs] == list(range(1, 11))
    assert [m.flag for m in msgs] == list(range(10))
    assert [m.body for m in msgs] == [f"b{i}".encode() for i in range(10)]
    assert [m.commit_log_offset for m in msgs] == list(r.record_offsets)
    assert {m.store_timestamp for m in msgs} == {r.store_timestamp}
    assert all(m.born_host == ("::1", 9) and m.sys_flag & MessageSysFlag.BORNHOST_V6_FLAG for m in msgs)
    assert msgs[3].uniq_key == "U3"
    assert store.get_max_offset_in_queue("TopicA", 1) == 11


def test_batch_rolls_to_the_next_segment_as_a_whole(store: MessageStore) -> None:
    store.append_message(msg(body=b"y" * (SEG - 2000)))
    items = [(0, b"z" * 500, "", 0, ()) for _ in range(8)]
    r = store.append_messages(MessageBatchToStore("TopicA", 0, items))
    assert r.ok and r.wrote_offset == SEG


def test_v2_record_for_long_topic(store: MessageStore) -> None:
    topic = "L" * 200
    r = store.append_message(msg(topic=topic))
    raw = store.look_message_by_offset(r.wrote_offset)
    assert raw is not None and struct.unpack_from(">i", raw, 4)[0] == MAGIC_V2
    assert decode_message(raw)[0].topic == topic
    r = store.append_message(msg(topic="short"))
    raw = store.look_message_by_offset(r.wrote_offset)
    assert raw is not None and struct.unpack_from(">i", raw, 4)[0] == MAGIC_V1


def test_bad_input_is_refused_without_touching_the_log(make_store: Callable[..., MessageStore]) -> None:
    store = make_store(max_message_size=1000)
    store.append_message(msg())
    before = store.max_phy_offset
    assert store.append_message(msg(body=b"x" * 1001)).status is PutMessageStatus.MESSAGE_ILLEGAL
    assert store.append_message(msg(topic="t" * 256)).status is PutMessageStatus.MESSAGE_ILLEGAL
    assert store.append_message(msg(topic="t" * 256)).status is PutMessageStatus.MESSAGE_ILLEGAL
    assert store.append_message(msg(topic="")).status is PutMessageStatus.MESSAGE_ILLEGAL
    big_props = MessageToStore("TopicA", 0, b"x", properties="K\x01" + "v" * 40000 + "\x02")
    assert store.append_message(big_props).status is PutMessageStatus.PROPERTIES_SIZE_EXCEEDED
    items = [(0, b"ok", "", 0, ()), (0, b"x" * 1001, "", 0, ())]
    assert store.append_messages(MessageBatchToStore("TopicA", 0, items)).status is (
        PutMessageStatus.MESSAGE_ILLEGAL)
    empty = MessageBatchToStore("TopicA", 0, [])
    assert store.append_messages(empty).status is PutMessageStatus.MESSAGE_ILLEGAL
    assert store.max_phy_offset == before
    assert store.get_max_offset_in_queue("TopicA", 0) == 1


def test_record_larger_than_a_segment_is_illegal(make_store: Callable[..., MessageStore]) -> None:
    store = make_store(max_message_size=1 << 20)
    assert store.append_message(msg(body=b"x" * SEG)).status is PutMessageStatus.MESSAGE_ILLEGAL
    items = [(0, b"x" * 30000, "", 0, ()) for _ in range(3)]
    assert store.append_messages(MessageBatchToStore("TopicA", 0, items)).status is (
        PutMessageStatus.MESSAGE_ILLEGAL)
    assert store.append_message(msg()).ok


def test_prepared_and_rollback_records_are_not_dispatched(store: MessageStore) -> None:
    prepared = store.append_message(msg(sys_flag=MessageSysFlag.TRANSACTION_PREPARED_TYPE))
    assert prepared.ok and prepared.logical_offset == 0
    assert store.get_max_offset_in_queue("TopicA", 0) == 0
    store.append_message(msg(sys_flag=MessageSysFlag.TRANSACTION_COMMIT_TYPE))
    assert store.get_max_offset_in_queue("TopicA", 0) == 1
    m, _ = decode_message(store.look_message_by_offset(prepared.wrote_offset))  # type: ignore[arg-type]
    assert m.queue_offset == 0


def test_arrival_listener_sees_each_put(make_store: Callable[..., MessageStore]) -> None:
    seen: list[tuple[str, int, int, int]] = []
    store = make_store()
    store.on_arrival = lambda *a: seen.append(a)
    store.append_message(msg(tags="A"))
    items = [(0, b"b", "", 11, ()), (0, b"b", "", 11, ()), (0, b"b", "", 12, ())]
    store.append_messages(MessageBatchToStore("TopicA", 0, items))
    assert seen[0][:3] == ("TopicA", 0, 1)
    assert seen[1:] == [("TopicA", 0, 4, 11), ("TopicA", 0, 4, 12)]


def test_failing_arrival_listener_does_not_fail_the_put(make_store: Callable[..., MessageStore]) -> None:
    store = make_store()

    def boom(*_: object) -> None:
        raise RuntimeError("listener bug")

    store.on_arrival = boom
    assert store.append_message(msg()).ok


def test_second_store_on_the_same_directory_is_refused(store: MessageStore, tmp_path: Path) -> None:
    from store_testlib import small_config

    from rocketq.errors import StoreError

    other = MessageStore(small_config(tmp_path / "store"))
    try:
        other.load()
    except StoreError as e:
        assert "Lock failed" in str(e)
    else:
        raise AssertionError("second store loaded")


def test_closed_store_refuses_puts(store: MessageStore) -> None:
    store.close()
    assert store.append_message(msg()).status is PutMessageStatus.SERVICE_NOT_AVAILABLE
