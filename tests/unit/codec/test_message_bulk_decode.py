"""The bulk pull-body decoder (`decode_messages`) against the one-record decoder, and the lazily
parsed ``MessageExt.properties`` it produces."""

from __future__ import annotations

import dataclasses
import pickle
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketq.codec.message import (
    MessageExt,
    decode_message,
    decode_messages,
    encode_message,
    encode_properties,
)
from rocketq.errors import ProtocolError

STAMP = "\x02MIN_OFFSET\x015\x02MAX_OFFSET\x01900\x02"


def record(**fields: object) -> bytes:
    base: dict[str, object] = {
        "topic": "TopicTest",
        "body": b"hello",
        "properties": {"TAGS": "A", "UNIQ_KEY": "U1"},
        "queue_id": 1,
        "queue_offset": 10,
        "commit_log_offset": 4096,
        "born_timestamp": 1_700_000_000_000,
        "born_host": ("10.1.2.3", 40000),
        "store_timestamp": 1_700_000_000_001,
        "store_host": ("127.0.0.1", 10911),
    }
    base.update(fields)
    return encode_message(MessageExt(**base))  # type: ignore[arg-type]


def one_by_one(buf: bytes) -> list[MessageExt]:
    out, pos = [], 0
    while pos < len(buf):
        msg, pos = decode_message(buf, pos)
        out.append(msg)
    return out


def test_bulk_equals_one_by_one_across_layouts() -> None:
    buf = b"".join(
        [
            record(queue_offset=1),
            record(queue_offset=2, topic="Other", born_host=("10.1.2.4", 1)),  # topic and host change
            record(queue_offset=3, topic="T" * 200),  # V2 magic: the general decoder
            record(queue_offset=4, born_host=("::1", 7), store_host=("fe80::1", 10911)),  # IPv6
            record(queue_offset=5, properties={}, body=b""),
            record(queue_offset=6, topic="Other"),  # back to a topic seen two records ago
            record(queue_offset=7, topic="Другой"),  # non-ASCII topic
            record(queue_offset=8, store_host=("127.0.0.1", -5)),  # a negative port survives
        ]
    )
    bulk = decode_messages(buf)
    assert bulk == one_by_one(buf)
    assert [m.queue_offset for m in bulk] == list(range(1, 9))
    assert bulk[1].born_host == ("10.1.2.4", 1)
    assert bulk[3].store_host == ("fe80::1", 10911)
    assert bulk[6].topic == "Другой"
    assert bulk[7].store_host == ("127.0.0.1", -5)


def test_same_length_topics_are_not_confused() -> None:
    buf = record(topic="AAAA", queue_offset=1) + record(topic="BBBB", queue_offset=2)
    assert [m.topic for m in decode_messages(buf)] == ["AAAA", "BBBB"]


def test_properties_without_trailing_separator() -> None:
    raw = bytearray(record(properties={"TAGS": "A", "KEYS": "k"}))
    # drop the final \x02 and fix the properties and total lengths
    props_len = struct.unpack_from(">h", raw, len(raw) - len(b"TAGS\x01A\x02KEYS\x01k\x02") - 2)[0]
    del raw[-1]
    struct.pack_into(">h", raw, len(raw) - props_len + 1 - 2, props_len - 1)
    struct.pack_into(">i", raw, 0, len(raw))
    (msg,) = decode_messages(bytes(raw), STAMP)
    assert msg.properties == {"TAGS": "A", "KEYS": "k", "MIN_OFFSET": "5", "MAX_OFFSET": "900"}
    (msg,) = decode_messages(bytes(raw), "MIN_OFFSET\x015")  # no leading separator either
    assert msg.properties == {"TAGS": "A", "KEYS": "k", "MIN_OFFSET": "5"}


@pytest.mark.parametrize("topic", ["Short", "T" * 200])  # the inline path and the general one
def test_extra_properties_are_appended_and_win(topic: str) -> None:
    buf = record(topic=topic, properties={"TAGS": "A", "MAX_OFFSET": "stale"})
    (msg,) = decode_messages(buf, STAMP)
    assert msg.properties == {"TAGS": "A", "MAX_OFFSET": "900", "MIN_OFFSET": "5"}
    assert msg.tags == "A"


def test_lazy_properties_behave_like_a_plain_field() -> None:
    (msg,) = decode_messages(record(), STAMP)
    props = msg.properties
    assert props is msg.properties  # parsed once, then kept
    props["X"] = "1"
    assert msg.properties["X"] == "1"
    same = MessageExt(
        topic=msg.topic, body=msg.body, properties=dict(props), queue_id=1, queue_offset=10,
        commit_log_offset=4096, born_timestamp=1_700_000_000_000, born_host=("10.1.2.3", 40000),
        store_timestamp=1_700_000_000_001, store_host=("127.0.0.1", 10911), body_crc=msg.body_crc,
        store_size=msg.store_size,
    )  # fmt: skip
    assert msg == same
    assert "'X': '1'" in repr(msg)


def test_decoded_message_is_a_frozen_dataclass_value() -> None:
    (msg,) = decode_messages(record())
    assert type(msg) is MessageExt
    with pytest.raises(dataclasses.FrozenInstanceError):
        msg.topic = "x"  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        msg.properties = {}  # type: ignore[misc]
    again = dataclasses.replace(msg, reconsume_times=3)
    assert again.reconsume_times == 3 and again.properties == msg.properties
    (fresh,) = decode_messages(record())  # properties not read yet: pickled as the parsed dict
    assert pickle.loads(pickle.dumps(fresh)) == msg
    assert dataclasses.asdict(fresh)["properties"] == {"TAGS": "A", "UNIQ_KEY": "U1"}


def test_bad_utf8_properties_fail_at_decode_time() -> None:
    raw = record(properties={"K": "vv"}).replace(b"K\x01vv", b"K\x01\xff\xfe")
    with pytest.raises(ProtocolError):
        decode_messages(raw)


def test_records_fed_as_memoryview_and_bytearray() -> None:
    buf = record(queue_offset=1) + record(queue_offset=2)
    expected = decode_messages(buf)
    assert decode_messages(memoryview(buf)) == expected
    assert decode_messages(bytearray(buf)) == expected
    assert decode_messages(memoryview(b"xx" + buf)[2:]) == expected


_props = st.dictionaries(
    st.text(alphabet="ABCKEYS_", min_size=1, max_size=6), st.text(alphabet="xyz01", min_size=1, max_size=6),
    max_size=3,
)


@st.composite
def buffers(draw: st.DrawFn) -> bytes:
    n = draw(st.integers(1, 4))
    parts = []
    for i in range(n):
        parts.append(
            record(
                topic=draw(st.sampled_from(["T", "TopicA", "TopicB", "Z" * 130])),
                body=draw(st.binary(max_size=40)),
                properties=draw(_props),
                queue_offset=i,
                born_host=draw(st.sampled_from([("10.0.0.1", 1), ("10.0.0.2", 2), ("::1", 3)])),
            )
        )
    return b"".join(parts)


def _outcome(fn: object, buf: bytes) -> object:
    try:
        return fn(buf)  # type: ignore[operator]
    except ProtocolError:
        return ProtocolError


@settings(max_examples=300, deadline=None)
@given(buffers(), st.integers(0, 10_000), st.integers(0, 255), st.integers(0, 3))
def test_bulk_and_one_by_one_agree_on_any_mutation(buf: bytes, where: int, value: int, cut: int) -> None:
    raw = bytearray(buf)
    raw[where % len(raw)] = value
    mutated = bytes(raw[: len(raw) - cut])
    assert _outcome(decode_messages, mutated) == _outcome(one_by_one, mutated)


@settings(max_examples=100, deadline=None)
@given(_props)
def test_extra_properties_text_round_trip(props: dict[str, str]) -> None:
    (msg,) = decode_messages(record(properties={"TAGS": "A"}), encode_properties(props))
    assert msg.properties == {"TAGS": "A", **props}
