"""Failed consumption against a real `rocketq up`: CONSUMER_SEND_MSG_BACK, %RETRY% redelivery with
delay levels, the DLQ after maxReconsumeTimes, and broadcasting (no send-back, local offsets).

The broker runs with one-second delay levels (`--set messageDelayLevel=...`) so retries come back
quickly; nothing is patched.
"""

from __future__ import annotations

import asyncio
import collections
from pathlib import Path
from typing import Any

import pytest
from tests.harness import Cluster, module_cluster, unique_name, wait_until
from tests.wire import create_topic, decode_pull, get_route, pull

from rocketq.aio import PushConsumer
from rocketq.client.consumer import ConsumeConcurrentlyContext, ConsumeStatus, MessageModel
from rocketq.client.message import Message
from rocketq.client.producer import Producer
from rocketq.remoting import RemotingClient

pytestmark = [
    pytest.mark.timeout(60),
]

FAST_LEVELS = " ".join(["1s"] * 18)
SERVER_ARGS = (
    "--set",
    "mappedFileSizeCommitLog=16777216",
    "--set",
    "mappedFileSizeConsumeQueue=120000",
    "--set",
    "maxHashSlotNum=1000",
    "--set",
    "maxIndexNum=4000",
    "--set",
    f"messageDelayLevel={FAST_LEVELS}",
)


cluster = module_cluster("retry", *SERVER_ARGS, also_as_4_9=True)


async def make_topic(cluster: Cluster, queues: int = 2) -> str:
    topic = unique_name("RT")
    async with RemotingClient() as rc:
        assert (await create_topic(rc, cluster.broker, topic, read=queues, write=queues)).code == 0
        await wait_until(lambda: get_route(rc, cluster.namesrv, topic), timeout=10)
    return topic


async def send(cluster: Cluster, topic: str, bodies: list[bytes]) -> list[str]:
    producer = Producer(unique_name("PG"), namesrv_addr=cluster.namesrv)
    await producer.start()
    try:
        return [(await producer.send(Message(topic, body, tags="T", keys="k"))).msg_id for body in bodies]
    finally:
        await producer.shutdown()


def consumer_for(cluster: Cluster, group: str, topic: str, listener: Any, **options: Any) -> PushConsumer:
    consumer = PushConsumer(
        group,
        namesrv_addr=cluster.namesrv,
        instance_name=unique_name("i"),
        consume_from_where="CONSUME_FROM_FIRST_OFFSET",
        consume_thread_min=2,
        consume_thread_max=2,
        **options,
    )
    consumer.subscribe(topic, "*")
    consumer.register_listener(listener)
    return consumer


async def test_failing_three_times_then_succeeding_delivers_four_times(cluster: Cluster) -> None:
    topic, group = await make_topic(cluster), unique_name("CG")
    deliveries: list[tuple[str, int, str, str | None]] = []

    def listener(msgs: list[Any], ctx: ConsumeConcurrentlyContext) -> ConsumeStatus:
        for m in msgs:
            deliveries.append((m.uniq_key, m.reconsume_times, m.topic, m.tags))
        if msgs[0].reconsume_times == 0:
            return ConsumeStatus.RECONSUME_LATER
        if msgs[0].reconsume_times == 1:
            raise RuntimeError("a listener that raises means RECONSUME_LATER")
        if msgs[0].reconsume_times == 2:
            return None  # type: ignore[return-value]  # no answer also means later
        return ConsumeStatus.CONSUME_SUCCESS

    [msg_id] = await send(cluster, topic, [b"payload"])
    consumer = consumer_for(cluster, group, topic, listener)
    await consumer.start()
    try:
        await wait_until(lambda: len(deliveries) >= 4, timeout=25)
        await asyncio.sleep(1.5)  # a fifth delivery would arrive within a delay level
    finally:
        await consumer.shutdown()
    assert [d[1] for d in deliveries] == [0, 1, 2, 3]
    # Every redelivery is the same message, shown under its original topic with its tag.
    assert {(d[0], d[2], d[3]) for d in deliveries} == {(msg_id, topic, "T")}
    # Stats are per queue topic, as in RocketMQ: the retries were pulled from %RETRY%<group>.
    first, retries = consumer.stats.totals(group, topic), consumer.stats.totals(group, f"%RETRY%{group}")
    assert (first["consumed_failed"], first["consumed_ok"]) == (1, 0)
    assert (retries["consumed_failed"], retries["consumed_ok"]) == (2, 1)


async def test_partial_ack_and_dead_letter_after_max_reconsume_times(cluster: Cluster) -> None:
    topic, group = await make_topic(cluster, queues=1), unique_name("CG")
    seen: collections.Counter[bytes] = collections.Counter()

    def listener(msgs: list[Any], ctx: ConsumeConcurrentlyContext) -> ConsumeStatus:
        for m in msgs:
            seen[m.body] += 1
        # Everything up to the first "bad" message succeeded; the rest go back.
        bad = [i for i, m in enumerate(msgs) if m.body.startswith(b"bad")]
        if bad:
            ctx.ack_index = bad[0] - 1
        return ConsumeStatus.CONSUME_SUCCESS

    await send(cluster, topic, [b"good0", b"good1", b"bad", b"good2"])
    consumer = consumer_for(
        cluster, group, topic, listener, max_reconsume_times=1, consume_message_batch_max_size=4
    )
    await consumer.start()
    try:
        await wait_until(lambda: seen[b"bad"] >= 2, timeout=20)
        await asyncio.sleep(1.5)
    finally:
        await consumer.shutdown()
    # First try + one retry, then the DLQ; good2 came after the ack index, so it shared bad's fate.
    assert seen == {b"good0": 1, b"good1": 1, b"bad": 2, b"good2": 2}
    async with RemotingClient() as rc:
        dlq = f"%DLQ%{group}"

        async def in_dlq() -> list[Any]:
            msgs = decode_pull(await pull(rc, cluster.broker, "peek", dlq, 0, 0))
            return msgs if len(msgs) >= 2 else []

        dead = await wait_until(in_dlq, timeout=10)
    assert sorted(m.body for m in dead) == [b"bad", b"good2"]


async def test_broadcasting_every_member_gets_everything_and_keeps_local_offsets(
    cluster: Cluster, tmp_path: Path
) -> None:
    topic, group = await make_topic(cluster, queues=4), unique_name("BG")
    got: dict[str, list[bytes]] = collections.defaultdict(list)

    def listener_for(name: str) -> Any:
        def consume(msgs: list[Any], ctx: Any) -> ConsumeStatus:
            got[name].extend(m.body for m in msgs)
            return ConsumeStatus.RECONSUME_LATER if name == "b0" else ConsumeStatus.CONSUME_SUCCESS

        return consume

    def member(name: str) -> PushConsumer:
        return PushConsumer(
            group,
            namesrv_addr=cluster.namesrv,
            instance_name=name,
            message_model=MessageModel.BROADCASTING,
            store_dir=str(tmp_path),
            consume_from_where="CONSUME_FROM_FIRST_OFFSET",
        )

    members = [member(f"b{i}") for i in range(3)]
    for i, c in enumerate(members):
        c.subscribe(topic, "*")
        c.register_listener(listener_for(f"b{i}"))
        await c.start()
    bodies = [f"x{i}".encode() for i in range(40)]
    try:
        await send(cluster, topic, bodies)
        await wait_until(lambda: all(len(got[f"b{i}"]) >= 40 for i in range(3)), timeout=15)
        await asyncio.sleep(0.5)
        for c in members:
            await c.persist_consumer_offset()
    finally:
        for c in members:
            await c.shutdown()
    for i in range(3):
        # Failures are dropped in broadcasting (no retry topic): b0 sees each message once too.
        assert sorted(got[f"b{i}"]) == sorted(bodies)
    offsets_file = tmp_path / members[1].client.client_id / group / "offsets.json"
    assert offsets_file.exists()
    # A restarted member resumes from its local offsets: only new messages arrive.
    got.clear()
    again = member("b1")
    again.subscribe(topic, "*")
    again.register_listener(listener_for("b1"))
    await again.start()
    try:
        await send(cluster, topic, [b"late"])
        await wait_until(lambda: got["b1"], timeout=10)
        await asyncio.sleep(0.5)
    finally:
        await again.shutdown()
    assert got["b1"] == [b"late"]
