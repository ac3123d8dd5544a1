"""Message properties (PROTOCOL.md §3.3): their names (`MessageConst`), and the one definition of
their text form and its rule.

A properties string is ``name \\x01 value \\x02`` per entry. RocketMQ's reader
(MessageDecoder.string2messageProperties) cuts it at every \\x02 (the last one is optional: Java
4.9 omits it, C++ and ali-ons write it); a segment counts only when its first \\x01 is neither its
first nor its last character, so neither name nor value is empty; a later duplicate of a name
replaces an earlier one. `decode_properties` applies that rule to the whole string;
`value_span` answers one name without decoding the rest, on str (the send path), bytes or a
mapped segment (the store), and returns exactly what `decode_properties` would.

The Spark reader applies the same rule to a whole column at once with numpy (`spark/_props.py`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final, Protocol

__all__ = [
    "MAX_PROPERTIES_LENGTH",
    "NAME_VALUE_SEPARATOR",
    "PROPERTY_SEPARATOR",
    "REPLY_MESSAGE_FLAG",
    "REPLY_TOPIC_POSTFIX",
    "MessageConst",
    "SearchableBytes",
    "append_encoded",
    "append_properties",
    "decode_properties",
    "encode_properties",
    "get_property",
    "get_property_bytes",
    "needle",
    "reply_topic",
    "value_span",
]

NAME_VALUE_SEPARATOR: Final = "\x01"
PROPERTY_SEPARATOR: Final = "\x02"
MAX_PROPERTIES_LENGTH: Final = 32767  # stored behind a signed short

_SEP_STR: Final = PROPERTY_SEPARATOR
_SEP_BYTES: Final = PROPERTY_SEPARATOR.encode()


class SearchableBytes(Protocol):
    """bytes, or a mapped segment (mmap), which the codec does not import: it stays sans-I/O."""

    def __len__(self) -> int: ...
    def find(self, sub: bytes, start: int = ..., end: int = ..., /) -> int: ...
    def rfind(self, sub: bytes, start: int = ..., end: int = ..., /) -> int: ...
    def __getitem__(self, index: slice, /) -> bytes: ...


class MessageConst:
    """Property keys (MessageConst.java); users know these names."""

    PROPERTY_KEYS: Final = "KEYS"
    PROPERTY_TAGS: Final = "TAGS"
    PROPERTY_WAIT_STORE_MSG_OK: Final = "WAIT"
    PROPERTY_DELAY_TIME_LEVEL: Final = "DELAY"
    PROPERTY_RETRY_TOPIC: Final = "RETRY_TOPIC"
    PROPERTY_REAL_TOPIC: Final = "REAL_TOPIC"
    PROPERTY_REAL_QUEUE_ID: Final = "REAL_QID"
    PROPERTY_TRANSACTION_PREPARED: Final = "TRAN_MSG"
    PROPERTY_PRODUCER_GROUP: Final = "PGROUP"
    PROPERTY_MIN_OFFSET: Final = "MIN_OFFSET"
    PROPERTY_MAX_OFFSET: Final = "MAX_OFFSET"
    PROPERTY_BUYER_ID: Final = "BUYER_ID"
    PROPERTY_ORIGIN_MESSAGE_ID: Final = "ORIGIN_MESSAGE_ID"
    PROPERTY_TRANSFER_FLAG: Final = "TRANSFER_FLAG"
    PROPERTY_CORRECTION_FLAG: Final = "CORRECTION_FLAG"
    PROPERTY_MQ2_FLAG: Final = "MQ2_FLAG"
    PROPERTY_RECONSUME_TIME: Final = "RECONSUME_TIME"
    PROPERTY_MSG_REGION: Final = "MSG_REGION"
    PROPERTY_TRACE_SWITCH: Final = "TRACE_ON"
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX: Final = "UNIQ_KEY"
    PROPERTY_EXTEND_UNIQ_INFO: Final = "EXTEND_UNIQ_INFO"
    PROPERTY_MAX_RECONSUME_TIMES: Final = "MAX_RECONSUME_TIMES"
    PROPERTY_CONSUME_START_TIMESTAMP: Final = "CONSUME_START_TIME"
    PROPERTY_INNER_NUM: Final = "INNER_NUM"
    PROPERTY_INNER_BASE: Final = "INNER_BASE"
    DUP_INFO: Final = "DUP_INFO"
    PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS: Final = "CHECK_IMMUNITY_TIME_IN_SECONDS"
    PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET: Final = "TRAN_PREPARED_QUEUE_OFFSET"
    PROPERTY_TRANSACTION_ID: Final = "__transactionId__"
    PROPERTY_TRANSACTION_CHECK_TIMES: Final = "TRANSACTION_CHECK_TIMES"
    PROPERTY_INSTANCE_ID: Final = "INSTANCE_ID"
    PROPERTY_CORRELATION_ID: Final = "CORRELATION_ID"
    PROPERTY_MESSAGE_REPLY_TO_CLIENT: Final = "REPLY_TO_CLIENT"
    PROPERTY_MESSAGE_TTL: Final = "TTL"
    PROPERTY_REPLY_MESSAGE_ARRIVE_TIME: Final = "ARRIVE_TIME"
    PROPERTY_PUSH_REPLY_TIME: Final = "PUSH_REPLY_TIME"
    PROPERTY_CLUSTER: Final = "CLUSTER"
    PROPERTY_MESSAGE_TYPE: Final = "MSG_TYPE"
    PROPERTY_POP_CK: Final = "POP_CK"
    PROPERTY_POP_CK_OFFSET: Final = "POP_CK_OFFSET"
    PROPERTY_FIRST_POP_TIME: Final = "1ST_POP_TIME"
    PROPERTY_SHARDING_KEY: Final = "__SHARDINGKEY"
    PROPERTY_FORWARD_QUEUE_ID: Final = "PROPERTY_FORWARD_QUEUE_ID"
    PROPERTY_REDIRECT: Final = "REDIRECT"
    PROPERTY_INNER_MULTI_DISPATCH: Final = "INNER_MULTI_DISPATCH"
    PROPERTY_INNER_MULTI_QUEUE_OFFSET: Final = "INNER_MULTI_QUEUE_OFFSET"
    PROPERTY_TRACE_CONTEXT: Final = "TRACE_CONTEXT"
    PROPERTY_TIMER_DELAY_SEC: Final = "TIMER_DELAY_SEC"
    PROPERTY_TIMER_DELIVER_MS: Final = "TIMER_DELIVER_MS"
    PROPERTY_TIMER_DELAY_MS: Final = "TIMER_DELAY_MS"
    PROPERTY_TIMER_ENQUEUE_MS: Final = "TIMER_ENQUEUE_MS"
    PROPERTY_TIMER_DEQUEUE_MS: Final = "TIMER_DEQUEUE_MS"
    PROPERTY_TIMER_ROLL_TIMES: Final = "TIMER_ROLL_TIMES"
    PROPERTY_TIMER_OUT_MS: Final = "TIMER_OUT_MS"
    PROPERTY_TIMER_DEL_UNIQKEY: Final = "TIMER_DEL_UNIQKEY"
    PROPERTY_TIMER_DELAY_LEVEL: Final = "TIMER_DELAY_LEVEL"
    PROPERTY_BORN_HOST: Final = "__BORNHOST"
    PROPERTY_BORN_TIMESTAMP: Final = "BORN_TIMESTAMP"
    PROPERTY_CRC32: Final = "__CRC32#"
    PROPERTY_DLQ_ORIGIN_TOPIC: Final = "DLQ_ORIGIN_TOPIC"
    PROPERTY_DLQ_ORIGIN_MESSAGE_ID: Final = "DLQ_ORIGIN_MESSAGE_ID"
    PROPERTY_TRANSIENT_PREFIX: Final = "__RMQ.TRANSIENT."
    KEY_SEPARATOR: Final = " "


# Request-reply (MixAll): repliers send to <cluster>_REPLY_TOPIC, a reply carries MSG_TYPE=reply.
REPLY_TOPIC_POSTFIX: Final = "REPLY_TOPIC"
REPLY_MESSAGE_FLAG: Final = "reply"


def reply_topic(cluster: str) -> str:
    """The topic replies of ``cluster`` are sent to (MixAll.getReplyTopic)."""
    return f"{cluster}_{REPLY_TOPIC_POSTFIX}"


def encode_properties(properties: Mapping[str, str | None]) -> str:
    """`name \\x01 value \\x02` per entry, trailing separator included (C++/ali-ons style)."""
    return "".join(f"{k}\x01{v}\x02" for k, v in properties.items() if v is not None)


def append_properties(props: str, *pairs: tuple[str, str]) -> str:
    """Append entries to a properties string without re-encoding it."""
    return append_encoded(props, "".join(f"{k}\x01{v}\x02" for k, v in pairs))


def append_encoded(props: str, tail: str) -> str:
    """Join two properties strings; a stored one may lack its trailing separator, so one is put
    between the two when needed."""
    if not props or props[-1] == "\x02":
        return props + tail
    return props + "\x02" + tail


def decode_properties(text: str) -> dict[str, str]:
    """Parse a properties string by RocketMQ's rule (see the module text); later duplicates win."""
    out: dict[str, str] = {}
    if not text:
        return out
    for seg in text.split("\x02"):
        # partition splits at the first \x01; both sides non-empty is exactly the rule
        key, _, value = seg.partition("\x01")
        if key and value:
            out[key] = value
    return out


def needle(name: str) -> str:
    """What `value_span` searches for: the name and its \\x01, so a match is a whole name."""
    return name + NAME_VALUE_SEPARATOR


def value_span(
    props: str | SearchableBytes, key: str | bytes, start: int = 0, end: int | None = None
) -> tuple[int, int] | None:
    """(start, end) of the value `decode_properties` would give the name in `key` (a `needle`,
    str or bytes like `props`) within props[start:end], or None where it gives none.

    Searches backwards, so the common case (one entry of that name) costs one `rfind` and one
    `find`. A match counts only at the start of a segment ("XTAGS" never answers for "TAGS");
    an entry with an empty value does not count, and an earlier one may then answer.
    """
    if end is None:
        end = len(props)
    sep = _SEP_STR if isinstance(props, str) else _SEP_BYTES
    n = len(key)
    i = props.rfind(key, start, end)  # type: ignore[arg-type]  # key matches props' kind
    while i >= 0:
        if i == start or props[i - 1 : i] == sep:
            v0 = i + n
            v1 = props.find(sep, v0, end)  # type: ignore[arg-type]
            if v1 < 0:
                v1 = end
            if v1 > v0:
                return v0, v1
        i = props.rfind(key, start, i)  # type: ignore[arg-type]
    return None


def get_property(props: str, key: str) -> str | None:
    """The value of the name in `key` (a `needle`) in a properties string, or None.

    On the send path for every message: the usual case (the last match starts an entry and has
    a value) is answered here; anything else goes to `value_span`.
    """
    i = props.rfind(key)
    if i < 0:
        return None
    if i == 0 or props[i - 1] == "\x02":
        v0 = i + len(key)
        j = props.find("\x02", v0)
        value = props[v0:] if j < 0 else props[v0:j]
        if value:
            return value
    span = value_span(props, key)
    return None if span is None else props[span[0] : span[1]]


def get_property_bytes(props: SearchableBytes, key: bytes, start: int = 0, end: int | None = None
                       ) -> bytes | None:
    """`get_property` on stored bytes, within props[start:end]."""
    span = value_span(props, key, start, end)
    return None if span is None else props[span[0] : span[1]]
