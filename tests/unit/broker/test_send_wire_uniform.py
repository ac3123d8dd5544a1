"""The broker's column-wise cut of a batch of like messages gives exactly what cutting it one
message at a time gives, and any batch it cannot prove uniform goes the general way."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketq.broker.processors import send_wire
from rocketq.broker.processors.send_wire import batch_properties_suffix, decode_batch_body
from rocketq.client.message import Message
from rocketq.client.producer.config import ProducerConfig
from rocketq.client.producer.kernel import SendEncoder
from rocketq.errors import MessageIllegal

MAX = 4 * 1024 * 1024
SUFFIX = batch_properties_suffix("WAIT\x01true\x02", "DefaultCluster")


def encoded(msgs: list[Message]) -> bytes:
    return SendEncoder(ProducerConfig(producer_group="G")).batch(msgs).body


def general(data: bytes, suffix: bytes = SUFFIX) -> object:
    ids = itertools.count()
    try:
        return send_wire._each_message(data, len(data), MAX, {}, lambda: f"NEW{next(ids)}", suffix)
    except MessageIllegal:
        return MessageIllegal


def fast(data: bytes, suffix: bytes = SUFFIX) -> object:
    ids = itertools.count()
    try:
        return decode_batch_body(data, MAX, {}, lambda: f"NEW{next(ids)}", suffix)
    except MessageIllegal:
        return MessageIllegal


@pytest.mark.parametrize("suffix", [SUFFIX, b""])
@pytest.mark.parametrize("msg", [
    Message("T", b"x" * 128, tags="A"),
    Message("T", b"y" * 10),
    Message("T", b"k" * 1024, tags="TagB", keys="order-1 order-2"),
    Message("T", b"z" * 64, tags="t\u00e9", properties={"a": "b"}),
])
def test_a_batch_of_like_messages_is_cut_column_by_column_as_one_by_one(
        msg: Message, suffix: bytes, monkeypatch: pytest.MonkeyPatch) -> None:
    data = encoded([Message(msg.topic, bytes([i % 251]) * len(msg.body), tags=msg.tags, keys=msg.keys,
                            properties=dict(msg.properties)) for i in range(100)])
    used = []
    original = send_wire._uniform_columns

    def spy(*args: object) -> object:
        out = original(*args)  # type: ignore[arg-type]
        used.append(out is not None)
        return out

    monkeypatch.setattr(send_wire, "_uniform_columns", spy)
    columns = fast(data, suffix)
    assert used == [True]  # the column-wise cut took it
    assert columns == general(data, suffix)
    assert len(columns[1]) == 100 and len({k[0] for k in columns[4]}) == 100  # type: ignore[index]


def test_batches_that_are_not_alike_go_the_general_way() -> None:
    sizes = encoded([Message("T", b"b%d" % i) for i in range(100)])  # bodies of two lengths
    assert send_wire._uniform_columns(sizes, len(sizes), MAX, {}, lambda: "N", SUFFIX) is None
    assert fast(sizes) == general(sizes)
    tags = encoded([Message("T", b"x", tags="A" if i % 2 else "B") for i in range(100)])
    assert send_wire._uniform_columns(tags, len(tags), MAX, {}, lambda: "N", SUFFIX) is None
    assert fast(tags) == general(tags)


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 99), st.data())
def test_any_change_to_a_later_message_gives_what_the_general_cut_gives(
        row: int, data: st.DataObject) -> None:
    # A byte anywhere outside the bodies (headers, lengths, the UNIQ_KEY, the other properties)
    # changed in a message after the first: the answer or the refusal is the general cut's.
    raw = bytearray(encoded([Message("T", b"q" * 40, tags="A", keys="k1") for _ in range(100)]))
    size = len(raw) // 100
    at = row * size + data.draw(st.sampled_from([i for i in range(size) if not 20 <= i < 60]))
    raw[at] = data.draw(st.integers(0, 255))
    assert fast(bytes(raw)) == general(bytes(raw))
