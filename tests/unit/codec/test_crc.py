"""BODYCRC: the accelerated CRC-32 and the standard library's agree, and the codec works without
the accelerator (the fallback is what a plain `pip install rocketq` runs)."""

from __future__ import annotations

import importlib
import sys
import zlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

import rocketq.codec.crc as crc
from rocketq.codec.message import body_crc


@given(st.binary(max_size=5000))
def test_the_same_value_as_zlib(data: bytes) -> None:
    assert crc.crc32(data) == zlib.crc32(data)
    assert crc.crc32(memoryview(data)) == zlib.crc32(data)
    assert body_crc(data) == zlib.crc32(data) & 0x7FFFFFFF


def test_the_fallback_without_zlib_ng(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "zlib_ng", None)  # import zlib_ng now fails
    monkeypatch.setitem(sys.modules, "zlib_ng.zlib_ng", None)
    try:
        plain = importlib.reload(crc)
        assert not plain.ACCELERATED and plain.crc32 is zlib.crc32
        assert plain.crc32(b"rocketq") == zlib.crc32(b"rocketq")
    finally:
        monkeypatch.undo()
        importlib.reload(crc)


def test_the_accelerator_is_used_when_installed() -> None:
    try:
        from zlib_ng import zlib_ng
    except ImportError:
        assert not crc.ACCELERATED
        return
    assert crc.ACCELERATED and crc.crc32 is zlib_ng.crc32
