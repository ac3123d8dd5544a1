"""Golden bytes for the stored message layout (PROTOCOL.md §3.1-3.5), built by hand with struct."""

from __future__ import annotations

import dataclasses
import struct
import zlib

import pytest

from rocketq.codec.message import (
    BLANK_MAGIC,
    MAGIC_V1,
    MAGIC_V2,
    BatchItem,
    MessageConst,
    MessageExt,
    MessageSysFlag,
    UniqIdGenerator,
    body_crc,
    decode_batch_body,
    decode_message,
    decode_messages,
    decode_offset_msg_id,
    decode_properties,
    decompress_body,
    encode_batch_body,
    encode_message,
    encode_properties,
    java_string_hash,
    offset_msg_id,
    tags_code,
)
from rocketq.errors import ProtocolError


def hand_record(
    *,
    topic: bytes = b"TopicTest",
    body: bytes = b"Hello RocketMQ",
    props: bytes = b"TAGS\x01TagA\x02KEYS\x01k1 k2\x02UNIQ_KEY\x01AC1100010001\x02",
    queue_id: int = 3,
    flag: int = 7,
    queue_offset: int = 42,
    phys: int = 1234,
    sys_flag: int = 0,
    born_ts: int = 1_700_000_000_000,
    born_host: bytes = bytes([192, 168, 1, 20]) + struct.pack(">i", 51234),
    store_ts: int = 1_700_000_000_123,
    store_host: bytes = bytes([127, 0, 0, 1]) + struct.pack(">i", 10911),
    reconsume: int = 2,
    prepared: int = 0,
    magic: int = MAGIC_V1,
) -> bytes:
    """A record written field by field from the §3.1 table, independent of the codec."""
    topic_len = struct.pack(">b", len(topic)) if magic == MAGIC_V1 else struct.pack(">h", len(topic))
    rest = (
        struct.pack(">i", queue_id)
        + struct.pack(">i", flag)
        + struct.pack(">q", queue_offset)
        + struct.pack(">q", phys)
        + struct.pack(">i", sys_flag)
        + struct.pack(">q", born_ts)
        + born_host
        + struct.pack(">q", store_ts)
        + store_host
        + struct.pack(">i", reconsume)
        + struct.pack(">q", prepared)
        + struct.pack(">i", len(body))
        + body
        + topic_len
        + topic
        + struct.pack(">h", len(props))
        + props
    )
    total = 4 + 4 + 4 + len(rest)
    crc = zlib.crc32(body) & 0x7FFFFFFF
    return struct.pack(">iii", total, magic, crc) + rest


def test_magic_constants_match_the_protocol() -> None:
    assert MAGIC_V1 == -626843481 == struct.unpack(">i", bytes.fromhex("DAA320A7"))[0]
    assert struct.unpack(">i", bytes.fromhex("DAA320AB"))[0] == MAGIC_V2
    assert struct.unpack(">i", bytes.fromhex("CBD43194"))[0] == BLANK_MAGIC


def test_decode_golden_v1_record() -> None:
    raw = hand_record()
    msg, end = decode_message(raw)
    assert end == len(raw)
    assert msg.topic == "TopicTest"
    assert msg.body == b"Hello RocketMQ"
    assert msg.queue_id == 3
    assert msg.flag == 7
    assert msg.queue_offset == 42
    assert msg.commit_log_offset == 1234
    assert msg.born_timestamp == 1_700_000_000_000
    assert msg.born_host == ("192.168.1.20", 51234)
    assert msg.store_timestamp == 1_700_000_000_123
    assert msg.store_host == ("127.0.0.1", 10911)
    assert msg.reconsume_times == 2
    assert msg.store_size == len(raw)
    assert msg.body_crc == zlib.crc32(b"Hello RocketMQ") & 0x7FFFFFFF
    assert msg.tags == "TagA"
    assert msg.keys == "k1 k2"
    assert msg.uniq_key == "AC1100010001"
    assert msg.offset_msg_id == "7F00000100002A9F00000000000004D2"
    # Java's MessageClientExt.getMsgId(): the producer's id, the offset id only without one
    assert msg.msg_id == "AC1100010001"
    assert dataclasses.replace(msg, properties={}).msg_id == msg.offset_msg_id


def test_encode_reproduces_the_golden_bytes() -> None:
    raw = hand_record()
    msg, _ = decode_message(raw)
    assert encode_message(msg) == raw


def test_fixed_part_is_84_bytes_before_the_body_length() -> None:
    raw = hand_record(body=b"", topic=b"", props=b"")
    assert len(raw) == 84 + 4 + 1 + 2
    assert struct.unpack_from(">i", raw, 84)[0] == 0


def test_v2_magic_for_long_topics() -> None:
    topic = "T" * 200
    msg = MessageExt(topic=topic, body=b"x", store_host=("127.0.0.1", 10911), born_host=("10.0.0.1", 1))
    raw = encode_message(msg)
    assert struct.unpack_from(">i", raw, 4)[0] == MAGIC_V2
    assert raw == hand_record(
        topic=topic.encode(),
        body=b"x",
        props=b"",
        queue_id=0,
        flag=0,
        queue_offset=0,
        phys=0,
        born_ts=0,
        born_host=bytes([10, 0, 0, 1]) + struct.pack(">i", 1),
        store_ts=0,
        reconsume=0,
        magic=MAGIC_V2,
    )
    back, _ = decode_message(raw)
    assert back.topic == topic


def test_short_topic_uses_v1() -> None:
    raw = encode_message(MessageExt(topic="a" * 127, body=b""))
    assert struct.unpack_from(">i", raw, 4)[0] == MAGIC_V1


def test_ipv6_hosts_follow_the_sysflag_bits() -> None:
    born6 = bytes(range(16))
    store6 = bytes(range(16, 32))
    flags = MessageSysFlag.BORNHOST_V6_FLAG | MessageSysFlag.STOREHOSTADDRESS_V6_FLAG
    raw = hand_record(
        sys_flag=flags,
        born_host=born6 + struct.pack(">i", 7),
        store_host=store6 + struct.pack(">i", 10911),
    )
    msg, _ = decode_message(raw)
    assert msg.born_host == ("1:203:405:607:809:a0b:c0d:e0f", 7)
    assert msg.store_host == ("1011:1213:1415:1617:1819:1a1b:1c1d:1e1f", 10911)
    assert len(msg.offset_msg_id) == 56
    assert encode_message(msg) == raw


def test_encode_sets_v6_bits_from_the_addresses() -> None:
    raw = encode_message(MessageExt(topic="t", body=b"b", born_host=("::1", 5), store_host=("127.0.0.1", 9)))
    sys_flag = struct.unpack_from(">i", raw, 36)[0]
    assert sys_flag & MessageSysFlag.BORNHOST_V6_FLAG
    assert not sys_flag & MessageSysFlag.STOREHOSTADDRESS_V6_FLAG
    assert decode_message(raw)[0].born_host == ("::1", 5)


def test_decode_messages_back_to_back() -> None:
    a = hand_record(queue_offset=0, body=b"first")
    b = hand_record(queue_offset=1, body=b"second", props=b"")
    msgs = decode_messages(a + b)
    assert [m.body for m in msgs] == [b"first", b"second"]
    assert msgs[1].properties == {}
    assert decode_messages(b"") == []


@pytest.mark.parametrize(
    "mutate",
    [
        lambda r: r[:-1],  # truncated
        lambda r: r[:4] + b"\x00\x00\x00\x00" + r[8:],  # bad magic
        lambda r: struct.pack(">i", 10) + r[4:],  # size too small
        lambda r: struct.pack(">i", len(r) + 5) + r[4:],  # size beyond the buffer
        lambda r: r[:84] + struct.pack(">i", 10_000) + r[88:],  # body length beyond the record
        lambda r: r + b"\x00" * 3,  # trailing garbage
    ],
)
def test_garbage_raises_protocol_error(mutate: object) -> None:
    raw = hand_record()
    with pytest.raises(ProtocolError):
        decode_messages(mutate(raw))  # type: ignore[operator]


def test_decode_rejects_bad_utf8_as_protocol_error() -> None:
    raw = hand_record(topic=b"\xff\xfe")
    with pytest.raises(ProtocolError):
        decode_message(raw)


# ---- properties ----------------------------------------------------------------------------


def test_encode_properties_writes_the_trailing_separator() -> None:
    assert encode_properties({"TAGS": "A", "KEYS": "k"}) == "TAGS\x01A\x02KEYS\x01k\x02"
    assert encode_properties({"A": None, "B": "1"}) == "B\x011\x02"  # type: ignore[dict-item]
    assert encode_properties({}) == ""


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("TAGS\x01A\x02KEYS\x01k\x02", {"TAGS": "A", "KEYS": "k"}),
        ("TAGS\x01A\x02KEYS\x01k", {"TAGS": "A", "KEYS": "k"}),  # Java 4.9 style, no trailing \x02
        ("", {}),
        ("\x01v\x02", {}),  # empty key
        ("k\x01\x02", {}),  # empty value
        ("k\x01a\x01b\x02", {"k": "a\x01b"}),  # value keeps later \x01
        ("ab\x02k\x01v\x02", {"k": "v"}),  # segment without separator skipped
        ("k\x011\x02k\x012\x02", {"k": "2"}),  # later duplicate wins
    ],
)
def test_decode_properties_tolerant_rule(text: str, expected: dict[str, str]) -> None:
    assert decode_properties(text) == expected


def test_message_const_names() -> None:
    assert MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX == "UNIQ_KEY"
    assert MessageConst.PROPERTY_WAIT_STORE_MSG_OK == "WAIT"
    assert MessageConst.PROPERTY_DELAY_TIME_LEVEL == "DELAY"
    assert MessageConst.PROPERTY_REAL_QUEUE_ID == "REAL_QID"
    assert MessageConst.PROPERTY_TRANSACTION_ID == "__transactionId__"


# ---- hashes and CRC ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("s", "h"),
    [
        ("", 0),
        ("a", 97),
        ("abc", 96354),
        ("hello", 99162322),
        ("Hello World", -862545276),
        ("TagA", 2598919),
        ("\u00e9", 233),
        ("\U0001f600", 31 * 0xD83D + 0xDE00),  # surrogate pair: two UTF-16 units
    ],
)
def test_java_string_hash(s: str, h: int) -> None:
    assert java_string_hash(s) == h


def test_tags_code() -> None:
    assert tags_code(None) == 0
    assert tags_code("") == 0
    assert tags_code("TagA") == java_string_hash("TagA")


def test_body_crc_is_masked() -> None:
    data = b"\xff" * 100
    assert body_crc(data) == zlib.crc32(data) & 0x7FFFFFFF
    assert 0 <= body_crc(data) <= 0x7FFFFFFF


def test_decompress_body() -> None:
    z = zlib.compress(b"payload" * 100)
    assert decompress_body(z, MessageSysFlag.COMPRESSED_FLAG) == b"payload" * 100
    assert decompress_body(z, MessageSysFlag.COMPRESSED_FLAG | MessageSysFlag.COMPRESSION_ZLIB) == (
        b"payload" * 100
    )
    assert decompress_body(b"raw", 0) == b"raw"
    with pytest.raises(ProtocolError):
        decompress_body(b"not zlib", MessageSysFlag.COMPRESSED_FLAG)
    with pytest.raises(ProtocolError):
        decompress_body(z, MessageSysFlag.COMPRESSED_FLAG | MessageSysFlag.COMPRESSION_LZ4)


def test_transaction_helpers() -> None:
    f = MessageSysFlag.reset_transaction_value(MessageSysFlag.COMPRESSED_FLAG | 0x4, 0x8)
    assert f == MessageSysFlag.COMPRESSED_FLAG | MessageSysFlag.TRANSACTION_COMMIT_TYPE
    assert MessageSysFlag.transaction_value(f) == 0x8


# ---- message ids ---------------------------------------------------------------------------


def test_offset_msg_id_example() -> None:
    assert offset_msg_id("127.0.0.1", 10911, 1234) == "7F00000100002A9F00000000000004D2"
    assert decode_offset_msg_id("7F00000100002A9F00000000000004D2") == ("127.0.0.1", 10911, 1234)


def test_offset_msg_id_ipv6() -> None:
    mid = offset_msg_id("::1", 10911, 5)
    assert len(mid) == 56
    assert mid == mid.upper()
    assert decode_offset_msg_id(mid) == ("::1", 10911, 5)


@pytest.mark.parametrize("bad", ["", "7F00", "Z" * 32, "7F00000100002A9F00000000000004D", "0" * 40])
def test_decode_offset_msg_id_rejects(bad: str) -> None:
    with pytest.raises(ProtocolError):
        decode_offset_msg_id(bad)


def test_uniq_id_layout() -> None:
    now = [1_700_000_000.0]
    gen = UniqIdGenerator("10.1.2.3", pid=0x1234, prefix_int=0xCAFEBABE, clock=lambda: now[0])
    a, b = gen.next_id(), gen()
    assert len(a) == 32 and a == a.upper()
    assert a[:20] == "0A010203" + "1234" + "CAFEBABE"
    assert a != b
    assert a[20:28] == b[20:28]  # same ms
    assert (int(b[28:], 16) - int(a[28:], 16)) % 0x10000 == 1
    now[0] += 1.5
    c = gen.next_id()
    assert int(c[20:28], 16) - int(a[20:28], 16) == 1500


def test_uniq_ids_are_unique() -> None:
    gen = UniqIdGenerator()
    ids = {gen.next_id() for _ in range(10_000)}
    assert len(ids) == 10_000


# ---- batch bodies --------------------------------------------------------------------------


def hand_batch_item(flag: int, body: bytes, props: bytes) -> bytes:
    size = 4 + 4 + 4 + 4 + 4 + len(body) + 2 + len(props)
    return struct.pack(">iiiii", size, 0, 0, flag, len(body)) + body + struct.pack(">h", len(props)) + props


def test_batch_body_golden() -> None:
    raw = hand_batch_item(1, b"one", b"UNIQ_KEY\x01A\x02") + hand_batch_item(0, b"", b"")
    items = decode_batch_body(raw)
    assert items == [BatchItem(1, b"one", "UNIQ_KEY\x01A\x02"), BatchItem(0, b"", "")]
    assert encode_batch_body(items) == raw


@pytest.mark.parametrize(
    "mutate",
    [
        lambda r: r[:-1],
        lambda r: struct.pack(">i", 3) + r[4:],
        lambda r: struct.pack(">i", len(r) + 10) + r[4:],
        lambda r: r[:16] + struct.pack(">i", -1) + r[20:],
        lambda r: r[:16] + struct.pack(">i", 1000) + r[20:],
        lambda r: r + b"\x00\x00",
    ],
)
def test_corrupt_batch_body(mutate: object) -> None:
    raw = hand_batch_item(1, b"abc", b"K\x01V\x02")
    with pytest.raises(ProtocolError):
        decode_batch_body(mutate(raw))  # type: ignore[operator]
