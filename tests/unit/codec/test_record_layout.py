"""The record layout table (codec/record.py) against records the encoder writes: every offset,
struct and numpy field reads back the field it names, for IPv4 and IPv6 hosts."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from rocketq.codec.message import MessageExt, decode_message, encode_message
from rocketq.codec.record import (
    BODY_CRC_AT,
    FIXED_V4,
    HEAD,
    MAGIC_AT,
    MAGIC_V1,
    MIN_RECORD_LENGTH,
    PHYS_OFFSET_AT,
    QUEUE_ID_AT,
    QUEUE_OFFSET_AT,
    SIZE_AT,
    SYS_FLAG_AT,
    body_at,
    numpy_fields,
    record_length,
    store_timestamp_at,
)


def _msg(born: str = "10.1.2.3", store: str = "192.168.0.9") -> MessageExt:
    return MessageExt(
        topic="T", body=b"payload", flag=7, properties={"TAGS": "a"}, queue_id=3, queue_offset=11,
        commit_log_offset=4096, sys_flag=0, born_timestamp=1_700_000_000_001, born_host=(born, 40000),
        store_timestamp=1_700_000_000_002, store_host=(store, 10911), reconsume_times=2,
        prepared_transaction_offset=0,
    )


@pytest.mark.parametrize(("born", "store"), [("10.1.2.3", "192.168.0.9"), ("::1", "192.168.0.9"),
                                             ("10.1.2.3", "fe80::2"), ("::1", "fe80::2")])
def test_offsets_read_the_fields_they_name(born: str, store: str) -> None:
    raw = encode_message(_msg(born, store))
    msg, _ = decode_message(raw)

    def i32(at: int) -> int:
        return int(struct.unpack_from(">i", raw, at)[0])

    def i64(at: int) -> int:
        return int(struct.unpack_from(">q", raw, at)[0])

    assert i32(SIZE_AT) == len(raw) == record_length(7, 1, len(b"TAGS\x01a\x02"), msg.sys_flag)
    assert i32(MAGIC_AT) == MAGIC_V1 and i32(BODY_CRC_AT) == msg.body_crc
    assert i32(QUEUE_ID_AT) == 3 and i64(QUEUE_OFFSET_AT) == 11 and i64(PHYS_OFFSET_AT) == 4096
    sys_flag = i32(SYS_FLAG_AT)
    assert sys_flag == msg.sys_flag
    assert i64(store_timestamp_at(sys_flag)) == 1_700_000_000_002
    at = body_at(sys_flag)
    assert i32(at - 4) == 7 and raw[at : at + 7] == b"payload"
    assert HEAD.unpack_from(raw)[:2] == (len(raw), MAGIC_V1)
    # the vectorised forms give the same offsets as the scalar ones
    flags = np.array([sys_flag, 0], dtype=np.int64)
    assert body_at(flags).tolist() == [at, body_at(0)]
    assert store_timestamp_at(flags).tolist() == [store_timestamp_at(sys_flag), store_timestamp_at(0)]


def test_struct_and_numpy_views_of_the_ipv4_fixed_part_agree() -> None:
    raw = encode_message(_msg())
    values = FIXED_V4.unpack_from(raw)
    row = np.frombuffer(raw, dtype=np.dtype(numpy_fields()), count=1)[0]
    assert np.dtype(numpy_fields()).itemsize == FIXED_V4.size == body_at(0)
    assert [int(v) for v in row.tolist()] == list(values)
    names = [name for name, _ in numpy_fields()]
    fields = dict(zip(names, values, strict=True))
    assert fields["born_host"] == (0x0A010203 << 32) | 40000
    assert fields["store_host"] == (0xC0A80009 << 32) | 10911
    assert fields["body_len"] == 7 and fields["reconsume_times"] == 2
    assert [name for name, _ in numpy_fields("born_host")] == names[: names.index("born_host")]
    assert FIXED_V4.size + 3 == MIN_RECORD_LENGTH
