"""Values that cross the store's boundary: what the broker puts, what it gets back."""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

# (flag, body, properties string, tags_code, index keys)
BatchEntry = tuple[int, "bytes | memoryview", str, int, tuple[str, ...]]

_EMPTY_OFFSETS: npt.NDArray[np.int64] = np.zeros(0, dtype=np.int64)
_EMPTY_OFFSETS.flags.writeable = False


class SingleEntry(NamedTuple):
    """One message of a run of single sends (`MessageStore.append_many`): one per message on
    the send hot path. `properties` already holds UNIQ_KEY / CLUSTER; `keys` are the index keys.

    The class names the fields (and builds entries off the hot path); the broker's send
    processor hands over plain tuples in this field order, because CPython 3.11 specializes
    unpacking and indexing only for exact tuples: a NamedTuple costs about 0.1 µs more to
    build and 0.05 µs more to unpack per message (`python -m benchmarks entry`). So the store
    reads an entry by unpacking it into named locals or through the ENTRY_* getters below,
    never `entry.field`, which a plain tuple cannot answer."""

    topic: str
    queue_id: int
    body: bytes | memoryview
    flag: int
    properties: str
    tags_code: int
    keys: tuple[str, ...]
    sys_flag: int
    born_timestamp: int
    born_host: tuple[str, int]
    reconsume_times: int


def _getter(name: str) -> Callable[[SingleEntry], Any]:
    return itemgetter(SingleEntry._fields.index(name))


# C-level field reads for map() over a run of entries
ENTRY_TOPIC = _getter("topic")
ENTRY_QUEUE_ID = _getter("queue_id")
ENTRY_BODY = _getter("body")
ENTRY_PROPERTIES = _getter("properties")


class PutMessageStatus(enum.Enum):
    PUT_OK = "PUT_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    CREATE_MAPPED_FILE_FAILED = "CREATE_MAPPED_FILE_FAILED"
    MESSAGE_ILLEGAL = "MESSAGE_ILLEGAL"
    PROPERTIES_SIZE_EXCEEDED = "PROPERTIES_SIZE_EXCEEDED"
    SERVICE_NOT_AVAILABLE = "SERVICE_NOT_AVAILABLE"
    OS_PAGE_CACHE_BUSY = "OS_PAGE_CACHE_BUSY"
    UNKNOWN_ERROR = "UNKNOWN_ERROR"
    # SYNC_MASTER: stored here, but the slave did not confirm it in time / no slave to wait for.
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"


class GetMessageStatus(enum.Enum):
    FOUND = "FOUND"
    NO_MATCHED_MESSAGE = "NO_MATCHED_MESSAGE"
    MESSAGE_WAS_REMOVING = "MESSAGE_WAS_REMOVING"
    OFFSET_FOUND_NULL = "OFFSET_FOUND_NULL"
    OFFSET_OVERFLOW_BADLY = "OFFSET_OVERFLOW_BADLY"
    OFFSET_OVERFLOW_ONE = "OFFSET_OVERFLOW_ONE"
    OFFSET_TOO_SMALL = "OFFSET_TOO_SMALL"
    NO_MATCHED_LOGIC_QUEUE = "NO_MATCHED_LOGIC_QUEUE"
    NO_MESSAGE_IN_QUEUE = "NO_MESSAGE_IN_QUEUE"


@dataclass(frozen=True, slots=True)
class MessageToStore:
    """One message as the broker hands it to the store.

    `properties` is the encoded properties string (already holding UNIQ_KEY / CLUSTER), so the
    store never re-encodes it; `keys` are the index keys (UNIQ_KEY and each KEYS word).
    `store_timestamp` 0 means "now"; `wait_store_msg_ok` False skips the SYNC_FLUSH wait (WAIT=false).
    """

    topic: str
    queue_id: int
    body: bytes | memoryview
    flag: int = 0
    properties: str = ""
    tags_code: int = 0
    keys: tuple[str, ...] = ()
    sys_flag: int = 0
    born_timestamp: int = 0
    born_host: tuple[str, int] = ("127.0.0.1", 0)
    reconsume_times: int = 0
    prepared_transaction_offset: int = 0
    store_timestamp: int = 0
    wait_store_msg_ok: bool = True


@dataclass(frozen=True, slots=True)
class MessageBatchToStore:
    """A SEND_BATCH_MESSAGE: one append, consecutive queue offsets, shared born/sys fields."""

    topic: str
    queue_id: int
    items: Sequence[BatchEntry]
    sys_flag: int = 0
    born_timestamp: int = 0
    born_host: tuple[str, int] = ("127.0.0.1", 0)
    reconsume_times: int = 0
    wait_store_msg_ok: bool = True


@dataclass(frozen=True, slots=True)
class PutMessageResult:
    """Outcome of a put. `record_offsets` are the commit-log offsets of every stored record."""

    status: PutMessageStatus
    wrote_offset: int = 0
    wrote_bytes: int = 0
    logical_offset: int = 0
    msg_num: int = 0
    store_timestamp: int = 0
    record_offsets: Sequence[int] = ()
    msg_id_prefix: str = field(default="", repr=False)

    @property
    def ok(self) -> bool:
        """The message is stored (a flush timeout still stored it)."""
        return self.status in _STORED

    @property
    def msg_id(self) -> str:
        """The offset msgId of the first record."""
        return f"{self.msg_id_prefix}{self.wrote_offset:016X}" if self.msg_num else ""

    @property
    def msg_ids(self) -> list[str]:
        """Offset msgIds, one per record (computed on demand: only the broker's answer needs them)."""
        p = self.msg_id_prefix
        return [f"{p}{off:016X}" for off in self.record_offsets]

    @property
    def msg_ids_text(self) -> str:
        """The send response's `msgId`: the ids joined with commas."""
        return ",".join(self.msg_ids)


@dataclass(frozen=True, slots=True)
class GetMessageResult:
    """A read from one consume queue. `buffers` are zero-copy slices of the mapped commit log,
    adjacent records coalesced: concatenated they are the PULL answer body."""

    status: GetMessageStatus
    next_begin_offset: int = 0
    min_offset: int = 0
    max_offset: int = 0
    buffers: list[memoryview] = field(default_factory=list)
    message_count: int = 0
    buffer_total_size: int = 0
    queue_offsets: npt.NDArray[np.int64] = field(default_factory=lambda: _EMPTY_OFFSETS)

    @property
    def found(self) -> bool:
        return self.status is GetMessageStatus.FOUND

    def body(self) -> bytes:
        """All buffers copied into one bytes (tests and small answers; transports should
        write the buffers themselves)."""
        return b"".join(self.buffers)


@dataclass(frozen=True, slots=True)
class QueryMessageResult:
    """Messages found through the index: raw records plus the index's freshness."""

    buffers: list[memoryview] = field(default_factory=list)
    phy_offsets: list[int] = field(default_factory=list)
    index_last_update_timestamp: int = 0
    index_last_update_phyoffset: int = 0

    @property
    def message_count(self) -> int:
        return len(self.buffers)

    @property
    def buffer_total_size(self) -> int:
        return sum(len(b) for b in self.buffers)


_FIELD_SETTERS = tuple(
    getattr(PutMessageResult, name).__set__
    for name in ("status", "wrote_offset", "wrote_bytes", "logical_offset", "msg_num", "store_timestamp",
                 "record_offsets", "msg_id_prefix")
)
_new = object.__new__


def put_result(
    status: PutMessageStatus, wrote_offset: int, wrote_bytes: int, logical_offset: int, msg_num: int,
    store_timestamp: int, record_offsets: Sequence[int], msg_id_prefix: str,
) -> PutMessageResult:
    """A PutMessageResult built by filling its slots directly. The frozen dataclass __init__
    goes through object.__setattr__ once per field, which on the one-message put path costs
    more than the append itself; the value built here is identical and equally immutable."""
    r = _new(PutMessageResult)
    s0, s1, s2, s3, s4, s5, s6, s7 = _FIELD_SETTERS
    s0(r, status)
    s1(r, wrote_offset)
    s2(r, wrote_bytes)
    s3(r, logical_offset)
    s4(r, msg_num)
    s5(r, store_timestamp)
    s6(r, record_offsets)
    s7(r, msg_id_prefix)
    return r


# Statuses of a put whose message is in the commit log (only a wait after the append failed).
_STORED = frozenset((PutMessageStatus.PUT_OK, PutMessageStatus.FLUSH_DISK_TIMEOUT,
                     PutMessageStatus.FLUSH_SLAVE_TIMEOUT, PutMessageStatus.SLAVE_NOT_AVAILABLE))
