"""Campaign: idle connections, held long polls and a consumer that never acknowledges, all at once,
while a flood of messages arrives (issue 9 item 8).

The broker's and the stuck consumer's memory stay bounded (pullThresholdForQueue caps what the
consumer caches; the broker keeps nothing per message in memory), every held long poll is still
answered when its message arrives, and a healthy group on the same topic consumes everything.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path

import pytest
from campaign import ensure_fd_limit, report, rss_kib, split_tracebacks
from faultlib import stop, up
from tests.harness import start_process, wait_until
from tests.wire import create_topic, decode_pull, pull, send_batch

from rocketq.aio import ConsumeStatus, PushConsumer
from rocketq.codec.codes import ResponseCode
from rocketq.remoting import RemotingClient

FLOOD_TOPIC = "FloodT"
POLL_TOPIC = "LongPollT"
QUEUES = 4
BODY = b"f" * 200
SEND_BATCH = 250
PULL_THRESHOLD_FOR_QUEUE = 1000  # the PushConsumer default that must hold the stuck consumer's cache
# Anonymous-memory growth (KiB) that still counts as bounded, from a quarter of the flood to its end.
BROKER_GROWTH_LIMIT = 48 * 1024
CLIENT_GROWTH_LIMIT = 48 * 1024


def rss_anon_kib(pid: int) -> int:
    return rss_kib(pid, "RssAnon")


async def _idle_connections(addr: str, n: int) -> list[asyncio.StreamWriter]:
    host, port = addr.rsplit(":", 1)
    writers = []
    for _ in range(n):
        _, writer = await asyncio.open_connection(host, int(port))
        writers.append(writer)
    return writers


async def _flood(client: RemotingClient, addr: str, total: int, progress: list[int]) -> None:
    sent = 0
    while sent < total:
        n = min(SEND_BATCH, total - sent)
        r = await send_batch(client, addr, FLOOD_TOPIC, [BODY] * n, queue_id=(sent // SEND_BATCH) % QUEUES)
        assert r.code == ResponseCode.SUCCESS, r.remark
        sent += n
        progress[0] = sent


def _last_cache_line(stdout: str) -> dict[str, int]:
    lines = [json.loads(x) for x in stdout.splitlines() if x.startswith('{"event": "cache"')]
    return lines[-1] if lines else {}


async def _campaign(tmp_path: Path, *, idle: int, long_polls: int, messages: int, name: str) -> None:
    # Both ends of every idle connection live on this machine: the broker's side and ours.
    fd_limit = ensure_fd_limit(idle + long_polls + 512)
    cluster = await up(tmp_path, "--set", "mappedFileSizeCommitLog=67108864")
    healthy_count = 0
    writers: list[asyncio.StreamWriter] = []
    consumer_proc = None
    healthy = None
    try:
        async with RemotingClient() as client, RemotingClient() as poller:
            for topic in (FLOOD_TOPIC, POLL_TOPIC):
                r = await create_topic(client, cluster.broker, topic, read=QUEUES, write=QUEUES)
                assert r.code == ResponseCode.SUCCESS, r.remark
            broker_anon_start = rss_anon_kib(cluster.proc.pid)

            writers = await _idle_connections(cluster.broker, idle)
            # Long polls held on an empty topic, each asking for up to 60 s.
            polls = [asyncio.create_task(pull(poller, cluster.broker, f"PollG{i % 10}", POLL_TOPIC,
                                              i % QUEUES, 0, suspend_ms=60_000, timeout=90))
                     for i in range(long_polls)]

            consumer_proc = start_process(
                [sys.executable, str(Path(__file__).with_name("never_ack_consumer.py")), cluster.namesrv,
                 FLOOD_TOPIC, "NeverAckG"], name="never-ack", log_dir=tmp_path / "logs")
            proc = consumer_proc
            await wait_until(lambda: _last_cache_line(proc.stdout()).get("queues") == QUEUES,
                             timeout=60, interval=0.2)

            def count(msgs: list[object], ctx: object) -> ConsumeStatus:
                nonlocal healthy_count
                healthy_count += len(msgs)
                return ConsumeStatus.CONSUME_SUCCESS

            healthy = PushConsumer("HealthyG", namesrv_addr=cluster.namesrv, instance_name="healthy",
                                   consume_from_where="CONSUME_FROM_FIRST_OFFSET")
            healthy.subscribe(FLOOD_TOPIC, "*")
            healthy.register_listener(count)
            await healthy.start()

            progress = [0]
            flood = asyncio.create_task(_flood(client, cluster.broker, messages, progress))
            await wait_until(lambda: progress[0] >= messages // 4, timeout=120, interval=0.1)
            await wait_until(lambda: _last_cache_line(proc.stdout()).get("cached", 0) >= 1, timeout=30)
            broker_anon_quarter = rss_anon_kib(cluster.proc.pid)
            client_anon_quarter = rss_anon_kib(consumer_proc.pid)
            await flood
            await wait_until(lambda: healthy_count >= messages, timeout=120 + messages / 1000, interval=0.2)
            assert all(not p.done() for p in polls), "a long poll was answered before any message arrived"
            await asyncio.sleep(2.0)  # let the stuck consumer pull whatever it still may
            cache = _last_cache_line(consumer_proc.stdout())
            broker_anon_end = rss_anon_kib(cluster.proc.pid)
            client_anon_end = rss_anon_kib(consumer_proc.pid)
            broker_rss_end = rss_kib(cluster.proc.pid)

            # Every held long poll is answered once its queue has a message.
            for q in range(QUEUES):
                r = await send_batch(client, cluster.broker, POLL_TOPIC, [b"wake"], queue_id=q)
                assert r.code == ResponseCode.SUCCESS, r.remark
            answers = await asyncio.wait_for(asyncio.gather(*polls), 60)
            assert all(a.code == ResponseCode.SUCCESS and decode_pull(a) for a in answers), \
                {(a.code, a.remark) for a in answers}
            # The idle connections are still open (not closed for the others' sake).
            assert all(not w.is_closing() for w in writers)
            started = time.monotonic()
            r = await pull(client, cluster.broker, "AfterG", FLOOD_TOPIC, 0, 0, max_nums=1)
            assert r.code == ResponseCode.SUCCESS and time.monotonic() - started < 30
    finally:
        for w in writers:
            w.close()
        if healthy is not None:
            await healthy.shutdown()
        if consumer_proc is not None:
            consumer_proc.stop(grace=2.0)
        code = await stop(cluster)
    tracebacks, known = split_tracebacks(cluster.proc.stderr_path.read_text("utf-8", "replace"))
    report(name, fd_limit=fd_limit, idle_connections=idle, long_polls=long_polls, messages=messages,
           healthy_consumed=healthy_count,
           stuck_cached=cache.get("cached"), stuck_cached_bytes=cache.get("cached_bytes"),
           broker_anon_start_kib=broker_anon_start, broker_anon_quarter_kib=broker_anon_quarter,
           broker_anon_end_kib=broker_anon_end, broker_rss_end_kib=broker_rss_end,
           client_anon_quarter_kib=client_anon_quarter, client_anon_end_kib=client_anon_end,
           tracebacks=len(tracebacks), known_elsewhere=len(known))
    assert code == 0, cluster.describe()
    assert not tracebacks, tracebacks[0]
    # Flow control: the stuck consumer caches at most its threshold per queue (plus one pull batch).
    assert cache["cached"] <= QUEUES * (PULL_THRESHOLD_FOR_QUEUE + 32), cache
    assert client_anon_end - client_anon_quarter < CLIENT_GROWTH_LIMIT
    assert broker_anon_end - broker_anon_quarter < BROKER_GROWTH_LIMIT


@pytest.mark.timeout(300)
async def test_campaign_flow_control(tmp_path: Path) -> None:
    await _campaign(tmp_path, idle=200, long_polls=20, messages=20_000, name="flow_control")


@pytest.mark.slow
@pytest.mark.timeout(900)
async def test_campaign_flow_control_slow(tmp_path: Path) -> None:
    await _campaign(tmp_path, idle=1000, long_polls=100, messages=200_000, name="flow_control_slow")
