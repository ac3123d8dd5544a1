"""The index (PROTOCOL.md §3.8): byte layout, chains, queries by key / UNIQ_KEY and time."""

from __future__ import annotations

import asyncio
import os
import struct
from collections.abc import Callable
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from store_testlib import msg

from rocketq.codec.message import decode_message, java_string_hash
from rocketq.store import MessageBatchToStore, MessageStore, MessageToStore
from rocketq.store.index import java_hashes, key_hashes

SLOTS, ENTRIES = 64, 400


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(max_size=40), min_size=1, max_size=20))
def test_vectorised_java_hash_matches_the_scalar_one(strings: list[str]) -> None:
    assert java_hashes(strings).tolist() == [java_string_hash(s) for s in strings]


def test_key_hash_is_absolute_and_zero_for_min_int() -> None:
    neg = "Hello World"  # hashCode -862545276
    assert key_hashes([neg]).tolist() == [862545276]
    # "polygenelubricants".hashCode() == Integer.MIN_VALUE
    assert java_string_hash("polygenelubricants") == -(2**31)
    assert key_hashes(["polygenelubricants"]).tolist() == [0]


def read_index(path: Path) -> tuple[tuple[int, ...], list[int], bytes]:
    data = path.read_bytes()
    header = struct.unpack_from(">qqqqii", data, 0)
    slots = list(struct.unpack_from(f">{SLOTS}i", data, 40))
    return header, slots, data


def entry(data: bytes, n: int) -> tuple[int, int, int, int]:
    return struct.unpack_from(">iqii", data, 40 + SLOTS * 4 + n * 20)  # type: ignore[return-value]


def test_index_file_layout(store: MessageStore, tmp_path: Path) -> None:
    a = store.append_message(msg(keys="alpha", uniq="U1", store_timestamp=1_700_000_000_000))
    b = store.append_message(msg(keys="alpha beta", uniq="U2", store_timestamp=1_700_000_003_500))
    store.drain_index()
    store.close()
    (name,) = os.listdir(tmp_path / "store" / "index")
    assert len(name) == 17 and name.isdigit()  # yyyyMMddHHmmssSSS
    path = tmp_path / "store" / "index" / name
    assert path.stat().st_size == 40 + SLOTS * 4 + ENTRIES * 20
    header, slots, data = read_index(path)
    begin_ts, end_ts, begin_phy, end_phy, _slot_count, index_count = header
    assert (begin_ts, end_ts) == (1_700_000_000_000, 1_700_000_003_500)
    assert (begin_phy, end_phy) == (a.wrote_offset, b.wrote_offset)
    assert index_count == 1 + 5  # numbering starts at 1: U1 alpha U2 alpha beta
    assert entry(data, 0) == (0, 0, 0, 0)  # entry 0 is never used

    def kh(key: str) -> int:
        return abs(java_string_hash(f"TopicA#{key}"))

    # newest "alpha" entry is number 4; it links back to number 2
    assert slots[kh("alpha") % SLOTS] == 4
    h, phy, tdiff, prev = entry(data, 4)
    assert (h, phy, tdiff) == (kh("alpha"), b.wrote_offset, 3)  # seconds since beginTimestamp
    same_slot = [n for n, k in ((1, "U1"), (2, "alpha"), (3, "U2")) if kh(k) % SLOTS == kh("alpha") % SLOTS]
    assert prev == max(same_slot)  # the chain links to the previous entry of the slot
    h, phy, tdiff, prev = entry(data, 2)
    assert (h, phy, tdiff) == (kh("alpha"), a.wrote_offset, 0)
    assert entry(data, 1)[:2] == (kh("U1"), a.wrote_offset)


def test_query_by_key_and_uniq_key(store: MessageStore) -> None:
    offsets = {}
    for i in range(20):
        r = store.append_message(msg(keys=f"order-{i % 4} common", uniq=f"UNIQ{i:04d}"))
        offsets[i] = r.wrote_offset
    res = store.query_message("TopicA", "order-1", 32, 0, 2**62)
    assert sorted(res.phy_offsets) == sorted(offsets[i] for i in range(1, 20, 4))
    assert [decode_message(b)[0].keys for b in res.buffers] == ["order-1 common"] * 5
    res = store.query_message("TopicA", "UNIQ0007", 32, 0, 2**62)
    assert res.phy_offsets == [offsets[7]]
    assert decode_message(res.buffers[0])[0].uniq_key == "UNIQ0007"
    assert res.index_last_update_phyoffset == offsets[19]
    assert store.query_message("TopicA", "missing", 32, 0, 2**62).phy_offsets == []
    assert store.query_message("OtherTopic", "order-1", 32, 0, 2**62).phy_offsets == []
    assert len(store.query_message("TopicA", "common", 3, 0, 2**62).phy_offsets) == 3


def test_query_time_range(store: MessageStore) -> None:
    base = 1_700_000_000_000
    got = {}
    for i in range(5):
        m = MessageToStore("TopicA", 0, b"x", properties=f"KEYS\x01k\x02UNIQ_KEY\x01u{i}\x02",
                           keys=(f"u{i}", "k"), store_timestamp=base + i * 10_000)
        got[i] = store.append_message(m).wrote_offset
    q = store.query_message
    assert sorted(q("TopicA", "k", 32, base + 10_000, base + 30_000).phy_offsets) == [got[1], got[2], got[3]]
    assert q("TopicA", "k", 32, base + 41_000, base + 50_000).phy_offsets == []
    assert q("TopicA", "u4", 32, base, base + 40_000).phy_offsets == [got[4]]
    assert q("TopicA", "u4", 32, base, base + 39_000).phy_offsets == []


def test_full_index_file_rolls_to_a_new_one(store: MessageStore, tmp_path: Path) -> None:
    items = [(0, b"x", f"UNIQ_KEY\x01B{i}\x02", 0, (f"B{i}", "shared")) for i in range(300)]
    r = store.append_messages(MessageBatchToStore("TopicA", 0, items))
    store.drain_index()
    assert len(os.listdir(tmp_path / "store" / "index")) == 2  # 600 keys, 399 per file
    assert store.query_message("TopicA", "B5", 32, 0, 2**62).phy_offsets == [r.record_offsets[5]]
    assert store.query_message("TopicA", "B299", 32, 0, 2**62).phy_offsets == [r.record_offsets[299]]
    shared = store.query_message("TopicA", "shared", 1000, 0, 2**62).phy_offsets
    assert len(shared) == 64  # capped by maxMsgsNumBatch
    assert shared[0] == r.record_offsets[299]  # newest first


def test_rollback_records_are_not_indexed(store: MessageStore) -> None:
    store.append_message(msg(keys="tx", sys_flag=0xC))
    store.append_message(msg(keys="tx", sys_flag=0x4))
    assert len(store.query_message("TopicA", "tx", 32, 0, 2**62).phy_offsets) == 1


def test_index_disabled(make_store: Callable[..., MessageStore], tmp_path: Path) -> None:
    store = make_store(message_index_enable=False)
    store.append_message(msg(keys="k"))
    assert store.query_message("TopicA", "k", 32, 0, 2**62).phy_offsets == []
    assert not (tmp_path / "store" / "index").exists()


async def test_background_drain_makes_keys_searchable_quickly(store: MessageStore) -> None:
    await store.start()
    try:
        store.append_message(msg(keys="soon"))
        assert store.index is not None
        for _ in range(20):
            if store.index.pending_keys == 0:
                break
            await asyncio.sleep(0.01)
        assert store.index.pending_keys == 0
        assert len(store.query_message("TopicA", "soon", 32, 0, 2**62).phy_offsets) == 1
    finally:
        await store.shutdown()
