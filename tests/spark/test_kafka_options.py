"""The options a Kafka-connector user expects, against the real cluster: per-queue timestamps
(startingOffsetsByTimestamp / endingOffsetsByTimestamp and the no-match strategy),
minOffsetsPerTrigger with maxTriggerDelay, and groupIdPrefix."""

from __future__ import annotations

import asyncio
import json
import time

import pytest
from tests.spark.conftest import make_topic, seed
from tests.wire import invoke

from rocketq.codec.codes import RequestCode
from rocketq.remoting import RemotingClient
from rocketq.spark import queue_lag

pytestmark = pytest.mark.timeout(180)


def _bodies(n: int, tag: str) -> list[dict[str, object]]:
    return [{"body": f"{tag}{i}".encode()} for i in range(n)]


def _reader(spark, cluster, topic):
    return spark.read.format("rocketq").option("namesrv", cluster.namesrv).option("topic", topic)


def test_offsets_by_timestamp_per_queue(spark, cluster):
    topic = make_topic(cluster, queues=2)
    early = seed(cluster, topic, _bodies(40, "e"), queues=2, batch=20)
    time.sleep(0.05)
    cut = int(time.time() * 1000)
    time.sleep(0.05)
    late = seed(cluster, topic, _bodies(20, "l"), queues=2, batch=10)
    broker = _reader(spark, cluster, topic).load().select("broker").first().broker

    def read(**options: str) -> list[tuple[int, str]]:
        df = _reader(spark, cluster, topic)
        for k, v in options.items():
            df = df.option(k, v)
        return sorted((r.queue_id, bytes(r.body).decode()) for r in df.load().collect())

    def of(rows, q: int) -> list[tuple[int, str]]:
        return sorted((q, bytes(m["body"]).decode()) for m in rows if m["queue_id"] == q)

    # Queue 0 starts at the cut; queue 1, not named, starts at startingOffsets (earliest).
    got = read(startingOffsetsByTimestamp=json.dumps({topic: {broker: {"0": cut}}}))
    assert got == sorted(of(late, 0) + of(early, 1) + of(late, 1))
    # Queue 1 ends before the cut; queue 0 reads to its end.
    got = read(endingOffsetsByTimestamp=json.dumps({topic: {broker: {"1": cut}}}))
    assert got == sorted(of(early, 0) + of(late, 0) + of(early, 1))

    future = json.dumps({topic: {broker: {"0": int(time.time() * 1000) + 3_600_000}}})
    with pytest.raises(Exception, match="startingOffsetsByTimestampStrategy=latest"):
        read(startingOffsetsByTimestamp=future)
    got = read(startingOffsetsByTimestamp=future, startingOffsetsByTimestampStrategy="latest")
    assert got == sorted(of(early, 1) + of(late, 1))
    with pytest.raises(Exception, match="is not a readable queue"):
        unknown = json.dumps({topic: {broker: {"7": 1}}})
        _reader(spark, cluster, topic).option("startingOffsetsByTimestamp", unknown).load()


def _wait_count(spark, table: str, expected: int, timeout: float = 90.0) -> int:
    deadline = time.monotonic() + timeout
    n = -1
    while time.monotonic() < deadline:
        n = spark.sql(f"select count(*) from {table}").first()[0]
        if n >= expected:
            return int(n)
        time.sleep(0.3)
    return int(n)


def test_min_offsets_per_trigger_waits_for_enough_messages(spark, cluster):
    topic = make_topic(cluster, queues=2)
    seed(cluster, topic, _bodies(6, "a"), queues=2, batch=3)
    held, quick = f"held_{topic}", f"quick_{topic}"

    def start(table: str, delay: str):
        return (spark.readStream.format("rocketq").option("namesrv", cluster.namesrv).option("topic", topic)
                .option("startingOffsets", "earliest").option("minOffsetsPerTrigger", "30")
                .option("maxTriggerDelay", delay).load()
                .writeStream.format("memory").queryName(table).trigger(processingTime="300 milliseconds")
                .start())

    q_held, q_quick = start(held, "1h"), start(quick, "1s")
    try:
        # Kafka admits the first trigger whatever its size.
        assert _wait_count(spark, held, 6) == 6 and _wait_count(spark, quick, 6) == 6
        seed(cluster, topic, _bodies(10, "b"), queues=2, batch=5)
        # Under the minimum: only maxTriggerDelay lets the short-delay query read them.
        assert _wait_count(spark, quick, 16) == 16
        assert spark.sql(f"select count(*) from {held}").first()[0] == 6
        seed(cluster, topic, _bodies(20, "c"), queues=2, batch=10)
        assert _wait_count(spark, held, 36) == 36  # 30 new ones: the minimum is met
    finally:
        q_held.stop()
        q_quick.stop()
    assert q_held.exception() is None and q_quick.exception() is None


def test_group_id_prefix_names_the_pull_group(spark, cluster):
    topic = make_topic(cluster, queues=1)
    seed(cluster, topic, _bodies(5, "g"), queues=1)
    prefix = f"pfx{topic[-8:]}"
    assert _reader(spark, cluster, topic).option("groupIdPrefix", prefix).load().count() == 5

    async def groups() -> bytes:
        async with RemotingClient() as client:
            r = await invoke(client, cluster.broker, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
            assert r.code == 0, r
            return r.body_bytes()
    assert f'"{prefix}-'.encode() in asyncio.run(groups())


def test_progress_gives_per_queue_lag(spark, cluster, tmp_path):
    topic = make_topic(cluster, queues=2)
    seed(cluster, topic, _bodies(30, "x"), queues=2, batch=15)
    q = (spark.readStream.format("rocketq").option("namesrv", cluster.namesrv).option("topic", topic)
         .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", "10").load()
         .writeStream.format("noop").option("checkpointLocation", str(tmp_path / "chk"))
         .trigger(availableNow=True).start())
    q.awaitTermination(120)
    assert q.exception() is None, q.exception()
    batches = [p for p in q.recentProgress if p["numInputRows"]]
    lags = [queue_lag(p) for p in batches]
    assert [sum(lag.values()) for lag in lags] == [20, 10, 0], [p["sources"] for p in batches]
    assert len(lags[0]) == 2 and all(k.startswith(f"{topic}/") for k in lags[0])
