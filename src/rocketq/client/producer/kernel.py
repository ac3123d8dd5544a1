"""Turning user messages into send requests: properties, UNIQ_KEY, compression, batch bodies and
the SEND_MESSAGE_V2 header (RocketMQ's DefaultMQProducerImpl.sendKernelImpl, minus the I/O).

Pure functions of the message and the producer config; the producer calls them once per message,
and only the queue id / broker name of the header change between retries. This is the per-message
cost of producing, so the common cases are written out rather than built from general helpers.
"""

from __future__ import annotations

import itertools
import random
import struct
import time
import zlib
from collections.abc import Sequence
from typing import Final

from rocketq.client.config import wrap_namespace
from rocketq.client.message import Message
from rocketq.client.producer.config import ProducerConfig
from rocketq.codec.codes import RequestCode
from rocketq.codec.message import MAX_PROPERTIES_LENGTH, MessageSysFlag, UniqIdGenerator
from rocketq.codec.properties import REPLY_MESSAGE_FLAG
from rocketq.codec.record import BATCH_ITEM_FIXED, BATCH_ITEM_HEAD
from rocketq.errors import InvalidMessage, ProtocolError

__all__ = [
    "PreparedSend",
    "SendEncoder",
    "UniqKeys",
    "message_properties",
]

PROPERTY_UNIQ_KEY: Final = "UNIQ_KEY"
PROPERTY_RECONSUME_TIME: Final = "RECONSUME_TIME"
PROPERTY_MAX_RECONSUME_TIMES: Final = "MAX_RECONSUME_TIMES"
RETRY_GROUP_TOPIC_PREFIX: Final = "%RETRY%"
# Set through Message fields, never copied from Message.properties.
_FIELD_KEYS: Final = frozenset({"TAGS", "KEYS", "DELAY", "WAIT", PROPERTY_UNIQ_KEY})
_COMPRESSED_ZLIB: Final = MessageSysFlag.COMPRESSED_FLAG | MessageSysFlag.COMPRESSION_ZLIB
_HEX2: Final = tuple(f"{i:02X}" for i in range(256))
_SHORT_PACK: Final = struct.Struct(">h").pack
_ITEM_HEAD: Final = BATCH_ITEM_HEAD.pack
_SEND_V2: Final = int(RequestCode.SEND_MESSAGE_V2)
_SEND_BATCH: Final = int(RequestCode.SEND_BATCH_MESSAGE)
# A reply of request-reply (MSG_TYPE=reply) goes with its own code, which the broker pushes to the
# requester instead of storing for consumers (MQClientAPIImpl.sendMessage).
_SEND_REPLY_V2: Final = int(RequestCode.SEND_REPLY_MESSAGE_V2)


class UniqKeys:
    """UNIQ_KEYs in MessageClientIDSetter's layout (PROTOCOL.md §3.5), cheaply.

    An id is prefix (ip, pid, random) + ms-since-month (8 hex) + counter (4 hex). The codec's
    generator computes the first two parts, once per millisecond; each id then only adds the
    counter of this object. The generator is private to this object, so no other id shares its
    prefix, and ids stay unique while fewer than 65,536 are made in one millisecond (as in Java).
    """

    __slots__ = ("_counter", "_gen", "_head", "_ms")

    def __init__(self, client_ip: str) -> None:
        try:
            self._gen = UniqIdGenerator(ip=client_ip)
        except ProtocolError:  # a client_ip that is a host name, not an address
            self._gen = UniqIdGenerator()
        self._counter = itertools.count(random.getrandbits(16))
        self._ms = -1
        self._head = ""

    def _current_head(self) -> str:
        ms = time.time_ns() // 1_000_000
        if ms != self._ms:
            self._ms = ms
            self._head = self._gen.next_id()[:-4]
        return self._head

    def next_id(self) -> str:
        # Written out (no method call, no format spec): this runs once per message sent.
        ms = time.time_ns() // 1_000_000
        if ms != self._ms:
            self._ms = ms
            self._head = self._gen.next_id()[:-4]
        v = next(self._counter)
        return f"{self._head}{_HEX2[(v >> 8) & 0xFF]}{_HEX2[v & 0xFF]}"

    def next_ids(self, n: int) -> list[str]:
        head = self._current_head()
        counter = self._counter
        return [f"{head}{next(counter) & 0xFFFF:04X}" for _ in range(n)]


class PreparedSend:
    """One send, ready for the wire except the target queue (internal to the producer).

    ``ext`` is the SEND_MESSAGE_V2 header; ``e`` (queue id) and ``n`` (broker name) are set per
    attempt by ``ext_for``, in place: a request's header is encoded when it is written, so the
    next attempt may reuse the dict. ``topic`` is the user's topic (no namespace), as the
    SendResult reports it.
    """

    # A plain slotted class, not a frozen dataclass: one is built per message on the hot path.
    __slots__ = ("batch", "body", "code", "ext", "msg_id", "topic")

    def __init__(
        self, topic: str, body: bytes, ext: dict[str, str], msg_id: str, batch: bool = False,
        code: int = _SEND_V2,
    ) -> None:
        self.topic = topic
        self.body = body
        self.ext = ext
        self.msg_id = msg_id
        self.batch = batch
        self.code = _SEND_BATCH if batch else code  # the request code of every attempt

    def ext_for(self, queue_id: int, broker_name: str) -> dict[str, str]:
        ext = self.ext
        ext["e"] = str(queue_id)
        ext["n"] = broker_name
        return ext


def message_properties(msg: Message, uniq: str | None, *, wait: bool = True) -> tuple[str, dict[str, str]]:
    """The properties string of ``msg`` (trailing separator included) and the header extras it
    moves out of the properties (reconsume counts of a %RETRY% re-send)."""
    extras: dict[str, str] = {}
    parts: list[str] = []
    props = msg.properties
    if props:
        retry = msg.topic.startswith(RETRY_GROUP_TOPIC_PREFIX)
        for key, value in props.items():
            if key in _FIELD_KEYS or value is None:
                continue
            if retry and key == PROPERTY_RECONSUME_TIME:
                extras["j"] = value
                continue
            if retry and key == PROPERTY_MAX_RECONSUME_TIMES:
                extras["l"] = value
                continue
            parts.append(f"{key}\x01{value}\x02")
    if msg.tags:
        parts.append(f"TAGS\x01{msg.tags}\x02")
    keys = msg.keys_text
    if keys:
        parts.append(f"KEYS\x01{keys}\x02")
    if msg.delay_level > 0:
        parts.append(f"DELAY\x01{msg.delay_level}\x02")
    if wait:
        parts.append("WAIT\x01true\x02" if msg.wait_store_msg_ok else "WAIT\x01false\x02")
    if uniq:
        parts.append(f"UNIQ_KEY\x01{uniq}\x02")
    return _checked("".join(parts)), extras


# A UTF-8 character is at most 3 bytes: only a string longer than this needs encoding to be measured.
_MAX_PROPS_CHARS: Final = MAX_PROPERTIES_LENGTH // 3


def _checked(properties: str) -> str:
    if len(properties) > _MAX_PROPS_CHARS and len(properties.encode()) > MAX_PROPERTIES_LENGTH:
        raise InvalidMessage(f"the message properties length over max value, MAX: {MAX_PROPERTIES_LENGTH}")
    return properties


def _plain_properties(msg: Message, uniq: str) -> str:
    # message_properties for the common message: no user properties, no delay.
    tags = msg.tags
    keys = msg.keys
    if keys is not None and not isinstance(keys, str):
        keys = " ".join(keys)
    wait = "true" if msg.wait_store_msg_ok else "false"
    if tags:
        if keys:
            return f"TAGS\x01{tags}\x02KEYS\x01{keys}\x02WAIT\x01{wait}\x02UNIQ_KEY\x01{uniq}\x02"
        return f"TAGS\x01{tags}\x02WAIT\x01{wait}\x02UNIQ_KEY\x01{uniq}\x02"
    if keys:
        return f"KEYS\x01{keys}\x02WAIT\x01{wait}\x02UNIQ_KEY\x01{uniq}\x02"
    return f"WAIT\x01{wait}\x02UNIQ_KEY\x01{uniq}\x02"


# What makes two batch items of messages without properties alike outside their bodies and ids:
# tags, keys, waitStoreMsgOK, flag, body length, id length.
_ItemShape = tuple[str | None, str | None, bool, int, int, int]


class SendEncoder:
    """Builds the PreparedSend of messages for one producer (its config folded into constants)."""

    __slots__ = ("_compress_over", "_create_key", "_group", "_item_parts", "_level", "_max_size",
                 "_namespace", "_queue_nums", "_unit", "config", "uniq_keys")

    def __init__(self, config: ProducerConfig, uniq_keys: UniqKeys | None = None) -> None:
        self.config = config
        self._group = config.with_namespace(config.producer_group)
        self._create_key = config.create_topic_key
        self._queue_nums = str(config.default_topic_queue_nums)
        self._unit = "true" if config.unit_mode else "false"
        self._compress_over = config.compress_msg_body_over_howmuch
        self._level = config.compress_level
        self._max_size = config.max_message_size
        self._namespace = config.namespace
        self.uniq_keys = uniq_keys or UniqKeys(config.client_ip)
        # (tags, keys, wait, flag, body length, id length) -> the fixed parts of a batch item
        self._item_parts: dict[_ItemShape, tuple[bytes, bytes]] = {}

    def _header(self, topic: str, sys_flag: int, flag: int, properties: str, batch: bool) -> dict[str, str]:
        # The V2 keys of SendMessageRequestHeader (see its V2_KEYS), written out directly:
        # building and encoding the frozen header costs more than the rest of a send.
        return {
            "a": self._group,
            "b": topic if not self._namespace else wrap_namespace(self._namespace, topic),
            "c": self._create_key,
            "d": self._queue_nums,
            "f": "0" if not sys_flag else str(sys_flag),
            "g": str(int(time.time() * 1000)),
            "h": "0" if not flag else str(flag),
            "i": properties,
            "k": self._unit,
            "m": "true" if batch else "false",
        }

    def single(self, msg: Message) -> PreparedSend:
        """UNIQ_KEY (kept if the message has one), properties, zlib over the size limit."""
        extras = None
        code = _SEND_V2
        if msg.properties or msg.delay_level > 0:
            uniq = msg.properties.get(PROPERTY_UNIQ_KEY) or self.uniq_keys.next_id()
            properties, extras = message_properties(msg, uniq)
            if msg.properties.get("MSG_TYPE") == REPLY_MESSAGE_FLAG:
                code = _SEND_REPLY_V2
        else:
            uniq = self.uniq_keys.next_id()
            properties = _checked(_plain_properties(msg, uniq))
        body = msg.body if type(msg.body) is bytes else bytes(msg.body)
        sys_flag = 0
        if len(body) > self._compress_over:
            body = zlib.compress(body, self._level)
            sys_flag = _COMPRESSED_ZLIB
        ext = self._header(msg.topic, sys_flag, msg.flag, properties, False)
        if extras:
            ext.update(extras)
        return PreparedSend(msg.topic, body, ext, uniq, code=code)

    def batch(self, msgs: Sequence[Message]) -> PreparedSend:
        """SEND_BATCH_MESSAGE: every message keeps its own UNIQ_KEY; the header carries none.

        Apache's broker appends the request's own properties to every message of the batch (the
        later key wins), so a UNIQ_KEY there would give all of them one id; Java sets none.

        Batches are never compressed (as in RocketMQ); the caller has run ``check_batch``.
        """
        items = [self.batch_item(msg) for msg in msgs]
        first = msgs[0]
        data = [item[0] for item in items]
        return self.batch_of(first.topic, first.wait_store_msg_ok, data, [item[1] for item in items])

    def batch_item(self, msg: Message) -> tuple[bytes, str]:
        """One message as an item of a SEND_BATCH_MESSAGE body, and its UNIQ_KEY (kept if it has one)."""
        if msg.properties:
            uniq = msg.properties.get(PROPERTY_UNIQ_KEY) or self.uniq_keys.next_id()
            props = message_properties(msg, uniq)[0].encode()
        else:
            uniq = self.uniq_keys.next_id()
            body = msg.body
            keys = msg.keys
            if type(body) is bytes and (keys is None or type(keys) is str):
                # The common message: everything but the body and the UNIQ_KEY value is the same
                # as the previous one's, so the item's fixed parts come from a table.
                shape: _ItemShape = (msg.tags, keys, msg.wait_store_msg_ok, msg.flag, len(body), len(uniq))
                parts = self._item_parts.get(shape)
                if parts is None:
                    parts = self._plain_item_parts(msg, uniq, shape)
                return b"".join((parts[0], body, parts[1], uniq.encode(), b"\x02")), uniq
            text = _plain_properties(msg, uniq)
            props = (text if len(text) <= _MAX_PROPS_CHARS else _checked(text)).encode()
        body = msg.body
        blen = len(body)
        # a SEND_BATCH_MESSAGE item (codec/record.py); the client writes 0 for MAGIC and BODYCRC
        return b"".join((
            _ITEM_HEAD(BATCH_ITEM_FIXED + blen + len(props), 0, 0, msg.flag, blen),
            body if type(body) is bytes else bytes(body),
            _SHORT_PACK(len(props)),
            props,
        )), uniq

    def _plain_item_parts(self, msg: Message, uniq: str, shape: _ItemShape) -> tuple[bytes, bytes]:
        """What a batch item of a message without properties holds besides its body and its
        UNIQ_KEY value: the item head, and the properties' length and text up to that value."""
        text = _plain_properties(msg, uniq)
        props = (text if len(text) <= _MAX_PROPS_CHARS else _checked(text)).encode()
        blen = len(msg.body)
        parts = (_ITEM_HEAD(BATCH_ITEM_FIXED + blen + len(props), 0, 0, msg.flag, blen),
                 _SHORT_PACK(len(props)) + props[:-len(uniq.encode()) - 1])
        table = self._item_parts
        if len(table) >= 256:  # bounded: a producer of many body sizes keeps only the recent ones
            table.clear()
        table[shape] = parts
        return parts

    def batch_of(self, topic: str, wait: bool, items: Sequence[bytes], ids: Sequence[str]) -> PreparedSend:
        """The SEND_BATCH_MESSAGE of items made by ``batch_item`` (all of ``topic``)."""
        data = b"".join(items)
        if len(data) > self._max_size:
            raise InvalidMessage(f"the message body size over max value, MAX: {self._max_size}")
        ext = self._header(topic, 0, 0, "WAIT\x01true\x02" if wait else "WAIT\x01false\x02", True)
        return PreparedSend(topic, data, ext, ",".join(ids), batch=True)
