"""RocketMQ 4.x master/slave replication stream (HAConnection / HAClient), sans-I/O.

The HA port carries no remoting frames. The slave writes its commit-log max offset as a bare
8-byte big-endian long, again and again; the master answers with transfers
``[phyOffset 8][bodySize 4][body]``, where the body is raw commit-log bytes starting at
``phyOffset`` (a transfer may cut a record in two; a size of 0 is a heartbeat naming the
offset the master will send from next).
"""

from __future__ import annotations

import struct
from typing import Final

from rocketq.errors import ProtocolError

__all__ = [
    "REPORT",
    "TRANSFER_HEADER",
    "SlaveReportDecoder",
    "TransferDecoder",
    "encode_report",
    "encode_transfer_header",
]

REPORT: Final = struct.Struct(">q")
TRANSFER_HEADER: Final = struct.Struct(">qi")
# Far above haTransferBatchSize (32 KiB): a bigger size means the stream lost its framing.
MAX_TRANSFER_BODY: Final = 64 << 20


def encode_report(max_offset: int) -> bytes:
    """What a slave sends: its commit-log max offset."""
    return REPORT.pack(max_offset)


def encode_transfer_header(phy_offset: int, size: int) -> bytes:
    return TRANSFER_HEADER.pack(phy_offset, size)


class SlaveReportDecoder:
    """The master's reading side: only the newest complete report matters (as HAConnection's
    ReadSocketService, which reads the last whole 8 bytes of what arrived)."""

    __slots__ = ("_pending",)

    def __init__(self) -> None:
        self._pending = b""

    def feed(self, data: bytes) -> int | None:
        """The newest offset completed by `data`, or None when no report completed."""
        buf = self._pending + data if self._pending else data
        whole = len(buf) - len(buf) % 8
        self._pending = bytes(buf[whole:])
        if not whole:
            return None
        (offset,) = REPORT.unpack_from(buf, whole - 8)
        if offset < 0:
            raise ProtocolError(f"slave reported a negative offset {offset}")
        return int(offset)


class TransferDecoder:
    """The slave's reading side: ``feed(data)`` returns the complete transfers in it as
    ``(phyOffset, body)``; a body is a memoryview of the bytes fed (no copy when whole)."""

    __slots__ = ("_buf",)

    def __init__(self) -> None:
        self._buf = bytearray()

    def feed(self, data: bytes | bytearray | memoryview) -> list[tuple[int, memoryview]]:
        if self._buf:
            self._buf += data
            view = memoryview(bytes(self._buf))
            self._buf.clear()
        else:
            view = memoryview(data)
        out: list[tuple[int, memoryview]] = []
        pos, end = 0, len(view)
        head = TRANSFER_HEADER
        while end - pos >= head.size:
            offset, size = head.unpack_from(view, pos)
            if size < 0 or size > MAX_TRANSFER_BODY or offset < 0:
                raise ProtocolError(f"bad HA transfer header: offset {offset}, size {size}")
            if end - pos - head.size < size:
                break
            start = pos + head.size
            out.append((int(offset), view[start : start + size]))
            pos = start + size
        if pos < end:
            self._buf += view[pos:]
        return out

    @property
    def buffered(self) -> int:
        return len(self._buf)
