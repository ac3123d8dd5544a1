"""ConsumerOffsetManager: commits, queries, the consumerOffset.json format and crash-safe persistence."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import orjson
import pytest

from rocketq.broker.offset_manager import ConsumerOffsetManager, decode_offset_table, loads_lenient


def _mgr(root: Path) -> ConsumerOffsetManager:
    ctl = SimpleNamespace(store_config=SimpleNamespace(store_path_root_dir=str(root)))
    return ConsumerOffsetManager(ctl)  # type: ignore[arg-type]


def test_query_unknown_is_minus_one(tmp_path: Path) -> None:
    m = _mgr(tmp_path)
    assert m.query_offset("g", "t", 0) == -1
    m.commit_offset("1.2.3.4:5", "g", "t", 0, 12)
    assert m.query_offset("g", "t", 0) == 12
    assert m.query_offset("g", "t", 1) == -1
    assert m.query_offset("other", "t", 0) == -1


def test_commit_overwrites_even_backwards(tmp_path: Path) -> None:
    m = _mgr(tmp_path)
    m.commit_offset("c", "g", "t", 3, 100)
    m.commit_offset("c", "g", "t", 3, 40)  # a reset moves offsets back: the newest commit wins
    assert m.query_offset("g", "t", 3) == 40


def test_file_format_is_rocketmq(tmp_path: Path) -> None:
    m = _mgr(tmp_path)
    m.commit_offset("c", "g1", "TopicA", 0, 12)
    m.commit_offset("c", "g1", "TopicA", 1, 7)
    m.commit_offset("c", "%RETRY%g1", "%RETRY%g1", 0, 3)
    m.persist()
    doc = orjson.loads((tmp_path / "config" / "consumerOffset.json").read_bytes())
    assert doc == {"offsetTable": {"TopicA@g1": {"0": 12, "1": 7}, "%RETRY%g1@%RETRY%g1": {"0": 3}}}


def test_file_bytes_are_pinned(tmp_path: Path) -> None:
    # Insertion order, compact, queue ids quoted (fastjson reads both spellings).
    m = _mgr(tmp_path)
    m.commit_offset("c", "g1", "TopicB", 1, 7)
    m.commit_offset("c", "g1", "TopicB", 0, 12)
    m.commit_offset("c", "g\u00e9", "TopicA", 0, -1)
    assert m.encode() == b'{"offsetTable":{"TopicB@g1":{"1":7,"0":12},"TopicA@g\xc3\xa9":{"0":-1}}}'


def test_offsets_survive_reload(tmp_path: Path) -> None:
    m = _mgr(tmp_path)
    for q in range(4):
        m.commit_offset("c", "g", "t", q, q * 10)
    m.persist()
    m2 = _mgr(tmp_path)
    assert m2.load()
    assert m2.query_offsets("g", "t") == {0: 0, 1: 10, 2: 20, 3: 30}


def test_load_accepts_fastjson_bare_integer_keys(tmp_path: Path) -> None:
    cfg = tmp_path / "config"
    cfg.mkdir()
    (cfg / "consumerOffset.json").write_text(
        '{\n\t"offsetTable":{\n\t\t"TopicTest@please_rename_unique_group_name_4":{0:250,1:249,2:251,3:250}\n\t}\n}')
    m = _mgr(tmp_path)
    assert m.load()
    offsets = m.query_offsets("please_rename_unique_group_name_4", "TopicTest")
    assert offsets == {0: 250, 1: 249, 2: 251, 3: 250}


def test_corrupt_file_falls_back_to_backup(tmp_path: Path) -> None:
    m = _mgr(tmp_path)
    m.commit_offset("c", "g", "t", 0, 5)
    m.persist()
    m.commit_offset("c", "g", "t", 0, 6)
    m.persist()  # the first version is now the .bak
    (tmp_path / "config" / "consumerOffset.json").write_bytes(b'{"offsetTable":{"t@g":{"0":')
    m2 = _mgr(tmp_path)
    assert m2.load()
    assert m2.query_offset("g", "t", 0) == 5


def test_missing_file_is_a_fresh_broker(tmp_path: Path) -> None:
    m = _mgr(tmp_path)
    assert m.load()
    assert m.offset_table == {}


def test_persist_skips_when_unchanged(tmp_path: Path) -> None:
    m = _mgr(tmp_path)
    m.commit_offset("c", "g", "t", 0, 1)
    m.persist()
    path = tmp_path / "config" / "consumerOffset.json"
    mtime = path.stat().st_mtime_ns
    path.write_bytes(path.read_bytes())  # same content, new mtime: a write would change it again
    mtime = path.stat().st_mtime_ns
    m.persist()
    assert path.stat().st_mtime_ns == mtime
    m.commit_offset("c", "g", "t", 0, 2)
    m.persist()
    assert orjson.loads(path.read_bytes())["offsetTable"]["t@g"]["0"] == 2


async def test_persist_async(tmp_path: Path) -> None:
    m = _mgr(tmp_path)
    m.commit_offset("c", "g", "t", 0, 9)
    await m.persist_async()
    m2 = _mgr(tmp_path)
    m2.load()
    assert m2.query_offset("g", "t", 0) == 9


def test_group_and_topic_cleanup(tmp_path: Path) -> None:
    m = _mgr(tmp_path)
    m.commit_offset("c", "g1", "a", 0, 1)
    m.commit_offset("c", "g1", "b", 0, 1)
    m.commit_offset("c", "g2", "a", 0, 1)
    assert m.which_topic_by_consumer("g1") == {"a", "b"}
    assert m.which_group_by_topic("a") == {"g1", "g2"}
    m.clean_offset_by_topic("a")
    assert m.which_group_by_topic("a") == set()
    assert m.query_offset("g1", "b", 0) == 1
    m.remove_offset("g1")
    assert m.offset_table == {}


def test_clone_offset(tmp_path: Path) -> None:
    m = _mgr(tmp_path)
    m.commit_offset("c", "src", "t", 0, 4)
    m.clone_offset("src", "dst", "t")
    assert m.query_offset("dst", "t", 0) == 4


@pytest.mark.parametrize("bad", [b"[]", b'{"offsetTable":[]}', b'{"offsetTable":{"noseparator":{"0":1}}}',
                                 b'{"offsetTable":{"t@g":{"x":1}}}'])
def test_decode_rejects_malformed(bad: bytes) -> None:
    with pytest.raises((ValueError, TypeError)):
        decode_offset_table(bad)


def test_lenient_loader_leaves_quoted_keys_alone() -> None:
    assert loads_lenient(b'{"a@b":{"0":1}}') == {"a@b": {"0": 1}}
