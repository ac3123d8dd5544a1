"""Fuzzing: whatever bytes arrive, the codec only ever raises ProtocolError (or its subclasses)."""

from __future__ import annotations

import struct

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rocketq.codec.bodies import ConsumeStats, HeartbeatData, RegisterBrokerBody, TopicRouteData
from rocketq.codec.codes import SerializeType
from rocketq.codec.command import RemotingCommand, decode_json_header, decode_rocketmq_header
from rocketq.codec.frame import FrameDecoder, encode_frame_bytes
from rocketq.codec.headers import PullMessageRequestHeader, SendMessageRequestHeader
from rocketq.errors import HeaderError, ProtocolError

FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False)
    | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=12,
)
header_like = st.fixed_dictionaries(
    {},
    optional={
        "code": json_values,
        "language": json_values,
        "version": json_values,
        "opaque": json_values,
        "flag": json_values,
        "remark": json_values,
        "extFields": st.dictionaries(st.text(max_size=4), json_values, max_size=5) | json_values,
    },
)


def _feed_all(data: bytes, chunk: int) -> None:
    decoder = FrameDecoder(max_frame_length=1 << 16)
    try:
        for i in range(0, len(data), chunk):
            decoder.feed(data[i : i + chunk])
    except ProtocolError:
        pass


@FUZZ
@given(st.binary(max_size=600), st.integers(1, 64))
def test_frame_decoder_on_arbitrary_bytes(data: bytes, chunk: int) -> None:
    _feed_all(data, chunk)


@FUZZ
@given(st.binary(max_size=300), st.integers(0, 3), st.integers(1, 64))
def test_frame_decoder_on_plausible_prefixes(payload: bytes, stype: int, chunk: int) -> None:
    # A sane prefix in front of junk reaches the header decoders instead of dying on the length.
    frame = struct.pack(">iI", 4 + len(payload), stype << 24 | min(len(payload), 0xFFFFFF)) + payload
    _feed_all(frame, chunk)


@FUZZ
@given(header_like)
def test_json_header_decoder_on_arbitrary_json(obj: dict[str, object]) -> None:
    try:
        raw = orjson.dumps(obj)
    except TypeError:
        return
    try:
        cmd = decode_json_header(raw)
    except ProtocolError:
        return
    assert isinstance(cmd.code, int)
    assert cmd.ext_fields is None or all(isinstance(v, str) for v in cmd.ext_fields.values())


@FUZZ
@given(st.binary(max_size=200))
def test_json_header_decoder_on_arbitrary_bytes(data: bytes) -> None:
    try:
        decode_json_header(data)
    except ProtocolError:
        pass


@FUZZ
@given(st.binary(max_size=200))
def test_binary_header_decoder_on_arbitrary_bytes(data: bytes) -> None:
    try:
        decode_rocketmq_header(data)
    except ProtocolError:
        pass


@FUZZ
@given(st.dictionaries(st.sampled_from(list("abcdefghijklmnz")), st.text(max_size=12), max_size=15))
def test_header_decoder_only_raises_header_error(ext: dict[str, str]) -> None:
    for decode in (
        SendMessageRequestHeader.from_ext_v2,
        SendMessageRequestHeader.from_ext,
        PullMessageRequestHeader.from_ext,
    ):
        try:
            decode(ext)
        except HeaderError:
            pass


@FUZZ
@given(json_values)
def test_body_decoders_only_raise_protocol_error(value: object) -> None:
    try:
        raw = orjson.dumps(value)
    except TypeError:
        return
    for cls in (HeartbeatData, TopicRouteData, RegisterBrokerBody, ConsumeStats):
        try:
            cls.from_json(raw)
        except ProtocolError:
            pass


@FUZZ
@given(st.binary(max_size=300))
def test_compressed_register_body_only_raises_protocol_error(data: bytes) -> None:
    try:
        RegisterBrokerBody.decode(data, compressed=True)
    except ProtocolError:
        pass


commands = st.builds(
    RemotingCommand,
    code=st.integers(-(2**15), 2**15 - 1),
    language=st.integers(0, 13),
    version=st.integers(-(2**15), 2**15 - 1),
    opaque=st.integers(-(2**31), 2**31 - 1),
    flag=st.integers(0, 3),
    remark=st.none() | st.text(min_size=1, max_size=20),
    ext_fields=st.none()
    | st.dictionaries(
        st.text(min_size=1, max_size=8), st.text(min_size=1, max_size=20), min_size=1, max_size=6
    ),
    body=st.binary(max_size=64),
)


@FUZZ
@given(
    st.lists(commands, min_size=1, max_size=8),
    st.sampled_from([SerializeType.JSON, SerializeType.ROCKETMQ]),
    st.integers(1, 97),
)
def test_any_command_round_trips_through_any_split(
    cmds: list[RemotingCommand], stype: SerializeType, chunk: int
) -> None:
    wire = b"".join(encode_frame_bytes(c, stype) for c in cmds)
    decoder = FrameDecoder()
    out: list[RemotingCommand] = []
    for i in range(0, len(wire), chunk):
        out.extend(decoder.feed(wire[i : i + chunk]))
    assert out == cmds


@FUZZ
@given(st.binary(max_size=200))
def test_stats_reader_on_arbitrary_bytes(data: bytes) -> None:
    for raw in (data, b'{"offsetTable":{' + data):
        try:
            ConsumeStats.from_json(raw)
        except ProtocolError:
            pass
