"""Batch reads from a real broker and from its store directory equal what was sent."""

from __future__ import annotations

import json
import re
import time

import pytest
from tests.spark.conftest import make_topic, seed

pytestmark = pytest.mark.timeout(120)


def messages(n: int) -> list[dict[str, object]]:
    return [
        {"body": f"body-{i}".encode() * (1 + i % 7), "tags": "TagA" if i % 3 else "TagB",
         "keys": f"key{i} other{i}", "props": {"color": ["red", "green"][i % 2], "n": str(i)}}
        for i in range(n)
    ]


def test_batch_read_equals_sent(spark, cluster):
    topic = make_topic(cluster)
    sent = seed(cluster, topic, messages(1000))
    df = spark.read.format("rocketq").option("namesrv", cluster.namesrv).option("topic", topic).load()
    rows = df.collect()
    assert len(rows) == len(sent)
    by_key = {(r.queue_id, r.queue_offset): r for r in rows}
    for m in sent:
        r = by_key[(m["queue_id"], m["queue_offset"])]
        assert r.topic == topic
        assert bytes(r.body) == m["body"]
        assert r.tags == m["tags"]
        assert r.keys == m["keys"]
        assert r.msg_id == m["msg_id"]
        assert r.properties["color"] == m["props"]["color"]
        assert r.properties["n"] == m["props"]["n"]
        assert r.reconsume_times == 0
        assert r.born_host.startswith("127.0.0.1:")
        assert r.store_timestamp is not None and r.born_timestamp is not None


def _rows(df):
    return sorted((r.asDict() for r in df.collect()), key=lambda r: (r["queue_id"], r["queue_offset"]))


@pytest.fixture(scope="module")
def seeded(cluster):
    topic = make_topic(cluster)
    return topic, seed(cluster, topic, messages(600))


def test_store_reader_equals_broker_read(spark, cluster, seeded):
    topic, sent = seeded
    broker_df = spark.read.format("rocketq").option("namesrv", cluster.namesrv).option("topic", topic).load()
    from_broker = _rows(broker_df)
    broker_name = from_broker[0]["broker"]
    path_df = (spark.read.format("rocketq").option("path", str(cluster.data_dir)).option("topic", topic)
               .option("brokerName", broker_name).load())
    assert path_df.columns == broker_df.columns
    from_store = _rows(path_df)
    assert len(from_store) == len(from_broker) == len(sent)
    for a, b in zip(from_broker, from_store, strict=True):
        for column in broker_df.columns:
            assert a[column] == b[column], column


def test_pull_range_in_small_prefetched_chunks_covers_every_offset(cluster, seeded):
    """Many chunks, each fetched while the previous one is handed over: none lost or repeated."""
    import numpy as np

    from rocketq.spark._broker import BrokerSession
    from rocketq.spark._decode import as_u8, locate, record_start_array

    topic, sent = seeded
    with BrokerSession(cluster.namesrv) as session:
        for ref in session.queues(topic):
            expected = sorted(m["queue_offset"] for m in sent if m["queue_id"] == ref.queue_id)
            if not expected:
                continue
            got: list[int] = []
            chunks = 0
            for chunk in session.pull_range(ref, 0, len(expected), chunk_bytes=2048, window=3, batch=7):
                buf = b"".join(chunk.bodies)
                got.extend(locate(as_u8(buf), record_start_array(as_u8(buf))).queue_offset.tolist())
                chunks += 1
            assert got == expected and chunks > 5
            assert np.all(np.diff(got) == 1)


def test_tag_filter_offsets_and_partitions(spark, cluster, seeded):
    topic, sent = seeded

    def base():  # a DataFrameReader is mutable: a fresh one per read
        return spark.read.format("rocketq").option("namesrv", cluster.namesrv).option("topic", topic)

    tagged = base().option("subExpression", "TagB").load()
    assert sorted(r.queue_offset for r in tagged.collect() if r.queue_id == 0) == sorted(
        m["queue_offset"] for m in sent if m["tags"] == "TagB" and m["queue_id"] == 0)
    assert tagged.count() == sum(1 for m in sent if m["tags"] == "TagB")
    spec = json.dumps({topic: {_broker(spark, cluster, topic): {"0": 10, "1": -2}}})
    ranged = base().option("startingOffsets", spec).option("endingOffsets", spec.replace("10", "20")
                                                         .replace("-2", "-1")).load()
    q0 = sorted(r.queue_offset for r in ranged.collect() if r.queue_id == 0)
    assert q0 == list(range(10, 20))
    split = base().option("minPartitions", "9").load()
    assert split.rdd.getNumPartitions() >= 9
    assert split.count() == len(sent)


def test_timestamps_select_by_store_time(spark, cluster):
    topic = make_topic(cluster, queues=2)
    early = seed(cluster, topic, messages(100), queues=2, batch=50)
    time.sleep(0.05)
    cut = int(time.time() * 1000)
    time.sleep(0.05)
    late = seed(cluster, topic, messages(60), queues=2, batch=30)
    df = (spark.read.format("rocketq").option("namesrv", cluster.namesrv).option("topic", topic)
          .option("startingTimestamp", str(cut)).load())
    assert df.count() == len(late)
    df = (spark.read.format("rocketq").option("namesrv", cluster.namesrv).option("topic", topic)
          .option("endingTimestamp", str(cut)).load())
    assert df.count() == len(early)


def test_body_as_string_keeps_undecodable_bytes(spark, cluster):
    topic = make_topic(cluster, queues=1)
    seed(cluster, topic, [{"body": b"fine"}, {"body": b"\xff\xfe bad"}], queues=1)
    df = (spark.read.format("rocketq").schema("queue_offset bigint, body string, _corrupt_body binary")
          .option("namesrv", cluster.namesrv).option("topic", topic).load())
    rows = sorted(df.collect(), key=lambda r: r.queue_offset)
    assert (rows[0].body, rows[0]._corrupt_body) == ("fine", None)
    assert rows[1].body is None and bytes(rows[1]._corrupt_body) == b"\xff\xfe bad"


def _broker(spark, cluster, topic):
    return (spark.read.format("rocketq").option("namesrv", cluster.namesrv).option("topic", topic).load()
            .select("broker").first().broker)


@pytest.mark.parametrize(("options", "needle"), [
    ({"topic": "T", "colour": "red"}, "'colour'"),
    ({"topic": "T", "startingOffsets": "{not json"}, "startingOffsets"),
    ({"topic": "T", "startingOffsets": '{"T": {"b": {"x": 1}}}'}, "startingOffsets"),
    ({"topic": "NoSuchTopic_xyz"}, "NoSuchTopic_xyz"),
    ({}, "topic"),
])
def test_bad_options_fail_at_load(spark, cluster, options, needle):
    reader = spark.read.format("rocketq").option("namesrv", cluster.namesrv)
    for k, v in options.items():
        reader = reader.option(k, v)
    with pytest.raises(Exception, match=re.escape(needle)):
        reader.load()


def test_unreachable_name_server_fails_fast(spark):
    started = time.monotonic()
    with pytest.raises(Exception, match="namesrv"):
        spark.read.format("rocketq").option("namesrv", "127.0.0.1:1").option("topic", "T").option(
            "timeoutMs", "1000").load()
    assert time.monotonic() - started < 30
