"""An async listener woken for a pull's messages runs before that pull's task goes on (to build
and send the next pull): the listener call is the message's latency, the next pull is for later."""

from __future__ import annotations

import asyncio

from rocketq.client.consumer.worker_pool import AsyncListenerPool


async def test_waking_is_set_until_the_woken_worker_runs() -> None:
    pool = AsyncListenerPool("t", 2)
    await asyncio.sleep(0)  # the workers park
    order: list[str] = []

    async def work(arg: str) -> None:
        order.append(arg)

    assert not pool.waking
    pool.submit(work, "listener", lambda _: None)
    assert pool.waking  # what push.pull_once looks at to yield before its next pull
    await asyncio.sleep(0)  # the yield
    order.append("next pull")
    assert order == ["listener", "next pull"]
    assert not pool.waking
    await pool.shutdown()
