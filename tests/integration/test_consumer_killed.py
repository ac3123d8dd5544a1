"""A group member killed with -9 mid-stream: the survivors take its queues, nothing is lost.

Clustering promises at-least-once when a consumer crashes: offsets the dead member consumed but
had not yet committed are consumed again by whoever takes its queues. The victim runs in a real
subprocess (kill -9 must not take pytest with it); the survivor runs on this test's loop.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from tests.harness import SMALL_STORE, Cluster, module_cluster, unique_name, wait_until
from tests.integration.test_consumer_clustering import (
    Recorder,
    make_topic,
    new_consumer,
    ownership,
    produce,
)

pytestmark = [pytest.mark.timeout(90)]

cluster = module_cluster("killed", *SMALL_STORE, also_as_4_9=True, slow_as_4_9=True)

# The victim: one push consumer printing "<uniq key>" per delivered message, flushed at once, so
# what it consumed before the kill is on disk whatever state it dies in.
VICTIM = textwrap.dedent(
    """
    import asyncio, sys
    from rocketq.aio import PushConsumer
    from rocketq.client.consumer import ConsumeStatus

    namesrv, group, topic, out = sys.argv[1:5]

    async def main() -> None:
        sink = open(out, "a", buffering=1)

        def listener(msgs, ctx):
            for m in msgs:
                sink.write(m.uniq_key + "\\n")
            return ConsumeStatus.CONSUME_SUCCESS

        c = PushConsumer(group, namesrv_addr=namesrv, instance_name="victim",
                         consume_from_where="CONSUME_FROM_FIRST_OFFSET")
        c.subscribe(topic, "*")
        c.register_listener(listener)
        await c.start()
        print("started", flush=True)
        await asyncio.Event().wait()

    asyncio.run(main())
    """
)


async def test_a_killed_member_loses_nothing(cluster: Cluster, tmp_path: Path) -> None:
    topic = await make_topic(cluster, queues=8)
    group = unique_name("KG")
    victim_log = tmp_path / "victim.txt"
    victim_log.touch()
    victim = subprocess.Popen(
        [sys.executable, "-c", VICTIM, cluster.namesrv, group, topic, str(victim_log)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    recorder = Recorder()
    survivor = new_consumer(cluster, group, topic, "survivor", recorder.listener("survivor"))
    try:
        assert victim.stdout is not None
        line = await asyncio.wait_for(asyncio.to_thread(victim.stdout.readline), 30)
        assert line.strip() == b"started"
        await survivor.start()

        # Both members own a share before anything is sent, so the victim really holds queues.
        async def shared() -> bool:
            mine = [mq for mq, owners in ownership([survivor], topic).items() if owners]
            return 0 < len(mine) < 8

        await wait_until(shared, timeout=30)
        first = await produce(cluster, topic, 200)

        async def victim_consumed_some() -> bool:
            return len(victim_log.read_text().split()) > 0

        await wait_until(victim_consumed_some, timeout=30)
        os.killpg(victim.pid, signal.SIGKILL)
        victim.wait(10)
        second = await produce(cluster, topic, 200)
        sent = set(first) | set(second)

        def consumed() -> set[str]:
            return set(victim_log.read_text().split()) | {key for _, key, _ in recorder.seen}

        # The broker notices the closed channel, the group is told, the survivor takes all 8
        # queues and re-reads from the victim's last committed offsets.
        await wait_until(lambda: sent <= consumed(), timeout=60)
        assert len(ownership([survivor], topic)) == 8
        assert sent <= consumed()
    finally:
        if victim.poll() is None:
            os.killpg(victim.pid, signal.SIGKILL)
            victim.wait(10)
        await survivor.shutdown()
