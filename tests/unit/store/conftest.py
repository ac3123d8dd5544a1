"""Fixtures of the store tests (helpers live in store_testlib)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from store_testlib import small_config

from rocketq.store import MessageStore


@pytest.fixture
def make_store(tmp_path: Path) -> Iterator[Callable[..., MessageStore]]:
    """Factory of loaded stores over tmp_path/store (same root each call); closed at teardown."""
    opened: list[MessageStore] = []

    def factory(root: Path | None = None, **overrides: Any) -> MessageStore:
        s = MessageStore(small_config(root or tmp_path / "store", **overrides))
        s.load()
        opened.append(s)
        return s

    yield factory
    for s in opened:
        s.close()


@pytest.fixture
def store(make_store: Callable[..., MessageStore]) -> MessageStore:
    return make_store()
