"""Runs of single sends over many topics take the index's bulk path (`IndexService.add_mixed`):
it must build exactly the files that one `add` per message builds."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
from store_testlib import msg, small_config

from rocketq.codec.message import decode_message, decode_offset_msg_id
from rocketq.store import MessageStore
from rocketq.store import put as put_module
from rocketq.store.index import IndexService
from rocketq.store.model import SingleEntry

TOPICS = ("TopicA", "TopicB", "TopicC")
STORE_TS = 1_700_000_000_000


def mixed_run(n: int) -> list[tuple[str, tuple[str, ...], int]]:
    """(topic, keys, commit-log offset) of `n` messages round-robin over three topics: a
    UNIQ_KEY each, some with no further key, some with several KEYS words, and the same KEYS
    words in every topic (topic#key tells them apart)."""
    run = []
    for i in range(n):
        words: tuple[str, ...] = ((), (f"order-{i % 5}",), (f"order-{i % 5}", "shared", f"w{i}"))[i // 3 % 3]
        run.append((TOPICS[i % len(TOPICS)], (f"UNIQ{i:05d}", *words), 1000 + 97 * i))
    return run


def index_files(svc: IndexService) -> list[bytes]:
    return [Path(f.path).read_bytes() for f in svc.files]


def test_mixed_run_builds_the_same_files_as_per_message_adds(tmp_path: Path) -> None:
    run = mixed_run(250)  # 580 keys: rolls over to a second 400-entry file mid-run
    single = IndexService(small_config(tmp_path / "single"))
    bulk = IndexService(small_config(tmp_path / "bulk"))
    # something queued before the run, in both forms, as a broker's drain finds it
    for svc in (single, bulk):
        svc.add("TopicA", ("before",), 10, STORE_TS - 5_000)
        svc.add_batch("TopicB", [("b0",), ("b1", "shared")], [20, 30], STORE_TS - 3_000)
    for i, (topic, keys, phys) in enumerate(run):
        single.add(topic, keys, phys, STORE_TS + (i // 100) * 1_000)
    for start in range(0, len(run), 100):  # one run per store timestamp
        part = run[start:start + 100]
        bulk.add_mixed([t for t, _, _ in part], [k for _, k, _ in part], [p for _, _, p in part],
                       STORE_TS + (start // 100) * 1_000)
    assert bulk.drain() == single.drain() == 1 + 3 + sum(len(k) for _, k, _ in run)
    for svc in (single, bulk):
        svc.flush()
    files = index_files(single)
    assert len(files) == 2
    assert index_files(bulk) == files  # header, slots, chains: byte for byte
    for topic, key in (("TopicA", "order-1"), ("TopicB", "shared"), ("TopicC", "UNIQ00242")):
        assert bulk.query(topic, key, 64, 0, 2**62) == single.query(topic, key, 64, 0, 2**62)
    assert bulk.query("TopicB", "shared", 64, 0, 2**62)[0][-1] == 30  # the batch before the run
    single.close()
    bulk.close()


def entries(n: int) -> list[SingleEntry]:
    out = []
    for i, (topic, keys, _) in enumerate(mixed_run(n)):
        m = msg(topic=topic, queue_id=i % 4, keys=" ".join(keys[1:]) or None, uniq=keys[0])
        out.append(SingleEntry(m.topic, m.queue_id, m.body, m.flag, m.properties, m.tags_code, m.keys,
                               m.sys_flag, m.born_timestamp, m.born_host, m.reconsume_times))
    return out


def test_mixed_run_through_the_store_matches_single_puts(
    make_store: Callable[..., MessageStore], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(put_module, "now_ms", lambda: STORE_TS)  # both stores, same records
    run = entries(90)
    one_by_one = make_store(tmp_path / "one")
    single = [one_by_one.append_message(msg(topic=m[0], queue_id=m[1], uniq=m[6][0],
                                            keys=" ".join(m[6][1:]) or None, store_timestamp=STORE_TS))
              for m in run]
    store = make_store(tmp_path / "run")
    placed = store.append_many(run)
    assert [p[0] for p in placed] == [r.wrote_offset for r in single]  # type: ignore[index]
    for s in (store, one_by_one):
        s.drain_index()
        s.close()

    def files(root: Path) -> list[bytes]:
        d = root / "index"
        return [(d / name).read_bytes() for name in sorted(os.listdir(d))]

    assert files(tmp_path / "run") == files(tmp_path / "one")


def test_mixed_run_is_found_by_key_and_id_after_reopen(
    make_store: Callable[..., MessageStore], tmp_path: Path,
) -> None:
    run = entries(60)
    store = make_store()
    placed = store.append_many(run)
    offsets = [p[0] for p in placed]  # type: ignore[index]
    store.close()
    store = make_store()
    # KEYS with several words, in every topic: topic#key keeps the topics apart
    for topic_no, topic in enumerate(TOPICS):
        want = sorted(offsets[i] for i in range(60) if i % 3 == topic_no and i // 3 % 3 == 2)
        assert len(want) == 6
        assert sorted(store.query_message(topic, "shared", 64, 0, 2**62).phy_offsets) == want
    res = store.query_message("TopicB", "order-2", 64, 0, 2**62)
    assert sorted(res.phy_offsets) == sorted(
        offsets[i] for i in range(60) if i % 3 == 1 and i // 3 % 3 > 0 and i % 5 == 2)
    assert {decode_message(b)[0].topic for b in res.buffers} == {"TopicB"}
    # by UNIQ_KEY (queryMessageByUniqKey) and by the offset msgId (viewMessageById)
    for i in (0, 31, 59):
        res = store.query_message(TOPICS[i % 3], f"UNIQ{i:05d}", 32, 0, 2**62)
        assert res.phy_offsets == [offsets[i]]
        assert decode_message(res.buffers[0])[0].uniq_key == f"UNIQ{i:05d}"
        _, _, off = decode_offset_msg_id(f"{store.msg_id_prefix}{offsets[i]:016X}")
        raw = store.look_message_by_offset(off)
        assert raw is not None and decode_message(raw)[0].uniq_key == f"UNIQ{i:05d}"
    assert store.query_message("TopicA", "UNIQ00001", 32, 0, 2**62).phy_offsets == []  # a TopicB key
