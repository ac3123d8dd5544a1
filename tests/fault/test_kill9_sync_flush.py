"""kill -9 a SYNC_FLUSH broker while producers are sending, restart it on the same data, and prove
that every acknowledged message is there exactly once with its body intact (PROTOCOL.md §3.6,
DESIGN.md principle 5: "never loses an acked message under SYNC_FLUSH").

Sends whose outcome is unknown (in flight at the kill, or failed with a connection error) may or
may not have been stored; they are allowed at most once. Nothing else may appear.
"""

from __future__ import annotations

import asyncio
import os
import random
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from faultlib import (
    SEGMENT_SIZE,
    SYNC_FLUSH,
    broker_config,
    commit_log_segments,
    kill9,
    read_topic,
    stop,
    store_root,
    up,
)
from tests.wire import batch_body, create_topic, message_properties, new_uniq_key, send_header, send_message

from rocketq.codec.codes import RequestCode, ResponseCode
from rocketq.codec.command import RemotingCommand
from rocketq.errors import RemotingError
from rocketq.remoting import RemotingClient

pytestmark = pytest.mark.timeout(90)

TOPIC = "Kill9SyncT"
QUEUES = 4
SENDERS = 24
CONNECTIONS = 3
BATCH_SENDERS = 4  # of the SENDERS, these send SEND_BATCH_MESSAGE of BATCH messages
BATCH = 8
KILL_AFTER_ACKS = 4000
KILL_AFTER_SECONDS = 4.0
MIN_ACKS = 300  # below this the test would prove little; a broker that slow is a failure too


@dataclass(frozen=True, slots=True)
class Ack:
    queue_id: int
    queue_offset: int
    uniq: str


class Ledger:
    """What the producers know: every body they tried, and which sends the broker acknowledged."""

    def __init__(self) -> None:
        self.attempted: dict[str, bytes] = {}
        self.acked: dict[str, Ack] = {}
        self.unexpected: list[str] = []
        self.killing = False  # from here on, connection errors are expected
        self.enough = asyncio.Event()


def _request(sender: int, queue_id: int, bodies: list[bytes]) -> tuple[RemotingCommand, list[str]]:
    """SEND_MESSAGE_V2 for one body, SEND_BATCH_MESSAGE for several; and the UNIQ_KEYs they carry."""
    if len(bodies) == 1:
        uniqs = [new_uniq_key()]
        props = message_properties(tags=f"T{sender % 3}", uniq_key=uniqs[0])
        ext = send_header(TOPIC, queue_id=queue_id, properties=props)
        return RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, ext, bodies[0]), uniqs
    data, uniqs = batch_body(bodies)
    ext = send_header(TOPIC, queue_id=queue_id, batch=True, properties=message_properties())
    return RemotingCommand.request(RequestCode.SEND_BATCH_MESSAGE, ext, data), uniqs


async def _sender(ledger: Ledger, client: RemotingClient, addr: str, sender: int, batch: int) -> None:
    rnd = random.Random(sender)
    seq = 0
    while True:  # until the kill breaks the connection
        # Varying sizes put record boundaries everywhere, also right at segment ends.
        bodies = [f"s{sender}-{seq}-{i}-".encode() + os.urandom(rnd.randrange(16, 700)) for i in range(batch)]
        queue_id = (sender + seq) % QUEUES
        request, uniqs = _request(sender, queue_id, bodies)
        ledger.attempted.update(zip(uniqs, bodies, strict=True))
        try:
            resp = await client.invoke(addr, request, 5.0)
        except RemotingError as exc:
            if not ledger.killing:
                ledger.unexpected.append(f"sender {sender} #{seq} before the kill: {exc!r}")
            return
        seq += 1
        if resp.code == ResponseCode.SUCCESS:
            assert resp.ext("queueId") == str(queue_id), resp.ext_fields
            first = int(resp.ext("queueOffset") or -1)
            for i, uniq in enumerate(uniqs):
                ledger.acked[uniq] = Ack(queue_id, first + i, uniq)
            if len(ledger.acked) >= KILL_AFTER_ACKS:
                ledger.enough.set()
        elif resp.code != ResponseCode.FLUSH_DISK_TIMEOUT:  # stored, but not known to be on disk
            ledger.unexpected.append(f"sender {sender}: code {resp.code} {resp.remark}")
            return


async def test_acked_messages_survive_kill_9_under_sync_flush(tmp_path: Path) -> None:
    cluster = await up(tmp_path, *SYNC_FLUSH)
    clients = [RemotingClient() for _ in range(CONNECTIONS)]
    ledger = Ledger()
    try:
        addr = cluster.broker
        config = await broker_config(clients[0], addr)
        assert config["flushDiskType"] == "SYNC_FLUSH"
        assert config["mappedFileSizeCommitLog"] == str(SEGMENT_SIZE)
        r = await create_topic(clients[0], addr, TOPIC, read=QUEUES, write=QUEUES)
        assert r.code == ResponseCode.SUCCESS, r.remark
        senders = [asyncio.create_task(_sender(ledger, clients[i % CONNECTIONS], addr, i,
                                               BATCH if i < BATCH_SENDERS else 1)) for i in range(SENDERS)]
        started = time.monotonic()
        try:
            await asyncio.wait_for(ledger.enough.wait(), KILL_AFTER_SECONDS)
        except TimeoutError:
            pass
        running = sum(not t.done() for t in senders)
        acked_at_kill = len(ledger.acked)
        ledger.killing = True
        await kill9(cluster)  # SIGKILL while every sender still has a request out
        sent_for = time.monotonic() - started
        await asyncio.wait_for(asyncio.gather(*senders), 15)
    finally:
        for c in clients:
            await c.close()
        await stop(cluster)
    assert not ledger.unexpected, ledger.unexpected[:5]
    assert running == SENDERS, "the senders stopped before the kill: it was not mid-stream"
    assert acked_at_kill >= MIN_ACKS, f"only {acked_at_kill} acks in {sent_for:.1f}s"
    assert (store_root(cluster) / "abort").exists(), "kill -9 should leave the abort file behind"
    segments_before = len(commit_log_segments(cluster))
    assert segments_before >= 4, f"only {segments_before} commit-log segments: nothing rolled"

    cluster = await up(tmp_path, *SYNC_FLUSH)
    try:
        async with RemotingClient() as client:
            queues = await read_topic(client, cluster.broker, TOPIC, range(QUEUES))
            found = {}
            for q, msgs in queues.items():
                for m in msgs:
                    uniq = m.uniq_key
                    assert uniq is not None and uniq in ledger.attempted, f"{q}@{m.queue_offset}: not ours"
                    assert uniq not in found, f"duplicate {uniq} at {q}@{m.queue_offset} and {found[uniq]}"
                    assert m.body == ledger.attempted[uniq], f"{uniq}: body differs"
                    found[uniq] = (q, m.queue_offset)
            lost = [a for a in ledger.acked.values() if found.get(a.uniq) != (a.queue_id, a.queue_offset)]
            assert not lost, f"{len(lost)} of {len(ledger.acked)} acked messages lost or moved: {lost[:5]}"
            # Every stored record is in exactly one queue: commit-log positions never repeat.
            offsets = [m.commit_log_offset for msgs in queues.values() for m in msgs]
            assert len(set(offsets)) == len(offsets)

            # Serving again: new sends continue each queue right after what survived.
            for q in range(QUEUES):
                r = await send_message(client, cluster.broker, TOPIC, b"after-recovery", queue_id=q)
                assert r.code == ResponseCode.SUCCESS, r.remark
                assert r.ext("queueOffset") == str(len(queues[q])), (q, r.ext_fields)
            again = await read_topic(client, cluster.broker, TOPIC, range(QUEUES))
            for q in range(QUEUES):
                assert [m.body for m in again[q][len(queues[q]):]] == [b"after-recovery"]
    finally:
        assert await stop(cluster) == 0, cluster.describe()
