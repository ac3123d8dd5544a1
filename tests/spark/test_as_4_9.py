"""The connector against a broker as strict as Apache RocketMQ 4.9.8 (issue 17 item 7): it sends
nothing a 4.9 broker does not know. One cluster in compatibility mode 4.9 for the module; the sink
(SEND_BATCH_MESSAGE, queue_id), a batch read by time (SEARCH_OFFSET_BY_TIMESTAMP) and a stream
that commits a consumer group (UPDATE_CONSUMER_OFFSET), each on the paths the other modules test
against the broker as it is."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest
from tests.harness import AS_4_9, SMALL_STORE, Cluster, start_cluster
from tests.spark.conftest import make_topic
from tests.wire import invoke

from rocketq.codec.codes import RequestCode, ResponseCode
from rocketq.remoting import RemotingClient

pytestmark = [pytest.mark.timeout(240), pytest.mark.slow]  # one Spark run more: `make test-all`


@pytest.fixture(scope="module")
def strict(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = start_cluster(tmp_path_factory.mktemp("spark-4.9"), *SMALL_STORE, *AS_4_9)
    try:
        yield c
    finally:
        c.stop()


def test_write_then_read_by_time_and_stream_with_a_group(spark, strict, tmp_path):
    topic = make_topic(strict, queues=2)
    ns = strict.namesrv
    rows = [(f"a{i}".encode(), f"k{i}", i % 2) for i in range(100)]
    (spark.createDataFrame(rows, "body binary, keys string, queue_id int")
     .write.format("rocketq").option("namesrv", ns).option("topic", topic).mode("append").save())
    time.sleep(0.05)  # store timestamps are in ms: the second write is strictly later
    since = int(time.time() * 1000)
    time.sleep(0.05)
    later = [(f"b{i}".encode(), f"k{i}", i % 2) for i in range(50)]
    (spark.createDataFrame(later, "body binary, keys string, queue_id int")
     .write.format("rocketq").option("namesrv", ns).option("topic", topic).mode("append").save())

    everything = spark.read.format("rocketq").option("namesrv", ns).option("topic", topic).load().collect()
    assert {(bytes(r.body), r.queue_id) for r in everything} == {(b, q) for b, _, q in rows + later}
    recent = (spark.read.format("rocketq").option("namesrv", ns).option("topic", topic)
              .option("startingTimestamp", str(since)).load().collect())
    assert sorted(bytes(r.body) for r in recent) == sorted(b for b, _, _ in later)

    group = f"spark-4-9-{int(time.time())}"
    q = (spark.readStream.format("rocketq").option("namesrv", ns).option("topic", topic)
         .option("startingOffsets", "earliest").option("consumerGroup", group).load()
         .writeStream.format("noop").option("checkpointLocation", str(tmp_path / "chk"))
         .trigger(availableNow=True).start())
    q.awaitTermination(120)
    assert q.exception() is None, q.exception()
    assert sum(p["numInputRows"] for p in q.recentProgress) == len(rows) + len(later)
    # the group's offsets reached the broker (UPDATE_CONSUMER_OFFSET): 75 messages per queue
    assert asyncio.run(_group_offsets(strict, group, topic)) == [75, 75]


async def _group_offsets(cluster: Cluster, group: str, topic: str) -> list[int]:
    async with RemotingClient() as client:
        out = []
        for qid in range(2):
            ext = {"consumerGroup": group, "topic": topic, "queueId": str(qid)}
            r = await invoke(client, cluster.broker, RequestCode.QUERY_CONSUMER_OFFSET, ext)
            assert r.code == ResponseCode.SUCCESS, r.remark
            out.append(int(r.ext_fields["offset"]))  # type: ignore[index]
        return out
