"""Runtime config updates (UPDATE_BROKER_CONFIG / UPDATE_NAMESRV_CONFIG): only runtime-updatable keys,
never a path or command, all or nothing, through one listener.

CVE-2023-33246: rocketmqHome / filterServerNums through UPDATE_BROKER_CONFIG reached a shell command.
CVE-2023-37582: configStorePath / kvConfigPath through UPDATE_NAMESRV_CONFIG gave arbitrary file writes.
"""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketq.codec.codes import ResponseCode
from rocketq.config import (
    BrokerConfig,
    ConfigChange,
    NamesrvConfig,
    RuntimeConfig,
    camel_to_snake,
    check_updatable,
    parse_properties,
    rocketmq_key,
    update_configs,
)
from rocketq.errors import ConfigError, RestartRequired
from rocketq.remoting.config import RemotingServerConfig
from rocketq.store.config import MessageStoreConfig

FORBIDDEN = [
    "rocketmqHome", "configStorePath", "kvConfigPath", "storePathRootDir", "storePathCommitLog",
    "filterServerNums", "brokerConfigPath", "configBlackList", "messageStorePlugIn",
    "storePathConsumeQueue", "storePathIndex", "storePathEpochFile", "timerStorePath",
]
BROKER_SET = (BrokerConfig, MessageStoreConfig)


def _path_like_fields() -> list[tuple[type, str]]:
    out = []
    for cls in (NamesrvConfig, BrokerConfig, MessageStoreConfig):
        for f in dataclasses.fields(cls):
            key = rocketmq_key(cls, f.name)
            low = key.lower()
            if "path" in low or low.endswith(("dir", "home", "file")):
                out.append((cls, key))
    return out


@pytest.mark.parametrize("key", FORBIDDEN)
def test_path_and_command_keys_are_refused_in_every_spelling(key: str) -> None:
    snake = camel_to_snake(key)
    spellings = (key, snake, snake.upper(), key.lower(), key.upper(), f"namesrv.{key}", f"broker.{snake}")
    for spelling in spellings:
        with pytest.raises(ConfigError, match="names a path or command"):
            check_updatable(spelling, BROKER_SET)
        with pytest.raises(ConfigError, match="names a path or command"):
            check_updatable(spelling, (NamesrvConfig,))


def test_every_path_field_of_every_config_class_is_refused() -> None:
    fields = _path_like_fields()
    assert ("NamesrvConfig", "kvConfigPath") in [(c.__name__, k) for c, k in fields]
    for cls, key in fields:
        with pytest.raises(ConfigError, match="names a path or command"):
            check_updatable(key, (cls,))


_case = st.sampled_from(FORBIDDEN).flatmap(
    lambda key: st.lists(st.booleans(), min_size=len(key), max_size=len(key)).map(
        lambda flips: "".join(c.upper() if f else c.lower() for c, f in zip(key, flips, strict=True))
    )
)


@given(_case, st.sampled_from(["", "_", "-", " "]), st.integers(min_value=1, max_value=8))
def test_no_respelling_of_a_forbidden_key_gets_through(key: str, sep: str, at: int) -> None:
    spelled = key[:at] + sep + key[at:]
    with pytest.raises(ConfigError):
        check_updatable(spelled, BROKER_SET)


def test_unknown_keys_are_refused_and_runtime_keys_pass() -> None:
    with pytest.raises(ConfigError, match="unknown config key 'nosuchKey'"):
        check_updatable("nosuchKey", BROKER_SET)
    for key in ("fileReservedTime", "brokerPermission", "deleteWhen", "maxMessageSize", "broker.traceOn"):
        check_updatable(key, BROKER_SET)
    check_updatable("orderMessageEnable", (NamesrvConfig,))


@pytest.mark.parametrize(
    ("key", "why"),
    [
        ("flushDiskType", "flush service"),  # the group-commit service is chosen once at start
        ("mappedFileSizeCommitLog", "size of files already on disk"),
        ("brokerName", "identity"),
        ("defaultTopicQueueNums", "template topic"),
        ("messageDelayLevel", "delay levels"),
        ("listenPort", "binds"),
    ],
)
def test_restart_required_keys_are_refused_with_the_reason(key: str, why: str) -> None:
    with pytest.raises(RestartRequired, match="is restart-required") as err:
        check_updatable(key, (*BROKER_SET, RemotingServerConfig))
    assert err.value.key == key and why in err.value.reason and "restart" in err.value.reason
    assert err.value.code == ResponseCode.NO_PERMISSION


def test_keys_rocketq_does_not_honour_are_refused_as_such() -> None:
    with pytest.raises(RestartRequired, match="not honoured by rocketq yet"):
        check_updatable("forceRegister", BROKER_SET)


def test_update_configs_applies_typed_values_and_returns_new_objects() -> None:
    broker, store = BrokerConfig(broker_name="b"), MessageStoreConfig(store_path_root_dir="/data/store")
    body = "brokerPermission=4\nfileReservedTime=24\nlongPollingEnable=false\n"
    updates = {s.key: str(s.value) for s in parse_properties(body)}
    new_broker, new_store = update_configs([broker, store], updates, origin="UPDATE_BROKER_CONFIG")
    assert (new_broker.broker_permission, new_broker.long_polling_enable) == (4, False)
    assert new_store.file_reserved_time == 24
    assert broker.broker_permission == 6 and store.file_reserved_time == 72  # originals untouched


def test_a_runtime_change_goes_through_the_one_listener_before_it_becomes_current() -> None:
    seen: list[ConfigChange] = []
    rc = RuntimeConfig([BrokerConfig(broker_name="b"), MessageStoreConfig()], seen.append)
    change = rc.update({"traceOn": "false", "maxMessageSize": "1024"}, origin="test")
    assert seen == [change] and change.origin == "test"
    assert change.touches(BrokerConfig, "trace_on") and not change.touches(BrokerConfig, "region_id")
    assert change.touches(MessageStoreConfig) and change.new(MessageStoreConfig).max_message_size == 1024
    assert rc.get(BrokerConfig).trace_on is False

    def refuse(change: ConfigChange) -> None:
        raise RuntimeError("listener failed")

    rc = RuntimeConfig([BrokerConfig(broker_name="b")], refuse)
    with pytest.raises(RuntimeError):
        rc.update({"traceOn": "false"})
    assert rc.get(BrokerConfig).trace_on is True  # the old objects stay current
    with pytest.raises(RestartRequired):
        RuntimeConfig([MessageStoreConfig()], seen.append).update({"flushDiskType": "SYNC_FLUSH"})
    assert len(seen) == 1


def test_update_is_all_or_nothing() -> None:
    broker = BrokerConfig(broker_name="b")
    for bad in ({"brokerPermission": "4", "rocketmqHome": "/tmp/x"},
                {"brokerPermission": "4", "defaultQueryMaxNum": "one"},
                {"brokerPermission": "4", "noSuchKey": "1"},
                {"brokerPermission": "9"}):
        with pytest.raises(ConfigError):
            update_configs([broker], bad)
    assert broker.broker_permission == 6


@given(
    st.dictionaries(
        st.sampled_from([*FORBIDDEN, "brokerPermission", "kv_config_path", "STORE_PATH_ROOT_DIR"]),
        st.text(max_size=20),
        max_size=4,
    )
)
def test_paths_never_change_through_update_configs(updates: dict[str, str]) -> None:
    namesrv = NamesrvConfig(kv_config_path="/safe/kv.json", config_store_path="/safe/ns.properties")
    store = MessageStoreConfig(store_path_root_dir="/safe/store")
    try:
        new_namesrv, new_store = update_configs([namesrv, store], updates)
    except ConfigError:
        return
    assert new_namesrv.kv_config_path == "/safe/kv.json"
    assert new_namesrv.config_store_path == "/safe/ns.properties"
    assert (new_namesrv.rocketmq_home, new_store.store_path_root_dir) == ("", "/safe/store")
