"""What the send path reads off the wire without the typed header: the fields of a one-message
SEND_MESSAGE_V2, single properties in a raw properties string, and batch bodies cut into the
columns the commit log writes (PROTOCOL.md §2.3, §3.4). Pure functions over str and bytes; the
SendMessageProcessor does the checks and the storing."""

from __future__ import annotations

import struct
from collections.abc import Callable

import numpy as np

from rocketq.codec.command import Body
from rocketq.codec.message import MessageConst, tags_code
from rocketq.codec.properties import (
    MAX_PROPERTIES_LENGTH,
    append_properties,
    decode_properties,
    encode_properties,
    get_property,
    needle,
)
from rocketq.codec.record import BATCH_ITEM_FIXED, BATCH_ITEM_HEAD
from rocketq.errors import MessageIllegal
from rocketq.store.model import PutMessageResult

__all__ = [
    "P_DELAY",
    "P_KEYS",
    "P_TAGS",
    "P_TRAN",
    "P_UNIQ",
    "P_WAIT",
    "TIMER_KEYS",
    "BatchColumns",
    "SendFields",
    "batch_properties_suffix",
    "decode_batch_body",
    "index_keys",
    "joined_msg_ids",
    "v2_fields",
]

# Property names as searched in the raw properties string (`get_property`).
P_UNIQ = needle(MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
P_TAGS = needle(MessageConst.PROPERTY_TAGS)
P_KEYS = needle(MessageConst.PROPERTY_KEYS)
P_DELAY = needle(MessageConst.PROPERTY_DELAY_TIME_LEVEL)
P_WAIT = needle(MessageConst.PROPERTY_WAIT_STORE_MSG_OK)
P_TRAN = needle(MessageConst.PROPERTY_TRANSACTION_PREPARED)
TIMER_KEYS = tuple(needle(k) for k in (MessageConst.PROPERTY_TIMER_DELIVER_MS,
                                       MessageConst.PROPERTY_TIMER_DELAY_SEC,
                                       MessageConst.PROPERTY_TIMER_DELAY_MS))

# (topic, queueId, sysFlag, bornTimestamp, flag, properties, reconsumeTimes) of a one-message send
SendFields = tuple[str, int, int, int, int, "str | None", int]
# flags, bodies, property tails (PROPERTIESLENGTH + PROPERTIES as stored), tags codes, index keys
BatchColumns = tuple[list[int], list[bytes], list[bytes], list[int], list[tuple[str, ...]]]

_BATCH_HEAD_SIZE = BATCH_ITEM_HEAD.size
_UNIQ_LEN = len(P_UNIQ)
_TAGS_LEN = len(P_TAGS)
_SHORT = struct.Struct(">h")
_I32 = struct.Struct(">i")
_UNIQ_NEEDLE = P_UNIQ.encode()
# Below this many messages a batch is cut one message at a time: the table's fixed cost (a few
# numpy calls) would pass what it saves.
_UNIFORM_MIN = 16

_I32_MIN, _I32_MAX = -(2**31), 2**31 - 1
_I64_MIN, _I64_MAX = -(2**63), 2**63 - 1


def v2_fields(ext: dict[str, str] | None) -> SendFields | None:
    """What a one-message SEND_MESSAGE_V2 stores, read straight from its extFields: (topic,
    queueId, sysFlag, bornTimestamp, flag, properties, reconsumeTimes); None for a batch or
    for anything unusual, which then goes through `SendMessageRequestHeader.from_ext_v2`.

    Returns a value only where from_ext_v2 would succeed with the same one (every @CFNotNull
    field present, every number in its Java range): it skips building the frozen header,
    about half the cost of decoding it, on the path every producer message takes.
    """
    if ext is None:
        return None
    try:
        g = ext.get
        topic = g("b")
        if topic is None or g("a") is None or g("c") is None:
            return None
        d, queue_id, sys_flag = int(ext["d"]), int(ext["e"]), int(ext["f"])
        born, flag = int(ext["g"]), int(ext["h"])
        j = g("j")
        reconsume = 0 if j is None else int(j)
        if not (_I32_MIN <= d <= _I32_MAX and _I32_MIN <= queue_id <= _I32_MAX
                and _I32_MIN <= sys_flag <= _I32_MAX and _I32_MIN <= flag <= _I32_MAX
                and _I32_MIN <= reconsume <= _I32_MAX and _I64_MIN <= born <= _I64_MAX):
            return None
        m = g("m")
        if m is not None and (m == "1" or m.lower() == "true"):
            return None
        max_times = g("l")
        if max_times is not None and not _I32_MIN <= int(max_times) <= _I32_MAX:
            return None
        return topic, queue_id, sys_flag, born, flag, g("i"), reconsume
    except (KeyError, ValueError, TypeError, AttributeError):
        return None


def index_keys(uniq: str, keys: str | None) -> tuple[str, ...]:
    """The index keys of a message: its UNIQ_KEY and each word of its KEYS."""
    if not keys:
        return (uniq,)
    words = keys.split(" ")
    if "" in words:  # doubled or edge spaces: rare, so the comprehension only runs for them
        words = [k for k in words if k]
    return (uniq, *words)


_HEX_DIGITS = np.frombuffer(b"0123456789ABCDEF", dtype=np.uint8)
_NIBBLE_SHIFTS = np.arange(60, -4, -4, dtype=np.uint64)


def joined_msg_ids(result: PutMessageResult) -> str:
    """The batch response's msgId: every record's offset msgId, comma-joined.

    Formatting a hundred ids one f-string at a time costs a quarter of a microsecond each; numpy
    writes the hex digits for the whole batch at once.
    """
    offsets = result.record_offsets
    if len(offsets) < 32:
        return result.msg_ids_text
    prefix = result.msg_id_prefix.encode()
    width = len(prefix) + 17
    out = np.empty((len(offsets), width), dtype=np.uint8)
    out[:, :len(prefix)] = np.frombuffer(prefix, dtype=np.uint8)
    nibbles = (np.asarray(offsets, dtype=np.uint64)[:, None] >> _NIBBLE_SHIFTS) & np.uint64(15)
    out[:, len(prefix):width - 1] = _HEX_DIGITS[nibbles]
    out[:, width - 1] = 0x2C  # ","
    return out.tobytes()[:-1].decode("ascii")


def decode_batch_body(body: Body, max_size: int, tags_codes: dict[str, int], new_uniq: Callable[[], str],
                      suffix: bytes = b"") -> BatchColumns:
    """Split a batch body (PROTOCOL.md §3.4) into the columns the commit log writes: flags,
    bodies, property tails (length + properties, as stored), tags codes, index keys.

    Inner properties are stored as sent (only a missing UNIQ_KEY is added), as RocketMQ does
    since ISSUE #9416. This loop is the per-message cost of SEND_BATCH_MESSAGE, so the
    common case (a UNIQ_KEY, no KEYS) takes two lookups and a cached tags code; the
    properties of every message go on as the very bytes that arrived, behind their length.
    ``suffix`` (``batch_properties_suffix``) is appended to every message's properties, as
    RocketMQ's batch encoder appends the request's own properties.
    """
    if isinstance(body, bytes | bytearray | memoryview):
        data = bytes(body) if type(body) is not bytes else body  # views: of the read they came in
    else:
        data = b"".join(body)
    end = len(data)
    if end == 0:
        raise MessageIllegal("the batch body is empty")
    if end >= _UNIFORM_MIN * BATCH_ITEM_FIXED:
        columns = _uniform_columns(data, end, max_size, tags_codes, new_uniq, suffix)
        if columns is not None:
            return columns
    return _each_message(data, end, max_size, tags_codes, new_uniq, suffix)


def _each_message(data: bytes, end: int, max_size: int, tags_codes: dict[str, int],
                  new_uniq: Callable[[], str], suffix: bytes) -> BatchColumns:
    """``decode_batch_body`` one message at a time: any batch."""
    unpack_head = BATCH_ITEM_HEAD.unpack_from
    unpack_short = _SHORT.unpack_from
    pack_short = _SHORT.pack
    suffix_len = len(suffix)
    codes = tags_codes
    flags: list[int] = []
    bodies: list[bytes] = []
    tails: list[bytes] = []
    tcodes: list[int] = []
    keys: list[tuple[str, ...]] = []
    add_flag, add_body, add_tail, add_tcode, add_keys = (
        flags.append, bodies.append, tails.append, tcodes.append, keys.append)
    pos = 0
    try:
        while pos < end:
            size, _magic, _crc, flag, body_len = unpack_head(data, pos)
            rec_end = pos + size
            b0 = pos + _BATCH_HEAD_SIZE
            b1 = b0 + body_len
            if size < BATCH_ITEM_FIXED or rec_end > end or body_len < 0 or b1 + 2 > rec_end:
                raise MessageIllegal(f"the batch body is corrupt at byte {pos}")
            if unpack_short(data, b1)[0] != rec_end - b1 - 2:
                raise MessageIllegal(f"the batch body is corrupt at byte {pos}")
            if body_len > max_size:
                raise MessageIllegal(f"the message body size over max value, MAX: {max_size}")
            props = data[b1 + 2:rec_end].decode()
            tail = data[b1:rec_end]
            # get_property's usual case, written out for UNIQ_KEY and TAGS (two calls a message)
            i = props.rfind(P_UNIQ)
            uniq = None
            if i == 0 or (i > 0 and props[i - 1] == "\x02"):
                v0 = i + _UNIQ_LEN
                j = props.find("\x02", v0)
                uniq = props[v0:] if j < 0 else props[v0:j]
            if not uniq or P_KEYS in props:
                tail, tcode, key = _batch_entry_slow(props, tail, new_uniq)
            else:
                key = (uniq,)
                i = props.rfind(P_TAGS)
                tags = None
                if i == 0 or (i > 0 and props[i - 1] == "\x02"):
                    v0 = i + _TAGS_LEN
                    j = props.find("\x02", v0)
                    tags = props[v0:] if j < 0 else props[v0:j]
                if not tags:
                    tags = get_property(props, P_TAGS) if i >= 0 else None
                if tags is None:
                    tcode = 0
                else:
                    tcode = codes.get(tags)  # type: ignore[assignment]
                    if tcode is None:
                        tcode = tags_code(tags)
                        if len(codes) < 4096:
                            codes[tags] = tcode
            if suffix:
                n = len(tail) + suffix_len
                if tail[-1] == 2 or n == suffix_len + 2:  # its own properties end with their separator
                    n -= 2
                    tail = (pack_short(n) if n <= MAX_PROPERTIES_LENGTH else b"\xff\xff") + tail[2:] + suffix
                else:
                    tail = _suffixed(tail, suffix)
            add_flag(flag)
            add_body(data[b0:b1])
            add_tail(tail)
            add_tcode(tcode)
            add_keys(key)
            pos = rec_end
    except (struct.error, UnicodeDecodeError) as exc:
        raise MessageIllegal(f"the batch body is corrupt at byte {pos}: {exc}") from None
    return flags, bodies, tails, tcodes, keys


def _uniform_columns(data: bytes, end: int, max_size: int, tags_codes: dict[str, int],
                     new_uniq: Callable[[], str], suffix: bytes) -> BatchColumns | None:
    """``decode_batch_body`` of a batch whose messages differ only in their bodies' bytes and
    their UNIQ_KEY values (what a producer's batch of like messages is), column by column; None
    for any other batch.

    The first message goes the general way (its checks, tail, tags code and keys hold for every
    message whose other bytes are the same); numpy compares the rest with it as one table of
    equal rows, and the per-message work left is three slices. The UNIQ_KEY must appear once,
    as a whole property, with a value free of separators, so each row's value sits in the same
    columns and every other lookup reads bytes all rows share.
    """
    size = _I32.unpack_from(data, 0)[0]
    if size < BATCH_ITEM_FIXED or end % size:
        return None
    n = end // size
    if n < _UNIFORM_MIN:
        return None
    first = _each_message(data[:size], size, max_size, tags_codes, new_uniq, suffix)
    b1 = _BATCH_HEAD_SIZE + _I32.unpack_from(data, 16)[0]  # the first body's end: its props' length
    props = data[b1 + 2:size]
    i = props.find(_UNIQ_NEEDLE)
    if i < 0 or (i > 0 and props[i - 1] != 2) or props.find(_UNIQ_NEEDLE, i + 1) >= 0:
        return None
    v0 = i + len(_UNIQ_NEEDLE)
    v1 = props.find(b"\x02", v0)
    if v1 < 0:
        v1 = len(props)
    if v1 == v0:
        return None
    u0, u1 = b1 + 2 + v0, b1 + 2 + v1
    rows = np.frombuffer(data, dtype=np.uint8).reshape(n, size)
    row0 = rows[0]
    uniq = rows[:, u0:u1]
    if not ((rows[:, :_BATCH_HEAD_SIZE] == row0[:_BATCH_HEAD_SIZE]).all()
            and (rows[:, b1:u0] == row0[b1:u0]).all() and (rows[:, u1:] == row0[u1:]).all()
            and ((uniq > 2) & (uniq < 0x80)).all()):
        return None
    width = u1 - u0
    text = uniq.tobytes().decode("ascii")
    ids = [text[k:k + width] for k in range(0, n * width, width)]
    tail0 = first[2][0]
    tlen = len(tail0)
    table = np.empty((n, tlen), dtype=np.uint8)
    table[:] = np.frombuffer(tail0, dtype=np.uint8)
    table[:, u0 - b1:u1 - b1] = uniq  # a suffix goes after the message's own properties
    joined = table.tobytes()
    more = first[4][0][1:]  # the words of KEYS, the same in every message
    keys: list[tuple[str, ...]] = [(u,) for u in ids] if not more else [(u, *more) for u in ids]
    return ([first[0][0]] * n, [data[k + _BATCH_HEAD_SIZE:k + b1] for k in range(0, end, size)],
            [joined[k:k + tlen] for k in range(0, n * tlen, tlen)], [first[3][0]] * n, keys)


def batch_properties_suffix(header_props: str, cluster: str) -> bytes:
    """What RocketMQ appends to every message of a batch: the request's own properties with
    CLUSTER put (SendMessageProcessor.sendBatchMessage, then the batch encoder's batchPropData).

    A UNIQ_KEY there is left out: RocketMQ would give every message that one id (the later
    key wins), while this broker answers and indexes each message by its own.
    """
    props = decode_properties(header_props)
    props.pop(MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX, None)
    props["CLUSTER"] = cluster
    raw = encode_properties(props).encode()
    if len(raw) > MAX_PROPERTIES_LENGTH:
        raise MessageIllegal("the properties of the batch request are too long")
    return raw


def _suffixed(tail: bytes, suffix: bytes) -> bytes:
    """A property tail (length + properties) with ``suffix`` appended, a separator between the two
    when the message's own properties lack their trailing one (as RocketMQ's encoder does)."""
    if len(tail) > 2 and tail[-1] != 0x02:
        suffix = b"\x02" + suffix
    n = len(tail) - 2 + len(suffix)
    # Past 32 KB the length does not fit its short: the store refuses the tail by its size.
    return (_SHORT.pack(n) if n <= MAX_PROPERTIES_LENGTH else b"\xff\xff") + tail[2:] + suffix


def _batch_entry_slow(props: str, tail: bytes, new_uniq: Callable[[], str]
                      ) -> tuple[bytes, int, tuple[str, ...]]:
    """One batch message's (property tail, tags code, index keys) the general way: names
    repeated or inside values, KEYS, a missing UNIQ_KEY (added here, as Java does)."""
    uniq = get_property(props, P_UNIQ)
    if not uniq:
        uniq = new_uniq()
        props = append_properties(props, ("UNIQ_KEY", uniq))
        raw = props.encode()
        # Past 32 KB the length does not fit its short: the store refuses the tail by its size.
        tail = (_SHORT.pack(len(raw)) if len(raw) <= MAX_PROPERTIES_LENGTH else b"\xff\xff") + raw
    tags = get_property(props, P_TAGS)
    keys = (uniq,) if P_KEYS not in props else index_keys(uniq, get_property(props, P_KEYS))
    return tail, tags_code(tags), keys
