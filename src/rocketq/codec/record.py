"""The stored message record (PROTOCOL.md §3.1): the one definition of its layout.

Every reader and writer of records takes offsets, struct formats and field tables from here: the
codec's decoder and encoder (`message.py`), the commit log's writer and point reads
(`store/commitlog.py`), start-up recovery's vectorised checks (`store/recovery.py`) and the
Spark reader (`spark/_decode.py`). Big-endian throughout::

    at  field                    type
     0  TOTALSIZE                i4
     4  MAGICCODE                i4     MAGIC_V1, or MAGIC_V2 when the topic needs a 2-byte length
     8  BODYCRC                  i4     crc32(body) & 0x7FFFFFFF
    12  QUEUEID                  i4
    16  FLAG                     i4
    20  QUEUEOFFSET              i8
    28  PHYSICALOFFSET           i8
    36  SYSFLAG                  i4     §3.2; its 0x10 / 0x20 bits make born / store host IPv6
    40  BORNTIMESTAMP            i8
    48  BORNHOST                 ip (4 | 16 bytes) + port i4
     .  STORETIMESTAMP           i8
     .  STOREHOST                ip (4 | 16 bytes) + port i4
     .  RECONSUMETIMES           i4
     .  PREPAREDTRANSACTIONOFFSET i8
     .  BODYLENGTH               i4
     .  BODY
     .  TOPICLENGTH              V1: u1, V2: i2
     .  TOPIC
     .  PROPERTIESLENGTH         i2     properties text, §3.3 (`codec/properties.py`)
     .  PROPERTIES

Readers come in two kinds, so the fixed part is given two ways: `struct.Struct`s for per-record
Python code, and `FIXED_V4_FIELDS` (name, big-endian type) for numpy structured dtypes
(`numpy_fields`). This module does not import numpy: the client's import stays light.

A SEND_BATCH_MESSAGE body (§3.4) holds its messages in a cut-down form of the same record
(`BATCH_ITEM_HEAD`).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from functools import lru_cache
from typing import TYPE_CHECKING, Final, overload

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = [
    "BATCH_ITEM_FIXED",
    "BATCH_ITEM_HEAD",
    "BLANK_MAGIC",
    "BODY_AT_V4",
    "BODY_CRC_AT",
    "BORN_HOST_AT",
    "BORN_TIMESTAMP_AT",
    "FIXED_V4",
    "FIXED_V4_FIELDS",
    "HEAD",
    "HOST_LEN_V4",
    "HOST_LEN_V6",
    "MAGIC_AT",
    "MAGIC_V1",
    "MAGIC_V2",
    "MAX_TOPIC_LENGTH_V1",
    "MIN_RECORD_LENGTH",
    "PHYS_OFFSET_AT",
    "QUEUE_ID_AT",
    "QUEUE_OFFSET_AT",
    "SIZE_AT",
    "SIZE_MAGIC",
    "STORE_TIMESTAMP_AT_V4",
    "SYS_FLAG_AT",
    "V6_HOST_EXTRA",
    "MessageSysFlag",
    "batch_head_struct",
    "body_at",
    "host_bits_struct",
    "numpy_fields",
    "properties_span",
    "properties_spans",
    "record_length",
    "record_struct",
    "store_timestamp_at",
]

MAGIC_V1: Final = -626843481  # 0xDAA320A7
MAGIC_V2: Final = -626843477  # 0xDAA320AB
BLANK_MAGIC: Final = -875286124  # 0xCBD43194: the end-of-file marker of a commit-log segment
MAX_TOPIC_LENGTH_V1: Final = 127  # signed byte length in the V1 layout


class MessageSysFlag:
    """Bits of the record's SYSFLAG (MessageSysFlag.java)."""

    COMPRESSED_FLAG: Final = 0x1
    MULTI_TAGS_FLAG: Final = 0x2
    TRANSACTION_NOT_TYPE: Final = 0x0
    TRANSACTION_PREPARED_TYPE: Final = 0x4
    TRANSACTION_COMMIT_TYPE: Final = 0x8
    TRANSACTION_ROLLBACK_TYPE: Final = 0xC
    TRANSACTION_MASK: Final = 0xC
    BORNHOST_V6_FLAG: Final = 0x10
    STOREHOSTADDRESS_V6_FLAG: Final = 0x20
    NEED_UNWRAP_FLAG: Final = 0x40
    INNER_BATCH_FLAG: Final = 0x80
    COMPRESSION_TYPE_MASK: Final = 0x700
    COMPRESSION_LZ4: Final = 0x100
    COMPRESSION_ZSTD: Final = 0x200
    COMPRESSION_ZLIB: Final = 0x300

    @staticmethod
    def transaction_value(sys_flag: int) -> int:
        return sys_flag & MessageSysFlag.TRANSACTION_MASK

    @staticmethod
    def reset_transaction_value(sys_flag: int, tran_type: int) -> int:
        return (sys_flag & ~MessageSysFlag.TRANSACTION_MASK) | tran_type


_BORN_V6: Final = MessageSysFlag.BORNHOST_V6_FLAG
_STORE_V6: Final = MessageSysFlag.STOREHOSTADDRESS_V6_FLAG

HOST_LEN_V4: Final = 8  # 4-byte ip + port
HOST_LEN_V6: Final = 20  # 16-byte ip + port
V6_HOST_EXTRA: Final = HOST_LEN_V6 - HOST_LEN_V4  # what each IPv6 host moves the fields after it

# The fixed part of a record whose hosts are both IPv4, through BODYLENGTH. Each IPv4 host is
# read as one unsigned 8-byte value, ip << 32 | port: a ready-made cache key for the decoder.
FIXED_V4_FIELDS: Final[tuple[tuple[str, str], ...]] = (
    ("size", "i4"),
    ("magic", "i4"),
    ("body_crc", "i4"),
    ("queue_id", "i4"),
    ("flag", "i4"),
    ("queue_offset", "i8"),
    ("phys_offset", "i8"),
    ("sys_flag", "i4"),
    ("born_timestamp", "i8"),
    ("born_host", "u8"),
    ("store_timestamp", "i8"),
    ("store_host", "u8"),
    ("reconsume_times", "i4"),
    ("prepared_offset", "i8"),
    ("body_len", "i4"),
)
_STRUCT_CODE: Final = {"i2": "h", "i4": "i", "u4": "I", "i8": "q", "u8": "Q"}


def _offsets() -> dict[str, int]:
    out, at = {}, 0
    for name, kind in FIXED_V4_FIELDS:
        out[name] = at
        at += int(kind[1:])
    out["body"] = at
    return out


_AT: Final = _offsets()
SIZE_AT: Final = _AT["size"]
MAGIC_AT: Final = _AT["magic"]
BODY_CRC_AT: Final = _AT["body_crc"]
QUEUE_ID_AT: Final = _AT["queue_id"]
QUEUE_OFFSET_AT: Final = _AT["queue_offset"]
PHYS_OFFSET_AT: Final = _AT["phys_offset"]
SYS_FLAG_AT: Final = _AT["sys_flag"]
BORN_TIMESTAMP_AT: Final = _AT["born_timestamp"]
BORN_HOST_AT: Final = _AT["born_host"]  # the last offset every record shares
STORE_TIMESTAMP_AT_V4: Final = _AT["store_timestamp"]
BODY_AT_V4: Final = _AT["body"]

# The whole fixed part of an all-IPv4 record, and its head up to BORNHOST (the same in every record).
FIXED_V4: Final = struct.Struct(">" + "".join(_STRUCT_CODE[kind] for _, kind in FIXED_V4_FIELDS))
HEAD: Final = struct.Struct(FIXED_V4.format[: 1 + [n for n, _ in FIXED_V4_FIELDS].index("born_host")])
SIZE_MAGIC: Final = struct.Struct(">ii")  # what a walk over records reads first (also the end marker)

# The smallest record: IPv4 hosts, empty body, one-byte topic length, empty properties.
MIN_RECORD_LENGTH: Final = BODY_AT_V4 + 1 + 2
assert (HEAD.size, BODY_AT_V4, MIN_RECORD_LENGTH) == (48, 88, 91)


def numpy_fields(upto: str | None = None) -> list[tuple[str, str]]:
    """`FIXED_V4_FIELDS` as a numpy structured-dtype spec, up to (not including) field `upto`."""
    names = [name for name, _ in FIXED_V4_FIELDS]
    stop = names.index(upto) if upto is not None else len(names)
    return [(name, ">" + kind) for name, kind in FIXED_V4_FIELDS[:stop]]


@overload
def body_at(sys_flag: int) -> int: ...
@overload
def body_at(sys_flag: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]: ...
def body_at(sys_flag: int | npt.NDArray[np.int64]) -> int | npt.NDArray[np.int64]:
    """Where BODY starts, after BODYLENGTH (per record for an array of sysflags)."""
    return (BODY_AT_V4 + V6_HOST_EXTRA * ((sys_flag & _BORN_V6) != 0)
            + V6_HOST_EXTRA * ((sys_flag & _STORE_V6) != 0))


@overload
def store_timestamp_at(sys_flag: int) -> int: ...
@overload
def store_timestamp_at(sys_flag: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]: ...
def store_timestamp_at(sys_flag: int | npt.NDArray[np.int64]) -> int | npt.NDArray[np.int64]:
    """Where STORETIMESTAMP sits (per record for an array of sysflags)."""
    return STORE_TIMESTAMP_AT_V4 + V6_HOST_EXTRA * ((sys_flag & _BORN_V6) != 0)


_I4_AT: Final = struct.Struct(">i")
_I2_AT: Final = struct.Struct(">h")
# TOTALSIZE, MAGICCODE, SYSFLAG and, when both hosts are IPv4, BODYLENGTH: one unpack for the usual
# record. PROPERTIES is a record's last field, so TOTALSIZE gives where its text ends.
_SIZE_MAGIC_FLAG_BODY_LEN: Final = struct.Struct(
    f">i{MAGIC_AT - 4}xi{SYS_FLAG_AT - MAGIC_AT - 4}xi{BODY_AT_V4 - 4 - SYS_FLAG_AT - 4}xi")


def properties_span(record: bytes | bytearray | memoryview, at: int = 0) -> tuple[int, int]:
    """(start, end) of the PROPERTIES text of the stored record starting at ``at``: a pull-time
    filter reads one property without decoding the rest of the record."""
    return properties_spans(record, (at,))[0]


def properties_spans(data: bytes | bytearray | memoryview, offsets: Iterable[int]) -> list[tuple[int, int]]:
    """`properties_span` of each record starting at ``offsets`` in ``data`` (one call per batch)."""
    out = []
    head = _SIZE_MAGIC_FLAG_BODY_LEN.unpack_from
    i4 = _I4_AT.unpack_from
    i2 = _I2_AT.unpack_from
    for at in offsets:
        size, magic, sys_flag, body_len = head(data, at)
        if sys_flag & (_BORN_V6 | _STORE_V6):
            body = at + body_at(sys_flag)
            body_len = i4(data, body - 4)[0]
        else:
            body = at + BODY_AT_V4
        topic_len_at = body + body_len
        if magic == MAGIC_V2:
            start = topic_len_at + 4 + i2(data, topic_len_at)[0]
        else:
            start = topic_len_at + 3 + data[topic_len_at]
        out.append((start, at + size))
    return out


def record_length(body_len: int, topic_len: int, props_len: int, sys_flag: int = 0) -> int:
    """Total length of a stored record (V2 when the topic needs it)."""
    topic_extra = 1 if topic_len > MAX_TOPIC_LENGTH_V1 else 0
    return MIN_RECORD_LENGTH + body_at(sys_flag) - BODY_AT_V4 + topic_extra + body_len + topic_len + props_len


@lru_cache(maxsize=8)
def record_struct(born_len: int, store_len: int) -> struct.Struct:
    """The fixed part through BODYLENGTH for hosts of these encoded lengths, hosts as bytes:
    SIZE MAGIC CRC QUEUEID FLAG QUEUEOFFSET PHYSOFFSET SYSFLAG BORNTS BORNHOST STORETS STOREHOST
    RECONSUME PREPARED BODYLEN."""
    return struct.Struct(f"{HEAD.format}{born_len}sq{store_len}siqi")


@lru_cache(maxsize=8)
def host_bits_struct(born_len: int, store_len: int) -> struct.Struct:
    """SYSFLAG through PREPAREDTRANSACTIONOFFSET: what every record of one batch shares."""
    return struct.Struct(f">iq{born_len}sq{store_len}siq")


@lru_cache(maxsize=8)
def batch_head_struct(shared_len: int) -> struct.Struct:
    """SIZE MAGIC CRC QUEUEID FLAG QUEUEOFFSET PHYSOFFSET, the `host_bits_struct` bytes, BODYLEN."""
    return struct.Struct(f"{HEAD.format[:8]}{shared_len}si")


# One message of a SEND_BATCH_MESSAGE body (MessageDecoder.encodeMessage): TOTALSIZE MAGIC
# BODYCRC FLAG BODYLEN, then BODY, PROPERTIESLENGTH (i2) and PROPERTIES.
BATCH_ITEM_HEAD: Final = struct.Struct(">iiiii")
BATCH_ITEM_FIXED: Final = BATCH_ITEM_HEAD.size + 2
