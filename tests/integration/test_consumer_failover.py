"""A push consumer after a controller-mode failover (issue 13): kill -9 the master of a broker
group while a consumer runs; the consumer's next pull finds no broker there, it looks the route
up at once (not at the 30 s poll), and messages sent to the promoted master reach it within the
issue's 10 s."""

from __future__ import annotations

import time
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

from rocketq.aio import ConsumeStatus, PushConsumer
from rocketq.remoting import RemotingClient

pytestmark = pytest.mark.timeout(240)


async def test_push_consumer_follows_the_promoted_master_at_once(tmp_path: Path) -> None:
    with controlled_group(tmp_path) as g:
        async with RemotingClient() as client:
            b0, b1, topic = await elected_pair(tmp_path, g, client, "CtlCons")

            bodies: set[bytes] = set()

            def listener(msgs: list[Any], ctx: Any) -> ConsumeStatus:
                bodies.update(bytes(m.body) for m in msgs)
                return ConsumeStatus.CONSUME_SUCCESS

            # the default 30 s route poll: only the refresh on an unreachable broker can be quick
            consumer = PushConsumer(unique_name("CtlConsG"), namesrv_addr=g["ns"].addr,
                                    instance_name=unique_name("i"))
            consumer.subscribe(topic, "*")
            consumer.register_listener(listener)
            await consumer.start()
            try:
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
            finally:
                await consumer.shutdown()
