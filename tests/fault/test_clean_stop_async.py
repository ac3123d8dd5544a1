"""ASYNC_FLUSH broker stopped cleanly (SIGTERM): everything acknowledged is read back after a
restart, and every queue continues at the offset where it stopped.

ASYNC_FLUSH acks after the page-cache write, so it is the shutdown's flush (and the checkpoint
and abort-file handling) that this test exercises, not the group commit.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest
from faultlib import broker_config, commit_log_segments, read_topic, stop, store_root, up
from tests.wire import (
    batch_body,
    create_topic,
    get_max_offset,
    message_properties,
    new_uniq_key,
    send_header,
    send_message,
)

from rocketq.codec.codes import RequestCode, ResponseCode
from rocketq.codec.command import RemotingCommand
from rocketq.remoting import RemotingClient

pytestmark = pytest.mark.timeout(90)

TOPIC = "CleanStopAsyncT"
QUEUES = 4
SINGLES = 800
BATCHES = 24
BATCH_SIZE = 25
CONCURRENCY = 32
SEND_BATCH = RequestCode.SEND_BATCH_MESSAGE


async def _send_all(client: RemotingClient, addr: str) -> dict[str, tuple[int, int, bytes]]:
    """Singles and batches on every queue; returns uniq -> (queue, offset, body) of each ack."""
    acked: dict[str, tuple[int, int, bytes]] = {}
    sem = asyncio.Semaphore(CONCURRENCY)

    async def single(i: int) -> None:
        uniq = new_uniq_key()
        body = f"single-{i}-".encode() + os.urandom(i % 300)
        async with sem:
            r = await send_message(client, addr, TOPIC, body, queue_id=i % QUEUES,
                                   properties=message_properties(keys=f"k{i}", uniq_key=uniq))
        assert r.code == ResponseCode.SUCCESS, r.remark
        acked[uniq] = (int(r.ext("queueId") or -1), int(r.ext("queueOffset") or -1), body)

    async def batch(b: int) -> None:
        bodies = [f"batch-{b}-{j}-".encode() + os.urandom(j * 7) for j in range(BATCH_SIZE)]
        data, uniqs = batch_body(bodies)
        ext = send_header(TOPIC, queue_id=b % QUEUES, batch=True,
                          properties=message_properties(uniq_key=new_uniq_key()))
        async with sem:
            r = await client.invoke(addr, RemotingCommand.request(SEND_BATCH, ext, data), 5)
        assert r.code == ResponseCode.SUCCESS, r.remark
        first = int(r.ext("queueOffset") or -1)
        assert len((r.ext("msgId") or "").split(",")) == BATCH_SIZE
        for j, (uniq, body) in enumerate(zip(uniqs, bodies, strict=True)):
            acked[uniq] = (b % QUEUES, first + j, body)

    await asyncio.gather(*(single(i) for i in range(SINGLES)), *(batch(b) for b in range(BATCHES)))
    return acked


async def test_clean_stop_keeps_everything_and_offsets_continue(tmp_path: Path) -> None:
    cluster = await up(tmp_path)
    try:
        async with RemotingClient() as client:
            addr = cluster.broker
            assert (await broker_config(client, addr))["flushDiskType"] == "ASYNC_FLUSH"
            assert (await create_topic(client, addr, TOPIC, read=QUEUES, write=QUEUES)).code == 0
            acked = await _send_all(client, addr)
            max_before = {q: await get_max_offset(client, addr, TOPIC, q) for q in range(QUEUES)}
    finally:
        code = await stop(cluster)
    assert code == 0, cluster.describe()
    total = SINGLES + BATCHES * BATCH_SIZE
    assert len(acked) == total
    assert sum(max_before.values()) == total
    assert not (store_root(cluster) / "abort").exists(), "a clean stop must remove the abort file"
    assert (store_root(cluster) / "checkpoint").exists()
    assert len(commit_log_segments(cluster)) >= 4

    cluster = await up(tmp_path)
    try:
        async with RemotingClient() as client:
            addr = cluster.broker
            for q in range(QUEUES):
                assert await get_max_offset(client, addr, TOPIC, q) == max_before[q]
            queues = await read_topic(client, addr, TOPIC, range(QUEUES))
            found = {m.uniq_key: (q, m.queue_offset, m.body) for q, msgs in queues.items() for m in msgs}
            assert len(found) == total == sum(len(m) for m in queues.values())
            assert found == acked

            # Offsets continue: singles and a batch land right after the last stored message.
            for q in range(QUEUES):
                r = await send_message(client, addr, TOPIC, b"after-restart", queue_id=q)
                assert r.code == ResponseCode.SUCCESS, r.remark
                assert r.ext("queueOffset") == str(max_before[q]), (q, r.ext_fields)
            data, _ = batch_body([b"b0", b"b1"])
            ext = send_header(TOPIC, queue_id=0, batch=True, properties=message_properties())
            r = await client.invoke(addr, RemotingCommand.request(SEND_BATCH, ext, data), 5)
            assert r.code == ResponseCode.SUCCESS and r.ext("queueOffset") == str(max_before[0] + 1)
            again = await read_topic(client, addr, TOPIC, [0])
            assert [m.body for m in again[0][max_before[0]:]] == [b"after-restart", b"b0", b"b1"]
    finally:
        assert await stop(cluster) == 0, cluster.describe()
