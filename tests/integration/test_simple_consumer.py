"""SimpleConsumer (pop) against a real `rocketq up`: receive, ack, change_invisible_duration, many
consumers sharing a topic with each message acked exactly once, a consumer killed with -9 whose
messages come back to someone else after their invisible time."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
import time
from collections import Counter
from datetime import timedelta
from pathlib import Path

import pytest
from tests.harness import SMALL_STORE, Cluster, module_cluster, unique_name, wait_until
from tests.wire import create_routed_topic

import rocketq
from rocketq.aio import Message, Producer, SimpleConsumer

pytestmark = [pytest.mark.timeout(180)]

cluster = module_cluster("simple-consumer", *SMALL_STORE)


async def _topic_with(cluster: Cluster, n: int, queues: int = 8) -> str:
    topic = unique_name("SimpleT")
    await create_routed_topic(cluster.namesrv, cluster.broker, topic, queues)
    async with Producer(unique_name("pg"), namesrv_addr=cluster.namesrv) as p:
        sends = [
            p.send_batch([Message(topic, b"%d" % i) for i in range(start, min(n, start + 200))])
            for start in range(0, n, 200)
        ]
        for start in range(0, len(sends), 16):
            await asyncio.gather(*sends[start : start + 16])
    return topic


async def test_receive_ack_and_what_comes_back(cluster: Cluster) -> None:
    topic = await _topic_with(cluster, 6, queues=2)
    group = unique_name("SimpleG")
    async with SimpleConsumer(
        group, namesrv_addr=cluster.namesrv, subscription={topic: "*"}, await_duration=2
    ) as consumer:
        got = []
        await wait_until(lambda: _receive_into(consumer, got, 32, 2.0, want=6), timeout=20)
        assert sorted(m.body for m in got) == [b"%d" % i for i in range(6)]
        assert all(m.topic == topic and m.delivery_attempt == 1 and m.receipt_handle for m in got)
        for m in got[:3]:
            await consumer.ack(m)
        await consumer.ack_many(got[3:4])
        await consumer.change_invisible_duration(got[4], timedelta(seconds=30))
        t0 = time.monotonic()
        back: list = []
        await wait_until(lambda: _receive_into(consumer, back, 32, 30.0, want=1), timeout=20)
        assert time.monotonic() - t0 >= 1.0  # not before its invisible time ended
        assert [m.body for m in back] == [got[5].body] and back[0].delivery_attempt == 2
        await consumer.ack(back[0])
        await consumer.ack(got[4])  # its new handle
        assert await consumer.receive(32, 30) == []


async def _receive_into(consumer: SimpleConsumer, into: list, n: int, invisible: float, want: int) -> bool:
    into.extend(await consumer.receive(n, invisible))
    return len(into) >= want


def test_the_sync_consumer(cluster: Cluster) -> None:
    topic = asyncio.run(_topic_with(cluster, 3, queues=1))
    with rocketq.SimpleConsumer(
        unique_name("SyncG"), namesrv_addr=cluster.namesrv, subscription={topic: "*"}, await_duration=1
    ) as consumer:
        got: list = []
        deadline = time.monotonic() + 20
        while len(got) < 3 and time.monotonic() < deadline:
            got += consumer.receive(16, 10.0)
        assert sorted(m.body for m in got) == [b"0", b"1", b"2"]
        consumer.change_invisible_duration(got[0], 20)
        for m in got:
            consumer.ack(m)
        assert consumer.receive(16, 10.0) == []
        # a topic subscribed while running is read from the next receive on
        other = asyncio.run(_topic_with(cluster, 1, queues=1))
        consumer.subscribe(other)
        late: list = []
        while not late and time.monotonic() < deadline + 20:
            late += [m for m in consumer.receive(16, 10.0) if m.topic == other]
        assert [m.body for m in late] == [b"0"]
        consumer.ack(late[0])


async def _share(cluster: Cluster, consumers: int, messages: int) -> None:
    topic = await _topic_with(cluster, messages)
    group = unique_name("ShareG")
    seen: Counter[bytes] = Counter()
    done = asyncio.Event()

    async def run(i: int) -> None:
        async with SimpleConsumer(
            group,
            namesrv_addr=cluster.namesrv,
            subscription={topic: "*"},
            await_duration=1,
            instance_name=f"share{i}",
        ) as c:
            while not done.is_set():
                batch = await c.receive(32, 120)
                if batch:
                    await c.ack_many(batch)
                    seen.update(m.body for m in batch)
                    if sum(seen.values()) >= messages:
                        done.set()

    tasks = [asyncio.ensure_future(run(i)) for i in range(consumers)]
    try:
        await asyncio.wait_for(done.wait(), 600)
        await asyncio.sleep(1)  # anything handed out twice would show up now
    finally:
        done.set()
        await asyncio.gather(*tasks)
    assert len(seen) == messages and set(seen.values()) == {1}


async def test_consumers_share_a_topic_and_each_message_is_acked_once(cluster: Cluster) -> None:
    await _share(cluster, 8, 20_000)


@pytest.mark.slow
@pytest.mark.timeout(900)
async def test_64_consumers_share_200k_messages(cluster: Cluster) -> None:
    await _share(cluster, 64, 200_000)


KILLED_CONSUMER = textwrap.dedent("""
    import json, sys
    import rocketq
    c = rocketq.SimpleConsumer(sys.argv[2], namesrv_addr=sys.argv[1], subscription={sys.argv[3]: "*"},
                               await_duration=2)
    c.start()
    got = []
    while len(got) < 5:
        got += c.receive(32, 3.0)
    print(json.dumps([m.body.decode() for m in got]), flush=True)
    import time
    time.sleep(600)
""")


async def test_a_consumer_killed_mid_batch_gives_its_messages_to_another(
    cluster: Cluster, tmp_path: Path
) -> None:
    topic = await _topic_with(cluster, 5, queues=1)
    group = unique_name("KillG")
    script = tmp_path / "killed.py"
    script.write_text(KILLED_CONSUMER)
    proc = subprocess.Popen(
        [sys.executable, str(script), cluster.namesrv, group, topic], stdout=subprocess.PIPE, text=True
    )
    try:
        line = await asyncio.wait_for(asyncio.to_thread(proc.stdout.readline), 60)  # type: ignore[union-attr]
        held = json.loads(line)
        assert sorted(held) == ["0", "1", "2", "3", "4"]
    finally:
        proc.kill()
        proc.wait()
    async with SimpleConsumer(
        group,
        namesrv_addr=cluster.namesrv,
        subscription={topic: "*"},
        await_duration=2,
        instance_name="survivor",
    ) as c:
        back: list = []
        await wait_until(lambda: _receive_into(c, back, 32, 30.0, want=5), timeout=30)
        assert sorted(m.body.decode() for m in back) == sorted(held)
        assert {m.delivery_attempt for m in back} == {2}
        await c.ack_many(back)


def test_the_example_runs(cluster: Cluster) -> None:
    example = Path(__file__).resolve().parents[2] / "examples" / "simple_consumer.py"
    run = subprocess.run(
        [sys.executable, str(example), "--namesrv", cluster.namesrv, "--messages", "40"],
        capture_output=True,
        text=True,
        timeout=150,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "40 of 40 messages acked, each exactly once: True" in run.stdout
    assert "done on attempt 2" in run.stdout


async def test_push_consumers_in_pop_mode_share_a_topic(cluster: Cluster) -> None:
    from rocketq.aio import ConsumeMode, ConsumeStatus, PushConsumer

    topic = await _topic_with(cluster, 200, queues=2)
    group = unique_name("PushPopG")
    seen: Counter[bytes] = Counter()
    attempts: dict[bytes, list[int]] = {}

    def listener(msgs: list, ctx: object) -> ConsumeStatus:
        m = msgs[0]
        attempts.setdefault(m.body, []).append(m.reconsume_times)
        if m.body == b"7" and m.reconsume_times == 0:
            ctx.delay_level_when_next_consume = 1  # type: ignore[attr-defined]  # back in 1 s
            return ConsumeStatus.RECONSUME_LATER
        seen[m.body] += 1
        return ConsumeStatus.CONSUME_SUCCESS

    consumers = [
        PushConsumer(
            group,
            namesrv_addr=cluster.namesrv,
            consume_mode=ConsumeMode.POP,
            instance_name=f"pushpop{i}",
            broker_suspend_max_time_millis=2_000,
        )
        for i in range(2)
    ]
    hooked: list[str] = []

    class Hook:
        def hook_name(self) -> str:
            return "recorder"

        def consume_message_before(self, ctx: object) -> None:
            pass

        def consume_message_after(self, ctx: object) -> None:
            hooked.append(ctx.status)  # type: ignore[attr-defined]

    for c in consumers:
        c.subscribe(topic, "*")
        c.register_listener(listener)
        c.register_consume_message_hook(Hook())
        await c.start()
    try:
        await wait_until(lambda: len(seen) == 200, timeout=60)
        await asyncio.sleep(1)
    finally:
        for c in consumers:
            await c.shutdown()
    assert set(seen.values()) == {1}
    assert attempts[b"7"] == [0, 1]
    assert hooked.count("CONSUME_SUCCESS") == 200 and hooked.count("RECONSUME_LATER") == 1
