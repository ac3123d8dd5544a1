"""TimerMessageStore over a real MessageStore on tmp_path, with the clock passed in: filing,
delivery at the end of a slot in order of time, recall, rolling, and exactly-once delivery when
the process dies between any two steps (simulated by reopening the files mid-way)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from store_testlib import _ids

from rocketq.codec.message import decode_messages, encode_properties
from rocketq.store import GetMessageStatus, MessageStore, MessageToStore
from rocketq.store.timer import TIMER_TOPIC, TimerMessageStore, delete_key

T0 = 1_700_000_000_000  # a slot boundary at every precision
P = 100


@pytest.fixture
def timer_store(make_store: Callable[..., MessageStore]) -> Iterator[Callable[..., TimerMessageStore]]:
    opened: list[TimerMessageStore] = []

    def factory(store: MessageStore, now: int = T0, **overrides: Any) -> TimerMessageStore:
        for ts in opened:
            if ts.store is store and not ts._closed:
                ts.close()  # a reopen: what a restart after kill -9 finds (mapped writes are kept)
        config = store.config.__class__(**{**_fields(store), "timer_precision_ms": P, **overrides})
        ts = TimerMessageStore(store, config)
        ts.load(now_ms=now)
        opened.append(ts)
        return ts

    yield factory
    for ts in opened:
        ts.close()


def _fields(store: MessageStore) -> dict[str, Any]:
    from dataclasses import fields

    return {f.name: getattr(store.config, f.name) for f in fields(store.config)}


def put_timer(store: MessageStore, out_ms: int, body: bytes, topic: str = "Real", queue_id: int = 1,
              **extra: str) -> str:
    uniq = extra.pop("uniq", None) or _ids.next_id()
    props = {"UNIQ_KEY": uniq, "TIMER_OUT_MS": str(out_ms), "REAL_TOPIC": topic, "REAL_QID": str(queue_id),
             "TAGS": "tg", **extra}
    r = store.append_message(MessageToStore(TIMER_TOPIC, 0, body, properties=encode_properties(props),
                                            keys=(uniq,), born_timestamp=T0 - 1))
    assert r.ok
    return uniq


def delivered(store: MessageStore, topic: str = "Real", queue_id: int = 1) -> list[Any]:
    out: list[Any] = []
    while True:
        r = store.get_message(topic, queue_id, len(out), 32)
        if r.status is not GetMessageStatus.FOUND:
            return out
        out += decode_messages(r.body())


def test_messages_go_out_when_their_slot_is_over_in_order_of_time(
        store: MessageStore, timer_store: Callable[..., TimerMessageStore]) -> None:
    ts = timer_store(store)
    for out, body in ((T0 + 300, b"d"), (T0, b"a"), (T0 + 200, b"c1"), (T0 + 100, b"b"), (T0 + 200, b"c2")):
        put_timer(store, out, body)
    assert ts.enqueue(now_ms=T0) == 5 and ts.progress().pending == 5
    assert ts.dequeue(now_ms=T0 + 99) == 0  # the first slot is not over yet
    assert ts.dequeue(now_ms=T0 + 100) == 1
    assert [m.body for m in delivered(store)] == [b"a"]
    assert ts.dequeue(now_ms=T0 + 1000) == 4
    msgs = delivered(store)
    assert [m.body for m in msgs] == [b"a", b"b", b"c1", b"c2", b"d"]
    m = msgs[0]
    assert (m.topic, m.queue_id, m.tags) == ("Real", 1, "tg")
    assert "REAL_TOPIC" not in m.properties and "REAL_QID" not in m.properties
    assert m.properties["TIMER_OUT_MS"] == str(T0) and m.properties["TIMER_ENQUEUE_MS"] == str(T0)
    assert store.query_message("Real", m.uniq_key, 1, 0, 2 * T0), "indexed by its key on the real topic"
    assert ts.progress().pending == 0 and ts.read_time_ms == T0 + 1000
    assert ts.checkpoint.last_read_time_ms == T0 + 1000 and ts.checkpoint.last_timer_queue_offset == 5


def test_a_late_message_goes_out_with_the_slot_being_read(
        store: MessageStore, timer_store: Callable[..., TimerMessageStore]) -> None:
    ts = timer_store(store)
    assert ts.dequeue(now_ms=T0 + 500) == 0 and ts.read_time_ms == T0 + 500  # empty slots stepped over
    put_timer(store, T0 + 100, b"late")  # its slot was read already
    ts.enqueue(now_ms=T0 + 550)
    assert ts.dequeue(now_ms=T0 + 600) == 1
    assert [m.body for m in delivered(store)] == [b"late"]


def test_a_slave_following_the_masters_read_time_delivers_only_what_is_left(
        store: MessageStore, timer_store: Callable[..., TimerMessageStore]) -> None:
    """Controller mode: a slave's wheel files timers without delivering and skips what the master
    delivered already; promoted, it delivers the rest once, and a restart keeps the followed time."""
    ts = timer_store(store)
    for out, body in ((T0 + 100, b"gone1"), (T0 + 200, b"gone2"), (T0 + 500, b"left")):
        put_timer(store, out, body)
    assert ts.enqueue(now_ms=T0) == 3 and ts.progress().pending == 3
    ts.follow_read_time(T0 + 300)  # the master read past the first two
    ts.follow_read_time(T0 + 100)  # an older answer does not move it back
    assert ts.read_time_ms == T0 + 300 and ts.progress().pending == 1
    ts = timer_store(store, now=T0 + 400)
    assert ts.read_time_ms == T0 + 300
    assert ts.next_due_ms(T0 + 400) == T0 + 600
    assert ts.dequeue(now_ms=T0 + 1000) == 1
    assert [m.body for m in delivered(store)] == [b"left"]


def test_a_recall_in_the_same_slot_drops_the_message(
        store: MessageStore, timer_store: Callable[..., TimerMessageStore]) -> None:
    ts = timer_store(store)
    keep = put_timer(store, T0 + 200, b"keep")
    gone = put_timer(store, T0 + 200, b"gone")
    put_timer(store, T0 + 200, b"0", TIMER_DEL_UNIQKEY=delete_key("Real", gone), uniq=gone)
    ts.enqueue(now_ms=T0)
    assert ts.wheel.get_slot(T0 + 200).num == 1  # +1 +1 -1, as Java counts
    ts.dequeue(now_ms=T0 + 1000)
    assert [m.uniq_key for m in delivered(store)] == [keep]
    assert ts.dropped == 1 and ts.delivered == 1


def test_a_time_beyond_the_roll_window_goes_round_again(
        store: MessageStore, timer_store: Callable[..., TimerMessageStore]) -> None:
    ts = timer_store(store, timer_roll_window_slot=10)  # 1 s ahead at 100 ms
    put_timer(store, T0 + 2500, b"far")
    ts.enqueue(now_ms=T0)
    (rec,) = [r for r in ts.records_of_slot(T0 + 1000)]  # filed at the window's end, rolled
    assert rec.is_roll
    ts.dequeue(now_ms=T0 + 1100)
    assert delivered(store) == [] and store.get_max_offset_in_queue(TIMER_TOPIC, 0) == 2  # put back
    for now in range(T0 + 1100, T0 + 2600, 50):  # the service's loop: file, then deliver
        ts.enqueue(now_ms=now)
        ts.dequeue(now_ms=now)
    assert delivered(store) == []
    ts.enqueue(now_ms=T0 + 2600)
    ts.dequeue(now_ms=T0 + 2600)
    (m,) = delivered(store)
    assert m.body == b"far" and int(m.properties["TIMER_ROLL_TIMES"]) >= 1


def test_filing_survives_a_crash_before_the_enqueue_checkpoint(
        store: MessageStore, timer_store: Callable[..., TimerMessageStore]) -> None:
    ts = timer_store(store)
    for i in range(3):
        put_timer(store, T0 + 100, b"m%d" % i)
    ts.enqueue(now_ms=T0)
    ts.checkpoint.save_enqueue(0, 0)  # as if the process died before the checkpoint was written
    again = timer_store(store)
    assert again.enqueue_offset == 3 and again.enqueue(now_ms=T0) == 0  # nothing is filed twice
    again.dequeue(now_ms=T0 + 1000)
    assert [m.body for m in delivered(store)] == [b"m0", b"m1", b"m2"]


def test_a_record_the_wheel_missed_is_linked_at_load(
        store: MessageStore, timer_store: Callable[..., TimerMessageStore], tmp_path: Path) -> None:
    ts = timer_store(store)
    put_timer(store, T0 + 100, b"a")
    put_timer(store, T0 + 100, b"b")
    ts.enqueue(now_ms=T0)
    slot = ts.wheel.get_slot(T0 + 100)
    ts.wheel.put_slot(T0 + 100, slot.first_pos, slot.first_pos, 1)  # died before linking "b"
    ts.checkpoint.save_enqueue(0, 0)
    again = timer_store(store)
    assert again.wheel.get_slot(T0 + 100).num == 2
    again.dequeue(now_ms=T0 + 1000)
    assert [m.body for m in delivered(store)] == [b"a", b"b"]


@pytest.mark.parametrize("stored_before_death", [0, 2, 5])
def test_a_chunk_interrupted_by_a_crash_is_delivered_exactly_once(
        store: MessageStore, timer_store: Callable[..., TimerMessageStore], stored_before_death: int) -> None:
    ts = timer_store(store)
    for i in range(8):
        put_timer(store, T0 + 100, b"m%d" % i)
    ts.enqueue(now_ms=T0)
    ts.dequeue(max_count=3, now_ms=T0 + 200)  # one chunk of 3 done
    assert len(delivered(store)) == 3
    # The next chunk of 5: the intent is written, some of its puts reach the commit log, then death.
    entries = []
    chunk = ts._slot_positions(T0 + 100)[3:]
    for pos in chunk.tolist():
        rec = ts.log.read(pos)
        assert rec is not None
        msg = ts._read(rec.offset_py)
        assert msg is not None
        entries.append(ts._convert(msg, rec, T0)[0])
    ts.checkpoint.save_intent(store.commit_log.max_offset, len(entries))
    if stored_before_death:
        store.append_many(entries[:stored_before_death])
    again = timer_store(store, now=T0 + 200)
    assert again.slot_done == 3 + stored_before_death and again.checkpoint.intent_phy == -1
    again.dequeue(now_ms=T0 + 1000)
    assert [m.body for m in delivered(store)] == [b"m%d" % i for i in range(8)]


def test_the_precision_of_a_wheel_is_kept(
        store: MessageStore, timer_store: Callable[..., TimerMessageStore]) -> None:
    from rocketq.errors import StoreError

    timer_store(store)
    with pytest.raises(StoreError, match="timerPrecisionMs=100"):
        timer_store(store, timer_precision_ms=1000)


def test_log_segments_nothing_points_into_are_deleted(
        store: MessageStore, timer_store: Callable[..., TimerMessageStore]) -> None:
    ts = timer_store(store, mapped_file_size_timer_log=3 * 52 + 20)  # 3 records per segment
    for i in range(7):
        put_timer(store, T0 + 100 + 100 * (i // 3), b"m%d" % i)  # slots of 3, 3 and 1 records
    ts.enqueue(now_ms=T0)
    assert len(ts.log.segments) == 3
    ts.dequeue(now_ms=T0 + 200)  # the first slot (the first segment) is delivered
    assert ts.clean_log() == 1 and len(ts.log.segments) == 2
    ts.dequeue(now_ms=T0 + 1000)
    assert ts.clean_log() == 1 and len(ts.log.segments) == 1  # never the one being written
    assert len(delivered(store)) == 7
