"""Consumers after a controller-mode failover (issue 13): kill -9 the master of a broker group while
a consumer runs; the consumer's next pull (or pop) finds no broker there, it looks the route up at
once (not at the 30 s poll), and messages sent to the promoted master reach it within the issue's
10 s. One test per consumer: push, lite pull (subscribe and assign), simple (pop)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from tests.harness import unique_name, wait_until
from tests.integration.test_controller_failover import (
    QUEUES,
    accepts,
    controlled_group,
    elected_pair,
    master_is,
)
from tests.wire import send_message

from rocketq.aio import ConsumeStatus, LitePullConsumer, PushConsumer, SimpleConsumer
from rocketq.errors import RocketQError
from rocketq.remoting import RemotingClient

pytestmark = pytest.mark.timeout(240)

Run = Callable[[set[bytes]], Awaitable[None]]
# The route poll two minutes apart, not the default 30 s (which may fall into the 10 s by chance).
SLOW_POLLS: dict[str, Any] = {"poll_name_server_interval": 120_000}


@contextlib.asynccontextmanager
async def failover(tmp_path: Path, prefix: str) -> AsyncIterator[tuple[str, str, Run]]:
    """A controller-mode pair with a topic on its master; yields (name server, topic, run), where
    `run(bodies)` stores messages on the master, waits until a consumer put them into `bodies`,
    kill -9s the master and asserts that messages stored on the promoted master follow within 10 s."""
    with controlled_group(tmp_path) as g:
        async with RemotingClient() as client:
            b0, b1, topic = await elected_pair(tmp_path, g, client, prefix)

            async def run(bodies: set[bytes]) -> None:
                before = {b"before-%d" % i for i in range(20)}
                for i in range(20):
                    r = await send_message(client, b0.addr, topic, b"before-%d" % i, queue_id=i % QUEUES)
                    assert r.code == 0
                await wait_until(lambda: before <= bodies, timeout=60)

                b0.proc.kill()
                await wait_until(lambda: master_is(client, g, b1.addr), timeout=30)
                await wait_until(lambda: accepts(client, b1.addr), timeout=30)
                after = {b"after-%d" % i for i in range(20)}
                for i in range(20):
                    r = await send_message(client, b1.addr, topic, b"after-%d" % i, queue_id=i % QUEUES)
                    assert r.code == 0
                sent = time.monotonic()
                await wait_until(lambda: after <= bodies, timeout=10)  # the bound
                took = time.monotonic() - sent
                print(f"consumer got the messages sent to the promoted master {took:.2f} s after storing")

            yield g["ns"].addr, topic, run


@contextlib.asynccontextmanager
async def draining(loop_body: Callable[[], Awaitable[None]]) -> AsyncIterator[None]:
    """Run `loop_body` over and over in the background; a client error (the killed master, until
    the route names the promoted one) is printed and the loop goes on."""

    async def drain() -> None:
        while True:
            try:
                await loop_body()
            except RocketQError as e:
                print(f"while draining: {e!r}")
                await asyncio.sleep(0.1)

    task = asyncio.get_running_loop().create_task(drain())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_push_consumer_follows_the_promoted_master_at_once(tmp_path: Path) -> None:
    async with failover(tmp_path, "CtlCons") as (ns, topic, run):
        bodies: set[bytes] = set()

        def listener(msgs: list[Any], ctx: Any) -> ConsumeStatus:
            bodies.update(bytes(m.body) for m in msgs)
            return ConsumeStatus.CONSUME_SUCCESS

        consumer = PushConsumer(unique_name("CtlConsG"), namesrv_addr=ns, instance_name=unique_name("i"),
                                **SLOW_POLLS)
        consumer.subscribe(topic, "*")
        consumer.register_listener(listener)
        await consumer.start()
        try:
            await run(bodies)
        finally:
            await consumer.shutdown()


# assign mode shares the error branch with subscribe; it runs under make test-all
@pytest.mark.parametrize("mode", ["subscribe", pytest.param("assign", marks=pytest.mark.slow)])
async def test_lite_pull_consumer_follows_the_promoted_master_at_once(tmp_path: Path, mode: str) -> None:
    async with failover(tmp_path, "CtlLite") as (ns, topic, run):
        bodies: set[bytes] = set()
        # nothing committed: a commit failing on the dead master would refresh the route too (the
        # first, 10 s after start, falls into the 10 s), so only the failed pull can
        consumer = LitePullConsumer(unique_name("CtlLiteG"), namesrv_addr=ns, instance_name=unique_name("i"),
                                    auto_commit=False, **SLOW_POLLS)
        if mode == "subscribe":
            consumer.subscribe(topic, "*")
        await consumer.start()
        try:
            if mode == "assign":
                consumer.assign(await consumer.fetch_message_queues(topic))

            async def poll() -> None:
                bodies.update(bytes(m.body) for m in await consumer.poll(timeout=1.0))

            async with draining(poll):
                await run(bodies)
        finally:
            await consumer.shutdown()


async def test_simple_consumer_follows_the_promoted_master_at_once(tmp_path: Path) -> None:
    async with failover(tmp_path, "CtlPop") as (ns, topic, run):
        bodies: set[bytes] = set()
        async with SimpleConsumer(unique_name("CtlPopG"), namesrv_addr=ns,
                                  subscription={topic: "*"}, await_duration=2,
                                  instance_name=unique_name("i"), **SLOW_POLLS) as consumer:

            async def receive() -> None:
                got = await consumer.receive(16, invisible_duration=30)
                bodies.update(bytes(m.body) for m in got)
                if got:
                    await consumer.ack_many(got)

            async with draining(receive):
                await run(bodies)
