"""The sink's queue_id column (issue 15): each row goes to the queue it names; a bad queue id or
column type fails with one line naming it."""

from __future__ import annotations

import time

import pyarrow as pa
import pytest
from tests.spark.conftest import make_topic

from rocketq.spark._broker import QueueRef
from rocketq.spark.errors import SparkOptionError
from rocketq.spark.writer import chosen_queues

pytestmark = pytest.mark.timeout(180)

ONE = [QueueRef("T", "broker-a", q) for q in range(4)]
TWO = [*ONE, *(QueueRef("T", "broker-b", q) for q in range(2))]


def test_chosen_queues_by_id_and_broker() -> None:
    ids = pa.array([3, None, 0], pa.int32())
    assert chosen_queues("T", ONE, ids, None).tolist() == [3, -1, 0]
    both = chosen_queues("T", TWO, pa.array([1, 1]), pa.array(["broker-b", "broker-a"]))
    assert both.tolist() == [5, 1]


def test_chosen_queues_refuses_what_names_no_queue() -> None:
    with pytest.raises(SparkOptionError, match=r"no writable queue 4 on broker 'broker-a'.*\[0, 1, 2, 3\]"):
        chosen_queues("T", ONE, pa.array([4]), None)
    with pytest.raises(SparkOptionError, match="on brokers broker-a, broker-b: give the row's broker"):
        chosen_queues("T", TWO, pa.array([0]), None)
    with pytest.raises(SparkOptionError, match="no writable queue 0 on broker 'broker-z'"):
        chosen_queues("T", TWO, pa.array([0]), pa.array(["broker-z"]))


def test_sink_sends_each_row_to_its_queue_id(spark, cluster):
    topic = make_topic(cluster, queues=4)
    rows = [(f"q{i}".encode(), i % 3 if i % 5 else None) for i in range(200)]
    df = spark.createDataFrame(rows, "body binary, queue_id int")
    df.write.format("rocketq").option("namesrv", cluster.namesrv).option("topic", topic).mode("append").save()
    back = {bytes(r.body): r.queue_id
            for r in spark.read.format("rocketq").option("namesrv", cluster.namesrv).option("topic", topic)
            .load().collect()}
    assert len(back) == len(rows)
    assert all(back[body] == qid for body, qid in rows if qid is not None)
    # a read DataFrame written back keeps each message's broker and queue
    copy = make_topic(cluster, queues=4)
    (spark.read.format("rocketq").option("namesrv", cluster.namesrv).option("topic", topic).load()
     .select("body", "broker", "queue_id")
     .write.format("rocketq").option("namesrv", cluster.namesrv).option("topic", copy).mode("append").save())
    again = {bytes(r.body): r.queue_id
             for r in spark.read.format("rocketq").option("namesrv", cluster.namesrv).option("topic", copy)
             .load().collect()}
    assert again == back


def test_sink_refuses_a_bad_queue_id_in_one_line(spark, cluster):
    topic = make_topic(cluster, queues=2)

    def write(df) -> None:
        (df.write.format("rocketq").option("namesrv", cluster.namesrv).option("topic", topic)
         .mode("append").save())

    bad = spark.createDataFrame([(b"x", 7)], "body binary, queue_id int")
    with pytest.raises(Exception, match="no writable queue 7"):
        write(bad)
    text = spark.createDataFrame([(b"x", "1")], "body binary, queue_id string")
    with pytest.raises(Exception, match="the queue_id column must be an integer"):
        write(text)


def test_sink_delays_rows_with_a_delay_level(spark, cluster):
    """A batch cannot carry a delay level: such rows go one by one, through SCHEDULE_TOPIC_XXXX."""
    topic = make_topic(cluster, queues=2)
    rows = [(f"d{i}".encode(), 1 if i % 4 == 0 else None, i % 2) for i in range(40)]
    (spark.createDataFrame(rows, "body binary, delay_level int, queue_id int")
     .write.format("rocketq").option("namesrv", cluster.namesrv).option("topic", topic).mode("append").save())
    deadline = time.monotonic() + 60
    while True:
        back = {bytes(r.body): r for r in spark.read.format("rocketq").option("namesrv", cluster.namesrv)
                .option("topic", topic).load().collect()}
        if len(back) == len(rows) or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert set(back) == {b for b, _, _ in rows}
    for body, level, qid in rows:
        r = back[body]
        assert r.queue_id == qid
        waited = (r.store_timestamp - r.born_timestamp).total_seconds()
        if level:  # level 1 is 1 s: re-put by the schedule service, which keeps REAL_TOPIC
            assert waited >= 0.9 and r.properties.get("REAL_TOPIC") == topic, (body, waited)
        else:
            assert "REAL_TOPIC" not in r.properties
    bad = spark.createDataFrame([(b"x", -1)], "body binary, delay_level int")
    with pytest.raises(Exception, match="a delay level is >= 1"):
        (bad.write.format("rocketq").option("namesrv", cluster.namesrv).option("topic", topic)
         .mode("append").save())
