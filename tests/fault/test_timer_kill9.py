"""kill -9 a broker holding pending timer messages, restart it on the same data: every timer whose
send was acknowledged fires on its real topic, none twice (the timer log's queue offsets and the
checkpoint's delivery intent, store/timer/). One kill lands while all are pending, one while
they are firing. The default run is bounded; the slow run holds 10k pending timers."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from pathlib import Path

import pytest
from faultlib import kill9, read_topic, stop, up
from tests.harness import Cluster, wait_until
from tests.wire import create_topic, message_properties, new_uniq_key, send_message

from rocketq.codec.codes import ResponseCode
from rocketq.remoting import RemotingClient

TOPIC = "TimerKill"
QUEUES = 4
TIMER = ("--set", "timerPrecisionMs=100")


async def _send_timers(client: RemotingClient, addr: str, count: int, start_ms: int,
                       spread_ms: int) -> set[str]:
    """Timers due over [start_ms, start_ms + spread_ms); the UNIQ_KEYs the broker acknowledged."""
    acked: set[str] = set()

    async def one(i: int) -> None:
        uniq = new_uniq_key()
        props = message_properties(uniq_key=uniq,
                                   extra={"TIMER_DELIVER_MS": str(start_ms + i * spread_ms // count)})
        r = await send_message(client, addr, TOPIC, b"t%d" % i, queue_id=i % QUEUES, properties=props)
        assert r.code == ResponseCode.SUCCESS, r.remark
        acked.add(uniq)

    for lo in range(0, count, 256):
        await asyncio.gather(*(one(i) for i in range(lo, min(count, lo + 256))))
    return acked


async def _fired(client: RemotingClient, cluster: Cluster) -> Counter[str]:
    queues = await read_topic(client, cluster.broker, TOPIC, range(QUEUES))
    return Counter(m.uniq_key or "" for msgs in queues.values() for m in msgs)


async def _run(tmp_path: Path, count: int) -> None:
    cluster = await up(tmp_path, *TIMER)
    try:
        async with RemotingClient() as client:
            await create_topic(client, cluster.broker, TOPIC, read=QUEUES, write=QUEUES)
            # Far enough ahead that every send is in before the first fires, however slow the machine.
            start = int(time.time() * 1000) + 3000 + count
            acked = await _send_timers(client, cluster.broker, count, start, 4000)
        await kill9(cluster)  # all pending
        cluster = await up(tmp_path, *TIMER)
        async with RemotingClient() as client:
            # Then again while they fire: once a quarter is out.
            await wait_until(lambda: _some_fired(client, cluster, count // 4), timeout=120, interval=0.05)
        await kill9(cluster)
        cluster = await up(tmp_path, *TIMER)
        async with RemotingClient() as client:
            await wait_until(lambda: _all_fired(client, cluster, acked), timeout=180, interval=0.5)
            await asyncio.sleep(1.0)  # anything delivered twice would show by now
            fired = await _fired(client, cluster)
        assert set(fired) == acked, f"{len(acked - set(fired))} lost, {len(set(fired) - acked)} unknown"
        twice = [k for k, n in fired.items() if n > 1]
        assert not twice, f"{len(twice)} delivered more than once"
    finally:
        await stop(cluster)


async def _some_fired(client: RemotingClient, cluster: Cluster, n: int) -> bool:
    return sum((await _fired(client, cluster)).values()) >= n


async def _all_fired(client: RemotingClient, cluster: Cluster, acked: set[str]) -> bool:
    return set(await _fired(client, cluster)) >= acked


@pytest.mark.timeout(300)
async def test_pending_timers_fire_once_after_kill9(tmp_path: Path) -> None:
    await _run(tmp_path, 1500)


@pytest.mark.slow
@pytest.mark.timeout(900)
async def test_10k_pending_timers_fire_once_after_kill9(tmp_path: Path) -> None:
    await _run(tmp_path, 10_000)
