"""Streaming behaviours against the real cluster: queues that appear while a query runs, the
consumerGroup offset commit, and the micro-batch id the streaming sink stamps on messages."""

from __future__ import annotations

import asyncio
import time
from collections import Counter

import pytest
from tests.harness import unique_name
from tests.spark.conftest import make_topic, seed
from tests.wire import create_topic, get_route, invoke

from rocketq.codec.codes import RequestCode, ResponseCode
from rocketq.remoting import RemotingClient

pytestmark = pytest.mark.timeout(180)


def _widen(cluster, topic: str, queues: int) -> None:
    """Raise a topic's queue count at the broker and wait until the name server routes it."""
    async def go() -> None:
        async with RemotingClient() as client:
            r = await create_topic(client, cluster.broker, topic, read=queues, write=queues)
            assert r.code == 0, r
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                route = await get_route(client, cluster.namesrv, topic)
                if route is not None and route.queue_datas[0].read_queue_nums == queues:
                    return
                await asyncio.sleep(0.2)
            raise AssertionError(f"{topic} not routed with {queues} queues")
    asyncio.run(go())


def _group_offsets(cluster, group: str, topic: str, queues: int) -> list[int]:
    async def go() -> list[int]:
        out = []
        async with RemotingClient() as client:
            for q in range(queues):
                r = await invoke(client, cluster.broker, RequestCode.QUERY_CONSUMER_OFFSET,
                                 {"consumerGroup": group, "topic": topic, "queueId": q})
                out.append(int(r.ext_fields["offset"]) if r.code == ResponseCode.SUCCESS else -1)
        return out
    return asyncio.run(go())


def _wait_rows(spark, q, table: str, expected: int, timeout: float = 60.0) -> list:
    deadline = time.monotonic() + timeout
    rows: list = []
    while time.monotonic() < deadline:
        q.processAllAvailable()
        rows = spark.sql(f"select * from {table}").collect()
        if len(rows) >= expected:
            return rows
        time.sleep(0.3)
    return rows


def test_new_queues_and_topics_are_read_mid_stream_and_group_offsets_follow(spark, cluster):
    prefix = unique_name("SparkNQ")
    first = make_topic(cluster, queues=2, prefix=prefix)
    sent = seed(cluster, first, [{"body": f"a{i}".encode()} for i in range(40)], queues=2, batch=10)
    group = unique_name("spark-group")
    table = unique_name("nq").lower()
    q = (spark.readStream.format("rocketq").option("namesrv", cluster.namesrv)
         .option("topicPattern", f"{prefix}_.*").option("startingOffsets", "earliest")
         .option("consumerGroup", group).load()
         .selectExpr("topic", "queue_id", "queue_offset", "cast(body as string) as b")
         .writeStream.format("memory").queryName(table).trigger(processingTime="300 milliseconds").start())
    try:
        assert len(_wait_rows(spark, q, table, len(sent))) == len(sent)
        # While the query runs: the topic gains two queues and a second matching topic appears.
        _widen(cluster, first, 4)
        second = make_topic(cluster, queues=2, prefix=prefix)
        sent += seed(cluster, first, [{"body": f"b{i}".encode()} for i in range(30)], queues=4, batch=5)
        sent += seed(cluster, second, [{"body": f"c{i}".encode()} for i in range(20)], queues=2, batch=5)
        assert {m["queue_id"] for m in sent if m["topic"] == first} == {0, 1, 2, 3}
        rows = _wait_rows(spark, q, table, len(sent))
        got = Counter((r.topic, r.queue_id, r.queue_offset) for r in rows)
        assert got == Counter((m["topic"], m["queue_id"], m["queue_offset"]) for m in sent)
        assert sorted(r.b for r in rows) == sorted(m["body"].decode() for m in sent)
        # consumerGroup: the brokers hold the end of the last finished micro-batch, also once
        # the query has gone idle (no later batch to carry the commit).
        ends: Counter[int] = Counter()
        for m in sent:
            if m["topic"] == first:
                ends[m["queue_id"]] = max(ends[m["queue_id"]], m["queue_offset"] + 1)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            committed = _group_offsets(cluster, group, first, 4)
            if all(committed[qid] >= ends[qid] for qid in range(4)):
                break
            time.sleep(0.3)
        assert all(committed[qid] >= ends[qid] for qid in range(4)), (committed, ends)
    finally:
        q.stop()


def test_stream_sink_stamps_query_and_batch_ids(spark, cluster, tmp_path):
    source = make_topic(cluster, queues=2)
    out = make_topic(cluster, queues=2)
    seed(cluster, source, [{"body": f"s{i}".encode()} for i in range(200)], queues=2, batch=50)
    q = (spark.readStream.format("rocketq").option("namesrv", cluster.namesrv).option("topic", source)
         .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", "120").load()
         .select("body", "keys")
         .writeStream.format("rocketq").option("namesrv", cluster.namesrv).option("topic", out)
         .option("checkpointLocation", str(tmp_path / "chk")).trigger(availableNow=True).start())
    q.awaitTermination(120)
    assert q.exception() is None, q.exception()
    per_batch = {p["batchId"]: p["numInputRows"] for p in q.recentProgress if p["numInputRows"]}
    assert len(per_batch) == 2 and sum(per_batch.values()) == 200
    back = (spark.read.format("rocketq").option("namesrv", cluster.namesrv).option("topic", out).load()
            .selectExpr("properties['SPARK_QUERY_ID'] as qid", "properties['SPARK_BATCH_ID'] as bid")
            .collect())
    assert {r.qid for r in back} == {q.id}
    assert Counter(int(r.bid) for r in back) == Counter(per_batch)

