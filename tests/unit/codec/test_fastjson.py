"""The reader of fastjson's non-JSON admin bodies (MessageQueue objects and numbers as map keys)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketq.codec.bodies import MessageQueue
from rocketq.codec.bodies.client import mq_table
from rocketq.codec.fastjson import ObjectKey, loads
from rocketq.errors import ProtocolError


def test_object_and_number_keys() -> None:
    raw = (
        b'{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"t{x}"}:12,'
        b'{"brokerName":"b","queueId":1,"topic":"t{x}"}:{"a":[1,2]}},"n":{0:"addr",-3:null}}'
    )
    obj = loads(raw)
    table = mq_table(obj["offsetTable"], "offsetTable")
    assert table == {MessageQueue("t{x}", "b", 0): 12, MessageQueue("t{x}", "b", 1): {"a": [1, 2]}}
    assert {k.value: v for k, v in obj["n"].items()} == {0: "addr", -3: None}
    assert all(isinstance(k, ObjectKey) for k in obj["n"])


def test_strings_with_braces_quotes_and_escapes_are_left_alone() -> None:
    raw = rb'{"k}":"v\"{:}","u":"\u00e9\n",{"x":"]"}:[{"y":true},false,1.5e3]}'
    obj = loads(raw)
    assert obj["k}"] == 'v"{:}' and obj["u"] == "é\n"
    (key,) = [k for k in obj if isinstance(k, ObjectKey)]
    assert key.value == {"x": "]"} and obj[key] == [{"y": True}, False, 1500.0]


def test_plain_json_takes_the_fast_path() -> None:
    assert loads('{"a": [1, {"b": null}], "c": "d"}') == {"a": [1, {"b": None}], "c": "d"}


@pytest.mark.parametrize("bad", [b"", b"{", b'{"a":1', b'{"a" 1}', b"{1:}", b'{"a":1}x', b"[1,,2]", b'"abc'])
def test_malformed_bodies_raise_protocol_error(bad: bytes) -> None:
    with pytest.raises(ProtocolError):
        loads(bad)


_json = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=20,
)


@given(_json)
def test_any_json_reads_back_as_itself(value: object) -> None:
    assert loads(json.dumps(value)) == value


@given(st.binary(max_size=64))
def test_garbage_only_ever_raises_protocol_error(data: bytes) -> None:
    try:
        loads(data)
    except ProtocolError:
        pass


def test_escaped_backslashes_and_quotes_inside_the_superset() -> None:
    # not JSON (bare keys), so the reader itself has to find where each string ends
    obj = loads(rb'{0:"x\\",1:"q\"r\\\"",2:["\\\\"]}')
    assert {k.value: v for k, v in obj.items()} == {0: "x\\", 1: 'q"r\\"', 2: ["\\\\"]}


def test_number_keys_as_text_for_bodies_with_string_or_int_keys() -> None:
    raw = b'{"brokerAddrs":{0:"a:1", -1 :"b:2"},{"x":1}:3}'
    obj = loads(raw, number_keys_as_text=True)
    assert obj["brokerAddrs"] == {"0": "a:1", "-1": "b:2"}
    (key,) = [k for k in obj if isinstance(k, ObjectKey)]  # objects stay keys of their own
    assert key.value == {"x": 1} and obj[key] == 3
