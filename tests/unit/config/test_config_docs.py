"""docs/configuration.md documents every key of every config class the servers load."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from rocketq.config import BrokerConfig, NamesrvConfig, rocketmq_key
from rocketq.remoting.config import RemotingServerConfig
from rocketq.store.config import MessageStoreConfig

DOC = Path(__file__).resolve().parents[3] / "docs" / "configuration.md"


def _documented_keys() -> set[str]:
    return set(re.findall(r"^\| `([A-Za-z0-9]+)` \|", DOC.read_text(), flags=re.MULTILINE))


@pytest.mark.parametrize(
    "cls", [NamesrvConfig, BrokerConfig, MessageStoreConfig, RemotingServerConfig], ids=lambda c: c.__name__
)
def test_every_key_has_a_reference_row(cls: type) -> None:
    missing = [rocketmq_key(cls, f.name) for f in dataclasses.fields(cls)]
    missing = [key for key in missing if key not in _documented_keys()]
    assert not missing, f"docs/configuration.md lacks rows for {cls.__name__}: {missing}"


def test_no_row_documents_a_key_that_does_not_exist() -> None:
    known = {
        rocketmq_key(cls, f.name)
        for cls in (NamesrvConfig, BrokerConfig, MessageStoreConfig, RemotingServerConfig)
        for f in dataclasses.fields(cls)
    }
    stale = _documented_keys() - known - {"namesrv", "broker", "store", "remoting", "messagestore"}
    assert not stale, f"docs/configuration.md documents unknown keys: {sorted(stale)}"
