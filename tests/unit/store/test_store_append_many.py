"""Runs of one-message puts (`append_many`), encoded batches and the group commit: each must
store exactly what the one-at-a-time path stores."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import struct
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from store_testlib import msg

from rocketq.codec.message import decode_message, java_string_hash
from rocketq.store import MessageBatchToStore, MessageStore, MessageToStore, PutMessageStatus, SingleEntry
from rocketq.store.commitlog import EncodedBatch
from rocketq.store.index import java_hashes

SEG = 64 * 1024


def entry(m: MessageToStore) -> SingleEntry:
    # a plain tuple, as the broker hands it over: the store must never read `entry.field`
    return tuple(SingleEntry(m.topic, m.queue_id, m.body, m.flag, m.properties, m.tags_code, m.keys,  # type: ignore[return-value]
                             m.sys_flag, m.born_timestamp, m.born_host, m.reconsume_times))


def records(store: MessageStore) -> list[tuple[object, ...]]:
    """Every stored message, without the store timestamp (the two paths read the clock apart)."""
    out = []
    for (topic, qid), cq in sorted(store.consume_queues.items()):
        for i in range(cq.min_offset, cq.max_offset):
            e = cq.entry(i)
            assert e is not None
            raw = store.look_message_by_offset(e[0])
            assert raw is not None and len(raw) == e[1]
            m, _ = decode_message(raw)
            out.append((topic, qid, i, e[0], e[2], m.body, m.properties, m.flag, m.sys_flag, m.born_host,
                        m.queue_offset, m.commit_log_offset, m.body_crc))
    return out


def mixed_messages(n: int) -> list[MessageToStore]:
    return [msg(topic="TopicA" if i % 5 else "TopicB", queue_id=i % 3, body=b"%03d" % i * (60 + i % 100),
                tags=f"T{i % 4}" if i % 3 else None, keys=f"k{i}" if i % 7 == 0 else None)
            for i in range(n)]


def test_a_run_stores_what_one_at_a_time_stores(make_store: Callable[..., MessageStore],
                                                 tmp_path: Path) -> None:
    one = make_store(tmp_path / "one")
    many = make_store(tmp_path / "many")
    messages = mixed_messages(200)
    singles = [one.append_message(m) for m in messages]
    runs = many.append_many([entry(m) for m in messages[:80]]) + many.append_many(
        [entry(m) for m in messages[80:]])
    assert all(r.ok for r in singles)
    assert [(r.wrote_offset, r.wrote_bytes, r.logical_offset) for r in singles] == runs
    assert records(one) == records(many)
    assert one.max_phy_offset == many.max_phy_offset  # ran over segment ends the same way
    assert len(many.commit_log.mfq) > 1
    assert many.put_message_times_total == 200 and many.put_message_size_total == one.put_message_size_total
    for key in ("k0", "k49", "k63", messages[77].keys[0]):
        topic = next(m.topic for m in messages if key in m.keys)
        assert one.query_message(topic, key, 10, 0, 2**62).phy_offsets == \
            many.query_message(topic, key, 10, 0, 2**62).phy_offsets != []


def test_refused_entries_get_their_status_and_the_rest_is_stored(store: MessageStore) -> None:
    good = msg(body=b"ok")
    too_long = dataclasses.replace(msg(), properties="P\x01" + "x" * 40000)
    bad_topic = msg(topic="")
    big = msg(body=b"x" * (store.config.max_message_size + 1))
    out = store.append_many([entry(m) for m in (good, too_long, bad_topic, big, good)])
    assert out[1] is PutMessageStatus.PROPERTIES_SIZE_EXCEEDED
    assert out[2] is PutMessageStatus.MESSAGE_ILLEGAL and out[3] is PutMessageStatus.MESSAGE_ILLEGAL
    assert isinstance(out[0], tuple) and isinstance(out[4], tuple)
    assert (out[0][2], out[4][2]) == (0, 1)
    assert store.get_max_offset_in_queue("TopicA", 0) == 2


def test_a_full_disk_refuses_the_whole_run(store: MessageStore) -> None:
    store.disk_full = True
    assert store.append_many([entry(msg()), entry(msg())]) == [PutMessageStatus.SERVICE_NOT_AVAILABLE] * 2
    assert store.max_phy_offset == 0


def test_a_run_wakes_each_queue_and_tag_once_at_its_end(make_store: Callable[..., MessageStore]) -> None:
    seen: list[tuple[str, int, int, int]] = []
    store = make_store()
    store.append_message(msg(queue_id=5))
    store.on_arrival = lambda topic, qid, max_offset, tags: seen.append((topic, qid, max_offset, tags))
    messages = [msg(queue_id=i % 2, tags="A" if i < 4 else "B") for i in range(6)]
    store.append_many([entry(m) for m in messages])
    a, b = messages[0].tags_code, messages[5].tags_code
    assert sorted(seen) == sorted([("TopicA", 0, 3, a), ("TopicA", 1, 3, a), ("TopicA", 0, 3, b),
                                   ("TopicA", 1, 3, b)])


def test_a_failing_arrival_listener_still_wakes_the_other_queues(
        make_store: Callable[..., MessageStore]) -> None:
    seen: list[tuple[str, int]] = []
    store = make_store()

    def listener(topic: str, qid: int, max_offset: int, tags: int) -> None:
        if topic == "TopicB":
            raise RuntimeError("listener bug")
        seen.append((topic, qid))

    store.on_arrival = listener
    placed = store.append_many([entry(msg(topic=t, queue_id=1)) for t in ("TopicB", "TopicA", "TopicC")])
    assert all(type(p) is tuple for p in placed)
    assert seen == [("TopicA", 1), ("TopicC", 1)]


def test_encoded_batch_stores_what_the_entry_batch_stores(make_store: Callable[..., MessageStore],
                                                         tmp_path: Path) -> None:
    items = [(i % 2, b"body-%d" % i, f"UNIQ_KEY\x01U{i}\x02TAGS\x01T{i % 3}", java_string_hash(f"T{i % 3}"),
              (f"U{i}",)) for i in range(30)]
    a = make_store(tmp_path / "a")
    b = make_store(tmp_path / "b")
    ra = a.append_messages(MessageBatchToStore("TopicA", 1, items, born_timestamp=5,
                                               born_host=("10.0.0.1", 9)))
    props = [p.encode() for _, _, p, _, _ in items]
    rb = b.append_messages(EncodedBatch(
        "TopicA", 1, [f for f, *_ in items], [body for _, body, *_ in items],
        [struct.pack(">h", len(p)) + p for p in props], [t for *_, t, _ in items], [k for *_, k in items],
        born_timestamp=5, born_host=("10.0.0.1", 9)))
    assert ra.ok and rb.ok
    assert (ra.wrote_offset, ra.wrote_bytes, ra.logical_offset, list(ra.record_offsets)) == \
        (rb.wrote_offset, rb.wrote_bytes, rb.logical_offset, list(rb.record_offsets))
    assert records(a) == records(b)
    huge = EncodedBatch("TopicA", 1, [0], [b"x"], [b"\xff\xff" + b"p" * 40000], [0], [("U",)])
    assert b.append_messages(huge).status is PutMessageStatus.PROPERTIES_SIZE_EXCEEDED


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 60), st.lists(st.text(min_size=1, max_size=1), min_size=1, max_size=30))
def test_equal_length_keys_hash_like_java(width: int, alphabet: list[str]) -> None:
    keys = ["".join(alphabet[(i * 7 + j) % len(alphabet)] for j in range(width)) for i in range(25)]
    keys = [k[:width] for k in keys]
    assert java_hashes(keys).tolist() == [java_string_hash(k) for k in keys]


async def test_group_commit_answers_waiters_and_times_out_by_its_timer(
    make_store: Callable[..., MessageStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    store = make_store(flush_disk_type="SYNC_FLUSH", sync_flush_timeout=80)
    await store.start()
    try:
        out = store.append_many([entry(msg(body=b"a")), entry(msg(body=b"b"))])
        assert isinstance(out[1], tuple)
        assert await store.wait_flushed(out[1][0] + out[1][1])
        assert store.commit_log.flushed_offset == store.max_phy_offset
        real = store.commit_log.flush

        def slow(least: int = 0) -> int:
            time.sleep(0.3)
            return real(least)

        monkeypatch.setattr(store.commit_log, "flush", slow)
        out = store.append_many([entry(msg(body=b"c"))])
        assert isinstance(out[0], tuple)
        start = time.monotonic()
        assert not await store.wait_flushed(out[0][0] + out[0][1])  # FLUSH_DISK_TIMEOUT
        assert time.monotonic() - start < 0.25
        end = store.max_phy_offset
        later = store.flush_future(end)
    finally:
        await store.shutdown()  # waits for the slow flush, flushes and answers the rest
    assert later.done()
    assert store.commit_log.flushed_offset == end


async def test_overlapping_flushes_never_move_the_flushed_offset_back(
    make_store: Callable[..., MessageStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    store = make_store(flush_disk_type="SYNC_FLUSH")
    await store.start()
    real = os.fdatasync

    def jittery(fd: int) -> None:
        time.sleep(0.002)
        real(fd)

    monkeypatch.setattr(os, "fdatasync", jittery)
    try:
        async def put(i: int) -> bool:
            out = store.append_many([entry(msg(body=b"x%d" % i))])
            assert isinstance(out[0], tuple)
            await asyncio.sleep(0.001 * (i % 3))
            ok = await store.wait_flushed(out[0][0] + out[0][1])
            assert store.commit_log.flushed_offset >= out[0][0] + out[0][1]
            return ok

        assert all(await asyncio.gather(*(put(i) for i in range(40))))
        assert store.commit_log.flushed_offset == store.max_phy_offset
    finally:
        monkeypatch.undo()
        await store.shutdown()
