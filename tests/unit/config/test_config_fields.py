"""rocketq.config.fields: every field of every config class is declared once, with its default and
whether it may change at runtime; keys rocketq does not honour are marked and shown as such."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import pytest

from rocketq.broker.config import BrokerConfig
from rocketq.broker.java_config import JavaOnlyConfig
from rocketq.config import Update, config_fields, dump_properties, parse_properties
from rocketq.config.runtime import names_path_or_command
from rocketq.namesrv.config import NamesrvConfig
from rocketq.remoting.config import RemotingClientConfig, RemotingServerConfig
from rocketq.store.config import MessageStoreConfig

CLASSES = [NamesrvConfig, BrokerConfig, MessageStoreConfig, RemotingServerConfig, RemotingClientConfig,
           JavaOnlyConfig]

# The BrokerConfig fields no rocketq code reads: a stock broker.conf sets them, rocketq ignores them.
BROKER_NOT_HONOURED = {
    "force_register",
}


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_every_field_declares_when_it_takes_effect(cls: type) -> None:
    fields = config_fields(cls)
    assert set(fields) == {f.name for f in dataclasses.fields(cls)}
    undeclared = [f.key for f in fields.values() if not f.declared]
    assert not undeclared, f"{cls.__name__}: declare when these take effect: {undeclared}"


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_config_classes_are_frozen(cls: type) -> None:
    obj = cls()
    name = dataclasses.fields(cls)[0].name
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(obj, name, getattr(obj, name))


def test_the_broker_fields_rocketq_does_not_read_are_marked_not_honoured() -> None:
    marked = {f.name for f in config_fields(BrokerConfig).values() if not f.honoured}
    assert marked == BROKER_NOT_HONOURED
    assert all(config_fields(BrokerConfig)[n].why for n in marked)


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_no_path_or_command_key_is_declared_runtime_updatable(cls: type) -> None:
    runtime = [f.key for f in config_fields(cls).values() if f.update is Update.RUNTIME]
    assert not [key for key in runtime if names_path_or_command(key)]


def test_transport_keys_are_all_restart_required() -> None:
    for cls in (RemotingServerConfig, RemotingClientConfig):
        assert {f.update for f in config_fields(cls).values()} == {Update.RESTART}


def test_flush_disk_type_is_restart_required() -> None:
    # The flush service (GroupCommitService or FlushRealTimeService) is chosen once at start.
    assert config_fields(MessageStoreConfig)["flush_disk_type"].update is Update.RESTART


def test_annotated_dump_comments_the_keys_not_honoured_and_still_parses_back() -> None:
    broker = BrokerConfig(broker_name="b")
    text = dump_properties([broker], annotate=True)
    lines = text.splitlines()
    i = lines.index("forceRegister=true")
    assert lines[i - 1].startswith("# forceRegister: not honoured by rocketq yet (")
    assert not lines[lines.index("brokerName=b") - 1].startswith("# brokerName")
    assert {s.key: s.value for s in parse_properties(text)} == {
        s.key: s.value for s in parse_properties(dump_properties([broker]))
    }


def test_the_old_import_path_still_gives_the_layers_classes_without_importing_them_eagerly() -> None:
    code = (
        "import sys, rocketq.config\n"
        "assert not any(m.split('.')[1] in ('broker', 'namesrv', 'store', 'remoting')"
        " for m in sys.modules if m.startswith('rocketq.')), sorted(sys.modules)\n"
        "from rocketq.config import BrokerConfig, NamesrvConfig\n"
        "print(BrokerConfig.__module__, NamesrvConfig.__module__)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["rocketq.broker.config", "rocketq.namesrv.config"]
