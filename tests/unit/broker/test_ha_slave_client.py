"""The slave's replication client against a scripted master on loopback: it dispatches in
stretches, yet what arrived before the master vanished is in its consume queues at once."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.harness import wait_until

from rocketq.broker.ha.slave import HAClient
from rocketq.codec.ha import REPORT, encode_transfer_header
from rocketq.store import MessageStore
from rocketq.store.ha import transfer_chunk
from unit.store.store_testlib import msg, small_config


def _store(root: Path) -> MessageStore:
    s = MessageStore(small_config(root))
    s.load()
    return s


async def test_what_came_before_the_master_died_is_dispatched(tmp_path: Path) -> None:
    master = _store(tmp_path / "m")
    slave = _store(tmp_path / "s")
    for i in range(300):
        assert master.append_message(msg(queue_id=i % 2, body=b"%05d" % i * 20, tags="T")).ok
    total = master.commit_log.max_offset

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        (offset,) = REPORT.unpack(await reader.readexactly(8))
        while offset < total:  # everything in one burst, then gone (a kill -9)
            chunk = transfer_chunk(master.commit_log, offset, 32 << 10)
            assert chunk is not None
            writer.write(encode_transfer_header(offset, len(chunk)) + bytes(chunk))
            offset += len(chunk)
        await writer.drain()
        writer.transport.abort()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    dispatched: list[tuple[str, int]] = []
    client = HAClient(slave, dispatched.extend)
    client.set_master(f"127.0.0.1:{server.sockets[0].getsockname()[1]}")
    try:
        client.start()
        await wait_until(lambda: slave.commit_log.max_offset == total, timeout=30)
        await wait_until(lambda: slave.get_max_offset_in_queue("TopicA", 1) == 150, timeout=30)
        assert slave.get_max_offset_in_queue("TopicA", 0) == 150
        assert slave.get_message("TopicA", 0, 149, 1).message_count == 1
        assert {("TopicA", 0), ("TopicA", 1)} <= set(dispatched)
    finally:
        await client.shutdown()
        server.close()
        slave.close()
        master.close()
