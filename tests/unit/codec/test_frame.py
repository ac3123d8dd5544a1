"""Framing: partial and split feeds, many frames per feed, limits, zero-copy bodies."""

from __future__ import annotations

import struct

import pytest

from rocketq.codec.codes import SerializeType
from rocketq.codec.command import RemotingCommand, encode_json_header
from rocketq.codec.frame import (
    DEFAULT_MAX_FRAME_LENGTH,
    FrameDecoder,
    decode_frame,
    encode_frame,
    encode_frame_bytes,
)
from rocketq.errors import FrameTooLarge, ProtocolError


def _cmd(i: int, body: bytes = b"") -> RemotingCommand:
    return RemotingCommand(310, opaque=i, ext_fields={"a": f"group{i}", "e": str(i % 8)}, body=body)


def _frames(n: int) -> tuple[list[RemotingCommand], bytes]:
    cmds = [_cmd(i, b"x" * (i * 37 % 300)) for i in range(n)]
    return cmds, b"".join(encode_frame_bytes(c) for c in cmds)


class TestEncode:
    def test_layout(self) -> None:
        cmd = _cmd(1, b"hello")
        header = encode_json_header(cmd)
        frame = encode_frame_bytes(cmd)
        length, type_and_len = struct.unpack(">iI", frame[:8])
        assert length == 4 + len(header) + 5
        assert type_and_len == len(header)  # JSON: high byte 0
        assert frame[8 : 8 + len(header)] == header
        assert frame[8 + len(header) :] == b"hello"

    def test_empty_body_is_one_buffer(self) -> None:
        assert len(encode_frame(_cmd(1))) == 1

    def test_large_body_is_not_copied(self) -> None:
        body = b"y" * 100_000
        parts = encode_frame(_cmd(1, body))
        assert len(parts) == 2 and parts[1] is body

    def test_multi_part_body_is_never_joined(self) -> None:
        segment = bytearray(b"0123456789" * 1000)
        slices = [memoryview(segment)[0:100], memoryview(segment)[500:9000], b"", b"tail"]
        cmd = RemotingCommand(0, flag=1, body=slices)
        parts = encode_frame(cmd)
        assert parts[1] is slices[0] and parts[2] is slices[1] and parts[3] is slices[3]
        (back,) = FrameDecoder().feed(b"".join(parts))
        assert back.body_bytes() == bytes(segment[0:100]) + bytes(segment[500:9000]) + b"tail"

    def test_memoryview_body(self) -> None:
        view = memoryview(b"abcdef")[1:4]
        parts = encode_frame(RemotingCommand(0, body=view))
        assert parts[1] is view
        assert decode_frame(b"".join(parts)).body == b"bcd"


class TestDecode:
    def test_one_byte_at_a_time(self) -> None:
        cmds, wire = _frames(20)
        decoder = FrameDecoder()
        out: list[RemotingCommand] = []
        for i in range(len(wire)):
            out.extend(decoder.feed(wire[i : i + 1]))
        assert out == cmds
        assert decoder.buffered == 0

    def test_many_frames_in_one_feed(self) -> None:
        cmds, wire = _frames(64)
        assert FrameDecoder().feed(wire) == cmds

    @pytest.mark.parametrize("cut", [1, 3, 4, 7, 8, 9, 50, 200])
    def test_split_anywhere(self, cut: int) -> None:
        cmds, wire = _frames(5)
        decoder = FrameDecoder()
        out = decoder.feed(wire[:cut])
        out += decoder.feed(wire[cut:])
        assert out == cmds

    def test_uneven_chunks(self) -> None:
        cmds, wire = _frames(40)
        decoder = FrameDecoder()
        out: list[RemotingCommand] = []
        pos, step = 0, 1
        while pos < len(wire):
            out.extend(decoder.feed(wire[pos : pos + step]))
            pos += step
            step = step * 3 % 701 + 1
        assert out == cmds

    def test_body_is_a_view_of_the_chunk(self) -> None:
        (cmd,) = FrameDecoder().feed(encode_frame_bytes(_cmd(1, b"payload")))
        assert isinstance(cmd.body, memoryview)
        assert cmd.body == b"payload"

    def test_input_buffers_may_be_reused_by_the_caller(self) -> None:
        wire = bytearray(encode_frame_bytes(_cmd(1, b"payload")))
        (cmd,) = FrameDecoder().feed(wire)
        wire[-7:] = b"XXXXXXX"
        assert cmd.body == b"payload"
        (cmd2,) = FrameDecoder().feed(memoryview(bytearray(encode_frame_bytes(_cmd(2, b"zz")))))
        assert cmd2.body == b"zz"

    def test_big_frame_in_many_chunks(self) -> None:
        body = bytes(range(256)) * 4096  # 1 MiB
        wire = encode_frame_bytes(_cmd(1, body))
        decoder = FrameDecoder()
        out: list[RemotingCommand] = []
        for i in range(0, len(wire), 65536):
            out.extend(decoder.feed(wire[i : i + 65536]))
        assert len(out) == 1 and out[0].body == body

    def test_binary_header_frames(self) -> None:
        cmd = RemotingCommand(105, 0, 479, 1, 0, "r", {"topic": "TopicTest"}, b"body")
        wire = encode_frame_bytes(cmd, SerializeType.ROCKETMQ)
        (back,) = FrameDecoder().feed(wire)
        assert back == cmd and back.serialize_type == SerializeType.ROCKETMQ

    def test_mixed_serialize_types_on_one_stream(self) -> None:
        a = RemotingCommand(1, opaque=1, ext_fields={"k": "v"})
        b = RemotingCommand(2, opaque=2, ext_fields={"k": "w"})
        wire = encode_frame_bytes(a) + encode_frame_bytes(b, SerializeType.ROCKETMQ)
        assert FrameDecoder().feed(wire) == [a, b]

    def test_decode_frame_wants_exactly_one(self) -> None:
        _, wire = _frames(2)
        with pytest.raises(ProtocolError):
            decode_frame(wire)
        with pytest.raises(ProtocolError):
            decode_frame(wire[:5])


class TestLimits:
    def test_oversize_rejected_from_the_length_alone(self) -> None:
        decoder = FrameDecoder()
        with pytest.raises(FrameTooLarge):
            decoder.feed(struct.pack(">i", DEFAULT_MAX_FRAME_LENGTH))

    def test_oversize_rejected_in_a_full_buffer(self) -> None:
        with pytest.raises(FrameTooLarge):
            FrameDecoder(1024).feed(struct.pack(">iI", 2000, 10) + b"x" * 100)

    def test_limit_counts_the_length_field(self) -> None:
        cmd = _cmd(1, b"z" * 100)
        wire = encode_frame_bytes(cmd)
        assert FrameDecoder(len(wire)).feed(wire) == [cmd]
        with pytest.raises(FrameTooLarge):
            FrameDecoder(len(wire) - 1).feed(wire)

    def test_frame_too_large_is_a_protocol_error(self) -> None:
        assert issubclass(FrameTooLarge, ProtocolError)

    @pytest.mark.parametrize("length", [-1, 0, 3, -(2**31)])
    def test_bad_frame_length(self, length: int) -> None:
        with pytest.raises(ProtocolError):
            FrameDecoder().feed(struct.pack(">iI", length, 0) + b"{}")

    def test_header_longer_than_frame(self) -> None:
        with pytest.raises(ProtocolError):
            FrameDecoder().feed(struct.pack(">iI", 10, 7) + b"{}" + b"x" * 4)

    def test_header_length_in_the_low_24_bits(self) -> None:
        header = b'{"code":1}'
        wire = struct.pack(">iI", 4 + len(header), len(header)) + header
        assert FrameDecoder().feed(wire)[0].code == 1

    def test_unknown_serialize_type(self) -> None:
        header = b'{"code":1}'
        with pytest.raises(ProtocolError):
            FrameDecoder().feed(struct.pack(">iI", 4 + len(header), 5 << 24 | len(header)) + header)

    def test_garbage_header(self) -> None:
        with pytest.raises(ProtocolError):
            FrameDecoder().feed(struct.pack(">iI", 8, 4) + b"GET ")
