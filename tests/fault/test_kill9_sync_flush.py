"""kill -9 a broker while producers are sending, restart it on the same data, again and again, and
prove that every acknowledged message is there exactly once with its body intact (PROTOCOL.md §3.6,
DESIGN.md principle 5: "never loses an acked message under SYNC_FLUSH"; issue 9 item 8).

Each cycle sends to its own topic from 64 concurrent senders (some of them batches), kills the
process at a random moment, and the next cycle's start is the restart that proves the previous
cycle's topic. The last restart re-reads every topic of every cycle: a later recovery must not
damage what an earlier one kept.

Sends whose outcome is unknown (in flight at the kill, or failed with a connection error) may or
may not have been stored; they are allowed at most once. Nothing else may appear. ASYNC_FLUSH
acknowledges before the fsync, so it may lose at most the unflushed tail of each queue: what
survives of a queue is a prefix of what was acknowledged on it, never a hole.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import random
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from campaign import report
from faultlib import SYNC_FLUSH, broker_config, commit_log_segments, kill9, read_topic, stop, store_root, up
from tests.harness import Cluster
from tests.wire import batch_body, create_topic, message_properties, new_uniq_key, send_header, send_message

from rocketq.codec.codes import RequestCode, ResponseCode
from rocketq.codec.command import RemotingCommand
from rocketq.errors import RemotingError
from rocketq.remoting import RemotingClient

QUEUES = 4
SENDERS = 64
CONNECTIONS = 4
BATCH_SENDERS = 8  # of the SENDERS, these send SEND_BATCH_MESSAGE of BATCH messages
BATCH = 8
MIN_ACKS = 300  # over all cycles, per cycle on average; a broker that slow is a failure too
# Segments that a cycle's few MB roll more than once, without thousands of files after 100 cycles.
SEGMENT = 1024 * 1024
STORE = ("--set", f"mappedFileSizeCommitLog={SEGMENT}")
ASYNC_FLUSH = ("--set", "flushDiskType=ASYNC_FLUSH")


def _digest(body: bytes) -> bytes:
    return hashlib.blake2b(body, digest_size=8).digest()


@dataclass(frozen=True, slots=True)
class Ack:
    queue_id: int
    queue_offset: int
    uniq: str


@dataclass
class Ledger:
    """What the producers of one cycle know: every body tried, and which sends were acknowledged."""

    topic: str
    kill_after_acks: int
    attempted: dict[str, bytes] = field(default_factory=dict)  # uniq -> digest of the body
    acked: dict[str, Ack] = field(default_factory=dict)
    unexpected: list[str] = field(default_factory=list)
    killing: bool = False  # from here on, connection errors are expected
    enough: asyncio.Event = field(default_factory=asyncio.Event)


def _request(topic: str, sender: int, queue_id: int,
             bodies: list[bytes]) -> tuple[RemotingCommand, list[str]]:
    """SEND_MESSAGE_V2 for one body, SEND_BATCH_MESSAGE for several; and the UNIQ_KEYs they carry."""
    if len(bodies) == 1:
        uniqs = [new_uniq_key()]
        props = message_properties(tags=f"T{sender % 3}", uniq_key=uniqs[0])
        ext = send_header(topic, queue_id=queue_id, properties=props)
        return RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, ext, bodies[0]), uniqs
    data, uniqs = batch_body(bodies)
    ext = send_header(topic, queue_id=queue_id, batch=True, properties=message_properties())
    return RemotingCommand.request(RequestCode.SEND_BATCH_MESSAGE, ext, data), uniqs


async def _sender(ledger: Ledger, client: RemotingClient, addr: str, sender: int, batch: int) -> None:
    rnd = random.Random(sender)
    seq = 0
    while True:  # until the kill breaks the connection
        # Varying sizes put record boundaries everywhere, also right at segment ends.
        bodies = [f"s{sender}-{seq}-{i}-".encode() + os.urandom(rnd.randrange(16, 700)) for i in range(batch)]
        queue_id = (sender + seq) % QUEUES
        request, uniqs = _request(ledger.topic, sender, queue_id, bodies)
        ledger.attempted.update(zip(uniqs, map(_digest, bodies), strict=True))
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
            if len(ledger.acked) >= ledger.kill_after_acks:
                ledger.enough.set()
        elif resp.code != ResponseCode.FLUSH_DISK_TIMEOUT:  # stored, but not known to be on disk
            ledger.unexpected.append(f"sender {sender}: code {resp.code} {resp.remark}")
            return


async def _send_then_kill(cluster: Cluster, ledger: Ledger, kill_after: float) -> int:
    """64 senders on one topic until enough acks or `kill_after` seconds, then kill -9; returns
    how many senders were still sending at the kill."""
    clients = [RemotingClient() for _ in range(CONNECTIONS)]
    try:
        r = await create_topic(clients[0], cluster.broker, ledger.topic, read=QUEUES, write=QUEUES)
        assert r.code == ResponseCode.SUCCESS, r.remark
        senders = [asyncio.create_task(_sender(ledger, clients[i % CONNECTIONS], cluster.broker, i,
                                               BATCH if i < BATCH_SENDERS else 1)) for i in range(SENDERS)]
        try:
            await asyncio.wait_for(ledger.enough.wait(), kill_after)
        except TimeoutError:
            pass
        running = sum(not t.done() for t in senders)
        ledger.killing = True
        await kill9(cluster)  # SIGKILL while every sender still has a request out
        await asyncio.wait_for(asyncio.gather(*senders), 15)
    finally:
        for c in clients:
            await c.close()
    assert not ledger.unexpected, ledger.unexpected[:5]
    assert (store_root(cluster) / "abort").exists(), "kill -9 should leave the abort file behind"
    return running


@dataclass
class Verdict:
    found: int = 0
    lost: int = 0
    unknown_stored: int = 0  # sends of unknown outcome that were stored (allowed, once)


async def _verify(client: RemotingClient, addr: str, ledger: Ledger, *, sync: bool) -> Verdict:
    """Read the cycle's topic back: every record ours, once, intact; acked ones where acked."""
    queues = await read_topic(client, addr, ledger.topic, range(QUEUES))  # checks queue fields too
    found: dict[str, tuple[int, int]] = {}
    for q, msgs in queues.items():
        for m in msgs:
            uniq = m.uniq_key
            where = f"{ledger.topic}/{q}@{m.queue_offset}"
            assert uniq is not None and uniq in ledger.attempted, f"{where}: not ours"
            assert uniq not in found, f"duplicate {uniq} at {where} and {found[uniq]}"
            assert _digest(m.body) == ledger.attempted[uniq], f"{where}: body differs (corrupt record served)"
            found[uniq] = (q, m.queue_offset)
    offsets = [m.commit_log_offset for msgs in queues.values() for m in msgs]
    assert len(set(offsets)) == len(offsets), "two consume-queue entries point at one record"
    lost = [a for a in ledger.acked.values() if found.get(a.uniq) != (a.queue_id, a.queue_offset)]
    if sync:
        assert not lost, f"{len(lost)} of {len(ledger.acked)} acked messages lost or moved: {lost[:5]}"
    else:
        # Only a tail may go: every lost ack sits after every kept one of its queue.
        for a in lost:
            assert a.queue_offset >= len(queues[a.queue_id]), f"a hole, not a tail: {a}"
    return Verdict(len(found), len(lost), len(set(found) - set(ledger.acked)))


async def _campaign(tmp_path: Path, cycles: int, *, sync: bool, name: str) -> None:
    flush = SYNC_FLUSH if sync else ASYNC_FLUSH
    rnd = random.Random(cycles)
    ledgers: list[Ledger] = []
    totals = Verdict()
    running_at_kills: list[int] = []
    started = time.monotonic()
    cluster = await up(tmp_path, *STORE, *flush)
    async with RemotingClient() as client:
        config = await broker_config(client, cluster.broker)
    assert config["flushDiskType"] == ("SYNC_FLUSH" if sync else "ASYNC_FLUSH")
    for cycle in range(cycles):
        # A random kill moment: early ones catch the first sends of a topic, late ones a full stream.
        ledger = Ledger(f"Kill9{'Sync' if sync else 'Async'}T{cycle}", rnd.randrange(MIN_ACKS, 6000))
        running_at_kills.append(await _send_then_kill(cluster, ledger, rnd.uniform(1.0, 4.0)))
        ledgers.append(ledger)
        cluster = await up(tmp_path, *STORE, *flush)  # the restart that recovers this cycle
        async with RemotingClient() as client:
            v = await _verify(client, cluster.broker, ledger, sync=sync)
        totals.found += v.found
        totals.lost += v.lost
        totals.unknown_stored += v.unknown_stored
        if cycle < cycles - 1:
            continue
        try:
            async with RemotingClient() as client:
                # A later recovery must not have damaged an earlier cycle's topic.
                for earlier in ledgers[:-1]:
                    await _verify(client, cluster.broker, earlier, sync=sync)
                # Serving again: new sends continue each queue right after what survived.
                kept = await read_topic(client, cluster.broker, ledger.topic, range(QUEUES))
                for q in range(QUEUES):
                    r = await send_message(client, cluster.broker, ledger.topic, b"after-recovery",
                                           queue_id=q)
                    assert r.code == ResponseCode.SUCCESS, r.remark
                    assert r.ext("queueOffset") == str(len(kept[q])), (q, r.ext_fields)
        finally:
            assert await stop(cluster) == 0, cluster.describe()
    acked = sum(len(led.acked) for led in ledgers)
    segments = len(commit_log_segments(cluster))
    report(name, flush="SYNC_FLUSH" if sync else "ASYNC_FLUSH", cycles=cycles, senders=SENDERS, acked=acked,
           lost=totals.lost, duplicates=0, corrupt=0, unknown_outcome_stored=totals.unknown_stored,
           segments=segments, seconds=round(time.monotonic() - started))
    assert min(running_at_kills) == SENDERS, "the senders stopped before a kill: it was not mid-stream"
    assert acked >= MIN_ACKS * cycles, f"only {acked} acks in {cycles} cycles"
    assert segments >= 2, f"only {segments} commit-log segments: nothing rolled"


@pytest.mark.timeout(300)
async def test_campaign_kill9_sync_flush(tmp_path: Path) -> None:
    await _campaign(tmp_path, 3, sync=True, name="kill9_sync_flush")


@pytest.mark.timeout(300)
async def test_campaign_kill9_async_flush(tmp_path: Path) -> None:
    await _campaign(tmp_path, 2, sync=False, name="kill9_async_flush")


@pytest.mark.slow
@pytest.mark.timeout(1800)
async def test_campaign_kill9_sync_flush_slow(tmp_path: Path) -> None:
    await _campaign(tmp_path, 100, sync=True, name="kill9_sync_flush_slow")


@pytest.mark.slow
@pytest.mark.timeout(900)
async def test_campaign_kill9_async_flush_slow(tmp_path: Path) -> None:
    await _campaign(tmp_path, 20, sync=False, name="kill9_async_flush_slow")
