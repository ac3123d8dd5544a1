"""TopicConfigManager without a server: validation, system topics, auto-create rules, persistence."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import orjson
import pytest

from rocketq.broker.topic_manager import (
    PERM_INHERIT,
    PERM_READ,
    PERM_WRITE,
    TopicConfigManager,
    check_send_allowed,
    check_topic_name,
    new_topic_config,
)
from rocketq.codec.bodies import TopicConfigSerializeWrapper, TopicFilterType
from rocketq.config import BrokerConfig
from rocketq.errors import InvalidParameter, NoPermission


def _manager(tmp_path: Path, **broker: Any) -> TopicConfigManager:
    ctl = SimpleNamespace(
        broker_config=BrokerConfig(broker_name="bk", broker_cluster_name="Cl", **broker),
        store_config=SimpleNamespace(store_path_root_dir=str(tmp_path)),
    )
    return TopicConfigManager(ctl)  # type: ignore[arg-type]


def test_trace_topic_follows_trace_topic_enable(tmp_path: Path) -> None:
    # RocketMQ creates the trace topic only with traceTopicEnable; otherwise the first trace a
    # client sends creates it from TBW102.
    tm = _manager(tmp_path)
    assert "RMQ_SYS_TRACE_TOPIC" not in tm.table
    assert tm.is_system_topic("RMQ_SYS_TRACE_TOPIC")  # TopicValidator's set names it anyway
    tm = _manager(tmp_path, trace_topic_enable=True, msg_trace_topic_name="MyTrace")
    trace = tm.table["MyTrace"]
    assert (trace.read_queue_nums, trace.write_queue_nums, trace.perm) == (1, 1, PERM_READ | PERM_WRITE)
    assert tm.is_system_topic("MyTrace")
    assert "RMQ_SYS_TRACE_TOPIC" not in tm.table


def test_system_topics(tmp_path: Path) -> None:
    tm = _manager(tmp_path)
    tbw = tm.table["TBW102"]
    assert (tbw.read_queue_nums, tbw.write_queue_nums, tbw.perm) == (8, 8, 7)
    assert tm.table["SCHEDULE_TOPIC_XXXX"].write_queue_nums == 18
    for name in ("SELF_TEST_TOPIC", "OFFSET_MOVED_EVENT", "Cl", "bk", "Cl_REPLY_TOPIC"):
        assert name in tm.table
        assert tm.is_system_topic(name)
    reply = tm.table["Cl_REPLY_TOPIC"]  # request-reply: one queue, as TopicConfigManager makes it
    assert (reply.read_queue_nums, reply.write_queue_nums, reply.perm) == (1, 1, 6)
    assert tm.is_system_topic("rmq_sys_anything")
    assert not tm.is_system_topic("UserTopic")


def test_no_tbw102_when_auto_create_is_off(tmp_path: Path) -> None:
    tm = _manager(tmp_path, auto_create_topic_enable=False)
    assert "TBW102" not in tm.table
    assert tm.create_topic_in_send_message_method("T", "TBW102", "peer", 4, 0) is None


@pytest.mark.parametrize("name", ["a", "Topic_1-x", "%RETRY%g", "a|b", "T" * 127, "%DLQ%" + "g" * 250])
def test_valid_topic_names(name: str) -> None:
    assert check_topic_name(name) == name


@pytest.mark.parametrize(
    ("name", "why"),
    [("", "blank"), ("   ", "blank"), ("a b", "illegal"), ("a/b", "illegal"), ("ü", "illegal"),
     ("T" * 128, "longer"), ("%RETRY%" + "g" * 249, "longer")],
)
def test_invalid_topic_names(name: str, why: str) -> None:
    with pytest.raises(InvalidParameter, match=why) as info:
        check_topic_name(name)
    assert info.value.code == 29


def test_send_forbidden_topics() -> None:
    for name in ("SCHEDULE_TOPIC_XXXX", "RMQ_SYS_TRANS_HALF_TOPIC", "SELF_TEST_TOPIC", "OFFSET_MOVED_EVENT"):
        with pytest.raises(NoPermission):
            check_send_allowed(name)
    check_send_allowed("RMQ_SYS_TRACE_TOPIC")


def test_auto_create_from_template(tmp_path: Path) -> None:
    tm = _manager(tmp_path)
    changes: list[int] = []
    tm.on_change = lambda: changes.append(1)
    before = tm.data_version.counter
    cfg = tm.create_topic_in_send_message_method("New", "TBW102", "peer", 4, 0)
    assert cfg is not None
    assert (cfg.read_queue_nums, cfg.write_queue_nums, cfg.perm) == (4, 4, PERM_READ | PERM_WRITE)
    assert tm.data_version.counter == before + 1 and changes == [1]
    # Existing topics are returned as they are.
    assert tm.create_topic_in_send_message_method("New", "TBW102", "peer", 1, 0) is cfg
    # More queues than the template has are capped by it.
    big = tm.create_topic_in_send_message_method("Big", "TBW102", "peer", 64, 0)
    assert big is not None and big.write_queue_nums == 8
    # A template without INHERIT or a missing template creates nothing.
    tm.update_topic_config(new_topic_config("NoInherit", 4, 4, PERM_READ | PERM_WRITE))
    assert tm.create_topic_in_send_message_method("X", "NoInherit", "peer", 4, 0) is None
    assert tm.create_topic_in_send_message_method("X", "Missing", "peer", 4, 0) is None
    tm.update_topic_config(new_topic_config("Inherit", 2, 2, PERM_READ | PERM_WRITE | PERM_INHERIT))
    made = tm.create_topic_in_send_message_method("Y", "Inherit", "peer", 4, 1)
    assert made is not None and made.write_queue_nums == 2 and made.topic_sys_flag == 1


def test_send_message_back_topics(tmp_path: Path) -> None:
    tm = _manager(tmp_path)
    cfg = tm.create_topic_in_send_message_back_method("%RETRY%g", 1, PERM_READ | PERM_WRITE)
    assert (cfg.read_queue_nums, cfg.write_queue_nums, cfg.perm) == (1, 1, 6)
    assert tm.create_topic_in_send_message_back_method("%RETRY%g", 5, 2) is cfg


def test_persist_and_load_round_trip(tmp_path: Path) -> None:
    tm = _manager(tmp_path)
    tm.update_topic_config(new_topic_config("Persisted", 3, 5, 6, topic_filter_type=TopicFilterType.MULTI_TAG,
                                           order=True, attributes={"+k": "v"}))
    tm.persist()
    path = tmp_path / "config" / "topics.json"
    doc = orjson.loads(path.read_bytes())
    assert set(doc) >= {"topicConfigTable", "dataVersion"}
    assert doc["topicConfigTable"]["Persisted"]["topicFilterType"] == "MULTI_TAG"
    tm.update_topic_config(new_topic_config("Second", 1, 1, 6))
    tm.persist()
    assert (tmp_path / "config" / "topics.json.bak").exists()

    again = _manager(tmp_path)
    again.load()
    cfg = again.table["Persisted"]
    assert (cfg.read_queue_nums, cfg.write_queue_nums, cfg.order) == (3, 5, True)
    assert cfg.topic_filter_type is TopicFilterType.MULTI_TAG
    assert "Second" in again.table and "TBW102" in again.table
    assert again.data_version.counter == tm.data_version.counter


def test_load_falls_back_to_backup(tmp_path: Path) -> None:
    tm = _manager(tmp_path)
    tm.update_topic_config(new_topic_config("Keep", 1, 1, 6))
    tm.persist()
    tm.persist()  # the backup now holds the same table
    (tmp_path / "config" / "topics.json").write_bytes(b"{not json")
    again = _manager(tmp_path)
    again.load()
    assert "Keep" in again.table


def test_delete_and_order_updates(tmp_path: Path) -> None:
    tm = _manager(tmp_path)
    tm.update_topic_config(new_topic_config("Gone", 1, 1, 6))
    version = tm.data_version.counter
    assert tm.delete_topic_config("Gone") is not None
    assert tm.data_version.counter == version + 1
    assert tm.delete_topic_config("Gone") is None
    tm.update_topic_config(new_topic_config("Ord", 1, 1, 6))
    tm.update_order_topic_config({"Ord": "bk:1", "Unknown": "bk:1"})
    assert tm.table["Ord"].order and tm.is_order_topic("Ord")
    # The name server's table never clears the flag.
    tm.update_order_topic_config({})
    assert tm.table["Ord"].order


def test_serialize_wrapper_is_the_register_body_shape(tmp_path: Path) -> None:
    tm = _manager(tmp_path)
    wrapper = TopicConfigSerializeWrapper.from_json(tm.encode())
    assert "TBW102" in wrapper.topic_config_table
    assert wrapper.data_version == tm.data_version
