"""Header members of the wrong type or range (issue 9 item 7): golden bad frames.

A member that does not fit its Java type never reaches a processor. When the opaque and flag
are usable the frame decodes to a ``RejectedCommand`` (answered with INVALID_PARAMETER, the
connection stays); when they are not, the decoder raises ``ProtocolError`` (the connection
closes). Whatever is accepted can always be answered: its response encodes.
"""

from __future__ import annotations

import json
import struct

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rocketq.codec import headers as headers_module
from rocketq.codec.codes import ResponseCode, SerializeType
from rocketq.codec.command import (
    REJECTED_CODE,
    RejectedCommand,
    RemotingCommand,
    decode_json_header,
    decode_rocketmq_header,
    encode_rocketmq_header,
)
from rocketq.codec.frame import FrameDecoder, decode_frame, encode_frame_bytes
from rocketq.codec.headers._compiler import CommandHeader, _specs
from rocketq.errors import HeaderError, MalformedRequest, ProtocolError

INT_MAX = 2**31 - 1
INT_MIN = -(2**31)


def _frame(header: bytes, serialize_type: int = 0, body: bytes = b"") -> bytes:
    return struct.pack(">iI", 4 + len(header) + len(body), serialize_type << 24 | len(header)) + header + body


# Whole-connection errors: opaque or flag unusable, so no answer could be addressed.
UNANSWERABLE = {
    "opaque_string_beyond_64_bits": b'{"code":105,"opaque":"99999999999999999999999","flag":0}',
    "opaque_number_beyond_64_bits": b'{"code":105,"opaque":99999999999999999999999,"flag":0}',
    "opaque_just_above_int": b'{"code":105,"opaque":2147483648,"flag":0}',
    "opaque_just_below_int": b'{"code":105,"opaque":-2147483649,"flag":0}',
    "opaque_float": b'{"code":105,"opaque":1.5,"flag":0}',
    "opaque_bool": b'{"code":105,"opaque":true,"flag":0}',
    "opaque_object": b'{"code":105,"opaque":{},"flag":0}',
    "opaque_with_blanks": b'{"code":105,"opaque":" 7","flag":0}',
    "opaque_with_underscore": b'{"code":105,"opaque":"1_0","flag":0}',
    "opaque_arabic_digits": '{"code":105,"opaque":"\u0661\u0662","flag":0}'.encode(),
    "opaque_huge_digit_string": b'{"code":105,"opaque":"' + b"9" * 5000 + b'","flag":0}',
    "flag_beyond_int": b'{"code":105,"opaque":7,"flag":4294967296}',
    "flag_not_a_number": b'{"code":105,"opaque":7,"flag":"x"}',
}

# Answerable: opaque 7, flag 0; (header, start of the remark).
ANSWERABLE = {
    "code_missing": (b'{"opaque":7,"flag":0}', "JSON header has no code"),
    "code_beyond_int": (b'{"code":2147483648,"opaque":7}', "header member <code> is out of the int range"),
    "code_string_beyond_64_bits": (b'{"code":"99999999999999999999999","opaque":7}',
                                   "header member <code> is out of the int range"),
    "code_float": (b'{"code":10.5,"opaque":7}', "header member <code> is not an integer"),
    "version_not_a_number": (b'{"code":105,"opaque":7,"version":"x"}', "header member <version> is not"),
    "version_beyond_int": (b'{"code":105,"opaque":7,"version":-2147483649}',
                           "header member <version> is out"),
    "language_beyond_a_byte": (b'{"code":105,"opaque":7,"language":256}', "header member <language>"),
    "language_negative": (b'{"code":105,"opaque":7,"language":-1}', "header member <language>"),
    "language_object": (b'{"code":105,"opaque":7,"language":{}}', "header member <language>"),
    "remark_object": (b'{"code":105,"opaque":7,"remark":{"a":1}}', "header member <remark> is not a string"),
    "ext_fields_list": (b'{"code":105,"opaque":7,"extFields":[1]}',
                        "header member <extFields> is not an object"),
    "ext_fields_number": (b'{"code":105,"opaque":7,"extFields":3}',
                          "header member <extFields> is not an object"),
    "serialize_type_unknown": (b'{"code":105,"opaque":7,"serializeTypeCurrentRPC":"XML"}',
                               "header member <serializeTypeCurrentRPC>"),
    "serialize_type_number": (b'{"code":105,"opaque":7,"serializeTypeCurrentRPC":9}',
                              "header member <serializeTypeCurrentRPC>"),
}


@pytest.mark.parametrize("header", list(UNANSWERABLE.values()), ids=list(UNANSWERABLE))
def test_unusable_opaque_or_flag_is_a_plain_protocol_error(header: bytes) -> None:
    with pytest.raises(ProtocolError) as info:
        decode_json_header(header)
    assert not isinstance(info.value, MalformedRequest)
    with pytest.raises(ProtocolError):
        FrameDecoder().feed(_frame(header))


@pytest.mark.parametrize("case", list(ANSWERABLE.values()), ids=list(ANSWERABLE))
def test_bad_member_is_answerable(case: tuple[bytes, str]) -> None:
    header, remark = case
    with pytest.raises(MalformedRequest) as info:
        decode_json_header(header)
    assert (info.value.opaque, info.value.flag, info.value.code) == (7, 0, ResponseCode.INVALID_PARAMETER)
    assert str(info.value).startswith(remark), str(info.value)


def test_rejected_frame_keeps_its_place_in_the_stream() -> None:
    good = RemotingCommand(105, opaque=1, ext_fields={"topic": "T"})
    bad = b'{"code":105,"opaque":2,"flag":2,"version":"x"}'
    stream = encode_frame_bytes(good) + _frame(bad, body=b"body") + encode_frame_bytes(good)
    first, rejected, last = FrameDecoder().feed(stream)
    assert first == good and last == good
    assert isinstance(rejected, RejectedCommand)
    assert (rejected.code, rejected.opaque, rejected.flag) == (REJECTED_CODE, 2, 2)
    assert rejected.is_oneway and rejected.remark == str(rejected.error)
    assert rejected.body_bytes() == b"body"


def test_decode_frame_raises_for_a_rejected_frame() -> None:
    with pytest.raises(MalformedRequest):
        decode_frame(_frame(b'{"code":105,"opaque":2,"extFields":[]}'))


def test_values_at_the_int_limits_are_accepted() -> None:
    header = orjson.dumps({"code": INT_MAX, "opaque": INT_MIN, "flag": INT_MAX, "version": INT_MIN,
                           "language": 255, "serializeTypeCurrentRPC": "ROCKETMQ"})
    cmd = decode_json_header(header)
    got = (cmd.code, cmd.opaque, cmd.flag, cmd.version, cmd.language)
    assert got == (INT_MAX, INT_MIN, INT_MAX, INT_MIN, 255)
    assert decode_json_header(b'{"code":"+105","opaque":"-7","serializeTypeCurrentRPC":0}').opaque == -7


# -- ROCKETMQ binary header: the fixed part always fits; what follows may not ----------------------

BINARY = encode_rocketmq_header(RemotingCommand(105, 0, 479, 9, 0, None, {"topic": "TopicTest"}))


@pytest.mark.parametrize("raw", [
    BINARY[:13] + b"\x7f\xff\xff\xff" + BINARY[17:],  # remark length past the end
    BINARY[:17] + b"\x00\x00\x00\x30" + BINARY[21:],  # extFields length past the end
    BINARY[:23] + b"\xff\xfe\xfd\xfc\xfb" + BINARY[28:],  # key not UTF-8
    BINARY[:17],  # ends before the extFields length
], ids=["remark_length", "ext_length", "key_not_utf8", "no_ext_length"])
def test_binary_header_past_the_fixed_part_is_answerable(raw: bytes) -> None:
    with pytest.raises(MalformedRequest) as info:
        decode_rocketmq_header(raw)
    assert (info.value.opaque, info.value.flag) == (9, 0)
    (rejected,) = FrameDecoder().feed(_frame(raw, SerializeType.ROCKETMQ))
    assert isinstance(rejected, RejectedCommand) and rejected.opaque == 9


def test_binary_header_shorter_than_the_fixed_part_is_not() -> None:
    with pytest.raises(ProtocolError) as info:
        decode_rocketmq_header(BINARY[:16])
    assert not isinstance(info.value, MalformedRequest)


# -- fuzzing: whatever is accepted can be answered ----------------------------------------------------

FUZZ = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
ints = st.integers(-(2**70), 2**70) | st.sampled_from(
    [INT_MIN - 1, INT_MIN, INT_MAX, INT_MAX + 1, 2**63, 2**64])
scalars = st.none() | st.booleans() | ints | st.floats(allow_nan=False) | st.text(max_size=8) | ints.map(str)
member = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3)
                      | st.dictionaries(st.text(max_size=4), inner, max_size=3), max_leaves=6)
headers = st.fixed_dictionaries({}, optional={
    name: member for name in ("code", "opaque", "flag", "version", "language", "remark", "extFields",
                              "serializeTypeCurrentRPC")
})


def _answer_encodes(cmd: RemotingCommand) -> None:
    response = RemotingCommand.response(ResponseCode.INVALID_PARAMETER, cmd.remark, opaque=cmd.opaque)
    encode_frame_bytes(response)
    encode_frame_bytes(cmd.make_response(0, "ok", cmd.fields()))


@FUZZ
@given(headers)
def test_any_json_header_decodes_to_something_answerable_or_protocol_error(obj: dict[str, object]) -> None:
    raw = json.dumps(obj).encode()  # the stdlib writes integers beyond 64 bits too
    try:
        (cmd,) = FrameDecoder().feed(_frame(raw))
    except ProtocolError:
        return
    assert INT_MIN <= cmd.opaque <= INT_MAX and INT_MIN <= cmd.flag <= INT_MAX
    if not isinstance(cmd, RejectedCommand):
        assert INT_MIN <= cmd.code <= INT_MAX and INT_MIN <= cmd.version <= INT_MAX
        assert 0 <= cmd.language <= 255
        assert cmd.ext_fields is None or all(
            type(k) is str and type(v) is str for k, v in cmd.ext_fields.items())
    _answer_encodes(cmd)


@FUZZ
@given(st.binary(max_size=120), st.binary(max_size=17, min_size=17))
def test_any_binary_header_decodes_to_something_answerable_or_protocol_error(
        tail: bytes, fixed: bytes) -> None:
    try:
        (cmd,) = FrameDecoder().feed(_frame(fixed + tail, SerializeType.ROCKETMQ))
    except ProtocolError:
        return
    _answer_encodes(cmd)


# -- typed headers: any extFields decode or raise HeaderError -------------------------------------

HEADER_CLASSES = [cls for name in headers_module.__all__
                  if isinstance(cls := getattr(headers_module, name), type) and issubclass(cls, CommandHeader)
                  and cls is not CommandHeader]
field_text = st.one_of(
    st.text(max_size=12),
    st.integers(-(2**80), 2**80).map(str),
    st.sampled_from(["9" * 5000, "-" + "9" * 4400, "0" * 40 + "1", " 1", "1_0", "+", "-", "\u0661", "TRUE"]),
)


@pytest.mark.parametrize("cls", HEADER_CLASSES, ids=lambda c: c.__name__)
def test_huge_digit_strings_are_header_errors(cls: type[CommandHeader]) -> None:
    keys = [spec.key for spec in _specs(cls) if spec.kind in ("int", "long")]
    for key in keys:
        with pytest.raises(HeaderError, match=f"<{key}> is not a number"):
            cls.from_ext(dict.fromkeys([s.key for s in _specs(cls)], "1") | {key: "9" * 5000})


@FUZZ
@given(st.sampled_from(HEADER_CLASSES), st.data())
def test_typed_headers_only_raise_header_error(cls: type[CommandHeader], data: st.DataObject) -> None:
    keys = [spec.key for spec in _specs(cls)]
    ext = data.draw(st.dictionaries(st.sampled_from(keys), field_text, max_size=len(keys)))
    try:
        decoded = cls.from_ext(ext)
    except HeaderError:
        return
    # What decodes, encodes, and every number fits its Java type.
    for spec in _specs(cls):
        value = getattr(decoded, spec.name)
        if spec.kind == "int" and value is not None:
            assert INT_MIN <= value <= INT_MAX
        if spec.kind == "long" and value is not None:
            assert -(2**63) <= value < 2**63
    decoded.to_ext()
