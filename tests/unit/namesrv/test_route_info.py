"""RouteInfoManager without a server: registration, routes, expiry, channel close, admin ops."""

from __future__ import annotations

import logging

import pytest

from rocketq.codec.bodies import DataVersion, QueueData, TopicConfig, TopicConfigSerializeWrapper
from rocketq.namesrv.route_info import RouteInfoManager


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000

    def __call__(self) -> int:
        return self.now


def wrapper(*configs: TopicConfig, version: DataVersion | None = None) -> TopicConfigSerializeWrapper:
    return TopicConfigSerializeWrapper(
        {c.topic_name: c for c in configs}, version or DataVersion(0, 1_700_000_000_000, 1)
    )


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def rim(clock: Clock) -> RouteInfoManager:
    return RouteInfoManager(broker_channel_expired_time=120_000, clock=clock)


def register(
    rim: RouteInfoManager,
    name: str,
    addr: str,
    *configs: TopicConfig,
    broker_id: int = 0,
    cluster: str = "DefaultCluster",
    channel: object = None,
    version: DataVersion | None = None,
    **kw: object,
):  # type: ignore[no-untyped-def]
    return rim.register_broker(
        cluster,
        addr,
        name,
        broker_id,
        addr.replace(":109", ":119"),
        wrapper(*configs, version=version),
        [],
        channel,
        **kw,  # type: ignore[arg-type]
    )


def test_two_brokers_of_one_cluster_serving_one_topic(rim: RouteInfoManager) -> None:
    register(rim, "broker-a", "127.0.0.1:10911", TopicConfig("T", 4, 4))
    register(rim, "broker-b", "127.0.0.1:10921", TopicConfig("T", 8, 8))
    route = rim.pickup_topic_route_data("T")
    assert route is not None
    assert sorted((q.broker_name, q.read_queue_nums, q.perm) for q in route.queue_datas) == [
        ("broker-a", 4, 6),
        ("broker-b", 8, 6),
    ]
    assert {b.broker_name: b.broker_addrs for b in route.broker_datas} == {
        "broker-a": {0: "127.0.0.1:10911"},
        "broker-b": {0: "127.0.0.1:10921"},
    }
    info = rim.get_all_cluster_info()
    assert info.cluster_addr_table == {"DefaultCluster": ("broker-a", "broker-b")}
    assert rim.pickup_topic_route_data("nope") is None


def test_route_json_is_compact_with_quoted_ids(rim: RouteInfoManager) -> None:
    register(rim, "broker-a", "127.0.0.1:10911", TopicConfig("T", 4, 4))
    raw = rim.pickup_topic_route_data("T").to_json()  # type: ignore[union-attr]
    assert b'"brokerAddrs":{"0":"127.0.0.1:10911"}' in raw
    assert b" " not in raw


def test_new_broker_is_logged_like_rocketmq(rim: RouteInfoManager, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="rocketq.namesrv.route_info"):
        register(rim, "broker-a", "127.0.0.1:10911")
    assert "new broker registered, 127.0.0.1:10911 HAService: 127.0.0.1:11911" in caplog.text


def test_slave_gets_master_addr_and_does_not_touch_topics(rim: RouteInfoManager) -> None:
    master = register(rim, "broker-a", "127.0.0.1:10911", TopicConfig("T", 4, 4))
    assert master.master_addr is None and master.ha_server_addr is None
    slave = register(rim, "broker-a", "127.0.0.1:10931", TopicConfig("T", 1, 1, perm=4), broker_id=1)
    assert slave.master_addr == "127.0.0.1:10911"
    assert slave.ha_server_addr == "127.0.0.1:11911"
    qd = rim.queue_data("T", "broker-a")
    assert qd == QueueData("broker-a", 4, 4, 6, 0)
    route = rim.pickup_topic_route_data("T")
    assert route is not None
    assert route.broker_datas[0].broker_addrs == {0: "127.0.0.1:10911", 1: "127.0.0.1:10931"}


def test_slave_without_live_master_gets_no_master_addr(rim: RouteInfoManager) -> None:
    result = register(rim, "broker-a", "127.0.0.1:10931", TopicConfig("T", 4, 4), broker_id=1)
    assert result.master_addr is None
    assert rim.pickup_topic_route_data("T") is None  # a slave alone never publishes a topic


def test_topic_change_is_applied_only_with_a_new_data_version(rim: RouteInfoManager) -> None:
    v1 = DataVersion(0, 100, 1)
    register(rim, "broker-a", "127.0.0.1:10911", TopicConfig("T", 4, 4), version=v1)
    # Same version: the broker says nothing changed, so a differing body is not re-read.
    register(rim, "broker-a", "127.0.0.1:10911", TopicConfig("T", 8, 8), version=v1)
    assert rim.queue_data("T", "broker-a") == QueueData("broker-a", 4, 4, 6, 0)
    register(rim, "broker-a", "127.0.0.1:10911", TopicConfig("T", 8, 8), version=DataVersion(0, 200, 2))
    assert rim.queue_data("T", "broker-a") == QueueData("broker-a", 8, 8, 6, 0)


def test_deleted_topic_comes_back_on_the_next_register_even_with_same_version(rim: RouteInfoManager) -> None:
    v1 = DataVersion(0, 100, 1)
    register(rim, "broker-a", "127.0.0.1:10911", TopicConfig("T", 4, 4), version=v1)
    rim.delete_topic("T")
    assert rim.pickup_topic_route_data("T") is None
    register(rim, "broker-a", "127.0.0.1:10911", TopicConfig("T", 4, 4), version=v1)
    assert rim.pickup_topic_route_data("T") is not None


def test_unregister_last_address_removes_broker_cluster_and_topics(rim: RouteInfoManager) -> None:
    register(rim, "broker-a", "127.0.0.1:10911", TopicConfig("T", 4, 4), TopicConfig("U", 1, 1))
    register(rim, "broker-b", "127.0.0.1:10921", TopicConfig("T", 4, 4))
    rim.unregister_broker("DefaultCluster", "127.0.0.1:10911", "broker-a", 0)
    route = rim.pickup_topic_route_data("T")
    assert route is not None and [q.broker_name for q in route.queue_datas] == ["broker-b"]
    assert rim.pickup_topic_route_data("U") is None
    assert rim.broker_names("DefaultCluster") == {"broker-b"}
    rim.unregister_broker("DefaultCluster", "127.0.0.1:10921", "broker-b", 0)
    assert rim.get_all_cluster_info().cluster_addr_table == {}
    assert rim.get_all_topic_list().topic_list == ()


def test_unregister_master_keeps_topic_for_remaining_slave(rim: RouteInfoManager) -> None:
    register(rim, "broker-a", "127.0.0.1:10911", TopicConfig("T", 4, 4))
    register(rim, "broker-a", "127.0.0.1:10931", broker_id=1)
    rim.unregister_broker("DefaultCluster", "127.0.0.1:10911", "broker-a", 0)
    route = rim.pickup_topic_route_data("T")
    assert route is not None
    assert route.broker_datas[0].broker_addrs == {1: "127.0.0.1:10931"}
    assert route.queue_datas[0].perm == 6  # not acting-master mode: perms untouched


def test_acting_master_mode(rim: RouteInfoManager) -> None:
    register(rim, "broker-a", "127.0.0.1:10911", TopicConfig("T", 4, 4), enable_acting_master=True)
    register(
        rim, "broker-a", "127.0.0.1:10931", TopicConfig("T", 4, 4), broker_id=1, enable_acting_master=True
    )
    rim.unregister_broker("DefaultCluster", "127.0.0.1:10911", "broker-a", 0)
    assert rim.queue_data("T", "broker-a").perm == 4  # type: ignore[union-attr]
    # The lowest-id slave now registers as the prime slave: it updates topics, read-only.
    register(
        rim,
        "broker-a",
        "127.0.0.1:10931",
        TopicConfig("V", 2, 2),
        broker_id=1,
        enable_acting_master=True,
        version=DataVersion(0, 5, 5),
    )
    assert rim.queue_data("V", "broker-a") == QueueData("broker-a", 2, 2, 4, 0)


def test_promoted_slave_keeps_one_row_per_address(rim: RouteInfoManager) -> None:
    register(rim, "broker-a", "127.0.0.1:10931", broker_id=1)
    register(rim, "broker-a", "127.0.0.1:10931", TopicConfig("T", 4, 4), broker_id=0)
    route = rim.pickup_topic_route_data("T")
    assert route is not None and route.broker_datas[0].broker_addrs == {0: "127.0.0.1:10931"}


def test_older_state_version_cannot_take_over_an_id(rim: RouteInfoManager) -> None:
    register(rim, "broker-a", "127.0.0.1:10911", TopicConfig("T", 4, 4), version=DataVersion(5, 1, 1))
    result = register(
        rim, "broker-a", "127.0.0.1:10999", TopicConfig("T", 4, 4), version=DataVersion(3, 2, 2)
    )
    assert result.master_addr is None
    route = rim.pickup_topic_route_data("T")
    assert route is not None and route.broker_datas[0].broker_addrs == {0: "127.0.0.1:10911"}
    assert [a for (_, a), _ in rim.live_brokers()] == ["127.0.0.1:10911"]


def test_expiry_scan(rim: RouteInfoManager, clock: Clock, caplog: pytest.LogCaptureFixture) -> None:
    register(rim, "broker-a", "127.0.0.1:10911", TopicConfig("T", 4, 4), channel="ch-a")
    register(rim, "broker-b", "127.0.0.1:10921", TopicConfig("T", 4, 4), channel="ch-b", timeout_millis=500)
    clock.now += 400
    assert rim.scan_not_active_broker() == []
    clock.now += 200
    with caplog.at_level(logging.WARNING, logger="rocketq.namesrv.route_info"):
        expired = rim.scan_not_active_broker()
    assert [(e.broker_addr, e.channel, e.timeout_millis) for e in expired] == [
        ("127.0.0.1:10921", "ch-b", 500)
    ]
    assert "The broker channel expired, 127.0.0.1:10921 500ms" in caplog.text
    route = rim.pickup_topic_route_data("T")
    assert route is not None and [b.broker_name for b in route.broker_datas] == ["broker-a"]
    clock.now += 120_000
    assert [e.broker_addr for e in rim.scan_not_active_broker()] == ["127.0.0.1:10911"]
    assert rim.pickup_topic_route_data("T") is None


def test_query_data_version_retouches_the_live_entry(rim: RouteInfoManager, clock: Clock) -> None:
    v = DataVersion(0, 10, 3)
    register(rim, "broker-a", "127.0.0.1:10911", TopicConfig("T", 4, 4), version=v)
    assert not rim.is_broker_topic_config_changed("DefaultCluster", "127.0.0.1:10911", DataVersion(0, 10, 3))
    assert rim.is_broker_topic_config_changed("DefaultCluster", "127.0.0.1:10911", DataVersion(0, 11, 4))
    assert rim.is_broker_topic_config_changed("DefaultCluster", "127.0.0.1:1", v)
    assert rim.query_broker_topic_config("DefaultCluster", "127.0.0.1:10911") == v
    clock.now += 100_000
    rim.update_broker_info_update_timestamp("DefaultCluster", "127.0.0.1:10911")
    clock.now += 100_000
    assert rim.scan_not_active_broker() == []


def test_channel_destroy_removes_every_broker_on_it(rim: RouteInfoManager) -> None:
    channel, other = object(), object()
    register(rim, "broker-a", "127.0.0.1:10911", TopicConfig("T", 4, 4), channel=channel)
    register(rim, "broker-b", "127.0.0.1:10921", TopicConfig("T", 4, 4), channel=other)
    assert rim.on_channel_destroy(object()) == []
    assert rim.on_channel_destroy(channel) == [("DefaultCluster", "127.0.0.1:10911")]
    route = rim.pickup_topic_route_data("T")
    assert route is not None and [b.broker_name for b in route.broker_datas] == ["broker-b"]


def test_reconnected_broker_is_not_dropped_by_its_old_channel(rim: RouteInfoManager) -> None:
    old, new = object(), object()
    register(rim, "broker-a", "127.0.0.1:10911", TopicConfig("T", 4, 4), channel=old)
    register(rim, "broker-a", "127.0.0.1:10911", TopicConfig("T", 4, 4), channel=new)
    assert rim.on_channel_destroy(old) == []
    assert rim.pickup_topic_route_data("T") is not None


def test_write_perm_wipe_and_add(rim: RouteInfoManager) -> None:
    register(rim, "broker-a", "127.0.0.1:10911", TopicConfig("T", 4, 4), TopicConfig("U", 4, 4, perm=7))
    register(rim, "broker-b", "127.0.0.1:10921", TopicConfig("T", 4, 4))
    assert rim.operate_write_perm_of_broker("broker-a", wipe=True) == 2
    assert rim.queue_data("T", "broker-a").perm == 4  # type: ignore[union-attr]
    assert rim.queue_data("U", "broker-a").perm == 5  # type: ignore[union-attr]
    assert rim.queue_data("T", "broker-b").perm == 6  # type: ignore[union-attr]
    assert rim.operate_write_perm_of_broker("broker-a", wipe=False) == 2
    assert rim.queue_data("U", "broker-a").perm == 6  # type: ignore[union-attr]
    assert rim.operate_write_perm_of_broker("nope", wipe=True) == 0


def test_delete_topic_in_one_cluster(rim: RouteInfoManager) -> None:
    register(rim, "broker-a", "127.0.0.1:10911", TopicConfig("T", 4, 4), cluster="c1")
    register(rim, "broker-b", "127.0.0.1:10921", TopicConfig("T", 4, 4), cluster="c2")
    rim.delete_topic("T", "c1")
    route = rim.pickup_topic_route_data("T")
    assert route is not None and [q.broker_name for q in route.queue_datas] == ["broker-b"]
    rim.delete_topic("T", "unknown-cluster")
    assert rim.pickup_topic_route_data("T") is not None
    rim.delete_topic("T", "c2")
    assert rim.pickup_topic_route_data("T") is None


def test_register_topic_is_all_or_nothing(rim: RouteInfoManager) -> None:
    register(rim, "broker-a", "127.0.0.1:10911")
    assert rim.register_topic("X", [QueueData("broker-a", 2, 2, 6, 0), QueueData("ghost", 1, 1, 6, 0)]) == [
        "ghost"
    ]
    assert rim.pickup_topic_route_data("X") is None
    assert rim.register_topic("X", [QueueData("broker-a", 2, 2, 6, 0)]) == []
    route = rim.pickup_topic_route_data("X")
    assert route is not None and route.queue_datas == (QueueData("broker-a", 2, 2, 6, 0),)


def test_topic_lists(rim: RouteInfoManager) -> None:
    register(rim, "broker-a", "127.0.0.1:10911", TopicConfig("T", topic_sys_flag=1), cluster="c1")
    register(rim, "broker-b", "127.0.0.1:10921", TopicConfig("U", topic_sys_flag=2), cluster="c2")
    register(rim, "broker-c", "127.0.0.1:10931", TopicConfig("V", topic_sys_flag=3), cluster="c2")
    assert set(rim.get_all_topic_list().topic_list) == {"T", "U", "V"}
    assert set(rim.get_topics_by_cluster("c2").topic_list) == {"U", "V"}
    assert rim.get_topics_by_cluster("none").topic_list == ()
    system = rim.get_system_topic_list()
    assert set(system.topic_list) == {"c1", "c2", "broker-a", "broker-b", "broker-c"}
    assert system.broker_addr in {"127.0.0.1:10911", "127.0.0.1:10921", "127.0.0.1:10931"}
    assert set(rim.get_unit_topics().topic_list) == {"T", "V"}
    assert set(rim.get_has_unit_sub_topic_list().topic_list) == {"U", "V"}
    assert set(rim.get_has_unit_sub_un_unit_topic_list().topic_list) == {"U"}


def test_epoch_moves_on_every_mutation(rim: RouteInfoManager) -> None:
    seen = [rim.epoch]
    register(rim, "broker-a", "127.0.0.1:10911", TopicConfig("T"))
    seen.append(rim.epoch)
    rim.operate_write_perm_of_broker("broker-a", wipe=True)
    seen.append(rim.epoch)
    rim.delete_topic("T")
    seen.append(rim.epoch)
    rim.unregister_broker("DefaultCluster", "127.0.0.1:10911", "broker-a", 0)
    seen.append(rim.epoch)
    assert seen == sorted(set(seen))


def test_unchanged_re_register_keeps_the_epoch(rim: RouteInfoManager) -> None:
    v = DataVersion(0, 1, 1)
    register(rim, "broker-a", "127.0.0.1:10911", TopicConfig("T"), version=v)
    epoch = rim.epoch
    register(rim, "broker-a", "127.0.0.1:10911", TopicConfig("T"), version=v)
    register(rim, "broker-a", "127.0.0.1:10911", TopicConfig("T"), version=DataVersion(0, 2, 2))
    assert rim.epoch == epoch  # a new version with identical topics changes no route either
    register(rim, "broker-a", "127.0.0.1:10911", TopicConfig("T", 2, 2), version=DataVersion(0, 3, 3))
    assert rim.epoch > epoch
    epoch = rim.epoch
    register(rim, "broker-a", "127.0.0.1:10931", broker_id=1)
    assert rim.epoch > epoch
