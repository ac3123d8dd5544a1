"""rocketq.config.loading: type coercion, routing over several classes, precedence, dumping."""

from __future__ import annotations

import dataclasses
import enum
import logging
from pathlib import Path
from typing import Literal

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from rocketq.config import (
    BrokerConfig,
    NamesrvConfig,
    Setting,
    dump_properties,
    load_configs,
    parse_properties,
)
from rocketq.errors import ConfigError
from rocketq.store.config import MessageStoreConfig

# ---- coercion -----------------------------------------------------------------------------------


class Mode(enum.Enum):
    ASYNC_FLUSH = 0
    SYNC_FLUSH = 1


@dataclasses.dataclass(frozen=True, slots=True)
class Sample:
    count: int = 1
    ratio: float = 0.5
    on: bool = False
    name: str = "x"
    mode: Mode = Mode.ASYNC_FLUSH
    role: Literal["ASYNC_MASTER", "SYNC_MASTER"] = "ASYNC_MASTER"
    level: Literal[1, 2] = 1
    addr: str | None = None
    where: Path = Path("/tmp")


def _one(key: str, value: object) -> Sample:
    return load_configs([Sample], environ={}, settings=[Setting(key, value, "test")])[Sample]


@pytest.mark.parametrize(
    ("key", "raw", "expected"),
    [
        ("count", " +42 ", 42),
        ("count", "-7", -7),
        ("count", 9, 9),
        ("ratio", "1e3", 1000.0),
        ("ratio", 2, 2.0),
        ("on", "TRUE", True),
        ("on", "False", False),
        ("on", True, True),
        ("name", 12, "12"),
        ("mode", "SYNC_FLUSH", Mode.SYNC_FLUSH),
        ("mode", "sync_flush", Mode.SYNC_FLUSH),
        ("role", "sync_master", "SYNC_MASTER"),
        ("level", "2", 2),
        ("addr", "", None),
        ("addr", "a:1;b:2", "a:1;b:2"),
        ("where", "/var/x", Path("/var/x")),
    ],
)
def test_values_are_coerced_by_the_field_annotation(key: str, raw: object, expected: object) -> None:
    assert getattr(_one(key, raw), key) == expected


@pytest.mark.parametrize(
    ("key", "raw", "reason"),
    [
        ("count", "1.5", "not an integer"),
        ("count", "1_000", "not an integer"),
        ("count", True, "not an integer"),
        ("count", "ten", "not an integer"),
        ("ratio", "fast", "not a number"),
        ("on", "yes", "not true or false"),
        ("on", "1", "not true or false"),
        ("mode", "FAST_FLUSH", "ASYNC_FLUSH, SYNC_FLUSH"),
        ("role", "SLAVE", "ASYNC_MASTER, SYNC_MASTER"),
        ("level", "3", "one of 1, 2"),
    ],
)
def test_a_bad_value_names_the_key_the_origin_and_the_reason(key: str, raw: object, reason: str) -> None:
    with pytest.raises(ConfigError) as err:
        _one(key, raw)
    message = str(err.value)
    assert f"'{key}'" in message and "(test)" in message and reason in message


# ---- routing and precedence ---------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class Transport:
    listen_port: int = 10911
    server_worker_threads: int = 8


def test_sources_layer_defaults_baseline_file_env_set_flags(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text("brokerName=from-file\nbrokerId=1\nregionId=file\nregisterNameServerPeriod=11000\n")
    env = {"ROCKETQ_BROKER_ID": "2", "ROCKETQ_REGION_ID": "env", "ROCKETQ_TRACE_ON": "false"}
    configs = load_configs(
        [BrokerConfig],
        file=conf,
        environ=env,
        overrides=["regionId=set", "defaultTopicQueueNums=4"],
        settings=[Setting("defaultTopicQueueNums", 5, "--flag", BrokerConfig)],
        baseline={BrokerConfig: {"broker_name": "base", "broker_cluster_name": "BaseCluster"}},
    )
    b = configs[BrokerConfig]
    assert b.broker_cluster_name == "BaseCluster"  # baseline over the default
    assert b.broker_name == "from-file"  # file over baseline
    assert b.register_name_server_period == 11000
    assert b.broker_id == 2  # env over file
    assert b.trace_on is False
    assert b.region_id == "set"  # --set over env and file
    assert b.default_topic_queue_nums == 5  # dedicated flags last
    assert configs.origin(BrokerConfig, "broker_name") == f"{conf}:1"
    assert configs.origin(BrokerConfig, "broker_id") == "env ROCKETQ_BROKER_ID"
    assert configs.origin(BrokerConfig, "broker_cluster_name") is None
    assert configs.origin(BrokerConfig, "long_polling_enable") is None


def test_a_flat_key_goes_to_every_primary_class_that_has_it() -> None:
    configs = load_configs([NamesrvConfig, Transport], environ={}, overrides=["listenPort=9999"])
    assert configs[NamesrvConfig].listen_port == 9999
    assert configs[Transport].listen_port == 9999


def test_secondary_classes_only_take_keys_no_primary_class_has() -> None:
    configs = load_configs(
        [BrokerConfig, Transport],
        secondary=[NamesrvConfig],
        environ={},
        overrides=["listenPort=10000", "orderMessageEnable=true"],
    )
    assert configs[Transport].listen_port == 10000
    assert configs[NamesrvConfig].listen_port == 9876
    assert configs[NamesrvConfig].order_message_enable is True


@pytest.mark.parametrize(
    "spelling", ["namesrv.listenPort", "NamesrvConfig.listen_port", "NAMESRV.LISTEN_PORT"]
)
def test_a_section_prefix_addresses_one_class(spelling: str) -> None:
    configs = load_configs([Transport], secondary=[NamesrvConfig], environ={}, overrides=[f"{spelling}=9877"])
    assert configs[NamesrvConfig].listen_port == 9877
    assert configs[Transport].listen_port == 10911


def test_unknown_key_and_unknown_section_are_errors_with_a_suggestion() -> None:
    expected = r"unknown config key 'brokerNmae' \(--set brokerNmae\); did you mean 'brokerName'"
    with pytest.raises(ConfigError, match=expected):
        load_configs([BrokerConfig], environ={}, overrides=["brokerNmae=a"])
    with pytest.raises(ConfigError, match="unknown config section 'nosuch'"):
        load_configs([BrokerConfig], environ={}, overrides=["nosuch.brokerName=a"])
    with pytest.raises(ConfigError, match="--set expects KEY=VALUE"):
        load_configs([BrokerConfig], environ={}, overrides=["brokerName"])


def test_unknown_key_in_a_file_names_file_and_line(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text("# comment\nbrokerName=a\n\nflushDiskTyp=SYNC_FLUSH\n")
    with pytest.raises(ConfigError, match=rf"'flushDiskTyp' \({conf}:4\); did you mean 'flushDiskType'"):
        load_configs([BrokerConfig, MessageStoreConfig], file=conf, environ={})


def test_validation_in_the_class_reports_the_origin_of_the_value(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text("brokerPermission=8\n")
    with pytest.raises(ConfigError, match=rf"'brokerPermission'.*\({conf}:1\)"):
        load_configs([BrokerConfig], file=conf, environ={})
    with pytest.raises(ConfigError, match=r"flushDiskType.*\(--set flushDiskType\)"):
        load_configs([MessageStoreConfig], environ={}, overrides=["flushDiskType=FAST"])


def test_rocketmq_environment_variables_fill_fields_and_ours_win() -> None:
    env = {"NAMESRV_ADDR": "a:9876", "ROCKETMQ_HOME": "/opt/rocketmq"}
    configs = load_configs([BrokerConfig], secondary=[NamesrvConfig], environ=env)
    assert configs[BrokerConfig].namesrv_addr == "a:9876"
    assert configs[NamesrvConfig].rocketmq_home == "/opt/rocketmq"
    env["ROCKETQ_NAMESRV_ADDR"] = "b:9876"
    assert load_configs([BrokerConfig], environ=env)[BrokerConfig].namesrv_addr == "b:9876"
    # NAMESRV_ADDR is RocketMQ's variable, not addressed to us: no class with the field, no error.
    assert load_configs([NamesrvConfig], environ=env)[NamesrvConfig].listen_port == 9876


def test_env_keys_of_another_role_are_tolerated_typos_are_not(caplog: pytest.LogCaptureFixture) -> None:
    env = {"ROCKETQ_ORDER_MESSAGE_ENABLE": "true"}
    with caplog.at_level(logging.WARNING, logger="rocketq.config"):
        load_configs([BrokerConfig], environ=env, env_tolerated=[NamesrvConfig])
    assert caplog.text == ""  # a name server key in the broker's environment: not our business
    with pytest.raises(ConfigError, match="did you mean ROCKETQ_FLUSH_DISK_TYPE"):
        load_configs([MessageStoreConfig], environ={"ROCKETQ_FLUSH_DISK_TIPE": "SYNC_FLUSH"})
    # The environment is shared with other tools: a variable resembling no key is only warned about.
    with caplog.at_level(logging.WARNING, logger="rocketq.config"):
        configs = load_configs([BrokerConfig], environ={"ROCKETQ_PROFILE": "on"})
    assert "ignoring ROCKETQ_PROFILE" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="rocketq.config"):
        load_configs([BrokerConfig], environ={"ROCKETQ_NO_UVLOOP": "1", "ROCKETQ_COMMAND": "rocketq"})
    assert caplog.text == ""  # variables rocketq reads for other purposes
    assert configs[BrokerConfig] == BrokerConfig(broker_name=configs[BrokerConfig].broker_name)


def test_baseline_values_are_coerced_like_any_other() -> None:
    configs = load_configs([Sample], environ={}, baseline={Sample: {"where": "/data", "count": "3"}})
    assert configs[Sample].where == Path("/data") and configs[Sample].count == 3


# ---- dumping ------------------------------------------------------------------------------------


def test_dump_properties_uses_rocketmq_keys_and_java_value_spelling() -> None:
    text = dump_properties([BrokerConfig(broker_name="b1", namesrv_addr=None), Sample(mode=Mode.SYNC_FLUSH)])
    lines = text.splitlines()
    assert "brokerName=b1" in lines and "brokerIP1=127.0.0.1" in lines
    assert "autoCreateTopicEnable=true" in lines and "traceTopicEnable=false" in lines
    assert "mode=SYNC_FLUSH" in lines
    assert not any(line.startswith("namesrvAddr=") for line in lines)  # None is left out, as in RocketMQ
    assert text.endswith("\n")


def test_a_key_shared_by_two_objects_is_dumped_once_from_the_first() -> None:
    text = dump_properties([Transport(listen_port=1), NamesrvConfig(listen_port=2)])
    assert [line for line in text.splitlines() if line.startswith("listenPort=")] == ["listenPort=1"]


@given(st.text(alphabet=st.characters(blacklist_categories=["Cs"]), max_size=40))
@example("a  ")
@example(" \f lead and trail \t\f ")
@example("C:\\data\\")
@example("=:#!\\u0041\n\r")
def test_dumped_values_parse_back_unchanged(value: str) -> None:
    text = dump_properties([Sample(name=value)])
    parsed = {s.key: s.value for s in parse_properties(text)}
    assert parsed["name"] == value


def test_dump_then_load_rebuilds_equal_configs() -> None:
    original = [BrokerConfig(broker_name="x\\y z", region_id=" lead", namesrv_addr="a:1;b:2"),
                MessageStoreConfig(flush_disk_type="SYNC_FLUSH", store_path_root_dir="/d/store")]
    text = dump_properties(original)
    reloaded = load_configs([BrokerConfig, MessageStoreConfig], environ={},
                            settings=parse_properties(text, "dump"))
    assert reloaded[BrokerConfig] == original[0]
    assert reloaded[MessageStoreConfig] == original[1]


# ---- the config classes -------------------------------------------------------------------------


def test_rocketmq_defaults() -> None:
    n = NamesrvConfig()
    assert (n.listen_port, n.scan_not_active_broker_interval) == (9876, 10_000)
    assert n.broker_channel_expired_time == 120_000
    assert n.enable_all_topic_list and not n.order_message_enable
    assert n.kv_config_path.endswith("namesrv/kvConfig.json")
    b = BrokerConfig()
    assert b.broker_name  # the host name, as RocketMQ
    assert (b.broker_cluster_name, b.broker_id, b.broker_ip1) == ("DefaultCluster", 0, "127.0.0.1")
    assert (b.default_topic_queue_nums, b.broker_permission, b.register_name_server_period) == (8, 6, 30_000)
    assert b.auto_create_topic_enable and b.auto_create_subscription_group and b.long_polling_enable
    assert (b.short_polling_time_mills, b.flush_consumer_offset_interval) == (1000, 5000)
    assert (b.region_id, b.default_query_max_num, b.channel_expired_timeout) == ("DefaultRegion", 32, 120_000)


def test_register_period_is_clamped_as_rocketmq_does() -> None:
    assert BrokerConfig(register_name_server_period=1000).register_period_ms == 10_000
    assert BrokerConfig(register_name_server_period=45_000).register_period_ms == 45_000
    assert BrokerConfig(register_name_server_period=600_000).register_period_ms == 60_000


def test_namesrv_addr_list_splits_on_semicolons() -> None:
    assert BrokerConfig(namesrv_addr=" a:1; b:2;").namesrv_addr_list == ("a:1", "b:2")
    assert BrokerConfig().namesrv_addr_list == ()


@pytest.mark.parametrize(
    ("cls", "kwargs", "key"),
    [
        (NamesrvConfig, {"listen_port": 70000}, "listenPort"),
        (NamesrvConfig, {"scan_not_active_broker_interval": 0}, "scanNotActiveBrokerInterval"),
        (BrokerConfig, {"broker_id": -1}, "brokerId"),
        (BrokerConfig, {"broker_name": ""}, "brokerName"),
        (BrokerConfig, {"broker_role": "SLAVE"}, "brokerId"),  # a slave needs brokerId > 0
        (BrokerConfig, {"default_topic_queue_nums": 0}, "defaultTopicQueueNums"),
    ],
)
def test_invalid_values_are_refused_naming_the_key(cls: type, kwargs: dict[str, object], key: str) -> None:
    with pytest.raises(ConfigError, match=f"'{key}'"):
        cls(**kwargs)


def test_configs_are_frozen_values() -> None:
    b = BrokerConfig()
    with pytest.raises(dataclasses.FrozenInstanceError):
        b.broker_id = 3  # type: ignore[misc]
    assert dataclasses.replace(b, broker_id=3).broker_id == 3
