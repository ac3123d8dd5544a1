"""Pre-encoded extFields (`RemotingCommand.ext_json`): the same header bytes as the dict form."""

from __future__ import annotations

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketq.codec.command import RemotingCommand, decode_json_header, encode_json_header
from rocketq.codec.frame import decode_frame, encode_frame_bytes

_FIELDS = st.dictionaries(st.text(min_size=1, max_size=12), st.text(max_size=40), max_size=8)


@settings(max_examples=300, deadline=None)
@given(_FIELDS, st.integers(0, 2**31 - 1), st.integers(-(2**31), 2**31 - 1), st.sampled_from([0, 1, 3]),
       st.sampled_from([0, 1, 2, 6, 12, 99]))
def test_ext_json_encodes_like_the_dict(fields: dict[str, str], opaque: int, code: int, flag: int,
                                        language: int) -> None:
    as_dict = RemotingCommand(code, language, 317, opaque, flag, None, fields)
    as_json = RemotingCommand(code, language, 317, opaque, flag, None, None, ext_json=orjson.dumps(fields))
    assert encode_json_header(as_json) == encode_json_header(as_dict)
    assert as_json == as_dict
    assert as_json.fields() == fields and as_json.ext(next(iter(fields), "x")) == fields.get(
        next(iter(fields), "x"))
    decoded = decode_json_header(encode_json_header(as_json))
    assert decoded.ext_fields == (fields or {}) or (not fields and decoded.ext_fields in ({}, None))


def test_make_response_with_ext_json_round_trips_on_the_wire() -> None:
    request = RemotingCommand.request(310, {"b": "T"})
    response = request.make_response(0, ext_json=b'{"msgId":"AB","queueId":"1"}')
    response.opaque = request.opaque
    wire = decode_frame(encode_frame_bytes(response))
    assert wire.is_response and wire.opaque == request.opaque
    assert wire.ext_fields == {"msgId": "AB", "queueId": "1"}
    # a remark or dict fields take the general encoder, which still honours ext_json
    with_remark = request.make_response(1, "why", ext_json=b'{"a":"b"}')
    assert decode_frame(encode_frame_bytes(with_remark)).ext_fields == {"a": "b"}
    assert "extFields={'a': 'b'}" in repr(with_remark)
