"""Java's fastjson dialect: the one reader of the JSON superset Java peers write, and the one writer
of its MessageQueue-keyed maps.

fastjson writes a ``Map<MessageQueue, V>`` with the queue *object* as the key
(``{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"t"}:12}}``) and a ``Map<Integer|Long, V>``
with bare numbers as keys (``{0:"addr"}``). Neither is JSON, and both sit inside ordinary JSON: route
data, ResetOffsetBody, TopicStatsTable, ConsumeStats(List). :func:`loads` reads that superset: JSON
plus object, array and number keys. A non-string key comes back as :class:`ObjectKey` (hashable,
holding the parsed key), so callers turn it into the value type they expect (e.g. a MessageQueue);
with ``number_keys_as_text`` a bare number key comes back as its text instead, which is what a
body whose map keys are declared as strings or ints expects (``{0:"a"}`` reads as ``{"0": "a"}``).

Plain JSON, the common case, goes straight to orjson, and so does JSON whose only extension is
bare integer keys once they are quoted (when read as text). The rest of the superset is read by
a small recursive-descent reader: bodies that need it are small. Anything else raises
``ProtocolError``.

Writing: :func:`mq_keys` / :func:`mq_key` spell a MessageQueue key the way fastjson does (members
in name order, compact), and :func:`dumps_mq_table` wraps ``key:value`` pairs into the body around
them. Java's fastjson reads that back (it reads its own output), and so does :func:`loads`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

import orjson

from rocketq.errors import ProtocolError

__all__ = ["ObjectKey", "dumps_mq_table", "loads", "mq_key", "mq_keys"]

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
    __slots__ = ("data", "number_keys_as_text", "pos")

    def __init__(self, data: bytes, number_keys_as_text: bool) -> None:
        self.data = data
        self.pos = 0
        self.number_keys_as_text = number_keys_as_text

    def fail(self, what: str) -> ProtocolError:
        return ProtocolError(f"bad JSON body at byte {self.pos}: {what}")

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
        pos = data.find(b'"', start + 1)
        while True:
            if pos < 0:
                raise self.fail("unterminated string")
            escapes = 0  # an odd run of backslashes before the quote escapes it
            while data[pos - 1 - escapes] == 0x5C:
                escapes += 1
            if not escapes % 2:
                break
            pos = data.find(b'"', pos + 1)
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
        value = self.value()
        if self.number_keys_as_text and type(value) is int:
            return self.data[start : self.pos].decode()
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


# A bare integer map key right after `{` or `,`, or a whole string literal (left alone): quoting
# the keys this finds turns fastjson's commonest extension into JSON in one C-level pass, so a
# large document (a Java broker's consumerOffset.json) never goes through the reader below.
_BARE_INT_KEY: Final = re.compile(rb'"(?:[^"\\]|\\.)*"|([{,]\s*)(-?\d+)(\s*:)')


def _quote_int_key(m: re.Match[bytes]) -> bytes:
    if m.group(2) is None:
        return m.group(0)  # a string literal
    return m.group(1) + b'"' + m.group(2) + b'"' + m.group(3)


def loads(data: bytes | bytearray | memoryview | str, *, number_keys_as_text: bool = False) -> Any:
    """Parse JSON or fastjson's non-string-key superset; ``ProtocolError`` on anything else."""
    try:
        return orjson.loads(data)  # the common case: it is plain JSON after all
    except orjson.JSONDecodeError:
        pass
    raw = data.encode() if isinstance(data, str) else bytes(data)
    if number_keys_as_text:
        try:
            return orjson.loads(_BARE_INT_KEY.sub(_quote_int_key, raw))
        except orjson.JSONDecodeError:
            pass  # object keys, or not JSON at all: the reader tells which
    reader = _Reader(raw, number_keys_as_text)
    out = reader.value()
    reader.skip_ws()
    if reader.pos != len(raw):
        raise reader.fail("trailing data")
    return out


# -- writing ----------------------------------------------------------------------------------------


def mq_keys(topic: str, broker_name: str) -> Callable[[int], bytes]:
    """queue id -> that queue as fastjson writes a map key: ``{"brokerName":..,"queueId":..,"topic":..}``.

    The escaped names are encoded once here, not per queue: a consume-stats body has one key per
    queue of every topic the group reads.
    """
    head = b'{"brokerName":' + orjson.dumps(broker_name) + b',"queueId":'
    tail = b',"topic":' + orjson.dumps(topic) + b"}"

    def key(queue_id: int) -> bytes:
        return b"%b%d%b" % (head, queue_id, tail)

    return key


def mq_key(topic: str, broker_name: str, queue_id: int) -> bytes:
    """One MessageQueue as fastjson writes it as a map key (the spelling of :func:`mq_keys`)."""
    names = (orjson.dumps(broker_name), queue_id, orjson.dumps(topic))
    return b'{"brokerName":%b,"queueId":%d,"topic":%b}' % names


def dumps_mq_table(
    entries: Iterable[tuple[bytes, bytes]],
    members: Mapping[str, bytes] | None = None,
    name: str = "offsetTable",
) -> bytes:
    """A body whose member ``name`` is a fastjson ``Map<MessageQueue, V>``.

    ``entries`` are (key from :func:`mq_keys`, the value's JSON), written in the order given;
    ``members`` are the body's other members as JSON. Members go in name order, as fastjson
    writes a bean's fields.
    """
    table = orjson.dumps(name) + b':{' + b",".join([k + b":" + v for k, v in entries]) + b"}"
    if not members:
        return b"{" + table + b"}"
    parts = [(name, table)]
    parts.extend((k, orjson.dumps(k) + b":" + v) for k, v in members.items())
    return b"{" + b",".join([part for _, part in sorted(parts)]) + b"}"
