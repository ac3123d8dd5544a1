"""A torn write at the end of the commit log, found at start-up with the abort file present (the
broker died while writing): the broker must start, serve every good record, cut the torn bytes and
append new messages right where the good data ends (PROTOCOL.md §3.6 recovery).

The tail is forged on the files of a cleanly stopped broker, three ways: random bytes; the front
half of a record (as if the write stopped half-way) with a consume-queue entry already pointing at
it; and a complete record whose body no longer matches its CRC, also indexed.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest
from faultlib import SEGMENT_SIZE, commit_log_segments, read_topic, record_starts, stop, store_root, up
from tests.wire import create_topic, get_max_offset, message_properties, send_message

from rocketq.codec.codes import ResponseCode
from rocketq.remoting import RemotingClient

pytestmark = pytest.mark.timeout(90)

TOPIC = "TornTailT"
QUEUES = 2
MESSAGES = 300  # fixed-size records: the log ends part-way into its second 64 KiB segment
BODY_AT = 88  # IPv4 born/store hosts: the body starts after its 4-byte length at 84
_QOFF = struct.Struct(">q")


def _forge_record(tail_record: bytes, phys: int, queue_offset: int) -> bytearray:
    """The last good record moved to `phys` as the next message of its queue."""
    rec = bytearray(tail_record)
    _QOFF.pack_into(rec, 20, queue_offset)
    _QOFF.pack_into(rec, 28, phys)
    return rec


def _add_cq_entry(root: Path, queue_id: int, index: int, phys: int, size: int) -> None:
    """A consume-queue entry for a record the commit log will not keep (dispatch ran ahead)."""
    files = sorted((root / "consumequeue" / TOPIC / str(queue_id)).iterdir(), key=lambda p: int(p.name))
    with files[-1].open("r+b") as f:
        f.seek(index * 20 - int(files[-1].name))
        f.write(struct.pack(">qiq", phys, size, 0))


def _tear(kind: str, segment: Path, root: Path, counts: dict[int, int]) -> int:
    """Write the torn tail after the last record of `segment`; returns the good end (global)."""
    starts, end = record_starts(segment)
    base = int(segment.name)
    data = segment.read_bytes()
    last = data[starts[-1]:end]
    queue_id = struct.unpack_from(">i", last, 12)[0]
    assert end + 3 * len(last) + 4096 < SEGMENT_SIZE, "no room left in the segment to tear"
    if kind == "garbage":
        tail = bytes(os.urandom(3000))
    else:
        rec = _forge_record(last, base + end, counts[queue_id])
        if kind == "half_record":
            tail = bytes(rec[: len(rec) // 2])
        else:  # "bad_crc"
            rec[BODY_AT] ^= 0xFF
            tail = bytes(rec)
        _add_cq_entry(root, queue_id, counts[queue_id], base + end, len(rec))
    with segment.open("r+b") as f:
        f.seek(end)
        f.write(tail)
    (root / "abort").write_bytes(b"")
    return base + end


@pytest.mark.parametrize("kind", ["garbage", "half_record", "bad_crc"])
async def test_torn_tail_is_cut_and_good_records_served(tmp_path: Path, kind: str) -> None:
    cluster = await up(tmp_path)
    try:
        async with RemotingClient() as client:
            addr = cluster.broker
            assert (await create_topic(client, addr, TOPIC, read=QUEUES, write=QUEUES)).code == 0
            for i in range(MESSAGES):
                props = message_properties(keys=f"key{i:05d}")
                r = await send_message(client, addr, TOPIC, b"%05d" % i + b"x" * 120, queue_id=i % QUEUES,
                                       properties=props)
                assert r.code == ResponseCode.SUCCESS, r.remark
            before = await read_topic(client, addr, TOPIC, range(QUEUES))
    finally:
        assert await stop(cluster) == 0, cluster.describe()

    root = store_root(cluster)
    written = [s for s in commit_log_segments(cluster) if record_starts(s)[1] > 0]
    assert len(written) >= 2, "expected the log to have rolled into a second segment"
    good_end = _tear(kind, written[-1], root, {q: len(m) for q, m in before.items()})

    cluster = await up(tmp_path)
    try:
        async with RemotingClient() as client:
            addr = cluster.broker
            after = await read_topic(client, addr, TOPIC, range(QUEUES))
            for q in range(QUEUES):
                assert [(m.body, m.uniq_key, m.commit_log_offset) for m in after[q]] == [
                    (m.body, m.uniq_key, m.commit_log_offset) for m in before[q]], f"queue {q} differs"
                assert await get_max_offset(client, addr, TOPIC, q) == len(before[q])
            # New messages go where the good data ended: the torn bytes were cut, not skipped.
            r = await send_message(client, addr, TOPIC, b"after-tear", queue_id=0)
            assert r.code == ResponseCode.SUCCESS, r.remark
            assert r.ext("queueOffset") == str(len(before[0]))
            new = (await read_topic(client, addr, TOPIC, [0]))[0][-1]
            assert new.body == b"after-tear" and new.commit_log_offset == good_end
        assert cluster.alive()
    finally:
        assert await stop(cluster) == 0, cluster.describe()
    assert not (root / "abort").exists()
