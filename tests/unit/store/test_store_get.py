"""Reads: every GetMessageStatus of PROTOCOL.md §2.2, tag filtering, limits, zero-copy buffers,
search by time."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from store_testlib import msg

from rocketq.codec.message import decode_messages, tags_code
from rocketq.store import GetMessageStatus, MessageBatchToStore, MessageStore, MessageToStore, reader

GS = GetMessageStatus


def fill(store: MessageStore, n: int, topic: str = "TopicA", queue_id: int = 0, **kw: object) -> None:
    for i in range(n):
        assert store.append_message(msg(topic=topic, queue_id=queue_id, body=f"m{i}".encode(), **kw)).ok  # type: ignore[arg-type]


def test_found_and_next_begin_offset(store: MessageStore) -> None:
    fill(store, 10)
    r = store.get_message("TopicA", 0, 2, 5)
    assert r.status is GS.FOUND
    assert (r.message_count, r.next_begin_offset, r.min_offset, r.max_offset) == (5, 7, 0, 10)
    assert [m.body for m in decode_messages(r.body())] == [f"m{i}".encode() for i in range(2, 7)]
    assert r.queue_offsets.tolist() == [2, 3, 4, 5, 6]
    assert r.buffer_total_size == sum(len(b) for b in r.buffers)


def test_pull_buffers_decode_to_exactly_the_stored_messages(store: MessageStore) -> None:
    """Conformance: what a pull answers with is the stored records, byte for byte."""
    stored = []
    for i in range(30):
        m = msg(queue_id=i % 2, body=bytes([i]) * (i + 1), tags=f"T{i % 3}", keys=f"k{i}")
        r = store.append_message(m)
        stored.append((m, r))
    got = store.get_message("TopicA", 1, 0, 32)
    msgs = decode_messages(b"".join(got.buffers))
    expected = [(m, r) for m, r in stored if m.queue_id == 1]
    assert len(msgs) == len(expected) == got.message_count
    for d, (m, r) in zip(msgs, expected, strict=True):
        assert d.body == m.body and d.topic == m.topic and d.queue_id == 1
        assert d.commit_log_offset == r.wrote_offset and d.queue_offset == r.logical_offset
        assert d.store_timestamp == r.store_timestamp and d.offset_msg_id == r.msg_id
        assert d.born_host == m.born_host and d.born_timestamp == m.born_timestamp
        assert d.tags == f"T{stored.index((m, r)) % 3}"
        assert store.look_message_by_offset(d.commit_log_offset) == store.commit_log.read(
            d.commit_log_offset, d.store_size)


def test_adjacent_records_are_coalesced_into_one_buffer(store: MessageStore) -> None:
    fill(store, 8)
    r = store.get_message("TopicA", 0, 0, 32)
    assert len(r.buffers) == 1 and r.message_count == 8
    assert isinstance(r.buffers[0], memoryview)
    for i in range(6):
        store.append_message(msg(queue_id=i % 2))
    r = store.get_message("TopicA", 0, 0, 32)
    assert r.message_count == 11
    assert len(r.buffers) == 3  # 8 + the next one adjacent to them, then one per interleaved record
    assert len(decode_messages(b"".join(r.buffers))) == 11


def test_buffers_are_zero_copy_views_of_the_mapped_file(store: MessageStore) -> None:
    fill(store, 3)
    r = store.get_message("TopicA", 0, 0, 32)
    view = r.buffers[0]
    assert view.obj is not None
    first = store.commit_log.mfq.first
    assert first is not None
    assert view.obj is first.buf.obj


def test_tag_filtering(store: MessageStore) -> None:
    for i in range(20):
        store.append_message(msg(tags="A" if i % 4 == 0 else "B", body=bytes([i])))
    r = store.get_message("TopicA", 0, 0, 32, frozenset({tags_code("A")}))
    assert r.status is GS.FOUND
    assert [m.body[0] for m in decode_messages(r.body())] == [0, 4, 8, 12, 16]
    assert r.queue_offsets.tolist() == [0, 4, 8, 12, 16]
    assert r.next_begin_offset == 20
    r = store.get_message("TopicA", 0, 0, 3, frozenset({tags_code("A"), tags_code("B")}))
    assert r.message_count == 3 and r.next_begin_offset == 3
    r = store.get_message("TopicA", 0, 0, 2, frozenset({tags_code("A")}))
    assert r.queue_offsets.tolist() == [0, 4] and r.next_begin_offset == 5


def test_no_matched_message(store: MessageStore) -> None:
    fill(store, 5, tags="B")
    r = store.get_message("TopicA", 0, 1, 32, frozenset({tags_code("A")}))
    assert r.status is GS.NO_MATCHED_MESSAGE
    assert r.next_begin_offset == 5 and r.message_count == 0


def test_no_matched_logic_queue(store: MessageStore) -> None:
    r = store.get_message("Nope", 0, 0, 32)
    assert r.status is GS.NO_MATCHED_LOGIC_QUEUE and r.next_begin_offset == 0


def test_no_message_in_queue(store: MessageStore) -> None:
    store.append_message(msg(sys_flag=0x4))  # prepared: creates no consume-queue entry
    r = store.get_message("TopicA", 0, 5, 32)
    assert r.status is GS.NO_MESSAGE_IN_QUEUE and r.next_begin_offset == 0 and r.max_offset == 0


def test_offset_overflow_one_and_badly(store: MessageStore) -> None:
    fill(store, 4)
    r = store.get_message("TopicA", 0, 4, 32)
    assert r.status is GS.OFFSET_OVERFLOW_ONE and r.next_begin_offset == 4
    r = store.get_message("TopicA", 0, 9, 32)
    assert r.status is GS.OFFSET_OVERFLOW_BADLY and r.next_begin_offset == 4


def test_offset_too_small(store: MessageStore) -> None:
    fill(store, 250)  # 100-entry consume-queue files: 3 files
    cq = store.consume_queues[("TopicA", 0)]
    cq.min_offset = 100  # what retention leaves behind
    r = store.get_message("TopicA", 0, 10, 32)
    assert r.status is GS.OFFSET_TOO_SMALL and r.next_begin_offset == 100 and r.min_offset == 100


def test_offset_found_null(store: MessageStore) -> None:
    fill(store, 250)
    cq = store.consume_queues[("TopicA", 0)]
    cq.mfq.delete_first_files(1)  # the file is gone but min offset not corrected yet
    r = store.get_message("TopicA", 0, 10, 32)
    assert r.status is GS.OFFSET_FOUND_NULL and r.next_begin_offset == 100


def test_message_was_removing(store: MessageStore) -> None:
    for _ in range(40):
        store.append_message(msg(body=b"x" * 3000))
    for _ in range(20):
        store.append_message(msg(queue_id=1, body=b"x" * 3000))
    assert len(store.commit_log.mfq) >= 3
    store.commit_log.mfq.delete_first_files(2)  # commit log files gone, consume queue untouched
    r = store.get_message("TopicA", 0, 0, 5)
    assert r.status is GS.MESSAGE_WAS_REMOVING
    assert r.next_begin_offset == 40
    r = store.get_message("TopicA", 1, 0, 5)  # removed entries are skipped, survivors returned
    assert r.status is GS.FOUND


def test_count_and_byte_caps(make_store: Callable[..., MessageStore]) -> None:
    store = make_store(
        max_transfer_count_on_message_in_memory=4, max_transfer_bytes_on_message_in_memory=10_000
    )
    for _ in range(10):
        store.append_message(msg(body=b"x" * 1000))
    r = store.get_message("TopicA", 0, 0, 32)
    assert r.message_count == 4 and r.next_begin_offset == 4  # maxTransferCountOnMessageInMemory
    r = store.get_message("TopicA", 0, 0, 32, max_total_bytes=2500)
    assert r.message_count == 2 and r.next_begin_offset == 2
    r = store.get_message("TopicA", 0, 0, 32, max_total_bytes=10)
    assert r.message_count == 1  # at least one message, whatever its size


def test_large_pull_across_consume_queue_files(make_store: Callable[..., MessageStore]) -> None:
    store = make_store(
        max_transfer_count_on_message_in_memory=1000, max_transfer_bytes_on_message_in_memory=1 << 30
    )
    items = [(0, b"v", "", 0, ()) for _ in range(250)]
    store.append_messages(MessageBatchToStore("TopicA", 0, items))
    r = store.get_message("TopicA", 0, 50, 1000)
    assert r.message_count == 50 and r.next_begin_offset == 100  # one consume-queue file per read
    r = store.get_message("TopicA", 0, 100, 1000)
    assert r.message_count == 100 and r.next_begin_offset == 200


def test_offsets_and_times(store: MessageStore) -> None:
    stamps = []
    for i in range(6):
        r = store.append_message(MessageToStore("TopicA", 0, b"x", store_timestamp=1_000_000 + i * 1000))
        stamps.append(r.store_timestamp)
    assert stamps == [1_000_000 + i * 1000 for i in range(6)]
    assert store.get_min_offset_in_queue("TopicA", 0) == 0
    assert store.get_max_offset_in_queue("TopicA", 0) == 6
    assert store.get_earliest_message_time("TopicA", 0) == 1_000_000
    assert store.get_message_store_timestamp("TopicA", 0, 3) == 1_003_000
    assert store.get_message_store_timestamp("TopicA", 0, 99) == -1
    by_time = store.get_offset_in_queue_by_time
    assert by_time("TopicA", 0, 1_002_000) == 2  # LOWER: first stored at or after
    assert by_time("TopicA", 0, 1_002_500) == 3
    assert by_time("TopicA", 0, 1_002_500, upper=True) == 2  # UPPER: last stored at or before
    assert by_time("TopicA", 0, 1_002_000, upper=True) == 2
    assert by_time("TopicA", 0, 0) == 0
    assert by_time("TopicA", 0, 9_000_000) == 6  # every message older: max offset
    assert by_time("TopicA", 0, 9_000_000, upper=True) == 5
    assert by_time("TopicA", 0, 0, upper=True) == 0  # every message newer
    assert by_time("Nope", 0, 0) == 0
    assert store.get_max_offset_in_queue("Nope", 0) == 0


def test_store_timestamp_is_now_by_default(store: MessageStore) -> None:
    before = int(time.time() * 1000)
    r = store.append_message(msg())
    assert before <= r.store_timestamp <= int(time.time() * 1000) + 1


def test_look_message_by_offset_rejects_non_record_positions(store: MessageStore) -> None:
    r = store.append_message(msg())
    assert store.look_message_by_offset(r.wrote_offset) is not None
    assert store.look_message_by_offset(r.wrote_offset + 1) is None
    assert store.look_message_by_offset(10**9) is None
    assert store.look_message_by_offset(-5) is None


def test_a_record_filter_sees_candidates_in_order_and_stops_at_max_count(store: MessageStore) -> None:
    """Consecutive candidates (views) and tag-selected ones (gathers); a filter passing a whole
    chunk and one passing a few; the batch stops at the max count and resumes after its last."""
    for i in range(100):
        assert store.append_message(msg(body=f"m{i}".encode(), tags="A" if i % 2 else "B")).ok

    def every_third(buf: memoryview, offsets: object, limit: int) -> list[int]:
        out = []
        for j, at in enumerate(offsets):  # type: ignore[arg-type]
            body = decode_messages(bytes(buf[at:]))[0].body
            if int(body[1:]) % 3 == 0:
                out.append(j)
                if len(out) >= limit:
                    break
        return out

    def everything(buf: memoryview, offsets: object, limit: int) -> list[int]:
        return list(range(min(len(offsets), limit)))  # type: ignore[arg-type]

    for tags, rf, expected in (
        (None, everything, list(range(10, 42))),
        ({tags_code("A")}, everything, list(range(11, 75, 2))),
        (None, every_third, list(range(12, 100, 3))[:32]),
        ({tags_code("A")}, every_third, list(range(15, 100, 6))),
    ):
        r = store.get_message("TopicA", 0, 10, 32, tag_codes=frozenset(tags) if tags else None,
                              record_filter=rf)
        got = [int(m.body[1:]) for m in decode_messages(r.body())]
        assert got == expected and r.queue_offsets.tolist() == expected
        assert r.next_begin_offset == (expected[-1] + 1 if len(expected) == 32 else 100)


def test_plain_reads_answer_as_the_general_path(
    make_store: Callable[..., MessageStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The unfiltered pull takes a plain-int path; it must answer exactly as the numpy path does:
    interleaved queues (a buffer per record), adjacent records (one buffer), byte caps that cut a
    batch, reads that stop at a consume-queue file's end or the queue's end."""
    store = make_store(max_transfer_bytes_on_message_in_memory=700)
    for i in range(260):
        body = bytes([i % 251]) * (i % 37 + 1)
        assert store.append_message(msg(queue_id=0 if i < 60 else i % 2, body=body)).ok
    reads = [(q, off, n) for q in (0, 1) for off in (0, 3, 59, 60, 95, 99, 100, 150, 189) for n in (1, 5, 32)]

    def answers() -> list[tuple[object, ...]]:
        out = []
        for q, off, n in reads:
            r = store.get_message("TopicA", q, off, n)
            out.append((r.status, r.next_begin_offset, r.min_offset, r.max_offset, r.message_count,
                        r.buffer_total_size, [bytes(b) for b in r.buffers], r.queue_offsets.tolist()))
        return out

    taken = []
    plain_path = reader._read_plain

    def counted(*a: object) -> object:
        r = plain_path(*a)  # type: ignore[arg-type]
        taken.append(r is not None)
        return r

    monkeypatch.setattr(reader, "_read_plain", counted)
    plain = answers()
    assert sum(taken) >= len([a for a in plain if a[0] is GS.FOUND])  # every FOUND took it
    monkeypatch.setattr(reader, "_read_plain", lambda *a: None)
    assert plain == answers()
    assert any(a[0] is GS.FOUND and len(a[6]) > 1 for a in plain)  # interleaved: several buffers
    assert any(a[0] is GS.FOUND and 1 < a[4] < 32 and a[5] <= 700 for a in plain)  # cut by bytes
