"""Config files: RocketMQ .properties (java.util.Properties rules) and TOML."""

from __future__ import annotations

from pathlib import Path

import pytest

from rocketq.config import BrokerConfig, NamesrvConfig, load_configs, parse_properties, read_config_file
from rocketq.errors import ConfigError
from rocketq.store.config import MessageStoreConfig


def _props(text: str) -> dict[str, object]:
    return {s.key: s.value for s in parse_properties(text)}


# ---- .properties --------------------------------------------------------------------------------


def test_separators_comments_and_blank_lines() -> None:
    text = "# comment\n! also a comment\n\n  \t\na=1\nb:2\nc 3\nd = 4\ne\t:\t5\nf\ng=\n"
    assert _props(text) == {"a": "1", "b": "2", "c": "3", "d": "4", "e": "5", "f": "", "g": ""}


def test_continuation_lines_join_without_their_leading_blanks() -> None:
    text = "list=a;\\\n     b;\\\n\tc\nnext=1\n"
    assert _props(text) == {"list": "a;b;c", "next": "1"}


def test_a_comment_marker_inside_a_continued_value_is_kept() -> None:
    assert _props("k=a\\\n#not a comment\n") == {"k": "a#not a comment"}


def test_an_even_number_of_backslashes_does_not_continue() -> None:
    assert _props("path=C:\\\\\nnext=1\n") == {"path": "C:\\", "next": "1"}


def test_escapes() -> None:
    text = r"k\=ey\:x=tab\there\nnl\u0041\u00e9 \\back" + "\n" + r"spaced\ key=v"
    assert _props(text) == {"k=ey:x": "tab\there\nnlAé \\back", "spaced key": "v"}


def test_unescaped_trailing_blanks_are_dropped_escaped_ones_kept() -> None:
    assert _props("listenPort=10911  \t\nname=a\\ \n") == {"listenPort": "10911", "name": "a "}


def test_line_endings_bom_and_duplicates() -> None:
    settings = parse_properties("\ufeffa=1\r\nb=2\rc=3\na=4", "x.conf")
    assert [(s.key, s.value, s.origin) for s in settings] == [
        ("a", "1", "x.conf:1"), ("b", "2", "x.conf:2"), ("c", "3", "x.conf:3"), ("a", "4", "x.conf:4"),
    ]
    assert _props("a=1\na=4") == {"a": "4"}  # later wins, as Properties.load


def test_origin_of_a_continued_entry_is_its_first_line() -> None:
    settings = parse_properties("# c\nk=a\\\n  b\nz=1\n", "f")
    assert [s.origin for s in settings] == ["f:2", "f:4"]


def test_malformed_unicode_escape_names_the_line() -> None:
    with pytest.raises(ConfigError, match=r"malformed \\uxxxx escape \(f:2\)"):
        parse_properties("a=1\nb=\\u12G4\n", "f")


def test_the_stock_rocketmq_broker_conf_loads(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text(
        "brokerClusterName = DefaultCluster\nbrokerName = broker-a\nbrokerId = 0\ndeleteWhen = 04\n"
        "fileReservedTime = 48\nbrokerRole = ASYNC_MASTER\nflushDiskType = ASYNC_FLUSH\n"
    )
    configs = load_configs([BrokerConfig, MessageStoreConfig], file=conf, environ={})
    broker, store = configs[BrokerConfig], configs[MessageStoreConfig]
    assert (broker.broker_cluster_name, broker.broker_name) == ("DefaultCluster", "broker-a")
    assert broker.broker_id == 0
    assert broker.broker_role == "ASYNC_MASTER"
    assert (store.delete_when, store.file_reserved_time, store.flush_disk_type) == ("04", 48, "ASYNC_FLUSH")


def test_latin1_file_is_read_when_not_utf8(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_bytes(b"brokerName=caf\xe9\n")
    assert [s.value for s in read_config_file(conf)] == ["café"]


def test_unreadable_file_is_one_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"cannot read config file .*missing\.conf: No such file"):
        read_config_file(tmp_path / "missing.conf")
    with pytest.raises(ConfigError, match="cannot read config file"):
        read_config_file(tmp_path)  # a directory


# ---- TOML ---------------------------------------------------------------------------------------


def test_toml_flat_keys_and_tables_per_class(tmp_path: Path) -> None:
    conf = tmp_path / "rocketq.toml"
    conf.write_text(
        'brokerName = "b1"\n'
        "listenPort = 10000\n"
        "\n[store]\n"
        'flushDiskType = "SYNC_FLUSH"\n'
        "max_message_size = 1024\n"
        "\n[namesrv]\n"
        "listenPort = 9000\n"
        "order_message_enable = true\n"
        "\n[BrokerConfig]\n"
        "autoCreateTopicEnable = false\n"
    )
    configs = load_configs(
        [BrokerConfig, MessageStoreConfig], secondary=[NamesrvConfig], file=conf, environ={}
    )
    assert configs[BrokerConfig].broker_name == "b1"
    assert configs[BrokerConfig].auto_create_topic_enable is False
    assert configs[MessageStoreConfig].flush_disk_type == "SYNC_FLUSH"
    assert configs[MessageStoreConfig].max_message_size == 1024
    namesrv = configs[NamesrvConfig]
    assert (namesrv.listen_port, namesrv.order_message_enable) == (9000, True)
    assert configs.origin(NamesrvConfig, "listen_port") == f"{conf}:9"


def test_toml_wrong_type_names_key_and_line(tmp_path: Path) -> None:
    conf = tmp_path / "rocketq.toml"
    conf.write_text('brokerName = "b"\n\n[broker]\nbrokerId = "zero"\n')
    expected = rf"bad value for 'brokerId' \({conf}:4\): 'zero' is not an integer"
    with pytest.raises(ConfigError, match=expected):
        load_configs([BrokerConfig], file=conf, environ={})
    conf.write_text("autoCreateTopicEnable = 1\n")
    with pytest.raises(ConfigError, match=r"'autoCreateTopicEnable'.*:1\): 1 is not true or false"):
        load_configs([BrokerConfig], file=conf, environ={})


def test_toml_unknown_section_nested_table_and_syntax_errors(tmp_path: Path) -> None:
    conf = tmp_path / "rocketq.toml"
    conf.write_text("[brokr]\nbrokerId = 1\n")
    with pytest.raises(ConfigError, match=r"unknown config section 'brokr'"):
        load_configs([BrokerConfig], file=conf, environ={})
    conf.write_text("[broker.deep]\nbrokerId = 1\n")
    with pytest.raises(ConfigError, match=r"'deep'.*expected a string, number or boolean"):
        load_configs([BrokerConfig], file=conf, environ={})
    conf.write_text("brokerId = = 1\n")
    with pytest.raises(ConfigError, match=rf"cannot parse {conf}: .*line 1"):
        load_configs([BrokerConfig], file=conf, environ={})
