"""Property tests: any bytes decode to messages or raise ProtocolError, never anything else."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from rocketq.codec.message import (
    BatchItem,
    MessageExt,
    decode_batch_body,
    decode_message,
    decode_messages,
    decode_properties,
    encode_batch_body,
    encode_message,
    encode_properties,
    java_string_hash,
)
from rocketq.errors import ProtocolError

_text = st.text(
    alphabet=st.characters(blacklist_characters="\x01\x02", blacklist_categories=("Cs",)),
    min_size=1,
    max_size=20,
)
_hosts = st.sampled_from([("127.0.0.1", 10911), ("10.0.0.7", 1), ("::1", 80), ("fe80::1", 65535)])


@st.composite
def messages(draw: st.DrawFn) -> MessageExt:
    props = draw(st.dictionaries(_text, _text, max_size=5))
    return MessageExt(
        topic=draw(st.text(alphabet="abcXYZ_-%|0123", min_size=1, max_size=300)),
        body=draw(st.binary(max_size=300)),
        flag=draw(st.integers(-(2**31), 2**31 - 1)),
        properties=props,
        queue_id=draw(st.integers(0, 1000)),
        queue_offset=draw(st.integers(0, 2**62)),
        commit_log_offset=draw(st.integers(0, 2**62)),
        sys_flag=draw(st.sampled_from([0, 1, 4, 8, 0xC, 0x301])),
        born_timestamp=draw(st.integers(0, 2**42)),
        born_host=draw(_hosts),
        store_timestamp=draw(st.integers(0, 2**42)),
        store_host=draw(_hosts),
        reconsume_times=draw(st.integers(0, 16)),
        prepared_transaction_offset=draw(st.integers(0, 2**40)),
    )


@settings(max_examples=200, deadline=None)
@given(st.lists(messages(), max_size=4))
def test_encode_decode_round_trip(msgs: list[MessageExt]) -> None:
    raw = b"".join(encode_message(m) for m in msgs)
    back = decode_messages(raw)
    assert len(back) == len(msgs)
    for a, b in zip(msgs, back, strict=True):
        assert (a.topic, a.body, a.flag, a.properties, a.queue_id, a.queue_offset) == (
            b.topic,
            b.body,
            b.flag,
            b.properties,
            b.queue_id,
            b.queue_offset,
        )
        assert (a.born_host, a.store_host) == (b.born_host, b.store_host)
        assert a.commit_log_offset == b.commit_log_offset
        assert encode_message(b) == encode_message(a)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=400))
def test_random_bytes_only_raise_protocol_error(data: bytes) -> None:
    try:
        decode_messages(data)
    except ProtocolError:
        pass
    try:
        decode_batch_body(data)
    except ProtocolError:
        pass


@settings(max_examples=300, deadline=None)
@given(messages(), st.integers(0, 10_000), st.integers(0, 255))
def test_mutated_record_only_raises_protocol_error(msg: MessageExt, where: int, value: int) -> None:
    raw = bytearray(encode_message(msg))
    raw[where % len(raw)] = value
    try:
        decode_message(bytes(raw))
    except ProtocolError:
        pass


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(_text, _text, max_size=6))
def test_properties_round_trip_with_and_without_trailing_separator(props: dict[str, str]) -> None:
    text = encode_properties(props)
    assert decode_properties(text) == props
    assert decode_properties(text[:-1] if text else text) == props


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(-(2**31), 2**31 - 1), st.binary(max_size=50), _text), max_size=5))
def test_batch_round_trip(items: list[tuple[int, bytes, str]]) -> None:
    batch = [BatchItem(f, b, p) for f, b, p in items]
    assert decode_batch_body(encode_batch_body(batch)) == batch


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=30))
def test_java_hash_matches_utf16_definition(s: str) -> None:
    units = s.encode("utf-16-be", "surrogatepass")
    h = 0
    for i in range(0, len(units), 2):
        h = (31 * h + int.from_bytes(units[i : i + 2], "big")) & 0xFFFFFFFF
    expected = h - 2**32 if h >= 2**31 else h
    try:
        assert java_string_hash(s) == expected
    except UnicodeEncodeError:  # lone surrogates are not valid text for us
        pass
