"""rocketq.config.keys: RocketMQ's camelCase keys and snake_case field names, both ways."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from rocketq.broker.java_config import JavaOnlyConfig
from rocketq.config import (
    BrokerConfig,
    NamesrvConfig,
    camel_to_snake,
    rocketmq_key,
    snake_to_camel,
)
from rocketq.config.loading import lookup
from rocketq.store.config import MessageStoreConfig

# Real RocketMQ keys (as the Java setters spell them) and the field names they must map to.
REAL_KEYS = {
    "brokerIP1": "broker_ip1",
    "brokerIP2": "broker_ip2",
    "checkCRCOnRecover": "check_crc_on_recover",
    "enableDLegerCommitLog": "enable_d_leger_commit_log",
    "dLegerSelfId": "d_leger_self_id",
    "mappedFileSizeCommitLog": "mapped_file_size_commit_log",
    "flushDiskType": "flush_disk_type",
    "useTLS": "use_tls",
    "vipChannelEnabled": "vip_channel_enabled",
    "transactionTimeOut": "transaction_time_out",
    "osPageCacheBusyTimeOutMills": "os_page_cache_busy_time_out_mills",
    "rocketmqHome": "rocketmq_home",
    "kvConfigPath": "kv_config_path",
    "namesrvAddr": "namesrv_addr",
    "haListenPort": "ha_listen_port",
    "serverChannelMaxIdleTimeSeconds": "server_channel_max_idle_time_seconds",
    "maxTransferBytesOnMessageInMemory": "max_transfer_bytes_on_message_in_memory",
    "listenPort": "listen_port",
}


def _config_classes() -> list[type]:
    classes: list[type] = [NamesrvConfig, BrokerConfig, MessageStoreConfig, JavaOnlyConfig]
    try:
        from rocketq.remoting.config import RemotingClientConfig, RemotingServerConfig
    except ImportError:
        return classes
    return [*classes, RemotingServerConfig, RemotingClientConfig]


# ---- key spelling -------------------------------------------------------------------------------


@pytest.mark.parametrize(("key", "name"), REAL_KEYS.items())
def test_real_rocketmq_keys_convert_exactly_both_ways(key: str, name: str) -> None:
    assert camel_to_snake(key) == name
    assert snake_to_camel(name) == key


@pytest.mark.parametrize("cls", _config_classes(), ids=lambda c: c.__name__)
def test_every_config_field_round_trips_through_its_rocketmq_key(cls: type) -> None:
    for f in dataclasses.fields(cls):
        key = rocketmq_key(cls, f.name)
        if key.startswith("tls."):  # TlsSystemConfig's dotted names, declared with key=
            assert lookup(cls, key) is not None and lookup(cls, key).name == f.name  # type: ignore[union-attr]
            assert lookup(cls, snake_to_camel(f.name)).name == f.name  # type: ignore[union-attr]
            continue
        assert camel_to_snake(key) == f.name, f"{cls.__name__}.{f.name} <-> {key}"
        assert key[:1].islower() and "_" not in key


def test_upper_snake_and_snake_spellings_normalise_to_the_field_name() -> None:
    assert camel_to_snake("FLUSH_DISK_TYPE") == "flush_disk_type"
    assert camel_to_snake("BROKER_IP1") == "broker_ip1"
    assert camel_to_snake("flush_disk_type") == "flush_disk_type"


_ACRONYM_SEGMENTS = {"ip", "crc", "tls", "vip"}
_segment = st.from_regex(r"[a-z]{2,7}[0-9]{0,2}", fullmatch=True)


@given(st.from_regex(r"[a-z]{1,7}", fullmatch=True), st.lists(_segment, min_size=0, max_size=5))
def test_snake_to_camel_to_snake_is_identity(first: str, rest: list[str]) -> None:
    # Two acronyms in a row ("tls_ip" -> "TLSIP") cannot be split again: no RocketMQ key has that.
    words = [first, *rest]
    bare = [w.rstrip("0123456789") for w in words]
    assume(not any(a in _ACRONYM_SEGMENTS and b in _ACRONYM_SEGMENTS and a == w
                   for a, b, w in zip(bare, bare[1:], words, strict=False)))
    name = "_".join(words)
    assert camel_to_snake(snake_to_camel(name)) == name
