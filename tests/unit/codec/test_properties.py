"""The one properties rule: single-name lookups on str, bytes and a mapped segment answer exactly
what `decode_properties` does for the whole string."""

from __future__ import annotations

import mmap

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketq.codec.properties import (
    append_properties,
    decode_properties,
    encode_properties,
    get_property,
    get_property_bytes,
    needle,
    value_span,
)

# Names and values drawn from a small alphabet holding both separators, so duplicates, empty
# names and values, names inside values and missing trailing separators all come up.
_text = st.text(alphabet="AB\x01\x02", max_size=24)
_names = st.sampled_from(["A", "B", "AB", "BA"])


@given(_text, _names)
def test_lookup_agrees_with_the_decoder_on_str_and_bytes(text: str, name: str) -> None:
    expected = decode_properties(text).get(name)
    assert get_property(text, needle(name)) == expected
    raw = text.encode()
    got = get_property_bytes(raw, needle(name).encode())
    assert (got.decode() if got is not None else None) == expected


@given(_text, _names, st.binary(max_size=5), st.binary(max_size=5))
def test_lookup_within_a_range_of_a_mapping(text: str, name: str, before: bytes, after: bytes) -> None:
    raw = text.encode()
    buf = mmap.mmap(-1, len(before) + len(raw) + len(after) + 1)
    try:
        buf.write(before + raw + after)
        span = value_span(buf, needle(name).encode(), len(before), len(before) + len(raw))
        expected = decode_properties(text).get(name)
        assert (buf[span[0] : span[1]].decode() if span else None) == expected
    finally:
        buf.close()


@pytest.mark.parametrize(
    ("text", "name", "value"),
    [
        ("TAGS\x01a\x02TAGS\x01b\x02", "TAGS", "b"),  # the last duplicate wins
        ("TAGS\x01a\x02TAGS\x01\x02", "TAGS", "a"),  # an empty value does not count
        ("XTAGS\x01a\x02", "TAGS", None),  # a longer name is not this one
        ("K\x01TAGS\x01a\x02", "TAGS", None),  # inside a value
        ("TAGS\x01a\x01b", "TAGS", "a\x01b"),  # the first \x01 splits; no trailing separator
    ],
)
def test_lookup_cases(text: str, name: str, value: str | None) -> None:
    assert get_property(text, needle(name)) == value == decode_properties(text).get(name)


def test_append_closes_a_string_written_without_its_trailing_separator() -> None:
    assert append_properties("A\x01b", ("C", "d")) == "A\x01b\x02C\x01d\x02"
    assert append_properties(encode_properties({"A": "b"}), ("C", "d")) == "A\x01b\x02C\x01d\x02"
    assert decode_properties(append_properties("", ("C", "d"), ("E", "f"))) == {"C": "d", "E": "f"}
