"""kill -9 a broker in the middle of pop consumption and restart it on the same data: checkpoints
and acks are in the revive log, so what was acked never comes back, what was popped and not acked
comes back once its invisible time is over, and what was never popped is popped; nothing is lost.

The kill comes right after the acks, before the broker's 5 s offset persist could have run: the
restarted broker must rebuild the group's progress from the revive log, not from consumerOffset.json.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from faultlib import kill9, stop, up
from tests.harness import Cluster, wait_until
from tests.wire import ack, create_routed_topic, get_route, pop, popped, send_message

from rocketq.codec.codes import ResponseCode
from rocketq.remoting import RemotingClient

pytestmark = [pytest.mark.timeout(180)]

TOPIC = "PopKill9"
GROUP = "PopKill9G"
QUEUES = 2
SENT = 60
INVISIBLE_MS = 4_000


async def _pop_all(
    client: RemotingClient, c: Cluster, broker: str, want: int, invisible_ms: int, timeout: float
) -> list:
    got: list = []

    async def more() -> bool:
        r = await pop(client, c.broker, GROUP, TOPIC, invisible_ms=invisible_ms, poll_ms=500)
        if r.code == ResponseCode.SUCCESS:
            got.extend(popped(r, broker))
        return len(got) >= want

    await wait_until(more, timeout=timeout)
    return got


async def test_pop_state_survives_kill9(tmp_path: Path) -> None:
    c = await up(tmp_path)
    async with RemotingClient() as client:
        await create_routed_topic(c.namesrv, c.broker, TOPIC, QUEUES)
        broker = (await get_route(client, c.namesrv, TOPIC)).broker_datas[0].broker_name  # type: ignore[union-attr]
        for i in range(SENT):
            r = await send_message(client, c.broker, TOPIC, b"%d" % i, queue_id=i % QUEUES)
            assert r.code == ResponseCode.SUCCESS
        popped_at = time.monotonic()  # no held message was popped before this
        first = await _pop_all(client, c, broker, 40, INVISIBLE_MS, 20)
        acked = {m.body for m in first[:25]}
        for m in first[:25]:
            assert (await ack(client, c.broker, GROUP, m)).code == ResponseCode.SUCCESS
        held = {m.body for m in first[25:]}
    await kill9(c)

    c = await up(tmp_path)
    try:
        async with RemotingClient() as client:
            rest = {b"%d" % i for i in range(SENT)} - acked - held
            later = await _pop_all(client, c, broker, len(rest) + len(held), 60_000, 60)
            bodies = [m.body for m in later]
            assert sorted(bodies) == sorted(rest | held), "acked came back or something was lost"
            assert time.monotonic() - popped_at >= INVISIBLE_MS / 1000  # held ones: not before their time
            assert {m.reconsume_times for m in later if m.body in held} == {1}
            for m in later:
                assert (await ack(client, c.broker, GROUP, m)).code == ResponseCode.SUCCESS
            await asyncio.sleep(1)
            assert (
                await pop(client, c.broker, GROUP, TOPIC, poll_ms=500)
            ).code == ResponseCode.POLLING_TIMEOUT
    finally:
        await stop(c)
