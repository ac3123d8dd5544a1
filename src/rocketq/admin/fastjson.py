"""Read the JSON dialect Java brokers answer admin requests in.

fastjson writes a ``Map<MessageQueue, V>`` with the queue *object* as the key
(``{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"t"}:12}}``) and a ``Map<Long, V>`` with bare
numbers as keys (``{0:"addr"}``). Neither is JSON, and both sit inside ordinary JSON in bodies such as
ResetOffsetBody, ConsumeStatsList or ConsumeStats. :func:`loads` reads that superset: it is JSON plus
object, array and number keys. A non-string key comes back as :class:`ObjectKey` (hashable, holding
the parsed key), so callers turn it into the value type they expect (e.g. a MessageQueue).

Admin bodies are small: this is a plain recursive-descent reader, written for clarity not speed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from rocketq.errors import ProtocolError

__all__ = ["ObjectKey", "loads"]

_WS = b" \t\r\n"
_SCALAR_END = b",:}] \t\r\n"


@dataclass(frozen=True, slots=True)
class ObjectKey:
    """A map key that was not a string: ``value`` is the parsed key (dict, list, int, ...)."""

    raw: bytes

    @property
    def value(self) -> Any:
        return loads(self.raw)


class _Reader:
    __slots__ = ("data", "pos")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def fail(self, what: str) -> ProtocolError:
        return ProtocolError(f"bad admin body at byte {self.pos}: {what}")

    def skip_ws(self) -> None:
        data, pos = self.data, self.pos
        while pos < len(data) and data[pos] in _WS:
            pos += 1
        self.pos = pos

    def peek(self) -> int:
        self.skip_ws()
        if self.pos >= len(self.data):
            raise self.fail("unexpected end")
        return self.data[self.pos]

    def expect(self, char: bytes) -> None:
        if self.peek() != char[0]:
            raise self.fail(f"expected {char.decode()!r}")
        self.pos += 1

    def value(self) -> Any:
        c = self.peek()
        if c == ord("{"):
            return self.obj()
        if c == ord("["):
            return self.array()
        if c == ord('"'):
            return self.string()
        start = self.pos
        end = start
        data = self.data
        while end < len(data) and data[end] not in _SCALAR_END:
            end += 1
        if end == start:
            raise self.fail("expected a value")
        self.pos = end
        try:
            return orjson.loads(data[start:end])
        except orjson.JSONDecodeError:
            raise self.fail(f"bad scalar {data[start:end][:20]!r}") from None

    def string(self) -> str:
        data = self.data
        start = self.pos
        pos = start + 1
        while True:
            if pos >= len(data):
                raise self.fail("unterminated string")
            c = data[pos]
            if c == 0x5C:  # backslash: skip the escaped character
                pos += 2
                continue
            if c == 0x22:
                break
            pos += 1
        self.pos = pos + 1
        try:
            text: str = orjson.loads(data[start : pos + 1])
        except orjson.JSONDecodeError:
            raise self.fail("bad string") from None
        return text

    def key(self) -> Any:
        c = self.peek()
        if c == ord('"'):
            return self.string()
        start = self.pos
        self.value()
        return ObjectKey(self.data[start : self.pos])

    def obj(self) -> dict[Any, Any]:
        self.expect(b"{")
        out: dict[Any, Any] = {}
        if self.peek() == ord("}"):
            self.pos += 1
            return out
        while True:
            k = self.key()
            self.expect(b":")
            out[k] = self.value()
            c = self.peek()
            self.pos += 1
            if c == ord("}"):
                return out
            if c != ord(","):
                raise self.fail("expected ',' or '}'")

    def array(self) -> list[Any]:
        self.expect(b"[")
        out: list[Any] = []
        if self.peek() == ord("]"):
            self.pos += 1
            return out
        while True:
            out.append(self.value())
            c = self.peek()
            self.pos += 1
            if c == ord("]"):
                return out
            if c != ord(","):
                raise self.fail("expected ',' or ']'")


def loads(data: bytes | bytearray | memoryview | str) -> Any:
    """Parse JSON or fastjson's non-string-key superset; ``ProtocolError`` on anything else."""
    raw = data.encode() if isinstance(data, str) else bytes(data)
    try:
        return orjson.loads(raw)  # the common case: it is plain JSON after all
    except orjson.JSONDecodeError:
        pass
    reader = _Reader(raw)
    out = reader.value()
    reader.skip_ws()
    if reader.pos != len(raw):
        raise reader.fail("trailing data")
    return out
