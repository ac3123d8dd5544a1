"""docs/configuration.md documents every key of every config class the servers load, and says
truly whether each one can change at runtime."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from rocketq.broker.config import BrokerConfig
from rocketq.broker.java_config import JavaOnlyConfig
from rocketq.config import ConfigField, Update, config_fields, rocketmq_key
from rocketq.namesrv.config import NamesrvConfig
from rocketq.remoting.config import RemotingServerConfig
from rocketq.store.config import MessageStoreConfig

DOC = Path(__file__).resolve().parents[3] / "docs" / "configuration.md"
CLASSES = [NamesrvConfig, BrokerConfig, MessageStoreConfig, RemotingServerConfig, JavaOnlyConfig]
# The reference tables: | `key` | type | default | update | meaning |
ROW = re.compile(r"^\| `([A-Za-z0-9]+(?:\.[A-Za-z0-9]+)*)` \| [^|]+ \| [^|]+ \| ([a-z ]+) \|", re.MULTILINE)


def _documented_keys() -> set[str]:
    return set(re.findall(r"^\| `([A-Za-z0-9]+(?:\.[A-Za-z0-9]+)*)` \|", DOC.read_text(), flags=re.MULTILINE))


def _section(cls: type) -> str:
    """The reference table of one class: from its heading to the next heading."""
    text = DOC.read_text()
    start = text.index(f"(`{cls.__name__}`")
    end = text.find("\n#", start)
    return text[start:end if end >= 0 else len(text)]


def _update_word(f: ConfigField) -> str:
    if not f.honoured:
        return "not honoured"
    return "runtime" if f.update is Update.RUNTIME else "restart"


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_every_key_has_a_reference_row(cls: type) -> None:
    missing = [rocketmq_key(cls, f.name) for f in dataclasses.fields(cls)]
    missing = [key for key in missing if key not in _documented_keys()]
    assert not missing, f"docs/configuration.md lacks rows for {cls.__name__}: {missing}"


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_the_update_column_matches_the_declaration(cls: type) -> None:
    rows = dict(ROW.findall(_section(cls)))
    wrong = {f.key: (rows.get(f.key), _update_word(f))
             for f in config_fields(cls).values() if rows.get(f.key) != _update_word(f)}
    assert not wrong, f"{cls.__name__}: documented vs declared {wrong}"


def test_no_row_documents_a_key_that_does_not_exist() -> None:
    known = {rocketmq_key(cls, f.name) for cls in CLASSES for f in dataclasses.fields(cls)}
    # The module table names modules (`rocketq.broker.config`), not keys.
    modules = {k for k in _documented_keys() if k.startswith("rocketq.")}
    stale = _documented_keys() - known - modules - {"namesrv", "broker", "store", "remoting", "messagestore"}
    assert not stale, f"docs/configuration.md documents unknown keys: {sorted(stale)}"
