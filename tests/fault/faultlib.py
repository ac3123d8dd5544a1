"""Helpers of the fault tests: a real ``rocketq up`` with a small store, and reading queues back.

Every fault test runs the broker as a separate process (``tests.harness.start_cluster``), so a
``kill -9`` is a real one: no ``finally`` of ours runs inside the broker, no buffered write of its
own gets a chance to complete.
"""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Iterable
from pathlib import Path

from tests.harness import Cluster, start_cluster
from tests.wire import decode_pull, invoke, pull

from rocketq.codec.codes import RequestCode, ResponseCode
from rocketq.codec.message import BLANK_MAGIC, MessageExt
from rocketq.remoting import RemotingClient

READER_GROUP = "FaultReaderGroup"
SEGMENT_SIZE = 64 * 1024

# Small files so a few thousand messages roll several commit-log segments and the index files stay
# small (the 420 MB default index would dominate a test's run time on a busy disk).
SMALL_STORE = (
    "--set", f"mappedFileSizeCommitLog={SEGMENT_SIZE}",
    "--set", "mappedFileSizeConsumeQueue=20000",
    "--set", "maxHashSlotNum=4000",
    "--set", "maxIndexNum=16000",
)
SYNC_FLUSH = ("--set", "flushDiskType=SYNC_FLUSH")

_SIZE_MAGIC = struct.Struct(">ii")


async def up(tmp_path: Path, *extra: str) -> Cluster:
    """``rocketq up`` (small store) on tmp_path/data; the same tmp_path restarts on the same data."""
    return await asyncio.to_thread(start_cluster, tmp_path, *SMALL_STORE, *extra)


async def stop(cluster: Cluster) -> int:
    """SIGTERM and wait: the exit code (0 = clean shutdown)."""
    return await asyncio.to_thread(cluster.proc.stop, 20.0)


async def kill9(cluster: Cluster) -> None:
    await asyncio.to_thread(cluster.proc.kill)


def store_root(cluster: Cluster) -> Path:
    return cluster.data_dir / "store"


def commit_log_segments(cluster: Cluster) -> list[Path]:
    """The commit-log files in offset order (their names are 20-digit start offsets)."""
    return sorted((store_root(cluster) / "commitlog").iterdir(), key=lambda p: int(p.name))


def record_starts(segment: Path) -> tuple[list[int], int]:
    """Start of every record in a segment and where the records end (walking TOTALSIZE fields
    until a zero or the end-of-file filler)."""
    data = segment.read_bytes()
    starts: list[int] = []
    pos = 0
    while pos + 8 <= len(data):
        size, magic = _SIZE_MAGIC.unpack_from(data, pos)
        if size <= 0 or magic == BLANK_MAGIC:
            break
        starts.append(pos)
        pos += size
    return starts, pos


async def read_queue(client: RemotingClient, addr: str, topic: str, queue_id: int,
                     *, group: str = READER_GROUP) -> list[MessageExt]:
    """Every message of one queue from offset 0, checking each pull answer as a client would."""
    out: list[MessageExt] = []
    offset = 0
    while True:
        resp = await pull(client, addr, group, topic, queue_id, offset, max_nums=32)
        if resp.code != ResponseCode.SUCCESS:
            # Only the "caught up" answer ends a healthy queue; anything else is a defect.
            assert resp.code == ResponseCode.PULL_NOT_FOUND, (queue_id, offset, resp.code, resp.remark)
            assert resp.ext("nextBeginOffset") == str(offset), (queue_id, offset, resp.ext_fields)
            return out
        msgs = decode_pull(resp)
        assert msgs, f"SUCCESS without messages at {topic}/{queue_id}@{offset}"
        for i, m in enumerate(msgs):
            # The record's own queue fields must agree with where the consume queue put it.
            assert (m.topic, m.queue_id, m.queue_offset) == (topic, queue_id, offset + i), (
                f"{topic}/{queue_id}@{offset + i} holds {m.topic}/{m.queue_id}@{m.queue_offset}")
        out.extend(msgs)
        next_offset = int(resp.ext("nextBeginOffset") or -1)
        assert next_offset == offset + len(msgs), (queue_id, offset, len(msgs), next_offset)
        offset = next_offset


async def read_topic(client: RemotingClient, addr: str, topic: str,
                     queue_ids: Iterable[int]) -> dict[int, list[MessageExt]]:
    return {q: await read_queue(client, addr, topic, q) for q in queue_ids}


async def broker_config(client: RemotingClient, addr: str) -> dict[str, str]:
    """GET_BROKER_CONFIG as a dict: proves which settings the process under test really runs with."""
    resp = await invoke(client, addr, RequestCode.GET_BROKER_CONFIG)
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    lines = resp.body_bytes().decode().splitlines()
    return dict(line.split("=", 1) for line in lines if "=" in line and not line.startswith("#"))
