"""A timer message read by the Spark source: on its real topic once it fired, with its timer
properties; a topic pattern skips the broker's system topics (rmq_sys_wheel_timer, where timer
messages wait), both from the broker and from the store directory."""

from __future__ import annotations

import asyncio
import time

import pytest
from tests.harness import Cluster
from tests.spark.conftest import make_topic
from tests.wire import decode_pull, message_properties, pull, send_message

from rocketq.remoting import RemotingClient

pytestmark = pytest.mark.timeout(120)


def _send_timers_and_wait(cluster: Cluster, topic: str, n: int) -> None:
    async def go() -> None:
        async with RemotingClient() as client:
            for i in range(n):
                props = message_properties(extra={"TIMER_DELAY_MS": "300"})
                r = await send_message(client, cluster.broker, topic, b"timer-%d" % i, properties=props)
                assert r.code == 0, r.remark
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                got = decode_pull(await pull(client, cluster.broker, "SparkTimerWait", topic, 0, 0))
                if len(got) == n:
                    return
                await asyncio.sleep(0.2)
            raise AssertionError("the timers did not fire")
    asyncio.run(go())


def test_a_timer_message_reads_on_its_real_topic_and_patterns_skip_system_topics(spark, cluster):
    topic = make_topic(cluster, queues=1, prefix="SparkTimer")
    _send_timers_and_wait(cluster, topic, 3)
    pattern = f"({topic}|rmq_sys_wheel_timer|SCHEDULE_TOPIC_XXXX)"
    reader = spark.read.format("rocketq").option("namesrv", cluster.namesrv)
    got = reader.option("topicPattern", pattern).load().collect()
    assert sorted(bytes(r.body) for r in got) == [b"timer-0", b"timer-1", b"timer-2"]
    assert {r.topic for r in got} == {topic}
    assert all("TIMER_OUT_MS" in r.properties and "REAL_TOPIC" not in r.properties for r in got)
    broker = got[0].broker
    from_path = (spark.read.format("rocketq").option("path", str(cluster.data_dir))
                 .option("topicPattern", pattern).option("brokerName", broker).load().collect())
    assert {r.topic for r in from_path} == {topic} and len(from_path) == 3
