"""Campaign: random and mutated frames at a real broker's and name server's ports (issue 9 item 8).

Sound frames (right lengths, usable opaque) with garbage inside go down long-lived connections,
a probe after each batch: every one is answered and the connection stays. Broken bytes
(truncated, oversized or negative lengths, bad header lengths, unknown serialize types, invalid
JSON, unusable opaques, bit flips, ROCKETMQ binary garbage) go down short connections: whatever
comes back is whole response frames, then the server closes. Afterwards the process's RSS has
stayed bounded, its log holds no traceback, and a real send + pull and a route query work.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from campaign import broken_bytes, header_keys, report, rss_kib, sound_frame, split_tracebacks
from faultlib import stop, up
from tests.harness import Cluster, wait_until
from tests.wire import create_topic, decode_pull, get_route, pull, send_message

from rocketq.codec.codes import RequestCode, ResponseCode
from rocketq.codec.command import RemotingCommand
from rocketq.codec.frame import FrameDecoder, encode_frame_bytes
from rocketq.remoting import RemotingClient

SOUND_WORKERS = 3  # per port
BROKEN_WORKERS = 2  # per port
BROKEN_SHARE = 0.1  # of the frames
BATCH = 100
READ_TIMEOUT = 60.0
RUN_CODES = (RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE,
             RequestCode.PULL_MESSAGE)
PROBE = RequestCode.GET_BROKER_CLUSTER_INFO  # answered by both (the broker: not supported)
# Growth of the server's RSS over the whole run that still counts as bounded.
RSS_GROWTH_LIMIT_KIB = 96 * 1024
ANON_GROWTH_LIMIT_KIB = 48 * 1024


@dataclass
class Tally:
    frames: int = 0
    answers: int = 0
    connections: int = 0
    closed_by_server: int = 0
    problems: list[str] = field(default_factory=list)


def _host_port(addr: str) -> tuple[str, int]:
    host, port = addr.rsplit(":", 1)
    return host, int(port)


def _check_answers(decoder: FrameDecoder, data: bytes, sent: set[int] | None, tally: Tally,
                   where: str) -> set[int]:
    """Count the answers in `data`; with `sent`, each must answer one of those opaques."""
    answered = set()
    for resp in decoder.feed(data):
        if not resp.is_response:
            # The broker's own requests to a client (NOTIFY_CONSUMER_IDS_CHANGED after one of the
            # garbage heartbeats registered a consumer): legitimate traffic, not an answer.
            continue
        if sent is not None and resp.opaque not in sent:
            tally.problems.append(f"{where}: not an answer to us: {resp!r}")
        answered.add(resp.opaque)
        tally.answers += 1
    return answered


async def _sound_worker(addr: str, seed: int, budget: int, tally: Tally, keys: list[str]) -> None:
    rnd = random.Random(seed)
    reader, writer = await asyncio.open_connection(*_host_port(addr))
    tally.connections += 1
    decoder = FrameDecoder()
    opaque = 0
    try:
        done = 0
        while done < budget and not tally.problems:
            sent: set[int] = set()
            chunks = []
            # Some batches are runs of one send code: the broker hands those to its batch handler.
            code = rnd.choice(RUN_CODES) if rnd.random() < 0.2 else None
            for _ in range(min(BATCH, budget - done)):
                opaque += 1
                sent.add(opaque)
                chunks.append(sound_frame(rnd, opaque, keys, code))
            opaque += 1
            probe = opaque
            sent.add(probe)
            chunks.append(encode_frame_bytes(RemotingCommand(PROBE, opaque=probe)))
            writer.write(b"".join(chunks))
            done += len(chunks) - 1
            tally.frames += len(chunks) - 1
            answered: set[int] = set()
            while probe not in answered:
                data = await asyncio.wait_for(reader.read(1 << 16), READ_TIMEOUT)
                if not data:
                    tally.problems.append(f"{addr}: a sound connection was closed by the server")
                    return
                # Answers to earlier batches (held pulls) may still arrive: any opaque of ours counts.
                answered |= _check_answers(decoder, data, set(range(1, opaque + 1)), tally, addr)
    finally:
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()


async def _broken_worker(addr: str, seed: int, budget: int, tally: Tally, keys: list[str]) -> None:
    rnd = random.Random(seed)
    done = 0
    while done < budget and not tally.problems:
        n = rnd.randrange(1, 4)
        parts = [sound_frame(rnd, i + 1, keys) for i in range(n - 1)] + [broken_bytes(rnd, n, keys)]
        reader, writer = await asyncio.open_connection(*_host_port(addr))
        tally.connections += 1
        try:
            writer.write(b"".join(parts))
            with contextlib.suppress(OSError):
                writer.write_eof()
            received = b""
            with contextlib.suppress(ConnectionResetError):
                while chunk := await asyncio.wait_for(reader.read(1 << 16), READ_TIMEOUT):
                    received += chunk
            tally.closed_by_server += 1
            decoder = FrameDecoder()
            try:
                # A bit flip may have changed an opaque: any whole answer frame will do here.
                _check_answers(decoder, received, None, tally, addr)
            except Exception as exc:
                tally.problems.append(f"{addr}: the server sent bytes that are not frames: {exc!r}")
            if decoder.buffered:
                tally.problems.append(f"{addr}: the server sent a partial frame before closing")
        finally:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()
        done += n
        tally.frames += n


async def _serves_normally(cluster: Cluster) -> None:
    async with RemotingClient() as client:
        topic = "AfterFuzzT"
        created = await create_topic(client, cluster.broker, topic, read=1, write=1)
        assert created.code == ResponseCode.SUCCESS, created.remark
        sent = await send_message(client, cluster.broker, topic, b"still serving", queue_id=0)
        assert sent.code == ResponseCode.SUCCESS, sent.remark
        offset = int(sent.ext("queueOffset") or -1)
        got = decode_pull(await pull(client, cluster.broker, "AfterFuzzG", topic, 0, offset))
        assert [m.body for m in got] == [b"still serving"]
        route = await wait_until(lambda: get_route(client, cluster.namesrv, topic), timeout=60, interval=0.5)
        assert route.queue_datas


async def _campaign(tmp_path: Path, total_frames: int, name: str) -> None:
    cluster = await up(tmp_path)
    keys = header_keys()
    tally = Tally()
    try:
        await _serves_normally(cluster)  # warm: the first send and pull allocate what they keep
        rss_before = rss_kib(cluster.proc.pid)
        anon_before = rss_kib(cluster.proc.pid, "RssAnon")
        broken = int(total_frames * BROKEN_SHARE)
        sound = total_frames - broken
        workers = []
        per_sound, per_broken = sound // (2 * SOUND_WORKERS), broken // (2 * BROKEN_WORKERS)
        for port_index, addr in enumerate((cluster.broker, cluster.namesrv)):
            seed = port_index * 100
            workers += [_sound_worker(addr, seed + w, per_sound, tally, keys) for w in range(SOUND_WORKERS)]
            workers += [_broken_worker(addr, seed + 50 + w, per_broken, tally, keys)
                        for w in range(BROKEN_WORKERS)]
        await asyncio.gather(*workers)
        assert not tally.problems, tally.problems[:5]
        await asyncio.sleep(1.0)
        rss_after = rss_kib(cluster.proc.pid)
        anon_after = rss_kib(cluster.proc.pid, "RssAnon")
        await _serves_normally(cluster)
        assert cluster.alive(), cluster.describe()
    finally:
        code = await stop(cluster)
    log = cluster.proc.stderr_path.read_text("utf-8", "replace") + cluster.proc.stdout()
    tracebacks, known = split_tracebacks(log)
    report(name, frames=tally.frames, answers=tally.answers, connections=tally.connections,
           closed_by_server=tally.closed_by_server, rss_before_kib=rss_before, rss_after_kib=rss_after,
           rss_growth_kib=rss_after - rss_before, anon_growth_kib=anon_after - anon_before,
           tracebacks=len(tracebacks), known_elsewhere=len(known), exit_code=code)
    assert code == 0, cluster.describe()
    assert not tracebacks, tracebacks[0]
    assert "Fatal error" not in log
    # The garbage includes sends that are stored: their mapped pages add to VmRSS, not to the heap.
    assert rss_after - rss_before < RSS_GROWTH_LIMIT_KIB, (rss_before, rss_after)
    assert anon_after - anon_before < ANON_GROWTH_LIMIT_KIB, (anon_before, anon_after)
    assert tally.frames >= total_frames * 0.98


@pytest.mark.timeout(300)
async def test_campaign_random_frames(tmp_path: Path) -> None:
    await _campaign(tmp_path, 20_000, "frames")


@pytest.mark.slow
@pytest.mark.timeout(1200)
async def test_campaign_random_frames_slow(tmp_path: Path) -> None:
    await _campaign(tmp_path, 1_000_000, "frames_slow")
