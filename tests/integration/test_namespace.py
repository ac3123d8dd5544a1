"""Namespaces against a real `rocketq up`: two namespaces share a topic name without crossover, the
API speaks plain names while the broker stores ``ns%topic``, and a failed message travels through
``%RETRY%ns%group`` to ``%DLQ%ns%group``."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest
from tests.harness import SMALL_STORE, Cluster, module_cluster, run_process, unique_name, wait_until

from rocketq.admin import AdminClient
from rocketq.aio import LitePullConsumer, Producer, PushConsumer
from rocketq.client.consumer import ConsumeStatus
from rocketq.client.message import Message, MessageExt

pytestmark = [pytest.mark.timeout(120)]

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

FAST_LEVELS = " ".join(["1s"] * 18)
cluster = module_cluster("namespace", *SMALL_STORE, "--set", f"messageDelayLevel={FAST_LEVELS}",
                         also_as_4_9=True)


def _push(cluster: Cluster, ns: str, group: str, topic: str, listener: Any, **options: Any) -> PushConsumer:
    consumer = PushConsumer(group, namesrv_addr=cluster.namesrv, namespace=ns, instance_name=unique_name("i"),
                            consume_from_where="CONSUME_FROM_FIRST_OFFSET", consume_thread_min=1,
                            consume_thread_max=1, **options)
    consumer.subscribe(topic, "*")
    consumer.register_listener(listener)
    return consumer


async def test_two_namespaces_same_topic_no_crossover(cluster: Cluster) -> None:
    topic, group = unique_name("NsT"), unique_name("NsG")
    seen: dict[str, list[MessageExt]] = {"nsa": [], "nsb": []}
    consumers = []
    for ns in seen:
        def listener(msgs: list[MessageExt], _ctx: Any, ns: str = ns) -> ConsumeStatus:
            seen[ns].extend(msgs)
            return ConsumeStatus.CONSUME_SUCCESS
        consumers.append(_push(cluster, ns, group, topic, listener))
    for c in consumers:
        await c.start()
    try:
        for ns, count in (("nsa", 3), ("nsb", 5)):
            async with Producer(unique_name("NsP"), namesrv_addr=cluster.namesrv, namespace=ns) as p:
                for i in range(count):
                    result = await p.send(Message(topic, f"{ns}-{i}".encode(), tags="t"))
                    assert result.message_queue.topic == topic  # the plain name in the API
                mqs = await p.fetch_publish_message_queues(topic)
                assert {mq.topic for mq in mqs} == {topic}
        await wait_until(lambda: len(seen["nsa"]) >= 3 and len(seen["nsb"]) >= 5, timeout=60)
        await asyncio.sleep(1.0)  # room for a crossover to show up
        for ns, count in (("nsa", 3), ("nsb", 5)):
            assert sorted(m.body for m in seen[ns]) == [f"{ns}-{i}".encode() for i in range(count)]
            assert {m.topic for m in seen[ns]} == {topic}
    finally:
        for c in consumers:
            await c.shutdown()
    async with AdminClient(cluster.namesrv) as admin:
        topics = set(await admin.fetch_all_topic_list())
        assert {f"nsa%{topic}", f"nsb%{topic}"} <= topics and topic not in topics
        assert f"%RETRY%nsa%{group}" in topics and f"%RETRY%nsb%{group}" in topics


async def test_lite_pull_speaks_plain_names(cluster: Cluster) -> None:
    topic = unique_name("NsL")
    async with Producer(unique_name("NsP"), namesrv_addr=cluster.namesrv, namespace="nsl") as p:
        await p.send(Message(topic, b"lite"))
    consumer = LitePullConsumer(unique_name("NsLG"), namesrv_addr=cluster.namesrv, namespace="nsl",
                                instance_name=unique_name("i"))
    await consumer.start()
    try:
        mqs = await consumer.fetch_message_queues(topic)
        assert mqs and {mq.topic for mq in mqs} == {topic}
        consumer.assign(mqs)
        assert {mq.topic for mq in consumer.assignment()} == {topic}
        for mq in mqs:
            await consumer.seek_to_begin(mq)
        got: list[MessageExt] = []

        async def some() -> bool:
            got.extend(await consumer.poll(0.5))
            return bool(got)

        await wait_until(some, timeout=30)
        assert got[0].body == b"lite" and got[0].topic == topic
        assert await consumer.max_offset(mqs[0]) >= 0
    finally:
        await consumer.shutdown()


async def test_retry_and_dlq_carry_the_namespace_on_the_wire(cluster: Cluster) -> None:
    topic, group = unique_name("NsR"), unique_name("NsRG")
    attempts: list[MessageExt] = []

    def always_later(msgs: list[MessageExt], _ctx: Any) -> ConsumeStatus:
        attempts.extend(msgs)
        return ConsumeStatus.RECONSUME_LATER

    consumer = _push(cluster, "nsr", group, topic, always_later, max_reconsume_times=1)
    await consumer.start()
    try:
        async with Producer(unique_name("NsP"), namesrv_addr=cluster.namesrv, namespace="nsr") as p:
            sent = await p.send(Message(topic, b"doomed", keys="dk"))
        # first delivery, then one retry through %RETRY%nsr%group, then the DLQ
        await wait_until(lambda: len(attempts) >= 2, timeout=60)
        assert {m.topic for m in attempts} == {topic}  # the retry copy shows the plain topic too
        assert attempts[1].reconsume_times == 1
        async with AdminClient(cluster.namesrv) as admin:
            async def in_dlq() -> bool:
                topics = await admin.fetch_all_topic_list()
                return f"%DLQ%nsr%{group}" in topics
            await wait_until(in_dlq, timeout=60)
            assert f"%RETRY%nsr%{group}" in await admin.fetch_all_topic_list()
            dead = await admin.view_message(f"%DLQ%nsr%{group}", sent.msg_id)
            assert dead.body == b"doomed"
            assert dead.properties.get("RETRY_TOPIC") == f"nsr%{topic}"
    finally:
        await consumer.shutdown()


def test_the_example_runs(cluster: Cluster) -> None:
    run = run_process([sys.executable, str(EXAMPLES / "namespace.py"), "--namesrv", cluster.namesrv,
                       "--topic", unique_name("NsEx")], timeout=100)
    assert run.returncode == 0, run.describe()
    assert "team-a received" in run.stdout and "team-b received" in run.stdout
