"""SubscriptionGroupManager: defaults, auto-create, persistence."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from types import SimpleNamespace

import orjson

from rocketq.broker.subscription_manager import SubscriptionGroupManager
from rocketq.codec.bodies import SubscriptionGroupConfig


def _mgr(root: Path, auto: bool = True) -> SubscriptionGroupManager:
    ctl = SimpleNamespace(store_config=SimpleNamespace(store_path_root_dir=str(root)),
                          broker_config=SimpleNamespace(auto_create_subscription_group=auto))
    return SubscriptionGroupManager(ctl)  # type: ignore[arg-type]


def test_auto_create_with_rocketmq_defaults(tmp_path: Path) -> None:
    m = _mgr(tmp_path)
    cfg = m.find_subscription_group_config("g1")
    assert cfg is not None
    assert cfg.consume_enable and cfg.consume_from_min_enable and cfg.consume_broadcast_enable
    assert (cfg.retry_queue_nums, cfg.retry_max_times, cfg.broker_id) == (1, 16, 0)
    assert cfg.which_broker_when_consume_slowly == 1 and cfg.notify_consumer_ids_changed_enable
    assert m.find_subscription_group_config("g1") is cfg
    # Created outside a loop: written at once.
    doc = orjson.loads((tmp_path / "config" / "subscriptionGroup.json").read_bytes())
    assert doc["subscriptionGroupTable"]["g1"]["groupName"] == "g1"
    assert doc["dataVersion"]["counter"] >= 1


def test_no_auto_create(tmp_path: Path) -> None:
    m = _mgr(tmp_path, auto=False)
    assert m.find_subscription_group_config("g1") is None
    assert m.find_subscription_group_config("CID_RMQ_SYS_X") is not None  # system groups always
    assert m.find_subscription_group_config("TOOLS_CONSUMER") is not None


def test_update_delete_and_reload(tmp_path: Path) -> None:
    m = _mgr(tmp_path)
    cfg = SubscriptionGroupConfig(group_name="g2", consume_enable=False, retry_max_times=3)
    m.update_subscription_group_config(cfg)
    m.find_subscription_group_config("g3")
    m2 = _mgr(tmp_path, auto=False)
    assert m2.load()
    loaded = m2.find_subscription_group_config("g2")
    assert loaded is not None and not loaded.consume_enable and loaded.retry_max_times == 3
    assert m2.find_subscription_group_config("g3") is not None
    assert m2.data_version.counter == m.data_version.counter
    assert m2.delete_subscription_group_config("g3") is not None
    assert m2.delete_subscription_group_config("nope") is None
    m3 = _mgr(tmp_path, auto=False)
    m3.load()
    assert m3.find_subscription_group_config("g3") is None


async def test_changes_on_the_loop_are_written_in_background(tmp_path: Path) -> None:
    m = _mgr(tmp_path)
    for i in range(20):
        m.find_subscription_group_config(f"g{i}")
    await m.flush()
    doc = orjson.loads((tmp_path / "config" / "subscriptionGroup.json").read_bytes())
    assert {f"g{i}" for i in range(20)} <= set(doc["subscriptionGroupTable"])


def test_load_java_written_file(tmp_path: Path) -> None:
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "subscriptionGroup.json").write_text("""{
	"dataVersion":{"counter":3,"stateVersion":0,"timestamp":1700000000000},
	"subscriptionGroupTable":{
		"please_rename_unique_group_name_4":{
			"brokerId":0,"consumeBroadcastEnable":true,"consumeEnable":false,"consumeFromMinEnable":true,
			"consumeMessageOrderly":false,"consumeTimeoutMinute":15,"groupName":"please_rename_unique_group_name_4",
			"groupRetryPolicy":{"type":"CUSTOMIZED"},"groupSysFlag":0,"notifyConsumerIdsChangedEnable":true,
			"retryMaxTimes":16,"retryQueueNums":1,"whichBrokerWhenConsumeSlowly":1
		}
	}
}""")
    m = _mgr(tmp_path, auto=False)
    assert m.load()
    cfg = m.find_subscription_group_config("please_rename_unique_group_name_4")
    assert cfg is not None and cfg.consume_enable is False
    assert dataclasses.replace(cfg, consume_enable=True).consume_enable


def test_corrupt_file_falls_back_to_backup(tmp_path: Path) -> None:
    m = _mgr(tmp_path)
    m.find_subscription_group_config("a")
    m.find_subscription_group_config("b")  # the file with only "a" is now the .bak
    (tmp_path / "config" / "subscriptionGroup.json").write_text("{broken")
    m2 = _mgr(tmp_path, auto=False)
    assert m2.load()
    assert m2.contains("a")
