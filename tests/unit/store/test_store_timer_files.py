"""The timer's files with plain values: wheel arithmetic and slots, log records and segments, the
checkpoint's layout."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from rocketq.codec.timer import CheckpointValues
from rocketq.errors import StoreError
from rocketq.store.timer import TimerCheckpoint, TimerLog, TimerRecord, TimerWheel
from rocketq.store.timer.log import (
    BLANK_MAGIC_CODE,
    MAGIC_DEFAULT,
    MAGIC_DELETE,
    MAGIC_ROLL,
    UNIT_SIZE,
    java_string_hash,
)
from rocketq.store.timer.wheel import SLOT_SIZE, slot_index, slot_tick, wheel_length

# -- wheel arithmetic ------------------------------------------------------------------------------


def test_slot_arithmetic_matches_javas_wheel() -> None:
    assert slot_tick(1_700_000_000_999, 1000) == 1_700_000_000
    assert slot_tick(1_700_000_000_999, 100) == 17_000_000_009
    # 2 * slotsTotal slots: the index wraps after two turns of slotsTotal.
    assert slot_index(5_000, 1000, 3) == 5
    assert slot_index(6_000, 1000, 3) == 0
    assert slot_index(6_999, 1000, 3) == 0
    assert wheel_length(604_800) == 604_800 * 2 * SLOT_SIZE == 38_707_200


def test_a_slot_of_another_turn_reads_empty(tmp_path: Path) -> None:
    wheel = TimerWheel(str(tmp_path / "timerwheel"), 3, 1000)
    wheel.put_slot(10_500, 52, 104, 2)
    slot = wheel.get_slot(10_000)
    assert (slot.time_ms, slot.first_pos, slot.last_pos, slot.num) == (10_000, 52, 104, 2)
    assert wheel.get_slot(10_999).last_pos == 104  # any time of the slot finds it
    assert wheel.get_slot(16_000).empty  # same index, next turn
    # The bytes are Java's: tick, firstPos, lastPos (longs), num, magic (ints), big-endian.
    raw = (tmp_path / "timerwheel").read_bytes()
    assert len(raw) == wheel_length(3)
    assert struct.unpack_from(">qqqii", raw, 4 * SLOT_SIZE) == (10, 52, 104, 2, 0)
    wheel.close()


def test_a_wheel_of_another_size_is_refused(tmp_path: Path) -> None:
    TimerWheel(str(tmp_path / "w"), 3, 1000).close()
    with pytest.raises(StoreError, match="length"):
        TimerWheel(str(tmp_path / "w"), 4, 1000)


def test_pending_counts_only_the_slots_of_this_turn_from_a_time(tmp_path: Path) -> None:
    wheel = TimerWheel(str(tmp_path / "w"), 5, 100)
    wheel.put_slot(1_000, 0, 0, 3)
    wheel.put_slot(1_300, 52, 52, 2)
    wheel.put_slot(200, 104, 104, 7)  # an older turn's slot: index 2, tick 2
    assert wheel.pending_from(1_000) == 5
    assert wheel.pending_from(1_100) == 2
    assert wheel.min_first_pos_from(1_100) == 52
    assert wheel.min_first_pos_from(1_400) == -1
    wheel.close()


# -- log records -----------------------------------------------------------------------------------


def test_a_record_is_javas_52_byte_unit() -> None:
    rec = TimerRecord(-1, MAGIC_DEFAULT | MAGIC_ROLL, 1_000_000, 2_000, 4096, 230, java_string_hash("T"), 17)
    data = rec.encode()
    assert len(data) == UNIT_SIZE == 52
    assert struct.unpack(">iqiqiqiiq", data) == (52, -1, 3, 1_000_000, 2_000, 4096, 230, 84, 17)
    back = TimerRecord.decode(data)
    assert back == rec and back.time_ms == 1_002_000 and back.is_roll and not back.is_delete
    assert TimerRecord.decode(data[:51]) is None
    assert TimerRecord.decode(b"\0" * 52) is None  # a zeroed tail is no record


def test_java_constants() -> None:
    assert java_string_hash("hello") == 99_162_322  # "hello".hashCode()
    assert java_string_hash("") == 0
    assert java_string_hash("z" * 10) < 0  # overflows like a Java int
    assert BLANK_MAGIC_CODE == -875_286_124  # 0xBBCCDDEE ^ 1880681586 + 8 as a Java int
    assert MAGIC_DELETE == 4


def test_the_log_rolls_segments_with_a_blank_and_scans_back(tmp_path: Path) -> None:
    size = 3 * UNIT_SIZE + 20  # 3 records, then too little room for a 4th and the 16-byte blank
    log = TimerLog(str(tmp_path / "timerlog"), size)
    positions = []
    for i in range(5):
        rec = TimerRecord(-1, MAGIC_DEFAULT, 1000, 0, i * 100, 10, 0, i)
        expected = log.position_for_next()
        assert log.append(rec.encode()) == expected
        positions.append(expected)
    assert positions == [0, 52, 104, size, size + 52]
    assert sorted(p.name for p in (tmp_path / "timerlog").iterdir()) == [f"{0:020d}", f"{size:020d}"]
    assert log.read(size + 52).queue_offset == 4  # type: ignore[union-attr]
    log.close()
    again = TimerLog(str(tmp_path / "timerlog"), size)
    found = again.scan(0)
    assert [(p, r.queue_offset) for p, r in found] == list(zip(positions, range(5), strict=True))
    assert again.write_pos == size + 104
    assert again.scan(size + 52)[0][1].queue_offset == 4
    assert again.delete_before(size) == 1 and again.min_pos == size
    again.close()


# -- checkpoint ------------------------------------------------------------------------------------


def test_the_checkpoint_keeps_javas_56_bytes_and_our_extension(tmp_path: Path) -> None:
    path = str(tmp_path / "config" / "timercheck")
    cp = TimerCheckpoint(path)
    assert not cp.existed and cp.intent_phy == -1
    cp.save_enqueue(42, 52 * 42)
    cp.save_read(1_700_000_000_000, 3)
    cp.save_intent(8192, 5)
    cp.close()
    raw = Path(path).read_bytes()
    assert len(raw) == 4096
    assert struct.unpack_from(">qqqq", raw) == (1_700_000_000_000, 52 * 42, 42, 0)
    again = TimerCheckpoint(path)
    assert again.existed
    assert (again.slot_done, again.intent_phy, again.intent_count) == (3, 8192, 5)
    values = again.values()
    assert CheckpointValues.decode(values.encode()) == values and len(values.encode()) == 56
    assert values.to_dict()["lastTimerQueueOffset"] == 42
    again.close()
