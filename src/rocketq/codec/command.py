"""RemotingCommand: the one message shape of RocketMQ's remoting protocol (PROTOCOL.md §1).

A command is a header (code, language, version, opaque, flag, remark, extFields) plus an opaque
body. This module turns headers into values and back; framing (the two leading ints) lives in
``frame.py``. We always *write* JSON headers because the C++ client ignores the serialize-type
byte and parses JSON; we *read* both JSON and the ROCKETMQ binary layout.
"""

from __future__ import annotations

import itertools
import re
import struct
from collections.abc import Sequence
from typing import Any, Final, TypeAlias

import orjson

from rocketq.codec.codes import ROCKETQ_VERSION, LanguageCode, SerializeType
from rocketq.errors import MalformedRequest, ProtocolError

__all__ = [
    "FLAG_ONEWAY",
    "FLAG_RESPONSE",
    "REJECTED_CODE",
    "Body",
    "Buffer",
    "RejectedCommand",
    "RemotingCommand",
    "clip_repr",
    "decode_header",
    "decode_json_header",
    "decode_rocketmq_header",
    "encode_json_header",
    "encode_rocketmq_header",
    "next_opaque",
]

Buffer: TypeAlias = bytes | bytearray | memoryview
# A body may be several buffers (slices of mapped commit-log files) that are written with
# writelines() and never joined on the hot path.
Body: TypeAlias = bytes | bytearray | memoryview | Sequence[bytes | bytearray | memoryview]

FLAG_RESPONSE: Final = 1  # bit 0 (RPC_TYPE)
FLAG_ONEWAY: Final = 2  # bit 1 (RPC_ONEWAY)

_LANGUAGE_NAMES: Final[dict[int, str]] = {int(m): m.name for m in LanguageCode}
_LANGUAGE_BY_NAME: Final[dict[str, int]] = {m.name: int(m) for m in LanguageCode}

_opaque_counter = itertools.count(1)
_loads = orjson.loads


def next_opaque() -> int:
    """A fresh request id from the per-process counter (wraps inside Java's int range)."""
    return next(_opaque_counter) & 0x7FFFFFFF


def _body_length(body: Body) -> int:
    if isinstance(body, bytes | bytearray):
        return len(body)
    if isinstance(body, memoryview):
        return body.nbytes
    return sum(p.nbytes if isinstance(p, memoryview) else len(p) for p in body)


class RemotingCommand:
    """A request or response. Mutable on purpose: processors build responses up field by field.

    A decoded ``body`` is a memoryview of the network read it arrived in (no copy): it keeps that
    whole read alive, so take ``bytes(cmd.body)`` before holding on to it for long.
    """

    __slots__ = (
        "body",
        "code",
        "ext_fields",
        "ext_json",
        "flag",
        "language",
        "opaque",
        "remark",
        "serialize_type",
        "version",
    )

    def __init__(
        self,
        code: int,
        language: int = LanguageCode.PYTHON,
        version: int = ROCKETQ_VERSION,
        opaque: int = 0,
        flag: int = 0,
        remark: str | None = None,
        ext_fields: dict[str, str] | None = None,
        body: Body = b"",
        serialize_type: int = SerializeType.JSON,
        ext_json: bytes | None = None,
    ) -> None:
        self.code = code
        self.language = language
        self.version = version
        self.opaque = opaque
        self.flag = flag
        self.remark = remark
        self.ext_fields = ext_fields
        self.body = body
        self.serialize_type = serialize_type
        # extFields already encoded as a JSON object, for answers built on a hot path (a send
        # answer is one bytes format instead of a dict and its encoding). Used only when
        # ext_fields is None; `fields()` reads either.
        self.ext_json = ext_json

    # -- constructors ---------------------------------------------------------------------------

    @classmethod
    def request(
        cls,
        code: int,
        ext_fields: dict[str, str] | None = None,
        body: Body = b"",
        oneway: bool = False,
    ) -> RemotingCommand:
        """A request with a fresh opaque; a transport may re-number it when it sends it."""
        return cls(
            code,
            opaque=next_opaque(),
            flag=FLAG_ONEWAY if oneway else 0,
            ext_fields=ext_fields,
            body=body,
        )

    @classmethod
    def response(
        cls,
        code: int = 0,
        remark: str | None = None,
        ext_fields: dict[str, str] | None = None,
        body: Body = b"",
        *,
        opaque: int = 0,
    ) -> RemotingCommand:
        return cls(code, opaque=opaque, flag=FLAG_RESPONSE, remark=remark, ext_fields=ext_fields, body=body)

    def make_response(
        self,
        code: int = 0,
        remark: str | None = None,
        ext_fields: dict[str, str] | None = None,
        body: Body = b"",
        *,
        ext_json: bytes | None = None,
    ) -> RemotingCommand:
        """The response to this request: same opaque, response flag set."""
        return RemotingCommand(code, LanguageCode.PYTHON, ROCKETQ_VERSION, self.opaque, FLAG_RESPONSE, remark,
                               ext_fields, body, SerializeType.JSON, ext_json)

    # -- flags ----------------------------------------------------------------------------------

    @property
    def is_response(self) -> bool:
        return bool(self.flag & FLAG_RESPONSE)

    @property
    def is_oneway(self) -> bool:
        return bool(self.flag & FLAG_ONEWAY)

    def mark_response(self) -> None:
        self.flag |= FLAG_RESPONSE

    def mark_oneway(self) -> None:
        self.flag |= FLAG_ONEWAY

    # -- body helpers ---------------------------------------------------------------------------

    @property
    def body_length(self) -> int:
        return _body_length(self.body)

    def body_bytes(self) -> bytes:
        """The body as one bytes object (copies; not for the hot path)."""
        body = self.body
        if isinstance(body, bytes):
            return body
        if isinstance(body, bytearray | memoryview):
            return bytes(body)
        return b"".join(body)

    def fields(self) -> dict[str, str] | None:
        """extFields, decoding `ext_json` when that is how they were given."""
        if self.ext_fields is None and self.ext_json is not None:
            return _coerce_ext_fields(_loads(self.ext_json))
        return self.ext_fields

    def ext(self, key: str, default: str | None = None) -> str | None:
        fields = self.fields()
        if fields is None:
            return default
        return fields.get(key, default)

    # -- value semantics for tests and logs -------------------------------------------------------

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, RemotingCommand):
            return NotImplemented
        return (
            self.code == other.code
            and self.language == other.language
            and self.version == other.version
            and self.opaque == other.opaque
            and self.flag == other.flag
            and self.remark == other.remark
            and (self.fields() or None) == (other.fields() or None)
            and self.body_bytes() == other.body_bytes()
        )

    __hash__ = None  # type: ignore[assignment]  # mutable

    def __repr__(self) -> str:
        lang = _LANGUAGE_NAMES.get(self.language, str(self.language))
        return (
            f"RemotingCommand [code={self.code}, language={lang}, version={self.version}, "
            f"opaque={self.opaque}, flag(B)={self.flag:b}, remark={self.remark}, "
            f"extFields={self.fields()}, bodyLength={self.body_length}, "
            f"serializeTypeCurrentRPC={SerializeType(self.serialize_type).name}]"
        )


# Outside Java's int range, so no processor is registered under it and no run of real requests
# ever includes a rejected one.
REJECTED_CODE: Final = -(2**31) - 1


class RejectedCommand(RemotingCommand):
    """What the frame decoder yields for a frame whose header failed with ``MalformedRequest``.

    It stands in the stream where the request was, so the transport answers it in order; it
    carries only the opaque and flag (to address the answer) and the error (its code and remark).
    """

    __slots__ = ("error",)

    def __init__(self, error: MalformedRequest, serialize_type: int) -> None:
        super().__init__(REJECTED_CODE, opaque=error.opaque, flag=error.flag, remark=str(error),
                         serialize_type=serialize_type)
        self.error = error


# -- JSON header ------------------------------------------------------------------------------------


_LANGUAGE_JSON: Final[dict[int, bytes]] = {int(m): m.name.encode() for m in LanguageCode}


def encode_json_header(cmd: RemotingCommand) -> bytes:
    """Compact JSON with fastjson's member order (alphabetical) and null members omitted."""
    ext_json = cmd.ext_json
    if ext_json is not None and cmd.ext_fields is None and cmd.remark is None:
        # The layout orjson gives the dict below, written in one format.
        try:
            return b'{"code":%d,"extFields":%b,"flag":%d,"language":"%b","opaque":%d,' \
                b'"serializeTypeCurrentRPC":"JSON","version":%d}' % (
                    cmd.code, ext_json, cmd.flag, _LANGUAGE_JSON.get(cmd.language, b"OTHER"), cmd.opaque,
                    cmd.version)
        except TypeError as e:
            raise ProtocolError(f"cannot encode header of {cmd!r}: {e}") from e
    obj: dict[str, Any] = {"code": cmd.code}
    fields = cmd.fields()
    if fields is not None:
        obj["extFields"] = fields
    obj["flag"] = cmd.flag
    obj["language"] = _LANGUAGE_NAMES.get(cmd.language, "OTHER")
    obj["opaque"] = cmd.opaque
    if cmd.remark is not None:
        obj["remark"] = cmd.remark
    obj["serializeTypeCurrentRPC"] = "JSON"
    obj["version"] = cmd.version
    try:
        return orjson.dumps(obj)
    except TypeError as e:  # a non-str key in ext_fields: the caller's bug, reported as such
        raise ProtocolError(f"cannot encode header of {cmd!r}: {e}") from e


def _json_scalar_to_str(key: str, value: Any) -> str:
    # Java's Map<String,String> would hold the text of the JSON token; the C++ client sends
    # ints, and some clients booleans, for what are strings to every other peer.
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, dict | list):
        return orjson.dumps(value).decode()
    raise ProtocolError(f"extFields value of <{key}> has an unsupported type")


def _coerce_ext_fields(ext: dict[str, Any]) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in ext.items():
        if value is None:
            continue
        out[key] = value if type(value) is str else _json_scalar_to_str(key, value)
    return out


# Java's int: code, version, opaque and flag are `int` members of RemotingCommand.
_INT_MIN: Final = -(2**31)
_INT_MAX: Final = 2**31 - 1
# Integer.parseInt's grammar; Python's int() would also take blanks, '_' and non-ASCII digits.
_JAVA_INT_TEXT: Final = re.compile(r"[+-]?[0-9]+")
# Longer digit strings are out of range whatever they say (and int() of a huge one is slow).
_INT_TEXT_MAX: Final = 24
# LanguageCode is a byte on the binary wire; a JSON number names one by its code.
_LANGUAGE_MAX: Final = 255
_SERIALIZE_NAMES: Final = frozenset(m.name for m in SerializeType)
_SERIALIZE_CODES: Final = frozenset(int(m) for m in SerializeType)


def _header_int(obj: dict[str, Any], key: str, default: int) -> int:
    value = obj.get(key)
    if value is None:
        return default
    if type(value) is int:
        number = value
    elif type(value) is str and _JAVA_INT_TEXT.fullmatch(value):
        if len(value) > _INT_TEXT_MAX:
            raise ProtocolError(f"header member <{key}> is out of the int range: {clip_repr(value)}")
        number = int(value)
    else:
        raise ProtocolError(f"header member <{key}> is not an integer: {clip_repr(value)}")
    if not _INT_MIN <= number <= _INT_MAX:
        raise ProtocolError(f"header member <{key}> is out of the int range: {clip_repr(value)}")
    return number


def clip_repr(value: object) -> str:
    """``repr(value)``, cut to 64 characters: remarks quote offending values, and a megabyte of
    one would only burden the answer and the log."""
    text = repr(value)
    return text if len(text) <= 64 else text[:61] + "..."


def _language(value: Any) -> int:
    if type(value) is str:
        return _LANGUAGE_BY_NAME.get(value, LanguageCode.OTHER)
    if type(value) is int and 0 <= value <= _LANGUAGE_MAX:
        return value
    if value is None:
        return LanguageCode.JAVA
    raise ProtocolError(f"header member <language> is not a language name or code: {clip_repr(value)}")


def _check_serialize_type(value: Any) -> None:
    # Nobody acts on it (the frame prefix decides), but a value fastjson could not map to the
    # enum means the peer is not speaking this protocol.
    if value is None or (type(value) is str and value in _SERIALIZE_NAMES) or (
            type(value) is int and value in _SERIALIZE_CODES):
        return
    raise ProtocolError(
        f"header member <serializeTypeCurrentRPC> is not JSON or ROCKETMQ: {clip_repr(value)}")


def decode_json_header(data: Buffer) -> RemotingCommand:
    """Parse a JSON header (serialize type 0), tolerating the quirks of real clients (§1.3).

    Raises ``MalformedRequest`` (answerable: it carries the opaque and flag) when only some
    member other than opaque and flag is wrong, plain ``ProtocolError`` when not even those are
    usable.
    """
    try:
        obj = _loads(data)
    except orjson.JSONDecodeError as e:
        raise ProtocolError(f"bad JSON header: {e}") from None
    if type(obj) is not dict:
        raise ProtocolError("JSON header is not an object")
    get = obj.get
    code = get("code")
    version = get("version", 0)
    opaque = get("opaque", 0)
    flag = get("flag", 0)
    # One chained identity test and one range test for the common case: all four are plain
    # JSON integers in [0, 2**31). Negative ones (rare, but valid Java ints) take the slow path.
    if not (int is type(code) is type(version) is type(opaque) is type(flag)
            and not (code | version | opaque | flag) >> 31):
        opaque = _header_int(obj, "opaque", 0)
        flag = _header_int(obj, "flag", 0)
        try:
            if code is None:
                raise ProtocolError("JSON header has no code")
            code = _header_int(obj, "code", 0)
            version = _header_int(obj, "version", 0)
        except ProtocolError as e:
            raise MalformedRequest(str(e), opaque=opaque, flag=flag) from None
    try:
        lang = get("language", "JAVA")
        language = _LANGUAGE_BY_NAME.get(lang) if type(lang) is str else None
        if language is None:
            language = _language(lang)
        remark = get("remark")
        if remark is not None and type(remark) is not str:
            if isinstance(remark, dict | list):
                raise ProtocolError("header member <remark> is not a string")
            remark = _json_scalar_to_str("remark", remark)
        ext = get("extFields")
        if ext is not None:
            if type(ext) is not dict:
                raise ProtocolError("header member <extFields> is not an object")
            for value in ext.values():
                if value.__class__ is not str:
                    ext = _coerce_ext_fields(ext)
                    break
        stype = get("serializeTypeCurrentRPC", "JSON")
        if stype != "JSON":
            _check_serialize_type(stype)
    except ProtocolError as e:
        raise MalformedRequest(str(e), opaque=opaque, flag=flag) from None
    return RemotingCommand(code, language, version, opaque, flag, remark, ext, b"", 0)


# -- ROCKETMQ binary header -------------------------------------------------------------------------

_BIN_FIXED: Final = struct.Struct(">hBhiii")  # code, language, version, opaque, flag, remark length
_INT: Final = struct.Struct(">i")
_SHORT: Final = struct.Struct(">h")


def encode_rocketmq_header(cmd: RemotingCommand) -> bytes:
    """The ROCKETMQ binary header (§1.4). Codes and versions must fit a signed short."""
    remark = cmd.remark.encode() if cmd.remark else b""
    parts: list[bytes] = []
    ext = cmd.fields()
    if ext:
        for key, value in ext.items():
            if key is None or value is None:
                continue
            k = key.encode()
            v = value.encode()
            parts.append(_SHORT.pack(len(k)) + k + _INT.pack(len(v)) + v)
    ext_bytes = b"".join(parts)
    try:
        fixed = _BIN_FIXED.pack(cmd.code, cmd.language, cmd.version, cmd.opaque, cmd.flag, len(remark))
    except struct.error as e:
        raise ProtocolError(f"command does not fit the ROCKETMQ binary header: {e}") from None
    return fixed + remark + _INT.pack(len(ext_bytes)) + ext_bytes


def _read_str(buf: memoryview, pos: int, length: int, what: str) -> str | None:
    if length == 0:
        return None
    end = pos + length
    if length < 0 or end > len(buf):
        raise ProtocolError(f"binary header {what} length {length} out of bounds")
    try:
        return str(buf[pos:end], "utf-8")
    except UnicodeDecodeError:
        raise ProtocolError(f"binary header {what} is not UTF-8") from None


def decode_rocketmq_header(data: Buffer) -> RemotingCommand:
    """Parse a ROCKETMQ binary header (serialize type 1)."""
    buf = memoryview(data)
    size = len(buf)
    if size < _BIN_FIXED.size:
        raise ProtocolError(f"binary header too short: {size} bytes")
    code, language, version, opaque, flag, remark_len = _BIN_FIXED.unpack_from(buf, 0)
    # Every fixed member fits its Java type by construction; what follows can still be wrong,
    # and then the request is answered rather than the connection closed.
    try:
        remark, ext = _binary_rest(buf, remark_len)
    except ProtocolError as e:
        raise MalformedRequest(str(e), opaque=opaque, flag=flag) from None
    return RemotingCommand(code, language, version, opaque, flag, remark, ext, b"", SerializeType.ROCKETMQ)


def _binary_rest(buf: memoryview, remark_len: int) -> tuple[str | None, dict[str, str] | None]:
    size = len(buf)
    pos = _BIN_FIXED.size
    remark = _read_str(buf, pos, remark_len, "remark")
    pos += remark_len
    if pos + 4 > size:
        raise ProtocolError("binary header truncated before extFields")
    (ext_len,) = _INT.unpack_from(buf, pos)
    pos += 4
    end = pos + ext_len
    if ext_len < 0 or end > size:
        raise ProtocolError(f"binary header extFields length {ext_len} out of bounds")
    ext: dict[str, str] | None = None
    if ext_len > 0:
        ext = {}
        while pos < end:
            if pos + 2 > end:
                raise ProtocolError("binary header extFields entry truncated")
            (klen,) = _SHORT.unpack_from(buf, pos)
            key = _read_str(buf, pos + 2, klen, "extFields key")
            pos += 2 + klen
            if pos + 4 > end:
                raise ProtocolError("binary header extFields entry truncated")
            (vlen,) = _INT.unpack_from(buf, pos)
            value = _read_str(buf, pos + 4, vlen, "extFields value")
            pos += 4 + vlen
            if pos > end:
                raise ProtocolError("binary header extFields entry overruns its map")
            if key is not None and value is not None:
                ext[key] = value
    return remark, ext


def decode_header(data: Buffer, serialize_type: int) -> RemotingCommand:
    if serialize_type == SerializeType.JSON:
        return decode_json_header(data)
    if serialize_type == SerializeType.ROCKETMQ:
        return decode_rocketmq_header(data)
    raise ProtocolError(f"unknown serialize type {serialize_type}")
