"""RemotingCommand headers: golden bytes (PROTOCOL.md §1.1, §1.3, §1.4), real-client quirks, errors."""

from __future__ import annotations

import orjson
import pytest

from rocketq.codec.codes import LanguageCode, RequestCode, ResponseCode, SerializeType
from rocketq.codec.command import (
    FLAG_ONEWAY,
    FLAG_RESPONSE,
    RemotingCommand,
    decode_header,
    decode_json_header,
    decode_rocketmq_header,
    encode_json_header,
    encode_rocketmq_header,
    next_opaque,
)
from rocketq.codec.frame import encode_frame_bytes
from rocketq.errors import ProtocolError

JAVA_ROUTE_REQUEST = (
    b'{"code":105,"extFields":{"topic":"TopicTest"},"flag":0,"language":"JAVA","opaque":1,'
    b'"serializeTypeCurrentRPC":"JSON","version":479}'
)
BINARY_EXAMPLE = bytes.fromhex(
    "00690001df000000010000000000000000000000140005746f70696300000009546f70696354657374"
)


def _route_request() -> RemotingCommand:
    return RemotingCommand(
        RequestCode.GET_ROUTEINFO_BY_TOPIC,
        language=LanguageCode.JAVA,
        version=479,
        opaque=1,
        ext_fields={"topic": "TopicTest"},
    )


class TestJsonGolden:
    def test_header_is_byte_for_byte_fastjson(self) -> None:
        assert encode_json_header(_route_request()) == JAVA_ROUTE_REQUEST

    def test_frame_prefix_of_the_worked_example(self) -> None:
        frame = encode_frame_bytes(_route_request())
        assert len(JAVA_ROUTE_REQUEST) == 131
        assert frame[:8] == bytes.fromhex("00000087 00000083")
        assert frame[8:] == JAVA_ROUTE_REQUEST

    def test_null_members_are_omitted(self) -> None:
        response = RemotingCommand.response(ResponseCode.SUCCESS, opaque=7)
        response.language = LanguageCode.JAVA
        response.version = 479
        assert encode_json_header(response) == (
            b'{"code":0,"flag":1,"language":"JAVA","opaque":7,"serializeTypeCurrentRPC":"JSON","version":479}'
        )

    def test_members_in_alphabetical_order_with_remark(self) -> None:
        cmd = RemotingCommand(3, opaque=9, flag=1, remark=" request type 999 not supported", ext_fields={})
        keys = list(orjson.loads(encode_json_header(cmd)))
        assert keys == sorted(keys)
        assert keys == [
            "code",
            "extFields",
            "flag",
            "language",
            "opaque",
            "remark",
            "serializeTypeCurrentRPC",
            "version",
        ]

    def test_our_language_is_python_by_default(self) -> None:
        header = orjson.loads(encode_json_header(RemotingCommand(10)))
        assert header["language"] == "PYTHON"

    def test_control_characters_are_escaped(self) -> None:
        cmd = RemotingCommand(310, ext_fields={"i": "TAGS\x01TagA\x02"})
        raw = encode_json_header(cmd)
        assert b"\\u0001" in raw and b"\\u0002" in raw
        assert decode_json_header(raw).ext_fields == {"i": "TAGS\x01TagA\x02"}

    def test_unicode_round_trips(self) -> None:
        cmd = RemotingCommand(310, remark="caf\u00e9 \u6d88\u606f", ext_fields={"k": "\u00fc"})
        back = decode_json_header(encode_json_header(cmd))
        assert back.remark == cmd.remark and back.ext_fields == cmd.ext_fields


class TestJsonDecode:
    def test_java_request(self) -> None:
        cmd = decode_json_header(JAVA_ROUTE_REQUEST)
        assert (cmd.code, cmd.language, cmd.version, cmd.opaque, cmd.flag) == (105, 0, 479, 1, 0)
        assert cmd.ext_fields == {"topic": "TopicTest"}
        assert cmd.remark is None
        assert cmd.serialize_type == SerializeType.JSON
        assert not cmd.is_response and not cmd.is_oneway

    def test_cpp_numbers_and_bools_become_java_text(self) -> None:
        raw = (
            b'{"code":310,"extFields":{"a":"g","d":4,"e":0,"g":1491978653614,"k":false,"x":true,'
            b'"f":-1,"r":1.5,"AccessKey":"","Signature":null},"flag":0,"language":"CPP","opaque":3,'
            b'"remark":"","serializeTypeCurrentRPC":"JSON","version":333}'
        )
        cmd = decode_json_header(raw)
        assert cmd.ext_fields == {
            "a": "g",
            "d": "4",
            "e": "0",
            "g": "1491978653614",
            "k": "false",
            "x": "true",
            "f": "-1",
            "r": "1.5",
            "AccessKey": "",
        }
        assert cmd.language == LanguageCode.CPP
        assert cmd.remark == ""

    def test_language_as_number_and_unknown_name(self) -> None:
        assert decode_json_header(b'{"code":1,"language":9}').language == LanguageCode.GO
        assert decode_json_header(b'{"code":1,"language":"KOTLIN"}').language == LanguageCode.OTHER
        assert decode_json_header(b'{"code":1}').language == LanguageCode.JAVA

    def test_unknown_members_are_ignored_and_defaults_apply(self) -> None:
        cmd = decode_json_header(b'{"code":34,"unknown":{"x":[1,2]},"remark":null,"extFields":null}')
        assert (cmd.code, cmd.version, cmd.opaque, cmd.flag) == (34, 0, 0, 0)
        assert cmd.remark is None and cmd.ext_fields is None

    def test_numeric_strings_in_integer_members(self) -> None:
        cmd = decode_json_header(b'{"code":"105","opaque":"12","flag":"1","version":"317"}')
        assert (cmd.code, cmd.opaque, cmd.flag, cmd.version) == (105, 12, 1, 317)
        assert cmd.is_response

    def test_go_style_header(self) -> None:
        raw = b'{"code":0,"language":"GO","version":317,"opaque":5,"flag":1,"remark":"","extFields":{}}'
        cmd = decode_json_header(raw)
        assert cmd.is_response and cmd.remark == "" and cmd.ext_fields == {}

    @pytest.mark.parametrize(
        "raw",
        [
            b"",
            b"{",
            b"[1,2]",
            b'"code"',
            b"{}",
            b'{"code":null}',
            b'{"code":"x"}',
            b'{"code":true}',
            b'{"code":1,"opaque":[1]}',
            b'{"code":1,"extFields":[1]}',
            b'{"code":1,"extFields":{"a":{"b":1},"c":[1]},"remark":{}}',
            b'{"code":1,"remark":[]}',
            b'{"code":1,"language":{}}',
            b'{"code":1,"language":[1]}',
            b"\xff\xfe{}",
            b'{"code":1e400}',
        ],
    )
    def test_malformed_raises_protocol_error_only(self, raw: bytes) -> None:
        with pytest.raises(ProtocolError):
            decode_json_header(raw)

    def test_nested_ext_values_become_json_text(self) -> None:
        cmd = decode_json_header(b'{"code":1,"extFields":{"a":{"b":1},"c":[1,"x"]}}')
        assert cmd.ext_fields == {"a": '{"b":1}', "c": '[1,"x"]'}


class TestBinaryHeader:
    def test_golden_example(self) -> None:
        cmd = RemotingCommand(105, LanguageCode.JAVA, 479, 1, 0, None, {"topic": "TopicTest"})
        assert encode_rocketmq_header(cmd) == BINARY_EXAMPLE
        assert len(BINARY_EXAMPLE) == 41
        frame = encode_frame_bytes(cmd, SerializeType.ROCKETMQ)
        assert frame[:8] == bytes.fromhex("0000002d 01000029")

    def test_decode_golden_example(self) -> None:
        cmd = decode_rocketmq_header(BINARY_EXAMPLE)
        assert (cmd.code, cmd.language, cmd.version, cmd.opaque, cmd.flag) == (105, 0, 479, 1, 0)
        assert cmd.ext_fields == {"topic": "TopicTest"}
        assert cmd.remark is None
        assert cmd.serialize_type == SerializeType.ROCKETMQ

    def test_round_trip_with_remark_and_unicode(self) -> None:
        cmd = RemotingCommand(17, LanguageCode.GO, 317, -5, 3, "r\u00e9mark", {"k\u00e9y": "v", "e": "\x01"})
        back = decode_header(encode_rocketmq_header(cmd), SerializeType.ROCKETMQ)
        assert back == cmd

    def test_empty_values_decode_as_absent(self) -> None:
        # A string of length 0 is null in Java's reader, and null entries are not kept.
        cmd = RemotingCommand(1, ext_fields={"a": "", "b": "x"}, remark="")
        back = decode_rocketmq_header(encode_rocketmq_header(cmd))
        assert back.ext_fields == {"b": "x"}
        assert back.remark is None

    def test_code_above_a_short_cannot_be_encoded(self) -> None:
        with pytest.raises(ProtocolError):
            encode_rocketmq_header(RemotingCommand(RequestCode.POP_MESSAGE))

    @pytest.mark.parametrize(
        "raw",
        [
            BINARY_EXAMPLE[:10],
            BINARY_EXAMPLE[:-1],
            BINARY_EXAMPLE[:13] + b"\x7f\xff\xff\xff" + BINARY_EXAMPLE[17:],  # remark length too big
            BINARY_EXAMPLE[:13] + b"\xff\xff\xff\xff" + BINARY_EXAMPLE[17:],  # negative remark length
            BINARY_EXAMPLE[:17] + b"\x00\x00\x00\x30" + BINARY_EXAMPLE[21:],  # ext length past the end
            BINARY_EXAMPLE[:21] + b"\x00\x30" + BINARY_EXAMPLE[23:],  # key length past the map
            BINARY_EXAMPLE[:23] + b"\xff\xfe\xfd\xfc\xfb" + BINARY_EXAMPLE[28:],  # key not UTF-8
        ],
    )
    def test_malformed_raises_protocol_error(self, raw: bytes) -> None:
        with pytest.raises(ProtocolError):
            decode_rocketmq_header(raw)

    def test_unknown_serialize_type(self) -> None:
        with pytest.raises(ProtocolError):
            decode_header(b"{}", 7)


class TestCommandValues:
    def test_make_response_copies_opaque_and_sets_flag(self) -> None:
        request = RemotingCommand.request(RequestCode.HEART_BEAT, {"a": "b"}, b"body")
        response = request.make_response(ResponseCode.SYSTEM_ERROR, "boom", {"x": "y"})
        assert response.opaque == request.opaque
        assert response.flag == FLAG_RESPONSE and response.is_response
        assert (response.code, response.remark, response.ext_fields) == (1, "boom", {"x": "y"})

    def test_request_constructor(self) -> None:
        one = RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET, oneway=True)
        two = RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET)
        assert one.flag == FLAG_ONEWAY and one.is_oneway and not one.is_response
        assert two.flag == 0 and two.opaque != one.opaque
        assert one.language == LanguageCode.PYTHON

    def test_next_opaque_stays_in_java_int_range(self) -> None:
        values = {next_opaque() for _ in range(1000)}
        assert len(values) == 1000
        assert all(0 <= v <= 0x7FFFFFFF for v in values)

    def test_body_helpers(self) -> None:
        cmd = RemotingCommand(11, body=[b"ab", memoryview(b"cde"), bytearray(b"f")])
        assert cmd.body_length == 6
        assert cmd.body_bytes() == b"abcdef"
        assert RemotingCommand(11, body=memoryview(b"xyz")).body_bytes() == b"xyz"

    def test_equality_compares_bodies_by_content(self) -> None:
        a = RemotingCommand(10, opaque=1, body=b"abc")
        b = RemotingCommand(10, opaque=1, body=[memoryview(b"a"), b"bc"])
        assert a == b
        b.remark = "x"
        assert a != b

    def test_repr_is_java_like(self) -> None:
        text = repr(_route_request())
        assert text.startswith("RemotingCommand [code=105, language=JAVA, version=479, opaque=1")

    def test_ext_lookup(self) -> None:
        cmd = RemotingCommand(1, ext_fields={"a": "1"})
        assert cmd.ext("a") == "1" and cmd.ext("b") is None and RemotingCommand(1).ext("a", "d") == "d"

    def test_non_string_ext_key_is_a_protocol_error(self) -> None:
        cmd = RemotingCommand(1, ext_fields={1: "x"})  # type: ignore[dict-item]
        with pytest.raises(ProtocolError):
            encode_json_header(cmd)
