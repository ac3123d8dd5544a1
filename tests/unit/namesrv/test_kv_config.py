"""KVConfigManager: namespaces, RocketMQ's file format, atomic persistence."""

from __future__ import annotations

import json
from pathlib import Path

from rocketq.namesrv.kv_config import KVConfigManager


def test_put_get_delete_and_namespaces(tmp_path: Path) -> None:
    kv = KVConfigManager(tmp_path / "kvConfig.json")
    assert kv.get_kv_config("ORDER_TOPIC_CONFIG", "T") is None
    assert kv.get_kv_list_by_namespace("ORDER_TOPIC_CONFIG") is None
    kv.put_kv_config("ORDER_TOPIC_CONFIG", "T", "broker-a:4")
    kv.put_kv_config("ORDER_TOPIC_CONFIG", "T", "broker-a:8")
    kv.put_kv_config("other", "k", "v")
    assert kv.get_kv_config("ORDER_TOPIC_CONFIG", "T") == "broker-a:8"
    assert kv.get_kv_list_by_namespace("ORDER_TOPIC_CONFIG") == {"T": "broker-a:8"}
    assert kv.delete_kv_config("ORDER_TOPIC_CONFIG", "T")
    assert not kv.delete_kv_config("ORDER_TOPIC_CONFIG", "T")
    assert kv.get_kv_list_by_namespace("ORDER_TOPIC_CONFIG") is None  # empty namespaces vanish
    assert kv.get_kv_config("other", "k") == "v"


def test_persist_round_trip_in_rocketmq_format(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "kvConfig.json"
    kv = KVConfigManager(path)
    kv.put_kv_config("ns", "k", "v\u00e9")
    kv.persist()
    assert json.loads(path.read_text()) == {"configTable": {"ns": {"k": "v\u00e9"}}}
    assert not path.with_name("kvConfig.json.tmp").exists()
    again = KVConfigManager(path)
    again.load()
    assert again.get_kv_config("ns", "k") == "v\u00e9"


def test_load_missing_and_corrupt_files(tmp_path: Path) -> None:
    kv = KVConfigManager(tmp_path / "absent.json")
    kv.load()
    assert kv.get_kv_list_by_namespace("ns") is None
    bad = tmp_path / "bad.json"
    bad.write_text('{"configTable": {"ns": {"k": "v"')
    kv = KVConfigManager(bad)
    kv.load()
    assert kv.get_kv_list_by_namespace("ns") is None
    bad.write_text('["not", "a", "table"]')
    kv.load()
    assert kv.get_kv_list_by_namespace("ns") is None


def test_load_accepts_a_java_written_file(tmp_path: Path) -> None:
    path = tmp_path / "kvConfig.json"
    # fastjson's pretty printing, as RocketMQ writes it.
    path.write_text(
        '{\n\t"configTable":{\n\t\t"ORDER_TOPIC_CONFIG":{\n\t\t\t"T":"broker-a:4;broker-b:4"\n\t\t}\n\t}\n}'
    )
    kv = KVConfigManager(path)
    kv.load()
    assert kv.get_kv_config("ORDER_TOPIC_CONFIG", "T") == "broker-a:4;broker-b:4"
