"""Framing: the 4-byte length prefix and the serialize-type/header-length word (PROTOCOL.md §1.1).

Sans-I/O: ``FrameDecoder.feed(bytes) -> [RemotingCommand]`` and ``encode_frame(cmd) -> [buffers]``.
The decoder hands out bodies as memoryviews of the received chunk (no copy); the encoder never
joins a multi-part body, so a transport can ``writelines()`` slices of mapped files as they are.
"""

from __future__ import annotations

import struct
from typing import Final

from rocketq.codec.codes import SerializeType
from rocketq.codec.command import (
    Buffer,
    RejectedCommand,
    RemotingCommand,
    decode_json_header,
    decode_rocketmq_header,
    encode_json_header,
    encode_rocketmq_header,
)
from rocketq.errors import FrameTooLarge, MalformedRequest, ProtocolError

__all__ = [
    "DEFAULT_MAX_FRAME_LENGTH",
    "FrameDecoder",
    "decode_frame",
    "encode_frame",
    "encode_frame_bytes",
]

# Netty's LengthFieldBasedFrameDecoder limit in RocketMQ; it counts the 4-byte length field too.
DEFAULT_MAX_FRAME_LENGTH: Final = 16 * 1024 * 1024

_PREFIX: Final = struct.Struct(">iI")  # frame length, serialize type << 24 | header length
_LENGTH: Final = struct.Struct(">i")
_pack = _PREFIX.pack
# A prefix + header + body this small is cheaper to send as one buffer than as a writev list.
_SMALL_BODY: Final = 2048


def encode_frame(cmd: RemotingCommand, serialize_type: int = SerializeType.JSON) -> list[Buffer]:
    """Wire bytes of ``cmd`` as a list of buffers: [length + header (+ small body), *body parts]."""
    header = encode_json_header(cmd) if serialize_type == 0 else encode_rocketmq_header(cmd)
    hlen = len(header)
    body = cmd.body
    if isinstance(body, bytes | bytearray):
        blen = len(body)
        prefix = _pack(4 + hlen + blen, serialize_type << 24 | hlen)
        if blen == 0:
            return [prefix + header]
        if blen <= _SMALL_BODY:
            return [b"".join((prefix, header, body))]
        return [prefix + header, body]
    if isinstance(body, memoryview):
        blen = body.nbytes
        prefix = _pack(4 + hlen + blen, serialize_type << 24 | hlen)
        if blen == 0:
            return [prefix + header]
        return [prefix + header, body]
    parts: list[Buffer] = []
    blen = 0
    for part in body:
        n = part.nbytes if isinstance(part, memoryview) else len(part)
        if n:
            blen += n
            parts.append(part)
    prefix = _pack(4 + hlen + blen, serialize_type << 24 | hlen)
    parts.insert(0, prefix + header)
    return parts


def encode_frame_bytes(cmd: RemotingCommand, serialize_type: int = SerializeType.JSON) -> bytes:
    """The whole frame as one bytes object (tests, small control messages)."""
    return b"".join(encode_frame(cmd, serialize_type))


def decode_frame(frame: Buffer, max_frame_length: int = DEFAULT_MAX_FRAME_LENGTH) -> RemotingCommand:
    """Decode exactly one complete frame (length prefix included)."""
    decoder = FrameDecoder(max_frame_length)
    cmds = decoder.feed(frame)
    if len(cmds) != 1 or decoder.buffered:
        raise ProtocolError(f"expected exactly one frame, got {len(cmds)} and {decoder.buffered} spare bytes")
    if isinstance(cmds[0], RejectedCommand):
        raise cmds[0].error
    return cmds[0]


class FrameDecoder:
    """Incremental decoder: feed it whatever the socket gave, get back whole commands.

    After it raises ``ProtocolError`` (or ``FrameTooLarge``) the stream is unusable: the
    transport must close the connection. A frame that is sound but whose header holds a bad
    value comes out as a ``RejectedCommand`` in its place, for the transport to answer.
    """

    __slots__ = ("_chunks", "_have", "_need", "max_frame_length")

    def __init__(self, max_frame_length: int = DEFAULT_MAX_FRAME_LENGTH) -> None:
        self.max_frame_length = max_frame_length
        # A partial frame is kept as a list of chunks and joined once, when complete, so a large
        # frame arriving in many reads is copied once rather than once per read.
        self._chunks: list[bytes] = []
        self._have = 0
        self._need = 0

    @property
    def buffered(self) -> int:
        """Bytes held for a frame that is not complete yet."""
        return self._have

    def _check_length(self, frame_len: int) -> None:
        if frame_len + 4 > self.max_frame_length:
            raise FrameTooLarge(f"frame length {frame_len} exceeds the limit {self.max_frame_length}")
        if frame_len < 4:
            raise ProtocolError(f"frame length {frame_len} is too small")

    def feed(self, data: Buffer) -> list[RemotingCommand]:
        if self._chunks:
            chunk = data if type(data) is bytes else bytes(data)
            self._chunks.append(chunk)
            self._have += len(chunk)
            if self._have < self._need:
                return []
            data = b"".join(self._chunks)
            self._chunks = []
            self._have = 0
        elif type(data) is not bytes:
            # Bodies are views of this buffer: it must never change under them.
            data = bytes(data)
        n = len(data)
        pos = 0
        out: list[RemotingCommand] = []
        view: memoryview | None = None
        unpack = _PREFIX.unpack_from
        decode_json = decode_json_header
        max_len = self.max_frame_length - 4
        while n - pos >= 8:
            frame_len, type_and_len = unpack(data, pos)
            if frame_len > max_len or frame_len < 4:
                self._check_length(frame_len)
            end = pos + 4 + frame_len
            if end > n:
                break
            hlen = type_and_len & 0xFFFFFF
            if hlen > frame_len - 4:
                raise ProtocolError(f"header length {hlen} exceeds frame length {frame_len}")
            hstart = pos + 8
            hend = hstart + hlen
            stype = type_and_len >> 24
            try:
                if stype == 0:
                    cmd = decode_json(data[hstart:hend])
                elif stype == 1:
                    cmd = decode_rocketmq_header(data[hstart:hend])
                else:
                    raise ProtocolError(f"unknown serialize type {stype}")
            except MalformedRequest as e:
                # The frame's bounds were sound: the stream goes on, the request gets an answer.
                cmd = RejectedCommand(e, stype)
            if end > hend:
                if view is None:
                    view = memoryview(data)
                cmd.body = view[hend:end]
            out.append(cmd)
            pos = end
        if pos < n:
            rest = data[pos:] if pos else data
            have = n - pos
            if have >= 4:
                (frame_len,) = _LENGTH.unpack_from(rest, 0)
                self._check_length(frame_len)
                self._need = 4 + frame_len
            else:
                self._need = 8
            self._chunks = [rest]
            self._have = have
        return out
